"""The read tool: bounded text pages, binary detection, bounded images."""

from __future__ import annotations

import base64
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prism.coding.tools import (
    DEFAULT_MAX_IMAGE_BYTES,
    FileStat,
    LocalFileOperations,
    TransformImageInput,
    create_coding_tools,
    create_read_tool,
    detect_image_mime_type,
)
from prism.core import (
    ExecutionAction,
    ExecutionDecision,
    ImageContent,
    JsonObject,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
)

if TYPE_CHECKING:
    from pathlib import Path

RunTool = Callable[[ToolDefinition, JsonObject], Awaitable[ToolResult]]

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00" * 40
JPEG = b"\xff\xd8\xff\xe0" + b"\x00\x10JFIF" + b"\x00" * 40
GIF = b"GIF89a" + b"\x01\x00\x01\x00" + b"\x00" * 40
WEBP = b"RIFF\x24\x00\x00\x00WEBPVP8 " + b"\x00" * 40


class CountingFiles:
    """The real local file operations, counting what is read."""

    def __init__(self) -> None:
        self.inner = LocalFileOperations()
        self.bytes_read = 0
        self.reads = 0
        self.stats = 0

    async def resolve(self, path: str, *, cwd: str) -> str:
        return await self.inner.resolve(path, cwd=cwd)

    async def stat(self, path: str) -> FileStat:
        self.stats += 1
        return await self.inner.stat(path)

    async def read(self, path: str, *, offset: int = 0, length: int) -> bytes:
        data = await self.inner.read(path, offset=offset, length=length)
        self.reads += 1
        self.bytes_read += len(data)
        return data

    async def write(self, path: str, data: bytes, *, create_parents: bool = False) -> None:
        await self.inner.write(path, data, create_parents=create_parents)


class RecordingPolicy:
    def __init__(self, decision: ExecutionDecision | None = None) -> None:
        self.actions: list[ExecutionAction] = []
        self.decision = decision or ExecutionDecision(allowed=True)

    def check(self, action: ExecutionAction) -> ExecutionDecision:
        self.actions.append(action)
        return self.decision


def _numbered(n: int) -> str:
    return "".join(f"line {i}\n" for i in range(1, n + 1))


async def _write(path: Path, data: bytes | str) -> None:
    if isinstance(data, str):
        await trio.Path(path).write_text(data)
    else:
        await trio.Path(path).write_bytes(data)


async def test_reads_a_small_file_whole(tmp_path: Path, run_tool: RunTool) -> None:
    await _write(tmp_path / "a.txt", "alpha\nbeta\n")
    result = await run_tool(create_read_tool(str(tmp_path)), {"path": "a.txt"})
    assert not result.is_error
    assert result.joined_text == "alpha\nbeta"
    assert result.details["next_offset"] is None
    assert result.details["total_lines"] == 2


async def test_offset_and_limit_select_lines(tmp_path: Path, run_tool: RunTool) -> None:
    await _write(tmp_path / "a.txt", _numbered(10))
    result = await run_tool(
        create_read_tool(str(tmp_path)), {"path": "a.txt", "offset": 3, "limit": 2}
    )
    assert result.joined_text.split("\n\n")[0] == "line 3\nline 4"
    assert "use offset=5 to continue" in result.joined_text
    assert result.details["next_offset"] == 5


async def test_max_lines_page_ends_with_a_continuation_hint(
    tmp_path: Path, run_tool: RunTool
) -> None:
    await _write(tmp_path / "a.txt", _numbered(100))
    tool = create_read_tool(str(tmp_path), max_lines=30)
    result = await run_tool(tool, {"path": "a.txt"})
    assert result.joined_text.split("\n\n")[0].split("\n")[-1] == "line 30"
    assert "Showing lines 1-30. More follows; use offset=31 to continue." in result.joined_text
    last = await run_tool(tool, {"path": "a.txt", "offset": 91})
    assert last.joined_text.split("\n\n")[0].split("\n")[-1] == "line 100"
    assert last.details["next_offset"] is None
    assert "end of file" in last.joined_text


async def test_max_bytes_page_keeps_whole_lines(tmp_path: Path, run_tool: RunTool) -> None:
    await _write(tmp_path / "a.txt", _numbered(100))
    result = await run_tool(create_read_tool(str(tmp_path), max_bytes=50), {"path": "a.txt"})
    shown = result.joined_text.split("\n\n")[0]
    assert len(shown.encode()) <= 50
    assert shown == "line 1\nline 2\nline 3\nline 4\nline 5\nline 6\nline 7"
    assert "50-byte limit reached" in result.joined_text
    assert result.details["next_offset"] == 8


