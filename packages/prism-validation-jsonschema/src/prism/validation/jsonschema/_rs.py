"""The engine for every dialect: jsonschema-rs, configured so it never reaches out.

jsonschema-rs implements draft-04, -06 and -07 and every keyword of 2019-09 and
2020-12 (``prefixItems``, ``unevaluated*``, ``dependent*``, ``contains`` bounds,
``$anchor``, ``$dynamicRef``, ``$recursiveRef``), and needs no code generation.
Hardening around it:

* a retriever that refuses every URI, so no reference is fetched or read (the
  screen already refused every reference that is not ``#...``);
* ``pattern`` and ``patternProperties`` run on Rust's ``regex`` crate (finite
  automata, linear time; no lookaround or backreferences), never the
  backtracking ``fancy-regex``;
* ``format`` asserts in draft-04/06/07, each draft's own formats only (the
  others are annotations there, as the drafts say); in 2019-09 and 2020-12 it is
  an annotation unless asserting was asked for. ``format: regex``, when
  asserted, is the engine's own ECMA-262 parser behind Prism's length and
  named-group bounds (``_regex.is_regex``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jsonschema_rs

from ._regex import is_regex

if TYPE_CHECKING:
    from collections.abc import Callable, Collection

__all__ = ["FORMAT_DRAFTS", "RsValidationError", "compile_rs"]

RsValidationError = jsonschema_rs.ValidationError

# Rust regex limits: compiled program and lazy DFA cache, in bytes.
_PATTERN_OPTIONS = jsonschema_rs.RegexOptions(size_limit=8 << 20, dfa_size_limit=8 << 20)


_MASK = "<value>"


class _RemoteReferenceError(ValueError):
    """A reference the engine tried to retrieve; nothing is ever fetched."""


def _refuse(uri: str) -> Any:
    raise _RemoteReferenceError(
        f"reference {uri[:200]!r} is never fetched; only '#...' references are allowed"
    )


def _annotation(_value: str) -> bool:
    return True


_CLASSES: dict[str, Any] = {
    "draft4": jsonschema_rs.Draft4Validator,
    "draft6": jsonschema_rs.Draft6Validator,
    "draft7": jsonschema_rs.Draft7Validator,
    "draft2019": jsonschema_rs.Draft201909Validator,
    "draft2020": jsonschema_rs.Draft202012Validator,
}

# The drafts whose ``format`` always asserts, and the formats each leaves an
# annotation although jsonschema-rs would check them there: draft-04 defines
# date-time, email, hostname, ipv4, ipv6 and uri, draft-06 adds uri-reference,
# uri-template and json-pointer, draft-07 adds the rest (``regex`` is checked in
# all three, as it always was here).
_LATER_FORMATS = frozenset({"date", "time", "idn-email"})
_FORMATS: dict[str, dict[str, Callable[[str], bool]]] = {
    "draft4": {"regex": is_regex} | dict.fromkeys(_LATER_FORMATS, _annotation),
    "draft6": {"regex": is_regex} | dict.fromkeys(_LATER_FORMATS, _annotation),
    "draft7": {"regex": is_regex},
}
FORMAT_DRAFTS = frozenset(_FORMATS)


class _Unknown:
    """A keyword the dialect does not define, so it checks nothing.

    jsonschema-rs asserts ``contentMediaType`` and ``contentEncoding`` in
    draft-06, which has neither (they came with draft-07), and ``dependencies``
    in 2019-09 and 2020-12, which replaced it; there they are unknown keywords,
    as the drafts say.
    """

    def __init__(self, _parent: object, _value: object, _path: object) -> None:
        pass

    def validate(self, _instance: object) -> None:
        return None


_KEYWORDS: dict[str, dict[str, type]] = {
    "draft6": {"contentMediaType": _Unknown, "contentEncoding": _Unknown},
}


def _same_key(value: object) -> object:
    """A hashable key equal for JSON-equal values (1 and 1.0 alike, true apart from 1)."""
    kind = type(value)
    if kind is bool:
        return ("b", value)
    if kind is int or kind is float:
        return ("n", value)  # Python compares int and float exactly
    if kind is list:
        return ("l", tuple(_same_key(item) for item in value))  # type: ignore[attr-defined]
    if kind is dict:
        return ("o", frozenset((k, _same_key(v)) for k, v in value.items()))  # type: ignore[attr-defined]
    return ("s", value)  # str or None


# Items that need a key: true == 1 in Python, and lists and dicts do not hash.
_KEYED = frozenset({bool, list, dict})


class _UniqueItems:
    """``uniqueItems`` checked in Python, in linear time.

    jsonschema-rs compares items pairwise when they are integers of 2**62 and
    more (9,000 such items took 13 s); a set of exact keys takes milliseconds.
    """

    def __init__(self, _parent: object, value: object, _path: object) -> None:
        self.on = value is True

    def validate(self, instance: object) -> None:
        if not self.on or type(instance) is not list or len(instance) < 2:
            return
        if not any(type(item) in _KEYED for item in instance):
            # Strings, numbers and null: Python's own equality is JSON's here
            # (1 == 1.0, and a string never equals a number).
            if len(set(instance)) != len(instance):
                raise ValueError("has non-unique elements")
            return
        seen: set[object] = set()
        for item in instance:
            key = _same_key(item)
            if key in seen:
                raise ValueError("has non-unique elements")
            seen.add(key)


# 2019-09 and 2020-12 with assert_formats=True.
_ASSERTED: dict[str, Callable[[str], bool]] = {"regex": is_regex}


def compile_rs(
    schema: object,
    draft: str,
    *,
    assert_formats: bool,
    used: Collection[str] = (),
    unique_items: bool = False,
    retired: Collection[str] = (),
) -> Any:
    """The engine's validator, with ``is_valid(instance)`` and ``validate(instance)``.

    ``validate`` raises ``jsonschema_rs.ValidationError`` for an invalid instance.

    ``assert_formats`` matters for 2019-09 and 2020-12 only: draft-04/06/07
    always assert their formats. ``used`` names the formats the schema asserts:
    only those of Prism's own checks are handed to the engine, because any
    Python format check handed to it makes every call slower (about 0.3 us),
    used or not. ``unique_items`` (the schema asserts ``uniqueItems``) hands
    that keyword to Prism's linear check, for the same reason only then.
    ``retired`` names keywords this dialect does not have that the engine would
    apply anyway (``dependencies`` in 2019-09 and 2020-12): they check nothing.

    Raises:
        Exception: whatever jsonschema-rs raises for a schema it refuses (the
            caller translates it).
    """
    table = _FORMATS.get(draft)
    validate_formats = table is not None or assert_formats
    own = table if table is not None else _ASSERTED
    formats = {name: check for name, check in own.items() if name in used} or None
    keywords = _KEYWORDS.get(draft)
    if unique_items:
        keywords = {**(keywords or {}), "uniqueItems": _UniqueItems}
    if retired:
        keywords = {**(keywords or {}), **dict.fromkeys(retired, _Unknown)}
    validator = _CLASSES[draft](
        schema,
        validate_formats=validate_formats,
        formats=formats if validate_formats else None,
        retriever=_refuse,
        pattern_options=_PATTERN_OPTIONS,
        keywords=keywords,
        # Prism's refusal is built from the error's kind and path, never the
        # engine's message, which would otherwise quote the failing value whole
        # (refusing 8 MB at the root: 60 ms to write the message, 0.5 ms masked).
        mask=_MASK,
    )
    return validator
