"""Anthropic Messages as a ModelProvider."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import attrs

from prism.core import (
    AssistantMessage,
    ImageContent,
    ParsedJson,
    ReasoningContent,
    TextContent,
    ToolCall,
    UserMessage,
)
from prism.core.options import has_method, integer, optional

from ._common import (
    EMPTY_SCHEMA,
    SharedOptions,
    ask,
    content_text,
    open_client,
)
from ._errors import ProviderResponseError
from ._events import (
    ModelReasoningDelta,
    ModelResponseInfo,
    ModelTextDelta,
    ModelToolCallDelta,
    ModelUsage,
    StreamSink,
    emit,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    import anthropic
    from anthropic._response import AsyncAPIResponse
    from anthropic.types import Message as AnthropicMessage
    from anthropic.types import RawMessageStreamEvent, Usage

    from prism.core import Content, JsonValue, Message, ModelRequest, ToolSpec

__all__ = ["AnthropicProvider", "open_anthropic_provider"]

_PROVIDER = "anthropic"


def _reasoning(replay: dict[str, JsonValue]) -> ReasoningContent:
    """A thinking or redacted_thinking block, kept to be sent back as it came."""
    redacted = replay.get("type") == "redacted_thinking"
    text = "" if redacted else str(replay.get("thinking", ""))
    return ReasoningContent(text=text, provider=_PROVIDER, redacted=redacted, replay=replay)


def _blocks(content: tuple[Content, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, ReasoningContent):
            # Thinking goes back exactly as it came (the API checks the
            # signature); reasoning from another API is not sent.
            if block.provider == _PROVIDER and block.replay is not None:
                out.append(dict(block.replay))
        elif isinstance(block, ImageContent):
            out.append(
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": block.mime_type, "data": block.data},
                }
            )
        else:
            text = content_text(block)
            if text:
                out.append({"type": "text", "text": text})
    return out


def anthropic_messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """The transcript in Messages form: roles alternate, tool results ride in user turns."""
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for message in messages:
        if isinstance(message, UserMessage):
            add("user", _blocks(message.content))
        elif isinstance(message, AssistantMessage):
            blocks = _blocks(message.content)
            for call in message.tool_calls:
                arguments = call.arguments if isinstance(call.arguments, dict) else {}
                blocks.append(
                    {"type": "tool_use", "id": call.id, "name": call.name, "input": arguments}
                )
            add("assistant", blocks)
        else:
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": message.call_id,
                "content": _blocks(message.result.content),
            }
            if message.result.is_error:
                result["is_error"] = True
            add("user", [result])
    return out


def anthropic_tools(
    tools: tuple[ToolSpec, ...], messages: tuple[Message, ...]
) -> tuple[list[dict[str, Any]], dict[str, str] | None]:
    """The offered tools, and the tool choice.

    With no tools offered (the final answer) but tool calls in the transcript,
    the API still wants those tools defined: they are declared by name only,
    and ``tool_choice`` ``none`` forbids calling them.
    """
    if tools:
        return [
            {
                "name": spec.name,
                "input_schema": spec.parameters if spec.parameters is not None else EMPTY_SCHEMA,
                **({"description": spec.description} if spec.description else {}),
            }
            for spec in tools
        ], None
    names = sorted(
        {
            call.name
            for message in messages
            if isinstance(message, AssistantMessage)
            for call in message.tool_calls
        }
    )
    if not names:
        return [], None
    return [{"name": name, "input_schema": EMPTY_SCHEMA} for name in names], {"type": "none"}


def _usage(usage: Usage) -> ModelUsage:
    return ModelUsage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_input_tokens or 0,
        cache_write_tokens=usage.cache_creation_input_tokens or 0,
    )


def _count(usage: Mapping[str, object], name: str) -> int:
    value = usage.get(name)
    return value if type(value) is int and value >= 0 else 0


def _whole_usage(usage: object) -> ModelUsage:
    """The usage object of a whole answer, as JSON (missing or odd counts are 0)."""
    if type(usage) is not dict:
        return ModelUsage()
    return ModelUsage(
        input_tokens=_count(usage, "input_tokens"),
        output_tokens=_count(usage, "output_tokens"),
        cache_read_tokens=_count(usage, "cache_read_input_tokens"),
        cache_write_tokens=_count(usage, "cache_creation_input_tokens"),
    )


def _text_field(value: Mapping[str, object], name: str) -> str | None:
    field = value.get(name)
    return field if type(field) is str else None


def _whole_call(block: ParsedJson, fields: Mapping[str, object]) -> ToolCall:
    """A tool_use block's call; its input as parsed from the answer's text, with its proof."""
    call_id = _text_field(fields, "id")
    name = _text_field(fields, "name")
    if call_id is None or name is None:
        raise ProviderResponseError("the anthropic answer has a tool_use block without id or name")
    arguments = block.member("input")
    if arguments is None:
        return ToolCall(id=call_id, name=name, arguments={})
    return ToolCall.from_parsed(id=call_id, name=name, arguments=arguments)


@attrs.define
class _Block:
    kind: str
    text: str = ""
    call_id: str = ""
    name: str = ""
    arguments: str = ""
    signature: str = ""
    data: str = ""

    def reasoning(self) -> ReasoningContent:
        if self.kind == "thinking":
            return _reasoning(
                {"type": "thinking", "thinking": self.text, "signature": self.signature}
            )
        return _reasoning({"type": "redacted_thinking", "data": self.data})


@attrs.define(eq=False, kw_only=True)
class AnthropicProvider(SharedOptions):
    """A :class:`~prism.core.ModelProvider` on the Anthropic Messages API.

    Build one with :func:`open_anthropic_provider`, or around your own
    ``anthropic.AsyncAnthropic`` client (which you then close). Consecutive
    tool results are sent in one user turn; tool calls in one answer may be
    many (parallel tool use). Extended thinking (``thinking_budget``) comes back
    as :class:`~prism.core.ReasoningContent` blocks at the start of the
    answer, sent back unchanged (signature included) in later requests, as
    the API requires for tool use with thinking.

    Attributes:
        client: the SDK client (retries and rate-limit waits are its own settings).
        instructions: the ``system`` prompt.
        max_tokens: the most tokens per answer (the API requires a bound; default 4096).
        temperature: sampling temperature (``None``: the API's default). The SDK
            no longer declares it, so it is sent as a body field; a model that
            does not take it answers with an error.
        thinking_budget: turn on extended thinking with this many tokens
            (``budget_tokens``: at least 1024, below ``max_tokens``); ``None``: off.
        stream: stream answers (text, thinking and tool-input deltas go to ``on_event``).
        on_event: receives :class:`ModelTextDelta`, :class:`ModelReasoningDelta`,
            :class:`ModelToolCallDelta` and :class:`ModelResponseFinished`.
        extra_body: more JSON fields for each request.
    """

    client: "anthropic.AsyncAnthropic" = attrs.field(
        repr=False, validator=has_method("close", description="an anthropic.AsyncAnthropic")
    )
    max_tokens: int = attrs.field(default=4096, validator=integer(minimum=1))
    thinking_budget: int | None = attrs.field(
        default=None, validator=optional(integer(minimum=1024))
    )

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": request.model,
            "max_tokens": self.max_tokens,
            "messages": anthropic_messages(request.messages),
        }
        tools, choice = anthropic_tools(request.tools, request.messages)
        if tools:
            params["tools"] = tools
        if choice is not None:
            params["tool_choice"] = choice
        if self.instructions:
            params["system"] = self.instructions
        if self.thinking_budget is not None:
            params["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
        extra = dict(self.extra_body or {})
        if self.temperature is not None:
            # The SDK (2.x) no longer declares temperature: it goes as a body field.
            extra["temperature"] = self.temperature
        if extra:
            params["extra_body"] = extra
        return params

    async def complete(self, request: ModelRequest) -> AssistantMessage:
        """Ask the API for the model's next turn.

        Streams by default: text, thinking and tool-input fragments go to
        ``on_event`` as they arrive; the whole answer is returned when the
        model finishes, and its usage and stop reason are kept in
        :attr:`responses`.

        Cancellation (an agent abort): the HTTP request or stream is closed
        (the server sees the connection end) and :class:`trio.Cancelled`
        propagates; nothing is recorded for the unfinished answer.

        Raises:
            ProviderAPIError: the API answered with an error, or an error event
                arrived in the stream (overloaded and rate limits included).
            ProviderConnectionError: the API could not be reached or timed out.
            ProviderResponseError: the answer could not be understood or was cut short.
        """
        messages = self.client.messages
        return await ask(
            provider=_PROVIDER,
            # A whole answer is read from its own text: the SDK's models of it
            # cost far more than a parse, and the calls keep what the text proves.
            create=messages.create if self.stream else messages.with_raw_response.create,
            params=self._params(request),
            stream=self.stream,
            consume=self._consume,
            finish=self._finish,
        )

    async def _finish(self, response: AsyncAPIResponse[AnthropicMessage]) -> AssistantMessage:
        """The assistant turn of a whole (not streamed) answer, read from the body's JSON text.

        Parsed once, by Prism: each tool call's input is the object parsed from
        that text and keeps what the text proves (see ``ParsedJson``); blocks of
        other types are skipped, as the stream skips them. A client made with
        strict response validation still has the SDK check the answer first.
        """
        if getattr(self.client, "_strict_response_validation", False) is True:
            await response.parse()  # raises APIResponseValidationError for an odd answer
        try:
            message = ParsedJson.parse(response.http_response.content)
        except (ValueError, RecursionError) as exc:
            raise ProviderResponseError("the anthropic answer is not JSON") from exc
        value = message.value
        blocks = message.member("content")
        if type(value) is not dict or blocks is None or type(blocks.value) is not list:
            raise ProviderResponseError("the anthropic answer has no list of content blocks")
        content: list[Content] = []
        texts: list[str] = []
        calls: list[ToolCall] = []
        for index, fields in enumerate(blocks.value):
            if type(fields) is not dict:
                raise ProviderResponseError(
                    "the anthropic answer has a content block not an object"
                )
            kind = fields.get("type")
            if kind == "text":
                texts.append(_text_field(fields, "text") or "")
            elif kind == "tool_use":
                block = blocks.member(index)
                assert block is not None  # an index of the list just read
                calls.append(_whole_call(block, fields))
            elif kind in ("thinking", "redacted_thinking"):
                # Sent back exactly as it came (the API checks the signature).
                content.append(_reasoning({k: v for k, v in fields.items() if v is not None}))
        text = "".join(texts)
        if text:
            content.append(TextContent(text=text))
        info = ModelResponseInfo(
            provider=_PROVIDER,
            model=_text_field(value, "model") or "",
            response_id=_text_field(value, "id"),
            stop_reason=_text_field(value, "stop_reason"),
            usage=_whole_usage(value.get("usage")),
        )
        return await self.answer(self.on_event, info, content, tuple(calls))

    async def _consume(self, stream: AsyncIterator[RawMessageStreamEvent]) -> AssistantMessage:
        blocks: dict[int, _Block] = {}
        info = ModelResponseInfo(provider=_PROVIDER, model="")
        finished = False
        sink = self.on_event
        async for event in stream:
            if event.type == "message_start":
                info = attrs.evolve(
                    info,
                    model=event.message.model,
                    response_id=event.message.id,
                    usage=_usage(event.message.usage),
                )
            elif event.type == "content_block_start":
                block = event.content_block
                if block.type == "tool_use":
                    blocks[event.index] = _Block("tool_use", call_id=block.id, name=block.name)
                    await emit(
                        sink,
                        ModelToolCallDelta(
                            index=event.index, call_id=block.id, name=block.name, arguments_delta=""
                        ),
                    )
                elif block.type == "text":
                    blocks[event.index] = _Block("text", text=block.text)
                    if block.text:
                        await emit(sink, ModelTextDelta(text=block.text))
                elif block.type == "thinking":
                    blocks[event.index] = _Block(
                        "thinking", text=block.thinking, signature=block.signature
                    )
                elif block.type == "redacted_thinking":
                    blocks[event.index] = _Block("redacted_thinking", data=block.data)
            elif event.type == "content_block_delta":
                entry = blocks.get(event.index)
                delta = event.delta
                if entry is None:
                    continue
                if delta.type == "text_delta":
                    entry.text += delta.text
                    await emit(sink, ModelTextDelta(text=delta.text))
                elif delta.type == "input_json_delta":
                    entry.arguments += delta.partial_json
                    await emit(
                        sink,
                        ModelToolCallDelta(
                            index=event.index,
                            call_id=entry.call_id,
                            name=entry.name,
                            arguments_delta=delta.partial_json,
                        ),
                    )
                elif delta.type == "thinking_delta":
                    entry.text += delta.thinking
                    await emit(sink, ModelReasoningDelta(text=delta.thinking))
                elif delta.type == "signature_delta":
                    entry.signature += delta.signature
            elif event.type == "message_delta":
                # The delta's counts are cumulative for the message.
                usage = attrs.evolve(
                    info.usage, output_tokens=event.usage.output_tokens or info.usage.output_tokens
                )
                info = attrs.evolve(
                    info, stop_reason=event.delta.stop_reason or info.stop_reason, usage=usage
                )
            elif event.type == "message_stop":
                finished = True
        if not finished:
            raise ProviderResponseError(
                "the anthropic stream ended before the message was complete (no message_stop)"
            )
        ordered = [blocks[index] for index in sorted(blocks)]
        calls = tuple(
            ToolCall.from_json(id=b.call_id, name=b.name, arguments=b.arguments)
            for b in ordered
            if b.kind == "tool_use"
        )
        content: list[Content] = [
            b.reasoning() for b in ordered if b.kind in ("thinking", "redacted_thinking")
        ]
        text = "".join(b.text for b in ordered if b.kind == "text")
        if text:
            content.append(TextContent(text=text))
        return await self.answer(sink, info, content, calls)


@contextlib.asynccontextmanager
async def open_anthropic_provider(
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    instructions: str | None = None,
    max_tokens: int = 4096,
    temperature: float | None = None,
    thinking_budget: int | None = None,
    stream: bool = True,
    on_event: StreamSink | None = None,
    extra_body: Mapping[str, object] | None = None,
    max_retries: int = 2,
    timeout_s: float = 600.0,
    default_headers: Mapping[str, str] | None = None,
) -> AsyncIterator[AnthropicProvider]:
    """An :class:`AnthropicProvider` on its own SDK client, closed when the block ends.

    The key comes from ``api_key`` or ``ANTHROPIC_API_KEY``; with a
    ``base_url`` and no key, a placeholder is sent. Keys are never logged,
    shown in a repr or written to the ledger. Retries and rate-limit waits are
    the SDK's own (``max_retries``); ``timeout_s`` bounds one request.

    Cancellation: entering does no I/O; leaving closes the client (shielded,
    bounded), whatever cancelled the block.

    Raises:
        ConfigurationError: no key and no ``base_url``, or a bad option (the
            error names the option and the value).
        ProviderNotInstalledError: the ``anthropic`` extra is not installed.
    """
    async with open_client(
        "open_anthropic_provider",
        _PROVIDER,
        api_key=api_key,
        base_url=base_url,
        max_retries=max_retries,
        timeout_s=timeout_s,
        default_headers=default_headers,
    ) as client:
        yield AnthropicProvider(
            client=client,
            instructions=instructions,
            max_tokens=max_tokens,
            temperature=temperature,
            thinking_budget=thinking_budget,
            stream=stream,
            on_event=on_event,
            extra_body=extra_body,
        )
