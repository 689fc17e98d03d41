"""OpenAI's Responses API as a ModelProvider."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from prism.core import (
    AssistantMessage,
    ImageContent,
    ReasoningContent,
    TextContent,
    ToolCall,
    UserMessage,
)

from ._common import (
    CHECK_FLAG,
    EMPTY_SCHEMA,
    arguments_json,
    ask,
    content_text,
)
from ._errors import ProviderAPIError, ProviderResponseError
from ._events import (
    ModelReasoningDelta,
    ModelResponseInfo,
    ModelTextDelta,
    ModelToolCallDelta,
    ModelUsage,
    emit,
)
from ._openai_options import OpenAIOptions

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from openai.types.responses import Response, ResponseStreamEvent, ResponseUsage

    from prism.core import Content, Message, ModelRequest, ToolSpec

__all__ = ["OpenAIResponsesProvider"]

_PROVIDER = "openai"


def _input_content(content: tuple[Content, ...]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, ImageContent):
            url = f"data:{block.mime_type};base64,{block.data}"
            parts.append({"type": "input_image", "image_url": url, "detail": "auto"})
        else:
            parts.append({"type": "input_text", "text": content_text(block)})
    return parts


def _replayable(block: Content, *, stored: bool) -> bool:
    # A reasoning item goes back as it came. Without stored responses the API
    # can only use one that carries its encrypted_content (asked for with
    # include); the bare id of an unstored item would be an error.
    return (
        isinstance(block, ReasoningContent)
        and block.provider == _PROVIDER
        and block.replay is not None
        and (stored or "encrypted_content" in block.replay)
    )


def responses_input(messages: tuple[Message, ...], *, stored: bool = False) -> list[dict[str, Any]]:
    """The transcript as Responses API input items (reasoning items sent back unchanged)."""
    items: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, UserMessage):
            items.append({"role": "user", "content": _input_content(message.content)})
        elif isinstance(message, AssistantMessage):
            for block in message.content:
                if isinstance(block, ReasoningContent) and _replayable(block, stored=stored):
                    assert block.replay is not None
                    items.append(dict(block.replay))
            text = "".join(content_text(block) for block in message.content)
            if text:
                items.append({"role": "assistant", "content": text})
            for call in message.tool_calls:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call.id,
                        "name": call.name,
                        "arguments": arguments_json(call.arguments),
                    }
                )
        else:
            output = "\n".join(content_text(block) for block in message.result.content)
            items.append(
                {"type": "function_call_output", "call_id": message.call_id, "output": output}
            )
    return items


def responses_tools(tools: tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    """The offered tools as Responses API function tools (not strict: schemas are the tools')."""
    out: list[dict[str, Any]] = []
    for spec in tools:
        tool: dict[str, Any] = {
            "type": "function",
            "name": spec.name,
            "parameters": spec.parameters if spec.parameters is not None else EMPTY_SCHEMA,
            "strict": False,
        }
        if spec.description:
            tool["description"] = spec.description
        out.append(tool)
    return out


def _usage(usage: ResponseUsage | None) -> ModelUsage:
    if usage is None:
        return ModelUsage()
    details = usage.input_tokens_details
    return ModelUsage(
        input_tokens=usage.input_tokens or 0,
        output_tokens=usage.output_tokens or 0,
        cache_read_tokens=(details.cached_tokens or 0) if details is not None else 0,
    )


@attrs.define(eq=False, kw_only=True)
class OpenAIResponsesProvider(OpenAIOptions):
    """A :class:`~prism.core.ModelProvider` on OpenAI's Responses API.

    Stateless: the whole transcript is sent each turn (``store`` is off unless
    asked), so it works like the Chat Completions provider and any transcript
    can be resumed. Build one with ``open_openai_provider(api="responses")``,
    or around your own ``openai.AsyncOpenAI`` client (which you then close).

    Reasoning items come back as :class:`~prism.core.ReasoningContent`
    (their summary as text) and are sent back unchanged in later requests.
    With ``reasoning_effort`` set and ``store`` off, requests ask for the
    items' ``encrypted_content`` (``include``), which is what lets a stateless
    request carry them; an item without it is not sent back.

    Attributes:
        client: the SDK client (retries and rate-limit waits are its own settings).
        instructions: the ``instructions`` (system) text.
        max_tokens: ``max_output_tokens`` for each answer (``None``: the API's default).
        temperature: sampling temperature (``None``: the API's default).
        reasoning_effort: a reasoning model's effort (``reasoning.effort``:
            ``"low"``, ``"medium"``, ``"high"``, ...), with a summary asked for;
            ``None``: the API's defaults, nothing asked.
        stream: stream answers (text and tool-call deltas go to ``on_event``).
        store: let OpenAI store the responses (default off).
        on_event: receives :class:`ModelTextDelta`, :class:`ModelReasoningDelta`,
            :class:`ModelToolCallDelta` and :class:`ModelResponseFinished`.
        extra_body: more JSON fields for each request.
    """

    store: bool = attrs.field(default=False, validator=CHECK_FLAG)

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": request.model,
            "input": responses_input(request.messages, stored=self.store),
            "store": self.store,
        }
        if request.tools:
            params["tools"] = responses_tools(request.tools)
        if self.instructions:
            params["instructions"] = self.instructions
        if self.max_tokens is not None:
            params["max_output_tokens"] = self.max_tokens
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if self.reasoning_effort is not None:
            params["reasoning"] = {"effort": self.reasoning_effort, "summary": "auto"}
            if not self.store:
                params["include"] = ["reasoning.encrypted_content"]
        if self.extra_body:
            params["extra_body"] = dict(self.extra_body)
        return params

    async def complete(self, request: ModelRequest) -> AssistantMessage:
        """Ask the API for the model's next turn.

        Streams by default: text, reasoning summary and tool-call argument
        fragments go to ``on_event`` as they arrive; the answer is built from
        the final response (``response.completed`` or ``response.incomplete``),
        and its usage and status are kept in :attr:`responses`.

        Cancellation (an agent abort): the HTTP request or stream is closed and
        :class:`trio.Cancelled` propagates; nothing is recorded.

        Raises:
            ProviderAPIError: the API answered with an error, or the response failed.
            ProviderConnectionError: the API could not be reached or timed out.
            ProviderResponseError: the stream ended without a final response.
        """
        return await ask(
            provider=_PROVIDER,
            create=self.client.responses.create,
            params=self._params(request),
            stream=self.stream,
            consume=self._consume,
            finish=self._finish,
        )

    async def _finish(self, response: Response) -> AssistantMessage:
        if response.status == "failed":
            error = response.error
            code = error.code if error is not None else None
            message = error.message if error is not None else "the response failed"
            raise ProviderAPIError(
                f"openai API error{f' ({code})' if code else ''}: {message}",
                provider=_PROVIDER,
                error_type=str(code) if code else None,
            )
        content: list[Content] = []
        texts: list[str] = []
        calls: list[ToolCall] = []
        for item in response.output:
            if item.type == "message":
                for part in item.content:
                    if part.type == "output_text":
                        texts.append(part.text)
                    elif part.type == "refusal":
                        texts.append(part.refusal)
            elif item.type == "function_call":
                calls.append(
                    ToolCall.from_json(id=item.call_id, name=item.name, arguments=item.arguments)
                )
            elif item.type == "reasoning":
                content.append(
                    ReasoningContent(
                        text="\n\n".join(part.text for part in item.summary),
                        provider=_PROVIDER,
                        replay=item.model_dump(mode="json", exclude_none=True),
                    )
                )
        text = "".join(texts)
        if text:
            content.append(TextContent(text=text))
        stop_reason: str | None = response.status
        if response.status == "incomplete" and response.incomplete_details is not None:
            stop_reason = f"incomplete: {response.incomplete_details.reason}"
        info = ModelResponseInfo(
            provider=_PROVIDER,
            model=response.model,
            response_id=response.id,
            stop_reason=stop_reason,
            usage=_usage(response.usage),
        )
        return await self.answer(self.on_event, info, content, tuple(calls))

    async def _consume(self, stream: AsyncIterator[ResponseStreamEvent]) -> AssistantMessage:
        sink = self.on_event
        calls: dict[int, tuple[str, str]] = {}
        async for event in stream:
            if event.type == "response.output_text.delta":
                await emit(sink, ModelTextDelta(text=event.delta))
            elif event.type == "response.reasoning_summary_text.delta":
                await emit(sink, ModelReasoningDelta(text=event.delta))
            elif event.type == "response.output_item.added":
                item = event.item
                if item.type == "function_call":
                    calls[event.output_index] = (item.call_id, item.name)
                    await emit(
                        sink,
                        ModelToolCallDelta(
                            index=event.output_index,
                            call_id=item.call_id,
                            name=item.name,
                            arguments_delta=item.arguments or "",
                        ),
                    )
            elif event.type == "response.function_call_arguments.delta":
                call_id, name = calls.get(event.output_index, (None, None))
                await emit(
                    sink,
                    ModelToolCallDelta(
                        index=event.output_index,
                        call_id=call_id,
                        name=name,
                        arguments_delta=event.delta,
                    ),
                )
            elif event.type in ("response.completed", "response.incomplete", "response.failed"):
                return await self._finish(event.response)
            elif event.type == "error":
                raise ProviderAPIError(
                    f"openai API error{f' ({event.code})' if event.code else ''}: {event.message}",
                    provider=_PROVIDER,
                    error_type=event.code,
                )
        raise ProviderResponseError(
            "the openai response stream ended before the response was complete"
        )
