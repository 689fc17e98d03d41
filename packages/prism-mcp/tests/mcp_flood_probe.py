"""Run by test_mcp_floods in a fresh process: how much does a flood raise peak RSS?

Usage: ``python mcp_flood_probe.py <mode> <count> [option=value ...]``; prints one
JSON line. ``mode`` is one of mcp_flood_server.py's modes; options are passed to
``open_mcp_tools`` as integers or floats (``none`` for ``None``), except
``freeze=on``, which calls ``gc.freeze()`` first (the heap so far is left out
of every full collection, as a host may choose), ``collect=on``, which runs
one full collection first (so the flood pays only the full collections it
causes itself, not one start-up left due), ``caps=off``, which lifts the
gate's block, node and message caps (the
benchmark's baseline), ``budget=off``, which admits every message without
its price, ``memory=off``, which leaves out the scan before parsing (blocks
counted, structuredContent parsed apart) and the carrying of
structuredContent past the SDK's result check, ``weigh=off``, which parses
every stdio line on the event loop without counting its objects and arrays
first (the behaviour before that count), and the ``sampling`` mode, which gets a host sampler
that answers after 0.1 s.
"""

from __future__ import annotations

import gc
import json
import resource
import subprocess
import sys
import time
import tracemalloc
from functools import partial
from pathlib import Path

import trio

from prism.core import ToolCall, ToolExecutionContext
from prism.mcp import (
    McpSamplingAnswer,
    McpSamplingRequest,
    McpTransport,
    StdioTransport,
    StreamableHttpTransport,
    open_mcp_tools,
)

SERVER = Path(__file__).resolve().parent / "mcp_flood_server.py"
RESULT_MODES = frozenset(
    {
        "big_result",
        "big_objects",
        "blocks",
        "nodes",
        "keys",
        "records",
        "braces",
        "shorts",
        "ints",
        "members",
        "refused",
    }
)
_TEXT_OPTIONS = frozenset({"caps", "budget", "memory", "weigh", "transport", "freeze", "collect"})


def peak_rss_bytes() -> int:
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _value(text: str) -> object:
    if text == "none":
        return None
    if text == "off":
        return text
    return float(text) if "." in text else int(text)


async def _ticker(
    gaps: list[float], walls: list[float], timed: trio.Event, done: trio.Event
) -> None:
    """This thread's CPU time, and the wall time past the 10 ms, between two ticks.

    A worker thread holding the interpreter's lock delays the ticks without
    this thread's CPU time: the wall gap counts it (and, on a loaded machine,
    the time the process waited for a core). Ticks only from ``timed`` on:
    what comes before the flood (the bridge's own start, its first imports)
    is not the flood's.
    """
    await timed.wait()
    last = time.thread_time()
    wall = time.monotonic()
    while not done.is_set():
        await trio.sleep(0.01)
        now = time.thread_time()
        gaps.append(now - last)
        last = now
        then, wall = wall, time.monotonic()
        walls.append(wall - then - 0.01)


async def main(mode: str, count: int, options: dict[str, object]) -> None:
    gaps: list[float] = []
    walls: list[float] = []
    started: list[float] = []
    pauses: list[float] = []
    done = trio.Event()
    timed = trio.Event()

    def collected(phase: str, info: dict[str, int]) -> None:
        # The interpreter's full collections (of the whole heap) land in whatever
        # step allocates: a stall includes them.
        if info["generation"] != 2 or done.is_set() or not timed.is_set():
            return
        if phase == "start":
            started.append(time.thread_time())
        elif started:
            pauses.append(time.thread_time() - started.pop())

    if options.pop("collect", None) == "on":
        # Start-up's garbage collected now, before the ticker and the flood.
        gc.collect()
    if options.pop("freeze", None) == "on":
        # What a host may do once started: its heap so far is never collected again.
        gc.freeze()
    gc.callbacks.append(collected)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_ticker, gaps, walls, timed, done)
        try:
            report = await _flood(mode, count, options, timed, done)
        finally:
            done.set()
            timed.set()  # a flood that failed first: the ticker ends
    gc.callbacks.remove(collected)
    report["stall_s"] = max(gaps, default=0.0)
    report["wall_stall_s"] = max(walls, default=0.0)
    report["gc_pause_s"] = max(pauses, default=0.0)
    report["gc_full"] = len(pauses)
    sys.stdout.write(json.dumps(report) + "\n")


def _priced(sizes: list[int], *, off: bool) -> None:
    """Record the size of every raw message priced (and, with ``off``, admit them all)."""
    from prism.mcp import _budget, _http, _stdio

    real = _budget.message_refusal

    async def recording(raw: bytes, sender: str = "the server") -> str | None:
        sizes.append(len(raw))
        return None if off else await real(raw, sender)

    _stdio.message_refusal = _http.message_refusal = recording  # type: ignore[attr-defined]


