"""The gateway's stdio wire, byte by byte: hostile lines get a parse error and are skipped."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio

STDIO_MAIN = Path(__file__).resolve().parent / "gateway_stdio_main.py"
LIMIT = 4096

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}


class _Lines:
    """Reads the gateway's stdout one JSON line at a time."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream = stream
        self.buffer = b""

    async def next(self) -> Any:
        while b"\n" not in self.buffer:
            chunk = await self.stream.receive_some()
            assert chunk, "the gateway closed its stdout"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)


async def test_hostile_lines_get_parse_errors_and_the_session_goes_on(workspace: Path) -> None:
    argv = [sys.executable, str(STDIO_MAIN), str(workspace), str(LIMIT)]
    process = await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert process.stdin is not None
        assert process.stdout is not None
        lines = _Lines(process.stdout)
        with trio.fail_after(60):
            # Not JSON; blank; one line over the limit in one write; one split over writes.
            await process.stdin.send_all(b"this is not json\n\n")
            await process.stdin.send_all(b'{"x": "' + b"y" * LIMIT + b'"}\n')
            await process.stdin.send_all(b"z" * (LIMIT + 10))
            await process.stdin.send_all(b"z" * (LIMIT + 10) + b"\n")
            await process.stdin.send_all(json.dumps(INIT).encode() + b"\n")
            replies = [await lines.next() for _ in range(4)]
            # The last message may come without its newline, just before stdin closes.
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
            await process.stdin.send_all(json.dumps(initialized).encode() + b"\n")
            await process.stdin.send_all(json.dumps(ping).encode())
            await process.stdin.aclose()
            pong = await lines.next()
            await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()
            for pipe in (process.stdin, process.stdout):
                if pipe is not None:
                    await pipe.aclose()
    bad, long_one, long_split, init = replies
    assert bad["id"] is None
    assert bad["error"]["code"] == -32700
    assert "not a JSON-RPC message" in bad["error"]["message"]
    for refused in (long_one, long_split):
        assert refused["error"] == {"code": -32700, "message": f"message longer than {LIMIT} bytes"}
    assert init["id"] == 1
    assert init["result"]["serverInfo"]["name"] == "prism-gateway"
    assert pong == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert process.returncode == 0
