"""Calls parsed from JSON text: what the text proves, and that nothing else carries it.

``ToolCall.from_json`` keeps, beside the arguments it parsed, the text's length
and bracket count when the text proves the value holds nothing a validator's
walk would look for (huge or non-finite numbers, lone surrogates, pollution
keys). ``ToolParameterValidator`` then asks the compiled schema's
``text_bound`` verdict instead of walking. These tests hold both ends: every
text that could hold such a value gets no bound, and a bound is never used
for arguments other than the very object parsed from its text.
"""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

import attrs
import pytest

from prism.core import (
    DispatchOptions,
    ErrorInfo,
    MiddlewareRegistry,
    ParsedJson,
    ToolArgumentValidationError,
    ToolArgumentValidationResult,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolParameterValidator,
    ToolRegistry,
    ToolResult,
    create_tool_name_map,
    dispatch_tool_call,
)
from prism.core._agent import _registry_call
from prism.core._call_text import TEXT_BOUND_LIMIT, parse_call_arguments
from prism.core._content import NO_TEXT_BOUND


def _bound(call: ToolCall) -> tuple[int, int] | None:
    if call._text_bound == NO_TEXT_BOUND:
        return None
    return call._text_bound


@pytest.mark.parametrize(
    ("text", "arguments", "bound"),
    [
        ('{"a": 2, "b": 3}', {"a": 2, "b": 3}, (16, 1)),
        ('{"xs": [[1], {"y": [2]}]}', {"xs": [[1], {"y": [2]}]}, (25, 5)),
        ('{"s": "[[[{{{"}', {"s": "[[[{{{"}, (15, 7)),  # brackets in strings only add
        ('{"n": -999999999999999999, "m": 999999999999999999}', None, (51, 1)),  # 18 digits
        ('{"f": 1.5e99, "g": -0.25}', None, (25, 1)),
        ('{"k": "caf\u00e9 \u2603"}', None, (15, 1)),  # non-ASCII, no surrogate
        ('{"k": "\\u00e9"}', {"k": "\u00e9"}, (15, 1)),  # an escape of no ASCII letter
        ('{"k": "\\u00e9\\ud83d\\ude00"}', None, None),  # surrogate escapes: walked
        ('{"protocolVersion": "x"}', None, (24, 1)),  # not a pollution key
        ("", {}, (2, 1)),
        ("  \n", {}, (2, 1)),
    ],
)
def test_from_json_parses_as_json_and_bounds_plain_texts(
    text: str, arguments: object, bound: tuple[int, int] | None
) -> None:
    call = ToolCall.from_json(id="1", name="t", arguments=text)
    expected = json.loads(text) if text.strip() else {}
    assert call.arguments == expected
    if arguments is not None:
        assert call.arguments == arguments
    assert _bound(call) == bound
    # The same call as one built by hand: the bound is not part of its value.
    assert call == ToolCall(id="1", name="t", arguments=expected)
    assert hash(call) == hash(ToolCall(id="1", name="t", arguments=expected))
    assert "_text" not in repr(call)


@pytest.mark.parametrize(
    "text",
    [
        '{"n": 1234567890123456789}',  # 19 digits: maybe past 64 bits
        '{"n": -1234567890123456789}',
        '{"n": [1, 2, "x", 12345678901234567890123]}',
        '{"n": ' + "9" * 4_000 + "}",
        '{"f": 1e400}',  # overflows to infinity
        '{"f": -1E+309}',
        '{"f": NaN}',
        '{"f": Infinity}',
        '{"f": -Infinity}',
        '{"s": "\\ud800"}',  # a lone surrogate, escaped
        '{"s": "\\uDFFF"}',
        '{"__proto__": 1}',
        '{"constructor": 1}',
        '{"a": {"prototype": 1}}',
        '{"\\u005f_proto__": 1}',  # a pollution key spelled through escapes
        '{"\\u0063onstructor": 1}',
    ],
)
def test_a_text_that_may_hold_what_its_length_does_not_bound_gets_no_bound(text: str) -> None:
    call = ToolCall.from_json(id="1", name="t", arguments=text)
    assert call.arguments == json.loads(text) or text.count("NaN")
    assert _bound(call) is None


