"""The redaction corpus through the CLI: ``prism ledger show`` and ``query`` print no secret."""

import importlib.util
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from prism.core import (
    DispatchOptions,
    JsonObject,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.core.ledger import JsonlLedgerSink, RunLedger

CliRunner = Callable[..., subprocess.CompletedProcess[str]]

# The corpus lives beside prism-core's tests (one list of placements for every package).
_SPEC = importlib.util.spec_from_file_location(
    "redaction_corpus",
    Path(__file__).resolve().parents[2] / "prism-core" / "tests" / "redaction_corpus.py",
)
assert _SPEC is not None
assert _SPEC.loader is not None
corpus = importlib.util.module_from_spec(_SPEC)
sys.modules["redaction_corpus"] = corpus
_SPEC.loader.exec_module(corpus)


async def _write_corpus(path: Path) -> None:
    ledger = RunLedger(sinks=[JsonlLedgerSink(path)])
    with ledger.run(label="corpus"):
        for index, placement in enumerate(corpus.placements()):

            async def execute(
                args: JsonObject, ctx: ToolExecutionContext, placement: object = placement
            ) -> ToolResult:
                if placement.error is not None:  # type: ignore[attr-defined]
                    raise RuntimeError(placement.error)  # type: ignore[attr-defined]
                return ToolResult.text(placement.result)  # type: ignore[attr-defined]

            registry = create_tool_registry([ToolDefinition(name="t", execute=execute)])
            call = ToolCall(id=f"c{index}", name="t", arguments=placement.arguments)
            await dispatch_tool_call(call, DispatchOptions(registry=registry, ledger=ledger))


async def test_no_secret_of_the_corpus_is_printed_by_the_ledger_commands(
    run_cli: CliRunner, tmp_path: Path
) -> None:
    path = tmp_path / "ledger.jsonl"
    await _write_corpus(path)
    outputs = []
    for args in (
        ("ledger", "show", str(path)),
        ("ledger", "show", str(path), "--json"),
        ("ledger", "query", str(path)),
    ):
        proc = run_cli(*args)
        assert proc.returncode == 0, proc.stderr
        outputs.append(proc.stdout + proc.stderr)
    said = "\n".join(outputs)
    leaks = [
        f"{p.name}: {needle!r}"
        for p in corpus.placements()
        for needle in p.needles
        if needle in said
    ]
    assert leaks == []
    assert "[REDACTED]" in said
