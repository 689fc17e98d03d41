"""The parameter-validation seam, driven by a small real ToolArgumentValidator."""

from __future__ import annotations

import pytest

from prism.core import (
    ConfigurationError,
    DispatchOptions,
    ErrorInfo,
    JsonObject,
    ToolArgumentValidationError,
    ToolArgumentValidationResult,
    ToolArgumentValidator,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    create_tool_parameter_validator,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.core.ledger import RunLedger
from prism.core.testing import RecordingTool

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


class RequiredAndTypes:
    """Checks ``required`` and the ``type`` of each listed property; nothing else."""

    def __init__(self) -> None:
        self.seen: list[tuple[JsonObject, object]] = []

    def validate(self, schema: JsonObject, value: object) -> ToolArgumentValidationResult:
        self.seen.append((schema, value))
        if not isinstance(value, dict):
            return ToolArgumentValidationResult(
                ok=False, errors=(ToolArgumentValidationError(message="must be an object"),)
            )
        errors = []
        required = schema.get("required", [])
        assert isinstance(required, list)
        for name in required:
            if name not in value:
                errors.append(ToolArgumentValidationError(message=f"{name} is required"))
        properties = schema.get("properties", {})
        assert isinstance(properties, dict)
        for name, sub in properties.items():
            assert isinstance(sub, dict)
            kind = sub.get("type")
            if name in value and isinstance(kind, str):
                item = value[name]
                wrong_bool = isinstance(item, bool) and kind in ("integer", "number")
                if wrong_bool or not isinstance(item, _TYPES[kind]):
                    errors.append(
                        ToolArgumentValidationError(message=f"must be {kind}", path=f"/{name}")
                    )
        return ToolArgumentValidationResult(ok=not errors, errors=tuple(errors))


_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
    "required": ["path"],
}


def _ctx() -> ToolExecutionContext:
    return ToolExecutionContext(ToolCall(id="c", name="read", arguments={}))


def _read(schema: JsonObject | None = _SCHEMA) -> ToolDefinition:
    return ToolDefinition(name="read", execute=RecordingTool().execute, parameters=schema)


def test_the_test_validator_satisfies_the_protocol() -> None:
    assert isinstance(RequiredAndTypes(), ToolArgumentValidator)


def test_valid_arguments_pass() -> None:
    validator = RequiredAndTypes()
    check = create_tool_parameter_validator(validator)
    assert check(_read(), {"path": "a.txt", "limit": 3}, _ctx()) is None
    assert validator.seen == [(_SCHEMA, {"path": "a.txt", "limit": 3})]


def test_invalid_arguments_give_error_info_naming_each_path() -> None:
    check = create_tool_parameter_validator(RequiredAndTypes())
    outcome = check(_read(), {"limit": "three"}, _ctx())
    assert isinstance(outcome, ErrorInfo)
    assert outcome.code == "invalid_arguments"
    assert "read" in outcome.message
    assert "path is required" in outcome.message
    assert "/limit: must be integer" in outcome.message
    assert outcome.details["errors"] == [
        {"path": None, "message": "path is required"},
        {"path": "/limit", "message": "must be integer"},
    ]


def test_missing_schema_allow_skips_validation() -> None:
    validator = RequiredAndTypes()
    check = create_tool_parameter_validator(validator, missing_schema="allow")
    assert check(_read(None), {"anything": 1}, _ctx()) is None
    assert validator.seen == []


def test_missing_schema_reject_refuses_tools_without_a_schema() -> None:
    check = create_tool_parameter_validator(RequiredAndTypes(), missing_schema="reject")
    outcome = check(_read(None), {}, _ctx())
    assert isinstance(outcome, ErrorInfo)
    assert outcome.code == "missing_schema"
    assert "read" in outcome.message
    assert check(_read(), {"path": "x"}, _ctx()) is None


def test_many_errors_are_bounded_in_the_message() -> None:
    class Noisy:
        def validate(self, schema: JsonObject, value: object) -> ToolArgumentValidationResult:
            errors = tuple(
                ToolArgumentValidationError(message="x" * 500, path=f"/{i}") for i in range(100)
            )
            return ToolArgumentValidationResult(ok=False, errors=errors)

    outcome = create_tool_parameter_validator(Noisy())(_read(), {}, _ctx())
    assert isinstance(outcome, ErrorInfo)
    assert len(outcome.message) <= 2000
    errors = outcome.details["errors"]
    assert isinstance(errors, list)
    assert len(errors) == 8


@pytest.mark.parametrize("value", ["maybe", None, True])
def test_bad_missing_schema_option_raises_naming_it(value: object) -> None:
    with pytest.raises(ConfigurationError, match="missing_schema"):
        create_tool_parameter_validator(RequiredAndTypes(), missing_schema=value)  # type: ignore[arg-type]


def test_validator_without_validate_method_raises() -> None:
    with pytest.raises(ConfigurationError, match="validate"):
        create_tool_parameter_validator(object())  # type: ignore[arg-type]


async def test_schema_validation_through_dispatch_blocks_before_execute() -> None:
    tool = RecordingTool(name="read", parameters=_SCHEMA)
    ledger = RunLedger()
    options = DispatchOptions(
        registry=create_tool_registry([tool.definition]),
        validator=create_tool_parameter_validator(RequiredAndTypes(), missing_schema="reject"),
        ledger=ledger,
    )
    bad = await dispatch_tool_call(ToolCall(id="1", name="read", arguments={}), options)
    good = await dispatch_tool_call(ToolCall(id="2", name="read", arguments={"path": "a"}), options)
    assert bad.is_error
    assert "path is required" in bad.joined_text
    assert bad.details["blocked_reason"] == "validation_failed"
    assert not good.is_error
    assert [args for args, _ in tool.calls] == [{"path": "a"}]
    assert [(r.status, r.blocked_reason) for r in ledger.records] == [
        ("blocked", "validation_failed"),
        ("ok", None),
    ]


async def test_a_validator_that_raises_blocks_the_call_through_dispatch() -> None:
    class Exploding:
        def validate(self, schema: JsonObject, value: object) -> ToolArgumentValidationResult:
            raise RecursionError("schema too deep")

    tool = RecordingTool(name="read", parameters=_SCHEMA)
    options = DispatchOptions(
        registry=create_tool_registry([tool.definition]),
        validator=create_tool_parameter_validator(Exploding()),
    )
    result = await dispatch_tool_call(ToolCall(id="1", name="read", arguments={}), options)
    assert result.is_error
    assert result.details["blocked_reason"] == "validation_failed"
    assert tool.calls == []
