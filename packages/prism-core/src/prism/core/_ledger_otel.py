"""OpenTelemetry export of the ledger (the optional ``otel`` extra): spans and metrics.

Spans follow the OpenTelemetry GenAI semantic conventions: the run is an
``invoke_agent {name}`` span, each model request a ``chat {model}`` span
(``gen_ai.request.model``, ``gen_ai.usage.input_tokens``/``output_tokens``,
``gen_ai.response.finish_reasons``), each call an ``execute_tool {tool}`` span
carrying ``gen_ai.operation.name``, ``gen_ai.tool.name``, ``gen_ai.tool.type``,
``gen_ai.tool.call.id`` and, when the call did not succeed, ``error.type``;
Prism's own facts (status, blocked reason, the decision) are ``prism.*``
attributes, taken from the ledger's record, so redacted the same way.

As a :class:`CallTracer` the sink starts each span when its work starts and
makes it the current span (OpenTelemetry context) while the work runs, so
spans the work opens itself nest under it; the call's record then completes
and ends its span. Records of calls that were not traced get a span made from
the record, with the record's own times.

Nothing here imports OpenTelemetry until a sink is made.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING

from ._errors import ConfigurationError
from ._ledger_records import RunEndRecord, RunStartRecord, ToolCallRecord
from ._options import boolean, string

if TYPE_CHECKING:
    from collections.abc import Iterator

    from opentelemetry.metrics import Counter, Histogram, MeterProvider
    from opentelemetry.trace import Span, Tracer, TracerProvider
    from opentelemetry.util.types import AttributeValue

    from ._content import AssistantMessage, ToolCall
    from ._ledger_decision import ToolCallDecision
    from ._ledger_records import LedgerEntry, ModelReport

__all__ = ["OtelLedgerSink"]

_SCOPE = "prism.core"
_NS = 1_000_000_000


def _ns(seconds: float) -> int:
    return int(seconds * _NS)


def _tool_type(name: str) -> str:
    """``gen_ai.tool.type``: ``extension`` for an MCP server's tool, else ``function``."""
    return "extension" if name.startswith("mcp:") else "function"


def error_type(record: ToolCallRecord) -> str | None:
    """The ``error.type`` of a call that did not succeed, or ``None``."""
    if record.status == "ok":
        return None
    if record.status == "blocked":
        return record.blocked_reason or "blocked"
    if record.status == "cancelled":
        return "cancelled"
    decision = record.decision
    if decision is not None and not decision.allowed:
        return "path_escape" if decision.gate == "containment" else "execution_denied"
    return "tool_error"


def decision_attributes(decision: ToolCallDecision) -> dict[str, AttributeValue]:
    """``prism.decision.*`` attributes for a decision (fields left unset are left out)."""
    out: dict[str, AttributeValue] = {
        "prism.decision.gate": decision.gate,
        "prism.decision.allowed": decision.allowed,
    }
    for name in ("policy", "rule", "model", "reason", "approval", "sandbox", "access", "approver"):
        value = getattr(decision, name)
        if value is not None:
            out[f"prism.decision.{name}"] = value
    for name in (
        "approval_needed",
        "approval_asked",
        "remembered",
        "timed_out",
        "confined",
        "escalation",
    ):
        if getattr(decision, name):
            out[f"prism.decision.{name}"] = True
    return out


