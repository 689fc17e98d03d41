"""A closed schema's checker written out for its properties, one test per property.

The general closed checker (``_fast.closed_checker``) looks every key up and
branches on every value's type: about 40 ns a key and 50 ns a value in
CPython, more than the engine's whole check of a small schema. This module
writes, once per compiled schema, a function with one straight test per
declared property, each for the property's expected type only: an exact
``int`` within 64 bits for an integer, an exact ``str`` within the property's
longest string and without a lone surrogate for a string, ``True``/``False``
for a boolean, an exact ``list`` within ``maxItems`` of such items for an
array. Anything else (a key that is not an exact ``str``, an undeclared or
missing key, a value of another type) is handed to the general closed checker,
which decides as it always did; so the written checker answers ``True`` only
where the general one would, and never runs more of the engine than it would.

The function's text holds no value from the schema: it is made from fixed
pieces chosen by each property's kind and numbered by position; the names, the
string bounds and ``maxItems`` are handed to it as arguments when it is made.
Its keys are checked to be exact ``str`` before any is looked up, so no key's
own code runs (a ``str`` subclass's ``__eq__`` or ``__hash__``): one by one,
or all at once for a dict whose table holds exact ``str`` keys only (see
:data:`STR_TABLES`).
"""

from __future__ import annotations

import functools
import sys
from typing import TYPE_CHECKING, Any

from ._instance import lone_surrogate
from ._screen import MAX_INTEGER, MIN_INTEGER

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ._decided import Decided
    from ._fast import Counted

__all__ = [
    "MAX_WRITTEN",
    "MEMO_CHARS",
    "MEMO_STRINGS",
    "STR_TABLES",
    "deciding_checker",
    "kind_of",
    "kinds_of",
    "unrolled_checker",
]

# The most properties a written checker covers: its text grows with them, and
# past a few dozen the general checker's loop costs about the same per key.
MAX_WRITTEN = 32


def _str_tables(most: int = 200) -> frozenset[int]:
    """``dict.__sizeof__`` of each table that holds exact ``str`` keys only (see STR_TABLES).

    Two dicts grow side by side from 1 to ``most`` keys (tables of 8 to 512
    slots; a checker covers 32 names at most), one with exact ``str`` keys
    only, one with an ``int`` key besides:
    every size of the first, if at every step the second is larger and no size
    is ever both, and the largest table of the second outgrows every size of
    the first. Anything else (another interpreter, another layout): none.
    """
    if sys.implementation.name != "cpython":  # pragma: no cover - CPython is what CI runs
        return frozenset()
    strs: dict[object, int] = {}
    mixed: dict[object, int] = {0: 0}
    sizes: set[int] = set()
    others: set[int] = set()
    for number in range(1, most + 1):
        strs[str(number)] = number
        mixed[str(number)] = number
        size, other = strs.__sizeof__(), mixed.__sizeof__()
        if other <= size:  # pragma: no cover - not CPython's layout
            return frozenset()
        sizes.add(size)
        others.add(other)
    if sizes & others or max(others) <= max(sizes):  # pragma: no cover - not CPython's layout
        return frozenset()
    return frozenset(sizes)


STR_TABLES = _str_tables()
"""The sizes (``dict.__sizeof__``) of a dict's table when every key in it is an exact ``str``.

CPython keeps a dict whose keys are all exact ``str`` in a table of its own
kind (16-byte entries, searched by comparing strings alone, never calling a
key's ``__eq__``) and moves it to the general kind (24-byte entries) as soon as
any other key goes in, for good; ``__sizeof__`` counts the table, so its size
tells the kinds apart. A dict of ``len(d)`` declared names whose size is here
holds exact ``str`` keys only: its lookups run no key's code, and every name
found means the keys are exactly the declared names, without a look at each
key. Measured at import on dicts of both kinds; empty if the kinds ever share
a size (another interpreter or layout), and then every key is looked at.
"""


