"""OAuth resource-server auth over HTTP: tokens checked by a verifier, metadata served."""

from __future__ import annotations

import httpx2
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.provider import AccessToken

from prism.core import JsonObject, ToolDefinition, ToolExecutionContext, ToolResult
from prism.core.ledger import RunLedger
from prism.gateway import HttpOptions, OAuthResourceServer, open_gateway, serve_http

ISSUER = "https://auth.example"


class _Verifier:
    def __init__(self, resource: str) -> None:
        self.resource = resource

    async def verify_token(self, token: str) -> AccessToken | None:
        if token != "good-token":
            return None
        return AccessToken(token=token, client_id="ide-1", scopes=["mcp"], resource=self.resource)


async def _echo(_args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text("ok")


async def _serve(nursery: trio.Nursery, ledger: RunLedger) -> str:
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
    gateway = await nursery.start(_run_gateway, ledger)
    url: str = await nursery.start(serve_http, gateway, HttpOptions(port=port, auth=auth))
    return url


async def _run_gateway(ledger: RunLedger, task_status: trio.TaskStatus[object]) -> None:
    tool = ToolDefinition(name="echo", execute=_echo)
    async with open_gateway(tools=[tool], ledger=ledger) as gateway:
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
