"""What writing the ledger as a run goes costs per call, against the in-memory ledger.

Rows (medians over repetitions, measured in one run, the cases taking turns;
each row dispatches a call to a tool whose execution policy allows it, so every
record carries a decision). The rows without fsync measure the process's CPU
time per call (user + system, so the write(2) counts but another process
running on a loaded machine does not); the fsync rows measure wall time, since
their cost is waiting for the disk:

- ``in-memory ledger``: ``RunLedger()`` with no sinks, the baseline. Its records
  are redacted and built when they are read, which this row never does.
- ``in-memory ledger, every record read``: the same, reading each call's record
  right after it (so the redaction and the record are paid for as a sink pays).
- ``JSONL sink, fsync never``: one ``os.write`` of one line per call.
  Target: at most 20 µs per call more than the in-memory ledger whose records
  are read (a sink builds each record as its call ends; both pay for that).
- ``JSONL sink, fsync never, max_bytes``: plus the ``stat`` that checks for rotation.
- ``JSONL sink, fsync always``: plus an ``fsync`` per call (the disk decides).
- ``SQLite sink, synchronous=OFF / NORMAL``: one autocommit ``INSERT`` per call (WAL).
- ``SQLite sink, synchronous=FULL``: plus a WAL sync per call.
- ``JSONL sink before links were refused``: the sink's old open (a plain
  ``os.open``) and rotation check (``stat`` by name), the same write; the
  JSONL rows compare with it, in the same run.
- ``open: ...``: opening the ledger file once, a plain ``os.open`` against
  ``open_private_file`` (the parent opened first, ``O_NOFOLLOW``, ``fstat``).
- ``redact: ...``: the default redactor on a call's arguments, as it was
  before keys, header lists, split items and encoded secrets were covered
  (loaded from git, commit ``57fe7f9``) and as it is now.

Run: ``uv run python benchmarks/bench_ledger.py [--json] [--quick]``.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from _harness import Row, row, run, time_async, time_sync

from prism.core import (
    DispatchOptions,
    ExecutionAction,
    ExecutionDecision,
    JsonObject,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    assert_execution_allowed,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.core._ledger_codec import encode_entry
from prism.core.files import open_private_file
from prism.core.ledger import (
    JsonlLedgerSink,
    LedgerEntry,
    LedgerSink,
    RunLedger,
    SqliteLedgerSink,
    default_redactor,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

BENCH = "ledger"
QUICK = "--quick" in sys.argv[1:]
INNER = 1_000 if QUICK else 3_000
REPEAT = 5 if QUICK else 11
SLOW_INNER = 20 if QUICK else 50
SLOW_REPEAT = 3 if QUICK else 7
TARGET_US = 20.0

_RESULT = ToolResult.text("ok")
_DECISION = ExecutionDecision(
    allowed=True,
    reason="command 'ls -la src': proved read-only",
    details={"policy": "coding_approval", "decision": "allowed", "rule": "model:ls"},
)


class _Policy:
    def check(self, action: ExecutionAction) -> ExecutionDecision:
        return _DECISION


_POLICY = _Policy()
_ACTION = ExecutionAction(kind="shell", operation="shell", command="ls -la src")


async def shell(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
    await assert_execution_allowed(_POLICY, _ACTION)
    return _RESULT


def _dispatcher(ledger: RunLedger, *, read: bool) -> Callable[[], Awaitable[ToolResult]]:
    registry = create_tool_registry([ToolDefinition(name="shell", execute=shell)])
    options = DispatchOptions(registry=registry, ledger=ledger)
    call = ToolCall(id="c1", name="shell", arguments={"command": "ls -la src", "timeout": 30})

    async def once() -> ToolResult:
        return await dispatch_tool_call(call, options)

    async def once_and_read() -> ToolResult:
        result = await dispatch_tool_call(call, options)
        assert ledger.records[-1].call_id == "c1"
        return result

    return once_and_read if read else once


_READ = "in-memory ledger, every record read"
_BEFORE = "JSONL sink before links were refused"
_BEFORE_MAX = "JSONL sink before links were refused, max_bytes"


async def _cpu_us(once: Callable[[], Awaitable[object]], inner: int) -> float:
    """Per-call µs of CPU time (user + system) of this process: waiting is not counted."""
    t0 = time.process_time()
    for _ in range(inner):
        await once()
    return (time.process_time() - t0) / inner * 1e6


async def _interleaved(
    cases: dict[str, LedgerSink | None], *, inner: int, repeat: int, cpu: bool = True
) -> dict[str, list[float]]:
    """Per-call µs of each case, measured in turns so machine load hits all alike.

    ``cpu`` measures CPU time (a loaded machine's other processes then cost
    nothing); without it, wall time (for fsync, whose cost is waiting).
    """
    # The reading case keeps one record, so that reading costs one record's build.
    ledgers = {
        name: RunLedger(
            sinks=() if sink is None else (sink,), max_records=1 if name == _READ else 1000
        )
        for name, sink in cases.items()
    }
    calls = {name: _dispatcher(ledger, read=name == _READ) for name, ledger in ledgers.items()}
    samples: dict[str, list[float]] = {name: [] for name in cases}
    try:
        for once in calls.values():
            for _ in range(min(inner, 300)):
                await once()
        for _ in range(repeat):
            for name, once in calls.items():
                if cpu:
                    samples[name].append(await _cpu_us(once, inner))
                else:
                    samples[name] += await time_async(once, inner=inner, repeat=1)
    finally:
        for ledger in ledgers.values():
            ledger.close()
    return samples


class _PlainJsonlSink:
    """The JSONL sink as it was before links were refused: a plain open, ``stat`` by name."""

    def __init__(self, path: Path, max_bytes: int | None = None) -> None:
        self.path = str(path)
        self.max_bytes = max_bytes
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self.inode = os.fstat(self.fd).st_ino

    def write(self, entry: LedgerEntry) -> None:
        data = encode_entry(entry).encode("ascii")
        if self.max_bytes is not None:
            current = os.stat(self.path)
            assert current.st_ino == self.inode
            assert current.st_size + len(data) <= self.max_bytes
        os.write(self.fd, data)

    def close(self) -> None:
        os.close(self.fd)


_BEFORE_COMMIT = "49e7702"


def _redactor_before() -> Callable[[object], object] | None:
    """The default redactor as of ``_BEFORE_COMMIT``, loaded from git (None without git)."""
    root = Path(__file__).resolve().parent.parent
    try:
        source = subprocess.run(
            ["git", "show", f"{_BEFORE_COMMIT}:packages/prism-core/src/prism/core/_redaction.py"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    name = "prism.core._redaction_before"
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "prism.core"
    sys.modules[name] = module
    exec(compile(source, f"{_BEFORE_COMMIT}:_redaction.py", "exec"), module.__dict__)
    return module.default_redactor()  # type: ignore[no-any-return]


_SMALL_ARGS = {"command": "ls -la src", "timeout": 30}
_BIG_ARGS = {
    "path": "src/prism/core/_dispatch.py",
    "content": "def f(x):\n    return x + 1\n" * 20,
    "headers": {"Accept": "application/json", "User-Agent": "prism/1.0", "X-Request-Id": "r-1"},
    "env": {f"VAR_{i}": f"value-{i}" for i in range(20)},
    "argv": ["pytest", "-q", "tests/test_core_dispatch.py", "-k", "ledger"],
}


def _sync_rows(folder: Path) -> list[Row]:
    rows: list[Row] = []
    existing = folder / "open.jsonl"
    existing.write_text("")

    def plain_open() -> None:
        fd = os.open(existing, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        os.fstat(fd)
        os.close(fd)

    def safe_open() -> None:
        opened = open_private_file(existing)
        os.close(opened.fd)
        os.close(opened.directory_fd)

    inner, repeat = (2_000, 5) if QUICK else (5_000, 9)
    samples: dict[str, list[float]] = {"plain": [], "safe": []}
    for _ in range(repeat):
        samples["plain"] += time_sync(plain_open, inner=inner, repeat=1)
        samples["safe"] += time_sync(safe_open, inner=inner, repeat=1)
    base = row(BENCH, "open: os.open (before)", samples["plain"])
    safe = row(BENCH, "open: open_private_file (after)", samples["safe"], baseline=base)
    safe.note = f"{_added(safe, base)} once per sink (and per rotation)"
    rows += [base, safe]
    before = _redactor_before()
    now = default_redactor()
    for label, args in (("a shell call's arguments", _SMALL_ARGS), ("a 30-key call", _BIG_ARGS)):
        if before is None:
            continue
        old: list[float] = []
        new: list[float] = []
        for _ in range(repeat):
            old += time_sync(lambda a=args: before(a), inner=inner, repeat=1)  # type: ignore[misc]
            new += time_sync(lambda a=args: now(a), inner=inner, repeat=1)  # type: ignore[misc]
        base = row(BENCH, f"redact {label} (before)", old)
        after = row(BENCH, f"redact {label} (after)", new, baseline=base)
        after.note = _added(after, base)
        rows += [base, after]
    return rows


def _added(sink: Row, base: Row) -> str:
    return f"+{sink.median_us - base.median_us:.1f} µs/call"


async def main() -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="prism-bench-ledger-") as scratch:
        folder = Path(scratch)
        fast = await _interleaved(
            {
                "in-memory ledger": None,
                _READ: None,
                _BEFORE: _PlainJsonlSink(folder / "before.jsonl"),
                "JSONL sink, fsync never": JsonlLedgerSink(folder / "a.jsonl"),
                _BEFORE_MAX: _PlainJsonlSink(folder / "before-b.jsonl", max_bytes=64 << 20),
                "JSONL sink, fsync never, max_bytes": JsonlLedgerSink(
                    folder / "b.jsonl", max_bytes=64 * 1024 * 1024
                ),
                "SQLite sink, synchronous=OFF": SqliteLedgerSink(folder / "off.db", fsync="never"),
                "SQLite sink, synchronous=NORMAL": SqliteLedgerSink(folder / "normal.db"),
            },
            inner=INNER,
            repeat=REPEAT,
        )
        slow = await _interleaved(
            {
                "in-memory ledger": None,
                "JSONL sink, fsync always": JsonlLedgerSink(folder / "c.jsonl", fsync="always"),
                "SQLite sink, synchronous=FULL": SqliteLedgerSink(
                    folder / "full.db", fsync="always"
                ),
            },
            inner=SLOW_INNER,
            repeat=SLOW_REPEAT,
            cpu=False,
        )
        sync_rows = _sync_rows(folder)
    base = row(BENCH, "in-memory ledger", fast.pop("in-memory ledger"))
    read = row(BENCH, _READ, fast.pop(_READ), baseline=base)
    read.note = _added(read, base)
    rows = [base, read]
    befores: dict[str, Row] = {}
    for name, samples in fast.items():
        measured = row(BENCH, name, samples, baseline=base)
        measured.note = _added(measured, base)
        if name in (_BEFORE, _BEFORE_MAX):
            befores[name] = measured
        elif name == "JSONL sink, fsync never, max_bytes":
            measured.note += f", {_added(measured, befores[_BEFORE_MAX])} over before"
        if name == "JSONL sink, fsync never":
            measured.target = f"<= +{TARGET_US:.0f} µs/call over records read"
            added = measured.median_us - read.median_us
            verdict = "meets target" if added <= TARGET_US else "MISSES target"
            measured.note = (
                f"{measured.note} (+{added:.1f} over records read), {verdict}, "
                f"{_added(measured, befores[_BEFORE])} over before"
            )
        rows.append(measured)
    slow_base = row(BENCH, "in-memory ledger (fsync rounds)", slow.pop("in-memory ledger"))
    for name, samples in slow.items():
        measured = row(BENCH, name, samples, baseline=slow_base)
        measured.note = f"{_added(measured, slow_base)}: a disk flush per call"
        rows.append(measured)
    return rows + sync_rows


if __name__ == "__main__":
    t0 = time.perf_counter()
    run(main)
    if "--json" not in sys.argv[1:]:
        sys.stdout.write(f"(took {time.perf_counter() - t0:.1f} s)\n")
