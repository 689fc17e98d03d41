"""The gateway over Streamable HTTP on 127.0.0.1, driven by the official MCP SDK client."""

from __future__ import annotations

import gc
import socket
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import httpx2
import mcp_types as types
import pytest
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from prism.core import (
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    create_rule_permission_policy,
)
from prism.core._content import NO_TEXT_BOUND
from prism.core.ledger import RunLedger
from prism.gateway import (
    BearerAuth,
    GatewayConfigurationError,
    GatewayError,
    HttpOptions,
    build_http_app,
    open_gateway,
    serve_http,
)
from prism.gateway._gateway import LONE_SURROGATE

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from contextlib import AbstractAsyncContextManager

    from conftest import WebSocketHandshake

    ServeFactory = Callable[..., AbstractAsyncContextManager[Any]]
    Initialize = Callable[..., dict[str, Any]]

TOKEN = "test-token-0123456789abcdef"


def approve_all(answer: bool = True) -> Any:
    """An elicitation callback that answers every question with ``approve=answer``."""

    async def callback(_ctx: object, _params: object) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"approve": answer})

    return callback


ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


async def test_lists_tools_under_safe_names_with_truthful_hints(serve: ServeFactory) -> None:
    # One gateway (one bridged server process) for the coding tools' hints and the
    # bridged tool's annotations, which pass through.
    async with serve() as served, Client(served.url) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert {"read", "write", "edit", "shell", "mcp__fx__echo"} <= set(tools)
    read = tools["read"].annotations
    shell = tools["shell"].annotations
    assert read is not None
    assert read.read_only_hint is True
    assert read.destructive_hint is False
    assert shell is not None
    assert shell.read_only_hint is False
    assert shell.destructive_hint is True
    echo = tools["mcp__fx__echo"].annotations
    assert echo is not None
    assert echo.read_only_hint is True
    assert echo.open_world_hint is False


async def test_reads_a_file_in_the_workspace(serve: ServeFactory) -> None:
    async with serve(bridged=False) as served, Client(served.url) as client:
        result = await client.call_tool("read", {"path": "notes.txt"})
    assert not result.is_error
    assert isinstance(result.content[0], types.TextContent)
    assert "hello from the workspace" in result.content[0].text


async def test_calls_a_bridged_servers_tool_and_records_it_with_the_client(
    serve: ServeFactory,
) -> None:
    async with serve() as served:
        async with Client(served.url) as client:
            result = await client.call_tool("mcp__fx__echo", {"text": "through the gates"})
        assert not result.is_error
        assert isinstance(result.content[0], types.TextContent)
        assert result.content[0].text == "through the gates"
        ledger = served.gateway.ledger
        assert ledger is not None
        records = ledger.records
    assert [r.tool_name for r in records] == ["mcp:fx:echo"]
    assert records[0].status == "ok"
    assert records[0].call_id.startswith("anonymous/")


async def test_denied_command_is_an_error_the_model_can_read(serve: ServeFactory) -> None:
    async with serve(bridged=False) as served:
        async with Client(served.url, elicitation_callback=approve_all()) as client:
            result = await client.call_tool("shell", {"command": "sudo id"})
        ledger = served.gateway.ledger
        assert ledger is not None
        status = ledger.records[-1].status
    assert result.is_error
    assert isinstance(result.content[0], types.TextContent)
    assert "denied" in result.content[0].text
    assert "sudo" in result.content[0].text
    assert status == "error"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_approval_by_elicitation_lets_the_command_run(serve: ServeFactory, mode: str) -> None:
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    async with (
        serve(bridged=False) as served,
        Client(served.url, elicitation_callback=elicit, mode=mode) as client,
    ):
        result = await client.call_tool("shell", {"command": "touch made.txt && echo made"})
    assert not result.is_error, result.content
    assert (served.root / "made.txt").exists()
    assert len(asked) == 1
    assert "touch made.txt" in asked[0]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_declined_elicitation_denies_and_nothing_runs(serve: ServeFactory, mode: str) -> None:
    async with (
        serve(bridged=False) as served,
        Client(served.url, elicitation_callback=approve_all(False), mode=mode) as client,
    ):
        result = await client.call_tool("shell", {"command": "touch no.txt"})
    assert result.is_error
    assert isinstance(result.content[0], types.TextContent)
    assert "declined by the client" in result.content[0].text
    assert not (served.root / "no.txt").exists()


