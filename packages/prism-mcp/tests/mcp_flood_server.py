"""A hostile MCP server written by hand (no SDK), speaking the 2025-11-25 handshake on stdio.

Usage: ``python mcp_flood_server.py <mode> <count>``. Every flood is bounded by
``count`` and stops by itself:

- ``pages``: tools/list answers ``count`` pages of about 900 kB each, each
  within a 1 MB message limit, with a next cursor every time.
- ``ping``: tools/call of ``flood`` sends ``count`` ``ping`` requests and never
  reads its stdin again (so the host's answers pile up in the pipe).
- ``progress``: tools/call of ``flood`` sends ``count`` progress notifications
  and never answers.
- ``log``: tools/call of ``flood`` sends ``count`` log notifications, then answers.
"""

from __future__ import annotations

import json
import os
import signal
import sys

MODE = sys.argv[1]
COUNT = int(sys.argv[2])
OUT = sys.stdout.buffer


def send(message: dict[str, object]) -> None:
    OUT.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
    OUT.flush()


def tool(name: str, description: str = "") -> dict[str, object]:
    return {
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": {}},
    }


def list_page(request_id: object, cursor: object) -> None:
    if MODE != "pages":
        send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": [tool("flood")]}})
        return
    page = int(cursor) if isinstance(cursor, str) and cursor.isdigit() else 0
    # 9 tools of about 100 kB each: about 900 kB per page.
    tools = [tool(f"t{page}_{i}", "x" * 100_000) for i in range(9)]
    result: dict[str, object] = {"tools": tools}
    if page + 1 < COUNT:
        result["nextCursor"] = str(page + 1)
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def flood(request_id: object, token: object) -> None:
    if MODE == "ping":
        chunk = b"".join(
            json.dumps({"jsonrpc": "2.0", "id": f"p{n}", "method": "ping"}).encode() + b"\n"
            for n in range(1000)
        )
        for _ in range(COUNT // 1000):
            OUT.write(chunk)
        OUT.flush()
        # Never read stdin again; stay until the host stops us.
        while True:
            signal.pause()
    if MODE == "progress":
        line = (
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": 1, "message": "m" * 200},
                }
            ).encode()
            + b"\n"
        )
        for _ in range(COUNT // 100):
            OUT.write(line * 100)
        OUT.flush()
        while True:
            signal.pause()
    if MODE == "log":
        line = (
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/message",
                    "params": {"level": "info", "logger": "flood", "data": "d" * 200},
                }
            ).encode()
            + b"\n"
        )
        for _ in range(COUNT // 100):
            OUT.write(line * 100)
        OUT.flush()
    send(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "result": {"content": [{"type": "text", "text": "done"}], "isError": False},
        }
    )


def main() -> None:
    for raw in sys.stdin.buffer:
        message = json.loads(raw)
        method = message.get("method")
        request_id = message.get("id")
        params = message.get("params") or {}
        if method == "initialize":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "result": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": f"flood-{MODE}", "version": "1"},
                    },
                }
            )
        elif method == "tools/list":
            list_page(request_id, params.get("cursor"))
        elif method == "tools/call":
            token = (params.get("_meta") or {}).get("progressToken")
            flood(request_id, token)
        elif request_id is not None and "method" in message:
            send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "error": {"code": -32601, "message": "method not found"},
                }
            )
    os._exit(0)


if __name__ == "__main__":
    main()
