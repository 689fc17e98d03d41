"""The npm reference server @modelcontextprotocol/server-everything, over stdio and HTTP."""

from __future__ import annotations

import logging

import pytest
import trio

from prism.core import (
    AgentEvent,
    DispatchOptions,
    ImageContent,
    ResourceContent,
    ResourceLink,
    ToolCall,
    ToolExecutionProgress,
    ToolResult,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.mcp import McpToolBridge, StdioTransport, StreamableHttpTransport, open_mcp_tools


@pytest.fixture(params=["stdio", "http"])
def everything(request: pytest.FixtureRequest) -> StdioTransport | StreamableHttpTransport:
    if request.param == "stdio":
        stdio: StdioTransport = request.getfixturevalue("everything_stdio")
        return stdio
    url: str = request.getfixturevalue("everything_http_url")
    return StreamableHttpTransport(url)


async def call(
    bridge: McpToolBridge,
    name: str,
    arguments: dict[str, object],
    events: list[AgentEvent] | None = None,
) -> ToolResult:
    options = DispatchOptions(
        registry=create_tool_registry(bridge.tools),
        on_event=events.append if events is not None else None,
    )
    call = ToolCall(id="e", name=f"mcp:everything:{name}", arguments=arguments)
    return await dispatch_tool_call(call, options)


async def test_everything_tools_map_to_prism_content(
    everything: StdioTransport | StreamableHttpTransport,
) -> None:
    with trio.fail_after(30):
        async with open_mcp_tools(server_id="everything", transport=everything) as bridge:
            assert bridge.protocol_version == "2025-11-25"
            assert bridge.server_info is not None
            assert bridge.server_info.name == "mcp-servers/everything"
            echo = await call(bridge, "echo", {"message": "hi"})
            total = await call(bridge, "get-sum", {"a": 2, "b": 3})
            image = await call(bridge, "get-tiny-image", {})
            links = await call(bridge, "get-resource-links", {"count": 2})
            embedded = await call(
                bridge, "get-resource-reference", {"resourceType": "Text", "resourceId": 1}
            )
            structured = await call(bridge, "get-structured-content", {"location": "Chicago"})
    assert echo.joined_text == "Echo: hi"
    assert "5" in total.joined_text
    images = [block for block in image.content if isinstance(block, ImageContent)]
    assert len(images) == 1
    assert images[0].mime_type == "image/png"
    link_blocks = [block for block in links.content if isinstance(block, ResourceLink)]
    assert len(link_blocks) == 2
    assert all(block.uri.startswith("demo://") for block in link_blocks)
    resources = [block for block in embedded.content if isinstance(block, ResourceContent)]
    assert resources[0].uri == "demo://resource/dynamic/text/1"
    assert resources[0].text is not None
    assert isinstance(structured.structured, dict)
    assert set(structured.structured) == {"temperature", "conditions", "humidity"}


async def test_everything_long_running_operation_reports_progress(
    everything: StdioTransport | StreamableHttpTransport,
) -> None:
    events: list[AgentEvent] = []
    with trio.fail_after(30):
        async with open_mcp_tools(
            server_id="everything", transport=everything, call_timeout_s=2
        ) as bridge:
            result = await call(
                bridge, "trigger-long-running-operation", {"duration": 1, "steps": 4}, events
            )
    assert not result.is_error, result.joined_text
    progress = [event for event in events if isinstance(event, ToolExecutionProgress)]
    assert [event.progress for event in progress] == [1, 2, 3, 4]
    assert {event.total for event in progress} == {4}


async def test_everything_list_changed_after_initialize_reaches_the_bridge(
    everything: StdioTransport | StreamableHttpTransport, caplog: pytest.LogCaptureFixture
) -> None:
    # server-everything registers capability-dependent tools right after initialize and
    # announces it with notifications/tools/list_changed (a 2025-11-25 session). It may land
    # before the bridge's first listing (nothing is stale then) or after it (stale).
    caplog.set_level(logging.DEBUG, logger="prism.mcp")
    announced = "MCP server everything announced a tool list change"
    with trio.fail_after(30):
        async with open_mcp_tools(server_id="everything", transport=everything) as bridge:
            # The announcement is checked against the first listing: not stale at open.
            assert not bridge.stale
            if isinstance(everything, StdioTransport):
                with trio.move_on_after(5):
                    while announced not in caplog.messages:
                        await bridge.wait_stale()
                assert announced in caplog.messages
            # Over HTTP the server sends this notification while handling the client's
            # notifications/initialized POST, to the standalone GET stream; when that
            # stream is not open yet the TypeScript server drops it, so its arrival is a
            # race on the server's side. The fixture server covers list-changed over HTTP.
            await bridge.refresh()
            assert not bridge.stale
            names = {tool.name for tool in bridge.tools}
            result = await call(bridge, "echo", {"message": "after refresh"})
    assert "mcp:everything:simulate-research-query" in names
    assert result.joined_text == "Echo: after refresh"
