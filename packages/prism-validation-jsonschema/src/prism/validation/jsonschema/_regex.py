"""Linear-time regular expressions for ``pattern``, ``patternProperties`` and ``format``.

Python's ``re`` backtracks: ``^(a+)+$`` against ``"a" * 28 + "!"`` runs for
seconds while holding the GIL, and no worker thread or timeout can take the
event loop back. RE2 runs in time linear in the input. Every regular
expression that a schema supplies runs on RE2 here; a pattern RE2 cannot
compile (backreferences, lookaround) refuses the schema instead of falling
back to a backtracking engine. Built-in formats (fixed regexes, not from any
schema) use Python's ``re`` on short strings only, and RE2 beyond.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["PatternError", "compile_linear", "format_checker", "is_regex", "pattern_cost"]

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is an answer, not a log line
_OPTIONS.max_mem = 8 << 20
# Only whether a pattern matches is ever asked. Without submatches RE2 runs its
# DFA, hundreds of times faster on long inputs ("(.*a){20}" on 1 MB: 0.8 s ->
# 2.5 ms), but its setup costs about 0.2 us more per call, so short inputs keep
# the default engine choice.
_LONG_OPTIONS = re2.Options()
_LONG_OPTIONS.log_errors = False
_LONG_OPTIONS.max_mem = 8 << 20
_LONG_OPTIONS.never_capture = True
_LONG_INPUT_BYTES = 2_048

# The binding's own search() builds a match object per call; the raw RE2
# object's Match() is several times cheaper. Both are looked up defensively.
_UNANCHORED: Any = getattr(getattr(re2, "_Anchor", None), "UNANCHORED", None)
# re2.compile() keeps the last 128 patterns in a module-wide cache; schema
# patterns are built directly so that an evicted schema releases them.
_REGEXP: Any = getattr(re2, "_Regexp", None)

# ``format: regex`` compiles the instance itself. Compiling costs time linear in
# its length but with a large constant (0.4 s for 800 kB on RE2), so longer
# strings are not accepted as regexes. Python's ``re.compile`` (parse only, no
# matching, so no backtracking) is the fallback for short ECMA-only syntax.
_MAX_REGEX_FORMAT_CHARS = 16_384
_MAX_PY_REGEX_CHARS = 1_000
_SHORT_FORMAT_CHARS = 256


class PatternError(ValueError):
    """RE2 cannot compile a pattern (unsupported syntax or too large)."""


def _re2(pattern: str, options: Any) -> Any:
    """RE2's compiled ``pattern``.

    Raises:
        PatternError: RE2 refuses the pattern (syntax, size, or text it cannot encode).
    """
    try:
        if _REGEXP is not None:
            return _REGEXP(pattern, options)
        return re2.compile(pattern, options)  # pragma: no cover - other binding versions
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise PatternError(str(detail)) from exc
    except (TypeError, UnicodeError) as exc:
        raise PatternError(str(exc)) from exc


def compile_linear(pattern: str) -> Callable[[str], bool]:
    r"""A ``search`` predicate for ``pattern`` that runs in linear time.

    ECMA-262 semantics are what JSON Schema asks for; RE2's defaults match them
    where it matters for safety: ``$`` is the end of the input (no trailing
    newline allowance), ``\d`` and ``\w`` are ASCII.

    Raises:
        PatternError: RE2 refuses the pattern.
    """
    compiled = _re2(pattern, _OPTIONS)
    raw = getattr(compiled, "_regexp", None)
    match = getattr(raw, "Match", None)
    if match is None or _UNANCHORED is None:  # pragma: no cover - other binding versions
        public = compiled.search

        def search_public(text: str) -> bool:
            return public(text) is not None

        return search_public

    anchor = _UNANCHORED
    long_match = _re2(pattern, _LONG_OPTIONS)._regexp.Match
    short = _LONG_INPUT_BYTES

    def search(text: str) -> bool:
        # surrogatepass: a lone surrogate (legal in parsed JSON) must not raise.
        data = text.encode("utf-8", "surrogatepass")
        size = len(data)
        spans = (match if size <= short else long_match)(anchor, data, 0, size)
        return spans[0][0] != -1  # type: ignore[no-any-return]

    return search


@functools.lru_cache(maxsize=4096)
def pattern_cost(pattern: str) -> int:
    """The work per input character of matching ``pattern``: RE2's program size.

    A linear-time engine's worst case grows with the input times the compiled
    program (when the DFA gives up, the NFA simulation steps through every
    instruction for every character); this is the unit of
    ``SchemaLimits.max_regex_work``, charged alike on both engines.

    Raises:
        PatternError: RE2 refuses the pattern.
    """
    return max(1, int(_re2(pattern, _LONG_OPTIONS).programsize))


_OPEN_LOWER_BOUND = re.compile(r"\{,(\d+)\}")


def _linear_from(regex: str) -> Callable[[str], bool]:
    # fastjsonschema's format regexes are Python syntax used with ``match``:
    # RE2 spells the end ``\z`` (not ``\Z``) and reads ``{,n}`` as literal text.
    translated = _OPEN_LOWER_BOUND.sub(r"{0,\1}", regex.replace("\\Z", "\\z"))
    return compile_linear("^(?:" + translated + ")")


def _hybrid(regex: str) -> Callable[[str], bool]:
    r"""A built-in format check: Python's ``re`` on short strings, RE2 on long ones.

    The built-in format regexes are fixed (fastjsonschema's own, never from a
    schema) and none nests unbounded quantifiers, so their worst case on
    Python's backtracking engine is polynomial; on strings of at most
    ``_SHORT_FORMAT_CHARS`` characters that is bounded to well under a
    millisecond, and Python's engine has the lower call overhead. Longer
    strings go to RE2. ``re.ASCII`` makes ``\d``/``\w`` agree with RE2.
    """
    short = re.compile(regex, re.ASCII).match
    linear = _linear_from(regex)

    def check(value: str) -> bool:
        if len(value) <= _SHORT_FORMAT_CHARS:
            return short(value) is not None
        return linear(value)

    return check


def _is_email(value: str) -> bool:
    # local@domain with one "@", no leading/trailing dot and no ".." in the local part.
    if value.count("@") != 1:
        return False
    local, domain = value.split("@")
    if not local or local[0] == "." or local[-1] == "." or ".." in local:
        return False
    # domain: no "@" and a dot with at least one character on each side
    return "." in domain[1:-1]


_IDN_HOSTNAME = compile_linear(
    r"^(xn--)?[a-zA-Z0-9][a-zA-Z0-9-_]{0,61}[a-zA-Z0-9]{0,1}\."
    r"(xn--)?([a-zA-Z0-9\-]{1,50}|[a-zA-Z0-9-]{1,30}\.[a-zA-Z]{2,})\z"
)


def _is_idn_hostname(value: str) -> bool:
    if not _IDN_HOSTNAME(value):
        return False
    dot = value.find(".")
    return value[dot + 1 : dot + 2] != "-"


def is_regex(value: str) -> bool:
    """``format: regex``: whether ``value`` is a regular expression (bounded work)."""
    return _is_regex(value)


def _is_regex(value: str) -> bool:
    if len(value) > _MAX_REGEX_FORMAT_CHARS:
        return False
    try:
        compile_linear(value)
    except PatternError:
        pass
    else:
        return True
    # Valid ECMA-262 but beyond RE2 (lookaround, backreferences): parse only.
    if len(value) > _MAX_PY_REGEX_CHARS:
        return False
    try:
        re.compile(value)
    except (re.error, OverflowError, RecursionError, ValueError):
        return False
    return True


_SPECIAL: dict[str, Callable[[str], bool]] = {
    "email": _is_email,
    "idn-hostname": _is_idn_hostname,
    "regex": _is_regex,
}
_CHECKERS: dict[str, Callable[[str], bool]] = {}


def format_checker(name: str, regexes: dict[str, str]) -> Callable[[str], bool] | None:
    """A linear-time checker for the built-in format ``name`` (``None`` if unknown).

    ``regexes`` is the generator's own table, so each draft keeps its set of
    formats; the ones RE2 cannot express (lookarounds) are written out in Python.
    """
    regex = regexes.get(name)
    if regex is None and name != "regex":
        return None
    if name in _SPECIAL:
        return _SPECIAL[name]
    if regex is None:  # pragma: no cover - "regex" is always special
        return None
    key = name + "\x00" + regex
    checker = _CHECKERS.get(key)
    if checker is None:
        checker = _CHECKERS[key] = _hybrid(regex)
    return checker
