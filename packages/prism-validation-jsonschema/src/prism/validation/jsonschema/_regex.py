"""RE2, the linear-time regular expression engine, for what a schema's patterns cost.

Python's ``re`` backtracks: ``^(a+)+$`` against ``"a" * 28 + "!"`` runs for
seconds while holding the GIL, and no worker thread or timeout can take the
event loop back. jsonschema-rs runs every ``pattern`` and ``patternProperties``
on Rust's ``regex`` crate (finite automata, linear time). RE2 measures each
pattern's cost (its program size, the unit of ``max_regex_work``) and refuses
the schema when it cannot run a pattern (backreferences, lookaround), so the
schema is refused rather than handed to any backtracking engine. ``format:
regex`` asks whether an argument is a regular expression: RE2 compiles it, with
bounded work; nothing a schema or an argument supplies is ever matched on
Python's ``re``.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

__all__ = ["PatternError", "is_regex", "pattern_cost"]

# Only a pattern's size, or whether it compiles, is ever asked: no submatches.
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is an answer, not a log line
_OPTIONS.max_mem = 8 << 20
_OPTIONS.never_capture = True

# re2.compile() keeps the last 128 patterns in a module-wide cache; patterns are
# built directly so that nothing an argument supplies stays alive.
_REGEXP: Any = getattr(re2, "_Regexp", None)

# ``format: regex`` compiles the instance itself. Compiling costs time linear in
# its length but with a large constant (0.4 s for 800 kB on RE2), so longer
# strings are not accepted as regexes. Python's ``re.compile`` (parse only, no
# matching, so no backtracking) is the fallback for short ECMA-only syntax.
_MAX_REGEX_FORMAT_CHARS = 16_384
_MAX_PY_REGEX_CHARS = 1_000


class PatternError(ValueError):
    """RE2 cannot compile a pattern (unsupported syntax or too large)."""


def _re2(pattern: str) -> Any:
    """RE2's compiled ``pattern``.

    Raises:
        PatternError: RE2 refuses the pattern (syntax, size, or text it cannot encode).
    """
    try:
        if _REGEXP is not None:
            return _REGEXP(pattern, _OPTIONS)
        return re2.compile(pattern, _OPTIONS)  # pragma: no cover - other binding versions
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise PatternError(str(detail)) from exc
    except (TypeError, UnicodeError) as exc:
        raise PatternError(str(exc)) from exc


@functools.lru_cache(maxsize=4096)
def pattern_cost(pattern: str) -> int:
    """The work per input character of matching ``pattern``: RE2's program size.

    A linear-time engine's worst case grows with the input times the compiled
    program (when the DFA gives up, the NFA simulation steps through every
    instruction for every character); this is the unit of
    ``SchemaLimits.max_regex_work``.

    Raises:
        PatternError: RE2 refuses the pattern.
    """
    return max(1, int(_re2(pattern).programsize))


def is_regex(value: str) -> bool:
    """``format: regex``: whether ``value`` is a regular expression (bounded work)."""
    if len(value) > _MAX_REGEX_FORMAT_CHARS:
        return False
    try:
        _re2(value)
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
