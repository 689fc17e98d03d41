"""Arguments the engine would misread: huge integers, lone surrogates, subclasses, hostile keys.

jsonschema-rs reads an ``int`` or ``str`` subclass as its base type, skips the
numeric bounds of an integer it cannot convert to decimal text, and reads
past a lone surrogate where only a length is checked. Prism refuses all of
these before (or, for a closed schema, right after) the engine runs, on every
path, and never raises while doing so. Refusals name the path and the rule and
never quote an argument's value back.
"""

from __future__ import annotations

import enum
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prism.core import ErrorInfo, ToolCall, ToolDefinition, ToolExecutionContext, ToolResult
from prism.validation.jsonschema import (
    JsonSchemaArgumentValidator,
    SchemaRejectedError,
    create_json_schema_tool_validator,
)
from prism.validation.jsonschema._validator import _refusal, _translate

D4 = "http://json-schema.org/draft-04/schema#"
D6 = "http://json-schema.org/draft-06/schema#"
D7 = "http://json-schema.org/draft-07/schema#"
D2019 = "https://json-schema.org/draft/2019-09/schema"
D2020 = "https://json-schema.org/draft/2020-12/schema"
DRAFTS = [D4, D6, D7, D2019, D2020]

HUGE = 2**64  # one past the 64-bit integers Prism validates
LARGEST = 2**64 - 1  # the largest integer Prism validates
SMALLEST = -(2**63)  # the smallest
RANGE = "outside the 64-bit range"
SECRET = "sk-SECRET-0123456789"

CLOSED_INT = {
    "type": "object",
    "properties": {"n": {"type": "integer", "minimum": 0}},
    "additionalProperties": False,
}
CLOSED_STR = {
    "type": "object",
    "properties": {"a": {"type": "string", "maxLength": 5}},
    "additionalProperties": False,
}
CLOSED_ENUM = {
    "type": "object",
    "properties": {
        "n": {"type": "integer"},
        "e": {"enum": ["a", "b"]},
        "t": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 5}},
    },
    "additionalProperties": False,
}


class Number(enum.IntEnum):
    A = 1


class Word(enum.StrEnum):
    A = "a"


class Items(list[str]):
    pass


class HashesLikeProto(str):
    """A key whose hash meets "__proto__" (and "$schema") lookups, and whose == raises."""

    def __hash__(self) -> int:
        return hash(self.target)

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("user code ran")

    def __repr__(self) -> str:
        raise RuntimeError("user code ran")

    target = "__proto__"


class HashesLikeSchema(HashesLikeProto):
    target = "$schema"


async def _noop(_args: Any, _ctx: Any) -> ToolResult:
    return ToolResult.text("ok")


_CONTEXT = ToolExecutionContext(ToolCall(id="1", name="t", arguments={}))


def _in(draft: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "$schema": draft}


def _refused(result: Any, path: str, *words: str) -> str:
    assert not result.ok
    error = result.errors[0]
    assert error.path == path, error
    for word in words:
        assert word in error.message, error.message
    return str(error.message)


def _tool_refusal(schema: dict[str, Any], arguments: Any) -> ErrorInfo:
    check = create_json_schema_tool_validator()
    tool = ToolDefinition(name="t", execute=_noop, parameters=schema)
    info = check(tool, arguments, _CONTEXT)
    assert info is not None
    # The second call takes the identity hot path.
    again = check(tool, arguments, _CONTEXT)
    assert again == info
    return info


# -- F4: integers past 64 bits (jsonschema-rs's slow path, or none at all) -----


def _bound_cases(draft: str) -> list[tuple[dict[str, Any], Any, str]]:
    exclusive = {"maximum": 5, "exclusiveMaximum": True} if draft == D4 else {"exclusiveMaximum": 5}
    return [
        ({"type": "integer", "maximum": 100}, HUGE, "data"),
        ({"type": "integer", "minimum": 0}, -HUGE, "data"),
        ({"multipleOf": 2}, HUGE + 1, "data"),
        (exclusive, HUGE, "data"),
        ({"type": "array", "items": {"maximum": 1}}, [1, HUGE], "data[1]"),
        ({"type": "object"}, {"a": {"b": -HUGE}}, "data.a.b"),
        (CLOSED_INT, {"n": HUGE}, "data.n"),
        (CLOSED_ENUM, {"t": ["a"], "n": HUGE}, "data.n"),
    ]


