"""Ctrl-C during ``prism run``: the run stops promptly, exit 130, the ledger is still written."""

import json
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO

import cli_prewarmed as prewarmed
import pytest

from prism.core.ledger import RunLedger, read_ledger

ReadUntil = Callable[[IO[str], str, float], list[str]]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupting_a_run_stops_it_and_still_writes_the_ledger(
    tmp_path: Path, cli_env: dict[str, str], read_until: ReadUntil, signum: signal.Signals
) -> None:
    config = f"""
[workspace]
coding_tools = false
[mcp.servers.docs]
{prewarmed.toml_command("-m", "prism.cli.demo_server", "--step-seconds", "1")}[ledger]
path = "ledger.jsonl"
"""
    (tmp_path / "prism.toml").write_text(config, encoding="utf-8")
    session = [
        {
            "tool_calls": [
                {"id": "quick", "name": "mcp:docs:get_page", "arguments": {"slug": "ledger"}},
                {"id": "slow", "name": "mcp:docs:build_index", "arguments": {"pages": 50}},
            ]
        }
    ]
    (tmp_path / "session.json").write_text(json.dumps(session), encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "prism.cli", "run", "session.json"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=cli_env,
    )
    try:
        assert proc.stdout is not None
        read_until(proc.stdout, "progress", 60)
        proc.send_signal(signum)
        # The slow call has 49 steps of 1 s left: only the interrupt can end the run
        # before this guard expires.
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    records = {
        r.call_id: r
        for r in RunLedger.from_jsonl((tmp_path / "ledger.jsonl").read_text("utf-8")).records
    }
    assert records["quick"].status == "ok"
    # Cancelled, or an error when the server's shutdown reaches the call first:
    # either way it was cut short and recorded, never reported as done.
    assert records["slow"].status in {"cancelled", "error"}
    # The end marker is written (SIGTERM used to leave none) and says the run was
    # cut short: a signal raised in whichever task ran (the MCP session's reader,
    # say) used to end the run as if finished, then interrupt the process.
    [run] = read_ledger(tmp_path / "ledger.jsonl").runs
    assert run.outcome == "aborted", (tmp_path / "ledger.jsonl").read_text() + stderr
