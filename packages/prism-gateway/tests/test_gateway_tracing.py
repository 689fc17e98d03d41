"""A client's trace context: the gateway's execute_tool span and its downstream call join it."""

from __future__ import annotations

import json
import os
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import gateway_prewarmed as prewarmed
import httpx2
import mcp_types as types
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from prism.core import create_rule_permission_policy
from prism.core.ledger import OtelLedgerSink, RunLedger
from prism.gateway import HttpOptions, open_gateway, serve_http, serve_stdio
from prism.mcp import StdioTransport, open_mcp_tools

if TYPE_CHECKING:
    from collections.abc import Callable

TRACE_SERVER = Path(__file__).resolve().parent / "gateway_trace_server.py"
TOOL = "mcp__tr__traceparent"

# Two clients' traces: one sent in params._meta, one in the HTTP header.
IN_META = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
IN_HEADER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
# Hostile or broken values the gateway must ignore (the call still runs).
MALFORMED = ("00-" + "z" * 32 + "-" + "1" * 16 + "-01", "x" * 20_000)


def _ids(traceparent: str) -> tuple[int, int]:
    _version, trace_id, span_id, _flags = traceparent.split("-")
    return int(trace_id, 16), int(span_id, 16)


def _text(result: types.CallToolResult) -> str:
    assert not result.is_error, result
    [block] = result.content
    assert isinstance(block, types.TextContent)
    return block.text


def _call_span(spans: list[ReadableSpan], trace_id: int) -> ReadableSpan:
    [span] = [
        s
        for s in spans
        if s.name == "execute_tool mcp:tr:traceparent"
        and s.context is not None
        and s.context.trace_id == trace_id
    ]
    return span


async def test_a_call_joins_the_trace_its_client_sent_in_meta_or_in_the_http_header() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    ledger = RunLedger(sinks=[OtelLedgerSink(tracer_provider=provider)])
    transport = StdioTransport(*prewarmed.command(TRACE_SERVER))
    answers: dict[str, str] = {}
    async with (
        open_mcp_tools(server_id="tr", transport=transport, call_timeout_s=30) as bridge,
        open_gateway(
            bridges=[bridge],
            permission=create_rule_permission_policy(allow=["tool:*:execute"]),
            ledger=ledger,
        ) as gateway,
        trio.open_nursery() as nursery,
    ):
        url = await nursery.start(serve_http, gateway, HttpOptions(host="127.0.0.1", port=0))
        async with Client(url) as client:
            meta = types.RequestParamsMeta(traceparent=IN_META)  # type: ignore[typeddict-unknown-key]
            answers[IN_META] = _text(await client.call_tool(TOOL, {}, meta=meta))
            for bad in MALFORMED:
                meta = types.RequestParamsMeta(traceparent=bad)  # type: ignore[typeddict-unknown-key]
                answers[bad] = _text(await client.call_tool(TOOL, {}, meta=meta))
        for value in (IN_HEADER, *MALFORMED[:1]):
            async with (
                httpx2.AsyncClient(headers={"traceparent": value}) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                answers[f"header {value}"] = _text(await client.call_tool(TOOL, {}))
        nursery.cancel_scope.cancel()
    spans = list(exporter.get_finished_spans())
    for sent, answer in ((IN_META, answers[IN_META]), (IN_HEADER, answers[f"header {IN_HEADER}"])):
        trace_id, client_span = _ids(sent)
        call = _call_span(spans, trace_id)
        # The gateway's span is the client's span's child ...
        assert call.parent is not None
        assert call.parent.span_id == client_span
        assert call.parent.is_remote
        # ... and the downstream server was called from inside it.
        assert call.context is not None
        assert _ids(answer) == (trace_id, call.context.span_id)
    # A malformed traceparent is ignored: the call runs, in a trace of its own.
    known = {_ids(IN_META)[0], _ids(IN_HEADER)[0]}
    others = [s for s in spans if s.context is not None and s.context.trace_id not in known]
    assert len(others) == 3
    assert all(s.parent is None for s in others)
    assert all(answers[key] != "none" for key in answers)  # each downstream call carried its own


def _pipes() -> tuple[Any, Any, int, int]:
    """The gateway's stdin and stdout (anyio files over pipes), and the test's ends."""
    to_gateway, gateway_in = os.pipe()
    gateway_out, from_gateway = os.pipe()
    stdin = anyio.wrap_file(open(to_gateway, encoding="utf-8"))  # noqa: SIM115
    stdout = anyio.wrap_file(open(from_gateway, "w", encoding="utf-8"))  # noqa: SIM115
    return stdin, stdout, gateway_in, gateway_out


async def test_over_stdio_a_call_joins_the_trace_its_client_sent_in_meta(
    initialize: Callable[..., dict[str, Any]],
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    ledger = RunLedger(sinks=[OtelLedgerSink(tracer_provider=provider)])
    transport = StdioTransport(*prewarmed.command(TRACE_SERVER))
    sent = "00-5bf92f3577b34da6a3ce929d0e0e4737-10f067aa0ba902b8-01"
    stdin, stdout, gateway_in, gateway_out = _pipes()
    writer = trio.lowlevel.FdStream(gateway_in)
    reader = trio.lowlevel.FdStream(gateway_out)
    buffer = b""

    async def receive(request_id: int) -> dict[str, Any]:
        nonlocal buffer
        while True:
            while b"\n" not in buffer:
                chunk = await reader.receive_some()
                assert chunk, buffer
                buffer += chunk
            line, buffer = buffer.split(b"\n", 1)
            message: dict[str, Any] = json.loads(line)
            if message.get("id") == request_id:
                return message

    async with (
        open_mcp_tools(server_id="tr", transport=transport, call_timeout_s=30) as bridge,
        open_gateway(
            bridges=[bridge],
            permission=create_rule_permission_policy(allow=["tool:*:execute"]),
            ledger=ledger,
        ) as gateway,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(partial(serve_stdio, gateway, stdin=stdin, stdout=stdout))
        with trio.fail_after(60):
            await writer.send_all(json.dumps(initialize()).encode() + b"\n")
            await receive(1)
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await writer.send_all(json.dumps(initialized).encode() + b"\n")
            params = {"name": TOOL, "arguments": {}, "_meta": {"traceparent": sent}}
            call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}
            await writer.send_all(json.dumps(call).encode() + b"\n")
            answer = await receive(2)
            await writer.aclose()  # end of input: the gateway stops serving
    for stream in (reader, stdin, stdout):
        await stream.aclose()
    trace_id, client_span = _ids(sent)
    span = _call_span(list(exporter.get_finished_spans()), trace_id)
    assert span.parent is not None
    assert span.parent.span_id == client_span
    assert span.context is not None
    [block] = answer["result"]["content"]
    assert _ids(block["text"]) == (trace_id, span.context.span_id)
