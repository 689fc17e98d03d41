"""What the hardened JSON Schema adapter costs next to raw fastjsonschema.

Rows (medians over repetitions, measured in one run):

- ``raw fastjsonschema, valid`` / ``invalid``: a function from ``fastjsonschema.compile``
  on a realistic 8-property tool schema (the baselines).
- ``raw jsonschema-rs, valid``: ``jsonschema_rs.validator_for(...).validate`` on the same schema.
- ``adapter hot path, valid`` / ``invalid``: the ``ToolValidator`` from
  ``create_json_schema_tool_validator`` on a tool it has seen before
  (identity fast path, instance bounds, budgets, error text). The schema has no
  ``$schema``, so it is 2020-12 (MCP's default) and runs on jsonschema-rs.
  These rows and their baselines are timed interleaved (each repetition times
  every one in turn), so a change in the machine's load meets a row and its
  baseline alike.
- ``..., draft-07``: the same schema declared draft-07, which runs on jsonschema-rs
  too (with ``format`` asserted, as draft-07 says); same target.
- ``..., no regex``: the same pair on the schema without ``pattern``/``format``,
  to separate the regex and format cost from the rest of the adapter's work.
- ``..., open``: the schema with two strings left unbounded (no ``maxLength``, one
  with a ``pattern``): still "closed", but its worst case does not fit the regex
  budget, so a dict-built call's checker also counts its characters.
- ``adapter .validate(schema, value)``: the protocol method, which screens and
  serialises the schema on every call to find it in the cache.
- ``compile, raw`` / ``compile + screen, adapter``: a cache miss.
- ``cache hit by canonical JSON``: screening + serialising + LRU lookup, no compile.
- ``ReDoS``: ``^(a+)+$`` on ``"a" * 20 + "!"`` with raw fastjsonschema (Python ``re``)
  vs the adapter on ``"a" * 100_000 + "!"`` (Rust ``regex`` on both dialects).
- ``$ref fan-out``: each of 14 levels references the next twice; raw fastjsonschema
  validates 2**15 sub-schemas per call, the adapter refuses the schema at
  admission (22 levels, a 1.8 KB schema, would take raw fastjsonschema
  about 1.6 s per call).
- ``stall: ...``: how long one validation holds the event loop, as the most CPU
  time of the event loop's thread between two ticks of a 10 ms ticker
  (``time.thread_time``, which other processes cannot inflate; samples are the
  worst gap of each run). The hostile schema classes run in both dialects
  (draft-07 and 2020-12); a schema about as large as the default
  ``max_schema_bytes`` admits is compiled on a cache miss. These were assertions
  in the test suite; timing lives here.
- ``stall: format: regex, ...``: the costliest calls ``format: regex`` admits at
  the default limits (each string is parsed as ECMA-262 by jsonschema-rs): as
  many (530) ``\\p{L}{0,200}N`` strings as ``max_regex_work`` lets through (RE2 spent
  100-150 ms compiling each before), strings of 256 named groups (the parser's
  quadratic case), unclosed groups, and 30,000 empty strings (``max_validation_work``).
- ``stall: admit ...``: the costliest schemas to admit for their patterns, on a
  cache miss with patterns never seen before (pricing compiles each in RE2
  within the per-schema budget; 20 ``\\p{L}{0,200}`` patternProperties stalled the
  loop 1.84 s before). The row is the worst of the shapes; the note names it.

- ``admit: ...``: screening, measuring and compiling one schema on a cache miss
  (event-loop stall, as above): the hostile shapes of the bounded-admission
  review (80,000 ``prefixItems`` or ``allOf`` entries, 4,800 unused ``$defs``
  beside a 64-level ``$ref`` chain, 17 nested ``unevaluatedProperties``), refused,
  and the largest shapes the default limits admit (9,990 ``prefixItems``,
  ``allOf`` or ``anyOf`` entries, 3,300 typed properties, 3,200 ``$defs`` beside
  the chain, 128 ``$ref`` among 9,000 ``allOf`` entries, a closed schema of
  3,300 properties all required, 2,000 ``items`` properties or 3,000 ``items``
  ``allOf`` entries beside a 58-level ``items`` chain). Target: 50 ms. Each
  sample starts after a full collection (it pays for the collections its own
  objects cause, not for the garbage of the rows before it: this module's
  fixtures make one full collection cost 30-50 ms). Each row is followed by ``..., engine compile
  alone``: ``jsonschema_rs.validator_for`` on the same schema, the samples taken
  in turn with the row's (for an admitted shape, the floor).

  The admission's own work was cut (one screen walk keeping its path as a
  list, scalars and empty containers in their container's loop; one shared
  node per leaf or plain sub-schema in the graph measure, so fewer objects and
  fewer collections; leaves recorded without being stacked; in-place order
  by iterators; group sums in C loops; from the second level below the root,
  only the nodes that can cost something there visited, and a large group read
  through the previous level's few non-zero nodes). Before and after in one
  run, the package's previous code and this one in alternate processes (3
  rounds of 3 samples; medians of the rounds' medians and their range; load
  average 12-17), in ms:

  ===========================================  ================  ================  ================
  row                                          before            after             engine alone
  ===========================================  ================  ================  ================
  80,000 prefixItems (refused)                 5.3 (5.3-5.4)     2.3 (2.2-2.4)     63.7 (54.5-68.3)
  80,000 allOf (refused)                       5.3 (5.2-6.0)     3.3 (3.1-3.3)     58.5 (56.1-79.2)
  4,800 $defs + 64-level $ref chain (refused)  3.0 (2.8-3.4)     2.5 (1.9-2.9)     5.9 (4.5-8.8)
  17 nested unevaluatedProperties (refused)    1.0 (1.0-1.1)     1.2 (1.2-1.4)     0.9 (0.8-1.0)
  9,990 prefixItems                            27.9 (27.6-29.0)  22.5 (18.3-27.6)  7.3 (6.9-9.1)
  9,990 allOf                                  29.9 (29.3-34.3)  18.6 (18.2-26.3)  7.1 (6.9-8.9)
  3,300 typed properties                       25.6 (20.5-32.9)  17.3 (16.1-21.8)  8.3 (6.3-10.9)
  3,200 $defs + 64-level $ref chain            18.7 (18.6-22.1)  12.6 (11.4-22.3)  3.9 (2.9-5.4)
  9,990 anyOf                                  36.8 (28.3-46.8)  22.1 (20.0-28.9)  8.4 (7.3-10.3)
  2,000 items props + 58-level items chain     336 (264-350)     35.7 (34.1-53.6)  6.7 (5.6-9.1)
  3,000 allOf items + 58-level items chain     390 (365-400)     49.8 (47.0-66.5)  5.9 (5.8-6.7)
  128 $refs + 9,000 allOf                      43.0 (39.1-46.0)  27.1 (20.4-31.7)  7.4 (6.4-8.0)
  closed: 3,300 typed, all required            32.3 (32.0-36.2)  32.0 (25.3-32.9)  19.1 (16.5-25.1)
  ===========================================  ================  ================  ================

  The two shapes with a 58-level chain beside 2,000-3,000 small sub-schemas
  (not among the rows before; the chain kept every level of the measure
  busy) are the slowest admitted now, at the target: most of what is left is
  the walk over that many sub-schemas that are not plain assertions.

  Without the collection before each sample (as the rows ran before), the
  same kind of run (3 rounds, load 12-15) gave medians of 24-75 ms before and
  18-49 ms after on the admitted shapes, full collections landing on some.
- ``stall: closed path, ...``: arguments far past the limits on a closed schema
  (checked before the engine reads them: a 3,000,000-digit integer, 2,000,000
  items, a 10,000,000-character non-ASCII key, one ending in a lone surrogate,
  which the engine would encode whole before refusing it, 100,000 keys);
  ``stall: anyOf refusal ...``: a refusal whose engine explanation would list
  every failing item of every branch.
- The hot-path rows compare with raw jsonschema-rs (``validate``) on the same
  schema and value, interleaved: at most 2x valid, 2.5x invalid; ``README`` is the
  README's ``add`` tool, ``peers`` bench_peers' weather tool. Each validates a
  call as the providers build it, from the model's JSON text
  (``ToolCall.from_json``), called as dispatch calls the validator (its bound
  ``__call__``); rows ending ``dict-built call`` validate the same value in a
  ``ToolCall`` built from a dict written as a literal (the walk or the
  closed-path checker), rows ending ``keys from json.loads`` the same dict
  parsed from its JSON text, as LangChain builds its calls' arguments (its
  keys are new strings, not the declared names' own objects, so each lookup
  compares two strings), and ``called as an object`` calls the validator
  object itself. The hot rows are
  timed in this thread's CPU time, so other processes on a shared machine do
  not count.
- Rows per path a call arrives by (README tool, valid, beside the same raw
  jsonschema-rs row): ``from text`` (the providers' ``ToolCall.from_json``),
  ``from a whole message`` (the gateway over HTTP and Anthropic's whole answers:
  ``ParsedJson.parse`` of the request or answer body, then
  ``ToolCall.from_parsed`` of its arguments), ``Agents SDK tool`` (the text the
  SDK hands a tool, through ``ParsedJson``) and ``dict-built call`` (pydantic-ai,
  LangChain, user code: the compiled schema's ``quick_valid`` check).
- ``..., no additionalProperties, dict-built call``: bench_peers' tool without
  ``"additionalProperties": false`` (as many generated schemas are): the closed
  checker decides calls whose keys are all declared names.

  Dict-built calls took several rounds of work to reach 2x (docs, "Calls
  built from a dict", has the history). The last: a written checker's data
  (names, bounds, sets) are constants of its own copy of the compiled code,
  not closure variables (each copied into every call's frame: about 40 in
  the search schema's checker), an integer bound past one internal digit
  is tested after the one-digit bounds within it, and a counting checker
  counts only its long strings (and a few tests take a comparison fewer).
  Interpreter steps of one valid call (tool validator and checker): README
  116 -> 111, peers 120 -> 114, search 335 -> 306, no regex 325 -> 296,
  open 397 -> 326. The previous checkers and these in one process, each row
  timed interleaved with raw jsonschema-rs (six runs, load average 17.6 to
  18.5), medians of the six runs' median ratios and their range:

  ====================================  =================  =================
  row                                   before             after
  ====================================  =================  =================
  README, dict-built call               1.61x (1.55-1.65)  1.35x (1.32-1.46)
  README, keys from json.loads          1.49x (1.46-1.62)  1.32x (1.26-1.38)
  peers, dict-built call                1.59x (1.54-1.66)  1.45x (1.39-1.67)
  peers, keys from json.loads           1.65x (1.54-1.80)  1.54x (1.42-1.58)
  peers, no additionalProperties        1.48x (1.43-1.59)  1.37x (1.33-1.50)
  (search schema) dict-built call       1.61x (1.52-1.75)  1.44x (1.43-1.46)
  no regex, dict-built call             1.77x (1.65-2.06)  1.54x (1.43-1.82)
  open, dict-built call                 1.90x (1.83-1.94)  1.53x (1.50-1.68)
  invalid, README, dict-built call      1.87x (1.70-1.91)  1.85x (1.78-1.86)
  invalid, peers, dict-built call       1.73x (1.70-1.79)  1.67x (1.62-1.71)
  ====================================  =================  =================
- ``parts: <tool>, engine is_valid`` / ``parts: <tool>, quick_valid``: a
  dict-built row taken apart, beside the same raw jsonschema-rs row: the
  compiled engine's ``is_valid`` as the checker calls it, then the checker
  with the engine in it (the compiled schema's ``quick_valid``); the
  dict-built row adds the tool validator around the checker.
- ``floor: ...``: the least any Python ``ToolValidator`` in front of the engine
  costs: a function that finds the tool's compiled engine by identity (a dict
  lookup and a weak reference call) and calls ``is_valid``, bounding nothing.
  Not a target.
- ``parse: ...``: what ``ToolCall.from_json`` costs beside
  ``ToolCall(arguments=json.loads(text))`` (its checks of the text, which let
  the validator skip the walk), on the README and peers texts, 5 kB of prose
  and 1,000 integers; ``ParsedJson.parse`` of a ``tools/call`` request body; an
  Anthropic whole answer read through the SDK's models (``construct_type`` of
  its ``Message``, after ``json.loads``) and through ``ParsedJson.parse``.

The load average is printed (to stderr) before and after the hot rows.

Run: ``uv run python benchmarks/bench_validation.py [--json] [--quick] [--hot]``
(``--hot``: the hot-path and parse rows only).
"""

