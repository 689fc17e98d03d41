"""What parsing one server message would cost, priced on its raw bytes before it is parsed.

``json.loads`` turns two bytes of JSON (``{}``) into a 64-byte dict and five
(``"ab",``) into a 56-byte string and an 8-byte slot: a message within
``max_result_bytes`` can take 25 times its size in Python memory, and once it
is parsed the damage is done, whatever is refused afterwards. :func:`price`
gives an upper bound of what the parse would hold (the raw bytes, the decoded
text, every object it builds), from counts of bytes that run at C speed; a
message priced over ``MESSAGE_MEMORY_FACTOR`` times its size plus
``MESSAGE_MEMORY_FREE`` is refused before it is parsed (:func:`memory_refusal`).

Two tiers: the plain count of structural bytes (``{``, ``[``, ``,``, ``:``,
``"``) over-counts what sits inside strings and is enough for almost every
message; only when it is over the budget does one pass over the string
literals (one match at a time: it builds nothing but the match) tell text
from structure and cached one-character strings from the rest, so a
legitimate result whose text is full of braces and commas still passes, and,
if still over, a second pass counts each distinct key once (records repeat
theirs). :func:`message_refusal` runs that pass on a worker thread.

The prices are held against the real parser by a differential test
(tracemalloc's peak of ``json.loads`` on each hostile shape), and the parser
the SDK uses over HTTP (pydantic's) builds no more than ``json.loads`` on any
of them (benchmarks/bench_mcp_floods.py measures both).
"""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
import anyio.to_thread
import pydantic_core

__all__ = [
    "BYTES_PER_NODE",
    "FREE_NODES",
    "MESSAGE_MEMORY_FACTOR",
    "MESSAGE_MEMORY_FREE",
    "decoder",
    "loads",
    "many_strings",
    "mcp_message_refusal",
    "memory_refusal",
    "message_refusal",
    "parse_json",
    "price",
    "utf8_text",
]

MESSAGE_MEMORY_FACTOR = 10
"""A message may cost at most this many times its size in memory (plus the free part)."""
MESSAGE_MEMORY_FREE = 8 * 1024 * 1024
"""Memory every message may cost beyond ``MESSAGE_MEMORY_FACTOR`` times its size."""
BYTES_PER_NODE = 16
FREE_NODES = 65536
"""A message may hold one object or array per ``BYTES_PER_NODE`` bytes plus this many."""

# What the json module builds, per unit, on CPython 3.11-3.13 (allocation sizes as
# tracemalloc counts them, rounded up; measured in benchmarks/bench_mcp_floods.py).
_OBJECT = 64
"""An empty dict."""
_OBJECT_TABLE = 120
"""A dict's first keys table (one to five members)."""
_MEMBER = 48
"""Each member: its entry in a grown table, with the old table alive while it grows."""
_ARRAY = 64
"""An empty list."""
_SLOT = 10
"""Each array element: a pointer, with the list's over-allocation."""
_STRING = 64
"""A str of two or more characters, without its characters (ASCII)."""
_WIDE_STRING = 88
"""The same for a str holding a character past U+00FF."""
_KEY_MEMO = 48
"""A key's entry in the parser's memo of keys (each distinct key)."""
_NUMBER = 32
"""An int past the cached ones, or a float."""
_PARSER_FIXED = 65536 + 2 * 131072
"""What one parse holds whatever its input (the scanner, its memo of keys, the outermost
value, and the memos of numbers: at most ``_MEMO_NUMBERS`` literals of ``_MEMO_DIGITS``
characters each)."""
_MOST_PER_BYTE = 256
"""More than the cheap price of any one byte: a message this many times smaller than
the free part is within budget without counting anything."""

# One string literal, escapes included, and whether a colon follows it (a key).
# Possessive: the engine keeps no backtracking state per escape (a greedy repeat kept
# about 200 bytes per escaped quote of a long string). A literal never closed runs to
# the end of the message: every quote starts a match, so the search never scans past
# a quote twice (a run of 40,000 escaped quotes after an open one, each tried as a
# literal's start to the end again, took 15 s).
_LITERAL = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:"|\\?\Z)(?=([ \t\r\n]*:)?)', re.DOTALL)
_BACKSLASH = ord("\\")
_LONG_LITERAL = 32
"""Literals longer than this are checked for punctuation inside them."""
_ZERO_DIGITS = bytes.maketrans(b"123456789", b"000000000")
_UCS4 = re.compile(rb"[\xf0-\xff]")
_WIDE = re.compile(rb"[\xc4-\xff]")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abAB]")


