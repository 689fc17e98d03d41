"""Regular expressions from untrusted schemas cannot stall the event loop."""

from __future__ import annotations

import pytest

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
    create_json_schema_tool_validator,
)

EVIL = "^(a+)+$"
EVIL_INPUT = "a" * 28 + "!"  # seconds of backtracking in Python's re


# On Python's backtracking re, each of these would run for seconds to ages (the
# benchmark's "ReDoS" rows compare); Rust's regex crate answers in time linear in
# the input, and RE2 refuses what neither linear engine can run.


async def test_a_catastrophic_pattern_is_answered_through_dispatch() -> None:
    tool = RecordingTool(
        name="evil",
        parameters={"type": "object", "properties": {"s": {"type": "string", "pattern": EVIL}}},
    )
    options = DispatchOptions(
        registry=create_tool_registry([tool.definition]),
        validator=create_json_schema_tool_validator(),
    )
    results: list[ToolResult] = []

    for size in (28, 1_000, 100_000):
        call = ToolCall(id=str(size), name="evil", arguments={"s": "a" * size + "!"})
        results.append(await dispatch_tool_call(call, options))
    assert all(r.is_error and "must match pattern" in r.joined_text for r in results)
    assert tool.calls == []


def test_catastrophic_pattern_properties_are_answered() -> None:
    validator = JsonSchemaArgumentValidator()
    schema = {"type": "object", "patternProperties": {EVIL: {"type": "integer"}}}
    # The evil key does not match, "aaaa" is an integer.
    assert validator.validate(schema, {EVIL_INPUT: "x", "aaaa": 1}).ok


@pytest.mark.parametrize("dialect", ["http://json-schema.org/draft-07/schema#", None])
def test_a_required_name_meeting_a_catastrophic_pattern_property_is_answered(
    dialect: str | None,
) -> None:
    # The required name is matched against EVIL (no match: it ends in "!"), so
    # additionalProperties refuses it; on a backtracking engine that match alone
    # would take ages.
    schema: dict[str, object] = {
        "type": "object",
        "patternProperties": {EVIL: {}},
        "required": [EVIL_INPUT * 3],
        "additionalProperties": False,
    }
    if dialect is not None:
        schema["$schema"] = dialect
    validator = JsonSchemaArgumentValidator()
    missing = validator.validate(schema, {})
    assert not missing.ok
    assert "must contain" in missing.errors[0].message
    present = validator.validate(schema, {EVIL_INPUT * 3: 1})
    assert not present.ok
    assert "must not contain" in present.errors[0].message
    assert validator.validate({k: v for k, v in schema.items() if k != "required"}, {"aaa": 1}).ok


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


_LATER = ["date", "time", "idn-email"]
_DIALECTS = [
    "http://json-schema.org/draft-07/schema#",
    "https://json-schema.org/draft/2020-12/schema",
]


@pytest.mark.parametrize("dialect", _DIALECTS)
def test_format_checks_on_huge_strings_are_answered(dialect: str) -> None:
    # A backtracking email regex (fastjsonschema's, say) is quadratic on inputs like these.
    validator = JsonSchemaArgumentValidator(assert_formats=True)
    inputs = ["a@" + "b." * 400_000 + "@", "a" + "..b" * 300_000 + "@x.y", "1" * 900_000]
    formats = ["email", "hostname", "date-time", "idn-hostname", "duration", "ipv6", "regex"]
    outcomes = [
        validator.validate({"$schema": dialect, "format": name}, text).ok
        for name in formats
        for text in inputs
    ]
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


@pytest.mark.parametrize(
    ("dialect", "asserted", "annotations"),
    [
        ("http://json-schema.org/draft-04/schema#", ["date-time", "ipv4", "regex"], _LATER),
        ("http://json-schema.org/draft-06/schema#", ["json-pointer", "uri-reference"], _LATER),
        ("http://json-schema.org/draft-07/schema#", _LATER, ["duration", "uuid"]),
    ],
)
def test_each_older_draft_asserts_its_own_formats_only(
    dialect: str, asserted: list[str], annotations: list[str]
) -> None:
    # Draft-04/06/07 always assert format, but only the formats the draft defines;
    # a later draft's format is an annotation there, as the drafts say.
    validator = JsonSchemaArgumentValidator()
    for name in asserted:
        result = validator.validate({"$schema": dialect, "format": name}, "(:: x")
        assert not result.ok, name
        assert result.errors[0].message == f"must be {name} (rule: format)"
    for name in annotations:
        assert validator.validate({"$schema": dialect, "format": name}, "(:: x").ok, name
