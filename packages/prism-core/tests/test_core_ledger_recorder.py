"""DispatchOptions.ledger takes any LedgerRecorder; records carry the definition hash."""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING, Any

import trio
import trio.testing

from prism.core import (
    AbortController,
    AssistantMessage,
    DispatchOptions,
    ScriptedProvider,
    ToolCall,
    ToolDefinition,
    ToolResult,
    create_agent,
    create_tool_registry,
    dispatch_tool_call,
    dispatch_tool_calls_in_order,
)
from prism.core.ledger import (
    FinishedCall,
    JsonlLedgerSink,
    LedgerRecorder,
    PendingRecord,
    RunLedger,
    SqliteLedgerSink,
    ToolCallRecord,
    read_ledger,
)
from prism.core.testing import echo_tool

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

    from prism.core import JsonObject, ToolExecutionContext


class ListRecorder:
    """A recorder that is not a RunLedger: it keeps what it was told."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def record_call(self, call: FinishedCall, /) -> None:
        self.calls.append(call._asdict())


async def _ok(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text("ok")


HASHED = ToolDefinition(name="hashed", execute=_ok, definition_hash="sha256:abc")


async def test_a_plain_recorder_gets_every_end_a_call_can_have() -> None:
    recorder = ListRecorder()
    assert isinstance(recorder, LedgerRecorder)
    options = DispatchOptions(registry=create_tool_registry([HASHED]), ledger=recorder)
    await dispatch_tool_call(ToolCall(id="ok", name="hashed", arguments={"a": 1}), options)
    await dispatch_tool_call(ToolCall(id="no", name="missing", arguments={}), options)
    controller = AbortController()
    controller.abort("stop")
    aborted = DispatchOptions(registry=options.registry, ledger=recorder, signal=controller.signal)
    await dispatch_tool_calls_in_order([ToolCall(id="late", name="hashed", arguments={})], aborted)
    seen = [(c["call_id"], c["status"], c["definition_hash"]) for c in recorder.calls]
    assert seen == [
        ("ok", "ok", "sha256:abc"),
        ("no", "blocked", None),
        ("late", "cancelled", None),
    ]
    assert recorder.calls[0]["arguments"] == {"a": 1}
    # The dispatcher's own snapshot, not the call's dict: a recorder may keep it.
    assert recorder.calls[0]["arguments_owned"] is True
    assert recorder.calls[1]["decision"].gate == "registry"


async def test_a_recorder_that_raises_never_breaks_the_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken:
        def record_call(self, call: FinishedCall, /) -> None:
            raise RuntimeError("disk on fire")

    options = DispatchOptions(registry=create_tool_registry([HASHED]), ledger=Broken())
    result = await dispatch_tool_call(ToolCall(id="c", name="hashed", arguments={}), options)
    assert result.joined_text == "ok"
    assert "the ledger failed to record call 'c'" in caplog.text


async def test_the_agent_records_in_its_ledger_and_returns_the_runs_own_records() -> None:
    ledger = RunLedger()
    turn = AssistantMessage(
        tool_calls=(ToolCall(id="1", name="hashed", arguments={"token": "s3cr3t!"}),)
    )
    agent = create_agent(
        model="m",
        provider=ScriptedProvider([turn, AssistantMessage()]),
        tools=[HASHED],
        ledger=ledger,
    )
    result = await agent.session().run("go")
    assert result.records == tuple(ledger.records)
    [record] = result.records
    assert record.definition_hash == "sha256:abc"
    assert record.arguments == {"token": "[REDACTED]"}


def _record(ledger: RunLedger, call_id: str, definition_hash: str | None) -> ToolCallRecord:
    return ledger.record_call(
        FinishedCall(
            call_id=call_id,
            tool_name="t",
            arguments={},
            status="ok",
            blocked_reason=None,
            started_at=1.0,
            finished_at=2.0,
            duration_s=1.0,
            result=None,
            definition_hash=definition_hash,
        )
    ).record()


def test_the_definition_hash_round_trips_through_jsonl_and_is_left_out_when_unset(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = RunLedger(sinks=[JsonlLedgerSink(path)])
    _record(ledger, "a", "v1")
    _record(ledger, "b", None)
    ledger.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["definition_hash"] == "v1"
    assert "definition_hash" not in lines[1]
    assert [r.definition_hash for r in read_ledger(path).records] == ["v1", None]
    assert [r.definition_hash for r in RunLedger.from_jsonl(ledger.to_jsonl()).records] == [
        "v1",
        None,
    ]


def test_a_long_definition_hash_is_bounded() -> None:
    record = _record(RunLedger(), "c", "x" * 5000)
    assert record.definition_hash is not None
    assert record.definition_hash.endswith("...[4744 more chars]")


def _old_sqlite_ledger(path: Path) -> None:
    """A database as sinks wrote it before ``definition_hash`` existed."""
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE tool_call (
            id INTEGER PRIMARY KEY, schema_version INTEGER NOT NULL, run_id TEXT,
            call_id TEXT NOT NULL, tool_name TEXT NOT NULL, status TEXT NOT NULL,
            blocked_reason TEXT, started_at REAL NOT NULL, finished_at REAL NOT NULL,
            duration_s REAL NOT NULL, arguments TEXT NOT NULL, result_preview TEXT,
            decision TEXT, decision_gate TEXT, decision_allowed INTEGER, approval TEXT
        );
        CREATE TABLE run_start (id INTEGER PRIMARY KEY, schema_version INTEGER NOT NULL,
            run_id TEXT NOT NULL, started_at REAL NOT NULL, label TEXT, pid INTEGER);
        CREATE TABLE run_end (id INTEGER PRIMARY KEY, schema_version INTEGER NOT NULL,
            run_id TEXT NOT NULL, finished_at REAL NOT NULL, outcome TEXT NOT NULL,
            calls INTEGER NOT NULL);
        INSERT INTO tool_call (schema_version, run_id, call_id, tool_name, status,
            started_at, finished_at, duration_s, arguments)
            VALUES (2, 'r', 'old', 't', 'ok', 1.0, 2.0, 1.0, '{}');
        """
    )
    db.commit()
    db.close()


