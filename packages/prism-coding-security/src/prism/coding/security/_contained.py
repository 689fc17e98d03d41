"""File operations that cannot be led outside the roots, even by a symlink swapped in late."""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import stat as stat_module
from typing import TYPE_CHECKING

import attrs
import trio

from prism.coding.tools import (
    FileOperations,
    FileStat,
    read_file_range,
    replace_file_in_directory,
)
from prism.core.text import clip

from ._errors import PathEscapeError
from ._ignorefile import ignore_file, self_ignoring
from ._paths import MAX_PATH_BYTES, Roots, normalize_roots

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["create_contained_file_operations"]

_MAX_SYMLINK_HOPS = 40
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class _Walk:
    """Directory descriptors from a root down to a path's parent, opened with O_NOFOLLOW.

    Each stacked descriptor is a real directory inside the root, so ``..``
    pops the stack instead of asking the kernel (which could climb out).
    Symlinks are read with ``readlink`` and their targets re-walked the same
    way from the root they name; a target outside every root is refused.
    """

    def __init__(self, roots: Roots, original: str) -> None:
        self.roots = roots
        self.original = original
        self.stack: list[tuple[int, str]] = []
        self.hops = 0

    def close(self) -> None:
        while self.stack:
            fd, _ = self.stack.pop()
            os.close(fd)

    def escape(self, reason: str) -> PathEscapeError:
        return PathEscapeError(self.original, reason)

    def start(self, path: str) -> list[str]:
        """Open the root that holds absolute ``path``; return the components below it."""
        self.close()
        normalized = "/" + path.lstrip("/") if path.startswith("/") else path
        if not normalized.startswith("/"):
            raise self.escape("the path is not absolute")
        for root in sorted(self.roots.paths, key=len, reverse=True):
            prefix = root.rstrip("/") + "/"
            if normalized == root or normalized.startswith(prefix) or root == "/":
                rest = normalized[len(root) :] if normalized != root else ""
                fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                self.stack.append((fd, root))
                return [part for part in rest.split("/") if part not in ("", ".")]
        raise self.escape(f"{path!r} is not under any root")

    @property
    def fd(self) -> int:
        return self.stack[-1][0]

    @property
    def here(self) -> str:
        return self.stack[-1][1]

    def follow(self, name: str, rest: list[str]) -> list[str]:
        """``name`` in the current directory is a symlink: restart at its target."""
        self.hops += 1
        if self.hops > _MAX_SYMLINK_HOPS:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), self.original)
        target = os.readlink(name, dir_fd=self.fd)
        if not target:
            raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), self.original)
        joined = posixpath.join(self.here, target) if not target.startswith("/") else target
        real = posixpath.normpath(joined)
        if not self.roots.contains_real(real):
            raise self.escape(f"the symlink {posixpath.join(self.here, name)!r} points to "
                              f"{target!r}, outside the roots")  # fmt: skip
        if target.startswith("/"):
            parts = self.start(target)
        else:
            parts = [part for part in target.split("/") if part not in ("", ".")]
        return parts + rest

    def descend(self, parts: list[str], *, create: bool = False) -> str:
        """Walk every component but the last; return the last (the name to open)."""
        while True:
            if not parts:
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), self.original)
            name = parts[0]
            rest = parts[1:]
            if name == "..":
                if len(self.stack) == 1:
                    raise self.escape("'..' climbs above the root")
                os.close(self.stack.pop()[0])
                parts = rest
                continue
            if not rest:
                return name
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=self.fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=self.fd)
                fd = os.open(name, _DIR_FLAGS, dir_fd=self.fd)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                st = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
                if not stat_module.S_ISLNK(st.st_mode):
                    raise
                parts = self.follow(name, rest)
                continue
            self.stack.append((fd, posixpath.join(self.here, name)))
            parts = rest

    def final(self, parts: list[str], *, create: bool = False) -> tuple[str, os.stat_result | None]:
        """Walk to the last component, following contained symlinks; lstat it there."""
        while True:
            name = self.descend(parts, create=create)
            try:
                st = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
            except FileNotFoundError:
                return name, None
            if stat_module.S_ISLNK(st.st_mode):
                parts = self.follow(name, [])
                continue
            return name, st


