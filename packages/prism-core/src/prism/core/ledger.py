"""prism.core.ledger: what a run records, where it goes, and how it is read back.

Every dispatched call ends in one :class:`FinishedCall` handed to a
:class:`LedgerRecorder` (``DispatchOptions.ledger``); :class:`RunLedger` is the
usual one. It redacts and bounds each call into a :class:`ToolCallRecord`,
keeps it in memory, and hands it to its sinks (a JSONL file, a SQLite
database, OpenTelemetry) as it is made::

    import trio
    from prism.core import DispatchOptions, ToolCall, ToolDefinition, ToolResult
    from prism.core import create_rule_permission_policy, create_tool_registry
    from prism.core import dispatch_tool_call
    from prism.core.ledger import JsonlLedgerSink, RunLedger, read_ledger

    async def add(args, ctx):
        return ToolResult.text(str(args["a"] + args["b"]))

    ledger = RunLedger(sinks=[JsonlLedgerSink("calls.jsonl")])
    options = DispatchOptions(
        registry=create_tool_registry([ToolDefinition(name="add", execute=add)]),
        permission=create_rule_permission_policy(allow=["tool:add:execute"]),
        ledger=ledger,
    )
    call = ToolCall(id="1", name="add", arguments={"a": 1, "b": 2})
    with ledger.run(label="example"):
        trio.run(dispatch_tool_call, call, options)
    assert read_ledger("calls.jsonl").records[0].status == "ok"
"""

from ._ledger import PendingRecord as PendingRecord
from ._ledger import RunLedger as RunLedger
from ._ledger_decision import ApprovalAnswer as ApprovalAnswer
from ._ledger_decision import DecisionGate as DecisionGate
from ._ledger_decision import ToolCallDecision as ToolCallDecision
from ._ledger_files import FsyncPolicy as FsyncPolicy
from ._ledger_files import LedgerContents as LedgerContents
from ._ledger_files import LedgerRun as LedgerRun
from ._ledger_jsonl import JsonlLedgerSink as JsonlLedgerSink
from ._ledger_jsonl import read_ledger_text as read_ledger_text
from ._ledger_otel import OtelLedgerSink as OtelLedgerSink
from ._ledger_query import LedgerQuery as LedgerQuery
from ._ledger_read import read_ledger as read_ledger
from ._ledger_records import LEDGER_SCHEMA_VERSION as LEDGER_SCHEMA_VERSION
from ._ledger_records import CallTracer as CallTracer
from ._ledger_records import FinishedCall as FinishedCall
from ._ledger_records import LedgerEntry as LedgerEntry
from ._ledger_records import LedgerFormatError as LedgerFormatError
from ._ledger_records import LedgerRecorder as LedgerRecorder
from ._ledger_records import LedgerSink as LedgerSink
from ._ledger_records import LedgerWriteFailed as LedgerWriteFailed
from ._ledger_records import ModelReport as ModelReport
from ._ledger_records import RunEndRecord as RunEndRecord
from ._ledger_records import RunOutcome as RunOutcome
from ._ledger_records import RunStartRecord as RunStartRecord
from ._ledger_records import ToolCallRecord as ToolCallRecord
from ._ledger_records import ToolCallStatus as ToolCallStatus
from ._ledger_sqlite import SqliteLedgerSink as SqliteLedgerSink
from ._redaction import Redactor as Redactor
from ._redaction import default_redactor as default_redactor

__all__ = [
    "LEDGER_SCHEMA_VERSION",
    "ApprovalAnswer",
    "CallTracer",
    "DecisionGate",
    "FinishedCall",
    "FsyncPolicy",
    "JsonlLedgerSink",
    "LedgerContents",
    "LedgerEntry",
    "LedgerFormatError",
    "LedgerQuery",
    "LedgerRecorder",
    "LedgerRun",
    "LedgerSink",
    "LedgerWriteFailed",
    "ModelReport",
    "OtelLedgerSink",
    "PendingRecord",
    "Redactor",
    "RunEndRecord",
    "RunLedger",
    "RunOutcome",
    "RunStartRecord",
    "SqliteLedgerSink",
    "ToolCallDecision",
    "ToolCallRecord",
    "ToolCallStatus",
    "default_redactor",
    "read_ledger",
    "read_ledger_text",
]
