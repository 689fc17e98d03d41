"""AnthropicProvider against a loopback server speaking the Messages API (JSON and SSE).

Payloads are built from the SDK's own types (the ``Raw*Event`` stream events and
``Message``), so they stay faithful to the wire format the SDK parses.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import anthropic
import pytest
import trio
from anthropic.types import (
    Message as AnthropicMessage,
)
from anthropic.types import (
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
)

from prism.core import (
    AbortController,
    AssistantMessage,
    ConfigurationError,
    ImageContent,
    Limits,
    ModelRequest,
    ReasoningContent,
    RunOptions,
    SingleShotLoop,
    TextContent,
    ToolDefinition,
    ToolResult,
    UserMessage,
    create_agent,
    create_rule_permission_policy,
)
from prism.core._content import NO_TEXT_BOUND
from prism.core.ledger import RunLedger
from prism.providers import (
    AnthropicProvider,
    ModelReasoningDelta,
    ModelTextDelta,
    ModelToolCallDelta,
    ModelUsage,
    ProviderAPIError,
    ProviderResponseError,
    StreamEvent,
    open_anthropic_provider,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from conftest import WireServer
    from pydantic import BaseModel

    from prism.core import JsonObject, RunResult, ToolExecutionContext

KEY = "sk-ant-test-secret-0123456789"
Events = list[tuple[str | None, str]]


def ev(model: BaseModel) -> tuple[str | None, str]:
    data = model.model_dump(mode="json", exclude_none=True)
    return str(data["type"]), json.dumps(data)


def start(input_tokens: int) -> tuple[str | None, str]:
    return ev(
        RawMessageStartEvent.model_validate(
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": "test-model",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": input_tokens, "output_tokens": 1},
                },
            }
        )
    )


def block_start(index: int, block: Mapping[str, object]) -> tuple[str | None, str]:
    return ev(
        RawContentBlockStartEvent.model_validate(
            {"type": "content_block_start", "index": index, "content_block": block}
        )
    )


def block_delta(index: int, delta: Mapping[str, object]) -> tuple[str | None, str]:
    return ev(
        RawContentBlockDeltaEvent.model_validate(
            {"type": "content_block_delta", "index": index, "delta": delta}
        )
    )


def block(
    index: int, start_as: Mapping[str, object], deltas: Sequence[Mapping[str, object]]
) -> Events:
    return [
        block_start(index, start_as),
        *(block_delta(index, delta) for delta in deltas),
        ev(RawContentBlockStopEvent(type="content_block_stop", index=index)),
    ]


def text_block(index: int, pieces: list[str], first: str = "") -> Events:
    deltas: list[dict[str, object]] = [{"type": "text_delta", "text": p} for p in pieces]
    return block(index, {"type": "text", "text": first}, deltas)


def tool_block(index: int, call_id: str, name: str, pieces: list[str]) -> Events:
    deltas: list[dict[str, object]] = [
        {"type": "input_json_delta", "partial_json": p} for p in pieces
    ]
    return block(index, {"type": "tool_use", "id": call_id, "name": name, "input": {}}, deltas)


def finish(stop_reason: str, output_tokens: int) -> Events:
    return [
        ev(
            RawMessageDeltaEvent.model_validate(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                    "usage": {"output_tokens": output_tokens},
                }
            )
        ),
        ev(RawMessageStopEvent(type="message_stop")),
    ]


def parallel_tool_use() -> Events:
    return [
        start(40),
        *text_block(0, ["Searching ", "both."]),
        *tool_block(1, "toolu_a", "mcp__docs__search", ['{"q": ', '"trio"}']),
        *tool_block(2, "toolu_b", "mcp__docs__search", ['{"q": "attrs"}']),
        *finish("tool_use", 30),
    ]


def final_text(text: str) -> Events:
    return [start(90), *text_block(0, [text]), *finish("end_turn", 7)]


async def search(args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    await trio.lowlevel.checkpoint()
    if args["q"] == "attrs":
        return ToolResult(
            content=(TextContent(text="a chart"), ImageContent(data="aGk=", mime_type="image/png"))
        )
    return ToolResult.text(f"results for {args['q']}")


SEARCH = ToolDefinition(
    name="mcp:docs:search",
    execute=search,
    description="Search the docs",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)


def user(text: str) -> ModelRequest:
    return ModelRequest(
        model="test-model", messages=(UserMessage(content=(TextContent(text=text),)),)
    )


async def test_multi_turn_run_with_parallel_tool_use(wire_server: WireServer) -> None:
    wire_server.queue_sse(parallel_tool_use())
    wire_server.queue_sse(final_text("trio and attrs found."))
    events: list[StreamEvent] = []
    ledger = RunLedger()
    async with open_anthropic_provider(
        api_key=KEY,
        base_url=wire_server.url,
        instructions="Be brief.",
        on_event=events.append,
        max_retries=0,
    ) as provider:
        agent = create_agent(
            model="test-model",
            provider=provider,
            tools=[SEARCH],
            permission=create_rule_permission_policy(allow=["tool:mcp:docs:*:execute"]),
            loop=SingleShotLoop(concurrency=2),
            limits=Limits(max_tool_rounds=2),
            ledger=ledger,
        )
        result = await agent.session().run("find trio and attrs")

    assert result.final.content == (TextContent(text="trio and attrs found."),)
    assert sorted((r.call_id, r.status) for r in ledger.records) == [
        ("toolu_a", "ok"),
        ("toolu_b", "ok"),
    ]
    first, second = (r.json() for r in wire_server.requests)
    assert wire_server.requests[0].path == "/v1/messages"
    # anthropic 2.x sends the key as a bearer token (1.x used x-api-key).
    headers = wire_server.requests[0].headers
    assert KEY in (headers.get("x-api-key", ""), headers.get("authorization", "")[7:])
    assert headers["x-stainless-async"] == "async:trio"
    assert first["system"] == "Be brief."
    assert first["tools"] == [
        {
            "name": "mcp__docs__search",
            "input_schema": SEARCH.parameters,
            "description": "Search the docs",
        }
    ]
    messages = second["messages"]
    assert isinstance(messages, list)
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == [
        {"type": "text", "text": "Searching both."},
        {"type": "tool_use", "id": "toolu_a", "name": "mcp__docs__search", "input": {"q": "trio"}},
        {"type": "tool_use", "id": "toolu_b", "name": "mcp__docs__search", "input": {"q": "attrs"}},
    ]
    # Both results ride in one user turn, in call order; images stay images.
    assert messages[2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_a",
            "content": [{"type": "text", "text": "results for trio"}],
        },
        {
            "type": "tool_result",
            "tool_use_id": "toolu_b",
            "content": [
                {"type": "text", "text": "a chart"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "aGk="},
                },
            ],
        },
    ]
    assert [(r.stop_reason, r.usage) for r in provider.responses] == [
        ("tool_use", ModelUsage(input_tokens=40, output_tokens=30)),
        ("end_turn", ModelUsage(input_tokens=90, output_tokens=7)),
    ]
    deltas = [e for e in events if isinstance(e, ModelToolCallDelta) and e.call_id == "toolu_a"]
    assert "".join(e.arguments_delta for e in deltas) == '{"q": "trio"}'
    texts = [e.text for e in events if isinstance(e, ModelTextDelta)]
    assert texts == ["Searching ", "both.", "trio and attrs found."]


async def test_refused_call_is_sent_back_as_an_error_result(wire_server: WireServer) -> None:
    wire_server.queue_sse(parallel_tool_use())
    wire_server.queue_sse(final_text("Not allowed."))
    async with open_anthropic_provider(api_key=KEY, base_url=wire_server.url) as provider:
        agent = create_agent(
            model="test-model",
            provider=provider,
            tools=[SEARCH],
            permission=create_rule_permission_policy(deny=["tool:mcp:docs:search:execute"]),
        )
        result = await agent.session().run("search")
    assert result.final.content == (TextContent(text="Not allowed."),)
    sent = wire_server.requests[1].json()["messages"]
    assert isinstance(sent, list)
    results = sent[2]["content"]
    assert [r["is_error"] for r in results] == [True, True]
    assert "permission denied" in results[0]["content"][0]["text"]


async def test_final_answer_without_tools_still_declares_the_transcripts_tools(
    wire_server: WireServer,
) -> None:
    wire_server.queue_sse(parallel_tool_use())
    wire_server.queue_sse(final_text("done"))
    async with open_anthropic_provider(api_key=KEY, base_url=wire_server.url) as provider:
        agent = create_agent(
            model="test-model",
            provider=provider,
            tools=[SEARCH],
            permission=create_rule_permission_policy(allow=["tool:*:execute"]),
            limits=Limits(max_tool_rounds=1),
        )
        await agent.session().run("search")
    final_request = wire_server.requests[1].json()
    assert final_request["tool_choice"] == {"type": "none"}
    assert final_request["tools"] == [
        {"name": "mcp__docs__search", "input_schema": {"type": "object", "properties": {}}}
    ]


async def test_abort_mid_stream_closes_the_http_request(wire_server: WireServer) -> None:
    wire_server.queue_sse(
        [start(10), *text_block(0, ["Thinking"])[:2]],
        hold_open=True,
    )
    controller = AbortController()
    async with (
        open_anthropic_provider(api_key=KEY, base_url=wire_server.url) as provider,
        trio.open_nursery() as nursery,
    ):
        session = create_agent(model="test-model", provider=provider).session()
        outcome: list[object] = []

        async def run() -> None:
            outcome.append(await session.run("think", RunOptions(signal=controller.signal)))

        nursery.start_soon(run)
        await wire_server.streaming.wait()
        controller.abort("stop")
        await wire_server.client_left.wait()
    (result,) = outcome
    assert getattr(result, "aborted", None) is True
    assert provider.responses == []


async def test_overloaded_status_becomes_a_clear_run_error(wire_server: WireServer) -> None:
    wire_server.queue_json(
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        status=529,
        headers=(("request-id", "req_9"),),
    )
    async with open_anthropic_provider(
        api_key=KEY, base_url=wire_server.url, max_retries=0
    ) as provider:
        agent = create_agent(model="test-model", provider=provider)
        with pytest.raises(ProviderAPIError) as caught:
            await agent.session().run("hi")
    error = caught.value
    assert str(error) == "anthropic API error 529 (overloaded_error): Overloaded"
    assert (error.status_code, error.rate_limited, error.request_id) == (529, True, "req_9")
    assert KEY not in str(error)
    assert KEY not in repr(provider)


async def test_error_event_inside_a_stream_is_an_api_error(wire_server: WireServer) -> None:
    error_event = json.dumps(
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    )
    wire_server.queue_sse([start(5), ("error", error_event)])
    async with open_anthropic_provider(
        api_key=KEY, base_url=wire_server.url, max_retries=0
    ) as provider:
        with pytest.raises(ProviderAPIError, match="Overloaded"):
            await provider.complete(user("hi"))


async def test_stream_cut_short_is_a_response_error(wire_server: WireServer) -> None:
    wire_server.queue_sse([start(5), *text_block(0, ["half"])])
    async with open_anthropic_provider(api_key=KEY, base_url=wire_server.url) as provider:
        with pytest.raises(ProviderResponseError, match="message_stop"):
            await provider.complete(user("hi"))


async def test_non_streaming_message(wire_server: WireServer) -> None:
    message = AnthropicMessage.model_validate(
        {
            "id": "msg_2",
            "type": "message",
            "role": "assistant",
            "model": "test-model",
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}},
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 4, "cache_read_input_tokens": 3},
        }
    )
    wire_server.queue_json(message.model_dump(mode="json", exclude_none=True))
    async with open_anthropic_provider(
        api_key=KEY, base_url=wire_server.url, stream=False
    ) as provider:
        answer = await provider.complete(user("read a"))
    assert answer.content == (TextContent(text="Let me look."),)
    assert [(c.id, c.name, c.arguments) for c in answer.tool_calls] == [
        ("toolu_1", "read", {"path": "a"})
    ]
    assert provider.responses[0].usage == ModelUsage(
        input_tokens=12, output_tokens=4, cache_read_tokens=3
    )


async def test_a_whole_answer_is_read_from_its_text_and_its_calls_keep_the_proof(
    wire_server: WireServer,
) -> None:
    wire_server.queue_json(
        {
            "id": "msg_3",
            "model": "test-model",
            "content": [
                {"type": "text", "text": "Two calls."},
                {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a"}},
                {"type": "tool_use", "id": "t3", "name": "read"},
                {"type": "server_tool_use", "id": "s1", "name": "web", "input": {}},
                {"type": "text"},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 7, "output_tokens": -1, "cache_creation_input_tokens": "2"},
        }
    )
    big = {"type": "tool_use", "id": "t2", "name": "read", "input": {"n": 10**20}}
    wire_server.queue_json(whole_message([big], "tool_use"))
    async with open_anthropic_provider(
        api_key=KEY, base_url=wire_server.url, stream=False
    ) as provider:
        answer = await provider.complete(user("read a"))
        again = await provider.complete(user("read b"))
    assert answer.content == (TextContent(text="Two calls."),)
    calls = [*answer.tool_calls, *again.tool_calls]
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("t1", "read", {"path": "a"}),
        ("t3", "read", {}),
        ("t2", "read", {"n": 10**20}),
    ]
    # Parsed by Prism from the body's text: a call carries the text's bound; no
    # input, none; a body with a 21-digit integer proves nothing (walked).
    assert [c._text_bound != NO_TEXT_BOUND for c in calls] == [True, False, False]
    info = provider.responses[0]
    assert (info.model, info.response_id, info.stop_reason) == ("test-model", "msg_3", "tool_use")
    assert info.usage == ModelUsage(input_tokens=7)


async def test_a_strict_client_still_has_the_sdk_check_a_whole_answer(
    wire_server: WireServer,
) -> None:
    wire_server.queue_json(whole_message([TOOL_USE], "tool_use"))
    client = anthropic.AsyncAnthropic(
        api_key=KEY, base_url=wire_server.url, _strict_response_validation=True
    )
    provider = AnthropicProvider(client=client, stream=False)
    try:
        answer = await provider.complete(user("search"))
    finally:
        await client.close()
    assert [(c.id, c.arguments) for c in answer.tool_calls] == [("toolu_1", {"q": "trio"})]
    assert answer.tool_calls[0]._text_bound != NO_TEXT_BOUND


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"<html>busy</html>", "not JSON"),
        ([1, 2], "no list of content blocks"),
        ({"content": {"type": "text"}}, "no list of content blocks"),
        ({"content": ["text"]}, "not an object"),
        ({"content": [{"type": "tool_use", "name": "read", "input": {}}]}, "without id or name"),
    ],
)
async def test_a_whole_answer_that_cannot_be_read_is_a_response_error(
    wire_server: WireServer, body: object, words: str
) -> None:
    wire_server.queue_json(body)
    async with open_anthropic_provider(
        api_key=KEY, base_url=wire_server.url, stream=False, max_retries=0
    ) as provider:
        with pytest.raises(ProviderResponseError, match=words):
            await provider.complete(user("read a"))
    assert provider.responses == []


async def test_no_key_and_no_base_url_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY") as caught:
        async with open_anthropic_provider():
            pass  # pragma: no cover
    assert caught.value.option == "api_key"


def whole_message(content: Sequence[Mapping[str, object]], stop_reason: str) -> dict[str, object]:
    return AnthropicMessage.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "test-model",
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 20},
        }
    ).model_dump(mode="json")


SIGNATURE = "EqQBCkYIBxgCKkC" + "s1gnature" * 30
REDACTED = "EmwKAhgBEgy" + "0paque" * 40
THINKING_BLOCK = {"type": "thinking", "thinking": "Search for trio.", "signature": SIGNATURE}
REDACTED_BLOCK = {"type": "redacted_thinking", "data": REDACTED}
TOOL_USE = {
    "type": "tool_use",
    "id": "toolu_1",
    "name": "mcp__docs__search",
    "input": {"q": "trio"},
}


def thinking_then_tool_use() -> Events:
    return [
        start(10),
        *block(
            0,
            {"type": "thinking", "thinking": "", "signature": ""},
            [
                {"type": "thinking_delta", "thinking": "Search "},
                {"type": "thinking_delta", "thinking": "for trio."},
                {"type": "signature_delta", "signature": SIGNATURE},
            ],
        ),
        *block(1, REDACTED_BLOCK, []),
        *tool_block(2, "toolu_1", "mcp__docs__search", ['{"q": "trio"}']),
        *finish("tool_use", 20),
    ]


async def run_with_search(provider: AnthropicProvider, ledger: RunLedger) -> RunResult:
    agent = create_agent(
        model="test-model",
        provider=provider,
        tools=[SEARCH],
        permission=create_rule_permission_policy(allow=["tool:*:execute"]),
        ledger=ledger,
    )
    return await agent.session().run("find trio")


async def test_streamed_thinking_is_sent_back_exactly_on_the_next_turn(
    wire_server: WireServer,
) -> None:
    wire_server.queue_sse(thinking_then_tool_use())
    wire_server.queue_sse(final_text("Found it."))
    events: list[StreamEvent] = []
    ledger = RunLedger()
    async with open_anthropic_provider(
        api_key=KEY, base_url=wire_server.url, thinking_budget=2048, on_event=events.append
    ) as provider:
        result = await run_with_search(provider, ledger)

    first, second = (request.json() for request in wire_server.requests)
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    messages = second["messages"]
    assert isinstance(messages, list)
    # The API rejects a tool-use turn whose thinking is missing or altered.
    assert messages[1] == {
        "role": "assistant",
        "content": [THINKING_BLOCK, REDACTED_BLOCK, TOOL_USE],
    }
    turn = result.messages[1]
    assert isinstance(turn, AssistantMessage)
    assert turn.content == (
        ReasoningContent(text="Search for trio.", provider="anthropic", replay=THINKING_BLOCK),
        ReasoningContent(provider="anthropic", redacted=True, replay=REDACTED_BLOCK),
    )
    thinking = [e.text for e in events if isinstance(e, ModelReasoningDelta)]
    assert thinking == ["Search ", "for trio."]
    shown = repr(turn) + repr(ledger.records)
    assert SIGNATURE not in shown
    assert REDACTED not in shown


async def test_whole_answer_thinking_is_sent_back_exactly(wire_server: WireServer) -> None:
    wire_server.queue_json(whole_message([THINKING_BLOCK, REDACTED_BLOCK, TOOL_USE], "tool_use"))
    wire_server.queue_json(whole_message([{"type": "text", "text": "Found it."}], "end_turn"))
    async with open_anthropic_provider(
        api_key=KEY, base_url=wire_server.url, stream=False
    ) as provider:
        result = await run_with_search(provider, RunLedger())
    messages = wire_server.requests[1].json()["messages"]
    assert isinstance(messages, list)
    assert messages[1]["content"] == [THINKING_BLOCK, REDACTED_BLOCK, TOOL_USE]
    assert result.final.content == (TextContent(text="Found it."),)


async def test_stream_skips_blocks_it_does_not_know(wire_server: WireServer) -> None:
    server_tool: dict[str, object] = {
        "type": "server_tool_use",
        "id": "srv_1",
        "name": "web_search",
        "input": {},
    }
    wire_server.queue_sse(
        [
            start(5),
            *block(0, server_tool, [{"type": "input_json_delta", "partial_json": "{}"}]),
            *text_block(1, ["ny."], first="Sun"),
            *finish("end_turn", 4),
        ]
    )
    texts: list[StreamEvent] = []
    async with open_anthropic_provider(
        api_key=KEY, base_url=wire_server.url, on_event=texts.append
    ) as provider:
        answer = await provider.complete(user("weather"))
    assert answer.content == (TextContent(text="Sunny."),)
    assert answer.tool_calls == ()
    assert [e.text for e in texts if isinstance(e, ModelTextDelta)] == ["Sun", "ny."]