def test_a_raw_lone_surrogate_gets_no_bound() -> None:
    text = '{"s": "a\ud800"}'
    call = ToolCall.from_json(id="1", name="t", arguments=text)
    assert call.arguments == {"s": "a\ud800"}
    assert _bound(call) is None


def test_text_that_is_not_json_is_kept_without_a_bound() -> None:
    for text in ("{not json", '{"n": ' + "9" * 5_000 + "}", "[" * 100_000):
        call = ToolCall.from_json(id="1", name="t", arguments=text)
        assert call.arguments == text
        assert _bound(call) is None


def test_a_text_past_the_bound_limit_is_parsed_without_a_bound() -> None:
    text = json.dumps({"s": "x" * TEXT_BOUND_LIMIT})
    value, bound = parse_call_arguments(text)
    assert value == {"s": "x" * TEXT_BOUND_LIMIT}
    assert bound is None


def test_no_other_way_of_building_a_call_carries_a_bound() -> None:
    call = ToolCall.from_json(id="1", name="t", arguments='{"a": 1}')
    assert _bound(call) == (8, 1)
    assert _bound(ToolCall(id="1", name="t", arguments={"a": 1})) is None
    # Rebuilt with other arguments, or at all: the bound stays behind.
    assert _bound(attrs.evolve(call, arguments={"a": "x" * 100})) is None
    assert _bound(attrs.evolve(call)) is None
    with pytest.raises(TypeError):
        ToolCall(id="1", name="t", arguments={}, text_bound=(1, 1))  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        ToolCall(id="1", name="t", arguments={}, _text_bound=(1, 1))  # type: ignore[call-arg]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        call._text_bound = (1, 1)  # type: ignore[misc]
    # Copies keep it with an equal (or the same) arguments object.
    for twin in (copy.copy(call), copy.deepcopy(call), pickle.loads(pickle.dumps(call))):
        assert _bound(twin) == (8, 1)
        assert twin.arguments == call.arguments


def test_a_parsed_message_gives_its_members_the_whole_texts_bound() -> None:
    body = b'{"jsonrpc": "2.0", "id": 7, "params": {"name": "t", "arguments": {"a": [1]}}}'
    message = ParsedJson.parse(body)
    assert message.value == json.loads(body)
    params = message.member("params")
    assert params is not None
    arguments = params.member("arguments")
    assert arguments is not None
    value = params.value["arguments"]  # type: ignore[index]
    assert arguments.value is value  # the very object parsed, not a copy
    call = ToolCall.from_parsed(id="1", name="t", arguments=arguments)
    assert call.arguments is value
    assert _bound(call) == (len(body), 4)
    assert call == ToolCall(id="1", name="t", arguments={"a": [1]})
    # No member, or not an object: nothing to build from.
    assert message.member("result") is None
    assert message.member(0) is None
    items = ParsedJson.parse('[{"a": 1}, 2]')
    first = items.member(0)
    assert first is not None
    assert first.value is items.value[0]  # type: ignore[index]
    assert _bound(ToolCall.from_parsed(id="1", name="t", arguments=first)) == (13, 2)
    for missing in ("0", 2, -1, True):
        assert items.member(missing) is None
    assert ParsedJson.parse('"text"').member(0) is None
    assert "ParsedJson dict" in repr(message)
    assert message.proved
    assert params.proved


@pytest.mark.parametrize(
    "text",
    [
        '{"params": {"arguments": {"n": 12345678901234567890}}}',
        '{"params": {"arguments": {"f": 1e400}}}',
        '{"params": {"arguments": {"f": NaN}}}',
        '{"params": {"arguments": {"s": "\\ud800"}}}',
        '{"params": {"arguments": {"__proto__": 1}}, "x": 1}',
        '{"params": {"arguments": {}}, "note": "prototype"}',  # anywhere in the text
        '{"params": {"arguments": {"s": "' + "x" * TEXT_BOUND_LIMIT + '"}}}',
    ],
)
def test_a_parsed_text_that_may_hold_what_its_length_does_not_bound_gets_no_bound(
    text: str,
) -> None:
    for data in (text, text.encode()):
        arguments = ParsedJson.parse(data).member("params")
        assert arguments is not None
        inner = arguments.member("arguments")
        assert inner is not None
        call = ToolCall.from_parsed(id="1", name="t", arguments=inner)
        assert _bound(call) is None
        assert not inner.proved
        assert call.arguments == json.loads(text)["params"]["arguments"] or "NaN" in text


