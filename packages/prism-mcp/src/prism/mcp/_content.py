"""Mapping MCP tool results onto Prism content blocks and results."""

from __future__ import annotations

import binascii
import json
import math
from typing import TYPE_CHECKING, Any

import mcp_types

from prism.core import (
    Content,
    ImageContent,
    JsonValue,
    ResourceContent,
    ResourceLink,
    TextContent,
    ToolResult,
)

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

__all__ = [
    "AUDIO_URI_PREFIX",
    "TASK_META_KEY",
    "map_call_result",
    "map_plain_result",
    "task_of",
    "to_json_value",
]

TASK_META_KEY = "io.prism/created-task"
"""Where the transport puts a ``CreateTaskResult``'s task in the ``_meta`` of a call result."""


def task_of(result: mcp_types.CallToolResult) -> mcp_types.Task | None:
    """The task a task-augmented ``tools/call`` created, if the server made one."""
    meta = result.meta
    raw = meta.get(TASK_META_KEY) if isinstance(meta, dict) else None
    if raw is None:
        return None
    return mcp_types.Task.model_validate(raw, by_name=False)


AUDIO_URI_PREFIX = "mcp-audio:"
"""Audio blocks become a :class:`ResourceContent` whose URI starts with this."""


_SCALARS = (str, int, float, bool, type(None))
_MAX_FAST_DEPTH = 32


def _plain(value: object, depth: int) -> JsonValue:
    """A fresh plain-JSON copy of ``value``; raises ``TypeError`` for anything else."""
    kind = type(value)
    if kind is dict:
        if depth > _MAX_FAST_DEPTH:
            raise TypeError("deep")
        out: dict[str, JsonValue] = {}
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str:
                raise TypeError("key")
            out[key] = _plain(item, depth + 1)
        return out
    if kind is list:
        if depth > _MAX_FAST_DEPTH:
            raise TypeError("deep")
        return [_plain(item, depth + 1) for item in value]  # type: ignore[attr-defined]
    if kind in _SCALARS:
        if kind is float and not math.isfinite(value):  # type: ignore[arg-type]
            raise ValueError("non-finite number")
        return value  # type: ignore[return-value]
    raise TypeError(kind.__name__)


def to_json_value(value: object) -> JsonValue:
    """``value`` as plain JSON (dicts, lists, str, numbers, bool, None); odd types become text.

    Raises:
        ValueError: the value holds a non-finite number or cannot be made JSON.
    """
    # Fresh containers the server cannot alias; the json module handles anything exotic
    # (a pydantic-preserved tuple, a Decimal) and very deep values.
    try:
        return _plain(value, 0)
    except TypeError:
        pass
    result: JsonValue = json.loads(json.dumps(value, default=str, allow_nan=False))
    return result


_MAX_PLAIN_NODES = 2_000_000


def plain_json(value: object) -> JsonValue:
    """``value`` itself when it is plain JSON already, else :func:`to_json_value`'s copy.

    What the SDK parsed from the wire is plain JSON owned by nobody else: walking
    it (exact ``dict``/``list``/``str``/``int``/``float``/``bool``/``None``,
    string keys, finite numbers) costs no memory, where a copy doubled a
    result's or a listing's peak. Anything else (a tuple pydantic kept, a
    subclass) takes the copy.

    Raises:
        ValueError: the value holds a non-finite number or cannot be made JSON.
    """
    stack: list[object] = [value]
    budget = _MAX_PLAIN_NODES
    while stack:
        budget -= 1
        if budget < 0:
            # Not what a parse makes (a cycle, or a value shared many times): copy.
            return to_json_value(value)
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            if len(item) < _BULK:  # type: ignore[arg-type]
                for key in item:  # type: ignore[attr-defined]
                    if type(key) is not str:
                        return to_json_value(value)
            elif not set(map(type, item)) <= _KEYS:  # type: ignore[call-overload]
                return to_json_value(value)
            children: Collection[object] = item.values()  # type: ignore[attr-defined]
        elif kind is list:
            children = item  # type: ignore[assignment]
        else:
            children = (item,)
        if len(children) < _BULK:
            for child in children:
                t = type(child)
                if t is dict or t is list:
                    if child is not item:
                        stack.append(child)
                elif t is float:
                    if not math.isfinite(child):  # type: ignore[arg-type]
                        raise ValueError("non-finite number")
                elif t is not str and t is not int and t is not bool and child is not None:
                    return to_json_value(value)
            continue
        # Many members: their types at C speed first. An array of 475,000 numbers
        # is a pass that builds nothing per member, not Python steps per member.
        kinds = set(map(type, children))
        if not kinds <= _PLAIN_TYPES:
            return to_json_value(value)
        if float in kinds and not _finite(children, kinds):
            raise ValueError("non-finite number")
        if dict in kinds or list in kinds:
            stack.extend(
                child
                for child in children
                if (type(child) is dict or type(child) is list) and child is not item
            )
    return value  # type: ignore[return-value]


_BULK = 32
"""Members of one object or array past which their types are sorted at C speed first."""
_KEYS = frozenset({str})
_PLAIN_TYPES = frozenset({dict, list, str, int, float, bool, type(None)})


_NUMBERS = frozenset({int, float, bool})


def _finite(members: Collection[object], kinds: set[type]) -> bool:
    """Whether every ``float`` among ``members`` (of the types ``kinds``) is finite."""
    floats = (
        members if kinds <= _NUMBERS else [member for member in members if type(member) is float]
    )
    try:
        # A NaN or an infinity anywhere makes the exact sum one of them (or raises).
        return math.isfinite(math.fsum(floats))  # type: ignore[arg-type]
    except ValueError:  # an infinity of each sign
        return False
    except OverflowError:  # finite numbers whose sum passes a float's range
        return all(math.isfinite(member) for member in floats if type(member) is float)


