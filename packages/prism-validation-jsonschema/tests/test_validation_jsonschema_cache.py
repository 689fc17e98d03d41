"""The compile-once cache, options and limits."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import attrs
import jsonschema_rs
import pytest

from prism.core import (
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
)
from prism.validation.jsonschema import (
    HARD_LIMITS,
    CacheInfo,
    JsonSchemaArgumentValidator,
    SchemaLimits,
    create_json_schema_tool_validator,
)

D7 = "http://json-schema.org/draft-07/schema#"


async def _noop(_args: Any, _ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text("ok")


def _context() -> ToolExecutionContext:
    return ToolExecutionContext(ToolCall(id="1", name="t", arguments={}))


def test_equal_schemas_compile_once_whatever_the_key_order() -> None:
    validator = JsonSchemaArgumentValidator()
    first = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 1}}}
    second = {"properties": {"a": {"minimum": 1, "type": "integer"}}, "type": "object"}
    assert validator.validate(first, {"a": 1}).ok
    assert not validator.validate(second, {"a": 0}).ok
    assert validator.cache_info() == CacheInfo(hits=1, misses=1, maxsize=256, currsize=1)


def test_eviction_drops_the_least_recently_used_schema() -> None:
    validator = JsonSchemaArgumentValidator(cache_size=2)
    a, b, c = ({"const": n} for n in range(3))
    validator.validate(a, 0)
    validator.validate(b, 1)
    validator.validate(a, 0)  # a is now the most recent
    validator.validate(c, 2)  # evicts b
    assert validator.cache_info().currsize == 2
    misses = validator.cache_info().misses
    validator.validate(a, 0)
    assert validator.cache_info().misses == misses
    validator.validate(b, 1)
    assert validator.cache_info().misses == misses + 1


def _live_draft7_validators() -> int:
    # Each compiled draft-07 schema is one jsonschema-rs validator; gc tracks them all.
    gc.collect()
    return sum(type(obj) is jsonschema_rs.Draft7Validator for obj in gc.get_objects())


def test_an_evicted_compiled_validator_is_released() -> None:
    validator = JsonSchemaArgumentValidator(cache_size=1)
    before = _live_draft7_validators()
    validator.validate({"$schema": D7, "const": 1}, 1)
    assert _live_draft7_validators() == before + 1
    validator.validate({"$schema": D7, "const": 2}, 2)  # evicts the first
    assert _live_draft7_validators() == before + 1
    assert validator.cache_info().currsize == 1


def test_refused_schemas_are_cached_too() -> None:
    validator = JsonSchemaArgumentValidator()
    bad = {"pattern": "(a)\\1"}
    validator.validate(bad, "a")
    validator.validate(bad, "a")
    assert validator.cache_info().misses == 1
    assert validator.cache_info().hits == 1


def test_tool_hot_path_does_not_reserialise_a_known_tool() -> None:
    check = create_json_schema_tool_validator()
    tool = ToolDefinition(name="t", execute=_noop, parameters={"type": "object"})
    for _ in range(5):
        assert check(tool, {}, _context()) is None
    info = check.cache_info()
    # One compile; each of the five calls then validates through the compiled schema.
    assert (info.misses, info.hits) == (1, 5)


def test_a_new_tool_definition_with_the_same_schema_reuses_the_compiled_function() -> None:
    check = create_json_schema_tool_validator()
    one = ToolDefinition(name="t", execute=_noop, parameters={"type": "object"})
    two = attrs.evolve(one, description="changed")
    check(one, {}, _context())
    check(two, {}, _context())
    assert check.cache_info().misses == 1


def test_a_tool_whose_schema_was_evicted_recompiles() -> None:
    check = create_json_schema_tool_validator(cache_size=1)
    one = ToolDefinition(name="one", execute=_noop, parameters={"type": "object"})
    two = ToolDefinition(name="two", execute=_noop, parameters={"type": "array"})
    assert check(one, {}, _context()) is None
    assert check(two, [], _context()) is None  # type: ignore[arg-type]
    # A valid call: the adapter's own check of the tool (kept with the tool) says so.
    assert check(one, {}, _context()) is None
    assert check.cache_info().misses == 2
    # Asked why a call is refused, the evicted schema is compiled again.
    refused = check(one, [], _context())  # type: ignore[arg-type]
    assert refused is not None
    assert "must be object" in refused.message
    assert check.cache_info().misses == 3


def test_the_validator_does_not_keep_tools_alive() -> None:
    check = create_json_schema_tool_validator()
    tool = ToolDefinition(name="t", execute=_noop, parameters={"type": "object"})
    check(tool, {}, _context())
    dead = weakref.ref(tool)
    del tool
    gc.collect()
    assert dead() is None


def test_a_new_tool_at_a_dead_tools_address_gets_its_own_schema() -> None:
    # The hot path is keyed by identity; CPython reuses the address of a dead
    # object, so a new tool often lands where the last one was.
    check = create_json_schema_tool_validator()
    for n in range(20):
        tool = ToolDefinition(
            name="t", execute=_noop, parameters={"type": "object", "maxProperties": n}
        )
        assert check(tool, dict.fromkeys(map(str, range(n)), 1), _context()) is None
        assert check(tool, dict.fromkeys(map(str, range(n + 1)), 1), _context()) is not None
        gone = weakref.ref(tool)
        del tool
        if gone() is not None:  # only a cycle keeps it: a full collection is 100+ ms
            gc.collect()


def test_missing_schema_allow_and_reject() -> None:
    tool = ToolDefinition(name="t", execute=_noop)
    assert create_json_schema_tool_validator()(tool, {}, _context()) is None
    refused = create_json_schema_tool_validator(missing_schema="reject")(tool, {}, _context())
    assert refused is not None
    assert refused.code == "missing_schema"


def test_refusals_carry_codes_and_details() -> None:
    check = create_json_schema_tool_validator()
    tool = ToolDefinition(
        name="t",
        execute=_noop,
        parameters={"type": "object", "properties": {"a": {"type": "integer"}}},
    )
    info = check(tool, {"a": "x"}, _context())
    assert info is not None
    assert info.code == "invalid_arguments"
    assert info.message == "invalid arguments for t: data.a: must be integer (rule: type)"
    assert info.details["errors"] == [{"path": "data.a", "message": "must be integer (rule: type)"}]
    evil = ToolDefinition(name="e", execute=_noop, parameters={"$ref": "http://127.0.0.1/x"})
    info = check(evil, {}, _context())
    assert info is not None
    assert info.code == "schema_rejected"
    assert "not fragment-local" in info.message


def test_defaults_and_hard_caps() -> None:
    limits = SchemaLimits()
    assert attrs.asdict(limits) == {
        "max_schema_bytes": 256 * 1024,
        "max_depth": 64,
        "max_keywords": 10_000,
        "max_refs": 128,
        "max_instance_depth": 64,
        "max_instance_properties": 10_000,
        "max_string_length": 1_000_000,
        "max_array_length": 100_000,
        "max_schema_work": 50_000,
        "max_validation_work": 1_000_000,
        "max_regex_work": 8_000_000,
    }
    assert HARD_LIMITS["max_schema_bytes"] == 1024 * 1024
    assert HARD_LIMITS["max_depth"] == 128
    assert HARD_LIMITS["max_keywords"] == 100_000
    assert HARD_LIMITS["max_refs"] == 1_024
    assert SchemaLimits(**HARD_LIMITS) is not None


def test_cache_clear_resets() -> None:
    validator = JsonSchemaArgumentValidator()
    validator.validate({"type": "string"}, "x")
    validator.cache_clear()
    assert validator.cache_info() == CacheInfo(hits=0, misses=0, maxsize=256, currsize=0)


def test_hard_limits_cannot_be_raised_at_run_time() -> None:
    with pytest.raises(TypeError):
        HARD_LIMITS["max_depth"] = 10_000  # type: ignore[index]
