"""A session's tools/call sent as JSON, its plain answers checked once: against the SDK's checks."""

from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mcp_prewarmed as prewarmed
import mcp_types
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client, StdioServerParameters
from mcp.client import session as sdk_session
from mcp_types import methods
from pydantic import ValidationError

from prism.core import (
    CallTicket,
    DispatchOptions,
    ToolCall,
    ToolExecutionProgress,
    ToolResult,
    begin_tool_call,
    create_tool_registry,
    dispatch_tool_call,
    finish_tool_call,
)
from prism.mcp import (
    McpElicitation,
    McpElicitationAnswer,
    McpToolBridge,
    StdioTransport,
    _calls,
    _fastcall,
    _session,
    open_mcp_tools,
)
from prism.mcp._content import map_call_result, map_plain_result
from prism.mcp._direct import DirectCalls, DirectRequest
from prism.mcp._fastcall import (
    call_params,
    install_fast_call_tool,
    plain_answer,
    sdk_result,
    simple_call_result,
)

if TYPE_CHECKING:
    from prism.mcp._options import ProtocolMode

VERSIONS = ("2025-11-25", "2026-07-28")
FIXTURE_SERVER = Path(__file__).resolve().parent / "mcp_fixture_server.py"


def _sdk_result(raw: dict[str, Any], version: str) -> Any:
    """What ClientSession.send_request makes of a tools/call answer (raises as it does)."""
    with contextlib.suppress(KeyError):
        methods.validate_server_result("tools/call", version, raw)
    foreign = sdk_session._later_revision_fields("tools/call", version)
    raw = {key: value for key, value in raw.items() if key not in foreign}
    return sdk_session._CallToolResultAdapter.validate_python(raw, by_name=False)


def _same_as_sdk(raw: dict[str, Any], version: str) -> bool:
    """Whether the plain answer's model is the SDK's; ``False`` when it is not plain."""
    made = simple_call_result(raw, version)
    if made is None:
        return False
    checked = _sdk_result(raw, version)  # a plain answer passes the SDK's checks
    assert sdk_result(raw, version, sdk_session._CallToolResultAdapter) == checked
    assert type(checked) is mcp_types.CallToolResult
    assert made.model_dump() == checked.model_dump()
    assert made.model_fields_set == checked.model_fields_set
    details = {"mcp_server": "s"}
    assert map_call_result(made, details) == map_call_result(checked, details)
    # The bridge's own mapping of the plain answer (no model built) is the same result.
    plain = plain_answer(raw, version)
    assert plain is not None
    assert map_plain_result(plain, details) == map_call_result(checked, details)
    return True


