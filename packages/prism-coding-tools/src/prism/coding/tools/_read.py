"""The ``read`` tool: a bounded page of a text file, or a bounded image."""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeAlias

import attrs
import trio

from prism.core import (
    ExecutionAction,
    ExecutionPolicy,
    ImageContent,
    JsonObject,
    JsonValue,
    PrismError,
    TextContent,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    trio_native,
)
from prism.core.options import callable_value, optional

from ._common import (
    _ArgumentError,
    check_cwd,
    check_option,
    check_positive_int,
    file_error_result,
    optional_int,
    policy_check,
    required_path,
)
from ._files import file_operations_or_local
from ._output import CLIP_MARKER
from ._protocols import FileOperations

if TYPE_CHECKING:
    from ._protocols import FileStat

__all__ = [
    "DEFAULT_MAX_IMAGE_BYTES",
    "TransformImage",
    "TransformImageInput",
    "create_read_tool",
    "detect_image_mime_type",
]

DEFAULT_MAX_IMAGE_BYTES = 10_000_000
"""Largest image (in bytes, before and after ``transform_image``) the read tool returns."""

_SNIFF_BYTES = 8192
_PAGE_CHUNK = 64 * 1024
_SKIP_CHUNK = 1024 * 1024
_MAX_LINE_SCAN = 8 * 1024 * 1024


@attrs.frozen(kw_only=True)
class TransformImageInput:
    """What ``transform_image`` gets: the image bytes and the MIME type read from their magic."""

    buffer: bytes
    mime_type: str


TransformImage: TypeAlias = Callable[[TransformImageInput], Awaitable[bytes]]
"""Host code that resizes or re-encodes an image; its output is size-checked again."""


def detect_image_mime_type(header: bytes) -> str | None:
    """The MIME type of a PNG, JPEG, GIF or WebP image from its first bytes, else ``None``.

    Only magic bytes count; a file name or extension is never consulted.
    """
    if header.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if header.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if header.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(header) >= 12 and header.startswith(b"RIFF") and header[8:12] == b"WEBP":
        return "image/webp"
    return None


def _base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


_PARAMETERS: JsonObject = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File to read (relative to the working dir)."},
        "offset": {"type": "integer", "minimum": 1, "description": "First line (1-based)."},
        "limit": {"type": "integer", "minimum": 1, "description": "Number of lines to read."},
    },
    "required": ["path"],
    "additionalProperties": False,
}


@attrs.define(eq=False)
class _Page:
    lines: list[bytes] = attrs.field(factory=list)
    used: int = 0
    clipped: int = 0
    more: bool = False
    by_bytes: bool = False
    long_line_unscanned: bool = False


