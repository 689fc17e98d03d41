"""The 2019-09 / 2020-12 engine: jsonschema-rs, configured so it never reaches out.

jsonschema-rs implements every keyword of both dialects (``prefixItems``,
``unevaluated*``, ``dependent*``, ``contains`` bounds, ``$anchor``,
``$dynamicRef``, ``$recursiveRef``). Hardening around it:

* a retriever that refuses every URI, so no reference is fetched or read (the
  screen already refused every reference that is not ``#...``);
* ``pattern`` and ``patternProperties`` run on Rust's ``regex`` crate (finite
  automata, linear time; no lookaround or backreferences), never the
  backtracking ``fancy-regex``;
* ``format`` is an annotation unless asserting was asked for, as 2019-09 and
  2020-12 say; ``format: regex``, when asserted, uses Prism's bounded check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jsonschema_rs

from ._regex import is_regex

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["RsValidationError", "compile_rs"]

RsValidationError = jsonschema_rs.ValidationError

# Rust regex limits: compiled program and lazy DFA cache, in bytes.
_PATTERN_OPTIONS = jsonschema_rs.RegexOptions(size_limit=8 << 20, dfa_size_limit=8 << 20)


class RemoteReferenceError(ValueError):
    """A reference the engine tried to retrieve; nothing is ever fetched."""


def _refuse(uri: str) -> Any:
    raise RemoteReferenceError(
        f"reference {uri[:200]!r} is never fetched; only '#...' references are allowed"
    )


_CLASSES: dict[str, Any] = {
    "draft2019": jsonschema_rs.Draft201909Validator,
    "draft2020": jsonschema_rs.Draft202012Validator,
}


def compile_rs(schema: object, draft: str, *, assert_formats: bool) -> Callable[[Any], None]:
    """A function that raises ``jsonschema_rs.ValidationError`` for an invalid instance.

    Raises:
        Exception: whatever jsonschema-rs raises for a schema it refuses (the
            caller translates it).
    """
    validator = _CLASSES[draft](
        schema,
        validate_formats=assert_formats,
        formats={"regex": is_regex} if assert_formats else None,
        retriever=_refuse,
        pattern_options=_PATTERN_OPTIONS,
    )
    function: Callable[[Any], None] = validator.validate
    return function
