"""Corners of the public API: refusals that name the reason, and values at the edges."""

from __future__ import annotations

from typing import Any

import pytest

from prism.core import ToolCall, ToolExecutionContext, ToolResult
from prism.validation.jsonschema import (
    JsonSchemaArgumentValidator,
    SchemaLimits,
    SchemaRejectedError,
    create_json_schema_tool_argument_validator,
)

D7 = "http://json-schema.org/draft-07/schema#"
D2020 = "https://json-schema.org/draft/2020-12/schema"


def test_check_schema_accepts_a_good_schema_and_raises_for_a_bad_one() -> None:
    validator = JsonSchemaArgumentValidator()
    validator.check_schema({"type": "string"})  # no exception: admitted
    with pytest.raises(SchemaRejectedError) as raised:
        validator.check_schema({"$schema": 7})
    assert raised.value.reason == "$schema must be a string"
    assert raised.value.path == "#/$schema"


def test_a_recursive_schema_whose_cost_settles_is_admitted() -> None:
    # Each level of a linked list costs the same: the expanded cost reaches a fixed
    # point, and the recursion is unrolled only to max_instance_depth.
    schema = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"next": {"$ref": "#/$defs/node"}, "v": {"type": "integer"}},
            }
        },
        "$ref": "#/$defs/node",
    }
    validator = JsonSchemaArgumentValidator()
    assert validator.validate(schema, {"v": 1, "next": {"v": 2, "next": {}}}).ok
    assert not validator.validate(schema, {"v": 1, "next": {"v": "x"}}).ok


def test_the_budget_counts_only_strings_a_pattern_can_reach() -> None:
    limits = SchemaLimits(max_regex_work=2_000)
    validator = JsonSchemaArgumentValidator(limits=limits)
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}}
    text = "y" * 1_000
    # Under "b" no pattern applies: the coarse bound is over, the per-depth one is not.
    assert validator.validate(schema, {"b": [text]}).ok
    refused = validator.validate(schema, {"a": text})
    assert not refused.ok
    assert "max_regex_work" in refused.errors[0].message


def test_a_lone_surrogate_the_2020_12_engine_cannot_read_is_refused_clearly() -> None:
    schema = {"$schema": D2020, "type": "string", "maxLength": 5}
    result = JsonSchemaArgumentValidator().validate(schema, "\ud800")
    assert not result.ok
    assert "lone surrogate" in result.errors[0].message
    # draft-07 runs on Python strings, which hold it.
    assert JsonSchemaArgumentValidator().validate({**schema, "$schema": D7}, "\ud800").ok


@pytest.mark.parametrize(
    ("name", "good", "bad"),
    [
        # Longer than 256 characters: the RE2 side of the built-in format checks.
        ("uri", "http://127.0.0.1/" + "a" * 300, "not a uri " + "a" * 300),
        ("email", "a.b@example.com", ".a@example.com"),
        ("email", "a@example.com", "a..b@example.com"),
        ("email", "a@example.com", "a@b@example.com"),
        ("idn-hostname", "xn--bcher-kva.example", "a.-b"),
        ("idn-hostname", "example.com", "-"),
        ("regex", "^a(?=b)", "(unclosed"),
        ("regex", "a" * 900, "(?=" * 400 + "a" * 300),
        ("regex", "a{2}", "a" * 16_385),
    ],
)
def test_draft_07_formats_at_their_edges(name: str, good: str, bad: str) -> None:
    validator = JsonSchemaArgumentValidator(limits=SchemaLimits(max_regex_work=10**9))
    schema = {"$schema": D7, "type": "string", "format": name}
    assert validator.validate(schema, good).ok, good
    result = validator.validate(schema, bad)
    assert not result.ok, bad
    assert result.errors[0].message.startswith(f"must be {name}")


@pytest.mark.parametrize("name", ["no-such-format", 7])
def test_unknown_or_malformed_formats_are_annotations_in_draft_07(name: object) -> None:
    schema = {"$schema": D7, "type": "string", "format": name}
    assert JsonSchemaArgumentValidator().validate(schema, "anything").ok


def test_required_names_that_are_declared_compile_under_additional_properties_false() -> None:
    schema = {
        "$schema": D7,
        "properties": {"a": {}},
        "patternProperties": {"^x-": {}},
        "required": ["a", "x-b"],
        "additionalProperties": False,
    }
    validator = JsonSchemaArgumentValidator()
    assert validator.validate(schema, {"a": 1, "x-b": 2}).ok
    assert not validator.validate(schema, {"a": 1}).ok


class _SlottedTool:
    """A tool-like value that cannot be weakly referenced."""

    __slots__ = ("name", "parameters")

    def __init__(self, name: str, parameters: dict[str, Any]) -> None:
        self.name = name
        self.parameters = parameters


async def _noop(_args: Any, _ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text("ok")


def test_a_tool_that_cannot_be_weakly_referenced_is_validated_every_time() -> None:
    check = create_json_schema_tool_argument_validator()
    tool = _SlottedTool("t", {"type": "object", "properties": {"a": {"type": "integer"}}})
    context = ToolExecutionContext(ToolCall(id="1", name="t", arguments={}))
    for _ in range(2):
        assert check(tool, {"a": 1}, context) is None  # type: ignore[arg-type]
        refused = check(tool, {"a": "x"}, context)  # type: ignore[arg-type]
        assert refused is not None
        assert refused.code == "invalid_arguments"
    assert check.cache_info().misses == 1
