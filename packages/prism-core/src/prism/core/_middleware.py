"""Middleware: hooks that may rewrite or short-circuit calls, and rewrite results."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeAlias

import attrs

from ._content import ToolCall, ToolResult
from ._options import callable_value
from ._tools import ToolExecutionContext

__all__ = ["MiddlewareRegistry", "ToolCallHook", "ToolResultHook"]

ToolCallHook: TypeAlias = Callable[
    [ToolCall, ToolExecutionContext],
    "ToolCall | ToolResult | Awaitable[ToolCall | ToolResult | None] | None",
]
"""Return a :class:`ToolCall` to rewrite the call, a :class:`ToolResult` to block it
(blocked reason ``tool_denied``, that result answers the model), or ``None`` to pass."""

ToolResultHook: TypeAlias = Callable[
    [ToolCall, ToolResult, ToolExecutionContext],
    "ToolResult | Awaitable[ToolResult | None] | None",
]
"""Return a :class:`ToolResult` to replace the result, or ``None`` to keep it."""


_CALLABLE = callable_value()


@attrs.define(eq=False)
class MiddlewareRegistry:
    """Ordered ``on_tool_call`` and ``on_tool_result`` hooks; each may be sync or async.

    Both methods return the hook, so they work as decorators.
    """

    call_hooks: list[ToolCallHook] = attrs.field(factory=list, init=False)
    result_hooks: list[ToolResultHook] = attrs.field(factory=list, init=False)

    def on_tool_call(self, fn: ToolCallHook) -> ToolCallHook:
        """Run ``fn`` before every call's gates, in registration order.

        ``fn(call, ctx)`` returns a :class:`ToolCall` to rewrite the call (lookup,
        filters and the JSON-object check then run on the rewrite), a
        :class:`ToolResult` to block it (reason ``tool_denied``), or ``None``.

        Raises:
            ConfigurationError: ``fn`` is not callable.
        """
        _CALLABLE.check("MiddlewareRegistry.on_tool_call", "fn", fn)
        self.call_hooks.append(fn)
        return fn

    def on_tool_result(self, fn: ToolResultHook) -> ToolResultHook:
        """Run ``fn`` on every executed call's result, in registration order.

        ``fn(call, result, ctx)`` returns a replacement :class:`ToolResult` or
        ``None`` to keep the result. Blocked calls never reach these hooks.

        Raises:
            ConfigurationError: ``fn`` is not callable.
        """
        _CALLABLE.check("MiddlewareRegistry.on_tool_result", "fn", fn)
        self.result_hooks.append(fn)
        return fn
