"""Closed schemas whose written checker decides a valid call without the engine.

The subset (``_decided``) is a prediction of what jsonschema-rs accepts, so it
is held against the engine itself: schemas drawn from the subset in each
dialect it covers, values drawn near every boundary (integers at their bounds
and 64 bits, bools and floats where integers go, strings at their length
bounds in non-ASCII and astral characters, lone surrogates, subclasses,
missing and undeclared keys), and a fixed table of tricky cases. Whenever the
checker answers ``True`` by itself, the engine (``validator_for(schema).is_valid``)
must accept the value and the value must be within the instance limits.
"""

from __future__ import annotations

import json
import math
from enum import IntEnum, StrEnum
from typing import Any

import jsonschema_rs
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from prism.core import ToolCall, ToolDefinition, ToolExecutionContext, ToolResult
from prism.validation.jsonschema import (
    JsonSchemaArgumentValidator,
    SchemaLimits,
    create_json_schema_tool_validator,
)
from prism.validation.jsonschema._closed import closed_bounds
from prism.validation.jsonschema._decided import DRAFTS, decided_kinds
from prism.validation.jsonschema._instance import check_instance
from prism.validation.jsonschema._rs import compile_rs
from prism.validation.jsonschema._screen import screen
from prism.validation.jsonschema._unrolled import (
    MEMO_CHARS,
    MEMO_STRINGS,
    STR_TABLES,
    deciding_checker,
)

LIMITS = SchemaLimits(max_string_length=40, max_instance_properties=16, max_array_length=16)
DIALECTS = {
    "draft4": "http://json-schema.org/draft-04/schema#",
    "draft6": "http://json-schema.org/draft-06/schema#",
    "draft7": "http://json-schema.org/draft-07/schema#",
    "draft2019": "https://json-schema.org/draft/2019-09/schema",
    "draft2020": "https://json-schema.org/draft/2020-12/schema",
}


class Small(IntEnum):
    ONE = 1


class Word(StrEnum):
    A = "a"


class Sub(dict[str, Any]):
    pass


class Key(str):
    pass


_RAN: list[str] = []


class Posing(str):
    """A key that hashes and compares as the declared name it is built from, and says so."""

    def __hash__(self) -> int:
        _RAN.append("__hash__")
        return str.__hash__(self)

    def __eq__(self, other: object) -> bool:
        _RAN.append("__eq__")
        return str.__eq__(self, other)


def _general_table(value: dict[str, Any]) -> dict[str, Any]:
    """``value``'s items in a dict whose table is of the general kind (an int key came and went).

    Every key is an exact ``str`` again, but the table's size no longer says so:
    the checker looks at each key.
    """
    table: dict[Any, Any] = {0: 0, **value}
    del table[0]
    return table


def _decider(schema: dict[str, Any]) -> tuple[Any, list[object]] | None:
    """The deciding checker of ``schema`` and the values it handed on, or None."""
    bounds = closed_bounds(schema, LIMITS)
    if bounds is None:
        return None
    draft = screen(schema, LIMITS, "reject").draft
    decided = decided_kinds(
        schema, draft, bounds[3], bounds[5], assert_formats=False, matcher=_matcher(draft)
    )
    if decided is None:
        return None
    handed: list[object] = []

    def general(value: object) -> None:
        handed.append(value)

    return deciding_checker(general, decided)[0], handed


def _matcher(draft: str) -> Any:
    """The engine's own pattern test, as the validator makes it."""
    return lambda pattern: compile_rs({"pattern": pattern}, draft, assert_formats=False).is_valid


def _engine(schema: dict[str, Any], value: object) -> bool | None:
    """The engine's verdict on ``value`` (None: it could not read it)."""
    try:
        return bool(jsonschema_rs.validator_for(schema).is_valid(value))
    except Exception:
        return None


def _agrees(schema: dict[str, Any], value: object) -> bool:
    """Check one value; True if the checker decided it itself."""
    made = _decider(schema)
    assert made is not None, schema
    check, handed = made
    verdict = check(value)
    if handed:
        assert verdict is None
        assert handed == [value]
        return False
    assert verdict is True
    assert _engine(schema, value) is True, (schema, value)
    assert check_instance(value, LIMITS) is None, (schema, value)
    return True


