"""An MCP server reports the trace it received: each call's span is passed on in ``_meta``,
and over Streamable HTTP in the ``traceparent`` header too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import trio

pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK is not installed")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from prism.core import DispatchOptions, ToolCall, create_tool_registry, dispatch_tool_call
from prism.core.ledger import OtelLedgerSink, RunLedger
from prism.mcp import StdioTransport, StreamableHttpTransport, open_mcp_tools

SERVER = StdioTransport(sys.executable, [str(Path(__file__).with_name("mcp_trace_server.py"))])


async def test_an_mcp_server_receives_the_trace_of_the_call_that_asked_it() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sink = OtelLedgerSink(tracer_provider=provider)
    with trio.fail_after(30):
        async with open_mcp_tools(server_id="tr", transport=SERVER, protocol="legacy") as bridge:
            options = DispatchOptions(
                registry=create_tool_registry(bridge.tools),
                ledger=RunLedger(sinks=[sink]),
                tracer=sink,
            )
            call = ToolCall(id="c1", name="mcp:tr:whoami", arguments={})
            traced = await dispatch_tool_call(call, options)
            untraced = await dispatch_tool_call(
                call, DispatchOptions(registry=create_tool_registry(bridge.tools))
            )
    [span] = [s for s in exporter.get_finished_spans() if s.name == "execute_tool mcp:tr:whoami"]
    assert span.context is not None
    version, trace_id, parent_id, flags = traced.joined_text.split("-")
    assert version == "00"
    assert int(trace_id, 16) == span.context.trace_id
    assert int(parent_id, 16) == span.context.span_id  # the call's own span, current then
    assert int(flags, 16) & 1  # sampled
    assert span.attributes is not None
    assert span.attributes["gen_ai.tool.type"] == "extension"
    assert untraced.joined_text == "none"  # no span current, nothing sent


async def test_an_http_mcp_server_receives_the_calls_trace_as_http_headers() -> None:
    """The SDK sends each HTTP request from a task of its own: the headers still say the call."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sink = OtelLedgerSink(tracer_provider=provider)
    argv = [sys.executable, str(Path(__file__).with_name("mcp_trace_http_server.py"))]
    process = await trio.lowlevel.open_process(argv, stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None
        line = b""
        with trio.fail_after(60):
            while not line.endswith(b"\n"):
                chunk = await process.stdout.receive_some()
                assert chunk, line
                line += chunk
        url = line.decode().strip()
        with trio.fail_after(60):
            async with open_mcp_tools(
                server_id="th", transport=StreamableHttpTransport(url)
            ) as bridge:
                registry = create_tool_registry(bridge.tools)
                options = DispatchOptions(
                    registry=registry, ledger=RunLedger(sinks=[sink]), tracer=sink
                )
                call = ToolCall(id="c1", name="mcp:th:headers", arguments={})
                traced = await dispatch_tool_call(call, options)
                untraced = await dispatch_tool_call(call, DispatchOptions(registry=registry))
    finally:
        process.kill()
        await process.wait()
    [span] = [s for s in exporter.get_finished_spans() if s.name == "execute_tool mcp:th:headers"]
    assert span.context is not None
    header, _state = traced.joined_text.split(" ")
    _version, trace_id, parent_id, _flags = header.split("-")
    assert int(trace_id, 16) == span.context.trace_id
    assert int(parent_id, 16) == span.context.span_id  # the call's span, not the SDK task's
    assert untraced.joined_text == "none none"