_MCP_TEXT = mcp_types.TextContent
_IMAGE_LEFT_OUT = TextContent(
    text="[an image the server sent was left out: its data is not a base64 PNG, JPEG, GIF "
    "or WebP image]"
)


def _image_type(header: bytes) -> str | None:
    """The MIME type of a PNG, JPEG, GIF or WebP image from its first bytes, else ``None``."""
    if header.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if header.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if header.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(header) >= 12 and header.startswith(b"RIFF") and header[8:12] == b"WEBP":
        return "image/webp"
    return None


def _image(data: object) -> Content:
    """An image block as its bytes say it is, whatever type the server declared.

    ``ImageContent`` promises base64 data and a type detected from it: the
    declared ``mimeType`` is free text a server writes (providers send it on
    as a media type), so the type is read from the image's magic bytes, and
    data that is not base64 of a PNG, JPEG, GIF or WebP image becomes a note.
    """
    if type(data) is not str or not data.isascii():
        return _IMAGE_LEFT_OUT
    try:
        kind = _image_type(binascii.a2b_base64(data[:24], strict_mode=True))
        if kind is not None:
            binascii.a2b_base64(data, strict_mode=True)  # all of it base64 (a bounded copy)
    except binascii.Error:
        return _IMAGE_LEFT_OUT
    if kind is None:
        return _IMAGE_LEFT_OUT
    return ImageContent(data=data, mime_type=kind)


def _block(block: object, index: int) -> Content:
    if type(block) is _MCP_TEXT:
        return TextContent(text=block.text)
    if isinstance(block, mcp_types.TextContent):
        return TextContent(text=block.text)
    if isinstance(block, mcp_types.ImageContent):
        return _image(block.data)
    if isinstance(block, mcp_types.AudioContent):
        return ResourceContent(
            uri=f"{AUDIO_URI_PREFIX}{index}", mime_type=block.mime_type, blob=block.data
        )
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return ResourceContent(
                uri=str(resource.uri), mime_type=resource.mime_type, text=resource.text
            )
        return ResourceContent(
            uri=str(resource.uri), mime_type=resource.mime_type, blob=resource.blob
        )
    if isinstance(block, mcp_types.ResourceLink):
        return ResourceLink(
            uri=str(block.uri),
            name=block.name,
            mime_type=block.mime_type,
            description=block.description,
        )
    return TextContent(text=f"[unsupported MCP content block: {type(block).__name__}]")


def map_call_result(
    result: mcp_types.CallToolResult, details: Mapping[str, JsonValue]
) -> ToolResult:
    """A Prism result for an MCP ``CallToolResult``.

    text → TextContent, image → ImageContent, audio → ResourceContent
    (``uri="mcp-audio:<index>"``, base64 in ``blob``), embedded resource →
    ResourceContent, resource link → ResourceLink; ``structured_content`` →
    ``structured``; ``is_error`` → ``is_error``. Content annotations (untrusted
    hints) go to ``details["mcp_content_annotations"]`` as
    ``[{"index", "audience", "priority", "lastModified"}]``, one per annotated block.
    """
    blocks = tuple(_block(block, index) for index, block in enumerate(result.content))
    marks: list[JsonValue] = []
    for index, block in enumerate(result.content):
        hints = getattr(block, "annotations", None)
        if hints is not None:
            mark = _content_annotations(hints, index)
            if mark is not None:
                marks.append(mark)
    structured: JsonValue = None
    if result.structured_content is not None:
        try:
            structured = plain_json(result.structured_content)
        except ValueError:
            structured = None
    out = dict(details)
    if marks:
        out["mcp_content_annotations"] = marks
    return ToolResult(
        content=blocks,
        is_error=bool(result.is_error),
        structured=structured,
        details=out,
    )


def map_plain_result(plain: dict[str, Any], details: Mapping[str, JsonValue]) -> ToolResult:
    """:func:`map_call_result` of a plain answer's model, from the answer itself.

    ``plain``: what ``_fastcall.plain_answer`` passed (text blocks only, no
    annotations), its ``structuredContent`` back in place (``_gate.attach_raw``).
    The result equals the one :func:`map_call_result` makes of the model the
    SDK builds from it (a test holds them equal), without building it.
    """
    structured: JsonValue = None
    value = plain.get("structuredContent")
    if value is not None:
        try:
            structured = plain_json(value)
        except ValueError:
            structured = None
    return ToolResult(
        content=tuple(TextContent(text=block["text"]) for block in plain["content"]),
        is_error=plain.get("isError") is True,
        structured=structured,
        details=dict(details),
    )


_AUDIENCES = frozenset({"user", "assistant"})


def _content_annotations(hints: object, index: int) -> JsonValue:
    """``{"index", "audience", "priority", "lastModified"}`` for one block, or ``None``."""
    mark: dict[str, JsonValue] = {"index": index}
    audience = getattr(hints, "audience", None)
    if isinstance(audience, list):
        roles: list[JsonValue] = []
        for role in audience[:2]:
            if str(role) in _AUDIENCES:
                roles.append(str(role))
        mark["audience"] = roles
    priority = getattr(hints, "priority", None)
    if (
        isinstance(priority, (int, float))
        and not isinstance(priority, bool)
        and math.isfinite(priority)
    ):
        mark["priority"] = float(priority)
    modified = getattr(hints, "last_modified", None)
    if isinstance(modified, str):
        mark["lastModified"] = modified[:64]
    return mark if len(mark) > 1 else None
