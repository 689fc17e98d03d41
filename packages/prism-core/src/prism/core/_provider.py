"""The model provider seam: requests, tool specs, and a scripted provider."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeAlias, runtime_checkable

import attrs
import trio

from ._content import AssistantMessage, Message, ToolCall
from ._errors import ConfigurationError, ModelProviderError, ScriptExhaustedError
from ._host_calls import await_callback, trio_native
from ._json import JsonObject

__all__ = ["ModelProvider", "ModelRequest", "ScriptedProvider", "ScriptedTurn", "ToolSpec"]


@attrs.frozen(kw_only=True)
class ToolSpec:
    """A tool as a model provider is told about it.

    Attributes:
        name: the provider-safe alias (matches ``^[A-Za-z0-9_-]{1,64}$``).
        description: the tool's description, if any.
        parameters: the JSON Schema of its arguments, if any.
    """

    name: str
    description: str | None = None
    parameters: JsonObject | None = attrs.field(default=None, eq=False, hash=False)


def _tuple(value: object) -> tuple[object, ...]:
    if isinstance(value, tuple):
        return value
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(f"expected a sequence, got {type(value).__name__}")
    return tuple(value)


@attrs.frozen(kw_only=True)
class ModelRequest:
    """One request to a model provider.

    Attributes:
        model: the model name the agent was created with.
        messages: the whole transcript so far; every tool call in it has its result.
        tools: the tools offered for this turn (empty for the final answer).
    """

    model: str
    messages: tuple[Message, ...] = attrs.field(converter=_tuple)
    tools: tuple[ToolSpec, ...] = attrs.field(default=(), converter=_tuple)


@runtime_checkable
class ModelProvider(Protocol):
    """Answers a :class:`ModelRequest` with the model's next assistant turn."""

    async def complete(self, request: ModelRequest) -> AssistantMessage:
        """Return the model's answer to ``request``.

        Cancellation: the agent cancels this call when its run is aborted;
        a provider must let :class:`trio.Cancelled` pass.
        """
        ...


ScriptedTurn: TypeAlias = (
    AssistantMessage | Callable[[ModelRequest], AssistantMessage | Awaitable[AssistantMessage]]
)
"""A scripted turn: a fixed answer, or a function of the request that returns one."""


def _turns(value: Sequence[ScriptedTurn]) -> tuple[ScriptedTurn, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ConfigurationError(
            f"ScriptedProvider turns must be a sequence of AssistantMessage or callables, "
            f"got {type(value).__name__}"
        )
    items = tuple(value)
    for index, item in enumerate(items):
        if not isinstance(item, AssistantMessage) and not callable(item):
            raise ConfigurationError(
                f"ScriptedProvider turns[{index}] must be an AssistantMessage or a callable, "
                f"got {type(item).__name__}"
            )
    return items


@trio_native
@attrs.define(eq=False)
class ScriptedProvider:
    """A :class:`ModelProvider` that replays a script, for tests and demos.

    Each request consumes the next turn: an :class:`AssistantMessage` is returned
    as it is; a callable is called with the request and its answer returned (it
    may be async). Every request is kept in :attr:`requests`.

    Args:
        turns: the answers, in order.

    Raises:
        ConfigurationError: ``turns`` is not a sequence of messages and callables.
    """

    turns: tuple[ScriptedTurn, ...] = attrs.field(converter=_turns)
    _requests: list[ModelRequest] = attrs.field(factory=list, init=False)
    _next: int = attrs.field(default=0, init=False)

    @property
    def requests(self) -> list[ModelRequest]:
        """The requests received so far (a copy)."""
        return list(self._requests)

    @property
    def remaining(self) -> int:
        """How many turns are left."""
        return len(self.turns) - self._next

    async def complete(self, request: ModelRequest) -> AssistantMessage:
        """Answer with the next scripted turn.

        Always checkpoints; cancellation consumes nothing if it lands before the
        turn is taken.

        Raises:
            ScriptExhaustedError: every turn was already used (the message says
                how many there were).
            ModelProviderError: a scripted callable raised or returned something
                that is not an :class:`AssistantMessage`.
        """
        await trio.lowlevel.checkpoint()
        index = self._next
        if index >= len(self.turns):
            raise ScriptExhaustedError(
                f"ScriptedProvider has no turn left: it held {len(self.turns)} turn(s) "
                f"and was asked for turn {index + 1}"
            )
        self._next = index + 1
        self._requests.append(request)
        turn = self.turns[index]
        if isinstance(turn, AssistantMessage):
            return turn
        try:
            answer = turn(request)
            if inspect.isawaitable(answer):
                answer = await await_callback(turn, answer)
        except Exception as exc:
            raise ModelProviderError(
                f"ScriptedProvider turn {index + 1} raised {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(answer, AssistantMessage):
            raise ModelProviderError(
                f"ScriptedProvider turn {index + 1} returned {type(answer).__name__}, "
                "not an AssistantMessage"
            )
        return answer


def tool_calls_of(message: AssistantMessage) -> tuple[ToolCall, ...]:
    """The tool calls of a provider answer, checked to be :class:`ToolCall` values.

    Raises:
        ModelProviderError: an item is not a :class:`ToolCall`, or its id or name
            is not a string.
    """
    calls = message.tool_calls
    for call in calls:
        if (
            not isinstance(call, ToolCall)
            or not isinstance(call.id, str)
            or not isinstance(call.name, str)
        ):
            raise ModelProviderError(
                f"the provider answered with a malformed tool call: {call!r:.200}"
            )
    return calls
