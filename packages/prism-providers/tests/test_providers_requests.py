"""What each provider sends for a rich transcript, and how odd answers and failures end.

One transcript with every kind of content (images, resources, links, reasoning
from another API, arguments that are not JSON, an error result, an empty turn)
goes to each provider with every request option set; the loopback server
records the request. Answers and failures are built from the SDKs' own types.
"""

from __future__ import annotations

import json
import sys
from functools import partial
from typing import TYPE_CHECKING

import anthropic
import openai
import pytest
import trio
from openai.types.chat import ChatCompletion
from openai.types.responses import Response, ResponseErrorEvent, ResponseOutputItemAddedEvent

from prism.core import (
    AssistantMessage,
    ImageContent,
    ModelRequest,
    ReasoningContent,
    ResourceContent,
    ResourceLink,
    TextContent,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from prism.providers import (
    AnthropicProvider,
    OpenAIChatProvider,
    OpenAIResponsesProvider,
    ProviderAPIError,
    ProviderConnectionError,
    ProviderNotInstalledError,
    ProviderResponseError,
    open_anthropic_provider,
    open_openai_provider,
    open_provider,
)

if TYPE_CHECKING:
    from conftest import WireServer
    from pydantic import BaseModel

    from prism.core import JsonObject, JsonValue, ModelProvider

IMAGE = ImageContent(data="aGk=", mime_type="image/png")
TRANSCRIPT = (
    UserMessage(
        content=(
            TextContent(text="Look:"),
            IMAGE,
            ResourceContent(uri="file:///notes.md", mime_type="text/markdown", text="# Notes"),
            ResourceContent(uri="file:///data.bin", blob="AAE="),
            ResourceLink(uri="file:///later.md", name="later"),
        )
    ),
    AssistantMessage(
        content=(
            ReasoningContent(text="from elsewhere", provider="elsewhere", replay={"x": 1}),
            TextContent(text="Checking."),
        ),
        tool_calls=(
            ToolCall(id="c1", name="read", arguments="not json"),
            ToolCall(id="c2", name="read", arguments=["a", "list"]),
        ),
    ),
    ToolResultMessage(call_id="c1", tool_name="read", result=ToolResult.error("no such file")),
    ToolResultMessage(
        call_id="c2", tool_name="read", result=ToolResult(content=(TextContent(text="a"), IMAGE))
    ),
    AssistantMessage(),
    UserMessage(content=(TextContent(text="go on"),)),
)
TOOLS = (
    ToolSpec(name="read", description="Read a file", parameters={"type": "object"}),
    ToolSpec(name="list"),
)
REQUEST = ModelRequest(model="test-model", messages=TRANSCRIPT, tools=TOOLS)


def chat_answer(**changes: object) -> JsonObject:
    answer: JsonObject = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "test-model",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "fine"},
            }
        ],
    }
    answer.update(changes)  # type: ignore[arg-type]
    return ChatCompletion.model_validate(answer).model_dump(mode="json", exclude_none=True)


def responses_answer(output: list[JsonValue], **changes: object) -> JsonObject:
    answer: JsonObject = {
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
    answer.update(changes)  # type: ignore[arg-type]
    return Response.model_validate(answer).model_dump(mode="json")


def anthropic_answer(text: str) -> JsonObject:
    return anthropic.types.Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "test-model",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": 5,
                "output_tokens": 2,
                "cache_read_input_tokens": 3,
                "cache_creation_input_tokens": 1,
            },
        }
    ).model_dump(mode="json")


def ev(model: BaseModel) -> tuple[str | None, str]:
    data = model.model_dump(mode="json", exclude_none=True)
    return str(data["type"]), json.dumps(data)


