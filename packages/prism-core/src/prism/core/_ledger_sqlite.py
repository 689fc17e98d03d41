"""An embedded SQLite ledger: stdlib ``sqlite3``, WAL mode, one table per entry kind.

Tables ``tool_call``, ``run_start`` and ``run_end`` hold one row per entry;
``tool_call`` is indexed on run, tool, status and start time so
:class:`LedgerQuery` filters run in SQL. JSON values (arguments, the
decision) are stored as JSON text beside the columns a query filters on.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import stat
import urllib.parse
from typing import TYPE_CHECKING

import attrs

from ._files import FileIdentity, OpenedFile, UnsafeFileError, open_private_file
from ._ledger_codec import decode_object
from ._ledger_files import FsyncPolicy, LedgerContents, contents_from, fspath, path_tuple
from ._ledger_records import (
    LEDGER_SCHEMA_VERSION,
    LedgerFormatError,
    RunEndRecord,
    RunStartRecord,
    ToolCallRecord,
)
from ._options import number, one_of

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._ledger_query import LedgerQuery
    from ._ledger_records import LedgerEntry

__all__ = ["SqliteLedgerSink", "read_sqlite_ledger"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tool_call (
    id INTEGER PRIMARY KEY,
    schema_version INTEGER NOT NULL,
    run_id TEXT,
    call_id TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    status TEXT NOT NULL,
    blocked_reason TEXT,
    started_at REAL NOT NULL,
    finished_at REAL NOT NULL,
    duration_s REAL NOT NULL,
    arguments TEXT NOT NULL,
    result_preview TEXT,
    decision TEXT,
    decision_gate TEXT,
    decision_allowed INTEGER,
    approval TEXT,
    definition_hash TEXT
);
CREATE INDEX IF NOT EXISTS tool_call_run ON tool_call (run_id);
CREATE INDEX IF NOT EXISTS tool_call_tool ON tool_call (tool_name);
CREATE INDEX IF NOT EXISTS tool_call_status ON tool_call (status);
CREATE INDEX IF NOT EXISTS tool_call_started ON tool_call (started_at);
CREATE TABLE IF NOT EXISTS run_start (
    id INTEGER PRIMARY KEY,
    schema_version INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    started_at REAL NOT NULL,
    label TEXT,
    pid INTEGER
);
CREATE INDEX IF NOT EXISTS run_start_run ON run_start (run_id);
CREATE TABLE IF NOT EXISTS run_end (
    id INTEGER PRIMARY KEY,
    schema_version INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    finished_at REAL NOT NULL,
    outcome TEXT NOT NULL,
    calls INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS run_end_run ON run_end (run_id);
"""

_INSERT_CALL = (
    "INSERT INTO tool_call (schema_version, run_id, call_id, tool_name, status, blocked_reason,"
    " started_at, finished_at, duration_s, arguments, result_preview, decision, decision_gate,"
    " decision_allowed, approval, definition_hash)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_CALL_COLUMNS = (
    "schema_version, run_id, call_id, tool_name, status, blocked_reason, started_at,"
    " finished_at, duration_s, arguments, result_preview, decision"
)


def _has_definition_hash(db: sqlite3.Connection) -> bool:
    """Whether ``tool_call`` has the column (databases written before it was added do not)."""
    return any(row[1] == "definition_hash" for row in db.execute("PRAGMA table_info(tool_call)"))


_SYNCHRONOUS = {"never": "OFF", "run": "NORMAL", "always": "FULL"}


def _uri(path: str, mode: str) -> str:
    # An SQLite URI for ``path``: "?" and "#" in a file name would end the path part.
    return f"file:{urllib.parse.quote(os.path.abspath(path))}?mode={mode}"


def _connect(path: str) -> sqlite3.Connection:
    # Autocommit: each insert is its own transaction, on disk when the call ends.
    # "rw", never "rwc": the file was created and checked already, so a name swapped
    # for a dangling link in between cannot make SQLite create the link's target.
    return sqlite3.connect(_uri(path, "rw"), isolation_level=None, check_same_thread=True, uri=True)


