"""The run ledger: one record per dispatched call, redacted, handed to its sinks.

:class:`RunLedger` is the usual :class:`LedgerRecorder`. It keeps the records
of a run in memory, hands every entry (call records and run markers) to its
sinks (:mod:`._ledger_jsonl`, :mod:`._ledger_sqlite`, :mod:`._ledger_otel`) as
it is made, and writes and reads JSONL through :mod:`._ledger_codec`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import TypeAlias

import attrs
import trio

from ._ledger_codec import TAGS, decode_entry, encode_entry
from ._ledger_records import (
    CallTracer,
    FinishedCall,
    LedgerEntry,
    LedgerSink,
    LedgerWriteFailed,
    RunEndRecord,
    RunOutcome,
    RunStartRecord,
    ToolCallRecord,
)
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

__all__ = ["PendingRecord", "RunLedger", "build_record", "finished_records", "new_run_id"]

_log = logging.getLogger("prism.core")


def build_record(
    redact: Redactor | None, run_id: str, call: FinishedCall, preview: PreviewSource | None
) -> ToolCallRecord:
    """The record of one call: its names, arguments, preview and decision bounded and redacted."""
    decision = call.decision
    definition_hash = call.definition_hash
    return ToolCallRecord(
        # Names may come straight from the model (an unknown tool's): bounded too.
        call_id=safe_name(call.call_id),
        tool_name=safe_name(call.tool_name),
        arguments=safe_arguments(call.arguments, redact),
        status=call.status,
        blocked_reason=call.blocked_reason,
        started_at=call.started_at,
        finished_at=call.finished_at,
        duration_s=call.duration_s,
        result_preview=None if preview is None else safe_preview_source(preview, redact),
        decision=None if decision is None else safe_decision(decision, redact),
        run_id=run_id,
        definition_hash=None if definition_hash is None else safe_name(definition_hash),
    )


_Fields: TypeAlias = tuple[Redactor | None, str, FinishedCall, PreviewSource | None]
"""The arguments of :func:`build_record`, in order."""


class PendingRecord:
    """One call's record, built when it is first read.

    :meth:`RunLedger.record_call` returns one. Redacting and bounding a record
    costs more than the rest of a gated call's bookkeeping, and most in-memory
    records are never read one by one, so the ledger may keep what the record
    is made from instead; :meth:`record` builds it once, with the redactor and
    run id of the moment the call ended, and returns the same object after.
    """

    __slots__ = ("_state",)

    def __init__(self, state: _Fields | ToolCallRecord) -> None:
        # The fields until the record is built, then the record alone (one
        # attribute, swapped in one step).
        self._state: _Fields | ToolCallRecord = state

    def record(self) -> ToolCallRecord:
        """The finished record (built on the first call, the same object after)."""
        state = self._state
        if isinstance(state, ToolCallRecord):
            return state
        record = self._state = build_record(*state)
        return record

    def __repr__(self) -> str:
        return f"PendingRecord({self.record()!r})"


def finished_records(entries: Iterable[PendingRecord]) -> list[ToolCallRecord]:
    """The records of ``entries``, pending ones built now."""
    return [entry.record() for entry in entries]


def new_run_id() -> str:
    """A fresh random run id (16 hex digits)."""
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
    run_id: str = attrs.field(factory=new_run_id, kw_only=True, validator=string())
    max_records: int | None = attrs.field(
        default=None, kw_only=True, validator=optional(integer(minimum=1))
    )
    _records: list[PendingRecord] = attrs.field(factory=list, init=False)
    _run_calls: int = attrs.field(default=0, init=False)
    _in_run: bool = attrs.field(default=False, init=False)
    _runs_ended: int = attrs.field(default=0, init=False)

    @property
    def tracer(self) -> CallTracer | None:
        """The first sink that is also a :class:`CallTracer` (an OTel sink), if any."""
        for sink in self.sinks:
            if isinstance(sink, CallTracer):
                return sink
        return None

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

    def record_call(self, call: FinishedCall, /) -> PendingRecord:
        """Bound, redact and keep one call's record, and hand it to the sinks.

        This is the :class:`LedgerRecorder` method the dispatcher calls; hosts
        that run calls some other way call it too. When nothing needs the
        record at once (no sinks, a pure redactor, and arguments nobody else
        holds), it is built when first read; the redactor and run id are
        those of this moment either way. Returns the record's handle
        (:meth:`PendingRecord.record` gives the record).
        """
        result = call.result
        preview = None
        if result is not None:
            preview = preview_source(result)
            # The record is made of the preview, not of the result: a pending
            # record keeps neither the tool's result nor its content alive.
            call = FinishedCall(*call[:8], None, *call[9:])  # (_replace costs 2x this)
        entry = PendingRecord((self.redact, self.run_id, call, preview))
        if self.sinks or not call.arguments_owned or not is_pure_redactor(self.redact):
            record = entry.record()
            self._append(entry)
            if self.sinks:
                self._emit(record)
            return entry
        self._append(entry)
        return entry

    def _append(self, entry: PendingRecord) -> None:
        records = self._records
        records.append(entry)
        limit = self.max_records
        if limit is not None and len(records) >= 2 * limit:
            del records[:-limit]  # trimmed in batches: amortised O(1) per record
        self._run_calls += 1

    @property
    def in_run(self) -> bool:
        """Whether a run's start marker was written and its end marker not yet."""
        return self._in_run

    def start_run(self, *, label: str | None = None) -> RunStartRecord:
        """Write the ``run_start`` marker to the sinks; returns it.

        ``label`` says what the run is; it is bounded and redacted.
        """
        if label is not None:
            label = safe_text(label, self.redact)
        self._run_calls = 0
        self._in_run = True
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
        self._in_run = False
        self._runs_ended += 1
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
                self._failed(sink, exc, TAGS[type(entry)], getattr(entry, "call_id", None))

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
                ledger._records.append(PendingRecord(entry))
        return ledger