def _begin(roots: Roots, path: str) -> tuple[_Walk, list[str]]:
    if not isinstance(path, str) or "\x00" in path:
        raise PathEscapeError(repr(path), "the path is not a string without NUL bytes")
    if len(os.fsencode(path)) > MAX_PATH_BYTES:
        raise PathEscapeError(clip(path, 67), f"the path is longer than {MAX_PATH_BYTES} bytes")
    walk = _Walk(roots, path)
    # start() leaves nothing open when it raises.
    return walk, walk.start(path)


def _stat(roots: Roots, path: str) -> FileStat:
    walk, parts = _begin(roots, path)
    try:
        if not parts:
            st = os.fstat(walk.fd)
        else:
            _name, found = walk.final(parts)
            if found is None:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
            st = found
    finally:
        walk.close()
    return FileStat.from_stat_result(path, st)


def _read(roots: Roots, path: str, offset: int, length: int) -> bytes:
    walk, parts = _begin(roots, path)
    try:
        if not parts:
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        while True:
            name = walk.descend(parts)
            try:
                fd = os.open(
                    name,
                    os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                    dir_fd=walk.fd,
                )
            except OSError as exc:
                if exc.errno != errno.ELOOP:
                    raise
                parts = walk.follow(name, [])
                continue
            break
    finally:
        walk.close()
    try:
        return read_file_range(fd, offset=offset, length=length, path=path)
    finally:
        os.close(fd)


def _write(roots: Roots, path: str, data: bytes, create_parents: bool) -> None:
    walk, parts = _begin(roots, path)
    try:
        if not parts:
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        name, existing = walk.final(parts, create=create_parents)
        if existing is not None and stat_module.S_ISDIR(existing.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        if existing is not None and not os.access(name, os.W_OK, dir_fd=walk.fd):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
        if ignore_file(name):
            # (the name written, where a contained link led: the copy-back's judgement)
            refusal = self_ignoring(data)
            if refusal is not None:
                raise ValueError(f"not written: {refusal}")
        replace_file_in_directory(walk.fd, name, data, existing=existing)
    finally:
        walk.close()


def _resolve(roots: Roots, path: str, cwd: str) -> str:
    if not isinstance(path, str) or not isinstance(cwd, str):
        raise PathEscapeError(repr(path), "the path is not a string")
    expanded = os.path.expanduser(path)
    verdict = roots.resolve(expanded, base=cwd)
    if not verdict.inside or verdict.real is None:
        raise PathEscapeError(path, verdict.reason or "it is outside the roots")
    return verdict.real


@attrs.frozen
class _ContainedFileOperations:
    roots: Roots

    async def resolve(self, path: str, *, cwd: str) -> str:
        return await trio.to_thread.run_sync(_resolve, self.roots, path, cwd)

    async def stat(self, path: str) -> FileStat:
        return await trio.to_thread.run_sync(_stat, self.roots, path)

    async def read(self, path: str, *, offset: int = 0, length: int) -> bytes:
        if offset < 0 or length < 0:
            raise ValueError(f"offset and length must be >= 0, got {offset!r} and {length!r}")
        if length == 0:
            await trio.lowlevel.checkpoint()
            return b""
        return await trio.to_thread.run_sync(_read, self.roots, path, offset, length)

    async def write(self, path: str, data: bytes, *, create_parents: bool = False) -> None:
        await trio.to_thread.run_sync(_write, self.roots, path, bytes(data), create_parents)


def create_contained_file_operations(roots: Sequence[str]) -> FileOperations:
    """A :class:`~prism.coding.tools.FileOperations` that never leaves ``roots``.

    ``resolve`` refuses (with :class:`PathEscapeError`) any path whose realpath
    is outside the roots. ``stat``, ``read`` and ``write`` do not trust that
    earlier answer: they open the path by walking from the root's directory
    descriptor one component at a time with ``O_NOFOLLOW``. A symlink met on
    the way is read and followed only when its target stays inside the roots
    (and that target is walked the same way), so a directory swapped for a
    symlink after the policy check cannot lead outside. Writes are atomic
    (temporary file in the same directory, ``fsync``, rename), keep an
    existing file's mode, and create missing parents inside the roots only.
    A ``.gitignore`` that would ignore itself (and so hide itself and what it
    hides from ``git status``) is not written (``ValueError``, saying why).

    Each call runs its blocking work in a worker thread and checkpoints; a
    call that has started finishes before a cancellation is delivered.

    Raises:
        ConfigurationError: a root is not an existing directory.
    """
    return _ContainedFileOperations(
        Roots(normalize_roots(roots, owner="create_contained_file_operations"))
    )
