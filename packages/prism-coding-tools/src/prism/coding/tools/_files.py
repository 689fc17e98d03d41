"""The plain :class:`FileOperations`: direct filesystem access, not contained."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat as stat_module

import attrs
import trio

from ._protocols import FileStat, read_file_range

__all__ = ["LocalFileOperations"]


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
    temp = os.path.join(directory, f".{name}.{secrets.token_hex(6)}.prism-tmp")
    # A new file gets 0o666 & ~umask from the kernel; an existing one keeps its bits.
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    renamed = False
    try:
        try:
            if existing is not None:
                os.fchmod(fd, stat_module.S_IMODE(existing.st_mode))
                if os.geteuid() == 0:
                    with contextlib.suppress(OSError):
                        os.fchown(fd, existing.st_uid, existing.st_gid)
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
        renamed = True
    finally:
        if not renamed:
            with contextlib.suppress(OSError):
                os.unlink(temp)
    with contextlib.suppress(OSError):
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dir_fd)
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
