"""server-everything with host callbacks: every tool it offers is offered and called."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import pytest
import trio

from prism.core import (
    AgentEvent,
    DispatchOptions,
    ToolCall,
    ToolExecutionProgress,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.mcp import (
    McpElicitation,
    McpElicitationAnswer,
    McpLogMessage,
    McpSamplingAnswer,
    McpSamplingRequest,
    StdioTransport,
    StreamableHttpTransport,
    open_mcp_tools,
)

TESTS = Path(__file__).resolve().parent
DATA_URI = "data:text/plain;base64," + base64.b64encode(b"hello gzip").decode()

ARGUMENTS: dict[str, dict[str, object]] = {
    "echo": {"message": "hi"},
    "get-annotated-message": {"messageType": "success", "includeImage": True},
    "get-env": {},
    "get-resource-links": {"count": 2},
    "get-resource-reference": {"resourceType": "Blob", "resourceId": 2},
    "get-structured-content": {"location": "Chicago"},
    "get-sum": {"a": 1, "b": 2},
    "get-tiny-image": {},
    "gzip-file-as-resource": {"name": "hello.gz", "data": DATA_URI},
    "toggle-simulated-logging": {},
    "toggle-subscriber-updates": {},
    "trigger-long-running-operation": {"duration": 0.3, "steps": 3},
    "get-roots-list": {},
    "trigger-elicitation-request": {},
    "trigger-url-elicitation": {"url": "https://example.invalid/login"},
    "trigger-sampling-request": {"prompt": "say hi"},
    "simulate-research-query": {"topic": "trio"},
}


@pytest.fixture(params=["stdio", "http"])
def everything(request: pytest.FixtureRequest) -> StdioTransport | StreamableHttpTransport:
    if request.param == "stdio":
        stdio: StdioTransport = request.getfixturevalue("everything_stdio")
        return stdio
    url: str = request.getfixturevalue("everything_http_url")
    return StreamableHttpTransport(url)


async def test_with_callbacks_every_everything_tool_is_offered_and_runs(
    everything: StdioTransport | StreamableHttpTransport, tmp_path: Path
) -> None:
    asked: list[McpElicitation] = []
    sampled: list[McpSamplingRequest] = []

    async def elicit(request: McpElicitation) -> McpElicitationAnswer:
        asked.append(request)
        await trio.lowlevel.checkpoint()
        if request.mode == "url":
            return McpElicitationAnswer(action="decline")
        return McpElicitationAnswer(action="accept", content={"name": "Ada"})

    async def sample(request: McpSamplingRequest) -> McpSamplingAnswer:
        sampled.append(request)
        await trio.lowlevel.checkpoint()
        return McpSamplingAnswer(text="hello from the host", model="test-model")

    events: list[AgentEvent] = []
    results = {}
    with trio.fail_after(90):
        async with open_mcp_tools(
            server_id="everything",
            transport=everything,
            elicit=elicit,
            sample=sample,
            roots=[str(tmp_path)],
            call_timeout_s=20,
        ) as bridge:
            offered = {tool.name.removeprefix("mcp:everything:") for tool in bridge.tools}
            options = DispatchOptions(
                registry=create_tool_registry(bridge.tools), on_event=events.append
            )
            for name, arguments in ARGUMENTS.items():
                call = ToolCall(id=name, name=f"mcp:everything:{name}", arguments=arguments)
                results[name] = await dispatch_tool_call(call, options)
            info = bridge.tool_info["mcp:everything:simulate-research-query"]
    assert offered == set(ARGUMENTS)
    failed = {name: r.joined_text[:200] for name, r in results.items() if r.is_error}
    assert failed == {}
    assert info.task_support == "required"
    assert "Research" in results["simulate-research-query"].joined_text
    task_progress = [
        event
        for event in events
        if isinstance(event, ToolExecutionProgress) and event.call_id == "simulate-research-query"
    ]
    assert task_progress
    assert "hello from the host" in results["trigger-sampling-request"].joined_text
    assert sampled[0].server_id == "everything"
    assert tmp_path.as_uri() in results["get-roots-list"].joined_text
    modes = {request.mode: request for request in asked}
    assert modes["form"].server_id == "everything"
    assert modes["url"].url == "https://example.invalid/login"
    assert "Ada" in results["trigger-elicitation-request"].joined_text


async def test_without_callbacks_no_capability_is_declared(
    everything_stdio: StdioTransport,
) -> None:
    with trio.fail_after(30):
        async with open_mcp_tools(server_id="everything", transport=everything_stdio) as bridge:
            offered = {tool.name.removeprefix("mcp:everything:") for tool in bridge.tools}
    assert "trigger-sampling-request" not in offered
    assert "trigger-elicitation-request" not in offered
    assert "get-roots-list" not in offered


async def test_an_elicitation_callback_that_raises_declines_with_an_error(
    everything_stdio: StdioTransport,
) -> None:
    async def elicit(request: McpElicitation) -> McpElicitationAnswer:
        raise RuntimeError("no terminal")

    with trio.fail_after(30):
        async with open_mcp_tools(
            server_id="everything", transport=everything_stdio, elicit=elicit
        ) as bridge:
            options = DispatchOptions(registry=create_tool_registry(bridge.tools))
            call = ToolCall(id="e", name="mcp:everything:trigger-elicitation-request", arguments={})
            result = await dispatch_tool_call(call, options)
    assert result.is_error or "could not answer" in result.joined_text


async def test_server_log_messages_reach_on_log() -> None:
    received: list[McpLogMessage] = []
    transport = StdioTransport(sys.executable, [str(TESTS / "mcp_flood_server.py"), "log", "200"])
    with trio.fail_after(30):
        async with open_mcp_tools(
            server_id="logs", transport=transport, protocol="legacy", on_log=received.append
        ) as bridge:
            options = DispatchOptions(registry=create_tool_registry(bridge.tools))
            call = ToolCall(id="l", name="mcp:logs:flood", arguments={})
            result = await dispatch_tool_call(call, options)
    assert result.joined_text == "done"
    assert received
    assert {(m.server_id, m.level, m.logger) for m in received} == {("logs", "info", "flood")}
