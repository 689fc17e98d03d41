"""OpenAIChatProvider against a loopback server speaking Chat Completions (JSON and SSE).

Payloads are built from the SDK's own types (``ChatCompletionChunk``,
``ChatCompletion``), so they stay faithful to the wire format the SDK parses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
import trio
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from prism.core import (
    AbortController,
    AssistantMessage,
    ConfigurationError,
    Limits,
    ModelRequest,
    ReasoningContent,
    RunOptions,
    SingleShotLoop,
    TextContent,
    ToolDefinition,
    ToolResult,
    ToolResultMessage,
    UserMessage,
    create_agent,
    create_rule_permission_policy,
)
from prism.core.ledger import RunLedger
from prism.providers import (
    ModelReasoningDelta,
    ModelResponseFinished,
    ModelTextDelta,
    ModelToolCallDelta,
    ModelUsage,
    ProviderAPIError,
    ProviderConnectionError,
    StreamEvent,
    open_openai_provider,
)

if TYPE_CHECKING:
    from conftest import WireServer

    from prism.core import JsonObject, ToolExecutionContext

KEY = "sk-test-secret-key-0123456789"


def chunk(
    delta: dict[str, object],
    *,
    finish: str | None = None,
    usage: dict[str, int] | None = None,
    choices: bool = True,
    index: int = 0,
) -> tuple[None, str]:
    value = ChatCompletionChunk.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "test-model",
            "choices": [{"index": index, "delta": delta, "finish_reason": finish}]
            if choices
            else [],
            "usage": usage,
        }
    )
    return None, value.model_dump_json(exclude_none=True)


DONE = (None, "[DONE]")


def tool_fragment(
    index: int, *, call_id: str | None = None, name: str | None = None, args: str = ""
) -> dict[str, object]:
    function: dict[str, object] = {"arguments": args}
    if name is not None:
        function["name"] = name
    fragment: dict[str, object] = {"index": index, "function": function}
    if call_id is not None:
        fragment |= {"id": call_id, "type": "function"}
    return {"tool_calls": [fragment]}


def usage(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def two_parallel_calls() -> list[tuple[str | None, str]]:
    """Two search calls whose fragments interleave, as OpenAI streams them."""
    return [
        chunk({"role": "assistant", "content": None}),
        chunk(tool_fragment(0, call_id="call_a", name="mcp__docs__search", args='{"q":')),
        chunk(tool_fragment(1, call_id="call_b", name="mcp__docs__search", args='{"q":"at')),
        chunk(tool_fragment(0, args='"trio"}')),
        chunk(tool_fragment(1, args='trs"}')),
        chunk({}, finish="tool_calls"),
        chunk({}, usage=usage(50, 20), choices=False),
        DONE,
    ]


def text_answer(text: str) -> list[tuple[str | None, str]]:
    half = len(text) // 2
    return [
        chunk({"role": "assistant", "content": text[:half]}),
        chunk({"content": text[half:]}),
        chunk({}, finish="stop"),
        chunk({}, usage=usage(80, 5), choices=False),
        DONE,
    ]


async def search(args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    await trio.lowlevel.checkpoint()
    return ToolResult.text(f"results for {args['q']}")


SEARCH = ToolDefinition(
    name="mcp:docs:search",
    execute=search,
    description="Search the docs",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)


async def test_multi_turn_run_with_parallel_tool_calls(wire_server: WireServer) -> None:
    wire_server.queue_sse(two_parallel_calls())
    wire_server.queue_sse(text_answer("Found trio and attrs."))
    events: list[StreamEvent] = []
    ledger = RunLedger()
    async with open_openai_provider(
        api_key=KEY, base_url=f"{wire_server.url}/v1", on_event=events.append, max_retries=0
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

    assert result.final.content == (TextContent(text="Found trio and attrs."),)
    assert result.rounds == 1
    calls = result.messages[1]
    assert isinstance(calls, AssistantMessage)
    assert [(c.id, c.name, c.arguments) for c in calls.tool_calls] == [
        ("call_a", "mcp__docs__search", {"q": "trio"}),
        ("call_b", "mcp__docs__search", {"q": "attrs"}),
    ]
    assert [(r.call_id, r.tool_name, r.status) for r in ledger.records] == [
        ("call_a", "mcp:docs:search", "ok"),
        ("call_b", "mcp:docs:search", "ok"),
    ] or [(r.call_id, r.tool_name, r.status) for r in ledger.records] == [
        ("call_b", "mcp:docs:search", "ok"),
        ("call_a", "mcp:docs:search", "ok"),
    ]
    # What the second request carried: the assistant's calls and both results, in order.
    second = wire_server.requests[1].json()
    assert second["model"] == "test-model"
    assert second["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "mcp__docs__search",
                "parameters": SEARCH.parameters,
                "description": "Search the docs",
            },
        }
    ]
    messages = second["messages"]
    assert isinstance(messages, list)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool"]
    assert [m.get("tool_call_id") for m in messages[2:]] == ["call_a", "call_b"]
    assert messages[2]["content"] == "results for trio"
    # Usage and stop reasons are kept per response.
    assert [(r.stop_reason, r.usage) for r in provider.responses] == [
        ("tool_calls", ModelUsage(input_tokens=50, output_tokens=20)),
        ("stop", ModelUsage(input_tokens=80, output_tokens=5)),
    ]
    assert provider.usage == ModelUsage(input_tokens=130, output_tokens=25)
    # Streaming reached the sink as it happened.
    text = "".join(e.text for e in events if isinstance(e, ModelTextDelta))
    assert text == "Found trio and attrs."
    fragments = [e for e in events if isinstance(e, ModelToolCallDelta)]
    assert "".join(e.arguments_delta for e in fragments if e.index == 1) == '{"q":"attrs"}'
    assert sum(isinstance(e, ModelResponseFinished) for e in events) == 2


async def test_a_refused_call_is_answered_and_the_run_goes_on(wire_server: WireServer) -> None:
    wire_server.queue_sse(two_parallel_calls())
    wire_server.queue_sse(text_answer("I may not search."))
    ledger = RunLedger()
    async with open_openai_provider(api_key=KEY, base_url=f"{wire_server.url}/v1") as provider:
        agent = create_agent(
            model="test-model",
            provider=provider,
            tools=[SEARCH],
            permission=create_rule_permission_policy(deny=["tool:mcp:docs:search:execute"]),
            ledger=ledger,
        )
        result = await agent.session().run("search")

    assert [(r.status, r.blocked_reason) for r in ledger.records] == [
        ("blocked", "permission_denied"),
        ("blocked", "permission_denied"),
    ]
    results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert all(m.result.is_error for m in results)
    sent = wire_server.requests[1].json()["messages"]
    assert isinstance(sent, list)
    assert "permission denied" in sent[2]["content"]
    assert result.final.content == (TextContent(text="I may not search."),)


async def test_abort_mid_stream_closes_the_http_request(wire_server: WireServer) -> None:
    wire_server.queue_sse([chunk({"role": "assistant", "content": "Let me th"})], hold_open=True)
    controller = AbortController()
    events: list[StreamEvent] = []
    async with (
        open_openai_provider(
            api_key=KEY, base_url=f"{wire_server.url}/v1", on_event=events.append
        ) as provider,
        trio.open_nursery() as nursery,
    ):
        agent = create_agent(model="test-model", provider=provider, tools=[SEARCH])
        session = agent.session()
        outcome: list[object] = []

        async def run() -> None:
            outcome.append(await session.run("think", RunOptions(signal=controller.signal)))

        nursery.start_soon(run)
        await wire_server.streaming.wait()
        controller.abort("user pressed Ctrl-C")
        await wire_server.client_left.wait()

    (result,) = outcome
    assert getattr(result, "aborted", None) is True
    assert [e.text for e in events if isinstance(e, ModelTextDelta)] == ["Let me th"]
    assert provider.responses == []
    assert isinstance(session.messages[-1], UserMessage)


async def test_rate_limit_becomes_a_clear_run_error(wire_server: WireServer) -> None:
    wire_server.queue_json(
        {
            "error": {
                "message": "Rate limit reached for test-model",
                "type": "requests",
                "code": "rate_limit_exceeded",
            }
        },
        status=429,
        headers=(("x-request-id", "req_123"),),
    )
    async with open_openai_provider(
        api_key=KEY, base_url=f"{wire_server.url}/v1", max_retries=0
    ) as provider:
        agent = create_agent(model="test-model", provider=provider)
        with pytest.raises(ProviderAPIError) as caught:
            await agent.session().run("hi")

    error = caught.value
    assert str(error) == (
        "openai API error 429 (rate_limit_exceeded): Rate limit reached for test-model"
    )
    assert (error.status_code, error.rate_limited, error.request_id) == (429, True, "req_123")
    assert KEY not in str(error)
    assert KEY not in repr(provider)


async def test_the_sdk_retries_as_configured(wire_server: WireServer) -> None:
    wire_server.queue_json(
        {"error": {"message": "overloaded"}}, status=503, headers=(("retry-after-ms", "0"),)
    )
    wire_server.queue_sse(text_answer("ok"))
    async with open_openai_provider(
        api_key=KEY, base_url=f"{wire_server.url}/v1", max_retries=1
    ) as provider:
        result = await provider.complete(
            ModelRequest(
                model="test-model", messages=(UserMessage(content=(TextContent(text="hi"),)),)
            )
        )
    assert result.content == (TextContent(text="ok"),)
    assert len(wire_server.requests) == 2


async def test_unreachable_server_is_a_connection_error() -> None:
    # A port that was just free: nothing listens there.
    with trio.socket.socket() as sock:
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with open_openai_provider(
        api_key=KEY, base_url=f"http://127.0.0.1:{port}/v1", max_retries=0
    ) as provider:
        agent = create_agent(model="test-model", provider=provider)
        with pytest.raises(ProviderConnectionError, match="openai API unreachable"):
            await agent.session().run("hi")


async def test_key_comes_from_the_environment_and_is_sent_as_bearer(
    wire_server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    wire_server.queue_sse(text_answer("hi"))
    async with open_openai_provider(base_url=f"{wire_server.url}/v1") as provider:
        await provider.complete(
            ModelRequest(model="m", messages=(UserMessage(content=(TextContent(text="x"),)),))
        )
    assert wire_server.requests[0].headers["authorization"] == f"Bearer {KEY}"


async def test_no_key_and_no_base_url_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        async with open_openai_provider():
            pass  # pragma: no cover


async def test_non_streaming_answer_with_tool_calls(wire_server: WireServer) -> None:
    completion = ChatCompletion.model_validate(
        {
            "id": "chatcmpl-2",
            "object": "chat.completion",
            "created": 1,
            "model": "test-model",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "search", "arguments": '{"q": "x"}'},
                            },
                            {
                                "id": "c2",
                                "type": "function",
                                "function": {"name": "search", "arguments": "not json"},
                            },
                        ],
                    },
                }
            ],
            "usage": usage(10, 3),
        }
    )
    wire_server.queue_json(completion.model_dump(mode="json", exclude_none=True))
    async with open_openai_provider(
        api_key=KEY, base_url=f"{wire_server.url}/v1", stream=False
    ) as provider:
        answer = await provider.complete(
            ModelRequest(model="m", messages=(UserMessage(content=(TextContent(text="x"),)),))
        )
    assert [(c.id, c.arguments) for c in answer.tool_calls] == [
        ("c1", {"q": "x"}),
        ("c2", "not json"),
    ]
    assert provider.responses[0].usage == ModelUsage(input_tokens=10, output_tokens=3)
    assert "stream" not in wire_server.requests[0].json()


async def test_reasoning_content_is_kept_for_display_and_never_sent(
    wire_server: WireServer,
) -> None:
    """Compatible servers (vLLM, llama.cpp) stream ``reasoning_content``; Chat takes none back."""
    wire_server.queue_sse(
        [
            chunk({"role": "assistant", "reasoning_content": "Need the "}),
            chunk({"reasoning_content": "search tool."}),
            chunk({"content": "another choice"}, index=1),
            chunk(tool_fragment(0, call_id="call_a", name="mcp__docs__search", args='{"q":"t"}')),
            chunk({}, finish="tool_calls"),
            DONE,
        ]
    )
    wire_server.queue_sse(text_answer("Found."))
    events: list[StreamEvent] = []
    async with open_openai_provider(
        api_key=KEY, base_url=f"{wire_server.url}/v1", on_event=events.append, include_usage=False
    ) as provider:
        agent = create_agent(
            model="test-model",
            provider=provider,
            tools=[SEARCH],
            permission=create_rule_permission_policy(allow=["tool:*:execute"]),
        )
        result = await agent.session().run("search")

    turn = result.messages[1]
    assert isinstance(turn, AssistantMessage)
    assert turn.content == (ReasoningContent(text="Need the search tool."),)
    thinking = [e.text for e in events if isinstance(e, ModelReasoningDelta)]
    assert thinking == ["Need the ", "search tool."]
    first, second = (request.body.decode() for request in wire_server.requests)
    assert "stream_options" not in first
    assert "search tool." not in second
    assert "another choice" not in second


async def test_an_async_stream_sink_is_awaited_in_order_on_trio(
    wire_server: WireServer, caplog: pytest.LogCaptureFixture
) -> None:
    # The sink yields to trio before it takes each event: only a sink awaited
    # to its end, event by event, has taken them all, in order, when complete()
    # returns (an awaitable left unawaited would fail the test as a warning).
    taken: list[StreamEvent] = []

    async def sink(event: StreamEvent) -> None:
        await trio.lowlevel.checkpoint()
        taken.append(event)
        if isinstance(event, ModelToolCallDelta):
            raise RuntimeError("sink bug")  # logged; the response goes on

    wire_server.queue_sse(
        [
            chunk({"role": "assistant", "content": "Hel"}),
            chunk({"content": "lo"}),
            chunk(tool_fragment(0, call_id="c1", name="search", args="{}")),
            chunk({}, finish="tool_calls"),
            DONE,
        ]
    )
    async with (
        open_openai_provider(
            api_key=KEY, base_url=f"{wire_server.url}/v1", on_event=sink, max_retries=0
        ) as provider,
    ):
        answer = await provider.complete(
            ModelRequest(
                model="test-model", messages=(UserMessage(content=(TextContent(text="hi"),)),)
            )
        )
        # Every event, the last one too, was taken before complete() returned.
        assert [type(e).__name__ for e in taken] == [
            "ModelTextDelta",
            "ModelTextDelta",
            "ModelToolCallDelta",
            "ModelResponseFinished",
        ]
    assert [e.text for e in taken if isinstance(e, ModelTextDelta)] == ["Hel", "lo"]
    assert answer.content == (TextContent(text="Hello"),)
    assert [c.id for c in answer.tool_calls] == ["c1"]
    assert "a stream event sink raised on ModelToolCallDelta" in caplog.text
