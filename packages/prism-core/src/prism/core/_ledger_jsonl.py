"""The JSONL ledger sink, written as a run goes, and the JSONL reader.

:class:`JsonlLedgerSink` appends each entry as one line, with one ``write(2)``
on a file opened ``O_APPEND`` and no user-space buffer, so a record is on disk
(in the page cache) when its call ends; a SIGKILL loses only calls still in
flight. Several processes appending to one file interleave whole lines.
:func:`read_ledger_text` reports a torn last line instead of failing, and
tells finished runs from interrupted ones.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from typing import TYPE_CHECKING

import attrs

from ._files import FileIdentity, UnsafeFileError, open_private_file
from ._ledger_codec import decode_entry, encode_entry
from ._ledger_files import FSYNC, FsyncPolicy, LedgerContents, contents_from, fspath, path_tuple
from ._ledger_records import LedgerEntry, LedgerFormatError, RunStartRecord, ToolCallRecord
from ._options import integer, optional

_log = logging.getLogger("prism.core")

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["JsonlLedgerSink", "read_ledger_text"]


@attrs.define(eq=False)
class JsonlLedgerSink:
    """Appends every ledger entry to a JSONL file as one whole line.

    The file is opened (created ``0o600`` if missing) when the sink is made.
    Each entry is a single ``os.write`` of one line on an ``O_APPEND``
    descriptor: nothing is buffered in the process, and concurrent writers
    (other runs, other processes) interleave whole lines. If a write fails
    part-way (a full disk), the sink starts its next line on a fresh line so
    only that record is lost; the error propagates to :class:`RunLedger`,
    which reports it and carries on.

    With ``max_bytes``, a write that would grow the file past it first rotates
    it: ``ledger.jsonl`` becomes ``ledger.jsonl.1`` (older ones shift up to
    ``backups``), under an ``flock`` on ``ledger.jsonl.lock`` so concurrent
    writers rotate once. The new file starts with the run's ``run_start``
    marker again, so each file says which run its records belong to. If a
    rotation cannot happen (something planted at a rotated name), no record is
    lost: it is written to the file the sink holds (while that file still has a
    name), past ``max_bytes``, with one warning on the ``prism.core`` logger, and
    the next write tries again.

    No link redirects it (see ``prism.core.files``): the file, its lock and
    the rotated names are opened with ``O_NOFOLLOW`` inside the directory
    opened when the sink was made, and must be regular files with one link.
    The sink writes to its own descriptor for as long as it lives; a file put
    at its name by anyone else (a symlink, a hard link, a new file) is never
    written to. After a rotation, a writer moves to the new file only if its
    device and inode are those the rotating writer recorded in the lock file.

    Args:
        path: the JSONL file.
        fsync: see :data:`FsyncPolicy`.
        max_bytes: rotate before the file would grow past this; ``None`` never rotates.
        backups: how many rotated files to keep.
        roots: folders others (an agent) may write in: below them, no directory
            on the path may be a link.

    Raises:
        UnsafeFileError: the path is a link or not a regular file, or goes
            through a link below one of ``roots`` (an ``OSError``).
        OSError: the file cannot be opened.
        ValueError: ``max_bytes`` or ``backups`` is out of range, or ``fsync`` unknown.
    """

    path: str = attrs.field(converter=fspath)
    fsync: FsyncPolicy = attrs.field(default="never", validator=FSYNC)
    max_bytes: int | None = attrs.field(default=None, validator=optional(integer(minimum=1)))
    backups: int = attrs.field(default=3, validator=integer(minimum=0))
    roots: tuple[str, ...] = attrs.field(default=(), converter=path_tuple, kw_only=True)
    _fd: int = attrs.field(default=-1, init=False)
    _dir: int = attrs.field(default=-1, init=False)
    _name: str = attrs.field(default="", init=False)
    _identity: FileIdentity | None = attrs.field(default=None, init=False)
    _torn: bool = attrs.field(default=False, init=False)
    _start: RunStartRecord | None = attrs.field(default=None, init=False)
    _rotation_failed: bool = attrs.field(default=False, init=False)

    def __attrs_post_init__(self) -> None:
        opened = open_private_file(self.path, roots=self.roots)
        self._fd, self._dir, self._name = opened.fd, opened.directory_fd, opened.name
        self._identity = opened.identity
        if opened.created and self.max_bytes is not None:
            try:
                self._with_lock(lambda lock: _note_created(lock, opened.identity))
            except BaseException:
                self.close()
                raise

    def __repr__(self) -> str:
        return f"JsonlLedgerSink({self.path!r})"

    def write(self, entry: LedgerEntry) -> None:
        """Append ``entry`` as one line.

        Raises:
            OSError: the write failed (full disk, file size limit, closed sink,
                a file at the name that this sink's writers did not create).
            LedgerFormatError: the entry holds a value JSON cannot carry.
        """
        if self._fd < 0:
            raise OSError(f"the ledger sink for {self.path} is closed")
        data = encode_entry(entry).encode("ascii")
        if type(entry) is RunStartRecord:
            self._start = entry
        if self.max_bytes is not None:
            try:
                self._maybe_rotate(len(data))
            except OSError as exc:
                # A rotation that cannot happen (a folder or a file no writer made at
                # a rotated name, a planted lock) loses no record: the line goes on in
                # the file this sink holds, past max_bytes, while that file still has
                # a name; the next write tries again. A file no longer linked anywhere
                # would swallow it unseen, so then the failure is reported.
                if os.fstat(self._fd).st_nlink == 0:
                    raise
                self._note_rotation_failed(exc)
        self._write(data)
        if self.fsync == "always" or (self.fsync == "run" and type(entry) is not ToolCallRecord):
            os.fsync(self._fd)

    def _note_rotation_failed(self, exc: OSError) -> None:
        if not self._rotation_failed:
            self._rotation_failed = True
            _log.warning(
                "the ledger %s could not rotate (%s); records go on in the current file",
                self.path,
                exc,
            )

    def _write(self, data: bytes) -> None:
        if self._torn:
            # A failed write left half a line: end it, so this record parses.
            data = b"\n" + data
        view = memoryview(data)
        written = 0
        try:
            while written < len(data):
                written += os.write(self._fd, view[written:])
        except OSError:
            self._torn = self._torn or written > 0
            raise
        self._torn = False

    def _at_name(self) -> os.stat_result | None:
        """What is at the file's name now (not following a link), if anything."""
        try:
            return os.stat(self._name, dir_fd=self._dir, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def _maybe_rotate(self, size: int) -> None:
        assert self.max_bytes is not None
        current = self._at_name()
        if (
            current is not None
            and FileIdentity.of(current) == self._identity
            and current.st_size + size <= self.max_bytes
        ):
            return
        self._with_lock(lambda lock: self._rotate_locked(lock, size))

    def _with_lock(self, action: Callable[[int], None]) -> None:
        import fcntl  # only rotation needs it (POSIX)

        lock = open_private_file(
            self._name + ".lock", os.O_RDWR | os.O_CREAT, directory_fd=self._dir
        ).fd
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            action(lock)
        finally:
            os.close(lock)

    def _rotate_locked(self, lock: int, size: int) -> None:
        assert self.max_bytes is not None
        current = self._at_name()
        ours = current is not None and FileIdentity.of(current) == self._identity
        if ours and current is not None:
            if current.st_size == 0 or current.st_size + size <= self.max_bytes:
                return
            self._shift()
            current = None
        if current is None:
            # Nothing at the name (we just rotated, or a file was removed): make it.
            opened = open_private_file(
                self._name,
                os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL,
                directory_fd=self._dir,
            )
            _note_created(lock, opened.identity)
        else:
            # Someone rotated: follow only to the file the rotating writer created.
            recorded = _created(lock)
            if recorded is None or FileIdentity.of(current) != recorded:
                raise UnsafeFileError(
                    errno.EPERM,
                    f"{self.path} was replaced by a file no ledger writer created; "
                    "the sink does not write to it",
                )
            opened = open_private_file(
                self._name, os.O_WRONLY | os.O_APPEND, directory_fd=self._dir
            )
            if opened.identity != recorded:
                os.close(opened.fd)
                raise UnsafeFileError(
                    errno.EPERM, f"{self.path} changed while the sink reopened it"
                )
        os.close(self._fd)
        self._fd, self._identity = opened.fd, opened.identity
        self._torn = False
        if self._start is not None:
            self._write(encode_entry(self._start).encode("ascii"))

    def _shift(self) -> None:
        name, directory = self._name, self._dir
        if self.backups == 0:
            os.unlink(name, dir_fd=directory)
            return
        for index in range(self.backups - 1, 0, -1):
            older = f"{name}.{index}"
            # Renaming moves a name (a planted link is moved, never followed).
            with contextlib.suppress(FileNotFoundError):
                os.replace(older, f"{name}.{index + 1}", src_dir_fd=directory, dst_dir_fd=directory)
        os.replace(name, f"{name}.1", src_dir_fd=directory, dst_dir_fd=directory)

    def close(self) -> None:
        """Flush (``fsync`` unless the policy is ``never``) and close the file; idempotent."""
        directory, self._dir = self._dir, -1
        if directory >= 0:
            os.close(directory)
        if self._fd < 0:
            return
        fd, self._fd = self._fd, -1
        try:
            if self.fsync != "never":
                os.fsync(fd)
        finally:
            os.close(fd)


def _note_created(lock: int, identity: FileIdentity) -> None:
    """Record in the lock file which file a writer created at the ledger's name."""
    data = f"{identity.device} {identity.inode}\n".encode("ascii")
    os.ftruncate(lock, 0)
    os.pwrite(lock, data, 0)


def _created(lock: int) -> FileIdentity | None:
    """The file a writer last recorded creating, if the lock file says."""
    text = os.pread(lock, 64, 0).decode("ascii", "replace").split()
    if len(text) != 2 or not all(part.isdigit() for part in text):
        return None
    return FileIdentity(int(text[0]), int(text[1]))


def read_ledger_text(text: str, *, strict: bool = True) -> LedgerContents:
    """Read a JSONL ledger of any readable schema version.

    A last line without its newline that does not parse was torn by a killed
    writer: it is reported as :attr:`LedgerContents.torn_line`, not raised.

    Args:
        text: the file's text.
        strict: raise on any other bad line; ``False`` lists them in
            :attr:`LedgerContents.problems` and reads the rest.

    Raises:
        LedgerFormatError: a line (other than a torn last line) cannot be read,
            with ``strict``.
    """
    lines = text.split("\n")
    last = len(lines)  # the line after the final "\n" ("" when the file ends whole)
    entries: list[LedgerEntry] = []
    problems: list[str] = []
    torn: int | None = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entries.append(decode_entry(line, number))
        except LedgerFormatError as exc:
            if number == last:
                torn = number
            elif strict:
                raise
            else:
                problems.append(str(exc))
    return contents_from(entries, torn, tuple(problems))
