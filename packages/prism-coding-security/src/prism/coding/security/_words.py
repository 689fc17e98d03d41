"""Expand a static shell word the way bash would: quotes, braces, tilde, globs.

Only words with no parameter, command, process or arithmetic substitution
reach this module (the parser marks those *dynamic*, and dynamic words are
never proved safe). What bash would do with the rest is computed here, against
the real file system for globs, so the policy judges the argv that will run.
"""

from __future__ import annotations

import fnmatch
import glob
import itertools
import os
import pwd
import re

import attrs

__all__ = ["MAX_EXPANSIONS", "MAX_LISTED_ENTRIES", "ExpandedWord", "Listings", "expand_word"]

MAX_EXPANSIONS = 1024
# directory entries the globs of one line may read, all together (a glob that matches
# nothing still lists every directory its wildcard levels reach)
MAX_LISTED_ENTRIES = 100_000
MAX_GLOB_LEVELS = 3
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# nothing bash would change: no quotes, escapes, expansions, braces, tilde or globs
_PLAIN = re.compile(r"[A-Za-z0-9_./:,=+@%^-]+\Z")


class _WordError(ValueError):
    """The word cannot be expanded with confidence (the message says why)."""


@attrs.frozen
class ExpandedWord:
    """A word after expansion.

    Attributes:
        values: the words bash would produce (one, or several after braces or a glob).
        literal: the word after quote removal, before globbing (``./*`` stays ``./*``).
        globbed: whether an unquoted glob character was present.
    """

    values: tuple[str, ...]
    literal: str
    globbed: bool = False


def _chars(raw: str) -> list[tuple[str, bool]]:
    """Quote removal: (character, quoted) pairs."""
    out: list[tuple[str, bool]] = []
    i = 0
    n = len(raw)
    while i < n:
        ch = raw[i]
        if ch == "\\":
            if i + 1 < n:
                if raw[i + 1] != "\n":
                    out.append((raw[i + 1], True))
                i += 2
                continue
            out.append(("\\", True))
            i += 1
        elif ch == "'":
            end = raw.find("'", i + 1)
            if end < 0:
                raise _WordError(f"unterminated quote in {raw!r}")
            out.extend((c, True) for c in raw[i + 1 : end])
            i = end + 1
        elif ch == '"':
            i += 1
            while i < n and raw[i] != '"':
                c = raw[i]
                if c == "\\" and i + 1 < n and raw[i + 1] in '$`"\\\n':
                    if raw[i + 1] != "\n":
                        out.append((raw[i + 1], True))
                    i += 2
                    continue
                if c in "$`":
                    raise _WordError(f"an expansion inside double quotes in {raw!r}")
                out.append((c, True))
                i += 1
            if i >= n:
                raise _WordError(f"unterminated quote in {raw!r}")
            i += 1
        elif ch in "$`":
            raise _WordError(f"an expansion in {raw!r}")
        else:
            out.append((ch, False))
            i += 1
    return out


def _deepest_brace(chars: list[tuple[str, bool]]) -> int:
    """How deep unquoted braces nest in ``chars`` (one pass)."""
    depth = deepest = 0
    for ch, quoted in chars:
        if quoted:
            continue
        if ch == "{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch == "}" and depth > 0:
            depth -= 1
    return deepest


# Braces nested (or following one another) past this are not expanded here: the word
# counts as computed, like any word the policy cannot spell out.
_MAX_BRACE_LEVELS = 64


