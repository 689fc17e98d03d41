"""The bridge against the fixture server, over stdio and over Streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing

from prism.core import (
    AgentEvent,
    DispatchOptions,
    ImageContent,
    JsonObject,
    ResourceContent,
    ResourceLink,
    TextContent,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolExecutionProgress,
    ToolExecutionStarted,
    ToolResult,
    create_rule_permission_policy,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.core.ledger import RunLedger
from prism.mcp import (
    AUDIO_URI_PREFIX,
    McpToolBridge,
    StdioTransport,
    StreamableHttpTransport,
)
from prism.mcp import open_mcp_tools as open_mcp_tools

if TYPE_CHECKING:
    from pathlib import Path

Validator = Callable[[ToolDefinition, JsonObject, ToolExecutionContext], str | None]


@pytest.fixture(params=["stdio", "http"])
def transport(
    request: pytest.FixtureRequest, fixture_stdio: StdioTransport
) -> StdioTransport | StreamableHttpTransport:
    if request.param == "stdio":
        return fixture_stdio
    url: str = request.getfixturevalue("fixture_http_url")
    return StreamableHttpTransport(url)


async def call(
    bridge: McpToolBridge,
    name: str,
    arguments: object,
    *,
    events: list[AgentEvent] | None = None,
    validator: Validator | None = None,
    ledger: RunLedger | None = None,
) -> ToolResult:
    options = DispatchOptions(
        registry=create_tool_registry(bridge.tools),
        on_event=events.append if events is not None else None,
        validator=validator,
        ledger=ledger,
    )
    return await dispatch_tool_call(ToolCall(id="c1", name=name, arguments=arguments), options)


async def test_tools_are_namespaced_and_carry_the_server_schema(
    transport: StdioTransport | StreamableHttpTransport,
) -> None:
    with trio.fail_after(20):
        async with open_mcp_tools(server_id="fx", transport=transport) as bridge:
            tools = {tool.name: tool for tool in bridge.tools}
            assert "mcp:fx:echo" in tools
            assert all(name.startswith("mcp:fx:") for name in tools)
            schema = tools["mcp:fx:add"].parameters
            assert schema is not None
            assert schema["type"] == "object"
            assert set(schema["required"]) == {"a", "b"}  # type: ignore[arg-type]
            assert tools["mcp:fx:add"].description == "Add two integers."
            assert bridge.server_info is not None
            assert bridge.server_info.name == "prism-fixture"
            assert bridge.protocol_version == "2026-07-28"
            assert not bridge.stale


async def test_name_prefix_replaces_the_default_namespace(fixture_stdio: StdioTransport) -> None:
    with trio.fail_after(20):
        async with open_mcp_tools(
            server_id="fx", transport=fixture_stdio, name_prefix="fixture_"
        ) as bridge:
            assert "fixture_echo" in {tool.name for tool in bridge.tools}
            result = await call(bridge, "fixture_echo", {"text": "hi"})
            assert result.joined_text == "hi"


async def test_one_session_maps_results_content_blocks_errors_progress_and_concurrent_calls(
    transport: StdioTransport | StreamableHttpTransport,
) -> None:
    # One bridge (one server process over stdio) for calls that leave the session as they
    # found it: each part's assertions are the ones its own test had.
    ledger = RunLedger()
    events: list[AgentEvent] = []
    results: dict[int, ToolResult] = {}
    with trio.fail_after(40):
        async with open_mcp_tools(server_id="fx", transport=transport) as bridge:
            # Text and structured content through dispatch.
            added = await call(bridge, "mcp:fx:add", {"a": 2, "b": 40}, ledger=ledger)
            # Every content block kind.
            rich = await call(bridge, "mcp:fx:rich", {})
            # The server's own tool error, and the session after it.
            failed = await call(bridge, "mcp:fx:fail", {"message": "kaput"})
            after = await call(bridge, "mcp:fx:echo", {"text": "still here"})
            # Progress notifications become progress events.
            progressed = await call(
                bridge, "mcp:fx:progress", {"steps": 3, "interval": 0.05}, events=events
            )

            # Concurrent calls share the one session.
            async def one(index: int) -> None:
                results[index] = await call(bridge, "mcp:fx:echo", {"text": f"n{index}"})

            async with trio.open_nursery() as nursery:
                for index in range(10):
                    nursery.start_soon(one, index)

    assert not added.is_error
    assert added.content == (TextContent(text="42"),)
    assert added.structured == {"result": 42}
    assert added.details["mcp_server"] == "fx"
    assert [record.status for record in ledger.records] == ["ok"]

    text, image, audio, embedded_text, embedded_blob, link = rich.content
    assert text == TextContent(text="hello")
    assert isinstance(image, ImageContent)
    assert image.mime_type == "image/png"
    assert audio == ResourceContent(
        uri=f"{AUDIO_URI_PREFIX}2", mime_type="audio/wav", blob="UklGRg=="
    )
    assert embedded_text == ResourceContent(
        uri="file:///notes.txt", mime_type="text/plain", text="notes"
    )
    assert embedded_blob == ResourceContent(
        uri="file:///blob.bin", mime_type="application/octet-stream", blob="AAE="
    )
    assert link == ResourceLink(
        uri="file:///linked.txt", name="linked", mime_type="text/plain", description="a link"
    )
    assert rich.structured == {"answer": 42, "items": [1, 2]}

    assert failed.is_error
    assert after.joined_text == "still here"

    assert progressed.joined_text == "done after 3 steps"
    progress = [event for event in events if isinstance(event, ToolExecutionProgress)]
    assert [(p.progress, p.total, p.message) for p in progress] == [
        (1, 3, "step 1"),
        (2, 3, "step 2"),
        (3, 3, "step 3"),
    ]
    assert {p.tool_name for p in progress} == {"mcp:fx:progress"}

    assert {i: r.joined_text for i, r in results.items()} == {i: f"n{i}" for i in range(10)}


async def test_one_stdio_session_gates_by_validator_and_permission_and_takes_large_requests(
    fixture_stdio: StdioTransport, schema_validator: Validator
) -> None:
    # One bridge (one server process) for the gates in dispatch and for requests larger
    # than the pipe: each part's assertions are the ones its own test had.
    events: list[AgentEvent] = []
    # Each request is over 64 KiB (more than a pipe takes at once): the sender writes
    # what fits, the rest is finished by the writer task while the next ones wait their
    # turn; every line reaches the server whole and in one piece.
    texts = {index: f"{index}" * 150_000 for index in range(4)}
    results: dict[int, ToolResult] = {}
    with trio.fail_after(60):
        async with open_mcp_tools(server_id="fx", transport=fixture_stdio) as bridge:
            # A validator in the dispatch options blocks bad arguments before the server.
            bad = await call(
                bridge,
                "mcp:fx:add",
                {"a": "two", "b": 1},
                events=events,
                validator=schema_validator,
            )
            missing = await call(
                bridge, "mcp:fx:add", {"a": 1}, events=events, validator=schema_validator
            )
            good = await call(
                bridge, "mcp:fx:add", {"a": 1, "b": 1}, events=events, validator=schema_validator
            )
            # The permission policy gates MCP tools by name.
            options = DispatchOptions(
                registry=create_tool_registry(bridge.tools),
                permission=create_rule_permission_policy(
                    allow=["tool:mcp:fx:*:execute"], deny=["tool:mcp:fx:crash:execute"]
                ),
            )
            denied = await dispatch_tool_call(
                ToolCall(id="1", name="mcp:fx:crash", arguments={}), options
            )
            allowed = await dispatch_tool_call(
                ToolCall(id="2", name="mcp:fx:echo", arguments={"text": "ok"}), options
            )
            pid_still = bridge.server_pid

            # Requests larger than the pipe reach the server whole.
            async def one(index: int) -> None:
                results[index] = await call(bridge, "mcp:fx:echo", {"text": texts[index]})

            async with trio.open_nursery() as nursery:
                for index in texts:
                    nursery.start_soon(one, index)
            small = await call(bridge, "mcp:fx:echo", {"text": "small"})

    assert bad.is_error
    assert bad.details["blocked_reason"] == "validation_failed"
    assert missing.details["blocked_reason"] == "validation_failed"
    assert good.joined_text == "2"
    # Only the valid call ever started executing (reached the bridge and the server).
    assert sum(isinstance(event, ToolExecutionStarted) for event in events) == 1

    assert denied.details["blocked_reason"] == "permission_denied"
    assert allowed.joined_text == "ok"
    assert pid_still is not None

    assert {i: r.joined_text for i, r in results.items()} == texts
    assert small.joined_text == "small"


async def test_call_timeout_restarts_on_every_progress_notification(
    transport: StdioTransport | StreamableHttpTransport,
) -> None:
    with trio.fail_after(20):
        async with open_mcp_tools(
            server_id="fx", transport=transport, call_timeout_s=1.0
        ) as bridge:
            # 5 x 0.3 s = 1.5 s in all, more than call_timeout_s, but never 1 s without progress.
            result = await call(bridge, "mcp:fx:progress", {"steps": 5, "interval": 0.3})
    assert not result.is_error, result.joined_text


async def test_max_call_s_is_a_hard_ceiling_even_with_progress(
    transport: StdioTransport | StreamableHttpTransport,
) -> None:
    with trio.fail_after(20):
        async with open_mcp_tools(
            server_id="fx", transport=transport, call_timeout_s=5, max_call_s=1.0
        ) as bridge:
            events: list[AgentEvent] = []
            # 50 steps of 0.5 s: each step resets call_timeout_s, so only the
            # ceiling can end the call before the tool's last step.
            result = await call(
                bridge, "mcp:fx:progress", {"steps": 50, "interval": 0.5}, events=events
            )
            after = await call(bridge, "mcp:fx:echo", {"text": "alive"})
    assert result.is_error
    assert "max_call_s=1s" in result.joined_text
    assert result.details["limit"] == "max_call_s"
    steps = [event for event in events if isinstance(event, ToolExecutionProgress)]
    assert len(steps) < 50  # ended by the ceiling, before the tool's last step
    assert after.joined_text == "alive"


async def test_timeout_gives_error_result_and_sends_the_server_a_cancellation(
    transport: StdioTransport | StreamableHttpTransport, tmp_path: Path
) -> None:
    marker = tmp_path / "cancelled"
    os.mkfifo(marker)

    def wait_for_mark() -> str:
        with marker.open() as fifo:
            return fifo.read()

    with trio.fail_after(20):
        async with open_mcp_tools(
            server_id="fx", transport=transport, call_timeout_s=0.5
        ) as bridge:
            pid = bridge.server_pid
            result = await call(bridge, "mcp:fx:sleep", {"seconds": 60, "marker": str(marker)})
            assert result.is_error
            assert "call_timeout_s=0.5s" in result.joined_text
            assert result.details["mcp_error"] == "timeout"
            # The server's sleep tool writes to the FIFO when it is cancelled.
            with trio.fail_after(10):
                mark = await trio.to_thread.run_sync(wait_for_mark, abandon_on_cancel=True)
            assert mark == "cancelled"
            # The server never answered the cancelled call: it may still run it.
            assert bridge.unanswered("c1")
            assert not bridge.unanswered("c2")
            after = await call(bridge, "mcp:fx:echo", {"text": "same session"})
            assert after.joined_text == "same session"
            assert bridge.server_pid == pid
            await bridge.aclose()
            assert not bridge.unanswered("c1")  # its session is gone


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_list_changed_marks_stale_on_both_protocol_eras_and_refresh_clears_it(
    transport: StdioTransport | StreamableHttpTransport, protocol: str
) -> None:
    new_name = f"added_{uuid.uuid4().hex[:8]}"
    with trio.fail_after(20):
        async with open_mcp_tools(
            server_id="fx",
            transport=transport,
            protocol=protocol,  # type: ignore[arg-type]
        ) as bridge:
            era = bridge.protocol_version
            assert (era == "2026-07-28") == (protocol == "auto")
            before = bridge.tools
            await call(bridge, "mcp:fx:add_tool", {"name": new_name})
            await bridge.wait_stale()
            assert bridge.stale
            assert bridge.tools == before
            await bridge.refresh()
            assert not bridge.stale
            assert f"mcp:fx:{new_name}" in {tool.name for tool in bridge.tools}
            result = await call(bridge, f"mcp:fx:{new_name}", {})
    assert result.joined_text == "added"


async def test_list_changed_never_swaps_the_tool_under_a_call_in_flight(
    fixture_stdio: StdioTransport,
) -> None:
    results: list[ToolResult] = []
    with trio.fail_after(20):
        async with open_mcp_tools(server_id="fx", transport=fixture_stdio) as bridge:
            slow = next(tool for tool in bridge.tools if tool.name == "mcp:fx:progress")
            started = trio.Event()

            async def in_flight() -> None:
                ctx = ToolExecutionContext(ToolCall(id="x", name=slow.name, arguments={}))
                started.set()
                results.append(await slow.execute({"steps": 3, "interval": 0.2}, ctx))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(in_flight)
                await started.wait()
                await call(bridge, "mcp:fx:add_tool", {"name": "during_call"})
                await bridge.wait_stale()
                await bridge.refresh()
            assert "mcp:fx:during_call" in {tool.name for tool in bridge.tools}
    assert results[0].joined_text == "done after 3 steps"


async def test_oversized_result_is_refused_and_the_next_call_reconnects(
    transport: StdioTransport | StreamableHttpTransport,
) -> None:
    tool, args = (
        ("mcp:fx:raw_flood", {"size": 5_000_000})
        if isinstance(transport, StdioTransport)
        else ("mcp:fx:big", {"size": 5_000_000})
    )
    with trio.fail_after(30):
        async with open_mcp_tools(
            server_id="fx", transport=transport, max_result_bytes=65_536, call_timeout_s=15
        ) as bridge:
            first_pid = bridge.server_pid
            refused = await call(bridge, tool, args)
            assert refused.is_error
            assert refused.details["mcp_error"] == "result_too_large"
            assert "max_result_bytes (65536 bytes)" in refused.joined_text
            assert not bridge.connected
            again = await call(bridge, "mcp:fx:echo", {"text": "reconnected"})
            assert again.joined_text == "reconnected"
            assert bridge.connected
            if first_pid is not None:
                assert bridge.server_pid not in (None, first_pid)


async def test_calls_after_close_are_error_results(fixture_stdio: StdioTransport) -> None:
    with trio.fail_after(20):
        async with open_mcp_tools(server_id="fx", transport=fixture_stdio) as bridge:
            echo = next(tool for tool in bridge.tools if tool.name == "mcp:fx:echo")
            await bridge.aclose()
            await bridge.aclose()
            # What the server said stays readable after the session is gone.
            assert bridge.server_info is not None
            assert bridge.server_info.version == "1.2.3"
            assert bridge.protocol_version == "2026-07-28"
            assert not bridge.connected
            ctx = ToolExecutionContext(ToolCall(id="x", name=echo.name, arguments={}))
            result = await echo.execute({"text": "late"}, ctx)
    assert result.is_error
    assert "closed" in result.joined_text


async def test_a_listing_older_than_list_cache_ttl_s_reports_stale(
    fixture_stdio: StdioTransport, mock_clock: trio.testing.MockClock
) -> None:
    async with open_mcp_tools(
        server_id="fx", transport=fixture_stdio, list_cache_ttl_s=60
    ) as bridge:
        assert not bridge.stale
        mock_clock.jump(59)
        assert not bridge.stale
        mock_clock.jump(2)
        assert bridge.stale
        await bridge.refresh()
        assert not bridge.stale
