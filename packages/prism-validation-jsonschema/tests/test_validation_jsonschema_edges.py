"""Corners of the public API: refusals that name the reason, and values at the edges."""

from __future__ import annotations

from typing import Any

import pytest

from prism.core import ToolCall, ToolDefinition, ToolExecutionContext, ToolResult
from prism.validation.jsonschema import (
    JsonSchemaArgumentValidator,
    SchemaLimits,
    SchemaRejectedError,
    create_json_schema_tool_validator,
)
from prism.validation.jsonschema._validator import _refusal

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


@pytest.mark.parametrize("dialect", [D2020, D7])
def test_a_lone_surrogate_the_engine_cannot_read_is_refused_clearly(dialect: str) -> None:
    schema = {"$schema": dialect, "type": "string", "maxLength": 5}
    result = JsonSchemaArgumentValidator().validate(schema, "\ud800")
    assert not result.ok
    assert result.errors[0].path == "data"
    assert "lone surrogate" in result.errors[0].message


@pytest.mark.parametrize(
    ("name", "good", "bad"),
    [
        # Longer than 256 characters (the built-in checks once switched engines there).
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


def test_unknown_formats_are_annotations_in_draft_07() -> None:
    schema = {"$schema": D7, "type": "string", "format": "no-such-format"}
    assert JsonSchemaArgumentValidator().validate(schema, "anything").ok


def test_a_format_that_is_not_a_string_refuses_a_draft_07_schema() -> None:
    # The draft-07 meta-schema says format is a string, as 2020-12's does.
    for dialect in (D7, D2020):
        schema = {"$schema": dialect, "type": "string", "format": 7}
        result = JsonSchemaArgumentValidator().validate(schema, "anything")
        assert not result.ok
        assert result.errors[0].message.startswith("schema rejected"), dialect


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
    check = create_json_schema_tool_validator()
    tool = _SlottedTool("t", {"type": "object", "properties": {"a": {"type": "integer"}}})
    context = ToolExecutionContext(ToolCall(id="1", name="t", arguments={}))
    for _ in range(2):
        assert check(tool, {"a": 1}, context) is None  # type: ignore[arg-type]
        refused = check(tool, {"a": "x"}, context)  # type: ignore[arg-type]
        assert refused is not None
        assert refused.code == "invalid_arguments"
    assert check.cache_info().misses == 1


def test_the_message_for_a_tool_with_a_huge_name_is_bounded() -> None:
    check = create_json_schema_tool_validator()
    name = "t" * 3_000
    tool = ToolDefinition(name=name, execute=_noop, parameters={"type": "integer"})
    context = ToolExecutionContext(ToolCall(id="1", name=name, arguments={}))
    refused = check(tool, "x", context)  # type: ignore[arg-type]
    assert refused is not None
    assert len(refused.message) == 2_000
    assert refused.message.endswith("...")
    assert refused.details == {
        "errors": [{"path": "data", "message": "must be integer (rule: type)"}]
    }


@pytest.mark.parametrize("dialect", [D7, D2020])
@pytest.mark.parametrize(
    ("schema", "value", "message"),
    [
        ({"multipleOf": 3}, 4, "must be multiple of 3 (rule: multipleOf)"),
        ({"uniqueItems": True}, [{"a": 1}] * 2, "must contain unique items (rule: uniqueItems)"),
        (
            {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            {"big": "x" * 500},
            "cannot be validated by any definition (rule: anyOf)",
        ),
        (
            {"oneOf": [{"type": "integer"}, {"minimum": 0}]},
            1,
            "must be valid exactly by one definition (rule: oneOf)",
        ),
        ({"not": {"type": "integer"}}, 1, "must NOT match a disallowed definition (rule: not)"),
        (
            {"contains": {"type": "string"}},
            [1] * 50,
            "must contain one of contains definition (rule: contains)",
        ),
        ({"enum": ["a", "b"]}, "c", 'must be one of ["a", "b"] (rule: enum)'),
    ],
)
def test_each_rule_reads_alike_in_both_dialects_without_quoting_the_value(
    dialect: str, schema: dict[str, Any], value: object, message: str
) -> None:
    result = JsonSchemaArgumentValidator().validate({"$schema": dialect, **schema}, value)
    assert not result.ok
    assert (result.errors[0].path, result.errors[0].message) == ("data", message)


@pytest.mark.parametrize("dialect", [D7, D2020])
def test_additional_properties_false_without_properties_names_the_keys(dialect: str) -> None:
    # The engine reports this as a false schema; the message names the keys.
    validator = JsonSchemaArgumentValidator()
    closed = {"$schema": dialect, "type": "object", "additionalProperties": False}
    result = validator.validate(closed, {"x": 1})
    assert (result.errors[0].path, result.errors[0].message) == (
        "data",
        "must not contain {'x'} properties (rule: additionalProperties)",
    )
    nested = {"$schema": dialect, "properties": {"o": {"items": {"additionalProperties": False}}}}
    result = validator.validate(nested, {"o": [{}, {"y": 1}]})
    assert (result.errors[0].path, result.errors[0].message) == (
        "data.o[1]",
        "must not contain {'y'} properties (rule: additionalProperties)",
    )


def test_an_engine_error_with_unknown_fields_still_gives_a_bounded_refusal() -> None:
    # The error translation reads jsonschema-rs's fields; another version's
    # error must still refuse the call, never raise from validate.
    class _Other(Exception):
        instance_path = ()

    # Its message is not quoted: an engine's words may quote the arguments.
    assert _refusal(_Other("x" * 500), {}) == ("data", "does not match the schema")
