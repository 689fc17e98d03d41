"""Leaving ``open_mcp_tools`` terminates the stdio server's whole process tree, by PID."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from prism.core import ToolCall, ToolExecutionContext
from prism.core.process import PROCESS_TREE_ENV_VAR
from prism.mcp import StdioTransport, open_mcp_tools

if TYPE_CHECKING:
    from collections.abc import Callable

    from prism.core import JsonObject, ToolResult
    from prism.mcp import McpToolBridge

SETSID_SERVER = Path(__file__).resolve().parent / "mcp_setsid_server.py"
ORPHAN_SERVER = Path(__file__).resolve().parent / "mcp_orphan_server.py"


async def run_tool(bridge: McpToolBridge, name: str) -> ToolResult:
    tool = next(tool for tool in bridge.tools if tool.name == f"mcp:esc:{name}")
    ctx = ToolExecutionContext(ToolCall(id="e", name=tool.name, arguments={}))
    return await tool.execute({}, ctx)


async def test_a_setsid_grandchild_does_not_outlive_the_block(
    process_alive: Callable[[int], bool],
) -> None:
    transport = StdioTransport(sys.executable, [str(SETSID_SERVER)])
    pids: list[int] = []
    try:
        with trio.fail_after(20):
            async with open_mcp_tools(server_id="esc", transport=transport) as bridge:
                assert bridge.server_pid is not None
                pids.append(bridge.server_pid)
                result = await run_tool(bridge, "spawn_escapee")
                assert not result.is_error, result.joined_text
                pids.append(int(result.joined_text))
                assert all(process_alive(pid) for pid in pids)
                # It really left: its own session, so a process-group kill misses it.
                assert os.getsid(pids[1]) == pids[1] != os.getsid(pids[0])
        assert [pid for pid in pids if process_alive(pid)] == []
    finally:
        for pid in pids:
            if process_alive(pid):
                os.kill(pid, signal.SIGKILL)


async def test_the_server_env_carries_a_fresh_process_tree_marker_per_connection(
    fixture_stdio_process: StdioTransport,
) -> None:
    markers: list[str] = []
    with trio.fail_after(20):
        for _ in range(2):
            async with open_mcp_tools(server_id="fx", transport=fixture_stdio_process) as bridge:
                tool = next(t for t in bridge.tools if t.name == "mcp:fx:env")
                arguments: JsonObject = {"name": PROCESS_TREE_ENV_VAR}
                ctx = ToolExecutionContext(ToolCall(id="m", name=tool.name, arguments=arguments))
                markers.append((await tool.execute(arguments, ctx)).joined_text)
    assert all(len(marker) == 32 for marker in markers), markers
    assert markers[0] != markers[1]


async def test_a_server_that_exits_while_a_child_holds_its_stdout_is_seen_dead(
    tmp_path: Path, process_alive: Callable[[int], bool]
) -> None:
    # The server exits (status 7) without answering, after forking a child that
    # called setsid and keeps the stdout pipe open: the pipe never closes, so
    # every later call used to wait the whole call_timeout_s and the bridge
    # never restarted the server.
    log = tmp_path / "starts"
    server = ORPHAN_SERVER
    transport = StdioTransport(sys.executable, [str(server), str(log)])
    with trio.fail_after(30):
        async with open_mcp_tools(
            server_id="esc", transport=transport, call_timeout_s=600.0
        ) as bridge:
            first = bridge.server_pid
            assert first is not None
            died = await run_tool(bridge, "die")
            assert died.is_error
            assert died.details["mcp_error"] == "connection_lost"
            assert "exit status 7" in died.joined_text, died.joined_text
            again = await run_tool(bridge, "hello")
            assert not again.is_error, again.joined_text
            assert again.joined_text == "hello 2"
            assert bridge.server_pid not in (None, first)
    assert log.read_text().splitlines() == ["start", "start"]
    assert not process_alive(first)