from __future__ import annotations

import contextlib
import copy
import gc
import json
import os
import sys
import time
import weakref
from typing import TYPE_CHECKING, Any

import fastjsonschema
import jsonschema_rs
import trio
from _harness import Row, row, run, time_sync

from prism.core import (
    DispatchOptions,
    ParsedJson,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolRegistry,
    ToolResult,
)
from prism.validation.jsonschema import (
    JsonSchemaArgumentValidator,
    SchemaLimits,
    create_json_schema_tool_validator,
)

if TYPE_CHECKING:
    from collections.abc import Callable

BENCH = "validation"
QUICK = "--quick" in sys.argv[1:]
HOT_ONLY = "--hot" in sys.argv[1:]
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
D2020 = "https://json-schema.org/draft/2020-12/schema"

# The README's tool, and bench_peers' weather tool (closed; its city has no maxLength).
README_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["a", "b"],
    "additionalProperties": False,
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
}
README_VALID: dict[str, Any] = {"a": 2, "b": 3}
README_INVALID: dict[str, Any] = {"a": 2, "b": "3"}
WEATHER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "minimum": 1, "maximum": 14, "default": 1},
    },
    "required": ["city"],
    "additionalProperties": False,
}
WEATHER_VALID: dict[str, Any] = {"city": "Oslo", "days": 3}
# The same tool without "additionalProperties": false, as many generated schemas are.
DECLARED_SCHEMA: dict[str, Any] = {
    key: value for key, value in WEATHER_SCHEMA.items() if key != "additionalProperties"
}
WEATHER_INVALID: dict[str, Any] = {"city": "Oslo", "days": 30}

