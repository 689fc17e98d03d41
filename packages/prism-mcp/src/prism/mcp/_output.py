"""Checking ``structuredContent`` against a tool's ``outputSchema``."""

from __future__ import annotations

import importlib
import logging
import sys
from typing import TYPE_CHECKING, Any

import attrs
import trio

from prism.core.text import REASON_LIMIT, clip

from ._priced import FALLBACK_WORK, Price, Unpriced, price_schema, price_value

if TYPE_CHECKING:
    from prism.core import JsonValue

__all__ = ["Mismatch", "OutputChecker", "load_validator"]

_log = logging.getLogger("prism.mcp")
_MAX_REASON_CHARS = 500
_MAX_COMPILED = 4096
_VALIDATOR = "prism.validation.jsonschema"
_UNPRICED = (
    "without prismgate-validation-jsonschema, only schemas whose checking cost "
    "Prism can bound are checked"
)
_TOO_COSTLY = (
    f"could not be checked: checking it could cost more than {FALLBACK_WORK:,} units, "
    "the bound on output checks without prismgate-validation-jsonschema"
)


def _import_validator() -> Any:
    try:
        return importlib.import_module(_VALIDATOR)
    except ImportError:
        pass
    try:
        # The fallback's modules (80 ms or so), imported here too, off the event loop.
        importlib.import_module("jsonschema.validators")
        importlib.import_module("referencing")
    except ImportError:  # pragma: no cover - the MCP SDK depends on them
        pass
    return None


async def load_validator() -> Any:
    """Import the hardened validator (if installed) on a worker thread, once per process.

    Its first import takes a few hundred milliseconds (the schema engine and its
    compiled extension): on the event loop that froze every other task.
    """
    if _VALIDATOR in sys.modules:
        return sys.modules[_VALIDATOR]
    return await trio.to_thread.run_sync(_import_validator)


# The fallback's validator classes, each with its keywords that quote a sub-schema
# replaced (see _quoting_no_schema), by the package's class they extend.
_QUIET: dict[type, type] = {}


def _not(validator: Any, sub: Any, instance: Any, schema: Any) -> Any:
    """``not``, its message quoting the node only (the package's quotes the sub-schema too)."""
    from jsonschema.exceptions import ValidationError  # type: ignore[import-untyped]

    if validator.evolve(schema=sub).is_valid(instance):
        yield ValidationError(f"{instance!r} is valid under the schema it must not match")


def _one_of(validator: Any, subs: Any, instance: Any, schema: Any) -> Any:
    """``oneOf``, its messages quoting the node only (the package's quote the sub-schemas).

    The same checks as the package's: each sub-schema's errors until one is
    valid (they are the context of the error when none is), then whether
    another one is valid too.
    """
    from jsonschema.exceptions import ValidationError

    failed: list[Any] = []
    valid = 0
    for index, sub in enumerate(subs):
        if valid:
            valid += validator.evolve(schema=sub).is_valid(instance)
            continue
        errors = list(validator.descend(instance, sub, schema_path=index))
        if errors:
            failed += errors
        else:
            valid = 1
    if not valid:
        yield ValidationError(
            f"{instance!r} is not valid under any of the given schemas", context=failed
        )
    elif valid > 1:
        yield ValidationError(f"{instance!r} is valid under {valid} of the given schemas, not one")


def _quoting_no_schema(cls: Any) -> Any:
    """``cls`` with ``not`` and ``oneOf`` writing no sub-schema into their messages.

    The package's messages ``repr`` the sub-schema for each node that fails
    them, annotations and all (a 1 MB ``description`` under ``items.not`` took
    10 s over 5,800 items): a cost no price of the value bounds. Without the
    quote, a message costs what the price counts, the node's own ``repr``.
    """
    quiet = _QUIET.get(cls)
    if quiet is None:
        from jsonschema import validators  # type: ignore[import-untyped]

        quiet = _QUIET[cls] = validators.extend(cls, {"not": _not, "oneOf": _one_of})
    return quiet


