"""Bounding an instance (the model's arguments) before any schema code runs on it."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from prism.core.text import NAME_LIMIT, clip
from prism.core.text import has_lone_surrogate as lone_surrogate  # (one check, shared)

from ._screen import INTEGER_RANGE, POLLUTION_KEYS, SAFE_INTEGER, integer_too_long

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from ._limits import SchemaLimits

__all__ = [
    "SEVERE_NUMBER",
    "TOTAL_STRING_FACTOR",
    "InstanceProblem",
    "check_instance",
    "first_problem",
    "instance_cost",
    "instance_size",
    "lone_surrogate",
    "number_units",
    "path_text",
]

# The total characters of every string in an instance may be this many times
# max_string_length; it only matters for Python callers that share one large
# string many times (parsed JSON cannot).
TOTAL_STRING_FACTOR = 8

_SAFE_INTEGER = SAFE_INTEGER
_INT63 = 2**63
# The number units of a float that is not short, or an integer past 2**63
# (see ``number_units``), and the longest ``repr`` of a short float.
SEVERE_NUMBER = 12
SHORT_FLOAT = 11
_NEG_SAFE_INTEGER = -_SAFE_INTEGER

_SURROGATE_MESSAGE = (
    "contains a lone surrogate (U+D800 to U+DFFF), which is not valid Unicode "
    "and cannot be checked against the schema"
)

InstanceProblem = tuple[str, str]
"""(path, message) of the first limit an instance breaks."""


def _integer_problem(value: int) -> str | None:
    if not integer_too_long(value):
        return None
    return f"is an integer outside {INTEGER_RANGE}, which Prism validates; send it as a string"


def path_text(parts: Sequence[str | int]) -> str:
    """``data.a[0].b`` for the parts ``("a", 0, "b")``, clipped to 200 characters."""
    text = "data" + "".join([f"[{p}]" if type(p) is int else f".{p}" for p in parts])
    return clip(text, NAME_LIMIT)


def check_instance(value: object, limits: SchemaLimits) -> InstanceProblem | None:
    """The first way ``value`` breaks the instance limits, or ``None``.

    Checks nesting depth, total object members, total array items, string
    length (keys too), pollution keys, JSON types (exact ``dict``, ``list``,
    ``str``, ``int``, ``float``, ``bool``, ``None``; keys exact ``str``), finite
    numbers, integers within 64 bits (-2**63 to 2**64-1) and no lone
    surrogate in any string or key. Iterative,
    so no instance can exhaust the stack; every container is counted, so shared
    sub-objects cannot multiply the work.
    """
    if _within_limits(value, limits):
        return None
    return first_problem(value, limits)


def instance_size(value: object, limits: SchemaLimits) -> tuple[int, int, int] | None:
    """(values, characters in strings and keys, numbers) of ``value``, or ``None`` past a limit.

    The same walk as :func:`check_instance`'s fast path; the totals let the
    caller skip the per-depth cost walk when even the worst depth cannot
    exceed a budget. ``numbers`` counts the floats and the integers past 2**53
    (each at most ``SEVERE_NUMBER`` number units). For ``None``,
    :func:`first_problem` says what is wrong.
    """
    counts = _within_limits(value, limits, measure=True)
    return counts if type(counts) is tuple else None


def _within_limits(
    value: object, limits: SchemaLimits, *, measure: bool = False
) -> bool | tuple[int, int, int]:
    """The hot path: the same rules as :func:`first_problem`, without building paths.

    Walks level by level, so no per-node tuple is allocated. A key's type is
    checked before any lookup hashes it (a ``str`` subclass's ``__hash__`` or
    ``__eq__`` is code the caller did not mean to run).
    """
    max_depth = limits.max_instance_depth
    max_string = limits.max_string_length
    members_left = limits.max_instance_properties
    items_left = limits.max_array_length
    chars_left = max_string * TOTAL_STRING_FACTOR
    pollution = POLLUTION_KEYS
    low = _NEG_SAFE_INTEGER
    high = _SAFE_INTEGER
    lone = lone_surrogate
    level: list[object] = [value]
    key_chars = 0
    numbers = 0
    depth = 0
    while level:
        depth += 1
        below: list[object] = []
        for node in level:
            kind = type(node)
            if kind is dict:
                if depth > max_depth:
                    return False
                members_left -= len(node)  # type: ignore[arg-type]
                if members_left < 0:
                    return False
                for key, item in node.items():  # type: ignore[attr-defined]
                    if (
                        type(key) is not str
                        or len(key) > max_string
                        or (not key.isascii() and lone(key))
                    ):
                        return False
                    key_chars += len(key)
                    t = type(item)
                    if t is str:
                        if len(item) > max_string or (not item.isascii() and lone(item)):
                            return False
                        chars_left -= len(item)
                    elif t is int:
                        if not low < item < high:
                            if integer_too_long(item):
                                return False
                            numbers += 1
                    elif t is bool or item is None:
                        continue
                    elif t is dict or t is list:
                        below.append(item)
                    elif t is float:
                        if item - item:  # nan or +-inf: x - x is nan, which is truthy
                            return False
                        numbers += 1
                    else:
                        return False
                if not pollution.isdisjoint(node):  # type: ignore[arg-type]
                    return False
            elif kind is list:
                if depth > max_depth:
                    return False
                items_left -= len(node)  # type: ignore[arg-type]
                if items_left < 0:
                    return False
                for item in node:  # type: ignore[attr-defined]
                    t = type(item)
                    if t is str:
                        if len(item) > max_string or (not item.isascii() and lone(item)):
                            return False
                        chars_left -= len(item)
                    elif t is int:
                        if not low < item < high:
                            if integer_too_long(item):
                                return False
                            numbers += 1
                    elif t is bool or item is None:
                        continue
                    elif t is dict or t is list:
                        below.append(item)
                    elif t is float:
                        if item - item:
                            return False
                        numbers += 1
                    else:
                        return False
            elif kind is str:
                if len(node) > max_string or (not node.isascii() and lone(node)):  # type: ignore[attr-defined,arg-type]
                    return False
                chars_left -= len(node)  # type: ignore[arg-type]
            elif kind is int:
                if not low < node < high:  # type: ignore[operator]
                    if integer_too_long(node):  # type: ignore[arg-type]
                        return False
                    numbers += 1
            elif kind is float:
                if node - node:  # type: ignore[operator]
                    return False
                numbers += 1
            elif kind is not bool and node is not None:
                return False
        level = below
    if chars_left < 0:
        return False
    if not measure:
        return True
    nodes = 1 + limits.max_instance_properties - members_left + limits.max_array_length - items_left
    return nodes, max_string * TOTAL_STRING_FACTOR - chars_left + key_chars, numbers


def first_problem(value: object, limits: SchemaLimits) -> InstanceProblem:
    """The slow path, for a value the fast walk refused: the first problem and its path.

    Allocates nothing per member: each container met is a few ints in flat
    lists (where its path leads back to), and a path is spelled only for the
    problem found. A tuple per member kept tens of thousands of objects alive
    at once, which made the interpreter collect its whole heap (a 25,000-record
    result refused by an output schema held the event loop 120-160 ms, from a
    worker thread).
    """
    max_depth = limits.max_instance_depth
    max_string = limits.max_string_length
    members_left = limits.max_instance_properties
    items_left = limits.max_array_length
    chars_left = max_string * TOTAL_STRING_FACTOR
    # The containers still to look at, their depths and their places; a place
    # is where a container was met: its key and the place of its container.
    nodes: list[object] = [value]
    depths: list[int] = [1]
    places: list[int] = [0]
    keys: list[str | int] = [""]
    parents: list[int] = [-1]
    while nodes:
        node = nodes.pop()
        depth = depths.pop()
        place = places.pop()
        kind = type(node)
        if kind is dict:
            if depth > max_depth:
                return _path(keys, parents, place), (
                    f"nests deeper than max_instance_depth={max_depth}"
                )
            members_left -= len(node)  # type: ignore[arg-type]
            if members_left < 0:
                return _path(keys, parents, place), (
                    "has more object members than "
                    f"max_instance_properties={limits.max_instance_properties}"
                )
            for key in node:  # type: ignore[attr-defined]
                # Before any lookup: hashing a str subclass runs its own code.
                if type(key) is not str:
                    return _path(keys, parents, place), (
                        f"has a non-string key (of type {type(key).__name__})"
                    )
            if not POLLUTION_KEYS.isdisjoint(node):  # type: ignore[arg-type]
                bad = sorted(POLLUTION_KEYS.intersection(node))  # type: ignore[arg-type]
                return _path(keys, parents, place), f"has the forbidden key {bad[0]!r}"
            members: Iterable[tuple[str | int, object]] = node.items()  # type: ignore[attr-defined]
        elif kind is list:
            if depth > max_depth:
                return _path(keys, parents, place), (
                    f"nests deeper than max_instance_depth={max_depth}"
                )
            items_left -= len(node)  # type: ignore[arg-type]
            if items_left < 0:
                return _path(keys, parents, place), (
                    f"has more array items than max_array_length={limits.max_array_length}"
                )
            members = enumerate(node)  # type: ignore[arg-type]
        else:
            message = _scalar_problem(node, max_string)
            if message is not None:
                return _path(keys, parents, place), message
            continue
        for key, item in members:
            if kind is dict:
                if len(key) > max_string:  # type: ignore[arg-type]
                    return _path(keys, parents, place), (
                        f"has a key longer than max_string_length={max_string}"
                    )
                if not key.isascii() and lone_surrogate(key):  # type: ignore[union-attr,arg-type]
                    return _path(keys, parents, place), f"has a key that {_SURROGATE_MESSAGE}"
            t = type(item)
            if t is dict or t is list:
                nodes.append(item)
                depths.append(depth + 1)
                places.append(len(keys))
                keys.append(key)
                parents.append(place)
                continue
            message = _scalar_problem(item, max_string)
            if message is not None:
                return _path(keys, parents, place, key), message
            if t is str:
                chars_left -= len(item)  # type: ignore[arg-type]
                if chars_left < 0:
                    return _path(keys, parents, place, key), (
                        f"is longer than max_string_length={max_string}"
                    )
    return "data", "breaks an instance limit"  # pragma: no cover - the walks agree


def _path(keys: list[str | int], parents: list[int], place: int, *last: str | int) -> str:
    """The path of ``place`` (see :func:`first_problem`), then ``last``, as text."""
    parts = list(last)
    while place > 0:
        parts.append(keys[place])
        place = parents[place]
    parts.reverse()
    return path_text(parts)


def _scalar_problem(item: object, max_string: int) -> str | None:
    """What is wrong with one value that is not an object or an array."""
    t = type(item)
    if t is str:
        if len(item) > max_string:  # type: ignore[arg-type]
            return f"is longer than max_string_length={max_string}"
        if not item.isascii() and lone_surrogate(item):  # type: ignore[attr-defined,arg-type]
            return _SURROGATE_MESSAGE
        return None
    if t is float:
        if not math.isfinite(item):  # type: ignore[arg-type]
            return "is not a finite number"
        return None
    if t is int:
        return _integer_problem(item)  # type: ignore[arg-type]
    if t is not bool and item is not None:
        return f"is a {t.__name__}, not a JSON value"
    return None


def number_units(number: float) -> int:
    """The number units of an instance number (see ``_graph.SEVERE_NUMBER``).

    jsonschema-rs compares numbers exactly, through arbitrary-precision
    fractions read from their decimal text, unless both sides are integers below
    2**63: an integer below 2**63 adds nothing, a *short* float (``repr`` of at
    most ``SHORT_FLOAT`` characters without an exponent: ``0.25``, ``37.7749``)
    one unit, anything else (``0.30000000000000004``, ``1.2345678901234567e-19``
    cost 4 us a comparison, ``1e-300`` 14 us) or an integer past 2**63
    ``SEVERE_NUMBER`` units.
    """
    if type(number) is int:
        return 0 if number < _INT63 else SEVERE_NUMBER
    size = number if number >= 0 else -number
    # Python writes an exponent exactly outside 1e-4..1e16 (no repr needed there).
    if size and not 1e-4 <= size < 1e16:
        return SEVERE_NUMBER
    return 1 if len(repr(number)) <= SHORT_FLOAT else SEVERE_NUMBER


def instance_cost(
    value: object,
    work: tuple[int, ...],
    regex: tuple[int, ...],
    numbers: tuple[int, ...] = (),
) -> tuple[int, int]:
    """The work and regex work bounds of validating ``value`` (already within the limits).

    ``work[k]`` / ``regex[k]`` are the schema's per-node and per-character costs
    at depth ``k`` (see ``_graph``). A value at depth ``k`` counts once in the
    work, and a number there its ``number_units`` times ``numbers[k]`` more;
    each string at depth ``k``, and each key of a member at depth ``k``, counts
    its length times ``regex[k]``. Depths past the vectors cost nothing (no
    sub-schema reaches them).
    """
    total_work = 0
    total_regex = 0
    level: list[object] = [value]
    key_chars = 0
    depth = 0
    deepest = max(len(work), len(regex))
    while level and depth < deepest:
        w = work[depth] if depth < len(work) else 0
        r = regex[depth] if depth < len(regex) else 0
        n = numbers[depth] if depth < len(numbers) else 0
        below: list[object] = []
        chars = key_chars
        key_chars = 0
        for node in level:
            kind = type(node)
            if kind is str:
                chars += len(node)  # type: ignore[arg-type]
            elif kind is int:
                if n and node >= _INT63:  # type: ignore[operator]
                    total_work += n * SEVERE_NUMBER
            elif kind is float:
                if n:
                    size = node if node >= 0 else -node  # type: ignore[operator]
                    short = (not size or 1e-4 <= size < 1e16) and len(  # type: ignore[operator]
                        repr(node)
                    ) <= SHORT_FLOAT
                    total_work += n if short else n * SEVERE_NUMBER
            elif kind is dict:
                for key, item in node.items():  # type: ignore[attr-defined]
                    key_chars += len(key)
                    below.append(item)
            elif kind is list:
                below.extend(node)  # type: ignore[arg-type]
        total_work += w * len(level)
        total_regex += r * chars
        level = below
        depth += 1
    return total_work, total_regex