# -- schemas drawn from the subset --------------------------------------------

_bound = st.sampled_from([-(2**63), -(2**53), -3, -1, 0, 1, 2, 14, 2**31, 2**63 - 1, 2**64 - 1])
_length = st.sampled_from([0, 1, 2, 3, 5])
_words = st.sampled_from(["", "a", "é", "ab", "😀", "😀a", "abc", "red", "\u00e9\u0301"])


@st.composite
def _integer(draw: st.DrawFn) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer"}
    low, high = sorted([draw(_bound), draw(_bound)])
    for name in ("minimum", "exclusiveMinimum"):
        if draw(st.booleans()):
            schema[name] = low
    for name in ("maximum", "exclusiveMaximum"):
        if draw(st.booleans()):
            schema[name] = high
    if draw(st.integers(0, 5)) == 0:  # now and then one drawn apart
        schema[draw(st.sampled_from(["minimum", "exclusiveMaximum"]))] = draw(_bound)
    return schema


@st.composite
def _string(draw: st.DrawFn) -> dict[str, Any]:
    schema: dict[str, Any] = {}
    if draw(st.booleans()):
        schema["type"] = "string"
    shortest, longest = sorted([draw(_length), draw(_length)])
    if draw(st.booleans()):
        schema["minLength"] = shortest
    if draw(st.booleans()):
        schema["maxLength"] = longest
    choice = draw(st.sampled_from(["plain", "enum", "const", "both", "pattern"]))
    if choice in ("enum", "both"):
        schema["enum"] = draw(st.lists(_words, min_size=1, max_size=3))
    if choice in ("const", "both"):
        schema["const"] = draw(st.sampled_from(schema.get("enum", [""])) | _words)
    if choice in ("plain", "pattern"):
        schema["type"] = "string"
    if choice == "pattern":
        schema["pattern"] = draw(st.sampled_from(_PATTERNS))
    if draw(st.booleans()):
        schema["format"] = "date"
    if draw(st.booleans()):
        schema["description"] = "a string"
    return schema


_scalar = (
    _integer()
    | _string()
    | st.just({"type": "boolean"})
    | st.just({"type": "null", "title": "nothing"})
)


@st.composite
def _array(draw: st.DrawFn) -> dict[str, Any]:
    fewest, most = sorted([draw(_length), draw(_length)])
    items = draw(_scalar)
    items.pop("pattern", None)  # a pattern on items stays the engine's
    schema: dict[str, Any] = {"type": "array", "items": items, "maxItems": most}
    if draw(st.booleans()):
        schema["minItems"] = fewest
    return schema


_NAMES = ["a", "b", "é", "c d"]
_PATTERNS = ["^[a-z]{2}(-[A-Z]{2})?$", "^a", "b$", "^\\d+$", "é", "^.{2}$", "^[^a]*$", "\\w"]
# Strings each pattern might or might not match.
_MATCHED = ["en", "en-GB", "EN", "en\n", "ab", "b\n", "12", "١٢", "😀é", "__", "a😀"]


@st.composite
def _schemas(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(_NAMES), min_size=0, max_size=3, unique=True))
    properties = {name: draw(_scalar | _array()) for name in names}
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required: list[str] = draw(st.lists(st.sampled_from(names), unique=True)) if names else []
    listed: bool = draw(st.booleans())
    if required or listed:
        schema["required"] = required
    extra = draw(st.sampled_from(["closed", "absent", "true", "empty"]))
    if extra != "absent":
        schema["additionalProperties"] = {"closed": False, "true": True, "empty": {}}[extra]
    # Format is an annotation only in 2019-09 and 2020-12: elsewhere it stays the engine's.
    dialect = draw(st.sampled_from(["draft2020", "draft2019"]))
    if not any("format" in str(sub) for sub in properties.values()):
        dialect = draw(st.sampled_from(["draft6", "draft7", "draft2019", "draft2020"]))
    if dialect != "draft2020" or draw(st.booleans()):
        schema["$schema"] = DIALECTS[dialect]
    return schema


