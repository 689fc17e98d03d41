"""Cancellation end to end: a client cancels a shell call, and its whole process tree ends."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import gateway_prewarmed as prewarmed
import httpx2
import mcp_types as types
import trio
from mcp import Client, StdioServerParameters

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager

    ServeFactory = Callable[..., AbstractAsyncContextManager[Any]]
    RawStdioFactory = Callable[..., AbstractAsyncContextManager[Any]]
    Initialize = Callable[..., dict[str, Any]]

# The ``tree`` fixture (conftest.ProcessTree): a shell command that starts a process tree.
ProcessTree = Any
STDIO_MAIN = Path(__file__).resolve().parent / "gateway_stdio_main.py"


async def _approve(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"approve": True})


async def _cancel_mid_call(client: Client, tree: ProcessTree) -> list[int]:
    """Start the tree through the gateway's shell tool, then cancel the call (the SDK
    sends ``notifications/cancelled``); the pids of the tree."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.call_tool, "shell", {"command": tree.command})
        pids: list[int] = await tree.started()
        nursery.cancel_scope.cancel()
    return pids


async def test_cancel_over_stdio_ends_the_process_tree(workspace: Path, tree: ProcessTree) -> None:
    command, args = prewarmed.command(STDIO_MAIN, str(workspace))
    params = StdioServerParameters(command=command, args=args)
    async with Client(params, elicitation_callback=_approve) as client:
        pids = await _cancel_mid_call(client, tree)
        await tree.assert_ends(pids)
        after = await client.call_tool("read", {"path": "notes.txt"})
    assert not after.is_error


async def test_cancel_over_http_ends_the_process_tree(
    serve: ServeFactory, tree: ProcessTree
) -> None:
    async with (
        serve(bridged=False) as served,
        Client(served.url, elicitation_callback=_approve) as client,
    ):
        pids = await _cancel_mid_call(client, tree)
        await tree.assert_ends(pids)
        after = await client.call_tool("read", {"path": "notes.txt"})
        ledger = served.gateway.ledger
    assert not after.is_error
    # Read once the gateway has stopped: the cancelled call is recorded as it settles,
    # which may be just after its process tree has ended.
    assert ledger is not None
    shell = [record for record in ledger.records if record.tool_name == "shell"]
    # (A 2026-07-28 client's approval round trip leaves a record for the question first.)
    assert shell[-1].status == "cancelled"


def _request(number: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": number, "method": method, "params": params}


def _shell_call(command: str) -> dict[str, Any]:
    return _request(2, "tools/call", {"name": "shell", "arguments": {"command": command}})


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


async def test_stdio_client_gone_mid_call_ends_the_tree_and_the_gateway(
    raw_stdio: RawStdioFactory, tree: ProcessTree, initialize: Initialize
) -> None:
    async with raw_stdio() as gateway:
        with trio.fail_after(60):
            await gateway.send(initialize({"elicitation": {}}))
            assert (await gateway.receive())["id"] == 1
            await gateway.send(INITIALIZED)
            await gateway.send(_shell_call(tree.command))
            question = await gateway.receive()
            assert question["method"] == "elicitation/create"
            answer = {"action": "accept", "content": {"approve": True}}
            await gateway.send({"jsonrpc": "2.0", "id": question["id"], "result": answer})
            pids = await tree.started()
            # The client goes away without cancelling: stdin closes mid-call.
            await gateway.close_stdin()
            await tree.assert_ends(pids)
            status = await gateway.process.wait()
    assert status == 0


async def test_http_client_gone_mid_call_ends_the_tree(
    serve: ServeFactory, tree: ProcessTree, initialize: Initialize
) -> None:
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    # No elicitation: the configured approver says yes.
    async with (
        serve(fallback=lambda _action: True, bridged=False) as served,
        httpx2.AsyncClient(timeout=None) as http,
    ):
        with trio.fail_after(60):
            opened = await http.post(served.url, json=initialize(), headers=headers)
            headers["mcp-session-id"] = opened.headers["mcp-session-id"]
            headers["mcp-protocol-version"] = "2025-11-25"
            await http.post(served.url, json=INITIALIZED, headers=headers)
            async with trio.open_nursery() as nursery:

                async def call_and_wait() -> None:
                    call = _shell_call(tree.command)
                    async with http.stream("POST", served.url, json=call, headers=headers) as sse:
                        async for _chunk in sse.aiter_bytes():
                            pass

                nursery.start_soon(call_and_wait)
                pids = await tree.started()
                # The client drops the call's connection without a cancellation.
                nursery.cancel_scope.cancel()
            await tree.assert_ends(pids)
