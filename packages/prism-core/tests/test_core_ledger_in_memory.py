"""Records kept in memory read exactly as the ones a sink is handed when the call ends."""

from __future__ import annotations

import gc
import weakref
from typing import TYPE_CHECKING

import attrs
import pytest

from prism.core import (
    DispatchOptions,
    ToolCall,
    ToolDefinition,
    ToolResult,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.core.ledger import (
    FinishedCall,
    LedgerEntry,
    RunLedger,
    ToolCallDecision,
    ToolCallRecord,
    default_redactor,
)

if TYPE_CHECKING:
    from prism.core import JsonObject, ToolExecutionContext
    from prism.core.ledger import Redactor


class ListSink:
    """A sink that keeps every entry it is handed."""

    def __init__(self) -> None:
        self.entries: list[LedgerEntry] = []

    def write(self, entry: LedgerEntry) -> None:
        self.entries.append(entry)

    def close(self) -> None:
        return None


async def _answer(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
    text = args.get("say")
    return ToolResult.text(text if isinstance(text, str) else "ok", is_error="fail" in args)


ANSWER = ToolDefinition(name="answer", execute=_answer, definition_hash="v1")

CALLS = [
    ToolCall(id="plain", name="answer", arguments={"q": "prism", "limit": 5}),
    ToolCall(id="secret", name="answer", arguments={"password": "hunter2", "n": [1, {"a": 2}]}),
    ToolCall(id="long", name="answer", arguments={"text": "x" * 5000, "items": list(range(300))}),
    ToolCall(id="preview", name="answer", arguments={"say": "Bearer abcdefghijkl " + "y" * 900}),
    ToolCall(id="error", name="answer", arguments={"fail": True, "say": "api_key=sk-1"}),
    ToolCall(id="unknown", name="nope", arguments={"token": "t0ps3cret"}),
]


def _timeless(record: ToolCallRecord) -> ToolCallRecord:
    return attrs.evolve(record, started_at=0.0, finished_at=0.0, duration_s=0.0)


async def _records_of(ledger: RunLedger) -> list[ToolCallRecord]:
    options = DispatchOptions(registry=create_tool_registry([ANSWER]), ledger=ledger)
    for call in CALLS:
        await dispatch_tool_call(call, options)
    return [_timeless(record) for record in ledger.records]


@pytest.mark.parametrize("redact", [default_redactor(), None], ids=["default", "none"])
async def test_records_kept_in_memory_equal_the_records_a_sink_is_handed(
    redact: Redactor | None,
) -> None:
    sink = ListSink()
    in_memory = await _records_of(RunLedger(redact, run_id="r"))
    with_sink = await _records_of(RunLedger(redact, run_id="r", sinks=[sink]))
    assert in_memory == with_sink
    assert [_timeless(e) for e in sink.entries if isinstance(e, ToolCallRecord)] == with_sink


async def test_a_caller_that_mutates_the_arguments_after_dispatch_cannot_rewrite_the_record() -> (
    None
):
    ledger = RunLedger()
    options = DispatchOptions(registry=create_tool_registry([ANSWER]), ledger=ledger)
    nested: dict[str, object] = {"force": True}
    arguments: dict[str, object] = {"path": "/etc", "opts": nested, "items": [1, 2]}
    await dispatch_tool_call(ToolCall(id="1", name="answer", arguments=arguments), options)
    arguments["path"] = "/tmp/harmless"
    nested["force"] = False
    arguments["items"] = []
    [record] = ledger.records
    assert record.arguments == {"path": "/etc", "opts": {"force": True}, "items": [1, 2]}


async def test_a_record_is_redacted_by_the_redactor_of_the_moment_its_call_ended() -> None:
    ledger = RunLedger()
    options = DispatchOptions(registry=create_tool_registry([ANSWER]), ledger=ledger)
    await dispatch_tool_call(
        ToolCall(id="1", name="answer", arguments={"password": "hunter2"}), options
    )
    ledger.redact = None
    [record] = ledger.records
    assert record.arguments == {"password": "[REDACTED]"}


async def test_reading_the_records_again_gives_the_same_records() -> None:
    ledger = RunLedger(max_records=2)
    options = DispatchOptions(registry=create_tool_registry([ANSWER]), ledger=ledger)
    for call in CALLS[:3]:
        await dispatch_tool_call(call, options)
    first = ledger.records
    assert [r.call_id for r in first] == ["secret", "long"]
    assert all(a is b for a, b in zip(first, ledger.records, strict=True))


@pytest.mark.parametrize(
    ("redact", "reason"),
    [
        (default_redactor(), "password=[REDACTED] was refused"),
        (None, "password=hunter2 was refused"),
    ],
    ids=["default", "none"],
)
def test_a_decision_seen_again_is_redacted_as_the_first_time(
    redact: Redactor | None, reason: str
) -> None:
    ledger = RunLedger(redact)
    for _ in range(2):
        decision = ToolCallDecision(
            gate="execution_policy", allowed=False, reason="password=hunter2 was refused"
        )
        ledger.record_call(
            FinishedCall(
                call_id="c",
                tool_name="t",
                arguments={},
                status="error",
                blocked_reason=None,
                started_at=0.0,
                finished_at=0.0,
                duration_s=0.0,
                result=None,
                decision=decision,
            )
        ).record()
    assert [r.decision.reason for r in ledger.records if r.decision] == [reason, reason]


async def test_a_pending_record_keeps_the_preview_not_the_result() -> None:
    # A kept record is built from the result's preview: the result itself (a whole
    # file's text, say) is not kept alive by the ledger until the record is read.
    big = "z" * 200_000
    answers: list[weakref.ref[ToolResult]] = []

    async def read(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        result = ToolResult.text(big + "secret=hunter2")
        answers.append(weakref.ref(result))
        return result

    ledger = RunLedger(max_records=10)
    options = DispatchOptions(
        registry=create_tool_registry([ToolDefinition(name="read", execute=read)]),
        ledger=ledger,
    )
    await dispatch_tool_call(ToolCall(id="r", name="read", arguments={}), options)
    gc.collect()
    assert answers[0]() is None
    (record,) = ledger.records
    assert record.status == "ok"
    assert record.result_preview is not None
    assert record.result_preview.startswith("zzz")
