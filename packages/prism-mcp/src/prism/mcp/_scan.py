r"""Where things sit in a server message, read from its raw bytes before it is parsed.

``json.loads`` builds every content block of a result (a dict per block, then
the SDK's model per block) before any count of them can run on the parsed
value; :func:`scan` finds, on the bytes, how many elements the message's
``result.content`` array holds and where its ``result.structuredContent``
value sits, building nothing but one regular-expression match at a time.

Only the first two levels of the message (its members and those of its
``result``) are read key by key; every other value is skipped whole, bracket
to bracket, with the strings in between consumed by the regular expression
(a brace or a quote inside a string is text). Keys are compared decoded
(``"con\u0074ent"`` is ``content``), and a key given twice counts as the
parser reads it: the last one wins. On valid JSON the counts are the
parser's (a differential test holds them to ``json.loads``); on anything
else :func:`scan` returns ``None`` (the parser will refuse it).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Layout", "scan"]

_WHOLE_LEVELS = 4
"""Containers nested up to this deep are skipped in one match of the regular expression."""
_STRING = rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
_WS = re.compile(rb"[ \t\r\n]*+")
_KEY = re.compile(rb"[ \t\r\n]*+(" + _STRING + rb")[ \t\r\n]*+:[ \t\r\n]*+", re.DOTALL)
_STRING_VALUE = re.compile(_STRING, re.DOTALL)
_SCALAR = re.compile(rb"[^,\]}\[{\" \t\r\n]++")
_AFTER = re.compile(rb"[ \t\r\n]*+([,}\]])")


def _containers(levels: int) -> bytes:
    """A pattern of one object or array nesting at most ``levels`` deep, whole."""
    plain = rb'[^"\[\]{}]++|' + _STRING
    inner = plain
    for _ in range(levels):
        whole = rb"\{(?:" + inner + rb")*+\}|\[(?:" + inner + rb")*+\]"
        inner = plain + rb"|" + whole
    return whole


_WHOLE = _containers(_WHOLE_LEVELS)
_WHOLE_VALUE = re.compile(_WHOLE, re.DOTALL)
# Everything up to the next bracket (strings and shallow containers consumed
# whole, in C), then that bracket.
_NEXT_BRACKET = re.compile(
    rb'(?:[^"\[\]{}]++|' + _STRING + rb"|" + _WHOLE + rb")*+([\[\]{}])", re.DOTALL
)
# The same between the elements of one array: it stops at a comma too.
_NEXT_ELEMENT = re.compile(
    rb'(?:[^"\[\]{},]++|' + _STRING + rb"|" + _WHOLE + rb")*+([\[\]{},])", re.DOTALL
)
_OPEN = frozenset(b"[{")
_OPEN_OBJECT, _OPEN_ARRAY, _COMMA, _CLOSE_OBJECT, _CLOSE_ARRAY = b"{[,}]"


class _Invalid(Exception):
    """Not JSON the scan can read (the parser would refuse it)."""


@attrs.define(eq=False)
class Layout:
    """What :func:`scan` found in one message.

    Attributes:
        request_id: the raw text of the message's ``id`` (``None`` without one).
        is_result: the message has a ``result`` object.
        blocks: elements of ``result.content`` when it is an array (at most
            ``limit + 1``: counting stops there), else ``None``.
        structured: the (start, end) byte span of ``result.structuredContent``,
            or ``None``.
    """

    request_id: bytes | None = None
    is_result: bool = False
    blocks: int | None = None
    structured: tuple[int, int] | None = None


def _ws(raw: bytes, pos: int) -> int:
    """Just past the whitespace at ``pos``."""
    match = _WS.match(raw, pos)
    assert match is not None  # an empty run matches
    return match.end()


def _key(raw: bytes, span: tuple[int, int]) -> str:
    text = raw[span[0] : span[1]]
    if b"\\" in text:
        decoded: str = json.loads(text)
        return decoded
    return text[1:-1].decode("utf-8", "surrogateescape")


def _close(raw: bytes, pos: int, depth: int) -> int:
    """Just past the bracket closing ``depth`` open containers, scanning from ``pos``."""
    find = _NEXT_BRACKET.match
    while True:
        match = find(raw, pos)
        if match is None:
            raise _Invalid
        pos = match.end()
        if raw[pos - 1] in _OPEN:
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return pos


def _skip(raw: bytes, pos: int) -> int:
    """Just past the value starting at ``pos``."""
    first = raw[pos : pos + 1]
    if first == b'"':
        match = _STRING_VALUE.match(raw, pos)
    elif first and first[0] in _OPEN:
        match = _WHOLE_VALUE.match(raw, pos)
        if match is None:
            # Deeper than the pattern reaches: bracket to bracket, shallow parts whole.
            return _close(raw, pos + 1, 1)
    else:
        match = _SCALAR.match(raw, pos)
    if match is None:
        raise _Invalid
    return match.end()


def _count(raw: bytes, pos: int, limit: int) -> tuple[int, int]:
    """Elements of the array at ``pos`` (counted up to ``limit + 1``), and its end."""
    pos = _ws(raw, pos + 1)
    if raw[pos : pos + 1] == b"]":
        return 0, pos + 1
    elements = 1
    find = _NEXT_ELEMENT.match
    while True:
        match = find(raw, pos)
        if match is None:
            raise _Invalid
        pos = match.end()
        token = raw[pos - 1]
        if token == _COMMA:
            elements += 1
            if elements > limit:
                return elements, _close(raw, pos, 1)
        elif token in _OPEN:
            pos = _skip(raw, pos - 1)
        elif token == _CLOSE_ARRAY:
            return elements, pos
        else:
            raise _Invalid


def _members(raw: bytes, pos: int, visit: Callable[[str, int], int]) -> int:
    """Call ``visit(key, value start)`` for each member of the object at ``pos``.

    The visitor returns the end of the value, having read it, or -1 to have it
    skipped; returns the end of the object.
    """
    pos = _ws(raw, pos + 1)
    if raw[pos : pos + 1] == b"}":
        return pos + 1
    while True:
        match = _KEY.match(raw, pos)
        if match is None:
            raise _Invalid
        start = match.end()
        end = visit(_key(raw, match.span(1)), start)
        if end < 0:
            end = _skip(raw, start)
        after = _AFTER.match(raw, end)
        if after is None:
            raise _Invalid
        pos = after.end()
        token = raw[pos - 1]
        if token == _CLOSE_OBJECT:
            return pos
        if token != _COMMA:
            raise _Invalid


def scan(raw: bytes, *, limit: int) -> Layout | None:
    """The layout of the JSON-RPC message ``raw``, or ``None`` when it is not a JSON object.

    ``limit`` bounds the count of content blocks (counting stops past it).
    """
    start = _ws(raw, 0)
    if raw[start : start + 1] != b"{":
        return None
    layout = Layout()

    def top(key: str, value: int) -> int:
        if key == "id":
            end = _skip(raw, value)
            layout.request_id = raw[value:end]
            return end
        if key != "result":
            return -1
        # A later "result" replaces an earlier one, as in the parser.
        layout.is_result = raw[value] == _OPEN_OBJECT
        layout.blocks = layout.structured = None
        return _members(raw, value, inner) if layout.is_result else -1

    def inner(key: str, value: int) -> int:
        if key == "content":
            if raw[value] != _OPEN_ARRAY:
                layout.blocks = None
                return -1
            layout.blocks, end = _count(raw, value, limit)
            return end
        if key == "structuredContent":
            end = _skip(raw, value)
            layout.structured = (value, end)
            return end
        return -1

    try:
        end = _members(raw, start, top)
        if _ws(raw, end) != len(raw):
            return None
    except (_Invalid, ValueError, RecursionError, IndexError):  # IndexError: cut off
        return None
    return layout
