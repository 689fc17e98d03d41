"""Spans that nest: the run, each model request and each call are current while they run."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra's SDK is not installed")

import trio
import trio.lowlevel
import trio.testing
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from prism.core import (
    AbortController,
    AssistantMessage,
    DispatchOptions,
    Limits,
    RunOptions,
    ScriptedProvider,
    SingleShotLoop,
    TextContent,
    ToolCall,
    ToolDefinition,
    ToolResult,
    create_agent,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.core.ledger import CallTracer, JsonlLedgerSink, OtelLedgerSink, RunLedger, read_ledger

if TYPE_CHECKING:
    from pathlib import Path

    from prism.core import JsonObject, ToolExecutionContext


class _Telemetry:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.sink = OtelLedgerSink(tracer_provider=self.provider, agent_name="helper")

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans() if span.name == name]

    def one(self, name: str) -> ReadableSpan:
        [span] = self.named(name)
        return span


def _parent_id(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def _id(span: ReadableSpan) -> int:
    assert span.context is not None
    span_id: int = span.context.span_id
    return span_id


def _tool_with_own_span(telemetry: _Telemetry, name: str) -> ToolDefinition:
    """A tool that opens its own span (as an HTTP or database client would) while it runs."""
    tracer = trace.get_tracer("the-tool", tracer_provider=telemetry.provider)

    async def execute(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        with tracer.start_as_current_span(f"{name} work"):
            await trio.lowlevel.checkpoint()
            async with trio.open_nursery() as nursery:
                # A task the tool starts inherits the context too.
                nursery.start_soon(_child_span, tracer, f"{name} subtask")
        return ToolResult.text("done")

    return ToolDefinition(name=name, execute=execute)


async def _child_span(tracer: trace.Tracer, name: str) -> None:
    with tracer.start_as_current_span(name):
        await trio.lowlevel.checkpoint()


def test_the_otel_sink_is_a_call_tracer_and_the_ledger_finds_it() -> None:
    telemetry = _Telemetry()
    assert isinstance(telemetry.sink, CallTracer)
    assert RunLedger(sinks=[telemetry.sink]).tracer is telemetry.sink
    assert RunLedger().tracer is None


async def test_a_tools_own_spans_nest_under_its_execute_tool_span() -> None:
    telemetry = _Telemetry()
    ledger = RunLedger(sinks=[telemetry.sink])
    options = DispatchOptions(
        registry=create_tool_registry([_tool_with_own_span(telemetry, "fetch")]),
        ledger=ledger,
        tracer=telemetry.sink,
    )
    with ledger.run(label="nesting"):
        await dispatch_tool_call(ToolCall(id="c1", name="fetch", arguments={}), options)
    run = telemetry.one("invoke_agent helper")
    call = telemetry.one("execute_tool fetch")
    work = telemetry.one("fetch work")
    subtask = telemetry.one("fetch subtask")
    assert _parent_id(call) == _id(run)
    assert _parent_id(work) == _id(call)
    assert _parent_id(subtask) == _id(work)
    assert call.attributes is not None
    assert call.attributes["gen_ai.tool.call.id"] == "c1"
    assert call.attributes["gen_ai.tool.type"] == "function"
    assert call.attributes["prism.status"] == "ok"
    # The call's span was open the whole time its tool worked.
    assert call.start_time is not None
    assert work.start_time is not None
    assert call.end_time is not None
    assert work.end_time is not None
    assert call.start_time <= work.start_time
    assert work.end_time <= call.end_time
    assert not trace.get_current_span().get_span_context().is_valid  # nothing left attached


async def test_a_blocked_call_gets_its_span_with_the_error_and_nothing_stays_open() -> None:
    telemetry = _Telemetry()
    ledger = RunLedger(sinks=[telemetry.sink])
    options = DispatchOptions(
        registry=create_tool_registry([]), ledger=ledger, tracer=telemetry.sink
    )
    await dispatch_tool_call(ToolCall(id="x", name="mcp:srv:missing", arguments={}), options)
    span = telemetry.one("execute_tool mcp:srv:missing")
    assert span.attributes is not None
    assert span.attributes["error.type"] == "unknown_tool"
    assert span.attributes["gen_ai.tool.type"] == "extension"
    assert span.status.status_code is StatusCode.ERROR
    assert telemetry.sink._live == {}


async def test_a_traced_call_without_a_record_still_ends_its_span() -> None:
    telemetry = _Telemetry()
    options = DispatchOptions(
        registry=create_tool_registry([_tool_with_own_span(telemetry, "t")]),
        tracer=telemetry.sink,
    )
    await dispatch_tool_call(ToolCall(id="c", name="t", arguments={}), options)
    call = telemetry.one("execute_tool t")
    assert _parent_id(telemetry.one("t work")) == _id(call)
    assert telemetry.sink._live == {}


async def test_a_call_whose_caller_is_cancelled_ends_its_span_as_cancelled() -> None:
    telemetry = _Telemetry()
    ledger = RunLedger(sinks=[telemetry.sink])

    async def hang(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    options = DispatchOptions(
        registry=create_tool_registry([ToolDefinition(name="hang", execute=hang)]),
        ledger=ledger,
        tracer=telemetry.sink,
    )
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                dispatch_tool_call, ToolCall(id="h", name="hang", arguments={}), options
            )
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
    span = telemetry.one("execute_tool hang")
    assert span.attributes is not None
    assert span.attributes["prism.status"] == "cancelled"
    assert span.attributes["error.type"] == "cancelled"


async def test_an_agent_run_is_an_invoke_agent_span_with_chat_and_tool_spans_under_it() -> None:
    telemetry = _Telemetry()
    turns = [
        AssistantMessage(
            tool_calls=(
                ToolCall(id="a", name="one", arguments={}),
                ToolCall(id="b", name="two", arguments={}),
            ),
            input_tokens=120,
            output_tokens=30,
            finish_reason="tool_calls",
            response_model="m-2026",
        ),
        AssistantMessage(
            content=(TextContent(text="done"),),
            input_tokens=180,
            output_tokens=7,
            finish_reason="length",
        ),
    ]
    agent = create_agent(
        model="m",
        provider=ScriptedProvider(turns),
        tools=[_tool_with_own_span(telemetry, "one"), _tool_with_own_span(telemetry, "two")],
        ledger=RunLedger(sinks=[telemetry.sink]),
        loop=SingleShotLoop(concurrency=2),
        limits=Limits(max_tool_rounds=2),
    )
    result = await agent.session().run("go")
    assert [r.status for r in result.records] == ["ok", "ok"]
    run = telemetry.one("invoke_agent helper")
    assert run.parent is None
    assert run.attributes is not None
    assert run.attributes["gen_ai.request.model"] == "m"
    first, second = sorted(telemetry.named("chat m"), key=lambda s: s.start_time or 0)
    for chat in (first, second):
        assert _parent_id(chat) == _id(run)
    assert first.attributes is not None
    assert second.attributes is not None
    assert dict(first.attributes) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m",
        "gen_ai.response.model": "m-2026",
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 30,
        "gen_ai.response.finish_reasons": ("tool_calls",),
    }
    assert second.attributes["gen_ai.response.finish_reasons"] == ("length",)
    assert second.attributes["gen_ai.usage.output_tokens"] == 7
    # The two calls ran at once, each tool's spans under its own call's span.
    for name in ("one", "two"):
        call = telemetry.one(f"execute_tool {name}")
        assert _parent_id(call) == _id(run)
        assert _parent_id(telemetry.one(f"{name} work")) == _id(call)
        assert _parent_id(telemetry.one(f"{name} subtask")) == _id(telemetry.one(f"{name} work"))


async def test_a_failing_model_request_marks_its_chat_and_run_spans() -> None:
    telemetry = _Telemetry()

    class Broken:
        async def complete(self, request: object) -> AssistantMessage:
            raise RuntimeError("upstream 500")

    agent = create_agent(
        model="m", provider=Broken(), tools=[], ledger=RunLedger(sinks=[telemetry.sink])
    )
    with pytest.raises(Exception, match="upstream 500"):
        await agent.session().run("go")
    chat = telemetry.one("chat m")
    run = telemetry.one("invoke_agent helper")
    assert chat.status.status_code is StatusCode.ERROR
    assert run.status.status_code is StatusCode.ERROR
    assert chat.attributes is not None
    assert chat.attributes["error.type"] == "ModelProviderError"


async def test_an_agent_without_a_tracer_makes_no_spans() -> None:
    telemetry = _Telemetry()
    agent = create_agent(
        model="m",
        provider=ScriptedProvider([AssistantMessage(content=(TextContent(text="hi"),))]),
        tools=[],
    )
    assert agent.tracer is None
    await agent.session().run("go")
    assert telemetry.spans() == []


async def test_an_agent_run_alone_writes_its_own_run_markers_and_one_invoke_agent_span(
    tmp_path: Path,
) -> None:
    telemetry = _Telemetry()
    path = tmp_path / "ledger.jsonl"
    ledger = RunLedger(sinks=[telemetry.sink, JsonlLedgerSink(path)])
    turns = [
        AssistantMessage(tool_calls=(ToolCall(id="a", name="one", arguments={}),)),
        AssistantMessage(content=(TextContent(text="done"),)),
        AssistantMessage(content=(TextContent(text="never asked"),)),
    ]
    agent = create_agent(
        model="m",
        provider=ScriptedProvider(turns),
        tools=[_tool_with_own_span(telemetry, "one")],
        ledger=ledger,
    )
    session = agent.session()
    first = await session.run("go")
    stopped = AbortController()
    stopped.abort("the user left")
    second = await session.run("again", RunOptions(signal=stopped.signal))
    ledger.close()
    assert (first.aborted, second.aborted) == (False, True)
    runs = read_ledger(path).runs
    assert [(r.label, r.outcome, r.calls) for r in runs] == [
        ("agent m", "finished", 1),
        ("agent m", "aborted", 0),
    ]
    assert runs[0].run_id != runs[1].run_id  # a later run is never read as an earlier one
    # One invoke_agent span per run (the marker's span is the run's own), with its outcome.
    spans = sorted(telemetry.named("invoke_agent helper"), key=lambda s: s.start_time or 0)
    assert [
        (s.attributes["prism.run.id"], s.attributes["prism.run.outcome"])
        for s in spans
        if s.attributes is not None
    ] == [(runs[0].run_id, "finished"), (runs[1].run_id, "aborted")]
    assert _parent_id(telemetry.one("execute_tool one")) == _id(spans[0])


async def test_an_agent_run_inside_a_ledger_run_writes_no_markers_of_its_own(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = RunLedger(sinks=[JsonlLedgerSink(path)])
    agent = create_agent(
        model="m",
        provider=ScriptedProvider([AssistantMessage(content=(TextContent(text="hi"),))]),
        tools=[],
        ledger=ledger,
    )
    with ledger.run(label="the caller's"):
        await agent.session().run("go")
    assert [(r.label, r.outcome) for r in read_ledger(path).runs] == [("the caller's", "finished")]


async def test_a_failed_agent_run_is_marked_failed() -> None:
    class Broken:
        async def complete(self, request: object) -> AssistantMessage:
            raise RuntimeError("upstream 500")

    seen: list[object] = []

    class Sink:
        def write(self, entry: object) -> None:
            seen.append(entry)

        def close(self) -> None:
            pass

    agent = create_agent(model="m", provider=Broken(), tools=[], ledger=RunLedger(sinks=[Sink()]))
    with pytest.raises(Exception, match="upstream 500"):
        await agent.session().run("go")
    assert [type(e).__name__ for e in seen] == ["RunStartRecord", "RunEndRecord"]
    assert getattr(seen[1], "outcome", None) == "failed"
