"""Edge cases of write, edit and the plain file operations, through the public tools."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import pytest
import trio

from prism.coding.tools import FileStat, LocalFileOperations, create_edit_tool, create_write_tool
from prism.coding.tools.testing import assert_file_operations_conform
from prism.core import (
    ExecutionAction,
    ExecutionDecision,
    JsonObject,
    JsonValue,
    ToolDefinition,
    ToolResult,
)

if TYPE_CHECKING:
    from pathlib import Path

RunTool = Callable[[ToolDefinition, JsonObject], Awaitable[ToolResult]]


async def test_write_of_text_that_is_not_utf8_encodable_is_an_argument_error(
    tmp_path: Path, run_tool: RunTool
) -> None:
    result = await run_tool(create_write_tool(str(tmp_path)), {"path": "f", "content": "\ud800"})
    assert result.is_error
    assert "not encodable as UTF-8" in result.joined_text
    assert not (tmp_path / "f").exists()


@pytest.mark.parametrize("factory", [create_write_tool, create_edit_tool])
async def test_a_path_with_a_nul_byte_is_a_clear_error(
    tmp_path: Path, run_tool: RunTool, factory: Callable[[str], ToolDefinition]
) -> None:
    edits: list[JsonValue] = [{"old_text": "a", "new_text": "b"}]
    result = await run_tool(
        factory(str(tmp_path)), {"path": "a\0b", "content": "x", "edits": edits}
    )
    assert result.is_error
    assert "NUL" in result.joined_text


async def test_write_to_a_fifo_is_refused(tmp_path: Path, run_tool: RunTool) -> None:
    os.mkfifo(tmp_path / "pipe")
    result = await run_tool(create_write_tool(str(tmp_path)), {"path": "pipe", "content": "x"})
    assert result.is_error
    assert "not a regular file" in result.joined_text


@pytest.mark.parametrize(
    ("setup", "arguments", "expected"),
    [
        ("dir", {"old_text": "a", "new_text": "b"}, "is a directory"),
        ("fifo", {"old_text": "a", "new_text": "b"}, "not a regular file"),
        ("file", {"old_text": "a", "new_text": "\ud800"}, "not valid Unicode text"),
        ("many", {"old_text": "a", "new_text": "b"}, "matches at least 1000 places"),
    ],
)
async def test_edit_refusals_name_the_reason(
    tmp_path: Path, run_tool: RunTool, setup: str, arguments: JsonObject, expected: str
) -> None:
    target = tmp_path / "t"
    if setup == "dir":
        target.mkdir()
    elif setup == "fifo":
        os.mkfifo(target)
    else:
        target.write_text("a" * (1500 if setup == "many" else 1))
    result = await run_tool(create_edit_tool(str(tmp_path)), {"path": "t", "edits": [arguments]})
    assert result.is_error
    assert expected in result.joined_text


async def test_too_many_edits_are_refused(tmp_path: Path, run_tool: RunTool) -> None:
    edits: list[JsonValue] = [{"old_text": f"x{i}", "new_text": "y"} for i in range(1001)]
    result = await run_tool(create_edit_tool(str(tmp_path)), {"path": "t", "edits": edits})
    assert result.is_error
    assert "at most 1000" in result.joined_text


async def test_a_change_spanning_many_lines_reports_a_note_instead_of_a_diff(
    tmp_path: Path, run_tool: RunTool
) -> None:
    (tmp_path / "t").write_text("start\n" + "old\n" * 11_000)
    edit: JsonObject = {"old_text": "old\n" * 11_000, "new_text": "new\n" * 11_000}
    result = await run_tool(create_edit_tool(str(tmp_path)), {"path": "t", "edits": [edit]})
    assert not result.is_error, result.joined_text
    assert "diff omitted" in str(result.details["diff"])


class _Refusing:
    def check(self, action: ExecutionAction) -> ExecutionDecision:
        return ExecutionDecision(
            allowed=False,
            reason="no",
            details={"why": {"n": float("nan"), "deep": [[[[[[[[[1]]]]]]]]]}},
        )


async def test_policy_details_that_are_not_json_are_shown_safely(
    tmp_path: Path, run_tool: RunTool
) -> None:
    tool = create_write_tool(str(tmp_path), execution_policy=_Refusing())
    result = await run_tool(tool, {"path": "f", "content": "x"})
    assert result.is_error
    assert "nan" in repr(result.details)


async def test_plain_file_operations_check_their_arguments(tmp_path: Path) -> None:
    files = LocalFileOperations()
    (tmp_path / "f").write_bytes(b"abc")
    assert await files.read(str(tmp_path / "f"), length=0) == b""
    with pytest.raises(ValueError, match=">= 0"):
        await files.read(str(tmp_path / "f"), offset=-1, length=1)
    with pytest.raises(ValueError, match="NUL"):
        await files.resolve("f", cwd="a\0b")


class _Redirecting:
    """Redirects every write to ``target`` (a policy may rewrite an action's paths)."""

    def __init__(self, target: str) -> None:
        self.target = target

    def check(self, action: ExecutionAction) -> ExecutionDecision:
        return ExecutionDecision(allowed=True, modified={"paths": (self.target,)})


async def test_a_redirect_to_a_path_that_cannot_be_resolved_is_an_error(
    tmp_path: Path, run_tool: RunTool
) -> None:
    tool = create_write_tool(str(tmp_path), execution_policy=_Redirecting("bad\0path"))
    result = await run_tool(tool, {"path": "f", "content": "x"})
    assert result.is_error
    assert not (tmp_path / "f").exists()


async def test_a_policy_that_redirects_again_and_again_is_refused(
    tmp_path: Path, run_tool: RunTool
) -> None:
    class Moving:
        count = 0

        def check(self, action: ExecutionAction) -> ExecutionDecision:
            self.count += 1
            moved = (str(tmp_path / f"f{self.count}"),)
            return ExecutionDecision(allowed=True, modified={"paths": moved})

    tool = create_write_tool(str(tmp_path), execution_policy=Moving())
    result = await run_tool(tool, {"path": "f", "content": "x"})
    assert result.is_error
    assert "redirected" in result.joined_text
    assert sorted(os.listdir(tmp_path)) == []


class _WrongErrors(LocalFileOperations):
    async def stat(self, path: str) -> FileStat:
        if not await trio.Path(path).exists():
            raise PermissionError(13, "denied", path)
        return await super().stat(path)


class _NoErrors(LocalFileOperations):
    async def stat(self, path: str) -> FileStat:
        if not await trio.Path(path).exists():
            return FileStat(path=path, kind="file", size=0, mode=0o644, mtime_ns=0)
        return await super().stat(path)


@pytest.mark.parametrize(
    ("files", "message"),
    [(_WrongErrors(), "expected FileNotFoundError"), (_NoErrors(), "did not raise")],
)
async def test_the_conformance_check_names_a_broken_rule(
    tmp_path: Path, files: LocalFileOperations, message: str
) -> None:
    with pytest.raises(AssertionError, match=message):
        await assert_file_operations_conform(files, str(tmp_path))
