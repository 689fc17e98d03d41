"""Timeouts and cancellation terminate the whole process tree, checked by PID.

The terminator itself (prism.core.terminate_process_tree) is tested in prism-core;
these tests prove the shell tool and run_process_tree use it on every path.
"""

from __future__ import annotations

import os
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio

from prism.coding.tools import (
    CodingToolsConfigurationError,
    LocalShellOperations,
    OutputSink,
    ShellExit,
    ShellSpawnRequest,
    create_shell_tool,
    run_process_tree,
)
from prism.core import JsonObject, ToolDefinition, ToolResult

RunTool = Callable[[ToolDefinition, JsonObject], Awaitable[ToolResult]]

# A child, a grandchild that started its own session, and a double-forked daemon
# (setsid -f: its parent exits at once, so it is re-parented away from our tree).
TREE = (
    "sleep 300 & echo child=$!; "
    "( setsid sleep 300 & echo grandchild=$!; wait ) & "
    "setsid -f sh -c 'echo daemon=$$; exec sleep 300'; "
    "wait"
)


def _alive(pid: int) -> bool:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return False
    return raw[raw.rfind(b")") + 2 :].split()[0] != b"Z"


def _pids(text: str) -> dict[str, int]:
    return {name: int(pid) for name, pid in re.findall(r"(\w+)=(\d+)", text)}


class WatchingShell:
    """The real local shell operations, plus an event set once every PID of TREE is printed."""

    def __init__(self, kill_grace_s: float = 1.0) -> None:
        self.inner = LocalShellOperations(kill_grace_s=kill_grace_s)
        self.seen = bytearray()
        self.ready = trio.Event()

    async def run(self, request: ShellSpawnRequest, on_output: OutputSink) -> ShellExit:
        async def sink(chunk: bytes) -> None:
            self.seen += chunk
            complete = self.seen.endswith(b"\n")
            if complete and set(_pids(self.seen.decode())) == {"child", "grandchild", "daemon"}:
                self.ready.set()
            await on_output(chunk)

        return await self.inner.run(request, sink)


async def test_timeout_kills_child_setsid_grandchild_and_daemon(
    tmp_path: Path, run_tool: RunTool
) -> None:
    tool = create_shell_tool(str(tmp_path))
    with trio.fail_after(10):
        result = await run_tool(tool, {"command": TREE, "timeout": 1.0})
    pids = _pids(result.joined_text)
    assert set(pids) == {"child", "grandchild", "daemon"}
    assert result.is_error
    assert result.details["timed_out"] is True
    assert "timed out after 1 s" in result.joined_text
    assert [name for name, pid in pids.items() if _alive(pid)] == []


async def test_cancellation_kills_the_whole_tree_before_propagating(
    tmp_path: Path, run_tool: RunTool
) -> None:
    shell = WatchingShell()
    tool = create_shell_tool(str(tmp_path), operations=shell)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            arguments: JsonObject = {"command": TREE}
            nursery.start_soon(run_tool, tool, arguments)
            await shell.ready.wait()
            nursery.cancel_scope.cancel()
    pids = _pids(shell.seen.decode())
    assert set(pids) == {"child", "grandchild", "daemon"}
    assert [name for name, pid in pids.items() if _alive(pid)] == []


async def test_background_process_left_after_exit_is_terminated(
    tmp_path: Path, run_tool: RunTool
) -> None:
    tool = create_shell_tool(str(tmp_path))
    with trio.fail_after(10):
        command = "sleep 300 & echo bg=$!; nohup sleep 300 >/dev/null 2>&1 & echo nh=$!"
        result = await run_tool(tool, {"command": command})
    assert not result.is_error
    pids = _pids(result.joined_text)
    assert set(pids) == {"bg", "nh"}
    assert [name for name, pid in pids.items() if _alive(pid)] == []


async def test_process_ignoring_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    seen = bytearray()
    ready = trio.Event()

    async def sink(chunk: bytes) -> None:
        seen.extend(chunk)
        if b"\n" in seen:
            ready.set()

    async def run() -> None:
        await run_process_tree(
            ["sh", "-c", "trap '' TERM; sleep 300 & echo $!; wait"],
            cwd=str(tmp_path),
            env=dict(os.environ),
            on_output=sink,
            kill_grace_s=0.2,
        )

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await ready.wait()
            nursery.cancel_scope.cancel()
    assert not _alive(int(seen.split()[0]))


async def test_sink_error_kills_the_tree_and_propagates(tmp_path: Path) -> None:
    seen = bytearray()

    async def sink(chunk: bytes) -> None:
        seen.extend(chunk)
        raise ValueError("host sink failed")

    with trio.fail_after(10), pytest.raises(ValueError, match="host sink failed"):
        await run_process_tree(
            ["sh", "-c", "sleep 300 & echo $!; wait"],
            cwd=str(tmp_path),
            env=dict(os.environ),
            on_output=sink,
        )
    assert not _alive(int(seen.split()[0]))


async def test_missing_program_raises_oserror(tmp_path: Path) -> None:
    async def sink(chunk: bytes) -> None:
        pass

    with pytest.raises(OSError):  # noqa: PT011 - the errno is the platform's business
        await run_process_tree(
            [str(tmp_path / "no-such-program")], cwd=str(tmp_path), env={}, on_output=sink
        )


async def test_exit_reports_signal_of_a_killed_shell(tmp_path: Path) -> None:
    chunks: list[bytes] = []

    async def sink(chunk: bytes) -> None:
        chunks.append(chunk)

    with trio.fail_after(10):
        result = await run_process_tree(
            ["sh", "-c", "kill -KILL $$"], cwd=str(tmp_path), env={}, on_output=sink
        )
    assert result.exit_code is None
    assert result.signal == 9


def test_process_tree_names_are_exported_by_prism_core_process_only() -> None:
    import prism.coding.tools as tools
    import prism.core.process as process

    assert process.PROCESS_TREE_ENV_VAR == "PRISM_PROCESS_TREE"
    assert not set(process.__all__) & set(tools.__all__)


async def test_boolean_kill_grace_is_refused_before_spawning(tmp_path: Path) -> None:
    async def sink(chunk: bytes) -> None:
        raise AssertionError("nothing may run")

    with pytest.raises(CodingToolsConfigurationError, match="kill_grace_s"):
        await run_process_tree(
            ["sh", "-c", "echo ran"], cwd=str(tmp_path), env={}, on_output=sink, kill_grace_s=True
        )