TEXT: dict[str, Any] = {"type": "text", "text": "hi"}
PLAIN: list[dict[str, Any]] = [
    {"content": [TEXT], "resultType": "complete"},
    {"content": [], "isError": True, "resultType": "complete"},
    {"content": [TEXT, TEXT], "structuredContent": {"a": [1, 2.5, None]}, "resultType": "complete"},
    {"content": [TEXT], "isError": False, "resultType": "complete",
     "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "x", "version": "1"}}},
    {"content": [TEXT], "structuredContent": {"x": math.nan}, "resultType": "complete"},
    {"content": [TEXT], "structuredContent": {}, "isError": True, "resultType": "complete"},
]  # fmt: skip
NOT_PLAIN: list[dict[str, Any]] = [
    {"content": [TEXT], "resultType": "input_required"},
    {"content": [{"type": "image", "data": "aGk=", "mimeType": "image/png"}],
     "resultType": "complete"},
    {"content": [{**TEXT, "annotations": {"priority": 1}}], "resultType": "complete"},
    {"content": [{"type": "text", "text": 5}], "resultType": "complete"},
    {"content": TEXT, "resultType": "complete"},
    {"content": [TEXT], "isError": "true", "resultType": "complete"},
    {"content": [TEXT], "isError": None, "resultType": "complete"},
    {"content": [TEXT], "structuredContent": [1], "resultType": "complete"},
    {"content": [TEXT], "_meta": [], "resultType": "complete"},
    {"content": [TEXT], "ttlMs": 5, "resultType": "complete"},
    {"resultType": "complete"},
    {"content": [], "resultType": "input_required", "isError": True},
]  # fmt: skip


@pytest.mark.parametrize("version", VERSIONS)
def test_plain_answers_build_the_sdks_model(version: str) -> None:
    for raw in PLAIN:
        assert _same_as_sdk(raw, version), raw
    for raw in NOT_PLAIN:
        assert simple_call_result(raw, version) is None, raw
        # The bridge's other answers meet the SDK's checks as the SDK makes them.
        try:
            expected = _sdk_result(raw, version)
        except ValidationError:
            with pytest.raises(ValidationError):
                sdk_result(raw, version, sdk_session._CallToolResultAdapter)
        else:
            assert sdk_result(raw, version, sdk_session._CallToolResultAdapter) == expected
    # Without resultType: plain at 2025-11-25, refused by the SDK at 2026-07-28 (required).
    bare = {"content": [TEXT]}
    assert _same_as_sdk(bare, "2025-11-25")
    assert simple_call_result(bare, "2026-07-28") is None
    with pytest.raises(ValidationError):
        _sdk_result(bare, "2026-07-28")


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
_BLOCK = st.one_of(
    st.just(TEXT),
    st.fixed_dictionaries({"type": st.sampled_from(["text", "image"]), "text": _JSON}),
    _JSON,
)
_ANSWER = st.fixed_dictionaries(
    {},
    optional={
        "content": st.lists(_BLOCK, max_size=3) | _JSON,
        "isError": st.booleans() | _JSON,
        "structuredContent": st.dictionaries(st.text(max_size=3), _JSON, max_size=2) | _JSON,
        "resultType": st.sampled_from(["complete", "input_required"]) | _JSON,
        "_meta": st.dictionaries(st.text(max_size=3), _JSON, max_size=2) | _JSON,
        "other": _JSON,
    },
)


@settings(max_examples=150, deadline=None)
@given(raw=_ANSWER, version=st.sampled_from(VERSIONS))
def test_any_answer_is_either_not_plain_or_the_sdks_model(
    raw: dict[str, Any], version: str
) -> None:
    _same_as_sdk(raw, version)


def test_the_params_are_the_sdks_dump() -> None:
    for name, arguments in (("t", {"a": [1, {"b": None}], "c": 2.5}), ("t", None), ("t", {})):
        request = mcp_types.CallToolRequest(
            params=mcp_types.CallToolRequestParams(name=name, arguments=arguments)
        )
        dumped = request.model_dump(by_alias=True, mode="json", exclude_none=True)["params"]
        made = call_params(name, arguments)
        assert list(made.items()) == list(dumped.items())


_TEXTS = '"content":[{"type":"text","text":"t"}],"resultType":"complete"'
RAW_ANSWERS = (
    f'{{{_TEXTS},"structuredContent":{{"result":NaN}}}}',
    f"{{{_TEXTS}}}",
    f'{{{_TEXTS},"structuredContent":{{"result":5}},"isError":false}}',
    f'{{{_TEXTS},"structuredContent":{{"result":5}},"isError":true}}',
)


async def _started(
    bridge: McpToolBridge, options: DispatchOptions, call: ToolCall, marks: list[bool]
) -> ToolResult:
    """``call`` through the two halves of the dispatch, the bridge's call started in between."""
    ticket = begin_tool_call(call, options)
    if isinstance(ticket, ToolResult):  # refused by a gate (an unknown tool)
        marks.append(False)
        return ticket
    assert isinstance(ticket, CallTicket)
    assert ticket.tool is not None
    assert ticket.arguments is not None
    got: list[ToolResult] = []
    answered = trio.Event()

    def done(result: ToolResult) -> None:
        got.append(result)
        answered.set()

    if bridge.start_call(ticket.tool, ticket.arguments, ticket.context, done) is None:
        marks.append(False)
        result = await ticket.tool.execute(ticket.arguments, ticket.context)
    else:
        marks.append(True)
        await answered.wait()
        [result] = got
    finished = finish_tool_call(ticket, result)
    assert finished is not None
    return finished


async def _results(
    transport: StdioTransport, protocol: ProtocolMode, *, started: list[bool] | None = None
) -> tuple[list[ToolResult], list[object]]:
    """The script's results, and what reached the host: progress, questions, log messages.

    ``started``: each call begun with ``begin_tool_call`` and started with
    ``McpToolBridge.start_call`` (whether it was, appended there; if not, executed).
    """
    seen: list[object] = []
    calls: list[tuple[str, dict[str, Any]]] = [
        ("echo", {"text": "hi"}),
        ("add", {"a": 2, "b": 3}),  # an output schema, checked
        ("fail", {"message": "no"}),
        ("rich", {}),
        ("progress", {"steps": 2, "interval": 0}),
        ("nope", {}),
        ("ask_user", {"question": "sure?"}),  # the server asks while the call waits
        ("log_line", {"text": "a line"}),
        # Answers the server writes itself (its tool declares an outputSchema): a NaN
        # structuredContent, none at all, one the schema refuses, and an error result
        # (not checked), each plain.
        *(("raw_answer", {"member": "result", "value": value}) for value in RAW_ANSWERS),
        # The server's error answer under the code the SDK gives its own closed
        # connection: the call's error, the session kept.
        ("error_answer", {"code": mcp_types.CONNECTION_CLOSED, "message": "file not found"}),
        ("many_blocks", {"count": 2000}),  # refused before it is parsed
        ("big", {"size": 70_000}),  # past max_result_bytes: the session closes
    ]

    async def elicit(request: McpElicitation) -> McpElicitationAnswer:
        seen.append((request.message, request.call_id))
        return McpElicitationAnswer(action="accept", content={"ok": True})

    async with open_mcp_tools(
        server_id="fx",
        transport=transport,
        protocol=protocol,
        elicit=elicit,
        on_log=lambda message: seen.append((message.data, message.call_id)),
        max_result_bytes=65_536,
    ) as bridge:
        options = DispatchOptions(registry=create_tool_registry(bridge.tools), on_event=seen.append)
        results = [
            await (
                dispatch_tool_call(call, options)
                if started is None
                else _started(bridge, options, call, started)
            )
            for n, (name, arguments) in enumerate(calls)
            for call in [ToolCall(id=str(n), name=f"mcp:fx:{name}", arguments=arguments)]
        ]
    events = [
        (event.message, event.progress) if isinstance(event, ToolExecutionProgress) else event
        for event in seen
        if not hasattr(event, "type") or isinstance(event, ToolExecutionProgress)
    ]
    return results, events


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_a_real_server_gives_the_same_results_both_ways(
    fixture_stdio: StdioTransport, monkeypatch: pytest.MonkeyPatch, protocol: ProtocolMode
) -> None:
    """Past the SDK's dispatcher (a stdio session's plain calls) and through it, alike:
    results, errors, the output check, progress, the server's questions and log lines
    (with the call they came for), the caps on a result, the size bound and the session
    that follows it."""
    plain: list[bool] = []
    modelled: list[bool] = []
    simple = _fastcall.simple_call_result
    plain_answer = _fastcall.plain_answer
    direct: list[str] = []
    call = DirectCalls.call

    def counted(raw: dict[str, Any], version: str) -> mcp_types.CallToolResult | None:
        made = simple(raw, version)
        modelled.append(made is not None)
        return made

    def counted_plain(raw: dict[str, Any], version: str) -> dict[str, Any] | None:
        made = plain_answer(raw, version)
        plain.append(made is not None)
        return made

    async def counted_call(self: DirectCalls, request: DirectRequest, *args: Any) -> dict[str, Any]:
        direct.append(str(request.id))
        return await call(self, request, *args)

    # Started without a task (McpToolBridge.start_call): every call but the unknown
    # tool's (refused before the bridge). The plain answers are finished by the
    # session's reader; the rest (rich's, the errors, the session closing) as the
    # calling task would, in a task of the bridge.
    marks: list[bool] = []
    started, started_seen = await _results(fixture_stdio, protocol, started=marks)
    monkeypatch.setattr(_fastcall, "simple_call_result", counted)
    monkeypatch.setattr(_calls, "plain_answer", counted_plain)
    monkeypatch.setattr(DirectCalls, "call", counted_call)
    fast, fast_seen = await _results(fixture_stdio, protocol)
    assert marks == [n != 5 for n in range(len(fast))]
    assert started == fast
    assert started_seen == fast_seen
    if protocol == "auto":
        # The SDK client's call_tool writing the calls past its dispatcher itself (the
        # bridge's own send off): the same results too.
        sent, checked = len(direct), len(modelled)
        monkeypatch.setattr(_fastcall.RawCalls, "usable", lambda *_args: False)
        client, client_seen = await _results(fixture_stdio, protocol)
        assert client == fast
        assert client_seen == fast_seen
        assert len(direct) == 2 * sent  # each call written once, past the dispatcher
        assert modelled[checked:] == plain  # the same answers proved plain
        del direct[sent:], modelled[checked:]
    monkeypatch.setattr(_session, "install_fast_call_tool", lambda *_args: None)
    sdk, sdk_seen = await _results(fixture_stdio, protocol)
    assert fast == sdk
    assert fast_seen == sdk_seen
    # Every call that reached the server went past the SDK's dispatcher. echo, add,
    # fail's error result, progress and log_line were plain; rich (every kind of block)
    # took the SDK's checks; the unknown tool never reached the server; ask_user's
    # answer came after the question was answered; the refused and the oversized results
    # were never answers (the latter closed the session: the bridge's next call would
    # start another, as test_mcp_bridge.py shows).
    # The bridge sent each of them itself (RawCalls) and mapped the plain answers; the
    # other answer (rich's) and the errors went to the SDK's client as its first send's
    # (replayed: nothing was sent twice), and rich's took the SDK's checks.
    assert direct == [f"prism:{n}" for n in range(1, 15)]
    assert plain == [True, True, True, False, True, True, True, True, True, True, True]
    assert modelled == [False]
    errors = [False, False, True, False, False, True, False, False, *[True] * 7]
    assert [result.is_error for result in fast] == errors
    assert "non-finite number" in fast[8].joined_text
    assert "returned no structuredContent" in fast[9].joined_text
    assert "does not match its outputSchema" in fast[10].joined_text
    assert fast[11].structured == {"result": 5}
    assert fast[12].details["mcp_error"] == "server_error"
    assert fast[12].joined_text == "MCP tool error_answer failed: MCPError: file not found"
    assert "result refused: more than 1024 content blocks" in fast[13].joined_text
    assert fast[14].details["mcp_error"] == "result_too_large"
    assert fast[1].structured == {"result": 5}
    assert ("step 2", 2.0) in fast_seen
    assert ("a line", None) in fast_seen  # (a pipe says no call: see open_mcp_tools)
    if protocol == "legacy":  # the server asks over the pipe while the call waits
        assert ("sure?", None) in fast_seen
        assert fast[6].joined_text == "user: accept {'ok': True}"


async def test_the_sdks_call_options_on_the_json_path() -> None:
    # A read timeout, arguments with lists and objects, a progress callback; arguments
    # only the SDK can dump (a tuple) and a request _meta take the SDK's own call_tool.
    command, args = prewarmed.command(FIXTURE_SERVER, "stdio")
    params = StdioServerParameters(command=command, args=args)
    async with Client(params) as client:
        install_fast_call_tool(client.session)
        seen: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(progress)

        timed = await client.call_tool("echo", {"text": "hi"}, read_timeout_seconds=30)
        listed = await client.call_tool("echo", {"text": "x", "more": [1, {"k": [2.5]}]})
        steps = await client.call_tool(
            "progress", {"steps": 2, "interval": 0}, progress_callback=on_progress
        )
        tupled = await client.call_tool("echo", {"text": ("a",)})
        traced = await client.call_tool(
            "echo", {"text": "m"}, meta=mcp_types.RequestParamsMeta(progress_token="t")
        )
    assert timed.content[0].text == "hi"  # type: ignore[union-attr]
    assert listed.is_error is not None
    assert steps.is_error is False
    assert seen == [1.0, 2.0]
    assert tupled.is_error  # not a string: the server refuses it
    assert traced.content[0].text == "m"  # type: ignore[union-attr]


async def test_direct_calls_at_their_edges(caplog: pytest.LogCaptureFixture) -> None:
    """The table of calls past the SDK's dispatcher, over a real pipe: what it writes, the
    progress it passes on (as the SDK reads it), errors, cancellation, the session's end."""
    import json
    import os

    import trio
    from mcp.shared.exceptions import MCPError

    from prism.mcp._stdio import ServerStdin
    from prism.mcp._wire import WireState

    read_fd, write_fd = os.pipe()
    faults: list[str] = []
    stdin = ServerStdin(trio.lowlevel.FdStream(write_fd), write_stall_s=5, on_fault=faults.append)
    state = WireState()
    direct = DirectCalls(
        send_line=stdin.send_line, send=stdin.send, track=state.calls.add, state=state
    )

    os.set_blocking(read_fd, False)

    def written() -> list[Any]:
        try:
            data = os.read(read_fd, 65536)
        except BlockingIOError:
            return []
        return [json.loads(line) for line in data.splitlines()]

    # A lone surrogate (a JSON parse can make one) has no UTF-8 form: such arguments
    # take the SDK's own path; other text is plain.
    assert not _fastcall._plain({"s": "\ud800"})
    assert not _fastcall._plain({"\udc00": 1})
    assert _fastcall._plain({"é": ["ü", 1.5, None, True]})
    bare = direct.request({"name": "t"}, False)
    assert bare.params == {"name": "t"}
    seen: list[tuple[Any, ...]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))
        if message == "raise":
            raise RuntimeError("a broken progress callback")

    async with trio.open_nursery() as nursery:
        answers: list[object] = []

        async def call(request: DirectRequest, progress: Any = on_progress) -> None:
            try:
                answers.append(await direct.call(request, progress))
            except MCPError as exc:
                answers.append((exc.error.code, exc.error.message))

        first = direct.request({"name": "t", "_meta": {"k": 1}}, True)
        first_id = str(first.id)
        nursery.start_soon(call, first)
        await trio.testing.wait_all_tasks_blocked()
        (line,) = written()
        # The server is given a progress token of the gate's own, mapped back to the id.
        token = line["params"]["_meta"].pop("progressToken")
        assert line == {
            "jsonrpc": "2.0", "id": first_id, "method": "tools/call",
            "params": {"name": "t", "_meta": {"k": 1}},
        }  # fmt: skip
        assert len(token) == 32
        assert token != first_id
        back = mcp_types.JSONRPCNotification(
            jsonrpc="2.0",
            method="notifications/progress",
            params={"progressToken": token, "progress": 1},
        )
        assert state.sent.progress(back, None) is back
        assert back.params == {"progressToken": first_id, "progress": 1}
        assert state.calls == {first_id}
        assert direct.awaits(first_id)
        # As the SDK reads progress: a number (not a bool), a float-sized total, a text.
        for params in (
            None,
            {"progressToken": first_id, "progress": True},
            {"progressToken": first_id, "progress": "1"},
            {"progressToken": "prism:404", "progress": 1},
            {"progressToken": 1, "progress": 1},
            {"progressToken": first_id, "progress": 10**400},
            {"progressToken": first_id, "progress": math.inf},
            {"progressToken": first_id, "progress": 1, "total": -math.inf},
            {"progressToken": first_id, "progress": math.nan},
            {"progressToken": first_id, "progress": 1, "total": True, "message": "raise"},
            {"progressToken": first_id, "progress": 2.5, "total": "x", "message": 3},
        ):
            direct.progress(params)
        direct.answer(first_id, mcp_types.JSONRPCResponse(jsonrpc="2.0", id=first_id, result={}))
        await trio.testing.wait_all_tasks_blocked()
        assert answers == [{}]
        assert seen == [(1.0, 1.0, "raise"), (2.5, None, None)]
        assert "progress callback raised" in caplog.text
        assert state.calls == set()
        assert not direct.awaits(first_id)

        # An error answer; a call cancelled after its line went out tells the server.
        second = direct.request({"name": "t"}, False)
        nursery.start_soon(call, second, None)
        await trio.testing.wait_all_tasks_blocked()
        direct.progress({"progressToken": second.id, "progress": 1})  # nobody to tell
        error = mcp_types.ErrorData(code=-32001, message="result refused: x")
        direct.answer(
            str(second.id), mcp_types.JSONRPCError(jsonrpc="2.0", id=second.id, error=error)
        )
        await trio.testing.wait_all_tasks_blocked()
        assert answers[-1] == (-32001, "result refused: x")
        assert written() == [
            {"jsonrpc": "2.0", "id": second.id, "method": "tools/call", "params": {"name": "t"}}
        ]
        with trio.CancelScope() as scope:
            scope.cancel()
            await direct.call(second, None)  # cancelled before its line: nothing sent
        assert written() == []
        third = direct.request({"name": "t"}, False)
        async with trio.open_nursery() as inner:
            inner.start_soon(call, third)
            await trio.testing.wait_all_tasks_blocked()
            inner.cancel_scope.cancel()
        sent = written()
        assert sent[-1] == {
            "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": third.id, "reason": "caller cancelled"},
        }  # fmt: skip

        # The session's end fails the waiting call and every later one.
        fourth = direct.request({"name": "t"}, False)
        nursery.start_soon(call, fourth)
        await trio.testing.wait_all_tasks_blocked()
        direct.close()
        await trio.testing.wait_all_tasks_blocked()
        closed = (mcp_types.CONNECTION_CLOSED, "Connection closed")
        assert answers[-1] == closed
        await call(fourth)
        assert answers[-1] == closed

    # A pipe closed under a call (its write, and its cancellation's, fail quietly).
    reopened = DirectCalls(
        send_line=stdin.send_line, send=stdin.send, track=state.calls.add, state=state
    )
    stdin.close()
    with pytest.raises(MCPError, match="Connection closed"):
        await reopened.call(reopened.request({"name": "t"}, False), None)
    await reopened._cancel("prism:9")
    os.close(read_fd)
    await stdin.close_pipe()
    assert faults == []


