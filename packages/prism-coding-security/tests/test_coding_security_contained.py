"""Contained file operations: the swap-after-check race and every escape at open time."""

from __future__ import annotations

import inspect
import os
from typing import TYPE_CHECKING

import pytest

from prism.coding.security import (
    PathEscapeError,
    create_coding_approval_policy,
    create_contained_file_operations,
)
from prism.coding.tools import FileOperations, LocalFileOperations
from prism.core import ExecutionAction, ExecutionDecision

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    directory = tmp_path / "outside"
    directory.mkdir()
    (directory / "secret.txt").write_text("top secret")
    return directory


def test_contained_operations_satisfy_the_protocol(root: Path) -> None:
    assert isinstance(create_contained_file_operations([str(root)]), FileOperations)


async def test_read_write_stat_round_trip_inside(root: Path) -> None:
    ops = create_contained_file_operations([str(root)])
    path = await ops.resolve("pkg/mod.py", cwd=str(root))
    await ops.write(path, b"hello world", create_parents=True)
    assert (root / "pkg" / "mod.py").read_bytes() == b"hello world"
    assert await ops.read(path, offset=6, length=100) == b"world"
    info = await ops.stat(path)
    assert (info.kind, info.size) == ("file", 11)
    assert (await ops.stat(str(root))).kind == "directory"


async def test_write_keeps_an_existing_files_mode(root: Path) -> None:
    target = root / "run.sh"
    target.write_text("old")
    target.chmod(0o751)
    ops = create_contained_file_operations([str(root)])
    await ops.write(str(target), b"new")
    assert target.read_text() == "new"
    assert target.stat().st_mode & 0o777 == 0o751
    assert sorted(os.listdir(root)) == ["run.sh"]


async def test_symlinks_inside_the_roots_are_followed(root: Path) -> None:
    (root / "real").mkdir()
    (root / "real" / "a.txt").write_text("A")
    os.symlink("real", root / "alias")
    os.symlink(root / "real" / "a.txt", root / "a-link")
    ops = create_contained_file_operations([str(root)])
    assert await ops.read(str(root / "alias" / "a.txt"), length=10) == b"A"
    assert await ops.read(str(root / "a-link"), length=10) == b"A"
    await ops.write(str(root / "alias" / "b.txt"), b"B")
    assert (root / "real" / "b.txt").read_text() == "B"


ESCAPES = {
    "absolute_outside": "/etc/passwd",
    "dotdot": "../outside/secret.txt",
    "symlink_dir": "link-dir/secret.txt",
    "symlink_file": "link-file",
    "dangling_symlink": "dangling",
    "nul": "a\x00b",
}


@pytest.mark.parametrize("attack", sorted(ESCAPES))
async def test_resolve_refuses_escapes(root: Path, outside: Path, attack: str) -> None:
    os.symlink(outside, root / "link-dir")
    os.symlink(outside / "secret.txt", root / "link-file")
    os.symlink(outside / "new.txt", root / "dangling")
    ops = create_contained_file_operations([str(root)])
    with pytest.raises(PathEscapeError):
        await ops.resolve(ESCAPES[attack], cwd=str(root))


@pytest.mark.parametrize("link", ["absolute", "relative"])
async def test_symlinks_out_are_refused_when_opened(root: Path, outside: Path, link: str) -> None:
    target = str(outside) if link == "absolute" else "../outside"
    os.symlink(target, root / "sub")
    ops = create_contained_file_operations([str(root)])
    with pytest.raises(PathEscapeError):
        await ops.read(str(root / "sub" / "secret.txt"), length=100)
    with pytest.raises(PathEscapeError):
        await ops.stat(str(root / "sub" / "secret.txt"))
    with pytest.raises(PathEscapeError):
        await ops.write(str(root / "sub" / "planted.txt"), b"x")
    assert not (outside / "planted.txt").exists()


async def test_relative_symlink_climbing_above_the_root_is_refused(
    root: Path, outside: Path
) -> None:
    (root / "deep").mkdir()
    os.symlink("../../outside/secret.txt", root / "deep" / "up")
    ops = create_contained_file_operations([str(root)])
    with pytest.raises(PathEscapeError):
        await ops.read(str(root / "deep" / "up"), length=100)