@attrs.define(eq=False)
class SqliteLedgerSink:
    """Inserts every ledger entry into an SQLite database, one transaction each.

    The database is created if missing and put in WAL mode, so readers
    (``prism ledger query``) never block the writer and several runs may write
    one database (a busy writer waits up to ``busy_timeout_s``). With WAL a
    killed process loses at most the entry being inserted.

    No link redirects it: the database is first opened (created ``0o600``)
    the way every file Prism writes is (``prism.core.files``: no symlink at
    the name, a regular file with one link, no directory link below one of
    ``roots``); its ``-wal``, ``-shm`` and ``-journal`` companions must be
    regular files if they exist; and once SQLite has opened it, the file it
    opened must be that same file (device and inode), or the sink refuses it.
    SQLite keeps its files open for the sink's life, so a link planted later
    is never followed.

    Args:
        path: the database file.
        fsync: ``never`` (``synchronous=OFF``), ``run`` (``NORMAL``: survives
            a process crash) or ``always`` (``FULL``: survives a power cut).
        busy_timeout_s: how long an insert waits for another writer.
        roots: folders others (an agent) may write in: below them, no directory
            on the path may be a link.

    Raises:
        UnsafeFileError: a file is a link or not regular, or the path goes
            through a link below one of ``roots`` (an ``OSError``).
        sqlite3.Error: the database cannot be opened or is not a ledger.
    """

    path: str = attrs.field(converter=fspath)
    fsync: FsyncPolicy = attrs.field(default="run", validator=one_of("never", "run", "always"))
    busy_timeout_s: float = attrs.field(default=5.0, validator=number(minimum=0))
    roots: tuple[str, ...] = attrs.field(default=(), converter=path_tuple, kw_only=True)
    _db: sqlite3.Connection | None = attrs.field(default=None, init=False)
    _pin: int = attrs.field(default=-1, init=False)

    def __attrs_post_init__(self) -> None:
        opened = open_private_file(self.path, os.O_RDWR | os.O_CREAT, roots=self.roots)
        try:
            _check_companions(opened.name, opened.directory_fd, self.path)
            db = _connect(self.path)
            try:
                # Before anything is written (journal_mode writes the header): the
                # file SQLite opened must be the file checked, or a name swapped in
                # between would have SQLite write wherever the swapped link leads.
                _check_same_file(db, opened, self.path)
                db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
                db.execute("PRAGMA journal_mode = WAL")
                _check_same_file(db, opened, self.path)
                db.execute(f"PRAGMA synchronous = {_SYNCHRONOUS[self.fsync]}")
                db.executescript(_SCHEMA)
                if not _has_definition_hash(db):
                    db.execute("ALTER TABLE tool_call ADD COLUMN definition_hash TEXT")
            except BaseException:
                db.close()
                raise
        except BaseException:
            os.close(opened.fd)
            raise
        finally:
            os.close(opened.directory_fd)
        # Kept open so the inode checked is the inode SQLite writes for the sink's life.
        self._db, self._pin = db, opened.fd

    def __repr__(self) -> str:
        return f"SqliteLedgerSink({self.path!r})"

    def write(self, entry: LedgerEntry) -> None:
        """Insert ``entry`` as one row of its table.

        Raises:
            sqlite3.Error: the insert failed (full disk, closed sink).
        """
        db = self._db
        if db is None:
            raise sqlite3.ProgrammingError(f"the ledger sink for {self.path} is closed")
        try:
            self._insert(db, entry, lambda text: text)
        except UnicodeEncodeError:
            # A lone surrogate (a hostile tool's or server's text, a model's argument)
            # is no UTF-8: stored as its escape, so the record is never lost.
            self._insert(db, entry, _escaped)

    @staticmethod
    def _insert(
        db: sqlite3.Connection, entry: LedgerEntry, text: Callable[[str | None], str | None]
    ) -> None:
        kind = type(entry)
        if kind is ToolCallRecord:
            record: ToolCallRecord = entry  # type: ignore[assignment]
            decision = record.decision
            db.execute(
                _INSERT_CALL,
                (
                    LEDGER_SCHEMA_VERSION,
                    text(record.run_id),
                    text(record.call_id),
                    text(record.tool_name),
                    record.status,
                    text(record.blocked_reason),
                    record.started_at,
                    record.finished_at,
                    record.duration_s,
                    json.dumps(record.arguments, allow_nan=False),
                    text(record.result_preview),
                    None if decision is None else json.dumps(attrs.asdict(decision)),
                    None if decision is None else text(decision.gate),
                    None if decision is None else int(decision.allowed),
                    None if decision is None else text(decision.approval),
                    record.definition_hash,
                ),
            )
        elif kind is RunStartRecord:
            start: RunStartRecord = entry  # type: ignore[assignment]
            db.execute(
                "INSERT INTO run_start (schema_version, run_id, started_at, label, pid)"
                " VALUES (?, ?, ?, ?, ?)",
                (
                    LEDGER_SCHEMA_VERSION,
                    text(start.run_id),
                    start.started_at,
                    text(start.label),
                    start.pid,
                ),
            )
        else:
            end: RunEndRecord = entry  # type: ignore[assignment]
            db.execute(
                "INSERT INTO run_end (schema_version, run_id, finished_at, outcome, calls)"
                " VALUES (?, ?, ?, ?, ?)",
                (LEDGER_SCHEMA_VERSION, text(end.run_id), end.finished_at, end.outcome, end.calls),
            )

    def close(self) -> None:
        """Close the database; idempotent."""
        db, self._db = self._db, None
        pin, self._pin = self._pin, -1
        try:
            if db is not None:
                db.close()
        finally:
            if pin >= 0:
                os.close(pin)


_COMPANIONS = ("-wal", "-shm", "-journal")