async def test_the_bridges_send_stamps_each_call_as_the_session_does() -> None:
    """The _meta the session's stamp gives a call, kept once per stamp: every request line
    carries what running the stamp on that very call gives, as the stamp changes."""
    import json
    import os
    import types

    import trio

    from prism.mcp._stdio import ServerStdin
    from prism.mcp._wire import WireState

    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    stdin = ServerStdin(trio.lowlevel.FdStream(write_fd), write_stall_s=5, on_fault=print)
    state = WireState()
    direct = DirectCalls(
        send_line=stdin.send_line, send=stdin.send, track=state.calls.add, state=state
    )
    info = {"name": "host", "version": "1"}
    capabilities: dict[str, Any] = {"elicitation": {}}

    def named(name: str, arguments: Any) -> dict[str, str]:
        return {"Mcp-Param-Name": name}  # (a header: never on a pipe)

    def own_stamp(data: dict[str, Any], _opts: Any) -> None:  # not the SDK's: run every time
        data["params"].setdefault("_meta", {})["seen"] = data["params"]["name"]

    stamps = [
        sdk_session._preconnect_stamp,
        sdk_session._make_handshake_stamp("2025-11-25"),
        sdk_session._make_modern_stamp("2026-07-28", info, capabilities, named),
        sdk_session._make_modern_stamp(
            "2026-07-28", info, capabilities, named, log_level="warning"
        ),
        own_stamp,
    ]
    session: Any = types.SimpleNamespace(_stamp=None)
    raw_calls = _fastcall.RawCalls(session, direct)
    calls = [("a", {"x": 1}), ("b", None), ("é", {"y": [1e-07, {"z": None}], "n": 10**30})]
    async with trio.open_nursery() as nursery:
        for stamp in [*stamps, stamps[2]]:
            session._stamp = stamp
            for name, arguments in calls:
                answers: list[object] = []

                async def send(
                    name: str = name, arguments: Any = arguments, answers: list[object] = answers
                ) -> None:
                    answers.append(await raw_calls.send(name, arguments, None))

                nursery.start_soon(send)
                await trio.testing.wait_all_tasks_blocked()
                (raw,) = os.read(read_fd, 65536).splitlines()
                line = json.loads(raw)
                expected = {"method": "tools/call", "params": call_params(name, arguments)}
                stamp(expected, {})
                assert line["params"] == expected["params"], stamp
                # The bytes the SDK's write of the request gives (its model's JSON: 1e-7)
                sdk = mcp_types.JSONRPCRequest(
                    jsonrpc="2.0", id=line["id"], method="tools/call", params=line["params"]
                )
                assert raw == sdk.model_dump_json(by_alias=True, exclude_unset=True).encode()
                direct.answer(
                    line["id"],
                    mcp_types.JSONRPCResponse(jsonrpc="2.0", id=line["id"], result={"n": 1}),
                )
                await trio.testing.wait_all_tasks_blocked()
                assert answers == [{"n": 1}]
        # (the SDK's stamp kept, not run per call)
        assert raw_calls._stamped_by is stamps[2]
        assert raw_calls._stamp_meta is not None
        assert raw_calls._stamp_meta.keys() == {
            "io.modelcontextprotocol/protocolVersion",
            "io.modelcontextprotocol/clientInfo",
            "io.modelcontextprotocol/clientCapabilities",
        }
    os.close(read_fd)
    stdin.close()
    await stdin.close_pipe()