# -- values near every boundary ------------------------------------------------

# Every kind of value, tried under every property whatever its kind.
_CROSS: list[Any] = [
    0,
    1,
    -1,
    2**63 - 1,
    2**63,
    2**64 - 1,
    2**64,
    -(2**63),
    -(2**63) - 1,
    2**53 + 1,
    10**30,
    True,
    False,
    1.0,
    -0.0,
    0.5,
    math.nan,
    math.inf,
    None,
    "",
    "a",
    "é",
    "😀",
    "\ud800",
    "a\udfff",
    "é\ud800",
    "x" * 41,
    "😀" * 40,
    Small.ONE,
    Word.A,
    Key("a"),
    (1,),
    [],
    [1],
    ["a"],
    {"a": 1},
    b"a",
]


def _near(schema: dict[str, Any]) -> list[Any]:
    """Values at, inside and just outside one scalar property's bounds."""
    found: list[Any] = []
    for name in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if name in schema:
            found += [schema[name] + d for d in (-1, 0, 1)]
    for name in ("minLength", "maxLength"):
        if name in schema:
            for size in sorted({max(schema[name] + d, 0) for d in (-1, 0, 1)}):
                found += ["a" * size, "é" * size, "😀" * size, "a" * max(size - 1, 0) + "\ud800"]
    if "pattern" in schema:
        found += _MATCHED
    for values in (schema.get("enum", []), [schema["const"]] if "const" in schema else []):
        for value in values:
            found += [value, value + "a", value[:-1], Key(value)]
    return found


def _candidates(schema: dict[str, Any]) -> list[Any]:
    """What to try under a property: near its bounds, then every kind of value."""
    if schema.get("type") != "array":
        return _near(schema) + _CROSS
    engine = jsonschema_rs.validator_for(schema["items"])
    near = _near(schema["items"]) + _CROSS
    good = [item for item in near if _readable(engine, item)]
    item = good[0] if good else 0
    found: list[Any] = [[item] * size for size in range(schema["maxItems"] + 2)]
    fewest = max(schema.get("minItems", 0), 1)
    found += [[*[item] * (fewest - 1), other] for other in near]
    found += [tuple(found[fewest]), *_CROSS]
    return found


def _readable(engine: Any, value: object) -> bool:
    try:
        return bool(engine.is_valid(value))
    except Exception:
        return False


def _calls(schema: dict[str, Any]) -> list[Any]:
    """A valid-looking call, then each property changed to each of its candidates in turn."""
    properties = schema["properties"]
    base: dict[str, Any] = {}
    for name, sub in properties.items():
        engine = jsonschema_rs.validator_for(sub)
        good = [value for value in _candidates(sub) if _readable(engine, value)]
        if good:
            base[name] = good[0]
    calls: list[Any] = [base, _general_table(base), {**base, "other": 1}, Sub(base), {}]
    for name, sub in properties.items():
        calls.append({key: value for key, value in base.items() if key != name})
        calls.append({**{key: v for key, v in base.items() if key != name}, Key(name): 1})
        others = {key: v for key, v in base.items() if key != name}
        if name in base:
            calls.append({**others, Key(name): base[name]})
            calls.append({**others, Posing(name): base[name]})
        calls += [{**base, name: value} for value in _candidates(sub)]
    return calls


@settings(max_examples=60, deadline=None)
@given(schema=_schemas())
@example(
    schema={
        "type": "object",
        "properties": {
            "a": {"type": "integer", "exclusiveMaximum": 2**64 - 1},
            "b": {"type": "string", "minLength": 2, "maxLength": 3},
            "c": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"enum": ["é", "😀"]}},
            "d": {"type": "string", "minLength": 1, "maxLength": 2, "pattern": "é"},
        },
        "required": ["a"],
        "additionalProperties": False,
    }
)
def test_the_checker_decides_valid_only_what_the_engine_accepts(schema: dict[str, Any]) -> None:
    # (a schema whose worst call is priced past the budget, such as two arrays of five
    # strings under these limits, gets no closed path: nothing to compare)
    assume(closed_bounds(schema, LIMITS) is not None)
    made = _decider(schema)
    assert made is not None, schema
    check, handed = made
    engine = jsonschema_rs.validator_for(schema)
    for value in _calls(schema):
        handed.clear()
        verdict = check(value)
        if handed:
            assert verdict is None
            assert handed == [value]
            continue
        assert verdict is True
        assert _readable(engine, value), (schema, value)
        assert check_instance(value, LIMITS) is None, (schema, value)


