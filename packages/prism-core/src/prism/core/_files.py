"""Opening the files Prism writes so that a planted link cannot redirect them.

Every file Prism writes (ledgers and their locks and rotated files, SQLite
databases, pins files, spill files) is opened through :func:`open_private_file`:

- the final component is opened with ``O_NOFOLLOW``, so a symlink planted at
  the name fails the open instead of sending the bytes to its target;
- the parent directory is opened first and the file is opened relative to
  it; inside any of ``roots`` (folders someone else, such as the agent, may
  write to) every component below the root is opened with ``O_NOFOLLOW``
  too, so a directory link planted there is refused;
- what was opened must be a regular file with one link (a hard link to
  ``~/.bashrc`` is refused like a symlink), and is never a FIFO or device
  (the open does not block on one).

The caller keeps the descriptor, and may keep the parent's descriptor to
rename and reopen names in the same directory later (rotation), comparing
the device and inode of what it reopens with what it created.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import TYPE_CHECKING

import attrs

from ._errors import PrismError

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "FileIdentity",
    "OpenedFile",
    "UnsafeFileError",
    "check_regular",
    "inside_any",
    "open_directory",
    "open_private_file",
]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


class UnsafeFileError(PrismError, OSError):
    """A file Prism was to write is a link, not a regular file, or lies behind a planted link."""


@attrs.frozen
class FileIdentity:
    """Which file a descriptor is: its device and inode.

    Attributes:
        device: ``st_dev``.
        inode: ``st_ino``.
    """

    device: int
    inode: int

    @classmethod
    def of(cls, status: os.stat_result) -> FileIdentity:
        """The identity in ``status``."""
        return cls(status.st_dev, status.st_ino)


@attrs.frozen
class OpenedFile:
    """A file opened by :func:`open_private_file`.

    Attributes:
        fd: the file's descriptor (the caller closes it).
        directory_fd: its parent directory's descriptor (the caller closes it).
        name: the file's name inside that directory.
        identity: the file's device and inode.
        created: the open created the file.
    """

    fd: int
    directory_fd: int
    name: str
    identity: FileIdentity
    created: bool


def inside_any(path: str, roots: Iterable[str]) -> str | None:
    """The first of ``roots`` that holds ``path`` (both absolute, as written), or ``None``."""
    for root in roots:
        root = os.path.abspath(root)
        if path == root or path.startswith(root.rstrip(os.sep) + os.sep):
            return root
    return None


def open_directory(directory: str, roots: Iterable[str] = ()) -> int:
    """Open ``directory`` for ``*at`` calls; below a root, no component may be a link.

    Raises:
        UnsafeFileError: a component below one of ``roots`` is a link (or not a directory).
        OSError: the directory cannot be opened.
    """
    directory = os.path.abspath(directory)
    root = inside_any(directory, roots)
    if root is None:
        return os.open(directory, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    fd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    relative = os.path.relpath(directory, root)
    if relative == os.curdir:
        return fd
    try:
        for part in relative.split(os.sep):
            try:
                child = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise UnsafeFileError(
                        exc.errno,
                        f"{os.path.join(root, relative)}: {part!r} inside {root} is a link "
                        "or not a directory; Prism does not write through it",
                    ) from None
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_regular(fd: int, path: str) -> os.stat_result:
    """``fstat(fd)``, refusing anything but a regular file of this user, with one link.

    A file another user owns, or anyone may write, is refused too: someone
    else created it (in a shared folder such as ``/tmp``) to read or rewrite
    what Prism records.

    Raises:
        UnsafeFileError: ``fd`` is not a regular file, has more than one link,
            belongs to another user or is writable by everyone.
    """
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode):
        raise UnsafeFileError(
            errno.EINVAL, f"{path} is not a regular file; Prism does not write to it"
        )
    if status.st_nlink > 1:
        raise UnsafeFileError(
            errno.EMLINK,
            f"{path} has {status.st_nlink} hard links; Prism does not write to a linked file",
        )
    if status.st_uid != os.geteuid():
        raise UnsafeFileError(
            errno.EPERM,
            f"{path} belongs to another user (uid {status.st_uid}); Prism does not write to it",
        )
    if status.st_mode & stat.S_IWOTH:
        raise UnsafeFileError(
            errno.EPERM, f"{path} is writable by every user; Prism does not write to it"
        )
    return status


def open_private_file(
    path: str | os.PathLike[str],
    flags: int = os.O_WRONLY | os.O_APPEND | os.O_CREAT,
    *,
    mode: int = 0o600,
    roots: Iterable[str] = (),
    directory_fd: int | None = None,
) -> OpenedFile:
    """Open a file Prism writes without following a link at any place an attacker controls.

    Args:
        path: the file. Relative to ``directory_fd`` when that is given.
        flags: ``os.open`` flags; ``O_NOFOLLOW``, ``O_CLOEXEC`` and ``O_NONBLOCK``
            are added (the last is cleared again once the file is known regular).
        mode: the permissions of a file the open creates.
        roots: folders others may write in; below them no directory may be a link.
        directory_fd: open ``path`` (a bare name) inside this directory instead
            of opening its parent; the result then shares it (not a new descriptor).

    Raises:
        UnsafeFileError: the name is a symlink, the file is not regular or has
            several links, or a directory below a root is a link.
        OSError: the file cannot be opened.
    """
    text = os.fspath(path)
    if directory_fd is None:
        absolute = os.path.abspath(text)
        parent, name = os.path.split(absolute)
        dir_fd = open_directory(parent, roots)
        shown = absolute
    else:
        name, dir_fd, shown = text, directory_fd, text
    try:
        created = False
        if flags & os.O_CREAT and not flags & os.O_EXCL:
            # Learn whether this open creates the file: try an exclusive create first.
            try:
                fd = os.open(
                    name, flags | os.O_EXCL | _NOFOLLOW | _CLOEXEC | _NONBLOCK, mode, dir_fd=dir_fd
                )
                created = True
            except FileExistsError:
                fd = _open_existing(name, flags & ~os.O_CREAT, mode, dir_fd, shown)
        else:
            fd = _open_existing(name, flags, mode, dir_fd, shown)
            created = bool(flags & os.O_EXCL)
        try:
            status = check_regular(fd, shown)
            if _NONBLOCK:
                os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
    except BaseException:
        if directory_fd is None:
            os.close(dir_fd)
        raise
    return OpenedFile(fd, dir_fd, name, FileIdentity.of(status), created)


def _open_existing(name: str, flags: int, mode: int, dir_fd: int, shown: str) -> int:
    try:
        return os.open(name, flags | _NOFOLLOW | _CLOEXEC | _NONBLOCK, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeFileError(
                errno.ELOOP, f"{shown} is a symbolic link; Prism does not write through it"
            ) from None
        if exc.errno == errno.ENXIO:  # a FIFO nobody reads
            raise UnsafeFileError(
                errno.ENXIO, f"{shown} is not a regular file; Prism does not write to it"
            ) from None
        raise
