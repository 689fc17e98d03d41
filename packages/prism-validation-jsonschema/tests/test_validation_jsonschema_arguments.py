"""Hostile arguments: bounded before any schema code runs, never mutated, clear errors."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from prism.validation.jsonschema import JsonSchemaArgumentValidator, SchemaLimits

OPEN = {"type": "object"}
D7 = "http://json-schema.org/draft-07/schema#"


def _refused(result: Any, path: str, *words: str) -> None:
    assert not result.ok
    error = result.errors[0]
    assert error.path == path, error
    for word in words:
        assert word in error.message, error.message


@pytest.mark.parametrize("key", ["__proto__", "constructor", "prototype"])
def test_pollution_keys_in_arguments_are_refused_at_any_depth(key: str) -> None:
    validator = JsonSchemaArgumentValidator()
    _refused(validator.validate(OPEN, {key: {}}), "data", key)
    _refused(validator.validate(OPEN, {"a": [{"b": {key: 1}}]}), "data.a[0].b", key)


def test_instance_depth_is_bounded() -> None:
    validator = JsonSchemaArgumentValidator(limits=SchemaLimits(max_instance_depth=4))
    assert validator.validate(OPEN, {"a": {"b": {"c": {}}}}).ok
    _refused(validator.validate(OPEN, {"a": {"b": {"c": {"d": {}}}}}), "data.a.b.c.d", "depth")
    _refused(validator.validate(OPEN, {"a": [[[[]]]]}), "data.a[0][0][0]", "depth")


def test_a_self_containing_argument_is_refused_not_looped_on() -> None:
    value: dict[str, Any] = {}
    value["me"] = value
    result = JsonSchemaArgumentValidator().validate(OPEN, value)
    assert not result.ok
    assert "max_instance_depth" in result.errors[0].message


def test_very_deep_arguments_against_a_recursive_ref_do_not_raise() -> None:
    tree = {"type": "object", "properties": {"child": {"$ref": "#"}}}
    value: dict[str, Any] = {}
    for _ in range(5_000):
        value = {"child": value}
    result = JsonSchemaArgumentValidator().validate(tree, value)
    assert not result.ok
    assert "max_instance_depth" in result.errors[0].message


def test_total_members_are_bounded() -> None:
    validator = JsonSchemaArgumentValidator(limits=SchemaLimits(max_instance_properties=10))
    assert validator.validate(OPEN, {f"k{i}": i for i in range(10)}).ok
    _refused(validator.validate(OPEN, {f"k{i}": i for i in range(11)}), "data", "max_instance")
    nested = {"a": {f"k{i}": i for i in range(6)}, "b": {f"k{i}": i for i in range(6)}}
    assert not validator.validate(OPEN, nested).ok


def test_string_length_is_bounded_for_values_and_keys() -> None:
    validator = JsonSchemaArgumentValidator(limits=SchemaLimits(max_string_length=8))
    assert validator.validate(OPEN, {"a": "x" * 8}).ok
    _refused(validator.validate(OPEN, {"a": "x" * 9}), "data.a", "max_string_length")
    _refused(validator.validate(OPEN, {"a": ["ok", "x" * 9]}), "data.a[1]", "max_string_length")
    _refused(validator.validate(OPEN, {"k" * 9: 1}), "data", "key longer")
    _refused(validator.validate({"type": "string"}, "x" * 9), "data", "max_string_length")


def test_array_items_are_bounded_in_total() -> None:
    validator = JsonSchemaArgumentValidator(limits=SchemaLimits(max_array_length=5))
    assert validator.validate(OPEN, {"a": [1, 2, 3, 4, 5]}).ok
    _refused(validator.validate(OPEN, {"a": [1] * 6}), "data.a", "max_array_length")
    assert not validator.validate(OPEN, {"a": [1, 2, 3], "b": [4, 5, 6]}).ok


def test_shared_sub_arrays_cannot_multiply_the_work() -> None:
    node: list[Any] = [1]
    for _ in range(60):
        node = [node, node]
    result = JsonSchemaArgumentValidator().validate({"type": "array"}, node)
    assert not result.ok


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_in_arguments_are_refused(bad: float) -> None:
    # NaN compares false with everything, so it would slip past minimum/maximum.
    schema = {"type": "object", "properties": {"n": {"type": "number", "maximum": 10}}}
    _refused(JsonSchemaArgumentValidator().validate(schema, {"n": bad}), "data.n", "finite")


@pytest.mark.parametrize("bad", [{1, 2}, b"x", object(), (1, 2)])
def test_non_json_argument_values_are_refused(bad: object) -> None:
    _refused(JsonSchemaArgumentValidator().validate(OPEN, {"a": bad}), "data.a", "not a JSON")


def test_errors_name_the_path_and_the_rule() -> None:
    schema = {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {"type": "object", "properties": {"qty": {"type": "integer"}}},
            }
        },
    }
    result = JsonSchemaArgumentValidator().validate(schema, {"items": [{"qty": 1}, {"qty": "2"}]})
    _refused(result, "data.items[1].qty", "must be integer", "rule: type")


def test_error_text_is_bounded() -> None:
    schema = {"enum": ["x" * 5_000]}
    result = JsonSchemaArgumentValidator().validate(schema, "y" * 50_000)
    assert not result.ok
    assert len(result.errors[0].message) <= 300
    missing = {"required": [f"field{i}" for i in range(2_000)]}
    result = JsonSchemaArgumentValidator().validate(missing, {})
    assert len(result.errors[0].message) <= 300


def test_defaults_are_never_written_into_arguments() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"default": 1},
            "b": {"type": "object", "properties": {"c": {"default": 2}}},
        },
    }
    value: dict[str, Any] = {"b": {}}
    assert JsonSchemaArgumentValidator().validate(schema, value).ok
    assert value == {"b": {}}


@pytest.mark.parametrize(
    "dialect",
    ["http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2020-12/schema"],
)
def test_lone_surrogates_are_refused_by_the_engine_not_raised(dialect: str) -> None:
    # jsonschema-rs works on Rust strings, which cannot hold a lone surrogate:
    # such an instance fails closed with a clear reason.
    schema = {"$schema": dialect, "type": "string", "pattern": "^a"}
    for value in ("a\ud800", "\ud800a"):
        result = JsonSchemaArgumentValidator().validate(schema, value)
        assert not result.ok
        assert "lone surrogate" in result.errors[0].message


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=30,
)

_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 10},
        "n": {"type": "integer", "minimum": 0, "maximum": 100},
        "tags": {"type": "array", "items": {"type": "string", "format": "email"}},
    },
    "patternProperties": {"^x-": {"type": "number"}},
    "additionalProperties": True,
}


@settings(max_examples=150, deadline=None)
@given(value=_json)
def test_arbitrary_arguments_never_raise_or_mutate(value: Any) -> None:
    before = copy.deepcopy(value)
    result = JsonSchemaArgumentValidator().validate(_SCHEMA, value)
    assert isinstance(result.ok, bool)
    assert repr(value) == repr(before)
    if result.ok:
        assert isinstance(value, dict)


_SMALL = SchemaLimits(
    max_instance_depth=3,
    max_instance_properties=6,
    max_string_length=6,
    max_array_length=6,
)
_wild = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from([b"x", (1,), {1}, 1j]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(max_size=7) | st.sampled_from(["__proto__", "prototype", 1, None]),
            children,
            max_size=4,
        )
    ),
    max_leaves=20,
)


def _within(value: object, limits: SchemaLimits) -> bool:
    """The instance limits written plainly (recursively): the reference for the validator."""
    totals = {"members": 0, "items": 0, "chars": 0}

    def fits(node: object, depth: int) -> bool:
        if type(node) is dict:
            totals["members"] += len(node)
            return depth <= limits.max_instance_depth and all(
                type(key) is str
                and len(key) <= limits.max_string_length
                and key not in {"__proto__", "constructor", "prototype"}
                and fits(item, depth + 1)
                for key, item in node.items()
            )
        if type(node) is list:
            totals["items"] += len(node)
            return depth <= limits.max_instance_depth and all(fits(i, depth + 1) for i in node)
        if type(node) is str:
            totals["chars"] += len(node)
            return len(node) <= limits.max_string_length
        if type(node) is float:
            return math.isfinite(node)
        if type(node) is int:
            return -(2**63) <= node <= 2**64 - 1  # the integers Prism validates
        return node is None or type(node) is bool

    return (
        fits(value, 1)
        and totals["members"] <= limits.max_instance_properties
        and totals["items"] <= limits.max_array_length
        and totals["chars"] <= 8 * limits.max_string_length
    )


@settings(max_examples=250, deadline=None)
@given(value=_wild)
# The corners random data rarely reaches: every kind of problem at the root and in a list.
@example(value=math.nan)
@example(value=-math.inf)
@example(value="a" * 7)
@example(value={1})
@example(value=[math.inf])
@example(value=[b"x"])
@example(value=["a" * 7])
@example(value={"a": 1j})
@example(value={"a" * 7: 1})
@example(value={**dict.fromkeys("abcde", "a" * 6), "g": ["a" * 6] * 6})  # 66 characters
@example(value=[[[[]]]])
def test_the_instance_limits_match_a_plain_reference(value: Any) -> None:
    # A draft-07 schema that accepts everything: only the instance limits can refuse.
    result = JsonSchemaArgumentValidator(limits=_SMALL).validate({"$schema": D7}, value)
    assert result.ok == _within(value, _SMALL), result
    if not result.ok:  # and the refusal names where the value breaks a limit
        error = result.errors[0]
        assert error.path is not None
        assert error.path.startswith("data")
        assert error.message != "breaks an instance limit"