async def test_long_lines_are_clipped(tmp_path: Path, run_tool: RunTool) -> None:
    await _write(tmp_path / "a.txt", "short\n" + "y" * 10_000 + "\nafter\n")
    result = await run_tool(create_read_tool(str(tmp_path), max_line_bytes=20), {"path": "a.txt"})
    lines = result.joined_text.split("\n")
    assert lines[:3] == ["short", "y" * 20 + " [... line clipped]", "after"]
    assert result.details["clipped_lines"] == 1


async def test_offset_beyond_the_end_is_an_error(tmp_path: Path, run_tool: RunTool) -> None:
    await _write(tmp_path / "a.txt", _numbered(3))
    tool = create_read_tool(str(tmp_path))
    for offset in (4, 50):
        result = await run_tool(tool, {"path": "a.txt", "offset": offset})
        assert result.is_error
        assert f"offset {offset} is beyond the end of the file (3 lines)" in result.joined_text


async def test_empty_file_reads_as_empty(tmp_path: Path, run_tool: RunTool) -> None:
    await _write(tmp_path / "empty.txt", "")
    result = await run_tool(create_read_tool(str(tmp_path)), {"path": "empty.txt"})
    assert not result.is_error
    assert result.joined_text == "(empty file)"


async def test_crlf_is_shown_without_carriage_returns(tmp_path: Path, run_tool: RunTool) -> None:
    await _write(tmp_path / "a.txt", b"one\r\ntwo\r\n")
    result = await run_tool(create_read_tool(str(tmp_path)), {"path": "a.txt"})
    assert result.joined_text == "one\ntwo"


async def test_binary_file_is_reported_not_dumped(tmp_path: Path, run_tool: RunTool) -> None:
    await _write(tmp_path / "blob.txt", b"ELF\x00\x01\x02" * 100)
    result = await run_tool(create_read_tool(str(tmp_path)), {"path": "blob.txt"})
    assert "binary file (600 bytes); not shown" in result.joined_text
    assert "ELF" not in result.joined_text
    assert result.details["binary"] is True


async def test_missing_file_and_directory_are_clear_errors(
    tmp_path: Path, run_tool: RunTool
) -> None:
    tool = create_read_tool(str(tmp_path))
    missing = await run_tool(tool, {"path": "nope.txt"})
    assert missing.is_error
    assert "file not found" in missing.joined_text
    directory = await run_tool(tool, {"path": "."})
    assert directory.is_error
    assert "is a directory" in directory.joined_text


async def test_fifo_is_refused_without_blocking(tmp_path: Path, run_tool: RunTool) -> None:
    os.mkfifo(tmp_path / "pipe")
    with trio.fail_after(5):
        result = await run_tool(create_read_tool(str(tmp_path)), {"path": "pipe"})
    assert result.is_error
    assert "not a regular file" in result.joined_text


async def test_first_page_of_a_1_gb_sparse_file_reads_only_the_page(
    tmp_path: Path, run_tool: RunTool
) -> None:
    big = tmp_path / "big.log"
    await _write(big, _numbered(5000))
    os.truncate(big, 1024**3)
    files = CountingFiles()
    tool = create_read_tool(str(tmp_path), file_operations=files)
    result = await run_tool(tool, {"path": "big.log"})
    assert result.joined_text.split("\n")[0] == "line 1"
    assert result.details["end_line"] == 2000
    assert result.details["next_offset"] == 2001
    assert files.bytes_read <= 256 * 1024


async def test_a_single_gigantic_line_is_not_scanned_to_its_end(
    tmp_path: Path, run_tool: RunTool
) -> None:
    big = tmp_path / "one-line.txt"
    # Text for the 8 KiB binary sniff, then NULs with no newline for a gigabyte.
    await _write(big, b"z" * (1 << 14))
    os.truncate(big, 1024**3)
    files = CountingFiles()
    tool = create_read_tool(str(tmp_path), file_operations=files)
    result = await run_tool(tool, {"path": "one-line.txt"})
    assert not result.is_error
    assert files.bytes_read <= 16 * 1024 * 1024
    assert result.details["next_offset"] == 2


@pytest.mark.parametrize(
    ("data", "mime"),
    [(PNG, "image/png"), (JPEG, "image/jpeg"), (GIF, "image/gif"), (WEBP, "image/webp")],
)
async def test_images_are_recognised_by_magic_bytes_not_name(
    tmp_path: Path, run_tool: RunTool, data: bytes, mime: str
) -> None:
    await _write(tmp_path / "picture.txt", data)
    result = await run_tool(create_read_tool(str(tmp_path)), {"path": "picture.txt"})
    assert not result.is_error
    images = [block for block in result.content if isinstance(block, ImageContent)]
    assert len(images) == 1
    assert images[0].mime_type == mime
    assert base64.b64decode(images[0].data) == data


