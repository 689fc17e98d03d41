"""Declarative option grammars, and GNU getopt-style parsing against them.

A grammar lists every option a program accepts that the policy knows about,
each with its spellings, whether it takes a value, and the value's role (a
path read, a path written, a directory to change into, or code/danger that is
never proved safe). Parsing follows getopt_long: short clusters (``-fr``),
attached or separate values (``-n5``, ``-n 5``), ``--long=value`` and
``--long value``, unique-prefix abbreviations of long names, ``--`` as the
end of options, and (for most GNU tools) options after operands.
"""

from __future__ import annotations

from typing import Literal

import attrs

__all__ = ["Grammar", "Opt", "ParsedArgs", "grammar", "parse_args"]

Role = Literal["flag", "value", "read", "write", "cwd", "unsafe"]


@attrs.frozen
class Opt:
    """One option: its canonical name, whether it takes a value, and the value's role."""

    canonical: str
    arg: Literal["none", "required", "optional"]
    role: Role
    why: str = ""


@attrs.frozen
class Grammar:
    """The options of one program (or subcommand)."""

    options: dict[str, Opt]
    longs: tuple[str, ...]
    permute: bool = True
    numeric: bool = False
    clusters: bool = True  # False: one short option a word (the program is not getopt)


@attrs.frozen
class ParsedArgs:
    """Options (canonical name, value, spelling) and operands; ``error`` when parsing failed."""

    options: tuple[tuple[Opt, str | None, str], ...] = ()
    operands: tuple[str | None, ...] = ()
    error: str | None = None

    def has(self, *canonical: str) -> bool:
        """Whether any of the ``canonical`` options was given."""
        return any(opt.canonical in canonical for opt, _, _ in self.options)

    def values(self, canonical: str) -> list[str | None]:
        """Values given to ``canonical``."""
        return [value for opt, value, _ in self.options if opt.canonical == canonical]


_ROLE_PREFIX: dict[str, Role] = {"r": "read", "w": "write", "c": "cwd", "x": "unsafe", "v": "value"}


def grammar(
    spec: str,
    *,
    unsafe: dict[str, str] | None = None,
    permute: bool = True,
    numeric: bool = False,
    clusters: bool = True,
) -> Grammar:
    """Build a grammar from a compact spec.

    ``spec`` is whitespace-separated groups; a group is spellings joined by
    ``|`` (``-r|-R|--recursive``), each ending in ``=`` when it takes a value
    (``=?`` for an optional value). A spelling with no suffix takes what its
    group's does, except that a short one is a flag when the group's value is
    optional (getopt_long: ``-F|--classify=?`` is ``-F`` and ``--classify[=WHEN]``,
    so ``-FL`` is -F then -L; ``-i=?|--in-place=?`` when the short takes one too).
    A group may start with a role:
    ``r:`` (value is a path read), ``w:`` (a path written), ``c:`` (a
    directory to work in), ``x:`` (never proved safe). ``unsafe`` maps a group
    (as written in ``spec``) to the reason it is never proved safe.
    """
    options: dict[str, Opt] = {}
    longs: list[str] = []
    reasons = unsafe or {}
    for group in spec.split():
        role: Role = "flag"
        body = group
        if len(group) > 2 and group[1] == ":":
            role = _ROLE_PREFIX[group[0]]
            body = group[2:]
        arg: Literal["none", "required", "optional"] = "none"
        spelled: list[tuple[str, Literal["none", "required", "optional"] | None]] = []
        for name in body.split("|"):
            if name.endswith("=?"):
                arg = "optional"
                spelled.append((name[:-2], "optional"))
            elif name.endswith("="):
                arg = "required" if arg == "none" else arg
                spelled.append((name[:-1], "required"))
            else:
                spelled.append((name, None))
        if role == "flag" and arg != "none":
            role = "value"
        canonical = next((n for n, _ in spelled if n.startswith("--")), spelled[0][0])
        why = reasons.get(group, "")
        if why:
            role = "unsafe"
        elif role == "unsafe":
            why = f"{canonical} is never proved safe"
        for name, own in spelled:
            if own is None:
                own = "none" if (arg == "optional" and not name.startswith("--")) else arg
            options[name] = Opt(canonical=canonical, arg=own, role=role, why=why)
            if name.startswith("--"):
                longs.append(name)
    return Grammar(
        options=options,
        longs=tuple(sorted(longs)),
        permute=permute,
        numeric=numeric,
        clusters=clusters,
    )


def _long(grammar_: Grammar, name: str) -> Opt | str:
    exact = grammar_.options.get(name)
    if exact is not None:
        return exact
    matches = {grammar_.options[n] for n in grammar_.longs if n.startswith(name)}
    if len(matches) == 1:
        return matches.pop()
    if not matches:
        return f"unknown option {name!r}"
    return f"ambiguous option {name!r}"


def _all_flags(grammar_: Grammar, letters: str) -> bool:
    found = [grammar_.options.get("-" + letter) for letter in letters]
    return all(opt is not None and opt.arg == "none" for opt in found)


def parse_args(grammar_: Grammar, args: tuple[str | None, ...]) -> ParsedArgs:
    """Parse ``args`` (``None`` = a word computed at run time) against ``grammar_``."""
    options: list[tuple[Opt, str | None, str]] = []
    operands: list[str | None] = []
    ended = False
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg is None:
            if not ended:
                return ParsedArgs(error="an argument is computed at run time (it may be an option)")
            operands.append(None)
            continue
        if ended or arg == "-" or not arg.startswith("-"):
            operands.append(arg)
            if not grammar_.permute:
                ended = True
            continue
        if arg == "--":
            ended = True
            continue
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            found = _long(grammar_, name)
            if isinstance(found, str):
                return ParsedArgs(error=found)
            if found.arg == "none" and eq:
                return ParsedArgs(error=f"{name!r} takes no value")
            if found.arg == "required" and not eq:
                if index >= len(args):
                    return ParsedArgs(error=f"{name!r} needs a value")
                value_word = args[index]
                index += 1
                if value_word is None:
                    return ParsedArgs(error=f"the value of {name!r} is computed at run time")
                value = value_word
            options.append((found, value if (eq or found.arg == "required") else None, arg))
            continue
        if not grammar_.clusters and len(arg) > 2 and not _all_flags(grammar_, arg[1:]):
            # the program gives a value option of a cluster the next word, not the rest
            return ParsedArgs(error=f"{arg!r}: a value option in a cluster (this is not getopt)")
        position = 1
        while position < len(arg):
            char = arg[position]
            if grammar_.numeric and char.isdigit():
                end = position
                while end < len(arg) and arg[end].isdigit():
                    end += 1
                options.append((Opt("-NUM", "required", "value"), arg[position:end], arg))
                position = end
                continue
            opt = grammar_.options.get("-" + char)
            if opt is None:
                return ParsedArgs(error=f"unknown option '-{char}'")
            if opt.arg == "required":
                value = arg[position + 1 :]
                if not value:
                    if index >= len(args):
                        return ParsedArgs(error=f"'-{char}' needs a value")
                    value_word = args[index]
                    index += 1
                    if value_word is None:
                        return ParsedArgs(error=f"the value of '-{char}' is computed at run time")
                    value = value_word
                options.append((opt, value, arg))
                break
            if opt.arg == "optional":
                options.append((opt, arg[position + 1 :] or None, arg))
                break
            options.append((opt, None, arg))
            position += 1
    return ParsedArgs(options=tuple(options), operands=tuple(operands))
