"""The argument-validation seam: validators plug into dispatch as a ``ToolValidator``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Literal, Protocol, TypeAlias, runtime_checkable

import attrs

from ._json import JsonObject, JsonValue
from ._options import has_method, one_of
from ._text import clip
from ._tools import ToolDefinition, ToolExecutionContext

__all__ = [
    "ErrorInfo",
    "ToolArgumentValidationError",
    "ToolArgumentValidationResult",
    "ToolArgumentValidator",
    "ToolValidator",
    "create_tool_parameter_validator",
]

_MAX_REPORTED_ERRORS = 8


@attrs.frozen(kw_only=True)
class ErrorInfo:
    """A structured error: what the model reads, plus a code and details for hosts."""

    message: str
    code: str | None = None
    details: Mapping[str, JsonValue] = attrs.field(factory=dict)


ValidatorOutcome: TypeAlias = str | ErrorInfo | None
ToolValidator: TypeAlias = Callable[
    [ToolDefinition, JsonObject, ToolExecutionContext],
    "ValidatorOutcome | Awaitable[ValidatorOutcome]",
]
"""Checks a call's arguments: ``None`` passes; a string or :class:`ErrorInfo` blocks it."""


@attrs.frozen(kw_only=True)
class ToolArgumentValidationError:
    """One reason arguments were refused; ``path`` points into the arguments."""

    message: str
    path: str | None = None


def _errors(
    value: Iterable[ToolArgumentValidationError],
) -> tuple[ToolArgumentValidationError, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class ToolArgumentValidationResult:
    """The outcome of validating arguments against a schema."""

    ok: bool
    errors: tuple[ToolArgumentValidationError, ...] = attrs.field(default=(), converter=_errors)


@runtime_checkable
class ToolArgumentValidator(Protocol):
    """Validates a value against a JSON Schema; never raises for bad schemas or values."""

    def validate(self, schema: JsonObject, value: object) -> ToolArgumentValidationResult:
        """Validate ``value`` against ``schema``."""
        ...


def describe_validation_errors(
    tool_name: str, errors: tuple[ToolArgumentValidationError, ...]
) -> str:
    """One bounded message naming each failing path, for the model to read."""
    parts = []
    for error in errors[:_MAX_REPORTED_ERRORS]:
        parts.append(f"{error.path}: {error.message}" if error.path else error.message)
    if len(errors) > _MAX_REPORTED_ERRORS:
        parts.append(f"... and {len(errors) - _MAX_REPORTED_ERRORS} more")
    text = "; ".join(parts) or "arguments were refused"
    return clip(f"invalid arguments for {tool_name}: {text}")


def create_tool_parameter_validator(
    validator: ToolArgumentValidator,
    *,
    missing_schema: Literal["allow", "reject"] = "allow",
) -> ToolValidator:
    """Adapt a :class:`ToolArgumentValidator` into a dispatch ``ToolValidator``.

    Each call's arguments are validated against the tool's ``parameters``. A tool
    without a schema passes when ``missing_schema`` is ``"allow"`` and is refused
    when it is ``"reject"``.

    Raises:
        ConfigurationError: ``missing_schema`` is unknown or ``validator`` has no ``validate``.
    """
    owner = "create_tool_parameter_validator"
    has_method("validate").check(owner, "validator", validator)
    one_of("allow", "reject").check(owner, "missing_schema", missing_schema)
    validate = validator.validate
    reject_missing = missing_schema == "reject"

    def check(
        tool: ToolDefinition, arguments: JsonObject, _context: ToolExecutionContext
    ) -> ErrorInfo | None:
        schema = tool.parameters
        if schema is None:
            if reject_missing:
                return ErrorInfo(
                    message=(
                        f"tool {tool.name} declares no parameter schema, and schemas are required"
                    ),
                    code="missing_schema",
                )
            return None
        outcome = validate(schema, arguments)
        if outcome.ok:
            return None
        return ErrorInfo(
            message=describe_validation_errors(tool.name, outcome.errors),
            code="invalid_arguments",
            details={
                "errors": [
                    {"path": e.path, "message": e.message}
                    for e in outcome.errors[:_MAX_REPORTED_ERRORS]
                ]
            },
        )

    return check
