"""The checker written per closed schema answers exactly as the general closed checker.

Each closed schema of up to 32 properties gets a checker written for it
(``_unrolled``): one test per property for its expected type, anything else
handed to the general closed checker. These tests hold the two side by side,
over the same engine, on values of every kind a caller can build (subclasses,
tuples, sets, NaN, bytes, bools where integers go, -0.0, huge integers, lone
surrogates, keys that are not exact strings): the same answer, the same
values handed to the engine, and no value's or key's own code run.
"""

from __future__ import annotations

import copy
import math
from enum import IntEnum, StrEnum
from typing import Any

import jsonschema_rs
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from prism.validation.jsonschema import JsonSchemaArgumentValidator, SchemaLimits
from prism.validation.jsonschema._closed import closed_bounds
from prism.validation.jsonschema._fast import Nowhere, closed_checker
from prism.validation.jsonschema._unrolled import kind_of, kinds_of, unrolled_checker

LIMITS = SchemaLimits(max_string_length=100, max_instance_properties=16, max_array_length=16)

# Every kind a property can have, required and optional.
EVERY_KIND: dict[str, Any] = {
    "type": "object",
    "properties": {
        "i": {"type": "integer", "minimum": 1, "maximum": 14},
        "s": {"type": "string", "maxLength": 8},
        "u": {"type": "string"},  # no maxLength: held to max_string_length
        "e": {"enum": ["red", "green"]},
        "k": {"const": "fixed"},
        "b": {"type": "boolean"},
        "z": {"type": "null"},
        "f": {"enum": [-0.0, 1]},
        "m": {"enum": [1.5, 2, None, True, "a"]},
        "t": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 4}},
        "n": {"type": "array", "maxItems": 3, "items": {"type": "integer"}},
        "x": {"type": "array", "maxItems": 2, "items": {"enum": [1, 2.5, None, False, "q"]}},
        "w": {"type": "array", "maxItems": 2, "items": {"const": 2.5}},
        "o": {"type": "array", "maxItems": 2, "items": {"type": "boolean"}},
        "v": {"type": "array", "maxItems": 2, "items": {"type": "null"}},
    },
    "required": ["i", "s"],
    "additionalProperties": False,
}
README: dict[str, Any] = {
    "type": "object",
    "required": ["a", "b"],
    "additionalProperties": False,
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
}
# Closed but for undeclared keys; and a pattern on unbounded strings, so each
# call's characters are counted against the regex budget.
DECLARED = {key: value for key, value in EVERY_KIND.items() if key != "additionalProperties"}
COUNTED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "pattern": "^[A-Za-z ]*$"},
        "tags": {"type": "array", "maxItems": 3, "items": {"type": "string", "pattern": "^b"}},
        "any": {"enum": ["bb", 1]},
    },
    "additionalProperties": False,
}
# Counted with short members besides: only the unbounded string's characters are
# counted (against what the short ones may not hold, see _unrolled._counted).
FOLDED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "pattern": "^[a-z]*$"},
        "code": {"type": "string", "maxLength": 2},
        "tags": {"type": "array", "maxItems": 2, "items": {"type": "string", "maxLength": 3}},
        "any": {"enum": ["bb", 1]},
    },
    "additionalProperties": False,
}
EMPTY: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
# An optional member: a call with every name takes the checker's other branch.
PEERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 8},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
    },
    "required": ["city"],
    "additionalProperties": False,
}


class Small(IntEnum):
    ONE = 1


class Word(StrEnum):
    A = "a"


_RAN: list[str] = []


class _Loud(str):
    """A string whose own methods record that they ran."""

    def __hash__(self) -> int:
        _RAN.append("__hash__")
        return str.__hash__(self)

    def __eq__(self, other: object) -> bool:
        _RAN.append("__eq__")
        return str.__eq__(self, other)

    def __len__(self) -> int:
        _RAN.append("__len__")
        return 0

    def isascii(self) -> bool:
        _RAN.append("isascii")
        return True


class _Int(int):
    def __le__(self, other: object) -> bool:
        _RAN.append("__le__")
        return True

    def __ge__(self, other: object) -> bool:
        _RAN.append("__ge__")
        return True