@attrs.frozen
class _Fallback:
    """The ``jsonschema`` package's validator for a schema, and the schema's price."""

    check: Any
    price: Price


@attrs.frozen(kw_only=True)
class Mismatch:
    """Why a value does not match its schema."""

    path: str
    message: str


class OutputChecker:
    """Validates values against untrusted output schemas.

    Uses prism-validation-jsonschema's hardened validator when it is installed
    (bounded schemas and values, linear-time patterns, no remote ``$ref``); otherwise the
    ``jsonschema`` package the MCP SDK depends on, with an empty registry so no
    ``$ref`` leaves the schema, on schemas whose cost it can price and values
    whose price fits ``FALLBACK_WORK`` only (see ``_priced``).
    """

    def __init__(self, *, hardened: bool = True) -> None:
        """``hardened=False`` uses the fallback even when the hardened validator is installed."""
        self._hardened: Any = None
        # Compiled checks by the identity of the schema object they were made
        # from, with that object, so a reused id never finds another's check.
        self._compiled: dict[int, tuple[JsonValue, Any]] = {}
        # Imported already by load_validator() when the bridge opened.
        module = _import_validator() if hardened else None
        if module is not None:
            self._hardened = module.JsonSchemaArgumentValidator()

    def _compile(self, schema: JsonValue) -> tuple[Any, str | None]:
        """The compiled check of ``schema``, or ``None`` and why it cannot be used."""
        try:
            if self._hardened is not None:
                return self._hardened.compile(schema), None
            from jsonschema.validators import validator_for  # type: ignore[import-untyped]
            from referencing import Registry

            try:
                price = price_schema(schema)
            except Unpriced as exc:
                return None, f"{_UNPRICED}: {exc}"
            cls = _quoting_no_schema(validator_for(schema))
            return _Fallback(cls(schema, registry=Registry()), price), None
        except Exception as exc:
            return None, str(exc)[:_MAX_REASON_CHARS]

    def check(self, schema: JsonValue, value: JsonValue, *, tool: str = "") -> Mismatch | None:
        """The first way ``value`` fails ``schema``, or ``None`` when it matches.

        ``schema`` is compiled on its first use (a tool's first call, never at
        listing, so a listing full of costly output schemas costs nothing until
        one of them is called) and kept. A schema that cannot be used is logged
        once, naming ``tool``, and leaves the value unchecked, as an absent
        ``outputSchema`` would.
        """
        kept = self._compiled.get(id(schema))
        if kept is None or kept[0] is not schema:
            compiled, refused = self._compile(schema)
            if refused is not None:
                _log.warning(
                    "MCP tool %s: outputSchema cannot be used (%s); its structuredContent "
                    "is not checked",
                    tool,
                    clip(refused, REASON_LIMIT),
                )
            if len(self._compiled) >= _MAX_COMPILED:
                # Bounded across relistings (each brings new schema objects).
                self._compiled.clear()
            kept = self._compiled[id(schema)] = (schema, compiled)
        if kept[1] is None:
            return None
        validator = kept[1]
        if self._hardened is not None:
            result = validator.validate(value)
            if result.ok:
                return None
            first = result.errors[0] if result.errors else None
            if first is None:
                return Mismatch(path="", message="does not match the output schema")
            return Mismatch(path=first.path or "", message=str(first.message)[:_MAX_REASON_CHARS])
        if price_value(validator.price, value) > FALLBACK_WORK:
            return Mismatch(path="", message=_TOO_COSTLY)
        try:
            from jsonschema import exceptions

            error = exceptions.best_match(validator.check.iter_errors(value))
        except Exception as exc:
            return Mismatch(path="", message=f"could not be checked: {exc}"[:_MAX_REASON_CHARS])
        if error is None:
            return None
        path = "".join(
            f"[{part!r}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path
        )
        return Mismatch(path=f"${path}", message=str(error.message)[:_MAX_REASON_CHARS])
