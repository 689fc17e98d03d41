"""A stdio client that writes calls and does not read its answers: the gateway's memory.

``prism serve`` over stdio stops reading a client whose answers wait for it
(backpressure), so a client writing many calls and reading nothing cannot
grow the gateway's memory. Each row starts a gateway of one local ``echo``
tool in a fresh process and writes N ``tools/call`` lines to it (a thread,
blocking writes); the baseline row reads the answers as they come, the other
reads nothing for a while (until every call is written, or the wait is
over), then everything. The note gives how many calls the
gateway had read when the reading started, its resident memory growth then
(from its start, after the handshake) and the growth of its peak over the
whole run, and whether every call was answered (each id once). The time is
the whole run per call (the unread row includes its wait). Target: the
unread row's peak growth within a few MB of the baseline's, whatever N.

Measured (100,000 calls, a 10 s wait, load 8-9): the baseline peaks at
+3.3 to +3.5 MB; unread, the gateway had read 2,691 calls when reading began,
+5.5 MB then, peak +5.6 MB. The same run against the gateway without
backpressure (the reader's wait for the writer taken out): 34,786 calls read
in the 10 s, +199 MB then, peak +596 MB over the run; every call answered
once either way.

Run: ``uv run python benchmarks/bench_gateway_stdio_flood.py [--json] [--quick]``
(``--quick``: 20,000 calls and a 3 s wait instead of 100,000 and 10 s).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import trio
from _harness import Row, row, run

QUICK = "--quick" in sys.argv[1:]
CALLS = 20_000 if QUICK else 100_000
WAIT_S = 3.0 if QUICK else 10.0

GATEWAY = """
import trio
from prism.core import ToolDefinition, ToolResult
from prism.gateway import open_gateway, serve_stdio

async def echo(arguments, _ctx):
    return ToolResult.text(f"echo {arguments.get('text')}")

async def main():
    async with open_gateway(tools=[ToolDefinition(name="echo", execute=echo)]) as gateway:
        await serve_stdio(gateway)

trio.run(main)
"""


def _line(message: dict[str, object]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def _memory_kb(pid: int) -> tuple[int, int]:
    """The process's resident memory and its peak so far (kB)."""
    fields = {}
    for text in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = text.partition(":")
        fields[key] = value.split()[0] if value.split() else "0"
    return int(fields["VmRSS"]), int(fields["VmHWM"])


def _flood(wait_s: float) -> tuple[float, str]:
    """One gateway, CALLS calls; reading starts after ``wait_s`` s. (seconds, note)."""
    gateway = subprocess.Popen(
        [sys.executable, "-c", GATEWAY], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    stdin: IO[bytes] = gateway.stdin  # type: ignore[assignment]
    stdout: IO[bytes] = gateway.stdout  # type: ignore[assignment]
    try:
        hello = {"protocolVersion": "2025-11-25", "capabilities": {}}
        init = {"clientInfo": {"name": "flood", "version": "0"}, **hello}
        stdin.write(_line({"jsonrpc": "2.0", "id": "i", "method": "initialize", "params": init}))
        stdin.write(_line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        stdin.write(_line({"jsonrpc": "2.0", "id": "l", "method": "tools/list"}))
        stdin.flush()
        stdout.readline()
        stdout.readline()
        start_kb, _ = _memory_kb(gateway.pid)
        written = [0]

        def write() -> None:
            for n in range(CALLS):
                call = {"name": "echo", "arguments": {"text": str(n)}}
                stdin.write(
                    _line({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": call})
                )
                written[0] = n + 1
            stdin.flush()

        t0 = time.perf_counter()
        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        writer.join(wait_s)  # (reading nothing until every call is written, or wait_s)
        then_kb, _ = _memory_kb(gateway.pid)
        read_then = written[0]
        ids = [json.loads(stdout.readline()).get("id") for _ in range(CALLS)]
        writer.join()
        seconds = time.perf_counter() - t0
        _, peak_kb = _memory_kb(gateway.pid)
    finally:
        gateway.kill()
        gateway.wait()
    whole = sorted(ids) == list(range(CALLS))
    note = (
        f"{CALLS} calls; written when reading began: {read_then}; RSS then "
        f"+{(then_kb - start_kb) / 1024:.1f} MB, peak +{(peak_kb - start_kb) / 1024:.1f} MB "
        f"over the run; each answered once: {whole}"
    )
    return seconds, note


async def main() -> list[Row]:
    rows: list[Row] = []
    seconds, note = await trio.to_thread.run_sync(_flood, 0.0)
    base = row(
        "gateway-flood", "stdio: client reads as it writes", [seconds / CALLS * 1e6], note=note
    )
    rows.append(base)
    seconds, note = await trio.to_thread.run_sync(_flood, WAIT_S)
    rows.append(
        row(
            "gateway-flood",
            f"stdio: client reads nothing for {WAIT_S:.0f} s, then all",
            [seconds / CALLS * 1e6],
            baseline=base,
            target="peak within a few MB of the baseline's",
            note=note,
        )
    )
    return rows


if __name__ == "__main__":
    run(main)