class _Dict(dict[str, Any]):
    def __len__(self) -> int:
        _RAN.append("__len__")
        return 0

    def __iter__(self) -> Any:
        _RAN.append("__iter__")
        return iter(())


class _List(list[Any]):
    def __len__(self) -> int:
        _RAN.append("__len__")
        return 0


def _general_table(value: dict[str, Any]) -> dict[str, Any]:
    """``value``'s items in a table of the general kind: exact str keys, looked at one by one."""
    table: dict[Any, Any] = {0: 0, **value}
    del table[0]
    return table


_ODD: list[Any] = [
    lambda: 2**63,
    lambda: 2**64 - 1,
    lambda: 2**64,
    lambda: -(2**63),
    lambda: -(2**63) - 1,
    lambda: 10**400,
    lambda: Small.ONE,
    lambda: Word.A,
    lambda: _Int(3),
    lambda: _Loud("a"),
    lambda: "\ud800",
    lambda: "é\udfff",
    lambda: "x" * 101,
    lambda: "é" * 100,
    lambda: math.nan,
    lambda: -math.inf,
    lambda: -0.0,
    lambda: True,
    lambda: (1,),
    lambda: {1},
    lambda: b"x",
    lambda: _List(["a"]),
    lambda: [["x"]],
    lambda: {"a": 1},
    lambda: ["x"] * 4,
    lambda: ["é\ud800"],
    lambda: [2**64],
    lambda: [math.nan],
    lambda: [Small.ONE],
]
_odd = st.integers(0, len(_ODD) - 1).map(lambda i: _ODD[i]())
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-20, 20)
    | st.floats()
    | st.sampled_from(["red", "fixed", "a", "q", "bb", "ab", "b x"])
    | st.text(max_size=9)
    | _odd
)
_members = _scalars | st.lists(_scalars, max_size=4)
_NAMES = ["i", "s", "u", "e", "k", "b", "z", "f", "m", "t", "n", "x", "w", "o", "v"]
_NAMES += ["a", "city", "tags", "any", "days"]
_odd_keys = st.sampled_from([0, ("i",), None, "\ud800"]) | st.builds(_Loud, st.sampled_from("isa"))
_keys = st.sampled_from([*_NAMES, "other"]) | st.text(max_size=3) | _odd_keys
_values = (
    st.fixed_dictionaries({}, optional=dict.fromkeys(_NAMES, _members))
    | st.dictionaries(_keys, _members, max_size=6)
    | st.builds(_Dict, st.dictionaries(st.sampled_from(_NAMES), _members, max_size=3))
    | _members
)


def _pair(schema: dict[str, Any], most_chars: int | None = None) -> tuple[Any, Any, list[Any]]:
    """The general and the written checker of ``schema``, and what each handed the engine."""
    bounds = closed_bounds(schema, LIMITS)
    assert bounds is not None
    caps, arrays = bounds[3], bounds[5]
    engine = jsonschema_rs.validator_for(schema).is_valid
    seen: list[Any] = []

    def valid(value: Any) -> bool:
        seen.append(value)
        return engine(value)

    general = closed_checker(valid, caps, arrays, most_chars=most_chars)
    written = unrolled_checker(
        valid, general, kinds_of(schema, caps), caps, arrays, Nowhere(), most_chars=most_chars
    )
    return general, written, seen


_PAIRS = [
    _pair(EVERY_KIND),
    _pair(README),
    _pair(DECLARED),
    _pair(COUNTED, most_chars=12),
    _pair(FOLDED, most_chars=120),
    _pair(EMPTY),
    _pair(PEERS),
]


def _answer(check: Any, value: Any) -> object:
    try:
        return check(value)
    except Exception as exc:  # the engine could not read it: both raise alike
        return type(exc)