async def test_client_without_elicitation_gets_the_default_denial(serve: ServeFactory) -> None:
    async with serve(bridged=False) as served, Client(served.url) as client:
        result = await client.call_tool("shell", {"command": "touch no.txt"})
    assert result.is_error
    assert isinstance(result.content[0], types.TextContent)
    assert "no approver is configured" in result.content[0].text
    assert not (served.root / "no.txt").exists()


async def test_progress_of_a_bridged_call_reaches_the_client(serve: ServeFactory) -> None:
    seen: list[tuple[float, float | None]] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    async with serve() as served, Client(served.url) as client:
        result = await client.call_tool("mcp__fx__count", {"steps": 3}, progress_callback=progress)
    assert not result.is_error
    assert seen == [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)]


async def test_list_changed_from_a_bridge_reaches_the_client(serve: ServeFactory) -> None:
    changed = trio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with (
        serve() as served,
        Client(served.url, message_handler=on_message, mode="legacy") as client,
    ):
        await client.list_tools()
        await client.call_tool("mcp__fx__grow", {})
        with trio.fail_after(30):
            await changed.wait()
        names = {tool.name for tool in (await client.list_tools()).tools}
    assert "mcp__fx__extra" in names


async def test_unknown_tool_is_a_protocol_error(serve: ServeFactory) -> None:
    async with serve() as served, Client(served.url) as client:
        with pytest.raises(MCPError, match="Unknown tool"):
            await client.call_tool("no_such_tool", {})


async def test_bad_arguments_are_an_error_naming_the_problem(serve: ServeFactory) -> None:
    async with serve(bridged=False) as served, Client(served.url) as client:
        result = await client.call_tool("read", {"path": 5})
    assert result.is_error
    assert isinstance(result.content[0], types.TextContent)
    assert "path" in result.content[0].text


async def test_missing_bearer_token_is_refused(serve: ServeFactory, initialize: Initialize) -> None:
    async with (
        serve(auth=BearerAuth(tokens=(TOKEN,)), bridged=False) as served,
        httpx2.AsyncClient() as http,
    ):
        response = await http.post(served.url, json=initialize(), headers=ACCEPT)
    assert response.status_code == 401
    assert "bearer" in response.json()["error"]["message"]


async def test_wrong_bearer_token_is_refused(serve: ServeFactory, initialize: Initialize) -> None:
    async with (
        serve(auth=BearerAuth(tokens=(TOKEN,)), bridged=False) as served,
        httpx2.AsyncClient() as http,
    ):
        headers = {**ACCEPT, "authorization": "Bearer " + "x" * len(TOKEN)}
        response = await http.post(served.url, json=initialize(), headers=headers)
    assert response.status_code == 401


async def test_right_bearer_token_is_let_in(serve: ServeFactory) -> None:
    async with (
        serve(auth=BearerAuth(tokens=(TOKEN,))) as served,
        httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"}) as http,
        Client(streamable_http_client(served.url, http_client=http)) as client,
    ):
        result = await client.call_tool("mcp__fx__echo", {"text": "in"})
        ledger = served.gateway.ledger
        assert ledger is not None
        call_id = ledger.records[-1].call_id
    assert not result.is_error
    # The ledger names the caller by a digest of its token, never the token.
    assert call_id.startswith("token:")
    assert TOKEN not in call_id


async def test_foreign_origin_is_refused(serve: ServeFactory, initialize: Initialize) -> None:
    async with serve(bridged=False) as served, httpx2.AsyncClient() as http:
        headers = {**ACCEPT, "origin": "http://evil.example"}
        response = await http.post(served.url, json=initialize(), headers=headers)
    assert response.status_code == 403
    assert "evil.example" in response.json()["error"]["message"]


