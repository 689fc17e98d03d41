"""An asyncio application's own code in Prism's gates and tools, under one asyncio host.

A tool fetching with httpx's ``AsyncClient`` from a loopback server, a coding
approver that awaits an ``asyncio.Queue`` the application's UI task answers, and
the coding shell tool it guards: all of it asyncio code, run as tasks of the
host's loop, while Prism's own coding tools and policy run on trio.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import httpx2
import pytest

from prism.coding.security import create_coding_approval_policy
from prism.coding.tools import create_shell_tool
from prism.core import (
    DispatchOptions,
    ExecutionAction,
    ToolCall,
    ToolDefinition,
    ToolResult,
    create_tool_registry,
    open_asyncio_host,
)
from prism.core.ledger import RunLedger

if TYPE_CHECKING:
    from pathlib import Path

    from prism.core import JsonObject, ToolExecutionContext


async def open_http_server() -> tuple[asyncio.Server, str]:
    """A loopback HTTP/1.1 server (asyncio streams) answering every GET with its path."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = await reader.readline()
            while (await reader.readline()) not in (b"\r\n", b""):
                pass
            path = request_line.split()[1].decode()
            body = f"you asked for {path}".encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        finally:
            writer.close()
            await writer.wait_closed()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


def test_an_httpx_tool_runs_on_the_hosts_loop() -> None:
    ledger = RunLedger()

    async def main() -> list[ToolResult]:
        server, base = await open_http_server()
        async with server, httpx2.AsyncClient(base_url=base) as client:

            async def fetch(args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
                response = await asyncio.wait_for(client.get(str(args["path"])), timeout=30)
                return ToolResult.text(response.text)

            options = DispatchOptions(
                registry=create_tool_registry([ToolDefinition(name="fetch", execute=fetch)]),
                ledger=ledger,
            )
            async with open_asyncio_host() as host:
                return await asyncio.gather(
                    *(
                        host.dispatch_tool_call(
                            ToolCall(id=str(i), name="fetch", arguments={"path": f"/item/{i}"}),
                            options,
                        )
                        for i in range(4)
                    )
                )

    results = asyncio.run(main())
    assert [r.joined_text for r in results] == [f"you asked for /item/{i}" for i in range(4)]
    assert [r.status for r in ledger.records] == ["ok"] * 4


def test_an_asyncio_queue_approver_guards_the_coding_shell_tool(workspace: Path) -> None:
    ledger = RunLedger()
    asked: list[str | None] = []

    async def main() -> list[ToolResult]:
        questions: asyncio.Queue[tuple[ExecutionAction, asyncio.Future[bool]]] = asyncio.Queue()

        async def ui() -> None:
            # The application's UI answers: yes to "created", no to anything else.
            while True:
                action, reply = await questions.get()
                asked.append(action.command)
                reply.set_result("created" in (action.command or ""))

        async def approve(action: ExecutionAction) -> bool:
            assert asyncio.current_task() is not None  # asyncio code, on the host's loop
            reply: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            await questions.put((action, reply))
            return await reply

        policy = create_coding_approval_policy(roots=[str(workspace)], approve=approve)
        shell = create_shell_tool(str(workspace), execution_policy=policy)
        options = DispatchOptions(registry=create_tool_registry([shell]), ledger=ledger)
        answering = asyncio.create_task(ui())
        try:
            async with open_asyncio_host() as host:
                results = []
                for i, command in enumerate(["echo created > yes.txt", "echo refused > no.txt"]):
                    call = ToolCall(id=str(i), name="shell", arguments={"command": command})
                    results.append(await host.dispatch_tool_call(call, options))
                return results
        finally:
            answering.cancel()
            with pytest.raises(asyncio.CancelledError):
                await answering

    approved, refused = asyncio.run(main())
    assert asked == ["echo created > yes.txt", "echo refused > no.txt"]
    assert not approved.is_error, approved.joined_text
    assert (workspace / "yes.txt").read_text() == "created\n"
    assert refused.is_error
    assert not (workspace / "no.txt").exists()
    assert [r.status for r in ledger.records] == ["ok", "error"]


def test_the_approval_timeout_cancels_an_asyncio_approver(workspace: Path) -> None:
    cancelled: list[str] = []

    async def main() -> ToolResult:
        async def never(action: ExecutionAction) -> bool:
            try:
                await asyncio.Event().wait()  # nobody answers
            except asyncio.CancelledError:
                cancelled.append(action.command or "")
                raise
            raise AssertionError("unreachable")

        policy = create_coding_approval_policy(
            roots=[str(workspace)], approve=never, approval_timeout_s=0.01
        )
        shell = create_shell_tool(str(workspace), execution_policy=policy)
        options = DispatchOptions(registry=create_tool_registry([shell]))
        async with open_asyncio_host() as host:
            call = ToolCall(id="1", name="shell", arguments={"command": "echo x > late.txt"})
            return await host.dispatch_tool_call(call, options)

    result = asyncio.run(main())
    assert result.is_error
    assert "timed_out" in result.joined_text
    assert cancelled == ["echo x > late.txt"]
    assert not (workspace / "late.txt").exists()
