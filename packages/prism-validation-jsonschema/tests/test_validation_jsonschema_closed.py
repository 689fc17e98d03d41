"""The closed-schema fast path: the verdicts of the full path, and never past the limits.

A closed schema (``additionalProperties: false`` over bounded scalars) skips the
instance walk, since its own checks imply the limits. These tests prove through
the public API that such a schema gives the verdicts of an equivalent schema on
the full path, and that every schema which is *not* closed still has the
limits enforced: each case pairs it with a value the schema itself accepts but
the limits refuse.
"""

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
    create_json_schema_tool_validator,
)

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


_LIMITS = SchemaLimits(max_instance_depth=3, max_string_length=24, max_array_length=4)
_LONG = "a" * 25  # one character past max_string_length


@pytest.mark.parametrize(
    ("schema", "value", "path"),
    [
        ({**CLOSED, "additionalProperties": True}, {"query": "a", "x": _LONG}, "data.x"),
        (
            {key: value for key, value in CLOSED.items() if key != "additionalProperties"},
            {"query": "a", "x": _LONG},
            "data.x",
        ),
        ({**CLOSED, "patternProperties": {"^x": {}}}, {"query": "a", "x": _LONG}, "data.x"),
        (_variant(query={"type": "string"}), {"query": _LONG}, "data.query"),
        (
            _variant(tags={"type": "array", "items": {"type": "string", "maxLength": 5}}),
            {"query": "a", "tags": ["a"] * 5},
            "data.tags",
        ),
        (
            _variant(tags={"type": "array", "maxItems": 3, "items": {"type": "object"}}),
            {"query": "a", "tags": [{"b": _LONG}]},
            "data.tags[0].b",
        ),
        (_variant(flag=True), {"query": "a", "flag": _LONG}, "data.flag"),
        (_variant(flag=True), {"query": "a", "flag": [[[1]]]}, "data.flag[0][0]"),
    ],
)
def test_a_schema_that_is_not_closed_has_the_limits_enforced(
    schema: dict[str, Any], value: dict[str, Any], path: str
) -> None:
    unlimited = JsonSchemaArgumentValidator()
    assert unlimited.validate(schema, value).ok  # the schema itself accepts the value
    result = JsonSchemaArgumentValidator(limits=_LIMITS).validate(schema, value)
    assert not result.ok
    assert result.errors[0].path == path
    assert "max_" in result.errors[0].message


@pytest.mark.parametrize(
    ("limits", "value"),
    [
        (SchemaLimits(max_string_length=10), {"query": "a" * 11}),
        (SchemaLimits(max_array_length=2), {"query": "a", "tags": ["a"] * 3}),
        (
            SchemaLimits(max_instance_properties=6),
            {
                "query": "a",
                "limit": 1,
                "sort": "date",
                "flag": True,
                "nothing": None,
                "tags": [],
                "day": "2024-01-31",
            },
        ),
        (SchemaLimits(max_instance_depth=1), {"query": "a", "tags": []}),
    ],
)
def test_limits_tighter_than_a_closed_schema_are_enforced(
    limits: SchemaLimits, value: dict[str, Any]
) -> None:
    assert JsonSchemaArgumentValidator().validate(CLOSED, value).ok
    result = JsonSchemaArgumentValidator(limits=limits).validate(CLOSED, value)
    assert not result.ok
    assert "max_" in result.errors[0].message


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


_VALIDATOR = JsonSchemaArgumentValidator(limits=_LIMITS)
# The same checks with a root keyword the closed analysis does not know: the full path.
_FULL = {**CLOSED, "allOf": [{}]}
_ANYTHING = {"$schema": "http://json-schema.org/draft-07/schema#"}


@settings(max_examples=150, deadline=None)
@given(value=_instances)
def test_the_fast_path_agrees_with_the_full_path(value: Any) -> None:
    fast = _VALIDATOR.validate(CLOSED, value)
    full = _VALIDATOR.validate(_FULL, value)
    assert fast.ok == full.ok
    if _VALIDATOR.validate(_ANYTHING, value).ok:  # within the limits: the same error too
        assert fast == full


async def _noop(_args: Any, _ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text("ok")


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        # A closed schema's verdict is the answer: its own error is reported.
        # What the engine would misread or read slowly is refused before it runs,
        # in the full path's words.
        ({"query": "abc", "limit": math.nan}, "data.limit: is not a finite number"),
        ({"query": "abc", "__proto__": {}}, "data: has the forbidden key '__proto__'"),
        # An undeclared key sends the value to the instance walk, which names a
        # pollution key before the engine sees it.
        ({"query": "abc", "__proto__": 1}, "data: has the forbidden key '__proto__'"),
        ({"query": "abc", "other": 1}, "data: must not contain {'other'} properties"),
        ({"query": "abc", "limit": 0}, "data.limit: must be bigger than or equal to 1"),
        ({"query": "ABC"}, "data.query: must match pattern ^[a-z ]+$"),
        # A value the engine cannot read is described by the instance walk.
        ({"query": {"a"}}, "data.query: is a set, not a JSON value"),
    ],
)
def test_the_tool_validator_hot_path_reports_clearly(
    arguments: dict[str, Any], expected: str
) -> None:
    check = create_json_schema_tool_validator()
    tool = ToolDefinition(name="t", execute=_noop, parameters=CLOSED)
    context = ToolExecutionContext(ToolCall(id="1", name="t", arguments={}))
    assert check(tool, {"query": "warm up"}, context) is None
    info = check(tool, arguments, context)
    assert info is not None
    assert expected in info.message
    assert check.cache_info().misses == 1