def _check_companions(name: str, directory: int | None, shown: str) -> None:
    """Refuse a ``-wal``/``-shm``/``-journal`` beside the database that SQLite would follow.

    SQLite writes ``-shm`` (and may recover ``-wal``) even for a read-only reader,
    so a companion hard-linked to another file would be overwritten.
    """
    for suffix in _COMPANIONS:
        try:
            status = os.stat(name + suffix, dir_fd=directory, follow_symlinks=False)
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(status.st_mode) or status.st_nlink > 1:
            raise UnsafeFileError(
                errno.ELOOP,
                f"{shown}{suffix} is a link or not a regular file; Prism does not write to it",
            )


def _check_same_file(db: sqlite3.Connection, opened: OpenedFile, shown: str) -> None:
    """Refuse when the file SQLite opened is not the one checked (a name swapped in between)."""
    row = db.execute("PRAGMA database_list").fetchone()
    where = str(row[2]) if row is not None else ""
    try:
        status = os.stat(where, follow_symlinks=False) if where else None
    except OSError:
        status = None
    if status is None or FileIdentity.of(status) != opened.identity:
        raise UnsafeFileError(
            errno.EPERM, f"{shown} changed while the ledger opened it; Prism does not write to it"
        )
    _check_companions(opened.name, opened.directory_fd, shown)


def _call_object(row: tuple[object, ...], number: int) -> object:
    (version, run_id, call_id, tool, status, blocked, started, finished, duration) = row[:9]
    arguments, preview, decision, definition_hash = row[9:]
    try:
        data: dict[str, object] = {
            "type": "tool_call",
            "schema_version": version,
            "call_id": call_id,
            "tool_name": tool,
            "arguments": json.loads(arguments) if isinstance(arguments, str) else arguments,
            "status": status,
            "blocked_reason": blocked,
            "started_at": started,
            "finished_at": finished,
            "duration_s": duration,
            "result_preview": preview,
            "run_id": run_id,
            "decision": json.loads(decision) if isinstance(decision, str) else decision,
        }
        if definition_hash is not None:
            data["definition_hash"] = definition_hash
    except ValueError as exc:
        raise LedgerFormatError(f"tool_call row {number}: not JSON ({exc})") from exc
    return data


def read_sqlite_ledger(
    path: str | os.PathLike[str], query: LedgerQuery | None = None
) -> LedgerContents:
    """Read an SQLite ledger, with ``query``'s filters run in SQL.

    Blocks on file I/O: from trio, call it through ``trio.to_thread.run_sync``.

    Raises:
        LedgerFormatError: the database is not a ledger this version can read.
        UnsafeFileError: a ``-wal``/``-shm``/``-journal`` beside it is a link or
            not a regular file (SQLite would write to it even to read).
    """
    where, params = ("", []) if query is None else query.sql()
    text = os.path.abspath(os.fspath(path))
    _check_companions(text, None, text)
    try:
        db = sqlite3.connect(_uri(text, "ro"), uri=True)
    except sqlite3.Error as exc:
        raise LedgerFormatError(f"cannot open the SQLite ledger ({exc})") from exc
    try:
        hashes = "definition_hash" if _has_definition_hash(db) else "NULL"
        calls = db.execute(
            f"SELECT id, {_CALL_COLUMNS}, {hashes} FROM tool_call{where} ORDER BY id", params
        ).fetchall()
        starts = db.execute(
            "SELECT id, schema_version, run_id, started_at, label, pid FROM run_start ORDER BY id"
        ).fetchall()
        ends = db.execute(
            "SELECT id, schema_version, run_id, finished_at, outcome, calls FROM run_end"
            " ORDER BY id"
        ).fetchall()
        # Each run's calls in the whole ledger, as the JSONL reader counts them.
        counts = dict(db.execute("SELECT run_id, COUNT(*) FROM tool_call GROUP BY run_id"))
    except sqlite3.Error as exc:
        raise LedgerFormatError(f"not an SQLite ledger ({exc})") from exc
    finally:
        db.close()
    entries: list[LedgerEntry] = []
    for row in starts:
        number, version, run_id, started_at, label, pid = row
        start = {"type": "run_start", "schema_version": version, "run_id": run_id}
        start |= {"started_at": started_at, "label": label, "pid": pid}
        entries.append(decode_object(start, f"run_start row {number}"))
    for row in calls:
        entries.append(decode_object(_call_object(row[1:], row[0]), f"tool_call row {row[0]}"))
    for row in ends:
        number, version, run_id, finished_at, outcome, count = row
        end = {"type": "run_end", "schema_version": version, "run_id": run_id}
        end |= {"finished_at": finished_at, "outcome": outcome, "calls": count}
        entries.append(decode_object(end, f"run_end row {number}"))
    contents = contents_from(entries)
    runs = tuple(attrs.evolve(run, calls=counts.get(run.run_id, 0)) for run in contents.runs)
    contents = attrs.evolve(contents, runs=runs)
    if query is not None:
        # SQL narrowed the rows; matches() is the definition (glob classes included).
        contents = attrs.evolve(contents, records=query.apply(contents.records))
    return contents


def _escaped(text: str | None) -> str | None:
    r"""``text`` with each lone surrogate written as its escape (``\ud800``), as UTF-8 holds it."""
    if text is None:
        return None
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