async def test_loopback_origin_is_accepted(serve: ServeFactory, initialize: Initialize) -> None:
    async with serve(bridged=False) as served, httpx2.AsyncClient() as http:
        headers = {**ACCEPT, "origin": "http://localhost:3000"}
        response = await http.post(served.url, json=initialize(), headers=headers)
    assert response.status_code == 200


async def test_oversized_request_is_refused(serve: ServeFactory, initialize: Initialize) -> None:
    async with (
        serve(max_request_bytes=4096, bridged=False) as served,
        httpx2.AsyncClient() as http,
    ):
        init = initialize()
        big = {**init, "params": {**init["params"], "padding": "x" * 10_000}}
        response = await http.post(served.url, json=big, headers=ACCEPT)
    assert response.status_code == 413


def test_non_loopback_bind_without_auth_is_refused() -> None:
    with pytest.raises(GatewayConfigurationError, match="without auth"):
        HttpOptions(host="0.0.0.0", port=0)


def test_non_loopback_bind_with_auth_is_accepted() -> None:
    options = HttpOptions(host="0.0.0.0", port=0, auth=BearerAuth(tokens=(TOKEN,)))
    assert options.auth is not None


async def test_stateless_mode_serves_calls_and_approvals(serve: ServeFactory) -> None:
    async with (
        serve(stateless=True) as served,
        Client(served.url, elicitation_callback=approve_all()) as client,
    ):
        echo = await client.call_tool("mcp__fx__echo", {"text": "stateless"})
        shell = await client.call_tool("shell", {"command": "touch stateless.txt"})
    assert not echo.is_error
    assert not shell.is_error
    assert (served.root / "stateless.txt").exists()


async def test_client_cancel_over_http_reaches_the_bridged_server(serve: ServeFactory) -> None:
    async with serve() as served, Client(served.url) as client:
        with pytest.raises(MCPError, match="timed out"):
            await client.call_tool("mcp__fx__hang", {}, read_timeout_seconds=0.5)
        cancelled = await client.call_tool("mcp__fx__was_hang_cancelled", {})
    assert cancelled.structured_content == {"result": True}


async def test_list_changed_reaches_a_2026_client_through_listen(serve: ServeFactory) -> None:
    changed = trio.Event()
    async with serve() as served, Client(served.url) as client:
        await client.list_tools()
        async with client.listen(tools_list_changed=True) as subscription:
            await client.call_tool("mcp__fx__grow", {})
            with trio.fail_after(30):
                async for _event in subscription:
                    changed.set()
                    break
        names = {tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools}
    assert changed.is_set()
    assert "mcp__fx__extra" in names


@asynccontextmanager
async def _bare(**options: Any) -> AsyncIterator[str]:
    """A gateway with no tools over HTTP (the guard in front of it is what is tested)."""
    async with open_gateway() as gateway, trio.open_nursery() as nursery:
        yield await nursery.start(serve_http, gateway, HttpOptions(**options))
        nursery.cancel_scope.cancel()


async def test_a_bad_content_length_is_refused() -> None:
    # hypercorn refuses one itself; another ASGI server hosting the app may not.
    sent: list[Any] = []

    async def receive() -> Any:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "headers": [(b"content-length", b"lots"), (b"content-type", b"application/json")],
    }
    async with open_gateway() as gateway:
        await build_http_app(gateway, HttpOptions())(scope, receive, send)
    assert sent[0]["status"] == 400
    assert b"bad Content-Length" in sent[1]["body"]


async def test_an_oversized_chunked_body_is_refused_while_it_is_read() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(8):
            yield b" " * 1024

    async with _bare(max_request_bytes=4096) as url, httpx2.AsyncClient() as http:
        response = await http.post(url, content=chunks(), headers=ACCEPT)
    assert response.status_code == 413


