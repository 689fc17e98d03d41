"""Calls parsed from JSON text: the text's bound replaces the walk only where it proves the limits.

A call built by ``ToolCall.from_json`` carries its text's length and bracket
count; a compiled schema's ``text_bound`` says up to which length and nesting
any value parsed from such a text is within the limits and budgets. These
tests prove, through the public API, that each limit is in that threshold (a
text past it is walked, and refused exactly as a hand-built call is), that
the attacks of the closed path are refused from text too, and that the
verdicts from text and from a dict never differ.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prism.core import (
    DispatchOptions,
    ErrorInfo,
    ParsedJson,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolRegistry,
    ToolResult,
    dispatch_tool_call,
)
from prism.validation.jsonschema import (
    JsonSchemaArgumentValidator,
    SchemaLimits,
    create_json_schema_tool_validator,
)

OPEN: dict[str, Any] = {"type": "object"}
CLOSED_TAGS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "n": {"type": "integer"},
        "tags": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 10}},
    },
    "additionalProperties": False,
}


async def _noop(_args: Any, _ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text("ok")


def _verdicts(
    schema: dict[str, Any], text: str, limits: SchemaLimits | None = None
) -> tuple[object, object]:
    """The verdict on a call from ``text`` and on the same value built by hand."""
    check = create_json_schema_tool_validator(limits=limits)
    tool = ToolDefinition(name="t", execute=_noop, parameters=schema)
    call = ToolCall.from_json(id="1", name="t", arguments=text)
    from_text = check(tool, call.arguments, ToolExecutionContext(call))  # type: ignore[arg-type]
    by_hand = copy.deepcopy(call.arguments)
    built = ToolCall(id="1", name="t", arguments=by_hand)
    from_dict = check(tool, by_hand, ToolExecutionContext(built))  # type: ignore[arg-type]
    # As a host holding a whole message builds it (ToolCall.from_parsed): the same words.
    try:
        message = ParsedJson.parse('{"params": {"arguments": ' + text + "}}")
    except ValueError:  # not JSON (a 4,000-digit integer is past the parser's limit)
        return from_text, from_dict
    params = message.member("params")
    inner = None if params is None else params.member("arguments")
    assert inner is not None
    parsed = ToolCall.from_parsed(id="1", name="t", arguments=inner)
    from_parsed = check(tool, parsed.arguments, ToolExecutionContext(parsed))  # type: ignore[arg-type]
    assert _message(from_parsed) == _message(from_text)
    return from_text, from_dict


def _message(outcome: object) -> str | None:
    assert outcome is None or isinstance(outcome, ErrorInfo)
    return None if outcome is None else outcome.message


@pytest.mark.parametrize(
    ("limits", "text", "refusal"),
    [
        # max_string_length=12: a 40-character text of short strings passes (walked) ...
        (SchemaLimits(max_string_length=12), json.dumps({"a": "x" * 12, "b": "y" * 12}), None),
        # ... and a 13-character string or key is refused as a hand-built call is.
        (
            SchemaLimits(max_string_length=12),
            json.dumps({"a": "x" * 13}),
            "is longer than max_string_length=12",
        ),
        (SchemaLimits(max_string_length=12), json.dumps({"k" * 13: 1}), "has a key longer"),
        # max_instance_properties=3
        (SchemaLimits(max_instance_properties=3), json.dumps({"a": 1, "b": 2, "c": 3}), None),
        (
            SchemaLimits(max_instance_properties=3),
            json.dumps({"a": 1, "b": {"c": 1, "d": 2}}),
            "max_instance_properties=3",
        ),
        # max_array_length=3
        (SchemaLimits(max_array_length=3), json.dumps({"a": [1, 2], "b": [3]}), None),
        (
            SchemaLimits(max_array_length=3),
            json.dumps({"a": [1, 2], "b": [3, 4]}),
            "max_array_length=3",
        ),
        # max_instance_depth=2: many brackets side by side are not deep ...
        (SchemaLimits(max_instance_depth=2), json.dumps({"a": [1], "b": [2], "c": {}}), None),
        # ... nesting is.
        (
            SchemaLimits(max_instance_depth=2),
            json.dumps({"a": {"b": {"c": 1}}}),
            "max_instance_depth=2",
        ),
    ],
)
def test_each_instance_limit_is_in_the_text_bound(
    limits: SchemaLimits, text: str, refusal: str | None
) -> None:
    from_text, from_dict = _verdicts(OPEN, text, limits)
    assert _message(from_text) == _message(from_dict)
    if refusal is None:
        assert from_text is None
    else:
        assert refusal in (_message(from_text) or "")


def test_the_text_bound_is_the_tightest_of_the_limits() -> None:
    limits = SchemaLimits(max_string_length=500, max_instance_properties=300, max_array_length=700)
    compiled = JsonSchemaArgumentValidator(limits=limits).compile(OPEN)
    bound = compiled.text_bound
    assert bound is not None
    assert bound[:2] == (300, limits.max_instance_depth)
    assert bound[2]({"a": 1}) is True


def test_the_per_call_budgets_are_in_the_text_bound() -> None:
    schema = {
        "type": "object",
        "additionalProperties": {"type": "string", "pattern": "^[a-z]+$"},
    }
    limits = SchemaLimits(max_regex_work=2_000)
    compiled = JsonSchemaArgumentValidator(limits=limits).compile(schema)
    assert compiled.text_bound is not None
    chars = compiled.text_bound[0]
    assert 0 < chars < limits.max_instance_properties
    # A text just within passes with no walk; a longer one is walked, and a
    # value past the budget is refused as a hand-built one is.
    within = json.dumps({"a": "b" * max(chars - 10, 1)})
    assert len(within) <= chars
    assert _verdicts(schema, within, limits) == (None, None)
    over = json.dumps({f"k{i}": "a" * 60 for i in range(30)})
    from_text, from_dict = _verdicts(schema, over, limits)
    assert _message(from_text) == _message(from_dict)
    assert "max_regex_work" in (_message(from_text) or "")


@pytest.mark.parametrize(
    ("text", "refusal"),
    [
        ('{"n": ' + "9" * 4_000 + "}", "outside the 64-bit range"),
        ('{"n": -9223372036854775809}', "outside the 64-bit range"),
        ('{"n": 1e400}', "is not a finite number"),
        ('{"n": NaN}', "is not a finite number"),
        ('{"tags": ["\\ud800"]}', "lone surrogate"),
        ('{"tags": ["a", "b", "c", "d"]}', "less than or equal to 3 items"),
        (json.dumps({"tags": ["x"] * 20_000}), "less than or equal to 3 items"),
        ('{"__proto__": 1}', "__proto__"),
    ],
)
def test_the_closed_path_attacks_are_refused_from_text(text: str, refusal: str) -> None:
    from_text, from_dict = _verdicts(CLOSED_TAGS, text)
    assert _message(from_text) == _message(from_dict)
    assert refusal in (_message(from_text) or ""), _message(from_text)


def test_an_evicted_schema_has_no_text_bound() -> None:
    validator = JsonSchemaArgumentValidator(cache_size=1)
    first = validator.compile({"type": "object"})
    assert first.text_bound is not None
    validator.compile({"type": "array"})
    assert first.text_bound is None
    # Still validates, compiling again.
    assert first.validate({"a": 1}).ok


_SCHEMAS: list[dict[str, Any]] = [
    CLOSED_TAGS,
    OPEN,
    {
        "type": "object",
        "properties": {
            "s": {"type": "string", "maxLength": 4, "pattern": "^[a-c]*$"},
            "xs": {"type": "array", "items": {"type": "integer", "minimum": 0}},
        },
        "required": ["s"],
    },
    {"type": "object", "additionalProperties": {"anyOf": [{"type": "integer"}, {"type": "array"}]}},
]
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet="abcdx[{\u00e9", max_size=6),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(["n", "s", "xs", "tags", "z"]), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(range(len(_SCHEMAS))),
    st.dictionaries(st.sampled_from(["n", "s", "xs", "tags", "z"]), _JSON, max_size=4),
)
def test_a_call_from_text_gets_the_verdict_of_the_same_value_built_by_hand(
    which: int, value: dict[str, Any]
) -> None:
    limits = SchemaLimits(max_instance_depth=3, max_string_length=5, max_array_length=6)
    from_text, from_dict = _verdicts(_SCHEMAS[which], json.dumps(value), limits)
    assert _message(from_text) == _message(from_dict)


async def test_dispatch_checks_calls_from_text() -> None:
    registry = ToolRegistry()
    registry.register(ToolDefinition(name="tags", execute=_noop, parameters=CLOSED_TAGS))
    options = DispatchOptions(registry=registry, validator=create_json_schema_tool_validator())
    ok = await dispatch_tool_call(
        ToolCall.from_json(id="1", name="tags", arguments='{"n": 1, "tags": ["a"]}'), options
    )
    assert not ok.is_error
    refused = await dispatch_tool_call(
        ToolCall.from_json(id="2", name="tags", arguments='{"n": "1"}'), options
    )
    assert refused.is_error
    assert "data.n: must be integer" in refused.joined_text
