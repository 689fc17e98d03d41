"""Closed schemas: when a schema's own checks already imply the instance limits.

A tool schema like ``{"type": "object", "additionalProperties": false,
"properties": {...}}`` whose every property is a scalar (an integer, a
boolean, null, a string, an ``enum``/``const`` of scalars) or an array with
``maxItems`` of such scalars accepts only instances of a known shape: no key
but the declared ones (none a pollution key, screening saw to that), depth at
most 2, at most ``maxItems`` items per array, no NaN or infinity (``integer``
refuses them and the other types cannot hold them), and, with the string
lengths the checker holds (``maxLength``, or ``max_string_length`` for a string
without one), a known most of characters. Without ``$ref`` nothing recurses.
For such a schema the checker made for it (``_fast.closed_checker``) replaces
the instance walk: every key a declared name, every member a plain scalar
within the limits or an array of them no longer than its ``maxItems``, checked
before the engine reads it (the engine accepts integers past 64 bits, lone
surrogates and any string length ``maxLength`` does not bound, compares a huge
integer with ``maximum`` slowly, and encodes a non-ASCII key whole before it
refuses it as undeclared); anything else takes the full path, whose walk bounds
it and says where it is wrong, so both paths give the same verdict. A schema
closed but for ``additionalProperties`` (absent, ``true`` or ``{}``) gets the
same checker: it decides the calls whose keys are all declared names, and
sends any other to the full path.

The analysis is conservative: anything it does not recognise is "not closed"
and takes the full path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._instance import TOTAL_STRING_FACTOR, lone_surrogate

if TYPE_CHECKING:
    from ._limits import SchemaLimits

__all__ = ["ClosedBounds", "closed_bounds"]

_REF_KEYWORDS = frozenset({"$ref", "$dynamicRef", "$recursiveRef"})

# Only these keywords may appear, so that the compiled code's work before it
# accepts or refuses a value is bounded by the declared shape (no combinators,
# no nested sub-schemas beyond array items).
_ANNOTATIONS = frozenset(
    {
        "description",
        "title",
        "default",
        "examples",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
    }
)
_ROOT_KEYWORDS = _ANNOTATIONS | {
    "type",
    "properties",
    "additionalProperties",
    "required",
    "minProperties",
    "maxProperties",
    "$schema",
    "$id",
}
_SCALAR_KEYWORDS = _ANNOTATIONS | {
    "type",
    "maxLength",
    "minLength",
    "pattern",
    "format",
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
}
# Not ``uniqueItems``: the engine runs before the closed path looks at the
# values, and it compares integers past 64 bits pairwise through a slow path
# (seconds for a few hundred), so an array with it takes the full path, whose
# walk refuses such integers first.
_ARRAY_KEYWORDS = _ANNOTATIONS | {"type", "maxItems", "minItems", "items"}


def _has_ref(node: object) -> bool:
    stack = [node]
    while stack:
        item = stack.pop()
        if type(item) is dict:
            if not _REF_KEYWORDS.isdisjoint(item):
                return True
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
    return False


def _scalar_chars(schema: object, limits: SchemaLimits) -> int | None:
    """The most characters a valid value can hold, if it must be a bounded scalar."""
    if type(schema) is not dict or not _SCALAR_KEYWORDS.issuperset(schema):
        return None
    kind = schema.get("type")
    if kind in ("integer", "boolean", "null"):
        return 0
    if kind == "string":
        most = schema.get("maxLength")
        if type(most) is int and 0 <= most <= limits.max_string_length:
            return most
    for values in (schema.get("enum"), [schema["const"]] if "const" in schema else None):
        if type(values) is not list or not values:
            continue
        longest = 0
        for value in values:
            if type(value) is str:
                if len(value) > limits.max_string_length:
                    break
                longest = max(longest, len(value))
            elif type(value) not in (int, bool, float) and value is not None:
                break
        else:
            return longest
    if kind == "string" and "maxLength" not in schema:
        # Unbounded: the checker holds it to max_string_length.
        return limits.max_string_length
    return None


def _longest(schema: Any, chars: int, limits: SchemaLimits) -> int:
    """The longest string the checker lets through where a valid value holds ``chars``.

    Where no string is valid (``chars`` is 0) and no ``pattern`` or ``format``
    reads one, a string of any length within the limits is refused by the
    engine's type check at once, in the engine's words.
    """
    if chars or "pattern" in schema or "format" in schema:
        return chars
    return limits.max_string_length


ClosedBounds = tuple[int, int, int, dict[str, int], int, dict[str, tuple[int, int]], int]
"""(declared properties, most instance nodes, most characters in strings and keys,
each declared property's longest string for the checker (-1 for an array), the
characters of the declared names, each array property's ``maxItems`` and longest
item string for the checker, the most characters a call the checker passes can
hold), for instances whose keys are all declared names.

The checker's longest string is the property's own bound when a string can be
valid there, and ``max_string_length`` where none can (an integer, say): the
engine refuses a string there at once, with its own words."""


def closed_bounds(
    schema: Any, limits: SchemaLimits, text: str | None = None
) -> ClosedBounds | None:
    """What an instance a closed schema accepts can hold, or ``None`` if it is not closed.

    A schema that is closed but for ``additionalProperties`` (absent, ``true``
    or ``{}``) gets the same bounds, for its instances whose keys are all
    declared names; its checker sends any other instance to the full path.
    ``text``, the schema's JSON text if the caller has it, spares a walk when
    it names no reference keyword at all.
    """
    if type(schema) is not dict or not _ROOT_KEYWORDS.issuperset(schema):
        return None
    extra = schema.get("additionalProperties", True)
    if schema.get("type") != "object" or extra not in (False, True, {}):
        return None
    properties = schema.get("properties")
    if type(properties) is not dict:
        return None
    if len(properties) > limits.max_instance_properties or limits.max_instance_depth < 2:
        return None
    if (text is None or any(f'"{key}"' in text for key in _REF_KEYWORDS)) and _has_ref(schema):
        return None
    chars = 0
    items = 0
    keys = 0
    caps: dict[str, int] = {}
    arrays: dict[str, tuple[int, int]] = {}
    reach = 0
    for name, sub in properties.items():
        # A valid instance's keys are these names: each must be within the limits.
        if len(name) > limits.max_string_length or (not name.isascii() and lone_surrogate(name)):
            return None
        keys += len(name)
        cost = _scalar_chars(sub, limits)
        if cost is not None:
            caps[name] = _longest(sub, cost, limits)
            reach += caps[name]
        else:
            caps[name] = -1
            if type(sub) is not dict or sub.get("type") != "array":
                return None
            if not _ARRAY_KEYWORDS.issuperset(sub):
                return None
            most = sub.get("maxItems")
            cost = _scalar_chars(sub.get("items"), limits)
            if type(most) is not int or most < 0 or cost is None:
                return None
            items += most
            arrays[name] = (most, _longest(sub.get("items"), cost, limits))
            reach += most * arrays[name][1]
            cost *= most
        chars += cost
    if items > limits.max_array_length:
        return None
    if chars > limits.max_string_length * TOTAL_STRING_FACTOR:
        return None
    nodes = 1 + len(properties) + items
    return len(properties), nodes, chars + keys, caps, keys, arrays, reach
