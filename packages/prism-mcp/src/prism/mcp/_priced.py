"""Pricing an output schema for the ``jsonschema`` fallback, and each value against it.

Without prism-validation-jsonschema, ``structuredContent`` is checked by the
``jsonschema`` package, which has no cost model: a server's ``outputSchema``
with ``$ref`` fan-out (0.22 s at 14 levels each reaching the next twice,
doubling per level), a backtracking ``pattern`` (``^(a+)+$`` on 23 characters
0.15 s, doubling per character), a pairwise ``uniqueItems`` (3,000 objects:
9.8 s) or nested ``unevaluated*`` could hold the host as long as it liked per
result. So the fallback checks only schemas it can price, and only values
whose price fits :data:`FALLBACK_WORK`.

A schema it can price (anything else is left unchecked, with the warning the
checker already logs for a schema it cannot use):

- its ``$schema``, if any, is draft-04, -06, -07, 2019-09 or 2020-12;
- its validation keywords are among :data:`PRICED` (no ``pattern``,
  ``patternProperties``, ``unevaluatedProperties``, ``unevaluatedItems``,
  ``$dynamicRef``, ``$recursiveRef``, nor ``uniqueItems: true``), each with a
  value of the expected JSON type; other keys are annotations the package
  ignores (``format`` is one: the fallback asserts no format);
- its only references are ``#/$defs/NAME`` or ``#/definitions/NAME`` (``NAME``
  of letters, digits, ``_``, ``.`` and ``-``) naming an entry of the root's own
  ``$defs`` or ``definitions``, with no reference cycle and no ``$id`` below
  the root, so each reference means the sub-schema this module priced;
- at most :data:`MAX_SCHEMA_MEMBERS` sub-schemas and members of sub-schemas
  met in pricing it (a reference counts each time it is met),
  :data:`MAX_ENUM_VALUES` values in their ``enum`` and ``const`` entries,
  sub-schemas nested at most :data:`MAX_NESTING` deep, and at most
  :data:`MAX_DEPTH` instance levels below the root.

Its price is two vectors over instance depths. ``work[k]`` bounds the keyword
evaluations one instance node at depth ``k`` can meet (each reference counted
wherever it is reached; a member meets the largest ``properties`` entry, an
item the largest positional one); ``shown[k]`` bounds how many messages about
such a node the package can write, each with the node's ``repr`` (``type``,
``enum``, ``anyOf``, the length bounds...). A value costs
``sum(work[k] * nodes at depth k)`` plus ``sum(shown[k] * size of the
subtrees at depth k) // SHOWN_PER_UNIT``, its size counting each node and every
:data:`CHARS_PER_NODE` characters of its strings and keys. A value over
:data:`FALLBACK_WORK` is not checked, and is refused as one that could not be.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "CHARS_PER_NODE",
    "FALLBACK_WORK",
    "MAX_DEPTH",
    "MAX_ENUM_VALUES",
    "MAX_NESTING",
    "MAX_SCHEMA_MEMBERS",
    "PRICED",
    "SHOWN_PER_UNIT",
    "Price",
    "Unpriced",
    "price_schema",
    "price_value",
]

# Units of work a value may cost: one unit is about a microsecond of the
# jsonschema package's time on one keyword (more when it writes an error).
FALLBACK_WORK = 25_000
MAX_SCHEMA_MEMBERS = 2_000
MAX_ENUM_VALUES = 20_000
MAX_NESTING = 64
MAX_DEPTH = 32
# A node's repr costs about a 16th of a unit; a character of a string about a
# 1,000th (CHARS_PER_NODE characters count as one node).
SHOWN_PER_UNIT = 16
CHARS_PER_NODE = 64

_SCHEMA_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
_REF = re.compile(r"#/(\$defs|definitions)/([A-Za-z0-9_.\-]+)")

# Every keyword any of the package's draft-04 to 2020-12 validators applies.
_VALIDATION = frozenset(
    {
        "$dynamicRef",
        "$recursiveRef",
        "$ref",
        "additionalItems",
        "additionalProperties",
        "allOf",
        "anyOf",
        "const",
        "contains",
        "dependencies",
        "dependentRequired",
        "dependentSchemas",
        "enum",
        "exclusiveMaximum",
        "exclusiveMinimum",
        "format",
        "if",
        "items",
        "maxItems",
        "maxLength",
        "maxProperties",
        "maximum",
        "minItems",
        "minLength",
        "minProperties",
        "minimum",
        "multipleOf",
        "not",
        "oneOf",
        "pattern",
        "patternProperties",
        "prefixItems",
        "properties",
        "propertyNames",
        "required",
        "type",
        "unevaluatedItems",
        "unevaluatedProperties",
        "uniqueItems",
        # Read by other keywords' checks (``if``, ``contains``).
        "then",
        "else",
        "minContains",
        "maxContains",
    }
)
_COUNTS = frozenset(
    {
        "maxItems",
        "minItems",
        "maxLength",
        "minLength",
        "maxProperties",
        "minProperties",
        "minContains",
        "maxContains",
    }
)
_BOUNDS = frozenset({"maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum", "multipleOf"})
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf"})
_IN_PLACE = ("not", "if", "then", "else")
PRICED = (_VALIDATION - {"$dynamicRef", "$recursiveRef", "pattern", "patternProperties"}) - {
    "unevaluatedItems",
    "unevaluatedProperties",
}
# Keywords whose message about a node quotes the node (its repr).
_SHOWING = frozenset(
    {
        "type",
        "enum",
        "not",
        "anyOf",
        "oneOf",
        "contains",
        "items",
        "additionalItems",
        "maxItems",
        "minItems",
        "maxLength",
        "minLength",
        "maxProperties",
        "minProperties",
    }
)
# The dialects the package knows (its draft-03 has other keywords).
_DIALECTS = frozenset(
    {
        "http://json-schema.org/draft-04/schema",
        "http://json-schema.org/draft-06/schema",
        "http://json-schema.org/draft-07/schema",
        "https://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2020-12/schema",
    }
)


class Unpriced(Exception):
    """The schema is outside what the fallback can price (the message says why)."""


class Price:
    """What one instance node costs at each depth (see the module's docstring)."""

    __slots__ = ("shown", "work")

    def __init__(self, work: list[int], shown: list[int]) -> None:
        self.work = work
        self.shown = shown


def price_schema(schema: object) -> Price:
    """The price of ``schema``'s values.

    Raises:
        Unpriced: the schema is outside the subset the fallback checks.
    """
    draft4 = False
    if type(schema) is dict and "$schema" in schema:
        declared = schema["$schema"]
        if type(declared) is not str or declared.rstrip("#") not in _DIALECTS:
            raise Unpriced("its $schema is not draft-04, -06, -07, 2019-09 or 2020-12")
        draft4 = "draft-04" in declared
    pricer = _Pricer(schema, draft4=draft4)
    work, shown = pricer.price(schema, 0)
    return Price(work, shown)


def price_value(price: Price, value: object) -> int:
    """What checking ``value`` can cost, in units; once past FALLBACK_WORK, some number above it."""
    work, shown = price.work, price.shown
    levels = len(work)
    whole = shown[0]  # every node's size counts this much at the root
    total = work[0]
    seen = 0  # the size walked so far
    # The sizes of the subtrees at each depth; deeper ones in the last.
    sizes = [0] * (levels + 1)
    # Objects and arrays still to walk, with their depth; scalars are counted
    # in their container's loop.
    stack: list[tuple[Any, int]] = []
    root = type(value)
    if root is dict or root is list:
        stack.append((value, 0))
    else:
        sizes[0] = 1 + (len(value) // CHARS_PER_NODE if root is str else 0)  # type: ignore[arg-type]
    while stack:
        node, depth = stack.pop()
        below = depth + 1
        if below < levels:
            total += work[below] * len(node)
            if total > FALLBACK_WORK:
                return total
        size = 1
        if type(node) is dict:
            size += sum(map(len, node)) // CHARS_PER_NODE
            items = node.values()
        else:
            items = node
        scalars = 0
        for item in items:
            kind = type(item)
            if kind is dict or kind is list:
                stack.append((item, below))
            elif kind is str:
                scalars += 1 + len(item) // CHARS_PER_NODE
            else:
                scalars += 1
        sizes[min(depth, levels)] += size
        sizes[min(below, levels)] += scalars
        seen += size + scalars
        if total + whole * seen // SHOWN_PER_UNIT > FALLBACK_WORK:
            return FALLBACK_WORK + 1
    # A node's repr holds its subtree: the nodes at its depth and below.
    below_size = sizes[levels]
    for depth in range(levels - 1, -1, -1):
        below_size += sizes[depth]
        total += shown[depth] * below_size // SHOWN_PER_UNIT
    return total


def _add(into: list[int], vector: list[int], shift: int = 0) -> None:
    if len(into) < len(vector) + shift:
        into.extend([0] * (len(vector) + shift - len(into)))
    for index, amount in enumerate(vector):
        into[index + shift] += amount


def _side(
    largest: list[tuple[list[int], list[int]]], every: list[tuple[list[int], list[int]]]
) -> tuple[list[int], list[int]]:
    """The price of one member (or item): the largest of ``largest``, plus all of ``every``."""
    work = _top([sub[0] for sub in largest])
    shown = _top([sub[1] for sub in largest])
    for sub_work, sub_shown in every:
        _add(work, sub_work)
        _add(shown, sub_shown)
    return work, shown


def _top(vectors: list[list[int]]) -> list[int]:
    """The elementwise largest of ``vectors``."""
    top: list[int] = []
    for vector in vectors:
        if len(top) < len(vector):
            top.extend([0] * (len(vector) - len(top)))
        for index, amount in enumerate(vector):
            if amount > top[index]:
                top[index] = amount
    return top


class _Pricer:
    def __init__(self, root: object, *, draft4: bool) -> None:
        self.root = root
        self.draft4 = draft4
        self.members = 0
        self.values = 0
        self.done: dict[int, tuple[list[int], list[int]]] = {}
        self.active: set[int] = set()

    def count(self, members: int) -> None:
        # Each sub-schema met counts, with its members: 100,000 empty allOf
        # entries are as much work to price as 100,000 keywords.
        self.members += members
        if self.members > MAX_SCHEMA_MEMBERS:
            raise Unpriced(f"it has more than {MAX_SCHEMA_MEMBERS} members to check")

    def price(self, schema: object, nesting: int) -> tuple[list[int], list[int]]:
        if schema is True or schema is False:
            self.count(1)
            return [1], [1 if schema is False else 0]
        if type(schema) is not dict:
            raise Unpriced("a sub-schema is not an object or a boolean")
        ident = id(schema)
        known = self.done.get(ident)
        if known is not None:
            self.count(1)
            return known
        if ident in self.active:
            raise Unpriced("its references form a cycle (a recursive schema)")
        if nesting > MAX_NESTING:
            raise Unpriced(f"its sub-schemas nest more than {MAX_NESTING} deep")
        self.count(1 + len(schema))
        self.active.add(ident)
        found = self.keywords(schema, nesting + 1)
        self.active.discard(ident)
        self.done[ident] = found
        return found

    def keywords(self, schema: dict[str, Any], nesting: int) -> tuple[list[int], list[int]]:
        weight = 1
        shows = 0
        in_place: list[tuple[list[int], list[int]]] = []
        members: list[tuple[list[int], list[int]]] = []  # the largest counts
        every_member: list[tuple[list[int], list[int]]] = []
        positional: list[tuple[list[int], list[int]]] = []  # the largest counts
        every_item: list[tuple[list[int], list[int]]] = []
        for key, value in schema.items():
            if type(key) is not str:
                raise Unpriced("a sub-schema has a key that is not a string")
            if key not in _VALIDATION:
                if (key == "$id" or (key == "id" and self.draft4)) and schema is not self.root:
                    raise Unpriced("a sub-schema below the root declares an $id")
                continue
            if key not in PRICED:
                raise Unpriced(f"it uses {key!r}, whose cost the fallback cannot bound")
            weight += 1
            if key in _SHOWING:
                shows += 1
            if key == "type":
                names = value if type(value) is list else [value]
                if not names or any(name not in _SCHEMA_TYPES for name in names):
                    raise Unpriced("'type' names something other than the JSON types")
            elif key in ("enum", "const"):
                weight += self.entries(value if key == "enum" else [value], key)
            elif key in _COUNTS:
                if type(value) is not int or value < 0:
                    raise Unpriced(f"{key!r} is not a non-negative integer")
            elif key in _BOUNDS:
                if type(value) not in (int, float) and not (type(value) is bool and self.draft4):
                    raise Unpriced(f"{key!r} is not a number")
                if key == "multipleOf" and not value > 0:
                    raise Unpriced("'multipleOf' is not positive")
            elif key == "format":
                pass  # not asserted
            elif key == "required":
                weight += len(self.names(value, key))
            elif key == "dependentRequired":
                if type(value) is not dict:
                    raise Unpriced("'dependentRequired' is not an object")
                for names in value.values():
                    weight += len(self.names(names, key))
            elif key == "uniqueItems":
                if value is not False:
                    raise Unpriced("'uniqueItems' compares items pairwise")
            elif key == "$ref":
                in_place.append(self.price(self.target(value), nesting))
            elif key in _SCHEMA_LISTS:
                if type(value) is not list or not value:
                    raise Unpriced(f"{key!r} is not a non-empty array")
                shows += len(value) if key == "oneOf" else 0
                in_place.extend(self.price(sub, nesting) for sub in value)
            elif key in _IN_PLACE:
                in_place.append(self.price(value, nesting))
            elif key in ("dependentSchemas", "dependencies"):
                if type(value) is not dict:
                    raise Unpriced(f"{key!r} is not an object")
                for sub in value.values():
                    if key == "dependencies" and type(sub) is list:
                        weight += len(self.names(sub, key))
                    else:
                        in_place.append(self.price(sub, nesting))
            elif key == "properties":
                if type(value) is not dict:
                    raise Unpriced("'properties' is not an object")
                weight += len(value)
                members.extend(self.price(sub, nesting) for sub in value.values())
            elif key in ("additionalProperties", "propertyNames"):
                weight += 1  # each member looked up or named
                every_member.append(self.price(value, nesting))
            elif key == "prefixItems" or (key == "items" and type(value) is list):
                if type(value) is not list:
                    raise Unpriced(f"{key!r} is not an array")
                weight += len(value)
                positional.extend(self.price(sub, nesting) for sub in value)
            else:  # items, additionalItems, contains
                every_item.append(self.price(value, nesting))
        work = [weight]
        shown = [shows]
        for sub_work, sub_shown in in_place:
            _add(work, sub_work)
            _add(shown, sub_shown)
        # One level down: a member meets the largest properties entry and every
        # additionalProperties/propertyNames; an item likewise. An instance
        # node is an object or an array, so the costlier side counts.
        member = _side(members, every_member)
        item = _side(positional, every_item)
        _add(work, _top([member[0], item[0]]), 1)
        _add(shown, _top([member[1], item[1]]), 1)
        if len(work) > MAX_DEPTH + 1:
            raise Unpriced(f"it reaches more than {MAX_DEPTH} levels into a value")
        if max(work) > FALLBACK_WORK or max(shown) > FALLBACK_WORK:
            raise Unpriced("one value node alone could cost more than the fallback checks")
        return work, shown

    def names(self, value: object, key: str) -> list[str]:
        if type(value) is not list or any(type(name) is not str for name in value):
            raise Unpriced(f"{key!r} is not an array of strings")
        return value

    def entries(self, entries: object, key: str) -> int:
        """The work of comparing a node with ``entries``: each value, and its long strings."""
        if key == "enum" and type(entries) is not list:
            raise Unpriced("'enum' is not an array")
        work = 0
        stack = list(entries)  # type: ignore[call-overload]
        while stack:
            item = stack.pop()
            self.values += 1
            if self.values > MAX_ENUM_VALUES:
                raise Unpriced(
                    f"its enum and const entries hold more than {MAX_ENUM_VALUES} values"
                )
            work += 1
            kind = type(item)
            if kind is str:
                work += len(item) // CHARS_PER_NODE
            elif kind is list:
                stack.extend(item)
            elif kind is dict:
                work += sum(map(len, item)) // CHARS_PER_NODE
                stack.extend(item.values())
        return work

    def target(self, ref: object) -> object:
        match = _REF.fullmatch(ref) if type(ref) is str else None
        if match is None:
            raise Unpriced("a $ref is not '#/$defs/NAME' or '#/definitions/NAME'")
        defs = self.root.get(match[1]) if type(self.root) is dict else None
        if type(defs) is not dict or match[2] not in defs:
            raise Unpriced("a $ref names no entry of the root's $defs or definitions")
        return defs[match[2]]
