"""OAuth resource-server auth over HTTP: tokens checked by a verifier, metadata served."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx2
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.provider import AccessToken

from prism.core import JsonObject, ToolDefinition, ToolExecutionContext, ToolResult
from prism.core.ledger import RunLedger
from prism.gateway import HttpOptions, OAuthResourceServer, open_gateway, serve_http

if TYPE_CHECKING:
    from conftest import WebSocketHandshake

ISSUER = "https://auth.example"


class _Verifier:
    def __init__(self, resource: str) -> None:
        self.resource = resource

    async def verify_token(self, token: str) -> AccessToken | None:
        if token == "good-token":
            return AccessToken(
                token=token, client_id="ide-1", scopes=["mcp"], resource=self.resource
            )
        if token in ("alice-token", "bob-token", "mallory-token"):  # one client app
            return AccessToken(
                token=token,
                client_id="ide-1",
                scopes=["mcp"],
                resource=self.resource,
                subject=token.split("-")[0],
            )
        return None


async def _echo(_args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text("ok")


async def _serve(nursery: trio.Nursery, ledger: RunLedger, *tools: ToolDefinition) -> str:
    # The resource URL must be known before the port: bind a fixed free port first.
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    resource = f"http://127.0.0.1:{port}/mcp"
    auth = OAuthResourceServer(
        verifier=_Verifier(resource),
        issuer_url=ISSUER,
        resource_server_url=resource,
        required_scopes=("mcp",),
    )
    gateway = await nursery.start(_run_gateway, ledger, tools)
    url: str = await nursery.start(serve_http, gateway, HttpOptions(port=port, auth=auth))
    return url


async def _run_gateway(
    ledger: RunLedger, tools: tuple[ToolDefinition, ...], task_status: trio.TaskStatus[object]
) -> None:
    tool = ToolDefinition(name="echo", execute=_echo)
    async with open_gateway(tools=[tool, *tools], ledger=ledger, max_calls_per_client=1) as gateway:
        task_status.started(gateway)
        await trio.sleep_forever()


async def test_valid_token_is_let_in_and_recorded_by_client_id(nursery: trio.Nursery) -> None:
    ledger = RunLedger()
    url = await _serve(nursery, ledger)
    async with (
        httpx2.AsyncClient(headers={"authorization": "Bearer good-token"}) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        result = await client.call_tool("echo", {})
    assert not result.is_error
    assert ledger.records[-1].call_id.startswith("oauth:ide-1/")
    nursery.cancel_scope.cancel()


async def test_bad_token_is_refused_with_metadata_pointer(nursery: trio.Nursery) -> None:
    url = await _serve(nursery, RunLedger())
    async with httpx2.AsyncClient() as http:
        response = await http.post(
            url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"authorization": "Bearer bad-token", "accept": "application/json"},
        )
        metadata = await http.get(url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp"))
    assert response.status_code == 401
    assert "resource_metadata" in response.headers["www-authenticate"]
    assert metadata.status_code == 200
    assert ISSUER in str(metadata.json()["authorization_servers"])
    nursery.cancel_scope.cancel()


def test_oauth_counts_as_auth_for_a_public_bind() -> None:
    auth = OAuthResourceServer(
        verifier=_Verifier("https://gw.example/mcp"),
        issuer_url=ISSUER,
        resource_server_url="https://gw.example/mcp",
    )
    assert HttpOptions(host="0.0.0.0", auth=auth).auth is auth


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}


async def test_a_session_opened_by_one_subject_refuses_another(nursery: trio.Nursery) -> None:
    """Same OAuth client, another user: the session is not theirs (404, and recorded)."""
    ledger = RunLedger()
    url = await _serve(nursery, ledger)
    initialize = INITIALIZE
    base = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    async with httpx2.AsyncClient(timeout=60) as http:
        opened = await http.post(
            url, json=initialize, headers={**base, "authorization": "Bearer alice-token"}
        )
        session = opened.headers["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        in_session = {**base, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        bob = await http.post(
            url, json=listing, headers={**in_session, "authorization": "Bearer bob-token"}
        )
        alice = await http.post(
            url, json=listing, headers={**in_session, "authorization": "Bearer alice-token"}
        )
    assert bob.status_code == 404
    assert alice.status_code == 200
    refused = [
        r for r in ledger.records if r.tool_name == "prism:session" and r.status == "blocked"
    ]
    assert len(refused) == 1
    assert refused[0].call_id.startswith("oauth:ide-1|bob/session/")
    assert isinstance(refused[0].arguments, dict)
    assert refused[0].arguments["owner"] == "oauth ide-1|alice"
    nursery.cancel_scope.cancel()


async def test_two_users_of_one_client_app_share_neither_label_nor_call_limit(
    nursery: trio.Nursery,
) -> None:
    """Alice and Mallory, one OAuth client app, 2026-07-28 connections (no session): while
    Mallory holds the one call a client may run, Alice's call runs; each is recorded as its
    own principal."""
    ledger = RunLedger()
    holding, release = trio.Event(), trio.Event()

    async def hold(_args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        holding.set()
        await release.wait()
        return ToolResult.text("held")

    url = await _serve(nursery, ledger, ToolDefinition(name="hold", execute=hold))
    async with (
        httpx2.AsyncClient(headers={"authorization": "Bearer alice-token"}) as alice_http,
        httpx2.AsyncClient(headers={"authorization": "Bearer mallory-token"}) as mallory_http,
        Client(streamable_http_client(url, http_client=alice_http), mode="2026-07-28") as alice,
        Client(streamable_http_client(url, http_client=mallory_http), mode="2026-07-28") as mallory,
        trio.open_nursery() as calls,
    ):
        calls.start_soon(mallory.call_tool, "hold", {})
        with trio.fail_after(60):  # (shared, the limit would hold Alice's call forever)
            await holding.wait()
            result = await alice.call_tool("echo", {})
        release.set()
    assert not result.is_error
    ids = {record.tool_name: record.call_id for record in ledger.records}
    assert ids["echo"].startswith("oauth:ide-1|alice/")
    assert ids["hold"].startswith("oauth:ide-1|mallory/")
    nursery.cancel_scope.cancel()


class _FlakyVerifier(_Verifier):
    """Mallory's token fails to verify every other time (an introspection endpoint timing out)."""

    def __init__(self, resource: str) -> None:
        super().__init__(resource)
        self.asked = 0

    async def verify_token(self, token: str) -> AccessToken | None:
        if token == "mallory-token":
            self.asked += 1
            if self.asked % 2 == 1:
                raise TimeoutError("introspection endpoint timed out")
        return await super().verify_token(token)