async def test_chat_request_carries_every_option_and_kind_of_content(
    wire_server: WireServer,
) -> None:
    wire_server.queue_json(chat_answer(usage=None))
    async with open_openai_provider(
        api_key="k",
        base_url=wire_server.url,
        instructions="Be brief.",
        max_tokens=100,
        temperature=0.2,
        reasoning_effort="low",
        stream=False,
        extra_body={"seed": 7},
        max_retries=0,
    ) as provider:
        answer = await provider.complete(REQUEST)
    assert answer.content == (TextContent(text="fine"),)
    assert provider.usage.input_tokens == 0
    body = wire_server.requests[0].json()
    assert (body["max_completion_tokens"], body["temperature"]) == (100, 0.2)
    assert (body["reasoning_effort"], body["seed"]) == ("low", 7)
    assert "stream_options" not in body
    messages = body["messages"]
    assert isinstance(messages, list)
    assert messages[0] == {"role": "system", "content": "Be brief."}
    assert messages[1]["content"] == [
        {"type": "text", "text": "Look:"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGk="}},
        {"type": "text", "text": "[resource file:///notes.md]\n# Notes"},
        {"type": "text", "text": "[resource file:///data.bin (binary) omitted]"},
        {"type": "text", "text": "[resource link file:///later.md (later)]"},
    ]
    assert messages[2]["content"] == "Checking."
    assert [c["function"]["arguments"] for c in messages[2]["tool_calls"]] == [
        "not json",
        '["a", "list"]',
    ]
    assert messages[3] == {"role": "tool", "tool_call_id": "c1", "content": "no such file"}
    assert messages[4]["content"] == "a\n[image/png image omitted]"
    assert messages[5] == {"role": "assistant", "content": ""}
    tools = body["tools"]
    assert isinstance(tools, list)
    assert tools[1] == {
        "type": "function",
        "function": {"name": "list", "parameters": {"type": "object", "properties": {}}},
    }


async def test_responses_request_carries_every_option_and_kind_of_content(
    wire_server: WireServer,
) -> None:
    refusal: JsonObject = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "incomplete",
        "content": [{"type": "refusal", "refusal": "I cannot."}],
    }
    wire_server.queue_json(
        responses_answer(
            [refusal],
            status="incomplete",
            incomplete_details={"reason": "max_output_tokens"},
        )
    )
    async with open_openai_provider(
        api="responses",
        api_key="k",
        base_url=wire_server.url,
        instructions="Be brief.",
        max_tokens=100,
        temperature=0.2,
        stream=False,
        extra_body={"seed": 7},
        max_retries=0,
    ) as provider:
        answer = await provider.complete(REQUEST)
    assert answer.content == (TextContent(text="I cannot."),)
    assert provider.responses[0].stop_reason == "incomplete: max_output_tokens"
    body = wire_server.requests[0].json()
    assert (body["instructions"], body["max_output_tokens"]) == ("Be brief.", 100)
    assert (body["temperature"], body["seed"]) == (0.2, 7)
    items = body["input"]
    assert isinstance(items, list)
    assert items[0]["content"][1] == {
        "type": "input_image",
        "image_url": "data:image/png;base64,aGk=",
        "detail": "auto",
    }
    assert items[1] == {"role": "assistant", "content": "Checking."}
    assert [i["arguments"] for i in items[2:4]] == ["not json", '["a", "list"]']
    assert items[4] == {"type": "function_call_output", "call_id": "c1", "output": "no such file"}
    tools = body["tools"]
    assert isinstance(tools, list)
    assert tools[0]["description"] == "Read a file"


async def test_anthropic_request_carries_every_option_and_kind_of_content(
    wire_server: WireServer,
) -> None:
    wire_server.queue_json(anthropic_answer("fine"))
    async with open_anthropic_provider(
        api_key="k",
        base_url=wire_server.url,
        instructions="Be brief.",
        temperature=0.2,
        stream=False,
        extra_body={"metadata": {"user_id": "u"}},
        max_retries=0,
    ) as provider:
        answer = await provider.complete(REQUEST)
    assert answer.content == (TextContent(text="fine"),)
    assert (provider.usage.cache_read_tokens, provider.usage.cache_write_tokens) == (3, 1)
    body = wire_server.requests[0].json()
    assert (body["system"], body["temperature"]) == ("Be brief.", 0.2)
    assert body["metadata"] == {"user_id": "u"}
    messages = body["messages"]
    assert isinstance(messages, list)
    # The empty assistant turn adds nothing; the last user turn joins the results.
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assistant = messages[1]["content"]
    # Reasoning from another API is not sent; arguments that are not an object go as {}.
    assert assistant[0] == {"type": "text", "text": "Checking."}
    assert [block["input"] for block in assistant[1:]] == [{}, {}]
    assert messages[2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "c1",
        "content": [{"type": "text", "text": "no such file"}],
        "is_error": True,
    }
    assert messages[2]["content"][-1] == {"type": "text", "text": "go on"}


@pytest.mark.parametrize("api", ["chat", "anthropic"])
async def test_a_lone_surrogate_in_a_tool_result_is_sent_as_a_replacement_character(
    wire_server: WireServer, api: str
) -> None:
    # An MCP server's "\\ud800" escape survives json.loads into a tool result; the
    # SDK's request encoding raised UnicodeEncodeError on it, on every later turn too.
    odd = ToolResult(content=(TextContent(text="\ud800x"),), structured={"\udfff": "k"})
    messages = (
        UserMessage(content=(TextContent(text="hi"),)),
        AssistantMessage(tool_calls=(ToolCall(id="c1", name="read", arguments={"a": "\udc00"}),)),
        ToolResultMessage(call_id="c1", tool_name="read", result=odd),
    )
    request = ModelRequest(model="test-model", messages=messages, tools=TOOLS)
    if api == "chat":
        wire_server.queue_json(chat_answer())
        async with open_openai_provider(
            api_key="k", base_url=wire_server.url, stream=False, max_retries=0
        ) as chat:
            answer = await chat.complete(request)
    else:
        wire_server.queue_json(anthropic_answer("fine"))
        async with open_anthropic_provider(
            api_key="k", base_url=wire_server.url, stream=False, max_retries=0
        ) as anthropic_provider:
            answer = await anthropic_provider.complete(request)
    assert answer.content == (TextContent(text="fine"),)
    (sent,) = wire_server.requests
    text = sent.body.decode("utf-8")
    assert "\ufffdx" in json.dumps(json.loads(text), ensure_ascii=False)
    assert "\\ud800" not in text.lower()


