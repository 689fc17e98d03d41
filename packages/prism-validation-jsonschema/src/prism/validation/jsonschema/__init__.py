"""prism.validation.jsonschema: hardened JSON Schema validation for untrusted schemas.

Tool schemas come from MCP servers and other untrusted places, and arguments
come from a model. This package screens every schema (size, depth, member and
``$ref`` limits; fragment-local references only, each landing on a schema
location, nothing is ever fetched; no pollution keys, cycles, non-finite numbers
or silently ignored keywords), measures the work it can cause and refuses what
cannot be bounded, compiles each distinct schema once into an LRU cache, and
bounds every instance and its cost before validating it. Every dialect (JSON
Schema 2020-12, MCP's default, 2019-09 and draft-04/06/07) runs on jsonschema-rs:
no schema becomes code, and every pattern runs in linear time.

Example::

    import trio
    from prism.core import (
        DispatchOptions, ToolCall, ToolDefinition, ToolResult,
        create_tool_registry, dispatch_tool_call,
    )
    from prism.validation.jsonschema import create_json_schema_tool_validator

    async def weather(args, ctx):
        return ToolResult.text(f"sunny in {args['city']}")

    tool = ToolDefinition(
        name="weather",
        execute=weather,
        parameters={
            "type": "object",
            "properties": {"city": {"type": "string", "pattern": "^[A-Za-z ]+$"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    )
    options = DispatchOptions(
        registry=create_tool_registry([tool]),
        validator=create_json_schema_tool_validator(),
    )
    bad = ToolCall(id="1", name="weather", arguments={"city": 42})
    result = trio.run(dispatch_tool_call, bad, options)
    assert result.is_error
    # result text: "invalid arguments for weather: data.city: must be string (rule: type)"
"""

from ._errors import SchemaRejectedError as SchemaRejectedError
from ._limits import HARD_CACHE_SIZE as HARD_CACHE_SIZE
from ._limits import HARD_LIMITS as HARD_LIMITS
from ._limits import CacheInfo as CacheInfo
from ._limits import SchemaLimits as SchemaLimits
from ._validator import CompiledSchema as CompiledSchema
from ._validator import JsonSchemaArgumentValidator as JsonSchemaArgumentValidator
from ._validator import JsonSchemaToolValidator as JsonSchemaToolValidator
from ._validator import (
    create_json_schema_tool_validator as create_json_schema_tool_validator,
)

__all__ = [
    "HARD_CACHE_SIZE",
    "HARD_LIMITS",
    "CacheInfo",
    "CompiledSchema",
    "JsonSchemaArgumentValidator",
    "JsonSchemaToolValidator",
    "SchemaLimits",
    "SchemaRejectedError",
    "create_json_schema_tool_validator",
]