def kind_of(schema: Any) -> str:
    """The one type a property's valid values have (``"any"`` when not a single type).

    ``"int"``, ``"str"``, ``"bool"``, ``"null"``, or ``"any"`` (any plain
    scalar: the general checker's tests). An ``enum`` or ``const`` of strings
    only is ``"str"``.
    """
    if type(schema) is not dict:
        return "any"
    kind = schema.get("type")
    found = {"integer": "int", "string": "str", "boolean": "bool", "null": "null"}.get(
        kind if type(kind) is str else "", "any"
    )
    if found == "any" and "type" not in schema:
        values = schema.get("enum") if "enum" in schema else [schema.get("const")]
        if type(values) is list and values and all(type(value) is str for value in values):
            found = "str"
    return found


# Each kind's test of the value ``x`` (at an indent of {i}), with ``c`` the
# name of its longest string. A test that fails hands the call to the general
# checker.
_TESTS: dict[str, str] = {
    "int": "{i}if type(x) is not int or not lo <= x <= hi:\n{i}    return general(d)\n",
    "str": (
        "{i}if type(x) is not str or len(x) > {c} or not x.isascii() and lone(x):\n"
        "{i}    return general(d)\n"
    ),
    "bool": "{i}if x is not True and x is not False:\n{i}    return general(d)\n",
    "null": "{i}if x is not None:\n{i}    return general(d)\n",
    "any": (
        "{i}t = type(x)\n"
        "{i}if t is int:\n"
        "{i}    if not lo <= x <= hi:\n"
        "{i}        return general(d)\n"
        "{i}elif t is str:\n"
        "{i}    if len(x) > {c} or not x.isascii() and lone(x):\n"
        "{i}        return general(d)\n"
        "{i}elif t is not bool and x is not None and (t is not float or x - x):\n"
        "{i}    return general(d)\n"
    ),
}
# A string's characters, when the checker counts them (an "any" value may be no string).
_COUNT = {
    "str": "{i}chars += len(x)\n",
    "any": "{i}if t is str:\n{i}    chars += len(x)\n",
}


def kinds_of(schema: dict[str, Any], caps: Mapping[str, int]) -> dict[str, tuple[str, bool, str]]:
    """(kind, required, item kind) of each property of a closed schema (see ``_closed``).

    An array property (-1 in ``caps``) has kind ``"array"``, its items' kind the item kind.
    """
    required = schema.get("required")
    names = (
        frozenset(required)
        if type(required) is list and all(type(name) is str for name in required)
        else frozenset()
    )
    kinds: dict[str, tuple[str, bool, str]] = {}
    for name, sub in schema["properties"].items():
        if caps[name] == -1:
            kinds[name] = ("array", name in names, kind_of(sub.get("items")))
        else:
            kinds[name] = (kind_of(sub), name in names, "")
    return kinds


def _test(kind: str, cap: str, indent: str, counting: bool) -> str:
    text = _TESTS[kind].format(i=indent, c=cap)
    if counting and kind in _COUNT:
        text += _COUNT[kind].format(i=indent)
    return text


def _member(lines: list[str], index: int, *, required: bool) -> str:
    """Append the lines that take member ``index`` into ``x``; the indentation of its tests.

    An optional member is tested only when present, and counted in ``found``.
    """
    indent = " " * 12
    if not required:
        lines.append(f"{indent}if n{index} in d:")
        indent += "    "
        lines.append(f"{indent}found += 1")
    lines.append(f"{indent}x = d[n{index}]")
    return indent


def _epilogue(*, empty: bool, optional: bool, counting: bool) -> list[str]:
    """The lines after the members' tests, the same in both kinds."""
    lines = ["            pass"] if empty else []
    lines += ["        except KeyError:", "            return general(d)"]
    if optional:
        # Every key is a declared name only if as many were found as there are keys
        # (with every property required, len(d) <= size says it already).
        lines += ["        if found != len(d):", "            return general(d)"]
    if counting:
        lines += ["        if chars > limit:", "            return general(d)"]
    return lines


