"""``prism serve`` stopped by SIGINT or SIGTERM: it exits (130) and the ledger says ``aborted``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import TYPE_CHECKING

import mcp_types as types
import pytest
import trio
from mcp import Client

from prism.core.ledger import read_ledger

if TYPE_CHECKING:
    from pathlib import Path

    from conftest import ServeConfig

_LEDGER = '\n[ledger]\npath = "ledger.jsonl"\n'


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONUTF8": "1"}


async def _start(tmp_path: Path, *args: str, stdin: int | None) -> trio.Process:
    argv = [sys.executable, "-m", "prism.cli", "serve", "--config", "prism.toml", *args]
    return await trio.lowlevel.open_process(
        argv, cwd=tmp_path, env=_env(), stdin=stdin, stderr=subprocess.PIPE
    )


async def _stderr_until(process: trio.Process, text: str) -> str:
    assert process.stderr is not None
    seen = ""
    with trio.fail_after(60):
        while text not in seen:
            chunk = await process.stderr.receive_some()
            assert chunk, seen
            seen += chunk.decode(errors="replace")
    return seen


async def _stopped(process: trio.Process) -> tuple[int, str]:
    """The exit status once the process ended, and what it wrote to stderr meanwhile."""
    assert process.stderr is not None
    rest = b""
    with trio.fail_after(60):  # bounds a hang only: the server stops at once
        while chunk := await process.stderr.receive_some():
            rest += chunk
        code = await process.wait()
    return code, rest.decode(errors="replace")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
async def test_an_http_server_stopped_by_a_signal_exits_and_writes_its_end_marker(
    tmp_path: Path, serve_config: ServeConfig, signum: signal.Signals
) -> None:
    serve_config(readme="served by prism", extra=_LEDGER)
    process = await _start(tmp_path, "--http", "127.0.0.1:0", stdin=subprocess.DEVNULL)
    try:
        seen = await _stderr_until(process, "/mcp\n")
        url = seen.split("MCP endpoint ", 1)[1].split()[0]
        # A client keeps its session open while the server is stopped.
        async with Client(url) as client:
            result = await client.call_tool("read", {"path": "readme.txt"})
            process.send_signal(signum)
            code, stderr = await _stopped(process)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert isinstance(result.content[0], types.TextContent)
    assert "served by prism" in result.content[0].text
    assert code == 130, stderr
    assert "Traceback" not in stderr
    contents = read_ledger(tmp_path / "ledger.jsonl")
    assert [(r.tool_name, r.status) for r in contents.records] == [("read", "ok")]
    [run] = contents.runs
    assert (run.label, run.outcome, run.calls) == ("prism serve", "aborted", 1)


async def test_a_stdio_server_stopped_by_sigterm_writes_its_end_marker(
    tmp_path: Path, serve_config: ServeConfig
) -> None:
    serve_config(readme="served by prism", extra=_LEDGER)
    process = await _start(tmp_path, stdin=subprocess.PIPE)
    try:
        # The ledger is open before the gateway starts its MCP servers.
        await _stderr_until(process, "MCP server 'docs' is up")
        process.send_signal(signal.SIGTERM)
        code, stderr = await _stopped(process)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        assert process.stdin is not None
        await process.stdin.aclose()
    assert code == 130, stderr
    [run] = read_ledger(tmp_path / "ledger.jsonl").runs
    assert (run.label, run.outcome) == ("prism serve", "aborted")
