"""References only into schema locations, and 2020-12 (MCP's default dialect) for real."""

from __future__ import annotations

import copy
import json
from typing import TYPE_CHECKING, Any

import pytest

from prism.validation.jsonschema import JsonSchemaArgumentValidator

if TYPE_CHECKING:
    from prism.core import ToolArgumentValidationResult

D7 = "http://json-schema.org/draft-07/schema#"
D2019 = "https://json-schema.org/draft/2019-09/schema"
D2020 = "https://json-schema.org/draft/2020-12/schema"


def _refused(result: ToolArgumentValidationResult, *words: str) -> str:
    assert not result.ok
    message = result.errors[0].message
    assert message.startswith("schema rejected"), message
    for word in words:
        assert word in message, message
    return message


# -- $ref must land on a schema location --------------------------------------


@pytest.mark.parametrize("dialect", [D7, D2019, D2020])
@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#/default", "default": {"dependentRequired": {"a": ["b"]}}},
        {"$ref": "#/examples/0", "examples": [{"prefixItems": [{"type": "string"}]}]},
        {"$ref": "#/examples/0", "examples": [{"maxContains": 1, "contains": {}}]},
        {"$ref": "#/const", "const": {"type": "string"}},
        {"$ref": "#/enum/0", "enum": [{"type": "string"}]},
        {"$ref": "#/required", "required": []},
        {"$ref": "#/x-unknown", "x-unknown": {"type": "string"}},
        {"$ref": "#/properties", "properties": {"type": {"const": 1}}},
        {"properties": {"a": {"default": {"type": "string"}, "$ref": "#/properties/a/default"}}},
        {"$ref": "#/default/allOf/0", "default": {"allOf": [{"type": "string"}]}},
    ],
)
def test_a_reference_into_data_refuses_the_schema(dialect: str, schema: dict[str, Any]) -> None:
    result = JsonSchemaArgumentValidator().validate({"$schema": dialect, **schema}, {"a": 1})
    _refused(result, "not a schema location")


def test_keywords_beside_ref_inside_data_are_never_applied() -> None:
    # The examples' inner $ref would make the engine apply its sibling keywords.
    schema = {
        "$ref": "#/examples/0",
        "examples": [{"$ref": "#/$defs/s", "unevaluatedProperties": False}],
        "$defs": {"s": {"type": "object"}},
    }
    _refused(JsonSchemaArgumentValidator().validate(schema, {"a": 1}), "not a schema location")


def test_an_anchor_declared_inside_data_is_not_a_target() -> None:
    schema = {"$ref": "#inside", "default": {"$anchor": "inside", "type": "string"}}
    _refused(JsonSchemaArgumentValidator().validate(schema, 1), "also declared inside data")


def test_an_anchor_also_declared_inside_data_is_refused() -> None:
    schema = {
        "$defs": {"a": {"$anchor": "x", "type": "integer"}},
        "default": {"$anchor": "x", "dependentRequired": {"a": ["b"]}},
        "$ref": "#x",
    }
    _refused(JsonSchemaArgumentValidator().validate(schema, 1), "also declared inside data")


def test_an_id_also_declared_inside_data_is_refused() -> None:
    schema = {
        "$defs": {"a": {"$id": "https://e.com/a", "$defs": {"n": {"type": "integer"}}}},
        "examples": [{"$id": "https://e.com/a", "$defs": {"n": {"type": "string"}}}],
        "$ref": "#/$defs/a",
    }
    _refused(JsonSchemaArgumentValidator().validate(schema, 1), "also declared inside data")


def test_an_anchor_declared_twice_is_refused() -> None:
    schema = {
        "$defs": {"a": {"$anchor": "x", "type": "integer"}, "b": {"$anchor": "x"}},
        "$ref": "#x",
    }
    _refused(JsonSchemaArgumentValidator().validate(schema, 1), "declared twice")


def test_a_dynamic_reference_into_data_refuses_the_schema() -> None:
    schema = {"$dynamicRef": "#/examples/0", "examples": [{"type": "string"}]}
    _refused(JsonSchemaArgumentValidator().validate(schema, 1), "not a schema location")


@pytest.mark.parametrize("ref", ["http://127.0.0.1:9/x.json", "file:///etc/passwd", "other.json"])
@pytest.mark.parametrize("keyword", ["$ref", "$dynamicRef"])
def test_remote_dynamic_and_plain_references_are_never_fetched(keyword: str, ref: str) -> None:
    _refused(JsonSchemaArgumentValidator().validate({keyword: ref}, 1), "fragment-local")


