"""Bounding an instance (the model's arguments) before any schema code runs on it."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ._screen import POLLUTION_KEYS

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._limits import SchemaLimits

__all__ = [
    "TOTAL_STRING_FACTOR",
    "InstanceProblem",
    "check_instance",
    "first_problem",
    "instance_cost",
    "instance_size",
    "path_text",
]

# The total characters of every string in an instance may be this many times
# max_string_length; it only matters for Python callers that share one large
# string many times (parsed JSON cannot).
TOTAL_STRING_FACTOR = 8

InstanceProblem = tuple[str, str]
"""(path, message) of the first limit an instance breaks."""


def path_text(parts: Sequence[str | int]) -> str:
    """``data.a[0].b`` for the parts ``("a", 0, "b")``, clipped to 200 characters."""
    text = "data" + "".join([f"[{p}]" if type(p) is int else f".{p}" for p in parts])
    return text if len(text) <= 200 else text[:197] + "..."


def check_instance(value: object, limits: SchemaLimits) -> InstanceProblem | None:
    """The first way ``value`` breaks the instance limits, or ``None``.

    Checks nesting depth, total object members, total array items, string
    length (keys too), pollution keys, JSON types and finite numbers. Iterative,
    so no instance can exhaust the stack; every container is counted, so shared
    sub-objects cannot multiply the work.
    """
    if _within_limits(value, limits):
        return None
    return first_problem(value, limits)


def instance_size(value: object, limits: SchemaLimits) -> tuple[int, int] | None:
    """(values, characters in strings and keys) of ``value``, or ``None`` past a limit.

    The same walk as :func:`check_instance`'s fast path; the totals let the
    caller skip the per-depth cost walk when even the worst depth cannot
    exceed a budget. For ``None``, :func:`first_problem` says what is wrong.
    """
    counts = _within_limits(value, limits, measure=True)
    return counts if type(counts) is tuple else None


def _within_limits(
    value: object, limits: SchemaLimits, *, measure: bool = False
) -> bool | tuple[int, int]:
    """The hot path: the same rules as :func:`first_problem`, without building paths.

    Walks level by level, so no per-node tuple is allocated.
    """
    max_depth = limits.max_instance_depth
    max_string = limits.max_string_length
    members_left = limits.max_instance_properties
    items_left = limits.max_array_length
    chars_left = max_string * TOTAL_STRING_FACTOR
    pollution = POLLUTION_KEYS
    level: list[object] = [value]
    key_chars = 0
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
                if members_left < 0 or not pollution.isdisjoint(node):  # type: ignore[arg-type]
                    return False
                for key, item in node.items():  # type: ignore[attr-defined]
                    if type(key) is not str or len(key) > max_string:
                        return False
                    key_chars += len(key)
                    t = type(item)
                    if t is str:
                        if len(item) > max_string:
                            return False
                        chars_left -= len(item)
                    elif t is int or t is bool or item is None:
                        continue
                    elif t is dict or t is list:
                        below.append(item)
                    elif t is float:
                        if item - item:  # nan or +-inf: x - x is nan, which is truthy
                            return False
                    else:
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
                        if len(item) > max_string:
                            return False
                        chars_left -= len(item)
                    elif t is int or t is bool or item is None:
                        continue
                    elif t is dict or t is list:
                        below.append(item)
                    elif t is float:
                        if item - item:
                            return False
                    else:
                        return False
            elif kind is str:
                if len(node) > max_string:  # type: ignore[arg-type]
                    return False
                chars_left -= len(node)  # type: ignore[arg-type]
            elif kind is float:
                if node - node:  # type: ignore[operator]
                    return False
            elif kind is not int and kind is not bool and node is not None:
                return False
        level = below
    if chars_left < 0:
        return False
    if not measure:
        return True
    nodes = 1 + limits.max_instance_properties - members_left + limits.max_array_length - items_left
    return nodes, max_string * TOTAL_STRING_FACTOR - chars_left + key_chars


def first_problem(value: object, limits: SchemaLimits) -> InstanceProblem:
    """The slow path, for a value the fast walk refused: the first problem and its path."""
    max_depth = limits.max_instance_depth
    max_string = limits.max_string_length
    members_left = limits.max_instance_properties
    items_left = limits.max_array_length
    chars_left = max_string * TOTAL_STRING_FACTOR
    stack: list[tuple[object, int, tuple[str | int, ...]]] = [(value, 1, ())]
    pop = stack.pop
    push = stack.append
    while stack:
        node, depth, path = pop()
        kind = type(node)
        if kind is dict:
            if depth > max_depth:
                return path_text(path), f"nests deeper than max_instance_depth={max_depth}"
            members_left -= len(node)  # type: ignore[arg-type]
            if members_left < 0:
                return path_text(path), (
                    "has more object members than "
                    f"max_instance_properties={limits.max_instance_properties}"
                )
            if not POLLUTION_KEYS.isdisjoint(node):  # type: ignore[arg-type]
                bad = sorted(POLLUTION_KEYS.intersection(node))  # type: ignore[arg-type]
                return path_text(path), f"has the forbidden key {bad[0]!r}"
            for key, item in node.items():  # type: ignore[attr-defined]
                if type(key) is not str:
                    return path_text(path), f"has a non-string key {key!r}"[:200]
                if len(key) > max_string:
                    return path_text(path), f"has a key longer than max_string_length={max_string}"
                t = type(item)
                if t is str:
                    chars_left -= len(item)
                    if len(item) > max_string or chars_left < 0:
                        return path_text((*path, key)), (
                            f"is longer than max_string_length={max_string}"
                        )
                elif t is dict or t is list:
                    push((item, depth + 1, (*path, key)))
                elif t is float:
                    if not math.isfinite(item):
                        return path_text((*path, key)), "is not a finite number"
                elif t is not int and t is not bool and item is not None:
                    return path_text((*path, key)), f"is a {t.__name__}, not a JSON value"
        elif kind is list:
            if depth > max_depth:
                return path_text(path), f"nests deeper than max_instance_depth={max_depth}"
            items_left -= len(node)  # type: ignore[arg-type]
            if items_left < 0:
                return path_text(path), (
                    f"has more array items than max_array_length={limits.max_array_length}"
                )
            for index, item in enumerate(node):  # type: ignore[arg-type]
                t = type(item)
                if t is str:
                    chars_left -= len(item)
                    if len(item) > max_string or chars_left < 0:
                        return path_text((*path, index)), (
                            f"is longer than max_string_length={max_string}"
                        )
                elif t is dict or t is list:
                    push((item, depth + 1, (*path, index)))
                elif t is float:
                    if not math.isfinite(item):
                        return path_text((*path, index)), "is not a finite number"
                elif t is not int and t is not bool and item is not None:
                    return path_text((*path, index)), f"is a {t.__name__}, not a JSON value"
        elif kind is str:
            if len(node) > max_string:  # type: ignore[arg-type]
                return path_text(path), f"is longer than max_string_length={max_string}"
        elif kind is float:
            if not math.isfinite(node):  # type: ignore[arg-type]
                return path_text(path), "is not a finite number"
        elif kind is not int and kind is not bool and node is not None:
            return path_text(path), f"is a {kind.__name__}, not a JSON value"
    return "data", "breaks an instance limit"  # pragma: no cover - the walks agree


def instance_cost(value: object, work: tuple[int, ...], regex: tuple[int, ...]) -> tuple[int, int]:
    """The work and regex work bounds of validating ``value`` (already within the limits).

    ``work[k]`` / ``regex[k]`` are the schema's per-node and per-character costs
    at depth ``k`` (see ``_graph``). A value at depth ``k`` counts once in the
    work; each string at depth ``k``, and each key of a member at depth ``k``,
    counts its length times ``regex[k]``. Depths past the vectors cost nothing
    (no sub-schema reaches them).
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
        below: list[object] = []
        chars = key_chars
        key_chars = 0
        for node in level:
            kind = type(node)
            if kind is str:
                chars += len(node)  # type: ignore[arg-type]
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
