"""Bounded output: keep the tail of a stream, clip long lines, spill the whole to a file.

Memory stays at about ``2 * max_bytes`` plus one chunk whatever the stream's
size: until the first cut everything is kept (it is at most ``max_bytes``),
after it only a clipped tail is kept and the raw stream goes to the spill
file, written in batches from a worker thread.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import secrets
import tempfile
import threading

import attrs
import trio

__all__ = [
    "CLIP_MARKER",
    "CollectedOutput",
    "OutputCollector",
    "SpillBook",
    "clip_lines",
    "has_long_line",
    "tail_window",
]

CLIP_MARKER = b" [... line clipped]"
_SPILL_BATCH = 1 << 20


@attrs.frozen(kw_only=True)
class CollectedOutput:
    """The bounded view of a stream, and where the whole of it went."""

    text: str
    truncated: bool  # lines (or the start of the only line) were dropped from the front
    clipped: bool  # at least one long line was clipped
    total_bytes: int
    total_lines: int
    shown_lines: int
    spill_path: str | None
    spill_error: str | None
    spill_truncated: bool


def has_long_line(data: bytes, limit: int) -> bool:
    """Whether a line of ``data`` (which starts at a line start) is longer than ``limit``.

    Jumps from line start to the last newline within ``limit`` bytes, so dense
    short lines cost one ``rfind`` per ``limit`` bytes, not one step per line.
    """
    size = len(data)
    start = 0
    while size - start > limit:
        newline = data.rfind(b"\n", start, start + limit + 1)
        if newline < 0:
            return True
        start = newline + 1
    return False


def clip_lines(data: bytes, max_line_bytes: int) -> tuple[bytes, bool]:
    """``data`` with every line longer than ``max_line_bytes`` clipped and marked."""
    if not has_long_line(data, max_line_bytes):
        return data, False
    pattern = _long_line(max_line_bytes)
    clipped, count = pattern.subn(lambda m: m.group(1) + CLIP_MARKER, data)
    return clipped, count > 0


_PATTERNS: dict[int, re.Pattern[bytes]] = {}


def _long_line(limit: int) -> re.Pattern[bytes]:
    pattern = _PATTERNS.get(limit)
    if pattern is None:
        pattern = re.compile(rb"([^\n]{%d})[^\n]+" % limit)
        _PATTERNS[limit] = pattern
    return pattern


def tail_window(data: bytes | bytearray, *, max_bytes: int, max_lines: int) -> bytes:
    """The last whole lines of ``data`` that fit ``max_bytes`` and ``max_lines``.

    A final line longer than ``max_bytes`` on its own is kept as its last
    ``max_bytes`` bytes, so the window is never empty when ``data`` is not.
    """
    window = bytes(data[-max_bytes:]) if len(data) > max_bytes else bytes(data)
    if len(data) > max_bytes and data[len(data) - max_bytes - 1] != 0x0A:
        newline = window.find(b"\n")
        if 0 <= newline < len(window) - 1:
            window = window[newline + 1 :]
    body = window[:-1] if window.endswith(b"\n") else window
    count = body.count(b"\n") + 1
    if count > max_lines:
        cut = -1
        for _ in range(max_lines):
            cut = body.rfind(b"\n", 0, cut if cut >= 0 else len(body))
        window = window[cut + 1 :]
    return window


def _decode(data: bytes, *, mid_line: bool = False) -> str:
    # A window that starts inside a line may start inside a character: drop its tail bytes.
    start = 0
    while mid_line and start < min(3, len(data)) and 0x80 <= data[start] < 0xC0:
        start += 1
    return data[start:].decode("utf-8", errors="replace")


@attrs.define(eq=False)
class _Spill:
    path: str
    fd: int
    limit: int
    written: int = 0
    pending: bytearray = attrs.field(factory=bytearray)
    truncated: bool = False

    def add(self, data: bytes) -> None:
        room = self.limit - self.written - len(self.pending)
        if room <= 0:
            self.truncated = self.truncated or bool(data)
            return
        if len(data) > room:
            self.truncated = True
            data = data[:room]
        self.pending += data

    async def flush(self) -> None:
        if not self.pending:
            return
        data = bytes(self.pending)
        self.pending.clear()
        await trio.to_thread.run_sync(_write_all, self.fd, data)
        self.written += len(data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _open_spill(directory: str | None, prefix: str) -> tuple[int, str]:
    # A fresh random name, created 0600 (readable by this user only) with
    # O_EXCL and without following a link, as every file Prism writes.
    from prism.core.files import open_private_file

    path = os.path.join(directory or tempfile.gettempdir(), f"{prefix}{secrets.token_hex(8)}.log")
    opened = open_private_file(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    os.close(opened.directory_fd)
    return opened.fd, path


@attrs.define(eq=False)
class SpillBook:
    """The spill files one tool handed out, bounded together.

    Past ``max_total_bytes`` the oldest are removed (never the newest). Each is
    known by its device and inode, so a file put at a spill's path by anyone
    else is never removed.
    """

    max_total_bytes: int
    _kept: collections.deque[tuple[str, int, int, int]] = attrs.field(
        factory=collections.deque, init=False
    )
    _total: int = attrs.field(default=0, init=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)

    def keep(self, path: str) -> None:
        """Count the finished spill file at ``path``; remove the oldest past the bound."""
        try:
            st = os.lstat(path)
        except OSError:
            return
        with self._lock:
            self._kept.append((path, st.st_dev, st.st_ino, st.st_size))
            self._total += st.st_size
            while self._total > self.max_total_bytes and len(self._kept) > 1:
                self._remove(*self._kept.popleft())

    def clear(self) -> None:
        """Remove every spill file still counted."""
        with self._lock:
            while self._kept:
                self._remove(*self._kept.popleft())

    def _remove(self, path: str, dev: int, ino: int, size: int) -> None:
        self._total -= size
        with contextlib.suppress(OSError):
            st = os.lstat(path)
            if (st.st_dev, st.st_ino) == (dev, ino):
                os.unlink(path)


@attrs.define(eq=False)
class OutputCollector:
    """Accumulates a byte stream within bounds; see the module docstring.

    Call :meth:`feed` per chunk, then :meth:`finish` once; call
    :meth:`aclose` in a ``finally`` so an abandoned spill file is removed.
    """

    max_lines: int
    max_bytes: int
    max_line_bytes: int
    max_spill_bytes: int
    spill_dir: str | None = None
    spill_prefix: str = "prism-output-"
    _buffer: bytearray = attrs.field(factory=bytearray, init=False)
    _cut: bool = attrs.field(default=False, init=False)
    _clipped: bool = attrs.field(default=False, init=False)
    _line_len: int = attrs.field(default=0, init=False)
    _total: int = attrs.field(default=0, init=False)
    _newlines: int = attrs.field(default=0, init=False)
    _last: int = attrs.field(default=0x0A, init=False)
    _spill: _Spill | None = attrs.field(default=None, init=False)
    _spill_error: str | None = attrs.field(default=None, init=False)
    _finished: bool = attrs.field(default=False, init=False)

    async def feed(self, chunk: bytes) -> None:
        """Take one chunk. Checkpoints only when it writes to the spill file."""
        if not chunk:
            return
        self._total += len(chunk)
        self._newlines += chunk.count(b"\n")
        self._last = chunk[-1]
        if not self._cut:
            if not self._needs_cut(chunk):
                self._buffer += chunk
                self._track_line(chunk)
                return
            self._cut = True
            raw = bytes(self._buffer) + chunk
            await self._start_spill(raw)
            self._buffer = bytearray()
            self._line_len = 0
            self._append_display(raw)
        else:
            await self._spill_add(chunk)
            self._append_display(chunk)
        if len(self._buffer) > 2 * self.max_bytes + self.max_line_bytes:
            # One byte more than the window, so finish() can tell whether it starts a line.
            del self._buffer[: len(self._buffer) - self.max_bytes - 1]

    def _lines(self) -> int:
        return self._newlines + (0 if self._last == 0x0A else 1)

    def _needs_cut(self, chunk: bytes) -> bool:
        if self._total > self.max_bytes or self._lines() > self.max_lines:
            return True
        first = chunk.find(b"\n")
        head = len(chunk) if first < 0 else first
        if self._line_len + head > self.max_line_bytes:
            return True
        return first >= 0 and has_long_line(chunk[first + 1 :], self.max_line_bytes)

    def _track_line(self, chunk: bytes) -> None:
        last = chunk.rfind(b"\n")
        self._line_len = self._line_len + len(chunk) if last < 0 else len(chunk) - last - 1

    def _append_display(self, chunk: bytes) -> None:
        limit = self.max_line_bytes
        first = chunk.find(b"\n")
        head = chunk if first < 0 else chunk[:first]
        if self._line_len <= limit:
            room = limit - self._line_len
            if len(head) <= room:
                self._buffer += head
            else:
                self._buffer += head[:room]
                self._buffer += CLIP_MARKER
                self._clipped = True
        self._line_len += len(head)
        if first < 0:
            return
        self._buffer += b"\n"
        rest = chunk[first + 1 :]
        clipped, any_clipped = clip_lines(rest, limit)
        self._clipped = self._clipped or any_clipped
        self._buffer += clipped
        last = rest.rfind(b"\n")
        self._line_len = len(rest) - last - 1

    async def _start_spill(self, raw: bytes) -> None:
        try:
            fd, path = await trio.to_thread.run_sync(_open_spill, self.spill_dir, self.spill_prefix)
        except OSError as exc:
            self._spill_error = f"could not create the spill file: {exc}"
            return
        self._spill = _Spill(path=path, fd=fd, limit=self.max_spill_bytes)
        await self._spill_add(raw)

    async def _spill_add(self, data: bytes) -> None:
        spill = self._spill
        if spill is None:
            return
        spill.add(data)
        if len(spill.pending) >= _SPILL_BATCH:
            await self._spill_flush()

    async def _spill_flush(self) -> None:
        spill = self._spill
        if spill is None:
            return
        try:
            await spill.flush()
        except OSError as exc:
            self._spill_error = f"could not write the spill file: {exc}"
            self._spill = None
            await trio.to_thread.run_sync(_discard, spill.fd, spill.path)

    async def finish(self) -> CollectedOutput:
        """The bounded result; flushes and closes the spill file. Checkpoints."""
        await self._spill_flush()
        spill = self._spill
        if spill is not None and spill.fd >= 0:
            fd, spill.fd = spill.fd, -1  # never closed twice: the number may be reused
            await trio.to_thread.run_sync(_close, fd)
        if not self._cut:
            text = _decode(bytes(self._buffer))
            shown = self._lines()
            truncated = False
        else:
            window = tail_window(self._buffer, max_bytes=self.max_bytes, max_lines=self.max_lines)
            start = len(self._buffer) - len(window)
            mid_line = start > 0 and self._buffer[start - 1] != 0x0A
            text = _decode(window, mid_line=mid_line)
            shown = window.count(b"\n") + (0 if window.endswith(b"\n") or not window else 1)
            truncated = shown < self._lines()
        result = CollectedOutput(
            text=text,
            truncated=truncated,
            clipped=self._clipped,
            total_bytes=self._total,
            total_lines=self._lines(),
            shown_lines=shown,
            spill_path=spill.path if spill is not None else None,
            spill_error=self._spill_error,
            spill_truncated=spill.truncated if spill is not None else False,
        )
        self._finished = True
        return result

    async def aclose(self) -> None:
        """Remove the spill file unless :meth:`finish` handed it out. Shielded, checkpoints."""
        spill = self._spill
        if spill is None or self._finished:
            return
        self._spill = None
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(_discard, spill.fd, spill.path)


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def _discard(fd: int, path: str) -> None:
    if fd >= 0:
        with contextlib.suppress(OSError):
            os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(path)