# -- a fixed table of tricky cases --------------------------------------------

_README: dict[str, Any] = {
    "type": "object",
    "required": ["a", "b"],
    "additionalProperties": False,
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
}
_BOUNDED = {
    "type": "object",
    "properties": {
        "n": {"type": "integer", "minimum": -2, "exclusiveMaximum": 5},
        "s": {"type": "string", "minLength": 2, "maxLength": 3},
        "e": {"enum": ["é", "😀"]},
        "t": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "boolean"}},
        "z": {"type": "null"},
    },
    "additionalProperties": False,
}
# Integer bounds past one internal digit (2**30 - 1): tested first within that digit.
_WIDE = {
    "type": "object",
    "properties": {
        "w": {"type": "integer", "minimum": 2**31},
        "v": {"type": "integer", "minimum": -(2**40), "maximum": 7},
        "u": {"type": "array", "maxItems": 2, "items": {"type": "integer", "minimum": 3}},
    },
    "additionalProperties": False,
}


# A least length of 1 and arrays without minItems: their tests take one comparison fewer.
_ONE = {
    "type": "object",
    "properties": {
        "s": {"type": "string", "minLength": 1, "maxLength": 3},
        "t": {"type": "array", "maxItems": 2, "items": {"type": "string", "minLength": 1}},
    },
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("schema", "value", "decided"),
    [
        (_ONE, {"s": "a", "t": []}, True),
        (_ONE, {"s": "abc", "t": ["é", "😀"]}, True),
        (_ONE, {"s": "", "t": []}, False),
        (_ONE, {"s": "abcd"}, False),
        (_ONE, {"t": [""]}, False),
        (_ONE, {"t": ["a", "b", "c"]}, False),
        (_ONE, {"s": Key("a")}, False),
        (_README, {"a": 2, "b": 3}, True),
        (_README, {"a": 2**30, "b": -(2**30)}, True),
        (_README, {"a": 2**30 - 1, "b": -(2**30) + 1}, True),
        (_WIDE, {"w": 2**31, "v": -(2**30), "u": [3, 2**30]}, True),
        (_WIDE, {"w": 2**63 - 1, "v": -(2**40), "u": [2**63 - 1]}, True),
        (_WIDE, {"v": -(2**30) + 1}, True),
        (_WIDE, {"v": 7}, True),
        (_WIDE, {"w": 2**31 - 1}, False),
        (_WIDE, {"w": 2**30 - 1}, False),
        (_WIDE, {"w": 2**64}, False),
        (_WIDE, {"v": -(2**40) - 1}, False),
        (_WIDE, {"v": 8}, False),
        (_WIDE, {"v": 2**30}, False),
        (_WIDE, {"u": [2]}, False),
        (_WIDE, {"u": [-(2**30)]}, False),
        (_README, {"a": -(2**63), "b": 2**64 - 1}, True),
        (_README, {"a": 2**64, "b": 3}, False),  # past 64 bits: the walk refuses it
        (_README, {"a": 1.0, "b": 3}, False),  # the engine's (it accepts 1.0)
        (_README, {"a": True, "b": 3}, False),
        (_README, {"a": Small.ONE, "b": 3}, False),
        (_README, {"a": 2}, False),
        (_README, {"a": 2, "b": 3, "c": 4}, False),
        (_README, Sub(a=2, b=3), False),
        (_README, {"a": 2, Key("b"): 3}, False),
        (_BOUNDED, {"n": -2, "s": "😀é", "e": "😀", "t": [True], "z": None}, True),
        (_BOUNDED, {"n": 4, "s": "abc", "t": [False, True]}, True),
        (_BOUNDED, {}, True),
        # Every declared name present: the checker's branch without presence tests.
        (_BOUNDED, {"n": 0, "s": "ab", "e": "é", "t": [True], "z": None}, True),
        (_BOUNDED, {"n": 5, "s": "ab", "e": "é", "t": [True], "z": None}, False),
        (_BOUNDED, {"n": 0, "s": "ab", "e": "é", "t": [True], "y": None}, False),
        (_BOUNDED, {"n": 0, "s": "ab", "e": "é", "t": [True], Key("z"): None}, False),
        (_BOUNDED, {"n": 5}, False),
        (_BOUNDED, {"n": -3}, False),
        (_BOUNDED, {"n": -0.0}, False),
        (_BOUNDED, {"s": "a"}, False),
        (_BOUNDED, {"s": "abcd"}, False),
        (_BOUNDED, {"s": "a\ud800"}, False),
        (_BOUNDED, {"s": Key("abc")}, False),
        (_BOUNDED, {"e": "e"}, False),
        (_BOUNDED, {"e": Word.A}, False),
        (_BOUNDED, {"t": []}, False),
        (_BOUNDED, {"t": [True, True, True]}, False),
        (_BOUNDED, {"t": (True,)}, False),
        (_BOUNDED, {"t": [1]}, False),
        (_BOUNDED, {"z": False}, False),
        # Every declared name, one key posing as one (its __eq__ and __hash__ say
        # so): looked at, never looked up, its code never run.
        (_README, {"a": 2, Posing("b"): 3}, False),
        (_BOUNDED, {"n": 0, "s": "ab", "e": "é", "t": [True], Posing("z"): None}, False),
        # Exact str keys in a table that once held another key: looked at one by one.
        (_README, _general_table({"a": 2, "b": 3}), True),
        (_BOUNDED, _general_table({"n": 0, "s": "ab", "e": "é", "t": [True], "z": None}), True),
        (_BOUNDED, _general_table({"n": 4, "s": "abc"}), True),
    ],
)
def test_tricky_values(schema: dict[str, Any], value: Any, decided: bool) -> None:
    _RAN.clear()
    assert _agrees(schema, value) is decided
    assert _RAN == []
    # Whoever decides, the public verdict is the engine's within the limits.
    result = JsonSchemaArgumentValidator(limits=LIMITS).compile(schema).validate(value)
    within = check_instance(value, LIMITS) is None
    assert result.ok == (within and _engine(schema, value) is True), value


