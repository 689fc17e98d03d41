"""The PyPI reference server mcp-server-time (a test-only dependency), over stdio."""

from __future__ import annotations

import mcp_prewarmed as prewarmed
import pytest
import trio

from prism.core import DispatchOptions, ToolCall, create_tool_registry, dispatch_tool_call
from prism.mcp import StdioTransport, open_mcp_tools


def time_server() -> StdioTransport:
    """mcp-server-time, started from the warm parent (mcp_prewarmed.py)."""
    return StdioTransport(*prewarmed.command("-m", "mcp_server_time", "--local-timezone", "UTC"))


@pytest.mark.parametrize(("protocol", "era"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_time_server_works_on_both_eras_even_without_listen_support(
    protocol: str, era: str
) -> None:
    # mcp-server-time answers subscriptions/listen with "method not found": the bridge
    # must shrug that off and keep serving calls.
    with trio.fail_after(30):
        async with open_mcp_tools(
            server_id="time",
            transport=time_server(),
            protocol=protocol,  # type: ignore[arg-type]
        ) as bridge:
            assert bridge.protocol_version == era
            names = {tool.name for tool in bridge.tools}
            options = DispatchOptions(registry=create_tool_registry(bridge.tools))
            now = await dispatch_tool_call(
                ToolCall(id="t1", name="mcp:time:get_current_time", arguments={"timezone": "UTC"}),
                options,
            )
            converted = await dispatch_tool_call(
                ToolCall(
                    id="t2",
                    name="mcp:time:convert_time",
                    arguments={
                        "source_timezone": "UTC",
                        "time": "12:00",
                        "target_timezone": "Asia/Tokyo",
                    },
                ),
                options,
            )
            await bridge.refresh()
    assert names == {"mcp:time:get_current_time", "mcp:time:convert_time"}
    assert not now.is_error, now.joined_text
    assert isinstance(now.structured, dict)
    assert now.structured["timezone"] == "UTC"
    assert not converted.is_error, converted.joined_text
    assert "21:00" in converted.joined_text


async def test_time_server_rejects_bad_timezone_as_an_error_result() -> None:
    with trio.fail_after(30):
        async with open_mcp_tools(server_id="time", transport=time_server()) as bridge:
            options = DispatchOptions(registry=create_tool_registry(bridge.tools))
            result = await dispatch_tool_call(
                ToolCall(
                    id="t", name="mcp:time:get_current_time", arguments={"timezone": "Mars/Base"}
                ),
                options,
            )
    assert result.is_error
