"""A hand-written (no SDK) MCP server on stdio speaking 2026-07-28 with the tasks extension.

Usage: ``python mcp_task_server.py <log file> [cut]``. Every request's method
and params are appended to the log file as a JSON line, so a test can see what
the client sent (``tasks/get`` polls, ``tasks/cancel``). With ``cut``, every
message goes out in small pieces, CRLF-terminated, each piece flushed on its
own, so the client must reassemble lines however the pipe cuts them.

Each tool answers ``tools/call`` with a task (``resultType: "task"``) and
``tasks/get`` moves it along:

- ``completes``: working for two polls (with a status message), then completed
  with a text result.
- ``fails``: failed with a JSON-RPC error.
- ``forever``: always working (a call that outlives its ceiling, or is aborted).
- ``server_cancels``: cancelled by the server.
- ``strange_status``: an unknown status.
- ``needs_input``: input_required with inputRequests the client cannot answer.
- ``poll_<zero|negative|huge|text>``: completes after two polls, with a
  hostile ``pollIntervalMs``.
- ``plain``: answers at once with an ordinary result (no task).

``crash`` writes about 5.5 kB to stderr, the last line ``crashing on purpose``,
and exits without answering. A server started when the log file already
exists (a reconnect) also lists ``second``; one started while ``<log
file>.nostart`` exists exits at once. While ``<log file>.nolist`` exists,
``tools/list`` is answered with an error; while ``<log file>.pages`` exists, it
is answered in two pages, the second holding one tool named for the listing
(``fresh_1``, ``fresh_2``...) with an ``x-mcp-header`` argument. ``announce``
announces a tool list change (changing nothing), then answers; ``nan_log`` sends
a log message whose data holds NaN, then answers. ``bad_id`` answers with an
empty task id; ``tasks/cancel`` of a ``needs_input`` task is answered with an error.
``many_blocks`` completes after two polls with a result of 3000 empty text blocks.

And tools with hostile shapes, answered at once: ``deep`` (structuredContent
nested 40 levels), ``deep_list`` (lists nested 40 levels), ``nan_structured``
(structuredContent holding NaN); the listing also offers ``nan_input`` and
``nan_output`` (a NaN in the input or output schema) and ``bad_output`` (an
output schema no validator takes).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

LOG = sys.argv[1]
if os.path.exists(LOG + ".nostart"):
    sys.exit(3)
SECOND = os.path.exists(LOG)
CUT = len(sys.argv) > 2 and sys.argv[2] == "cut"
OUT = sys.stdout.buffer
TASKS = "io.modelcontextprotocol/tasks"

INTERVALS: dict[str, object] = {
    "poll_zero": 0,
    "poll_negative": -5000,
    "poll_huge": 10**12,
    "poll_text": "soon",
}
TOOLS = [
    "completes",
    "fails",
    "forever",
    "server_cancels",
    "strange_status",
    "needs_input",
    "plain",
    "crash",
    "announce",
    "nan_log",
    "bad_id",
    "many_blocks",
    *INTERVALS,
    *(["second"] if SECOND else []),
]
polls: dict[str, int] = {}
listings = 0
kinds: dict[str, str] = {}


NAN = float("nan")
SHAPES: dict[str, dict[str, object]] = {
    "deep": {"inputSchema": {"type": "object"}},
    "deep_list": {"inputSchema": {"type": "object"}},
    "nan_structured": {"inputSchema": {"type": "object"}},
    "nan_input": {"inputSchema": {"type": "object", "maximum": NAN}},
    "nan_output": {"inputSchema": {"type": "object"}, "outputSchema": {"maximum": NAN}},
    "bad_output": {"inputSchema": {"type": "object"}, "outputSchema": {"type": 12}},
}


def nested(depth: int) -> object:
    value: object = "bottom"
    for _ in range(depth):
        value = {"down": value}
    return value


def nested_list(depth: int) -> object:
    value: object = "bottom"
    for _ in range(depth):
        value = [value]
    return value


def send(message: dict[str, object]) -> None:
    # NaN goes out as the bare word NaN on purpose: hostile, and what Python writes.
    data = json.dumps(message, separators=(",", ":")).encode() + b"\r\n"
    if not CUT:
        OUT.write(data)
        OUT.flush()
        return
    for start in range(0, len(data), 7):
        OUT.write(data[start : start + 7])
        OUT.flush()


def complete(result: dict[str, object]) -> dict[str, object]:
    return {"resultType": "complete", **result}


def task(task_id: str, status: str, **extra: object) -> dict[str, object]:
    interval = INTERVALS.get(kinds[task_id], 50)
    return {
        "taskId": task_id,
        "status": status,
        "createdAt": "2026-12-03T00:00:00Z",
        "lastUpdatedAt": "2026-12-03T00:00:00Z",
        "ttlMs": 60000,
        "pollIntervalMs": interval,
        **extra,
    }


def get(task_id: str) -> dict[str, object]:
    kind = kinds[task_id]
    polls[task_id] += 1
    count = polls[task_id]
    if kind == "fails":
        return task(task_id, "failed", error={"code": -32603, "message": "the build broke"})
    if kind == "forever":
        return task(task_id, "working", statusMessage=f"still going ({count})")
    if kind == "server_cancels":
        return task(task_id, "cancelled", statusMessage="an operator stopped it")
    if kind == "strange_status":
        return task(task_id, "paused")
    if kind == "needs_input":
        requests = {"q": {"method": "elicitation/create", "params": {"message": "sure?"}}}
        return task(task_id, "input_required", inputRequests=requests)
    if count <= 2:
        return task(task_id, "working", statusMessage=f"step {count} of 2")
    if kind == "many_blocks":
        blocks = [{"type": "text", "text": ""}] * 3000
        return task(task_id, "completed", result={"content": blocks})
    text = {"type": "text", "text": f"{kind} done after {count} polls"}
    return task(task_id, "completed", result={"content": [text], "isError": False})


def paged(cursor: object) -> dict[str, object]:
    global listings
    if cursor is None:
        listings += 1
        first = [{"name": name, "inputSchema": {"type": "object"}} for name in TOOLS]
        return complete({"tools": first, "nextCursor": "2", "ttlMs": 0, "cacheScope": "private"})
    region = {"type": "string", "x-mcp-header": "Region"}
    schema = {"type": "object", "properties": {"region": region}}
    fresh = {"name": f"fresh_{listings}", "inputSchema": schema}
    return complete({"tools": [fresh], "ttlMs": 0, "cacheScope": "private"})


def answer(method: str, params: dict[str, Any]) -> dict[str, object] | None:
    if method == "server/discover":
        capabilities: dict[str, object] = {"tools": {}, "extensions": {TASKS: {}}}
        return complete(
            {
                "supportedVersions": ["2026-07-28"],
                "capabilities": capabilities,
                "serverInfo": {"name": "task-server", "version": "1"},
                "ttlMs": 0,
                "cacheScope": "private",
            }
        )
    if method == "tools/list":
        if os.path.exists(LOG + ".nolist"):
            return None
        if os.path.exists(LOG + ".pages"):
            return paged(params.get("cursor"))
        listed: list[dict[str, object]] = [
            {"name": name, "inputSchema": {"type": "object"}} for name in TOOLS
        ]
        listed += [{"name": name, **shape} for name, shape in SHAPES.items()]
        return complete({"tools": listed, "ttlMs": 0, "cacheScope": "private"})
    if method == "tools/call":
        name = params["name"]
        if name == "plain":
            return complete({"content": [{"type": "text", "text": "no task"}]})
        if name == "crash":
            # Much more than the client keeps of stderr: the last words must survive.
            sys.stderr.write("noise from a long run\n" * 250)
            sys.stderr.write("crashing on purpose\n")
            sys.stderr.flush()
            os._exit(1)
        if name == "announce":
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            return complete({"content": [{"type": "text", "text": "announced"}]})
        if name == "nan_log":
            data = {"note": "half a number", "value": NAN}
            note = {"level": "warning", "logger": "odd", "data": data}
            send({"jsonrpc": "2.0", "method": "notifications/message", "params": note})
            return complete({"content": [{"type": "text", "text": "logged"}]})
        if name == "bad_id":
            return {"resultType": "task", "taskId": "", "status": "working"}
        if name in SHAPES:
            structured: object = {"x": NAN if name.startswith("nan") else 1}
            if name == "deep":
                structured = nested(40)
            elif name == "deep_list":
                structured = {"down": nested_list(40)}
            # Content annotations: a priority kept, an empty set dropped.
            hints = {"priority": 0.5} if name == "deep" else {}
            text = {"type": "text", "text": name, "annotations": hints}
            return complete({"content": [text], "structuredContent": structured})
        task_id = f"task-{len(kinds) + 1}"
        kinds[task_id] = name
        polls[task_id] = 0
        return {"resultType": "task", **task(task_id, "working")}
    if method == "tasks/get":
        return complete(get(params["taskId"]))
    if method == "tasks/cancel":
        if kinds.get(params["taskId"]) == "needs_input":
            return None
        return complete({})
    return None


def main() -> None:
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        message = json.loads(line)
        method = message.get("method")
        if method is None or "id" not in message:
            continue
        params = message.get("params") or {}
        with open(LOG, "a", encoding="utf-8") as log:
            log.write(json.dumps({"method": method, "params": params}) + "\n")
        result = answer(method, params)
        if result is None:
            error = {"code": -32601, "message": f"method not found: {method}"}
            send({"jsonrpc": "2.0", "id": message["id"], "error": error})
        else:
            send({"jsonrpc": "2.0", "id": message["id"], "result": result})


if __name__ == "__main__":
    main()
