"""The redaction corpus: 0 of its secrets in any sink, attribute or record the ledger writes."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra's SDK is not installed")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from prism.core import (
    DispatchOptions,
    ToolCall,
    ToolDefinition,
    ToolResult,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.core.ledger import (
    JsonlLedgerSink,
    LedgerWriteFailed,
    OtelLedgerSink,
    RunLedger,
    SqliteLedgerSink,
    read_ledger,
)

sys.path.insert(0, str(Path(__file__).parent))
import redaction_corpus
from redaction_corpus import Placement, placements

if TYPE_CHECKING:
    from prism.core import JsonObject, ToolExecutionContext

CORPUS = placements()


def test_the_corpus_has_at_least_200_placements_and_distinct_needles() -> None:
    assert len(CORPUS) >= 200
    assert len({p.name for p in CORPUS}) == len(CORPUS)


def _tool(placement: Placement) -> ToolDefinition:
    async def execute(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        if placement.error is not None:
            raise RuntimeError(placement.error)
        return ToolResult.text(placement.result)

    return ToolDefinition(name="t", execute=execute)


def _leaks(text: str) -> list[str]:
    return [
        f"{placement.name}: {needle!r}"
        for placement in CORPUS
        for needle in placement.needles
        if needle in text
    ]


async def test_no_secret_of_the_corpus_reaches_any_sink(tmp_path: Path) -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    failures: list[LedgerWriteFailed] = []
    jsonl = tmp_path / "ledger.jsonl"
    db = tmp_path / "ledger.db"
    ledger = RunLedger(
        sinks=[
            JsonlLedgerSink(jsonl),
            SqliteLedgerSink(db, fsync="never"),
            OtelLedgerSink(tracer_provider=provider, record_arguments=True),
        ],
        on_error=failures.append,
    )
    with ledger.run(label="corpus"):
        for index, placement in enumerate(CORPUS):
            options = DispatchOptions(
                registry=create_tool_registry([_tool(placement)]), ledger=ledger
            )
            call = ToolCall(id=f"c{index}", name="t", arguments=placement.arguments)
            await dispatch_tool_call(call, options)
    assert not failures
    assert len(ledger.records) == len(CORPUS)
    where = {
        "JSONL": jsonl.read_text(encoding="utf-8"),
        "SQLite": b"".join(
            (tmp_path / name).read_bytes()
            for name in os.listdir(tmp_path)
            if name.startswith("ledger.db")
        ).decode("utf-8", "replace"),
        "ledger.records": repr(ledger.records) + ledger.to_jsonl(),
        "read back": repr(read_ledger(jsonl).records) + repr(read_ledger(db).records),
        "OTel attributes": json.dumps(
            [
                {"name": span.name, "attributes": dict(span.attributes or {})}
                for span in spans.get_finished_spans()
            ]
        ),
    }
    found = {name: _leaks(text) for name, text in where.items()}
    assert found == {name: [] for name in where}
    # The records kept what is not secret, so redaction did not just blank them.
    texts = where["JSONL"]
    assert '"X-Api-Key"' in texts
    assert "redis://[REDACTED]@cache:6379/0" in texts
    assert "request refused for key [REDACTED]" in texts


@pytest.mark.parametrize("placement", CORPUS, ids=[p.name for p in CORPUS])
def test_each_placement_is_redacted_in_its_record(placement: Placement) -> None:
    from prism.core.ledger import default_redactor

    stored = json.dumps(default_redactor()(placement.arguments))  # type: ignore[arg-type]
    stored += str(default_redactor()(placement.error or ""))
    stored += str(default_redactor()(placement.result))
    assert [n for n in placement.needles if n in stored] == []


@pytest.mark.parametrize("value", redaction_corpus.ordinary_texts())
def test_ordinary_arguments_are_kept_whole(value: object) -> None:
    from prism.core.ledger import default_redactor

    assert default_redactor()(value) == value  # type: ignore[arg-type]