@pytest.mark.parametrize(
    "schema",
    [
        # draft-04: exclusiveMaximum is a flag on maximum there.
        {"$schema": DIALECTS["draft4"], **_README},
        {
            **_README,
            "properties": {"a": {"type": "integer", "multipleOf": 2}, "b": {"type": "integer"}},
        },
        {**_README, "properties": {"a": {"type": "number"}, "b": {"type": "integer"}}},
        {
            **_README,
            "properties": {"a": {"type": "integer", "maximum": 2.5}, "b": {"type": "integer"}},
        },
        {
            **_README,
            "properties": {"a": {"enum": ["a"], "pattern": "^a"}, "b": {"type": "integer"}},
        },
        {
            **_README,
            "properties": {
                "a": {"type": "array", "maxItems": 2, "items": {"type": "string", "pattern": "a"}},
                "b": {"type": "integer"},
            },
        },
        {**_README, "properties": {"a": {"type": ["string", "null"]}, "b": {"type": "integer"}}},
        {**_README, "properties": {"a": {"enum": ["x", 1]}, "b": {"type": "integer"}}},
        {
            **_README,
            "properties": {"a": {"type": "boolean", "enum": [True]}, "b": {"type": "integer"}},
        },
        {**_README, "required": ["a", "b", "c"]},  # a required name not declared
        {**_README, "minProperties": 1},
        # format asserts in draft-07, or with assert_formats
        {
            "$schema": DIALECTS["draft7"],
            **_README,
            "properties": {"a": {"type": "string", "format": "date"}, "b": {"type": "integer"}},
        },
        {
            **_README,
            "properties": {
                "a": {"type": "array", "maxItems": 2, "items": [{"type": "integer"}]},
                "b": {"type": "integer"},
            },
        },
        {
            **_README,
            "properties": {
                "a": {"type": "array", "maxItems": 2, "items": {}, "uniqueItems": True},
                "b": {"type": "integer"},
            },
        },
    ],
)
def test_schemas_outside_the_subset_stay_the_engines(schema: dict[str, Any]) -> None:
    bounds = closed_bounds(schema, LIMITS)
    draft = screen(schema, LIMITS, "reject").draft
    assert (
        bounds is None
        or decided_kinds(
            schema, draft, bounds[3], bounds[5], assert_formats=False, matcher=_matcher(draft)
        )
        is None
    )