@pytest.mark.parametrize("draft", DRAFTS)
def test_integers_past_64_bits_are_refused_in_every_draft(draft: str) -> None:
    validator = JsonSchemaArgumentValidator()
    for schema, value, path in _bound_cases(draft):
        _refused(validator.validate(_in(draft, schema), value), path, RANGE)
    for huge in (10**4300, 10**30, SMALLEST - 1):
        _refused(validator.validate(_in(draft, {"type": "integer"}), huge), "data", RANGE)


@pytest.mark.parametrize("draft", [D7, D2020])
def test_integers_at_the_64_bit_ends_still_meet_their_bounds(draft: str) -> None:
    validator = JsonSchemaArgumentValidator()
    assert validator.validate(_in(draft, {"type": "integer"}), LARGEST).ok
    assert validator.validate(_in(draft, {"type": "integer"}), SMALLEST).ok
    assert validator.validate(_in(draft, CLOSED_INT), {"n": LARGEST}).ok
    _refused(validator.validate(_in(draft, {"maximum": 100}), LARGEST), "data", "(rule: maximum)")
    _refused(validator.validate(_in(draft, CLOSED_INT), {"n": SMALLEST}), "data.n", "minimum")


def test_unique_items_over_big_integers_is_refused_before_the_engine_runs() -> None:
    # jsonschema-rs compares integers past 64 bits through a slow path:
    # uniqueItems over 1,000 of them took 0.4 s, over 3,000 of 300 digits 17 s.
    tool = _tool_refusal(
        {
            "type": "object",
            "properties": {
                "a": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
            },
            "additionalProperties": False,
        },
        {"a": [LARGEST - 5, *(HUGE + index for index in range(3000))]},
    )
    assert "data.a[1]: is an integer outside the 64-bit range" in tool.message


def test_the_closed_hot_path_refuses_a_huge_integer() -> None:
    info = _tool_refusal(CLOSED_INT, {"n": HUGE})
    assert info.code == "invalid_arguments"
    assert "data.n: is an integer outside the 64-bit range" in info.message
    assert "send it as a string" in info.message


def test_a_schema_with_a_huge_integer_is_refused_not_raised() -> None:
    validator = JsonSchemaArgumentValidator()
    for schema, path in [({"maximum": HUGE}, "#/maximum"), ({"enum": [1, -HUGE]}, "#/enum/1")]:
        _refused(validator.validate(schema, 1), path, "schema rejected", RANGE)
        with pytest.raises(SchemaRejectedError):
            validator.check_schema(schema)


# -- F5: lone surrogates in arrays and objects, keys and values ---------------


@pytest.mark.parametrize("draft", DRAFTS)
@pytest.mark.parametrize(
    ("schema", "value", "path"),
    [
        ({"type": "object"}, {"a": "\ud800"}, "data.a"),
        ({"items": {"type": "string"}}, ["ok", "x\udbff"], "data[1]"),
        (CLOSED_STR, {"a": "\ud800"}, "data.a"),
        (CLOSED_ENUM, {"t": ["a", "\udc00"]}, "data.t[1]"),
        ({}, {"\udfff": 1}, "data"),
        (CLOSED_STR, {"\udfff": "x"}, "data"),
        ({"items": {"format": "email"}}, ["\ud800"], "data[0]"),
    ],
)
def test_lone_surrogates_fail_closed_in_every_draft(
    draft: str, schema: dict[str, Any], value: Any, path: str
) -> None:
    validator = JsonSchemaArgumentValidator(assert_formats=True)
    _refused(validator.validate(_in(draft, schema), value), path, "lone surrogate")


def test_a_lone_surrogate_from_json_loads_is_refused_on_the_hot_path() -> None:
    arguments = json.loads('{"a": "\\ud800"}')
    info = _tool_refusal(CLOSED_STR, arguments)
    assert "data.a: contains a lone surrogate" in info.message