async def test_a_body_that_would_cost_too_much_to_parse_is_refused_unparsed(
    initialize: Initialize,
) -> None:
    """An attacker's 1 MB tools/call of '[]' took about 37 MB and a second of the event
    loop to build before the validator refused it (30 at once: a 9 s stall for every
    client, +1 GB). The body is priced on its bytes first and refused unparsed."""
    items = b",".join([b"[]"] * 100_000)
    flood = (
        b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", '
        b'"params": {"name": "echo", "arguments": {"a": [' + items + b"]}}}"
    )
    text = b'{"jsonrpc": "2.0", "id": 8, "method": "ping", "params": {"_p": "' + b"x" * 300_000
    headers = {**ACCEPT, "content-type": "application/json"}
    async with _bare() as url, httpx2.AsyncClient() as http:
        refused = await http.post(url, content=flood, headers=headers)
        # the same size of text is no flood: it reaches the SDK (which wants a session)
        passed = await http.post(url, content=text + b'"}}', headers=headers)
    assert refused.status_code == 413
    assert refused.json()["error"]["message"].startswith(
        "the client sent a message of 100004 objects and arrays"
    )
    assert passed.status_code != 413


@pytest.mark.parametrize(
    ("origin", "status"),
    [
        ("https://app.example", 200),
        ("https://ide.example:8443", 200),
        ("https://ide.example:https", 403),
        ("https://ide.example.evil:8443", 403),
    ],
)
async def test_allowed_origins_take_exact_values_and_port_wildcards(
    origin: str, status: int, initialize: Initialize
) -> None:
    allowed = ("https://app.example", "https://ide.example:*")
    async with _bare(allowed_origins=allowed) as url, httpx2.AsyncClient() as http:
        response = await http.post(url, json=initialize(), headers={**ACCEPT, "origin": origin})
    assert response.status_code == status


@pytest.mark.parametrize("host", ["localhost", "::1", "[::1]", "127.0.0.2"])
def test_loopback_names_need_no_auth(host: str) -> None:
    assert HttpOptions(host=host).host == host


@pytest.mark.parametrize("host", ["example.com", "10.0.0.1", "::"])
def test_other_hosts_need_auth(host: str) -> None:
    with pytest.raises(GatewayConfigurationError, match="without auth"):
        HttpOptions(host=host)


async def test_a_port_in_use_is_a_gateway_error_and_leaves_no_socket_open() -> None:
    # hypercorn's own bind (0.18) left the failed socket open; the gateway binds itself,
    # so no ResourceWarning (an error under this suite's warning filters) may appear
    async with _bare() as url, open_gateway() as second:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        with pytest.raises(GatewayError, match="cannot serve on 127"):
            await serve_http(second, HttpOptions(port=port))
    gc.collect()


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.parametrize(
    ("host", "prefix"),
    [
        ("localhost", "http://127.0.0.1:"),
        pytest.param(
            "::1",
            "http://[::1]:",
            marks=pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback here"),
        ),
    ],
)
async def test_serves_on_each_loopback_name(host: str, prefix: str, initialize: Initialize) -> None:
    async with _bare(host=host) as url, httpx2.AsyncClient() as http:
        assert url.startswith(prefix)
        response = await http.post(url, json=initialize(), headers=ACCEPT)
    assert response.status_code == 200


async def test_a_websocket_request_is_refused_by_the_guard(
    websocket_handshake: WebSocketHandshake,
) -> None:
    """The SDK's app never sees a WebSocket handshake: without the token it is refused 401,
    from a foreign Origin 403, with a binding header twice 400, and with the right token
    400 on any path (recorded with its principal)."""
    bearer = {"authorization": f"Bearer {TOKEN}"}
    options = HttpOptions(auth=BearerAuth(tokens=(TOKEN,)))
    ledger = RunLedger()
    async with open_gateway(ledger=ledger) as gateway, trio.open_nursery() as nursery:
        url = await nursery.start(serve_http, gateway, options)
        anonymous = await websocket_handshake(url)
        foreign = await websocket_handshake(url, origin="http://evil.example", **bearer)
        twice = await websocket_handshake(
            url, **bearer, **{"mcp-session-id": "a", "Mcp-Session-Id": "b"}
        )
        with_token = await websocket_handshake(url, **bearer)
        elsewhere = await websocket_handshake(url.replace("/mcp", "/other"), **bearer)
        nursery.cancel_scope.cancel()
    refused: list[Any] = [r for r in ledger.records if r.tool_name == "prism:session"]
    assert anonymous[0] == 401
    assert foreign[0] == 403
    assert b"evil.example" in foreign[1]
    assert twice[0] == 400
    assert with_token[0] == 400
    assert b"WebSocket is not served" in with_token[1]
    assert elsewhere[0] == 400
    assert [r.arguments["event"] for r in refused] == ["refused", "refused"]
    assert all(r.status == "blocked" for r in refused)
    assert all(r.arguments["principal"].startswith("token ") for r in refused)
    assert all("WebSocket" in str(r.arguments["reason"]) for r in refused)


