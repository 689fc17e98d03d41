"""What the MCP bridge adds to a tool call, against the raw MCP SDK on the same server.

Rows (medians over repetitions, measured in one run, samples interleaved):

1. Per-call round trip of ``echo`` on the fixture server (packages/prism-mcp/tests/
   mcp_fixture_server.py), over stdio and over Streamable HTTP on 127.0.0.1: the raw
   SDK ``Client.call_tool`` (baseline) against the same call through
   ``dispatch_tool_call`` on the bridge's tool (registry, gates, events, deadlines,
   bounded transport, result mapping). Both clients list the tools first, so each
   result is checked against the tool's ``outputSchema`` on both sides: by the SDK
   (``jsonschema``) on the raw side, by the bridge (prism-validation-jsonschema) on
   the bridge side, which turns the SDK's own check off.
   Target: <= 1.05x the raw SDK. A third row calls the bridge's own SDK session
   directly (same server process, no Prism layers) to tell Prism's cost apart from
   the difference between two server processes; a fourth gives, in absolute time,
   what dispatch adds per call over that session (paired samples). Because wall time on a shared
   2-core machine swings with other load, the host's own CPU time per call
   (``time.process_time``) is reported too, raw SDK against the bridge.
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
# A Streamable HTTP round trip costs ~2-3 ms here (both clients alike). It cost ~43 ms
# while the fixture server's sockets had Nagle on (see mcp_fixture_server.py): every
# response, written as headers then body, waited for the client's delayed ACK.
HTTP_INNER = 10 if QUICK else 25
REPEAT = 7 if QUICK else 15
# stdio samples are cheap: take more of them, the medians steady on a busy machine.
STDIO_REPEAT = 11 if QUICK else 41
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
    repeat: int,
) -> list[Row]:
    raw_samples: list[float] = []
    bridge_samples: list[float] = []
    session_samples: list[float] = []
    cpu: dict[str, list[float]] = {"raw": [], "session": [], "bridge": []}
    async with (
        Client(raw_server) as client,
        open_mcp_tools(server_id="bench", transport=transport) as bridge,
    ):
        # Like any client (and the bridge), list first: the SDK then validates each
        # result against the tool's outputSchema, on both sides alike.
        await client.list_tools()
        options = DispatchOptions(registry=create_tool_registry(bridge.tools))
        call = ToolCall(id="b", name="mcp:bench:echo", arguments=ARGS)

        async def raw_once() -> None:
            for _ in range(inner):
                await client.call_tool("echo", ARGS)

        # The bridge's own SDK session, called directly: same server process and transport
        # as the bridge row, none of Prism's layers. Separates Prism's cost from the
        # difference between two server processes on a busy machine.
        # (A private attribute: the benchmark needs the very session the bridge uses.)
        conn = bridge._sessions.current
        session = conn.client if conn is not None else None
        assert session is not None

        async def session_once() -> None:
            for _ in range(inner):
                await session.call_tool("echo", ARGS)

        async def bridge_once() -> None:
            for _ in range(inner):
                result = await dispatch_tool_call(call, options)
                assert not result.is_error, result.joined_text

        await raw_once()
        await bridge_once()
        order = [
            (raw_once, raw_samples, "raw"),
            (session_once, session_samples, "session"),
            (bridge_once, bridge_samples, "bridge"),
        ]
        for repetition in range(repeat):
            # Rotate who goes first, so no case always follows the same one.
            shift = repetition % len(order)
            for target, samples, kind in order[shift:] + order[:shift]:
                c0 = time.process_time()
                t0 = time.perf_counter()
                await target()
                samples.append((time.perf_counter() - t0) / inner * 1e6)
                cpu[kind].append((time.process_time() - c0) / inner * 1e6)
    base = row(BENCH, f"{label}: raw SDK call_tool", raw_samples, note="baseline")
    same = row(
        BENCH,
        f"{label}: bridge session call_tool",
        session_samples,
        baseline=base,
        note="same server as the bridge, no Prism layers",
    )
    versus_same = row(BENCH, "", bridge_samples, baseline=same).ratio or 0.0
    # Paired per repetition (same rotation slot, same load): what Prism's layers add to
    # one call in absolute time, on top of the bridge's own SDK session.
    added = [b - s for b, s in zip(bridge_samples, session_samples, strict=True)]
    return [
        base,
        same,
        row(
            BENCH,
            f"{label}: dispatch_tool_call on bridge",
            bridge_samples,
            baseline=base,
            target="<= 1.05x",
            note=f"{versus_same:.2f}x bridge session",
        ),
        row(
            BENCH,
            f"{label}: dispatch minus bridge session",
            added,
            note="absolute latency Prism adds per call (paired samples)",
        ),
        # Host CPU per call (this process only): insensitive to other load on the machine.
        cpu_base := row(BENCH, f"{label}: raw SDK, host CPU/call", cpu["raw"], note="baseline"),
        row(
            BENCH,
            f"{label}: bridge dispatch, host CPU/call",
            cpu["bridge"],
            baseline=cpu_base,
            note="process_time of the host, not wall time",
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
    rows += await round_trips("stdio", stdio_raw, stdio, INNER, STDIO_REPEAT)
    process, url = await start_http_server()
    try:
        rows += await round_trips("http", url, StreamableHttpTransport(url), HTTP_INNER, REPEAT)
        rows += await connects("stdio", stdio_raw, stdio)
        rows += await connects("http", url, StreamableHttpTransport(url))
    finally:
        process.kill()
        await process.wait()
    return rows


if __name__ == "__main__":
    run(main)
