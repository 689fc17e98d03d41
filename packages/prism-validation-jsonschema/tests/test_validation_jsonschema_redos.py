"""Regular expressions from untrusted schemas cannot stall the event loop."""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING

import pytest
import trio
import trio.lowlevel
from fastjsonschema.draft2019 import CodeGeneratorDraft2019

from prism.core import (
    DispatchOptions,
    ToolCall,
    ToolResult,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.core.testing import RecordingTool
from prism.validation.jsonschema import (
    JsonSchemaArgumentValidator,
    create_json_schema_tool_argument_validator,
)
from prism.validation.jsonschema._regex import _linear_from

if TYPE_CHECKING:
    from pathlib import Path

EVIL = "^(a+)+$"
EVIL_INPUT = "a" * 28 + "!"  # seconds of backtracking in Python's re


async def _max_tick_gap(work: trio.lowlevel.Task | None = None, *, run: object) -> float:
    """Run ``run`` (an async callable) beside a 10 ms ticker; return the largest gap seen.

    Gaps are CPU time of the event loop's thread (``time.thread_time``): what
    validation holds the loop for, which a busy machine cannot inflate.
    """
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
        await trio.sleep(0.05)  # let the ticker start ticking
        try:
            await run()  # type: ignore[operator]
        finally:
            done.set()

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ticker)
            nursery.start_soon(worker)
    return max(gaps)


async def test_catastrophic_pattern_never_stalls_a_ticker_through_dispatch() -> None:
    tool = RecordingTool(
        name="evil",
        parameters={"type": "object", "properties": {"s": {"type": "string", "pattern": EVIL}}},
    )
    options = DispatchOptions(
        registry=create_tool_registry([tool.definition]),
        validate=create_json_schema_tool_argument_validator(),
    )
    results: list[ToolResult] = []

    async def run() -> None:
        for size in (28, 1_000, 100_000):
            call = ToolCall(id=str(size), name="evil", arguments={"s": "a" * size + "!"})
            results.append(await dispatch_tool_call(call, options))
            await trio.lowlevel.checkpoint()

    gap = await _max_tick_gap(run=run)
    assert gap < 0.3, f"the event loop stalled for {gap:.3f} s"
    assert all(r.is_error and "must match pattern" in r.joined_text for r in results)
    assert tool.calls == []


async def test_catastrophic_pattern_properties_never_stall_a_ticker() -> None:
    validator = JsonSchemaArgumentValidator()
    schema = {"type": "object", "patternProperties": {EVIL: {"type": "integer"}}}
    outcomes: list[bool] = []

    async def run() -> None:
        for _ in range(5):
            outcomes.append(validator.validate(schema, {EVIL_INPUT: "x", "aaaa": 1}).ok)
            await trio.lowlevel.checkpoint()

    gap = await _max_tick_gap(run=run)
    assert gap < 0.3, f"the event loop stalled for {gap:.3f} s"
    assert outcomes == [True] * 5  # the evil key does not match, "aaaa" is an integer


def test_compile_time_required_check_uses_the_linear_engine() -> None:
    # fastjsonschema runs re.search(pattern, name) at compile time for required
    # names under additionalProperties: false; that must not backtrack either.
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "patternProperties": {EVIL: {}},
        "required": [EVIL_INPUT * 3],
        "additionalProperties": False,
    }
    started = time.thread_time()
    result = JsonSchemaArgumentValidator().validate(schema, {})
    assert time.thread_time() - started < 1.0
    assert not result.ok
    assert "required but not allowed" in result.errors[0].message


def test_legitimate_patterns_are_still_enforced() -> None:
    validator = JsonSchemaArgumentValidator()
    schema = {
        "type": "object",
        "properties": {"id": {"type": "string", "pattern": "^[a-z]{3}-[0-9]+$"}},
        "patternProperties": {"^x-": {"type": "integer"}},
    }
    assert validator.validate(schema, {"id": "abc-123", "x-a": 1}).ok
    assert not validator.validate(schema, {"id": "abc-123\n"}).ok  # $ is the end of input
    assert not validator.validate(schema, {"id": "ABC-123"}).ok
    refused = validator.validate(schema, {"id": "abc-1", "x-a": "one"})
    assert not refused.ok
    assert refused.errors[0].path == "data.x-a"


def test_unanchored_pattern_searches_anywhere() -> None:
    validator = JsonSchemaArgumentValidator()
    assert validator.validate({"pattern": "b+"}, "aabbcc").ok
    assert not validator.validate({"pattern": "^b+"}, "aabbcc").ok


