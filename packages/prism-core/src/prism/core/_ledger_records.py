"""The ledger's record types and the recorder contract.

A ledger stores three kinds of entry: :class:`ToolCallRecord` for a call,
:class:`RunStartRecord` and :class:`RunEndRecord` for the markers that tell a
finished run from an interrupted one. The dispatcher reports each call that
ended to a :class:`LedgerRecorder` as one :class:`FinishedCall` value; that
value is the one place the fields of a call's report are defined.
"""

from __future__ import annotations

import time
from typing import (
    TYPE_CHECKING,
    ClassVar,
    Literal,
    NamedTuple,
    Protocol,
    TypeAlias,
    runtime_checkable,
)

import attrs

from ._errors import PrismError
from ._events import BlockedReason
from ._json import JsonValue
from ._ledger_decision import ToolCallDecision

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from ._content import AssistantMessage, ToolCall, ToolResult

__all__ = [
    "LEDGER_SCHEMA_VERSION",
    "READABLE_VERSIONS",
    "CallTracer",
    "FinishedCall",
    "LedgerEntry",
    "LedgerFormatError",
    "LedgerRecorder",
    "LedgerSink",
    "LedgerWriteFailed",
    "ModelReport",
    "RunEndRecord",
    "RunOutcome",
    "RunStartRecord",
    "ToolCallRecord",
    "ToolCallStatus",
]

LEDGER_SCHEMA_VERSION = 2
"""The version written into every JSONL line. Readers also read version 1
(records without ``decision`` and ``run_id``, no run markers) and refuse others."""

READABLE_VERSIONS = frozenset({1, 2})

ToolCallStatus: TypeAlias = Literal["ok", "error", "blocked", "cancelled"]
"""How a call ended: executed fine, failed, refused by a gate, or cancelled."""

RunOutcome: TypeAlias = Literal["finished", "aborted", "failed"]
"""How a run ended: normally, interrupted (abort, SIGINT, cancellation), or by an error."""


class LedgerFormatError(PrismError, ValueError):
    """A JSONL ledger could not be read or written: bad JSON, unknown version or tag, bad field."""


class FinishedCall(NamedTuple):
    """One call that ended, as the dispatcher reports it to a :class:`LedgerRecorder`.

    A named tuple: frozen, typed, and cheap to build (the dispatcher builds one
    per call). The values are as the call had them: nothing is redacted or
    bounded yet; that is the recorder's job.

    Attributes:
        call_id: the provider's call id.
        tool_name: the registry name (after any middleware rewrite).
        arguments: the call's arguments, unredacted.
        status: ``ok``, ``error``, ``blocked`` or ``cancelled``.
        blocked_reason: which gate refused it, for ``blocked``.
        started_at: wall-clock seconds when dispatch began.
        finished_at: wall-clock seconds when the result was final.
        duration_s: monotonic duration of the whole dispatch.
        result: the call's result; ``None`` when the caller's scope was
            cancelled before one was made.
        decision: which gate or policy decided, and how; ``None`` when nothing ruled.
        definition_hash: the definition the call ran against, if it has one.
        arguments_owned: ``arguments`` is a private snapshot nobody else holds
            or will change (the dispatcher's own copy), so a recorder may keep
            it as it is and redact it later.
    """

    call_id: str
    tool_name: str
    arguments: object
    status: ToolCallStatus
    blocked_reason: BlockedReason | None
    started_at: float
    finished_at: float
    duration_s: float
    result: ToolResult | None = None
    decision: ToolCallDecision | None = None
    definition_hash: str | None = None
    arguments_owned: bool = False


@runtime_checkable
class LedgerRecorder(Protocol):
    """What the dispatcher reports every call's end to (``DispatchOptions.ledger``).

    :class:`~prism.core.ledger.RunLedger` is the usual one. A host may pass
    its own (to forward records elsewhere, or to keep a run's records beside a
    shared ledger, as the agent does) without subclassing it. ``record_call``
    runs inside the dispatch that ended, on the trio thread: it must be quick
    and must not checkpoint. Its return value is ignored by the dispatcher. An
    exception from it is logged (``prism.core``) and never reaches the call.
    """

    def record_call(self, call: FinishedCall, /) -> object:
        """Record one call that ended."""
        ...


class ModelReport(Protocol):
    """Told the model's answer when a traced model request ends (see :class:`CallTracer`)."""

    def __call__(self, reply: AssistantMessage, /) -> None:
        """Note ``reply``'s model, token usage and finish reason."""
        ...


