"""The SQLite ledger sink: WAL, one table per entry kind, indexes, queries in SQL."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from prism.core.ledger import (
    FinishedCall,
    LedgerFormatError,
    LedgerQuery,
    RunLedger,
    SqliteLedgerSink,
    ToolCallDecision,
    ToolCallRecord,
    read_ledger,
)

if TYPE_CHECKING:
    from pathlib import Path


def _record(
    ledger: RunLedger,
    call_id: str,
    *,
    tool: str = "t",
    status: str = "ok",
    started_at: float = 1.0,
    decision: ToolCallDecision | None = None,
) -> ToolCallRecord:
    return ledger.record_call(
        FinishedCall(
            call_id=call_id,
            tool_name=tool,
            arguments={"q": call_id, "api_key": "sk-abcdefghijklmnopqrstuvwx"},
            status=status,  # type: ignore[arg-type]
            blocked_reason="permission_denied" if status == "blocked" else None,
            started_at=started_at,
            finished_at=started_at + 1,
            duration_s=1.0,
            result=None,
            decision=decision,
        )
    ).record()


def test_the_database_is_in_wal_mode_with_a_table_per_entry_kind(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    SqliteLedgerSink(path).close()
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        indexes = {
            row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='index'")
        }
    finally:
        db.close()
    assert tables == {"tool_call", "run_start", "run_end"}
    assert {"tool_call_run", "tool_call_tool", "tool_call_status", "tool_call_started"} <= indexes


def test_records_round_trip_with_decisions_and_runs(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    ledger = RunLedger(sinks=[SqliteLedgerSink(path)])
    denied = ToolCallDecision(
        gate="execution_policy", allowed=False, policy="p", rule="r", approval="timed_out"
    )
    with ledger.run(label="sqlite"):
        _record(ledger, "a")
        _record(ledger, "b", status="error", decision=denied)
    contents = read_ledger(path)
    assert contents.records == tuple(ledger.records)
    assert contents.records[1].decision == denied
    (run,) = contents.runs
    assert (run.label, run.outcome, run.calls) == ("sqlite", "finished", 2)


def test_what_is_stored_is_redacted(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    ledger = RunLedger(sinks=[SqliteLedgerSink(path)])
    _record(ledger, "a")
    ledger.close()
    assert b"sk-abcdefghijklmnop" not in path.read_bytes()


def test_a_record_is_visible_to_readers_before_the_sink_closes(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    ledger = RunLedger(sinks=[SqliteLedgerSink(path)])
    ledger.start_run()
    _record(ledger, "a")
    contents = read_ledger(path)
    assert [r.call_id for r in contents.records] == ["a"]
    assert contents.runs[0].interrupted
    ledger.close()


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (LedgerQuery(status=["blocked"]), ["c"]),
        (LedgerQuery(tool=["sh*"]), ["b", "c"]),
        (LedgerQuery(since=15.0), ["b", "c"]),
        (LedgerQuery(blocked=True), ["b", "c"]),
        (LedgerQuery(status=["ok", "error"], tool=["read"]), ["a"]),
    ],
)
def test_queries_run_in_sql_and_agree_with_the_jsonl_reader(
    tmp_path: Path, query: LedgerQuery, expected: list[str]
) -> None:
    path = tmp_path / "ledger.db"
    ledger = RunLedger(sinks=[SqliteLedgerSink(path)])
    denied = ToolCallDecision(gate="execution_policy", allowed=False)
    _record(ledger, "a", tool="read", started_at=10.0)
    _record(ledger, "b", tool="shell", status="error", started_at=20.0, decision=denied)
    _record(ledger, "c", tool="shell", status="blocked", started_at=30.0)
    ledger.close()
    assert [r.call_id for r in read_ledger(path, query=query).records] == expected
    assert [r.call_id for r in query.apply(tuple(ledger.records))] == expected


def test_a_run_prefix_query(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    first = RunLedger(sinks=[SqliteLedgerSink(path)])
    second = RunLedger(sinks=[SqliteLedgerSink(path)])
    _record(first, "a")
    _record(second, "b")
    first.close()
    second.close()
    found = read_ledger(path, query=LedgerQuery(run=second.run_id[:5]))
    assert [r.call_id for r in found.records] == ["b"]


def test_a_database_that_is_not_a_ledger_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    with pytest.raises(LedgerFormatError, match="not an SQLite ledger"):
        read_ledger(path)


def test_a_closed_sink_fails_its_writes_through_on_error(tmp_path: Path) -> None:
    sink = SqliteLedgerSink(tmp_path / "ledger.db")
    sink.close()
    failures: list[str] = []
    ledger = RunLedger(sinks=[sink], on_error=lambda f: failures.append(f.error))
    _record(ledger, "a")
    assert len(failures) == 1
    assert "closed" in failures[0]


_WRITER = """
import sys
from prism.core.ledger import FinishedCall, RunLedger, SqliteLedgerSink
ledger = RunLedger(sinks=[SqliteLedgerSink(sys.argv[1])])
with ledger.run(label=sys.argv[2]):
    for i in range(200):
        ledger.record_call(FinishedCall(call_id=f"{sys.argv[2]}-{i}", tool_name="t", arguments={},
            status="ok", blocked_reason=None, started_at=1.0, finished_at=2.0,
            duration_s=1.0, result=None)).record()
