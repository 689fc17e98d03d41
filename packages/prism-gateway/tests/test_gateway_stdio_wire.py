"""serve_stdio in this process, byte by byte, with fd 0 and fd 1 swapped for pipes."""

from __future__ import annotations

import fcntl
import functools
import json
import os
import re
import tracemalloc
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import gateway_prewarmed as prewarmed
import mcp_types as types
import pytest
import trio
import trio.testing
from gateway_std_fds import std_fds_on_pipes
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.shared.message import SessionMessage
from mcp_types import methods as types_methods

from prism.core import (
    ExecutionAction,
    JsonObject,
    JsonValue,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    create_rule_permission_policy,
)
from prism.core.ledger import RunLedger
from prism.gateway import (
    DownstreamServer,
    Gateway,
    GatewayError,
    ToolHints,
    _upstream,
    create_gateway_approver,
    open_gateway,
    serve_stdio,
)
from prism.gateway._fast import StdioFastPath
from prism.gateway._gateway import LONE_SURROGATE
from prism.gateway._stdio import LineWriter
from prism.mcp import McpToolBridge, StdioTransport, open_mcp_tools
from prism.validation.jsonschema import create_json_schema_tool_validator

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    Initialize = Callable[..., dict[str, Any]]

LIMIT = 4096
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


