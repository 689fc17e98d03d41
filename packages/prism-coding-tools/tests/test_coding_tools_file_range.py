import os
from pathlib import Path

import pytest

from prism.coding.tools import FileStat, read_file_range, replace_file_in_directory


def test_read_file_range_reads_only_the_requested_bytes(tmp_path: Path) -> None:
    target = tmp_path / "big.bin"
    with target.open("wb") as f:
        f.truncate(1 << 30)  # 1 GiB, sparse: reading it whole would be noticed
        f.seek(10)
        f.write(b"hello")
    fd = os.open(target, os.O_RDONLY)
    try:
        assert read_file_range(fd, offset=10, length=5, path=str(target)) == b"hello"
        assert read_file_range(fd, offset=(1 << 30) - 2, length=100, path=str(target)) == b"\0\0"
    finally:
        os.close(fd)


def test_read_file_range_refuses_a_directory_and_a_fifo(tmp_path: Path) -> None:
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(IsADirectoryError):
            read_file_range(fd, offset=0, length=1, path=str(tmp_path))
    finally:
        os.close(fd)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(OSError, match="not a regular file"):
            read_file_range(fd, offset=0, length=1, path=str(fifo))
    finally:
        os.close(fd)


def test_file_stat_from_stat_result_names_the_kind(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"abc")
    os.chmod(tmp_path / "f", 0o640)
    file_stat = FileStat.from_stat_result("f", os.stat(tmp_path / "f"))
    assert (file_stat.kind, file_stat.size, file_stat.mode) == ("file", 3, 0o640)
    assert FileStat.from_stat_result("d", os.stat(tmp_path)).kind == "directory"
    assert FileStat.from_stat_result("n", os.stat("/dev/null")).kind == "other"


def test_replace_file_in_directory_keeps_the_mode_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    target.write_bytes(b"old")
    os.chmod(target, 0o640)
    dir_fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        replace_file_in_directory(dir_fd, "f.txt", b"new", existing=os.stat(target))
        replace_file_in_directory(dir_fd, "g.txt", b"fresh", existing=None)
    finally:
        os.close(dir_fd)
    assert target.read_bytes() == b"new"
    assert os.stat(target).st_mode & 0o7777 == 0o640
    assert (tmp_path / "g.txt").read_bytes() == b"fresh"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.txt", "g.txt"]


def test_replace_file_in_directory_failure_leaves_the_target_untouched(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "keep").write_bytes(b"x")
    dir_fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        # Renaming a file over a non-empty directory fails after the temp was written.
        with pytest.raises(IsADirectoryError):
            replace_file_in_directory(dir_fd, "d", b"data", existing=None)
    finally:
        os.close(dir_fd)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]
    assert (tmp_path / "d" / "keep").read_bytes() == b"x"
