"""A hand-written (no SDK) stdio MCP server that dies while a child keeps its stdout open.

Usage: ``python mcp_orphan_server.py <log file>``. Speaks the 2025-11-25
handshake. Each start appends a line to the log file. Tools:

- ``hello``: answers ``hello <n>``, ``n`` the number of starts so far.
- ``die``: forks a child that calls ``setsid`` and sleeps, holding the
  server's stdout (and stderr) open, then exits with status 7 without
  answering. The host's end of the pipe never sees end-of-file.
"""

from __future__ import annotations

import json
import os
import sys

LOG = sys.argv[1]
with open(LOG, "a", encoding="utf-8") as log:
    log.write("start\n")
with open(LOG, encoding="utf-8") as log:
    STARTS = len(log.read().splitlines())
OUT = sys.stdout.buffer


def send(message: dict[str, object]) -> None:
    OUT.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
    OUT.flush()


def tool(name: str) -> dict[str, object]:
    return {"name": name, "inputSchema": {"type": "object", "properties": {}}}


def main() -> None:
    for line in sys.stdin.buffer:
        message = json.loads(line)
        method = message.get("method")
        request_id = message.get("id")
        if method == "initialize":
            result: dict[str, object] = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "orphan", "version": "1"},
            }
            send({"jsonrpc": "2.0", "id": request_id, "result": result})
        elif method == "tools/list":
            tools = [tool("hello"), tool("die")]
            send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": tools}})
        elif method == "tools/call":
            name = message["params"]["name"]
            if name == "die":
                if os.fork() == 0:
                    os.setsid()
                    os.execvp(
                        sys.executable, [sys.executable, "-c", "import time; time.sleep(300)"]
                    )
                os._exit(7)
            text = f"hello {STARTS}"
            result = {"content": [{"type": "text", "text": text}]}
            send({"jsonrpc": "2.0", "id": request_id, "result": result})
        elif request_id is not None:
            send({"jsonrpc": "2.0", "id": request_id, "result": {}})


if __name__ == "__main__":
    main()
