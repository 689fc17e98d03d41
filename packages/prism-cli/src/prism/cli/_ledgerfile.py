"""The ledger the commands write as they run: a JSONL (or SQLite) sink, run markers."""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING

import attrs

from ._errors import CliError
from ._safe import safe_text

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from pathlib import Path

    from prism.core.ledger import (
        FsyncPolicy,
        LedgerSink,
        LedgerWriteFailed,
        RunLedger,
        RunOutcome,
    )

    from ._config import PrismConfig

__all__ = [
    "LedgerFailures",
    "default_ledger_path",
    "is_sqlite_path",
    "parse_since",
    "recording_ledger",
    "spill_directory",
    "state_directory",
    "writable_roots",
]

_SQLITE_SUFFIXES = frozenset({".db", ".sqlite", ".sqlite3"})
DEFAULT_LEDGER_NAME = "prism-ledger.jsonl"


def state_directory() -> Path:
    """Where Prism keeps what it writes for itself: ``$XDG_STATE_HOME/prism``.

    ``$XDG_STATE_HOME`` defaults to ``~/.local/state`` (a relative value is
    ignored, as the XDG base directory specification says). The folder is
    not made here.
    """
    import os
    from pathlib import Path

    base = os.environ.get("XDG_STATE_HOME", "")
    if not base or not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "prism"


def writable_roots(config: PrismConfig) -> tuple[str, ...]:
    """The roots the agent's tools may write in (none for a read-only workspace)."""
    workspace = config.workspace
    if workspace.read_only or not workspace.coding_tools:
        return ()
    return tuple(workspace.roots)


def spill_directory(roots: Sequence[str] = (), *, allowed: bool = False) -> str:
    """Where the shell tool spills long output: ``<state folder>/spill``, made ``0700``.

    A folder inside one of the agent's writable ``roots`` is refused unless
    ``allowed`` (``[ledger] inside_roots``): there the agent could replace it by
    a link between two spills and have Prism write outside the roots.

    Raises:
        CliError: the folder lies inside a writable root, or cannot be made.
    """
    folder = state_directory() / "spill"
    _check_outside_roots("the spill folder", folder, roots, allowed=allowed)
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"cannot make the spill folder {folder}: {exc}") from exc
    return str(folder)


def default_ledger_path() -> Path:
    """The ledger a command writes when neither ``--ledger`` nor ``[ledger] path`` says."""
    return state_directory() / DEFAULT_LEDGER_NAME


def check_outside_roots(path: Path, roots: Sequence[str], *, allowed: bool) -> None:
    """Refuse a ledger inside a writable root (the agent could plant links there) unless allowed.

    Raises:
        CliError: ``path`` lies inside one of ``roots`` and ``allowed`` is false.
    """
    _check_outside_roots("the ledger", path, roots, allowed=allowed)


def _check_outside_roots(what: str, path: Path, roots: Sequence[str], *, allowed: bool) -> None:
    import os

    from prism.core.files import inside_any

    if allowed:
        return
    where = os.path.abspath(path)
    for candidate in (where, os.path.realpath(where)):
        root = inside_any(candidate, [os.path.realpath(r) for r in roots] + list(roots))
        if root is not None:
            raise CliError(
                f"{what} {path} is inside the agent's writable root {root}, where the "
                "agent could replace it; set XDG_STATE_HOME (or [ledger] path) to a folder "
                f"outside the roots (the default is {state_directory()}), or set "
                "[ledger] inside_roots = true to allow it"
            )


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
            error = safe_text(failure.error)
            sys.stderr.write(f"prism: warning: the ledger could not be written: {error}\n")

    def report(self) -> None:
        """Say on stderr how many writes failed in all, if any did."""
        if self.count:
            sys.stderr.write(
                f"prism: warning: {self.count} ledger write(s) failed; the ledger is incomplete\n"
            )


def _open_sink(
    path: Path, fsync: FsyncPolicy, max_bytes: int | None, roots: Sequence[str]
) -> LedgerSink:
    from prism.core.ledger import JsonlLedgerSink, SqliteLedgerSink

    try:
        if not path.parent.is_dir():
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if is_sqlite_path(path):
            return SqliteLedgerSink(path, fsync=fsync, roots=roots)
        return JsonlLedgerSink(path, fsync=fsync, max_bytes=max_bytes, roots=roots)
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
    roots: Sequence[str] = (),
    inside_roots: bool = False,
    interrupted: Callable[[], bool] | None = None,
) -> Iterator[RunLedger]:
    """A ledger that appends each record to ``path`` as its call ends.

    The run's start marker is written on entry; its end marker (``finished``,
    ``aborted`` on Ctrl-C or cancellation, ``failed`` on an error) on exit,
    then the file is closed. A block that ends normally after
    ``interrupted()`` became true (a run that Ctrl-C or SIGTERM ended early
    but cleanly) is ``aborted`` too. A ``.db``/``.sqlite``/``.sqlite3`` path gets an
    SQLite ledger, anything else JSONL (rotated past ``max_bytes``).

    ``roots`` are the agent's writable roots: a ledger inside one is refused
    unless ``inside_roots``, and no directory link below a root is followed.

    Raises:
        CliError: the ledger file cannot be opened, is a link, or lies inside
            a writable root.
    """
    from prism.core.ledger import RunLedger

    check_outside_roots(path, roots, allowed=inside_roots)
    sink = _open_sink(path, fsync, max_bytes, roots)
    ledger = RunLedger(sinks=[sink], on_error=failures)
    ledger.start_run(label=label)
    outcome: RunOutcome = "aborted"
    try:
        yield ledger
        if interrupted is None or not interrupted():
            outcome = "finished"
    except Exception:
        outcome = "failed"
        raise
    finally:
        try:
            ledger.end_run(outcome)
        finally:
            ledger.close()


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
