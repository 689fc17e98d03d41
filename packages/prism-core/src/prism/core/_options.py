"""One way to check options, for every package.

Every factory and options value in Prism checks its arguments with the
:class:`OptionCheck` values built here, so the same mistake raises the same
error everywhere: a :class:`~prism.core.ConfigurationError` whose message reads
``"<owner>.<option> must be <what it takes>, got <value>"`` and whose
``option`` and ``value`` attributes name both.

A check is an attrs validator as it stands (``attrs.field(validator=integer(minimum=1))``)
and checks a plain argument with :meth:`OptionCheck.check`.
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import attrs

from ._errors import ConfigurationError

__all__ = [
    "OptionCheck",
    "boolean",
    "callable_value",
    "has_method",
    "instance_of",
    "integer",
    "number",
    "one_of",
    "optional",
    "sequence_of",
    "string",
]

_T = TypeVar("_T")

_shown = reprlib.Repr()
_shown.maxstring = 80
_shown.maxother = 80
_shown.maxlist = _shown.maxtuple = _shown.maxdict = _shown.maxset = 6


def _article(text: str) -> str:
    return f"an {text}" if text[:1].lower() in "aeiou" else f"a {text}"


@attrs.frozen
class OptionCheck:
    """What an option takes: a description for the message and a test.

    Attributes:
        description: completes "must be ...", for example ``"an integer >= 1"``.
        accepts: returns true for a value the option takes.
    """

    description: str
    accepts: Callable[[object], bool] = attrs.field(repr=False)

    def check(self, owner: str, option: str, value: _T) -> _T:
        """Return ``value`` when the option takes it, else raise :class:`ConfigurationError`.

        ``owner`` names the factory or class (``"create_agent"``, ``"RunOptions"``).
        """
        if not self.accepts(value):
            raise ConfigurationError(
                f"{owner}.{option} must be {self.description}, got {_shown.repr(value)}",
                option=f"{owner}.{option}",
                value=value,
            )
        return value

    def __call__(self, instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        """Check an attrs field (this makes every check an attrs validator)."""
        self.check(type(instance).__name__, attribute.name, value)

    def __or__(self, other: OptionCheck) -> OptionCheck:
        """A value either check takes."""
        first, second = self.accepts, other.accepts
        return OptionCheck(
            f"{self.description} or {other.description}",
            lambda value: first(value) or second(value),
        )


def _bounds(minimum: float | None, maximum: float | None, *, above: bool) -> str:
    parts = []
    if minimum is not None:
        parts.append(f"{'>' if above else '>='} {_bound(minimum)}")
    if maximum is not None:
        parts.append(f"<= {_bound(maximum)}")
    return " and ".join(parts)


def _bound(bound: float) -> str:
    """A bound as people write it: an integer whole (67108864, not 6.71089e+07)."""
    return str(bound) if isinstance(bound, int) else f"{bound:g}"


def integer(*, minimum: int | None = None, maximum: int | None = None) -> OptionCheck:
    """An ``int`` (never a ``bool``) within the given bounds, inclusive."""

    def accepts(value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, int):
            return False
        return (minimum is None or value >= minimum) and (maximum is None or value <= maximum)

    bounds = _bounds(minimum, maximum, above=False)
    return OptionCheck(f"an integer {bounds}".rstrip(), accepts)


def number(
    *, minimum: float | None = None, maximum: float | None = None, above: bool = False
) -> OptionCheck:
    """A finite ``int`` or ``float`` (never a ``bool``) within the bounds.

    ``above=True`` makes the minimum exclusive (``number(minimum=0, above=True)``
    is a positive number).
    """

    def accepts(value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if not math.isfinite(value):
            return False
        if minimum is not None and (value <= minimum if above else value < minimum):
            return False
        return maximum is None or value <= maximum

    bounds = _bounds(minimum, maximum, above=above)
    return OptionCheck(f"a finite number {bounds}".rstrip(), accepts)


def boolean() -> OptionCheck:
    """``True`` or ``False`` (not a truthy value)."""
    return OptionCheck("a bool", lambda value: isinstance(value, bool))


def string(*, non_empty: bool = True) -> OptionCheck:
    """A ``str``, non-empty unless ``non_empty=False``."""
    if non_empty:
        return OptionCheck(
            "a non-empty string", lambda value: isinstance(value, str) and bool(value)
        )
    return OptionCheck("a string", lambda value: isinstance(value, str))


def instance_of(*kinds: type[object], description: str | None = None) -> OptionCheck:
    """An instance of one of ``kinds``."""
    if not kinds:
        raise ConfigurationError("instance_of needs at least one type", option="kinds", value=kinds)
    text = description or " or ".join(_article(kind.__name__) for kind in kinds)
    return OptionCheck(text, lambda value: isinstance(value, kinds))


def callable_value() -> OptionCheck:
    """Anything callable."""
    return OptionCheck("callable", callable)


def has_method(*names: str, description: str | None = None) -> OptionCheck:
    """An object with callable attributes ``names`` (a structural protocol check)."""

    def accepts(value: object) -> bool:
        return all(callable(getattr(value, name, None)) for name in names)

    listed = ", ".join(f"{name}()" for name in names)
    return OptionCheck(description or f"an object with {listed}", accepts)


def one_of(*choices: object) -> OptionCheck:
    """Exactly one of ``choices`` (compared with ``==``, and by type, so ``True`` is not ``1``)."""

    def accepts(value: object) -> bool:
        return any(type(value) is type(choice) and value == choice for choice in choices)

    return OptionCheck("one of " + ", ".join(repr(choice) for choice in choices), accepts)


def optional(check: OptionCheck) -> OptionCheck:
    """``None``, or what ``check`` takes."""
    inner = check.accepts
    return OptionCheck(f"{check.description} or None", lambda value: value is None or inner(value))


def sequence_of(check: OptionCheck, *, non_empty: bool = False) -> OptionCheck:
    """A list or tuple (never a ``str`` or ``bytes``) whose every item ``check`` takes."""
    inner = check.accepts

    def accepts(value: object) -> bool:
        if isinstance(value, (str, bytes, bytearray)) or not isinstance(value, Sequence):
            return False
        if non_empty and not value:
            return False
        return all(inner(item) for item in value)

    items = check.description
    prefix = "a non-empty sequence" if non_empty else "a sequence"
    return OptionCheck(f"{prefix} whose items are each {items}", accepts)
