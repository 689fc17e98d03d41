"""The tool hot path's checker: the full path's verdict on every value, limits first.

A tool seen before is checked by a checker made for its compiled schema (one
pass over the arguments, then the engine). Each case here is validated twice
through the tool validator (the second call takes the hot path) and once
through ``JsonSchemaArgumentValidator.validate`` (the full path): the verdicts
and the refusal paths must agree, for values within the limits and past them.
"""

from __future__ import annotations

import math
from enum import IntEnum
from typing import Any

import attrs
import jsonschema_rs
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from prism.core import ToolCall, ToolDefinition, ToolExecutionContext, ToolResult
from prism.validation.jsonschema import (
    JsonSchemaArgumentValidator,
    SchemaLimits,
    create_json_schema_tool_validator,
)
from prism.validation.jsonschema._fast import closed_checker
from prism.validation.jsonschema._instance import check_instance

# Not closed (an unbounded string), with a pattern, so the call's budgets apply.
OPEN: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "pattern": "^[A-Za-z ]*$"},
        "days": {"type": "integer", "maximum": 14},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
}
# Not closed and no budgets (no pattern): the instance limits only.
PLAIN: dict[str, Any] = {
    "type": "object",
    "additionalProperties": {"type": ["string", "integer", "number", "boolean", "null", "array"]},
}
CLOSED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "n": {"type": "integer"},
        "x": {"enum": [1.5, 2, None, True]},
        "s": {"type": "string", "maxLength": 8},
        "tags": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 8}},
        "nums": {"type": "array", "maxItems": 3, "items": {"enum": [1, 2.5, None, False]}},
    },
    "additionalProperties": False,
}


class Small(IntEnum):
    ONE = 1


_LOUD: list[str] = []


class _Loud(str):
    """A string value whose own methods record that they ran."""

    def __len__(self) -> int:
        _LOUD.append("__len__")
        return 0

    def isascii(self) -> bool:
        _LOUD.append("isascii")
        return True

    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        _LOUD.append("encode")
        return b""


class _Mapping(dict[str, Any]):
    """A dict subclass whose items() records that it ran."""

    def items(self) -> Any:
        _LOUD.append("items")
        return super().items()


