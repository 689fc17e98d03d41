"""What a provider reports while a model answers: text and tool-call deltas, usage."""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from typing import ClassVar, TypeAlias

import attrs

from prism.core import await_callback

__all__ = [
    "ModelReasoningDelta",
    "ModelResponseFinished",
    "ModelResponseInfo",
    "ModelTextDelta",
    "ModelToolCallDelta",
    "ModelUsage",
    "StreamEvent",
    "StreamSink",
]

_log = logging.getLogger("prism.providers")


@attrs.frozen(kw_only=True)
class ModelUsage:
    """Tokens one response used, as the API counted them.

    Attributes:
        input_tokens: prompt tokens (for Anthropic, not counting cache reads and writes).
        output_tokens: generated tokens.
        cache_read_tokens: prompt tokens served from the provider's cache, if reported.
        cache_write_tokens: prompt tokens written to the cache, if reported.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: ModelUsage) -> ModelUsage:
        return ModelUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )


@attrs.frozen(kw_only=True)
class ModelResponseInfo:
    """Facts about one model response (kept by the provider, never holding a key).

    Attributes:
        provider: ``"openai"`` or ``"anthropic"``.
        model: the model that answered, as the API named it.
        response_id: the API's id for the response, if any.
        stop_reason: why the model stopped, in the API's own words
            (``"stop"``, ``"tool_calls"``, ``"length"``; ``"end_turn"``, ``"tool_use"``,
            ``"max_tokens"``, ...), or ``None`` if it did not say.
        usage: the tokens it used.
        tool_calls: how many tool calls it asked for.
    """

    provider: str
    model: str
    response_id: str | None = None
    stop_reason: str | None = None
    usage: ModelUsage = ModelUsage()
    tool_calls: int = 0


@attrs.frozen(kw_only=True)
class ModelTextDelta:
    """A piece of the model's text, as it streams."""

    type: ClassVar[str] = "model_text_delta"
    text: str
    timestamp: float = attrs.field(factory=time.time)


@attrs.frozen(kw_only=True)
class ModelReasoningDelta:
    """A piece of the model's readable reasoning (thinking text or summary), as it streams.

    For display only: the reasoning itself reaches the transcript as a
    :class:`prism.core.ReasoningContent` when the response is complete.
    """

    type: ClassVar[str] = "model_reasoning_delta"
    text: str
    timestamp: float = attrs.field(factory=time.time)


@attrs.frozen(kw_only=True)
class ModelToolCallDelta:
    """A piece of a tool call, as it streams.

    Attributes:
        index: the call's position in the response.
        call_id: the call's id, once known.
        name: the provider-safe tool name, once known.
        arguments_delta: the next fragment of the JSON arguments.
    """

    type: ClassVar[str] = "model_tool_call_delta"
    index: int
    call_id: str | None
    name: str | None
    arguments_delta: str
    timestamp: float = attrs.field(factory=time.time)


@attrs.frozen(kw_only=True)
class ModelResponseFinished:
    """The model finished one response."""

    type: ClassVar[str] = "model_response_finished"
    info: ModelResponseInfo
    timestamp: float = attrs.field(factory=time.time)


StreamEvent: TypeAlias = (
    ModelTextDelta | ModelReasoningDelta | ModelToolCallDelta | ModelResponseFinished
)
"""Everything a provider reports to its ``on_event`` sink."""

StreamSink: TypeAlias = Callable[[StreamEvent], "Awaitable[None] | None"]
"""Receives stream events in the order they happen: a plain function, or an ``async def``.

An ``async def`` sink is awaited before the provider reads on, so a slow
consumer (a websocket, a queue with a bound) slows the stream instead of
piling events up. Under ``trio.run`` it is trio code; under an asyncio host
it is asyncio code, run on the host's loop (unless marked ``trio_native``).
"""


async def emit(sink: StreamSink | None, event: StreamEvent) -> None:
    """Deliver ``event``, waiting for an async sink; a sink that raises is only logged.

    A sink never breaks a response. Cancellation is not caught: cancelling the
    response while an async sink runs cancels the sink too.
    """
    if sink is None:
        return
    try:
        outcome = sink(event)
        if outcome is not None and inspect.isawaitable(outcome):
            await await_callback(sink, outcome)
    except Exception:
        _log.exception("a stream event sink raised on %s", type(event).__name__)