def test_patterns_the_linear_engine_cannot_run_refuse_the_schema() -> None:
    validator = JsonSchemaArgumentValidator()
    for pattern in [r"(a)\1", "(?=a)a", "(?!b)a", "(?<=a)b", "(?<!a)b"]:
        result = validator.validate({"type": "string", "pattern": pattern}, "a")
        assert not result.ok
        assert result.errors[0].message.startswith("schema rejected"), pattern
        assert "linear-time engine" in result.errors[0].message


def test_invalid_pattern_refuses_the_schema() -> None:
    result = JsonSchemaArgumentValidator().validate({"pattern": "(unclosed"}, "x")
    assert not result.ok
    assert result.errors[0].message.startswith("schema rejected")


_DIALECTS = [
    "http://json-schema.org/draft-07/schema#",
    "https://json-schema.org/draft/2020-12/schema",
]


@pytest.mark.parametrize("dialect", _DIALECTS)
async def test_format_checks_on_huge_strings_stay_linear(dialect: str) -> None:
    # Python's email regex in fastjsonschema is quadratic on inputs like these.
    validator = JsonSchemaArgumentValidator(assert_formats=True)
    inputs = ["a@" + "b." * 400_000 + "@", "a" + "..b" * 300_000 + "@x.y", "1" * 900_000]
    formats = ["email", "hostname", "date-time", "idn-hostname", "duration", "ipv6", "regex"]
    outcomes: list[bool] = []

    async def run() -> None:
        for name in formats:
            for text in inputs:
                schema = {"$schema": dialect, "format": name}
                outcomes.append(validator.validate(schema, text).ok)
                await trio.lowlevel.checkpoint()

    gap = await _max_tick_gap(run=run)
    assert gap < 0.3, f"the event loop stalled for {gap:.3f} s"
    assert outcomes.count(True) <= 1  # only "1"*900_000 as a regex is valid


@pytest.mark.parametrize("dialect", _DIALECTS)
def test_builtin_formats_still_check(dialect: str) -> None:
    validator = JsonSchemaArgumentValidator(assert_formats=True)
    cases = {
        "email": ("joe@example.com", "joe..x@example.com"),
        "idn-hostname": ("xn--bcher-kva.example", "a.-b"),
        "duration": ("P3DT4H", "PT"),
        "date": ("2024-02-29", "2024-02-30x"),
        "ipv4": ("10.0.0.1", "256.0.0.1"),
        "uuid": ("123e4567-e89b-12d3-a456-426614174000", "123e4567"),
        "regex": ("^a+$", "(unclosed"),
    }
    for name, (good, bad) in cases.items():
        if dialect.startswith("http://") and name in {"duration", "uuid"}:
            continue  # formats added in 2019-09
        assert validator.validate({"$schema": dialect, "format": name}, good).ok, name
        assert not validator.validate({"$schema": dialect, "format": name}, bad).ok, name


def test_formats_are_annotations_in_2020_12_unless_asserting_was_asked_for() -> None:
    schema = {"type": "string", "format": "date"}
    assert JsonSchemaArgumentValidator().validate(schema, "last tuesday").ok
    assert not JsonSchemaArgumentValidator(assert_formats=True).validate(schema, "x").ok


def test_format_engines_agree_and_short_inputs_stay_cheap(json_schema_test_suite: Path) -> None:
    # Built-in formats use Python's re on short strings and RE2 on long ones:
    # both must give the same verdict, and the short path must stay cheap.
    samples: set[str] = {"1::", "1:2::3", "::ffff:10.0.0.1", "a" * 255 + "!", "a@" + "b." * 127}
    for path in json_schema_test_suite.glob("draft*/optional/format/*.json"):
        for group in json.loads(path.read_text(encoding="utf-8")):
            samples.update(t["data"] for t in group["tests"] if isinstance(t["data"], str))
    for name, regex in CodeGeneratorDraft2019.FORMAT_REGEXS.items():
        if name in {"email", "idn-hostname", "duration"}:
            continue  # written out in Python, no regex
        python = re.compile(regex, re.ASCII)
        linear = _linear_from(regex)
        for sample in samples:
            assert (python.match(sample) is not None) == linear(sample), (name, sample)
        for sample in ("a@" + "b." * 127, "/" + "a" * 254 + "~", "1:" * 127 + "x", "{" + "a" * 254):
            started = time.thread_time()
            python.match(sample)
            assert time.thread_time() - started < 0.005, (name, sample)