_QUOTE_EVERY = 16
"""A message with at least one ``"`` per this many bytes is mostly strings."""


_MEMO_NUMBERS = 1024
_MEMO_DIGITS = 20


class _Ints(dict[str, int]):
    """One ``int`` for each distinct integer literal of one message (its ``parse_int``).

    ``json.loads`` makes an ``int`` of 28 bytes for each literal past the
    cached small ints: an array of ``257`` was about seven times its size in
    them alone. Equal literals now share one (a dict hit, in C); the memo keeps
    at most ``_MEMO_NUMBERS`` literals of at most ``_MEMO_DIGITS`` characters,
    so it stays small whatever the message holds (a literal past those is
    made as before).
    """

    __slots__ = ()

    def __missing__(self, literal: str) -> int:
        value = int(literal)
        if len(literal) <= _MEMO_DIGITS and len(self) < _MEMO_NUMBERS:
            self[literal] = value
        return value


class _Floats(dict[str, float]):
    """The same for float literals (its ``parse_float``): a 24-byte ``float`` for ``1.5,``."""

    __slots__ = ()

    def __missing__(self, literal: str) -> float:
        value = float(literal)
        if len(literal) <= _MEMO_DIGITS and len(self) < _MEMO_NUMBERS:
            self[literal] = value
        return value


def decoder() -> json.JSONDecoder:
    """A ``json.JSONDecoder`` that makes one number for equal number literals (one message)."""
    return json.JSONDecoder(parse_int=_Ints().__getitem__, parse_float=_Floats().__getitem__)


_BOM = b"\xef\xbb\xbf"


