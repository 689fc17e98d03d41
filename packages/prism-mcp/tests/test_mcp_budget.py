"""The price of parsing a server message, held against what ``json.loads`` really takes."""

from __future__ import annotations

import contextlib
import json
import tracemalloc

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from prism.mcp import _budget
from prism.mcp._budget import MESSAGE_MEMORY_FREE, memory_refusal, parse_json, price

SIZE = 300_000


def _fill(unit: bytes) -> bytes:
    return b"[" + b",".join([unit] * (SIZE // (len(unit) + 1))) + b"]"


SHAPES: dict[str, bytes] = {
    "empty objects": _fill(b"{}"),
    "empty arrays": _fill(b"[]"),
    "one-member objects": _fill(b'{"a":1}'),
    "empty text blocks": _fill(b'{"type":"text","text":""}'),
    "two-character strings": _fill(b'"ab"'),
    "one-character strings": _fill(b'"a"'),
    "ints past the cache": _fill(b"257"),
    # More distinct literals than the memo of ints keeps, some past its digits.
    "distinct ints": b"["
    + b",".join(b"%d" % (257 + n % 9_000) for n in range(SIZE // 6))
    + b","
    + b",".join([b"1" * 25] * 100)
    + b"]",
    "negative ints": _fill(b"-9"),
    "floats": _fill(b"1.5"),
    "literals": _fill(b"true"),
    "wide strings": _fill('"ĀĀ"'.encode()),
    "astral escapes": _fill(b'"\\ud83d\\ude00x"'),
    "distinct keys": b"{" + b",".join(b'"%05d":0' % n for n in range(SIZE // 10)) + b"}",
    "records": json.dumps(
        [{"id": n, "name": f"foo {n}", "tags": ["a", "b"], "ok": True} for n in range(5000)]
    ).encode(),
    "escaped one-character strings": _fill(b'"\\n"'),
    "short and long keys": _fill(b'{"a":1,"bb":2}'),
    "latin-1 strings": _fill('"éé"'.encode()),
    "escaped strings": _fill(b'"\\u00e9\\n"'),
    "one emoji, then text": b'["\xf0\x9f\x98\x80' + b"a" * SIZE + b'"]',
    "json in a text": json.dumps({"text": '{"a":[1,2],"b":"c"},' * (SIZE // 20)}).encode(),
    "nested arrays": b"[" * 900 + b"]" * 900,
    "broken after a flood": _fill(b"{}")[:-1] + b"x",
}


def _parse_peak(raw: bytes) -> int:
    """Peak traced memory of ``json.loads(raw)`` or the bridge's parse, plus the raw bytes."""
    peaks = []
    for parse in (json.loads, parse_json):
        tracemalloc.start()
        try:
            with contextlib.suppress(ValueError):
                parse(raw)
            peaks.append(tracemalloc.get_traced_memory()[1] + len(raw))
        finally:
            tracemalloc.stop()
    return max(peaks)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_the_price_is_an_upper_bound_of_what_the_parser_takes(name: str) -> None:
    # A differential check against the real parsers (tracemalloc's peak, not a
    # threshold of ours): both tiers must price at least what json.loads holds,
    # and what the bridge's own parse (parse_json) holds.
    raw = SHAPES[name]
    peak = _parse_peak(raw)
    assert price(raw) >= peak, (name, price(raw), peak)
    assert price(raw, exact=True) >= peak, (name, price(raw, exact=True), peak)
    assert price(raw, exact=True, budget=0) >= peak


def test_the_exact_tier_prices_text_as_text() -> None:
    raw = SHAPES["json in a text"]
    # Every brace, comma and quote counts as structure in the plain count...
    assert price(raw) > 10 * len(raw)
    # ...and as characters once the strings are cut out.
    assert price(raw, exact=True) < 4 * len(raw) + 100_000


def test_repeated_keys_are_priced_once() -> None:
    raw = SHAPES["records"]
    every_time = price(raw, exact=True)
    # Only when the count of every key is over the budget are the distinct ones counted.
    assert price(raw, exact=True, budget=every_time) == every_time
    once = price(raw, exact=True, budget=every_time - 1)
    # 20,000 keys (four names): about 110 bytes each, charged four times instead.
    assert once < every_time - 2_000_000
    assert once >= _parse_peak(raw)


def test_a_small_message_is_never_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    def counted(raw: bytes, *, exact: bool = False, budget: int = 0) -> int:
        raise AssertionError("priced")

    monkeypatch.setattr(_budget, "price", counted)
    assert memory_refusal(b"[" + b"{}," * 10_000 + b"{}]") is None


def test_refusals_name_the_size_and_the_rule() -> None:
    keys = b"{" + b",".join(b'"%06d":0' % n for n in range(100_000)) + b"}"
    reason = memory_refusal(keys)
    assert reason is not None
    assert f"a message of {len(keys)} bytes that would take about" in reason
    assert "at most 10 times its size plus 8 MiB" in reason
    # More objects and arrays than one per 16 bytes plus 65,536: refused as such.
    flood = b"[" + b",".join([b"{}"] * 1_000_000) + b"]"
    reason = memory_refusal(flood)
    assert reason == (
        f"the server sent a message of 1000001 objects and arrays in {len(flood)} bytes "
        "(at most one per 16 bytes plus 65536)"
    )
    # Within both: the same bytes as one long string (its brackets are text).
    assert memory_refusal(json.dumps("{}," * 1_000_000).encode()) is None
    assert MESSAGE_MEMORY_FREE == 8 * 1024 * 1024


_FLOOD = b"[" + b",".join([b"{}"] * 1_000_000) + b"]"


async def _fed(*chunks: bytes) -> list[str | None]:
    from prism.mcp._http import _Events, _Refused
    from prism.mcp._wire import WireState

    events = _Events(WireState())
    said: list[str | None] = []
    for chunk in chunks:
        try:
            await events.feed(chunk)
        except _Refused as refused:
            said.append(str(refused))
        else:
            said.append(None)
    return said


async def test_an_event_is_priced_once_its_blank_line_arrives_whatever_the_chunks() -> None:
    half = len(_FLOOD) // 2
    # CRLF endings; the CR of the blank line ends one chunk (the event is complete:
    # a reader may dispatch it there), its LF begins the next.
    first = b"event: message\r\ndata: " + _FLOOD[:half]
    said = await _fed(first, _FLOOD[half:] + b"\r\n\r", b"\n")
    assert said[0] is None
    assert said[1] == memory_refusal(_FLOOD)
    assert said[1] is not None
    assert said[2] is None


async def test_the_data_lines_of_one_event_are_priced_together() -> None:
    # CR-only line endings, one message split over two data lines (outside its
    # strings): each line alone is within budget, the message they make is not.
    flood = b"{" + b",".join(b'"%06d":0' % n for n in range(100_000)) + b"}"
    cut = flood.index(b",", len(flood) // 2)
    assert memory_refusal(flood[:cut]) is None
    assert memory_refusal(flood[cut:]) is None
    assert memory_refusal(flood) is not None
    said = await _fed(b"data:" + flood[:cut] + b"\rdata: " + flood[cut:] + b"\r", b"\r")
    assert said[0] is None
    assert said[1] is not None
    # A CR that ends a chunk ends its line: the LF that may follow is not another line.
    said = await _fed(b"data:" + flood + b"\r", b"\n\r", b"\n")
    assert said[0] is None
    assert said[1] is not None
    assert said[2] is None


async def test_an_event_within_budget_passes_and_fields_are_not_data() -> None:
    text = json.dumps("{}," * 1_000_000).encode()
    said = await _fed(b"id: " + _FLOOD + b"\n", b"data: " + text + b"\n\n", b": comment\n\n")
    assert said == [None, None, None]


_LINES = [
    b"event: message",
    b"id: 7",
    b"retry: 100",
    b": a comment",
    b'data: {"jsonrpc":"2.0","id":1,"result":{"content":[]}}',
    b"data:{}",
    b"data: two",
    b"data",
    b"",
    b"",
]


@settings(max_examples=80)
@given(
    st.lists(st.sampled_from(_LINES), max_size=14),
    st.lists(st.sampled_from([b"\n", b"\r", b"\r\n"]), min_size=14, max_size=14),
    st.lists(st.integers(min_value=1, max_value=40), max_size=8),
)
def test_events_handed_on_are_the_events_the_server_sent(
    lines: list[bytes], ends: list[bytes], cuts: list[int]
) -> None:
    # Data lines are held until their event's blank line, every other line handed on
    # as it completes: the SDK's reader sees the same events, however the stream is cut.
    from httpx2._sse import _SSEParser

    from prism.mcp._http import _Events
    from prism.mcp._wire import WireState

    stream = b"".join(line + end for line, end in zip(lines, ends, strict=False))
    chunks: list[bytes] = []
    rest = stream
    for cut in cuts:
        chunks.append(rest[:cut])
        rest = rest[cut:]
    chunks.append(rest)

    async def handed_on() -> bytes:
        events = _Events(WireState())
        out: list[bytes] = []
        for chunk in chunks:
            out += await events.feed(chunk)
        out += await events.finish()
        return b"".join(out)

    def parsed(data: bytes) -> list[tuple[str, str, str, int | None]]:
        parser = _SSEParser()
        events = list(parser.decode(data.decode()))
        events += parser.flush()
        return [(e.event, e.data, e.id, e.retry) for e in events]

    assert parsed(trio.run(handed_on)) == parsed(stream)


_PARSED_APART = (
    "two-character strings",
    "wide strings",
    "astral escapes",
    "escaped strings",
    "distinct keys",
    "records",
    "json in a text",
    "nested arrays",
    "broken after a flood",
)
"""Shapes of strings, escapes, keys and what pydantic-core's parser refuses."""


@pytest.mark.parametrize("name", _PARSED_APART)
def test_the_bridges_parse_gives_what_json_loads_gives(name: str) -> None:
    # pydantic-core's parser with its string cache, json.loads for what it refuses
    # (here the nesting past 200 levels): the same values, of the same types, and
    # equal short strings are one object (an array of "ab" is 1.6x its size).
    raw = SHAPES[name]
    try:
        expected = json.loads(raw)
    except ValueError as exc:
        with pytest.raises(type(exc), match=r"Expecting|Extra data"):
            parse_json(raw)
        return
    got = parse_json(raw)
    assert _typed(got) == _typed(expected)
    if name == "two-character strings":
        assert len({id(item) for item in got}) == 1


def test_equal_numbers_are_one_object_and_the_memo_stays_small() -> None:
    # The json module's path makes one int (or float) for equal literals of a
    # message: the first 1,024 distinct literals of up to 20 digits each; past
    # those, and past 20 digits, each literal is a number of its own as before.
    # The values and their types are json.loads's.
    distinct = [b"%d" % (257 + n % 3_000) for n in range(6_000)]
    floats = [b"%d.5" % (n % 3_000) for n in range(6_000)]
    long = [b"1" * 25, b"-" + b"2" * 25, b"1.5" + b"0" * 30, b"-0.0", b"0.0", b"1e400"]
    raw = b"[" + b",".join([*distinct, *floats, *long, b"257", b"1.5"] * 2) + b"]"
    got = parse_json(raw)
    assert _typed(got) == _typed(json.loads(raw))
    short = [item for item in got if type(item) is int and abs(item) < 10**20]
    # 1,024 memoized; each of the other 1,976 values written four times.
    assert len({id(item) for item in short}) == 1_024 + 4 * (3_000 - 1_024)
    assert len({id(item) for item in got if type(item) is float}) > 3_000
    assert len({id(item) for item in got if type(item) is int and abs(item) >= 10**20}) == 4
    assert got[-1] is got[len(got) // 2 - 1]  # 1.5, the second time
    assert got[-2] is got[len(got) // 2 - 2]  # 257


def _typed(value: object) -> object:
    """``value`` with every type and float bit pattern spelled out (1 == 1.0 == True otherwise)."""
    stack: list[tuple[object, list[object]]] = []
    out: list[object] = []
    stack.append((value, out))
    while stack:
        item, into = stack.pop()
        kind = type(item)
        if kind is dict:
            members: list[object] = ["dict"]
            into.append(members)
            for key, child in item.items():  # type: ignore[attr-defined]
                members.append(("key", type(key).__name__, key))
                stack.append((child, members))
        elif kind is list:
            items: list[object] = ["list"]
            into.append(items)
            stack.extend((child, items) for child in item)  # type: ignore[attr-defined]
        elif kind is float:
            into.append(("float", item.hex()))  # type: ignore[attr-defined]
        else:
            into.append((kind.__name__, item))
    return out


@pytest.mark.parametrize(
    "raw",
    [
        b'["\\ud800x", {"\\udfff": "ab"}, "ab", "ab", "ab", "ab", "ab", "ab"]',
        b'\xef\xbb\xbf["ab", "ab", "ab", "ab", "ab", "ab", "ab", "ab", "ab"]',
        b'["\xed\xa0\x80", "ab", "ab", "ab", "ab", "ab", "ab", "ab", "ab"]',
        b'{"a": "ab", "a": "cd", "b": 1e400, "c": NaN, "d": -0.0, "e": 12345678901234567890}',
    ],
)
def test_what_pydantic_cores_parser_refuses_goes_to_json_loads(raw: bytes) -> None:
    # A lone surrogate (escaped or as bytes), a byte-order mark; and what both take
    # alike (a repeated key, NaN, a float past range, a big integer).
    assert _typed(parse_json(raw)) == _typed(json.loads(raw))


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32", "utf-32-le"])
def test_a_message_in_another_encoding_than_utf8_is_no_message(encoding: str) -> None:
    # json.loads takes UTF-16 and UTF-32 bytes, but every count made before the parse
    # (objects and arrays, literals, the price) reads the bytes as UTF-8: a `"` inside
    # a UTF-16 character put those counts out of phase (70,000 arrays counted 3, and a
    # notification over the cap was parsed instead of dropped). Only UTF-8 is parsed.
    raw = json.dumps({"a": "\u2200", "b": [[0]] * 40, "c": ["ab"] * 40}).encode(encoding)
    assert json.loads(raw)  # (what the json module would have taken)
    for parse in (parse_json, _budget.loads):
        with pytest.raises(ValueError, match=r"codec|Expecting|Unexpected"):
            parse(raw)


@pytest.mark.parametrize("tail", [b"", b"\\"])
def test_a_literal_never_closed_is_one_match_to_the_end(tail: bytes) -> None:
    # A quote, then escaped quotes and braces to the end: each quote was tried as a
    # literal's start and scanned to the end again (40,000 of them in 120 kB took
    # 15 s of the pricing's thread, holding the interpreter's lock). Now every quote
    # starts a match and the search moves past it: one literal, to the end.
    from prism.mcp import _stdio

    head = b'{"a": 1, "b": "'
    line = head + b'\\"{' * 2000 + tail
    opened = len(head) - 1
    for pattern in (_budget._LITERAL, _stdio._STRING_LITERAL):
        assert [match.span() for match in pattern.finditer(line)][-1] == (opened, len(line))
    assert _stdio._containers(line) == 1


def _bare_containers(line: bytes) -> int:
    """The ``{`` and ``[`` left once every string literal is cut out (the definition)."""
    from prism.mcp import _stdio

    bare = _stdio._STRING_LITERAL.sub(b"", line)
    return bare.count(b"{") + bare.count(b"[")


_PIECES = [b'"', b"\\", b"{", b"[", b"]", b"a", b",", b" ", b'\\"', b'"{"', b"\\[", b"\\{"]


@settings(max_examples=120, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40).map(b"".join))
def test_the_count_of_objects_and_arrays_leaves_out_what_strings_hold(line: bytes) -> None:
    from prism.mcp import _stdio

    assert _stdio._containers(line) == _bare_containers(line)


@pytest.mark.parametrize("name", ["empty text blocks", "two-character strings", "records"])
def test_the_count_of_objects_and_arrays_builds_nothing(name: str) -> None:
    # Cutting the strings out with re.sub held one piece per literal: 24 to 36 times
    # the message for records, empty text blocks or short strings, more than the parse
    # it decides on. Only the literals holding a bracket are visited now, one at a time.
    from prism.mcp import _stdio

    raw = SHAPES[name]
    tracemalloc.start()
    try:
        assert _stdio._containers(raw) == _bare_containers(raw)
        tracemalloc.reset_peak()
        _stdio._containers(raw)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10_000, peak
