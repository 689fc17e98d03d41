"""What the hardened JSON Schema adapter costs next to raw fastjsonschema.

Rows (medians over repetitions, measured in one run):

- ``raw fastjsonschema, valid`` / ``invalid``: a function from ``fastjsonschema.compile``
  on a realistic 8-property tool schema (the baselines).
- ``raw jsonschema-rs, valid``: ``jsonschema_rs.validator_for(...).validate`` on the same schema.
- ``adapter hot path, valid`` / ``invalid``: the ``ToolValidator`` from
  ``create_json_schema_tool_argument_validator`` on a tool it has seen before
  (identity fast path, instance bounds, budgets, error text). The schema has no
  ``$schema``, so it is 2020-12 (MCP's default) and runs on jsonschema-rs.
  Target: <= 1.3x raw fastjsonschema.
- ``..., draft-07``: the same schema declared draft-07, which runs on fastjsonschema
  with every pattern on RE2.
- ``..., no regex``: the same pair on the schema without ``pattern``/``format``,
  to separate the RE2 call cost from the rest of the adapter's work.
- ``..., open``: the schema with two strings left unbounded (no ``maxLength``), so it
  is not "closed" and each call first walks the arguments to enforce the limits.
- ``adapter .validate(schema, value)``: the protocol method, which screens and
  serialises the schema on every call to find it in the cache.
- ``compile, raw`` / ``compile + screen, adapter``: a cache miss.
- ``cache hit by canonical JSON``: screening + serialising + LRU lookup, no compile.
- ``ReDoS``: ``^(a+)+$`` on ``"a" * 20 + "!"`` with raw fastjsonschema (Python ``re``)
  vs the adapter on ``"a" * 100_000 + "!"`` (RE2 for draft-07, Rust ``regex`` for 2020-12).
- ``$ref fan-out``: each of 14 levels references the next twice; raw fastjsonschema
  validates 2**15 sub-schemas per call, the adapter refuses the schema at
  admission (22 levels, issue 13's 1.8 KB schema, would take raw fastjsonschema
  about 1.6 s per call).

Run: ``uv run python benchmarks/bench_validation.py [--json] [--quick]``.
"""

from __future__ import annotations

import copy
import sys
from typing import Any

import fastjsonschema
import jsonschema_rs
from _harness import Row, row, run, time_sync

from prism.core import ToolCall, ToolDefinition, ToolExecutionContext, ToolResult
from prism.validation.jsonschema import (
    JsonSchemaArgumentValidator,
    create_json_schema_tool_argument_validator,
)

BENCH = "validation"
QUICK = "--quick" in sys.argv[1:]
INNER = 2_000 if QUICK else 10_000
REPEAT = 7 if QUICK else 15

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "maxLength": 500},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100},
        "offset": {"type": "integer", "minimum": 0},
        "sort": {"type": "string", "enum": ["relevance", "date", "title"]},
        "include_archived": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 32}, "maxItems": 10},
        "language": {"type": "string", "maxLength": 5, "pattern": "^[a-z]{2}(-[A-Z]{2})?$"},
        "since": {"type": "string", "maxLength": 10, "format": "date"},
    },
    "required": ["query"],
    "additionalProperties": False,
}
VALID: dict[str, Any] = {
    "query": "structured concurrency in trio",
    "limit": 20,
    "offset": 40,
    "sort": "date",
    "include_archived": False,
    "tags": ["python", "async", "trio"],
    "language": "en-GB",
    "since": "2024-01-31",
}
# Fails at the pattern (format is an annotation in 2020-12 unless asserted).
INVALID: dict[str, Any] = {**VALID, "language": "EN-gb"}
DRAFT7 = "http://json-schema.org/draft-07/schema#"

# The same tool without "pattern"/"format": what the adapter adds besides RE2.
PLAIN_SCHEMA: dict[str, Any] = copy.deepcopy(SCHEMA)
del PLAIN_SCHEMA["properties"]["language"]["pattern"]
del PLAIN_SCHEMA["properties"]["since"]["format"]

# The same tool with unbounded strings: not "closed", so every call walks the
# arguments to enforce the instance limits before the schema code runs.
OPEN_SCHEMA: dict[str, Any] = copy.deepcopy(SCHEMA)
del OPEN_SCHEMA["properties"]["language"]["maxLength"]
del OPEN_SCHEMA["properties"]["since"]["maxLength"]