def test_valid_non_ascii_strings_and_keys_still_pass() -> None:
    validator = JsonSchemaArgumentValidator()
    assert validator.validate(CLOSED_STR, {"a": "héllo"}).ok
    assert validator.validate({"type": "object"}, {"clé": ["😀", "\U0010ffff"]}).ok


# -- F6: validate never raises, whatever the keys run --------------------------


def test_a_hostile_argument_key_is_refused_without_running_its_code() -> None:
    validator = JsonSchemaArgumentValidator()
    key = HashesLikeProto("x")
    schemas: list[dict[str, Any]] = [{"type": "object"}, CLOSED_STR, {"items": {}}]
    for schema in schemas:
        value: Any = {key: 1} if schema.get("type") == "object" else [{key: 1}]
        path = "data" if schema.get("type") == "object" else "data[0]"
        _refused(validator.validate(schema, value), path, "non-string key")
        _refused(validator.validate_output(schema, value), path, "non-string key")
        _refused(validator.compile(schema).validate(value), path, "non-string key")
    assert "non-string key" in _tool_refusal(CLOSED_STR, {key: "x"}).message


def test_a_hostile_schema_key_is_refused_without_running_its_code() -> None:
    validator = JsonSchemaArgumentValidator()
    cases: list[tuple[dict[Any, Any], str]] = [
        ({HashesLikeSchema("x"): 1, "type": "object"}, "#"),
        ({"properties": {HashesLikeProto("y"): {}}}, "#/properties"),
    ]
    for schema, path in cases:
        _refused(validator.validate(schema, {}), path, "schema rejected", "non-string key")
        _refused(validator.validate_output(schema, {}), path, "schema rejected")
        with pytest.raises(SchemaRejectedError):
            validator.check_schema(schema)
        with pytest.raises(SchemaRejectedError):
            validator.compile(schema)
        check = create_json_schema_tool_validator()
        tool = ToolDefinition(name="t", execute=_noop, parameters=schema)
        info = check(tool, {}, _CONTEXT)
        assert info is not None
        assert info.code == "schema_rejected"


# -- F7: the closed fast path agrees with the full path ------------------------


@pytest.mark.parametrize(
    ("value", "path", "kind"),
    [
        ({"n": Number.A}, "data.n", "Number"),
        ({"e": Word.A}, "data.e", "Word"),
        ({"t": ("a",)}, "data.t", "tuple"),
        ({"t": Items(["a"])}, "data.t", "Items"),
        ({"t": ["a", Word.A]}, "data.t[1]", "Word"),
    ],
)
def test_the_closed_path_refuses_what_the_full_path_refuses(
    value: dict[str, Any], path: str, kind: str
) -> None:
    validator = JsonSchemaArgumentValidator()
    opened = {key: item for key, item in CLOSED_ENUM.items() if key != "additionalProperties"}
    closed = _refused(validator.validate(CLOSED_ENUM, value), path, f"is a {kind}")
    full = _refused(validator.validate(opened, value), path, f"is a {kind}")
    assert closed == full
    assert f"{path}: is a {kind}, not a JSON value" in _tool_refusal(CLOSED_ENUM, value).message


def test_a_str_subclass_key_is_refused_on_the_closed_path() -> None:
    class Key(str):
        pass

    validator = JsonSchemaArgumentValidator()
    _refused(validator.validate(CLOSED_STR, {Key("a"): "x"}), "data", "non-string key")
    assert validator.validate(CLOSED_STR, {"a": "x"}).ok


# -- F10: refusals never quote the arguments -----------------------------------


