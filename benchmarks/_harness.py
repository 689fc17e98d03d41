"""Tiny shared harness for Prism benchmarks: time things, print one table.

Every ``benchmarks/bench_*.py`` builds a list of :class:`Row` and calls
:func:`report`, which prints an aligned table, or JSON lines when the script
runs with ``--json`` (``scripts/bench`` uses that to print one combined table).
A row may name a baseline row measured in the same run; the table then shows
the ratio to it.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable


@dataclass
class Row:
    """One measured line of a benchmark table (times in microseconds)."""

    bench: str
    name: str
    median_us: float
    min_us: float
    max_us: float
    baseline: str | None = None
    ratio: float | None = None
    target: str | None = None
    note: str = ""
    extra: dict[str, float | str] = field(default_factory=dict)


def stats(samples_us: list[float]) -> tuple[float, float, float]:
    """Median, min and max of samples."""
    return statistics.median(samples_us), min(samples_us), max(samples_us)


def time_sync(fn: Callable[[], object], *, inner: int, repeat: int) -> list[float]:
    """Per-call microseconds of ``fn``, ``repeat`` samples of ``inner`` calls each."""
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner * 1e6)
    return samples


async def time_async(
    fn: Callable[[], Awaitable[object]], *, inner: int, repeat: int
) -> list[float]:
    """Per-call microseconds of ``await fn()``, ``repeat`` samples of ``inner`` calls each."""
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(inner):
            await fn()
        samples.append((time.perf_counter() - t0) / inner * 1e6)
    return samples


def row(
    bench: str,
    name: str,
    samples_us: list[float],
    *,
    baseline: Row | None = None,
    target: str | None = None,
    note: str = "",
) -> Row:
    """A :class:`Row` from samples; the ratio compares medians with ``baseline``."""
    median, low, high = stats(samples_us)
    ratio = median / baseline.median_us if baseline is not None and baseline.median_us else None
    return Row(
        bench=bench,
        name=name,
        median_us=median,
        min_us=low,
        max_us=high,
        baseline=baseline.name if baseline is not None else None,
        ratio=ratio,
        target=target,
        note=note,
    )


def _fmt_us(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:.2f} s"
    if value >= 1e3:
        return f"{value / 1e3:.2f} ms"
    return f"{value:.2f} µs"


def format_table(rows: list[Row]) -> str:
    """An aligned text table of ``rows``."""
    header = ["bench", "case", "median", "min-max", "vs baseline", "target", "note"]
    lines = [header]
    for r in rows:
        ratio = f"{r.ratio:.2f}x {r.baseline}" if r.ratio is not None else ""
        lines.append(
            [
                r.bench,
                r.name,
                _fmt_us(r.median_us),
                f"{_fmt_us(r.min_us)}-{_fmt_us(r.max_us)}",
                ratio,
                r.target or "",
                r.note,
            ]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = []
    for index, line in enumerate(lines):
        out.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip())
        if index == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def report(rows: list[Row]) -> None:
    """Print ``rows`` as a table, or as JSON lines when ``--json`` is on the command line."""
    if "--json" in sys.argv[1:]:
        for r in rows:
            sys.stdout.write(json.dumps(asdict(r)) + "\n")
    else:
        sys.stdout.write(format_table(rows) + "\n")


def run(main: Callable[[], Awaitable[list[Row]]]) -> None:
    """Run an async benchmark ``main`` under trio and report its rows."""
    report(trio.run(main))
