"""OpenAIResponsesProvider against a loopback server speaking the Responses API (SSE, JSON).

Events and responses are built from the SDK's own types (``Response``,
``ResponseOutputItemAddedEvent``, ...), so they stay faithful to the wire format.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
import trio
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseOutputItemAddedEvent,
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseTextDeltaEvent,
)

from prism.core import (
    AbortController,
    AssistantMessage,
    Limits,
    ReasoningContent,
    RunOptions,
    SingleShotLoop,
    TextContent,
    ToolDefinition,
    ToolResult,
    create_agent,
    create_rule_permission_policy,
)
from prism.core.ledger import RunLedger
from prism.providers import (
    ModelReasoningDelta,
    ModelTextDelta,
    ModelToolCallDelta,
    ModelUsage,
    OpenAIResponsesProvider,
    ProviderAPIError,
    StreamEvent,
    open_openai_provider,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from conftest import WireServer
    from pydantic import BaseModel

    from prism.core import JsonObject, ModelProvider, RunResult, ToolExecutionContext

Events = list[tuple[str | None, str]]


def ev(model: BaseModel) -> tuple[str | None, str]:
    data = model.model_dump(mode="json", exclude_none=True)
    return str(data["type"]), json.dumps(data)


def response(output: Sequence[Mapping[str, object]], *, status: str = "completed") -> Response:
    return Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1,
            "model": "test-model",
            "status": status,
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": 30,
                "input_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 0},
                "output_tokens": 9,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 39,
            },
        }
    )


def function_call(call_id: str, args: str) -> dict[str, object]:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": "mcp__docs__search",
        "arguments": args,
        "status": "completed",
    }


def message(text: str) -> dict[str, object]:
    return {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def parallel_calls() -> Events:
    events: Events = []
    sequence = 0
    for index, (call_id, args) in enumerate([("c1", '{"q": "trio"}'), ("c2", '{"q": "attrs"}')]):
        added = function_call(call_id, "")
        events.append(
            ev(
                ResponseOutputItemAddedEvent.model_validate(
                    {
                        "type": "response.output_item.added",
                        "output_index": index,
                        "sequence_number": (sequence := sequence + 1),
                        "item": added,
                    }
                )
            )
        )
        events.append(
            ev(
                ResponseFunctionCallArgumentsDeltaEvent.model_validate(
                    {
                        "type": "response.function_call_arguments.delta",
                        "item_id": f"fc_{call_id}",
                        "output_index": index,
                        "sequence_number": (sequence := sequence + 1),
                        "delta": args,
                    }
                )
            )
        )
    final = response([function_call("c1", '{"q": "trio"}'), function_call("c2", '{"q": "attrs"}')])
    events.append(
        ev(
            ResponseCompletedEvent(
                type="response.completed", sequence_number=sequence + 1, response=final
            )
        )
    )
    return events


def text(answer: str) -> Events:
    return [
        ev(
            ResponseTextDeltaEvent.model_validate(
                {
                    "type": "response.output_text.delta",
                    "item_id": "msg_1",
                    "output_index": 0,
                    "content_index": 0,
                    "sequence_number": 1,
                    "delta": answer,
                    "logprobs": [],
                }
            )
        ),
        ev(
            ResponseCompletedEvent(
                type="response.completed", sequence_number=2, response=response([message(answer)])
            )
        ),
    ]


async def search(args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    await trio.lowlevel.checkpoint()
    return ToolResult.text(f"results for {args['q']}")


SEARCH = ToolDefinition(
    name="mcp:docs:search",
    execute=search,
    parameters={"type": "object", "properties": {"q": {"type": "string"}}},
)


async def test_multi_turn_run_with_parallel_function_calls(wire_server: WireServer) -> None:
    wire_server.queue_sse(parallel_calls())
    wire_server.queue_sse(text("Found both."))
    events: list[StreamEvent] = []
    ledger = RunLedger()
    async with open_openai_provider(
        api="responses",
        api_key="k",
        base_url=f"{wire_server.url}/v1",
        instructions="Be brief.",
        on_event=events.append,
    ) as provider:
        assert isinstance(provider, OpenAIResponsesProvider)
        agent = create_agent(
            model="test-model",
            provider=provider,
            tools=[SEARCH],
            permission=create_rule_permission_policy(allow=["tool:*:execute"]),
            loop=SingleShotLoop(concurrency=2),
            limits=Limits(max_tool_rounds=2),
            ledger=ledger,
        )
        result = await agent.session().run("find both")

    assert result.final.content == (TextContent(text="Found both."),)
    assert sorted((r.call_id, r.status) for r in ledger.records) == [("c1", "ok"), ("c2", "ok")]
    assert wire_server.requests[0].path == "/v1/responses"
    first, second = (r.json() for r in wire_server.requests)
    assert first["instructions"] == "Be brief."
    assert first["store"] is False
    assert first["tools"] == [
        {
            "type": "function",
            "name": "mcp__docs__search",
            "parameters": SEARCH.parameters,
            "strict": False,
        }
    ]
    items = second["input"]
    assert isinstance(items, list)
    assert [i.get("type", i.get("role")) for i in items] == [
        "user",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
    ]
    assert items[3] == {
        "type": "function_call_output",
        "call_id": "c1",
        "output": "results for trio",
    }
    assert (provider.responses[0].stop_reason, provider.responses[0].usage) == (
        "completed",
        ModelUsage(input_tokens=30, output_tokens=9, cache_read_tokens=4),
    )
    assert "".join(e.arguments_delta for e in events if isinstance(e, ModelToolCallDelta)) == (
        '{"q": "trio"}{"q": "attrs"}'
    )
    assert [e.text for e in events if isinstance(e, ModelTextDelta)] == ["Found both."]


async def test_abort_mid_stream_closes_the_http_request(wire_server: WireServer) -> None:
    wire_server.queue_sse(text("Thinking")[:1], hold_open=True)
    controller = AbortController()
    async with (
        open_openai_provider(api="responses", api_key="k", base_url=f"{wire_server.url}/v1") as p,
        trio.open_nursery() as nursery,
    ):
        session = create_agent(model="test-model", provider=p).session()
        outcome: list[object] = []

        async def run() -> None:
            outcome.append(await session.run("think", RunOptions(signal=controller.signal)))

        nursery.start_soon(run)
        await wire_server.streaming.wait()
        controller.abort("stop")
        await wire_server.client_left.wait()
    assert getattr(outcome[0], "aborted", None) is True


async def test_failed_response_and_error_status_are_api_errors(wire_server: WireServer) -> None:
    failed = response([], status="failed").model_dump(mode="json", exclude_none=True)
    failed["error"] = {"code": "server_error", "message": "The model crashed."}
    wire_server.queue_json(
        Response.model_validate(failed).model_dump(mode="json", exclude_none=True)
    )
    wire_server.queue_json(
        {"error": {"message": "Slow down", "code": "rate_limit_exceeded"}}, status=429
    )
    async with open_openai_provider(
        api="responses", api_key="k", base_url=f"{wire_server.url}/v1", stream=False, max_retries=0
    ) as provider:
        agent = create_agent(model="test-model", provider=provider)
        with pytest.raises(ProviderAPIError, match=r"server_error.*The model crashed"):
            await agent.session().run("one")
        with pytest.raises(ProviderAPIError) as caught:
            await agent.session().run("two")
    assert caught.value.rate_limited


ENCRYPTED = "gAAAAABo" + "ciphertext" * 30


def reasoning_item(*, encrypted: bool) -> JsonObject:
    item: JsonObject = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [
            {"type": "summary_text", "text": "Search for trio."},
            {"type": "summary_text", "text": "Then answer."},
        ],
    }
    if encrypted:
        item["encrypted_content"] = ENCRYPTED
    return item


def reasoning_then_call(*, encrypted: bool) -> Events:
    summary = ResponseReasoningSummaryTextDeltaEvent.model_validate(
        {
            "type": "response.reasoning_summary_text.delta",
            "delta": "Search for trio.",
            "item_id": "rs_1",
            "output_index": 0,
            "summary_index": 0,
            "sequence_number": 1,
        }
    )
    final = response([reasoning_item(encrypted=encrypted), function_call("c1", '{"q": "trio"}')])
    return [
        ev(summary),
        ev(ResponseCompletedEvent(type="response.completed", sequence_number=2, response=final)),
    ]


async def run_with_search(provider: ModelProvider) -> RunResult:
    agent = create_agent(
        model="test-model",
        provider=provider,
        tools=[SEARCH],
        permission=create_rule_permission_policy(allow=["tool:*:execute"]),
    )
    return await agent.session().run("find trio")


def summary(item: JsonObject) -> ReasoningContent:
    return ReasoningContent(text="Search for trio.\n\nThen answer.", provider="openai", replay=item)


async def test_reasoning_item_is_sent_back_exactly_on_the_next_turn(
    wire_server: WireServer,
) -> None:
    wire_server.queue_sse(reasoning_then_call(encrypted=True))
    wire_server.queue_sse(text("Found it."))
    events: list[StreamEvent] = []
    async with open_openai_provider(
        api="responses",
        api_key="k",
        base_url=f"{wire_server.url}/v1",
        reasoning_effort="low",
        on_event=events.append,
    ) as provider:
        result = await run_with_search(provider)

    first, second = (request.json() for request in wire_server.requests)
    assert first["reasoning"] == {"effort": "low", "summary": "auto"}
    assert first["include"] == ["reasoning.encrypted_content"]
    items = second["input"]
    assert isinstance(items, list)
    assert items[1] == reasoning_item(encrypted=True)
    assert items[2]["type"] == "function_call"
    turn = result.messages[1]
    assert isinstance(turn, AssistantMessage)
    assert turn.content == (summary(reasoning_item(encrypted=True)),)
    assert [e.text for e in events if isinstance(e, ModelReasoningDelta)] == ["Search for trio."]
    assert ENCRYPTED not in repr(turn) + repr(result.records)


@pytest.mark.parametrize("store", [False, True])
async def test_reasoning_without_encrypted_content_goes_back_only_to_a_store(
    wire_server: WireServer, store: bool
) -> None:
    wire_server.queue_sse(reasoning_then_call(encrypted=False))
    wire_server.queue_sse(text("Found it."))
    async with open_openai_provider(
        api="responses", api_key="k", base_url=f"{wire_server.url}/v1", reasoning_effort="high"
    ) as provider:
        assert isinstance(provider, OpenAIResponsesProvider)
        provider.store = store
        result = await run_with_search(provider)

    first, second = (request.json() for request in wire_server.requests)
    assert first["store"] is store
    # Only a stateless request asks for the encrypted reasoning it must send back.
    assert ("include" in first) is not store
    items = second["input"]
    assert isinstance(items, list)
    sent = [item for item in items if item.get("type") == "reasoning"]
    # An unstored item's id alone would be an error; a stored one is found by it.
    assert sent == ([reasoning_item(encrypted=False)] if store else [])
    turn = result.messages[1]
    assert isinstance(turn, AssistantMessage)
    assert turn.content == (summary(reasoning_item(encrypted=False)),)
