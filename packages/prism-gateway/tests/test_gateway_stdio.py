"""The gateway over stdio (a real subprocess), driven by the official MCP SDK client."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

STDIO_MAIN = Path(__file__).resolve().parent / "gateway_stdio_main.py"


def _params(root: Path) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[str(STDIO_MAIN), str(root)])


def _text(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def test_lists_and_reads_over_stdio(workspace: Path) -> None:
    async with Client(_params(workspace)) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        result = await client.call_tool("read", {"path": "notes.txt"})
    assert {"read", "shell", "mcp__fx__echo"} <= names
    assert not result.is_error
    assert "hello from the workspace" in _text(result)


async def test_bridged_call_over_stdio(workspace: Path) -> None:
    async with Client(_params(workspace)) as client:
        result = await client.call_tool("mcp__fx__echo", {"text": "via stdio"})
    assert _text(result) == "via stdio"


async def test_denied_call_over_stdio(workspace: Path) -> None:
    async with Client(_params(workspace)) as client:
        result = await client.call_tool("shell", {"command": "sudo id"})
    assert result.is_error
    assert "deny rule" in _text(result)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_approval_by_elicitation_over_stdio(workspace: Path, mode: str) -> None:
    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"approve": True})

    async with Client(_params(workspace), elicitation_callback=elicit, mode=mode) as client:
        result = await client.call_tool("shell", {"command": "touch approved.txt"})
    assert not result.is_error, _text(result)
    assert (workspace / "approved.txt").exists()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_client_cancel_reaches_the_bridged_server(workspace: Path, mode: str) -> None:
    async with Client(_params(workspace), mode=mode) as client:
        with pytest.raises(MCPError, match="timed out"):
            # The SDK client cancels the request when its own deadline passes.
            await client.call_tool("mcp__fx__hang", {}, read_timeout_seconds=0.5)
        cancelled = await client.call_tool("mcp__fx__was_hang_cancelled", {})
        result = await client.call_tool("mcp__fx__echo", {"text": "still here"})
    assert cancelled.structured_content == {"result": True}
    assert _text(result) == "still here"
