"""Host callbacks that fail: the server gets an error answer, the call still ends cleanly."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import pytest
import trio

from prism.core import ToolCall, ToolExecutionContext
from prism.mcp import (
    McpElicitation,
    McpElicitationAnswer,
    McpElicitationComplete,
    McpLogMessage,
    McpRootsRequest,
    McpSamplingAnswer,
    McpSamplingRequest,
    McpToolBridge,
    StreamableHttpTransport,
    open_mcp_tools,
)

if TYPE_CHECKING:
    from prism.mcp import StdioTransport


async def run(
    bridge: McpToolBridge, name: str, arguments: dict[str, Any], call_id: str = "c"
) -> str:
    tool = next(t for t in bridge.tools if t.name == f"mcp:fx:{name}")
    ctx = ToolExecutionContext(ToolCall(id=call_id, name=tool.name, arguments=arguments))
    result = await tool.execute(arguments, ctx)
    assert not result.is_error, result.joined_text
    return result.joined_text


async def test_sampling_and_elicitation_reach_the_host_callbacks(
    fixture_stdio: StdioTransport,
) -> None:
    seen: list[object] = []

    async def sample(request: McpSamplingRequest) -> McpSamplingAnswer:
        seen.append(request)
        return McpSamplingAnswer(text="hello from the host", model="test-model")

    async def elicit(request: McpElicitation) -> McpElicitationAnswer:
        seen.append(request)
        return McpElicitationAnswer(action="accept", content={"ok": True})

    with trio.fail_after(30):
        async with open_mcp_tools(
            server_id="fx",
            transport=fixture_stdio,
            protocol="legacy",
            sample=sample,
            elicit=elicit,
            roots=["file:///srv/project"],
        ) as bridge:
            said = await run(bridge, "ask_model", {"prompt": "hi"})
            answered = await run(bridge, "ask_user", {"question": "sure?"})
    assert said == "model said: hello from the host"
    assert answered == "user: accept {'ok': True}"
    sampling, elicitation = seen
    assert isinstance(sampling, McpSamplingRequest)
    assert sampling.server_id == "fx"
    assert sampling.max_tokens == 16
    assert isinstance(elicitation, McpElicitation)
    assert (elicitation.mode, elicitation.message) == ("form", "sure?")


async def test_a_url_elicitation_its_completion_and_a_32042_reach_the_host(
    fixture_stdio: StdioTransport, caplog: pytest.LogCaptureFixture
) -> None:
    """The server's id comes with the request and with each completion it sends (what
    the id names is the server's word: the bridge passes on even one it never sent).
    -32042: the call's error result carries the URL elicitations the server wants done
    first (clipped, at most 16; an entry that is not one is left out)."""
    seen: list[object] = []
    all_told = trio.Event()

    async def elicit(request: McpElicitation) -> McpElicitationAnswer:
        seen.append(request)
        return McpElicitationAnswer(action="accept")

    def on_complete(notice: McpElicitationComplete) -> None:
        seen.append(notice)
        if len(seen) == 4:
            all_told.set()
        if notice.elicitation_id == "raise":
            raise RuntimeError("the host's sink broke")

    good = {"mode": "url", "url": "https://auth.example/a", "elicitationId": "a-1"}
    hostile: list[object] = [
        "not an object",
        {"mode": "form", "url": "https://auth.example/b", "elicitationId": "b"},
        {"mode": "url", "url": 7, "elicitationId": "c"},
        {"mode": "url", "url": "https://auth.example/d"},
        {**good, "message": "sign in to A", "elicitationId": "i" * 300},
    ]
    with trio.fail_after(30):
        async with open_mcp_tools(
            server_id="fx",
            transport=fixture_stdio,
            protocol="legacy",
            elicit=elicit,
            on_elicitation_complete=on_complete,
        ) as bridge:
            done = ["e-1", "raise", "x" * 300]
            said = await run(bridge, "sign_in", {"elicitation_id": "e-1", "done": done})
            await all_told.wait()  # the notifications are handled by a task of their own
            tool = next(t for t in bridge.tools if t.name == "mcp:fx:needs_sign_in")

            async def call(elicitations: list[object]) -> Any:
                arguments: dict[str, Any] = {"elicitations": elicitations}
                ctx = ToolExecutionContext(ToolCall(id="c", name=tool.name, arguments=arguments))
                return await tool.execute(arguments, ctx)

            named = await call([good, *hostile, *[good] * 20])
            none = await call(hostile[:4])
    assert said == "user: accept"
    request, *completed = seen
    assert isinstance(request, McpElicitation)
    assert (request.mode, request.url, request.elicitation_id) == (
        "url",
        "https://auth.example/login",
        "e-1",
    )
    assert all(isinstance(notice, McpElicitationComplete) for notice in completed)
    ids = [notice.elicitation_id for notice in completed]  # type: ignore[attr-defined]
    assert ids[:2] == ["e-1", "raise"]
    assert len(ids[2]) <= 256
    assert {notice.server_id for notice in completed} == {"fx"}  # type: ignore[attr-defined]
    assert any("on_elicitation_complete" in record.getMessage() for record in caplog.records)

    assert named.is_error
    assert named.details["mcp_error"] == "url_elicitation_required"
    wanted = named.details["elicitations"]
    assert isinstance(wanted, list)
    assert len(wanted) == 16
    first = {"url": "https://auth.example/a", "message": "", "elicitation_id": "a-1"}
    assert wanted[0] == first
    assert isinstance(wanted[1], dict)
    assert wanted[1]["message"] == "sign in to A"
    assert len(str(wanted[1]["elicitation_id"])) <= 256
    assert "needs the user to complete 16 URL elicitation(s)" in named.joined_text
    assert none.is_error
    assert none.details["mcp_error"] == "server_error"  # nothing to show: a plain error


async def _raise(request: object) -> Any:
    raise RuntimeError("the host is busy")


async def _no_answer(request: object) -> Any:
    return "yes"


@pytest.mark.parametrize(
    ("callback", "says"),
    [(_raise, "could not"), (_no_answer, "the host gave no answer")],
)
async def test_a_failing_callback_is_an_error_answer_to_the_server(
    fixture_stdio: StdioTransport, callback: Any, says: str
) -> None:
    with trio.fail_after(30):
        async with open_mcp_tools(
            server_id="fx",
            transport=fixture_stdio,
            protocol="legacy",
            sample=callback,
            elicit=callback,
        ) as bridge:
            said = await run(bridge, "ask_model", {"prompt": "hi"})
            answered = await run(bridge, "ask_user", {"question": "sure?"})
    assert said.startswith("refused:")
    assert says in said
    assert answered.startswith("refused:")
    assert says in answered


async def test_log_messages_reach_on_log_and_a_raising_on_log_is_contained(
    fixture_stdio: StdioTransport, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[McpLogMessage] = []

    def on_log(message: McpLogMessage) -> None:
        seen.append(message)
        raise RuntimeError("the host's log sink broke")

    with trio.fail_after(30):
        async with open_mcp_tools(
            server_id="fx", transport=fixture_stdio, protocol="legacy", on_log=on_log
        ) as bridge:
            assert await run(bridge, "log_line", {"text": "x" * 20_000}) == "logged"
            await run(bridge, "log_line", {"text": "y", "structured": True})
    message, structured = seen
    assert structured.data == {"line": "y"}
    assert message.server_id == "fx"
    assert message.level == "info"
    assert isinstance(message.data, str)
    assert len(message.data) <= 8192
    assert any(
        record.levelno == logging.ERROR and "on_log" in record.getMessage()
        for record in caplog.records
    )


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_requests_and_logs_say_which_call_they_are_for_when_the_transport_does(
    fixture_stdio: StdioTransport, fixture_http_url: str, transport: str
) -> None:
    """Over HTTP a server's request on a call's stream carries that call's id; over
    stdio nothing says which call it is for, and ``call_id`` is None."""
    asked: list[McpRootsRequest] = []
    logged: list[McpLogMessage] = []

    async def roots(request: McpRootsRequest) -> list[str]:
        asked.append(request)
        return ["/srv/one", "file:///srv/two"]

    chosen = StreamableHttpTransport(fixture_http_url) if transport == "http" else fixture_stdio
    with trio.fail_after(30):
        async with open_mcp_tools(
            server_id="fx", transport=chosen, protocol="legacy", roots=roots, on_log=logged.append
        ) as bridge:
            said = await run(bridge, "call_roots", {}, call_id="call-7")
            await run(bridge, "log_line", {"text": "x"}, call_id="call-8")
    assert said == "roots: file:///srv/one file:///srv/two"
    expected = ("call-7", "call-8") if transport == "http" else (None, None)
    assert [request.call_id for request in asked] == [expected[0]]
    assert [message.call_id for message in logged] == [expected[1]]
    assert asked[0].server_id == "fx"


async def _bad_roots(request: McpRootsRequest) -> list[str]:
    return ["relative/path"]


@pytest.mark.parametrize(
    ("callback", "says"), [(_raise, "RuntimeError"), (_bad_roots, "ConfigurationError")]
)
async def test_a_roots_callback_that_fails_is_an_error_answer(
    fixture_stdio: StdioTransport, callback: Any, says: str
) -> None:
    with trio.fail_after(30):
        async with open_mcp_tools(
            server_id="fx", transport=fixture_stdio, protocol="legacy", roots=callback
        ) as bridge:
            said = await run(bridge, "call_roots", {})
    assert said.startswith("refused:")
    assert says in said
