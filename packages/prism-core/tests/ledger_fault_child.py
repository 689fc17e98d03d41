"""A child process for the ledger fault tests: a parallel run writing a JSONL ledger.

Usage: ``python ledger_fault_child.py LEDGER CALLS CONCURRENCY [FSIZE_LIMIT]``

Prints ``rec <call_id>`` (flushed) after each record reached the file sink,
``failed <n> <call_id> <error>`` for each sink failure it was told about, and ``done`` at the end.
With FSIZE_LIMIT, ``RLIMIT_FSIZE`` is set first (the disk "fills up").
"""

from __future__ import annotations

import sys

import trio

from prism.core import (
    DispatchOptions,
    JsonObject,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    create_tool_registry,
    dispatch_tool_calls_in_order,
)
from prism.core.ledger import (
    JsonlLedgerSink,
    LedgerEntry,
    LedgerWriteFailed,
    RunLedger,
    ToolCallRecord,
)


class _Report:
    """A sink after the file sink: says which records the file sink was given."""

    def write(self, entry: LedgerEntry) -> None:
        if isinstance(entry, ToolCallRecord):
            sys.stdout.write(f"rec {entry.call_id}\n")
            sys.stdout.flush()

    def close(self) -> None:
        pass


async def _work(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
    await trio.sleep(0.001)  # a little I/O-like work, so calls overlap
    return ToolResult.text("x" * 300)


async def main(path: str, calls: int, concurrency: int) -> None:
    failures = 0

    def on_error(failure: LedgerWriteFailed) -> None:
        nonlocal failures
        failures += 1
        sys.stdout.write(f"failed {failures} {failure.call_id} {failure.error}\n")
        sys.stdout.flush()

    ledger = RunLedger(sinks=(JsonlLedgerSink(path), _Report()), on_error=on_error)
    options = DispatchOptions(
        registry=create_tool_registry([ToolDefinition(name="work", execute=_work)]),
        ledger=ledger,
    )
    batch = [
        ToolCall(id=f"c{i}", name="work", arguments={"i": i, "pad": "p" * 200})
        for i in range(calls)
    ]
    with ledger.run(label="fault child"):
        await dispatch_tool_calls_in_order(batch, options, concurrency=concurrency)
    sys.stdout.write("done\n")
    sys.stdout.flush()


if __name__ == "__main__":
    if len(sys.argv) > 4:
        import resource

        limit = int(sys.argv[4])
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    trio.run(main, sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