async def test_final_component_swapped_for_a_symlink_is_refused(root: Path, outside: Path) -> None:
    target = root / "notes.txt"
    target.write_text("mine")
    ops = create_contained_file_operations([str(root)])
    path = await ops.resolve("notes.txt", cwd=str(root))
    target.unlink()
    os.symlink(outside / "secret.txt", target)
    with pytest.raises(PathEscapeError):
        await ops.read(path, length=100)
    with pytest.raises(PathEscapeError):
        await ops.write(path, b"overwrite")
    assert (outside / "secret.txt").read_text() == "top secret"


async def test_swap_after_check_race_cannot_escape(root: Path, outside: Path) -> None:
    # 1. the model asks to write root/work/out.txt; the policy checks it: inside, allowed.
    (root / "work").mkdir()
    path = str(root / "work" / "out.txt")
    policy = create_coding_approval_policy(roots=[str(root)])
    decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(path,)))
    if inspect.isawaitable(decision):
        decision = await decision  # (a root's first write is judged off the event loop)
    assert isinstance(decision, ExecutionDecision)
    assert decision.allowed
    read_path = str(root / "work" / "secret.txt")
    # 2. between the check and the open, the directory is swapped for a symlink to outside.
    (root / "work").rename(root / "work-old")
    os.symlink(outside, root / "work")
    # 3. the plain operations would follow the swapped link (the attack is real) ...
    plain = LocalFileOperations()
    assert await plain.read(read_path, length=100) == b"top secret"
    # 4. ... the contained ones do not: neither the read nor the write reaches outside.
    ops = create_contained_file_operations([str(root)])
    with pytest.raises(PathEscapeError):
        await ops.read(read_path, length=100)
    with pytest.raises(PathEscapeError):
        await ops.write(path, b"planted")
    with pytest.raises(PathEscapeError):
        await ops.write(str(root / "work" / "deeper" / "x"), b"planted", create_parents=True)
    assert sorted(os.listdir(outside)) == ["secret.txt"]


async def test_create_parents_stays_inside(root: Path) -> None:
    ops = create_contained_file_operations([str(root)])
    await ops.write(str(root / "a" / "b" / "c.txt"), b"x", create_parents=True)
    assert (root / "a" / "b" / "c.txt").read_bytes() == b"x"


async def test_missing_parent_without_create_parents_is_file_not_found(root: Path) -> None:
    ops = create_contained_file_operations([str(root)])
    with pytest.raises(FileNotFoundError):
        await ops.write(str(root / "nope" / "c.txt"), b"x")


async def test_reading_a_directory_is_an_is_a_directory_error(root: Path) -> None:
    (root / "d").mkdir()
    ops = create_contained_file_operations([str(root)])
    with pytest.raises(IsADirectoryError):
        await ops.read(str(root / "d"), length=10)
    with pytest.raises(IsADirectoryError):
        await ops.write(str(root / "d"), b"x")


async def test_fifo_is_refused_without_hanging(root: Path) -> None:
    os.mkfifo(root / "pipe")
    ops = create_contained_file_operations([str(root)])
    with pytest.raises(OSError, match="not a regular file"):
        await ops.read(str(root / "pipe"), length=10)


async def test_symlink_loop_is_an_os_error(root: Path) -> None:
    os.symlink("b", root / "a")
    os.symlink("a", root / "b")
    ops = create_contained_file_operations([str(root)])
    with pytest.raises(OSError):  # noqa: PT011 - ELOOP, the kernel's own error
        await ops.read(str(root / "a"), length=10)


async def test_read_never_returns_more_than_asked(root: Path) -> None:
    (root / "big").write_bytes(b"x" * 100_000)
    ops = create_contained_file_operations([str(root)])
    assert len(await ops.read(str(root / "big"), length=10)) == 10


async def test_negative_offset_is_a_value_error(root: Path) -> None:
    ops = create_contained_file_operations([str(root)])
    with pytest.raises(ValueError, match="offset"):
        await ops.read(str(root / "x"), offset=-1, length=1)