@trio_native  # Prism's own trio code: stays on trio under an asyncio host
@attrs.frozen(kw_only=True)
class _ReadTool:
    cwd: str
    policy: ExecutionPolicy | None
    files: FileOperations
    max_lines: int
    max_bytes: int
    max_line_bytes: int
    max_image_bytes: int
    transform_image: TransformImage | None

    async def execute(self, args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        try:
            path = required_path(args)
            offset = optional_int(args, "offset", minimum=1) or 1
            limit = optional_int(args, "limit", minimum=1)
        except _ArgumentError as exc:
            return exc.result("read")
        try:
            resolved = await self.files.resolve(path, cwd=self.cwd)
        except (OSError, PrismError, ValueError) as exc:
            return file_error_result("read", path, exc)
        checked = await policy_check(
            "read",
            self.policy,
            ExecutionAction(
                kind="read",
                operation="read",
                paths=(resolved,),
                risk="low",
                metadata={"offset": offset, "limit": limit},
            ),
        )
        if isinstance(checked, ToolResult):
            return checked
        target = resolved
        try:
            if checked.paths and checked.paths[0] != resolved:
                target = await self.files.resolve(checked.paths[0], cwd=self.cwd)
            st = await self.files.stat(target)
            if st.kind == "directory":
                return ToolResult.error(f"read: {target}: is a directory", path=target)
            if st.kind != "file":
                return ToolResult.error(f"read: {target}: not a regular file", path=target)
            head = await self.files.read(target, length=min(_SNIFF_BYTES, max(st.size, 16)))
            mime = detect_image_mime_type(head[:16])
            if mime is not None:
                return await self._image(target, st, mime)
            if b"\0" in head:
                return ToolResult(
                    content=(
                        TextContent(
                            text=f"[{target} is a binary file ({st.size} bytes); not shown]"
                        ),
                    ),
                    details={"path": target, "binary": True, "size": st.size},
                )
            return await self._text(target, st, offset, limit)
        except (OSError, PrismError, ValueError) as exc:
            return file_error_result("read", target, exc)

    async def _image(self, target: str, st: FileStat, mime: str) -> ToolResult:
        limit = self.max_image_bytes
        base: dict[str, JsonValue] = {"path": target, "mime_type": mime, "max_image_bytes": limit}
        if st.size > limit:
            return ToolResult.error(
                f"read: {target}: {mime} image is {st.size} bytes, over the "
                f"{limit}-byte limit (max_image_bytes); not read",
                size=st.size,
                image_too_large=True,
                **base,
            )
        data = await self.files.read(target, length=limit + 1)
        if len(data) > limit:
            return ToolResult.error(
                f"read: {target}: {mime} image grew past the {limit}-byte limit while "
                "being read; not returned",
                size=len(data),
                image_too_large=True,
                **base,
            )
        original_size = len(data)
        if self.transform_image is not None:
            try:
                data = await self.transform_image(TransformImageInput(buffer=data, mime_type=mime))
            except Exception as exc:
                return ToolResult.error(
                    f"read: {target}: transform_image failed: {type(exc).__name__}: {exc}", **base
                )
            if not isinstance(data, (bytes, bytearray, memoryview)):
                return ToolResult.error(
                    f"read: {target}: transform_image returned {type(data).__name__}, not bytes",
                    **base,
                )
            data = bytes(data)
            if len(data) > limit:
                return ToolResult.error(
                    f"read: {target}: the transformed image is {len(data)} bytes, over the "
                    f"{limit}-byte limit (max_image_bytes); not returned",
                    size=len(data),
                    image_too_large=True,
                    **base,
                )
            new_mime = detect_image_mime_type(data[:16])
            if new_mime is None:
                return ToolResult.error(
                    f"read: {target}: transform_image returned bytes that are not a "
                    "PNG, JPEG, GIF or WebP image",
                    **base,
                )
            mime = new_mime
        encoded = await trio.to_thread.run_sync(_base64, data)
        return ToolResult(
            content=(
                TextContent(text=f"Read image {target} [{mime}, {len(data)} bytes]"),
                ImageContent(data=encoded, mime_type=mime),
            ),
            details={
                "path": target,
                "mime_type": mime,
                "size": len(data),
                "original_size": original_size,
                "transformed": self.transform_image is not None,
            },
        )

    async def _skip_to(self, target: str, line: int) -> tuple[int, int, int]:
        """Where ``line`` starts: (byte position, line reached, line count if EOF came first)."""
        position = 0
        current = 1
        last = 0x0A
        while current < line:
            data = await self.files.read(target, offset=position, length=_SKIP_CHUNK)
            if not data:
                return position, current, current - (1 if last == 0x0A else 0)
            last = data[-1]
            count = data.count(b"\n")
            if current + count < line:
                current += count
                position += len(data)
                continue
            rest = data.split(b"\n", line - current)[-1]
            position += len(data) - len(rest)
            current = line
        return position, current, 0

    async def _text(self, target: str, st: FileStat, offset: int, limit: int | None) -> ToolResult:
        position, reached, total = await self._skip_to(target, offset)
        if reached < offset:
            return _beyond_end(target, offset, total)
        want = min(limit or self.max_lines, self.max_lines)
        line_limit = min(self.max_line_bytes, self.max_bytes)
        page = _Page()
        partial = bytearray()
        partial_len = 0

        def finish_line(piece: bytes) -> bool:
            """Add the line ``partial + piece``; False when the byte budget refuses it."""
            nonlocal partial, partial_len
            room = line_limit - len(partial)
            if room > 0:
                partial += piece[:room]
            line = bytes(partial[:line_limit])
            if partial_len + len(piece) > line_limit:
                line += CLIP_MARKER
            partial = bytearray()
            partial_len = 0
            if page.lines and page.used + len(line) + 1 > self.max_bytes:
                page.by_bytes = True
                page.more = True
                return False
            if line.endswith(CLIP_MARKER):
                page.clipped += 1
            page.lines.append(line)
            page.used += len(line) + 1
            return True

        while True:
            data = await self.files.read(target, offset=position, length=_PAGE_CHUNK)
            if not data:
                if partial_len:
                    finish_line(b"")
                break
            position += len(data)
            pieces = data.split(b"\n", want - len(page.lines))
            if not all(finish_line(piece) for piece in pieces[:-1]):
                break
            if len(page.lines) >= want:
                page.more = bool(pieces[-1]) or position < st.size
                break
            tail = pieces[-1]
            room = line_limit + 1 - len(partial)
            if room > 0:
                partial += tail[:room]
            partial_len += len(tail)
            if partial_len > _MAX_LINE_SCAN:
                if finish_line(b""):
                    page.long_line_unscanned = True
                page.more = True
                break
        if not page.lines and offset > 1:
            return _beyond_end(target, offset, offset - 1)
        return _text_result(target, st, offset, page, self.max_bytes, self.max_line_bytes)


def _beyond_end(target: str, offset: int, total: int) -> ToolResult:
    return ToolResult.error(
        f"read: {target}: offset {offset} is beyond the end of the file ({total} lines)",
        path=target,
        offset=offset,
        total_lines=total,
    )


def _text_result(
    target: str, st: FileStat, offset: int, page: _Page, max_bytes: int, max_line_bytes: int
) -> ToolResult:
    first, last = offset, offset + len(page.lines) - 1
    # A CR before the newline is noise for the model; edit takes LF text for CRLF files.
    shown = (line[:-1] if line.endswith(b"\r") else line for line in page.lines)
    text = b"\n".join(shown).decode("utf-8", errors="replace")
    notes = []
    if not page.lines:
        text = "(empty file)"
    if page.more:
        why = f" ({max_bytes}-byte limit reached)" if page.by_bytes else ""
        if page.long_line_unscanned:
            why = f" (line {last} is longer than {_MAX_LINE_SCAN} bytes)"
        notes.append(
            f"Showing lines {first}-{last}{why}. More follows; use offset={last + 1} to continue."
        )
    elif offset > 1:
        notes.append(f"Showing lines {first}-{last} of {last} (end of file).")
    if page.clipped:
        notes.append(f"{page.clipped} line(s) longer than {max_line_bytes} bytes were clipped.")
    if notes:
        text = text + "\n\n" + "\n".join(f"[{note}]" for note in notes)
    return ToolResult(
        content=(TextContent(text=text),),
        details={
            "path": target,
            "size": st.size,
            "start_line": first,
            "end_line": last,
            "next_offset": last + 1 if page.more else None,
            "total_lines": None if page.more else last,
            "truncated": page.more,
            "clipped_lines": page.clipped,
        },
    )


def create_read_tool(
    cwd: str,
    *,
    execution_policy: ExecutionPolicy | None = None,
    file_operations: FileOperations | None = None,
    max_lines: int = 2000,
    max_bytes: int = 50_000,
    max_line_bytes: int = 2000,
    max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES,
    transform_image: TransformImage | None = None,
) -> ToolDefinition:
    """The ``read`` tool: ``{path, offset?, limit?}`` gives a page of text or an image.

    The execution policy sees ``ExecutionAction(kind="read", paths=(resolved,),
    risk="low")`` before the file is touched. Text comes back from line
    ``offset`` (1-based) for at most ``limit`` lines, never more than
    ``max_lines`` lines or ``max_bytes`` bytes, with lines over
    ``max_line_bytes`` clipped; when more follows, the result says which
    ``offset`` to ask for next (also ``details["next_offset"]``). Only the
    bytes needed for the page are read, so the first page of a huge file is
    cheap. A file with NUL bytes in its first 8 KiB is reported as binary,
    not dumped.

    PNG, JPEG, GIF and WebP files (recognised by magic bytes) come back as
    :class:`~prism.core.ImageContent`. Their size is checked with ``stat``
    before reading (over ``max_image_bytes``: an error, and the file is not
    read), again after reading, and again after ``transform_image``.

    Args:
        cwd: directory relative paths are resolved against.
        execution_policy: checked before the file is touched.
        file_operations: how files are reached (default :class:`LocalFileOperations`,
            not contained).
        max_lines: lines per page.
        max_bytes: bytes per page.
        max_line_bytes: longest line shown before clipping.
        max_image_bytes: largest image returned (default :data:`DEFAULT_MAX_IMAGE_BYTES`).
        transform_image: resizes or re-encodes images (host code).

    Raises:
        CodingToolsConfigurationError: an option is out of range or of the wrong type.
    """
    owner = "create_read_tool"
    cwd = check_cwd(owner, cwd)
    file_operations = file_operations_or_local(owner, file_operations)
    check_option(optional(callable_value()), owner, "transform_image", transform_image)
    tool = _ReadTool(
        cwd=cwd,
        policy=execution_policy,
        files=file_operations,
        max_lines=check_positive_int(owner, "max_lines", max_lines),
        max_bytes=check_positive_int(owner, "max_bytes", max_bytes, maximum=64 * 1024 * 1024),
        max_line_bytes=check_positive_int(owner, "max_line_bytes", max_line_bytes),
        max_image_bytes=check_positive_int(
            owner, "max_image_bytes", max_image_bytes, maximum=1024 * 1024 * 1024
        ),
        transform_image=transform_image,
    )
    return ToolDefinition(
        name="read",
        execute=tool.execute,
        description=(
            f"Read a text file (up to {max_lines} lines / {max_bytes} bytes per call; use "
            "offset and limit to page) or a PNG/JPEG/GIF/WebP image "
            f"(up to {max_image_bytes} bytes). Relative paths start at {cwd}."
        ),
        parameters=_PARAMETERS,
    )
