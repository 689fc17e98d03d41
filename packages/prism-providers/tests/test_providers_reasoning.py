"""Reasoning content: kept on the assistant turn and sent back unchanged on the next one.

Multi-turn agent runs against the loopback wire server; the payloads are built
from the SDKs' own types. Each run asks for a tool, so the second request must
carry the first answer's reasoning exactly as the API sent it (Anthropic
rejects a tool-use turn whose thinking block is missing or altered).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from anthropic.types import Message as AnthropicMessage
from anthropic.types import (
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
)
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseReasoningSummaryTextDeltaEvent,
)

from prism.core import (
    AssistantMessage,
    ReasoningContent,
    RunLedger,
    TextContent,
    ToolDefinition,
    ToolResult,
    create_agent,
    create_rule_permission_policy,
)
from prism.providers import (
    ModelReasoningDelta,
    OpenAIResponsesProvider,
    StreamEvent,
    open_anthropic_provider,
    open_openai_provider,
)

if TYPE_CHECKING:
    from conftest import WireServer
    from pydantic import BaseModel

    from prism.core import JsonObject, Message, ModelProvider, RunResult, ToolExecutionContext

Events = list[tuple[str | None, str]]

SIGNATURE = "EqQBCkYIBxgCKkC" + "s1gnature" * 30
REDACTED = "EmwKAhgBEgy" + "0paque" * 40
ENCRYPTED = "gAAAAABo" + "ciphertext" * 30


def ev(model: BaseModel) -> tuple[str | None, str]:
    data = model.model_dump(mode="json", exclude_none=True)
    return str(data["type"]), json.dumps(data)


async def weather(_args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text("sunny")


WEATHER = ToolDefinition(name="weather", execute=weather)


async def run_twice(provider: ModelProvider, ledger: RunLedger) -> RunResult:
    agent = create_agent(
        model="test-model",
        provider=provider,
        tools=[WEATHER],
        permission=create_rule_permission_policy(allow=["tool:weather:execute"]),
        ledger=ledger,
    )
    return await agent.session().run("weather?")


def assistant(messages: tuple[Message, ...]) -> AssistantMessage:
    first = messages[1]
    assert isinstance(first, AssistantMessage)
    return first


def assert_ledger_holds_no_opaque_data(ledger: RunLedger, *secrets: str) -> None:
    shown = json.dumps([repr(record) for record in ledger.records])
    for secret in secrets:
        assert secret not in shown


# --- Anthropic: thinking and redacted_thinking blocks -------------------------------


def anthropic_block_start(index: int, block: JsonObject) -> tuple[str | None, str]:
    return ev(
        RawContentBlockStartEvent.model_validate(
            {"type": "content_block_start", "index": index, "content_block": block}
        )
    )


def anthropic_delta(index: int, delta: JsonObject) -> tuple[str | None, str]:
    return ev(
        RawContentBlockDeltaEvent.model_validate(
            {"type": "content_block_delta", "index": index, "delta": delta}
        )
    )


def anthropic_start() -> tuple[str | None, str]:
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
                    "usage": {"input_tokens": 10, "output_tokens": 1},
                },
            }
        )
    )


def anthropic_finish(stop_reason: str) -> Events:
    return [
        ev(
            RawMessageDeltaEvent.model_validate(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                    "usage": {"output_tokens": 20},
                }
            )
        ),
        ev(RawMessageStopEvent(type="message_stop")),
    ]


def thinking_then_tool_use() -> Events:
    return [
        anthropic_start(),
        anthropic_block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        anthropic_delta(0, {"type": "thinking_delta", "thinking": "The user wants "}),
        anthropic_delta(0, {"type": "thinking_delta", "thinking": "the weather."}),
        anthropic_delta(0, {"type": "signature_delta", "signature": SIGNATURE}),
        ev(RawContentBlockStopEvent(type="content_block_stop", index=0)),
        anthropic_block_start(1, {"type": "redacted_thinking", "data": REDACTED}),
        ev(RawContentBlockStopEvent(type="content_block_stop", index=1)),
        anthropic_block_start(
            2, {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}
        ),
        anthropic_delta(2, {"type": "input_json_delta", "partial_json": "{}"}),
        ev(RawContentBlockStopEvent(type="content_block_stop", index=2)),
        *anthropic_finish("tool_use"),
    ]


def anthropic_final() -> Events:
    return [
        anthropic_start(),
        anthropic_block_start(0, {"type": "text", "text": ""}),
        anthropic_delta(0, {"type": "text_delta", "text": "Sunny."}),
        ev(RawContentBlockStopEvent(type="content_block_stop", index=0)),
        *anthropic_finish("end_turn"),
    ]


THINKING_BLOCK: JsonObject = {
    "type": "thinking",
    "thinking": "The user wants the weather.",
    "signature": SIGNATURE,
}
REDACTED_BLOCK: JsonObject = {"type": "redacted_thinking", "data": REDACTED}
TOOL_USE: JsonObject = {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}


async def test_anthropic_streamed_thinking_is_sent_back_exactly(wire_server: WireServer) -> None:
    wire_server.queue_sse(thinking_then_tool_use())
    wire_server.queue_sse(anthropic_final())
    events: list[StreamEvent] = []
    ledger = RunLedger()
    async with open_anthropic_provider(
        api_key="k",
        base_url=wire_server.url,
        thinking_budget=2048,
        on_event=events.append,
        max_retries=0,
    ) as provider:
        result = await run_twice(provider, ledger)

    first, second = (request.json() for request in wire_server.requests)
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    messages = second["messages"]
    assert isinstance(messages, list)
    assert messages[1] == {
        "role": "assistant",
        "content": [THINKING_BLOCK, REDACTED_BLOCK, TOOL_USE],
    }
    turn = assistant(result.messages)
    assert turn.content == (
        ReasoningContent(
            text="The user wants the weather.", provider="anthropic", replay=THINKING_BLOCK
        ),
        ReasoningContent(provider="anthropic", redacted=True, replay=REDACTED_BLOCK),
    )
    assert result.final.content == (TextContent(text="Sunny."),)
    reasoning = [e.text for e in events if isinstance(e, ModelReasoningDelta)]
    assert reasoning == ["The user wants ", "the weather."]
    assert SIGNATURE not in repr(turn)
    assert REDACTED not in repr(turn)
    assert_ledger_holds_no_opaque_data(ledger, SIGNATURE, REDACTED)


async def test_anthropic_whole_answer_thinking_is_sent_back_exactly(
    wire_server: WireServer,
) -> None:
    def answer(content: list[JsonObject], stop_reason: str) -> JsonObject:
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

    wire_server.queue_json(answer([THINKING_BLOCK, REDACTED_BLOCK, TOOL_USE], "tool_use"))
    wire_server.queue_json(answer([{"type": "text", "text": "Sunny."}], "end_turn"))
    async with open_anthropic_provider(
        api_key="k", base_url=wire_server.url, stream=False, max_retries=0
    ) as provider:
        result = await run_twice(provider, RunLedger())

    second = wire_server.requests[1].json()
    messages = second["messages"]
    assert isinstance(messages, list)
    assert messages[1]["content"] == [THINKING_BLOCK, REDACTED_BLOCK, TOOL_USE]
    assert result.final.content == (TextContent(text="Sunny."),)


# --- OpenAI Responses: reasoning items ------------------------------------------------


def reasoning_item(*, encrypted: bool) -> JsonObject:
    item: JsonObject = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [
            {"type": "summary_text", "text": "Look up the weather."},
            {"type": "summary_text", "text": "Then answer."},
        ],
    }
    if encrypted:
        item["encrypted_content"] = ENCRYPTED
    return item


def responses_answer(output: list[JsonObject]) -> Response:
    return Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1,
            "model": "test-model",
            "status": "completed",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }
    )


CALL: JsonObject = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "weather",
    "arguments": "{}",
    "status": "completed",
}
SUNNY: JsonObject = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "Sunny.", "annotations": []}],
}


def completed(output: list[JsonObject], *, summary_delta: bool = False) -> Events:
    events: Events = []
    if summary_delta:
        events.append(
            ev(
                ResponseReasoningSummaryTextDeltaEvent.model_validate(
                    {
                        "type": "response.reasoning_summary_text.delta",
                        "delta": "Look up the weather.",
                        "item_id": "rs_1",
                        "output_index": 0,
                        "summary_index": 0,
                        "sequence_number": 1,
                    }
                )
            )
        )
    events.append(
        ev(
            ResponseCompletedEvent.model_validate(
                {
                    "type": "response.completed",
                    "sequence_number": 2,
                    "response": responses_answer(output).model_dump(mode="json"),
                }
            )
        )
    )
    return events


async def test_responses_reasoning_item_is_sent_back_exactly(wire_server: WireServer) -> None:
    item = reasoning_item(encrypted=True)
    wire_server.queue_sse(completed([item, CALL], summary_delta=True))
    wire_server.queue_sse(completed([SUNNY]))
    events: list[StreamEvent] = []
    ledger = RunLedger()
    async with open_openai_provider(
        api="responses",
        api_key="k",
        base_url=wire_server.url,
        reasoning_effort="low",
        on_event=events.append,
        max_retries=0,
    ) as provider:
        result = await run_twice(provider, ledger)

    first, second = (request.json() for request in wire_server.requests)
    assert first["reasoning"] == {"effort": "low", "summary": "auto"}
    assert first["include"] == ["reasoning.encrypted_content"]
    items = second["input"]
    assert isinstance(items, list)
    assert items[1] == item
    assert items[2] == {
        "type": "function_call",
        "call_id": "call_1",
        "name": "weather",
        "arguments": "{}",
    }
    turn = assistant(result.messages)
    assert turn.content == (
        ReasoningContent(
            text="Look up the weather.\n\nThen answer.", provider="openai", replay=item
        ),
    )
    assert [e.text for e in events if isinstance(e, ModelReasoningDelta)] == [
        "Look up the weather."
    ]
    assert ENCRYPTED not in repr(turn)
    assert_ledger_holds_no_opaque_data(ledger, ENCRYPTED)


async def test_unstored_reasoning_without_encrypted_content_is_not_sent_back(
    wire_server: WireServer,
) -> None:
    wire_server.queue_json(
        responses_answer([reasoning_item(encrypted=False), CALL]).model_dump(mode="json")
    )
    wire_server.queue_json(responses_answer([SUNNY]).model_dump(mode="json"))
    async with open_openai_provider(
        api="responses", api_key="k", base_url=wire_server.url, stream=False, max_retries=0
    ) as provider:
        result = await run_twice(provider, RunLedger())

    first, second = (request.json() for request in wire_server.requests)
    assert "include" not in first
    assert "reasoning" not in first
    items = second["input"]
    assert isinstance(items, list)
    assert [entry.get("type") for entry in items] == [None, "function_call", "function_call_output"]
    # Still shown: the summary is in the transcript.
    assert assistant(result.messages).content[0] == ReasoningContent(
        text="Look up the weather.\n\nThen answer.",
        provider="openai",
        replay=reasoning_item(encrypted=False),
    )


async def test_stored_responses_send_reasoning_back_by_id(wire_server: WireServer) -> None:
    wire_server.queue_json(
        responses_answer([reasoning_item(encrypted=False), CALL]).model_dump(mode="json")
    )
    wire_server.queue_json(responses_answer([SUNNY]).model_dump(mode="json"))
    async with open_openai_provider(
        api="responses", api_key="k", base_url=wire_server.url, stream=False, max_retries=0
    ) as provider:
        assert isinstance(provider, OpenAIResponsesProvider)
        provider.store = True
        provider.reasoning_effort = "high"
        await run_twice(provider, RunLedger())

    first, second = (request.json() for request in wire_server.requests)
    assert first["store"] is True
    assert "include" not in first
    items = second["input"]
    assert isinstance(items, list)
    assert items[1] == reasoning_item(encrypted=False)


# --- Chat Completions: reasoning_content is shown, never sent -------------------------


def chunk(delta: JsonObject, finish: str | None = None) -> tuple[str | None, str]:
    data = ChatCompletionChunk.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "test-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    ).model_dump(mode="json", exclude_none=True)
    return None, json.dumps(data)


async def test_chat_reasoning_content_is_kept_for_display_and_never_sent(
    wire_server: WireServer,
) -> None:
    call: JsonObject = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "weather", "arguments": "{}"},
    }
    wire_server.queue_sse(
        [
            chunk({"role": "assistant", "reasoning_content": "Need the "}),
            chunk({"reasoning_content": "weather tool."}),
            chunk({"tool_calls": [call]}, "tool_calls"),
            (None, "[DONE]"),
        ]
    )
    wire_server.queue_sse([chunk({"content": "Sunny."}, "stop"), (None, "[DONE]")])
    events: list[StreamEvent] = []
    async with open_openai_provider(
        api_key="k", base_url=wire_server.url, on_event=events.append, max_retries=0
    ) as provider:
        result = await run_twice(provider, RunLedger())

    assert assistant(result.messages).content == (ReasoningContent(text="Need the weather tool."),)
    assert [e.text for e in events if isinstance(e, ModelReasoningDelta)] == [
        "Need the ",
        "weather tool.",
    ]
    second = wire_server.requests[1].body.decode()
    assert "weather tool." not in second
    assert "reasoning" not in second
