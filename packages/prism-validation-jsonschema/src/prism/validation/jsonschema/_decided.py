"""Closed schemas simple enough that their written checker decides a valid call alone.

For a closed schema (see ``_closed``) written out per property (see
``_unrolled``), the checker tests each member's type and the instance limits,
then hands the whole call to the engine. For the small subset below, the same
tests can also decide that the call is valid, so a valid call never enters the
engine; any call the tests do not find valid still goes to the general checker
and the engine exactly as before, so a refusal keeps the engine's words. Only
``True`` is ever decided here, and each test is narrower than or equal to the
schema's: a value outside it is never called valid.

The subset (every keyword outside it leaves the schema to the engine):

* the dialect is draft-06, draft-07, 2019-09 or 2020-12 (draft-04 spells
  ``exclusiveMaximum`` as a flag on ``maximum``);
* the root is ``"type": "object"`` with ``properties``, ``required`` (names of
  declared properties only), ``additionalProperties`` (``false``, or absent,
  ``true`` or ``{}``: an undeclared key is never decided here), ``$schema``,
  ``$id`` and annotations;
* each property is one of: ``"type": "integer"`` with integer ``minimum``,
  ``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum`` (within 64 bits);
  ``"type": "string"`` with ``minLength``/``maxLength`` and a ``pattern`` (not
  predicted: the engine's own compiled pattern runs on the string alone; the
  short strings it matched are kept, see ``_unrolled.MEMO_STRINGS``), or
  an ``enum``/``const`` of strings (with or without ``"type": "string"``);
  ``"type": "boolean"``;
  ``"type": "null"``; or ``"type": "array"`` with ``maxItems``, ``minItems``
  and ``items`` one of those scalars; each with annotations only besides;
* ``format`` only where it is an annotation (2019-09 and 2020-12 without
  ``assert_formats``); never ``$ref``, ``multipleOf``, ``uniqueItems``,
  ``minProperties``, ``maxProperties``, or a ``pattern`` beside an ``enum`` or
  on an array's items.

Only exact ``int`` values are decided for an integer (``1.0``, ``True`` and
an ``IntEnum`` member go to the engine), only exact ``str`` for a string (its
length counted in code points, as the engine counts a string without lone
surrogates; a lone surrogate is never decided), only exact ``list`` for an
array. ``tests/test_validation_jsonschema_decided.py`` holds these verdicts
against the engine's on schemas and values drawn near every boundary.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._instance import lone_surrogate
from ._screen import MAX_INTEGER, MIN_INTEGER

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["DRAFTS", "Decided", "decided_kinds"]

# The dialects in which every keyword of the subset means the same.
DRAFTS = frozenset({"draft6", "draft7", "draft2019", "draft2020"})
# Where ``format`` is an annotation unless asserting was asked for.
_ANNOTATED_FORMAT = frozenset({"draft2019", "draft2020"})

_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
    }
)
_ROOT = _ANNOTATIONS | {"type", "properties", "required", "additionalProperties", "$schema", "$id"}
_INTEGER = _ANNOTATIONS | {"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}
_STRING = _ANNOTATIONS | {"type", "minLength", "maxLength", "enum", "const"}
_PLAIN = _ANNOTATIONS | {"type"}
_ARRAY = _ANNOTATIONS | {"type", "items", "minItems", "maxItems"}

Matcher = Callable[[str], Callable[[str], bool]]
"""Makes the engine's test of one ``pattern`` (``is_valid`` of ``{"pattern": ...}``)."""

Decided = tuple[str, Any, Any]
"""One property's test: (kind, first bound, second bound).

``("int", low, high)``: an exact int within ``low..high``. ``("str", shortest,
longest)``: an exact str of that many code points, without a lone surrogate.
``("enum", strings, None)``: an exact str in the frozenset. ``("match",
(shortest, longest), matches)``: a ``"str"`` that ``matches`` (the engine's
own ``pattern`` test, run on the string alone). ``("bool", None,
None)``, ``("null", None, None)``. An array property is ``("array", (fewest,
most), item)`` with ``item`` its items' test."""


def _bound(value: object) -> int | None:
    """``value`` if it is an integer bound the engine compares exactly, else None."""
    if type(value) is int and MIN_INTEGER <= value <= MAX_INTEGER:
        return value
    return None


def _count(value: object) -> int | None:
    """``value`` if it is a usable length or count, else None."""
    if type(value) is int and 0 <= value <= MAX_INTEGER:
        return value
    return None


