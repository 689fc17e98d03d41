"""``[ledger]`` in prism.toml: fsync and rotation of the ledger ``prism run`` writes."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import cli_prewarmed as prewarmed
import pytest

from prism.cli import CliConfigurationError, parse_config
from prism.core.ledger import read_ledger

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable
    from pathlib import Path

    CliRunner = Callable[..., subprocess.CompletedProcess[str]]


def test_ledger_fsync_and_max_bytes_are_read() -> None:
    config = parse_config({"ledger": {"path": "l.jsonl", "fsync": "always", "max_bytes": 4096}})
    assert (config.ledger_fsync, config.ledger_max_bytes) == ("always", 4096)


def test_the_defaults_never_fsync_and_never_rotate() -> None:
    config = parse_config({})
    assert (config.ledger_fsync, config.ledger_max_bytes) == ("never", None)


@pytest.mark.parametrize(
    ("ledger", "key"),
    [({"fsync": "sometimes"}, "ledger.fsync"), ({"max_bytes": -1}, "ledger.max_bytes")],
)
def test_bad_ledger_options_name_their_key(ledger: dict[str, object], key: str) -> None:
    with pytest.raises(CliConfigurationError, match=key):
        parse_config({"ledger": ledger})


def test_run_rotates_the_ledger_at_max_bytes(run_cli: CliRunner, tmp_path: Path) -> None:
    config = f"""
[workspace]
coding_tools = false
[mcp.servers.docs]
{prewarmed.toml_command("-m", "prism.cli.demo_server")}[ledger]
path = "ledger.jsonl"
max_bytes = 1500
fsync = "run"
"""
    (tmp_path / "prism.toml").write_text(config, encoding="utf-8")
    calls = [
        {"id": f"q{i}", "name": "mcp:docs:get_page", "arguments": {"slug": "ledger"}}
        for i in range(6)
    ]
    # one call a turn, so the calls end in order and the last two records are q4 and q5
    # (in one turn they run in parallel and end in any order)
    turns = [{"tool_calls": [call]} for call in calls]
    (tmp_path / "session.json").write_text(json.dumps(turns), encoding="utf-8")
    proc = run_cli("run", "session.json")
    assert proc.returncode == 0, proc.stderr
    files = [tmp_path / "ledger.jsonl", tmp_path / "ledger.jsonl.1"]
    assert all(f.stat().st_size <= 1500 for f in files)
    ids = {r.call_id for f in files for r in read_ledger(f).records}
    assert {"q4", "q5"} <= ids
    assert read_ledger(files[0]).runs[0].outcome == "finished"