# The same tool without "pattern"/"format": what the adapter adds besides RE2.
PLAIN_SCHEMA: dict[str, Any] = copy.deepcopy(SCHEMA)
del PLAIN_SCHEMA["properties"]["language"]["pattern"]
del PLAIN_SCHEMA["properties"]["since"]["format"]

# The same tool with unbounded strings: still "closed", but a pattern on one of
# them makes its worst case too costly, so a call's characters are counted.
OPEN_SCHEMA: dict[str, Any] = copy.deepcopy(SCHEMA)
del OPEN_SCHEMA["properties"]["language"]["maxLength"]
del OPEN_SCHEMA["properties"]["since"]["maxLength"]


async def _noop(_args: Any, _ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text("ok")


def _interleaved(calls: dict[str, Callable[[], object]]) -> dict[str, list[float]]:
    """``time_sync`` of several calls at once: each repetition times every call in turn.

    A shared machine's load changes from second to second; timed one after the
    other, a call and its baseline could meet different loads. Interleaved, each
    repetition meets them with about the same load, so same-run ratios hold.
    """
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(REPEAT):
        for name, call in calls.items():
            samples[name].append(_cpu_us(call, INNER))
    return samples


def _cpu_us(call: Callable[[], object], inner: int) -> float:
    """Per-call µs of this thread's CPU time over ``inner`` calls.

    CPU time, not wall time: on a machine shared with other processes, wall
    time also counts the time they ran, which comes and goes within a row.
    """
    start = time.thread_time()
    for _ in range(inner):
        call()
    return (time.thread_time() - start) / inner * 1e6


_PROSE = "Structured concurrency keeps every task inside a nursery that outlives it. "
PARSE_TEXTS: list[tuple[str, str]] = [
    ("README", json.dumps(README_VALID)),
    ("peers", json.dumps(WEATHER_VALID)),
    ("5 kB of prose", json.dumps({"path": "notes.md", "text": _PROSE * 68})),
    ("1,000 integers", json.dumps({"values": list(range(1_000))})),
]


def _tools_call_body(arguments: dict[str, Any]) -> bytes:
    """A ``tools/call`` request body as an MCP client of 2026-07-28 sends it."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "mcp", "version": "0.1.0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    message = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "add", "arguments": arguments, "_meta": meta},
    }
    return json.dumps(message, separators=(",", ":")).encode()


ANTHROPIC_ANSWER = json.dumps(
    {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [
            {"type": "text", "text": "I'll add them."},
            {"type": "tool_use", "id": "toolu_01", "name": "add", "input": README_VALID},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 412,
            "output_tokens": 57,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }
).encode()


def _from_message(body: bytes, *path: str | int) -> tuple[Any, ToolExecutionContext]:
    """The arguments and context of a call built from a member of a whole parsed message."""
    parsed: ParsedJson | None = ParsedJson.parse(body)
    for key in path:
        assert parsed is not None
        parsed = parsed.member(key)
    assert parsed is not None
    call = ToolCall.from_parsed(id="1", name="add", arguments=parsed)
    return call.arguments, ToolExecutionContext(call)


def _anthropic_rows() -> list[Row]:
    """An Anthropic whole answer: the SDK's models of it beside Prism's own parse."""
    from anthropic._models import construct_type
    from anthropic.types import Message

    def sdk() -> object:
        return construct_type(type_=Message, value=json.loads(ANTHROPIC_ANSWER))

    def prism() -> object:
        return ParsedJson.parse(ANTHROPIC_ANSWER)

    inner = max(20, INNER // 10)
    samples: dict[str, list[float]] = {"sdk": [], "prism": []}
    for _ in range(REPEAT):
        samples["sdk"].append(_cpu_us(sdk, inner))
        samples["prism"].append(_cpu_us(prism, inner))
    base = row(BENCH, "parse: Anthropic whole answer, SDK models", samples["sdk"])
    return [
        base,
        row(
            BENCH,
            "parse: Anthropic whole answer, ParsedJson.parse",
            samples["prism"],
            baseline=base,
            note=f"{len(ANTHROPIC_ANSWER)} bytes; what the provider does now",
        ),
    ]


def _parse_rows() -> list[Row]:
    """What parsing a call from JSON text costs with its bound, beside a plain parse.

    ``ToolCall.from_json`` pays, once per call, for the checks that let the
    validator skip its walk: the number hooks and the text's passes.
    """
    rows: list[Row] = []
    for name, text in PARSE_TEXTS:
        inner = max(20, min(INNER, 2_000_000 // len(text)))

        def plain(text: str = text) -> object:
            return ToolCall(id="1", name="t", arguments=json.loads(text))

        def bounded(text: str = text) -> object:
            return ToolCall.from_json(id="1", name="t", arguments=text)

        samples: dict[str, list[float]] = {"plain": [], "bounded": []}
        for _ in range(REPEAT):
            samples["plain"].append(_cpu_us(plain, inner))
            samples["bounded"].append(_cpu_us(bounded, inner))
        base = row(BENCH, f"parse: ToolCall(json.loads(text)), {name}", samples["plain"])
        rows.append(base)
        rows.append(
            row(
                BENCH,
                f"parse: ToolCall.from_json(text), {name}",
                samples["bounded"],
                baseline=base,
                note=f"{len(text)} characters; with the bound",
            )
        )
    body = _tools_call_body(README_VALID)
    samples = {"plain": [], "bounded": []}
    for _ in range(REPEAT):
        samples["plain"].append(_cpu_us(lambda: json.loads(body), INNER))
        samples["bounded"].append(_cpu_us(lambda: ParsedJson.parse(body), INNER))
    base = row(BENCH, "parse: json.loads, tools/call body", samples["plain"])
    rows.append(base)
    rows.append(
        row(
            BENCH,
            "parse: ParsedJson.parse, tools/call body",
            samples["bounded"],
            baseline=base,
            note=f"{len(body)} bytes; the gateway's HTTP guard parses each body once",
        )
    )
    rows.extend(_anthropic_rows())
    return rows


def _rs_call(validator: Any, value: Any) -> None:
    with contextlib.suppress(jsonschema_rs.ValidationError):
        validator.validate(value)


def _raw_call(function: Any, value: Any) -> None:
    # A bare try/except: contextlib.suppress would slow the baseline down.
    try:  # noqa: SIM105
        function(value)
    except (fastjsonschema.JsonSchemaException, jsonschema_rs.ValidationError):
        pass


def _fan_out(levels: int) -> dict[str, Any]:
    # Each level references the next twice (allOf + anyOf): 2**levels evaluations.
    table: dict[str, Any] = {
        f"l{i}": {
            "allOf": [{"$ref": f"#/$defs/l{i + 1}"}],
            "anyOf": [{"$ref": f"#/$defs/l{i + 1}"}],
        }
        for i in range(levels)
    }
    table[f"l{levels}"] = {"type": "string"}
    return {"$defs": table, "allOf": [{"$ref": "#/$defs/l0"}]}


def _aliased_fan_out(levels: int) -> dict[str, Any]:
    # Two spellings of one $id; the engine merges them, so r1's "t" meant r2's
    # fan-out (0.6-1.4 s a call before; refused at admission now).
    chain: dict[str, Any] = {
        f"l{i}": {"allOf": [{"$ref": f"#/$defs/l{i + 1}"}, {"$ref": f"#/$defs/l{i + 1}"}]}
        for i in range(levels)
    }
    chain[f"l{levels}"] = {"type": "integer"}
    chain["t"] = {"$ref": "#/$defs/l0"}
    return {
        "$defs": {
            "r1": {"$id": "http://a/b", "$defs": {"t": {}}, "allOf": [{"$ref": "#/$defs/t"}]},
            "r2": {"$id": "HTTP://A/b", "$defs": chain},
        },
        "type": "object",
        "properties": {"x": {"type": "array", "items": {"$ref": "#/$defs/r1"}}},
    }


def _costly_pattern_schemas(tag: str) -> list[tuple[str, dict[str, Any]]]:
    # ``tag`` makes every pattern new, so no cache helps.
    def props(patterns: list[str]) -> dict[str, Any]:
        return {"type": "object", "patternProperties": {key: {} for key in patterns}}

    return [
        ("20 x \\p{L}{0,200}", props([rf"\p{{L}}{{0,200}}{tag}{i}" for i in range(20)])),
        (
            "2 x [\\p{L}\\p{N}]{0,100}",
            props([rf"[\p{{L}}\p{{N}}]{{0,100}}{tag}{i}" for i in range(2)]),
        ),
        (
            "\\p{L}{1,64} + 40 x \\p{L}+",
            props([rf"\p{{L}}{{1,64}}{tag}"] + [rf"^\p{{L}}+{tag}{i}$" for i in range(40)]),
        ),
        ("100 x ^\\p{L}+$", props([rf"^\p{{L}}+{tag}{i}$" for i in range(100)])),
        ("3,000 small patterns", props([f"^{tag}{i}$" for i in range(3_000)])),
        (
            "60 x 256 named groups",
            {
                "type": "object",
                "properties": {
                    f"p{i}": {
                        "pattern": "".join(f"(?<{chr(0x4E00 + j + 300 * i)}>)" for j in range(256))
                        + tag
                    }
                    for i in range(60)
                },
            },
        ),
    ]


# Issue 13's hostile classes: (name, schema with "$defs", value, whether it passes).
_DEEP = json.loads("[" * 63 + "1" + "]" * 63)
HOSTILE: list[tuple[str, dict[str, Any], object, bool]] = [
    ("$ref fan-out, 22 levels", _fan_out(22), "x", False),
    ("pattern (.*a){20} on 1 MB", {"type": "string", "pattern": "(.*a){20}"}, "a" * 10**6, False),
    (
        "pattern on 8 x 1 MB strings",
        {"type": "array", "items": {"pattern": "(.*a){20}"}},
        ["a" * 10**6] * 8,
        False,
    ),
    ("format: regex on 16 kB", {"type": "string", "format": "regex"}, "(a|b)" * 3_200, False),
    (
        "format: email on 800 kB",
        {"type": "string", "format": "email"},
        "a@" + "b." * 400_000 + "@",
        False,
    ),
    (
        "10k enum x 100k items",
        {"type": "array", "items": {"enum": list(range(10_000))}},
        [1] * 100_000,
        False,
    ),
    (
        "uniqueItems on 10k objects",
        {"type": "array", "uniqueItems": True},
        [{"a": i} for i in range(10_000)],
        False,
    ),
    (
        "recursive $ref, 63 deep",
        {
            "$defs": {"n": {"anyOf": [{"type": "integer"}, {"items": {"$ref": "#/$defs/n"}}]}},
            "$ref": "#/$defs/n",
        },
        _DEEP,
        True,
    ),
    ("pattern ^[a-z]+$ on 1 MB", {"type": "string", "pattern": "^[a-z]+$"}, "a" * 10**6, True),
    ("aliased $id fan-out, 10k items", _aliased_fan_out(12), {"x": [1] * 10_000}, False),
    (
        "enum of 4,990 objects x 3,170 items",
        {"type": "array", "items": {"enum": [{"k": f"v{i}"} for i in range(4990)]}},
        [{"k": "v4989"}] * 3170,
        False,
    ),
    (
        "1e-300 x 2,400 vs enum of 100 integers",
        {"type": "array", "items": {"anyOf": [{"enum": list(range(100))}, {"type": "number"}]}},
        [1e-300] * 2400,
        False,
    ),
    (
        "5e-324 x 99,000 vs maximum 1.5",
        {"type": "array", "items": {"type": "number", "minimum": 0, "maximum": 1.5}},
        [5e-324] * 99_000,
        False,
    ),
    (
        "0.3 x 1,200 vs maximum 1.5 (admitted)",
        {"type": "array", "items": {"type": "number", "minimum": 0, "maximum": 1.5}},
        [0.3, 5e-324] * 600,
        True,
    ),
]

_REGEXES = {"$schema": DRAFT7, "type": "array", "items": {"type": "string", "format": "regex"}}
_NAMES = "".join(f"(?<{chr(0x4E00 + j)}>)" for j in range(256))
# (name, argument): each fits the default max_regex_work and max_validation_work.
REGEX_CALLS: list[tuple[str, list[str]]] = [
    ("530 x \\p{L}{0,200}N", [rf"\p{{L}}{{0,200}}{i}" for i in range(100, 630)]),
    ("5 x 256 named groups", [_NAMES] * 5),
    ("7,999 x (", ["(" * 7_999]),
    ("30,000 empty strings", [""] * 30_000),
]


def _unevaluated(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"properties": {"a": {}}, "unevaluatedProperties": False}
    for _ in range(levels):
        schema = {"allOf": [schema], "unevaluatedProperties": False}
    return schema


def _chain(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {}
    for _ in range(levels):
        schema = {"items": schema}
    return schema


def _defs_and_chain(unused: int) -> dict[str, Any]:
    table: dict[str, Any] = {f"u{i}": {"type": "string"} for i in range(unused)}
    for i in range(64):
        table[f"c{i}"] = {"$ref": f"#/$defs/c{i + 1}"}
    table["c64"] = {"type": "integer"}
    return {"$defs": table, "$ref": "#/$defs/c0"}


# Admission on a cache miss: the hostile shapes of the bounded-admission review
# (each under max_schema_bytes) and the largest shapes the default limits admit.
ADMISSION: list[tuple[str, dict[str, Any]]] = [
    ("80,000 prefixItems", {"prefixItems": [{}] * 80_000}),
    ("80,000 allOf", {"allOf": [{}] * 80_000}),
    ("4,800 $defs + 64-level $ref chain", _defs_and_chain(4_800)),
    ("17 nested unevaluatedProperties", _unevaluated(17)),
    ("9,990 prefixItems", {"prefixItems": [{}] * 9_990}),
    ("9,990 allOf", {"allOf": [{}] * 9_990}),
    (
        "3,300 typed properties",
        {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(3_300)}},
    ),
    ("3,200 $defs + 64-level $ref chain", _defs_and_chain(3_200)),
    ("9,990 anyOf", {"anyOf": [{}] * 9_990}),
    (
        "2,000 items properties + 58-level items chain",
        {"properties": {**{f"p{i}": {"items": {}} for i in range(2_000)}, "deep": _chain(58)}},
    ),
    ("3,000 allOf items + 58-level items chain", {"allOf": [{"items": {}}] * 3_000 + [_chain(58)]}),
    (
        "128 $refs + 9,000 allOf",
        {"$defs": {"a": {}}, "allOf": [{"$ref": "#/$defs/a"}] * 128 + [{}] * 9_000},
    ),
    (
        "closed: 3,300 typed properties, all required",
        {
            "type": "object",
            "properties": {f"p{i}": {"type": "integer"} for i in range(3_300)},
            "required": [f"p{i}" for i in range(3_300)],
            "additionalProperties": False,
        },
    ),
]
CLOSED_TAGS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "n": {"type": "integer"},
        "tags": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 10}},
    },
    "additionalProperties": False,
}
# As JSON text: the longest integer Python's json reads (4,300 digits; past
# that the text is not JSON and the call is refused as a string), and the items.
CLOSED_FLOOD_TEXTS: list[tuple[str, str]] = [
    ("4,300-digit integer", '{"n": ' + "9" * 4_300 + "}"),
    ("2,000,000 items into maxItems 3", json.dumps({"tags": ["x"] * 2_000_000})),
]
CLOSED_FLOODS: list[tuple[str, dict[str, Any]]] = [
    ("3,000,000-digit integer", {"n": 10**3_000_000}),
    ("2,000,000 items into maxItems 3", {"tags": ["x"] * 2_000_000}),
    # The engine would refuse these keys too, but only after reading them.
    ("10,000,000-character non-ASCII key", {"é" * 10_000_000: 1}),
    ("lone surrogate after 10,000,000 characters of key", {"é" * 10_000_000 + "\ud800": 1}),
    ("100,000 undeclared keys", {f"k{i}": 1 for i in range(100_000)}),
]
ANY_OF_ITEMS: dict[str, Any] = {
    "anyOf": [{"items": {"type": "string"}}, {"items": {"type": "string"}}]
}


def _in_dialect(dialect: str, schema: dict[str, Any]) -> dict[str, Any]:
    text = json.dumps(schema)
    if dialect == DRAFT7:
        text = text.replace('"$defs"', '"definitions"').replace("#/$defs/", "#/definitions/")
    return {"$schema": dialect, **json.loads(text)}


async def _stall_us(call: Callable[[], object]) -> float:
    """The most event-loop CPU time (µs) between two ticks of a 10 ms ticker while ``call`` runs."""
    gaps: list[float] = []
    done = trio.Event()

    async def ticker() -> None:
        last = time.thread_time()
        while not done.is_set():
            await trio.sleep(0.01)
            now = time.thread_time()
            gaps.append(now - last)
            last = now

    async def worker() -> None:
        await trio.sleep(0.03)  # let the ticker tick first
        try:
            call()
        finally:
            done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        nursery.start_soon(worker)
    return max(gaps) * 1e6


async def admission_rows(repeat: int) -> list[Row]:
    """``admit:`` rows, each beside the engine's own compile of the same schema (taking turns)."""
    rows: list[Row] = []
    for name, schema in ADMISSION:

        def admit_once() -> None:
            JsonSchemaArgumentValidator().validate(schema, {})  # noqa: B023

        def engine_once() -> None:
            with contextlib.suppress(Exception):  # it may refuse what Prism refuses
                jsonschema_rs.validator_for(schema)  # noqa: B023

        verdict = JsonSchemaArgumentValidator().validate(schema, {})
        refused = not verdict.ok and verdict.errors[0].message.startswith("schema rejected")
        samples: list[float] = []
        engine: list[float] = []
        for _ in range(repeat):
            # Each sample starts from a collected heap, so it pays for the
            # collections its own objects cause, not for garbage the rows
            # before it left (this module's fixtures make a full collection
            # cost 30-50 ms, landing on whichever sample triggers it).
            gc.collect()
            samples.append(await _stall_us(admit_once))
            gc.collect()
            engine.append(await _stall_us(engine_once))
        rows.append(
            row(
                BENCH,
                f"admit: {name}",
                samples,
                target="< 50 ms",
                note="refused" if refused else "admitted",
            )
        )
        rows.append(
            row(
                BENCH,
                f"admit: {name}, engine compile alone",
                engine,
                note="jsonschema_rs.validator_for on the same schema (a floor when admitted)",
            )
        )
    return rows


async def stall_rows() -> list[Row]:
    rows: list[Row] = []
    repeat = 2 if QUICK else 3
    for name, schema, value, ok in HOSTILE:
        samples: list[float] = []
        for dialect in (DRAFT7, D2020):
            full = _in_dialect(dialect, schema)
            validator = JsonSchemaArgumentValidator(assert_formats=True)
            validator.validate(full, None)  # compile outside the measurement
            assert validator.validate(full, value).ok is ok, name
            for _ in range(repeat):
                samples.append(await _stall_us(lambda: validator.validate(full, value)))  # noqa: B023
        rows.append(
            row(BENCH, f"stall: {name}", samples, target="< 100 ms", note="draft-07 and 2020-12")
        )

    def largest_compile() -> None:
        # 254 kB of canonical JSON, just under the default max_schema_bytes (256 KiB).
        schema = {
            "$schema": DRAFT7,
            "type": "object",
            "properties": {
                f"p{i}": {"type": "integer", "minimum": 0, "maximum": 9} for i in range(5_000)
            },
        }
        assert (
            JsonSchemaArgumentValidator(limits=SchemaLimits(max_keywords=100_000))
            .validate(schema, {})
            .ok
        )

    validator = JsonSchemaArgumentValidator()
    validator.validate(_REGEXES, [])
    for name, value in REGEX_CALLS:
        result = validator.validate(_REGEXES, value)
        assert result.ok or "max_" not in result.errors[0].message, (name, result.errors)
        samples = [
            await _stall_us(lambda: validator.validate(_REGEXES, value))  # noqa: B023
            for _ in range(repeat)
        ]
        rows.append(
            row(
                BENCH,
                f"stall: format: regex, {name}",
                samples,
                target="< 100 ms",
                note="draft-07, default limits, admitted",
            )
        )

    worst: dict[str, list[float]] = {}
    for attempt in range(repeat):
        for name, schema in _costly_pattern_schemas(f"r{attempt}x"):

            def admit() -> None:
                JsonSchemaArgumentValidator().validate(schema, {})  # noqa: B023

            worst.setdefault(name, []).append(await _stall_us(admit))
    name, samples = max(worst.items(), key=lambda item: sorted(item[1])[len(item[1]) // 2])
    rows.append(
        row(
            BENCH,
            "stall: admit the costliest patterns",
            samples,
            target="< 100 ms",
            note=f"worst of {len(worst)} shapes: {name}; fresh patterns, admitted or refused",
        )
    )
    for other, values in worst.items():
        print(f"  admit {other}: {sorted(values)[len(values) // 2] / 1000:.1f} ms", file=sys.stderr)

    rows.extend(await admission_rows(repeat))

    check = create_json_schema_tool_validator()
    closed_tool = ToolDefinition(name="closed", execute=_noop, parameters=CLOSED_TAGS)
    ctx = ToolExecutionContext(ToolCall(id="1", name="closed", arguments={}))
    assert check(closed_tool, {"n": 1}, ctx) is None
    for name, value in CLOSED_FLOODS:
        assert check(closed_tool, value, ctx) is not None, name
        samples = [
            await _stall_us(lambda: check(closed_tool, value, ctx))  # noqa: B023
            for _ in range(repeat)
        ]
        rows.append(row(BENCH, f"stall: closed path, {name}", samples, target="< 100 ms"))
    # The same floods as a model would send them, through ToolCall.from_json (the
    # parse is not measured): no text bound, so the closed checker refuses them.
    for name, text in CLOSED_FLOOD_TEXTS:
        call = ToolCall.from_json(id="1", name="closed", arguments=text)
        text_ctx = ToolExecutionContext(call)
        arguments = call.arguments
        assert check(closed_tool, arguments, text_ctx) is not None, name  # type: ignore[arg-type]
        samples = [
            await _stall_us(
                lambda: check(closed_tool, arguments, text_ctx)  # type: ignore[arg-type]  # noqa: B023
            )
            for _ in range(repeat)
        ]
        rows.append(
            row(BENCH, f"stall: closed path, from text, {name}", samples, target="< 100 ms")
        )
    wide = JsonSchemaArgumentValidator()
    items = [1] * 100_000
    assert not wide.validate(ANY_OF_ITEMS, items).ok
    samples = [await _stall_us(lambda: wide.validate(ANY_OF_ITEMS, items)) for _ in range(repeat)]
    rows.append(
        row(
            BENCH,
            "stall: anyOf refusal over 100,000 items",
            samples,
            target="< 100 ms",
            note="the engine's explanation took 2.6 s",
        )
    )

    samples = [await _stall_us(largest_compile) for _ in range(repeat)]
    rows.append(
        row(
            BENCH,
            "stall: compile a 254 kB draft-07 schema",
            samples,
            target="< 1 s",
            note="5,000 properties; screen, measure, compile",
        )
    )
    return rows


# The dict-built rows taken apart: (label, schema, value, the raw row it compares with).
_PARTS: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
    ("README", README_SCHEMA, README_VALID, "valid, README"),
    ("peers", WEATHER_SCHEMA, WEATHER_VALID, "valid, peers"),
    (
        "peers, no additionalProperties",
        DECLARED_SCHEMA,
        WEATHER_VALID,
        "valid, peers, no additionalProperties",
    ),
    ("search", SCHEMA, VALID, "valid"),
    ("no regex", PLAIN_SCHEMA, VALID, "valid, no regex"),
    ("open", OPEN_SCHEMA, VALID, "valid, open"),
]


def _part_rows(
    validator: JsonSchemaArgumentValidator, rs: str
) -> list[tuple[str, Callable[[], object], str | None, str | None, str]]:
    """Where a dict-built call's time goes: the engine alone, then the checker around it.

    ``is_valid`` is the compiled engine as the checker calls it (the compiled
    schema's ``text_bound``), ``quick_valid`` the checker with the engine in it;
    the dict-built row itself adds the tool validator around the checker.
    """
    rows: list[tuple[str, Callable[[], object], str | None, str | None, str]] = []
    for label, schema, value, raw in _PARTS:
        compiled = validator.compile(schema)
        bound = compiled.text_bound
        quick = compiled.quick_valid
        assert bound is not None
        assert quick is not None
        engine = bound[2]
        assert engine(value) is True
        assert quick(value) is True
        rows.append(
            (
                f"parts: {label}, engine is_valid",
                lambda engine=engine, value=value: engine(value),  # type: ignore[misc]
                f"{rs}, {raw}",
                None,
                "the engine as the checker calls it",
            )
        )
        rows.append(
            (
                f"parts: {label}, quick_valid",
                lambda quick=quick, value=value: quick(value),  # type: ignore[misc]
                f"{rs}, {raw}",
                None,
                "the checker (and the engine, where it does not decide)",
            )
        )
    return rows


def _load() -> str:
    return ", ".join(f"{value:.1f}" for value in os.getloadavg())


def _from_text(name: str, value: dict[str, Any]) -> tuple[Any, ToolExecutionContext]:
    """The arguments and context of a call Prism parsed from the model's JSON text."""
    call = ToolCall.from_json(id="1", name=name, arguments=json.dumps(value))
    return call.arguments, ToolExecutionContext(call)


async def main() -> list[Row]:
    rows: list[Row] = []
    raw = fastjsonschema.compile(copy.deepcopy(SCHEMA))
    check = create_json_schema_tool_validator()
    # What dispatch calls on every call: the validator's bound __call__ (see
    # DispatchOptions); calling the object itself adds the type's call slot.
    direct = check.__call__
    assert DispatchOptions(registry=ToolRegistry(), validator=check)._validate == direct
    tool = ToolDefinition(name="search", execute=_noop, parameters=SCHEMA)
    # Every hot-path row but the "dict-built" ones validates a call built from
    # JSON text (ToolCall.from_json), as the providers build them.
    valid, ctx = _from_text("search", VALID)
    invalid, ctx_invalid = _from_text("search", INVALID)
    dict_ctx = ToolExecutionContext(ToolCall(id="1", name="search", arguments=VALID))
    assert check(tool, valid, ctx) is None
    assert check(tool, invalid, ctx_invalid) is not None
    validator = check.validator

    tool7 = ToolDefinition(name="search7", execute=_noop, parameters={"$schema": DRAFT7, **SCHEMA})
    assert check(tool7, valid, ctx) is None
    assert check(tool7, invalid, ctx_invalid) is not None
    plain_tool = ToolDefinition(name="plain", execute=_noop, parameters=PLAIN_SCHEMA)
    assert check(plain_tool, valid, ctx) is None
    open_tool = ToolDefinition(name="open", execute=_noop, parameters=OPEN_SCHEMA)
    assert check(open_tool, valid, ctx) is None
    raw_rs = jsonschema_rs.validator_for(SCHEMA)
    raw_rs_plain = jsonschema_rs.validator_for(PLAIN_SCHEMA)
    raw_rs_open = jsonschema_rs.validator_for(OPEN_SCHEMA)
    raw_rs_readme = jsonschema_rs.validator_for(README_SCHEMA)
    raw_rs_weather = jsonschema_rs.validator_for(WEATHER_SCHEMA)
    readme_tool = ToolDefinition(name="add", execute=_noop, parameters=README_SCHEMA)
    weather_tool = ToolDefinition(name="weather", execute=_noop, parameters=WEATHER_SCHEMA)
    declared_tool = ToolDefinition(name="weather", execute=_noop, parameters=DECLARED_SCHEMA)
    raw_rs_declared = jsonschema_rs.validator_for(DECLARED_SCHEMA)
    readme_valid, readme_ctx = _from_text("add", README_VALID)
    readme_invalid, readme_ctx_invalid = _from_text("add", README_INVALID)
    weather_valid, weather_ctx = _from_text("weather", WEATHER_VALID)
    weather_invalid, weather_ctx_invalid = _from_text("weather", WEATHER_INVALID)
    readme_dict = ToolExecutionContext(ToolCall(id="1", name="add", arguments=README_VALID))
    gateway_args, gateway_ctx = _from_message(_tools_call_body(README_VALID), "params", "arguments")
    answer_args, answer_ctx = _from_message(ANTHROPIC_ANSWER, "content", 1, "input")
    agents_args, agents_ctx = _from_message(json.dumps(README_VALID).encode())
    weather_dict = ToolExecutionContext(ToolCall(id="1", name="weather", arguments=WEATHER_VALID))
    # The same dicts parsed from their JSON text (LangChain's tool calls): new key strings.
    readme_loaded = json.loads(json.dumps(README_VALID))
    readme_loaded_ctx = ToolExecutionContext(ToolCall(id="1", name="add", arguments=readme_loaded))
    weather_loaded = json.loads(json.dumps(WEATHER_VALID))
    weather_loaded_ctx = ToolExecutionContext(
        ToolCall(id="1", name="weather", arguments=weather_loaded)
    )
    assert check(readme_tool, readme_valid, readme_ctx) is None
    for arguments, context in (
        (gateway_args, gateway_ctx),
        (answer_args, answer_ctx),
        (agents_args, agents_ctx),
    ):
        assert arguments == README_VALID
        assert check(readme_tool, arguments, context) is None
    assert check(readme_tool, readme_invalid, readme_ctx_invalid) is not None
    assert check(weather_tool, weather_valid, weather_ctx) is None
    assert check(weather_tool, weather_invalid, weather_ctx_invalid) is not None
    assert check(declared_tool, WEATHER_VALID, weather_dict) is None
    assert check(readme_tool, readme_loaded, readme_loaded_ctx) is None
    assert check(weather_tool, weather_loaded, weather_loaded_ctx) is None

    def floor_for(schema: dict[str, Any]) -> Callable[[ToolDefinition, Any, Any], object]:
        valid = jsonschema_rs.validator_for(schema).is_valid
        slots: dict[int, tuple[Any, Any]] = {}

        def floor(tool: ToolDefinition, arguments: Any, _context: Any) -> object:
            slot = slots.get(id(tool))
            if slot is None or slot[0]() is not tool:
                slot = slots[id(tool)] = (weakref.ref(tool), valid)
            return None if slot[1](arguments) else "refused"

        return floor

    floor_readme = floor_for(README_SCHEMA)
    floor_search = floor_for(SCHEMA)
    floor_weather = floor_for(WEATHER_SCHEMA)

    # (name, call, baseline, target, note); timed interleaved, see _interleaved.
    rs = "raw jsonschema-rs"
    hot: list[tuple[str, Callable[[], object], str | None, str | None, str]] = [
        ("raw fastjsonschema, valid", lambda: raw(valid), None, None, ""),
        (f"{rs}, valid", lambda: raw_rs.validate(valid), "raw fastjsonschema, valid", None, ""),
        (
            "adapter hot path, valid",
            lambda: direct(tool, valid, ctx),
            f"{rs}, valid",
            "<= 2x",
            "2020-12: jsonschema-rs; call from JSON text",
        ),
        (
            "adapter, valid, dict-built call",
            lambda: direct(tool, VALID, dict_ctx),
            f"{rs}, valid",
            "<= 2x",
            "decided by the written checker (the engine's regex on one string)",
        ),
        (
            "floor: identity lookup + is_valid, valid",
            lambda: floor_search(tool, valid, ctx),
            f"{rs}, valid",
            None,
            "bounds nothing; see the docstring",
        ),
        (
            "adapter hot path, valid, draft-07",
            lambda: direct(tool7, valid, ctx),
            f"{rs}, valid",
            "<= 2x",
            "jsonschema-rs, formats asserted",
        ),
        (f"{rs}, valid, no regex", lambda: raw_rs_plain.validate(valid), None, None, ""),
        (
            "adapter hot path, valid, no regex",
            lambda: direct(plain_tool, valid, ctx),
            f"{rs}, valid, no regex",
            "<= 2x",
            "no pattern/format in the schema",
        ),
        (
            "adapter, valid, no regex, dict-built call",
            lambda: direct(plain_tool, VALID, dict_ctx),
            f"{rs}, valid, no regex",
            "<= 2x",
            "decided by the written checker, without the engine",
        ),
        (f"{rs}, valid, open", lambda: raw_rs_open.validate(valid), None, None, ""),
        (
            "adapter hot path, valid, open",
            lambda: direct(open_tool, valid, ctx),
            f"{rs}, valid, open",
            "<= 2x",
            "not closed; the text bounds it",
        ),
        (
            "adapter, valid, open, dict-built call",
            lambda: direct(open_tool, VALID, dict_ctx),
            f"{rs}, valid, open",
            "<= 2x",
            "decided by the written checker, its characters counted",
        ),
        (f"{rs}, valid, README", lambda: raw_rs_readme.validate(readme_valid), None, None, ""),
        (
            "adapter hot path, valid, README",
            lambda: direct(readme_tool, readme_valid, readme_ctx),
            f"{rs}, valid, README",
            "<= 2x",
            "the README's add tool, call from JSON text",
        ),
        (
            "adapter, valid, README, dict-built call",
            lambda: direct(readme_tool, README_VALID, readme_dict),
            f"{rs}, valid, README",
            "<= 2x",
            "decided by the written checker, without the engine",
        ),
        (
            "adapter, valid, README, keys from json.loads",
            lambda: direct(readme_tool, readme_loaded, readme_loaded_ctx),
            f"{rs}, valid, README",
            "<= 2x",
            "the same call, its dict parsed from JSON text",
        ),
        (
            "adapter, valid, README, gateway call (HTTP body)",
            lambda: direct(readme_tool, gateway_args, gateway_ctx),
            f"{rs}, valid, README",
            "<= 2x",
            "ToolCall.from_parsed of the request body's arguments",
        ),
        (
            "adapter, valid, README, Anthropic whole answer",
            lambda: direct(readme_tool, answer_args, answer_ctx),
            f"{rs}, valid, README",
            "<= 2x",
            "ToolCall.from_parsed of the answer body's tool_use input",
        ),
        (
            "adapter, valid, README, Agents SDK tool",
            lambda: direct(readme_tool, agents_args, agents_ctx),
            f"{rs}, valid, README",
            "<= 2x",
            "ParsedJson of the text the SDK hands the tool",
        ),
        (
            "adapter, valid, README, called as an object",
            lambda: check(readme_tool, readme_valid, readme_ctx),
            f"{rs}, valid, README",
            None,
            "validator(...) by hand: + the type's call slot",
        ),
        (
            "floor: identity lookup + is_valid, valid, README",
            lambda: floor_readme(readme_tool, readme_valid, readme_ctx),
            f"{rs}, valid, README",
            None,
            "bounds nothing; see the docstring",
        ),
        (
            f"{rs}, valid, peers",
            lambda: raw_rs_weather.validate(weather_valid),
            None,
            None,
            "",
        ),
        (
            "adapter hot path, valid, peers",
            lambda: direct(weather_tool, weather_valid, weather_ctx),
            f"{rs}, valid, peers",
            "<= 2x",
            "bench_peers' weather tool, call from JSON text",
        ),
        (
            "adapter, valid, peers, dict-built call",
            lambda: direct(weather_tool, WEATHER_VALID, weather_dict),
            f"{rs}, valid, peers",
            "<= 2x",
            "decided by the written checker, without the engine",
        ),
        (
            "adapter, valid, peers, keys from json.loads",
            lambda: direct(weather_tool, weather_loaded, weather_loaded_ctx),
            f"{rs}, valid, peers",
            "<= 2x",
            "the same call, its dict parsed from JSON text",
        ),
        (
            f"{rs}, valid, peers, no additionalProperties",
            lambda: raw_rs_declared.validate(WEATHER_VALID),
            None,
            None,
            "",
        ),
        (
            "adapter, valid, peers, no additionalProperties, dict-built call",
            lambda: direct(declared_tool, WEATHER_VALID, weather_dict),
            f"{rs}, valid, peers, no additionalProperties",
            "<= 2x",
            "decided by the written checker (declared keys only)",
        ),
        (
            "floor: identity lookup + is_valid, valid, peers",
            lambda: floor_weather(weather_tool, weather_valid, weather_ctx),
            f"{rs}, valid, peers",
            None,
            "bounds nothing; see the docstring",
        ),
        ("raw fastjsonschema, invalid", lambda: _raw_call(raw, invalid), None, None, ""),
        (f"{rs}, invalid", lambda: _rs_call(raw_rs, invalid), None, None, "validate raises"),
        (
            "adapter hot path, invalid",
            lambda: direct(tool, invalid, ctx_invalid),
            f"{rs}, invalid",
            "<= 2.5x",
            "2020-12; includes the error text",
        ),
        (
            "adapter hot path, invalid, draft-07",
            lambda: direct(tool7, invalid, ctx_invalid),
            f"{rs}, invalid",
            "<= 2.5x",
            "includes the error text",
        ),
        (
            f"{rs}, invalid, README",
            lambda: _rs_call(raw_rs_readme, readme_invalid),
            None,
            None,
            "",
        ),
        (
            "adapter hot path, invalid, README",
            lambda: direct(readme_tool, readme_invalid, readme_ctx_invalid),
            f"{rs}, invalid, README",
            "<= 2.5x",
            "includes the error text",
        ),
        (
            "adapter, invalid, README, dict-built call",
            lambda: direct(readme_tool, README_INVALID, readme_dict),
            f"{rs}, invalid, README",
            "<= 2.5x",
            "includes the error text",
        ),
        (
            f"{rs}, invalid, peers",
            lambda: _rs_call(raw_rs_weather, weather_invalid),
            None,
            None,
            "",
        ),
        (
            "adapter hot path, invalid, peers",
            lambda: direct(weather_tool, weather_invalid, weather_ctx_invalid),
            f"{rs}, invalid, peers",
            "<= 2.5x",
            "includes the error text",
        ),
        (
            "adapter, invalid, peers, dict-built call",
            lambda: direct(weather_tool, WEATHER_INVALID, weather_dict),
            f"{rs}, invalid, peers",
            "<= 2.5x",
            "includes the error text",
        ),
    ]
    hot += _part_rows(validator, rs)
    print(f"load average before the hot rows: {_load()}", file=sys.stderr)
    samples = _interleaved({name: call for name, call, *_ in hot})
    print(f"load average after the hot rows: {_load()}", file=sys.stderr)
    by_name: dict[str, Row] = {}
    for name, _call, baseline, target, note in hot:
        made = row(
            BENCH,
            name,
            samples[name],
            baseline=by_name[baseline] if baseline else None,
            target=target,
            note=note,
        )
        by_name[name] = made
        rows.append(made)
    rows.extend(_parse_rows())
    if HOT_ONLY:
        return rows
    raw_valid = by_name["raw fastjsonschema, valid"]
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
            note="Rust regex, linear; the error quotes the string",
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

    raw_fan = fastjsonschema.compile(_in_dialect(DRAFT7, _fan_out(14)))
    raw_fan_row = row(
        BENCH,
        "$ref fan-out, raw fastjsonschema (14 levels)",
        time_sync(lambda: raw_fan("x"), inner=3, repeat=3 if QUICK else 5),
    )
    rows.append(raw_fan_row)
    hostile = _in_dialect(DRAFT7, _fan_out(22))
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
    rows.extend(await stall_rows())
    return rows


if __name__ == "__main__":
    run(main)
