"""The run ledger: one record per dispatched call, redacted, exportable as JSONL.

Serialization lives here at the edge, in one cattrs converter that is built on
first use (so ``import prism.core`` does not pay for cattrs). Each JSONL line
is an object tagged with a stable ``type`` name and the ``schema_version``:
``tool_call`` for a call, ``run_start`` and ``run_end`` for the markers that
tell a finished run from an interrupted one. A ledger hands every entry to its
sinks (:mod:`._ledger_sinks`) as it is made.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Literal,
    Protocol,
    TypeAlias,
    get_args,
    runtime_checkable,
)

import attrs
import trio

from ._errors import PrismError
from ._events import BlockedReason
from ._json import JsonValue
from ._ledger_decision import ToolCallDecision
from ._options import callable_value, has_method, integer, one_of, optional, sequence_of, string
from ._redaction import (
    PreviewSource,
    Redactor,
    default_redactor,
    is_pure_redactor,
    preview_source,
    safe_arguments,
    safe_decision,
    safe_name,
    safe_preview_source,
    safe_text,
)

if TYPE_CHECKING:
    import cattrs

    from ._content import ToolResult

__all__ = [
    "LEDGER_SCHEMA_VERSION",
    "LedgerEntry",
    "LedgerFormatError",
    "LedgerRecorder",
    "LedgerSink",
    "LedgerWriteFailed",
    "RunEndRecord",
    "RunLedger",
    "RunOutcome",
    "RunStartRecord",
    "ToolCallRecord",
    "ToolCallStatus",
]

LEDGER_SCHEMA_VERSION = 2
"""The version written into every JSONL line. Readers also read version 1
(records without ``decision`` and ``run_id``, no run markers) and refuse others."""

READABLE_VERSIONS = frozenset({1, 2})

_log = logging.getLogger("prism.core")


ToolCallStatus: TypeAlias = Literal["ok", "error", "blocked", "cancelled"]
RunOutcome: TypeAlias = Literal["finished", "aborted", "failed"]
"""How a run ended: normally, interrupted (abort, SIGINT, cancellation), or by an error."""


class LedgerFormatError(PrismError, ValueError):
    """A JSONL ledger could not be read or written: bad JSON, unknown version or tag, bad field."""


@attrs.frozen(kw_only=True)
class ToolCallRecord:
    """What happened to one call. Arguments and preview are redacted and bounded.

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
        run_id: the run the call belongs to (see :meth:`RunLedger.start_run`);
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


def _build_record(
    redact: Redactor | None,
    run_id: str,
    call_id: str,
    tool_name: str,
    arguments: object,
    status: ToolCallStatus,
    blocked_reason: BlockedReason | None,
    started_at: float,
    finished_at: float,
    duration_s: float,
    preview: PreviewSource | None,
    decision: ToolCallDecision | None,
    definition_hash: str | None,
) -> ToolCallRecord:
    """The record of one call: its names, arguments, preview and decision bounded and redacted."""
    return ToolCallRecord(
        # Names may come straight from the model (an unknown tool's): bounded too.
        call_id=safe_name(call_id),
        tool_name=safe_name(tool_name),
        arguments=safe_arguments(arguments, redact),
        status=status,
        blocked_reason=blocked_reason,
        started_at=started_at,
        finished_at=finished_at,
        duration_s=duration_s,
        result_preview=None if preview is None else safe_preview_source(preview, redact),
        decision=None if decision is None else safe_decision(decision, redact),
        run_id=run_id,
        definition_hash=None if definition_hash is None else safe_name(definition_hash),
    )


_RecordFields: TypeAlias = tuple[
    Redactor | None,
    str,
    str,
    str,
    object,
    ToolCallStatus,
    BlockedReason | None,
    float,
    float,
    float,
    PreviewSource | None,
    ToolCallDecision | None,
    str | None,
]
"""The arguments of :func:`_build_record`, in order."""


class DeferredRecord:
    """A call's record, kept as what it is made from until it is first read (internal).

    Redacting and bounding a record costs more than the rest of a gated call's
    bookkeeping, and most in-memory records are never read one by one. This
    holds the raw fields instead; :meth:`record` builds the record once, with
    the redactor and run id of the moment the call ended, so it is the record
    :meth:`RunLedger.record` would have built then. Everything held is owned:
    the arguments are the dispatcher's snapshot, the preview source the start
    of the result's text (immutable), and the redactor is a pure one.
    """

    __slots__ = ("_state",)

    def __init__(self, fields: _RecordFields) -> None:
        # The fields until the record is built, then the record alone (one
        # attribute, swapped in one step).
        self._state: _RecordFields | ToolCallRecord = fields

    def record(self) -> ToolCallRecord:
        """The finished record (built on the first call, the same object after)."""
        state = self._state
        if isinstance(state, ToolCallRecord):
            return state
        record = self._state = _build_record(*state)
        return record


