"""Expected faults leave no ERROR traceback in the logs: one event, one error result."""

from __future__ import annotations

import logging

import pytest
import trio

from prism.core import (
    AgentEvent,
    DispatchOptions,
    ToolCall,
    ToolExecutionProgress,
    ToolResult,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.mcp import StreamableHttpTransport, open_mcp_tools

STREAM = {"steps": 1_000_000, "interval": 0.001}


def loud(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.levelno >= logging.WARNING]


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_closing_while_the_server_streams_progress_logs_no_error(
    fixture_http_url: str, caplog: pytest.LogCaptureFixture, protocol: str
) -> None:
    caplog.set_level(logging.DEBUG)
    results: list[ToolResult] = []
    streaming = trio.Event()

    def on_event(event: AgentEvent) -> None:
        if isinstance(event, ToolExecutionProgress):
            streaming.set()

    with trio.fail_after(30):
        async with open_mcp_tools(
            server_id="fx",
            transport=StreamableHttpTransport(fixture_http_url),
            protocol=protocol,  # type: ignore[arg-type]
        ) as bridge:
            options = DispatchOptions(
                registry=create_tool_registry(bridge.tools), on_event=on_event
            )
            call = ToolCall(id="q", name="mcp:fx:progress", arguments=STREAM)

            async def run() -> None:
                results.append(await dispatch_tool_call(call, options))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(run)
                nursery.start_soon(run)
                await streaming.wait()
                await bridge.aclose()
    assert [result.details.get("mcp_error") for result in results] == ["closed", "closed"]
    assert loud(caplog) == []


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_a_max_call_s_timeout_while_progress_streams_logs_no_error(
    fixture_http_url: str, caplog: pytest.LogCaptureFixture, protocol: str
) -> None:
    caplog.set_level(logging.DEBUG)
    with trio.fail_after(30):
        async with open_mcp_tools(
            server_id="fx",
            transport=StreamableHttpTransport(fixture_http_url),
            protocol=protocol,  # type: ignore[arg-type]
            max_call_s=0.5,
        ) as bridge:
            options = DispatchOptions(registry=create_tool_registry(bridge.tools))
            call = ToolCall(id="q", name="mcp:fx:progress", arguments=STREAM)
            timed_out = await dispatch_tool_call(call, options)
            echo = ToolCall(id="e", name="mcp:fx:echo", arguments={"text": "still here"})
            after = await dispatch_tool_call(echo, options)
    assert timed_out.details["mcp_error"] == "timeout"
    assert timed_out.details["limit"] == "max_call_s"
    assert after.joined_text == "still here"
    assert loud(caplog) == []
