"""The ledger the commands write as they run: a JSONL (or SQLite) sink, run markers."""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING

import attrs

from ._errors import CliError

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from prism.core.ledger import FsyncPolicy, LedgerSink, LedgerWriteFailed, RunLedger

__all__ = ["LedgerFailures", "is_sqlite_path", "parse_since", "recording_ledger"]

_SQLITE_SUFFIXES = frozenset({".db", ".sqlite", ".sqlite3"})


def is_sqlite_path(path: Path) -> bool:
    """Whether ``path`` names an SQLite ledger (by its suffix) rather than JSONL."""
    return path.suffix.lower() in _SQLITE_SUFFIXES


@attrs.define(eq=False)
class LedgerFailures:
    """Counts failed ledger writes; warns on stderr at the first one (the run goes on)."""

    count: int = 0
    first: str | None = None

    def __call__(self, failure: LedgerWriteFailed) -> None:
        """Note ``failure``."""
        self.count += 1
        if self.first is None:
            self.first = failure.error
            sys.stderr.write(f"prism: warning: the ledger could not be written: {failure.error}\n")

    def report(self) -> None:
        """Say on stderr how many writes failed in all, if any did."""
        if self.count:
            sys.stderr.write(
                f"prism: warning: {self.count} ledger write(s) failed; the ledger is incomplete\n"
            )


def _open_sink(path: Path, fsync: FsyncPolicy, max_bytes: int | None) -> LedgerSink:
    from prism.core.ledger import JsonlLedgerSink, SqliteLedgerSink

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if is_sqlite_path(path):
            return SqliteLedgerSink(path, fsync=fsync)
        return JsonlLedgerSink(path, fsync=fsync, max_bytes=max_bytes)
    except Exception as exc:  # OSError, sqlite3.Error
        raise CliError(f"cannot write the ledger to {path}: {exc}") from exc


@contextlib.contextmanager
def recording_ledger(
    path: Path,
    *,
    label: str,
    failures: LedgerFailures,
    fsync: FsyncPolicy = "never",
    max_bytes: int | None = None,
) -> Iterator[RunLedger]:
    """A ledger that appends each record to ``path`` as its call ends.

    The run's start marker is written on entry; its end marker (``finished``,
    ``aborted`` on Ctrl-C or cancellation, ``failed`` on an error) on exit,
    then the file is closed. A ``.db``/``.sqlite``/``.sqlite3`` path gets an
    SQLite ledger, anything else JSONL (rotated past ``max_bytes``).

    Raises:
        CliError: the ledger file cannot be opened.
    """
    from prism.core.ledger import RunLedger

    ledger = RunLedger(sinks=[_open_sink(path, fsync, max_bytes)], on_error=failures)
    with ledger.run(label=label):
        yield ledger


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_since(text: str, now: float | None = None) -> float:
    """Epoch seconds from ``--since``: an age (``30m``, ``2h``, ``1d``), epoch seconds or ISO.

    An ISO time without a zone is local time.

    Raises:
        ValueError: ``text`` is none of those.
    """
    import datetime
    import time

    value = text.strip()
    if value[-1:] in _UNITS:
        try:
            amount = float(value[:-1])
        except ValueError:
            amount = -1.0
        if amount >= 0:
            return (time.time() if now is None else now) - amount * _UNITS[value[-1]]
    try:
        return float(value)
    except ValueError:
        pass
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"{text!r} is not an age (30m, 2h, 1d), epoch seconds or an ISO time"
        ) from None
    return moment.timestamp()