async def test_a_started_call_times_out_is_cancelled_and_moves_its_deadline_on_progress(
    fixture_stdio: StdioTransport, tmp_path: Path
) -> None:
    """McpToolBridge.start_call's deadlines (one task watches them) and cancel()."""
    markers = [tmp_path / "timed-out", tmp_path / "cancelled"]
    for marker in markers:
        os.mkfifo(marker)

    def wait_for_mark(marker: Path) -> str:
        with marker.open() as fifo:
            return fifo.read()

    async def mark(marker: Path) -> str:
        with trio.fail_after(10):
            return await trio.to_thread.run_sync(wait_for_mark, marker, abandon_on_cancel=True)

    events: list[object] = []
    with trio.fail_after(30):
        async with open_mcp_tools(
            server_id="fx", transport=fixture_stdio, call_timeout_s=1.0
        ) as bridge:
            options = DispatchOptions(
                registry=create_tool_registry(bridge.tools), on_event=events.append
            )
            assert bridge.starts_calls  # (a live stdio session)
            marks: list[bool] = []
            # 4 x 0.4 s, longer than call_timeout_s but never 1 s without progress
            steps = ToolCall(
                id="p", name="mcp:fx:progress", arguments={"steps": 4, "interval": 0.4}
            )
            stepped = await _started(bridge, options, steps, marks)
            assert not stepped.is_error, stepped.joined_text
            assert len([e for e in events if isinstance(e, ToolExecutionProgress)]) == 4
            slow = {"seconds": 60, "marker": str(markers[0])}
            timed_out = await _started(
                bridge, options, ToolCall(id="t", name="mcp:fx:sleep", arguments=slow), marks
            )
            assert timed_out.details["mcp_error"] == "timeout"
            assert "call_timeout_s=1s; the server was sent a cancellation" in timed_out.joined_text
            assert await mark(markers[0]) == "cancelled"
            assert bridge.unanswered("t")
            # Given up by its caller: done is never called, the server is told.
            ticket = begin_tool_call(
                ToolCall(
                    id="c",
                    name="mcp:fx:sleep",
                    arguments={"seconds": 60, "marker": str(markers[1])},
                ),
                options,
            )
            assert isinstance(ticket, CallTicket)
            assert ticket.tool is not None
            assert ticket.arguments is not None
            got: list[ToolResult] = []
            started = bridge.start_call(ticket.tool, ticket.arguments, ticket.context, got.append)
            assert started is not None
            started.cancel()
            assert await mark(markers[1]) == "cancelled"
            after = await _started(
                bridge,
                options,
                ToolCall(id="e", name="mcp:fx:echo", arguments={"text": "on"}),
                marks,
            )
            assert after.joined_text == "on"
            assert got == []
            assert marks == [True, True, True]