@settings(max_examples=100, deadline=None)
@given(value=_values)
@example(value={"i": 3, "s": "ok"})
@example(value={"i": 3, "s": "x" * 9})
@example(value={"i": 3, "s": "x", "t": ["a"] * 4})
@example(value={"a": 1, "b": 2})
@example(value={"a": 1, "b": _Int(2)})
@example(value={"a": 1, Word.A: 2})
@example(value={"a": 1, _Loud("b"): 2})
@example(value={"city": "Oslo", _Loud("days"): 3})
@example(value=_general_table({"a": 1, "b": 2}))
@example(value=_general_table({"city": "Oslo", "days": 3}))
@example(value=_general_table({"city": "Oslo", "days": 30}))
@example(value={"i": 3, "s": "ok", "t": ["a", "b"], "n": [1, 2**64]})
@example(value={"city": "abcdefghij", "tags": ["bcd"]})
@example(value={"city": "abcdefghijkl", "tags": ["bcd"]})
@example(value={"city": "ab", "any": "bb"})
@example(value={"city": "x" * 100, "code": "ab", "tags": ["abc", "abc"], "any": "bb"})
@example(value={"city": "x" * 100, "code": "", "tags": [], "any": 1})
@example(value={"city": "x" * 100, "code": "ab", "tags": ["abc", "abc", "abc"], "any": "bb"})
@example(value={})
@example(value={"city": "Oslo", "days": 3})
@example(value={"city": "Oslo", "days": 2**64})
@example(value={"city": "Oslo", "days": True})
@example(value={"city": "Oslo\ud800", "days": 3})
@example(value={"city": "Oslo", "other": 3})
def test_the_written_checker_answers_as_the_general_one(value: Any) -> None:
    for general, written, seen in _PAIRS:
        seen.clear()
        expected = _answer(general, value)
        handed = list(seen)
        seen.clear()
        _RAN.clear()
        assert _answer(written, value) == expected, value
        # The written checker hands the engine what the general one hands it
        # (itself, or through the general checker); no value's code ran.
        assert seen == handed, value
        assert _RAN == [], value


def test_the_written_checker_decides_the_usual_calls_itself() -> None:
    # A plain call of each kind takes no step through the general checker.
    calls: list[object] = []

    def general(value: object) -> None:
        calls.append(value)

    bounds = closed_bounds(EVERY_KIND, LIMITS)
    assert bounds is not None
    caps, arrays = bounds[3], bounds[5]
    engine = jsonschema_rs.validator_for(EVERY_KIND).is_valid
    counter = Nowhere()
    written = unrolled_checker(engine, general, kinds_of(EVERY_KIND, caps), caps, arrays, counter)
    full = {
        "i": 3,
        "s": "é",
        "u": "x" * 100,
        "e": "red",
        "k": "fixed",
        "b": False,
        "z": None,
        "f": -0.0,
        "m": 2,
        "t": ["a", "ü"],
        "n": [1, -(2**63)],
        "x": ["q", 2.5],
        "w": [2.5, 2.5],
        "o": [True],
        "v": [None],
    }
    assert written(full) is True
    assert written({"i": 3, "s": "ok"}) is True
    assert written({"i": 30, "s": "ok"}) is False  # the engine refuses: recorded
    assert counter.refused == {"i": 30, "s": "ok"}
    assert counter.hits == 3
    assert calls == []


@pytest.mark.parametrize(
    "value",
    [
        {"i": 3},  # a required property missing
        {"i": 3, "s": "ok", "other": 1},  # an undeclared key
        {"i": 3, "s": "ok", "b": 1},  # a value of another type
        {"i": 3, "s": "x" * 9},  # past its maxLength
        {"i": 3, "s": "ok", "t": ["a"] * 4},  # past maxItems
        {"i": 3, _Loud("s"): "ok"},  # a key that is not an exact str
        _Dict(i=3, s="ok"),
        [("i", 3)],
    ],
)
def test_anything_unexpected_goes_to_the_general_checker(value: Any) -> None:
    calls: list[object] = []

    def general(seen: object) -> None:
        calls.append(seen)

    bounds = closed_bounds(EVERY_KIND, LIMITS)
    assert bounds is not None
    caps, arrays = bounds[3], bounds[5]
    written = unrolled_checker(
        lambda _value: True, general, kinds_of(EVERY_KIND, caps), caps, arrays, Nowhere()
    )
    _RAN.clear()
    assert written(value) is None
    assert calls == [value]
    assert _RAN == []


