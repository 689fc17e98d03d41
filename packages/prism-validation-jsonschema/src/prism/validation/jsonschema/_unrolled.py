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
pieces chosen by each property's kind and numbered by position, and each datum
(a name, a string bound, ``maxItems``...) is a placeholder number, which the
function's own copy of the compiled code holds as the datum itself (see
:class:`_Slots`: a constant costs a call nothing, where each closure variable
is copied into every call's frame). What it calls (the engine, the general
checker, ``len``...) are its globals, and no builtin besides. Its keys are
checked to be exact ``str`` before any is looked up, so no key's own code runs
(a ``str`` subclass's ``__eq__`` or ``__hash__``): one by one, or all at once
for a dict whose table holds exact ``str`` keys only (see :data:`STR_TABLES`).
"""

from __future__ import annotations

import builtins
import functools
import sys
from types import CellType, CodeType, FunctionType
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


# Each kind's test of the value ``x`` (at an indent of {i}), with ``c`` its
# longest string, ``lo`` and ``hi`` the 64-bit bounds, ``sl`` and ``sh`` those of
# one internal digit (each a placeholder, see _Slots). A test that fails hands
# the call to the general checker.
_TESTS: dict[str, str] = {
    "int": (
        "{i}if type(x) is not int or not {sl} <= x <= {sh} and not {lo} <= x <= {hi}:\n"
        "{i}    return general(d)\n"
    ),
    "str": (
        "{i}if type(x) is not str or len(x) > {c} or not x.isascii() and lone(x):\n"
        "{i}    return general(d)\n"
    ),
    "bool": "{i}if x is not True and x is not False:\n{i}    return general(d)\n",
    "null": "{i}if x is not None:\n{i}    return general(d)\n",
    "any": (
        "{i}t = type(x)\n"
        "{i}if t is int:\n"
        "{i}    if not {sl} <= x <= {sh} and not {lo} <= x <= {hi}:\n"
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


# The bounds of one internal digit of CPython's ints (30 bits): the interpreter
# compares two such ints faster (a value within them is compared with the
# schema's wider bounds only when it is not).
_SMALL = 2**30 - 1

# The first placeholder number: far from any constant the fixed pieces hold
# (0, True, False, None), and below 2**63.
_FIRST = 7_000_000_000_000_000_000


class _Slots:
    """The data a written checker's text refers to, each by a placeholder number.

    The text holds no value of the schema's, nor a name for one: each datum
    (a property's name, its bounds, an ``enum``'s strings, the call's size...)
    is written as a number of its own (see :func:`_template`), a constant of
    the compiled code, which each checker's copy of that code holds as the
    datum itself. A constant costs the function nothing when it is called,
    where each closure variable it reads is copied into every call's frame
    (about 1.5 ns apiece, 40 of them in an 8-property schema's checker).
    """

    __slots__ = ("numbers",)

    def __init__(self) -> None:
        self.numbers: dict[str, int] = {}

    def __call__(self, name: str) -> str:
        """The placeholder written for the datum called ``name``."""
        return str(self.numbers.setdefault(name, _FIRST + len(self.numbers)))


class _Template:
    """The compiled ``check`` of one shape, and the datum each of its placeholders stands for."""

    __slots__ = ("code", "names")

    def __init__(self, code: CodeType, names: tuple[str, ...]) -> None:
        self.code = code
        self.names = names


def _template(lines: list[str], filename: str, slots: _Slots) -> _Template:
    """The ``check`` that the text ``lines`` defines inside its ``make``, with its placeholders."""
    text = "\n".join(lines) + "\n"
    module = compile(text, filename, "exec")
    (make,) = (part for part in module.co_consts if type(part) is CodeType)
    (code,) = (part for part in make.co_consts if type(part) is CodeType)
    names = tuple(slots.numbers)
    # Each placeholder the text writes is a constant of the code, as it is.
    written = {number for number in slots.numbers.values() if str(number) in text}
    found = {part for part in code.co_consts if type(part) is int and part >= _FIRST}
    if found != written:  # pragma: no cover - a compiler that would fold them
        raise RuntimeError(f"{filename}: placeholders {sorted(found)} for {names}")
    return _Template(code, names)


# What every written checker calls or compares with, read as its globals.
_GLOBALS: dict[str, object] = {
    # (the real builtins: an extension called from a frame without them, the engine's
    # first call in the process made in a checker, took `list` for an unknown type
    # from then on, in every validator: "Unsupported type: 'list'")
    "__builtins__": builtins.__dict__,
    "type": type,
    "len": len,
    "sizeof": dict.__sizeof__,
    "lone": lone_surrogate,
    "dict": dict,
    "str": str,
    "int": int,
    "float": float,
    "bool": bool,
    "list": list,
    "KeyError": KeyError,
}


def _written(
    template: _Template,
    data: Mapping[str, object],
    functions: Mapping[str, object],
    closure: tuple[CellType, ...] | None = None,
) -> Callable[[object], bool | None]:
    """A checker of ``template``'s shape: its code holding ``data``, ``functions`` its globals.

    The copy of the code is the checker's own (so are the interpreter's caches
    in it), and so are its globals: the builtins it uses, ``functions`` and no
    others.
    """
    last = _FIRST + len(template.names)
    names = template.names
    code = template.code
    consts = tuple(
        data[names[part - _FIRST]] if type(part) is int and _FIRST <= part < last else part
        for part in code.co_consts
    )
    namespace = {**_GLOBALS, **functions}
    check: Callable[[object], bool | None] = FunctionType(
        code.replace(co_consts=consts), namespace, "check", None, closure
    )
    return check


def _test(kind: str, cap: str, indent: str, counting: bool, slots: _Slots) -> str:
    text = _TESTS[kind].format(
        i=indent, c=cap, lo=slots("lo"), hi=slots("hi"), sl=slots("sl"), sh=slots("sh")
    )
    if counting and kind in _COUNT:
        text += _COUNT[kind].format(i=indent)
    return text


def _member(lines: list[str], index: int, slots: _Slots, *, required: bool) -> str:
    """Append the lines that take member ``index`` into ``x``; the indentation of its tests.

    An optional member is tested only when present, and counted in ``found``.
    """
    indent = " " * 12
    name = slots(f"n{index}")
    if not required:
        lines.append(f"{indent}if {name} in d:")
        indent += "    "
        lines.append(f"{indent}found += 1")
    lines.append(f"{indent}x = d[{name}]")
    return indent


def _epilogue(slots: _Slots, *, empty: bool, optional: bool, counting: bool) -> list[str]:
    """The lines after the members' tests, the same in both kinds."""
    lines = ["            pass"] if empty else []
    lines += ["        except KeyError:", "            return general(d)"]
    if optional:
        # Every key is a declared name only if as many were found as there are keys
        # (with every property required, len(d) <= size says it already).
        lines += ["        if found != len(d):", "            return general(d)"]
    if counting:
        lines += [f"        if chars > {slots('limit')}:", "            return general(d)"]
    return lines


def _body(
    shape: tuple[tuple[str, bool, str], ...],
    members: Callable[..., list[str]],
    slots: _Slots,
    *,
    counted: tuple[bool, ...],
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
    ``counted``: whether each member's characters are counted (see :func:`_counted`).
    """
    counting = any(counted)
    optional = not all(required for _kind, required, _items in shape)
    size = slots("size")
    lines = [
        "        if type(d) is not dict:",
        "            return general(d)",
        f"        if len(d) == {size} and sizeof(d) in {slots('tables')}:",
    ]
    if counting:
        lines.append("            chars = 0")
    lines.append("            try:")
    lines += [f"    {line}" for line in members(shape, slots, everyone=True, counted=counted)]
    if not shape:
        lines.append("                pass")
    lines += ["            except KeyError:", "                return general(d)"]
    if counting:
        lines += [f"            if chars > {slots('limit')}:", "                return general(d)"]
    lines += [f"    {line}" for line in done]
    lines += [
        f"        if len(d) > {size}:",
        "            return general(d)",
        "        for k in d:",
        "            if type(k) is not str:",
        "                return general(d)",
    ]
    if optional:
        lines.append(f"        found = {slots('required')}")
    if counting:
        lines.append("        chars = 0")
    lines.append("        try:")
    lines += members(shape, slots, everyone=False, counted=counted)
    lines += _epilogue(slots, empty=not shape, optional=optional, counting=counting)
    return lines + done


@functools.lru_cache(maxsize=128)
def _factory(shape: tuple[tuple[str, bool, str], ...], counted: tuple[bool, ...]) -> _Template:
    """The checker of ``shape`` written out: (kind, required, item kind) per property.

    Only kinds, flags and positions shape the text; every datum is a
    placeholder (see :class:`_Slots`), and what it calls are globals:
    ``valid`` (the engine), ``general`` and ``uses`` (where it counts). The
    members are tested two ways (see ``_body``); the engine runs after either,
    outside the ``try`` (a ``KeyError`` it raised is its own).
    """
    slots = _Slots()
    lines = [
        "def make():",
        "    def check(d):",
        *_body(
            shape,
            _tested,
            slots,
            counted=counted,
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
    return _template(lines, "<prism closed checker>", slots)


def _tested(
    shape: tuple[tuple[str, bool, str], ...],
    slots: _Slots,
    *,
    everyone: bool,
    counted: tuple[bool, ...],
) -> list[str]:
    """The closed checker's lines that take and test each member (see ``_members``)."""
    lines: list[str] = []
    for index, (kind, required, items) in enumerate(shape):
        indent = _member(lines, index, slots, required=required or everyone)
        cap = slots(f"c{index}")
        if kind == "array":
            lines += [
                f"{indent}if type(x) is not list or len(x) > {slots(f'm{index}')}:",
                f"{indent}    return general(d)",
                f"{indent}for x in x:",
            ]
            text = _test(items, cap, indent + "    ", counted[index], slots)
        else:
            text = _test(kind, cap, indent, counted[index], slots)
        lines += text.rstrip("\n").split("\n")
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
    reach = [
        arrays[name][0] * arrays[name][1] if kinds[name][0] == "array" else caps[name]
        for name in kinds
    ]
    counted, limit = _counted(reach, most_chars)
    data: dict[str, object] = {
        "lo": MIN_INTEGER,
        "hi": MAX_INTEGER,
        "sl": -_SMALL,
        "sh": _SMALL,
        "limit": limit,
        "size": len(shape),
        "required": sum(1 for kind in shape if kind[1]),
        "tables": STR_TABLES,
    }
    for index, name in enumerate(kinds):
        if kinds[name][0] == "array":
            most, longest = arrays[name]
        else:
            most, longest = 0, caps[name]
        data[f"n{index}"] = _interned(name)
        data[f"c{index}"] = longest
        data[f"m{index}"] = most
    template = _factory(shape, counted)
    functions = {"valid": valid, "general": general, "uses": uses}
    return _written(template, data, functions)


# Each decided test of the value ``x`` (see ``_decided``), with ``p`` and ``q``
# its two bounds (placeholders, see _Slots), ``m`` its kept strings and ``f``
# the name of its pattern's test: a value it does not find valid goes to the
# general checker (and the engine), which decides it as before.
_DECIDED: dict[str, str] = {
    "int": "{i}if type(x) is not int or not {p} <= x <= {q}:\n{i}    return general(d)\n",
    # The same with a bound past one internal digit: first the bounds of one
    # digit within them (``s``, ``t``), which the interpreter compares faster.
    "wide": (
        "{i}if type(x) is not int or not {s} <= x <= {t} and not {p} <= x <= {q}:\n"
        "{i}    return general(d)\n"
    ),
    "str": (
        "{i}if type(x) is not str or not {p} <= len(x) <= {q} or not x.isascii() and lone(x):\n"
        "{i}    return general(d)\n"
    ),
    # The same without a least length (one comparison fewer).
    "str0": (
        "{i}if type(x) is not str or len(x) > {q} or not x.isascii() and lone(x):\n"
        "{i}    return general(d)\n"
    ),
    # The same with a least length of 1: an exact str is false only when empty.
    "str1": (
        "{i}if type(x) is not str or not x or len(x) > {q} or not x.isascii() and lone(x):\n"
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
_DECIDED_COUNT = frozenset({"str", "str0", "str1", "enum", "match"})


def _decided_test(
    kind: str,
    p: str,
    q: str,
    indent: str,
    counting: bool,
    f: str = "",
    m: str = "",
    *,
    slots: _Slots,
    index: int,
) -> list[str]:
    s, t = slots(f"s{index}"), slots(f"t{index}")
    text = _DECIDED[kind].format(i=indent, p=p, q=q, f=f, m=m, s=s, t=t)
    if counting and kind in _DECIDED_COUNT:
        text += f"{indent}chars += len(x)\n"
    return text.rstrip("\n").split("\n")


@functools.lru_cache(maxsize=128)
def _decider(shape: tuple[tuple[str, bool, str], ...], counted: tuple[bool, ...]) -> _Template:
    """The deciding checker of ``shape`` written out: (kind, required, item kind).

    As ``_factory``, only kinds, flags and positions shape the text; the data
    are placeholders, a pattern's test of member ``i`` the global ``g<i>``,
    and the members are tested two ways (see ``_body``). A call every test
    passes is valid: it is answered ``True`` without the engine, and counted
    in ``hits``, the one closure variable (a cell the caller reads).
    """
    slots = _Slots()
    lines = [
        "def make():",
        "    hits = 0",
        "    def check(d):",
        "        nonlocal hits",
        *_body(shape, _members, slots, counted=counted, done=[_HIT, "        return True"]),
        "    return check",
    ]
    return _template(lines, "<prism deciding checker>", slots)


_HIT = "        hits += 1"


def _members(
    shape: tuple[tuple[str, bool, str], ...],
    slots: _Slots,
    *,
    everyone: bool,
    counted: tuple[bool, ...],
) -> list[str]:
    """The lines that take and test each member of ``shape`` (inside the ``try:``).

    ``everyone``: every member is taken as required (the caller knows all are there).
    """
    lines: list[str] = []
    for index, (kind, required, items) in enumerate(shape):
        indent = _member(lines, index, slots, required=required or everyone)
        p, q = slots(f"p{index}"), slots(f"q{index}")
        if kind in ("array", "array0"):
            # "array0": no least count (one comparison fewer).
            fewest = "" if kind == "array0" else f"{slots(f'f{index}')} <= "
            lines += [
                f"{indent}if type(x) is not list or not {fewest}len(x) <= {slots(f'm{index}')}:",
                f"{indent}    return general(d)",
                f"{indent}for x in x:",
            ]
            lines += _decided_test(
                items, p, q, indent + "    ", counted[index], slots=slots, index=index
            )
        elif kind == "match":
            memo = slots(f"m{index}")
            lines += _decided_test(
                kind, p, q, indent, counted[index], f"g{index}", memo, slots=slots, index=index
            )
        else:
            lines += _decided_test(kind, p, q, indent, counted[index], slots=slots, index=index)
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
    data: dict[str, object] = {}
    functions: dict[str, object] = {"general": general}
    longest: list[int] = []
    for index, (declared, (required, (kind, first, second))) in enumerate(decided.items()):
        data[f"n{index}"] = _interned(declared)
        if kind == "array":
            fewest, most = first
            item: Decided = second
            shape.append(("array0" if fewest == 0 else "array", required, _least(item)))
            data.update({f"p{index}": item[1], f"q{index}": item[2]})
            data.update({f"f{index}": fewest, f"m{index}": most})
            data.update(_narrow(index, item))
            longest.append(most * _chars(item))
        elif kind == "match":
            shape.append((kind, required, ""))
            memo: set[str] = set()
            data.update({f"p{index}": first[0], f"q{index}": first[1], f"m{index}": memo})
            functions[f"g{index}"] = _remembered(second, memo)
            longest.append(first[1])
        else:
            shape.append((_least((kind, first, second)), required, ""))
            data.update({f"p{index}": first, f"q{index}": second})
            data.update(_narrow(index, (kind, first, second)))
            longest.append(_chars((kind, first, second)))
    counted, limit = _counted(longest, most_chars)
    data.update(
        {
            "limit": limit,
            "size": len(shape),
            "required": sum(1 for kind in shape if kind[1]),
            "tables": STR_TABLES,
        }
    )
    hits = CellType(0)

    def count() -> int:
        found: int = hits.cell_contents
        return found

    check = _written(_decider(tuple(shape), counted), data, functions, (hits,))
    return check, count


def _counted(longest: list[int], most_chars: int | None) -> tuple[tuple[bool, ...], int]:
    """Which members' characters a checker counts, and the most it lets them hold.

    ``longest`` is each member's most characters (its strings' longest, times
    ``maxItems`` for an array; any number for a member that holds none), and
    ``most_chars`` the most a call's strings may hold in all (``None``: no
    count). A member whose most is small (a share of at most a quarter of
    ``most_chars``) is not counted: its most is taken off what the others may
    hold, as if each call held that many. Only the others (strings without
    ``maxLength``) are counted, against what is left; a call they take past
    it goes to the general checker, as one past ``most_chars`` did.
    """
    if most_chars is None:
        return (False,) * len(longest), 0
    share = most_chars // (4 * max(len(longest), 1))
    counted = tuple(most > share for most in longest)
    left = most_chars - sum(most for most, count in zip(longest, counted, strict=True) if not count)
    return counted, left


def _chars(test: Decided) -> int:
    """The most characters a value ``test`` decides valid holds (0: not a string)."""
    kind = test[0]
    if kind == "str":
        longest: int = test[2]
        return longest
    if kind == "enum":
        return max((len(value) for value in test[1]), default=0)
    return 0


def _interned(name: object) -> object:
    """``name``, interned if it is an exact ``str``.

    A key written as a literal is then the very same object: a lookup finds it
    at its first comparison.
    """
    return sys.intern(name) if type(name) is str else name


def _least(test: Decided) -> str:
    """The kind whose text tests ``test``.

    ``"str0"`` for a string without a least length, ``"str1"`` for one whose
    least is 1, ``"wide"`` for an integer with a bound past one internal digit.
    """
    if test[0] == "str" and test[1] == 0:
        return "str0"
    if test[0] == "str" and test[1] == 1:
        return "str1"
    if test[0] == "int" and not -_SMALL <= test[1] <= test[2] <= _SMALL:
        return "wide"
    return test[0]


def _narrow(index: int, test: Decided) -> dict[str, object]:
    """The bounds of one internal digit within an integer's (``s`` and ``t`` of ``"wide"``)."""
    if test[0] != "int":
        return {}
    return {f"s{index}": max(test[1], -_SMALL), f"t{index}": min(test[2], _SMALL)}


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