def finished_records(entries: Iterable[ToolCallRecord | DeferredRecord]) -> list[ToolCallRecord]:
    """The records of ``entries``, deferred ones built now."""
    return [entry.record() if isinstance(entry, DeferredRecord) else entry for entry in entries]


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
    reported through :attr:`RunLedger.on_error` and never reaches the run.
    """

    def write(self, entry: LedgerEntry) -> None:
        """Store one entry (a whole record, or nothing)."""
        ...

    def close(self) -> None:
        """Flush and release what the sink holds; later writes may fail."""
        ...


@runtime_checkable
class LedgerRecorder(Protocol):
    """What the dispatcher records every call's end in (``DispatchOptions.ledger``).

    :class:`RunLedger` is the usual one. A host may pass its own (to forward
    records elsewhere, or to keep a run's records beside a shared ledger, as
    the agent does) without subclassing :class:`RunLedger`. ``record`` runs
    inside the dispatch that ended, on the trio thread: it must be quick and
    must not checkpoint. An exception from it is logged (``prism.core``) and
    never reaches the call.
    """

    def record(
        self,
        *,
        call_id: str,
        tool_name: str,
        arguments: object,
        status: ToolCallStatus,
        blocked_reason: BlockedReason | None,
        started_at: float,
        finished_at: float,
        duration_s: float,
        result: ToolResult | None,
        decision: ToolCallDecision | None = None,
        definition_hash: str | None = None,
    ) -> object:
        """Record one call that ended (``arguments`` as the call had them, unredacted)."""
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


# --- JSONL through one cattrs converter, built on first use ----------------------------

# Stable tag names: the class an on-disk "type" stands for never changes meaning.
_TAGS: dict[type, str] = {
    ToolCallRecord: "tool_call",
    RunStartRecord: "run_start",
    RunEndRecord: "run_end",
}
_CLASSES: dict[str, type] = {tag: cls for cls, tag in _TAGS.items()}
_STATUSES = frozenset(get_args(ToolCallStatus))
_converter: cattrs.Converter | None = None


def _strict_str(value: object, _type: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _strict_float(value: object, _type: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number, got {type(value).__name__}")
    return float(value)


def _strict_int(value: object, _type: object) -> int:
    if type(value) is not int:
        raise TypeError(f"expected an integer, got {type(value).__name__}")
    return value


def _strict_bool(value: object, _type: object) -> bool:
    if type(value) is not bool:
        raise TypeError(f"expected true or false, got {type(value).__name__}")
    return value


def _json_passthrough(value: Any, _type: object = None) -> Any:
    return value


def _get_converter() -> cattrs.Converter:
    global _converter
    if _converter is None:
        import cattrs
        from cattrs.gen import make_dict_unstructure_fn, override

        converter = cattrs.Converter(forbid_extra_keys=True)
        converter.register_structure_hook(str, _strict_str)
        converter.register_structure_hook(float, _strict_float)
        converter.register_structure_hook(int, _strict_int)
        converter.register_structure_hook(bool, _strict_bool)
        # Arguments are already bounded JSON: pass them through both ways.
        json_type = attrs.fields(attrs.resolve_types(ToolCallRecord)).arguments.type
        attrs.resolve_types(ToolCallDecision)
        attrs.resolve_types(RunStartRecord)
        attrs.resolve_types(RunEndRecord)
        converter.register_structure_hook_func(lambda t: t == json_type, _json_passthrough)
        converter.register_unstructure_hook_func(lambda t: t == json_type, _json_passthrough)
        # Decisions are written compactly: fields at their defaults are left out.
        converter.register_unstructure_hook(
            ToolCallDecision,
            make_dict_unstructure_fn(ToolCallDecision, converter, _cattrs_omit_if_default=True),
        )
        # A call record leaves out a definition hash it does not have, so lines
        # of local tools read as they did before the field existed.
        converter.register_unstructure_hook(
            ToolCallRecord,
            make_dict_unstructure_fn(
                ToolCallRecord, converter, definition_hash=override(omit_if_default=True)
            ),
        )
        _converter = converter
    return _converter


# One encoder, built once: json.dumps(allow_nan=False) would build a new one per call.
# ASCII only: no reader can split a line on U+2028 or NEL.
_ENCODER = json.JSONEncoder(allow_nan=False)
_DECISION_DEFAULTS: tuple[tuple[str, object], ...] = ()


def _decision_json(decision: ToolCallDecision) -> dict[str, object]:
    """The decision as the converter writes it (fields at their defaults left out)."""
    global _DECISION_DEFAULTS
    if not _DECISION_DEFAULTS:
        _DECISION_DEFAULTS = tuple(
            (field.name, field.default)
            for field in attrs.fields(ToolCallDecision)
            if field.default is not attrs.NOTHING
        )
    out: dict[str, object] = {"gate": decision.gate, "allowed": decision.allowed}
    for name, default in _DECISION_DEFAULTS:
        value = getattr(decision, name)
        if value != default:
            out[name] = value
    return out


def _entry_json(entry: LedgerEntry) -> dict[str, object]:
    if type(entry) is ToolCallRecord:
        # The per-call path, by hand: the same object the converter would build.
        decision = entry.decision
        line: dict[str, object] = {
            "type": "tool_call",
            "schema_version": LEDGER_SCHEMA_VERSION,
            "call_id": entry.call_id,
            "tool_name": entry.tool_name,
            "arguments": entry.arguments,
            "status": entry.status,
            "blocked_reason": entry.blocked_reason,
            "started_at": entry.started_at,
            "finished_at": entry.finished_at,
            "duration_s": entry.duration_s,
            "result_preview": entry.result_preview,
            "decision": None if decision is None else _decision_json(decision),
            "run_id": entry.run_id,
        }
        if entry.definition_hash is not None:
            # Written only when set, so lines of local tools read as they always did.
            line["definition_hash"] = entry.definition_hash
        return line
    data = _get_converter().unstructure(entry)
    return {"type": _TAGS[type(entry)], "schema_version": LEDGER_SCHEMA_VERSION, **data}


def encode_entry(entry: LedgerEntry) -> str:
    """One JSONL line (with its newline) for ``entry``.

    Raises:
        LedgerFormatError: the entry holds a value JSON cannot carry.
    """
    try:
        return _ENCODER.encode(_entry_json(entry)) + "\n"
    except (TypeError, ValueError) as exc:
        name = getattr(entry, "call_id", None) or getattr(entry, "run_id", "")
        raise LedgerFormatError(f"record {name!r}: {exc}") from exc


def decode_entry(line: str, number: int) -> LedgerEntry:
    """Read one JSONL line written by any readable schema version.

    Raises:
        LedgerFormatError: the line is not an entry this version can read; the
            message gives the line number.
    """
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise LedgerFormatError(f"line {number}: not JSON ({exc})") from exc
    return decode_object(data, f"line {number}")


def decode_object(data: object, where: str) -> LedgerEntry:
    """Structure one tagged, versioned JSON object (from a line or a database row).

    Raises:
        LedgerFormatError: it is not an entry this version can read; the
            message starts with ``where``.
    """
    number = where  # messages read "line 3: ..." or "row 3: ..."
    if not isinstance(data, dict):
        raise LedgerFormatError(f"{number}: expected an object")
    tag = data.pop("type", None)
    version = data.pop("schema_version", None)
    entry_type = _CLASSES.get(tag) if isinstance(tag, str) else None
    if entry_type is None:
        raise LedgerFormatError(f"{number}: unknown record type {tag!r}")
    if type(version) is not int or version not in READABLE_VERSIONS:
        raise LedgerFormatError(
            f"{number}: schema_version {version!r} is not one of {sorted(READABLE_VERSIONS)}"
        )
    if version == 1:
        if entry_type is not ToolCallRecord:
            raise LedgerFormatError(f"{number}: {tag!r} records need schema_version 2")
        if "decision" in data or "run_id" in data or "definition_hash" in data:
            raise LedgerFormatError(
                f"{number}: schema_version 1 has no decision, run_id or definition_hash"
            )
    if entry_type is ToolCallRecord:
        status = data.get("status")
        if not isinstance(status, str) or status not in _STATUSES:
            raise LedgerFormatError(f"{number}: unknown status {status!r}")
    try:
        entry: LedgerEntry = _get_converter().structure(data, entry_type)
    except Exception as exc:
        raise LedgerFormatError(f"{number}: {_describe_cattrs(exc)}") from exc
    return entry


def _new_run_id() -> str:
    return uuid.uuid4().hex[:16]


_OUTCOMES = one_of("finished", "aborted", "failed")
_SINKS = sequence_of(has_method("write", "close"))


def _sinks(value: Iterable[LedgerSink]) -> tuple[LedgerSink, ...]:
    if isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
        value = tuple(value)
    return _SINKS.check("RunLedger", "sinks", value)


# Options are checked when the ledger is made. Assignments skip attrs' hooks,
# which would otherwise run for the counter that every record() bumps.
@attrs.define(eq=False, on_setattr=attrs.setters.NO_OP)
class RunLedger:
    """Collects a :class:`ToolCallRecord` for every dispatched call.

    Every record (and every run marker) is also handed to each sink as it is
    made, so a file sink holds every finished call even if the process dies.

    Args:
        redact: applied to arguments, result previews, decisions and run labels
            before they are stored; ``None`` stores them as they are (still
            bounded in size). Defaults to :func:`default_redactor`.
        sinks: receive every entry as it is made (see :class:`LedgerSink`).
        on_error: told when a sink fails to store an entry; by default the
            failure is logged (``prism.core``). The run never sees the error.
        run_id: stamped on every record; a fresh random id by default.
        max_records: keep only this many of the newest records in memory (a
            long-running process whose sinks keep the rest); ``None`` keeps all.

    Raises:
        ConfigurationError: an option has the wrong type or value (``redact``
            not callable, a sink without ``write``/``close``, ``max_records``
            below 1, ...); the error names the option and the value.
    """

    redact: Redactor | None = attrs.field(
        factory=default_redactor, validator=optional(callable_value())
    )
    sinks: tuple[LedgerSink, ...] = attrs.field(default=(), converter=_sinks, kw_only=True)
    on_error: Callable[[LedgerWriteFailed], None] | None = attrs.field(
        default=None, kw_only=True, validator=optional(callable_value())
    )
    run_id: str = attrs.field(factory=_new_run_id, kw_only=True, validator=string())
    max_records: int | None = attrs.field(
        default=None, kw_only=True, validator=optional(integer(minimum=1))
    )
    _records: list[ToolCallRecord | DeferredRecord] = attrs.field(factory=list, init=False)
    _run_calls: int = attrs.field(default=0, init=False)

    @property
    def records(self) -> list[ToolCallRecord]:
        """The records so far (the newest ``max_records``), in the order calls finished (a copy)."""
        if self.max_records is not None:
            return finished_records(self._records[-self.max_records :])
        return finished_records(self._records)

    def __len__(self) -> int:
        if self.max_records is not None:
            return min(len(self._records), self.max_records)
        return len(self._records)

    def record(
        self,
        *,
        call_id: str,
        tool_name: str,
        arguments: object,
        status: ToolCallStatus,
        blocked_reason: BlockedReason | None,
        started_at: float,
        finished_at: float,
        duration_s: float,
        result: ToolResult | None,
        decision: ToolCallDecision | None = None,
        definition_hash: str | None = None,
    ) -> ToolCallRecord:
        """Bound, redact and append one record, hand it to the sinks; returns it.

        The dispatcher calls this (it is the :class:`LedgerRecorder` method);
        hosts that run calls some other way may call it too.
        """
        entry = _build_record(
            self.redact,
            self.run_id,
            call_id,
            tool_name,
            arguments,
            status,
            blocked_reason,
            started_at,
            finished_at,
            duration_s,
            None if result is None else preview_source(result),
            decision,
            definition_hash,
        )
        self._append(entry)
        if self.sinks:
            self._emit(entry)
        return entry

    def _record_owned(
        self,
        call_id: str,
        tool_name: str,
        arguments: object,
        status: ToolCallStatus,
        blocked_reason: BlockedReason | None,
        started_at: float,
        finished_at: float,
        duration_s: float,
        result: ToolResult | None,
        decision: ToolCallDecision | None,
        definition_hash: str | None,
    ) -> ToolCallRecord | DeferredRecord:
        """:meth:`record`, for a caller whose ``arguments`` nobody else holds (the dispatcher).

        When nothing needs the record at once (no sinks, a pure redactor, and
        :meth:`record` not overridden), a :class:`DeferredRecord` is kept and
        the record is built when :attr:`records` is read; otherwise this is
        :meth:`record`.
        """
        redact = self.redact
        if self.sinks or not is_pure_redactor(redact) or type(self).record is not _RECORD:
            return self.record(
                call_id=call_id,
                tool_name=tool_name,
                arguments=arguments,
                status=status,
                blocked_reason=blocked_reason,
                started_at=started_at,
                finished_at=finished_at,
                duration_s=duration_s,
                result=result,
                decision=decision,
                definition_hash=definition_hash,
            )
        entry = DeferredRecord(
            (
                redact,
                self.run_id,
                call_id,
                tool_name,
                arguments,
                status,
                blocked_reason,
                started_at,
                finished_at,
                duration_s,
                None if result is None else preview_source(result),
                decision,
                definition_hash,
            )
        )
        self._append(entry)
        return entry

    def _append(self, entry: ToolCallRecord | DeferredRecord) -> None:
        records = self._records
        records.append(entry)
        limit = self.max_records
        if limit is not None and len(records) >= 2 * limit:
            del records[:-limit]  # trimmed in batches: amortised O(1) per record
        self._run_calls += 1

    def start_run(self, *, label: str | None = None) -> RunStartRecord:
        """Write the ``run_start`` marker to the sinks; returns it.

        ``label`` says what the run is; it is bounded and redacted.
        """
        if label is not None:
            label = safe_text(label, self.redact)
        self._run_calls = 0
        entry = RunStartRecord(
            run_id=self.run_id, started_at=time.time(), label=label, pid=os.getpid()
        )
        self._emit(entry)
        return entry

    def end_run(self, outcome: RunOutcome = "finished") -> RunEndRecord:
        """Write the ``run_end`` marker to the sinks; returns it.

        Raises:
            ValueError: ``outcome`` is not ``finished``, ``aborted`` or ``failed``.
        """
        _OUTCOMES.check("RunLedger.end_run", "outcome", outcome)
        entry = RunEndRecord(
            run_id=self.run_id, finished_at=time.time(), outcome=outcome, calls=self._run_calls
        )
        self._emit(entry)
        return entry

    @contextlib.contextmanager
    def run(self, *, label: str | None = None) -> Iterator[RunStartRecord]:
        """Bracket a run with its markers, then close the sinks.

        The end marker says ``finished`` when the block ends normally,
        ``aborted`` on :class:`KeyboardInterrupt` or :class:`trio.Cancelled`,
        and ``failed`` on any other exception (which propagates).
        """
        start = self.start_run(label=label)
        outcome: RunOutcome = "aborted"
        try:
            yield start
            outcome = "finished"
        except (KeyboardInterrupt, trio.Cancelled):
            raise
        except Exception:
            outcome = "failed"
            raise
        finally:
            try:
                self.end_run(outcome)
            finally:
                self.close()

    def close(self) -> None:
        """Close every sink (failures are reported like failed writes)."""
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as exc:
                self._failed(sink, exc, "close", None)

    def _emit(self, entry: LedgerEntry) -> None:
        for sink in self.sinks:
            try:
                sink.write(entry)
            except Exception as exc:
                self._failed(sink, exc, _TAGS[type(entry)], getattr(entry, "call_id", None))

    def _failed(self, sink: LedgerSink, exc: Exception, kind: str, call_id: str | None) -> None:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        failure = LedgerWriteFailed(sink=repr(sink), error=text, entry_type=kind, call_id=call_id)
        on_error = self.on_error
        if on_error is None:
            _log.warning(
                "the ledger sink %s failed to store a %s entry: %s", failure.sink, kind, text
            )
            return
        try:
            on_error(failure)
        except Exception:
            _log.exception("the ledger's on_error callback failed")

    def to_jsonl(self) -> str:
        """One JSON object per line, each tagged ``"type": "tool_call"`` with ``schema_version``.

        Raises:
            LedgerFormatError: a record holds a value JSON cannot carry (a
                non-finite float, say; records made by :meth:`record` never do).
        """
        return "".join(encode_entry(entry) for entry in self.records)

    @classmethod
    def from_jsonl(cls, text: str) -> RunLedger:
        """Read records written by :meth:`to_jsonl` or a JSONL sink (no redaction is applied again).

        Blank lines and run markers are skipped; version 1 and 2 lines are read.
        Use :func:`read_ledger` to also see runs and tolerate a torn last line.

        Raises:
            LedgerFormatError: a line is not a record this version can read; the
                message gives the line number.
        """
        ledger = cls(redact=None)
        # Only "\n" ends a record; str.splitlines() would also split inside
        # strings on U+2028, NEL and friends.
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            entry = decode_entry(line, number)
            if type(entry) is ToolCallRecord:
                ledger._records.append(entry)
        return ledger


_RECORD = RunLedger.record


def _describe_cattrs(exc: Exception) -> str:
    """A one-line account of a cattrs failure (its errors come grouped)."""
    leaves: list[str] = []
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop()
        nested = getattr(current, "exceptions", None)
        if isinstance(nested, (list, tuple)) and nested:
            pending.extend(nested)
            continue
        notes = getattr(current, "__notes__", None) or []
        where = f" ({'; '.join(str(n) for n in notes)})" if notes else ""
        leaves.append(f"{current}{where}")
    return "; ".join(leaves) or str(exc)
