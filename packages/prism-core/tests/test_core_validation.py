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
    ToolParameterValidator,
    ToolSchemaRejectedError,
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


class _Compiled:
    def __init__(self, owner: Compiling, schema: JsonObject) -> None:
        self._owner = owner
        self._schema = schema

    def validate(self, value: object) -> ToolArgumentValidationResult:
        self._owner.validations += 1
        return self._owner.validate(self._schema, value)


class Compiling(RequiredAndTypes):
    """RequiredAndTypes that compiles each schema once; refuses schemas with ``"x-bad"``."""

    def __init__(self) -> None:
        super().__init__()
        self.compiled: list[JsonObject] = []
        self.validations = 0

    def compile(self, schema: JsonObject) -> _Compiled:
        if "x-bad" in schema:
            raise ToolSchemaRejectedError("x-bad is not allowed", "#/x-bad")
        if "x-broken" in schema:
            raise LookupError("the compiler broke")
        self.compiled.append(schema)
        return _Compiled(self, schema)


def test_a_compiling_validator_compiles_each_tool_schema_once() -> None:
    validator = Compiling()
    check = create_tool_parameter_validator(validator)
    assert isinstance(check, ToolParameterValidator)
    assert check.validator is validator
    read, other = _read(), _read()
    for _ in range(3):
        assert check(read, {"path": "a"}, _ctx()) is None
        outcome = check(other, {"path": 1}, _ctx())
        assert isinstance(outcome, ErrorInfo)
        assert outcome.message == "invalid arguments for read: /path: must be string"
        assert outcome.details["errors"] == [{"path": "/path", "message": "must be string"}]
    assert validator.compiled == [_SCHEMA, _SCHEMA]
    assert validator.validations == 6
    # The same tool again and again (the adapter's shortcut for the last tool).
    for _ in range(2):
        assert check(other, {"path": 1}, _ctx()) is not None
    schemaless = _read(None)
    for _ in range(2):
        assert check(schemaless, {}, _ctx()) is None


def test_a_schema_the_validator_refuses_blocks_every_call_of_the_tool() -> None:
    validator = Compiling()
    check = create_tool_parameter_validator(validator)
    bad = _read({"type": "object", "x-bad": True})
    broken = _read({"type": "object", "x-broken": True})
    for _ in range(2):
        refused = check(bad, {}, _ctx())
        assert isinstance(refused, ErrorInfo)
        assert refused.code == "schema_rejected"
        assert refused.message == (
            "tool read has a parameter schema Prism refuses: #/x-bad: x-bad is not allowed"
        )
        assert refused.details["errors"] == [
            {"path": "#/x-bad", "message": "schema rejected: x-bad is not allowed"}
        ]
        failed = check(broken, {}, _ctx())
        assert isinstance(failed, ErrorInfo)
        assert failed.code == "schema_rejected"
        assert "cannot be compiled (LookupError: the compiler broke)" in failed.message
    assert validator.compiled == []


def test_the_adapter_does_not_keep_tools_alive() -> None:
    import gc
    import weakref

    check = create_tool_parameter_validator(Compiling())
    tool = _read()
    assert check(tool, {"path": "a"}, _ctx()) is None
    dead = weakref.ref(tool)
    del tool
    gc.collect()
    assert dead() is None


def test_a_tool_that_cannot_be_weakly_referenced_is_checked_on_every_call() -> None:
    class Plain:
        __slots__ = ("name", "parameters")

        def __init__(self) -> None:
            self.name = "read"
            self.parameters = _SCHEMA

    validator = Compiling()
    check = create_tool_parameter_validator(validator)
    tool = Plain()
    for _ in range(2):
        assert check(tool, {"path": "a"}, _ctx()) is None  # type: ignore[arg-type]
    assert len(validator.compiled) == 2


def test_a_new_tool_at_a_reused_address_is_compiled_afresh() -> None:
    validator = Compiling()
    check = create_tool_parameter_validator(validator)
    assert check(_read(), {"path": "a"}, _ctx()) is None  # dies at once; its address may be reused
    assert check(_read({"type": "object", "x-bad": 1}), {}, _ctx()) is not None
    assert check(_read(), {"path": "a"}, _ctx()) is None
