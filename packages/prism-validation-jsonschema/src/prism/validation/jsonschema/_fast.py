"""The hot path's check: the instance limits in one pass made for one compiled schema.

A checker is built once per compiled schema, with everything it needs bound as
closure variables (attribute and global lookups cost about as much as the
engine's whole check of a small schema). It answers ``True`` (within the limits
and valid), ``False`` (within the limits and refused by the engine: the caller
asks the engine why) or ``None`` (not decided here: the full path bounds the
value, says where it breaks a limit, and runs the engine). Every value reaches
the engine only after the checker saw each of its members within the limits,
so it never decides anything the full path would decide otherwise:

* a closed schema (see ``_closed``), or one closed but for
  ``additionalProperties``: every key a declared name (an exact ``str``, then
  looked up), every member a plain scalar within the limits (each string
  within its property's longest) or an array of them no longer than its
  property's ``maxItems``; an undeclared key, a longer array, a nested
  object, a subclass or any other type goes to the full path (which cuts an
  over-long array before the engine reads it);
* any other schema, for an object of scalars and arrays of scalars: the same
  rules as the instance walk (string keys within ``max_string_length``, no
  pollution key, no lone surrogate, integers within 64 bits, finite floats,
  the total characters, ``max_instance_properties``, ``max_array_length``),
  and, when the schema has per-call budgets, its nodes and characters times the
  schema's costliest depth within them. Anything nested deeper goes to the
  full path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ._instance import TOTAL_STRING_FACTOR, lone_surrogate
from ._screen import POLLUTION_KEYS, SAFE_INTEGER, integer_too_long

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ._limits import SchemaLimits

__all__ = ["Counted", "Nowhere", "closed_checker", "flat_checker"]


# A bound of one internal digit of CPython's ints (30 bits): comparing two such
# ints takes the interpreter's specialised comparison.
_SMALL = 2**30 - 1


class Counted(Protocol):
    """Where a checker counts its calls (a cache entry's ``hits``), and notes a refusal.

    ``refused`` is the last value the checker saw within the limits and the
    engine refused: the caller that asks ``validate`` why next need not check
    that very value again.
    """

    hits: int
    refused: object


class Nowhere:
    """The counter of a checker whose calls are counted by its caller."""

    __slots__ = ("hits", "refused")

    def __init__(self) -> None:
        self.hits: int = 0
        self.refused: object = None


def _array_chars(items: list[Any], max_string: int) -> int:
    """The characters in ``items`` if each is a plain scalar within the limits, else -1."""
    low = -SAFE_INTEGER
    high = SAFE_INTEGER
    chars = 0
    for part in items:
        k = type(part)
        if k is str:
            if (n := len(part)) > max_string or (not part.isascii() and lone_surrogate(part)):
                return -1
            chars += n
        elif k is int:
            if not low < part < high and integer_too_long(part):
                return -1
        elif k is not bool and part is not None and (k is not float or part - part):
            return -1
    return chars


def closed_checker(
    valid: Callable[[Any], bool],
    caps: Mapping[str, int],
    arrays: Mapping[str, tuple[int, int]],
    counter: Counted | None = None,
    *,
    most_chars: int | None = None,
) -> Callable[[object], bool | None]:
    """The checker of a closed schema (see ``_closed.closed_bounds`` for ``caps`` and ``arrays``).

    ``caps`` maps each declared property to its longest string (at most
    ``max_string_length``; -1 for an array property), ``arrays`` each array
    property to its ``maxItems`` and its items' longest string. Only an object
    whose every key is a declared name is decided here: each key is checked to
    be an exact ``str``, then looked up in ``caps`` (a lookup that runs no code
    of the key's, and costs the same for a key of any length: a key in a dict
    has its hash already). Each value must be a plain scalar within the limits
    and within its property's longest string, or an array of them within its
    property's ``maxItems``; so an accepted call holds no more characters than
    the schema's bounds, which are within the limits. Anything else goes to
    the full path, whose walk bounds it (a schema closed but for
    ``additionalProperties`` accepts anything under an undeclared key).
    ``most_chars`` is the most characters the strings of one call may hold
    within the regex budget, when the schema's bounds do not fit it (``None``:
    they do); the checker then counts them, and a call past it goes to the full
    path, which measures its cost. Each call counts one on ``counter``'s ``hits``.
    """
    low = -SAFE_INTEGER
    high = SAFE_INTEGER
    # Compared with bounds of one internal digit, a small int takes the
    # interpreter's fast comparison; a larger one is compared again with the limits.
    small_low = -_SMALL
    small_high = _SMALL
    lone = lone_surrogate
    cap_of = caps.get
    array_of = arrays.get
    closed = len(caps)
    counting = most_chars is not None
    most = most_chars or 0
    uses: Counted = Nowhere() if counter is None else counter

    def check(value: Any) -> bool | None:
        uses.hits += 1
        if type(value) is not dict or len(value) > closed:
            return None
        chars = 0
        for key, item in value.items():
            if type(key) is not str or (cap := cap_of(key)) is None:
                return None
            t = type(item)
            if t is int:
                if not small_low < item < small_high and not low < item < high:
                    return None
            elif t is str:
                if len(item) > cap or (not item.isascii() and lone(item)):
                    return None
                if counting:
                    chars += len(item)
            elif t is list:
                shape = array_of(key)
                if shape is None or len(item) > shape[0]:
                    return None
                longest = shape[1]
                # Inlined (a call per array costs more than checking a few items).
                for part in item:
                    k = type(part)
                    if k is str:
                        if len(part) > longest or (not part.isascii() and lone(part)):
                            return None
                        if counting:
                            chars += len(part)
                    elif k is int:
                        if not small_low < part < small_high and not low < part < high:
                            return None
                    elif k is not bool and part is not None and (k is not float or part - part):
                        return None
            elif t is not bool and item is not None and (t is not float or item - item):
                return None
        if counting and chars > most:
            return None
        if valid(value):
            return True
        uses.refused = value
        return False

    return check


def flat_checker(
    valid: Callable[[Any], bool],
    limits: SchemaLimits,
    *,
    max_work: int = 0,
    max_regex: int = 0,
    counter: Counted | None = None,
) -> Callable[[object], bool | None]:
    """The checker of any other schema: objects two levels deep at most, with the budgets.

    ``max_work``/``max_regex`` are the schema's costliest per-node and
    per-character costs, when its calls must be checked against the budgets
    (0 when no instance within the limits can exceed them). Each call counts
    one on ``counter``'s ``hits``.
    """
    low = -SAFE_INTEGER
    high = SAFE_INTEGER
    lone = lone_surrogate
    too_long = integer_too_long
    array_chars = _array_chars
    clean = POLLUTION_KEYS.isdisjoint
    max_string = limits.max_string_length
    max_members = limits.max_instance_properties
    max_items = limits.max_array_length
    # An array member is one level down: past max_instance_depth if that is 1.
    deep = limits.max_instance_depth < 2
    max_chars = max_string * TOTAL_STRING_FACTOR
    work_budget = limits.max_validation_work
    regex_budget = limits.max_regex_work
    budgets = bool(max_work or max_regex)
    uses: Counted = Nowhere() if counter is None else counter

    def check(value: Any) -> bool | None:
        uses.hits += 1
        if type(value) is not dict or len(value) > max_members:
            return None
        chars = 0
        keys = 0
        items = 0
        for key, item in value.items():
            if type(key) is not str or len(key) > max_string or (not key.isascii() and lone(key)):
                return None
            if budgets:  # the keys' characters count only against the regex budget
                keys += len(key)
            t = type(item)
            if t is str:
                if (n := len(item)) > max_string or (not item.isascii() and lone(item)):
                    return None
                chars += n
            elif t is int:
                if not low < item < high and too_long(item):
                    return None
            elif t is list:
                items += len(item)
                if items > max_items or deep:
                    return None
                held = array_chars(item, max_string)
                if held < 0:
                    return None
                chars += held
            elif t is not bool and item is not None and (t is not float or item - item):
                return None
        if chars > max_chars or not clean(value):
            return None
        if budgets and (
            (1 + len(value) + items) * max_work > work_budget
            or (chars + keys) * max_regex > regex_budget
        ):
            return None
        if valid(value):
            return True
        uses.refused = value
        return False

    return check
