"""Fixtures for prism-gateway: a real gateway (coding tools, a bridged server) on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx2
import hypothesis
import pytest
import trio

from prism.coding.security import create_coding_approval_policy, create_contained_file_operations
from prism.coding.tools import create_coding_tools
from prism.core import create_rule_permission_policy
from prism.core.ledger import RunLedger
from prism.gateway import (
    CODING_TOOL_HINTS,
    Gateway,
    GatewayApprover,
    HttpOptions,
    create_gateway_approver,
    open_gateway,
    serve_http,
)
from prism.mcp import StdioTransport, open_mcp_tools
from prism.mcp.testing import UPSTREAM_WARNING_FILTERS

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))  # the test modules import gateway_prewarmed
import gateway_prewarmed as prewarmed  # noqa: E402

FIXTURE_SERVER = TESTS / "gateway_fixture_server.py"
STDIO_MAIN = TESTS / "gateway_stdio_main.py"
# The fixture servers start from one warm parent (gateway_prewarmed.py): each start skips
# importing the MCP SDK again (about a CPU-second each).
prewarmed.configure(FIXTURE_SERVER, TESTS / "gateway_trace_server.py", STDIO_MAIN)


@pytest.fixture(scope="session", autouse=True)
def _warm_parent() -> Iterator[None]:
    """Ends the warm parent of the fixture servers (if a test started it) with the session."""
    yield
    prewarmed.stop_all()


@attrs.define
class Served:
    url: str
    gateway: Gateway
    root: Path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("hello from the workspace\n", encoding="utf-8")
    return root


ServeFactory = Callable[..., AbstractAsyncContextManager[Served]]


def _alive(pid: int) -> bool:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return False
    return raw[raw.rfind(b")") + 2 :].split()[0] != b"Z"  # a zombie has ended


@attrs.define
class ProcessTree:
    """A shell command that starts a process tree and tells its pids through a FIFO.

    The tree: the shell, a child, and a ``setsid`` child in a session of its
    own; each would sleep for 1000 s.
    """

    fifo: Path
    command: str = "sleep 1000 & a=$!; setsid sleep 1000 & b=$!; echo $$ $a $b > tree.fifo; wait"

    async def started(self) -> list[int]:
        """The tree's pids, once the command has started all of it."""
        # Opened read-write, so a read waits for the shell instead of seeing EOF.
        fd = os.open(self.fifo, os.O_RDWR)
        text = b""
        with trio.fail_after(60):
            async with trio.lowlevel.FdStream(fd) as stream:
                while not text.endswith(b"\n"):
                    text += await stream.receive_some()
        pids = [int(pid) for pid in text.split()]
        assert len(pids) == 3, text
        assert all(map(_alive, pids)), pids
        return pids

    async def assert_ends(self, pids: list[int]) -> None:
        """Wait (at most 30 s, woken by each process's pidfd) until every pid has ended."""
        with trio.fail_after(30):
            for pid in pids:
                try:
                    fd = os.pidfd_open(pid)
                except ProcessLookupError:
                    continue
                try:
                    await trio.lowlevel.wait_readable(fd)
                finally:
                    os.close(fd)
        assert [pid for pid in pids if _alive(pid)] == []


def initialize_message(capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    """A raw 2025-11-25 ``initialize`` request (id 1) from a client named ``raw``."""
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": capabilities or {},
        "clientInfo": {"name": "raw", "version": "0"},
    }
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}


@pytest.fixture
def initialize() -> Callable[..., dict[str, Any]]:
    """``initialize(capabilities=None)``: a raw ``initialize`` request, for raw-wire tests."""
    return initialize_message


@attrs.define
class RawStdio:
    """A gateway subprocess (gateway_stdio_main.py) spoken to line by line, no SDK."""

    process: trio.Process
    buffer: bytes = b""

    async def send(self, data: bytes | dict[str, Any]) -> None:
        assert self.process.stdin is not None
        raw = data if isinstance(data, bytes) else json.dumps(data).encode() + b"\n"
        await self.process.stdin.send_all(raw)

    async def receive(self) -> Any:
        """The next JSON line the gateway writes."""
        assert self.process.stdout is not None
        while b"\n" not in self.buffer:
            chunk = await self.process.stdout.receive_some()
            assert chunk, "the gateway closed its stdout"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    async def close_stdin(self) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.aclose()