def test_references_into_defs_and_through_escapes_still_work() -> None:
    schema = {
        "$defs": {"a/b": {"type": "integer"}, "c~d": {"type": "string"}, "e f": {"minimum": 3}},
        "properties": {
            "x": {"$ref": "#/$defs/a~1b"},
            "y": {"$ref": "#/$defs/c~0d"},
            "z": {"$ref": "#/$defs/e%20f"},
            "w": {"$ref": "#/properties/x"},
        },
    }
    validator = JsonSchemaArgumentValidator()
    assert validator.validate(schema, {"x": 1, "y": "s", "z": 4, "w": 2}).ok
    assert not validator.validate(schema, {"x": "1"}).ok
    assert not validator.validate(schema, {"y": 1}).ok
    assert not validator.validate(schema, {"z": 2}).ok
    assert not validator.validate(schema, {"w": "2"}).ok


def test_a_relative_pointer_resolves_inside_its_embedded_resource() -> None:
    schema = {
        "$id": "https://example.com/root",
        "properties": {
            "inner": {
                "$id": "https://example.com/inner",
                "$defs": {"n": {"type": "integer"}},
                "properties": {"v": {"$ref": "#/$defs/n"}},
            }
        },
    }
    validator = JsonSchemaArgumentValidator()
    assert validator.validate(schema, {"inner": {"v": 1}}).ok
    assert not validator.validate(schema, {"inner": {"v": "1"}}).ok


@pytest.mark.parametrize(("root", "inner"), [(D7, D2020), (D2020, D7), (D2020, D2020)])
def test_an_embedded_dialect_is_refused(root: str, inner: str) -> None:
    schema = {
        "$schema": root,
        "properties": {"a": {"$schema": inner, "prefixItems": [{"type": "string"}]}},
    }
    _refused(JsonSchemaArgumentValidator().validate(schema, {"a": [1]}), "embedded $schema")


# -- the screen is the same in front of every dialect --------------------------


@pytest.mark.parametrize("dialect", [D7, D2020])
@pytest.mark.parametrize(
    ("schema", "word"),
    [
        ({"$ref": "http://127.0.0.1:9/s.json"}, "fragment-local"),
        ({"$ref": "file:///etc/passwd"}, "fragment-local"),
        ({"$ref": "data:application/json,{}"}, "fragment-local"),
        ({"$ref": "other.json#/x"}, "fragment-local"),
        ({"$id": "schemas/foo.json", "type": "object"}, "relative"),
        ({"properties": {"__proto__": {"type": "string"}}}, "forbidden key"),
        ({"constructor": {}}, "forbidden key"),
        ({"minimum": float("nan")}, "non-finite"),
        ({"maximum": float("inf")}, "non-finite"),
        ({"$ref": "#/$defs/missing"}, "does not resolve"),
        ({"pattern": "(a)\\1"}, "linear-time engine"),
        ({"pattern": "(?=a)"}, "linear-time engine"),
    ],
)
def test_screen_refusals_hold_in_both_dialects(
    dialect: str, schema: dict[str, Any], word: str
) -> None:
    _refused(JsonSchemaArgumentValidator().validate({"$schema": dialect, **schema}, {}), word)


@pytest.mark.parametrize("dialect", [D7, D2020])
@pytest.mark.parametrize(
    ("value", "word"),
    [
        ({"a": {"__proto__": 1}}, "forbidden key"),
        ({"a": float("nan")}, "not a finite number"),
        ({"a": b"bytes"}, "not a JSON value"),
        ({"a": "x" * 1_000_001}, "max_string_length"),
        (json.loads('{"a":' * 70 + "1" + "}" * 70), "max_instance_depth"),
    ],
)
def test_hostile_arguments_are_refused_before_the_engine_runs(
    dialect: str, value: object, word: str
) -> None:
    schema = {"$schema": dialect, "type": "object"}
    result = JsonSchemaArgumentValidator().validate(schema, value)
    assert not result.ok
    assert word in result.errors[0].message, result.errors[0].message


@pytest.mark.parametrize("dialect", [D7, D2020])
def test_the_engine_mutates_neither_the_schema_nor_the_arguments(dialect: str) -> None:
    schema = {
        "$schema": dialect,
        "properties": {"a": {"default": 5, "type": "integer"}, "b": {"default": [1]}},
    }
    before_schema = copy.deepcopy(schema)
    value: dict[str, Any] = {}
    assert JsonSchemaArgumentValidator().validate(schema, value).ok
    assert value == {}
    assert schema == before_schema


# -- 2020-12 keywords are enforced --------------------------------------------

