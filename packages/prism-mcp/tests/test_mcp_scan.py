"""The raw-bytes scan of a server message, held against what ``json.loads`` makes of it."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from hypothesis import given, settings
from hypothesis import strategies as st

from prism.mcp._gate import _parse_apart
from prism.mcp._scan import scan

if TYPE_CHECKING:
    import random

    import pytest

LIMIT = 3
KEYS = ["content", "result", "structuredContent", "id", "a", '"content"', "{", "[", "\\"]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
    st.sampled_from(['"content":[1,2,3]', '{"content":[', "\\", '"', "]}", ",,,"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=4)), inner, max_size=4),
    ),
    max_leaves=12,
)
results = st.one_of(
    values,
    st.fixed_dictionaries(
        {},
        optional={
            "content": st.one_of(st.lists(values, max_size=2 * LIMIT), values),
            "structuredContent": values,
            "isError": st.booleans(),
            "other": values,
        },
    ),
)
messages = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0")},
    optional={
        "id": st.one_of(st.integers(), st.text(max_size=5), st.none()),
        "result": results,
        "error": values,
    },
)


class _Writer:
    """JSON text of a value, written as a hostile server might: any legal spelling."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def space(self) -> str:
        return self.rng.choice(["", "", " ", "\n", "\t", " \r\n "])

    def string(self, text: str) -> str:
        out = ['"']
        for char in text:
            code = ord(char)
            pick = self.rng.random()
            if char in '"\\' or code < 0x20 or pick < 0.2:
                if pick < 0.1 and char in '"\\/\n':
                    out.append({'"': '\\"', "\\": "\\\\", "/": "\\/", "\n": "\\n"}[char])
                elif code > 0xFFFF:
                    code -= 0x10000
                    out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04X}")
                else:
                    out.append(f"\\u{code:04x}")
            else:
                out.append(char)
        out.append('"')
        return "".join(out)

    def value(self, value: Any) -> str:
        s = self.space
        if isinstance(value, dict):
            members = [(key, self.value(item)) for key, item in value.items()]
            if members and self.rng.random() < 0.3:
                # The same key given earlier with another value: the parser keeps the last.
                key = self.rng.choice(members)[0]
                decoy = self.value(self.rng.choice([[{}] * 9, {"content": [1] * 9}, "x", 7]))
                members.insert(0, (key, decoy))
            inner = ",".join(
                f"{s()}{self.string(key)}{s()}:{s()}{text}{s()}" for key, text in members
            )
            return "{" + (inner or s()) + "}"
        if isinstance(value, list):
            inner = ",".join(f"{s()}{self.value(item)}{s()}" for item in value)
            return "[" + (inner or s()) + "]"
        if isinstance(value, str):
            return self.string(value)
        return json.dumps(value)


def _expected_blocks(message: dict[str, Any]) -> int | None:
    result = message.get("result")
    if not isinstance(result, dict) or not isinstance(result.get("content"), list):
        return None
    return min(len(result["content"]), LIMIT + 1)


@settings(max_examples=120)
@given(messages, st.randoms(use_true_random=False))
def test_the_scan_finds_what_the_parser_builds(message: dict[str, Any], rng: random.Random) -> None:
    raw = (_Writer(rng).space() + _Writer(rng).value(message) + _Writer(rng).space()).encode(
        "utf-8", "surrogatepass"
    )
    parsed = json.loads(raw)
    layout = scan(raw, limit=LIMIT)
    assert layout is not None
    assert layout.blocks == _expected_blocks(parsed)
    result = parsed.get("result")
    assert layout.is_result == isinstance(result, dict)
    if isinstance(result, dict) and "structuredContent" in result:
        assert layout.structured is not None
        start, end = layout.structured
        assert json.loads(raw[start:end]) == result["structuredContent"]
        # Parsed in place from the whole message, as the transports parse it apart.
        assert _parse_apart(raw, start, end) == result["structuredContent"]
    else:
        assert layout.structured is None
    if "id" in parsed:
        assert layout.request_id is not None
        assert json.loads(layout.request_id) == parsed["id"]
    else:
        assert layout.request_id is None


def test_the_scan_reads_deep_and_wide_values_whole() -> None:
    deep = "[" * 300 + "]" * 300
    # "content" in a string, in structuredContent, escaped, a decoy given first.
    text = (
        '{"result":{"structuredContent":{"content":[1,2,3,4,5],"t":"\\"content\\":[1,2]"},'
        '"con\\u0074ent":[' + ",".join([deep, '"]"', "{}", "[[[[[[{}]]]]]]"]) + "]},"
        '"id":"a\\"b","result":{"content":[{},{},{},{},{},{}],"con\\u0074ent":[[],["]"]]}}'
    )
    layout = scan(text.encode(), limit=LIMIT)
    assert layout is not None
    assert layout.blocks == 2
    assert layout.structured is None
    assert layout.request_id == b'"a\\"b"'
    many = b'{"id":1,"result":{"content":[' + b",".join([b'{"type":"text","text":""}'] * 5000)
    layout = scan(many + b"]}}", limit=1024)
    assert layout is not None
    assert layout.blocks == 1025