async def test_an_sqlite_ledger_written_before_the_hash_existed_still_reads_and_grows(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.db"
    _old_sqlite_ledger(path)
    [old] = read_ledger(path).records
    assert (old.call_id, old.definition_hash) == ("old", None)
    sink = SqliteLedgerSink(path)
    options = DispatchOptions(
        registry=create_tool_registry([HASHED, echo_tool()]), ledger=RunLedger(sinks=[sink])
    )
    await dispatch_tool_call(ToolCall(id="new", name="hashed", arguments={}), options)
    await dispatch_tool_call(ToolCall(id="local", name="echo", arguments={}), options)
    sink.close()
    hashes = [(r.call_id, r.definition_hash) for r in read_ledger(path).records]
    assert hashes == [("old", None), ("new", "sha256:abc"), ("local", None)]


async def _hang(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
    await trio.sleep_forever()
    raise AssertionError("unreachable")


HANGS = ToolDefinition(name="hangs", execute=_hang, definition_hash="sha256:def")


async def test_a_call_aborted_mid_execute_records_its_definition_hash() -> None:
    ledger = RunLedger()
    controller = AbortController()
    options = DispatchOptions(
        registry=create_tool_registry([HANGS]), ledger=ledger, signal=controller.signal
    )
    call = ToolCall(id="a", name="hangs", arguments={"n": 1})
    async with trio.open_nursery() as nursery:
        nursery.start_soon(dispatch_tool_call, call, options)
        await trio.testing.wait_all_tasks_blocked()
        controller.abort("stop")
    [record] = ledger.records
    assert (record.status, record.definition_hash) == ("cancelled", "sha256:def")
    assert record.arguments == {"n": 1}


async def test_a_call_whose_caller_is_cancelled_mid_execute_records_its_definition_hash() -> None:
    ledger = RunLedger()
    options = DispatchOptions(registry=create_tool_registry([HANGS]), ledger=ledger)
    call = ToolCall(id="c", name="hangs", arguments={"n": 1})
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(dispatch_tool_call, call, options)
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
    [record] = ledger.records
    assert (record.status, record.definition_hash) == ("cancelled", "sha256:def")
    assert record.arguments == {"n": 1}


async def test_a_plain_recorder_hears_the_definition_hash_of_a_call_cancelled_mid_execute() -> None:
    recorder = ListRecorder()
    controller = AbortController()
    options = DispatchOptions(
        registry=create_tool_registry([HANGS]), ledger=recorder, signal=controller.signal
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            dispatch_tool_call, ToolCall(id="a", name="hangs", arguments={}), options
        )
        await trio.testing.wait_all_tasks_blocked()
        controller.abort()
    [fields] = recorder.calls
    assert (fields["status"], fields["definition_hash"]) == ("cancelled", "sha256:def")


def test_a_recorder_with_the_old_keyword_method_is_not_a_recorder() -> None:
    class Old:
        def record(self, **fields: Any) -> None:
            raise AssertionError("never called")

    assert not isinstance(Old(), LedgerRecorder)


async def test_a_run_ledger_subclass_that_overrides_record_call_is_called_for_every_call() -> None:
    seen: list[str] = []

    class Counting(RunLedger):
        def record_call(self, call: FinishedCall, /) -> PendingRecord:
            seen.append(call.call_id)
            return super().record_call(call)

    ledger = Counting()
    options = DispatchOptions(registry=create_tool_registry([HASHED]), ledger=ledger)
    await dispatch_tool_call(ToolCall(id="a", name="hashed", arguments={"k": 1}), options)
    await dispatch_tool_call(ToolCall(id="b", name="missing", arguments={}), options)
    assert seen == ["a", "b"]
    assert [r.call_id for r in ledger.records] == ["a", "b"]


def test_a_pending_record_is_built_once_with_the_redactor_of_its_moment() -> None:
    ledger = RunLedger()
    call = FinishedCall(
        call_id="c",
        tool_name="t",
        arguments={"password": "hunter2"},
        status="ok",
        blocked_reason=None,
        started_at=1.0,
        finished_at=2.0,
        duration_s=1.0,
        arguments_owned=True,
    )
    pending = ledger.record_call(call)
    ledger.redact = None  # later changes do not reach a record already made
    first = pending.record()
    assert first.arguments == {"password": "[REDACTED]"}
    assert pending.record() is first
    assert ledger.records == [first]
    assert "hunter2" not in repr(pending)
