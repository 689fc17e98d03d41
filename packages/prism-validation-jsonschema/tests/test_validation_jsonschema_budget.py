"""Bounded work: the expanded schema is capped at admission, each call's cost before it runs.

Every hostile class from issue 13 is here, in both dialects (draft-07 and
2020-12, both on jsonschema-rs now): exponential ``$ref`` fan-out,
expensive patterns on huge strings, ``format: regex`` on a huge argument, huge
enums times big arrays. Each is refused by the budgets (or, where harmless,
answered) before any schema code could run long; how long each one holds the
event loop is measured by ``benchmarks/bench_validation.py`` (the ``stall:``
rows), not asserted here.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prism.validation.jsonschema import JsonSchemaArgumentValidator, SchemaLimits

if TYPE_CHECKING:
    from prism.core import ToolArgumentValidationResult

D7 = "http://json-schema.org/draft-07/schema#"
D2020 = "https://json-schema.org/draft/2020-12/schema"
DIALECTS = [D7, D2020]


def _with(dialect: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"$schema": dialect, **schema}


def _defs(dialect: str) -> str:
    return "definitions" if dialect == D7 else "$defs"


def _refused(result: ToolArgumentValidationResult, *words: str) -> str:
    assert not result.ok
    message = result.errors[0].message
    assert message.startswith("schema rejected"), message
    for word in words:
        assert word in message, message
    return message


def _over_budget(result: ToolArgumentValidationResult, word: str) -> None:
    assert not result.ok
    message = result.errors[0].message
    assert not message.startswith("schema rejected"), message
    assert word in message, message


def _fan_out(dialect: str, levels: int) -> dict[str, Any]:
    # Each level references the next twice (allOf + anyOf): 2**levels evaluations.
    defs = _defs(dialect)
    table: dict[str, Any] = {
        f"l{i}": {
            "allOf": [{"$ref": f"#/{defs}/l{i + 1}"}],
            "anyOf": [{"$ref": f"#/{defs}/l{i + 1}"}],
        }
        for i in range(levels)
    }
    table[f"l{levels}"] = {"type": "string"}
    return _with(dialect, {defs: table, "allOf": [{"$ref": f"#/{defs}/l0"}]})


# -- the expanded graph, at admission ----------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
def test_exponential_ref_fan_out_is_refused_at_admission_naming_the_path(dialect: str) -> None:
    schema = _fan_out(dialect, 22)
    assert len(json.dumps(schema)) < 3_000
    message = _refused(JsonSchemaArgumentValidator().validate(schema, "x"), "max_schema_work")
    assert "each $ref counted at every place it is reached" in message
    path = JsonSchemaArgumentValidator().validate(schema, "x").errors[0].path
    assert path is not None
    assert path.startswith(f"#/{_defs(dialect)}/l")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_small_fan_out_is_admitted_and_validates(dialect: str) -> None:
    schema = _fan_out(dialect, 6)
    validator = JsonSchemaArgumentValidator()
    assert validator.validate(schema, "x").ok
    assert not validator.validate(schema, 1).ok


@pytest.mark.parametrize("dialect", DIALECTS)
def test_recursion_that_doubles_per_instance_level_is_refused(dialect: str) -> None:
    twice = {"properties": {"a": {"$ref": "#"}}}
    schema = _with(dialect, {"allOf": [twice, twice]})
    _refused(JsonSchemaArgumentValidator().validate(schema, {}), "max_schema_work")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_binary_tree_schema_is_admitted_and_checks_deep_values(dialect: str) -> None:
    schema = _with(
        dialect,
        {
            "type": "object",
            "properties": {
                "value": {"type": "integer"},
                "left": {"$ref": "#"},
                "right": {"$ref": "#"},
            },
        },
    )
    tree: dict[str, Any] = {"value": 1}
    for _ in range(30):
        tree = {"value": 0, "left": tree, "right": {"value": 2}}
    validator = JsonSchemaArgumentValidator()
    assert validator.validate(schema, tree).ok
    leaf = tree
    while "left" in leaf:
        leaf = leaf["left"]
    leaf["value"] = "x"
    assert not validator.validate(schema, tree).ok


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_recursive_json_value_schema_is_admitted(dialect: str) -> None:
    # anyOf with an array branch and an object branch, both recursing: an
    # instance node is one or the other, so this does not double per level.
    defs = _defs(dialect)
    schema = _with(
        dialect,
        {
            defs: {
                "json": {
                    "anyOf": [
                        {"type": ["string", "number", "boolean", "null"]},
                        {"type": "array", "items": {"$ref": f"#/{defs}/json"}},
                        {"type": "object", "additionalProperties": {"$ref": f"#/{defs}/json"}},
                    ]
                }
            },
            "$ref": f"#/{defs}/json",
        },
    )
    deep = json.loads('{"a":' * 50 + '[1, 2, {"b": "x"}]' + "}" * 50)
    validator = JsonSchemaArgumentValidator()
    assert validator.validate(schema, deep).ok
    assert not validator.validate(schema, {"a": [{"b": {1, 2}}]}).ok


@pytest.mark.parametrize("dialect", DIALECTS)
def test_two_branches_recursing_into_the_same_member_are_refused(dialect: str) -> None:
    schema = _with(
        dialect,
        {"anyOf": [{"properties": {"a": {"$ref": "#"}}}, {"properties": {"a": {"$ref": "#"}}}]},
    )
    _refused(JsonSchemaArgumentValidator().validate(schema, {}), "max_schema_work")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_reference_cycle_that_never_descends_is_refused(dialect: str) -> None:
    defs = _defs(dialect)
    schema = _with(
        dialect,
        {defs: {"a": {"anyOf": [{"$ref": f"#/{defs}/b"}]}, "b": {"not": {"$ref": f"#/{defs}/a"}}}},
    )
    schema["allOf"] = [{"$ref": f"#/{defs}/a"}]
    _refused(JsonSchemaArgumentValidator().validate(schema, 1), "never descends")


def test_max_schema_work_is_the_cap_that_decides() -> None:
    schema = _fan_out(D2020, 10)  # about 2**11 evaluations at the root
    assert JsonSchemaArgumentValidator().validate(schema, "x").ok
    tight = JsonSchemaArgumentValidator(limits=SchemaLimits(max_schema_work=1_000))
    _refused(tight.validate(schema, "x"), "max_schema_work=1000")


# -- per-call budgets ---------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
def test_an_expensive_pattern_on_a_huge_string_fails_the_call(dialect: str) -> None:
    schema = _with(dialect, {"type": "string", "pattern": "(.*a){20}"})
    validator = JsonSchemaArgumentValidator()
    _over_budget(validator.validate(schema, "a" * 1_000_000), "max_regex_work")
    assert validator.validate(schema, "a" * 20).ok  # short strings still match


@pytest.mark.parametrize("dialect", DIALECTS)
def test_eight_huge_strings_add_up_against_the_regex_budget(dialect: str) -> None:
    schema = _with(dialect, {"type": "array", "items": {"type": "string", "pattern": "(.*a){20}"}})
    validator = JsonSchemaArgumentValidator()
    _over_budget(validator.validate(schema, ["a" * 125_000] * 8), "max_regex_work")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_cheap_pattern_on_a_huge_string_is_still_checked(dialect: str) -> None:
    schema = _with(dialect, {"type": "string", "pattern": "^[a-z]+$"})
    validator = JsonSchemaArgumentValidator()
    assert validator.validate(schema, "a" * 1_000_000).ok
    assert not validator.validate(schema, "a" * 999_999 + "!").ok


@pytest.mark.parametrize("dialect", DIALECTS)
def test_pattern_properties_keys_count_against_the_regex_budget(dialect: str) -> None:
    schema = _with(dialect, {"type": "object", "patternProperties": {"(.*a){20}": {}}})
    value = {"a" * 1_000 + str(i): 1 for i in range(1_000)}
    _over_budget(JsonSchemaArgumentValidator().validate(schema, value), "max_regex_work")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_format_regex_on_a_huge_argument_fails_the_call(dialect: str) -> None:
    schema = _with(dialect, {"type": "string", "format": "regex"})
    validator = JsonSchemaArgumentValidator(assert_formats=True)
    _over_budget(validator.validate(schema, "(a|b)" * 3_200), "max_regex_work")
    assert validator.validate(schema, "^(a|b)+$").ok
    assert not validator.validate(schema, "(unclosed").ok


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_huge_enum_times_a_big_array_fails_the_call(dialect: str) -> None:
    schema = _with(dialect, {"type": "array", "items": {"enum": list(range(10_000))}})
    validator = JsonSchemaArgumentValidator()
    _over_budget(validator.validate(schema, [1] * 100_000), "max_validation_work")
    # Each number of the enum costs 4 units per item (a float item meets each
    # at about 110 ns): 20 items fit the default budget, 100 do not.
    assert validator.validate(schema, [1] * 20).ok
    _over_budget(validator.validate(schema, [1.5] * 100), "max_validation_work")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_many_branches_times_a_big_array_fails_the_call(dialect: str) -> None:
    branches = [
        {"type": "object", "properties": {"a": {"minimum": i}}, "required": ["a"]}
        for i in range(30)
    ]
    schema = _with(dialect, {"type": "array", "items": {"anyOf": branches}})
    validator = JsonSchemaArgumentValidator()
    _over_budget(validator.validate(schema, [{"a": -1}] * 9_000), "max_validation_work")
    assert not validator.validate(schema, [{"a": -1}] * 10).ok
    assert validator.validate(schema, [{"a": 20}] * 10).ok


def test_budgets_are_limits_a_caller_can_raise() -> None:
    schema = {"type": "string", "pattern": "(.*a){20}"}
    generous = JsonSchemaArgumentValidator(limits=SchemaLimits(max_regex_work=300_000_000))
    assert generous.validate(schema, "a" * 100_000).ok


# -- the event loop -----------------------------------------------------------

_EVIL_PATTERNS = ["(.*a){20}", "^(a+)+$", "[a-q][^u-z]{13}x", "(\\w+\\s?)*$", "^[a-z]+$"]

_leaf_schemas = st.one_of(
    st.just({"type": "string"}),
    st.builds(lambda p: {"type": "string", "pattern": p}, st.sampled_from(_EVIL_PATTERNS)),
    st.just({"type": "integer", "minimum": 0}),
    st.builds(lambda n: {"enum": list(range(n))}, st.sampled_from([1, 100, 10_000])),
    st.just({"format": "regex"}),
    st.just({"format": "email"}),
    st.just({"uniqueItems": True}),
)


def _extend(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.builds(lambda c: {"type": "array", "items": c}, children),
        st.builds(lambda cs: {"anyOf": cs}, st.lists(children, min_size=1, max_size=6)),
        st.builds(lambda cs: {"allOf": cs}, st.lists(children, min_size=1, max_size=6)),
        st.builds(lambda c: {"not": c}, children),
        st.builds(
            lambda c: {"type": "object", "additionalProperties": c, "patternProperties": {"a": c}},
            children,
        ),
        st.builds(lambda c: {"$defs": {"d": c}, "$ref": "#/$defs/d"}, children),
        st.builds(
            lambda cs, c: {"prefixItems": cs, "unevaluatedItems": c},
            st.lists(children, min_size=1, max_size=4),
            children,
        ),
        st.builds(
            lambda c: {"anyOf": [{"properties": {"a": c}}, c], "unevaluatedProperties": c},
            children,
        ),
        st.builds(lambda c: {"contains": c, "minContains": 1, "maxContains": 50}, children),
        st.builds(lambda c: {"dependentSchemas": {"a": c}, "propertyNames": c}, children),
        st.builds(
            lambda c: {
                "$defs": {"r": {"anyOf": [c, {"items": {"$ref": "#/$defs/r"}}]}},
                "$ref": "#/$defs/r",
            },
            children,
        ),
    )


_schemas = st.recursive(_leaf_schemas, _extend, max_leaves=12)


def _instance(kind: str, size: int) -> object:
    text = ("ab " * (size // 3 + 1))[:size] + "a"
    leaf: object = {
        "string": text,
        "int": 7,
        "array": [text[:50]] * size,
        "objects": [{"a": "a" * 10, "b": 1}] * min(size, 5_000),
        "object": {f"a{i}": "xa" for i in range(min(size, 10_000))},
        "nested": json.loads("[" * 60 + "1" + "]" * 60),
    }[kind]
    return leaf


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    schema=_schemas,
    dialect=st.sampled_from(DIALECTS),
    kind=st.sampled_from(["string", "int", "array", "objects", "object", "nested"]),
    size=st.sampled_from([10, 10_000, 100_000, 1_000_000]),
    assert_formats=st.booleans(),
)
def test_every_hostile_combination_is_answered(
    schema: dict[str, Any], dialect: str, kind: str, size: int, assert_formats: bool
) -> None:
    if dialect == D7:
        schema = json.loads(json.dumps(schema).replace('"$defs"', '"definitions"'))
        schema = json.loads(json.dumps(schema).replace("#/$defs/", "#/definitions/"))
    schema = {"$schema": dialect, **schema}
    validator = JsonSchemaArgumentValidator(assert_formats=assert_formats)
    value = _instance(kind, size)
    result = validator.validate(schema, value)
    if not result.ok:
        assert result.errors[0].message


_DEEP = json.loads("[" * 63 + "1" + "]" * 63)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize(
    ("schema", "value", "ok"),
    [
        (_fan_out(D2020, 22), "x", False),
        ({"type": "string", "pattern": "(.*a){20}"}, "a" * 1_000_000, False),
        ({"type": "array", "items": {"pattern": "(.*a){20}"}}, ["a" * 1_000_000] * 8, False),
        ({"type": "string", "format": "regex"}, "(a|b)" * 3_200, False),
        ({"type": "array", "items": {"enum": list(range(10_000))}}, [1] * 100_000, False),
        ({"type": "array", "uniqueItems": True}, [{"a": i} for i in range(10_000)], False),
        (
            {
                "$defs": {"n": {"anyOf": [{"type": "integer"}, {"items": {"$ref": "#/$defs/n"}}]}},
                "$ref": "#/$defs/n",
            },
            _DEEP,
            True,
        ),
        ({"type": "string", "pattern": "^[a-z]+$"}, "a" * 1_000_000, True),
    ],
)
def test_the_hostile_classes_are_answered_within_the_budgets(
    dialect: str, schema: dict[str, Any], value: object, ok: bool
) -> None:
    schema = json.loads(json.dumps(schema).replace("#/$defs/", f"#/{_defs(dialect)}/"))
    schema = json.loads(json.dumps(schema).replace('"$defs"', f'"{_defs(dialect)}"'))
    schema = {"$schema": dialect, **schema}
    validator = JsonSchemaArgumentValidator(assert_formats=True)
    result = validator.validate(schema, value)
    assert result.ok is ok
    if not ok:
        assert "max_" in result.errors[0].message, result
