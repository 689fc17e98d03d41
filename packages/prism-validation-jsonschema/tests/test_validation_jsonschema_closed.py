"""The closed-schema fast path gives exactly the verdicts of the full path."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prism.core import ToolCall, ToolDefinition, ToolExecutionContext, ToolResult
from prism.validation.jsonschema import (
    JsonSchemaArgumentValidator,
    SchemaLimits,
    create_json_schema_tool_argument_validator,
)
from prism.validation.jsonschema._closed import closed_property_count
from prism.validation.jsonschema._validator import _Entry

CLOSED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "maxLength": 20, "pattern": "^[a-z ]+$"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100},
        "sort": {"enum": ["date", "title", 3, None]},
        "flag": {"type": "boolean"},
        "nothing": {"type": "null"},
        "tags": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 5}},
        "day": {"type": "string", "format": "date", "maxLength": 10},
    },
    "required": ["query"],
    "additionalProperties": False,
}


def _variant(**changes: Any) -> dict[str, Any]:
    schema = copy.deepcopy(CLOSED)
    for name, sub in changes.items():
        if sub is None:
            del schema["properties"][name]
        else:
            schema["properties"][name] = sub
    return schema


def test_a_closed_schema_is_recognised() -> None:
    assert closed_property_count(CLOSED, SchemaLimits()) == 7


@pytest.mark.parametrize(
    "schema",
    [
        {**CLOSED, "additionalProperties": True},
        {key: value for key, value in CLOSED.items() if key != "additionalProperties"},
        {**CLOSED, "patternProperties": {"^x": {}}},
        {**CLOSED, "anyOf": [{"required": ["limit"]}]},
        _variant(query={"type": "string"}),  # unbounded string
        _variant(query={"type": "string", "pattern": "^.{0,5}$"}),
        _variant(limit={"type": "number"}),  # NaN would pass
        _variant(limit={"type": ["integer", "null"]}),
        _variant(tags={"type": "array", "items": {"type": "string", "maxLength": 5}}),
        _variant(tags={"type": "array", "maxItems": 3, "items": {"type": "object"}}),
        _variant(tags={"type": "array", "maxItems": 3, "items": [{"type": "integer"}]}),
        _variant(sort={"enum": [{"a": 1}]}),
        _variant(flag={"$ref": "#/definitions/b"}),
        _variant(flag={"type": "boolean", "not": {"const": True}}),
        _variant(flag=True),
    ],
)
def test_anything_else_is_not_closed(schema: dict[str, Any]) -> None:
    assert closed_property_count(schema, SchemaLimits()) is None


def test_limits_tighter_than_the_schema_make_it_not_closed() -> None:
    assert closed_property_count(CLOSED, SchemaLimits(max_string_length=10)) is None
    assert closed_property_count(CLOSED, SchemaLimits(max_array_length=2)) is None
    assert closed_property_count(CLOSED, SchemaLimits(max_instance_properties=6)) is None
    assert closed_property_count(CLOSED, SchemaLimits(max_instance_depth=1)) is None


_names = st.sampled_from([*CLOSED["properties"], "__proto__", "other", "constructor"])
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 200)
    | st.floats()
    | st.text(alphabet="abc -1\n", max_size=25)
    | st.sampled_from(["date", "title", "2024-02-29", "2024-02-30"]),
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(st.text(alphabet="abc_", max_size=4) | _names, children, max_size=4)
    ),
    max_leaves=25,
)
_plausible = st.fixed_dictionaries(
    {"query": st.text(alphabet="abc ", max_size=25) | _json},
    optional={
        "limit": st.integers(-2, 120) | st.floats() | _json,
        "sort": st.sampled_from(["date", "title", 3, 3.0, None, True, "x"]),
        "flag": st.booleans() | st.none(),
        "nothing": st.none() | st.integers(0, 1),
        "tags": st.lists(st.text(alphabet="ab", max_size=7), max_size=5) | _json,
        "day": st.sampled_from(["2024-02-29", "2023-02-29", "2024-1-1", "x" * 12]),
    },
)
_extras = st.dictionaries(_names, _json, max_size=2)
_instances = (
    _plausible
    | st.builds(lambda base, extra: {**base, **extra}, _plausible, _extras)
    | st.dictionaries(_names, _json, max_size=9)
    | _json
)


_VALIDATOR = JsonSchemaArgumentValidator(
    limits=SchemaLimits(max_instance_depth=3, max_string_length=24)
)
_FAST = _VALIDATOR.entry(CLOSED)
_FULL = _Entry(_FAST.key, _FAST.function, None, closed=None)


@settings(max_examples=300, deadline=None)
@given(value=_instances)
def test_the_fast_path_agrees_with_the_full_path(value: Any) -> None:
    assert _FAST.closed == 7
    assert _VALIDATOR.check(_FAST, value) == _VALIDATOR.check(_FULL, value)


async def _noop(_args: Any, _ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text("ok")


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"query": "abc", "limit": math.nan}, "data.limit: is not a finite number"),
        ({"query": "abc", "__proto__": {}}, "data: has the forbidden key '__proto__'"),
        ({"query": "abc", "limit": 0}, "data.limit: must be bigger than or equal to 1"),
        ({"query": "ABC"}, "data.query: must match pattern ^[a-z ]+$"),
    ],
)
def test_the_tool_validator_hot_path_reports_like_the_full_path(
    arguments: dict[str, Any], expected: str
) -> None:
    check = create_json_schema_tool_argument_validator()
    tool = ToolDefinition(name="t", execute=_noop, parameters=CLOSED)
    context = ToolExecutionContext(ToolCall(id="1", name="t", arguments={}))
    assert check(tool, {"query": "warm up"}, context) is None
    info = check(tool, arguments, context)
    assert info is not None
    assert expected in info.message
    assert check.cache_info().misses == 1