class OtelLedgerSink:
    """A :class:`LedgerSink` that turns ledger entries into OpenTelemetry spans and metrics.

    A ``run_start`` opens an ``invoke_agent {agent_name}`` span (a child of
    whatever span is current when it is written, if any); each call record
    becomes an ``execute_tool {tool}`` span under it, ended at once with the
    call's own start and end times; ``run_end`` ends the run's span. Metrics:
    ``prism.tool.calls`` (a counter) and ``prism.tool.duration`` (a histogram,
    seconds), both by ``gen_ai.tool.name`` and ``prism.status`` (and
    ``error.type`` when set).

    Args:
        tracer_provider: where spans go; the global provider by default.
        meter_provider: where metrics go; the global provider by default.
        agent_name: ``gen_ai.agent.name`` of the run's span.
        record_arguments: also set ``gen_ai.tool.call.arguments`` (the
            record's arguments, already redacted, as JSON). Off by default:
            arguments can be large and sensitive.

    Raises:
        ConfigurationError: OpenTelemetry is not installed (``pip install
            'prismgate-core[otel]'``).
    """

    __slots__ = (
        "_adopted",
        "_calls",
        "_duration",
        "_live",
        "_runs",
        "_tracer",
        "_tracing",
        "agent_name",
        "record_arguments",
    )

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        agent_name: str = "prism",
        record_arguments: bool = False,
    ) -> None:
        boolean().check("OtelLedgerSink", "record_arguments", record_arguments)
        string().check("OtelLedgerSink", "agent_name", agent_name)
        try:
            from opentelemetry import metrics, trace
        except ImportError as exc:
            raise ConfigurationError(
                "OtelLedgerSink needs OpenTelemetry: pip install 'prismgate-core[otel]'"
            ) from exc
        self.agent_name = agent_name
        self.record_arguments = record_arguments
        self._tracer: Tracer = trace.get_tracer(_SCOPE, tracer_provider=tracer_provider)
        meter = metrics.get_meter(_SCOPE, meter_provider=meter_provider)
        self._calls: Counter = meter.create_counter(
            "prism.tool.calls", unit="{call}", description="Tool calls, by tool and status."
        )
        self._duration: Histogram = meter.create_histogram(
            "prism.tool.duration", unit="s", description="Tool call duration, by tool and status."
        )
        self._runs: dict[str, Span] = {}
        # trace_run's spans still open, and those a run_start marker made the run's span.
        self._tracing: list[Span] = []
        self._adopted: list[Span] = []
        # Spans of traced calls still running, by call id (a list: ids may repeat).
        self._live: dict[str, list[Span]] = {}

    def _parent(self) -> object:
        """The context a new span starts in: the current one, else the open run marker's."""
        from opentelemetry import trace

        if trace.get_current_span().get_span_context().is_valid or not self._runs:
            return None
        return trace.set_span_in_context(next(reversed(self._runs.values())))

    @contextlib.contextmanager
    def trace_run(self, name: str, /) -> Iterator[Span]:
        """An ``invoke_agent`` span, current for the run (see :class:`CallTracer`)."""
        from opentelemetry import trace
        from opentelemetry.trace import Status, StatusCode

        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": self.agent_name,
            "gen_ai.request.model": name,
        }
        span = self._tracer.start_span(
            f"invoke_agent {self.agent_name}",
            context=self._parent(),  # type: ignore[arg-type]
            attributes=attributes,
        )
        self._tracing.append(span)
        try:
            with trace.use_span(span, end_on_exit=True, record_exception=False):
                try:
                    yield span
                except BaseException as exc:
                    span.set_status(Status(StatusCode.ERROR))
                    span.set_attribute("error.type", type(exc).__name__)
                    raise
        finally:
            self._tracing.remove(span)
            if span in self._adopted:
                self._adopted.remove(span)

    @contextlib.contextmanager
    def trace_model(self, model: str, /) -> Iterator[ModelReport]:
        """A ``chat`` span, current for the model request; it is told the answer."""
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        span = self._tracer.start_span(
            f"chat {model}",
            context=self._parent(),  # type: ignore[arg-type]
            kind=SpanKind.CLIENT,
            attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": model},
        )

        def report(reply: AssistantMessage, /) -> None:
            if reply.response_model:
                span.set_attribute("gen_ai.response.model", reply.response_model)
            if reply.input_tokens is not None:
                span.set_attribute("gen_ai.usage.input_tokens", reply.input_tokens)
            if reply.output_tokens is not None:
                span.set_attribute("gen_ai.usage.output_tokens", reply.output_tokens)
            if reply.finish_reason is not None:
                span.set_attribute("gen_ai.response.finish_reasons", (reply.finish_reason,))

        with trace.use_span(span, end_on_exit=True, record_exception=False):
            try:
                yield report
            except BaseException as exc:
                span.set_status(Status(StatusCode.ERROR))
                span.set_attribute("error.type", type(exc).__name__)
                raise

    @contextlib.contextmanager
    def trace_call(self, call: ToolCall, /) -> Iterator[Span]:
        """An ``execute_tool`` span, current while the call runs; its record completes it."""
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind

        span = self._tracer.start_span(
            f"execute_tool {call.name}",
            context=self._parent(),  # type: ignore[arg-type]
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": call.name,
                "gen_ai.tool.type": _tool_type(call.name),
            },
        )
        live = self._live.setdefault(call.id, [])
        live.append(span)
        try:
            with trace.use_span(span, end_on_exit=False, record_exception=False):
                yield span
        finally:
            if span in live:  # no record came (another recorder, or none): end it here
                live.remove(span)
                span.end()
            if not live:
                self._live.pop(call.id, None)

    def __repr__(self) -> str:
        return f"OtelLedgerSink(agent_name={self.agent_name!r})"

    def write(self, entry: LedgerEntry) -> None:
        """Turn ``entry`` into a span (and, for a call, metrics)."""
        kind = type(entry)
        if kind is ToolCallRecord:
            self._call(entry)  # type: ignore[arg-type]
        elif kind is RunStartRecord:
            self._start(entry)  # type: ignore[arg-type]
        elif kind is RunEndRecord:
            self._end(entry)  # type: ignore[arg-type]

    def _start(self, entry: RunStartRecord) -> None:
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": self.agent_name,
            "prism.run.id": entry.run_id,
        }
        if entry.label is not None:
            attributes["prism.run.label"] = entry.label
        from opentelemetry import trace

        current = trace.get_current_span()
        if current in self._tracing and current not in self._adopted:
            # An agent run writing its own markers inside trace_run: that span is the
            # run's (one invoke_agent span); trace_run ends it.
            span = current
            span.set_attributes(attributes)
            self._adopted.append(span)
        else:
            span = self._tracer.start_span(
                f"invoke_agent {self.agent_name}",
                attributes=attributes,
                start_time=_ns(entry.started_at),
            )
        previous = self._runs.pop(entry.run_id, None)
        if previous is not None:  # a repeated start marker: the old span ends here
            self._finish(previous)
        self._runs[entry.run_id] = span

    def _finish(self, span: Span, end_time: int | None = None) -> None:
        """End a run's span, unless trace_run owns it (it ends it itself)."""
        if span in self._adopted:
            self._adopted.remove(span)
        else:
            span.end(end_time=end_time)

    def _end(self, entry: RunEndRecord) -> None:
        span = self._runs.pop(entry.run_id, None)
        if span is None:
            return
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("prism.run.outcome", entry.outcome)
        span.set_attribute("prism.run.calls", entry.calls)
        if entry.outcome == "failed":
            span.set_status(Status(StatusCode.ERROR))
            span.set_attribute("error.type", "run_failed")
        self._finish(span, _ns(entry.finished_at))

    def _call(self, record: ToolCallRecord) -> None:
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": record.tool_name,
            "gen_ai.tool.type": _tool_type(record.tool_name),
            "gen_ai.tool.call.id": record.call_id,
            "prism.status": record.status,
        }
        if record.run_id is not None:
            attributes["prism.run.id"] = record.run_id
        if record.blocked_reason is not None:
            attributes["prism.blocked_reason"] = record.blocked_reason
        error = error_type(record)
        if error is not None:
            attributes["error.type"] = error
        if record.decision is not None:
            attributes.update(decision_attributes(record.decision))
        if self.record_arguments:
            attributes["gen_ai.tool.call.arguments"] = json.dumps(record.arguments)
        live = self._live.get(record.call_id)
        if live:
            # A traced call: its span has run since the call started; complete it now.
            span = live.pop()
            span.update_name(f"execute_tool {record.tool_name}")
            span.set_attributes(attributes)
            if error is not None:
                span.set_status(Status(StatusCode.ERROR))
            span.end()
        else:
            parent = self._runs.get(record.run_id or "")
            context = trace.set_span_in_context(parent) if parent is not None else None
            span = self._tracer.start_span(
                f"execute_tool {record.tool_name}",
                context=context,
                kind=SpanKind.INTERNAL,
                attributes=attributes,
                start_time=_ns(record.started_at),
            )
            if error is not None:
                span.set_status(Status(StatusCode.ERROR))
            span.end(end_time=_ns(record.finished_at))
        labels: dict[str, AttributeValue] = {
            "gen_ai.tool.name": record.tool_name,
            "prism.status": record.status,
        }
        if error is not None:
            labels["error.type"] = error
        self._calls.add(1, labels)
        self._duration.record(record.duration_s, labels)

    def close(self) -> None:
        """End the spans of runs that never wrote their end marker (marked interrupted)."""
        runs, self._runs = self._runs, {}
        for span in runs.values():
            span.set_attribute("prism.run.outcome", "interrupted")
            self._finish(span)
