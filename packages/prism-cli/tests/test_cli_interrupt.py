"""Ctrl-C during ``prism run``: the run stops promptly, exit 130, the ledger is still written."""

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

from prism.core.ledger import RunLedger

# Variables that make rich treat a pipe as a terminal (CI sets some of them); the
# tests read the plain, one-line-per-event output.
_TERMINAL_VARS = {"FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "COLUMNS", "LINES"}


def _plain_environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _TERMINAL_VARS}


def _wait_for_line(proc: subprocess.Popen[str], needle: str, timeout: float) -> list[str]:
    assert proc.stdout is not None
    seen: list[str] = []
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not selector.select(timeout=max(0.0, deadline - time.monotonic())):
            continue
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if needle in line:
            return seen
    raise AssertionError(f"never saw {needle!r}; output so far: {''.join(seen)}")


def test_interrupting_a_run_stops_it_and_still_writes_the_ledger(tmp_path: Path) -> None:
    config = f"""
[workspace]
coding_tools = false
[mcp.servers.docs]
command = {json.dumps(sys.executable)}
args = ["-m", "prism.cli.demo_server", "--step-seconds", "1"]
[ledger]
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
        env={**_plain_environ(), "NO_COLOR": "1"},
    )
    try:
        _wait_for_line(proc, "progress", timeout=60)
        proc.send_signal(signal.SIGINT)
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