async def _noop(_args: Any, _ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text("ok")


def _raw_call(function: Any, value: Any) -> None:
    # A bare try/except: contextlib.suppress would slow the baseline down.
    try:  # noqa: SIM105
        function(value)
    except (fastjsonschema.JsonSchemaException, jsonschema_rs.ValidationError):
        pass


def _fan_out(levels: int) -> dict[str, Any]:
    table: dict[str, Any] = {
        f"l{i}": {
            "allOf": [{"$ref": f"#/definitions/l{i + 1}"}],
            "anyOf": [{"$ref": f"#/definitions/l{i + 1}"}],
        }
        for i in range(levels)
    }
    table[f"l{levels}"] = {"type": "string"}
    return {"$schema": DRAFT7, "definitions": table, "allOf": [{"$ref": "#/definitions/l0"}]}


async def main() -> list[Row]:
    rows: list[Row] = []
    raw = fastjsonschema.compile(copy.deepcopy(SCHEMA))
    check = create_json_schema_tool_argument_validator()
    tool = ToolDefinition(name="search", execute=_noop, parameters=SCHEMA)
    ctx = ToolExecutionContext(ToolCall(id="1", name="search", arguments=VALID))
    assert check(tool, VALID, ctx) is None
    assert check(tool, INVALID, ctx) is not None
    validator = check.validator

    raw_valid = row(
        BENCH,
        "raw fastjsonschema, valid",
        time_sync(lambda: raw(VALID), inner=INNER, repeat=REPEAT),
    )
    rows.append(raw_valid)
    raw_rs = jsonschema_rs.validator_for(SCHEMA)
    rows.append(
        row(
            BENCH,
            "raw jsonschema-rs, valid",
            time_sync(lambda: raw_rs.validate(VALID), inner=INNER, repeat=REPEAT),
            baseline=raw_valid,
        )
    )
    rows.append(
        row(
            BENCH,
            "adapter hot path, valid",
            time_sync(lambda: check(tool, VALID, ctx), inner=INNER, repeat=REPEAT),
            baseline=raw_valid,
            target="<= 1.3x",
            note="2020-12: jsonschema-rs",
        )
    )
    tool7 = ToolDefinition(name="search7", execute=_noop, parameters={"$schema": DRAFT7, **SCHEMA})
    assert check(tool7, VALID, ctx) is None
    assert check(tool7, INVALID, ctx) is not None
    rows.append(
        row(
            BENCH,
            "adapter hot path, valid, draft-07",
            time_sync(lambda: check(tool7, VALID, ctx), inner=INNER, repeat=REPEAT),
            baseline=raw_valid,
            note="fastjsonschema + RE2",
        )
    )
    raw_plain = fastjsonschema.compile(copy.deepcopy(PLAIN_SCHEMA))
    plain_tool = ToolDefinition(name="plain", execute=_noop, parameters=PLAIN_SCHEMA)
    assert check(plain_tool, VALID, ctx) is None
    raw_plain_row = row(
        BENCH,
        "raw fastjsonschema, valid, no regex",
        time_sync(lambda: raw_plain(VALID), inner=INNER, repeat=REPEAT),
    )
    rows.append(raw_plain_row)
    rows.append(
        row(
            BENCH,
            "adapter hot path, valid, no regex",
            time_sync(lambda: check(plain_tool, VALID, ctx), inner=INNER, repeat=REPEAT),
            baseline=raw_plain_row,
            target="<= 1.3x",
            note="no pattern/format in the schema",
        )
    )
    raw_open = fastjsonschema.compile(copy.deepcopy(OPEN_SCHEMA))
    open_tool = ToolDefinition(name="open", execute=_noop, parameters=OPEN_SCHEMA)
    assert check(open_tool, VALID, ctx) is None
    raw_open_row = row(
        BENCH,
        "raw fastjsonschema, valid, open",
        time_sync(lambda: raw_open(VALID), inner=INNER, repeat=REPEAT),
    )
    rows.append(raw_open_row)
    rows.append(
        row(
            BENCH,
            "adapter hot path, valid, open",
            time_sync(lambda: check(open_tool, VALID, ctx), inner=INNER, repeat=REPEAT),
            baseline=raw_open_row,
            target="<= 1.3x",
            note="not closed: instance walk + budget",
        )
    )
    raw_invalid = row(
        BENCH,
        "raw fastjsonschema, invalid",
        time_sync(lambda: _raw_call(raw, INVALID), inner=INNER, repeat=REPEAT),
    )
    rows.append(raw_invalid)
    rows.append(
        row(
            BENCH,
            "adapter hot path, invalid",
            time_sync(lambda: check(tool, INVALID, ctx), inner=INNER, repeat=REPEAT),
            baseline=raw_invalid,
            target="<= 1.3x",
            note="includes the error text",
        )
    )
    rows.append(
        row(
            BENCH,
            "adapter hot path, invalid, draft-07",
            time_sync(lambda: check(tool7, INVALID, ctx), inner=INNER, repeat=REPEAT),
            baseline=raw_invalid,
            note="includes the error text",
        )
    )
    rows.append(
        row(
            BENCH,
            "adapter .validate(schema, value)",
            time_sync(lambda: validator.validate(SCHEMA, VALID), inner=INNER // 4, repeat=REPEAT),
            baseline=raw_valid,
            note="screens + serialises the schema per call",
        )
    )

    compile_inner = 20 if QUICK else 50
    raw_compile = row(
        BENCH,
        "compile, raw",
        time_sync(
            lambda: fastjsonschema.compile(copy.deepcopy(SCHEMA)),
            inner=compile_inner,
            repeat=REPEAT,
        ),
    )
    rows.append(raw_compile)

    def adapter_compile() -> None:
        fresh = JsonSchemaArgumentValidator()
        fresh.check_schema(SCHEMA)

    rows.append(
        row(
            BENCH,
            "compile + screen, adapter",
            time_sync(adapter_compile, inner=compile_inner, repeat=REPEAT),
            baseline=raw_compile,
        )
    )

    def adapter_compile7() -> None:
        fresh = JsonSchemaArgumentValidator()
        fresh.check_schema({"$schema": DRAFT7, **SCHEMA})

    rows.append(
        row(
            BENCH,
            "compile + screen, adapter, draft-07",
            time_sync(adapter_compile7, inner=compile_inner, repeat=REPEAT),
            baseline=raw_compile,
        )
    )
    rows.append(
        row(
            BENCH,
            "cache hit by canonical JSON",
            time_sync(lambda: validator.check_schema(SCHEMA), inner=INNER // 4, repeat=REPEAT),
            baseline=raw_compile,
            note="no compile",
        )
    )

    evil = {"type": "string", "pattern": "^(a+)+$"}
    raw_evil = fastjsonschema.compile(copy.deepcopy(evil))
    raw_redos = row(
        BENCH,
        "ReDoS, raw fastjsonschema (n=20)",
        time_sync(lambda: _raw_call(raw_evil, "a" * 20 + "!"), inner=1, repeat=3 if QUICK else 5),
    )
    rows.append(raw_redos)
    long_input = "a" * 100_000 + "!"
    evil7 = {"$schema": DRAFT7, **evil}
    assert not validator.validate(evil7, long_input).ok
    rows.append(
        row(
            BENCH,
            "ReDoS, adapter, draft-07 (n=100,000)",
            time_sync(lambda: validator.validate(evil7, long_input), inner=20, repeat=REPEAT),
            baseline=raw_redos,
            note="RE2, linear",
        )
    )
    assert not validator.validate(evil, long_input).ok
    rows.append(
        row(
            BENCH,
            "ReDoS, adapter, 2020-12 (n=100,000)",
            time_sync(lambda: validator.validate(evil, long_input), inner=20, repeat=REPEAT),
            baseline=raw_redos,
            note="Rust regex, linear; the error quotes the string",
        )
    )

    raw_fan = fastjsonschema.compile(copy.deepcopy(_fan_out(14)))
    raw_fan_row = row(
        BENCH,
        "$ref fan-out, raw fastjsonschema (14 levels)",
        time_sync(lambda: raw_fan("x"), inner=3, repeat=3 if QUICK else 5),
    )
    rows.append(raw_fan_row)
    hostile = _fan_out(22)
    assert not validator.validate(hostile, "x").ok
    rows.append(
        row(
            BENCH,
            "$ref fan-out, adapter (22 levels)",
            time_sync(lambda: validator.validate(hostile, "x"), inner=200, repeat=REPEAT),
            baseline=raw_fan_row,
            note="refused at admission (cached refusal)",
        )
    )

    def fresh_refusal() -> None:
        JsonSchemaArgumentValidator().validate(hostile, "x")

    rows.append(
        row(
            BENCH,
            "$ref fan-out, adapter admission",
            time_sync(fresh_refusal, inner=20, repeat=REPEAT),
            baseline=raw_fan_row,
            note="screen + expanded-graph measure",
        )
    )
    return rows


if __name__ == "__main__":
    run(main)