@pytest.mark.parametrize(
    ("draft", "schema", "value", "rule"),
    [
        (D7, {"items": [{}], "additionalItems": False}, [1, SECRET], "additionalItems"),
        (D2019, {"items": [{}], "additionalItems": False}, [1, SECRET], "additionalItems"),
        (D2020, {"unevaluatedItems": False}, [SECRET], "unevaluatedItems"),
        (D2019, {"unevaluatedItems": False}, [SECRET], "unevaluatedItems"),
        (D7, {"propertyNames": {"maxLength": 3}}, {SECRET: 1}, "propertyNames"),
        (D2020, {"propertyNames": {"pattern": "^a"}}, {SECRET: 1}, "propertyNames"),
        (D7, {"contentMediaType": "application/json"}, SECRET, "contentMediaType"),
        (D7, {"contentEncoding": "base64"}, SECRET + "!", "contentEncoding"),
    ],
)
def test_refusals_name_the_rule_without_quoting_the_value(
    draft: str, schema: dict[str, Any], value: Any, rule: str
) -> None:
    result = JsonSchemaArgumentValidator().validate(_in(draft, schema), value)
    message = _refused(result, "data", f"(rule: {rule})")
    assert "SECRET" not in message
    # Through the dispatch validator, one level down.
    wrapped = _in(draft, {"type": "object", "properties": {"v": schema}})
    info = _tool_refusal(wrapped, {"v": value})
    assert "data.v: must" in info.message
    assert f"(rule: {rule})" in info.message
    assert "SECRET" not in json.dumps([info.message, info.details])


def test_an_engine_failure_is_reported_without_its_text() -> None:
    # Neither an unexpected engine exception nor an engine error of unknown
    # shape has its message quoted: either may carry the arguments.
    assert _translate(ValueError(SECRET)) == ("data", "validation failed with ValueError")

    class Odd(Exception):
        instance_path = ("a",)

    assert SECRET not in _refusal(Odd(SECRET), {"a": SECRET})[1]


# -- never raises, for any input ------------------------------------------------


class _PrintableHostileKey(HashesLikeSchema):
    """The hostile schema key, printable in hypothesis's reports."""

    def __repr__(self) -> str:
        return "_PrintableHostileKey()"


# Built on demand: hypothesis prints strategies and failing examples, and a
# 4,301-digit integer has no decimal repr.
_ODD: list[Any] = [
    lambda: HUGE,
    lambda: -HUGE,
    lambda: LARGEST,
    lambda: "\ud800",
    lambda: "a\udfffb",
    lambda: Number.A,
    lambda: Word.A,
    lambda: (1, 2),
    lambda: {1},
    lambda: b"x",
    lambda: float("nan"),
    lambda: float("inf"),
]
_odd = st.integers(0, len(_ODD) - 1).map(lambda i: _ODD[i]())
# The hostile key stays out of generated dicts: building a dict that also holds
# "__proto__" would run its __eq__ (the direct tests above cover it).
_keys = st.text(max_size=6) | st.sampled_from(["\udc00", "__proto__"])
_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8) | _odd,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_keys, children, max_size=4),
    max_leaves=20,
)
_SCHEMAS: list[Any] = [
    lambda: CLOSED_INT,
    lambda: CLOSED_STR,
    lambda: CLOSED_ENUM,
    lambda: {"type": "object"},
    lambda: _in(D4, {"items": {"type": "integer", "maximum": 3}}),
    lambda: _in(D7, {"items": [{}], "additionalItems": False, "propertyNames": {"maxLength": 2}}),
    lambda: _in(D2019, {"unevaluatedItems": False, "contentEncoding": "base64"}),
    lambda: _in(D2020, {"prefixItems": [{"type": "string"}], "uniqueItems": True}),
    lambda: {"maximum": HUGE},
    lambda: {_PrintableHostileKey("x"): 1},
    lambda: {"properties": {"a": {"enum": [Word.A]}}},
]
_schemas = st.integers(0, len(_SCHEMAS) - 1).map(lambda i: _SCHEMAS[i]())


@settings(max_examples=150, deadline=None)
@given(schema=_schemas, value=_values)
def test_no_entry_point_raises(schema: Any, value: Any) -> None:
    validator = JsonSchemaArgumentValidator()
    results = [validator.validate(schema, value), validator.validate_output(schema, value)]
    try:
        compiled = validator.compile(schema)
    except SchemaRejectedError:
        pass
    else:
        results.append(compiled.validate(value))
    for result in results:
        assert isinstance(result.ok, bool)
        if not result.ok:
            assert len(result.errors[0].message) <= 300
    check = create_json_schema_tool_validator()
    tool = ToolDefinition(name="t", execute=_noop, parameters=schema)
    for _ in range(2):  # the first call and the identity hot path
        info = check(tool, value, _CONTEXT)
        assert info is None or info.code in {"invalid_arguments", "schema_rejected"}
