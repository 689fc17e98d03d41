"""A loopback HTTP server that speaks the providers' wire formats, for the SDK clients.

Each test queues responses (JSON bodies or server-sent-event streams, built from
the SDKs' own types by the tests) and points the official SDK client at
``server.url``. Everything binds 127.0.0.1; nothing reaches the network.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial

import attrs
import pytest
import trio


@attrs.frozen
class Request:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict[str, object]:
        value = json.loads(self.body)
        assert isinstance(value, dict)
        return value


@attrs.frozen
class Json:
    """A JSON answer (``bytes``: the body as it is)."""

    body: object
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()


@attrs.frozen
class Sse:
    """A server-sent-event stream: ``(event name or None, data)`` pairs.

    With ``hold_open`` the stream stays open after the events until the client
    goes away (which sets :attr:`WireServer.client_left`).
    """

    events: Sequence[tuple[str | None, str]]
    hold_open: bool = False


@attrs.define(eq=False)
class WireServer:
    """Answers each request with the next queued response."""

    url: str = ""
    responses: list[Json | Sse] = attrs.Factory(list)
    requests: list[Request] = attrs.Factory(list)
    streaming: trio.Event = attrs.Factory(trio.Event)
    client_left: trio.Event = attrs.Factory(trio.Event)

    def queue(self, *responses: Json | Sse) -> None:
        self.responses.extend(responses)

    def queue_json(
        self, body: object, *, status: int = 200, headers: tuple[tuple[str, str], ...] = ()
    ) -> None:
        """Answer the next request with a JSON body."""
        self.queue(Json(body, status, headers))

    def queue_sse(
        self, events: Sequence[tuple[str | None, str]], *, hold_open: bool = False
    ) -> None:
        """Answer the next request with an event stream."""
        self.queue(Sse(events, hold_open))

    async def handle(self, stream: trio.SocketStream) -> None:
        buffer = b""
        while b"\r\n\r\n" not in buffer:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            buffer += chunk
        head, _, body = buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _version = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(body) < length:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            body += chunk
        self.requests.append(Request(method, path, headers, body))
        response = self.responses.pop(0) if self.responses else Json({"error": "no response"}, 500)
        if isinstance(response, Json):
            answer = response.body
            payload = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
            extra = "".join(f"{k}: {v}\r\n" for k, v in response.headers)
            await stream.send_all(
                f"HTTP/1.1 {response.status} X\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\n{extra}Connection: close\r\n\r\n".encode()
                + payload
            )
            await stream.aclose()
            return
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Cache-Control: no-cache\r\nConnection: close\r\n\r\n"
        )
        for event, data in response.events:
            frame = f"event: {event}\n" if event else ""
            await stream.send_all(f"{frame}data: {data}\n\n".encode())
        if response.hold_open:
            self.streaming.set()
            try:
                while await stream.receive_some(65536):
                    pass
            except trio.BrokenResourceError:
                pass
            self.client_left.set()
        await stream.aclose()


@pytest.fixture
async def wire_server(nursery: trio.Nursery) -> WireServer:
    server = WireServer()
    listeners = await nursery.start(partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1"))
    host, port = listeners[0].socket.getsockname()[:2]
    server.url = f"http://{host}:{port}"
    return server


@asynccontextmanager
async def serving(server: WireServer) -> AsyncIterator[WireServer]:
    """Serve ``server`` on 127.0.0.1 for the block, from any trio task (the asyncio host's too)."""
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1"))
        host, port = listeners[0].socket.getsockname()[:2]
        server.url = f"http://{host}:{port}"
        yield server
        nursery.cancel_scope.cancel()


@pytest.fixture
def open_wire_server() -> Callable[[], AbstractAsyncContextManager[WireServer]]:
    """Opens a fresh server when entered (for tests that are not trio tests)."""
    return lambda: serving(WireServer())
