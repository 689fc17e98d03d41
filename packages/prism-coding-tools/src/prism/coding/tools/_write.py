"""The ``write`` tool: replace a file's content atomically."""

from __future__ import annotations

import attrs

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

from ._common import _ArgumentError, check_cwd, file_error_result, required_path, required_str
from ._files import file_operations_or_local
from ._mutation import FileMutationQueue, run_checked_mutation
from ._protocols import FileOperations

__all__ = ["create_write_tool"]

_PARAMETERS: JsonObject = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File to write (relative to the working dir)."},
        "content": {"type": "string", "description": "The complete new content of the file."},
    },
    "required": ["path", "content"],
    "additionalProperties": False,
}


@trio_native  # Prism's own trio code: stays on trio under an asyncio host
@attrs.frozen(kw_only=True)
class _WriteTool:
    cwd: str
    policy: ExecutionPolicy | None
    files: FileOperations
    queue: FileMutationQueue | None

    async def execute(self, args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        try:
            path = required_path(args)
            content = required_str(args, "content")
        except _ArgumentError as exc:
            return exc.result("write")
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError as exc:
            return _ArgumentError(f"'content' is not encodable as UTF-8: {exc.reason}").result(
                "write"
            )
        try:
            resolved = await self.files.resolve(path, cwd=self.cwd)
        except (OSError, PrismError, ValueError) as exc:
            return file_error_result("write", path, exc)

        def action(target: str) -> ExecutionAction:
            return ExecutionAction(
                kind="write",
                operation="write",
                paths=(target,),
                risk="medium",
                metadata={"bytes": len(data)},
            )

        async def body(target: str) -> ToolResult:
            try:
                try:
                    st = await self.files.stat(target)
                except FileNotFoundError:
                    created = True
                else:
                    if st.kind == "directory":
                        return ToolResult.error(f"write: {target}: is a directory", path=target)
                    if st.kind != "file":
                        return ToolResult.error(f"write: {target}: not a regular file", path=target)
                    created = False
                await self.files.write(target, data, create_parents=True)
            except (OSError, PrismError, ValueError) as exc:
                return file_error_result("write", target, exc)
            verb = "Created" if created else "Wrote"
            return ToolResult(
                content=(TextContent(text=f"{verb} {target} ({len(data)} bytes)"),),
                details={"path": target, "bytes": len(data), "created": created},
            )

        return await run_checked_mutation(
            tool="write",
            queue=self.queue,
            policy=self.policy,
            files=self.files,
            cwd=self.cwd,
            resolved=resolved,
            build_action=action,
            body=body,
        )


def create_write_tool(
    cwd: str,
    *,
    execution_policy: ExecutionPolicy | None = None,
    file_operations: FileOperations | None = None,
) -> ToolDefinition:
    """The ``write`` tool: ``{path, content}`` replaces (or creates) a file, atomically.

    Missing parent directories are created. The write goes to a temporary
    file beside the target, is flushed, then renamed over it, keeping an
    existing file's mode. Writes and edits of one real path are serialised
    (a queue keyed by the resolved path, shared within the trio run), and the execution
    policy (``ExecutionAction(kind="write", paths=(resolved,), risk="medium")``)
    is checked inside that critical section. A path that is a directory or
    cannot be written gives an error result.

    Args:
        cwd: directory relative paths are resolved against.
        execution_policy: checked inside the per-path critical section.
        file_operations: how files are reached (default :class:`LocalFileOperations`,
            not contained).

    Raises:
        CodingToolsConfigurationError: an option is of the wrong type.
    """
    owner = "create_write_tool"
    cwd = check_cwd(owner, cwd)
    file_operations = file_operations_or_local(owner, file_operations)
    tool = _WriteTool(cwd=cwd, policy=execution_policy, files=file_operations, queue=None)
    return ToolDefinition(
        name="write",
        execute=tool.execute,
        description=(
            "Write a file with the given content, replacing it if it exists and creating "
            f"parent directories as needed. Relative paths start at {cwd}."
        ),
        parameters=_PARAMETERS,
    )