def _body(
    shape: tuple[tuple[str, bool, str], ...],
    members: Callable[..., list[str]],
    *,
    counting: bool,
    done: list[str],
) -> list[str]:
    """A written checker's body: its two ways of testing the members, each ending in ``done``.

    First a dict with as many keys as declared names, in a table of exact
    ``str`` keys (see :data:`STR_TABLES`): no key is looked at, and each member
    is looked up as a required one (every lookup finding its name proves the
    keys are exactly the declared names, so no presence is tested and no found
    name counted). Then any other dict: within ``size`` members, each key seen
    to be an exact ``str`` before any is looked up, with the presence tests and
    the count of found names (optional members). Anything else goes to the
    general checker. ``members`` writes the members' lines (see ``_members``);
    ``done`` (at the body's indent) follows a call whose members all passed.
    """
    optional = not all(required for _kind, required, _items in shape)
    lines = [
        "        if type(d) is not dict:",
        "            return general(d)",
        "        if len(d) == size and sizeof(d) in tables:",
    ]
    if counting:
        lines.append("            chars = 0")
    lines.append("            try:")
    lines += [f"    {line}" for line in members(shape, everyone=True, counting=counting)]
    if not shape:
        lines.append("                pass")
    lines += ["            except KeyError:", "                return general(d)"]
    if counting:
        lines += ["            if chars > limit:", "                return general(d)"]
    lines += [f"    {line}" for line in done]
    lines += [
        "        if len(d) > size:",
        "            return general(d)",
        "        for k in d:",
        "            if type(k) is not str:",
        "                return general(d)",
    ]
    if optional:
        lines.append("        found = required")
    if counting:
        lines.append("        chars = 0")
    lines.append("        try:")
    lines += members(shape, everyone=False, counting=counting)
    lines += _epilogue(empty=not shape, optional=optional, counting=counting)
    return lines + done


def _made(lines: list[str], filename: str) -> Callable[..., Any]:
    """The ``make`` function the text ``lines`` defines (their values come in as its arguments)."""
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(lines) + "\n", filename, "exec"), namespace)
    factory: Callable[..., Any] = namespace["make"]
    return factory


@functools.lru_cache(maxsize=128)
def _factory(shape: tuple[tuple[str, bool, str], ...], counting: bool) -> Callable[..., Any]:
    """The function that makes a checker of ``shape``: (kind, required, item kind) per property.

    Only kinds, flags and positions shape the text; every value comes in as an
    argument of the returned factory (the builtins too, read as closure
    variables, a little cheaper than globals). The members are tested two ways
    (see ``_body``); the engine runs after either, outside the ``try`` (a
    ``KeyError`` it raised is its own).
    """
    count = len(shape)
    lines = [
        "def make(valid, general, uses, lo, hi, lone, limit, size, required, tables, sizeof, "
        "type, len, dict, str, int, float, list, KeyError, "
        + "".join(f"n{index}, c{index}, m{index}, " for index in range(count))
        + "):",
        "    def check(d):",
        *_body(
            shape,
            _tested,
            counting=counting,
            done=[
                "        uses.hits += 1",
                "        if valid(d):",
                "            return True",
                "        uses.refused = d",
                "        return False",
            ],
        ),
        "    return check",
    ]
    return _made(lines, "<prism closed checker>")


def _tested(
    shape: tuple[tuple[str, bool, str], ...], *, everyone: bool, counting: bool
) -> list[str]:
    """The closed checker's lines that take and test each member (see ``_members``)."""
    lines: list[str] = []
    for index, (kind, required, items) in enumerate(shape):
        indent = _member(lines, index, required=required or everyone)
        if kind == "array":
            lines += [
                f"{indent}if type(x) is not list or len(x) > m{index}:",
                f"{indent}    return general(d)",
                f"{indent}for x in x:",
            ]
            lines += _test(items, f"c{index}", indent + "    ", counting).rstrip("\n").split("\n")
        else:
            lines += _test(kind, f"c{index}", indent, counting).rstrip("\n").split("\n")
    return lines