async def _flood(
    mode: str, count: int, options: dict[str, object], timed: trio.Event, untimed: trio.Event
) -> dict[str, object]:
    report: dict[str, object] = {"mode": mode, "count": count}
    kind = options.pop("transport", "stdio")
    if kind == "stdio":
        transport: McpTransport = StdioTransport(sys.executable, [str(SERVER), mode, str(count)])
        report.update(await _run(mode, count, options, timed, untimed, transport))
        return report
    async with trio.open_nursery() as nursery:
        server = await nursery.start(
            partial(
                trio.run_process,
                [sys.executable, str(SERVER), mode, str(count), str(kind)],
                stdout=subprocess.PIPE,
                check=False,
            )
        )
        assert server.stdout is not None
        seen = b""
        while b"\n" not in seen:
            seen += await server.stdout.receive_some(100)
        port = int(seen.split()[1])
        http = StreamableHttpTransport(f"http://127.0.0.1:{port}/mcp")
        try:
            report.update(await _run(mode, count, options, timed, untimed, http))
        finally:
            server.kill()
    return report


async def _run(
    mode: str,
    count: int,
    options: dict[str, object],
    timed: trio.Event,
    untimed: trio.Event,
    transport: McpTransport,
) -> dict[str, object]:
    report: dict[str, object] = {}
    sizes: list[int] = []
    _priced(sizes, off=options.pop("budget", None) == "off")
    if options.pop("memory", None) == "off":
        from prism.mcp import _gate, _http, _stdio

        async def unchanged(raw: bytes, *_args: object, **_options: object) -> bytes:
            return raw

        _stdio.before_parsing = _http.before_parsing = unchanged  # type: ignore[attr-defined]
        _gate._carry = lambda result, nodes: None
    if options.pop("weigh", None) == "off":
        from prism.mcp import _stdio

        _stdio._crowded = lambda line: False
    if options.pop("caps", None) == "off":
        from prism.mcp import _budget, _gate

        _gate.MAX_RESULT_BLOCKS = _gate.MAX_SAMPLING_MESSAGES = _gate.MAX_MESSAGE_NODES = 10**9
        _budget.FREE_NODES = 10**9
    if mode == "sampling":

        async def sample(request: McpSamplingRequest) -> McpSamplingAnswer:
            await trio.sleep(0.1)
            return McpSamplingAnswer(text=str(len(request.messages)), model="m")

        options["sample"] = sample
    if mode in ("pages", "schema_pages", "costly_schemas", "junk", "many", "wide", "distinct"):
        # The listing is the flood: measure around a second bridge's whole open.
        async with open_mcp_tools(
            server_id="warm", transport=StdioTransport(sys.executable, [str(SERVER), "log", "0"])
        ):
            pass
        timed.set()
        before = peak_rss_bytes()
        started = time.monotonic()
        cpu = time.thread_time()
        async with open_mcp_tools(
            server_id="fl",
            transport=transport,
            protocol="legacy",
            connect_timeout_s=60,
            **options,  # type: ignore[arg-type]
        ) as bridge:
            report["tools"] = len(bridge.tools)
            # This thread's CPU for the whole open (the event loop's thread).
            report["cpu_s"] = time.thread_time() - cpu
        after = peak_rss_bytes()
    else:
        async with open_mcp_tools(
            server_id="fl",
            transport=transport,
            protocol="legacy",
            **options,  # type: ignore[arg-type]
        ) as bridge:
            tool = bridge.tools[0]
            ctx = ToolExecutionContext(ToolCall(id="f", name=tool.name, arguments={}))
            timed.set()
            if mode in RESULT_MODES:
                # One call for the stall, then the ticker stops (tracemalloc slows
                # every allocation) and a second call is traced for its memory.
                await tool.execute({}, ctx)
                untimed.set()
                sizes.clear()
                # What one result costs in Python memory, beyond what was held before.
                tracemalloc.start()
                held = tracemalloc.get_traced_memory()[0]
            before = peak_rss_bytes()
            started = time.monotonic()
            result = await tool.execute({}, ctx)
            after = peak_rss_bytes()
            if mode in RESULT_MODES:
                report["traced_peak_bytes"] = tracemalloc.get_traced_memory()[1] - held
                tracemalloc.stop()
                report["message_bytes"] = max(sizes, default=0)
                report["structured_bytes"] = len(
                    json.dumps(result.structured, separators=(",", ":"))
                )
            report["is_error"] = result.is_error
            report["mcp_error"] = result.details.get("mcp_error")
            report["limit"] = result.details.get("limit")
            report["text"] = result.joined_text[:300]
    report["seconds"] = time.monotonic() - started
    report["peak_before"] = before
    report["peak_after"] = after
    report["peak_growth_bytes"] = after - before
    return report


if __name__ == "__main__":
    extra = dict(arg.split("=", 1) for arg in sys.argv[3:])
    parsed = {k: v if k in _TEXT_OPTIONS else _value(v) for k, v in extra.items()}
    trio.run(main, sys.argv[1], int(sys.argv[2]), parsed)
