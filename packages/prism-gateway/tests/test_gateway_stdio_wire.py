"""The gateway's stdio wire, byte by byte: hostile lines get a parse error and are skipped."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager

    RawStdioFactory = Callable[..., AbstractAsyncContextManager[Any]]

LIMIT = 4096

INIT: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}


async def test_hostile_lines_get_parse_errors_and_the_session_goes_on(
    raw_stdio: RawStdioFactory,
) -> None:
    async with raw_stdio(str(LIMIT)) as gateway:
        with trio.fail_after(60):
            # Not JSON; blank; one line over the limit in one write; one split over writes.
            await gateway.send(b"this is not json\n\n")
            await gateway.send(b'{"x": "' + b"y" * LIMIT + b'"}\n')
            await gateway.send(b"z" * (LIMIT + 10))
            await gateway.send(b"z" * (LIMIT + 10) + b"\n")
            await gateway.send(INIT)
            replies = [await gateway.receive() for _ in range(4)]
            await gateway.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            await gateway.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
            pong = await gateway.receive()
            # A last line without its newline, then EOF: the gateway ends cleanly.
            await gateway.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
            await gateway.close_stdin()
            status = await gateway.process.wait()
    bad, long_one, long_split, init = replies
    assert bad["id"] is None
    assert bad["error"]["code"] == -32700
    assert "not a JSON-RPC message" in bad["error"]["message"]
    for refused in (long_one, long_split):
        assert refused["error"] == {"code": -32700, "message": f"message longer than {LIMIT} bytes"}
    assert init["id"] == 1
    assert init["result"]["serverInfo"]["name"] == "prism-gateway"
    assert pong == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert status == 0