async def test_a_verifier_that_raises_refuses_the_request_and_is_recorded(
    nursery: trio.Nursery,
) -> None:
    """The guard's verification raises, the SDK's would succeed: Mallory in Alice's session
    still gets 401 (never let through unverified), and the failure is in the ledger."""
    ledger = RunLedger()
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    flaky = _FlakyVerifier(f"http://127.0.0.1:{port}/mcp")
    gateway = await nursery.start(_run_gateway, ledger, ())
    auth = OAuthResourceServer(
        verifier=flaky,
        issuer_url=ISSUER,
        resource_server_url=flaky.resource,
        required_scopes=("mcp",),
    )
    url = await nursery.start(serve_http, gateway, HttpOptions(port=port, auth=auth))
    base = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    async with httpx2.AsyncClient(timeout=60) as http:
        opened = await http.post(
            url, json=INITIALIZE, headers={**base, "authorization": "Bearer alice-token"}
        )
        session = opened.headers["mcp-session-id"]
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {}},
        }
        in_session = {**base, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        mallory = await http.post(
            url, json=call, headers={**in_session, "authorization": "Bearer mallory-token"}
        )
    assert mallory.status_code == 401
    assert "resource_metadata" in mallory.headers["www-authenticate"]
    refused = [
        r for r in ledger.records if r.tool_name == "prism:session" and r.status == "blocked"
    ]
    assert len(refused) == 1
    assert isinstance(refused[0].arguments, dict)
    assert "introspection endpoint timed out" in str(refused[0].arguments["reason"])
    assert [r.tool_name for r in ledger.records if r.tool_name == "echo"] == []
    nursery.cancel_scope.cancel()


async def test_a_websocket_handshake_is_refused_before_the_sdk(
    nursery: trio.Nursery, websocket_handshake: WebSocketHandshake
) -> None:
    """Without a verified token: 401 pointing at the metadata; with one: 400, recorded with
    the token's principal."""
    ledger = RunLedger()
    url = await _serve(nursery, ledger)
    unverified = await websocket_handshake(url, authorization="Bearer forged-token")
    verified = await websocket_handshake(url, authorization="Bearer alice-token")
    refused: list[Any] = [r for r in ledger.records if r.tool_name == "prism:session"]
    nursery.cancel_scope.cancel()
    assert unverified[0] == 401
    assert b"resource_metadata=" in unverified[1]
    assert verified[0] == 400
    assert [r.arguments["principal"] for r in refused] == ["oauth ide-1|alice"]
