"""MCP elicitation on the terminal: a server asks the user for input.

On a terminal the question is shown as coming from the named server; a form is
filled field by field, each typed per the requested schema (string, number,
integer, boolean, enum); a URL is shown in full and never opened. In a pipe
nobody can answer, so every request is declined.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Literal

import attrs
import trio

from prism.core import trio_native

from ._output import write_stdout
from ._render import safe_text

if TYPE_CHECKING:
    from prism.core import JsonObject, JsonValue
    from prism.mcp import McpElicitation, McpElicitationAnswer, McpElicitCallback

__all__ = ["TerminalElicitor", "decline", "form_value", "terminal_elicitor"]

_TRIES = 3


async def decline(request: McpElicitation) -> McpElicitationAnswer:
    """Nobody can answer (a pipe): decline."""
    from prism.mcp import McpElicitationAnswer

    return McpElicitationAnswer(action="decline")


def form_value(schema: Mapping[str, object], text: str) -> JsonValue:
    """``text`` as the field ``schema`` asks for.

    Raises:
        ValueError: the text is not such a value (the message says what is).
    """
    kind = schema.get("type", "string")
    choices = schema.get("enum")
    if isinstance(choices, list) and choices:
        if text not in [str(c) for c in choices]:
            raise ValueError("one of " + ", ".join(str(c) for c in choices))
        return next(c for c in choices if str(c) == text)  # type: ignore[no-any-return]
    if kind == "boolean":
        lowered = text.lower()
        if lowered in ("y", "yes", "true"):
            return True
        if lowered in ("n", "no", "false"):
            return False
        raise ValueError("yes or no")
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            raise ValueError("a whole number") from None
    if kind == "number":
        try:
            number = float(text)
        except ValueError:
            raise ValueError("a number") from None
        if number != number or number in (float("inf"), float("-inf")):
            raise ValueError("a finite number")
        return number
    return text


@trio_native  # Prism's own trio code: stays on trio under an asyncio host
@attrs.define(eq=False)
class TerminalElicitor:
    """Answers elicitation on the terminal, one request at a time.

    Cancellation: cancelling abandons the question (the server gets no answer).
    """

    write: Callable[[str], None]
    read_line: Callable[[], str]
    _lock: trio.Lock = attrs.field(factory=trio.Lock, init=False)

    async def _ask(self, prompt: str) -> str | None:
        self.write(prompt)
        line = await trio.to_thread.run_sync(self.read_line, abandon_on_cancel=True)
        return None if not line else line.strip()

    async def __call__(self, request: McpElicitation) -> McpElicitationAnswer:
        """Show ``request`` and read the user's answer."""
        from prism.mcp import McpElicitationAnswer

        async with self._lock:
            # Server-chosen text goes to the terminal: control characters shown, never sent.
            who = safe_text(request.server_id)
            self.write(f"\nMCP server {who!r} asks: {safe_text(request.message)}\n")
            if request.mode == "url":
                self.write(
                    f"  it wants you to visit: {safe_text(request.url or '')}\n"
                    "  (prism does not open it; open it yourself only if you trust it)\n"
                )
                answer = await self._ask("  done? [y]es / [n]o / [c]ancel: ")
                return McpElicitationAnswer(action=_action(answer))
            action = _action(await self._ask("  answer? [y]es / [n]o / [c]ancel: "))
            if action != "accept":
                return McpElicitationAnswer(action=action)
            content = await self._form(request.requested_schema or {})
            if content is None:
                return McpElicitationAnswer(action="cancel")
            return McpElicitationAnswer(action="accept", content=content)

    async def _form(self, schema: JsonObject) -> JsonObject | None:
        properties = schema.get("properties")
        required = schema.get("required")
        needed = set(required) if isinstance(required, list) else set()
        content: JsonObject = {}
        if not isinstance(properties, dict):
            return content
        for name, field in properties.items():
            spec: Mapping[str, object] = field if isinstance(field, dict) else {}
            value = await self._field(name, spec, name in needed)
            if value is _CANCEL:
                return None
            if value is not _SKIP:
                content[name] = value  # type: ignore[assignment]
        return content

    async def _field(self, name: str, spec: Mapping[str, object], required: bool) -> object:
        kind = spec.get("type", "string")
        title = spec.get("title") or spec.get("description") or ""
        choices = spec.get("enum")
        shown = f"one of {', '.join(map(str, choices))}" if isinstance(choices, list) else kind
        default = spec.get("default")
        hint = f", default {safe_text(str(default))}" if default is not None else ""
        label = f"  {safe_text(name)}{'' if required else '?'} ({safe_text(str(shown))}{hint})"
        if title:
            label += f" {safe_text(str(title))}"
        for _ in range(_TRIES):
            text = await self._ask(label + ": ")
            if text is None:
                return _CANCEL
            if not text:
                if default is not None:
                    return default
                if not required:
                    return _SKIP
                self.write("    this field is required\n")
                continue
            try:
                return form_value(spec, text)
            except ValueError as exc:
                self.write(f"    expected {safe_text(str(exc))}\n")
        return _CANCEL


_SKIP = object()
_CANCEL = object()


def _action(answer: str | None) -> Literal["accept", "decline", "cancel"]:
    if answer is not None and answer.lower() in ("y", "yes"):
        return "accept"
    if answer is not None and answer.lower() in ("n", "no"):
        return "decline"
    return "cancel"


def terminal_elicitor() -> McpElicitCallback:
    """The elicitation callback for this process: ask on a terminal, decline in a pipe."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return decline

    return TerminalElicitor(write=write_stdout, read_line=sys.stdin.readline)
