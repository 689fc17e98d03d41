"""Whether a root's directories may have changed since they were listed: kernel notifications.

The protected walk (:mod:`._implied`) lists every directory of a root; what it
finds (the subdirectories, each ``.git`` entry's kind, the links worth
resolving) changes only when an entry of a listed directory is created,
removed, renamed or has its attributes changed, or when the mount table
changes. :class:`DirectoryWatch` asks the kernel (inotify) to report exactly
those events for each directory listed, and the mount table's own change
signal (``/proc/self/mountinfo`` polls as a priority event when anything is
mounted or unmounted). A walk whose every directory was watched before it was
looked at may be answered again as long as no event arrived since: the kernel
queues an event before the call that made the change returns, so an event
not yet read means the change has not happened.

Used only where the kernel reports every change: every directory on the
root's own device, a local file system (no network file system, whose other
clients change it unseen; no overlay, whose layers change unseen). Anything
the watch cannot vouch for (a watch that could not be added, the event queue
overflowing, a watched directory removed or moved, an entry that is or was a
directory or a link, a ``.git`` or a ``HEAD``) makes the next walk list again.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import stat
import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Container, Mapping

    # a walk's listing of a directory: identity, subdirectories, `.git` kind, links kept,
    # whether it holds a HEAD, a pyvenv.cfg, an .envrc, how many entries it holds
    Listing = tuple[object, Container[str], str, Container[str], bool, bool, bool, int]

__all__ = ["DirectoryWatch", "local_device"]

_IN_ATTRIB = 0x4
_IN_MOVED_FROM = 0x40
_IN_MOVED_TO = 0x80
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_IN_DELETE_SELF = 0x400
_IN_MOVE_SELF = 0x800
_IN_UNMOUNT = 0x2000
_IN_Q_OVERFLOW = 0x4000
_IN_IGNORED = 0x8000
_IN_ONLYDIR = 0x0100_0000
_IN_DONT_FOLLOW = 0x0200_0000
_MASK = (
    _IN_ATTRIB | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE
    | _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_ONLYDIR | _IN_DONT_FOLLOW
)  # fmt: skip
# the directory itself went, or the kernel dropped events: nothing it said can be trusted
_GONE = _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_UNMOUNT
_EVENT = struct.Struct("iIII")
# the names whose coming or going changes the walk's answer, in any directory
_NAMED = frozenset({".git", "HEAD", "pyvenv.cfg", ".envrc"})
# file systems whose every change on this machine goes through its kernel (and so is told)
_LOCAL = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "f2fs"})
_MOUNTINFO = "/proc/self/mountinfo"


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    except (OSError, AttributeError):  # pragma: no cover - a C library without inotify
        return None
    return libc


_LIBC = _libc()


def local_device(device: int) -> bool:
    """Whether the file system of ``device`` (``st_dev``) is one whose changes are all told."""
    wanted = f"{os.major(device)}:{os.minor(device)}"
    try:
        with open(_MOUNTINFO, encoding="utf-8", errors="surrogateescape") as handle:
            lines = handle.read().splitlines()
    except OSError:  # pragma: no cover - no /proc
        return False
    types = set()
    for line in lines:
        fields = line.split(" ")
        if len(fields) > 2 and fields[2] == wanted and " - " in line:
            types.add(line.split(" - ", 1)[1].split(" ", 1)[0])
    return bool(types) and types <= _LOCAL


class DirectoryWatch:
    """Events of the directories of one walk, and of the mount table (see the module)."""

    def __init__(self, device: int) -> None:
        """Open the notification queue and the mount table; watch only on ``device``.

        Raises:
            OSError: no inotify here, or the user's queues are all taken.
        """
        if _LIBC is None:  # pragma: no cover - a C library without inotify
            raise OSError("no inotify")
        fd = _LIBC.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:  # pragma: no cover - the user's queues are all taken
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self._fd = fd
        self.device = device
        try:
            self._mounts = os.open(_MOUNTINFO, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:  # pragma: no cover - no /proc
            os.close(fd)
            raise
        self._poll = select.poll()
        self._poll.register(self._mounts, select.POLLPRI)
        # each watched directory: its watch, relative name and inode
        self._names: dict[int, str] = {}
        self._watched: dict[str, tuple[int, tuple[int, int]]] = {}
        self._seen: set[int] = set()
        self.complete = True
        self.broken = False
        # the entries the last walk counted, and those made since
        self.walked = 0

    def close(self) -> None:
        """Release the queue and the mount table (idempotent)."""
        for fd in (self._fd, self._mounts):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fd = self._mounts = -1

    def watch(self, path: str, rel: str, info: os.stat_result) -> os.stat_result | None:
        """Watch the directory at ``path`` (``rel`` in the walk), which ``info`` describes.

        Returns what to look at it by: ``info`` when the same directory is watched
        already, else its ``lstat`` after the watch was added (a change after that
        is told); None when it cannot be watched or is gone (the walk's answer is
        then not kept).
        """
        kept = self._watched.get(rel)
        if (
            kept is not None
            and kept[1] == (info.st_dev, info.st_ino)
            and self._names.get(kept[0]) == rel
        ):
            self._seen.add(kept[0])
            return info
        assert _LIBC is not None
        wd = _LIBC.inotify_add_watch(self._fd, os.fsencode(path), _MASK)
        if wd < 0:
            self.complete = False
            return None
        try:
            now = os.lstat(path)
        except OSError:  # pragma: no cover - removed between the watch and the look
            self.complete = False
            return None
        self._names[wd] = rel
        self._watched[rel] = (wd, (now.st_dev, now.st_ino))
        self._seen.add(wd)
        return now

    def _forget(self, wd: int, *, remove: bool) -> bool:
        """Stop knowing the watch ``wd`` (removing it when the kernel keeps it); was it known?"""
        rel = self._names.pop(wd, None)
        if rel is None:
            return False
        if self._watched.get(rel, (None,))[0] == wd:
            del self._watched[rel]
        if remove:
            assert _LIBC is not None
            _LIBC.inotify_rm_watch(self._fd, wd)
        return True

    def begin(self) -> None:
        """A walk starts: the watches it adds (or finds) are what stays watched."""
        self._seen = set()
        self.complete = True

    def end(self) -> None:
        """The walk ended: stop watching the directories it did not meet."""
        for wd in [wd for wd in self._names if wd not in self._seen]:
            self._forget(wd, remove=True)

    def changed(self, root: str, listings: Mapping[str, Listing], limit: int) -> bool:
        """Whether anything the walk found in ``listings`` may have changed; reads every event.

        ``listings``: each directory's (identity, subdirectories, ``.git`` kind,
        links kept, HEAD), by its name relative to ``root``. ``limit``: the
        entries a walk may count; the entries made since the last walk count on
        top of :attr:`walked` (past the limit: walked again, and refused there).
        """
        answer = False
        if self._poll.poll(0):
            answer = True  # something was mounted or unmounted (the signal is now reset)
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                break
            at = 0
            while at + _EVENT.size <= len(data):
                wd, mask, _cookie, size = _EVENT.unpack_from(data, at)
                name = data[at + _EVENT.size : at + _EVENT.size + size].rstrip(b"\0")
                at += _EVENT.size + size
                # (every event is read, each watch's bookkeeping kept)
                changes = self._event_changes(root, listings, wd, mask, os.fsdecode(name))
                answer = answer or changes
        return answer or self.broken or self.walked > limit

    def _event_changes(
        self,
        root: str,
        listings: Mapping[str, Listing],
        wd: int,
        mask: int,
        name: str,
    ) -> bool:
        if mask & _IN_Q_OVERFLOW:
            self.broken = True  # events were lost: even which watches still hold
            return True
        if mask & (_IN_IGNORED | _GONE):
            # the directory went or moved (a watch end() removed is no longer known)
            return self._forget(wd, remove=not mask & _IN_IGNORED)
        if mask & (_IN_CREATE | _IN_MOVED_TO):
            self.walked += 1  # (an entry made: the walk would count it)
        rel = self._names.get(wd)
        if rel is None or not name:
            return True  # a watch no longer known, or the directory's own attributes

        listing = listings.get(rel)
        if listing is None:
            return True
        if name in _NAMED or name in listing[1] or name in listing[3]:
            # (a HEAD outside a .git makes a directory a repository, a pyvenv.cfg a
            # virtual environment; an .envrc is read)
            return True
        path = f"{root}/{rel}/{name}" if rel else f"{root}/{name}"
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return False  # gone, and it was no directory or link the walk kept
        except OSError:  # pragma: no cover - a name too long, a directory made unsearchable
            return True
        return stat.S_ISDIR(mode) or stat.S_ISLNK(mode)
