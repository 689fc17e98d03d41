"""Clipping untrusted text and describing an exception in one bounded line."""

from __future__ import annotations

import re

__all__ = [
    "MESSAGE_LIMIT",
    "NAME_LIMIT",
    "REASON_LIMIT",
    "clip",
    "clip_counted",
    "describe_exception",
    "escape_controls",
    "has_lone_surrogate",
]

MESSAGE_LIMIT = 2_000
"""Characters of one message a model or a host reads: an error, a refusal, a failure."""

REASON_LIMIT = 300
"""Characters of a short reason quoted inside a message (why a value was refused)."""

NAME_LIMIT = 200
"""Characters of a name, a path or a value quoted inside a message."""

_MARK = "..."

# C0 but tab and newline, DEL, C1; the bidi marks, embeddings, overrides and isolates;
# zero-width characters, the line and paragraph separators, the word joiner's block,
# the byte order mark and the interlinear annotation characters
_CONTROLS = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]"
)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    r"""``text`` with every character that moves or hides other text shown as its escape.

    Text a model, a server or a repository chose, put in front of a person (an
    approval question, a forwarded one, a terminal line): a carriage return,
    an escape sequence, a backspace or a bidi override in it could redraw what
    the person reads. Tabs and newlines stay::

        >>> escape_controls("ls # \r\x1b[2Kok?")
        'ls # \\x0d\\x1b[2Kok?'
    """
    return _CONTROLS.sub(_escaped, text)


def has_lone_surrogate(text: str) -> bool:
    r"""Whether ``text`` holds a lone surrogate (U+D800 to U+DFFF), which no UTF-8 holds.

    ``json.loads`` makes one from an escape such as ``"\ud800"``; such a text
    cannot be written as UTF-8 (a JSON-RPC answer, a Rust string, an SQLite
    text column), so every package that sends or checks text refuses it
    through here. An ASCII text is answered at once::

        >>> has_lone_surrogate("caf\u00e9"), has_lone_surrogate("x\ud800")
        (False, True)
    """
    if text.isascii():
        return False
    try:
        text.encode("utf-8")  # faster than a regex search, at any length
    except UnicodeEncodeError:
        return True
    return False


def clip(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` cut to at most ``limit`` characters, ending in ``...`` when it was cut.

    Text from tools, servers, schemas and models is untrusted and may be of any
    length; every message Prism builds from it goes through here::

        >>> clip("a" * 10, 8)
        'aaaaa...'
    """
    if len(text) <= limit:
        return text
    if limit <= len(_MARK):
        return text[: max(limit, 0)]
    return text[: limit - len(_MARK)] + _MARK


def clip_counted(text: str, limit: int, total: int | None = None) -> str:
    """``text`` cut to ``limit`` characters, saying how many of ``total`` were left out.

    For records a reader audits later: the marker keeps the true length, so a
    clipped value is never mistaken for the whole. ``total`` is the length of the
    value ``text`` was taken from when the caller already cut it (default:
    ``len(text)``)::

        >>> clip_counted("a" * 10, 4)
        'aaaa...[6 more chars]'
    """
    total = len(text) if total is None else total
    if total <= limit:
        return text
    return f"{text[:limit]}...[{total - limit} more chars]"


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        found: list[BaseException] = []
        for inner in exc.exceptions:
            found.extend(_leaves(inner))
        return found
    return [exc]


def describe_exception(
    exc: BaseException,
    *,
    prefer: tuple[type[BaseException], ...] = (),
    limit: int = MESSAGE_LIMIT,
) -> str:
    """One clipped line naming ``exc``: ``"ValueError: the message"``, or the type alone.

    An exception group is searched: the line names its most telling leaf, the
    first leaf of the first type in ``prefer`` found, else the group's first leaf.

    Args:
        exc: the exception to describe.
        prefer: exception types worth naming first, most telling first.
        limit: the most characters of the line.
    """
    leaves = _leaves(exc)
    leaf = next(
        (found for kind in prefer for found in leaves if isinstance(found, kind)),
        leaves[0],
    )
    name = type(leaf).__name__
    try:
        text = str(leaf)
    except Exception:  # a hostile __str__ must not turn a failure into a crash
        text = ""
    return clip(f"{name}: {text}" if text else name, limit)
