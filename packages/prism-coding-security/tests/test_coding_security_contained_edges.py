"""Contained file operations at the edges: every refusal names the path, nothing leaks out."""

from __future__ import annotations

import errno
import os
from typing import TYPE_CHECKING

import pytest

from prism.coding.security import PathEscapeError, create_contained_file_operations

if TYPE_CHECKING:
    from pathlib import Path


async def test_relative_and_foreign_paths_are_refused(root: Path, tmp_path: Path) -> None:
    files = create_contained_file_operations([str(root)])
    with pytest.raises(PathEscapeError, match="not absolute"):
        await files.stat("relative.txt")
    with pytest.raises(PathEscapeError, match="not under any root"):
        await files.stat(str(tmp_path / "other"))
    with pytest.raises(PathEscapeError, match="NUL"):
        await files.read("a\0b", length=1)
    with pytest.raises(PathEscapeError, match="longer than"):
        await files.stat("/" + "a" * 5000)
    with pytest.raises(PathEscapeError, match="not a string"):
        await files.resolve(3, cwd=str(root))  # type: ignore[arg-type]
    with pytest.raises(PathEscapeError, match="cannot be encoded"):
        await files.resolve("\ud800", cwd=str(root))


async def test_dot_dot_moves_up_inside_the_root_but_not_above_it(root: Path) -> None:
    (root / "sub").mkdir()
    (root / "a.txt").write_text("a")
    files = create_contained_file_operations([str(root)])
    assert await files.read(f"{root}/sub/../a.txt", length=10) == b"a"
    with pytest.raises(PathEscapeError, match="climbs above the root"):
        await files.read(f"{root}/../x", length=10)


async def test_the_root_itself_and_directories(root: Path) -> None:
    (root / "sub").mkdir()
    files = create_contained_file_operations([str(root)])
    assert (await files.stat(str(root))).kind == "directory"
    with pytest.raises(IsADirectoryError):
        await files.read(str(root), length=1)
    with pytest.raises(IsADirectoryError):
        await files.write(str(root), b"x")
    with pytest.raises(IsADirectoryError):
        await files.write(str(root / "sub"), b"x")
    with pytest.raises(IsADirectoryError):
        await files.read(f"{root}/sub/..", length=1)
    with pytest.raises(FileNotFoundError):
        await files.stat(str(root / "missing"))
    assert await files.read(str(root / "missing"), length=0) == b""
    with pytest.raises(ValueError, match=">= 0"):
        await files.read(str(root / "missing"), offset=-1, length=1)


async def test_symlinks_inside_the_roots_are_followed_and_loops_stop(root: Path) -> None:
    (root / "real").mkdir()
    (root / "real" / "f").write_text("data")
    (root / "abs").symlink_to(root / "real")
    (root / "rel").symlink_to("real/f")
    (root / "loop").symlink_to("loop")
    (root / "empty-dir-link").symlink_to(root / "real")
    files = create_contained_file_operations([str(root)])
    assert await files.read(str(root / "abs" / "f"), length=10) == b"data"
    assert await files.read(str(root / "rel"), length=10) == b"data"
    assert (await files.stat(str(root / "rel"))).kind == "file"
    await files.write(str(root / "abs" / "new"), b"n")
    assert (root / "real" / "new").read_bytes() == b"n"
    with pytest.raises(OSError, match="symbolic links") as raised:
        await files.read(str(root / "loop"), length=1)
    assert raised.value.errno == errno.ELOOP
    with pytest.raises(OSError, match="symbolic links"):
        await files.read(str(root / "loop" / "x"), length=1)


async def test_a_file_where_a_directory_is_expected_is_an_error(root: Path) -> None:
    (root / "file").write_text("x")
    files = create_contained_file_operations([str(root)])
    with pytest.raises(NotADirectoryError):
        await files.read(str(root / "file" / "below"), length=1)
    with pytest.raises(FileNotFoundError):
        await files.write(str(root / "missing" / "f"), b"x")
    await files.write(str(root / "made" / "deep" / "f"), b"x", create_parents=True)
    assert (root / "made" / "deep" / "f").read_bytes() == b"x"


@pytest.mark.skipif(os.geteuid() == 0, reason="root bypasses file permissions")
async def test_a_read_only_file_is_not_replaced(root: Path) -> None:
    target = root / "ro"
    target.write_text("keep")
    target.chmod(0o444)
    files = create_contained_file_operations([str(root)])
    with pytest.raises(PermissionError):
        await files.write(str(target), b"new")
    assert target.read_text() == "keep"


async def test_nested_roots_pick_the_deepest(root: Path) -> None:
    inner = root / "inner"
    inner.mkdir()
    (inner / "f").write_text("in")
    files = create_contained_file_operations([str(root), str(inner), f"{inner}/."])
    assert await files.read(str(inner / "f"), length=10) == b"in"
    assert await files.resolve("f", cwd=str(inner)) == str(inner / "f")