_CASES: list[tuple[str, dict[str, Any], object, object]] = [
    (
        "prefixItems",
        {"prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False},
        [1, "a"],
        [1, "a", None],
    ),
    ("prefixItems types", {"prefixItems": [{"type": "integer"}]}, [1, "x"], ["x"]),
    (
        "$defs + $anchor",
        {"$defs": {"n": {"$anchor": "num", "type": "number"}}, "items": {"$ref": "#num"}},
        [1, 2.5],
        [1, "2"],
    ),
    ("dependentRequired", {"dependentRequired": {"a": ["b"]}}, {"a": 1, "b": 2}, {"a": 1}),
    (
        "dependentSchemas",
        {"dependentSchemas": {"a": {"properties": {"b": {"type": "string"}}}}},
        {"a": 1, "b": "x"},
        {"a": 1, "b": 2},
    ),
    (
        "unevaluatedProperties",
        {
            "allOf": [{"properties": {"a": {}}}],
            "properties": {"b": {}},
            "unevaluatedProperties": False,
        },
        {"a": 1, "b": 2},
        {"a": 1, "c": 3},
    ),
    (
        "unevaluatedItems",
        {"prefixItems": [{}], "anyOf": [{"prefixItems": [{}, {}]}], "unevaluatedItems": False},
        [1, 2],
        [1, 2, 3],
    ),
    (
        "minContains",
        {"contains": {"type": "integer"}, "minContains": 2},
        [1, "a", 2],
        [1, "a"],
    ),
    (
        "maxContains",
        {"contains": {"type": "integer"}, "maxContains": 1},
        [1, "a"],
        [1, 2],
    ),
    (
        "$dynamicRef",
        {
            "$dynamicAnchor": "node",
            "type": "object",
            "properties": {"children": {"type": "array", "items": {"$dynamicRef": "#node"}}},
            "required": ["id"],
        },
        {"id": 1, "children": [{"id": 2, "children": []}]},
        {"id": 1, "children": [{"children": []}]},
    ),
    (
        "keywords beside $ref",
        {"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s", "maxLength": 2},
        "ab",
        "abc",
    ),
]


@pytest.mark.parametrize(("name", "schema", "good", "bad"), _CASES, ids=[c[0] for c in _CASES])
@pytest.mark.parametrize("declared", [True, False], ids=["$schema 2020-12", "no $schema"])
def test_2020_12_keywords_are_validated_for_real(
    name: str, schema: dict[str, Any], good: object, bad: object, declared: bool
) -> None:
    if declared:
        schema = {"$schema": D2020, **schema}
    validator = JsonSchemaArgumentValidator()
    assert validator.validate(schema, good).ok, name
    assert not validator.validate(schema, bad).ok, name


def test_errors_from_the_2020_12_engine_name_the_path_and_the_rule() -> None:
    schema = {"properties": {"items": {"prefixItems": [{"type": "integer"}]}}}
    result = JsonSchemaArgumentValidator().validate(schema, {"items": ["x"]})
    assert not result.ok
    assert result.errors[0].path == "data.items[0]"
    assert result.errors[0].message == "must be integer (rule: type)"


def test_2019_09_recursive_references_work() -> None:
    schema = {
        "$schema": D2019,
        "$recursiveAnchor": True,
        "type": "object",
        "properties": {"next": {"$recursiveRef": "#"}, "v": {"type": "integer"}},
    }
    validator = JsonSchemaArgumentValidator()
    assert validator.validate(schema, {"v": 1, "next": {"v": 2}}).ok
    assert not validator.validate(schema, {"v": 1, "next": {"v": "2"}}).ok


# -- MCP output schemas -------------------------------------------------------

_OUTPUT = {
    "type": "object",
    "properties": {"temperature": {"type": "number"}, "unit": {"enum": ["C", "F"]}},
    "required": ["temperature", "unit"],
    "additionalProperties": False,
}


def test_validate_output_accepts_matching_structured_content() -> None:
    validator = JsonSchemaArgumentValidator()
    assert validator.validate_output(_OUTPUT, {"temperature": 21.5, "unit": "C"}).ok


def test_validate_output_refuses_content_that_breaks_the_output_schema() -> None:
    result = JsonSchemaArgumentValidator().validate_output(
        _OUTPUT, {"temperature": "hot", "unit": "C"}
    )
    assert not result.ok
    assert result.errors[0].path == "data.temperature"


def test_validate_output_takes_any_json_value() -> None:
    validator = JsonSchemaArgumentValidator()
    assert validator.validate_output({"type": "array", "items": {"type": "string"}}, ["a"]).ok
    assert not validator.validate_output({"type": "array"}, "a").ok


def test_validate_output_has_the_same_hardening() -> None:
    validator = JsonSchemaArgumentValidator()
    _refused(validator.validate_output({"$ref": "https://example.com/s.json"}, {}))
    _refused(validator.validate_output({"$ref": "#/default", "default": {}}, {}))
    polluted = validator.validate_output({"type": "object"}, {"__proto__": {"admin": True}})
    assert not polluted.ok
    assert "__proto__" in polluted.errors[0].message
    costly = validator.validate_output({"pattern": "(.*a){20}"}, "a" * 1_000_000)
    assert not costly.ok
    assert "max_regex_work" in costly.errors[0].message