"""


def test_concurrent_runs_share_one_database(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    SqliteLedgerSink(path).close()  # create the schema once, up front
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), name])
        for name in ("p", "q", "r")
    ]
    assert [w.wait(timeout=60) for w in writers] == [0, 0, 0]
    contents = read_ledger(path)
    assert len(contents.records) == 600
    assert sorted((run.label, run.calls, run.outcome) for run in contents.runs) == [
        ("p", 200, "finished"),
        ("q", 200, "finished"),
        ("r", 200, "finished"),
    ]


@pytest.mark.parametrize("name", ["ledger.db", "ledger.jsonl"])
def test_runs_count_every_call_even_when_a_query_filters(tmp_path: Path, name: str) -> None:
    from prism.core.ledger import JsonlLedgerSink

    path = tmp_path / name
    sink = SqliteLedgerSink(path) if name.endswith(".db") else JsonlLedgerSink(path)
    ledger = RunLedger(sinks=[sink])
    with ledger.run():
        _record(ledger, "a", tool="read")
        _record(ledger, "b", tool="shell")
    contents = read_ledger(path, query=LedgerQuery(tool=["read"]))
    assert [r.call_id for r in contents.records] == ["a"]
    assert [run.calls for run in contents.runs] == [2]


@pytest.mark.parametrize("name", ["ledger.db", "ledger.jsonl"])
def test_a_lone_surrogate_never_loses_a_record(tmp_path: Path, name: str) -> None:
    # A hostile tool's or server's text, or a model's argument, with a lone surrogate
    # (no UTF-8 holds it): SQLite refused the row and the call was missing.
    from prism.core import ToolResult
    from prism.core.ledger import JsonlLedgerSink, LedgerWriteFailed

    path = tmp_path / name
    sink = SqliteLedgerSink(path) if name.endswith(".db") else JsonlLedgerSink(path)
    failures: list[LedgerWriteFailed] = []
    ledger = RunLedger(sinks=[sink], on_error=failures.append)
    with ledger.run(label="l\ud800"):
        ledger.record_call(
            FinishedCall(
                call_id="c\udfff",
                tool_name="mcp:d:evil\ud800",
                arguments={"q": "\udc00"},
                status="ok",
                blocked_reason=None,
                started_at=1.0,
                finished_at=2.0,
                duration_s=1.0,
                result=ToolResult.text("r\ud800"),
            )
        )
    ledger.close()
    assert failures == []
    contents = read_ledger(path)
    (record,) = contents.records
    (run,) = contents.runs
    fields = (record.call_id, record.tool_name, record.result_preview, run.label)
    if name.endswith(".jsonl"):  # JSON carries it as its escape: read back as it was
        assert fields == ("c\udfff", "mcp:d:evil\ud800", "r\ud800", "l\ud800")
    else:  # SQLite text is UTF-8: the code point is stored as its escape
        assert fields == ("c\\udfff", "mcp:d:evil\\ud800", "r\\ud800", "l\\ud800")
    assert record.arguments == {"q": "\udc00"}
    assert run.calls == 1
