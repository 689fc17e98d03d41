"""Coding tools: shell throughput and memory on 200 MB of output, first page of a 1 GB file.

Rows (medians over repetitions, measured in one run):

1. ``yes | head -c 200000000`` (200 MB of ``y\\n``):
   - ``raw pipe read`` (baseline): a plain ``subprocess.Popen`` whose stdout is
     read in 64 KiB chunks and thrown away, the least any runner can do;
   - ``shell tool``: the same command through ``create_shell_tool`` with the
     default bounds (2000 lines / 50 000 bytes kept, the raw output spilled to
     a temp file up to its 64 MiB cap).
   Each sample runs in a fresh interpreter so ``ru_maxrss`` (the peak
   resident set) belongs to that run alone: the child imports everything and
   runs a warm-up command first, reads ``ru_maxrss``, runs the measured
   command, reads it again. Growth = the difference, i.e. how far the peak rose
   because of the 200 MB. Target: growth <= 2 x max_bytes + 20 MB.
2. First page of a 1 GB sparse file (5000 text lines, then a sparse hole):
   - ``open().readline(), same page`` (baseline): plain Python reading the lines
     the tool returns (980 lines of 51 bytes: the 50 000-byte page bound);
   - ``read tool, first page``: ``create_read_tool`` with default bounds on that
     file, including path resolution, stat, binary sniff and result building.
   Target: <= 20 ms.

Run: ``uv run python benchmarks/bench_coding.py [--json] [--quick]``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

from _harness import Row, row, run, time_async, time_sync

from prism.coding.tools import create_read_tool
from prism.core import ToolCall, ToolExecutionContext

BENCH = "coding"
QUICK = "--quick" in sys.argv[1:]
SHELL_REPEAT = 3 if QUICK else 5
READ_REPEAT = 9 if QUICK else 21
OUTPUT_BYTES = 200_000_000
COMMAND = f"yes | head -c {OUTPUT_BYTES}"
MAX_BYTES = 50_000
RSS_TARGET = 2 * MAX_BYTES + 20_000_000

_CHILD = textwrap.dedent(
    """
    import json, resource, subprocess, sys, time
    import trio
    from prism.core import ToolCall, ToolExecutionContext
    from prism.coding.tools import create_shell_tool

    mode, workdir, command = sys.argv[1], sys.argv[2], sys.argv[3]

    def raw(cmd):
        proc = subprocess.Popen(["bash", "-c", cmd], stdout=subprocess.PIPE)
        total = 0
        while chunk := proc.stdout.read1(65536):
            total += len(chunk)
        proc.wait()
        return total

    async def tool_run(tool, cmd):
        ctx = ToolExecutionContext(call=ToolCall(id="b", name="shell", arguments={}))
        result = await tool.execute({"command": cmd}, ctx)
        return result.details["total_bytes"]

    tool = create_shell_tool(workdir, spill_dir=workdir)
    run = (lambda cmd: raw(cmd)) if mode == "raw" else (lambda cmd: trio.run(tool_run, tool, cmd))
    run("echo warm-up")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    total = run(command)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"elapsed_s": elapsed, "growth_kb": after - before, "bytes": total}))
    """
)


def _child(mode: str, workdir: str) -> dict[str, float]:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, workdir, COMMAND],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    report: dict[str, float] = json.loads(proc.stdout)
    if report["bytes"] != OUTPUT_BYTES:
        raise RuntimeError(f"{mode} run saw {report['bytes']} bytes, not {OUTPUT_BYTES}")
    for name in os.listdir(workdir):
        os.unlink(os.path.join(workdir, name))
    return report


def _shell_rows(workdir: str) -> list[Row]:
    samples: dict[str, list[dict[str, float]]] = {"raw": [], "tool": []}
    for _ in range(SHELL_REPEAT):
        for mode in ("raw", "tool"):  # interleaved, so drift hits both alike
            samples[mode].append(_child(mode, workdir))
    rows: list[Row] = []
    baseline: Row | None = None
    for mode, name in (("raw", "raw pipe read, 200 MB"), ("tool", "shell tool, 200 MB")):
        times = [s["elapsed_s"] * 1e6 for s in samples[mode]]
        growth = statistics.median(s["growth_kb"] for s in samples[mode]) * 1024
        worst = max(s["growth_kb"] for s in samples[mode]) * 1024
        speed = OUTPUT_BYTES / statistics.median(times)  # bytes per µs = MB/s
        note = (
            f"{speed:.0f} MB/s; peak RSS growth median {growth / 1e6:.1f} MB, "
            f"max {worst / 1e6:.1f} MB"
        )
        target = None
        if mode == "tool":
            verdict = "met" if worst <= RSS_TARGET else "MISSED"
            target = f"RSS growth <= {RSS_TARGET / 1e6:.1f} MB ({verdict})"
        r = row(BENCH, name, times, baseline=baseline, target=target, note=note)
        if baseline is None:
            baseline = r
        rows.append(r)
    return rows


def _make_sparse_file(path: str) -> None:
    with open(path, "w") as f:
        f.writelines(f"{i:06d} the quick brown fox jumps over the lazy dog\n" for i in range(5000))
    os.truncate(path, 1024**3)


async def _read_rows(workdir: str) -> list[Row]:
    path = os.path.join(workdir, "big.log")
    _make_sparse_file(path)

    def plain() -> None:
        # The same page the tool returns: whole lines up to its 50 000-byte bound.
        used = 0
        with open(path) as f:
            while used + 51 <= MAX_BYTES:
                used += len(f.readline())

    tool = create_read_tool(workdir)
    ctx = ToolExecutionContext(call=ToolCall(id="b", name="read", arguments={}))

    async def first_page() -> None:
        result = await tool.execute({"path": "big.log"}, ctx)
        if result.details.get("next_offset") != 981:
            raise RuntimeError(f"unexpected first page: {dict(result.details)}")

    base = row(
        BENCH,
        "open().readline(), same page",
        time_sync(plain, inner=5, repeat=READ_REPEAT),
    )
    tool_row = row(
        BENCH,
        "read tool, first page of 1 GB file",
        await time_async(first_page, inner=5, repeat=READ_REPEAT),
        baseline=base,
        target="<= 20 ms",
    )
    verdict = "met" if tool_row.median_us <= 20_000 else "MISSED"
    tool_row.target = f"<= 20 ms ({verdict})"
    os.unlink(path)
    return [base, tool_row]


async def main() -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="prism-bench-coding-") as workdir:
        rows = _shell_rows(workdir)
        rows.extend(await _read_rows(workdir))
    return rows


if __name__ == "__main__":
    run(main)
