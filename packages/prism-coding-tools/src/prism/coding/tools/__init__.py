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

The tools reach files and processes only through :class:`FileOperations` and
:class:`ShellOperations`; the plain :class:`LocalFileOperations` and
:class:`LocalShellOperations` are not contained (``prism.coding.security``
supplies contained ones).
"""

from ._errors import CodingToolsError as CodingToolsError
from ._errors import InvalidToolOptionError as InvalidToolOptionError
from ._files import LocalFileOperations as LocalFileOperations
from ._process import DEFAULT_KILL_GRACE_S as DEFAULT_KILL_GRACE_S
from ._process import PROCESS_TREE_ENV_VAR as PROCESS_TREE_ENV_VAR
from ._process import LocalShellOperations as LocalShellOperations
from ._process import default_shell_path as default_shell_path
from ._process import run_process_tree as run_process_tree
from ._process import terminate_process_tree as terminate_process_tree
from ._protocols import FileKind as FileKind
from ._protocols import FileOperations as FileOperations
from ._protocols import FileStat as FileStat
from ._protocols import OutputSink as OutputSink
from ._protocols import ShellExit as ShellExit
from ._protocols import ShellOperations as ShellOperations
from ._protocols import ShellSpawnRequest as ShellSpawnRequest

__all__ = [
    "DEFAULT_KILL_GRACE_S",
    "PROCESS_TREE_ENV_VAR",
    "CodingToolsError",
    "FileKind",
    "FileOperations",
    "FileStat",
    "InvalidToolOptionError",
    "LocalFileOperations",
    "LocalShellOperations",
    "OutputSink",
    "ShellExit",
    "ShellOperations",
    "ShellSpawnRequest",
    "default_shell_path",
    "run_process_tree",
    "terminate_process_tree",
]
