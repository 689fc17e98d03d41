"""OpenAI Chat Completions (and any OpenAI-compatible server) as a ModelProvider."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Literal

import attrs

from prism.core import (
    AssistantMessage,
    ImageContent,
    ReasoningContent,
    TextContent,
    ToolCall,
    UserMessage,
)
from prism.core.options import one_of, optional, string

from ._common import (
    CHECK_FLAG,
    EMPTY_SCHEMA,
    arguments_json,
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
from ._openai_options import OpenAIOptions
from ._openai_responses import OpenAIResponsesProvider

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    from openai.types.chat import ChatCompletion, ChatCompletionChunk
    from openai.types.completion_usage import CompletionUsage

    from prism.core import Content, Message, ModelRequest, ToolSpec

__all__ = ["OpenAIChatProvider", "open_openai_provider"]

_PROVIDER = "openai"


def _shown_reasoning(message: object) -> str:
    """``reasoning_content``, which some compatible servers add (display only), or ``""``."""
    text = getattr(message, "reasoning_content", None)
    return text if isinstance(text, str) else ""


def _content(reasoning: str, text: str | None) -> list[Content]:
    content: list[Content] = [ReasoningContent(text=reasoning)] if reasoning else []
    if text:
        content.append(TextContent(text=text))
    return content


def _user_content(content: tuple[Any, ...]) -> str | list[dict[str, Any]]:
    if all(isinstance(block, TextContent) for block in content):
        return "\n".join(block.text for block in content)
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, ImageContent):
            url = f"data:{block.mime_type};base64,{block.data}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
        else:
            parts.append({"type": "text", "text": content_text(block)})
    return parts


def chat_messages(messages: tuple[Message, ...], instructions: str | None) -> list[dict[str, Any]]:
    """The transcript in Chat Completions form."""
    out: list[dict[str, Any]] = []
    if instructions:
        out.append({"role": "system", "content": instructions})
    for message in messages:
        if isinstance(message, UserMessage):
            out.append({"role": "user", "content": _user_content(message.content)})
        elif isinstance(message, AssistantMessage):
            text = "".join(content_text(block) for block in message.content)
            entry: dict[str, Any] = {"role": "assistant", "content": text or None}
            if message.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": call.name,
                            "arguments": arguments_json(call.arguments),
                        },
                    }
                    for call in message.tool_calls
                ]
            elif not text:
                entry["content"] = ""
            out.append(entry)
        else:
            text = "\n".join(content_text(block) for block in message.result.content)
            out.append({"role": "tool", "tool_call_id": message.call_id, "content": text})
    return out


def chat_tools(tools: tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    """The offered tools in Chat Completions form."""
    out: list[dict[str, Any]] = []
    for spec in tools:
        function: dict[str, Any] = {
            "name": spec.name,
            "parameters": spec.parameters if spec.parameters is not None else EMPTY_SCHEMA,
        }
        if spec.description:
            function["description"] = spec.description
        out.append({"type": "function", "function": function})
    return out


def _usage(usage: CompletionUsage | None) -> ModelUsage:
    if usage is None:
        return ModelUsage()
    details = usage.prompt_tokens_details
    cached = (details.cached_tokens or 0) if details is not None else 0
    return ModelUsage(
        input_tokens=usage.prompt_tokens or 0,
        output_tokens=usage.completion_tokens or 0,
        cache_read_tokens=cached,
    )


@attrs.define
class _PendingCall:
    call_id: str | None = None
    name: str = ""
    arguments: str = ""


@attrs.define(eq=False, kw_only=True)
class OpenAIChatProvider(OpenAIOptions):
    """A :class:`~prism.core.ModelProvider` on OpenAI Chat Completions.

    Works with OpenAI and any server that speaks the same API through the
    client's ``base_url`` (vLLM, llama.cpp, Ollama, ...). Build one with
    :func:`open_openai_provider`, or around your own ``openai.AsyncOpenAI``
    client (which you then close). Tool names arrive already provider-safe
    from the agent; calls in one answer may be many (parallel tool calls).
    Chat Completions has no reasoning to send back; the ``reasoning_content``
    some compatible servers add is kept as a
    :class:`~prism.core.ReasoningContent` for display and never sent.

    Attributes:
        client: the SDK client (retries and rate-limit waits are its own settings).
        instructions: a system message put before the transcript.
        max_tokens: ``max_completion_tokens`` for each answer (``None``: the API's default).
        temperature: sampling temperature (``None``: the API's default).
        reasoning_effort: a reasoning model's ``reasoning_effort`` (``"low"``,
            ``"medium"``, ``"high"``, ...; ``None``: the API's default).
        stream: stream answers (text and tool-call deltas go to ``on_event``).
        include_usage: ask for usage in streams (``stream_options``); turn it off for
            a compatible server that refuses the option.
        on_event: receives :class:`ModelTextDelta`, :class:`ModelReasoningDelta`,
            :class:`ModelToolCallDelta` and :class:`ModelResponseFinished`.
        extra_body: more JSON fields for each request (server-specific options).
    """

    include_usage: bool = attrs.field(default=True, validator=CHECK_FLAG)

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": request.model,
            "messages": chat_messages(request.messages, self.instructions),
        }
        if request.tools:
            params["tools"] = chat_tools(request.tools)
        if self.max_tokens is not None:
            params["max_completion_tokens"] = self.max_tokens
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if self.reasoning_effort is not None:
            params["reasoning_effort"] = self.reasoning_effort
        if self.stream and self.include_usage:
            params["stream_options"] = {"include_usage": True}
        if self.extra_body:
            params["extra_body"] = dict(self.extra_body)
        return params

    async def complete(self, request: ModelRequest) -> AssistantMessage:
        """Ask the API for the model's next turn.

        Streams by default: text and tool-call fragments go to ``on_event`` as
        they arrive; the whole answer is returned when the model finishes, and
        its usage and stop reason are kept in :attr:`responses`.

        Cancellation (an agent abort): the HTTP request or stream is closed
        (the server sees the connection end) and :class:`trio.Cancelled`
        propagates; nothing is recorded for the unfinished answer.

        Raises:
            ProviderAPIError: the API answered with an error (rate limits included).
            ProviderConnectionError: the API could not be reached or timed out.
            ProviderResponseError: the answer could not be understood.
        """
        return await ask(
            provider=_PROVIDER,
            create=self.client.chat.completions.create,
            params=self._params(request),
            stream=self.stream,
            consume=self._consume,
            finish=self._finish,
        )

    async def _finish(self, response: ChatCompletion) -> AssistantMessage:
        if not response.choices:
            raise ProviderResponseError("openai API answered with no choices")
        choice = response.choices[0]
        message = choice.message
        calls = tuple(
            ToolCall.from_json(
                id=call.id or f"call_{index}",
                name=call.function.name,
                arguments=call.function.arguments or "",
            )
            for index, call in enumerate(message.tool_calls or ())
            if call.type == "function"
        )
        content = _content(_shown_reasoning(message), message.content)
        info = ModelResponseInfo(
            provider=_PROVIDER,
            model=response.model,
            response_id=response.id,
            stop_reason=choice.finish_reason,
            usage=_usage(response.usage),
        )
        return await self.answer(self.on_event, info, content, calls)

    async def _consume(self, stream: AsyncIterator[ChatCompletionChunk]) -> AssistantMessage:
        text: list[str] = []
        reasoning: list[str] = []
        pending: dict[int, _PendingCall] = {}
        info = ModelResponseInfo(provider=_PROVIDER, model="")
        sink = self.on_event
        async for chunk in stream:
            info = attrs.evolve(
                info,
                model=chunk.model or info.model,
                response_id=chunk.id or info.response_id,
                usage=_usage(chunk.usage) if chunk.usage is not None else info.usage,
            )
            for choice in chunk.choices:
                if choice.index != 0:
                    continue
                delta = choice.delta
                thought = _shown_reasoning(delta)
                if thought:
                    reasoning.append(thought)
                    await emit(sink, ModelReasoningDelta(text=thought))
                if delta.content:
                    text.append(delta.content)
                    await emit(sink, ModelTextDelta(text=delta.content))
                for position, fragment in enumerate(delta.tool_calls or ()):
                    index = fragment.index if fragment.index is not None else position
                    entry = pending.setdefault(index, _PendingCall())
                    function = fragment.function
                    if fragment.id:
                        entry.call_id = fragment.id
                    if function is not None and function.name:
                        entry.name += function.name
                    piece = (function.arguments or "") if function is not None else ""
                    entry.arguments += piece
                    await emit(
                        sink,
                        ModelToolCallDelta(
                            index=index,
                            call_id=entry.call_id,
                            name=entry.name or None,
                            arguments_delta=piece,
                        ),
                    )
                if choice.finish_reason is not None:
                    info = attrs.evolve(info, stop_reason=choice.finish_reason)
        calls = tuple(
            ToolCall.from_json(
                id=entry.call_id or f"call_{index}",
                name=entry.name,
                arguments=entry.arguments,
            )
            for index, entry in sorted(pending.items())
        )
        return await self.answer(sink, info, _content("".join(reasoning), "".join(text)), calls)


@contextlib.asynccontextmanager
async def open_openai_provider(
    *,
    api: Literal["chat", "responses"] = "chat",
    api_key: str | None = None,
    base_url: str | None = None,
    organization: str | None = None,
    instructions: str | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
    reasoning_effort: str | None = None,
    stream: bool = True,
    include_usage: bool = True,
    on_event: StreamSink | None = None,
    extra_body: Mapping[str, object] | None = None,
    max_retries: int = 2,
    timeout_s: float = 600.0,
    default_headers: Mapping[str, str] | None = None,
) -> AsyncIterator[OpenAIChatProvider | OpenAIResponsesProvider]:
    """An OpenAI provider on its own SDK client, closed when the block ends.

    ``api="chat"`` (the default) gives an :class:`OpenAIChatProvider` (Chat
    Completions: OpenAI and every OpenAI-compatible server);
    ``api="responses"`` gives an :class:`OpenAIResponsesProvider` (the
    Responses API, stateless: ``include_usage`` does not apply).

    The key comes from ``api_key`` or ``OPENAI_API_KEY``; with a ``base_url``
    and no key, a placeholder is sent (local servers take none). Keys are never
    logged, shown in a repr or written to the ledger. Retries and rate-limit
    waits are the SDK's own (``max_retries``); ``timeout_s`` bounds one request.

    Cancellation: entering does no I/O; leaving closes the client (shielded,
    bounded), whatever cancelled the block.

    Raises:
        ConfigurationError: no key and no ``base_url``, or a bad option (the
            error names the option and the value).
        ProviderNotInstalledError: the ``openai`` extra is not installed.
    """
    owner = "open_openai_provider"
    one_of("chat", "responses").check(owner, "api", api)
    optional(string()).check(owner, "organization", organization)
    options: dict[str, Any] = {
        "instructions": instructions,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "reasoning_effort": reasoning_effort,
        "stream": stream,
        "on_event": on_event,
        "extra_body": extra_body,
    }
    async with open_client(
        owner,
        _PROVIDER,
        api_key=api_key,
        base_url=base_url,
        max_retries=max_retries,
        timeout_s=timeout_s,
        default_headers=default_headers,
        organization=organization,
    ) as client:
        if api == "responses":
            yield OpenAIResponsesProvider(client=client, **options)
        else:
            yield OpenAIChatProvider(client=client, include_usage=include_usage, **options)