def test_a_tool_validator_uses_the_written_checker_for_a_small_closed_schema() -> None:
    validator = JsonSchemaArgumentValidator(limits=LIMITS)
    quick = validator.compile(README).quick_valid
    assert quick is not None
    # The README's schema is in the subset decided without the engine (see
    # test_validation_jsonschema_decided); multipleOf takes it out.
    assert quick.__code__.co_filename == "<prism deciding checker>"
    properties = {"a": {"type": "integer", "multipleOf": 1}, "b": {"type": "integer"}}
    engine_schema = {**README, "properties": properties}
    quick = validator.compile(engine_schema).quick_valid
    assert quick is not None
    assert quick.__code__.co_filename == "<prism closed checker>"
    assert quick({"a": 1, "b": 2}) is True
    assert quick({"a": 1, "b": 2**64}) is None
    assert validator.compile(README).validate({"a": 1, "b": 2**64}).errors[0].path == "data.b"
    wide = {
        "type": "object",
        "properties": {f"p{i}": {"type": "integer"} for i in range(33)},
        "additionalProperties": False,
    }
    quick = JsonSchemaArgumentValidator().compile(wide).quick_valid
    assert quick is not None
    assert quick.__code__.co_filename != "<prism closed checker>"  # the general checker
    assert quick({"p0": 1}) is True


def test_required_names_count_only_from_a_list_of_strings() -> None:
    properties = {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 1}}
    caps = {"a": 1, "b": 1}
    assert kinds_of({"properties": properties, "required": ["a"]}, caps) == {
        "a": ("int", True, ""),
        "b": ("str", False, ""),
    }
    for required in ("a", ["a", 1], None):
        kinds = kinds_of({"properties": properties, "required": required}, caps)
        assert kinds == {"a": ("int", False, ""), "b": ("str", False, "")}
    assert kind_of(True) == kind_of({"enum": ["a", 1]}) == kind_of({"type": "number"}) == "any"


_PAYLOADS = [
    '"',
    "'",
    "\\",
    "\n",
    "\u2028",
    "\x00",
    "{0}",
    "\"); open('CANARY','w'); (\"",
    "'):\n    open('CANARY','w')\n#",
]


def test_names_and_bounds_stay_data_in_the_written_checker(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The checker's text is made of fixed pieces; every name and bound of the
    # schema is an argument, so none can become code.
    monkeypatch.chdir(tmp_path)
    properties: dict[str, Any] = {
        payload: {"type": "string", "enum": [payload], "maxLength": 40} for payload in _PAYLOADS
    }
    properties["n"] = {"type": "array", "maxItems": 2, "items": {"const": _PAYLOADS[-1]}}
    schema = {
        "type": "object",
        "title": _PAYLOADS[-1],
        "properties": properties,
        "required": _PAYLOADS[:3],
        "additionalProperties": False,
    }
    # Written to decide without the engine, and (multipleOf takes it out of
    # that subset) to hand each call to it.
    engine_schema: dict[str, Any] = copy.deepcopy(schema)
    engine_schema["properties"][_PAYLOADS[0]]["multipleOf"] = 1
    for checked, written in (
        (schema, "<prism deciding checker>"),
        (engine_schema, "<prism closed checker>"),
    ):
        compiled = JsonSchemaArgumentValidator().compile(checked)
        quick = compiled.quick_valid
        assert quick is not None
        assert quick.__code__.co_filename == written
        value: dict[str, Any] = {payload: payload for payload in _PAYLOADS}
        value["n"] = [_PAYLOADS[-1]]
        assert quick(value) is True
        assert quick({**value, "n": ["x"]}) is False
        assert not compiled.validate({_PAYLOADS[0]: "x"}).ok
    assert not (tmp_path / "CANARY").exists()


def test_the_engines_first_call_made_in_a_checker_leaves_it_whole() -> None:
    """A written checker's frame once had no builtins: when the process's first call of
    the engine came from one (the demo's first tool call), jsonschema-rs took `list`
    for an unknown type from then on, in every validator ("Unsupported type: 'list'":
    the edit tool's valid calls were refused). In a process of its own, as the first
    call is made once per process."""
    import subprocess
    import sys

    code = (
        "import jsonschema_rs\n"
        "from prism.validation.jsonschema import JsonSchemaArgumentValidator\n"
        "closed = JsonSchemaArgumentValidator().compile({'type': 'object', 'properties':"
        " {'path': {'type': 'string'}}, 'required': ['path'], 'additionalProperties': False})\n"
        "assert closed.validate({'path': 'README.md'}).ok\n"
        "assert jsonschema_rs.validator_for({'type': 'array'}).is_valid([1, {'a': [2]}])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