def test_parsed_json_reads_bytes_and_refuses_what_json_loads_refuses() -> None:
    for data in (
        b"\xef\xbb\xbf{}",
        '{"a": 1}'.encode("utf-16"),
        '{"a": 1}'.encode("utf-16-le"),
        b'{"a": 1}',
        bytearray(b'{"a": 1}'),
        b'{"s": "\xed\xa0\x80"}',  # a lone surrogate's bytes, as json.loads lets them pass
    ):
        assert ParsedJson.parse(data).value == json.loads(data)
    surrogate = ParsedJson.parse(b'{"s": "\xed\xa0\x80"}')
    assert _bound(ToolCall.from_parsed(id="1", name="t", arguments=surrogate)) is None
    assert _bound(ToolCall.from_parsed(id="1", name="t", arguments=ParsedJson.parse(b"{}"))) == (
        2,
        1,
    )
    for bad in ("{not json", b"\xff\xfe\xfd", "", '{"a": 1} x'):
        with pytest.raises(ValueError, match=r"Expecting|decode|Extra data"):
            ParsedJson.parse(bad)
    with pytest.raises(RecursionError):
        ParsedJson.parse("[" * 100_000 + "]" * 100_000)


def test_no_way_but_parsing_pairs_a_proof_with_a_value() -> None:
    parsed = ParsedJson.parse('{"a": 1}')
    with pytest.raises(TypeError):
        ParsedJson()
    with pytest.raises(AttributeError):
        parsed._value = {"a": "x" * 100}
    with pytest.raises(AttributeError):
        parsed._bound = (1, 1)
    for clone in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError):
            clone(parsed)
    with pytest.raises(TypeError):
        ToolCall.from_parsed(id="1", name="t", arguments={"a": 1})  # type: ignore[arg-type]
    # A call built from it is an ordinary call: rebuilt, it has no bound.
    call = ToolCall.from_parsed(id="1", name="t", arguments=parsed)
    assert _bound(call) == (8, 1)
    assert _bound(attrs.evolve(call)) is None


class _Compiled:
    """A compiled schema with a text bound, recording which of its checks ran."""

    def __init__(self, chars: int, nesting: int, seen: list[str]) -> None:
        self.text_bound = (chars, nesting, self._is_valid)
        self._seen = seen

    def _is_valid(self, value: object) -> bool:
        self._seen.append("is_valid")
        if isinstance(value, dict) and value.get("boom"):
            raise RuntimeError("the engine could not read it")
        return isinstance(value, dict) and "bad" not in value

    def validate(self, value: object) -> ToolArgumentValidationResult:
        self._seen.append("validate")
        if isinstance(value, dict) and ("bad" in value or len(json.dumps(value)) > 40):
            error = ToolArgumentValidationError(message="refused by the walk", path="data")
            return ToolArgumentValidationResult(ok=False, errors=(error,))
        return ToolArgumentValidationResult(ok=True)


class _Validator:
    def __init__(self, chars: int = 100, nesting: int = 3) -> None:
        self.seen: list[str] = []
        self.chars = chars
        self.nesting = nesting

    def compile(self, schema: object) -> _Compiled:
        return _Compiled(self.chars, self.nesting, self.seen)

    def validate(self, schema: object, value: object) -> ToolArgumentValidationResult:
        raise AssertionError("compiled schemas are used")  # pragma: no cover


