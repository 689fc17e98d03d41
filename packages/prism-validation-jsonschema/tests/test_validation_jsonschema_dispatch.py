"""The adapter plugged into the real dispatcher."""

from __future__ import annotations

import pytest

from prism.core import (
    AssistantMessage,
    DispatchOptions,
    JsonObject,
    ScriptedProvider,
    TextContent,
    ToolCall,
    ToolExecutionBlocked,
    ToolResultMessage,
    create_agent,
    create_rule_permission_policy,
    create_tool_parameter_validator,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.core.ledger import RunLedger
from prism.core.testing import RecordingSink, RecordingTool, assert_tool_dispatch_conforms
from prism.validation.jsonschema import (
    JsonSchemaArgumentValidator,
    create_json_schema_tool_validator,
)

SCHEMA: JsonObject = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
    },
    "required": ["city"],
    "additionalProperties": False,
}


def _options(tool: RecordingTool, sink: RecordingSink | None = None) -> DispatchOptions:
    return DispatchOptions(
        registry=create_tool_registry([tool.definition]),
        permission=create_rule_permission_policy(allow=["tool:*:execute"]),
        validator=create_json_schema_tool_validator(),
        on_event=sink,
        ledger=RunLedger(),
    )


async def test_wiring_passes_the_core_conformance_kit() -> None:
    tool = RecordingTool(name="forecast", parameters=SCHEMA)
    validate = create_json_schema_tool_validator()
    definition = tool.definition

    def make_options() -> DispatchOptions:
        return DispatchOptions(
            registry=create_tool_registry([definition]),
            permission=create_rule_permission_policy(allow=["tool:*:execute"]),
            validator=validate,
        )

    await assert_tool_dispatch_conforms(make_options, definition, valid_arguments={"city": "Oslo"})


async def test_invalid_arguments_are_blocked_as_validation_failed_before_execute() -> None:
    tool = RecordingTool(name="forecast", parameters=SCHEMA)
    sink = RecordingSink()
    options = _options(tool, sink)
    call = ToolCall(id="c1", name="forecast", arguments={"city": "Oslo", "days": 30})
    result = await dispatch_tool_call(call, options)
    assert result.is_error
    assert result.joined_text == (
        "invalid arguments for forecast: data.days: must be smaller than or equal to 14 "
        "(rule: maximum)"
    )
    assert tool.calls == []
    [blocked] = sink.of_type(ToolExecutionBlocked)
    assert blocked.reason == "validation_failed"
    assert isinstance(options.ledger, RunLedger)
    assert options.ledger.records[0].status == "blocked"


async def test_valid_arguments_reach_the_tool_unchanged() -> None:
    tool = RecordingTool(name="forecast", parameters=SCHEMA)
    arguments = {"city": "Oslo", "days": 3}
    result = await dispatch_tool_call(
        ToolCall(id="c1", name="forecast", arguments=arguments), _options(tool)
    )
    assert not result.is_error
    assert [args for args, _ctx in tool.calls] == [{"city": "Oslo", "days": 3}]


async def test_a_tool_with_a_hostile_schema_is_blocked_not_crashed() -> None:
    tool = RecordingTool(name="evil", parameters={"$ref": "file:///etc/passwd"})
    result = await dispatch_tool_call(ToolCall(id="c", name="evil", arguments={}), _options(tool))
    assert result.is_error
    assert "parameter schema Prism refuses" in result.joined_text
    assert tool.calls == []


async def test_pollution_in_arguments_is_blocked_before_execute() -> None:
    tool = RecordingTool(name="open", parameters={"type": "object"})
    call = ToolCall(id="c", name="open", arguments={"a": {"__proto__": {"admin": True}}})
    result = await dispatch_tool_call(call, _options(tool))
    assert result.is_error
    assert "__proto__" in result.joined_text
    assert tool.calls == []


async def test_the_agent_runtime_blocks_invalid_model_calls() -> None:
    tool = RecordingTool(name="forecast", parameters=SCHEMA)
    provider = ScriptedProvider(
        [
            AssistantMessage(
                tool_calls=(
                    ToolCall(id="a", name="forecast", arguments={"city": "Oslo"}),
                    ToolCall(id="b", name="forecast", arguments={"city": ""}),
                )
            ),
            AssistantMessage(content=(TextContent(text="done"),)),
        ]
    )
    agent = create_agent(
        model="scripted",
        provider=provider,
        tools=[tool.definition],
        validator=create_json_schema_tool_validator(),
        permission=create_rule_permission_policy(allow=["tool:*:execute"]),
    )
    run = await agent.session().run("forecast please")
    results = [m for m in run.messages if isinstance(m, ToolResultMessage)]
    assert [r.result.is_error for r in results] == [False, True]
    assert (
        "data.city: must be longer than or equal to 1 characters" in results[1].result.joined_text
    )
    assert [args for args, _ctx in tool.calls] == [{"city": "Oslo"}]


async def test_the_protocol_validator_also_plugs_into_the_core_seam() -> None:
    tool = RecordingTool(name="forecast", parameters=SCHEMA)
    options = DispatchOptions(
        registry=create_tool_registry([tool.definition]),
        validator=create_tool_parameter_validator(JsonSchemaArgumentValidator()),
    )
    bad = ToolCall(id="c", name="forecast", arguments={"city": "Oslo", "extra": 1})
    result = await dispatch_tool_call(bad, options)
    assert result.is_error
    assert "data: must not contain {'extra'} properties" in result.joined_text
    assert tool.calls == []