async def test_file_named_png_that_is_text_reads_as_text(tmp_path: Path, run_tool: RunTool) -> None:
    await _write(tmp_path / "fake.png", "not an image\n")
    result = await run_tool(create_read_tool(str(tmp_path)), {"path": "fake.png"})
    assert result.joined_text == "not an image"
    assert not any(isinstance(block, ImageContent) for block in result.content)


async def test_oversized_image_on_a_2_gb_sparse_file_is_refused_unread(
    tmp_path: Path, run_tool: RunTool
) -> None:
    huge = tmp_path / "huge.png"
    await _write(huge, PNG)
    os.truncate(huge, 2 * 1024**3)
    files = CountingFiles()
    result = await run_tool(
        create_read_tool(str(tmp_path), file_operations=files), {"path": "huge.png"}
    )
    assert result.is_error
    assert "over the 10000000-byte limit" in result.joined_text
    assert result.details["image_too_large"] is True
    assert not any(isinstance(block, ImageContent) for block in result.content)
    assert files.bytes_read <= 8192


async def test_image_just_over_a_custom_limit_is_refused(tmp_path: Path, run_tool: RunTool) -> None:
    await _write(tmp_path / "a.png", PNG)
    tool = create_read_tool(str(tmp_path), max_image_bytes=len(PNG) - 1)
    result = await run_tool(tool, {"path": "a.png"})
    assert result.is_error
    exact = create_read_tool(str(tmp_path), max_image_bytes=len(PNG))
    ok = await run_tool(exact, {"path": "a.png"})
    assert not ok.is_error


async def test_image_that_grows_after_stat_is_refused(tmp_path: Path, run_tool: RunTool) -> None:
    class GrowingFiles(CountingFiles):
        """Appends to the file right after the size check, as a racing writer would."""

        async def stat(self, path: str) -> FileStat:
            result = await super().stat(path)
            with open(path, "ab") as f:  # noqa: ASYNC230 - tiny write, test setup
                f.write(b"\x00" * 100)
            return result

    await _write(tmp_path / "a.png", PNG)
    tool = create_read_tool(
        str(tmp_path), file_operations=GrowingFiles(), max_image_bytes=len(PNG) + 50
    )
    result = await run_tool(tool, {"path": "a.png"})
    assert result.is_error
    assert "grew past" in result.joined_text


async def test_transform_image_output_is_used_and_rechecked(
    tmp_path: Path, run_tool: RunTool
) -> None:
    seen: list[TransformImageInput] = []

    async def to_gif(image: TransformImageInput) -> bytes:
        seen.append(image)
        return GIF

    await _write(tmp_path / "a.png", PNG)
    result = await run_tool(
        create_read_tool(str(tmp_path), transform_image=to_gif), {"path": "a.png"}
    )
    [image] = [block for block in result.content if isinstance(block, ImageContent)]
    assert image.mime_type == "image/gif"
    assert seen[0].mime_type == "image/png"
    assert seen[0].buffer == PNG

    async def inflate(image: TransformImageInput) -> bytes:
        return PNG + b"\x00" * 1000

    too_big = await run_tool(
        create_read_tool(str(tmp_path), transform_image=inflate, max_image_bytes=500),
        {"path": "a.png"},
    )
    assert too_big.is_error
    assert "transformed image" in too_big.joined_text
    assert not any(isinstance(block, ImageContent) for block in too_big.content)


async def test_transform_image_returning_a_non_image_is_refused(
    tmp_path: Path, run_tool: RunTool
) -> None:
    async def garbage(image: TransformImageInput) -> bytes:
        return b"<svg onload=alert(1)>"

    await _write(tmp_path / "a.png", PNG)
    result = await run_tool(
        create_read_tool(str(tmp_path), transform_image=garbage), {"path": "a.png"}
    )
    assert result.is_error
    assert "not a PNG, JPEG, GIF or WebP image" in result.joined_text


async def test_transform_image_failure_is_an_error_result(
    tmp_path: Path, run_tool: RunTool
) -> None:
    async def broken(image: TransformImageInput) -> bytes:
        raise RuntimeError("decoder exploded")

    await _write(tmp_path / "a.png", PNG)
    result = await run_tool(
        create_read_tool(str(tmp_path), transform_image=broken), {"path": "a.png"}
    )
    assert result.is_error
    assert "decoder exploded" in result.joined_text


