"""The ledger the CLI writes survives Ctrl-C: twice under ``uv run``, and in ``mcp call``."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO

import cli_prewarmed as prewarmed
import pytest

from prism.core.ledger import read_ledger

ReadUntil = Callable[[IO[str], str, float], list[str]]
CliRunner = Callable[..., subprocess.CompletedProcess[str]]
SLOW_SERVER = Path(__file__).with_name("slow_mcp_server.py")


def _session(tmp_path: Path, ledger: str) -> None:
    config = f"""
[workspace]
coding_tools = false
[mcp.servers.docs]
{prewarmed.toml_command("-m", "prism.cli.demo_server", "--step-seconds", "0.2")}[ledger]
path = "{ledger}"
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


@pytest.mark.parametrize("ledger", ["ledger.jsonl", "ledger.db"])
def test_two_sigints_under_uv_run_keep_the_ledger(
    tmp_path: Path, ledger: str, cli_env: dict[str, str], read_until: ReadUntil
) -> None:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")
    _session(tmp_path, ledger)
    argv = [uv, "run", "--no-project", "--", sys.executable, "-m", "prism.cli", "run"]
    with subprocess.Popen(
        [*argv, "session.json"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=cli_env,
        start_new_session=True,  # its own process group, as a terminal's Ctrl-C sees it
    ) as proc:
        try:
            assert proc.stdout is not None
            read_until(proc.stdout, "progress", 60)
            # Ctrl-C twice in a row: the whole group (uv and prism) gets both.
            os.killpg(proc.pid, signal.SIGINT)
            os.killpg(proc.pid, signal.SIGINT)
            proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert proc.returncode != 0
    contents = read_ledger(tmp_path / ledger)  # strict: every whole line parses
    records = {r.call_id: r for r in contents.records}
    assert records["quick"].status == "ok"
    # Cut short (the server got the Ctrl-C too), and recorded.
    assert records["slow"].status != "ok"
    assert len(contents.runs) == 1


def test_mcp_call_ledger_keeps_the_call_after_sigint(
    tmp_path: Path, cli_env: dict[str, str], read_until: ReadUntil
) -> None:
    path = tmp_path / "call.jsonl"
    fifo = tmp_path / "called.fifo"
    os.mkfifo(fifo)
    # Opened before the server can write, without waiting for a writer.
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    command, args = prewarmed.command(SLOW_SERVER, str(fifo))
    server = shlex.join([command, *args])
    argv = [sys.executable, "-m", "prism.cli", "mcp", "call", "--stdio", server, "hang"]
    with (
        open(reader, encoding="utf-8") as called,
        subprocess.Popen(
            [*argv, "--ledger", str(path)],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=cli_env,
        ) as proc,
    ):
        try:
            read_until(called, "hang called", 60)
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 130
    contents = read_ledger(path)
    (record,) = contents.records
    # Cancelled, or an error when the bridge's shutdown reaches the call first:
    # either way it was cut short and recorded.
    assert record.call_id == "cli-1"
    assert record.status in {"cancelled", "error"}
    (run,) = contents.runs
    if record.status == "cancelled":
        assert run.outcome == "aborted"


def test_run_writes_an_sqlite_ledger_that_show_reads(tmp_path: Path, run_cli: CliRunner) -> None:
    # In this process (prism.cli.main): the ledger file is what is tested, not a start.
    _session(tmp_path, "ledger.db")
    session = [{"tool_calls": [{"id": "q", "name": "mcp:docs:get_page", "arguments": {}}]}]
    (tmp_path / "session.json").write_text(json.dumps(session), encoding="utf-8")
    proc = run_cli("run", "session.json", "--json")
    report = json.loads(proc.stdout)
    assert report["ledger_errors"] == 0
    shown = run_cli("ledger", "show", "ledger.db", "--json")
    data = json.loads(shown.stdout)
    assert [r["call_id"] for r in data["records"]] == ["q"]
    assert data["runs"][0]["run_id"] == report["run_id"]
    assert data["runs"][0]["outcome"] == "finished"


def _limit_file_size() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (600, 600))


def test_a_full_disk_warns_and_the_run_still_finishes(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    _session(tmp_path, "ledger.jsonl")
    session = [
        {
            "tool_calls": [
                {"id": f"q{i}", "name": "mcp:docs:get_page", "arguments": {"slug": "ledger"}}
                for i in range(4)
            ]
        }
    ]
    (tmp_path / "session.json").write_text(json.dumps(session), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "prism.cli", "run", "session.json", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=cli_env,
        timeout=60,
        preexec_fn=_limit_file_size,  # the file "disk" holds 600 bytes
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [row["status"] for row in report["calls"]] == ["ok"] * 4
    assert report["ledger_errors"] > 0
    assert "the ledger could not be written" in proc.stderr
    assert "File too large" in proc.stderr
    contents = read_ledger(tmp_path / "ledger.jsonl")  # the cut line is the torn last one
    assert len(contents.records) < 4