async def _noop(_args: Any, _ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text("ok")


_CTX = ToolExecutionContext(ToolCall(id="1", name="t", arguments={}))

VALUES: list[Any] = [
    {},
    {"city": "Oslo", "days": 3},
    {"city": "Oslo", "days": 30},
    {"city": "Oslo!", "days": 3},
    {"tags": ["a", "b"], "days": 1},
    {"tags": ["a", 1, 2.5, True, None]},
    {"tags": [["nested"]]},
    {"tags": [{"a": 1}]},
    {"nested": {"a": 1}},
    {"n": 2**64},
    {"n": 2**63},
    {"n": -(2**63) - 1},
    {"n": Small.ONE},
    {"tags": [Small.ONE]},
    {"tags": [2**70]},
    {"tags": [math.nan]},
    {"x": math.inf},
    {"x": math.nan},
    {"x": 1.5},
    {"x": None, "n": True},
    {"nums": [1, 2.5, None, False]},
    {"nums": [1, 2.5]},
    {"nums": [math.inf]},
    {"nums": [2**64]},
    {"nums": [Small.ONE]},
    {"nums": ["\ud800"]},
    {"nums": ["x" * 101]},
    {"s": "\ud800"},
    {"\ud800": 1},
    {"tags": ["ok", "\udfff"]},
    {"s": "é" * 3},
    {"é": "ü"},
    {"s": "x" * 9},
    {"s": "x" * 101},
    {"k" * 101: 1},
    {"tags": ["x" * 101]},
    {"tags": list(range(7))},
    {"__proto__": 1},
    {"constructor": "x"},
    {1: 2},
    {"s": b"bytes"},
    {"s": (1, 2)},
    {"tags": [b"x"]},
    {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7},
    {"n": 1, "x": 2, "s": "", "tags": [], "nums": [], "other": 1},
    {"a": "x" * 60, "b": "y" * 60},
    # Each array within the longest maxItems, all of them past max_array_length.
    {"n": [1, 2, 3], "tags": ["a", "b", "c"], "nums": [1, 2.5, None]},
    {"city": ["a", "b", "c"], "tags": ["a", "b", "c"], "days": [1]},
    {"s": {1, 2}},
    {"s": _Loud("x" * 200)},
    {"tags": [_Loud("x")]},
    _Mapping(n=1),
    [1, 2],
    "text",
]

LIMITS = SchemaLimits(
    max_string_length=100,
    max_instance_properties=6,
    max_array_length=6,
    max_validation_work=10_000,
)


def _hot(
    schema: dict[str, Any], value: object, limits: SchemaLimits
) -> tuple[bool, str | None, str | None]:
    check = create_json_schema_tool_validator(limits=limits)
    tool = ToolDefinition(name="t", execute=_noop, parameters=schema)
    first = check(tool, value, _CTX)  # type: ignore[arg-type]
    second = check(tool, value, _CTX)  # type: ignore[arg-type]
    assert first == second
    if second is None:
        return True, None, None
    errors = second.details["errors"]
    assert isinstance(errors, list)
    path = errors[0]["path"]  # type: ignore[index,call-overload]
    message = errors[0]["message"]  # type: ignore[index,call-overload]
    return False, path, message  # type: ignore[return-value]


def _full(
    schema: dict[str, Any], value: object, limits: SchemaLimits
) -> tuple[bool, str | None, str | None]:
    result = JsonSchemaArgumentValidator(limits=limits).validate(schema, value)
    if result.ok:
        return True, None, None
    return False, result.errors[0].path, result.errors[0].message


@pytest.mark.parametrize(
    "schema",
    [OPEN, PLAIN, CLOSED, "unbounded", "closed budgets", "declared"],
    ids=["budgets", "plain", "closed", "unbounded", "closed-budgets", "declared"],
)
@pytest.mark.parametrize(
    "limits", [LIMITS, SchemaLimits(max_instance_depth=1)], ids=["small", "flat"]
)
def test_the_hot_path_gives_the_full_paths_verdict(schema: Any, limits: SchemaLimits) -> None:
    if type(schema) is str:
        schema = {
            "unbounded": _UNBOUNDED,
            "closed budgets": _CLOSED_OPEN,
            "declared": _DECLARED,
        }[schema]
    for value in VALUES:
        hot = _hot(schema, value, limits)
        assert hot == _full(schema, value, limits), value
        # A value past a limit is refused for that limit, in the walk's words.
        problem = check_instance(value, limits)
        if problem is not None:
            assert hot == (False, *problem), value
    assert _LOUD == []  # no value's own methods ran


# OPEN closed: its strings have no maxLength and a pattern, so its worst case
# does not fit the regex budget and the closed checker counts each call's characters.
_CLOSED_OPEN = {**OPEN, "additionalProperties": False}
_CLOSED_OPEN["properties"] = {
    **OPEN["properties"],
    "tags": {**OPEN["properties"]["tags"], "maxItems": 3},
}


@pytest.mark.parametrize("schema", [OPEN, _CLOSED_OPEN], ids=["open", "closed"])
def test_a_call_over_the_budget_on_the_hot_path_is_refused_as_on_the_full_path(
    schema: dict[str, Any],
) -> None:
    limits = SchemaLimits(max_regex_work=200)
    compiled = JsonSchemaArgumentValidator(limits=limits).compile(schema)
    assert (compiled._entry.closed is not None) is (schema is _CLOSED_OPEN)
    hot = create_json_schema_tool_validator(limits=limits)
    tool = ToolDefinition(name="t", execute=_noop, parameters=schema)
    assert hot(tool, {"city": "ab", "tags": ["b" * 10]}, _CTX) is None
    assert compiled.quick_valid is not None
    assert compiled.quick_valid({"city": "ab", "tags": ["b" * 10]}) is True
    # Past the checker's conservative count, the full path measures: within the budget...
    assert compiled.validate({"tags": ["b" * 30] * 3}).ok
    assert hot(tool, {"tags": ["b" * 30] * 3}, _CTX) is None
    # ... or not.
    values: list[dict[str, Any]] = [{"city": "a" * 60, "tags": ["b" * 40]}, {"city": "a" * 150}]
    for value in values:
        assert compiled.quick_valid(value) is None
        refused = hot(tool, value, _CTX)
        assert refused is not None
        assert "max_regex_work" in refused.message
        full = JsonSchemaArgumentValidator(limits=limits).validate(schema, value)
        assert not full.ok
        assert full.errors[0].message in refused.message


def test_an_entry_in_use_outlives_an_idle_one_when_the_cache_is_full() -> None:
    check = create_json_schema_tool_validator(cache_size=2)
    tools = [
        ToolDefinition(
            name=f"t{i}", execute=_noop, parameters={"type": "object", "minProperties": i}
        )
        for i in range(3)
    ]
    check(tools[0], {}, _CTX)
    check(tools[1], {"a": 1}, _CTX)
    for _ in range(3):
        assert check(tools[0], {}, _CTX) is None  # hot-path hits on the oldest entry
    check(tools[2], {"a": 1, "b": 2}, _CTX)  # evicts tools[1]'s schema, not tools[0]'s
    misses = check.cache_info().misses
    assert check(tools[0], {}, _CTX) is None
    assert check.cache_info().misses == misses
    # The adapter keeps each tool's own check; the cache compiles the evicted one again.
    assert check(tools[1], {"a": 1}, _CTX) is None
    assert check.cache_info().misses == misses
    check.validator.compile(tools[1].parameters)
    assert check.cache_info().misses == misses + 1
    info = check.cache_info()
    assert info.currsize == 2
    assert info.hits >= 3


# CLOSED's float enum entries price each number in a call at its worst (a tiny
# float): a budget the closed path's worst case fits, so its checker decides.
_ROOMY = attrs.evolve(LIMITS, max_validation_work=100_000)


def test_quick_valid_answers_true_only_for_what_validate_accepts() -> None:
    validator = JsonSchemaArgumentValidator(limits=_ROOMY, cache_size=1)
    compiled = validator.compile(CLOSED)
    quick = compiled.quick_valid
    assert quick is not None
    assert quick({"n": 1, "tags": ["a"]}) is True
    assert quick({"n": 1.5}) is False  # within the limits, refused by the engine
    assert quick({"n": "1"}) is False
    assert quick({"s": "x" * 9}) is None  # past maxLength 8: validate says why
    assert quick({"n": 2**70}) is None  # past a limit: validate says where
    assert quick({"tags": ["x"] * 7}) is None
    # Asked why right after quick_valid refused that very value: the same words.
    refused = {"x": 3}
    assert quick(refused) is False
    after = compiled.validate(refused)
    assert after == JsonSchemaArgumentValidator(limits=_ROOMY).validate(CLOSED, refused)
    assert not after.ok
    # Another value after a refusal is checked, not taken for the refused one.
    assert quick({"n": 1.5}) is False
    assert compiled.validate({"n": 2**70}).errors[0].path == "data.n"
    validator.compile(OPEN)  # evicts CLOSED's entry
    assert compiled.quick_valid is None
    assert compiled.validate({"n": 1}).ok


# -- a closed schema's keys ----------------------------------------------------
#
# The engine would refuse each of these keys on a closed schema (checked here on
# the engine itself), but only after reading it: it encodes a non-ASCII key
# whole (16 ms for 10,000,000 characters). So the closed checker looks each key
# up among the declared names before the engine runs; each key gets the
# instance walk's words, and no key's own code runs.

_CALLS: list[str] = []


class _Recorded(str):
    """A key equal to a declared name whose own methods record that they ran."""

    def __hash__(self) -> int:
        _CALLS.append("__hash__")
        return str.__hash__(self)

    def __eq__(self, other: object) -> bool:
        _CALLS.append("__eq__")
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        _CALLS.append("__ne__")
        return str.__ne__(self, other)

    def __len__(self) -> int:
        _CALLS.append("__len__")
        return 0

    def __repr__(self) -> str:
        _CALLS.append("__repr__")
        return "n"

    def isascii(self) -> bool:
        _CALLS.append("isascii")
        return True

    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        _CALLS.append("encode")
        return b"n"


_KEYS: list[Any] = [
    lambda: _Recorded("n"),
    lambda: 1,
    lambda: ("n",),
    lambda: None,
    lambda: "\ud800",
    lambda: "n\udfff",
    lambda: "é" * 101,
    lambda: "k" * 101,
    lambda: "__proto__",
    lambda: "constructor",
]
_OPENED = {key: item for key, item in CLOSED.items() if key != "additionalProperties"}


@pytest.mark.parametrize("make", _KEYS)
def test_a_key_past_the_limits_gets_the_walks_words_on_a_closed_schema(make: Any) -> None:
    engine = jsonschema_rs.validator_for(CLOSED)
    key = make()
    value = {key: 1}
    _CALLS.clear()
    try:
        accepted = engine.is_valid(value)
    except (ValueError, UnicodeError):
        accepted = False
    assert not accepted
    problem = check_instance(value, LIMITS)
    assert problem is not None
    closed = _hot(CLOSED, value, LIMITS)
    assert closed == (False, *problem)  # the walk's words
    assert closed == _hot(_OPENED, value, LIMITS) == _full(_OPENED, value, LIMITS)
    assert _CALLS == []  # neither the engine nor the checks ran the key's own code


def test_the_closed_checker_hands_the_engine_only_declared_keys_and_bounded_values() -> None:
    seen: list[object] = []

    def engine(value: object) -> bool:
        seen.append(value)
        return True

    # n: an integer; s: a string of at most 100 characters; tags: at most 3 of them.
    check = closed_checker(engine, {"n": 0, "s": 100, "tags": -1}, {"tags": (3, 100)})
    assert check({"n": 1, "tags": ["a"]}) is True
    refused: list[Any] = [
        {"é" * 10_000: 1},
        {"n": 1, "x": 1},
        {_Recorded("n"): 1},
        {1: 1},
        {"n": 2**64},
        {"s": "\ud800"},
        {"s": "x" * 101},
        {"n": "x"},
        {"tags": ["a"] * 4},
        {"tags": ["x" * 101]},
        {"tags": ["\udfff"]},
        {"s": ["a"]},
        {"n": {"a": 1}},
        {"n": (1,)},
        {"n": 1, "s": "", "tags": [], "other": 1},
    ]
    _CALLS.clear()
    for value in refused:
        assert check(value) is None
    assert seen == [{"n": 1, "tags": ["a"]}]
    assert _CALLS == []


# A closed schema with an unbounded string (the checker holds it to
# max_string_length), and every kind of member a closed schema allows.
_UNBOUNDED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "x": {"enum": [1.5, 2, None, True, "a"]},
        "tags": {"type": "array", "maxItems": 3, "items": {"type": "string"}},
    },
    "required": ["city"],
    "additionalProperties": False,
}
# Closed but for undeclared keys, which it accepts with any value: only a call
# of declared keys is decided by its checker.
_DECLARED = {key: item for key, item in _UNBOUNDED.items() if key != "additionalProperties"}
_ODD: list[Any] = [
    lambda: 2**63,
    lambda: 2**64,
    lambda: -(2**63) - 1,
    lambda: 10**400,
    lambda: 2**30,
    lambda: -(2**30),
    lambda: Small.ONE,
    lambda: "\ud800",
    lambda: "x" * 101,
    lambda: "é" * 100,
    lambda: math.nan,
    lambda: math.inf,
    lambda: (1,),
    lambda: {1},
    lambda: b"x",
    lambda: [["x"]],
    lambda: {"a": 1},
    lambda: ["x"] * 4,
    lambda: ["x"] * 7,
]
_odd = st.integers(0, len(_ODD) - 1).map(lambda i: _ODD[i]())
_scalars = (
    st.none() | st.booleans() | st.integers(-20, 20) | st.floats() | st.text(max_size=6) | _odd
)
_members = _scalars | st.lists(_scalars, max_size=4)
_names = ["city", "days", "x", "tags", "n", "s", "nums"]
_keys = st.sampled_from([*_names, "other"]) | st.text(max_size=3)
_values = (
    st.fixed_dictionaries({}, optional=dict.fromkeys(_names, _members))
    | st.dictionaries(_keys, _members, max_size=5)
    | _members
)