async def test_requests_of_other_asgi_kinds_never_reach_the_sdk() -> None:
    """Hosted by an ASGI server without the WebSocket denial response, a handshake is closed
    before it is accepted (the server answers 403); a request of an unknown kind is dropped."""
    sent: list[Any] = []

    async def receive() -> Any:
        return {"type": "websocket.connect"}

    async def send(message: Any) -> None:
        sent.append(message)

    async with open_gateway() as gateway:
        app = build_http_app(gateway, HttpOptions())
        await app({"type": "websocket", "path": "/mcp", "headers": []}, receive, send)
        closed = list(sent)
        sent.clear()
        await app({"type": "webtransport", "path": "/mcp", "headers": []}, receive, send)
    assert closed == [{"type": "websocket.close", "code": 1008}]
    assert sent == []


async def test_a_call_over_http_is_built_from_the_text_of_its_request() -> None:
    """The guard parses each POST body already: a tools/call keeps what its text proves.

    The validator sees the call's arguments as the very object the guard parsed,
    with the body's bound; a body that could hold a 64-bit-plus integer gets none
    (its arguments are walked). Either way the validator's verdict is the answer.
    """
    seen: list[tuple[bool, bool]] = []

    def observe(_tool: object, arguments: Any, ctx: ToolExecutionContext) -> str | None:
        call = ctx.call
        seen.append((call._text_bound != NO_TEXT_BOUND, arguments is call.arguments))
        return "refused: b must be small" if arguments.get("b", 0) > 10 else None

    async def add(arguments: Any, _ctx: ToolExecutionContext) -> ToolResult:
        return ToolResult.text(str(arguments["a"] + arguments["b"]))

    async def lone(_arguments: Any, _ctx: ToolExecutionContext) -> ToolResult:
        return ToolResult.text("bad \ud800 text")

    tool = ToolDefinition(name="add", execute=add, parameters={"type": "object"})
    async with (
        open_gateway(
            tools=[tool, ToolDefinition(name="lone", execute=lone)],
            permission=create_rule_permission_policy(allow=["tool:*:execute"]),
            validator=observe,
        ) as gateway,
        trio.open_nursery() as nursery,
    ):
        url = await nursery.start(serve_http, gateway, HttpOptions(host="127.0.0.1", port=0))
        async with Client(url) as client:
            ok = await client.call_tool("add", {"a": 2, "b": 3})
            refused = await client.call_tool("add", {"a": 2, "b": 30})
            huge = await client.call_tool("add", {"a": 1, "b": 12345678901234567890})
            # No UTF-8 holds a lone surrogate: the SDK's encoder answered a JSON-RPC error
            # of code 0. Over HTTP as over stdio, an error result naming the problem.
            surrogate = await client.call_tool("lone", {})
        nursery.cancel_scope.cancel()
    assert not ok.is_error
    assert isinstance(ok.content[0], types.TextContent)
    assert ok.content[0].text == "5"
    for result in (refused, huge):
        assert result.is_error
        assert isinstance(result.content[0], types.TextContent)
        assert "b must be small" in result.content[0].text
    assert seen == [(True, True), (True, True), (False, True), (True, True)]
    assert surrogate.is_error
    assert isinstance(surrogate.content[0], types.TextContent)
    assert surrogate.content[0].text == f"result refused: {LONE_SURROGATE}"
