"""The ``edit`` tool: exact, unique text replacements applied atomically."""

from __future__ import annotations

import attrs
import trio

from prism.core import (
    ExecutionAction,
    ExecutionPolicy,
    JsonObject,
    PrismError,
    TextContent,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    trio_native,
)

from ._common import (
    _ArgumentError,
    check_cwd,
    check_positive_int,
    file_error_result,
    required_path,
)
from ._diff import unified_diff
from ._files import file_operations_or_local
from ._mutation import FileMutationQueue, run_checked_mutation
from ._protocols import FileOperations

__all__ = ["DEFAULT_MAX_EDIT_BYTES", "create_edit_tool"]

DEFAULT_MAX_EDIT_BYTES = 10_000_000
"""Largest file the edit tool reads and rewrites."""

_BOM = b"\xef\xbb\xbf"
_MAX_EDITS = 1000
_MAX_DIFF_CHARS = 200_000
_COUNT_CAP = 1000

_PARAMETERS: JsonObject = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File to edit (relative to the working dir)."},
        "edits": {
            "type": "array",
            "minItems": 1,
            "description": "Replacements applied in order; each old_text must match exactly once.",
            "items": {
                "type": "object",
                "properties": {
                    "old_text": {"type": "string", "minLength": 1},
                    "new_text": {"type": "string"},
                },
                "required": ["old_text", "new_text"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["path", "edits"],
    "additionalProperties": False,
}


def _edits(args: JsonObject) -> list[tuple[str, str]]:
    raw = args.get("edits")
    if not isinstance(raw, list) or not raw:
        raise _ArgumentError("'edits' must be a non-empty list of {old_text, new_text} objects")
    if len(raw) > _MAX_EDITS:
        raise _ArgumentError(f"'edits' holds {len(raw)} items; at most {_MAX_EDITS} are allowed")
    edits = []
    for index, item in enumerate(raw, 1):
        if not isinstance(item, dict):
            raise _ArgumentError(f"edit {index} must be an object with old_text and new_text")
        old, new = item.get("old_text"), item.get("new_text")
        if not isinstance(old, str) or not isinstance(new, str):
            raise _ArgumentError(f"edit {index}: old_text and new_text must both be strings")
        if not old:
            raise _ArgumentError(f"edit {index}: old_text must not be empty")
        edits.append((old, new))
    return edits


def _count(text: str, needle: str) -> int:
    """Occurrences of ``needle`` in ``text``, overlapping ones included, up to a cap."""
    count = 0
    index = text.find(needle)
    while index >= 0 and count < _COUNT_CAP:
        count += 1
        index = text.find(needle, index + 1)
    return count


@attrs.frozen(kw_only=True)
class _Outcome:
    data: bytes
    new_text: str
    old_text: str


class _EditFailed(Exception):
    def __init__(self, message: str, **details: int) -> None:
        super().__init__(message)
        self.details = details


def _apply(raw: bytes, edits: list[tuple[str, str]]) -> _Outcome:
    bom = raw.startswith(_BOM)
    body = raw[len(_BOM) :] if bom else raw
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _EditFailed(f"the file is not valid UTF-8 text (byte {exc.start})") from exc
    # Only a file whose every newline is CRLF is edited in LF form and written back as CRLF;
    # a mixed file is matched exactly as it is.
    crlf = "\r\n" in text and "\n" not in text.replace("\r\n", "")
    original = text.replace("\r\n", "\n") if crlf else text
    work = original
    total = len(edits)
    for index, (old, new) in enumerate(edits, 1):
        if crlf:
            old, new = old.replace("\r\n", "\n"), new.replace("\r\n", "\n")
        matches = _count(work, old)
        if matches != 1:
            where = "was not found" if matches == 0 else f"matches {matches} places"
            if matches >= _COUNT_CAP:
                where = f"matches at least {_COUNT_CAP} places"
            hint = "" if matches == 0 else "; add surrounding lines to make it unique"
            raise _EditFailed(
                f"edit {index} of {total}: old_text {where}{hint}; the file was not changed",
                edit_index=index,
                matches=matches,
            )
        at = work.find(old)
        work = work[:at] + new + work[at + len(old) :]
    out = work.replace("\n", "\r\n") if crlf else work
    try:
        data = (_BOM if bom else b"") + out.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _EditFailed(f"new_text is not valid Unicode text ({exc.reason})") from None
    return _Outcome(data=data, new_text=work, old_text=original)


@trio_native  # Prism's own trio code: stays on trio under an asyncio host
@attrs.frozen(kw_only=True)
class _EditTool:
    cwd: str
    policy: ExecutionPolicy | None
    files: FileOperations
    queue: FileMutationQueue | None
    max_file_bytes: int

    async def execute(self, args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        try:
            path = required_path(args)
            edits = _edits(args)
        except _ArgumentError as exc:
            return exc.result("edit")
        try:
            resolved = await self.files.resolve(path, cwd=self.cwd)
        except (OSError, PrismError, ValueError) as exc:
            return file_error_result("edit", path, exc)

        def action(target: str) -> ExecutionAction:
            return ExecutionAction(
                kind="edit",
                operation="edit",
                paths=(target,),
                risk="medium",
                metadata={"edits": len(edits)},
            )

        async def body(target: str) -> ToolResult:
            try:
                return await self._edit(target, edits)
            except (OSError, PrismError, ValueError) as exc:
                return file_error_result("edit", target, exc)

        return await run_checked_mutation(
            tool="edit",
            queue=self.queue,
            policy=self.policy,
            files=self.files,
            cwd=self.cwd,
            resolved=resolved,
            build_action=action,
            body=body,
        )

    async def _edit(self, target: str, edits: list[tuple[str, str]]) -> ToolResult:
        st = await self.files.stat(target)
        if st.kind == "directory":
            return ToolResult.error(f"edit: {target}: is a directory", path=target)
        if st.kind != "file":
            return ToolResult.error(f"edit: {target}: not a regular file", path=target)
        limit = self.max_file_bytes
        if st.size > limit:
            return ToolResult.error(
                f"edit: {target}: the file is {st.size} bytes, over the {limit}-byte edit limit",
                path=target,
                size=st.size,
            )
        raw = await self.files.read(target, length=limit + 1)
        if len(raw) > limit:
            return ToolResult.error(
                f"edit: {target}: the file grew past the {limit}-byte edit limit", path=target
            )
        try:
            outcome = await trio.to_thread.run_sync(_apply, raw, edits)
        except _EditFailed as exc:
            return ToolResult.error(f"edit: {target}: {exc}", path=target, **exc.details)
        if outcome.data == raw:
            return ToolResult(
                content=(TextContent(text=f"No change: the edits leave {target} as it was"),),
                details={"path": target, "changed": False, "diff": ""},
            )
        await self.files.write(target, outcome.data)
        diff, added, removed = await trio.to_thread.run_sync(
            lambda: unified_diff(outcome.old_text, outcome.new_text, path=target.lstrip("/"))
        )
        if len(diff) > _MAX_DIFF_CHARS:
            diff = diff[:_MAX_DIFF_CHARS] + "\n(diff clipped)\n"
        count = len(edits)
        summary = (
            f"Edited {target}: {count} replacement{'s' if count != 1 else ''}, "
            f"+{added} -{removed} lines"
        )
        return ToolResult(
            content=(TextContent(text=summary),),
            details={
                "path": target,
                "changed": True,
                "edits": count,
                "added_lines": added,
                "removed_lines": removed,
                "diff": diff,
            },
        )


def create_edit_tool(
    cwd: str,
    *,
    execution_policy: ExecutionPolicy | None = None,
    file_operations: FileOperations | None = None,
    max_file_bytes: int = DEFAULT_MAX_EDIT_BYTES,
) -> ToolDefinition:
    """The ``edit`` tool: ``{path, edits: [{old_text, new_text}, ...]}``.

    Edits apply in order, each to the result of the previous one; each
    ``old_text`` must match exactly once. If any edit matches nowhere or in
    several places the result names the edit and the count, and the file is
    not changed. A UTF-8 BOM and CRLF line endings are preserved (``old_text``
    may use either line ending in a CRLF file). The new content is written
    atomically. Reading, checking and writing happen inside the per-path
    critical section shared with the write tool, with the execution policy
    (``ExecutionAction(kind="edit", paths=(resolved,), risk="medium")``)
    checked inside it, so concurrent edits of one file never lose an update.
    The result text is a short summary; ``details["diff"]`` holds a unified diff.

    Args:
        cwd: directory relative paths are resolved against.
        execution_policy: checked inside the per-path critical section.
        file_operations: how files are reached (default :class:`LocalFileOperations`,
            not contained).
        max_file_bytes: largest file edited (default :data:`DEFAULT_MAX_EDIT_BYTES`).

    Raises:
        CodingToolsConfigurationError: an option is out of range or of the wrong type.
    """
    owner = "create_edit_tool"
    cwd = check_cwd(owner, cwd)
    file_operations = file_operations_or_local(owner, file_operations)
    tool = _EditTool(
        cwd=cwd,
        policy=execution_policy,
        files=file_operations,
        queue=None,
        max_file_bytes=check_positive_int(
            owner, "max_file_bytes", max_file_bytes, maximum=1024 * 1024 * 1024
        ),
    )
    return ToolDefinition(
        name="edit",
        execute=tool.execute,
        description=(
            "Edit a file by exact text replacement: each old_text must occur exactly once "
            "and is replaced by new_text; edits apply in order, and if any fails nothing "
            f"is written. Relative paths start at {cwd}."
        ),
        parameters=_PARAMETERS,
    )
