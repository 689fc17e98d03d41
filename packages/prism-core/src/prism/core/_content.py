"""Content blocks, tool calls, tool results and transcript messages."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

import attrs

from ._json import JsonValue

__all__ = [
    "AssistantMessage",
    "Content",
    "ImageContent",
    "Message",
    "ResourceContent",
    "ResourceLink",
    "TextContent",
    "ToolCall",
    "ToolResult",
    "ToolResultMessage",
    "UserMessage",
]


def _tuple(value: object) -> tuple[object, ...]:
    if isinstance(value, tuple):
        return value
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(f"expected a sequence of content blocks, got {type(value).__name__}")
    return tuple(value)


@attrs.frozen(kw_only=True)
class TextContent:
    """A block of text."""

    text: str


@attrs.frozen(kw_only=True)
class ImageContent:
    """An image; ``data`` is base64 and ``mime_type`` was detected, not guessed from a name."""

    data: str
    mime_type: str


@attrs.frozen(kw_only=True)
class ResourceContent:
    """An embedded resource: a URI with its text or base64 ``blob``."""

    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: str | None = None


@attrs.frozen(kw_only=True)
class ResourceLink:
    """A link to a resource the model may ask for later."""

    uri: str
    name: str | None = None
    mime_type: str | None = None
    description: str | None = None


Content: TypeAlias = TextContent | ImageContent | ResourceContent | ResourceLink


@attrs.frozen(kw_only=True)
class ToolCall:
    """A call the model asked for.

    ``arguments`` is whatever the provider parsed; the dispatcher checks that it
    is a JSON object before anything else looks at it.
    """

    id: str
    name: str
    # Compared, but left out of the hash: parsed arguments are usually a dict.
    arguments: object = attrs.field(hash=False)


@attrs.frozen(kw_only=True)
class ToolResult:
    """What a tool call produced; ``is_error`` results are answers too.

    Attributes:
        content: the blocks shown to the model.
        is_error: whether the call failed (blocked, raised, timed out, ...).
        structured: optional machine-readable result.
        details: facts for hosts, events and the ledger (not shown to the model).
    """

    content: tuple[Content, ...] = attrs.field(default=(), converter=_tuple)
    is_error: bool = False
    # Compared, but left out of the hash (JSON objects are dicts).
    structured: JsonValue = attrs.field(default=None, hash=False)
    details: Mapping[str, JsonValue] = attrs.field(factory=dict, hash=False)

    @classmethod
    def text(cls, text: str, *, is_error: bool = False) -> ToolResult:
        """A result holding one text block."""
        return cls(content=(TextContent(text=text),), is_error=is_error)

    @classmethod
    def error(cls, message: str, **details: JsonValue) -> ToolResult:
        """An error result whose text is ``message``; ``details`` go to hosts, not the model."""
        return cls(content=(TextContent(text=message),), is_error=True, details=details)

    @property
    def joined_text(self) -> str:
        """The text blocks joined with newlines (other blocks are left out)."""
        return "\n".join(block.text for block in self.content if isinstance(block, TextContent))


@attrs.frozen(kw_only=True)
class UserMessage:
    """A user turn."""

    content: tuple[Content, ...] = attrs.field(converter=_tuple)


@attrs.frozen(kw_only=True)
class AssistantMessage:
    """A model turn: text and the tool calls it asked for."""

    content: tuple[Content, ...] = attrs.field(default=(), converter=_tuple)
    tool_calls: tuple[ToolCall, ...] = attrs.field(default=(), converter=_tuple)


@attrs.frozen(kw_only=True)
class ToolResultMessage:
    """The answer to one tool call, in the transcript."""

    call_id: str
    tool_name: str
    result: ToolResult


Message: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage
