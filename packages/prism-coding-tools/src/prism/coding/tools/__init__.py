"""prism.coding.tools: bounded shell, read, write and edit tools for coding agents.

Example::

    import trio
    from prism.core import DispatchOptions, ToolCall, create_tool_registry, dispatch_tool_call
    from prism.coding.tools import create_coding_tools

    registry = create_tool_registry(create_coding_tools("/tmp"))
    options = DispatchOptions(registry=registry)
    call = ToolCall(id="1", name="shell", arguments={"command": "echo hello"})
    result = trio.run(dispatch_tool_call, call, options)
    assert result.joined_text.strip() == "hello"

Every tool checks its execution policy inside ``execute``, before any side
effect. The tools reach files and processes only through
:class:`FileOperations` and :class:`ShellOperations`; the plain
:class:`LocalFileOperations` and :class:`LocalShellOperations` are **not
contained** (``prism.coding.security`` supplies contained ones).
"""

from ._coding import EditToolOptions as EditToolOptions
from ._coding import ReadToolOptions as ReadToolOptions
from ._coding import ShellToolOptions as ShellToolOptions
from ._coding import create_coding_tools as create_coding_tools
from ._edit import DEFAULT_MAX_EDIT_BYTES as DEFAULT_MAX_EDIT_BYTES
from ._edit import create_edit_tool as create_edit_tool
from ._errors import CodingToolsConfigurationError as CodingToolsConfigurationError
from ._errors import CodingToolsError as CodingToolsError
from ._files import LocalFileOperations as LocalFileOperations
from ._mutation import FileMutationQueue as FileMutationQueue
from ._mutation import default_mutation_queue as default_mutation_queue
from ._process import LocalShellOperations as LocalShellOperations
from ._process import default_shell_path as default_shell_path
from ._process import run_process_tree as run_process_tree
from ._protocols import AccessGrant as AccessGrant
from ._protocols import FileKind as FileKind
from ._protocols import FileOperations as FileOperations
from ._protocols import FileStat as FileStat
from ._protocols import InPlaceEdits as InPlaceEdits
from ._protocols import OutputSink as OutputSink
from ._protocols import RedirectedWrites as RedirectedWrites
from ._protocols import ShellExit as ShellExit
from ._protocols import ShellOperations as ShellOperations
from ._protocols import ShellSpawnRequest as ShellSpawnRequest
from ._protocols import read_file_range as read_file_range
from ._protocols import replace_file_in_directory as replace_file_in_directory
from ._read import DEFAULT_MAX_IMAGE_BYTES as DEFAULT_MAX_IMAGE_BYTES
from ._read import TransformImage as TransformImage
from ._read import TransformImageInput as TransformImageInput
from ._read import create_read_tool as create_read_tool
from ._read import detect_image_mime_type as detect_image_mime_type
from ._shell import DEFAULT_MAX_SPILL_BYTES as DEFAULT_MAX_SPILL_BYTES
from ._shell import DEFAULT_SHELL_TIMEOUT_S as DEFAULT_SHELL_TIMEOUT_S
from ._shell import SpawnHook as SpawnHook
from ._shell import create_shell_tool as create_shell_tool
from ._write import create_write_tool as create_write_tool

__all__ = [
    "DEFAULT_MAX_EDIT_BYTES",
    "DEFAULT_MAX_IMAGE_BYTES",
    "DEFAULT_MAX_SPILL_BYTES",
    "DEFAULT_SHELL_TIMEOUT_S",
    "AccessGrant",
    "CodingToolsConfigurationError",
    "CodingToolsError",
    "EditToolOptions",
    "FileKind",
    "FileMutationQueue",
    "FileOperations",
    "FileStat",
    "InPlaceEdits",
    "LocalFileOperations",
    "LocalShellOperations",
    "OutputSink",
    "ReadToolOptions",
    "RedirectedWrites",
    "ShellExit",
    "ShellOperations",
    "ShellSpawnRequest",
    "ShellToolOptions",
    "SpawnHook",
    "TransformImage",
    "TransformImageInput",
    "create_coding_tools",
    "create_edit_tool",
    "create_read_tool",
    "create_shell_tool",
    "create_write_tool",
    "default_mutation_queue",
    "default_shell_path",
    "detect_image_mime_type",
    "read_file_range",
    "replace_file_in_directory",
    "run_process_tree",
]
