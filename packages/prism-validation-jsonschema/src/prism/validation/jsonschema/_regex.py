r"""What a schema's patterns cost, and whether a string is an ECMA-262 regex.

Python's ``re`` backtracks: ``^(a+)+$`` against ``"a" * 28 + "!"`` runs for
seconds while holding the GIL, and no worker thread or timeout can take the
event loop back. jsonschema-rs runs every ``pattern`` and ``patternProperties``
on Rust's ``regex`` crate (finite automata, linear time). Before that, each
pattern must be:

* ECMA-262 (the dialect JSON Schema names), as jsonschema-rs's own ``format:
  regex`` check decides, in every draft: ``(?i)``, ``\A``, ``\z`` or
  ``\x{41}`` are refused although Rust's engine would run them;
* runnable by a linear-time engine: RE2 compiles it (after translating the
  ECMA escapes RE2 spells differently: ``\uXXXX``, ``\u{...}``, ``\cX``) and
  refuses backreferences and lookaround. RE2's program size is the pattern's
  price per input character (the unit of ``max_regex_work``).

Compiling costs time too (about 0.5-0.8 us per RE2 instruction; ``\p{L}``
alone is 1,200 instructions), so a schema's patterns together get at most
``MAX_SCHEMA_PATTERN_COST`` instructions: the caller passes what is left, and
RE2's memory for each compile (about 16 bytes an instruction) is cut to fit,
never above ``PATTERN_MAX_MEM``. Admitting a schema is bounded work.

``format: regex`` asks whether an argument is a regular expression: the
engine's ECMA-262 parser answers (it only parses, in time about linear in the
length), for strings of at most ``MAX_REGEX_CHARS`` characters with at most
``MAX_NAMED_GROUPS`` named groups (checking their names is quadratic). Nothing
a schema or an argument supplies is ever compiled or matched on Python's ``re``.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import jsonschema_rs
import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

__all__ = [
    "MAX_NAMED_GROUPS",
    "MAX_REGEX_CHARS",
    "MAX_REPEAT_COPIES",
    "MAX_SCHEMA_PATTERN_COST",
    "PATTERN_MAX_MEM",
    "PATTERN_OVERHEAD",
    "ascii_word_boundaries",
    "is_regex",
    "pattern_cost",
    "to_re2",
]

# One pattern's compile: RE2 stops at this much memory (about 131,000
# instructions). ``\p{L}{1,64}`` (76,611) fits; ``\p{L}{0,200}`` does not and is
# refused after about 12 ms.
PATTERN_MAX_MEM = 2 << 20
# All the patterns of one schema, in RE2 instructions; each pattern also counts
# PATTERN_OVERHEAD for what compiling and checking it costs besides its size.
MAX_SCHEMA_PATTERN_COST = PATTERN_MAX_MEM // 16  # 131,072
PATTERN_OVERHEAD = 50
# RE2 holds about this many bytes per instruction; below _MIN_MEM it stops
# limiting (it falls back to a fixed 100,000 instructions).
_BYTES_PER_INSTRUCTION = 16
_MIN_MEM = 64 << 10
# Longer strings are not regexes (``format: regex``) and longer patterns are refused.
MAX_REGEX_CHARS = 16_384
MAX_NAMED_GROUPS = 256
# RE2 writes ``x{n,m}`` out as m copies of ``x`` before it compiles, and the time
# that takes grows faster than the copies (one ``a{1,1000}`` 3 ms, five in one
# pattern 31 ms, seventy 6 s) whatever ``max_mem`` says; so the copies one
# pattern asks for (nested counts multiplied) are bounded before RE2 sees it.
MAX_REPEAT_COPIES = 2_000

_QUANTIFIER = re.compile(r"\{([0-9]+)(,([0-9]*))?\}")
# ``{,n}`` after something it could repeat (not escaped).
_OPEN_MINIMUM = re.compile(r"(?<!\\)\{,[0-9]+\}")


def _options(max_mem: int) -> Any:
    # Only a pattern's size, or whether it compiles, is ever asked: no submatches.
    options = re2.Options()
    options.log_errors = False  # a refused pattern is an answer, not a log line
    options.max_mem = max_mem
    options.never_capture = True
    return options


# From PATTERN_MAX_MEM down to _MIN_MEM, halving.
_OPTIONS = {PATTERN_MAX_MEM >> k: _options(PATTERN_MAX_MEM >> k) for k in range(6)}

# re2.compile() keeps the last 128 patterns in a module-wide cache; patterns are
# built directly so that nothing an argument supplies stays alive.
_REGEXP: Any = getattr(re2, "_Regexp", None)

# jsonschema-rs's own ECMA-262 check, the one its draft-07 meta-schema applies
# to ``pattern``: it parses and never matches.
_ECMA: Any = jsonschema_rs.Draft7Validator({"format": "regex"}, validate_formats=True)
_HEX = frozenset("0123456789abcdefABCDEF")


class _PatternError(ValueError):
    """A pattern is refused (not ECMA-262, not linear-time, or too large)."""


def repeat_copies(pattern: str) -> int:
    """How many copies RE2 would write out for ``pattern``'s counted repetitions.

    ``x{n,m}`` is m copies of ``x`` (``x{n,}`` n), each copy of a group
    holding its own repetitions' copies too. A scan of the text, linear in its
    length: escapes and character classes are skipped, and a ``{`` that is
    not a quantifier is a literal, as in ECMA-262.
    """
    stack: list[int] = [0]  # copies inside each open group
    atom = 0  # copies inside the atom just ended (a group's; 0 for a character)
    index, size = 0, len(pattern)
    while index < size:
        char = pattern[index]
        if char == "\\":
            index += 2
            if pattern[index - 1 : index] in ("p", "P", "u") and pattern[index : index + 1] == "{":
                end = pattern.find("}", index)
                index = size if end < 0 else end + 1
            atom = 0
            continue
        if char == "[":
            index += 1
            while index < size and pattern[index] != "]":
                index += 2 if pattern[index] == "\\" else 1
            index += 1
            atom = 0
            continue
        if char == "(":
            stack.append(0)
            index += 1
            atom = 0
            continue
        if char == ")" and len(stack) > 1:
            atom = stack.pop()
            stack[-1] += atom
            index += 1
            continue
        if char == "{":
            match = _QUANTIFIER.match(pattern, index)
            if match is not None:
                low, comma, high = match.group(1), match.group(2), match.group(3)
                count = int(high) if comma and high else int(low)
                # The atom's own copies were counted once already.
                stack[-1] += count * (1 + atom) - atom
                index = match.end()
                atom = 0
                continue
        atom = 0
        index += 1
    return sum(stack)


def _named_groups(value: str) -> int:
    return value.count("(?<") - value.count("(?<=") - value.count("(?<!")


def _ecma(value: str) -> bool:
    try:
        return bool(_ECMA.is_valid(value))
    except (UnicodeError, ValueError):  # a lone surrogate cannot reach the engine
        return False


def is_regex(value: str) -> bool:
    """``format: regex``: whether ``value`` is an ECMA-262 regular expression (bounded work)."""
    if len(value) > MAX_REGEX_CHARS or _named_groups(value) > MAX_NAMED_GROUPS:
        return False
    return _ecma(value)


def ascii_word_boundaries(pattern: str) -> str:
    r"""``pattern`` with ECMA-262's word boundaries spelled for Rust's engine.

    ECMA-262's ``\b``/``\B`` look at ASCII word characters (``[A-Za-z0-9_]``),
    as its ``\w`` does; Rust's ``regex`` reads them as Unicode boundaries, which
    gives other answers on non-ASCII text (``a\b`` on ``"aé"``) and cannot run
    on its fast engine there (``\B\w*$`` on a million CJK characters: 0.33 s,
    against 9 ms for the ASCII form). Outside a character class each becomes
    ``(?-u:\b)``/``(?-u:\B)``, Rust's ASCII boundary; inside one, ``\b`` is a
    backspace, which the engine refuses to read: it becomes ``\x08``.
    """
    out: list[str] = []
    in_class = False
    i = 0
    n = len(pattern)
    while i < n:
        char = pattern[i]
        if char == "\\" and i + 1 < n:
            escaped = pattern[i + 1]
            if not in_class and escaped in "bB":
                out.append(f"(?-u:\\{escaped})")
            elif in_class and escaped == "b":
                out.append("\\x08")  # a backspace, which the engine does not accept as \\b
            else:
                out.append(char + escaped)
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        out.append(char)
        i += 1
    return "".join(out)


def to_re2(pattern: str) -> str:
    r"""``pattern`` with the ECMA-262 escapes RE2 spells differently rewritten.

    ``\uXXXX`` and ``\u{X...}`` become ``\x{...}``, ``\cX`` the control
    character's ``\x{..}``; every other escape is left as it is.

    Raises:
        _PatternError: what jsonschema-rs cannot run although it is ECMA-262: a
            ``\uD800``-``\uDFFF`` escape (paired or not), ``\0`` and ``[^]``.
    """
    out: list[str] = []
    i = 0
    n = len(pattern)
    in_class = False
    while i < n:
        char = pattern[i]
        if char != "\\" or i + 1 >= n:
            if char == "[" and not in_class:
                if pattern[i + 1 : i + 3] == "^]":
                    raise _PatternError("[^] is not supported by the engine; write [\\s\\S]")
                in_class = True
            elif char == "]":
                in_class = False
            out.append(char)
            i += 1
            continue
        nxt = pattern[i + 1]
        if nxt == "u" and pattern[i + 2 : i + 3] == "{":
            end = pattern.find("}", i + 3, i + 12)
            digits = pattern[i + 3 : end] if end > 0 else ""
            if digits and set(digits) <= _HEX:
                out.append(f"\\x{{{digits}}}")
                i = end + 1
                continue
        elif nxt == "u" and len(digits := pattern[i + 2 : i + 6]) == 4 and set(digits) <= _HEX:
            if 0xD800 <= int(digits, 16) <= 0xDFFF:
                raise _PatternError(
                    f"the surrogate escape \\u{digits} is not supported by the engine; write "
                    "the character itself or \\u{...} with its code point"
                )
            out.append(f"\\x{{{digits}}}")
            i += 6
            continue
        elif nxt == "c" and pattern[i + 2 : i + 3].isascii() and pattern[i + 2 : i + 3].isalpha():
            out.append(f"\\x{{{ord(pattern[i + 2]) % 32:02x}}}")
            i += 3
            continue
        elif nxt == "b" and in_class:
            out.append("\\x08")  # a backspace inside a class
            i += 2
            continue
        elif nxt == "0" and not pattern[i + 2 : i + 3].isdigit():
            raise _PatternError("\\0 is not supported by the engine; write \\x00")
        out.append(pattern[i : i + 2])
        i += 2
    return "".join(out)


class _TooLargeError(_PatternError):
    pass


def _re2(pattern: str, max_mem: int) -> Any:
    """RE2's compiled ``pattern``.

    Raises:
        _PatternError: RE2 refuses the pattern (syntax, size, or text it cannot encode).
    """
    options = _OPTIONS[max_mem]
    try:
        if _REGEXP is not None:
            return _REGEXP(pattern, options)
        return re2.compile(pattern, options)  # pragma: no cover - other binding versions
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        if "too large" in str(detail):
            raise _TooLargeError(str(detail)) from exc
        raise _PatternError(str(detail)) from exc
    except (TypeError, UnicodeError) as exc:
        raise _PatternError(str(exc)) from exc


def pattern_cost(pattern: str, budget: int = MAX_SCHEMA_PATTERN_COST) -> int:
    """The work per input character of matching ``pattern``: RE2's program size.

    A linear-time engine's worst case grows with the input times the compiled
    program (when the DFA gives up, the NFA simulation steps through every
    instruction for every character); this is the unit of
    ``SchemaLimits.max_regex_work``. ``budget`` is how many instructions the
    schema's patterns may still compile to: RE2 stops about there (never
    before about 4,000), so a call costs about ``budget`` at worst.

    Raises:
        _PatternError: the pattern is longer than ``MAX_REGEX_CHARS``, not
            ECMA-262, or RE2 refuses it (syntax a linear-time engine cannot
            run, or larger than ``PATTERN_MAX_MEM`` or the budget).
    """
    max_mem = PATTERN_MAX_MEM
    while max_mem > _MIN_MEM and max_mem // _BYTES_PER_INSTRUCTION > budget:
        max_mem //= 2
    return _measure(pattern, max_mem)


@functools.lru_cache(maxsize=4096)
def _measure(pattern: str, max_mem: int) -> int:
    if len(pattern) > MAX_REGEX_CHARS:
        raise _PatternError(f"it is longer than {MAX_REGEX_CHARS:,} characters")
    if _named_groups(pattern) > MAX_NAMED_GROUPS:
        raise _PatternError(f"it has more than {MAX_NAMED_GROUPS} named groups")
    if repeat_copies(pattern) > MAX_REPEAT_COPIES:
        raise _PatternError(
            f"its counted repetitions ask for more than {MAX_REPEAT_COPIES:,} copies "
            "(x{n,m} is m copies of x, nested counts multiply), more than the "
            "linear-time engine compiles quickly"
        )
    if not _ecma(pattern):
        if _OPEN_MINIMUM.search(pattern):
            raise _PatternError(
                "x{,n} is not a quantifier in ECMA-262 (Unicode mode refuses it; outside "
                "it, it would be literal braces, where other engines read {0,n}); write "
                "x{0,n}, or \\{,n\\} for the braces"
            )
        raise _PatternError(
            "it is not an ECMA-262 regular expression (the dialect JSON Schema patterns "
            "use; inline flags such as (?i), \\A, \\z and \\x{...} are not ECMA-262)"
        )
    translated = to_re2(pattern)
    try:
        program = _re2(translated, max_mem)
    except _TooLargeError as exc:
        if max_mem < PATTERN_MAX_MEM:
            raise _PatternError(
                f"the schema's patterns together compile to more than about "
                f"{MAX_SCHEMA_PATTERN_COST:,} RE2 instructions; pricing more would hold the "
                "event loop too long"
            ) from exc
        raise _PatternError(
            f"it compiles to more than {PATTERN_MAX_MEM >> 20} MiB in the linear-time engine "
            "(for example a large Unicode class under a large repetition count, like "
            f"\\p{{L}}{{0,200}}): {exc}"
        ) from exc
    except _PatternError as exc:
        raise _PatternError(
            f"it uses {_construct(str(exc))}, valid ECMA-262 that the linear-time engine "
            f"cannot run: {exc}"
        ) from exc
    return max(1, int(program.programsize))


_BACKREFERENCE = re.compile(r"invalid escape sequence: \\[1-9]")
_PROPERTY = re.compile(r"invalid character class range: (\\[pP]\{[^}]{0,80}\})")


def _construct(detail: str) -> str:
    """The ECMA-262 construct RE2's error ``detail`` is about, in words."""
    if _BACKREFERENCE.search(detail):
        return "a backreference (\\1 to \\9)"
    if "invalid escape sequence: \\k" in detail:
        return "a named backreference (\\k<name>)"
    if "(?=" in detail or "(?!" in detail:
        return "a lookahead ((?=...) or (?!...))"
    if "(?<=" in detail or "(?<!" in detail:
        return "a lookbehind ((?<=...) or (?<!...))"
    found = _PROPERTY.search(detail)
    if found is not None:
        return (
            f"the Unicode property escape {found.group(1)} (only general categories and "
            "scripts by bare name, such as \\p{L} or \\p{Greek})"
        )
    return "a construct"
