"""What the ledger's file sinks share: path checks, the fsync policy, and what a reader returns.

Both file formats (:mod:`._ledger_jsonl`, :mod:`._ledger_sqlite`) import
from here, and :mod:`._ledger_read` imports both; neither imports the other.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Literal, TypeAlias

import attrs

from ._ledger_records import LedgerEntry, RunEndRecord, RunOutcome, RunStartRecord, ToolCallRecord
from ._options import one_of, sequence_of, string

__all__ = [
    "FSYNC",
    "SQLITE_MAGIC",
    "FsyncPolicy",
    "LedgerContents",
    "LedgerRun",
    "contents_from",
    "fspath",
    "path_tuple",
]

FsyncPolicy: TypeAlias = Literal["never", "run", "always"]
"""When a file sink calls ``fsync``: never (the kernel writes the page cache back;
a process crash loses nothing, a power cut may), at run markers and close, or
after every entry (each record survives a power cut; costs a disk flush per call)."""

SQLITE_MAGIC = b"SQLite format 3\x00"


def fspath(value: str | os.PathLike[str]) -> str:
    """``os.fspath`` for ``str`` paths (typed for attrs converters)."""
    path = os.fspath(value) if isinstance(value, os.PathLike) else value
    return PATH_CHECK.check("ledger sink", "path", path)


PATH_CHECK = string()
_ROOTS = sequence_of(string())


def path_tuple(value: Iterable[str | os.PathLike[str]]) -> tuple[str, ...]:
    """A sink's ``roots``: absolute paths."""
    if isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
        value = tuple(os.fspath(item) if isinstance(item, os.PathLike) else item for item in value)
    checked = _ROOTS.check("ledger sink", "roots", value)
    return tuple(os.path.abspath(root) for root in checked)


FSYNC = one_of("never", "run", "always")


@attrs.frozen(kw_only=True)
class LedgerRun:
    """One run as a reader sees it.

    Attributes:
        run_id: the run's id.
        label: what the run was, from its start marker.
        pid: the process that wrote it.
        started_at: from the start marker (``None`` if it is missing, say rotated away).
        finished_at: from the end marker; ``None`` for an interrupted run.
        outcome: from the end marker; ``None`` for an interrupted run.
        calls: the call records of this run found in the ledger.
    """

    run_id: str
    label: str | None = None
    pid: int | None = None
    started_at: float | None = None
    finished_at: float | None = None
    outcome: RunOutcome | None = None
    calls: int = 0

    @property
    def interrupted(self) -> bool:
        """The run has no end marker: it was killed, or is still going."""
        return self.outcome is None


@attrs.frozen(kw_only=True)
class LedgerContents:
    """What :func:`read_ledger` found.

    Attributes:
        records: every call record, in file order.
        runs: the runs the markers and records name, in order of first sight.
        torn_line: the number of a last line that was cut short (a write the
            process did not finish), or ``None``.
        problems: the other lines that could not be read, with their numbers
            (only when reading with ``strict=False``).
    """

    records: tuple[ToolCallRecord, ...]
    runs: tuple[LedgerRun, ...] = ()
    torn_line: int | None = None
    problems: tuple[str, ...] = ()


def contents_from(
    entries: Iterable[LedgerEntry], torn_line: int | None = None, problems: tuple[str, ...] = ()
) -> LedgerContents:
    """Gather decoded entries into records and runs."""
    records: list[ToolCallRecord] = []
    runs: dict[str, LedgerRun] = {}
    for entry in entries:
        if type(entry) is ToolCallRecord:
            records.append(entry)
            if entry.run_id is not None:
                run = runs.get(entry.run_id) or LedgerRun(run_id=entry.run_id)
                runs[entry.run_id] = attrs.evolve(run, calls=run.calls + 1)
        elif type(entry) is RunStartRecord:
            run = runs.get(entry.run_id) or LedgerRun(run_id=entry.run_id)
            if run.started_at is None:  # a rotated file repeats the marker
                run = attrs.evolve(
                    run, label=entry.label, pid=entry.pid, started_at=entry.started_at
                )
            runs[entry.run_id] = run
        elif type(entry) is RunEndRecord:
            run = runs.get(entry.run_id) or LedgerRun(run_id=entry.run_id)
            runs[entry.run_id] = attrs.evolve(
                run, finished_at=entry.finished_at, outcome=entry.outcome
            )
    return LedgerContents(
        records=tuple(records), runs=tuple(runs.values()), torn_line=torn_line, problems=problems
    )
