"""The JSONL ledger sink, written as a run goes, and the JSONL reader.

:class:`JsonlLedgerSink` appends each entry as one line, with one ``write(2)``
on a file opened ``O_APPEND`` and no user-space buffer, so a record is on disk
(in the page cache) when its call ends; a SIGKILL loses only calls still in
flight. Several processes appending to one file interleave whole lines.
:func:`read_ledger_text` reports a torn last line instead of failing, and
tells finished runs from interrupted ones.
"""

from __future__ import annotations

import os

import attrs

from ._ledger_codec import decode_entry, encode_entry
from ._ledger_files import FSYNC, FsyncPolicy, LedgerContents, contents_from, fspath
from ._ledger_records import LedgerEntry, LedgerFormatError, RunStartRecord, ToolCallRecord
from ._options import integer, optional

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
    marker again, so each file says which run its records belong to.

    Args:
        path: the JSONL file.
        fsync: see :data:`FsyncPolicy`.
        max_bytes: rotate before the file would grow past this; ``None`` never rotates.
        backups: how many rotated files to keep.

    Raises:
        OSError: the file cannot be opened.
        ValueError: ``max_bytes`` or ``backups`` is out of range, or ``fsync`` unknown.
    """

    path: str = attrs.field(converter=fspath)
    fsync: FsyncPolicy = attrs.field(default="never", validator=FSYNC)
    max_bytes: int | None = attrs.field(default=None, validator=optional(integer(minimum=1)))
    backups: int = attrs.field(default=3, validator=integer(minimum=0))
    _fd: int = attrs.field(default=-1, init=False)
    _inode: int = attrs.field(default=0, init=False)
    _torn: bool = attrs.field(default=False, init=False)
    _start: RunStartRecord | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        self._open()

    def __repr__(self) -> str:
        return f"JsonlLedgerSink({self.path!r})"

    def _open(self) -> None:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
        self._fd = os.open(self.path, flags, 0o600)
        self._inode = os.fstat(self._fd).st_ino

    def write(self, entry: LedgerEntry) -> None:
        """Append ``entry`` as one line.

        Raises:
            OSError: the write failed (full disk, file size limit, closed sink).
            LedgerFormatError: the entry holds a value JSON cannot carry.
        """
        if self._fd < 0:
            raise OSError(f"the ledger sink for {self.path} is closed")
        data = encode_entry(entry).encode("ascii")
        if type(entry) is RunStartRecord:
            self._start = entry
        if self.max_bytes is not None:
            self._maybe_rotate(len(data))
        self._write(data)
        if self.fsync == "always" or (self.fsync == "run" and type(entry) is not ToolCallRecord):
            os.fsync(self._fd)

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

    def _maybe_rotate(self, size: int) -> None:
        assert self.max_bytes is not None
        try:
            current = os.stat(self.path)
        except FileNotFoundError:
            current = None
        if (
            current is not None
            and current.st_ino == self._inode
            and current.st_size + size <= self.max_bytes
        ):
            return
        import fcntl  # only rotation needs it (POSIX)

        lock = os.open(self.path + ".lock", os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                current = os.stat(self.path)
            except FileNotFoundError:
                current = None
            if (
                current is not None
                and current.st_ino == self._inode
                and current.st_size > 0
                and current.st_size + size > self.max_bytes
            ):
                self._shift()
            # Someone else rotated (or we just did): follow the name.
            if current is None or current.st_ino != self._inode or not os.path.exists(self.path):
                os.close(self._fd)
                self._fd = -1
                self._open()
                self._torn = False
                if self._start is not None:
                    self._write(encode_entry(self._start).encode("ascii"))
        finally:
            os.close(lock)

    def _shift(self) -> None:
        if self.backups == 0:
            os.unlink(self.path)
            return
        for index in range(self.backups - 1, 0, -1):
            older = f"{self.path}.{index}"
            if os.path.exists(older):
                os.replace(older, f"{self.path}.{index + 1}")
        os.replace(self.path, f"{self.path}.1")

    def close(self) -> None:
        """Flush (``fsync`` unless the policy is ``never``) and close the file; idempotent."""
        if self._fd < 0:
            return
        fd, self._fd = self._fd, -1
        try:
            if self.fsync != "never":
                os.fsync(fd)
        finally:
            os.close(fd)


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
