"""The OpenAI Agents SDK: Prism's tools as function tools, and gates around existing ones.

Needs the ``openai-agents`` extra.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

from agents import FunctionTool
from agents.tracing import get_current_trace

from prism.core import ParsedJson, ToolResult, create_tool_name_map

from ._gate import PrismGate, result_text, wrapped_tool

if TYPE_CHECKING:
    from agents.tool_context import ToolContext

    from prism.core import JsonObject, ToolDefinition

__all__ = ["gate_function_tool", "prism_function_tools"]

_EMPTY_OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


def _run_id(ctx: ToolContext[Any]) -> str | None:
    """The run's id: its ``RunConfig.trace_id``, else the trace the run is in."""
    config = getattr(ctx, "run_config", None)
    trace_id = getattr(config, "trace_id", None)
    if isinstance(trace_id, str) and trace_id:
        return trace_id
    trace = get_current_trace()
    if trace is not None and trace.trace_id and trace.trace_id != "no-op":
        return trace.trace_id
    return None


def _call_id(ctx: ToolContext[Any]) -> str:
    return ctx.tool_call_id  # the SDK gives every tool call its model's call id


def _parse(input_json: str) -> tuple[object, str | None]:
    """The model's arguments, parsed by Prism (the call keeps what the text proves)."""
    if not input_json.strip():
        return {}, None
    try:
        return ParsedJson.parse(input_json), None
    except (ValueError, RecursionError) as exc:
        return None, f"the tool's arguments are not JSON ({exc})"


def prism_function_tools(gate: PrismGate) -> list[FunctionTool]:
    """Prism's tools (``gate.options.registry``) as Agents SDK ``FunctionTool`` objects.

    Each is offered under a provider-safe name; its ``on_invoke_tool``
    dispatches through every Prism gate on the gate's asyncio host. A refused
    or failed call returns its error text, which the SDK sends the model as
    the tool's output (the SDK's way of reporting a tool error), so the run
    goes on. The ledger records the run's trace id (``RunConfig.trace_id``,
    else the current trace's) and the model's call id.

    Raises:
        TypeError: ``gate`` is not a :class:`PrismGate`.
    """
    if not isinstance(gate, PrismGate):
        raise TypeError(f"prism_function_tools takes a PrismGate, got {type(gate).__name__}")
    tools = gate.options.registry.list()
    names = create_tool_name_map(tool.name for tool in tools)
    return [_prism_tool(gate, tool, names.alias(tool.name)) for tool in tools]


def _prism_tool(gate: PrismGate, tool: ToolDefinition, alias: str) -> FunctionTool:
    registry_name = tool.name

    async def on_invoke_tool(ctx: ToolContext[Any], input_json: str) -> str:
        arguments, problem = _parse(input_json)
        if problem is not None:
            return problem
        result = await gate.call(
            run_id=_run_id(ctx), call_id=_call_id(ctx), name=registry_name, arguments=arguments
        )
        return result_text(result)

    return FunctionTool(
        name=alias,
        description=tool.description or "",
        params_json_schema=dict(tool.parameters or _EMPTY_OBJECT),
        on_invoke_tool=on_invoke_tool,
        strict_json_schema=False,
    )


def _render(value: object) -> ToolResult:
    return ToolResult.text(value if isinstance(value, str) else str(value))


def gate_function_tool(tool: FunctionTool, gate: PrismGate) -> FunctionTool:
    """An existing ``FunctionTool`` whose every call first passes Prism's gates.

    The returned tool is ``tool`` with a new ``on_invoke_tool``: the call goes
    through Prism's middleware, filters, permission (``tool:<name>:execute``),
    validation (against the tool's own JSON schema), the ledger and the events
    on the gate's asyncio host, and only then runs the original
    ``on_invoke_tool`` (with the arguments the gates allowed, as JSON). A
    refusal returns its error text to the model; the original's own output or
    exception reaches the SDK as it is.

    Raises:
        TypeError: ``tool`` is not a ``FunctionTool`` or ``gate`` not a :class:`PrismGate`.
    """
    if not isinstance(tool, FunctionTool):
        raise TypeError(f"gate_function_tool takes a FunctionTool, got {type(tool).__name__}")
    if not isinstance(gate, PrismGate):
        raise TypeError(f"gate_function_tool takes a PrismGate, got {type(gate).__name__}")
    options = gate.wrapper_options(
        [wrapped_tool(tool.name, tool.description, dict(tool.params_json_schema))]
    )
    original = tool.on_invoke_tool

    async def on_invoke_tool(ctx: ToolContext[Any], input_json: str) -> Any:
        arguments, problem = _parse(input_json)
        if problem is not None:
            arguments = input_json  # the gates refuse it as not a JSON object

        parsed = arguments.value if type(arguments) is ParsedJson else arguments

        async def run(allowed: JsonObject) -> Any:
            text = input_json if allowed is parsed else json.dumps(allowed)
            return await original(ctx, text)

        result, outcome = await gate.call_framework_tool(
            run_id=_run_id(ctx),
            call_id=_call_id(ctx),
            name=tool.name,
            arguments=arguments,
            options=options,
            run=run,
            render=_render,
        )
        return outcome.answer(result)

    return dataclasses.replace(tool, on_invoke_tool=on_invoke_tool)