def test_format_is_decided_only_where_it_is_an_annotation() -> None:
    schema: dict[str, Any] = {
        **_README,
        "properties": {"a": {"type": "string", "format": "date"}, "b": {}},
    }
    bounds = closed_bounds({**schema, "properties": {"a": schema["properties"]["a"]}}, LIMITS)
    assert bounds is not None
    caps, arrays = bounds[3], bounds[5]
    only_a = {**schema, "properties": {"a": schema["properties"]["a"]}, "required": ["a"]}
    assert decided_kinds(only_a, "draft2020", caps, arrays, assert_formats=False) is not None
    assert decided_kinds(only_a, "draft2020", caps, arrays, assert_formats=True) is None
    assert decided_kinds(only_a, "draft7", caps, arrays, assert_formats=False) is None
    assert sorted(DRAFTS) == ["draft2019", "draft2020", "draft6", "draft7"]


def test_the_tool_validator_decides_without_the_engine_and_refuses_in_its_words() -> None:
    compiled = JsonSchemaArgumentValidator(limits=LIMITS).compile(_BOUNDED)
    quick = compiled.quick_valid
    assert quick is not None
    assert quick.__code__.co_filename == "<prism deciding checker>"
    assert quick({"n": 4}) is True
    assert quick({"n": 5}) is False  # the engine's refusal, through the written checker
    result = compiled.validate({"n": 5})
    assert [(e.path, e.message) for e in result.errors] == [
        ("data.n", "must be smaller than 5 (rule: exclusiveMaximum)")
    ]
    # Past the limits: the walk's words, as on every path.
    result = compiled.validate({"s": "a\ud800b"})
    assert result.errors[0].message.startswith("contains a lone surrogate")


@pytest.mark.parametrize(
    "sub",
    [
        True,
        {"type": "integer", "minimum": 1.5},
        {"type": "integer", "exclusiveMaximum": True},
        {"type": "string", "minLength": -1},
        {"type": "string", "maxLength": "3"},
        {"type": "string", "format": 1},
        {"enum": "x"},
        {"minLength": 1},
        {"type": "number"},
        {"type": "array", "maxItems": 2, "items": {"type": "integer"}, "contains": {}},
        {"type": "array", "items": {"type": "integer"}},
        {"type": "array", "maxItems": 2},
        {"type": "array", "maxItems": 2, "items": {"type": "array"}},
        {"type": "array", "maxItems": 2, "items": {"type": "number"}},
        {"type": "array", "maxItems": 2, "minItems": -1, "items": {"type": "integer"}},
        {"type": "object"},
    ],
)
def test_each_keyword_outside_the_subset_leaves_the_schema_to_the_engine(sub: Any) -> None:
    # Each odd member alone, straight to the analysis (the screen and the
    # closed analysis refuse some of them before).
    schema = {"type": "object", "properties": {"a": sub}, "additionalProperties": False}
    cap = -1 if type(sub) is dict and sub.get("type") == "array" else 40
    assert (
        decided_kinds(schema, "draft2020", {"a": cap}, {"a": (2, 40)}, assert_formats=False) is None
    )
    good = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert decided_kinds(good, "draft2020", {"a": 0}, {}, assert_formats=False) is not None
    for odd in (
        [good],
        {**good, "type": ["object"]},
        {**good, "properties": [1]},
        {**good, "required": "a"},
        {**good, "patternProperties": {}},
    ):
        assert decided_kinds(odd, "draft2020", {"a": 0}, {}, assert_formats=False) is None
    assert decided_kinds(good, "draft2020", {}, {}, assert_formats=False) is None  # no cap
    # An array's bounds for a property that is no array schema.
    assert decided_kinds(good, "draft2020", {"a": -1}, {"a": (2, 0)}, assert_formats=False) is None
    assert decided_kinds(good, "draft4", {"a": 0}, {}, assert_formats=False) is None