_CHECKED = JsonSchemaArgumentValidator(limits=LIMITS)
_COMPILED = [
    (_CHECKED.compile(schema), jsonschema_rs.validator_for(schema).is_valid)
    for schema in (_UNBOUNDED, CLOSED, _DECLARED, _OPENED)
]


@settings(max_examples=100, deadline=None)
@given(value=_values)
@example(value={"n": 2**64})
@example(value={"city": "\ud800", "days": 1})
@example(value={"city": "x" * 101})
@example(value={"tags": ["x", "\udfff"]})
@example(value={"nums": [2**64]})
def test_the_closed_checker_agrees_with_the_instance_walk(value: Any) -> None:
    # Its True and False are the walk's then the engine's verdicts; anything
    # else (None, or the engine raising) is the full path's to decide.
    for compiled, engine in _COMPILED:
        quick = compiled.quick_valid
        assert quick is not None
        try:
            answer = quick(value)
        except (ValueError, UnicodeError):
            answer = None
        if answer is not None:
            assert check_instance(value, LIMITS) is None
            assert answer is engine(value)
        walked = check_instance(value, LIMITS) is None
        if walked:
            try:
                walked = engine(value)
            except (ValueError, UnicodeError):
                walked = False
        assert compiled.validate(value).ok is walked


def test_strings_where_none_is_valid_still_count_against_the_total() -> None:
    # The checker lets a string through where only an integer is valid (the
    # engine refuses it at once), so nine such strings could add up past
    # TOTAL_STRING_FACTOR x max_string_length: it counts them, and the walk
    # refuses the call for that limit, as on every other path.
    limits = SchemaLimits(max_string_length=100)
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {f"n{i}": {"type": "integer"} for i in range(9)},
        "additionalProperties": False,
    }
    assert JsonSchemaArgumentValidator(limits=limits).compile(schema)._entry.closed == 9
    value = {f"n{i}": "x" * 100 for i in range(9)}
    problem = check_instance(value, limits)
    assert problem is not None
    assert _hot(schema, value, limits) == (False, *problem)
    one = {"n0": "x" * 100}
    assert _hot(schema, one, limits) == _full(schema, one, limits)
    assert not _hot(schema, one, limits)[0]