def utf8_text(raw: bytes) -> str:
    """A message's bytes as text: UTF-8 only (a leading byte-order mark dropped).

    MCP's messages are UTF-8, and every count made on the raw bytes before
    parsing (objects and arrays, literals, the price) reads them so:
    ``json.loads`` on bytes would also take UTF-16 and UTF-32, whose bytes those
    counts misread (a ``"`` inside a UTF-16 character). Lone surrogates pass,
    as ``json.loads`` lets them.

    Raises:
        ValueError: ``raw`` is not UTF-8 (a ``UnicodeDecodeError``).
    """
    return (raw[3:] if raw.startswith(_BOM) else raw).decode("utf-8", "surrogatepass")


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``, with one number for equal number literals (see ``_Ints``).

    Bytes are read as UTF-8 only (:func:`utf8_text`).

    Raises:
        ValueError: ``text`` is not JSON (as ``json.loads`` says), or bytes not UTF-8.
        RecursionError: as ``json.loads``.
    """
    if isinstance(text, bytes):
        text = utf8_text(text)
    return json.loads(text, parse_int=_Ints().__getitem__, parse_float=_Floats().__getitem__)


def parse_json(raw: bytes) -> Any:
    """``json.loads(raw)``, with one ``str`` for equal short strings when strings abound.

    A message with at least one quote per 16 bytes goes to pydantic-core's
    parser, with its cache of strings of up to 64 bytes: what it returns equals
    what ``json.loads`` returns (a differential test holds them to the same
    values and types), and an array of 190,000 ``"ab"`` is 1.6 times its size
    in memory instead of 12.9 (each string was an object of its own). What it
    refuses (a lone surrogate escape, a byte-order mark, nesting past 200
    levels) goes to :func:`loads`, which decides as ``json.loads`` on the UTF-8
    text (another encoding is no message here: :func:`utf8_text`). Other
    messages go to ``json.loads`` with one number for equal number literals
    (:func:`loads`: an array of 257 is about three times its size, against ten
    with an ``int`` each, 10.8 with pydantic-core's). Either
    builds no more than the price (:func:`price`) on any shape it is held
    against.

    Raises:
        ValueError: ``raw`` is not JSON (as ``json.loads`` says).
        RecursionError: as ``json.loads``.
    """
    if many_strings(raw):
        try:
            return pydantic_core.from_json(raw, cache_strings="all")
        except ValueError:
            pass
    return loads(raw)


def many_strings(raw: bytes, start: int = 0, end: int | None = None) -> bool:
    """Whether :func:`parse_json` gives ``raw[start:end]`` to pydantic-core's parser."""
    stop = len(raw) if end is None else end
    return raw.count(b'"', start, stop) * _QUOTE_EVERY >= stop - start


def _factors(raw: bytes) -> tuple[int, int]:
    """Bytes per character of the decoded text, and at most of a string the parser builds."""
    escaped = 1
    if b"\\u" in raw:
        escaped = 4 if _SURROGATE_ESCAPE.search(raw) is not None else 2
    if raw.isascii():
        return 1, escaped
    text = 4 if _UCS4.search(raw) is not None else 2 if _WIDE.search(raw) is not None else 1
    # A non-ASCII string has the larger header even when it is one byte per character.
    return text, max(text, escaped, 2)


def _cost(
    size: int,
    factors: tuple[int, int],
    *,
    objects: int,
    filled_objects: int,
    members: int,
    arrays: int,
    slots: int,
    strings: int,
    keys: int,
    numbers: int,
    string_bytes: int,
) -> int:
    text, chars = factors
    string = _STRING if chars == 1 else _WIDE_STRING
    return (
        _PARSER_FIXED
        + size  # the raw message, held while it is parsed
        + text * size  # the decoded text the parser reads
        + chars * string_bytes  # the characters of the strings it builds
        + objects * _OBJECT
        + filled_objects * _OBJECT_TABLE
        + members * _MEMBER
        + arrays * _ARRAY
        + slots * _SLOT
        + strings * string
        + keys * _KEY_MEMO
        + numbers * _NUMBER
    )


def _cheap(raw: bytes, factors: tuple[int, int]) -> int:
    objects = raw.count(b"{")
    arrays = raw.count(b"[")
    commas = raw.count(b",")
    members = raw.count(b":")
    strings = raw.count(b'"') // 2
    return _cost(
        len(raw),
        factors,
        objects=objects,
        filled_objects=objects,
        members=members,
        arrays=arrays,
        slots=commas + arrays,
        strings=strings,
        keys=min(members, strings),
        numbers=commas + objects + arrays + 1,
        string_bytes=len(raw),
    )


def _literals(raw: bytes) -> tuple[int, int, int, tuple[int, int, int, int]]:
    """(costly strings, keys among them, bytes in literals, ``{[,:`` inside long literals).

    One pass over the string literals, in order (so the pairing of quotes is the
    parser's), one at a time: nothing is built but the current match.
    """
    costly = keys = string_bytes = 0
    objects = arrays = commas = colons = 0
    count = raw.count
    for match in _LITERAL.finditer(raw):
        start, end = match.span()
        length = end - start
        string_bytes += length
        # "", "a" and "\n" are cached one-character strings; any other costs a str.
        if length > 4 or (length == 4 and raw[start + 1] != _BACKSLASH):
            costly += 1
            if match.group(1) is not None:
                keys += 1
            if length > _LONG_LITERAL:
                # Punctuation inside a long string is text, not structure. (In a
                # short one it is counted as structure: more, never less.)
                objects += count(b"{", start, end)
                arrays += count(b"[", start, end)
                commas += count(b",", start, end)
                colons += count(b":", start, end)
    return costly, keys, string_bytes, (objects, arrays, commas, colons)


def _exact(
    raw: bytes,
    factors: tuple[int, int],
    budget: int,
    literals: tuple[int, int, int, tuple[int, int, int, int]] | None = None,
) -> int:
    size = len(raw)
    costly, keys, string_bytes, inside = _literals(raw) if literals is None else literals
    count = raw.count
    objects = count(b"{") - inside[0]
    arrays = count(b"[") - inside[1]
    commas = count(b",") - inside[2]
    members = count(b":") - inside[3]
    values = commas + objects + arrays + 1
    # A number past the cached small ints (-5 to 256) is negative, has a digit
    # before a dot or an exponent, or has three digits in a row.
    zeros = raw.translate(_ZERO_DIGITS)
    numbers = count(b"-") + sum(zeros.count(part) for part in (b"0.", b"0e", b"0E", b"000"))
    del zeros
    keys = min(members, keys)
    cost = _cost(
        size,
        factors,
        objects=objects,
        filled_objects=objects - count(b"{}"),
        members=members,
        arrays=arrays,
        slots=commas + arrays,
        strings=costly,
        keys=keys,
        numbers=min(numbers, values),
        string_bytes=string_bytes,
    )
    if cost <= budget or not keys:
        return cost
    # Keys repeat (a list of records names the same few): the parser keeps one str
    # per distinct key. Count the distinct ones, stopping once they are too many.
    per_key = _KEY_MEMO + (_STRING if factors[1] == 1 else _WIDE_STRING)
    fixed = cost - keys * per_key
    allowed = max(budget - fixed, 0) // per_key
    distinct: set[int] = set()
    for match in _LITERAL.finditer(raw):
        if match.group(1) is not None:
            start, end = match.span()
            if end - start > 4 or (end - start == 4 and raw[start + 1] != _BACKSLASH):
                distinct.add(hash(raw[start:end]))
                if len(distinct) > allowed:
                    return cost
    return fixed + len(distinct) * per_key


def price(raw: bytes, *, exact: bool = False, budget: int = 0) -> int:
    """An upper bound, in bytes, of the memory ``json.loads(raw)`` holds at its peak.

    With ``exact`` the string literals are found first (one pass) and what
    sits in the long ones is text, not structure, and, when that is still over
    ``budget``, keys are counted once each (one more pass, stopping as soon as
    the distinct keys alone are over); without it every structural byte counts,
    wherever it sits. Either way the bound holds for any input, valid JSON or
    not (the parser builds nothing past its first error).
    """
    factors = _factors(raw)
    return _exact(raw, factors, budget) if exact else _cheap(raw, factors)


def _budget(raw: bytes) -> int:
    return MESSAGE_MEMORY_FACTOR * len(raw) + MESSAGE_MEMORY_FREE


def _allowed_nodes(raw: bytes) -> int:
    return len(raw) // BYTES_PER_NODE + FREE_NODES


def _plainly_within(raw: bytes, budget: int) -> bool:
    """Whether ``raw`` passes without the exact count (a few C-speed passes)."""
    if len(raw) * _MOST_PER_BYTE <= MESSAGE_MEMORY_FREE:
        return True
    nodes = raw.count(b"{") + raw.count(b"[")
    return nodes <= _allowed_nodes(raw) and price(raw) <= budget


def _exact_refusal(raw: bytes, budget: int, sender: str = "the server") -> str | None:
    literals = _literals(raw)
    _, _, _, inside = literals
    nodes = raw.count(b"{") - inside[0] + raw.count(b"[") - inside[1]
    if nodes > _allowed_nodes(raw):
        # An empty {} is two bytes of JSON and a 64-byte dict.
        return (
            f"{sender} sent a message of {nodes} objects and arrays in {len(raw)} bytes "
            f"(at most one per {BYTES_PER_NODE} bytes plus {FREE_NODES})"
        )
    cost = _exact(raw, _factors(raw), budget, literals)
    if cost <= budget:
        return None
    return (
        f"{sender} sent a message of {len(raw)} bytes that would take about "
        f"{cost // 1_000_000} MB to parse (at most {MESSAGE_MEMORY_FACTOR} times its size "
        f"plus {MESSAGE_MEMORY_FREE // (1024 * 1024)} MiB)"
    )


def memory_refusal(raw: bytes) -> str | None:
    """Why ``raw`` is refused before it is parsed, or ``None``.

    Refused: more objects and arrays than one per ``BYTES_PER_NODE`` bytes plus
    ``FREE_NODES``, or a price over ``MESSAGE_MEMORY_FACTOR`` times its size plus
    ``MESSAGE_MEMORY_FREE``.
    """
    budget = _budget(raw)
    return None if _plainly_within(raw, budget) else _exact_refusal(raw, budget)


async def message_refusal(raw: bytes, sender: str = "the server") -> str | None:
    """:func:`memory_refusal`, with the exact count on a worker thread.

    The exact count loops over the string literals (up to a few hundred
    milliseconds for a megabyte of short strings); on a thread the event loop
    keeps running meanwhile.
    """
    budget = _budget(raw)
    if _plainly_within(raw, budget):
        return None
    return await anyio.to_thread.run_sync(_exact_refusal, raw, budget, sender)


async def mcp_message_refusal(raw: bytes, *, sender: str = "the server") -> str | None:
    """Why an MCP message of these raw bytes should be refused before it is parsed, or None.

    ``json.loads`` can hold 25 times a message's size (two bytes of ``{}`` are a
    64-byte dict), and once a message is parsed the memory is spent whatever is
    refused afterwards. This prices the parse from counts of the raw bytes: a
    message holding more objects and arrays than one per 16 bytes plus 65,536,
    or priced over 10 times its size plus 8 MiB, is refused, the reason naming
    ``sender``. Prism's MCP transports run it on every message a server sends;
    ``prism serve`` runs it on every message a client sends. Almost every
    message is settled by a few C-speed passes; the exact count of a suspicious
    one runs on a worker thread, so the event loop keeps running.
    """
    return await message_refusal(raw, sender)