def test_a_counting_checker_hands_on_a_call_past_its_characters() -> None:
    # Where the strings' bounds could add up past the limits, the checker counts
    # each call's characters, and hands on a call past them to the full path.
    handed: list[object] = []
    decided = {
        "s": (False, ("str", 0, 40)),
        "e": (False, ("enum", frozenset({"abc"}), None)),
        "t": (False, ("array", (0, 3), ("str", 0, 40))),
    }
    check, count = deciding_checker(handed.append, decided, most_chars=6)
    assert check({"s": "ab", "e": "abc", "t": ["a"]}) is True
    assert check({"s": "ab", "e": "abc", "t": ["ab"]}) is None
    assert handed == [{"s": "ab", "e": "abc", "t": ["ab"]}]
    assert count() == 1  # the calls it decided itself


_SHORT_AND_LONG = {
    "s": (False, ("str", 0, 100)),
    "e": (False, ("enum", frozenset({"abc", "de"}), None)),
    "t": (False, ("array", (0, 2), ("str", 0, 3))),
    "c": (False, ("str", 1, 2)),
}


def test_a_counting_checker_counts_only_its_long_members() -> None:
    # With 100 characters in all: the short members (at most 3, 6 and 2
    # characters, each within a quarter of 100 shared by the four) are not
    # counted, and the long one may hold what they leave, 100 - 11 = 89.
    handed: list[object] = []
    check, count = deciding_checker(handed.append, _SHORT_AND_LONG, most_chars=100)
    full = {"e": "abc", "t": ["abc", "abc"], "c": "ab"}
    assert check({"s": "x" * 89, **full}) is True
    assert check({"s": "x" * 89}) is True
    # 90 characters and no other string: within 100, but past what is left for
    # the long member; the full path decides it (and accepts it there).
    assert check({"s": "x" * 90}) is None
    assert check({"s": "x" * 90, **full}) is None
    assert handed == [{"s": "x" * 90}, {"s": "x" * 90, **full}]
    assert count() == 2


@settings(max_examples=150, deadline=None)
@given(
    value=st.fixed_dictionaries(
        {},
        optional={
            "s": st.text(max_size=3) | st.integers(0, 101).map(lambda n: "x" * n),
            "e": st.sampled_from(["abc", "de", "x"]),
            "t": st.lists(st.text(max_size=4), max_size=3),
            "c": st.text(max_size=3),
        },
    ),
    most=st.integers(0, 120),
)
@example(value={"s": "x" * 100, "e": "abc", "t": ["abc"], "c": "ab"}, most=100)
def test_a_call_decided_valid_holds_no_more_characters_than_counted(
    value: dict[str, Any], most: int
) -> None:
    # Whatever members are counted, a call the checker decides valid holds
    # at most most_chars characters in all its strings.
    check, _count = deciding_checker(lambda _value: None, _SHORT_AND_LONG, most_chars=most)
    if check(value) is True:
        strings = [item for item in value.values() if type(item) is str]
        strings += value.get("t", [])
        assert sum(len(text) for text in strings) <= most