def test_an_unknown_option_raises_type_error_before_touching_the_filesystem(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "never-created"
    with pytest.raises(TypeError, match="auto_resize_images"):
        create_read_tool(str(missing), auto_resize_images=True)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="auto_resize_images"):
        create_coding_tools(str(missing), auto_resize_images=False)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="auto_resize_images"):
        create_coding_tools(
            str(missing),
            read_options={"auto_resize_images": True},  # type: ignore[arg-type]
        )
    assert not missing.exists()


def test_detect_image_mime_type_ignores_near_misses() -> None:
    assert detect_image_mime_type(b"\x89PNG\r\n") is None
    assert detect_image_mime_type(b"RIFF\x00\x00\x00\x00WAVE") is None
    assert detect_image_mime_type(b"GIF90a") is None
    assert detect_image_mime_type(b"") is None
    assert DEFAULT_MAX_IMAGE_BYTES == 10_000_000


async def test_policy_sees_the_resolved_path_and_denial_prevents_reading(
    tmp_path: Path, run_tool: RunTool
) -> None:
    real = tmp_path / "real.txt"
    await _write(real, "secret\n")
    (tmp_path / "link.txt").symlink_to(real)
    policy = RecordingPolicy(ExecutionDecision(allowed=False, reason="outside the roots"))
    files = CountingFiles()
    tool = create_read_tool(str(tmp_path), execution_policy=policy, file_operations=files)
    result = await run_tool(tool, {"path": "sub/../link.txt"})
    assert result.is_error
    assert "outside the roots" in result.joined_text
    assert "secret" not in result.joined_text
    [action] = policy.actions
    assert (action.kind, action.operation, action.paths) == ("read", "read", (str(real),))
    assert files.reads == 0
    assert files.stats == 0


async def test_symlink_to_a_system_file_is_resolved_for_the_policy(
    tmp_path: Path, run_tool: RunTool
) -> None:
    (tmp_path / "innocent.txt").symlink_to("/etc/passwd")
    policy = RecordingPolicy(ExecutionDecision(allowed=False, reason="denied"))
    result = await run_tool(
        create_read_tool(str(tmp_path), execution_policy=policy), {"path": "innocent.txt"}
    )
    assert result.is_error
    assert policy.actions[0].paths == ("/etc/passwd",)


async def test_bad_arguments_are_rejected_before_the_policy(
    tmp_path: Path, run_tool: RunTool
) -> None:
    policy = RecordingPolicy()
    tool = create_read_tool(str(tmp_path), execution_policy=policy)
    bad: list[JsonObject] = [
        {},
        {"path": ""},
        {"path": 3},
        {"path": "a\0b"},
        {"path": "a", "offset": 0},
        {"path": "a", "offset": "1"},
        {"path": "a", "limit": -2},
        {"path": "a", "limit": True},
        {"path": "x" * 5000},
    ]
    for arguments in bad:
        result = await run_tool(tool, arguments)
        assert result.is_error, arguments
        assert "invalid arguments" in result.joined_text
    assert policy.actions == []


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(st.text(alphabet="ab é\t", max_size=30), max_size=60),
    trailing_newline=st.booleans(),
    max_lines=st.integers(1, 15),
    max_bytes=st.integers(40, 300),
)
def test_paging_with_next_offset_returns_every_line_once(
    tmp_path: Path, lines: list[str], trailing_newline: bool, max_lines: int, max_bytes: int
) -> None:
    text = "\n".join(lines) + ("\n" if trailing_newline and lines else "")
    (tmp_path / "f.txt").write_text(text, encoding="utf-8")
    tool = create_read_tool(str(tmp_path), max_lines=max_lines, max_bytes=max_bytes)

    async def page(offset: int) -> ToolResult:
        ctx = ToolExecutionContext(call=ToolCall(id="p", name="read", arguments={}))
        return await tool.execute({"path": "f.txt", "offset": offset}, ctx)

    seen: list[str] = []
    offset = 1
    for _ in range(200):
        result = trio.run(page, offset)
        assert not result.is_error, result.joined_text
        body = result.joined_text.split("\n\n[")[0]
        if body != "(empty file)":
            seen.extend(body.split("\n"))
        following = result.details["next_offset"]
        if following is None:
            break
        assert isinstance(following, int)
        offset = following
    expected = text.split("\n") if text else []
    if text.endswith("\n"):
        expected = expected[:-1]
    assert seen == expected
