"""What the gateway adds to a tool call: the same call through ``prism serve`` and direct.

Every row is the official MCP SDK client calling a tool over stdio (the last
one over HTTP), measured in one run with the samples interleaved. The tools:
``echo`` on the gateway tests' server (packages/prism-gateway/tests/
gateway_fixture_server.py), and the gateway of packages/prism-gateway/tests/
gateway_stdio_main.py, which bridges that server and offers its own tools.

1. direct: the client calls the server's ``echo`` (the baseline: one MCP hop).
2. gateway, local tool: the gateway's in-process ``local_echo`` (the same work
   as the server's echo) through every gate; one MCP hop, so this row is the
   gateway's own cost against a bare SDK server's.
3. gateway, ``read``: a coding tool (file read, contained), one MCP hop.
4. SDK relay: a bare low-level SDK server that forwards each call to the
   server with the SDK client (this script run with ``--relay``): two MCP
   hops and no Prism code, the floor for any MCP proxy built on the SDK.
5. gateway, bridged: ``mcp__fx__echo`` through every gate and prism-mcp's
   bridge: two MCP hops. The issue's target is <= 1.2x the direct call.
6. the same bridged call over Streamable HTTP (gateway in this process).

The note gives the CPU time the middle process (the server of row 1, the
gateway, the relay) spent per call, read from /proc: less noisy than wall time
on a shared machine, and it separates the gateway's own work from the time it
waits for the bridged server.

Run: ``uv run python benchmarks/bench_gateway.py [--json] [--quick]``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio
from _harness import Row, row, run
from mcp import Client, StdioServerParameters

from prism.core import create_rule_permission_policy
from prism.core.ledger import RunLedger
from prism.gateway import HttpOptions, open_gateway, serve_http
from prism.mcp import StdioTransport, open_mcp_tools

if TYPE_CHECKING:
    import mcp_types as types

BENCH = "gateway"
QUICK = "--quick" in sys.argv[1:]
INNER = 20 if QUICK else 50
REPEAT = 7 if QUICK else 21
TESTS = Path(__file__).resolve().parents[1] / "packages/prism-gateway/tests"
SERVER = TESTS / "gateway_fixture_server.py"
GATEWAY = TESTS / "gateway_stdio_main.py"
ARGS: dict[str, Any] = {"text": "ping"}
_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def _children() -> dict[str, int]:
    """This process's child processes: the script each runs, to its pid."""
    found: dict[str, int] = {}
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        for pid in (task / "children").read_text().split():
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            key = " ".join(part.decode() for part in argv[1:3] if part)
            found[key] = int(pid)
    return found


def _cpu_s(pid: int | None) -> float:
    """CPU seconds (user + system) that process ``pid`` has used, without its children."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * _TICK_S


async def _relay() -> None:
    """A bare SDK proxy on stdio: every call forwarded to the server with the SDK client."""
    from mcp.server.lowlevel.server import Server
    from mcp.server.stdio import stdio_server

    upstream_params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
    async with Client(upstream_params) as upstream:

        async def on_list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
            return await upstream.list_tools()

        async def on_call_tool(_ctx: Any, params: Any) -> types.CallToolResult:
            return await upstream.call_tool(params.name, params.arguments)

        server: Server[Any] = Server(
            "relay", on_list_tools=on_list_tools, on_call_tool=on_call_tool
        )
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())


async def main() -> list[Row]:
    root = tempfile.mkdtemp(prefix="prism-bench-gateway-")
    await trio.Path(root, "f.txt").write_text("x\n", encoding="utf-8")
    python = sys.executable
    transport = StdioTransport(python, [str(SERVER)])
    async with (
        Client(StdioServerParameters(command=python, args=[str(SERVER), "direct"])) as direct,
        Client(StdioServerParameters(command=python, args=[str(GATEWAY), root])) as gateway,
        Client(StdioServerParameters(command=python, args=[__file__, "--relay"])) as relay,
        open_mcp_tools(server_id="fx", transport=transport) as bridge,
        open_gateway(
            bridges=[bridge],
            permission=create_rule_permission_policy(allow=["tool:*:execute"]),
            ledger=RunLedger(),
        ) as in_process,
        trio.open_nursery() as nursery,
    ):
        url = await nursery.start(serve_http, in_process, HttpOptions())
        pids = _children()
        direct_pid = pids.get(f"{SERVER} direct")
        gateway_pid = pids.get(f"{GATEWAY} {root}")
        relay_pid = pids.get(f"{__file__} --relay")
        async with Client(url) as http:
            for client in (direct, gateway, relay, http):
                await client.list_tools()
            cases: list[tuple[str, Client, str, dict[str, Any], int | None]] = [
                ("direct", direct, "echo", ARGS, direct_pid),
                ("local", gateway, "local_echo", ARGS, gateway_pid),
                ("read", gateway, "read", {"path": "f.txt"}, gateway_pid),
                ("relay", relay, "echo", ARGS, relay_pid),
                ("bridged", gateway, "mcp__fx__echo", ARGS, gateway_pid),
                ("http", http, "mcp__fx__echo", ARGS, None),
            ]
            wall: dict[str, list[float]] = {case[0]: [] for case in cases}
            cpu: dict[str, float] = dict.fromkeys(wall, 0.0)
            for _ in range(REPEAT):
                for key, client, name, arguments, pid in cases:
                    cpu0 = _cpu_s(pid)
                    t0 = trio.current_time()
                    for _ in range(INNER):
                        result = await client.call_tool(name, arguments)
                        assert not result.is_error, result
                    wall[key].append((trio.current_time() - t0) / INNER * 1e6)
                    cpu[key] += _cpu_s(pid) - cpu0
        nursery.cancel_scope.cancel()

    def cpu_note(key: str, whose: str) -> str:
        return f"{whose} CPU {cpu[key] / (REPEAT * INNER) * 1e6:.0f} µs/call"

    base = row(BENCH, "stdio: client -> server echo (direct)", wall["direct"])
    base.note = cpu_note("direct", "server")
    # (key, case, whose CPU the note gives or None, what else the note says)
    compared = [
        ("local", "stdio: client -> gateway local_echo (in-process)", "gateway", "one MCP hop"),
        ("read", "stdio: client -> gateway read (coding tool)", "gateway", "one MCP hop"),
        ("relay", "stdio: client -> bare SDK relay -> server", "relay", "two MCP hops"),
        ("bridged", "stdio: client -> gateway -> server (bridged)", "gateway", "two MCP hops"),
        ("http", "http: client -> gateway -> server (bridged)", None, "gateway in this process"),
    ]
    rows = [base]
    for key, case, whose, note in compared:
        if whose is not None:
            note = f"{cpu_note(key, whose)}; {note}"
        target = "<= 1.2x" if key == "bridged" else None
        rows.append(row(BENCH, case, wall[key], baseline=base, target=target, note=note))
    return rows


if __name__ == "__main__":
    if "--relay" in sys.argv[1:]:
        trio.run(_relay)
    else:
        run(main)