def _brace(chars: list[tuple[str, bool]], level: int = 0) -> list[list[tuple[str, bool]]]:
    """Brace expansion of unquoted ``{a,b}`` and ``{1..3}`` (left to right, nested)."""
    if level == 0 and _deepest_brace(chars) > _MAX_BRACE_LEVELS:
        level = _MAX_BRACE_LEVELS + 1  # refused at once, before any level's scan
    if level > _MAX_BRACE_LEVELS:
        raise _WordError(f"braces nested or chained more than {_MAX_BRACE_LEVELS} deep")
    depth = 0
    start = -1
    commas: list[int] = []
    for index, (ch, quoted) in enumerate(chars):
        if quoted:
            continue
        if ch == "{":
            if depth == 0:
                start = index
                commas = []
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                inner = chars[start + 1 : index]
                prefix, suffix = chars[:start], chars[index + 1 :]
                alternatives: list[list[tuple[str, bool]]] = []
                if commas:
                    bounds = [start, *commas, index]
                    alternatives = [chars[a + 1 : b] for a, b in itertools.pairwise(bounds)]
                else:
                    text = "".join(c for c, _ in inner)
                    seq = re.fullmatch(
                        r"(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?|([a-zA-Z])\.\.([a-zA-Z])", text
                    )
                    if seq is None:
                        rest = _brace(suffix, level + 1)
                        return [prefix + chars[start : index + 1] + r for r in rest]
                    if seq.group(4):
                        lo, hi = ord(seq.group(4)), ord(seq.group(5))
                        step = 1 if hi >= lo else -1
                        items = [chr(c) for c in range(lo, hi + step, step)]
                    else:
                        lo, hi = int(seq.group(1)), int(seq.group(2))
                        step = abs(int(seq.group(3) or 1)) or 1
                        step = step if hi >= lo else -step
                        if abs(hi - lo) // abs(step) > MAX_EXPANSIONS:
                            raise _WordError("a brace sequence expands to too many words")
                        ends = (seq.group(1), seq.group(2))
                        # bash pads every number to the wider end when an end has a
                        # leading zero ({01..10}, {1..010})
                        width = (
                            max(len(e) for e in ends)
                            if any(len(e.lstrip("-")) > 1 and e.lstrip("-")[0] == "0" for e in ends)
                            else 0
                        )
                        items = [
                            f"{c:0{width}d}" for c in range(lo, hi + (1 if step > 0 else -1), step)
                        ]
                    alternatives = [[(c, True) for c in item] for item in items]
                out: list[list[tuple[str, bool]]] = []
                tails = _brace(suffix, level + 1)
                for alt in alternatives:
                    for expanded in _brace(alt, level + 1):
                        for tail in tails:
                            out.append(prefix + expanded + tail)
                            if len(out) > MAX_EXPANSIONS:
                                raise _WordError("brace expansion produces too many words")
                return out
        elif ch == "," and depth == 1:
            commas.append(index)
    return [chars]


def _tilde(chars: list[tuple[str, bool]], assignment: bool) -> list[tuple[str, bool]]:
    """Expand an unquoted leading ``~`` / ``~user`` (and after ``=``/``:`` in assignments)."""
    starts = [0]
    if assignment:
        text = "".join(c for c, _ in chars)
        eq = text.find("=")
        starts = [eq + 1] + [
            i + 1 for i, (c, q) in enumerate(chars) if c == ":" and not q and i > eq
        ]
    for start in sorted(starts, reverse=True):
        if start >= len(chars) or chars[start] != ("~", False):
            continue
        end = start + 1
        while end < len(chars) and chars[end][0] != "/" and not chars[end][1]:
            end += 1
        if end < len(chars) and chars[end][1] and chars[end][0] != "/":
            continue  # a quoted character in the login name: bash leaves it alone
        user = "".join(c for c, _ in chars[start + 1 : end])
        if user[:1] in ("+", "-") or user[:1].isdigit():
            # ~+, ~-, ~N, ~+N, ~-N: bash takes them from the directory stack
            raise _WordError(f"~{user} depends on the shell's directory stack")
        if user == "":
            home = os.environ.get("HOME") or os.path.expanduser("~")
        else:
            try:
                home = pwd.getpwnam(user).pw_dir
            except KeyError:
                continue  # no such user: bash keeps the word as written
        chars = chars[:start] + [(c, True) for c in home] + chars[end:]
    return chars


_UNPORTABLE_BRACKET = re.compile(r"\[[^\]/]*(?:\^|\[[:.=]|\\)")


def _may_match_dots(part: str) -> bool:
    """Whether a pattern component could match a leading dot in some shell."""
    if part.startswith("."):
        return True
    if part.startswith("["):
        end = part.find("]", 2)
        if end < 0:
            return False  # not a bracket expression: a literal '['
        inside = part[1:end]
        return any(x in inside for x in (".", "!", "^", "[:", "-"))
    return False


