"""The plain :class:`FileOperations`: direct filesystem access, not contained."""

from __future__ import annotations

import errno
import os
import stat as stat_module

import attrs
import trio

from prism.core.options import instance_of, optional

from ._common import check_option
from ._protocols import FileOperations, FileStat, read_file_range, replace_file_in_directory

__all__ = ["LocalFileOperations", "file_operations_or_local"]


def _resolve(path: str, cwd: str) -> str:
    expanded = os.path.expanduser(path)
    if not os.path.isabs(expanded):
        expanded = os.path.join(cwd, expanded)
    return os.path.realpath(expanded)


def _stat(path: str) -> FileStat:
    return FileStat.from_stat_result(path, os.stat(path))


def _read(path: str, offset: int, length: int) -> bytes:
    # O_NONBLOCK keeps a FIFO from hanging the open; it is refused just below.
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        return read_file_range(fd, offset=offset, length=length, path=path)
    finally:
        os.close(fd)


def _write(path: str, data: bytes, create_parents: bool) -> None:
    directory, name = os.path.split(path)
    if create_parents:
        os.makedirs(directory, exist_ok=True)
    try:
        existing: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        existing = None
    if existing is not None and stat_module.S_ISDIR(existing.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    if existing is not None and not os.access(path, os.W_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        replace_file_in_directory(dir_fd, name, data, existing=existing)
    finally:
        os.close(dir_fd)


@attrs.frozen
class LocalFileOperations:
    """The plain :class:`FileOperations`: resolves with ``realpath`` and uses the OS directly.

    **Not contained**: any path the process can reach is reachable, absolute
    paths and ``..`` included, and symlinks are followed. Put an execution
    policy in front (``prism.coding.security`` checks paths against roots) or
    use a contained implementation instead.

    Reads use ``pread`` on a descriptor, so only the requested range is
    read. Writes go to a temporary file in the target's directory, are
    ``fsync``'ed, then renamed over the target (keeping an existing file's
    mode and, when running as root, its owner). Blocking calls run in a
    worker thread; a call that has started finishes before a cancellation is
    delivered.
    """

    async def resolve(self, path: str, *, cwd: str) -> str:
        """Absolute real path of ``path`` (relative to ``cwd``, ``~`` expanded)."""
        if "\0" in path or "\0" in cwd:
            raise ValueError("paths must not contain NUL characters")
        return await trio.to_thread.run_sync(_resolve, path, cwd)

    async def stat(self, path: str) -> FileStat:
        """``os.stat`` of ``path`` as a :class:`FileStat`."""
        return await trio.to_thread.run_sync(_stat, path)

    async def read(self, path: str, *, offset: int = 0, length: int) -> bytes:
        """At most ``length`` bytes from byte ``offset`` (``pread``; never the whole file)."""
        if offset < 0 or length < 0:
            raise ValueError(f"offset and length must be >= 0, got {offset!r} and {length!r}")
        if length == 0:
            await trio.lowlevel.checkpoint()
            return b""
        return await trio.to_thread.run_sync(_read, path, offset, length)

    async def write(self, path: str, data: bytes, *, create_parents: bool = False) -> None:
        """Atomically replace ``path`` with ``data`` (temp file, ``fsync``, rename)."""
        await trio.to_thread.run_sync(_write, path, bytes(data), create_parents)


def file_operations_or_local(owner: str, value: FileOperations | None) -> FileOperations:
    """``value`` checked, or a new :class:`LocalFileOperations` for None."""
    files = instance_of(FileOperations, description="a FileOperations")
    check_option(optional(files), owner, "file_operations", value)
    return LocalFileOperations() if value is None else value
