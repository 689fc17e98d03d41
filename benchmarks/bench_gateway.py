"""What the gateway adds to a tool call: the same call through ``prism serve`` and direct.

Rows (medians over repetitions, measured in one run, samples interleaved):

1. ``echo`` on the gateway's test server (packages/prism-gateway/tests/
   gateway_fixture_server.py), called with the raw MCP SDK client over stdio
   (baseline), against ``mcp__fx__echo`` called with the same client on a gateway
   (packages/prism-gateway/tests/gateway_stdio_main.py) that bridges that server
   over stdio: one more process hop, plus every gate (permission, validation,
   ledger) and the bridge's bounded transport. The issue's target is <= 1.2x.
2. The gateway's own ``read`` tool (a coding tool, no bridge hop) on the same
   gateway, against the same baseline: what the gateway costs without the hop.
3. The gateway over Streamable HTTP on 127.0.0.1 (in this process), ``mcp__fx__echo``.

Run: ``uv run python benchmarks/bench_gateway.py [--json] [--quick]``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import trio
from _harness import Row, row, run
from mcp import Client, StdioServerParameters

from prism.core import RunLedger, create_rule_permission_policy
from prism.gateway import HttpOptions, open_gateway, serve_http
from prism.mcp import StdioTransport, open_mcp_tools

BENCH = "gateway"
QUICK = "--quick" in sys.argv[1:]
INNER = 20 if QUICK else 50
REPEAT = 7 if QUICK else 21
TESTS = Path(__file__).resolve().parents[1] / "packages/prism-gateway/tests"
SERVER = TESTS / "gateway_fixture_server.py"
GATEWAY = TESTS / "gateway_stdio_main.py"
ARGS: dict[str, Any] = {"text": "ping"}


def _workspace() -> str:
    root = tempfile.mkdtemp(prefix="prism-bench-gateway-")
    Path(root, "f.txt").write_text("x\n", encoding="utf-8")
    return root


async def main() -> list[Row]:
    root = _workspace()
    direct_params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
    gateway_params = StdioServerParameters(command=sys.executable, args=[str(GATEWAY), root])
    direct_s: list[float] = []
    bridged_s: list[float] = []
    local_s: list[float] = []
    http_s: list[float] = []
    transport = StdioTransport(sys.executable, [str(SERVER)])
    async with (
        Client(direct_params) as direct,
        Client(gateway_params) as gateway,
        open_mcp_tools(server_id="fx", transport=transport) as bridge,
        open_gateway(
            bridges=[bridge],
            permission=create_rule_permission_policy(allow=["tool:*:execute"]),
            ledger=RunLedger(),
        ) as in_process,
        trio.open_nursery() as nursery,
    ):
        url = await nursery.start(serve_http, in_process, HttpOptions())
        async with Client(url) as http:
            for client in (direct, gateway, http):
                await client.list_tools()
            cases: list[tuple[list[float], Client, str, dict[str, Any]]] = [
                (direct_s, direct, "echo", ARGS),
                (bridged_s, gateway, "mcp__fx__echo", ARGS),
                (local_s, gateway, "read", {"path": "f.txt"}),
                (http_s, http, "mcp__fx__echo", ARGS),
            ]
            for _ in range(REPEAT):
                for samples, client, name, arguments in cases:
                    t0 = trio.current_time()
                    for _ in range(INNER):
                        result = await client.call_tool(name, arguments)
                        assert not result.is_error
                    samples.append((trio.current_time() - t0) / INNER * 1e6)
        nursery.cancel_scope.cancel()
    base = row(BENCH, "stdio: SDK client -> server (direct)", direct_s)
    return [
        base,
        row(
            BENCH,
            "stdio: SDK client -> prism gateway -> server",
            bridged_s,
            baseline=base,
            target="<= 1.2x",
            note="one more process hop + every gate",
        ),
        row(
            BENCH,
            "stdio: SDK client -> prism gateway read tool",
            local_s,
            baseline=base,
            note="coding tool, no bridge hop",
        ),
        row(
            BENCH,
            "http: SDK client -> prism gateway -> server",
            http_s,
            baseline=base,
            note="Streamable HTTP on 127.0.0.1",
        ),
    ]


if __name__ == "__main__":
    run(main)