async def _stray_output(_args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    # What a careless tool (or a child process) might do while serving.
    os.write(1, b"stray output\n")
    return ToolResult.text(f"fd 0 reads {os.read(0, 10)!r}")


class _Peer:
    """The client's side of the pipes."""

    def __init__(self, stdin: int, stdout: int) -> None:
        self.stdin = trio.lowlevel.FdStream(stdin)
        self.stdout = trio.lowlevel.FdStream(stdout)
        self.buffer = b""
        self.serving = trio.CancelScope()  # serve_stdio's

    async def send(self, data: bytes | dict[str, Any]) -> None:
        raw = data if isinstance(data, bytes) else json.dumps(data).encode() + b"\n"
        await self.stdin.send_all(raw)

    async def receive(self) -> Any:
        return json.loads(await self.receive_line())

    async def receive_line(self) -> bytes:
        while b"\n" not in self.buffer:
            chunk = await self.stdout.receive_some()
            assert chunk, "the gateway closed its stdout"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line


@asynccontextmanager
async def _served(gateway: Gateway, **options: Any) -> AsyncIterator[_Peer]:
    """``serve_stdio(gateway)`` on this process's (swapped) fd 0 and 1; ends at EOF."""
    with std_fds_on_pipes() as (stdin, stdout):
        peer = _Peer(stdin, stdout)
        async with trio.open_nursery() as nursery, peer.stdout:

            async def serve() -> None:
                with peer.serving:
                    await serve_stdio(gateway, **options)

            nursery.start_soon(serve)
            with trio.fail_after(30):
                async with peer.stdin:
                    yield peer


async def test_hostile_lines_get_parse_errors_and_the_session_goes_on(
    initialize: Initialize,
) -> None:
    tool = ToolDefinition(name="stray", execute=_stray_output)
    async with (
        open_gateway(tools=[tool]) as gateway,
        _served(gateway, max_message_bytes=LIMIT) as peer,
    ):
        # Not JSON; blank; a line over the limit; a line far over it.
        await peer.send(b"this is not json\n\n")
        await peer.send(b'{"x": "' + b"y" * LIMIT + b'"}\n')
        # (larger than a pipe holds, so the gateway reads it in several pieces)
        await peer.send(b"z" * 200_000 + b"\n")
        await peer.send(initialize())
        bad, long_one, long_split, init = [await peer.receive() for _ in range(4)]
        await peer.send(INITIALIZED)
        call = {"name": "stray", "arguments": {}}
        await peer.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
        result = await peer.receive()
        # A last line without its newline, then EOF: serving ends cleanly.
        await peer.send(json.dumps(INITIALIZED).encode())
    assert bad["id"] is None
    assert bad["error"]["code"] == -32700
    assert "not a JSON-RPC message" in bad["error"]["message"]
    for refused in (long_one, long_split):
        assert refused["error"] == {"code": -32700, "message": f"message longer than {LIMIT} bytes"}
    assert init["id"] == 1
    assert init["result"]["serverInfo"]["name"] == "prism-gateway"
    # The tool's stray write missed the wire, and it read EOF from fd 0.
    assert result["id"] == 2
    assert result["result"]["content"] == [{"type": "text", "text": "fd 0 reads b''"}]


async def test_a_line_that_would_cost_too_much_to_parse_is_refused_unparsed(
    initialize: Initialize,
) -> None:
    """An attacker's 15.7 MB line of '[]' cost the gateway +937 MB and 4 s to build
    before the validator refused it. A client's line is priced on its bytes first."""
    items = b",".join([b"[]"] * 100_000)
    flood = (
        b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", '
        b'"params": {"name": "stray", "arguments": {"a": [' + items + b"]}}}\n"
    )
    async with open_gateway() as gateway, _served(gateway) as peer:
        await peer.send(initialize())
        await peer.receive()
        await peer.send(INITIALIZED)
        await peer.send(flood)
        refused = await peer.receive()
        await peer.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
        pong = await peer.receive()
    assert refused["id"] is None
    assert refused["error"]["code"] == -32700
    assert refused["error"]["message"].startswith(
        "the client sent a message of 100004 objects and arrays"
    )
    assert pong == {"jsonrpc": "2.0", "id": 3, "result": {}}


async def _big(arguments: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text(str(arguments["fill"]) * 300_000)


async def test_replies_larger_than_the_pipe_arrive_whole(initialize: Initialize) -> None:
    # Each reply is over 64 KiB, more than a pipe takes at once: the sender writes what
    # fits, the writer task the rest, and replies ready meanwhile wait their turn
    # behind it; every line arrives whole.
    tool = ToolDefinition(name="big", execute=_big)
    async with open_gateway(tools=[tool]) as gateway, _served(gateway) as peer:
        await peer.send(initialize())
        assert (await peer.receive())["id"] == 1
        await peer.send(INITIALIZED)
        for request_id, fill in ((2, "a"), (3, "b"), (4, "c")):
            call = {"name": "big", "arguments": {"fill": fill}}
            await peer.send(
                {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": call}
            )
        await peer.send({"jsonrpc": "2.0", "id": 5, "method": "ping"})
        replies = {reply["id"]: reply for reply in [await peer.receive() for _ in range(4)]}
        await peer.send({"jsonrpc": "2.0", "id": 6, "method": "ping"})
        last = await peer.receive()
    for request_id, fill in ((2, "a"), (3, "b"), (4, "c")):
        content = replies[request_id]["result"]["content"]
        assert content == [{"type": "text", "text": fill * 300_000}]
    assert replies[5]["result"] == {}
    assert last == {"jsonrpc": "2.0", "id": 6, "result": {}}


async def test_a_second_serve_stdio_in_one_process_is_refused(initialize: Initialize) -> None:
    async with open_gateway() as gateway, _served(gateway) as peer:
        await peer.send(initialize())
        assert (await peer.receive())["id"] == 1  # the first one serves
        with pytest.raises(GatewayError, match="already serves"):
            await serve_stdio(gateway)


async def test_explicit_streams_are_served_by_the_sdk_transport(initialize: Initialize) -> None:
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    stdin = anyio.wrap_file(os.fdopen(stdin_r, "r", encoding="utf-8"))
    stdout = anyio.wrap_file(os.fdopen(stdout_w, "w", encoding="utf-8"))
    peer = _Peer(stdin_w, stdout_r)
    async with open_gateway() as gateway, trio.open_nursery() as nursery, peer.stdout:
        nursery.start_soon(lambda: serve_stdio(gateway, stdin=stdin, stdout=stdout))
        with trio.fail_after(30):
            async with peer.stdin:
                await peer.send(initialize())
                init = await peer.receive()
    await stdin.aclose()
    await stdout.aclose()
    assert init["result"]["serverInfo"]["name"] == "prism-gateway"


async def test_a_client_that_stops_reading_does_not_stop_the_gateway(
    initialize: Initialize,
) -> None:
    async with open_gateway() as gateway, _served(gateway) as peer:
        await peer.send(initialize())
        assert (await peer.receive())["id"] == 1
        await peer.stdout.aclose()  # gone: the next reply cannot be written
        await peer.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
    # serve_stdio returned when stdin closed, with no error.


async def test_a_closed_stdin_is_a_gateway_error() -> None:
    saved = os.dup(0)
    os.close(0)
    try:
        async with open_gateway() as gateway:
            with pytest.raises(GatewayError, match="cannot serve MCP over stdin and stdout"):
                await serve_stdio(gateway)
    finally:
        os.dup2(saved, 0)
        os.close(saved)


def _ping(request_id: int, pad: int = 0) -> SessionMessage:
    params = {"pad": "x" * pad} if pad else None
    return SessionMessage(
        types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method="ping", params=params)
    )


async def test_the_line_writer_keeps_lines_whole_and_in_order() -> None:
    read_end, write_end = os.pipe()
    writer = LineWriter(trio.lowlevel.FdStream(write_end))
    peer = _Peer(os.open(os.devnull, os.O_WRONLY), read_end)
    waiting = trio.CancelScope()

    async def third() -> None:
        with waiting:
            await writer.send(_ping(3))

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery, peer.stdout, peer.stdin:
            nursery.start_soon(writer.drain)
            await writer.send(_ping(1, 200_000))  # more than the pipe takes: begun, then drained
            await writer.send(_ping(2))  # held behind it
            nursery.start_soon(third)  # waits its turn...
            await trio.testing.wait_all_tasks_blocked()
            waiting.cancel()  # ...and is cancelled before it was handed on: never written
            lines = [await peer.receive() for _ in range(2)]
            await writer.send(_ping(4))
            lines.append(await peer.receive())
            writer.finish()
            with pytest.raises(anyio.BrokenResourceError):
                await writer.send(_ping(5))
    assert [line["id"] for line in lines] == [1, 2, 4]
    assert len(lines[0]["params"]["pad"]) == 200_000


async def test_the_line_writer_stops_writing_once_the_client_is_gone() -> None:
    read_end, write_end = os.pipe()
    writer = LineWriter(trio.lowlevel.FdStream(write_end))
    os.close(read_end)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer.drain)
        await writer.send(_ping(1))  # the broken pipe: dropped, as the client is gone
        with pytest.raises(anyio.BrokenResourceError):
            await writer.send(_ping(2))
        writer.finish()


# A stdio client's tools/call: the fast path (the line handed to the SDK dispatcher's
# request runner directly) against the SDK's whole path, byte for byte, at both eras.

ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


async def _echo(arguments: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text(f"echo {arguments.get('text')}")


async def _fails(_arguments: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.error("it failed")


async def _raises(_arguments: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    raise RuntimeError("the tool broke")


async def _progress(_arguments: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
    ctx.report_progress("half", progress=1, total=2)
    ctx.report_progress("all", progress=2, total=2)
    return ToolResult(content=(), structured={"done": True})


async def _lone(arguments: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
    # A lone surrogate ("\ud800" is valid JSON; no UTF-8 holds it) where a local tool
    # may put one: no answer can carry it.
    where = arguments.get("where")
    if where == "raise":
        raise RuntimeError("broke on \ud800")
    if where == "progress":
        ctx.report_progress("half \udfff", progress=1, total=2)
        return ToolResult.text("done")
    if where == "key":
        return ToolResult(content=(), structured={"k\udc00": 1})
    return ToolResult.text("bad \ud800 text")


async def _shaped(arguments: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    # Its structuredContent matches its outputSchema (_SHAPED) or not.
    count: JsonValue = 3 if arguments.get("valid") else "three"
    return ToolResult(content=(), structured={"count": count})


_SHAPED = ToolHints(
    output_schema={
        "type": "object",
        "properties": {"count": {"type": "integer"}},
        "required": ["count"],
    }
)
_APPROVER = create_gateway_approver()


async def _ask(arguments: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    # An action that needs approval: the gateway asks the calling client.
    decision = await _APPROVER(
        ExecutionAction(kind="shell", operation="ask", command=f"touch f{arguments.get('n')}")
    )
    return ToolResult.text(f"approved: {decision.approved} ({decision.reason})")


def _fast_tools(
    hang_started: trio.Event, hang_ended: trio.Event, held: trio.Event | None = None
) -> list[ToolDefinition]:
    async def hang(_arguments: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        hang_started.set()
        try:
            await trio.sleep_forever()
        finally:
            hang_ended.set()

    async def hold(_arguments: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        if held is not None:
            held.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    text: JsonObject = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "additionalProperties": False,
    }
    return [
        ToolDefinition(name="echo", execute=_echo, parameters=text),
        ToolDefinition(name="secret", execute=_echo),
        ToolDefinition(name="fails", execute=_fails),
        ToolDefinition(name="raises", execute=_raises),
        ToolDefinition(name="progress", execute=_progress),
        ToolDefinition(name="hang", execute=hang),
        ToolDefinition(name="hold", execute=hold),
        ToolDefinition(name="lone", execute=_lone),
        ToolDefinition(name="shaped", execute=_shaped),
        ToolDefinition(name="ask", execute=_ask),
    ]


def _call(request_id: object, name: object, arguments: object = None, **meta: object) -> bytes:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    if meta:
        params["_meta"] = meta
    request = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    return json.dumps(request).encode() + b"\n"


# (request id, tool, arguments): every gate, an error result, a raising tool, an unknown
# tool (a JSON-RPC error), absent arguments, a string id, a malformed name.
_SCRIPT: list[tuple[object, object, object]] = [
    (10, "echo", {"text": "hi"}),
    (11, "echo", {"text": 5}),  # argument validation refuses it
    (12, "echo", None),
    ("s-13", "secret", {}),  # the permission policy denies it
    (14, "fails", {}),
    (15, "raises", {}),
    (16, "nope", {}),
    (17, 5, {}),
    # Nested past the validator's max_instance_depth (64): refused by its instance limits.
    (22, "echo", {"text": json.loads("[" * 70 + "]" * 70)}),
    # A local tool's lone surrogate: an error result naming it, on every path.
    (24, "lone", {"where": "text"}),
    (25, "lone", {"where": "key"}),
    (26, "lone", {"where": "raise"}),
    # A tool with an outputSchema: its structuredContent matching it, then not.
    (28, "shaped", {"valid": True}),
    (29, "shaped", {"valid": False}),
]


_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
_APPROVAL_REPLIES: list[dict[str, Any]] = [
    {"action": "accept", "content": {"approve": True}},
    {"action": "decline"},
    {"action": "cancel"},
]
_REQUEST_STATE = re.compile(rb'"requestState":"[^"]*"')


def _left_to_the_sdk(meta: dict[str, Any]) -> list[tuple[bytes, object]]:
    """Lines the fast path leaves to the SDK's whole path, and the id each is answered with."""
    call = {"name": "echo", "arguments": {"text": "x"}, "_meta": meta}
    request = {"jsonrpc": "2.0", "id": 30, "method": "tools/call", "params": call}

    def line(**changes: object) -> bytes:
        return json.dumps({**request, **changes}).encode() + b"\n"

    traced = {**meta, "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    return [
        (b'{"jsonrpc": "2.0", "method": "tools/call", \n', None),  # not JSON
        (line(id=31, params={**call, "_meta": traced}), 31),  # a trace context
        # An id neither an int nor a string: -32600, as over HTTP (the SDK took it for a
        # notification, ran nothing and answered nothing: its client waited for ever).
        (line(id=1.5), None),
        (line(id=True), None),
        (line(id=None), None),
        (line(id=33, extra=1), 33),
        (line(id=34, params={**call, "task": {}}), 34),  # task-augmented
        (line(id=35, params={**call, "_meta": [1]}), 35),
        (line(id=36, params="x"), None),
        (line(id=37, jsonrpc="1.0"), None),
        # A lone surrogate anywhere (the SDK's parser refuses it; no answer could carry
        # one, nor the ledger's reader print it): a parse error, nothing run.
        (line(id="\ud800"), None),
        (line(id=42, params={**call, "name": "\ud800"}), None),
        (line(id=43, params={**call, "_meta": {**meta, "progressToken": "\ud800"}}), None),
        (line(id=38, params={**call, "_meta": {**meta, **ENVELOPE}}), 38),  # era check
        # Nested deeper than json.loads goes (RecursionError): the SDK's parse error.
        (line(id=39, params={**call, "arguments": {"a": "DEEP"}})
         .replace(b'"DEEP"', b"[" * 100_000 + b"]" * 100_000), None),
        # A cancellation, then a request of that id, in one chunk: the request is not
        # taken ahead of the cancellation (which then cancels nothing), and is answered.
        (json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": 40}}).encode() + b"\n" + line(id=40), 40),
    ]  # fmt: skip


async def _exchange(
    modern: bool, initialize: Initialize
) -> tuple[list[bytes], list[tuple[Any, ...]]]:
    """Every line the gateway writes for the script, and what its ledger recorded."""
    hang_started = trio.Event()
    hang_ended = trio.Event()
    held = trio.Event()
    ledger = RunLedger()
    events: list[str] = []
    meta = dict(ENVELOPE) if modern else {}
    lines: list[bytes] = []

    async def answer(peer: _Peer, request_id: object) -> None:
        while True:
            line = await peer.receive_line()
            lines.append(line)
            if json.loads(line).get("id") == request_id:
                return

    async with (
        open_gateway(
            tools=_fast_tools(hang_started, hang_ended, held),
            permission=create_rule_permission_policy(
                allow=["tool:*:execute"], deny=["tool:secret:execute"]
            ),
            validator=create_json_schema_tool_validator(),
            ledger=ledger,
            on_event=lambda event: events.append(type(event).__name__),
            max_concurrent_calls=1,  # one call at a time: a second one waits for its slot
            hints={"shaped": _SHAPED},
        ) as gateway,
        _served(gateway) as peer,
    ):
        if not modern:  # (a 2026-07-28 client declares it in each request that may ask)
            await peer.send(initialize(capabilities={"elicitation": {"form": {}}}))
            await answer(peer, 1)
            await peer.send(INITIALIZED)
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        if modern:
            listing["params"] = {"_meta": meta}
        await peer.send(listing)  # the first request the SDK handles: the era is known
        await answer(peer, 2)
        for request_id, name, arguments in _SCRIPT:
            await peer.send(_call(request_id, name, arguments, **meta))
            await answer(peer, request_id)
        # No envelope: a 2026-07-28 client's request is refused by the envelope's check.
        await peer.send(_call(41, "echo", {"text": "bare"}))
        await answer(peer, 41)
        for n, (raw, answered) in enumerate(_left_to_the_sdk(meta)):
            await peer.send(raw)
            if answered is not None:
                await answer(peer, answered)
            # A ping after each: whatever the line got (a parse error, nothing) comes first.
            await peer.send({"jsonrpc": "2.0", "id": 900 + n, "method": "ping"})
            await answer(peer, 900 + n)
        await peer.send(_call(18, "progress", {}, progressToken="p-18", **meta))
        await answer(peer, 18)
        # Progress whose message holds a lone surrogate goes without the message.
        await peer.send(_call(27, "lone", {"where": "progress"}, progressToken="p-27", **meta))
        await answer(peer, 27)
        # An approval question (the gateway's own elicitation), answered each way.
        asking = {**meta, _CAPABILITIES: {"elicitation": {"form": {}}}} if modern else {}
        for n, reply in enumerate(_APPROVAL_REPLIES):
            await peer.send(_call(f"ask-{n}", "ask", {"n": n}, **asking))
            line = await peer.receive_line()
            lines.append(_REQUEST_STATE.sub(b'"requestState":"-"', line))  # (random)
            asked = json.loads(line)
            if modern:  # an input_required answer: the call is made again with the reply
                (key,) = asked["result"]["inputRequests"]
                params = {
                    "name": "ask",
                    "arguments": {"n": n},
                    "inputResponses": {key: reply},
                    "requestState": asked["result"]["requestState"],
                    "_meta": asking,
                }
                retry = {"jsonrpc": "2.0", "id": f"ask-{n}-r", "method": "tools/call"}
                await peer.send({**retry, "params": params})
                await answer(peer, f"ask-{n}-r")
            else:  # a request of the gateway's, in the middle of the call
                assert asked["method"] == "elicitation/create"
                await peer.send({"jsonrpc": "2.0", "id": asked["id"], "result": reply})
                await answer(peer, f"ask-{n}")
        # Cancelled by the client: never answered, recorded as cancelled.
        await peer.send(_call(19, "hang", {}, **meta))
        await hang_started.wait()
        await peer.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                         "params": {"requestId": 19}})  # fmt: skip
        await hang_ended.wait()
        await peer.send({"jsonrpc": "2.0", "id": 20, "method": "ping"})
        await answer(peer, 20)
        # Still running when serving is cancelled (the gateway shuts down): answered.
        await peer.send(_call(21, "hold", {}, **meta))
        await held.wait()
        # It holds the one slot: this call waits for it, unanswered, until serving ends.
        await peer.send(_call(23, "echo", {"text": "waits"}, **meta))
        await trio.testing.wait_all_tasks_blocked()
        peer.serving.cancel()
        # (both cancelled at once: in either order)
        lines.extend(sorted([await peer.receive_line(), await peer.receive_line()]))
    recorded: list[tuple[Any, ...]] = [
        (r.call_id, r.tool_name, r.status, r.blocked_reason, r.arguments, r.result_preview)
        for r in ledger.records
    ]
    return lines, [*recorded, tuple(events)]


def _context_seen(ctx: Any) -> tuple[Any, ...]:
    """A request context's members (each object by its type and members, down to the
    connection: the one who runs the request differs, what it holds may not)."""
    session = ctx.session
    connection = session._connection
    outbound = session._request_outbound
    inner = getattr(outbound, "_inner", outbound)
    return (
        type(ctx),
        ctx.lifespan_context,
        ctx.protocol_version,
        ctx.method,
        re.sub('"requestState": "[^"]*"', "-", json.dumps(ctx.params, sort_keys=True)),  # (random)
        ctx.request_id,
        ctx.meta,
        ctx.request,
        ctx.close_sse_stream,
        ctx.close_standalone_sse_stream,
        type(session),
        sorted(vars(session)),
        session._log_is_request_scoped,
        session._allowed_log_levels,
        type(outbound),
        type(inner),
        inner.request_id,
        inner.message_metadata,
        type(connection),
        connection.protocol_version,
        connection.client_params,
        connection.client_capabilities,
        connection.initialize_accepted,
    )


@pytest.mark.parametrize("modern", [False, True], ids=["2025-11-25", "2026-07-28"])
async def test_the_fast_path_answers_byte_for_byte_as_the_sdk_path(
    modern: bool, initialize: Initialize, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken: list[bytes] = []
    take = StdioFastPath.take

    def counted(self: StdioFastPath, line: bytes) -> bool:
        took = take(self, line)
        if took:
            taken.append(line)
        return took

    contexts: list[tuple[Any, ...]] = []
    on_call_tool = Gateway._on_call_tool

    async def seen(self: Gateway, ctx: Any, *args: Any) -> Any:
        contexts.append(_context_seen(ctx))
        return await on_call_tool(self, ctx, *args)

    monkeypatch.setattr(Gateway, "_on_call_tool", seen)
    monkeypatch.setattr(StdioFastPath, "take", lambda _self, _line: False)
    slow_lines, slow_records = await _exchange(modern, initialize)
    slow_contexts = contexts[:]
    del contexts[:]
    monkeypatch.setattr(StdioFastPath, "take", counted)
    fast_lines, fast_records = await _exchange(modern, initialize)
    assert fast_lines == slow_lines
    assert fast_records == slow_records
    # The handler's request context: what the SDK's runner makes, member by member
    assert contexts == slow_contexts
    assert len(contexts) == len(_SCRIPT) + 12 + modern * 3  # (+ the approvals' retries)
    # Every call of the script went the fast way (the malformed name is refused by the
    # SDK's request check on it too), and every gate fired on it; the odd lines did not
    # (but the envelope's, from a 2026-07-28 client).
    left = [raw.rstrip(b"\n") for raw, _ in _left_to_the_sdk(dict(ENVELOPE) if modern else {})]
    # (the request behind the cancellation goes either way: the fast one once the SDK
    # dispatched the cancellation, which it may or may not have done by then)
    taken = [line for line in taken if line != left[-1].split(b"\n")[1]]
    assert len(taken) == len(_SCRIPT) + 9 + modern  # (an approval's retry goes the SDK's way)
    assert [raw for raw in left if raw in taken] == (left[-3:-2] if modern else [])
    answers = {json.loads(line).get("id"): json.loads(line) for line in fast_lines}
    assert answers[10]["result"]["content"] == [{"type": "text", "text": "echo hi"}]
    assert answers[11]["result"]["isError"] is True  # validation
    assert "denied" in answers["s-13"]["result"]["content"][0]["text"].lower()  # permission
    assert answers[16]["error"]["code"] == types.INVALID_PARAMS  # unknown tool
    assert 19 not in answers  # cancelled: no answer
    assert answers[21]["error"]["code"] == types.CONNECTION_CLOSED  # serving ended
    assert answers[23]["error"]["code"] == types.CONNECTION_CLOSED  # still waiting for its slot
    assert "max_instance_depth=64" in answers[22]["result"]["content"][0]["text"]
    events = fast_records[-1]  # (the same on both paths: compared above)
    assert events.count("ToolExecutionBlocked") == 3  # permission, validation, depth
    assert events.count("ToolExecutionProgress") == 3
    # hang and hold started and ended in errors; 23 never started (no slot)
    assert events[-4:] == ("ToolExecutionStarted", "ToolExecutionError") * 2
    progress = [json.loads(line) for line in fast_lines if b"notifications/progress" in line]
    assert [p["params"]["progressToken"] for p in progress] == ["p-18", "p-18", "p-27"]
    assert progress[2]["params"] == {"progressToken": "p-27", "progress": 1, "total": 2}
    # A local tool's lone surrogate (in a text, a key, an exception's message): before,
    # a JSON-RPC error of code 0 (the encoder's words), or U+FFFD written for a key.
    for request_id in (24, 25, 26):
        refused = answers[request_id]["result"]
        assert refused["content"] == [{"type": "text", "text": f"result refused: {LONE_SURROGATE}"}]
        assert refused["isError"] is True
    assert answers[27]["result"]["content"] == [{"type": "text", "text": "done"}]
    # structuredContent goes as the tool gave it, matching its outputSchema or not
    assert answers[28]["result"]["structuredContent"] == {"count": 3}
    assert answers[29]["result"]["structuredContent"] == {"count": "three"}
    # The approval question, accepted, declined, cancelled: the tool ran with the answer.
    said = [answers[f"ask-{n}-r" if modern else f"ask-{n}"] for n in range(3)]
    assert [answer["result"]["content"][0]["text"] for answer in said] == [
        "approved: True (approved by the client)",
        "approved: False (declined by the client)",
        "approved: False (cancelled by the client)",
    ]
    if modern:
        assert all(
            answers[f"ask-{n}"]["result"]["resultType"] == "input_required" for n in range(3)
        )
    assert ("error" in answers[41]) is modern
    invalid = [line for line in fast_lines if b'"id":null,"error":{"code":-32600' in line]
    assert (
        invalid
        == [
            b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: '
            b'a request id must be a string or an integer"}}'
        ]
        * 3
    )
    statuses = {record[1]: record[2] for record in fast_records}
    assert statuses["secret"] == "blocked"
    assert statuses["hang"] == "cancelled"
    assert statuses["raises"] == "error"


async def test_a_server_with_middleware_of_its_own_gets_every_call_through_it(
    initialize: Initialize,
) -> None:
    seen: list[str] = []

    async def middleware(ctx: Any, call_next: Any) -> Any:
        seen.append(ctx.method)
        return await call_next(ctx)

    tool = ToolDefinition(name="echo", execute=_echo)
    async with open_gateway(tools=[tool]) as gateway:
        gateway.server.middleware.append(middleware)
        async with _served(gateway) as peer:
            await peer.send(initialize())
            await peer.receive()
            await peer.send(INITIALIZED)
            await peer.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
            await peer.receive()
            for request_id in (3, 4):
                await peer.send(_call(request_id, "echo", {"text": "hi"}))
                assert (await peer.receive())["result"]["content"][0]["text"] == "echo hi"
    assert seen == [
        "initialize",
        "notifications/initialized",
        "tools/list",
        "tools/call",
        "tools/call",
    ]


@pytest.mark.parametrize("modern", [False, True], ids=["2025-11-25", "2026-07-28"])
async def test_a_call_read_later_never_overtakes_a_cancellation_the_sdk_has_not_dispatched(
    modern: bool, initialize: Initialize, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK's runner relays each message the reader hands it through a channel, to its
    read loop: a call in the next read must wait until that loop dispatched what came
    before. Here the loop is slow to dispatch a cancellation of call 19, and the client
    reuses id 19 for its next call meanwhile (a read of its own): taken ahead of the
    cancellation, the new call took the id's place, the cancellation missed the running
    call, and that call ran on.
    """
    from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

    hang_started = trio.Event()
    hang_ended = trio.Event()
    meta = dict(ENVELOPE) if modern else {}
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 19}}
    dispatch = JSONRPCDispatcher._dispatch
    peers: list[_Peer] = []

    async def slow_to_dispatch(self: Any, item: Any, *args: Any) -> None:
        message = getattr(item, "message", None)
        if getattr(message, "method", None) == "notifications/cancelled":
            # The next call arrives (a read of its own) before this loop dispatches the
            # cancellation; every other task runs until it waits.
            await peers[0].send(_call(19, "echo", {"text": "after"}, **meta))
            await trio.testing.wait_all_tasks_blocked()
        await dispatch(self, item, *args)

    monkeypatch.setattr(JSONRPCDispatcher, "_dispatch", slow_to_dispatch)
    async with (
        open_gateway(tools=_fast_tools(hang_started, hang_ended)) as gateway,
        _served(gateway) as peer,
    ):
        peers.append(peer)
        if not modern:
            await peer.send(initialize())
            await peer.receive()
            await peer.send(INITIALIZED)
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta}}
        await peer.send(listing)
        await peer.receive()
        await peer.send(_call(19, "hang", {}, **meta))  # taken by the fast path
        await hang_started.wait()
        await peer.send(cancel)
        answer = await peer.receive()
        await trio.testing.wait_all_tasks_blocked()
        assert hang_ended.is_set()  # the cancellation reached the call it named
    assert answer["id"] == 19
    assert answer["result"]["content"] == [{"type": "text", "text": "echo after"}]


def _named(name: str) -> dict[str, Any]:
    """A 2026-07-28 envelope declaring the client name ``name``."""
    return {**ENVELOPE, "io.modelcontextprotocol/clientInfo": {"name": name, "version": "0"}}


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "sdk-path"])
async def test_a_client_that_names_itself_anew_in_each_call_is_still_one_client(
    fast: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """max_calls_per_client counts the connection, not the name a request declares.

    Before, a 2026-07-28 client that put another clientInfo name in each request's
    envelope made each call a client of its own: all ran at once, past its share.
    """
    if not fast:
        monkeypatch.setattr(StdioFastPath, "take", lambda _self, _line: False)
    started: list[str] = []
    go = trio.Event()

    async def turn(arguments: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        started.append(str(arguments["who"]))
        await go.wait()
        return ToolResult.text("done")

    tool = ToolDefinition(name="turn", execute=turn)
    ledger = RunLedger()
    async with (
        open_gateway(tools=[tool], max_calls_per_client=1, ledger=ledger) as gateway,
        _served(gateway) as peer,
    ):
        listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": ENVELOPE}}
        await peer.send(listing)  # the era is known: the calls can go the fast way
        await peer.receive()
        for n, name in enumerate(["a", "b", "a"]):
            await peer.send(_call(n, "turn", {"who": f"c{n}"}, **_named(name)))
        await trio.testing.wait_all_tasks_blocked()
        assert len(started) == 1  # (before: all three)
        go.set()
        answers = sorted([(await peer.receive())["id"] for _ in range(3)])
    assert answers == [0, 1, 2]
    assert sorted(started) == ["c0", "c1", "c2"]
    # Each call is recorded under the name its own envelope declares.
    labels = {json.dumps(r.arguments): r.call_id.split("#")[0] for r in ledger.records}
    assert labels == {
        '{"who": "c0"}': "stdio/a/-",
        '{"who": "c1"}': "stdio/b/-",
        '{"who": "c2"}': "stdio/a/-",
    }


def test_each_envelope_is_typed_as_the_sdk_types_it() -> None:
    """A 2026-07-28 request's connection, meta and envelope check: its own _meta's, never a
    look-alike's (each learned once per distinct _meta, as the SDK makes them)."""
    from mcp.server.runner import _extract_meta
    from mcp.shared.exceptions import MCPError
    from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request

    unused: Any = None  # (the kernel's request machinery: not reached here)
    kernel = _upstream.CallKernel(
        Server("s"), unused, unused, unused, unused, connection=None, lifespan=None
    )
    version = "2026-07-28"
    info = {"name": "a", "version": "1"}
    envelopes: list[tuple[Any, Any]] = [
        (info, {"experimental": {"x": {"y": 1}}}),
        (info, {"experimental": {"x": {"y": 1}}}),  # the same again: typed once
        (info, {"experimental": {"x": {"y": True}}}),  # equal in Python (1 == True), not in JSON
        ({"name": "b", "version": "1"}, {"experimental": {"x": {"y": True}}}),
        (None, {}),
        (info, "not capabilities"),
        (info, {"experimental": {"x": {"y": 1}}}),  # back to the first: typed again
    ]
    made = []
    for client_info, capabilities in envelopes:
        meta: dict[str, Any] = {
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        }
        if client_info is not None:
            meta["io.modelcontextprotocol/clientInfo"] = client_info
        params = {"name": "t", "_meta": meta}
        meta_json, meta_model = kernel._facts(params)
        assert meta_json == json.dumps(meta, separators=(",", ":")).encode()
        assert meta_model == _extract_meta(params)
        connection = kernel._envelope_connection(params)
        sdk = Connection.from_envelope(version, client_info, capabilities)
        assert connection.protocol_version == version
        assert connection.initialized.is_set()
        assert connection.client_params == sdk.client_params
        assert connection.client_capabilities == sdk.client_capabilities
        # Everything the SDK's holds, its own state and teardown each
        assert vars(connection).keys() == vars(sdk).keys()
        assert (connection.session_id, connection.outbound) == (None, kernel._outbound)
        assert connection.state == {}
        assert not getattr(connection.exit_stack, "_exit_callbacks", True)
        made.append(connection)
    assert made[1] is not made[0]  # a connection per request
    assert made[1].state is not made[0].state
    assert made[1].exit_stack is not made[0].exit_stack
    assert made[1].client_params is made[0].client_params  # typed once
    assert made[6].client_params is not made[0].client_params  # (only the last is kept)
    assert made[2].client_capabilities is not None
    assert made[2].client_capabilities.experimental == {"x": {"y": True}}
    assert made[2].client_capabilities.experimental["x"]["y"] is True
    # An envelope the SDK refuses is refused each time, with the SDK's error.
    refused_metas: list[Any] = [{"io.modelcontextprotocol/protocolVersion": version}, [1], None]
    for meta_value in refused_metas * 2:
        bad: dict[str, Any] = {"name": "t", "_meta": meta_value}
        route = classify_inbound_request({"method": "tools/call", "params": bad})
        assert isinstance(route, InboundLadderRejection)
        kernel._facts(bad)
        with pytest.raises(MCPError) as refused:
            kernel._envelope_connection(bad)
        assert (refused.value.error.code, refused.value.error.message) == (
            route.code,
            route.message,
        )


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "sdk-path"])
async def test_a_call_past_the_waiting_calls_cap_is_refused_at_once_and_recorded(
    fast: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At most max_waiting_calls_per_client calls of one client wait for their turn.

    Before, nothing bounded them: 2.1 MB of queued calls held 200-300 MB of the
    gateway's memory. One more is answered with a JSON-RPC error while the others
    still wait, and the ledger records it as blocked.
    """
    if not fast:
        monkeypatch.setattr(StdioFastPath, "take", lambda _self, _line: False)
    started: list[object] = []
    go = trio.Event()
    ledger = RunLedger()

    async def turn(arguments: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        started.append(arguments["n"])
        await go.wait()
        return ToolResult.text("done")

    tool = ToolDefinition(name="turn", execute=turn)
    async with (
        open_gateway(
            tools=[tool], ledger=ledger, max_calls_per_client=1, max_waiting_calls_per_client=2
        ) as gateway,
        _served(gateway) as peer,
    ):
        await peer.send(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": ENVELOPE}}
        )
        await peer.receive()
        for n in range(3):  # one runs, two wait
            await peer.send(_call(n, "turn", {"n": n}, **ENVELOPE))
        await trio.testing.wait_all_tasks_blocked()
        await peer.send(_call(3, "turn", {"n": 3}, **ENVELOPE))
        refused = await peer.receive()  # while the three are still there
        assert len(started) == 1
        go.set()
        answers = sorted([(await peer.receive())["id"] for _ in range(3)])
    assert refused["id"] == 3
    assert refused["error"]["code"] == -32029
    assert "too many calls waiting" in refused["error"]["message"]
    assert answers == [0, 1, 2]
    assert sorted(started) == [0, 1, 2]  # type: ignore[type-var]
    blocked = [r for r in ledger.records if r.status == "blocked"]
    assert [(r.tool_name, r.blocked_reason, r.arguments) for r in blocked] == [
        ("turn", "tool_denied", {"n": 3})
    ]


_MODERN = "2026-07-28"
_METAS: list[Any] = [
    None,
    {},
    {"progressToken": 1},
    {"progressToken": "t"},
    {"progressToken": 1.5},
    {"progressToken": [1]},
    ENVELOPE,
    {**ENVELOPE, "progressToken": 7},
    {**ENVELOPE, "io.modelcontextprotocol/clientInfo": {"name": 1, "version": "0"}},
    {**ENVELOPE, "io.modelcontextprotocol/clientCapabilities": []},
    {**ENVELOPE, "io.modelcontextprotocol/clientCapabilities": {"roots": {"listChanged": 1}}},
    {**ENVELOPE, "io.modelcontextprotocol/clientCapabilities": {"roots": {"listChanged": True}}},
]
_ABSENT = object()


def _params(name: Any, arguments: Any, meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name}
    if arguments is not _ABSENT:
        params["arguments"] = arguments
    if meta is not _ABSENT:
        params["_meta"] = meta
    return params


def _verdict(check: Callable[[str, dict[str, Any]], None], version: str, params: Any) -> str:
    try:
        check(version, params)
    except Exception as exc:  # the same failure, in the same words
        return f"{type(exc).__name__}: {exc}"
    return "passed"


@given(
    version=st.sampled_from(["2025-11-25", _MODERN]),
    name=st.sampled_from(["echo", "", 1, None, ["echo"]]),
    arguments=st.sampled_from([_ABSENT, None, {}, {"a": [1]}, [], "a", 0]),
    meta=st.sampled_from([_ABSENT, *_METAS]),
    extra=st.booleans(),
)
@settings(max_examples=150, deadline=None)
def test_the_kernel_checks_a_request_as_the_sdk_checks_it(
    version: str, name: Any, arguments: Any, meta: Any, extra: bool
) -> None:
    """A request with a _meta that passed before is checked by hand: the same verdict."""
    params = _params(name, arguments, meta)
    if extra:
        params["task"] = {"ttl": 1}
    check = _upstream.RequestCheck()
    # The same _meta in a request that passes the SDK's check first (when one can)
    _verdict(check.check, version, _params("echo", {}, meta))
    sdk = functools.partial(types_methods.validate_client_request, "tools/call")
    assert _verdict(check.check, version, params) == _verdict(sdk, version, params)


def test_a_request_check_is_taken_from_the_last_one_passed() -> None:
    check = _upstream.RequestCheck()
    calls: list[object] = []
    validate = types_methods.validate_client_request

    def counted(method: str, version: str, params: Any) -> None:
        calls.append(params)
        validate(method, version, params)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(types_methods, "validate_client_request", counted)
        check.check(_MODERN, _params("a", {}, ENVELOPE))
        check.check(_MODERN, _params("b", None, ENVELOPE))  # (the envelope passed: by hand)
        check.check(_MODERN, _params("c", _ABSENT, ENVELOPE))
        assert len(calls) == 1
        check.check(_MODERN, _params("d", {}, {**ENVELOPE, "progressToken": 1}))
        check.check("2025-11-25", _params("d", {}, {**ENVELOPE, "progressToken": 1}))
        assert len(calls) == 3


_F_SETPIPE_SZ = 1031  # Linux's fcntl command to set a pipe's capacity


async def test_a_client_that_never_reads_its_answers_is_not_read_either(
    initialize: Initialize,
) -> None:
    """Backpressure: while answers wait for the client to read them, no more is read.

    Before, the gateway read on: every request's answer was held by a task of its
    own waiting for the pipe, so a client writing calls and reading nothing grew the
    gateway's memory without bound. Once the client reads, every answer comes, in
    order, nothing lost. (Pings take the SDK's path, calls the fast one.)
    """
    tool = ToolDefinition(name="echo", execute=_echo)
    count = 400
    flood = b"".join(
        _call(n, "echo", {"text": n})
        if n % 4 == 0
        else json.dumps({"jsonrpc": "2.0", "id": n, "method": "ping"}).encode() + b"\n"
        for n in range(count)
    )
    async with (
        open_gateway(tools=[tool]) as gateway,
        _served(gateway) as peer,
        trio.open_nursery() as nursery,
    ):
        await peer.send(initialize())
        await peer.receive()
        await peer.send(INITIALIZED)
        await peer.send({"jsonrpc": "2.0", "id": "list", "method": "tools/list"})
        await peer.receive()  # the era is known: calls can go the fast way
        # Small pipes, so a few answers fill the client's (a pipe holds 64 KiB at first).
        for pipe in (peer.stdin, peer.stdout):
            fcntl.fcntl(pipe.fileno(), _F_SETPIPE_SZ, 4096)
        sent = trio.Event()

        async def write_all() -> None:
            await peer.send(flood)
            sent.set()

        tracemalloc.start()
        try:
            nursery.start_soon(write_all)
            await trio.testing.wait_all_tasks_blocked()
            held, _peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert not sent.is_set()  # the gateway stopped reading (before: it read it all)
        # (before: 3.1 MB held here, 7.8 kB more for each request; now about 40 kB)
        assert held < 1_000_000, held
        answers = [await peer.receive() for _ in range(count)]
        await sent.wait()
    assert [answer["id"] for answer in answers] == list(range(count))
    assert answers[4]["result"]["content"] == [{"type": "text", "text": "echo 4"}]
    assert answers[5]["result"] == {}


# A downstream server's own question during a bridged call (elicitation, sampling,
# roots/list), forwarded to the stdio client: the same bytes on both paths.
_FIXTURE = Path(__file__).resolve().parent / "gateway_fixture_server.py"
_ASKS_ALL: dict[str, Any] = {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}
# (tool, arguments, the client's reply to the server's question)
_FORWARDED: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("mcp__fx__ask", {"question": "colour?"}, {"action": "accept", "content": {"colour": "red"}}),
    ("mcp__fx__ask", {"question": "again?"}, {"action": "decline"}),
    (
        "mcp__fx__think",
        {"prompt": "hi"},
        {"role": "assistant", "content": {"type": "text", "text": "blue"}, "model": "m-1"},
    ),
    ("mcp__fx__roots", {}, {"roots": [{"uri": "file:///srv/a", "name": "a"}]}),
]
# A bridged tool's structuredContent, matching its outputSchema and not (no question)
_SHAPED_CALLS = [("mcp__fx__shaped", {"valid": True}), ("mcp__fx__shaped", {"valid": False})]


async def _forwarded_exchange(
    gateway: Gateway, modern: bool, initialize: Initialize
) -> list[bytes]:
    """Every line the gateway writes for the forwarded questions' script."""
    lines: list[bytes] = []
    meta = {**ENVELOPE, _CAPABILITIES: _ASKS_ALL} if modern else {}

    async def answer(peer: _Peer, request_id: object) -> dict[str, Any]:
        while True:
            line = await peer.receive_line()
            lines.append(_REQUEST_STATE.sub(b'"requestState":"-"', line))  # (random)
            message: dict[str, Any] = json.loads(line)
            if message.get("id") == request_id:
                return message

    async with _served(gateway) as peer:
        if not modern:
            await peer.send(initialize(capabilities=_ASKS_ALL))
            await answer(peer, 1)
            await peer.send(INITIALIZED)
        await peer.send(
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta}}
        )
        await answer(peer, 2)
        for n, (tool, arguments, reply) in enumerate(_FORWARDED):
            await peer.send(_call(f"f-{n}", tool, arguments, **meta))
            if modern:  # an input_required answer: the call is made again with the reply
                asked = (await answer(peer, f"f-{n}"))["result"]
                (key,) = asked["inputRequests"]
                params = {
                    "name": tool,
                    "arguments": arguments,
                    "inputResponses": {key: reply},
                    "requestState": asked["requestState"],
                    "_meta": meta,
                }
                retry = {"jsonrpc": "2.0", "id": f"f-{n}-r", "method": "tools/call"}
                await peer.send({**retry, "params": params})
                await answer(peer, f"f-{n}-r")
            else:  # the server's request, forwarded in the middle of the call
                line = await peer.receive_line()
                lines.append(line)
                asked = json.loads(line)
                await peer.send({"jsonrpc": "2.0", "id": asked["id"], "result": reply})
                await answer(peer, f"f-{n}")
        for n, (tool, arguments) in enumerate(_SHAPED_CALLS):
            await peer.send(_call(f"s-{n}", tool, arguments, **meta))
            await answer(peer, f"s-{n}")
    return lines


async def test_a_servers_forwarded_question_reaches_the_client_byte_for_byte_on_both_paths(
    initialize: Initialize, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One gateway and its stdio server; four stdio connections, each era on each path.

    Also a bridged tool's structuredContent that matches its outputSchema and one that
    does not (refused by the bridge's output check), the same bytes on both paths.
    """
    server = DownstreamServer(
        server_id="fx",
        transport=StdioTransport(*prewarmed.command(_FIXTURE)),
        options={"call_timeout_s": 30, "protocol": "legacy"},  # asks in the middle of a call
    )
    take = StdioFastPath.take
    taken: list[bytes] = []

    def counted(self: StdioFastPath, line: bytes) -> bool:
        took = take(self, line)
        if took:
            taken.append(line)
        return took

    seen: dict[tuple[bool, bool], list[bytes]] = {}
    async with open_gateway(servers=[server]) as gateway:
        with trio.fail_after(60):
            await gateway.wait_servers()
        for modern in (False, True):
            for fast in (False, True):
                monkeypatch.setattr(StdioFastPath, "take", counted if fast else (lambda *_: False))
                seen[modern, fast] = await _forwarded_exchange(gateway, modern, initialize)
    for modern in (False, True):
        assert seen[modern, True] == seen[modern, False]
    # Each first call went the fast way (a 2026-07-28 retry goes the SDK's way).
    assert len(taken) == 2 * (len(_FORWARDED) + len(_SHAPED_CALLS))
    legacy = [json.loads(line) for line in seen[False, True]]
    asked = [m["method"] for m in legacy if "method" in m]
    assert asked == ["elicitation/create"] * 2 + ["sampling/createMessage", "roots/list"]
    said = {m["id"]: m["result"] for m in legacy if "result" in m}
    modern_said = {m["id"]: m["result"] for m in map(json.loads, seen[True, True]) if "result" in m}
    for answers in (said, modern_said):  # the bridge checks a result against its outputSchema
        assert answers["s-0"]["structuredContent"] == {"count": 3}
        assert answers["s-1"]["isError"] is True
        assert answers["s-1"]["content"][0]["text"] == (
            "MCP tool shaped returned structuredContent that does not match its outputSchema "
            "at data.count: must be integer (rule: type)"
        )
    for answers, suffix in ((said, ""), (modern_said, "-r")):
        texts = [answers[f"f-{n}{suffix}"]["content"][0]["text"] for n in range(4)]
        assert texts == [
            "the user said red",
            "the user did not answer (decline)",
            "the model wrote blue (m-1)",
            "file:///srv/a",
        ]


# Calls of a bridged server whose questions are not forwarded (a bridge given as is):
# answered by the pipes' readers. (request id, tool, arguments, the client's progress
# token or None)
_BRIDGED: list[tuple[object, str, Any, str | None]] = [
    ("b-1", "mcp__fx__echo", {"text": "hi"}, None),
    ("b-2", "mcp__fx__fail", {}, None),  # the server's error result
    ("b-3", "mcp__fx__forbidden", {}, None),  # refused by the permission policy
    ("b-4", "mcp__fx__echo", {"text": 5}, None),  # refused by the validator
    ("b-5", "mcp__fx__count", {"steps": 2}, None),  # the server's progress (no token)
    ("b-6", "mcp__fx__count", {"steps": 2}, "p-6"),  # progress asked: the general path
    ("b-7", "mcp__fx__shaped", {"valid": True}, None),
    ("b-8", "mcp__fx__shaped", {"valid": False}, None),  # refused by its outputSchema
    ("b-9", "mcp__fx__blocks", {"count": 2000}, None),  # refused by the answer gate's caps
    ("b-10", "mcp__fx__blocks", {"count": 3}, None),
]


async def _bridged_exchange(
    modern: bool, initialize: Initialize, bridges: list[McpToolBridge]
) -> tuple[list[bytes], list[tuple[Any, ...]]]:
    """Every line the gateway writes for the bridged script, and its ledger and events.

    ``bridges``: the fixture server's, and another of its own for the timeout.
    """
    ledger = RunLedger()
    events: list[str] = []
    hanging = trio.Event()
    meta = dict(ENVELOPE) if modern else {}
    lines: list[bytes] = []

    def on_event(event: Any) -> None:
        events.append(type(event).__name__)
        if getattr(event, "message", None) == "hanging":
            hanging.set()

    async def answer(peer: _Peer, request_id: object) -> None:
        while True:
            # (whether the server's exit status is known yet when its pipe ends varies)
            line = (await peer.receive_line()).replace(b"; exit status 3", b"")
            lines.append(line)
            if json.loads(line).get("id") == request_id:
                return

    async def hang(peer: _Peer, request_id: str, server: str = "fx") -> None:
        nonlocal hanging
        hanging = trio.Event()
        await peer.send(_call(request_id, f"mcp__{server}__hang", {}, **meta))
        await hanging.wait()  # (the server said it started: the call waits for its answer)

    async with (
        open_gateway(
            bridges=bridges,
            permission=create_rule_permission_policy(
                allow=["tool:*:execute"], deny=["tool:mcp:fx:forbidden:execute"]
            ),
            validator=create_json_schema_tool_validator(),
            ledger=ledger,
            on_event=on_event,
        ) as gateway,
        _served(gateway) as peer,
    ):
        if not modern:
            await peer.send(initialize())
            await answer(peer, 1)
            await peer.send(INITIALIZED)
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        if modern:
            listing["params"] = {"_meta": meta}
        await peer.send(listing)
        await answer(peer, 2)
        for request_id, name, arguments, token in _BRIDGED:
            extra = {"progressToken": token} if token is not None else {}
            await peer.send(_call(request_id, name, arguments, **meta, **extra))
            await answer(peer, request_id)
        # Out of order: a call answered while an earlier one still runs; then the earlier
        # one cancelled by the client (never answered), a ping after it.
        await hang(peer, "h-1")
        await peer.send(_call("e-2", "mcp__fx__echo", {"text": "overtakes"}, **meta))
        await answer(peer, "e-2")
        await peer.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                         "params": {"requestId": "h-1"}})  # fmt: skip
        await peer.send({"jsonrpc": "2.0", "id": "ping-1", "method": "ping"})
        await answer(peer, "ping-1")
        # Past the bridge's call_timeout_s: an error result (the server told)
        await hang(peer, "t-1", "to")
        await answer(peer, "t-1")
        # The server dies mid-call; the next call starts another.
        await peer.send(_call("d-1", "mcp__fx__die", {}, **meta))
        await answer(peer, "d-1")
        await peer.send(_call("d-2", "mcp__fx__echo", {"text": "again"}, **meta))
        await answer(peer, "d-2")
        await peer.send(_call("d-3", "mcp__fx__echo", {"text": "and again"}, **meta))
        await answer(peer, "d-3")
        # Still running when serving ends: answered with CONNECTION_CLOSED.
        await hang(peer, "z-1")
        peer.serving.cancel()
        await answer(peer, "z-1")
    recorded: list[tuple[Any, ...]] = [
        (
            r.call_id,
            r.tool_name,
            r.status,
            r.blocked_reason,
            r.arguments,
            (r.result_preview or "").replace("; exit status 3", ""),
        )
        for r in ledger.records
    ]
    return lines, [*recorded, tuple(events)]


async def test_a_bridged_call_answered_by_the_pipes_readers_is_the_sdk_paths_byte_for_byte(
    initialize: Initialize, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same bytes, ledger records and events as the SDK's whole path, for bridged calls
    answered with no task of their own, at both protocol revisions: results, refusals,
    progress, output and answer checks, calls answered out of order, a cancelled call, a
    timeout, a server that dies mid-call, and a call running when serving ends."""
    transport = StdioTransport(*prewarmed.command(_FIXTURE))
    async with (
        open_mcp_tools(
            server_id="fx", transport=transport, call_timeout_s=30, max_result_bytes=262_144
        ) as bridge,
        # (its own server, for the timeout: a short one would end the other calls on a
        # busy machine)
        open_mcp_tools(server_id="to", transport=transport, call_timeout_s=1) as timing,
    ):
        for modern in (False, True):
            slow = await _bridged_both_ways(modern, initialize, monkeypatch, [bridge, timing])
        # Begun by the reader, but the bridge could not write the request at once (a line
        # waiting for the pipe, say): the call goes on in a task, the same bytes again.
        begun: list[bool] = []
        begin = Gateway._begin_inline

        def counted(self: Gateway, *args: Any) -> bool:
            begun.append(begin(self, *args))
            return begun[-1]

        monkeypatch.setattr(Gateway, "_begin_inline", counted)
        monkeypatch.setattr(McpToolBridge, "start_call", lambda *_args: None)
        later = await _bridged_exchange(True, initialize, [bridge, timing])
        assert later == slow
        assert begun.count(True) == len(_BRIDGED) + 5  # (as above: all but b-6 and d-2)


async def _bridged_both_ways(
    modern: bool,
    initialize: Initialize,
    monkeypatch: pytest.MonkeyPatch,
    bridges: list[McpToolBridge],
) -> tuple[list[bytes], list[tuple[Any, ...]]]:
    """The bridged script on the SDK's path and on the readers' (compared); the former's."""
    inline: list[bool] = []
    begin = Gateway._begin_inline

    def counted(self: Gateway, *args: Any) -> bool:
        took = begin(self, *args)
        inline.append(took)
        return took

    monkeypatch.setattr(StdioFastPath, "take", lambda _self, _line: False)
    slow_lines, slow_records = await _bridged_exchange(modern, initialize, bridges)
    monkeypatch.undo()
    monkeypatch.setattr(Gateway, "_begin_inline", counted)
    fast_lines, fast_records = await _bridged_exchange(modern, initialize, bridges)
    monkeypatch.undo()
    assert fast_lines == slow_lines
    assert fast_records == slow_records
    # Taken: every call of a live session but the one asking for progress (b-6) and the
    # one right after the server died (d-2: no live session yet).
    calls = [request_id for request_id, *_ in _BRIDGED] + ["h-1", "e-2", "t-1", "d-1", "d-2"]
    calls += ["d-3", "z-1"]
    assert inline == [request_id not in ("b-6", "d-2") for request_id in calls]
    answers = {json.loads(line).get("id"): json.loads(line) for line in fast_lines}
    assert answers["b-1"]["result"]["content"] == [{"type": "text", "text": "hi"}]
    assert answers["b-2"]["result"]["isError"] is True
    assert "permission denied" in answers["b-3"]["result"]["content"][0]["text"]
    assert answers["b-4"]["result"]["isError"] is True
    assert answers["b-7"]["result"]["structuredContent"] == {"count": 3}
    assert "outputSchema" in answers["b-8"]["result"]["content"][0]["text"]
    assert "more than 1024 content blocks" in answers["b-9"]["result"]["content"][0]["text"]
    order = [json.loads(line).get("id") for line in fast_lines]
    assert order.index("e-2") < order.index("ping-1")
    assert "h-1" not in answers  # cancelled: never answered
    assert "call_timeout_s=1s" in answers["t-1"]["result"]["content"][0]["text"]
    assert "went away" in answers["d-1"]["result"]["content"][0]["text"]
    assert answers["d-3"]["result"]["content"] == [{"type": "text", "text": "and again"}]
    assert answers["z-1"]["error"]["code"] == types.CONNECTION_CLOSED
    statuses = {record[0]: record[2] for record in fast_records[:-1]}
    assert list(statuses.values()).count("cancelled") == 2  # h-1, z-1
    events = fast_records[-1]
    assert events.count("ToolExecutionProgress") >= 4
    return slow_lines, slow_records