def unrolled_checker(
    valid: Callable[[Any], bool],
    general: Callable[[object], bool | None],
    kinds: Mapping[str, tuple[str, bool, str]],
    caps: Mapping[str, int],
    arrays: Mapping[str, tuple[int, int]],
    uses: Counted,
    *,
    most_chars: int | None = None,
) -> Callable[[object], bool | None]:
    """A checker written for one closed schema; ``general`` decides whatever it does not.

    ``kinds`` maps each declared property to (kind, required, item kind) (see
    :func:`kind_of`; kind ``"array"`` for an array property, whose items have
    the item kind); ``caps`` and ``arrays`` are ``_closed.closed_bounds``'s.
    ``general`` is the general closed checker over the same schema, counting
    its own calls on ``uses``: the written checker counts one only for a call
    it decides itself.
    """
    shape = tuple(kinds[name] for name in kinds)
    factory = _factory(shape, most_chars is not None)
    arguments: list[object] = []
    for name in kinds:
        if kinds[name][0] == "array":
            most, longest = arrays[name]
        else:
            most, longest = 0, caps[name]
        arguments += [_interned(name), longest, most]
    required = sum(1 for kind in shape if kind[1])
    check: Callable[[object], bool | None] = factory(
        valid,
        general,
        uses,
        MIN_INTEGER,
        MAX_INTEGER,
        lone_surrogate,
        most_chars or 0,
        len(shape),
        required,
        STR_TABLES,
        dict.__sizeof__,
        type,
        len,
        dict,
        str,
        int,
        float,
        list,
        KeyError,
        *arguments,
    )
    return check


# Each decided test of the value ``x`` (see ``_decided``), with ``p`` and ``q``
# the names of its two bounds: a value it does not find valid goes to the
# general checker (and the engine), which decides it as before.
_DECIDED: dict[str, str] = {
    "int": "{i}if type(x) is not int or not {p} <= x <= {q}:\n{i}    return general(d)\n",
    "str": (
        "{i}if type(x) is not str or not {p} <= len(x) <= {q} or not x.isascii() and lone(x):\n"
        "{i}    return general(d)\n"
    ),
    # The same without a least length (one comparison fewer).
    "str0": (
        "{i}if type(x) is not str or len(x) > {q} or not x.isascii() and lone(x):\n"
        "{i}    return general(d)\n"
    ),
    "enum": "{i}if type(x) is not str or x not in {p}:\n{i}    return general(d)\n",
    "match": (
        "{i}if (\n"
        "{i}    type(x) is not str\n"
        "{i}    or not {p} <= len(x) <= {q}\n"
        "{i}    or not x.isascii() and lone(x)\n"
        "{i}    or x not in {m} and not {f}(x)\n"
        "{i}):\n"
        "{i}    return general(d)\n"
    ),
    "bool": "{i}if x is not True and x is not False:\n{i}    return general(d)\n",
    "null": "{i}if x is not None:\n{i}    return general(d)\n",
}
_DECIDED_COUNT = frozenset({"str", "str0", "enum", "match"})


def _decided_test(
    kind: str, p: str, q: str, indent: str, counting: bool, f: str = "", m: str = ""
) -> list[str]:
    text = _DECIDED[kind].format(i=indent, p=p, q=q, f=f, m=m)
    if counting and kind in _DECIDED_COUNT:
        text += f"{indent}chars += len(x)\n"
    return text.rstrip("\n").split("\n")


_HIT = "        hits += 1"


@functools.lru_cache(maxsize=128)
def _decider(shape: tuple[tuple[str, bool, str], ...], counting: bool) -> Callable[..., Any]:
    """The function that makes a deciding checker of ``shape``: (kind, required, item kind).

    As ``_factory``, only kinds, flags and positions shape the text; names and
    bounds come in as arguments, and the members are tested two ways (see
    ``_body``). A call every test passes is valid: it is answered ``True``
    without the engine.
    """
    count = len(shape)
    lines = [
        "def make(general, lone, limit, size, required, tables, sizeof, type, len, dict, str, "
        "int, list, KeyError, "
        + "".join(f"n{index}, p{index}, q{index}, f{index}, m{index}, " for index in range(count))
        + "):",
        "    hits = 0",
        "    def check(d):",
        "        nonlocal hits",
        # The count lives in the closure: an attribute of the cache entry costs
        # about a tenth of a small call more.
        *_body(shape, _members, counting=counting, done=[_HIT, "        return True"]),
        "    def count():",
        "        return hits",
        "    return check, count",
    ]
    return _made(lines, "<prism deciding checker>")


