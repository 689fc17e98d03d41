"""The argument-validation seam: validators plug into dispatch as a ``ToolValidator``."""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Literal, Protocol, TypeAlias, runtime_checkable

import attrs

from ._content import NO_TEXT_BOUND
from ._errors import ToolSchemaRejectedError
from ._json import JsonObject, JsonValue
from ._options import has_method, one_of
from ._text import MESSAGE_LIMIT, REASON_LIMIT, clip, describe_exception
from ._tools import ToolDefinition, ToolExecutionContext

__all__ = [
    "CompiledArgumentSchema",
    "ErrorInfo",
    "ToolArgumentValidationError",
    "ToolArgumentValidationResult",
    "ToolArgumentValidator",
    "ToolParameterValidator",
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


@runtime_checkable
class CompiledArgumentSchema(Protocol):
    """One schema, compiled once by a validator's ``compile``, for validating many values.

    A compiled schema may also have ``text_bound``, a tuple ``(chars, nesting,
    is_valid)``: every value :meth:`ToolCall.from_json` parses from a text of
    at most ``chars`` characters and ``nesting`` brackets is within all of the
    validator's instance limits and per-call budgets, and ``is_valid(value)``
    is then the schema's verdict on it (``False``: refused, and ``validate``
    says why). :class:`ToolParameterValidator` uses it for such calls instead
    of ``validate``; it must never be looser than ``validate``.

    It may also have ``quick_valid``, a function answering ``True`` only for a
    value ``validate`` accepts (anything else: ``validate`` decides). The
    adapter asks it first for every other call, which saves the cost of a
    ``validate`` call around the same check on a valid call.
    """

    def validate(self, value: object) -> ToolArgumentValidationResult:
        """Validate ``value``; never raises for a bad value."""
        ...


def _never_valid(_value: object) -> bool:  # pragma: no cover - guarded by chars = -1
    return False


def _not_quick(_value: object) -> bool:
    return False


class _Slot:
    """What the adapter knows of one tool: its compiled schema, or why it has none."""

    __slots__ = ("chars", "check", "nesting", "quick", "ref", "refusal", "refused", "valid")

    def __init__(
        self,
        ref: Callable[[], ToolDefinition | None],
        check: Callable[[object], ToolArgumentValidationResult] | None,
        refusal: tuple[str | None, str] | None,
        text_bound: object = None,
        quick: object = None,
    ) -> None:
        self.ref = ref
        # The compiled schema's validate, or None (no schema, or a refused one).
        self.check = check
        # (path, reason) of a refused schema.
        self.refusal = refusal
        # The last refusal and its ErrorInfo: a compiled schema may answer the
        # same refusal with the same result, and building an ErrorInfo costs
        # about a third of the engine's own refusal.
        self.refused: tuple[object, ErrorInfo | None] = (None, None)
        # The compiled schema's text_bound: a call parsed from a text within
        # chars and nesting gets valid(arguments), without a walk. -1: none.
        self.chars = -1
        self.nesting = -1
        self.valid: Callable[[object], bool] = _never_valid
        if type(text_bound) is tuple and len(text_bound) == 3:
            chars, nesting, valid = text_bound
            if type(chars) is int and type(nesting) is int and callable(valid):
                self.chars = chars
                self.nesting = nesting
                self.valid = valid
        # The compiled schema's quick_valid: True only for a value validate accepts.
        self.quick: Callable[[object], object] = quick if callable(quick) else _not_quick


class _Unhashed:
    """A validator without ``compile``: its ``validate(schema, value)`` on every call."""

    __slots__ = ("_schema", "_validate")

    def __init__(
        self,
        validate: Callable[[JsonObject, object], ToolArgumentValidationResult],
        schema: JsonObject,
    ) -> None:
        self._validate = validate
        self._schema = schema

    def validate(self, value: object) -> ToolArgumentValidationResult:
        return self._validate(self._schema, value)


def _no_tool() -> None:
    return None


class ToolParameterValidator:
    """The dispatch ``ToolValidator`` made from a :class:`ToolArgumentValidator`.

    Call it as ``validator(tool, arguments, context)``: it returns ``None`` when
    the arguments pass and an :class:`ErrorInfo` when they do not (code
    ``invalid_arguments``, a message naming up to eight failing paths, bounded
    to 2,000 characters, and ``details["errors"]``), when the tool's schema is
    refused (code ``schema_rejected``) or when a schema is required and missing
    (code ``missing_schema``).

    A validator that also has ``compile(schema)`` (returning a
    :class:`CompiledArgumentSchema`, raising a :class:`ToolSchemaRejectedError` for
    a schema it refuses) has each tool's schema compiled once, on the tool's first
    call, and kept by the :class:`ToolDefinition`'s identity: later calls go
    straight to the compiled schema. Any other validator gets
    ``validate(tool.parameters, arguments)`` on every call. Either way a tool's
    ``parameters`` must not be mutated in place after its first call; register
    a new ``ToolDefinition`` instead (``attrs.evolve``). Tools are not kept
    alive by the adapter.

    A call :meth:`ToolCall.from_json` parsed, passed with its own ``arguments``
    and within the compiled schema's ``text_bound`` (see
    :class:`CompiledArgumentSchema`), gets that bound's verdict with no walk;
    any other call asks the compiled schema's ``quick_valid`` first, when it
    has one. The adapter keeps both functions for as long as it keeps the tool.

    Args:
        validator: checks a value against a schema.
        missing_schema: ``"allow"`` passes a tool without ``parameters``;
            ``"reject"`` refuses its calls.

    Raises:
        ConfigurationError: ``missing_schema`` is unknown or ``validator`` has
            no ``validate``.
    """

    __slots__ = ("__weakref__", "_compile", "_last", "_reject_missing", "_slots", "_validator")

    def __init__(
        self,
        validator: ToolArgumentValidator,
        *,
        missing_schema: Literal["allow", "reject"] = "allow",
    ) -> None:
        owner = type(self).__name__
        has_method("validate").check(owner, "validator", validator)
        _MISSING.check(owner, "missing_schema", missing_schema)
        self._validator = validator
        self._reject_missing = missing_schema == "reject"
        compile_schema = getattr(validator, "compile", None)
        self._compile: Callable[[JsonObject], CompiledArgumentSchema] | None = (
            compile_schema if callable(compile_schema) else None
        )
        self._slots: dict[int, _Slot] = {}
        # The last tool's slot: one weak reference call (its ref, set before
        # the slot is ever seen here) instead of a dictionary lookup when a
        # tool is called again and again.
        self._last = _Slot(_no_tool, None, None)

    @property
    def validator(self) -> ToolArgumentValidator:
        """The :class:`ToolArgumentValidator` this adapter calls."""
        return self._validator

    def __call__(
        self, tool: ToolDefinition, arguments: JsonObject, context: ToolExecutionContext
    ) -> ErrorInfo | None:
        slot = self._last
        # Read, then called (as slot.valid and slot.quick below).
        ref = slot.ref
        if ref() is not tool:
            slot = self._find(tool)
        try:
            # A call Prism parsed from the model's JSON text (ToolCall.from_json),
            # whose text alone proves these very arguments within every limit:
            # the engine's verdict, without walking them.
            bound = context.call._text_bound
            # (A call with no text behind it fails the first test: it costs one
            # identity check, not two comparisons with sys.maxsize.)
            if (
                bound is not NO_TEXT_BOUND
                and context.call.arguments is arguments
                and bound[0] <= slot.chars
                and bound[1] <= slot.nesting
            ):
                # Read, then called: a call of slot.valid(...) looks the slot up
                # as a method, which the interpreter cannot specialise.
                valid = slot.valid
                if valid(arguments):
                    return None
            else:
                # Any other call: the compiled schema's own check, without validate.
                quick = slot.quick
                if quick(arguments) is True:
                    return None
        except Exception:  # not a dispatch context, or the engine could not say
            pass
        check = slot.check
        if check is not None:
            outcome = check(arguments)
            if outcome.ok:
                return None
            refused = slot.refused
            if refused[0] is outcome:
                return refused[1]
            info = _invalid(tool.name, outcome.errors)
            slot.refused = (outcome, info)
            return info
        if slot.refusal is not None:
            return _schema_rejected(tool.name, *slot.refusal)
        if self._reject_missing:
            return ErrorInfo(
                message=f"tool {tool.name} declares no parameter schema, and schemas are required",
                code="missing_schema",
            )
        return None

    def _find(self, tool: ToolDefinition) -> _Slot:
        """``tool``'s slot (made on its first call), remembered as the last one seen."""
        slot = self._slots.get(id(tool))
        if slot is None or slot.ref() is not tool:
            slot = self._slot(tool)
        self._last = slot
        return slot

    def _slot(self, tool: ToolDefinition) -> _Slot:
        """Compile ``tool``'s schema (or note why not) and remember it by the tool's identity."""
        schema = tool.parameters
        check: Callable[[object], ToolArgumentValidationResult] | None = None
        refusal: tuple[str | None, str] | None = None
        text_bound: object = None
        quick: object = None
        if schema is not None:
            if self._compile is None:
                check = _Unhashed(self._validator.validate, schema).validate
            else:
                try:
                    compiled = self._compile(schema)
                    check = compiled.validate
                    text_bound = getattr(compiled, "text_bound", None)
                    quick = getattr(compiled, "quick_valid", None)
                except ToolSchemaRejectedError as exc:
                    refusal = (exc.path, exc.reason)
                except Exception as exc:
                    refusal = (None, f"it cannot be compiled ({describe_exception(exc)})")
        slots = self._slots
        ident = id(tool)
        slot = _Slot(_no_tool, check, refusal, text_bound, quick)

        def forget(_ref: object) -> None:
            if slots.get(ident) is slot:
                del slots[ident]

        try:
            slot.ref = weakref.ref(tool, forget)
        except TypeError:  # not weak-referenceable: checked again on every call
            return slot
        slots[ident] = slot
        return slot


_MISSING = one_of("allow", "reject")


def _invalid(tool_name: str, errors: tuple[ToolArgumentValidationError, ...]) -> ErrorInfo:
    if len(errors) == 1:
        # The common refusal: one error, one message, built once.
        error = errors[0]
        path = error.path
        detail = error.message
        text = (
            f"invalid arguments for {tool_name}: {path}: {detail}"
            if path
            else (f"invalid arguments for {tool_name}: {detail}")
        )
        return ErrorInfo(
            message=text if len(text) <= MESSAGE_LIMIT else clip(text),
            code="invalid_arguments",
            details={"errors": [{"path": path, "message": detail}]},
        )
    return ErrorInfo(
        message=describe_validation_errors(tool_name, errors),
        code="invalid_arguments",
        details={
            "errors": [
                {"path": e.path, "message": e.message} for e in errors[:_MAX_REPORTED_ERRORS]
            ]
        },
    )


def _schema_rejected(tool_name: str, path: str | None, reason: str) -> ErrorInfo:
    where = f"{path}: " if path else ""
    message = clip(f"schema rejected: {reason}", REASON_LIMIT)
    reason = message.removeprefix("schema rejected: ")
    return ErrorInfo(
        message=clip(f"tool {tool_name} has a parameter schema Prism refuses: {where}{reason}"),
        code="schema_rejected",
        details={"errors": [{"path": path, "message": message}]},
    )


def create_tool_parameter_validator(
    validator: ToolArgumentValidator,
    *,
    missing_schema: Literal["allow", "reject"] = "allow",
) -> ToolParameterValidator:
    """Adapt a :class:`ToolArgumentValidator` into a dispatch ``ToolValidator``.

    The :class:`ToolParameterValidator` it returns validates each call's
    arguments against the tool's ``parameters``, compiling each schema once when
    the validator can (``compile``). A tool without a schema passes when
    ``missing_schema`` is ``"allow"`` and is refused when it is ``"reject"``.

    Raises:
        ConfigurationError: ``missing_schema`` is unknown or ``validator`` has no ``validate``.
    """
    owner = "create_tool_parameter_validator"
    has_method("validate").check(owner, "validator", validator)
    _MISSING.check(owner, "missing_schema", missing_schema)
    return ToolParameterValidator(validator, missing_schema=missing_schema)