async def _noop(_args: Any, _ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text("ok")


_TOOL = ToolDefinition(name="t", execute=_noop, parameters={"type": "object"})


def _check(
    validator: _Validator, call: ToolCall, arguments: object | None = None
) -> tuple[object, list[str]]:
    adapter = ToolParameterValidator(validator)
    validator.seen.clear()
    used = call.arguments if arguments is None else arguments
    outcome = adapter(_TOOL, used, ToolExecutionContext(call))  # type: ignore[arg-type]
    return outcome, list(validator.seen)


def test_a_call_from_text_within_the_bound_gets_the_verdict_without_a_walk() -> None:
    call = ToolCall.from_json(id="1", name="t", arguments='{"a": [1, {"b": 2}]}')
    assert _check(_Validator(), call) == (None, ["is_valid"])
    # Refused: the compiled schema's validate says why.
    bad = ToolCall.from_json(id="1", name="t", arguments='{"bad": 1}')
    outcome, seen = _check(_Validator(), bad)
    assert seen == ["is_valid", "validate"]
    assert outcome is not None
    # The engine failing on it: the full path decides.
    boom = ToolCall.from_json(id="1", name="t", arguments='{"boom": 1}')
    assert _check(_Validator(), boom) == (None, ["is_valid", "validate"])


@pytest.mark.parametrize(
    ("chars", "nesting"),
    [(19, 3), (20, 2)],  # the text has 20 characters and 3 brackets
)
def test_a_text_past_either_bound_is_walked(chars: int, nesting: int) -> None:
    call = ToolCall.from_json(id="1", name="t", arguments='{"a": [1, {"b": 2}]}')
    assert _check(_Validator(chars, nesting), call) == (None, ["validate"])
    assert _check(_Validator(20, 3), call) == (None, ["is_valid"])


def test_a_bound_is_never_used_for_other_arguments() -> None:
    call = ToolCall.from_json(id="1", name="t", arguments='{"a": 1}')
    big = {"a": "x" * 100}
    # A context whose call came from a short text, beside arguments that did not.
    outcome, seen = _check(_Validator(), call, big)
    assert seen == ["validate"]
    assert outcome is not None
    # An equal copy is another object: walked too.
    assert _check(_Validator(), call, dict(call.arguments))[1] == ["validate"]  # type: ignore[call-overload]
    # Calls built by hand, or rebuilt, carry no bound.
    for other in (ToolCall(id="1", name="t", arguments={"a": 1}), attrs.evolve(call)):
        assert _check(_Validator(), other)[1] == ["validate"]


def test_a_context_that_is_not_a_dispatch_context_is_walked() -> None:
    validator = _Validator()
    adapter = ToolParameterValidator(validator)
    assert adapter(_TOOL, {"a": 1}, None) is None  # type: ignore[arg-type]
    assert validator.seen == ["validate"]


def test_a_compiled_schema_with_a_malformed_text_bound_is_walked() -> None:
    class Odd(_Validator):
        def compile(self, schema: object) -> _Compiled:
            compiled = super().compile(schema)
            compiled.text_bound = ("100", 3, None)  # type: ignore[assignment]
            return compiled

    call = ToolCall.from_json(id="1", name="t", arguments='{"a": 1}')
    assert _check(Odd(), call) == (None, ["validate"])


async def test_dispatch_walks_a_call_its_middleware_saw() -> None:
    """A call hook holds the arguments and may change them in place: no bound after it."""
    validator = _Validator()
    registry = ToolRegistry()
    registry.register(_TOOL)
    plain = DispatchOptions(registry=registry, validator=ToolParameterValidator(validator))
    text = '{"a": 1}'
    result = await dispatch_tool_call(ToolCall.from_json(id="1", name="t", arguments=text), plain)
    assert not result.is_error
    assert validator.seen == ["is_valid"]

    middleware = MiddlewareRegistry()

    def grow(call: ToolCall, _ctx: ToolExecutionContext) -> None:
        call.arguments["a"] = "x" * 100  # type: ignore[index]

    middleware.on_tool_call(grow)
    hooked = attrs.evolve(plain, middleware=middleware)
    validator.seen.clear()
    result = await dispatch_tool_call(ToolCall.from_json(id="1", name="t", arguments=text), hooked)
    assert result.is_error
    assert "refused by the walk" in result.joined_text
    assert validator.seen == ["validate"]


async def test_dispatch_calls_a_validator_object_as_calling_it_would() -> None:
    calls: list[object] = []

    class Counting:
        def __call__(self, tool: ToolDefinition, arguments: object, context: object) -> None:
            calls.append(arguments)

    registry = ToolRegistry()
    registry.register(_TOOL)
    options = DispatchOptions(registry=registry, validator=Counting())
    result = await dispatch_tool_call(ToolCall(id="1", name="t", arguments={"a": 1}), options)
    assert not result.is_error
    assert calls == [{"a": 1}]
    # A plain function is called as it is.
    seen: list[object] = []
    function_options = DispatchOptions(
        registry=registry, validator=lambda tool, arguments, context: seen.append(arguments)
    )
    await dispatch_tool_call(ToolCall(id="1", name="t", arguments={"b": 2}), function_options)
    assert seen == [{"b": 2}]


def test_a_repeated_refusal_is_answered_with_the_same_error() -> None:
    refusal = ToolArgumentValidationResult(
        ok=False, errors=(ToolArgumentValidationError(message="no", path="data.a"),)
    )
    answers = [refusal, refusal, ToolArgumentValidationResult(ok=False)]

    class Compiled:
        def validate(self, value: object) -> ToolArgumentValidationResult:
            return answers.pop(0)

    class Validator:
        def compile(self, schema: object) -> Compiled:
            return Compiled()

        def validate(self, schema: object, value: object) -> ToolArgumentValidationResult:
            raise AssertionError("compiled schemas are used")  # pragma: no cover

    adapter = ToolParameterValidator(Validator())
    ctx = ToolExecutionContext(ToolCall(id="1", name="t", arguments={}))
    first = adapter(_TOOL, {}, ctx)
    assert isinstance(first, ErrorInfo)
    assert first.message == "invalid arguments for t: data.a: no"
    assert adapter(_TOOL, {}, ctx) is first
    other = adapter(_TOOL, {}, ctx)
    assert isinstance(other, ErrorInfo)
    assert other is not first


def test_the_agent_keeps_the_bound_when_it_maps_an_alias_back_to_the_registry_name() -> None:
    names = create_tool_name_map(["mcp:docs:search"])
    call = ToolCall.from_json(id="1", name="mcp__docs__search", arguments='{"q": "trio"}')
    mapped = _registry_call(call, names)
    assert mapped.name == "mcp:docs:search"
    assert mapped.arguments is call.arguments
    assert _bound(mapped) == _bound(call) == (13, 1)
    by_hand = _registry_call(ToolCall(id="1", name="mcp__docs__search", arguments={}), names)
    assert by_hand.name == "mcp:docs:search"
    assert _bound(by_hand) is None


class _Quick(_Validator):
    """A validator whose compiled schemas also answer quick_valid."""

    def compile(self, schema: object) -> _Compiled:
        compiled = super().compile(schema)
        seen = self.seen

        def quick(value: object) -> object:
            seen.append("quick")
            if isinstance(value, dict) and value.get("boom"):
                raise RuntimeError("the engine could not read it")
            if isinstance(value, dict) and "truthy" in value:
                return 1  # only True passes
            return isinstance(value, dict) and "bad" not in value

        compiled.quick_valid = quick  # type: ignore[attr-defined]
        return compiled


def test_any_other_call_asks_quick_valid_first_and_validate_for_anything_but_true() -> None:
    built = ToolCall(id="1", name="t", arguments={"a": 1})
    assert _check(_Quick(), built) == (None, ["quick"])
    for arguments in ({"bad": 1}, {"boom": 1}, {"truthy": 1}):
        outcome, seen = _check(_Quick(), ToolCall(id="1", name="t", arguments=arguments))
        assert seen == ["quick", "validate"]
        assert (outcome is None) is ("bad" not in arguments)
    # A call from text within its bound gets the bound's verdict, not quick_valid's.
    text = ToolCall.from_json(id="1", name="t", arguments='{"a": 1}')
    assert _check(_Quick(), text) == (None, ["is_valid"])
    # Past the bound: quick_valid.
    assert _check(_Quick(chars=3), text) == (None, ["quick"])
    # Not callable: ignored.

    class Odd(_Validator):
        def compile(self, schema: object) -> _Compiled:
            compiled = super().compile(schema)
            compiled.quick_valid = "yes"  # type: ignore[attr-defined]
            return compiled

    assert _check(Odd(), built) == (None, ["validate"])
