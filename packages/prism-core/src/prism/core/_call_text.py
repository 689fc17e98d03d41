r"""Tool-call arguments parsed from JSON text, and what the text proves about them.

A value parsed from a JSON text of ``n`` characters holds at most ``n`` values
(each starts at its own character), no string or key longer than ``n``
characters (an escape only shortens one), at most ``n`` characters in all its
strings and keys, and nests no deeper than the text's ``[`` and ``{`` count
(brackets inside strings only add to that count). Python's ``json`` builds only
exact ``dict``, ``list``, ``str``, ``int``, ``float``, ``bool`` and ``None``
values with string keys. What the text alone does not rule out is checked while
it is parsed or on the text itself, in C-speed passes:

* a run of more than 18 digits anywhere in the text (an integer that may be
  outside 64 bits), on the text; floats that overflow to infinity, by the
  parser's float hook (called once per float);
* ``NaN`` and ``Infinity``, by its constant hook;
* lone surrogates (a non-ASCII text that cannot be encoded as UTF-8, or a
  ``\uD800``-``\uDFFF`` escape) and the keys ``__proto__``, ``constructor`` and
  ``prototype`` (literally, or through a ``\u00XX`` escape of an ASCII letter).

A text that may hold any of them gets no bound, and its arguments are walked
like any others. The bound is kept on the :class:`~prism.core.ToolCall` Prism
built from the text, next to the very object parsed from it; see
:meth:`ToolCall.from_json`.
"""

from __future__ import annotations

import json
import re

__all__ = ["TEXT_BOUND_LIMIT", "parse_call_arguments", "parse_json_text"]

# Texts longer than this get no bound (their arguments are walked, as any
# others): the passes over the text cost about a nanosecond a character each,
# so past this a walk of the parsed value is usually the cheaper proof. The
# default limits use the bound up to 10,000 characters.
TEXT_BOUND_LIMIT = 65_536

# At most 18 digits: any integer so written is within -10**18..10**18, far
# inside the 64 bits validators accept.
_INTEGER_CHARS = 18
# Searched for as written (an escape in a key is caught apart); not "proto"
# alone, which every 2026-07-28 MCP request holds ("protocolVersion").
_POLLUTION = ("__proto__", "prototype", "constructor")
# A \u escape of a lone-surrogate code unit, or of an ASCII character (a key
# could spell a pollution key through one).
_ESCAPE = re.compile(r"\\u(?:00[0-7]|[dD][89a-fA-F])")


class _Unbounded(Exception):
    """Raised by a number hook: the text may hold what its length does not bound."""


def _finite(text: str) -> float:
    value = float(text)
    if value - value:  # inf - inf is nan, which is truthy
        raise _Unbounded
    return value


def _constant(_text: str) -> float:
    raise _Unbounded


# Integers are parsed by the parser's own fast path; the text is searched for
# their digits instead (a hook would cost a Python call per integer).
_BOUNDED = json.JSONDecoder(parse_float=_finite, parse_constant=_constant)
# Digits become 0 (a long number is a run of them), and { becomes [ (one count
# of both kinds of bracket).
_FOLD = bytes.maketrans(b"0123456789{", b"0000000000[")
_LONG_NUMBER = b"0" * (_INTEGER_CHARS + 1)
_BOM = b"\xef\xbb\xbf"


def _bound(text: str, raw: bytes | bytearray | None = None) -> tuple[int, int] | None:
    """(characters, most nesting) the parsed value is within, or ``None``.

    ``raw`` is ``text`` as UTF-8, when the caller has it.
    """
    if raw is None:
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError:
            return None
    folded = raw.translate(_FOLD)
    if _LONG_NUMBER in folded:
        return None
    if "\\u" in text and _ESCAPE.search(text) is not None:
        return None
    for key in _POLLUTION:
        if key in text:
            return None
    return len(text), folded.count(b"[")


def parse_json_text(data: str | bytes | bytearray) -> tuple[object, tuple[int, int] | None]:
    """The value of the JSON text ``data``, as ``json.loads`` reads it, and the text's bound.

    Bytes are decoded as ``json.loads`` decodes them (UTF-8, -16 or -32, found
    from the first bytes). The bound is ``(characters, nesting)`` when the text
    proves the value holds nothing else (see the module's docstring), else
    ``None``; it holds for every part of the value too.

    Raises:
        ValueError: ``data`` is not JSON (``json.JSONDecodeError``, or bytes
            that cannot be decoded).
        RecursionError: ``data`` nests deeper than the parser can follow.
    """
    raw: bytes | bytearray | None = None
    if isinstance(data, (bytes, bytearray)):
        # Plain UTF-8 (no BOM, no NUL among the first bytes, as json.loads would
        # find UTF-16 or -32) decodes strictly; anything else as json.loads does.
        if data[:4].find(0) >= 0 or data.startswith(_BOM):
            return json.loads(data), None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:  # a surrogate's bytes: json.loads lets them pass
            return json.loads(data), None
        raw = data
    else:
        text = data
    if len(text) <= TEXT_BOUND_LIMIT:
        try:
            value = _BOUNDED.decode(text)
        except _Unbounded:
            pass
        else:
            return value, _bound(text, raw)
    return json.loads(text), None


def parse_call_arguments(text: str) -> tuple[object, tuple[int, int] | None]:
    """A tool call's arguments from the model's JSON text, and the text's bound.

    Blank text means no arguments (``{}``). Text that is not JSON is kept as
    the string (the dispatcher refuses it, naming why). The bound is
    ``(characters, nesting)`` when the text proves the value holds nothing else
    (see the module's docstring), else ``None``.
    """
    if not text or text.isspace():
        return {}, (2, 1)
    if len(text) <= TEXT_BOUND_LIMIT:
        try:
            value = _BOUNDED.decode(text)
        except _Unbounded:
            pass
        except (ValueError, RecursionError):
            return text, None
        else:
            return value, _bound(text)
    try:
        return json.loads(text), None
    except (ValueError, RecursionError):
        return text, None
