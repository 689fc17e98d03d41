"""The otel extra: ledger records as GenAI-convention spans and metrics (in-memory exporters)."""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra's SDK is not installed")

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from prism.core import (
    DispatchOptions,
    ExecutionAction,
    ExecutionDecision,
    ToolCall,
    ToolDefinition,
    ToolResult,
    assert_execution_allowed,
    create_rule_permission_policy,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.core.ledger import OtelLedgerSink, RunLedger

if TYPE_CHECKING:
    from prism.core import JsonObject, ToolExecutionContext


class _Telemetry:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.metrics = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.metrics])

    def sink(self, **options: Any) -> OtelLedgerSink:
        return OtelLedgerSink(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **options
        )

    def finished(self) -> dict[str, ReadableSpan]:
        return {span.name: span for span in self.spans.get_finished_spans()}

    def points(self, metric: str) -> list[Any]:
        data = self.metrics.get_metrics_data()
        assert data is not None
        found: list[Any] = []
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for item in scope.metrics:
                    if item.name == metric:
                        found.extend(item.data.data_points)
        return found


class _Deny:
    def check(self, action: ExecutionAction) -> ExecutionDecision:
        return ExecutionDecision(
            allowed=False,
            reason="token=supersecretvalue123 is not allowed",
            details={"policy": "coding_approval", "rule": "rm *", "approval": "timed_out"},
        )


async def _ok(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text("fine")


async def _denied(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
    await assert_execution_allowed(_Deny(), ExecutionAction(kind="shell", operation="rm"))
    return ToolResult.text("unreachable")


async def _run(telemetry: _Telemetry, **sink_options: Any) -> RunLedger:
    ledger = RunLedger(sinks=[telemetry.sink(**sink_options)])
    options = DispatchOptions(
        registry=create_tool_registry(
            [
                ToolDefinition(name="read", execute=_ok),
                ToolDefinition(name="rm", execute=_denied),
                ToolDefinition(name="secret", execute=_ok),
            ]
        ),
        permission=create_rule_permission_policy(allow=["*"], deny=["tool:secret:*"]),
        ledger=ledger,
    )
    with ledger.run(label="otel test"):
        for call_id, name, arguments in [
            ("c1", "read", {"path": "a", "password": "hunter2"}),
            ("c2", "rm", {}),
            ("c3", "secret", {}),
        ]:
            await dispatch_tool_call(ToolCall(id=call_id, name=name, arguments=arguments), options)
    return ledger


async def test_each_call_is_an_execute_tool_span_under_the_run_span() -> None:
    telemetry = _Telemetry()
    ledger = await _run(telemetry)
    spans = telemetry.finished()
    run = spans["invoke_agent prism"]
    assert run.attributes is not None
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["prism.run.id"] == ledger.run_id
    assert run.attributes["prism.run.outcome"] == "finished"
    read = spans["execute_tool read"]
    assert read.attributes is not None
    assert read.parent is not None
    assert run.context is not None
    assert read.parent.span_id == run.context.span_id
    assert dict(read.attributes) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "read",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": "c1",
        "prism.status": "ok",
        "prism.run.id": ledger.run_id,
    }
    assert read.status.status_code is StatusCode.UNSET
    record = ledger.records[0]
    assert (read.start_time, read.end_time) == (
        int(record.started_at * 1e9),
        int(record.finished_at * 1e9),
    )


async def test_a_policy_denial_sets_error_type_and_the_decision_attributes() -> None:
    telemetry = _Telemetry()
    await _run(telemetry)
    attributes = telemetry.finished()["execute_tool rm"].attributes
    assert attributes is not None
    assert attributes["error.type"] == "execution_denied"
    assert attributes["prism.decision.gate"] == "execution_policy"
    assert attributes["prism.decision.allowed"] is False
    assert attributes["prism.decision.rule"] == "rm *"
    assert attributes["prism.decision.approval"] == "timed_out"
    assert attributes["prism.decision.timed_out"] is True
    assert telemetry.finished()["execute_tool rm"].status.status_code is StatusCode.ERROR


async def test_a_blocked_call_has_its_reason_as_error_type() -> None:
    telemetry = _Telemetry()
    await _run(telemetry)
    attributes = telemetry.finished()["execute_tool secret"].attributes
    assert attributes is not None
    assert attributes["error.type"] == "permission_denied"
    assert attributes["prism.blocked_reason"] == "permission_denied"
    assert attributes["prism.decision.gate"] == "permission"


async def test_span_attributes_are_redacted_like_the_record() -> None:
    telemetry = _Telemetry()
    await _run(telemetry, record_arguments=True)
    everything = " ".join(
        str(value)
        for span in telemetry.spans.get_finished_spans()
        for value in (span.attributes or {}).values()
    )
    assert "hunter2" not in everything
    assert "supersecretvalue123" not in everything
    assert "[REDACTED]" in everything


async def test_calls_are_counted_and_timed_by_tool_and_status() -> None:
    telemetry = _Telemetry()
    await _run(telemetry)
    counts = {
        (p.attributes["gen_ai.tool.name"], p.attributes["prism.status"]): p.value
        for p in telemetry.points("prism.tool.calls")
    }
    assert counts == {("read", "ok"): 1, ("rm", "error"): 1, ("secret", "blocked"): 1}
    durations = telemetry.points("prism.tool.duration")
    assert sorted(p.count for p in durations) == [1, 1, 1]


async def test_the_run_span_is_a_child_of_the_hosts_current_span() -> None:
    telemetry = _Telemetry()
    host = telemetry.tracer_provider.get_tracer("host")
    with host.start_as_current_span("host request") as outer:
        await _run(telemetry)
    run = telemetry.finished()["invoke_agent prism"]
    assert run.parent is not None
    assert run.parent.span_id == outer.get_span_context().span_id
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_a_run_without_an_end_marker_is_ended_as_interrupted_on_close() -> None:
    telemetry = _Telemetry()
    ledger = RunLedger(sinks=[telemetry.sink(agent_name="coder")])
    ledger.start_run()
    ledger.close()
    span = telemetry.finished()["invoke_agent coder"]
    assert span.attributes is not None
    assert span.attributes["prism.run.outcome"] == "interrupted"


def test_without_opentelemetry_the_sink_says_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from prism.core import ConfigurationError

    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(ConfigurationError, match=r"prismgate-core\[otel\]"):
        OtelLedgerSink()


def test_importing_prism_core_does_not_import_opentelemetry() -> None:
    code = "import sys, prism.core; print(any(m.startswith('opentelemetry') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
