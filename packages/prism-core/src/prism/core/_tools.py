"""Tool definitions, the execution context, the registry and name filters."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Literal, TypeAlias, cast

import attrs

from ._abort import AbortSignal
from ._content import ToolCall, ToolResult
from ._errors import DuplicateToolError
from ._events import EventSink, ToolExecutionProgress, emit_event
from ._fast import frozen_builder
from ._json import JsonObject
from ._options import callable_value, instance_of, one_of, optional, sequence_of, string

__all__ = [
    "ToolDefinition",
    "ToolExecutionContext",
    "ToolFilter",
    "ToolHandler",
    "ToolRegistry",
    "create_tool_registry",
    "filter_tools",
    "is_tool_allowed",
]

_NEVER = AbortSignal()
NO_SIGNAL = _NEVER  # a context's signal when its call has none (it never aborts)


@attrs.define(eq=False, slots=True)
class ToolExecutionContext:
    """What a tool's ``execute`` gets beside its arguments.

    Attributes:
        call: the call being executed (after middleware rewrites).
        signal: aborts when the run is aborted; the tool is also cancelled.
        metadata: host-supplied facts (read-only by convention).
    """

    call: ToolCall
    signal: AbortSignal = attrs.field(default=_NEVER)
    metadata: Mapping[str, object] = attrs.field(factory=dict)
    _events: EventSink | None = attrs.field(default=None, alias="on_event")

    def report_progress(
        self,
        message: str | None = None,
        *,
        progress: float | None = None,
        total: float | None = None,
    ) -> None:
        """Emit a :class:`ToolExecutionProgress` event for this call. Never raises."""
        sink = self._events
        if sink is None:
            return
        emit_event(
            sink,
            ToolExecutionProgress(
                call_id=self.call.id,
                tool_name=self.call.name,
                message=message,
                progress=progress,
                total=total,
            ),
        )


_DUPLICATE = one_of("replace", "error")

ToolHandler: TypeAlias = Callable[[JsonObject, ToolExecutionContext], Awaitable[ToolResult]]


@attrs.frozen(kw_only=True)
class ToolDefinition:
    """A tool: a name, a handler, and what the model is told about it.

    Attributes:
        name: the registry name (``mcp:docs:search`` is fine; providers see a safe alias).
        execute: ``async (arguments, context) -> ToolResult``.
        description: shown to the model.
        parameters: JSON Schema of the arguments, if any.
        exclusive: the tool never runs beside another call of its turn.
        definition_hash: identifies this version of the definition (a hash of
            what the model was shown, set by a host or bridge that fetched it,
            such as the MCP bridge); the ledger records it with every call the
            tool ran. ``None`` for local tools.
    """

    name: str = attrs.field(validator=string())
    execute: ToolHandler = attrs.field(validator=callable_value(), eq=False)
    description: str | None = None
    parameters: JsonObject | None = attrs.field(default=None, eq=False, hash=False)
    exclusive: bool = False
    definition_hash: str | None = attrs.field(default=None, validator=optional(string()))


@attrs.define(eq=False)
class ToolRegistry:
    """A mutable, insertion-ordered set of tools keyed by name.

    Build one with :func:`create_tool_registry`.
    """

    _tools: dict[str, ToolDefinition] = attrs.field(factory=dict, alias="tools", repr=False)
    duplicate: Literal["replace", "error"] = attrs.field(default="error", validator=_DUPLICATE)

    def register(self, tool: ToolDefinition) -> None:
        """Add ``tool``; a replaced tool keeps its place in the order.

        Raises:
            DuplicateToolError: the name is taken and ``duplicate`` is ``"error"``.
            TypeError: ``tool`` is not a :class:`ToolDefinition`.
        """
        if not isinstance(tool, ToolDefinition):
            raise TypeError(f"register() takes a ToolDefinition, got {type(tool).__name__}")
        if self.duplicate == "error" and tool.name in self._tools:
            raise DuplicateToolError(tool.name)
        self._tools[tool.name] = tool

    def unregister(self, name: str) -> ToolDefinition | None:
        """Remove and return the tool called ``name`` (``None`` if there was none)."""
        return self._tools.pop(name, None)

    def get(self, name: str) -> ToolDefinition | None:
        """The tool called ``name``, or ``None``."""
        return self._tools.get(name)

    def list(self) -> list[ToolDefinition]:
        """The tools in registration order."""
        return list(self._tools.values())

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[ToolDefinition]:
        return iter(list(self._tools.values()))


def create_tool_registry(
    tools: Iterable[ToolDefinition] = (),
    *,
    duplicate: Literal["replace", "error"] = "error",
) -> ToolRegistry:
    """A registry holding ``tools`` in order.

    Raises:
        ConfigurationError: ``duplicate`` is not ``"replace"`` or ``"error"``.
        DuplicateToolError: two of ``tools`` share a name and ``duplicate`` is ``"error"``.
    """
    _DUPLICATE.check("create_tool_registry", "duplicate", duplicate)
    registry = ToolRegistry(duplicate=duplicate)
    for tool in tools:
        registry.register(tool)
    return registry


_NAMES = sequence_of(string(non_empty=False))


def _as_tuple(value: object) -> object:
    """An iterable (a set, a generator) as a tuple, for a sequence check; a string as it is."""
    if isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
        return tuple(value)
    return value


def _names(option: str, value: object) -> frozenset[str]:
    return frozenset(cast("tuple[str, ...]", _NAMES.check("ToolFilter", option, _as_tuple(value))))


def _allow(value: Iterable[str]) -> frozenset[str]:
    return _names("allow", value)


def _deny(value: Iterable[str]) -> frozenset[str]:
    return _names("deny", value)


@attrs.frozen(kw_only=True)
class ToolFilter:
    """Exact-name allow and deny sets. Empty ``allow`` allows every name.

    Raises:
        ConfigurationError: ``allow`` or ``deny`` is not a set (or sequence) of strings.
    """

    allow: frozenset[str] = attrs.field(default=frozenset(), converter=_allow)
    deny: frozenset[str] = attrs.field(default=frozenset(), converter=_deny)


_FILTERS = sequence_of(instance_of(ToolFilter))


def check_filters(owner: str, value: object) -> tuple[ToolFilter, ...]:
    """An owner's ``filters`` option (one :class:`ToolFilter`, or an iterable of them) as a tuple.

    Raises:
        ConfigurationError: anything else was given (the error names ``<owner>.filters``).
    """
    if isinstance(value, ToolFilter):
        return (value,)
    return cast("tuple[ToolFilter, ...]", _FILTERS.check(owner, "filters", _as_tuple(value)))


def is_tool_allowed(name: str, *filters: ToolFilter) -> bool:
    """Whether every filter lets ``name`` through.

    Deny wins, and every filter with a non-empty allow set must allow the name.
    """
    for f in filters:
        if name in f.deny:
            return False
        if f.allow and name not in f.allow:
            return False
    return True


def filter_tools(tools: Iterable[ToolDefinition], *filters: ToolFilter) -> list[ToolDefinition]:
    """The tools whose names pass :func:`is_tool_allowed`, in their original order."""
    return [tool for tool in tools if is_tool_allowed(tool.name, *filters)]


# Every dispatched call makes one (call, signal, metadata, event sink: positionally).
build_context = frozen_builder(ToolExecutionContext)
