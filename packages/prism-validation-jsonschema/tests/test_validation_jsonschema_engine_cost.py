"""The cost model matches the engine: nested ``unevaluated*``, error paths, the closed path.

jsonschema-rs re-evaluates a schema's in-place applicators to decide what
``unevaluatedProperties``/``unevaluatedItems`` leave unevaluated, so nesting
multiplies (about 2.6x per level); it builds an ``anyOf``/``oneOf`` refusal from
every failing branch's errors; and it reads a whole argument before checking
it. Each of these is priced or cut before the engine runs. The property test
generates nested applicators with ``unevaluated*``, ``$ref`` chains and wide
arrays, and checks that every admitted schema answers every instance within the
limits in bounded CPU time of the calling thread (the event loop's): at most
``_STALL`` seconds, a generous multiple of the budgets' worst case (about 28 ms
for ``max_validation_work``), where the unpriced shapes took seconds.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prism.core import JsonObject, ToolCall, ToolDefinition, ToolExecutionContext, ToolResult
from prism.validation.jsonschema import (
    JsonSchemaArgumentValidator,
    SchemaLimits,
    SchemaRejectedError,
    create_json_schema_tool_validator,
)

# CPU seconds of the calling thread, per validation; five times that under a
# tracer (coverage runs every Python line of the instance walk several times slower).
_TRACED = sys.gettrace() is not None or "coverage" in sys.modules
_STALL = 0.5 if _TRACED else 0.1


def _cpu(call: Any, *args: object) -> tuple[Any, float]:
    # The garbage collector off: a full collection over this module's big
    # instances is not the validation's cost (it once showed up as 0.3 s).
    gc.disable()
    try:
        start = time.thread_time()
        result = call(*args)
        return result, time.thread_time() - start
    finally:
        gc.enable()


def _nest(levels: int, wrap: str, *, items: bool = False) -> dict[str, Any]:
    keyword = "unevaluatedItems" if items else "unevaluatedProperties"
    schema: dict[str, Any] = (
        {"prefixItems": [{}], keyword: False}
        if items
        else {"properties": {"a": {}}, keyword: False}
    )
    for _ in range(levels):
        if wrap == "if":
            schema = {"if": schema, keyword: False}
        elif wrap == "then":
            schema = {"if": True, "then": schema, keyword: False}
        else:
            schema = {wrap: [schema], keyword: False}
    return schema


@pytest.mark.parametrize("wrap", ["allOf", "anyOf", "oneOf", "if", "then"])
@pytest.mark.parametrize("items", [False, True])
def test_nested_unevaluated_is_refused_at_admission(wrap: str, items: bool) -> None:
    # 17 levels took 1.4-2.2 s per call in the engine; each level costs ~2.6x.
    validator = JsonSchemaArgumentValidator()
    with pytest.raises(SchemaRejectedError, match="max_schema_work"):
        validator.check_schema(_nest(17, wrap, items=items))
    result, _spent = _cpu(
        validator.validate, _nest(17, wrap, items=items), [1] if items else {"a": 1}
    )
    assert not result.ok
    assert "max_schema_work" in result.errors[0].message


def test_shallow_unevaluated_is_admitted_and_exact() -> None:
    validator = JsonSchemaArgumentValidator()
    schema = {
        "allOf": [{"properties": {"a": {"type": "integer"}}}],
        "properties": {"b": {"type": "string"}},
        "unevaluatedProperties": False,
    }
    assert validator.validate(schema, {"a": 1, "b": "x"}).ok
    refused = validator.validate(schema, {"a": 1, "c": 2})
    assert not refused.ok
    assert "unevaluatedProperties" in refused.errors[0].message


def test_a_refused_any_of_over_a_big_array_is_answered_without_its_context() -> None:
    # The engine's refusal carries every failing branch's per-item errors as
    # Python objects: 2.6 s for 100,000 items. is_valid answers in microseconds.
    validator = JsonSchemaArgumentValidator()
    schema = {"anyOf": [{"items": {"type": "string"}}, {"items": {"type": "string"}}]}
    result, spent = _cpu(validator.validate, schema, [1] * 100_000)
    assert not result.ok
    assert "anyOf or oneOf" in result.errors[0].message
    assert spent < _STALL
    small = validator.validate(schema, [1, 2])
    assert small.errors[0].message == "cannot be validated by any definition (rule: anyOf)"
    assert validator.validate(schema, ["a"] * 100_000).ok


CLOSED: JsonObject = {
    "type": "object",
    "properties": {
        "n": {"type": "integer"},
        "tags": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 10}},
    },
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"n": 10**3_000_000}, "data.n: is an integer outside the 64-bit range"),
        # Past the instance limits: refused by them before the engine reads anything.
        ({"n": 1, "tags": ["x"] * 2_000_000}, "data.tags: has more array items than max_array"),
        ({"n": 1, "other": ["x"] * 2_000_000}, "data.other: has more array items than max_array"),
        ({"n": ["x"] * 2_000_000}, "data.n: has more array items than max_array_length"),
        # Within them: the schema's own refusal.
        ({"n": 1, "tags": ["x"] * 90_000}, "data.tags: must contain less than or equal to 3 items"),
        ({"n": 1, "other": ["x"] * 90_000}, "data: must not contain {'other'} properties"),
        ({"n": ["x"] * 90_000}, "data.n: must be integer"),
        ({"tags": [10**3_000_000]}, "data.tags[0]: is an integer outside the 64-bit range"),
        ({"n": 1, "tags": "x" * 3_000_000}, "data.tags: is longer than max_string_length"),
        ({"n": 1, "tags": [[[["x"] * 2_000_000]]]}, "has more array items than max_array_length"),
    ],
)
def test_the_closed_fast_path_bounds_arguments_before_the_engine_reads_them(
    arguments: dict[str, Any], expected: str
) -> None:
    # These cost 315-400 ms in the engine when it read them whole.
    async def noop(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:  # pragma: no cover
        return ToolResult.text("never runs")

    check = create_json_schema_tool_validator()
    tool = ToolDefinition(name="t", execute=noop, parameters=CLOSED)
    context = ToolExecutionContext(ToolCall(id="1", name="t", arguments={}))
    assert check(tool, {"n": 1, "tags": ["a"]}, context) is None
    info, spent = _cpu(check, tool, arguments, context)
    assert info is not None
    assert expected in info.message, info.message
    assert spent < _STALL
    # The caller's arguments are never cut in place.
    for value in arguments.values():
        if type(value) is list and value and value[0] == "x":
            assert len(value) in (90_000, 2_000_000)


# -- the property: every admitted schema validates within bounded time ----------

_leaves = st.sampled_from(
    [
        {"properties": {"a": {}}},
        {"patternProperties": {"": {}}},
        {"prefixItems": [{}]},
        {"type": "integer"},
        True,
        {},
        {"properties": {"a": {"minimum": 0}}, "required": ["a"]},
        {"items": {"type": "integer"}},
        # Numbers the engine compares through arbitrary-precision fractions.
        {"enum": list(range(100))},
        {"enum": [1e-300 * (i + 1) for i in range(40)]},
        {"enum": [0.5 * i for i in range(100)]},
        {"const": 2.2250738585072014e-308},
        {"maximum": 1.5},
        {"exclusiveMinimum": -1.5, "multipleOf": 1},
        {"items": {"minimum": 0, "maximum": 1.5}},
        {"enum": [{"k": f"v{i}"} for i in range(500)] + [[1e-300, 0.5]]},
    ]
)
_unevaluated = st.sampled_from(
    [
        {"unevaluatedProperties": False},
        {"unevaluatedItems": False},
        {"unevaluatedProperties": False, "unevaluatedItems": False},
        {"unevaluatedProperties": {"type": "integer"}},
        {},
    ]
)


def _extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    some = st.lists(children, min_size=1, max_size=3)
    return st.builds(
        lambda shape, ue: {**shape, **ue},
        st.one_of(
            st.builds(lambda cs: {"allOf": cs}, some),
            st.builds(lambda cs: {"anyOf": cs}, some),
            st.builds(lambda cs: {"oneOf": cs}, some),
            st.builds(
                lambda a, b, c: {"if": a, "then": b, "else": c}, children, children, children
            ),
            st.builds(lambda c: {"not": c}, children),
            st.builds(lambda c: {"dependentSchemas": {"a": c}}, children),
            st.builds(lambda c, d: {"properties": {"a": c}, "items": d}, children, children),
            st.builds(lambda c: {"$defs": {"d": c}, "$ref": "#/$defs/d"}, children),
        ),
        _unevaluated,
    )


def _hoist(schema: Any) -> Any:
    """Move each ``{"$defs": {"d": ...}, "$ref": ...}`` to a root ``$defs`` entry of its own."""
    table: dict[str, Any] = {}

    def walk(node: Any) -> Any:
        if type(node) is list:
            return [walk(item) for item in node]
        if type(node) is not dict:
            return node
        node = dict(node)
        if "$defs" in node and "$ref" in node:
            name = f"d{len(table)}"
            table[name] = None
            table[name] = walk(node.pop("$defs")["d"])
            node["$ref"] = f"#/$defs/{name}"
        return {key: value if key == "$ref" else walk(value) for key, value in node.items()}

    root = walk(schema)
    if type(root) is dict and table:
        root["$defs"] = table
    return root


def _chain(levels: int) -> dict[str, Any]:
    table = {
        f"c{i}": {"$ref": f"#/$defs/c{i + 1}", "unevaluatedProperties": False}
        for i in range(levels)
    }
    table[f"c{levels}"] = {"properties": {"a": {}}}
    return {"$defs": table, "allOf": [{"$ref": "#/$defs/c0"}], "unevaluatedProperties": False}


_schemas = st.one_of(
    st.recursive(_leaves, _extend, max_leaves=10).map(_hoist),
    st.builds(_chain, st.integers(1, 60)),
)

_INSTANCES: list[object] = [
    {"a": 1},
    {f"k{i}": {"a": 1} for i in range(2_000)},
    {f"k{i}": 1 for i in range(10_000)},
    [1] * 100_000,
    ["x"] * 50_000,
    [[1, [1]]] * 5_000,
    {"a": [{"a": {"a": 1}}] * 5_000},
    json.loads('{"a":' * 60 + "1" + "}" * 60),
    [5e-324] * 30_000,
    [0.3, 1e-300] * 10_000,
    [2**64 - 1] * 10_000,
    {f"k{i}": 2.2250738585072014e-308 for i in range(2_000)},
    [{"k": "v499"}] * 10_000,
]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(schema=_schemas)
def test_every_admitted_schema_validates_within_bounded_time(schema: Any) -> None:
    validator = JsonSchemaArgumentValidator()
    if type(schema) is not dict:
        schema = {"allOf": [schema]}
    try:
        compiled, spent = _cpu(validator.compile, schema)
    except SchemaRejectedError:
        return
    for instance in _INSTANCES:
        result, spent = _cpu(compiled.validate, instance)
        assert spent < _STALL, (json.dumps(schema)[:2000], json.dumps(instance)[:80], spent)
        if not result.ok:
            assert result.errors[0].message


# -- admission: every object and array counts against max_keywords ---------------


def _chain_with_defs(unused: int, levels: int = 64) -> dict[str, Any]:
    table: dict[str, Any] = {f"u{i}": {"type": "string"} for i in range(unused)}
    for i in range(levels):
        table[f"c{i}"] = {"$ref": f"#/$defs/c{i + 1}"}
    table[f"c{levels}"] = {"type": "integer"}
    return {"$defs": table, "$ref": "#/$defs/c0"}


@pytest.mark.parametrize(
    "schema",
    [
        {"prefixItems": [{}] * 80_000},
        {"allOf": [{}] * 80_000},
        {"anyOf": [[]] * 80_000},
        _chain_with_defs(4_800),
    ],
    ids=["prefixItems", "allOf", "arrays", "defs-and-chain"],
)
def test_schemas_of_many_empty_parts_are_refused_by_their_count(schema: dict[str, Any]) -> None:
    # Under max_schema_bytes, without object members to count: 1-3 s to admit before.
    with pytest.raises(SchemaRejectedError, match=r"max_keywords=10000 members \(object members"):
        JsonSchemaArgumentValidator().check_schema(schema)


def test_the_count_includes_objects_and_arrays_exactly() -> None:
    # {"allOf": [{}, ... n]}: 1 member, 1 array, n + 1 objects.
    limits = SchemaLimits(max_keywords=103)
    JsonSchemaArgumentValidator(limits=limits).check_schema({"allOf": [{}] * 100})
    with pytest.raises(SchemaRejectedError, match="max_keywords=103"):
        JsonSchemaArgumentValidator(limits=limits).check_schema({"allOf": [{}] * 101})
    assert JsonSchemaArgumentValidator().validate(_chain_with_defs(3_000), 5).ok
