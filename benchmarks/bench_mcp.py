"""What the MCP bridge adds to a tool call, against the raw MCP SDK on the same server.

Rows (medians over repetitions, measured in one run, samples interleaved):

1. Per-call round trip of ``echo`` on the fixture server (packages/prism-mcp/tests/
   mcp_fixture_server.py), over stdio and over Streamable HTTP on 127.0.0.1: the raw
   SDK ``Client.call_tool`` (baseline) against the same call through
   ``dispatch_tool_call`` on the bridge's tool (registry, gates, events, deadlines,
   bounded transport, result mapping). Target: <= 1.05x the raw SDK.
2. Connect time: ``async with Client(...)`` + ``list_tools()`` (baseline) against
   ``async with open_mcp_tools(...)`` (which connects and lists), each to a fresh
   stdio server process or to the running HTTP server, closed again each time.

Run: ``uv run python benchmarks/bench_mcp.py [--json] [--quick]``.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import trio
from _harness import Row, row, run
from mcp import Client, StdioServerParameters

from prism.core import DispatchOptions, ToolCall, create_tool_registry, dispatch_tool_call
from prism.mcp import StdioTransport, StreamableHttpTransport, open_mcp_tools

BENCH = "mcp"
QUICK = "--quick" in sys.argv[1:]
INNER = 20 if QUICK else 50
# A Streamable HTTP round trip costs ~45 ms here (both clients alike), so fewer per sample.
HTTP_INNER = 5 if QUICK else 10
REPEAT = 7 if QUICK else 15
CONNECT_REPEAT = 3 if QUICK else 7
SERVER = Path(__file__).resolve().parents[1] / "packages/prism-mcp/tests/mcp_fixture_server.py"
ARGS = {"text": "ping"}


async def start_http_server() -> tuple[trio.Process, str]:
    process = await trio.lowlevel.open_process(
        [sys.executable, str(SERVER), "http"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert process.stdout is not None
    seen = b""
    with trio.fail_after(30):
        while (match := re.search(rb"PORT (\d+)\n", seen)) is None:
            chunk = await process.stdout.receive_some(4096)
            if not chunk:
                raise RuntimeError("the fixture HTTP server exited")
            seen += chunk
    return process, f"http://127.0.0.1:{int(match.group(1))}/mcp"


async def round_trips(
    label: str,
    raw_server: StdioServerParameters | str,
    transport: StdioTransport | StreamableHttpTransport,
    inner: int,
) -> list[Row]:
    raw_samples: list[float] = []
    bridge_samples: list[float] = []
    async with (
        Client(raw_server) as client,
        open_mcp_tools(server_id="bench", transport=transport) as bridge,
    ):
        options = DispatchOptions(registry=create_tool_registry(bridge.tools))
        call = ToolCall(id="b", name="mcp:bench:echo", arguments=ARGS)

        async def raw_once() -> None:
            for _ in range(inner):
                await client.call_tool("echo", ARGS)

        async def bridge_once() -> None:
            for _ in range(inner):
                result = await dispatch_tool_call(call, options)
                assert not result.is_error, result.joined_text

        await raw_once()
        await bridge_once()
        for _ in range(REPEAT):
            for target, samples in ((raw_once, raw_samples), (bridge_once, bridge_samples)):
                t0 = time.perf_counter()
                await target()
                samples.append((time.perf_counter() - t0) / inner * 1e6)
    base = row(BENCH, f"{label}: raw SDK call_tool", raw_samples, note="baseline")
    return [
        base,
        row(
            BENCH,
            f"{label}: dispatch_tool_call on bridge",
            bridge_samples,
            baseline=base,
            target="<= 1.05x",
        ),
    ]


async def connects(
    label: str,
    raw_server: StdioServerParameters | str,
    transport: StdioTransport | StreamableHttpTransport,
) -> list[Row]:
    raw_samples: list[float] = []
    bridge_samples: list[float] = []
    for _ in range(CONNECT_REPEAT):
        t0 = time.perf_counter()
        async with Client(raw_server) as client:
            await client.list_tools()
        raw_samples.append((time.perf_counter() - t0) * 1e6)
        t0 = time.perf_counter()
        async with open_mcp_tools(server_id="bench", transport=transport):
            pass
        bridge_samples.append((time.perf_counter() - t0) * 1e6)
    base = row(BENCH, f"{label}: raw SDK connect+list+close", raw_samples, note="baseline")
    return [
        base,
        row(BENCH, f"{label}: open_mcp_tools+close", bridge_samples, baseline=base),
    ]


async def main() -> list[Row]:
    rows: list[Row] = []
    stdio_raw = StdioServerParameters(command=sys.executable, args=[str(SERVER), "stdio"])
    stdio = StdioTransport(sys.executable, [str(SERVER), "stdio"])
    rows += await round_trips("stdio", stdio_raw, stdio, INNER)
    process, url = await start_http_server()
    try:
        rows += await round_trips("http", url, StreamableHttpTransport(url), HTTP_INNER)
        rows += await connects("stdio", stdio_raw, stdio)
        rows += await connects("http", url, StreamableHttpTransport(url))
    finally:
        process.kill()
        await process.wait()
    return rows


if __name__ == "__main__":
    run(main)
