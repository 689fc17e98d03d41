"""Anthropic Messages as a ModelProvider."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from prism.core import (
    AssistantMessage,
    ConfigurationError,
    ImageContent,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

from ._common import (
    ResponseLog,
    api_key_from,
    close_quietly,
    content_text,
    missing_extra,
    parse_arguments,
)
from ._errors import ProviderAPIError, ProviderConnectionError, ProviderResponseError
from ._events import (
    ModelResponseFinished,
    ModelResponseInfo,
    ModelTextDelta,
    ModelToolCallDelta,
    ModelUsage,
    StreamSink,
    emit,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    import anthropic
    from anthropic.types import Message as AnthropicMessage
    from anthropic.types import RawMessageStreamEvent

    from prism.core import Content, Message, ModelRequest, ToolSpec

__all__ = ["AnthropicProvider", "open_anthropic_provider"]

_PROVIDER = "anthropic"
_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def _blocks(content: tuple[Content, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, ImageContent):
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
        elif isinstance(message, ToolResultMessage):
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
                "input_schema": spec.parameters if spec.parameters is not None else _EMPTY_SCHEMA,
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
    return [{"name": name, "input_schema": _EMPTY_SCHEMA} for name in names], {"type": "none"}


def _usage(usage: Any) -> ModelUsage:
    if usage is None:
        return ModelUsage()
    return ModelUsage(
        input_tokens=getattr(usage, "input_tokens", None) or 0,
        output_tokens=getattr(usage, "output_tokens", None) or 0,
        cache_read_tokens=getattr(usage, "cache_read_input_tokens", None) or 0,
        cache_write_tokens=getattr(usage, "cache_creation_input_tokens", None) or 0,
    )


def _api_error(exc: Exception) -> Exception:
    import anthropic

    if isinstance(exc, anthropic.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        error = body.get("error", body) if isinstance(body, dict) else {}
        message = error.get("message") if isinstance(error, dict) else None
        kind = error.get("type") if isinstance(error, dict) else None
        return ProviderAPIError(
            f"anthropic API error {exc.status_code}"
            f"{f' ({kind})' if kind else ''}: {message or exc.message}",
            provider=_PROVIDER,
            status_code=exc.status_code,
            error_type=str(kind) if kind else None,
            request_id=exc.request_id,
        )
    if isinstance(exc, anthropic.APITimeoutError):
        return ProviderConnectionError(f"anthropic API timed out: {exc}")
    if isinstance(exc, anthropic.APIConnectionError):
        return ProviderConnectionError(f"anthropic API unreachable: {exc}")
    if isinstance(exc, anthropic.APIResponseValidationError):
        return ProviderResponseError(f"anthropic API answered with something unexpected: {exc}")
    if isinstance(exc, anthropic.APIError):
        return ProviderAPIError(f"anthropic API error: {exc.message}", provider=_PROVIDER)
    return exc


@attrs.define
class _Block:
    kind: str
    text: str = ""
    call_id: str = ""
    name: str = ""
    arguments: str = ""


@attrs.define(eq=False, kw_only=True)
class AnthropicProvider(ResponseLog):
    """A :class:`~prism.core.ModelProvider` on the Anthropic Messages API.

    Build one with :func:`open_anthropic_provider`, or around your own
    ``anthropic.AsyncAnthropic`` client (which you then close). Consecutive
    tool results are sent in one user turn; tool calls in one answer may be
    many (parallel tool use).

    Attributes:
        client: the SDK client (retries and rate-limit waits are its own settings).
        instructions: the ``system`` prompt.
        max_tokens: the most tokens per answer (the API requires a bound; default 4096).
        temperature: sampling temperature (``None``: the API's default).
        stream: stream answers (text and tool-input deltas go to ``on_event``).
        on_event: receives :class:`ModelTextDelta`, :class:`ModelToolCallDelta`
            and :class:`ModelResponseFinished`.
        extra_body: more JSON fields for each request.
    """

    client: "anthropic.AsyncAnthropic" = attrs.field(repr=False)
    instructions: str | None = None
    max_tokens: int = 4096
    temperature: float | None = None
    stream: bool = True
    on_event: StreamSink | None = attrs.field(default=None, repr=False)
    extra_body: Mapping[str, object] | None = attrs.field(default=None, repr=False)

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
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if self.extra_body:
            params["extra_body"] = dict(self.extra_body)
        return params

    async def complete(self, request: ModelRequest) -> AssistantMessage:
        """Ask the API for the model's next turn.

        Streams by default: text and tool-input fragments go to ``on_event`` as
        they arrive; the whole answer is returned when the model finishes, and
        its usage and stop reason are kept in :attr:`responses`.

        Cancellation (an agent abort): the HTTP request or stream is closed
        (the server sees the connection end) and :class:`trio.Cancelled`
        propagates; nothing is recorded for the unfinished answer.

        Raises:
            ProviderAPIError: the API answered with an error, or an error event
                arrived in the stream (overloaded and rate limits included).
            ProviderConnectionError: the API could not be reached or timed out.
            ProviderResponseError: the answer could not be understood or was cut short.
        """
        params = self._params(request)
        import anthropic

        try:
            if self.stream:
                stream = await self.client.messages.create(stream=True, **params)
                try:
                    return await self._consume(stream)
                finally:
                    await close_quietly(stream.close)
            response = await self.client.messages.create(**params)
            return self._finish(response)
        except anthropic.AnthropicError as exc:
            raise _api_error(exc) from exc

    def _record(
        self,
        *,
        model: str,
        response_id: str | None,
        stop_reason: str | None,
        usage: ModelUsage,
        text: str,
        calls: tuple[ToolCall, ...],
    ) -> AssistantMessage:
        info = ModelResponseInfo(
            provider=_PROVIDER,
            model=model,
            response_id=response_id,
            stop_reason=stop_reason,
            usage=usage,
            tool_calls=len(calls),
        )
        self.add(info)
        emit(self.on_event, ModelResponseFinished(info=info))
        return AssistantMessage(content=(TextContent(text=text),) if text else (), tool_calls=calls)

    def _finish(self, response: AnthropicMessage) -> AssistantMessage:
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in response.content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use":
                calls.append(ToolCall(id=block.id, name=block.name, arguments=block.input))
        return self._record(
            model=response.model,
            response_id=response.id,
            stop_reason=response.stop_reason,
            usage=_usage(response.usage),
            text="".join(texts),
            calls=tuple(calls),
        )

    async def _consume(self, stream: AsyncIterator[RawMessageStreamEvent]) -> AssistantMessage:
        blocks: dict[int, _Block] = {}
        model = ""
        response_id: str | None = None
        stop_reason: str | None = None
        usage = ModelUsage()
        finished = False
        sink = self.on_event
        async for event in stream:
            if event.type == "message_start":
                model = event.message.model
                response_id = event.message.id
                usage = _usage(event.message.usage)
            elif event.type == "content_block_start":
                block = event.content_block
                if block.type == "tool_use":
                    blocks[event.index] = _Block("tool_use", call_id=block.id, name=block.name)
                    emit(
                        sink,
                        ModelToolCallDelta(
                            index=event.index,
                            call_id=block.id,
                            name=block.name,
                            arguments_delta="",
                        ),
                    )
                elif block.type == "text":
                    blocks[event.index] = _Block("text", text=block.text)
                    if block.text:
                        emit(sink, ModelTextDelta(text=block.text))
            elif event.type == "content_block_delta":
                entry = blocks.get(event.index)
                delta = event.delta
                if entry is None:
                    continue
                if delta.type == "text_delta":
                    entry.text += delta.text
                    emit(sink, ModelTextDelta(text=delta.text))
                elif delta.type == "input_json_delta":
                    entry.arguments += delta.partial_json
                    emit(
                        sink,
                        ModelToolCallDelta(
                            index=event.index,
                            call_id=entry.call_id,
                            name=entry.name,
                            arguments_delta=delta.partial_json,
                        ),
                    )
            elif event.type == "message_delta":
                stop_reason = event.delta.stop_reason or stop_reason
                # The delta's counts are cumulative for the message.
                usage = attrs.evolve(
                    usage,
                    output_tokens=event.usage.output_tokens or usage.output_tokens,
                )
            elif event.type == "message_stop":
                finished = True
        if not finished:
            raise ProviderResponseError(
                "the anthropic stream ended before the message was complete (no message_stop)"
            )
        ordered = [blocks[index] for index in sorted(blocks)]
        calls = tuple(
            ToolCall(id=b.call_id, name=b.name, arguments=parse_arguments(b.arguments))
            for b in ordered
            if b.kind == "tool_use"
        )
        text = "".join(b.text for b in ordered if b.kind == "text")
        return self._record(
            model=model,
            response_id=response_id,
            stop_reason=stop_reason,
            usage=usage,
            text=text,
            calls=calls,
        )


@contextlib.asynccontextmanager
async def open_anthropic_provider(
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    instructions: str | None = None,
    max_tokens: int = 4096,
    temperature: float | None = None,
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
        ConfigurationError: no key and no ``base_url``, or a bad option.
        ProviderNotInstalledError: the ``anthropic`` extra is not installed.
    """
    try:
        import anthropic
    except ImportError as exc:
        raise missing_extra("anthropic", exc) from exc
    if not isinstance(max_retries, int) or isinstance(max_retries, bool) or max_retries < 0:
        raise ConfigurationError(f"max_retries must be an integer >= 0, got {max_retries!r}")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise ConfigurationError(f"max_tokens must be an integer >= 1, got {max_tokens!r}")
    if not timeout_s > 0:
        raise ConfigurationError(f"timeout_s must be > 0, got {timeout_s!r}")
    key = api_key_from(api_key, "ANTHROPIC_API_KEY", base_url=base_url, provider="anthropic")
    client = anthropic.AsyncAnthropic(
        api_key=key,
        base_url=base_url,
        max_retries=max_retries,
        timeout=timeout_s,
        default_headers=dict(default_headers) if default_headers else None,
    )
    try:
        yield AnthropicProvider(
            client=client,
            instructions=instructions,
            max_tokens=max_tokens,
            temperature=temperature,
            stream=stream,
            on_event=on_event,
            extra_body=extra_body,
        )
    finally:
        await close_quietly(client.close)