async def test_a_failing_event_sink_never_breaks_a_response(
    wire_server: WireServer, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(_event: object) -> None:
        raise RuntimeError("sink bug")

    wire_server.queue_json(chat_answer())
    async with open_openai_provider(
        api_key="k", base_url=wire_server.url, stream=False, on_event=broken, max_retries=0
    ) as provider:
        answer = await provider.complete(REQUEST)
    assert answer.content == (TextContent(text="fine"),)
    assert "sink raised" in caplog.text


async def test_chat_answer_without_choices_is_a_response_error(wire_server: WireServer) -> None:
    wire_server.queue_json(chat_answer(choices=[]))
    async with open_openai_provider(
        api_key="k", base_url=wire_server.url, stream=False, max_retries=0
    ) as provider:
        with pytest.raises(ProviderResponseError, match="no choices"):
            await provider.complete(REQUEST)


async def test_responses_error_event_is_an_api_error(wire_server: WireServer) -> None:
    message: JsonObject = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "in_progress",
        "content": [],
    }
    wire_server.queue_sse(
        [
            ev(
                ResponseOutputItemAddedEvent.model_validate(
                    {
                        "type": "response.output_item.added",
                        "output_index": 0,
                        "sequence_number": 1,
                        "item": message,
                    }
                )
            ),
            ev(
                ResponseErrorEvent.model_validate(
                    {
                        "type": "error",
                        "code": "server_error",
                        "message": "try again",
                        "param": None,
                        "sequence_number": 2,
                    }
                )
            ),
        ]
    )
    async with open_openai_provider(
        api="responses", api_key="k", base_url=wire_server.url, max_retries=0
    ) as provider:
        with pytest.raises(ProviderAPIError, match=r"\(server_error\): try again") as caught:
            await provider.complete(REQUEST)
    assert caught.value.error_type == "server_error"


def providers(url: str, client_options: dict[str, object]) -> list[ModelProvider]:
    return [
        OpenAIChatProvider(client=openai.AsyncOpenAI(base_url=url, **client_options), stream=False),  # type: ignore[arg-type]
        OpenAIResponsesProvider(
            client=openai.AsyncOpenAI(base_url=url, **client_options),  # type: ignore[arg-type]
            stream=False,
        ),
        AnthropicProvider(
            client=anthropic.AsyncAnthropic(base_url=url, **client_options),  # type: ignore[arg-type]
            stream=False,
        ),
    ]


@pytest.mark.parametrize("which", [0, 1, 2])
async def test_an_error_body_without_details_still_names_the_status(
    wire_server: WireServer, which: int
) -> None:
    wire_server.queue_json({"error": "busy"}, status=503)
    provider = providers(wire_server.url, {"api_key": "k", "max_retries": 0})[which]
    with pytest.raises(ProviderAPIError, match="API error 503") as caught:
        await provider.complete(REQUEST)
    assert caught.value.status_code == 503
    assert caught.value.error_type is None


@pytest.mark.parametrize("which", [0, 1, 2])
async def test_an_answer_strict_validation_refuses_is_a_response_error(
    wire_server: WireServer, which: int
) -> None:
    wire_server.queue_json({"id": 5, "unexpected": True})
    options: dict[str, object] = {
        "api_key": "k",
        "max_retries": 0,
        "_strict_response_validation": True,
    }
    provider = providers(wire_server.url, options)[which]
    with pytest.raises(ProviderResponseError, match="answered with something unexpected"):
        await provider.complete(REQUEST)


@pytest.mark.parametrize("which", [0, 1, 2])
async def test_a_server_that_never_answers_times_out_as_a_connection_error(
    nursery: trio.Nursery, which: int
) -> None:
    async def silent(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    listeners = await nursery.start(partial(trio.serve_tcp, silent, 0, host="127.0.0.1"))
    host, port = listeners[0].socket.getsockname()[:2]
    url = f"http://{host}:{port}/v1"
    provider = providers(url, {"api_key": "k", "max_retries": 0, "timeout": 0.2})[which]
    with pytest.raises(ProviderConnectionError, match="timed out"):
        await provider.complete(REQUEST)
    nursery.cancel_scope.cancel()


@pytest.mark.parametrize("spec", ["openai:m", "anthropic:m"])
async def test_a_missing_sdk_says_which_extra_to_install(
    spec: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, spec.split(":")[0], None)
    with pytest.raises(ProviderNotInstalledError, match=r"pip install 'prismgate-providers\["):
        async with open_provider(spec, api_key="k"):
            pass  # pragma: no cover
