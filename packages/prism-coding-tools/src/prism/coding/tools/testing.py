"""prism.coding.tools.testing: test doubles and conformance checks for the two seams.

Prove that your own :class:`~prism.coding.tools.FileOperations` or
:class:`~prism.coding.tools.ShellOperations` keeps the contract the tools rely on::

    from prism.coding.tools import LocalFileOperations, LocalShellOperations
    from prism.coding.tools.testing import (
        assert_file_operations_conform, assert_shell_operations_conform,
    )

    async def test_my_operations_conform(tmp_path) -> None:
        await assert_file_operations_conform(LocalFileOperations(), str(tmp_path))
        await assert_shell_operations_conform(LocalShellOperations(), str(tmp_path))

The doubles are real, small implementations (no mocks): a recording wrapper
around any ``FileOperations`` and a ``ShellOperations`` that replays scripted
output without spawning anything.
"""

from ._testing import RecordingFileOperations as RecordingFileOperations
from ._testing import ScriptedShellOperations as ScriptedShellOperations
from ._testing import assert_file_operations_conform as assert_file_operations_conform
from ._testing import assert_shell_operations_conform as assert_shell_operations_conform

__all__ = [
    "RecordingFileOperations",
    "ScriptedShellOperations",
    "assert_file_operations_conform",
    "assert_shell_operations_conform",
]