class Listings:
    """The directories one line's globs list: each read once, all within a budget.

    The budget is :data:`MAX_LISTED_ENTRIES` directory entries unless given.

    Matching follows Python's ``glob.glob`` (not recursive, hidden names only for a
    pattern that starts with a dot), which a differential test holds it to.
    """

    def __init__(self, limit: int | None = None) -> None:
        self.limit = MAX_LISTED_ENTRIES if limit is None else limit
        self.left = self.limit
        self._listed: dict[str, list[tuple[str, bool]]] = {}

    def names(self, directory: str, dironly: bool) -> list[str]:
        listed = self._listed.get(directory)
        if listed is None:
            listed = self._listed[directory] = []
            try:
                with os.scandir(directory or os.curdir) as entries:
                    for entry in entries:
                        self.spend(1)
                        try:
                            is_dir = entry.is_dir()
                        except OSError:
                            is_dir = False
                        listed.append((entry.name, is_dir))
            except OSError:
                pass  # (what was read stays, as glob keeps what it yielded)
        return [name for name, is_dir in listed if is_dir or not dironly]

    def spend(self, entries: int) -> None:
        self.left -= entries
        if self.left < 0:
            raise _WordError(f"the line's globs read more than {self.limit} directory entries")

    def glob(self, pattern: str, root: str) -> list[str]:
        """What ``glob.glob(pattern, root_dir=root)`` finds, unsorted."""
        return list(self._glob(pattern, root, dironly=False))

    def _glob(self, pattern: str, root: str, dironly: bool) -> list[str]:
        head, tail = os.path.split(pattern)
        if not glob.has_magic(pattern):
            self.spend(1)
            where = os.path.join(root, pattern)
            found = os.path.lexists(where) if tail else os.path.isdir(where)
            return [pattern] if found else []
        if not head:
            return self._in(root, tail, dironly)
        heads = self._glob(head, root, True) if head != pattern and glob.has_magic(head) else [head]
        out: list[str] = []
        for directory in heads:
            for name in self._in(os.path.join(root, directory), tail, dironly):
                out.append(os.path.join(directory, name))
        return out

    def _in(self, directory: str, part: str, dironly: bool) -> list[str]:
        if not glob.has_magic(part):
            self.spend(1)
            where = os.path.join(directory, part)
            found = os.path.lexists(where) if part else os.path.isdir(directory)
            return [part] if found else []
        names = self.names(directory, dironly)
        if part[0] != ".":
            names = [name for name in names if name[0] != "."]
        return fnmatch.filter(names, part)


def _glob(
    chars: list[tuple[str, bool]], cwd: str, listings: Listings | None = None
) -> tuple[list[str], bool]:
    if not any(c in "*?[" and not q for c, q in chars):
        return ["".join(c for c, _ in chars)], False
    pattern = "".join(glob.escape(c) if q else c for c, q in chars)
    absolute = pattern.startswith("/")
    if _UNPORTABLE_BRACKET.search(pattern):
        # Python's glob has no [^...] negation and no [[:class:]]: it would not match what
        # bash matches, and keep the word as a harmless-looking literal
        raise _WordError(f"the glob {pattern!r} uses a bracket form bash reads differently")
    parts = pattern.split("/")
    for part in parts:
        if glob.has_magic(part) and _may_match_dots(part):
            # whether `.*`, `.?` or `[.]*` match `.` and `..` differs between shells
            # (dash, bash before 5.2, globskipdots): never guess
            raise _WordError(f"the glob {pattern!r} may match '.' or '..' in some shells")
    wild = sum(1 for part in parts if glob.has_magic(part))
    if wild > MAX_GLOB_LEVELS:
        # each wildcard level multiplies the directories listed: bound the work up front
        raise _WordError(f"the glob {pattern!r} has more than {MAX_GLOB_LEVELS} wildcard levels")
    try:
        found = (listings or Listings()).glob(pattern, "" if absolute else cwd)
    except (OSError, ValueError, re.error) as exc:
        raise _WordError(f"cannot expand the glob {pattern!r} ({exc})") from exc
    if len(found) > MAX_EXPANSIONS:
        raise _WordError(f"the glob {pattern!r} matches more than {MAX_EXPANSIONS} paths")
    found.sort()
    if not found:
        return ["".join(c for c, _ in chars)], True  # bash keeps an unmatched pattern
    return found, True


def expand_word(raw: str, *, cwd: str, listings: Listings | None = None) -> ExpandedWord:
    """Expand ``raw`` (the word as written) relative to ``cwd``.

    ``listings``: the directories the line's globs have read so far (and their budget).

    Raises:
        _WordError: the word holds an expansion, an unterminated quote, or grows too large.
    """
    if _PLAIN.match(raw):
        return ExpandedWord(values=(raw,), literal=raw)
    chars = _chars(raw)
    literal = "".join(c for c, _ in chars)
    assignment = _ASSIGNMENT.match(literal) is not None and not any(
        q for _, q in chars[: literal.find("=")]
    )
    values: list[str] = []
    globbed = False
    variants = _brace(chars)
    # bash drops a word brace expansion left empty ({a,} is one word), unless quoted
    drop_empty = len(variants) > 1 and "'" not in raw and '"' not in raw
    for variant in variants:
        if drop_empty and not variant:
            continue
        expanded = _tilde(variant, assignment)
        words, hit = _glob(expanded, cwd, listings)
        globbed = globbed or hit
        values.extend(words)
        if len(values) > MAX_EXPANSIONS:
            raise _WordError(f"{raw!r} expands to more than {MAX_EXPANSIONS} words")
    return ExpandedWord(values=tuple(values), literal=literal, globbed=globbed)