def test_a_pattern_is_the_engines_own_on_the_decided_path() -> None:
    schema = {
        "type": "object",
        "properties": {
            "language": {"type": "string", "maxLength": 5, "pattern": "^[a-z]{2}(-[A-Z]{2})?$"},
            "word": {"type": "string", "pattern": "\\bok\\b"},
        },
        "additionalProperties": False,
    }
    compiled = JsonSchemaArgumentValidator(limits=LIMITS).compile(schema)
    quick = compiled.quick_valid
    assert quick is not None
    assert quick.__code__.co_filename == "<prism deciding checker>"
    assert quick({"language": "en-GB", "word": "it is ok"}) is True
    # ECMA-262's \b is ASCII: "é" is no word character there.
    assert quick({"word": "éok"}) is True
    assert quick({"word": "_ok"}) is False
    assert quick({"language": "en\n"}) is False  # $ is the end, not a newline before it
    result = compiled.validate({"language": "EN"})
    assert [(e.path, e.message) for e in result.errors] == [
        ("data.language", "must match pattern ^[a-z]{2}(-[A-Z]{2})?$ (rule: pattern)")
    ]


def test_a_pattern_verdict_is_kept_only_for_short_strings_it_matched() -> None:
    # The engine's pattern test runs once for a short string it matched; a string
    # it refused, a long one, and any once the memo is full ask it every time.
    asked: list[str] = []

    def matches(text: str) -> bool:
        asked.append(text)
        return text.startswith("a")

    handed: list[object] = []
    decided = {"s": (False, ("match", (0, 100), matches))}
    check, count = deciding_checker(handed.append, decided)
    long = "a" * (MEMO_CHARS + 1)
    for value in ["ab", "ab", "b", "b", long, long]:
        check({"s": value})
    assert asked == ["ab", "b", "b", long, long]
    assert handed == [{"s": "b"}] * 2
    assert count() == 4
    words = [f"a{number}" for number in range(MEMO_STRINGS + 1)]
    for word in words * 2:
        assert check({"s": word}) is True
    # "ab" and the first 31 words were kept; the last two words ask again.
    assert asked[5:] == [*words, *words[MEMO_STRINGS - 1 :]]


def test_calls_decided_without_the_engine_count_as_cache_hits() -> None:
    # The deciding checker counts its own calls; the cache's statistics and its
    # eviction (an entry in use gets a second chance) see them.
    check = create_json_schema_tool_validator(cache_size=1)
    decided = ToolDefinition(name="add", execute=_never, parameters=_README)
    context = ToolExecutionContext(ToolCall(id="1", name="add", arguments={"a": 1, "b": 2}))
    for _ in range(3):
        assert check(decided, {"a": 1, "b": 2}, context) is None
    assert check(decided, {"a": 1, "b": "2"}, context) is not None  # the engine's, counted too
    info = check.cache_info()
    assert (info.misses, info.hits) == (1, 4)
    other = ToolDefinition(name="other", execute=_never, parameters={"type": "object"})
    assert check(other, {}, context) is None
    info = check.cache_info()
    assert (info.misses, info.currsize) == (2, 1)
    assert info.hits >= 4  # the evicted entry's hits are kept


async def _never(_args: Any, _ctx: ToolExecutionContext) -> ToolResult:
    raise AssertionError("never executed")  # pragma: no cover


def test_a_table_of_exact_str_keys_is_told_by_its_size() -> None:
    # The dicts callers build (literals, JSON, keywords, copies) of exact str
    # keys have a size in STR_TABLES: their keys need no look one by one. A
    # table that holds or held any other key never has: its keys are looked at.
    literal = {"city": "Oslo", "days": 3}
    built = [
        literal,
        json.loads('{"city": "Oslo", "days": 3}'),
        dict(city="Oslo", days=3),  # noqa: C408 - keywords, as callers write them
        dict(zip(literal, literal.values(), strict=True)),
        dict(literal),
        {**literal},
        json.loads(json.dumps({f"k{number}": number for number in range(40)})),
    ]
    for value in built:
        assert value.__sizeof__() in STR_TABLES, value
    for count in range(1, 100):
        keys = [f"k{number}" for number in range(count)]
        assert dict.fromkeys(keys).__sizeof__() in STR_TABLES
        assert dict.fromkeys([*keys, 0]).__sizeof__() not in STR_TABLES
        assert _general_table(dict.fromkeys(keys)).__sizeof__() not in STR_TABLES
        assert dict.fromkeys([*keys[1:], Key(keys[0])]).__sizeof__() not in STR_TABLES
    assert {}.__sizeof__() not in STR_TABLES
