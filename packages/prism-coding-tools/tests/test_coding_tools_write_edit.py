"""write and edit: atomic, serialised per real path, policy checked inside the critical section."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import pytest
import trio
import trio.lowlevel

from prism.coding.tools import (
    FileStat,
    LocalFileOperations,
    create_edit_tool,
    create_write_tool,
    default_mutation_queue,
)
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


class RecordingPolicy:
    def __init__(self, decision: ExecutionDecision | None = None) -> None:
        self.actions: list[ExecutionAction] = []
        self.decision = decision or ExecutionDecision(allowed=True)

    def check(self, action: ExecutionAction) -> ExecutionDecision:
        self.actions.append(action)
        return self.decision


async def _read(path: Path) -> bytes:
    return await trio.Path(path).read_bytes()


async def _write(path: Path, data: bytes) -> None:
    await trio.Path(path).write_bytes(data)


def _leftover_temp_files(directory: Path) -> list[str]:
    return [name for name in os.listdir(directory) if name.endswith(".prism-tmp")]


# ---------------------------------------------------------------- write


async def test_write_creates_file_and_parent_directories(tmp_path: Path, run_tool: RunTool) -> None:
    result = await run_tool(
        create_write_tool(str(tmp_path)), {"path": "a/b/c.txt", "content": "héllo\n"}
    )
    assert not result.is_error
    assert await _read(tmp_path / "a/b/c.txt") == "héllo\n".encode()
    assert result.details["created"] is True
    assert result.details["bytes"] == 7


async def test_write_replaces_content_and_keeps_the_mode(tmp_path: Path, run_tool: RunTool) -> None:
    target = tmp_path / "run.sh"
    await _write(target, b"old")
    os.chmod(target, 0o751)
    result = await run_tool(create_write_tool(str(tmp_path)), {"path": "run.sh", "content": "new"})
    assert not result.is_error
    assert await _read(target) == b"new"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o751
    assert result.details["created"] is False
    assert _leftover_temp_files(tmp_path) == []


async def test_write_through_a_symlink_replaces_the_real_file(
    tmp_path: Path, run_tool: RunTool
) -> None:
    real = tmp_path / "real.txt"
    await _write(real, b"old")
    (tmp_path / "link.txt").symlink_to(real)
    await run_tool(create_write_tool(str(tmp_path)), {"path": "link.txt", "content": "new"})
    assert (tmp_path / "link.txt").is_symlink()
    assert await _read(real) == b"new"


async def test_write_to_a_directory_is_a_clear_error(tmp_path: Path, run_tool: RunTool) -> None:
    (tmp_path / "dir").mkdir()
    result = await run_tool(create_write_tool(str(tmp_path)), {"path": "dir", "content": "x"})
    assert result.is_error
    assert "is a directory" in result.joined_text


async def test_write_under_a_file_is_a_clear_error(tmp_path: Path, run_tool: RunTool) -> None:
    await _write(tmp_path / "file", b"x")
    result = await run_tool(
        create_write_tool(str(tmp_path)), {"path": "file/child.txt", "content": "x"}
    )
    assert result.is_error
    assert "file/child.txt" in result.joined_text
    assert _leftover_temp_files(tmp_path) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root bypasses file permissions")
async def test_write_to_a_read_only_file_is_a_clear_error(
    tmp_path: Path, run_tool: RunTool
) -> None:
    target = tmp_path / "ro.txt"
    await _write(target, b"keep")
    os.chmod(target, 0o444)
    result = await run_tool(create_write_tool(str(tmp_path)), {"path": "ro.txt", "content": "x"})
    assert result.is_error
    assert "permission denied" in result.joined_text
    assert await _read(target) == b"keep"


@pytest.mark.skipif(not os.path.isdir("/sys/kernel"), reason="needs sysfs")
async def test_write_where_files_cannot_be_created_is_a_clear_error(run_tool: RunTool) -> None:
    # sysfs refuses new files even to root, so this holds whoever runs the tests.
    tool = create_write_tool("/sys/kernel")
    result = await run_tool(tool, {"path": ".prism-probe.txt", "content": "x"})
    assert result.is_error
    assert "/sys/kernel/.prism-probe.txt" in result.joined_text
    assert any(
        reason in result.joined_text
        for reason in ("permission denied", "operation not permitted", "read-only file system")
    )


async def test_write_denied_by_policy_creates_nothing(tmp_path: Path, run_tool: RunTool) -> None:
    policy = RecordingPolicy(ExecutionDecision(allowed=False, reason="read-only workspace"))
    tool = create_write_tool(str(tmp_path), execution_policy=policy)
    result = await run_tool(tool, {"path": "new/dir/f.txt", "content": "x"})
    assert result.is_error
    assert "read-only workspace" in result.joined_text
    assert not (tmp_path / "new").exists()
    [action] = policy.actions
    assert (action.kind, action.operation) == ("write", "write")
    assert action.paths == (str(tmp_path / "new/dir/f.txt"),)


async def test_write_follows_a_policy_redirect_under_the_new_paths_lock(
    tmp_path: Path, run_tool: RunTool
) -> None:
    class Redirect:
        def __init__(self) -> None:
            self.actions: list[ExecutionAction] = []

        def check(self, action: ExecutionAction) -> ExecutionDecision:
            self.actions.append(action)
            if action.paths[0].endswith("asked.txt"):
                return ExecutionDecision(
                    allowed=True, modified={"paths": (str(tmp_path / "sandboxed.txt"),)}
                )
            return ExecutionDecision(allowed=True)

    policy = Redirect()
    tool = create_write_tool(str(tmp_path), execution_policy=policy)
    result = await run_tool(tool, {"path": "asked.txt", "content": "x"})
    assert not result.is_error
    assert not (tmp_path / "asked.txt").exists()
    assert await _read(tmp_path / "sandboxed.txt") == b"x"
    assert [a.paths[0] for a in policy.actions] == [
        str(tmp_path / "asked.txt"),
        str(tmp_path / "sandboxed.txt"),
    ]


async def test_readers_never_see_a_partial_write(tmp_path: Path, run_tool: RunTool) -> None:
    target = tmp_path / "atomic.txt"
    old, new = b"a" * 2_000_000, b"b" * 3_000_000
    await _write(target, old)
    torn: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            with open(target, "rb") as f:
                data = f.read()
            if data not in (old, new):
                torn.append(len(data))

    tool = create_write_tool(str(tmp_path))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.to_thread.run_sync, watch)
        for index in range(10):
            content = (new if index % 2 == 0 else old).decode()
            await run_tool(tool, {"path": "atomic.txt", "content": content})
        stop.set()
    assert torn == []
    assert _leftover_temp_files(tmp_path) == []


async def test_parallel_writes_are_serialised_with_the_policy_check_inside(
    tmp_path: Path, run_tool: RunTool
) -> None:
    inside = 0
    most = 0

    class SlowPolicy:
        async def check(self, action: ExecutionAction) -> ExecutionDecision:
            nonlocal inside, most
            inside += 1
            most = max(most, inside)
            await trio.lowlevel.checkpoint()
            return ExecutionDecision(allowed=True)

    class LeavingFiles(LocalFileOperations):
        async def write(self, path: str, data: bytes, *, create_parents: bool = False) -> None:
            nonlocal inside
            await super().write(path, data, create_parents=create_parents)
            inside -= 1

    tool = create_write_tool(
        str(tmp_path), execution_policy=SlowPolicy(), file_operations=LeavingFiles()
    )
    async with trio.open_nursery() as nursery:
        for index in range(20):
            arguments: JsonObject = {"path": "same.txt", "content": str(index)}
            nursery.start_soon(run_tool, tool, arguments)
    assert most == 1
    assert len(default_mutation_queue()) == 0


# ---------------------------------------------------------------- edit


async def test_edit_replaces_a_unique_match_and_reports_a_diff(
    tmp_path: Path, run_tool: RunTool
) -> None:
    await _write(tmp_path / "f.py", b"def f():\n    return 1\n")
    result = await run_tool(
        create_edit_tool(str(tmp_path)),
        {"path": "f.py", "edits": [{"old_text": "return 1", "new_text": "return 2"}]},
    )
    assert not result.is_error
    assert await _read(tmp_path / "f.py") == b"def f():\n    return 2\n"
    assert "1 replacement" in result.joined_text
    diff = result.details["diff"]
    assert isinstance(diff, str)
    assert "-    return 1\n+    return 2\n" in diff
    assert diff.startswith("--- a/")


async def test_edits_apply_in_order_each_to_the_previous_result(
    tmp_path: Path, run_tool: RunTool
) -> None:
    await _write(tmp_path / "f.txt", b"alpha\n")
    edits: list[JsonValue] = [
        {"old_text": "alpha", "new_text": "beta"},
        {"old_text": "beta", "new_text": "gamma"},
    ]
    result = await run_tool(create_edit_tool(str(tmp_path)), {"path": "f.txt", "edits": edits})
    assert not result.is_error
    assert await _read(tmp_path / "f.txt") == b"gamma\n"


async def test_failing_second_edit_leaves_the_file_unchanged(
    tmp_path: Path, run_tool: RunTool
) -> None:
    await _write(tmp_path / "f.txt", b"one two two\n")
    edits: list[JsonValue] = [
        {"old_text": "one", "new_text": "ONE"},
        {"old_text": "two", "new_text": "TWO"},
    ]
    result = await run_tool(create_edit_tool(str(tmp_path)), {"path": "f.txt", "edits": edits})
    assert result.is_error
    assert "edit 2 of 2: old_text matches 2 places" in result.joined_text
    assert result.details["edit_index"] == 2
    assert result.details["matches"] == 2
    assert await _read(tmp_path / "f.txt") == b"one two two\n"


async def test_missing_old_text_is_an_error_naming_the_edit(
    tmp_path: Path, run_tool: RunTool
) -> None:
    await _write(tmp_path / "f.txt", b"hello\n")
    result = await run_tool(
        create_edit_tool(str(tmp_path)),
        {"path": "f.txt", "edits": [{"old_text": "absent", "new_text": "x"}]},
    )
    assert result.is_error
    assert "edit 1 of 1: old_text was not found" in result.joined_text
    assert result.details["matches"] == 0


async def test_overlapping_matches_count_as_ambiguous(tmp_path: Path, run_tool: RunTool) -> None:
    await _write(tmp_path / "f.txt", b"aaa")
    result = await run_tool(
        create_edit_tool(str(tmp_path)),
        {"path": "f.txt", "edits": [{"old_text": "aa", "new_text": "b"}]},
    )
    assert result.is_error
    assert result.details["matches"] == 2


async def test_crlf_and_bom_are_preserved(tmp_path: Path, run_tool: RunTool) -> None:
    await _write(tmp_path / "win.txt", b"\xef\xbb\xbfone\r\ntwo\r\nthree\r\n")
    result = await run_tool(
        create_edit_tool(str(tmp_path)),
        {"path": "win.txt", "edits": [{"old_text": "one\ntwo", "new_text": "1\n2\n2.5"}]},
    )
    assert not result.is_error
    assert await _read(tmp_path / "win.txt") == b"\xef\xbb\xbf1\r\n2\r\n2.5\r\nthree\r\n"


async def test_crlf_old_text_matches_a_crlf_file(tmp_path: Path, run_tool: RunTool) -> None:
    await _write(tmp_path / "win.txt", b"a\r\nb\r\n")
    result = await run_tool(
        create_edit_tool(str(tmp_path)),
        {"path": "win.txt", "edits": [{"old_text": "a\r\nb", "new_text": "c"}]},
    )
    assert not result.is_error
    assert await _read(tmp_path / "win.txt") == b"c\r\n"


async def test_mixed_line_endings_are_matched_exactly(tmp_path: Path, run_tool: RunTool) -> None:
    await _write(tmp_path / "mixed.txt", b"a\r\nb\nc\n")
    result = await run_tool(
        create_edit_tool(str(tmp_path)),
        {"path": "mixed.txt", "edits": [{"old_text": "b\nc", "new_text": "B\nC"}]},
    )
    assert not result.is_error
    assert await _read(tmp_path / "mixed.txt") == b"a\r\nB\nC\n"


async def test_non_utf8_file_is_refused(tmp_path: Path, run_tool: RunTool) -> None:
    await _write(tmp_path / "latin1.txt", "café".encode("latin-1"))
    result = await run_tool(
        create_edit_tool(str(tmp_path)),
        {"path": "latin1.txt", "edits": [{"old_text": "caf", "new_text": "x"}]},
    )
    assert result.is_error
    assert "not valid UTF-8" in result.joined_text
    assert await _read(tmp_path / "latin1.txt") == "café".encode("latin-1")


async def test_file_over_the_edit_limit_is_refused(tmp_path: Path, run_tool: RunTool) -> None:
    await _write(tmp_path / "big.txt", b"x" * 2000)
    result = await run_tool(
        create_edit_tool(str(tmp_path), max_file_bytes=1000),
        {"path": "big.txt", "edits": [{"old_text": "x", "new_text": "y"}]},
    )
    assert result.is_error
    assert "over the 1000-byte edit limit" in result.joined_text


async def test_edit_of_a_missing_file_is_an_error(tmp_path: Path, run_tool: RunTool) -> None:
    result = await run_tool(
        create_edit_tool(str(tmp_path)),
        {"path": "nope.txt", "edits": [{"old_text": "a", "new_text": "b"}]},
    )
    assert result.is_error
    assert "file not found" in result.joined_text


async def test_edit_that_changes_nothing_does_not_write(tmp_path: Path, run_tool: RunTool) -> None:
    target = tmp_path / "f.txt"
    await _write(target, b"same\n")
    before = os.stat(target).st_mtime_ns
    result = await run_tool(
        create_edit_tool(str(tmp_path)),
        {"path": "f.txt", "edits": [{"old_text": "same", "new_text": "same"}]},
    )
    assert not result.is_error
    assert result.details["changed"] is False
    assert os.stat(target).st_mtime_ns == before


async def test_edit_arguments_are_validated(tmp_path: Path, run_tool: RunTool) -> None:
    policy = RecordingPolicy()
    tool = create_edit_tool(str(tmp_path), execution_policy=policy)
    bad: list[JsonObject] = [
        {"path": "f"},
        {"path": "f", "edits": []},
        {"path": "f", "edits": "replace everything"},
        {"path": "f", "edits": [{"old_text": "", "new_text": "x"}]},
        {"path": "f", "edits": [{"old_text": "a"}]},
        {"path": "f", "edits": [["a", "b"]]},
    ]
    for arguments in bad:
        result = await run_tool(tool, arguments)
        assert result.is_error, arguments
        assert "invalid arguments" in result.joined_text
    assert policy.actions == []


async def test_edit_denied_by_policy_changes_nothing(tmp_path: Path, run_tool: RunTool) -> None:
    await _write(tmp_path / "f.txt", b"keep\n")
    policy = RecordingPolicy(ExecutionDecision(allowed=False, reason="protected file"))
    result = await run_tool(
        create_edit_tool(str(tmp_path), execution_policy=policy),
        {"path": "f.txt", "edits": [{"old_text": "keep", "new_text": "gone"}]},
    )
    assert result.is_error
    assert "protected file" in result.joined_text
    assert await _read(tmp_path / "f.txt") == b"keep\n"
    assert policy.actions[0].kind == "edit"
    assert policy.actions[0].paths == (str(tmp_path / "f.txt"),)


async def test_parallel_edits_to_one_file_never_lose_an_update(
    tmp_path: Path, run_tool: RunTool
) -> None:
    count = 40
    await _write(tmp_path / "shared.txt", "".join(f"slot-{i};\n" for i in range(count)).encode())
    edit = create_edit_tool(str(tmp_path))
    results: list[ToolResult] = []

    async def one(index: int) -> None:
        # Each task edits through its own spelling of the path; they share one real path.
        path = "shared.txt" if index % 2 else "./sub/../shared.txt"
        arguments: JsonObject = {
            "path": path,
            "edits": [{"old_text": f"slot-{index};", "new_text": f"done-{index};"}],
        }
        results.append(await run_tool(edit, arguments))

    (tmp_path / "sub").mkdir()
    async with trio.open_nursery() as nursery:
        for index in range(count):
            nursery.start_soon(one, index)
    assert [r.joined_text for r in results if r.is_error] == []
    assert await _read(tmp_path / "shared.txt") == (
        "".join(f"done-{i};\n" for i in range(count)).encode()
    )


async def test_writes_and_edits_share_one_queue_per_real_path(
    tmp_path: Path, run_tool: RunTool
) -> None:
    await _write(tmp_path / "f.txt", b"v0\n")
    order: list[str] = []

    class Tracing(LocalFileOperations):
        async def stat(self, path: str) -> FileStat:
            order.append("enter")
            await trio.lowlevel.checkpoint()
            return await super().stat(path)

        async def write(self, path: str, data: bytes, *, create_parents: bool = False) -> None:
            await super().write(path, data, create_parents=create_parents)
            order.append("leave")

    files = Tracing()
    write = create_write_tool(str(tmp_path), file_operations=files)
    edit = create_edit_tool(str(tmp_path), file_operations=files)
    async with trio.open_nursery() as nursery:
        for index in range(5):
            replace: JsonObject = {"path": "f.txt", "content": f"v{index}\n"}
            change: JsonObject = {
                "path": "f.txt",
                "edits": [{"old_text": "\n", "new_text": "!\n"}],
            }
            nursery.start_soon(run_tool, write, replace)
            nursery.start_soon(run_tool, edit, change)
    assert order == ["enter", "leave"] * (len(order) // 2)


async def test_cancelled_write_leaves_old_or_new_content_and_no_temp_file(
    tmp_path: Path, run_tool: RunTool
) -> None:
    target = tmp_path / "f.txt"
    old, new = b"o" * 1_000_000, "n" * 5_000_000
    for _ in range(5):
        await _write(target, old)
        async with trio.open_nursery() as nursery:
            arguments: JsonObject = {"path": "f.txt", "content": new}
            nursery.start_soon(run_tool, create_write_tool(str(tmp_path)), arguments)
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        assert await _read(target) in (old, new.encode())
        assert _leftover_temp_files(tmp_path) == []
