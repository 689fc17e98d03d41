"""The gateway over stdio (a real subprocess), driven by the official MCP SDK client."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import gateway_prewarmed as prewarmed
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from prism.core.ledger import read_ledger

STDIO_MAIN = Path(__file__).resolve().parent / "gateway_stdio_main.py"


def _params(root: Path) -> StdioServerParameters:
    command, args = prewarmed.command(STDIO_MAIN, str(root))
    return StdioServerParameters(command=command, args=args)


def _text(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_approval_by_elicitation_over_stdio(workspace: Path, mode: str) -> None:
    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"approve": True})

    async with Client(_params(workspace), elicitation_callback=elicit, mode=mode) as client:
        result = await client.call_tool("shell", {"command": "touch approved.txt"})
        # The first request of a session teaches the stdio fast path the connection: the
        # second call takes it, and is asked again (approvals are not cached here).
        again = await client.call_tool("shell", {"command": "touch approved-2.txt"})
        served_by = await client.call_tool("served_by", {})
    # The gateway's own call kernel answered the second call (a 2026-07-28 client's call
    # that may be asked runs apart, in the gateway's nursery, while the kernel waits).
    assert _text(served_by) == (
        "CallKernel._run" if mode == "legacy" else "Gateway._start_round.<locals>.run"
    )
    assert not result.is_error, _text(result)
    assert not again.is_error, _text(again)
    assert (workspace / "approved.txt").exists()
    assert (workspace / "approved-2.txt").exists()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_client_cancel_reaches_the_bridged_server(workspace: Path, mode: str) -> None:
    async with Client(_params(workspace), mode=mode) as client:
        with pytest.raises(MCPError, match="timed out"):
            # The SDK client cancels the request when its own deadline passes.
            await client.call_tool("mcp__fx__hang", {}, read_timeout_seconds=0.5)
        cancelled = await client.call_tool("mcp__fx__was_hang_cancelled", {})
        result = await client.call_tool("mcp__fx__echo", {"text": "still here"})
        sent_as = await client.call_tool("mcp__fx__request_id", {})
    assert cancelled.structured_content == {"result": True}
    assert _text(result) == "still here"
    # The bridge's calls went past the SDK's dispatcher (its ids are integers).
    assert _text(sent_as).startswith("prism:")


async def test_every_gate_holds_over_stdio_on_bridged_and_coding_tools(
    workspace: Path, tmp_path: Path
) -> None:
    # The bridged call path end to end (client -> gateway process -> server process):
    # each refusal comes back as an error result, each call is in the ledger.
    ledger = tmp_path / "calls.jsonl"
    params = _params(workspace)
    params.env = {**os.environ, "GATEWAY_TEST_LEDGER": str(ledger)}
    calls: list[tuple[str, dict[str, Any]]] = [
        ("served_by", {}),  # the first request teaches the gateway the connection
        ("mcp__fx__forbidden", {}),  # the permission policy's deny rule
        ("mcp__fx__echo", {"text": 5}),  # the validator, against the server's schema
        ("mcp__fx__echo", {"text": "x" * 300_000}),  # over the bridge's max_result_bytes
        ("mcp__fx__blocks", {"count": 2000}),  # over the content blocks a result may hold
        ("mcp__fx__fail", {}),  # the server's own error
        ("mcp__fx__echo", {"text": "after"}),
        ("mcp__fx__request_id", {}),
        ("served_by", {}),
    ]
    async with Client(params) as client:
        results = [await client.call_tool(name, arguments) for name, arguments in calls]
        # The same gateway lists, reads and denies its coding tools too.
        names = {tool.name for tool in (await client.list_tools()).tools}
        read = await client.call_tool("read", {"path": "notes.txt"})
        denied = await client.call_tool("shell", {"command": "sudo id"})
    assert {"read", "shell", "mcp__fx__echo"} <= names
    assert not read.is_error
    assert "hello from the workspace" in _text(read)
    assert denied.is_error
    assert "deny rule" in _text(denied)
    # Every call after the first was answered by the gateway's own call kernel (each gate
    # below fired there), not the SDK's request machinery, which answered the first.
    assert _text(results.pop()) == "CallKernel._run"
    assert _text(results.pop(0)) != "CallKernel._run"
    said = [_text(result) for result in results]
    assert [result.is_error for result in results] == [True] * 5 + [False] * 2
    # Every call that reached the server went past the SDK's dispatcher: each gate fired
    # on that path (its ids are the bridge's, prism:<n>; the SDK's are integers).
    assert said[6].startswith("prism:")
    assert "matches a deny rule" in said[0]
    assert "invalid arguments for mcp:fx:echo: data.text: must be string" in said[1]
    assert "larger than max_result_bytes" in said[2]
    assert "result refused: more than 1024 content blocks" in said[3]
    assert "Error executing tool fail" in said[4]
    assert said[5] == "after"
    records = [r for r in read_ledger(ledger).records if r.tool_name != "served_by"]
    assert [(r.tool_name, r.status, r.blocked_reason) for r in records] == [
        ("mcp:fx:forbidden", "blocked", "permission_denied"),
        ("mcp:fx:echo", "blocked", "validation_failed"),
        ("mcp:fx:echo", "error", None),
        ("mcp:fx:blocks", "error", None),
        ("mcp:fx:fail", "error", None),
        ("mcp:fx:echo", "ok", None),
        ("mcp:fx:request_id", "ok", None),
        ("read", "ok", None),
        ("shell", "error", None),  # refused by the coding policy inside the tool
    ]