def test_what_the_parser_refuses_has_no_layout() -> None:
    for text in [
        b"",
        b"[1]",
        b'{"id":1',
        b'{"id":1}x',
        b'{"id":1,}',
        # cut off right after a key (raised IndexError, which ended the session)
        b'{"id":1,"result":',
        b'{"id":',
        b'{"result":{"content":',
        b'{"result":{"content":[1,2}}',
        b'{"result":{"content":"unterminated}}',
        b'{"result":{"content":[{"a":1]}}}',
        b'{"re\\xsult":1}',
        b'{"id" 1}',
        b'{"id":1 "result":2}',
    ]:
        assert scan(text, limit=LIMIT) is None, text


def _blocks(request_id: bytes, count: int) -> bytes:
    blocks = b",".join([b'{"type":"text","text":""}'] * count)
    return b'{"jsonrpc":"2.0","id":' + request_id + b',"result":{"content":[' + blocks + b"]}}"


async def test_only_the_answer_to_a_call_in_flight_is_refused_unparsed() -> None:
    import mcp_types

    from prism.mcp._gate import before_parsing
    from prism.mcp._wire import WireState

    state = WireState(calls={1, "c"})
    # "1" and " \u0661 " answer call 1 as the SDK correlates ids (int() of the text).
    for request_id, count, answered in [
        (b"1", 1025, 1),
        (b'"c"', 4000, "c"),
        (b'"1"', 1025, 1),
        (b'" \\u0661 "', 1025, 1),
    ]:
        error = await before_parsing(_blocks(request_id, count), state)
        assert isinstance(error, mcp_types.JSONRPCError)
        assert error.id == answered
        assert error.error.message == "result refused: more than 1024 content blocks"
    # Not a call in flight (another id, or one of another type), too few blocks,
    # an id the parser would refuse: left to the parser and the gate.
    for request_id, count in [(b"2", 1025), (b'"2"', 1025), (b"1.0", 1025), (b"true", 1025)]:
        raw = _blocks(request_id, count)
        assert await before_parsing(raw, state) is raw
    for raw in [_blocks(b"1", 1024), _blocks(b"1x", 1025)]:
        assert await before_parsing(raw, state) is raw
    raw = _blocks(b"1", 1025)
    assert await before_parsing(raw, WireState()) is raw


async def test_a_large_structured_content_is_parsed_apart_and_stands_for_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from prism.mcp import _gate
    from prism.mcp._wire import WireState

    monkeypatch.setattr(_gate, "DETACH_OVER", 8)
    state = WireState(calls={1})
    value = {"items": ["é", {"k": [1, 2.5, None]}], "content": [{}] * 3}
    raw = json.dumps(
        {
            "id": 1,
            "result": {"content": [{"type": "text", "text": "ü"}], "structuredContent": value},
        },
        ensure_ascii=False,
    ).encode()
    handed = await _gate.before_parsing(raw, state, detach=True)
    assert isinstance(handed, bytes)
    rest = json.loads(handed)
    (token,) = rest["result"]["structuredContent"].values()
    assert state.detached[token] == value
    assert rest["result"]["content"] == [{"type": "text", "text": "ü"}]
    # Unchanged: not a call in flight, not asked to, a span the json module refuses.
    other = raw.replace(b'"id": 1', b'"id": 2')
    assert await _gate.before_parsing(other, state, detach=True) is other
    assert await _gate.before_parsing(raw, state) is raw
    broken = raw.replace(b"2.5", b"2.5.5")
    assert await _gate.before_parsing(broken, state, detach=True) is broken
    # Values no answer took (a message the SDK then failed to parse) are bounded.
    for _ in range(100):
        await _gate.before_parsing(raw, state, detach=True)
    assert len(state.detached) == 64


def test_a_stdio_line_is_decoded_as_the_json_module_decodes_utf8() -> None:
    # The line is decoded before the parse (so the parse holds the text, not both), as
    # UTF-8 only: the counts made on its bytes before (objects and arrays, the price)
    # read them so, and UTF-16's bytes would put them out of phase.
    from prism.mcp._stdio import _decoded

    assert _decoded('{"a":"\U0001f600"}'.encode("utf-16")) is None
    samples = [
        b'{"a":"\xc3\xa9"}',
        '{"a":1}'.encode("utf-8-sig"),
        b'{"a":"\xed\xa0\x80"}',  # a surrogate written in UTF-8: the json module takes it
        b'{"a":"\xff"}',
    ]
    for raw in samples:
        try:
            expected = json.loads(raw)
        except UnicodeDecodeError:
            assert _decoded(raw) is None
        else:
            text = _decoded(raw)
            assert text is not None
            assert json.loads(text) == expected
