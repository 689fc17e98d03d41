"""``create_coding_tools``: the four tools over one working directory."""

from __future__ import annotations

from collections.abc import Mapping  # noqa: TC003 (TypedDict fields are read at run time)
from typing import TYPE_CHECKING, TypedDict

from ._edit import create_edit_tool
from ._read import TransformImage, create_read_tool
from ._shell import SpawnHook, create_shell_tool
from ._write import create_write_tool

if TYPE_CHECKING:
    from prism.core import ExecutionPolicy, ToolDefinition

    from ._protocols import FileOperations, ShellOperations

__all__ = [
    "EditToolOptions",
    "ReadToolOptions",
    "ShellToolOptions",
    "create_coding_tools",
]


class ShellToolOptions(TypedDict, total=False):
    """Options of :func:`create_shell_tool` that :func:`create_coding_tools` passes through."""

    shell_path: str | None
    command_prefix: str | None
    spawn_hook: SpawnHook | None
    timeout_s: float | None
    max_timeout_s: float
    max_lines: int
    max_bytes: int
    max_line_bytes: int
    max_spill_bytes: int
    spill_dir: str | None
    max_spill_total_bytes: int | None
    env: Mapping[str, str] | None


class ReadToolOptions(TypedDict, total=False):
    """Options of :func:`create_read_tool` that :func:`create_coding_tools` passes through."""

    max_lines: int
    max_bytes: int
    max_line_bytes: int
    max_image_bytes: int
    transform_image: TransformImage | None


class EditToolOptions(TypedDict, total=False):
    """Options of :func:`create_edit_tool` that :func:`create_coding_tools` passes through."""

    max_file_bytes: int


def create_coding_tools(
    cwd: str,
    *,
    execution_policy: ExecutionPolicy | None = None,
    file_operations: FileOperations | None = None,
    shell_operations: ShellOperations | None = None,
    shell_options: ShellToolOptions | None = None,
    read_options: ReadToolOptions | None = None,
    edit_options: EditToolOptions | None = None,
) -> list[ToolDefinition]:
    """The ``read``, ``write``, ``edit`` and ``shell`` tools, sharing one policy and cwd.

    Args:
        cwd: the working directory of every tool.
        execution_policy: checked by every tool before any side effect.
        file_operations: used by read, write and edit (default :class:`LocalFileOperations`).
        shell_operations: used by shell (default :class:`LocalShellOperations`).
        shell_options: further options of :func:`create_shell_tool`.
        read_options: further options of :func:`create_read_tool`.
        edit_options: further options of :func:`create_edit_tool`.

    Raises:
        CodingToolsConfigurationError: an option is out of range or of the wrong type.
    """
    return [
        create_read_tool(
            cwd,
            execution_policy=execution_policy,
            file_operations=file_operations,
            **(read_options or {}),
        ),
        create_write_tool(cwd, execution_policy=execution_policy, file_operations=file_operations),
        create_edit_tool(
            cwd,
            execution_policy=execution_policy,
            file_operations=file_operations,
            **(edit_options or {}),
        ),
        create_shell_tool(
            cwd,
            execution_policy=execution_policy,
            operations=shell_operations,
            **(shell_options or {}),
        ),
    ]