def _members(
    shape: tuple[tuple[str, bool, str], ...], *, everyone: bool, counting: bool
) -> list[str]:
    """The lines that take and test each member of ``shape`` (inside the ``try:``).

    ``everyone``: every member is taken as required (the caller knows all are there).
    """
    lines: list[str] = []
    for index, (kind, required, items) in enumerate(shape):
        indent = _member(lines, index, required=required or everyone)
        if kind == "array":
            lines += [
                f"{indent}if type(x) is not list or not f{index} <= len(x) <= m{index}:",
                f"{indent}    return general(d)",
                f"{indent}for x in x:",
            ]
            lines += _decided_test(items, f"p{index}", f"q{index}", indent + "    ", counting)
        else:
            lines += _decided_test(
                kind, f"p{index}", f"q{index}", indent, counting, f"f{index}", f"m{index}"
            )
    return lines


def deciding_checker(
    general: Callable[[object], bool | None],
    decided: Mapping[str, tuple[bool, Decided]],
    *,
    most_chars: int | None = None,
) -> tuple[Callable[[object], bool | None], Callable[[], int]]:
    """A checker that answers ``True`` itself for a call its tests find valid, and its count.

    ``decided`` maps each declared property to (required, test) (see
    ``_decided.decided_kinds``); ``general`` (the general closed checker, with
    the engine behind it) decides every call a test does not pass. The second
    function returns how many calls the checker decided itself.
    """
    shape: list[tuple[str, bool, str]] = []
    arguments: list[object] = []
    for declared, (required, (kind, first, second)) in decided.items():
        name = _interned(declared)
        if kind == "array":
            fewest, most = first
            item: Decided = second
            shape.append(("array", required, _least(item)))
            arguments += [name, item[1], item[2], fewest, most]
        elif kind == "match":
            shape.append((kind, required, ""))
            memo: set[str] = set()
            arguments += [name, first[0], first[1], _remembered(second, memo), memo]
        else:
            shape.append((_least((kind, first, second)), required, ""))
            arguments += [name, first, second, 0, 0]
    factory = _decider(tuple(shape), most_chars is not None)
    made: tuple[Callable[[object], bool | None], Callable[[], int]] = factory(
        general,
        lone_surrogate,
        most_chars or 0,
        len(shape),
        sum(1 for kind in shape if kind[1]),
        STR_TABLES,
        dict.__sizeof__,
        type,
        len,
        dict,
        str,
        int,
        list,
        KeyError,
        *arguments,
    )
    return made


def _interned(name: object) -> object:
    """``name``, interned if it is an exact ``str``.

    A key written as a literal is then the very same object: a lookup finds it
    at its first comparison.
    """
    return sys.intern(name) if type(name) is str else name


def _least(test: Decided) -> str:
    """The kind whose text tests ``test``: ``"str0"`` for a string without a least length."""
    if test[0] == "str" and test[1] == 0:
        return "str0"
    return test[0]


# A pattern's verdicts kept per property: the strings the engine found matching,
# at most MEMO_STRINGS of at most MEMO_CHARS code points each (a few kB at most).
MEMO_STRINGS = 32
MEMO_CHARS = 64


def _remembered(matches: Callable[[str], bool], memo: set[str]) -> Callable[[str], bool]:
    """``matches``, keeping in ``memo`` the short strings it matched (asked first by the checker).

    The engine's verdict on an exact ``str`` depends on that string alone, so a
    string it matched once is matched again; a string it did not match is never
    kept, and asks the engine each time. Once ``memo`` is full it stays as it is.
    """

    def remembered(text: str) -> bool:
        if not matches(text):
            return False
        if len(text) <= MEMO_CHARS and len(memo) < MEMO_STRINGS:
            memo.add(text)
        return True

    return remembered
