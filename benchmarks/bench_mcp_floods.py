"""What a hostile MCP server's floods cost the host: peak memory growth and time.

Each flood runs in a fresh process (packages/prism-mcp/tests/mcp_flood_probe.py)
against the hand-written hostile server (mcp_flood_server.py), with the bridge's
default limits unless a row says otherwise. The time column is how long the
bridge took to get through the flood (for a listing: the whole open; for the
rest: the one call); the note gives the growth of the probe's peak RSS. These
are the same floods test_mcp_floods.py asserts on (the tests bound memory only;
timing lives here). Each ``stall:`` row is the longest the flood held the
probe's event loop (thread CPU time between two ticks of a 10 ms ticker),
ticking from the flood's start: before a listing, from the end of the warm-up
open; before a call, from the open bridge (start-up's own pauses, such as a
module compiled and a full collection at the first open, counted in every
row before).

``listing: ...`` opens a server whose listing carries three ~90 kB output
schemas of the costliest shapes to admit (they are compiled only when a tool
is first called). The junk page (100,000 two-byte entries beside one tool) is
dropped whole before any per-entry check; 4,000 tools with one the SDK
refuses, and one page of 2,800 or 4,000 tools within ``max_result_bytes``
(``wide``), are each checked and built alone, on a worker thread (a page of
more than 256 tools; a shorter one on the loop with a checkpoint every 64
tools, and so is the bridge's preparing of them); the listing and the
bridge's pass let other tasks run every 64 tools. Each tool is written once
(its JSON but its name, title and description), which keys its check and
its prepared parts and is what the listing says of it. Targets for a
listing: the open costs at most 200 ms of the event loop thread's CPU (the
note's "CPU of the open") and holds the loop at most 100 ms at a time (the
stall row). The note gives the longest full collection
of the interpreter's heap in the run (it lands in whatever step allocates,
and counts in the stall) and the longest wall gap between ticks (which counts
a worker thread holding the interpreter's lock, and, on a loaded machine, the
time the process waited for a core). Rows "after gc.freeze()" run the same
flood after the probe froze its start-up heap (a host's choice, not the
bridge's). Rows "from a collected heap" run the same flood after one full
collection at the probe's start (``collect=on``): start-up leaves the
interpreter a few young collections short of a full one, which then lands in
whatever allocates next, the open included; from a collected heap the open
pays only the full collections it causes itself. Three rounds taking turns
with the code before each tool was written once (load 15.7-18.7), CPU of the
open: 4,000 tools of one property 111-120 ms against 211-219 (from a
collected heap 94-123 against 215-258), 2,800 of five 107-112 against
173-203, 4,000 small 79-90 against 133-148; the whole process (worker
threads too) for 4,000 of one property 250 ms median against 354. The
``distinct`` row is 3,900 tools no two of which share a schema or a shape
(each property named for its tool), so nothing made once per distinct part
is shared: 147 ms median (127-192) against 329 (292-369), two processes of
three opens each taking turns, load 10.3-10.7; with a listing of more than
256 tools also prepared on a worker thread, 68 ms (60-78) against 181
(155-188) without (load 16.7-18.2), 4,000 of one property 53 (43-70) against
63 (56-85).
``result: one array of ...`` is a 950 kB ``structuredContent`` of one flat array
of small scalars: the gate's count of the result and the bridge's plain-JSON
check walk its members by type at C speed (target: stall under 100 ms).
``result: 25 000 records the output check refuses`` is a 514 kB result refused
past the output check's default 10,000 object members (checked on a worker
thread; its first problem named without a tuple per member).
``result: ...`` is one call answering with a 960 kB ``structuredContent``; the
note gives tracemalloc's peak during the call over the content's JSON size
(target: at most 10x plus a constant). The blocks, ``{}`` and sampling rows
are refused before the SDK builds its models (the first two at the gate or
before ``json.loads``, the last with a JSON-RPC error back to the server); each
has a baseline row in the same run with the probe's ``caps=off``, which lifts
the caps (the behaviour before them).
``notifications: ...`` rows are three log notifications of one-element arrays
sent during one call; ``result: 70 000 {}`` is a result within the per-byte
count of objects and arrays but past the cap of 65,536 on one result. A stdio
line of more than 8,192 ``{`` and ``[`` is counted exactly (strings cut out)
and parsed on a worker thread; past 65,536 objects and arrays a notification is
dropped and a call's result refused, unparsed. The baselines (``weigh=off``)
parse every line on the event loop, as before. Three rounds taking turns in
one run (load 9.2-12.1), new against baseline: the stall row 4-5 ms against
184-210 ms (120,000 arrays, dropped; peak RSS +1.7 against +27.0 MB; longest
wall gap 52-104 against 1,531-1,957 ms), 3-4 against 91-96 (60,000, kept), 1-2
against 91-107 (70,000 ``{}``, refused; +0.0 against +12.5 MB). The kept rows'
wall gap is not better (1,008-1,107 against 618-1,002 ms): the worker thread
holds the interpreter's lock while it parses, and the full collections the
parse causes (81-106 ms each) land on that thread.
Over server-sent events (two rounds taking turns, load 5.2-6.0) the dropped
notifications' stall is 8 ms against 434-467 ms with the SDK's reader parsing
them (peak RSS +0.0 against +76.2 MB).

``shape: ...`` rows are one result of each shape that costs most to parse,
at three sizes (about 120, 475 and 950 kB, within the default
``max_result_bytes``), over stdio, over Streamable HTTP with JSON bodies
(``http``) and with server-sent events (``sse``). The note fits tracemalloc's
peak during the call to ``a x size + b`` (least squares over the three sizes;
the target is a <= 10 with b a modest constant), beside the same fit for the
baseline, measured in the same run with the probe's ``budget=off
memory=off`` (no price before parsing, no scan of the raw message, the
structuredContent through the SDK's result check: the behaviour before
them); then the peak over the size at the largest, the growth of peak RSS
before and after at the largest (the SDK's HTTP parser allocates outside
tracemalloc's view), and whether the result was kept or refused
(``result_too_large``: priced over ten times its size plus 8 MiB, never
parsed; ``server_error``: the gate's cap on blocks, counted on the raw bytes,
or on objects and arrays, after parsing). The time is the traced call at the
largest size. One ``--quick --shapes`` run (load 8-16): a is at most 7.1 on
every row (the refused blocks 1.9-2.0, records 6.0-7.1, two-character strings
2.6-3.5); beside it, the code before the count of a crowded message's objects
and arrays built nothing (it cut every string literal out with ``re.sub``, a
piece per literal): blocks 33.3 over HTTP and SSE, records 26.1-26.2.

Run: ``uv run python benchmarks/bench_mcp_floods.py [--json] [--quick] [--shapes]``
(``--shapes``: only the shape rows).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio
from _harness import Row, row, run

BENCH = "mcp-floods"
QUICK = "--quick" in sys.argv[1:]
ONLY_SHAPES = "--shapes" in sys.argv[1:]
REPEAT = 1 if QUICK else 3
PROBE = Path(__file__).resolve().parents[1] / "packages/prism-mcp/tests/mcp_flood_probe.py"

FLOODS: list[tuple[str, str, int, tuple[str, ...]]] = [
    ("100 tools/list pages of ~900 kB", "pages", 100, ()),
    ("100 pages, bulk in outputSchema", "schema_pages", 100, ()),
    (
        "200 000 pings, server never reads",
        "ping",
        200_000,
        ("call_timeout_s=30", "connect_timeout_s=2", "max_call_s=60"),
    ),
    ("200 000 progress, max_call_s=2", "progress", 200_000, ("max_call_s=2",)),
    ("50 000 log messages", "log", 50_000, ()),
    ("50 000 list-change announcements", "announce", 50_000, ()),
    ("listing: 3 output schemas of ~90 kB", "costly_schemas", 0, ()),
    ("listing: one tool and 100 000 junk entries", "junk", 100_000, ()),
    ("listing: 4 000 tools, one the SDK refuses", "many", 4_000, ()),
    ("  the same from a collected heap", "many", 4_000, ("collect=on",)),
    ("listing: 2 800 tools of five properties (945 kB)", "wide", 2_800, ()),
    ("  the same from a collected heap", "wide", 2_800, ("collect=on",)),
    ("listing: 4 000 tools of one property (983 kB)", "wide", 4_000, ()),
    ("  the same from a collected heap", "wide", 4_000, ("collect=on",)),
    ("  the same after gc.freeze() (the host's choice)", "wide", 4_000, ("freeze=on",)),
    ("listing: 3 900 tools, each property its own name", "distinct", 3_900, ()),
    ("result: 960 kB structuredContent of strings", "big_result", 960_000, ()),
    ("result: 960 kB structuredContent of objects", "big_objects", 960_000, ()),
    ("result: one array of 237 000 ints (950 kB)", "ints", 237_000, ()),
    ("result: one array of 190 000 two-character strings", "shorts", 190_000, ()),
    ("result: 25 000 records the output check refuses", "refused", 25_000, ()),
    ("  the same after gc.freeze() (the host's choice)", "refused", 25_000, ("freeze=on",)),
    ("result: 36 000 empty text blocks (1 MB)", "blocks", 36_000, ()),
    ("  the same, caps lifted (baseline)", "blocks", 36_000, ("caps=off",)),
    ("result: 330 000 {} in structuredContent", "nodes", 330_000, ()),
    ("  the same, caps lifted (baseline)", "nodes", 330_000, ("caps=off",)),
    ("notifications: 3 of 120 000 one-element arrays (880 kB)", "notes", 120_000, ()),
    ("  the same, parsed on the loop (baseline)", "notes", 120_000, ("weigh=off",)),
    ("  the same over server-sent events", "notes", 120_000, ("transport=sse",)),
    ("  the same, parsed by the SDK (baseline)", "notes", 120_000, ("transport=sse", "weigh=off")),
    ("notifications: 3 of 60 000 one-element arrays (kept)", "notes", 60_000, ()),
    ("  the same, parsed on the loop (baseline)", "notes", 60_000, ("weigh=off",)),
    ("result: 70 000 {} in structuredContent (210 kB)", "nodes", 70_000, ()),
    ("  the same, parsed on the loop (baseline)", "nodes", 70_000, ("weigh=off",)),
    ("sampling request of 17 000 messages (1 MB)", "sampling", 17_000, ()),
    ("  the same, caps lifted (baseline)", "sampling", 17_000, ("caps=off",)),
]


_LISTINGS = frozenset({"costly_schemas", "junk", "many", "wide", "distinct"})
"""Listings within the limits: the open costs at most 200 ms of CPU, at most 100 ms at a time."""
_CHECKED = frozenset({"refused", "ints", "shorts", "notes"})
"""Results within the limits whose check holds the event loop at most 100 ms at a time."""


SHAPES: list[tuple[str, str, int]] = [
    ("36 000 empty text blocks", "blocks", 36_000),
    ("300 000 {} in structuredContent", "nodes", 300_000),
    ("118 000 one-member objects", "members", 118_000),
    ("95 000 distinct keys", "keys", 95_000),
    ("190 000 two-character strings", "shorts", 190_000),
    ("237 000 ints past the small-int cache", "ints", 237_000),
    ("records of four members", "records", 950_000),
    ("JSON written inside one text", "braces", 950_000),
    ("strings of 30 characters", "big_result", 960_000),
    ("objects of one 90-character member", "big_objects", 960_000),
]
TRANSPORTS = ("stdio", "http", "sse")
SCALES = (0.125, 0.5, 1.0)
"""Each shape at these fractions of its count (about 120, 475 and 950 kB)."""


async def probe(mode: str, count: int, options: tuple[str, ...]) -> dict[str, object]:
    done = await trio.run_process(
        [sys.executable, str(PROBE), mode, str(count), *options],
        capture_stdout=True,
        capture_stderr=True,
    )
    report: dict[str, object] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return report


async def main() -> list[Row]:
    rows: list[Row] = []
    for label, mode, count, options in [] if ONLY_SHAPES else FLOODS:
        seconds: list[float] = []
        cpu: list[float] = []
        pauses: list[float] = []
        growth: list[float] = []
        stalls: list[float] = []
        walls: list[float] = []
        traced: list[float] = []
        for _ in range(REPEAT):
            report = await probe(mode, count, options)
            assert isinstance(report["seconds"], float)
            assert isinstance(report["peak_growth_bytes"], int)
            assert isinstance(report["stall_s"], float)
            seconds.append(report["seconds"] * 1e6)
            growth.append(report["peak_growth_bytes"] / 1e6)
            stalls.append(report["stall_s"] * 1e6)
            wall = report.get("wall_stall_s")
            if isinstance(wall, float):
                walls.append(wall * 1e3)
            spent = report.get("cpu_s")
            if isinstance(spent, float):
                cpu.append(spent * 1e3)
            pause = report.get("gc_pause_s")
            if isinstance(pause, float):
                pauses.append(pause * 1e3)
            if mode in ("big_result", "big_objects"):
                assert report["is_error"] is False, report
                peak, size = report["traced_peak_bytes"], report["structured_bytes"]
                assert isinstance(peak, int)
                assert isinstance(size, int)
                traced.append(peak / size)
        growth.sort()
        note = f"peak RSS +{growth[len(growth) // 2]:.1f} MB (max +{growth[-1]:.1f} MB)"
        if traced:
            traced.sort()
            note += f"; traced peak {traced[len(traced) // 2]:.1f}x the bytes (target <= 10x)"
        if cpu and mode in _LISTINGS:
            cpu.sort()
            note += f"; CPU of the open {cpu[len(cpu) // 2]:.0f} ms"
            note += f" ({cpu[0]:.0f}-{cpu[-1]:.0f}; target <= 200)" if len(cpu) > 1 else ""
        if pauses and max(pauses) > 0:
            note += f"; longest full GC pause {max(pauses):.0f} ms"
        if walls:
            walls.sort()
            note += f"; longest wall gap {walls[len(walls) // 2]:.0f} ms"
        rows.append(row(BENCH, label, seconds, note=note))
        target = "< 100 ms" if mode in _LISTINGS or mode in _CHECKED else None
        rows.append(row(BENCH, f"stall: {label}", stalls, target=target))
    for label, mode, count in SHAPES:
        for transport in TRANSPORTS:
            rows.append(await _shape_row(label, mode, count, transport))
    return rows


def _num(report: dict[str, object], key: str) -> float:
    value = report[key]
    assert isinstance(value, int | float)
    return float(value)


async def _shape_row(label: str, mode: str, count: int, transport: str) -> Row:
    """Peak memory of one result of ``mode`` at three sizes, fitted to a line.

    Each size is measured with the bridge as it is and, as the baseline, with
    ``budget=off memory=off`` (no price before parsing, no scan of the raw
    message, structuredContent through the SDK's result check): the bounds
    left are the gate's caps after parsing, the behaviour before the price.
    """
    measured: dict[str, dict[float, list[dict[str, object]]]] = {"off": {}, "on": {}}
    for scale in SCALES:
        for _ in range(REPEAT):
            for memory in ("off", "on"):
                options = (f"transport={transport}", f"budget={memory}", f"memory={memory}")
                report = await probe(mode, max(1, round(count * scale)), options)
                measured[memory].setdefault(scale, []).append(report)

    def median(memory: str, scale: float, key: str) -> float:
        values = sorted(_num(report, key) for report in measured[memory][scale])
        return values[len(values) // 2]

    def fit(memory: str) -> tuple[float, float]:
        """(a, b) of peak = a * size + b, least squares over the sizes."""
        points = [
            (median(memory, scale, "message_bytes"), median(memory, scale, "traced_peak_bytes"))
            for scale in SCALES
        ]
        mean_x = sum(x for x, _ in points) / len(points)
        mean_y = sum(y for _, y in points) / len(points)
        a = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum(
            (x - mean_x) ** 2 for x, _ in points
        )
        return a, mean_y - a * mean_x

    largest = SCALES[-1]
    a, b = fit("on")
    a0, b0 = fit("off")
    sizes = "/".join(f"{median('on', scale, 'message_bytes') / 1e3:.0f}" for scale in SCALES)
    outcome = measured["on"][largest][-1]["mcp_error"] or "kept"
    top = median("on", largest, "traced_peak_bytes") / median("on", largest, "message_bytes")
    baseline = row(BENCH, "", [_num(r, "seconds") * 1e6 for r in measured["off"][largest]])
    note = (
        f"peak = {a:.1f} x size {b / 1e6:+.1f} MB (before {a0:.1f} x {b0 / 1e6:+.1f} MB) over "
        f"{sizes} kB; {top:.1f}x at the largest; peak RSS "
        f"+{median('off', largest, 'peak_growth_bytes') / 1e6:.1f} -> "
        f"+{median('on', largest, 'peak_growth_bytes') / 1e6:.1f} MB; {outcome}"
    )
    samples = [_num(r, "seconds") * 1e6 for r in measured["on"][largest]]
    return row(
        BENCH,
        f"shape: {label} [{transport}]",
        samples,
        baseline=baseline,
        target="a <= 10",
        note=note,
    )


if __name__ == "__main__":
    run(main)