def _scalar(
    schema: object, longest: int, formats: bool, matcher: Matcher | None = None
) -> Decided | None:
    """The test of a scalar property, or None if it is outside the subset.

    ``longest`` is the longest string the closed checker lets through there.
    ``formats``: ``format`` is an annotation in this dialect and setting.
    ``matcher`` makes the engine's own test of a ``pattern`` (None: a pattern
    leaves the property to the engine).
    """
    if type(schema) is not dict:
        return None
    keys = set(schema)
    if "format" in keys:
        if not formats or type(schema["format"]) is not str:
            return None
        keys.discard("format")
    pattern = schema.get("pattern")
    if "pattern" in keys:
        if matcher is None or type(pattern) is not str or "enum" in keys or "const" in keys:
            return None
        keys.discard("pattern")
    kind = schema.get("type", None)
    if kind == "integer" and _INTEGER.issuperset(keys):
        low, high = MIN_INTEGER, MAX_INTEGER
        for name in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
            if name not in schema:
                continue
            value = _bound(schema[name])
            if value is None:
                return None
            if name == "minimum":
                low = max(low, value)
            elif name == "exclusiveMinimum":
                low = max(low, value + 1)
            elif name == "maximum":
                high = min(high, value)
            else:
                high = min(high, value - 1)
        return "int", low, high
    if kind in ("boolean", "null") and _PLAIN.issuperset(keys):
        return ("bool" if kind == "boolean" else "null"), None, None
    if (kind == "string" or "type" not in schema) and _STRING.issuperset(keys):
        shortest = 0
        if "minLength" in schema:
            found = _count(schema["minLength"])
            if found is None:
                return None
            shortest = found
        if "maxLength" in schema:
            found = _count(schema["maxLength"])
            if found is None:
                return None
            longest = min(longest, found)
        if "enum" in schema or "const" in schema:
            allowed: set[str] | None = None
            for values in (
                schema.get("enum") if "enum" in schema else None,
                [schema["const"]] if "const" in schema else None,
            ):
                if values is None:
                    continue
                if type(values) is not list or not all(type(value) is str for value in values):
                    return None
                found_set = {
                    value
                    for value in values
                    if shortest <= len(value) <= longest
                    and (value.isascii() or not lone_surrogate(value))
                }
                allowed = found_set if allowed is None else allowed & found_set
            return "enum", frozenset(allowed or ()), None
        if kind != "string":
            return None
        if pattern is not None:
            try:
                matches = matcher(pattern)  # type: ignore[misc]
            except Exception:  # pragma: no cover - the engine compiled it in the schema
                return None
            return "match", (shortest, longest), matches
        return "str", shortest, longest
    return None


def decided_kinds(
    schema: Any,
    draft: str,
    caps: Mapping[str, int],
    arrays: Mapping[str, tuple[int, int]],
    *,
    assert_formats: bool,
    matcher: Matcher | None = None,
) -> dict[str, tuple[bool, Decided]] | None:
    """(required, test) of each property of a closed schema in the subset, else None.

    ``caps`` and ``arrays`` are ``_closed.closed_bounds``'s: each property's
    longest string for the closed checker (-1 for an array), each array's
    ``maxItems`` and longest item string, so a decided call stays within what
    the checker bounds.
    """
    if draft not in DRAFTS or type(schema) is not dict or not _ROOT.issuperset(schema):
        return None
    if schema.get("type") != "object":
        return None
    properties = schema.get("properties")
    if type(properties) is not dict:
        return None
    required = schema.get("required", [])
    if type(required) is not list or not all(
        type(name) is str and name in properties for name in required
    ):
        return None
    formats = draft in _ANNOTATED_FORMAT and not assert_formats
    kinds: dict[str, tuple[bool, Decided]] = {}
    for name, sub in properties.items():
        cap = caps.get(name)
        if cap is None:
            return None
        if cap == -1:
            test = _array(sub, arrays[name][1], formats)
        else:
            test = _scalar(sub, cap, formats, matcher)
        if test is None:
            return None
        kinds[name] = (name in required, test)
    return kinds


def _array(schema: object, longest: int, formats: bool) -> Decided | None:
    if type(schema) is not dict or schema.get("type") != "array":
        return None
    if not _ARRAY.issuperset(schema):
        return None
    most = _count(schema.get("maxItems"))
    fewest = _count(schema.get("minItems", 0))
    items = schema.get("items")
    if most is None or fewest is None or type(items) is not dict:
        return None
    if items.get("type") == "array":
        return None
    item = _scalar(items, longest, formats)
    if item is None:
        return None
    return "array", (fewest, most), item