RawStdioFactory = Callable[..., AbstractAsyncContextManager[RawStdio]]
WebSocketHandshake = Callable[..., Awaitable[tuple[int, bytes]]]


async def _websocket_handshake(url: str, **headers: str) -> tuple[int, bytes]:
    where = httpx2.URL(url)
    assert where.port is not None
    sent = {
        "host": f"{where.host}:{where.port}",
        "upgrade": "websocket",
        "connection": "Upgrade",
        "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
        "sec-websocket-version": "13",
        **headers,
    }
    head = f"GET {where.path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in sent.items())
    stream = await trio.open_tcp_stream(where.host, where.port)
    async with stream:
        await stream.send_all(head.encode() + b"\r\n")
        seen = b""
        with trio.fail_after(30):
            while chunk := await stream.receive_some():
                seen += chunk
    status_line, _, rest = seen.partition(b"\r\n")
    return int(status_line.split(b" ", 2)[1]), rest


@pytest.fixture
def websocket_handshake() -> WebSocketHandshake:
    """``await websocket_handshake(url, **headers)``: a raw WebSocket handshake over TCP.

    Returns the answer's status and the rest of it, headers and body (read until the
    server closes).
    """
    return _websocket_handshake


@pytest.fixture
def raw_stdio(workspace: Path) -> RawStdioFactory:
    """``async with raw_stdio(*extra_args) as gateway``: a stdio gateway over raw pipes."""

    @asynccontextmanager
    async def run(*extra: str) -> AsyncIterator[RawStdio]:
        command, args = prewarmed.command(STDIO_MAIN, str(workspace), *extra)
        argv = [command, *args]
        process = await trio.lowlevel.open_process(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        try:
            yield RawStdio(process)
        finally:
            if process.returncode is None:
                process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()
                for pipe in (process.stdin, process.stdout):
                    if pipe is not None:
                        await pipe.aclose()

    return run


@pytest.fixture
def tree(workspace: Path) -> ProcessTree:
    fifo = workspace / "tree.fifo"
    os.mkfifo(fifo)
    return ProcessTree(fifo=fifo)


@pytest.fixture
def serve(workspace: Path) -> ServeFactory:
    """``async with serve(**http_options) as served``: a gateway over HTTP on 127.0.0.1.

    ``fallback=`` is the approver asked when the client cannot be; ``bridged=False``
    leaves out the bridged fixture server (a process of its own to start) for a test
    that never reaches a tool, such as one refused at the HTTP layer.
    """

    @asynccontextmanager
    async def run(
        fallback: GatewayApprover | None = None, *, bridged: bool = True, **options: object
    ) -> AsyncIterator[Served]:
        policy = create_coding_approval_policy(
            roots=[str(workspace)],
            approve=create_gateway_approver(fallback=fallback),
            cache_approvals=False,
        )
        tools = create_coding_tools(
            str(workspace),
            execution_policy=policy,
            file_operations=create_contained_file_operations([str(workspace)]),
        )
        transport = StdioTransport(*prewarmed.command(FIXTURE_SERVER))
        async with AsyncExitStack() as stack:
            bridges = []
            if bridged:
                opened = open_mcp_tools(server_id="fx", transport=transport, call_timeout_s=30)
                bridges.append(await stack.enter_async_context(opened))
            async with (
                open_gateway(
                    tools=tools,
                    bridges=bridges,
                    permission=create_rule_permission_policy(allow=["tool:*:execute"]),
                    hints=CODING_TOOL_HINTS,
                    ledger=RunLedger(),
                ) as gateway,
                trio.open_nursery() as nursery,
            ):
                http = HttpOptions(host="127.0.0.1", port=0, **options)  # type: ignore[arg-type]
                url = await nursery.start(serve_http, gateway, http)
                yield Served(url=url, gateway=gateway, root=workspace)
                nursery.cancel_scope.cancel()

    return run


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Only this package's tests tolerate the MCP SDK's unclosed HTTP generators.
    for item in items:
        if TESTS in Path(item.path).parents:
            for spec in UPSTREAM_WARNING_FILTERS:
                item.add_marker(pytest.mark.filterwarnings(spec))


# Hypothesis without its per-example deadline: a wall-clock limit fails on a loaded
# machine (scripts/test runs two packages at a time); speed targets live in benchmarks/.
hypothesis.settings.register_profile("prism", deadline=None)
hypothesis.settings.load_profile("prism")
