"""An MCP server on stdio that answers each tools/call with the trace context it received.

Written by hand (no SDK): it reads one JSON-RPC message a line and answers
``initialize``, ``tools/list`` (one tool, ``whoami``) and ``tools/call`` (a text
result holding ``params._meta.traceparent``, or ``none``).
"""

from __future__ import annotations

import json
import sys


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        method = message.get("method")
        if "id" not in message or method is None:
            continue  # a notification or a response
        params = message.get("params") or {}
        if method == "initialize":
            result: dict[str, object] = {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "trace-server", "version": "1"},
            }
        elif method == "tools/list":
            schema = {"type": "object", "properties": {}}
            result = {"tools": [{"name": "whoami", "description": "", "inputSchema": schema}]}
        elif method == "tools/call":
            meta = params.get("_meta") or {}
            text = str(meta.get("traceparent", "none"))
            result = {"content": [{"type": "text", "text": text}], "isError": False}
        elif method == "ping":
            result = {}
        else:
            error = {"code": -32601, "message": f"no method {method}"}
            send({"jsonrpc": "2.0", "id": message["id"], "error": error})
            continue
        send({"jsonrpc": "2.0", "id": message["id"], "result": result})


if __name__ == "__main__":
    main()
