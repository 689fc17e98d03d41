"""The testing kit: the plain operations conform, and the doubles behave."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from prism.coding.tools import (
    LocalFileOperations,
    LocalShellOperations,
    ShellExit,
    create_read_tool,
    create_shell_tool,
)
from prism.coding.tools.testing import (
    RecordingFileOperations,
    ScriptedShellOperations,
    assert_file_operations_conform,
    assert_shell_operations_conform,
)
from prism.core import ToolCall, ToolExecutionContext

if TYPE_CHECKING:
    from pathlib import Path


async def test_local_file_operations_conform(tmp_path: Path) -> None:
    await assert_file_operations_conform(LocalFileOperations(), str(tmp_path))


async def test_local_shell_operations_conform(tmp_path: Path) -> None:
    await assert_shell_operations_conform(LocalShellOperations(), str(tmp_path))


async def test_conformance_catches_an_unbounded_read(tmp_path: Path) -> None:
    class WholeFile(LocalFileOperations):
        async def read(self, path: str, *, offset: int = 0, length: int) -> bytes:
            return await super().read(path, offset=offset, length=length + 1)

    with pytest.raises(AssertionError, match=r"read\(length=3\)"):
        await assert_file_operations_conform(WholeFile(), str(tmp_path))


async def test_scripted_shell_feeds_output_without_spawning(tmp_path: Path) -> None:
    scripted = ScriptedShellOperations(output=[b"one\n", b"two\n"], exit=ShellExit(exit_code=2))
    tool = create_shell_tool(str(tmp_path), operations=scripted)
    ctx = ToolExecutionContext(call=ToolCall(id="s", name="shell", arguments={}))
    result = await tool.execute({"command": "rm -rf /"}, ctx)
    assert result.is_error
    assert result.joined_text.startswith("one\ntwo\n")
    assert result.details["exit_code"] == 2
    assert scripted.requests[0].command == "rm -rf /"


async def test_recording_file_operations_counts_reads(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    files = RecordingFileOperations()
    tool = create_read_tool(str(tmp_path), file_operations=files)
    ctx = ToolExecutionContext(call=ToolCall(id="r", name="read", arguments={}))
    await tool.execute({"path": "a.txt"}, ctx)
    assert [method for method, _ in files.calls][:2] == ["resolve", "stat"]
    assert files.bytes_read >= 6