@runtime_checkable
class CallTracer(Protocol):
    """Opens a span around the work it times, current while that work runs.

    :class:`~prism.core.ledger.OtelLedgerSink` is one. The dispatcher wraps
    each call in :meth:`trace_call` (``DispatchOptions.tracer``); the agent
    wraps each run in :meth:`trace_run` and each model request in
    :meth:`trace_model`. Spans the work opens itself (an HTTP request, a
    database query, an MCP request) then nest under them.
    """

    def trace_run(self, name: str, /) -> AbstractContextManager[object]:
        """Time one agent run (``name`` is the model's)."""
        ...

    def trace_call(self, call: ToolCall, /) -> AbstractContextManager[object]:
        """Time one tool call, from dispatch to its ledger record."""
        ...

    def trace_model(self, model: str, /) -> AbstractContextManager[ModelReport]:
        """Time one model request; the value it gives is told the answer."""
        ...


@attrs.frozen(kw_only=True)
class ToolCallRecord:
    """What happened to one call, as stored. Arguments and preview are redacted and bounded.

    Attributes:
        call_id: the provider's call id.
        tool_name: the registry name (after any middleware rewrite).
        arguments: the call's arguments, bounded in size and redacted.
        status: ``ok`` (executed, not an error), ``error`` (executed or raised, error
            result), ``blocked`` (a gate refused it), ``cancelled`` (aborted).
        blocked_reason: which gate refused it, for ``blocked``.
        started_at: wall-clock seconds when dispatch began.
        finished_at: wall-clock seconds when the result was final.
        duration_s: monotonic duration of the whole dispatch.
        result_preview: the start of the result's text, redacted.
        decision: which gate or policy decided, and how (approval, rule,
            sandbox); ``None`` when nothing ruled on the call (no execution
            policy ran and no gate refused it). Its text is redacted.
        run_id: the run the call belongs to (see ``RunLedger.start_run``);
            ``None`` in version-1 ledgers.
        definition_hash: the :attr:`~prism.core.ToolDefinition.definition_hash`
            of the definition the call ran against; ``None`` for tools that set
            none, for calls that never ran, and in ledgers written before it existed.
    """

    call_id: str
    tool_name: str
    arguments: JsonValue
    status: ToolCallStatus
    blocked_reason: BlockedReason | None
    started_at: float
    finished_at: float
    duration_s: float
    result_preview: str | None = None
    decision: ToolCallDecision | None = None
    run_id: str | None = None
    definition_hash: str | None = None


@attrs.frozen(kw_only=True)
class RunStartRecord:
    """The marker a ledger writes when a run starts.

    Attributes:
        run_id: identifies the run; every record of the run carries it.
        started_at: wall-clock seconds.
        label: what the run is (``prism run session.toml``), redacted.
        pid: the process that wrote the run.
    """

    run_id: str
    started_at: float
    label: str | None = None
    pid: int | None = None


@attrs.frozen(kw_only=True)
class RunEndRecord:
    """The marker a ledger writes when a run ends; a run without one was interrupted.

    Attributes:
        run_id: the run that ended.
        finished_at: wall-clock seconds.
        outcome: ``finished``, ``aborted`` or ``failed``.
        calls: how many call records the run wrote.
    """

    run_id: str
    finished_at: float
    outcome: RunOutcome
    calls: int


LedgerEntry: TypeAlias = ToolCallRecord | RunStartRecord | RunEndRecord
"""What a ledger hands its sinks: a call record or a run marker."""


@runtime_checkable
class LedgerSink(Protocol):
    """Receives every ledger entry as it is made (a file, a database, a tracer).

    ``write`` runs on the caller's thread, inside the dispatch that made the
    record: it must be quick and must not checkpoint. An exception from it is
    reported through ``RunLedger.on_error`` and never reaches the run.
    """

    def write(self, entry: LedgerEntry) -> None:
        """Store one entry (a whole record, or nothing)."""
        ...

    def close(self) -> None:
        """Flush and release what the sink holds; later writes may fail."""
        ...


@attrs.frozen(kw_only=True)
class LedgerWriteFailed:
    """A sink could not store an entry; the run goes on.

    Attributes:
        sink: the sink's ``repr``.
        error: what went wrong (``OSError: [Errno 28] No space left on device``).
        entry_type: the tag of the entry that was lost (``tool_call``, ``run_end``).
        call_id: the lost call's id, for a ``tool_call``.
    """

    type: ClassVar[str] = "ledger_write_failed"
    sink: str
    error: str
    entry_type: str
    call_id: str | None = None
    timestamp: float = attrs.field(factory=time.time)
