"""``run_demo`` in this process (its MCP server is still a real subprocess).

test_cli_demo.py runs ``prism demo`` as a subprocess, where coverage cannot follow;
these run the same function here, in JSON and in console mode.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import sys
import tempfile
from typing import TYPE_CHECKING

import pytest
from rich.console import Console

from prism.cli import CliError
from prism.cli._demo import DemoOptions, _prism_command, run_demo, seed_workspace

if TYPE_CHECKING:
    from pathlib import Path

    from conftest import CliRunner


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200, no_color=True, force_terminal=False), out


def test_json_demo_in_process_over_a_workspace_seeded_before(
    tmp_path: Path, run_cli: CliRunner
) -> None:
    scratch = tmp_path / "demo"
    # A workspace seeded before: the outside secret and the symlink are there already.
    outside = seed_workspace(scratch / "workspace")
    outside.write_text("kept\n", encoding="utf-8")
    ledger = tmp_path / "ledger.jsonl"
    # Through the command, with the default sandbox (bubblewrap where it runs here).
    proc = run_cli(
        "demo",
        "--json",
        "--step-seconds",
        "0",
        "--workspace",
        str(scratch),
        "--ledger",
        str(ledger),
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["workspace"] == str(scratch.resolve() / "workspace")
    assert data["ledger"] == str(ledger)
    assert "+    return stock + count" in data["diff"]
    gates = {gate["gate"]: gate for gate in data["gates"]}
    assert gates["registry: unknown tool"]["calls"] == ["ghost-1"]
    assert gates["filter: tool hidden by the host"]["calls"] == ["hidden-1"]
    assert gates["permission policy"]["calls"] == ["denied-1"]
    assert gates["ledger redaction"]["calls"] == ["redact-1"]
    sandbox = next(gate for name, gate in gates.items() if name.startswith("sandbox ("))
    if sandbox["gate"] == "sandbox (bubblewrap)":
        assert sandbox["calls"] == ["sandbox-1"]
        assert sandbox["shown"].startswith("stopped: ")
    else:
        assert sandbox["calls"] == []
    answers = {a["asked_for"]: a["approved"] for a in data["approvals"]}
    assert answers["shell: rm src/inventory.py.orig"] is True
    assert outside.read_text(encoding="utf-8") == "kept\n"  # not overwritten
    assert "sk-demo-" not in ledger.read_text(encoding="utf-8")


def test_console_demo_in_process_in_a_fresh_temporary_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    prism = bin_dir / "prism"
    prism.write_text("#!/bin/sh\n", encoding="utf-8")
    prism.chmod(0o755)
    monkeypatch.delenv("UV", raising=False)
    monkeypatch.delenv("PRISM_DEMO_COMMAND", raising=False)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    console, shown = _console()
    code = run_demo(DemoOptions(step_seconds=0, live=False, sandbox="none"), console)
    text = shown.getvalue()
    assert code == 0, text
    scratch = next(tmp_path.glob("prism-demo-*"))
    ledger = scratch / "prism-demo-ledger.jsonl"
    assert "edit-1 changed src/inventory.py:" in text
    assert "every gate, and the call that met it:" in text
    assert "approval asked for shell: rm src/inventory.py.orig" in " ".join(text.split())
    assert "the ledger's line for redact-1" in text
    assert "final answer: Fixed restock" in text
    assert f"show it again with: prism ledger show {ledger}" in text
    assert ledger.exists()


def test_prism_command_falls_back_to_the_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("UV", raising=False)
    monkeypatch.delenv("PRISM_DEMO_COMMAND", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no prism here
    assert _prism_command() == f"{shlex.quote(sys.executable)} -m prism.cli"
    (tmp_path / "prism").write_text("#!/bin/sh\n")
    (tmp_path / "prism").chmod(0o755)
    assert _prism_command() == "prism"
    # Under `uv run` a prism on PATH is the run's own, gone from the user's shell after.
    monkeypatch.setenv("UV", "/usr/bin/uv")
    assert _prism_command() == f"{shlex.quote(sys.executable)} -m prism.cli"
    monkeypatch.setenv("PRISM_DEMO_COMMAND", "/path/to/prism/scripts/prism")
    assert _prism_command() == "/path/to/prism/scripts/prism"


def test_a_demo_folder_that_cannot_be_made_is_a_cli_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    console, _ = _console()
    with pytest.raises(CliError, match="cannot prepare the demo folder"):
        run_demo(DemoOptions(workspace=blocker / "demo"), console)
