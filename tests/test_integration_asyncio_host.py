"""An asyncio application uses every Prism entry point through one asyncio host.

MCP tools (``open_mcp_tools`` entered in the host), the coding tools under their
approval policy, the JSON Schema validator and an agent run all run on trio in
guest mode on the asyncio loop; the test itself is plain asyncio.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest
import trio

from prism.coding.security import create_coding_approval_policy, create_contained_file_operations
from prism.coding.tools import create_coding_tools
from prism.core import (
    AssistantMessage,
    DispatchOptions,
    Limits,
    ScriptedProvider,
    SingleShotLoop,
    TextContent,
    ToolCall,
    TrioRequiredError,
    create_agent,
    create_rule_permission_policy,
    create_tool_registry,
    dispatch_tool_call,
    open_asyncio_host,
)
from prism.core.ledger import RunLedger
from prism.mcp import open_mcp_tools
from prism.validation.jsonschema import create_json_schema_tool_validator

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from prism.core import RunResult, ToolResult
    from prism.mcp import StdioTransport


def test_asyncio_app_runs_mcp_and_coding_tools_through_one_host(
    workspace: Path, matrix_server: Callable[[str], StdioTransport]
) -> None:
    roots = [str(workspace)]
    ledger = RunLedger()
    provider = ScriptedProvider(
        [
            AssistantMessage(
                tool_calls=(
                    ToolCall(id="r1", name="read", arguments={"path": "inside.txt"}),
                    ToolCall(id="m1", name="mcp__a__search", arguments={"query": "trio"}),
                    ToolCall(id="w1", name="write", arguments={"path": "n.md", "content": "x\n"}),
                    ToolCall(id="x1", name="read", arguments={"path": "../secret.txt"}),
                )
            ),
            AssistantMessage(content=(TextContent(text="done"),)),
        ]
    )

    async def main() -> RunResult:
        async with (
            open_asyncio_host() as host,
            host.enter(open_mcp_tools(server_id="a", transport=matrix_server("a"))) as bridge,
        ):
            tools = [
                *create_coding_tools(
                    str(workspace),
                    execution_policy=create_coding_approval_policy(roots=roots),
                    file_operations=create_contained_file_operations(roots),
                ),
                *bridge.tools,
            ]
            agent = create_agent(
                model="scripted",
                provider=provider,
                tools=tools,
                validator=create_json_schema_tool_validator(),
                permission=create_rule_permission_policy(allow=["tool:*:execute"]),
                loop=SingleShotLoop(concurrency=2),
                limits=Limits(max_tool_rounds=2),
                ledger=ledger,
            )
            return await asyncio.wait_for(host.run_agent(agent.session(), "go"), 60)

    result = asyncio.run(main())
    assert result.final.content == (TextContent(text="done"),)
    statuses = {r.call_id: r.status for r in ledger.records}
    assert statuses == {"r1": "ok", "m1": "ok", "w1": "ok", "x1": "error"}
    assert (workspace / "n.md").read_text(encoding="utf-8") == "x\n"
    assert all("TOP-SECRET" not in (r.result_preview or "") for r in ledger.records)


def test_a_coding_tool_dispatched_on_asyncio_without_the_host_says_what_to_do(
    workspace: Path,
) -> None:
    options = DispatchOptions(registry=create_tool_registry(create_coding_tools(str(workspace))))
    call = ToolCall(id="1", name="read", arguments={"path": "inside.txt"})

    with pytest.raises(TrioRequiredError, match="open_asyncio_host"):
        asyncio.run(dispatch_tool_call(call, options))


def test_a_cancelled_call_failing_in_cleanup_leaves_the_host_and_its_mcp_bridge_serving(
    matrix_server: Callable[[str], StdioTransport],
) -> None:
    # One asyncio caller's call owns a nursery whose child fails while being
    # cancelled: cancelling that caller raises the failure to it alone, and the
    # host, with the MCP bridge entered in it, goes on serving the others.
    failure = ValueError("cleanup failed")

    async def main() -> tuple[ToolResult, ToolResult, bool]:
        started = asyncio.Event()

        async def child() -> None:
            try:
                await trio.sleep_forever()
            finally:
                raise failure

        async def fails_in_cleanup() -> None:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(child)
                await trio.lowlevel.checkpoint()
                started.set()
                await trio.sleep_forever()

        async with (
            open_asyncio_host() as host,
            host.enter(open_mcp_tools(server_id="a", transport=matrix_server("a"))) as bridge,
        ):
            options = DispatchOptions(
                registry=create_tool_registry(bridge.tools),
                permission=create_rule_permission_policy(allow=["tool:*:execute"]),
            )

            (name,) = (tool.name for tool in bridge.tools if tool.name.endswith("search"))

            def search(call_id: str) -> ToolCall:
                return ToolCall(id=call_id, name=name, arguments={"query": "trio"})

            before = await asyncio.wait_for(host.dispatch_tool_call(search("1"), options), 60)
            task = asyncio.create_task(host.run(fails_in_cleanup))
            await started.wait()
            task.cancel()
            with pytest.raises(ExceptionGroup) as caught:
                await asyncio.wait_for(task, 60)
            assert caught.value.exceptions[0] is failure
            after = await asyncio.wait_for(host.dispatch_tool_call(search("2"), options), 60)
            return before, after, host.closed

    before, after, closed = asyncio.run(main())
    assert (before.is_error, before.joined_text) == (False, "a: trio")
    assert (after.is_error, after.joined_text) == (False, "a: trio")
    assert not closed