async def test_a_dict_built_call_past_the_limits_is_blocked_on_the_written_checker() -> None:
    # SCHEMA is closed, small and in the subset whose written checker decides a
    # valid call without the engine. Each gate still fires: the limits first,
    # then the schema, with the ledger and the event of any other refusal; a
    # valid call runs.
    tool = RecordingTool(name="forecast", parameters=SCHEMA)
    sink = RecordingSink()
    options = _options(tool, sink)
    compiled = JsonSchemaArgumentValidator().compile(SCHEMA)
    assert compiled.quick_valid is not None
    assert compiled.quick_valid.__code__.co_filename == "<prism deciding checker>"
    refused = [
        ({"city": "Oslo", "days": 2**64}, "data.days: is an integer outside"),
        ({"city": "Oslo\ud800"}, "data.city: contains a lone surrogate"),
        ({"city": "Oslo", "days": "3"}, "data.days: must be integer (rule: type)"),
    ]
    for arguments, words in refused:
        call = ToolCall(id="c1", name="forecast", arguments=arguments)
        result = await dispatch_tool_call(call, options)
        assert result.is_error
        assert result.joined_text.startswith(f"invalid arguments for forecast: {words}")
    ok = await dispatch_tool_call(
        ToolCall(id="c2", name="forecast", arguments={"city": "Oslo", "days": 3}), options
    )
    assert not ok.is_error
    assert [arguments for arguments, _context in tool.calls] == [{"city": "Oslo", "days": 3}]
    assert [event.reason for event in sink.of_type(ToolExecutionBlocked)] == [
        "validation_failed"
    ] * 3
    assert isinstance(options.ledger, RunLedger)
    assert [record.status for record in options.ledger.records] == ["blocked"] * 3 + ["ok"]


# A schema the written checker decides, the same schema left to the engine
# (multipleOf: 1 adds nothing for integers), the calls, and which of them run.
_CITY: JsonObject = {"type": "string", "minLength": 1}
_DAYS: JsonObject = {"type": "integer", "minimum": 1, "maximum": 14}
_CODE: JsonObject = {"type": "string", "maxLength": 8, "pattern": "^[a-z]+$"}
_GATE_CASES = [
    (
        SCHEMA,
        {**SCHEMA, "properties": {"city": _CITY, "days": {**_DAYS, "multipleOf": 1}}},
        [
            {"city": "Oslo", "days": 3},
            {"city": "Oslo"},
            {"city": "", "days": 3},
            {"city": "Oslo", "days": 2**64},
            {"city": "Oslo", "days": 3, "extra": 1},
        ],
        [0, 1],
    ),
    (
        # A pattern (its matched strings kept) and every name present or not.
        {**SCHEMA, "properties": {"city": _CODE, "days": _DAYS}},
        {**SCHEMA, "properties": {"city": _CODE, "days": {**_DAYS, "multipleOf": 1}}},
        [
            {"city": "oslo", "days": 3},
            {"city": "oslo"},
            {"city": "oslo", "days": 3},
            {"city": "Oslo", "days": 3},
            {"city": "Oslo", "days": 3},
            {"city": "oslo\ud800", "days": 3},
            {"city": "osloosloo", "days": 3},  # past maxLength
            {"city": "oslo", "days": 15},
        ],
        [0, 1, 2],
    ),
]


@pytest.mark.parametrize(("schema", "engine_schema", "calls", "run"), _GATE_CASES)
async def test_a_call_decided_without_the_engine_passes_every_gate_an_engine_call_does(
    schema: JsonObject, engine_schema: JsonObject, calls: list[JsonObject], run: list[int]
) -> None:
    # The same calls through a schema the written checker decides and one it
    # leaves to the engine: the same permission gate first, the same events,
    # ledger records and results.
    written = JsonSchemaArgumentValidator().compile(schema).quick_valid
    assert written is not None
    assert written.__code__.co_filename == "<prism deciding checker>"
    quick = JsonSchemaArgumentValidator().compile(engine_schema).quick_valid
    assert quick is not None
    assert quick.__code__.co_filename == "<prism closed checker>"
    seen = []
    for each in (schema, engine_schema):
        tool = RecordingTool(name="forecast", parameters=each)
        sink = RecordingSink()
        options = _options(tool, sink)
        texts = []
        for number, arguments in enumerate(calls):
            result = await dispatch_tool_call(
                ToolCall(id=f"c{number}", name="forecast", arguments=arguments), options
            )
            texts.append((result.is_error, result.joined_text))
        denied = DispatchOptions(
            registry=options.registry,
            permission=create_rule_permission_policy(deny=["tool:*:execute"]),
            validator=options.validator,
            on_event=sink,
            ledger=options.ledger,
        )
        refused = await dispatch_tool_call(
            ToolCall(id="d", name="forecast", arguments=calls[0]), denied
        )
        texts.append((refused.is_error, refused.joined_text))
        assert isinstance(options.ledger, RunLedger)
        records = [(r.call_id, r.status) for r in options.ledger.records]
        events = [(type(event).__name__, getattr(event, "reason", None)) for event in sink.events]
        seen.append((texts, records, events, [args for args, _ctx in tool.calls]))
    decided, engine = seen
    assert decided == engine
    assert decided[3] == [calls[index] for index in run]
    statuses = [status for _id, status in decided[1]]
    assert statuses == ["ok" if index in run else "blocked" for index in range(len(calls))] + [
        "blocked"
    ]
