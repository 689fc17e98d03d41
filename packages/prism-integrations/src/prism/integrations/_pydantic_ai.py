"""pydantic-ai: Prism's tools as a toolset, and Prism's gates around an existing toolset.

Needs the ``pydantic-ai`` extra (``pydantic-ai-slim``).
"""

from __future__ import annotations

import copy
import dataclasses
import uuid
from typing import TYPE_CHECKING, Any

import pydantic_core
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.tools import ToolDefinition as PydanticToolDefinition
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from prism.core import ToolResult, create_tool_name_map

from ._gate import PrismGate, result_text, wrapped_tool

if TYPE_CHECKING:
    from pydantic_ai import RunContext

    from prism.core import DispatchOptions, JsonObject, ToolRegistry

__all__ = ["PrismGatedToolset", "PrismToolset"]

# Prism validates the arguments itself (its validator gate): pydantic-ai only
# checks that they are an object.
_ANY_OBJECT = SchemaValidator(
    core_schema.dict_schema(
        keys_schema=core_schema.str_schema(), values_schema=core_schema.any_schema()
    )
)
_EMPTY_OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


def _call_id(ctx: RunContext[Any]) -> str:
    return ctx.tool_call_id or f"pydantic-ai-{uuid.uuid4().hex}"


def _render(value: object) -> ToolResult:
    """What Prism records of a pydantic-ai tool's return value (the framework gets the value)."""
    if isinstance(value, str):
        return ToolResult.text(value)
    # What pydantic-ai shows the model; a value it cannot serialise fails there too.
    return ToolResult.text(pydantic_core.to_json(value, fallback=repr).decode())


class PrismToolset(AbstractToolset[Any]):
    """Prism's tools (local, coding, MCP-bridged) as a pydantic-ai toolset.

    Each tool of ``gate.options.registry`` is offered under a provider-safe name
    (``mcp:docs:search`` becomes ``mcp_docs_search``); a call goes through every
    Prism gate on the gate's asyncio host. A refused or failed call reaches the
    model as a failed tool result (:class:`pydantic_ai.exceptions.ToolFailed`),
    never as an exception that ends the run. The ledger records the run's
    ``ctx.run_id`` and the model's ``tool_call_id``.

    Args:
        gate: the host and the gates (:class:`PrismGate`).
        id: the toolset's id among the agent's toolsets.
    """

    def __init__(self, gate: PrismGate, *, id: str | None = "prism") -> None:
        if not isinstance(gate, PrismGate):
            raise TypeError(f"PrismToolset takes a PrismGate, got {type(gate).__name__}")
        self.gate = gate
        self._id = id

    @property
    def id(self) -> str | None:
        """The toolset's id among the agent's toolsets."""
        return self._id

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """Prism's tools, under provider-safe names."""
        tools = self.gate.options.registry.list()
        names = create_tool_name_map(tool.name for tool in tools)
        return {
            names.alias(tool.name): ToolsetTool(
                toolset=self,
                tool_def=PydanticToolDefinition(
                    name=names.alias(tool.name),
                    description=tool.description,
                    parameters_json_schema=dict(tool.parameters or _EMPTY_OBJECT),
                    metadata={"prism_tool": tool.name},
                ),
                max_retries=1,
                args_validator=_ANY_OBJECT,
            )
            for tool in tools
        }

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """Dispatch the call through Prism; a refusal is a failed tool result for the model."""
        metadata = tool.tool_def.metadata or {}
        registry_name = metadata.get("prism_tool", name)
        result = await self.gate.call(
            run_id=ctx.run_id, call_id=_call_id(ctx), name=registry_name, arguments=tool_args
        )
        if result.is_error:
            raise ToolFailed(result_text(result))
        return result_text(result)


@dataclasses.dataclass
class PrismGatedToolset(WrapperToolset[Any]):
    """An existing pydantic-ai toolset whose every call goes through Prism's gates.

    The wrapped toolset's tools are offered as they are; a call passes Prism's
    middleware, filters, permission (``tool:<name>:execute``), validation
    (against the tool's own JSON schema), the ledger and the events, on the
    gate's asyncio host, and only then runs the wrapped tool (as asyncio code,
    on the host's loop). A refusal reaches the model as a failed tool result
    (:class:`~pydantic_ai.exceptions.ToolFailed`); what the tool itself raises
    (``ModelRetry``, ``ToolFailed``, a deferral) reaches pydantic-ai as it is,
    and its return value too. The ledger records ``ctx.run_id`` and the
    model's ``tool_call_id``.

    Args:
        wrapped: the toolset to gate.
        gate: the host and the gates; ``gate.options.registry`` is not used
            (the wrapped toolset's tools are the ones gated).
    """

    gate: PrismGate = dataclasses.field(kw_only=True)
    _registry: ToolRegistry = dataclasses.field(init=False, repr=False)
    _options: DispatchOptions = dataclasses.field(init=False, repr=False)
    _known: dict[str, tuple[str | None, dict[str, Any]]] = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.gate, PrismGate):
            raise TypeError(f"PrismGatedToolset takes a PrismGate, got {type(self.gate).__name__}")
        self._options = self.gate.wrapper_options([])
        self._registry = self._options.registry
        self._known = {}

    def _register(self, name: str, tool: ToolsetTool[Any]) -> None:
        """Register (again) the Prism tool for ``name`` unless the one registered is the same."""
        tool_def = tool.tool_def
        schema = tool_def.parameters_json_schema
        known = self._known.get(name)
        # Compared by value: a toolset's prepare step may hand a new schema each
        # step, and Prism must validate against the one the model was shown.
        if known is None or known[0] != tool_def.description or known[1] != schema:
            copied = copy.deepcopy(schema)
            self._registry.register(wrapped_tool(name, tool_def.description, copied))
            self._known[name] = (tool_def.description, copy.deepcopy(schema))

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """Gate the call through Prism, then run the wrapped tool with the arguments it allowed."""
        self._register(name, tool)
        wrapped = self.wrapped

        async def run(arguments: JsonObject) -> Any:
            if arguments is not tool_args:
                # Rewritten by Prism middleware: validated again as pydantic-ai would.
                arguments = tool.args_validator.validate_python(arguments)
            return await wrapped.call_tool(name, arguments, ctx, tool)

        result, outcome = await self.gate.call_framework_tool(
            run_id=ctx.run_id,
            call_id=_call_id(ctx),
            name=name,
            arguments=tool_args,
            options=self._options,
            run=run,
            render=_render,
        )
        return outcome.answer(result, ToolFailed)
