"""Property tests: records with decisions and run markers survive every ledger format."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import get_args

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prism.core.ledger import (
    ApprovalAnswer,
    DecisionGate,
    FinishedCall,
    JsonlLedgerSink,
    LedgerQuery,
    RunLedger,
    SqliteLedgerSink,
    ToolCallDecision,
    ToolCallRecord,
    read_ledger,
    read_ledger_text,
)

_text = st.text(max_size=40)
_maybe_text = st.none() | st.text(min_size=1, max_size=40)

decisions = st.builds(
    ToolCallDecision,
    gate=st.sampled_from(get_args(DecisionGate)),
    allowed=st.booleans(),
    policy=_maybe_text,
    rule=_maybe_text,
    model=_maybe_text,
    reason=_maybe_text,
    approval_needed=st.booleans(),
    approval_asked=st.booleans(),
    approval=st.none() | st.sampled_from(get_args(ApprovalAnswer)),
    remembered=st.booleans(),
    timed_out=st.booleans(),
    sandbox=_maybe_text,
    confined=st.booleans(),
    escalation=st.booleans(),
)

calls = st.tuples(
    _text,
    _text,
    st.dictionaries(_text, st.none() | st.integers() | _text, max_size=4),
    st.sampled_from(["ok", "error", "blocked", "cancelled"]),
    st.none() | decisions,
)


def _fill(ledger: RunLedger, items: list[tuple[str, str, dict[str, object], str, object]]) -> None:
    with ledger.run(label="property"):
        for call_id, tool, arguments, status, decision in items:
            ledger.record_call(
                FinishedCall(
                    call_id=call_id,
                    tool_name=tool,
                    arguments=arguments,
                    status=status,  # type: ignore[arg-type]
                    blocked_reason="tool_denied" if status == "blocked" else None,
                    started_at=1.5,
                    finished_at=2.5,
                    duration_s=1.0,
                    result=None,
                    decision=decision,  # type: ignore[arg-type]
                )
            ).record()


@given(st.lists(calls, max_size=6))
def test_jsonl_sink_lines_read_back_as_the_records(
    items: list[tuple[str, str, dict[str, object], str, object]],
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "ledger.jsonl"
        ledger = RunLedger(redact=None, sinks=[JsonlLedgerSink(path)])
        _fill(ledger, items)
        contents = read_ledger(path)
    assert contents.records == tuple(ledger.records)
    assert RunLedger.from_jsonl(ledger.to_jsonl()).records == ledger.records
    (run,) = contents.runs
    assert (run.outcome, run.calls) == ("finished", len(items))


@settings(max_examples=30, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(calls, max_size=6))
def test_sqlite_sink_rows_read_back_as_the_records(
    items: list[tuple[str, str, dict[str, object], str, object]],
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "ledger.db"
        ledger = RunLedger(redact=None, sinks=[SqliteLedgerSink(path)])
        _fill(ledger, items)
        contents = read_ledger(path)
    assert contents.records == tuple(ledger.records)


@given(st.lists(calls, min_size=1, max_size=4), st.integers(min_value=1, max_value=200))
def test_any_cut_of_the_last_line_is_a_torn_line_not_an_error(
    items: list[tuple[str, str, dict[str, object], str, object]], cut: int
) -> None:
    ledger = RunLedger(redact=None)
    _fill(ledger, items)
    text = ledger.to_jsonl()
    lines = text.splitlines(keepends=True)
    last = lines[-1]
    torn = "".join(lines[:-1]) + last[: max(1, min(cut, len(last) - 2))]
    contents = read_ledger_text(torn)
    assert contents.records == tuple(ledger.records[:-1])
    assert contents.torn_line == len(lines)


def test_records_of_a_version_1_line_equal_their_version_2_form() -> None:
    record = ToolCallRecord(
        call_id="c",
        tool_name="t",
        arguments={},
        status="ok",
        blocked_reason=None,
        started_at=1.0,
        finished_at=2.0,
        duration_s=1.0,
    )
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "ledger.jsonl"
        sink = JsonlLedgerSink(path)
        sink.write(record)
        sink.close()
        text = path.read_text(encoding="utf-8")
    line = text.replace('"schema_version": 2', '"schema_version": 1')
    line = line.replace(', "decision": null, "run_id": null', "")
    assert RunLedger.from_jsonl(line).records == [record]


_names = st.sampled_from(["read", "shell", "mcp:docs:get", "Read", "sh[x]", "edit"])
queries = st.builds(
    LedgerQuery,
    status=st.lists(st.sampled_from(["ok", "error", "blocked", "cancelled"]), max_size=2),
    tool=st.lists(st.sampled_from(["read", "sh*", "mcp:*", "?ead", "[rR]ead", "*"]), max_size=2),
    run=st.none() | st.sampled_from(["", "a", "ab", "b"]),
    since=st.none() | st.floats(min_value=0, max_value=10),
    blocked=st.booleans(),
)


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            _names,
            st.sampled_from(["ok", "error", "blocked", "cancelled"]),
            st.floats(min_value=0, max_value=10),
            st.none() | decisions,
            st.sampled_from(["aa", "ab", "ba"]),
        ),
        max_size=8,
    ),
    queries,
)
def test_sqlite_queries_agree_with_the_python_filter(
    rows: list[tuple[str, str, float, ToolCallDecision | None, str]], query: LedgerQuery
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "ledger.db"
        ledgers: dict[str, RunLedger] = {}
        for index, (tool, status, started, decision, run_id) in enumerate(rows):
            # Made once per run: a setdefault default is built (a sink, its database
            # opened) on every row, and the ones not kept were never closed.
            if run_id not in ledgers:
                sink = SqliteLedgerSink(path)
                ledgers[run_id] = RunLedger(redact=None, sinks=[sink], run_id=run_id)
            ledger = ledgers[run_id]
            ledger.record_call(
                FinishedCall(
                    call_id=str(index),
                    tool_name=tool,
                    arguments={},
                    status=status,  # type: ignore[arg-type]
                    blocked_reason="tool_denied" if status == "blocked" else None,
                    started_at=started,
                    finished_at=started,
                    duration_s=0.0,
                    result=None,
                    decision=decision,
                )
            ).record()
        for ledger in ledgers.values():
            ledger.close()
        everything = read_ledger(path).records if rows else ()
        found = read_ledger(path, query=query).records if rows else ()
    assert found == query.apply(everything)
