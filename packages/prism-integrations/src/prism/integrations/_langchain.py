"""LangChain and LangGraph: Prism's tools as LangChain tools, and gates around existing ones.

Needs the ``langchain`` extra (``langchain-core``). The tools are async
(``ainvoke``), as LangGraph's ``create_react_agent`` calls them in an
asyncio program.
"""

from __future__ import annotations

import inspect
import typing
import uuid
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ensure_config
from langchain_core.tools import BaseTool, ToolException
from pydantic import ConfigDict, Field, PrivateAttr

from prism.core import DispatchOptions, ToolResult, create_tool_name_map

from ._gate import PrismGate, result_text, wrapped_tool

if TYPE_CHECKING:
    from langchain_core.callbacks import AsyncCallbackManagerForToolRun

    from prism.core import JsonObject, ToolDefinition

__all__ = ["PrismGatedTool", "PrismTool", "gate_langchain_tool", "prism_langchain_tools"]

# Where _to_args_and_kwargs leaves the model's call id for _arun (a key no
# argument can take: set after the model's arguments are copied).
_CALL_ID = "__prism_tool_call_id__"
_EMPTY_OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


def _ids(
    call_id: object, run_manager: AsyncCallbackManagerForToolRun | None
) -> tuple[str | None, str]:
    """(the framework's run id, the model's call id) of the call being run."""
    if not isinstance(call_id, str) or not call_id:
        call_id = f"langchain-{run_manager.run_id if run_manager else uuid.uuid4().hex}"
    config = ensure_config()
    metadata = config.get("metadata") or {}
    configurable = config.get("configurable") or {}
    for run_id in (metadata.get("prism_run_id"), configurable.get("thread_id")):
        if isinstance(run_id, str) and run_id:
            return run_id, call_id
    parent = run_manager.parent_run_id if run_manager is not None else None
    return (str(parent) if parent is not None else None), call_id


class _GatedBase(BaseTool):
    """What both tool kinds share: the gate, the call id hand-over, async only."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    gate: PrismGate = Field(exclude=True)
    handle_tool_error: bool = True

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        args, kwargs = super()._to_args_and_kwargs(tool_input, tool_call_id)
        kwargs = {**kwargs, _CALL_ID: tool_call_id}
        return args, kwargs

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"{self.name} runs only asynchronously (ainvoke), on the Prism gate's asyncio host"
        )


class PrismTool(_GatedBase):
    """A Prism tool as a LangChain ``BaseTool`` (usable in LangGraph's ``create_react_agent``).

    ``ainvoke`` dispatches through every Prism gate on the gate's asyncio
    host. A refused or failed call raises :class:`~langchain_core.tools.ToolException`,
    which the tool handles (``handle_tool_error``): the model gets a
    ``ToolMessage`` with ``status="error"`` and the error text, and the run goes
    on. The ledger records the model's tool call id and, as the run id, the
    run config's ``metadata["prism_run_id"]``, else LangGraph's ``thread_id``,
    else the parent run's id.
    """

    prism_name: str

    async def _arun(
        self,
        *args: Any,
        run_manager: AsyncCallbackManagerForToolRun | None = None,
        **kwargs: Any,
    ) -> str:
        run_id, call_id = _ids(kwargs.pop(_CALL_ID, None), run_manager)
        result = await self.gate.call(
            run_id=run_id, call_id=call_id, name=self.prism_name, arguments=kwargs
        )
        if result.is_error:
            raise ToolException(result_text(result))
        return result_text(result)


def prism_langchain_tools(gate: PrismGate) -> list[BaseTool]:
    """Prism's tools (``gate.options.registry``) as LangChain tools, under provider-safe names.

    Raises:
        TypeError: ``gate`` is not a :class:`PrismGate`.
    """
    if not isinstance(gate, PrismGate):
        raise TypeError(f"prism_langchain_tools takes a PrismGate, got {type(gate).__name__}")
    tools = gate.options.registry.list()
    names = create_tool_name_map(tool.name for tool in tools)
    return [_prism_tool(gate, tool, names.alias(tool.name)) for tool in tools]


def _prism_tool(gate: PrismGate, tool: ToolDefinition, alias: str) -> PrismTool:
    return PrismTool(
        name=alias,
        description=tool.description or tool.name,
        args_schema=dict(tool.parameters or _EMPTY_OBJECT),
        gate=gate,
        prism_name=tool.name,
    )


def _render(value: object) -> ToolResult:
    return ToolResult.text(value if isinstance(value, str) else repr(value))


def _render_content(value: object) -> ToolResult:
    # response_format="content_and_artifact": the model sees the content only.
    if isinstance(value, tuple) and len(value) == 2:
        return _render(value[0])
    return _render(value)


def _takes(tool: BaseTool) -> tuple[bool, str | None]:
    """Whether ``tool``'s run function takes ``run_manager``, and its config parameter.

    What ``BaseTool.arun`` looks at before it runs a tool itself; the name is
    that of the parameter annotated ``RunnableConfig``, if any.
    """
    run = tool._run if type(tool)._arun is BaseTool._arun else tool._arun
    wants_manager = "run_manager" in inspect.signature(run).parameters
    try:
        hints = typing.get_type_hints(run)
    except Exception:  # unresolvable annotations: LangChain finds no config parameter either
        hints = {}
    config = next((name for name, hint in hints.items() if hint is RunnableConfig), None)
    return wants_manager, config


def _schema(tool: BaseTool) -> JsonObject:
    schema = tool.tool_call_schema
    # A JSON schema, or (langchain-core 1.x) a pydantic v2 model.
    found = dict(schema) if isinstance(schema, dict) else schema.model_json_schema()  # type: ignore[union-attr]
    found.pop("description", None)
    found.pop("title", None)
    return found


class PrismGatedTool(_GatedBase):
    """An existing LangChain tool whose every call first passes Prism's gates.

    Build it with :func:`gate_langchain_tool`. The call goes through Prism's
    middleware, filters, permission (``tool:<name>:execute``), validation
    (against the wrapped tool's JSON schema), the ledger and the events, and
    only then runs the wrapped tool with the arguments the gates allowed: its
    own argument parsing (its pydantic schema, injected call id) and its own
    ``_arun``, inside this tool's single LangChain run (one ``on_tool_start``
    and one ``on_tool_end``, as for the wrapped tool alone; its
    ``response_format`` and ``handle_validation_error`` are this tool's). A
    refusal, and a ``ToolException`` of the wrapped tool, reach the model as
    an error ``ToolMessage``; the wrapped tool's output reaches LangChain as
    it is. Ids are recorded as by :class:`PrismTool`.
    """

    wrapped: BaseTool = Field(exclude=True)
    _options: DispatchOptions = PrivateAttr()
    _takes: tuple[bool, str | None] = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        """Register the wrapped tool with the gate's options."""
        super().model_post_init(context)
        self._options = self.gate.wrapper_options(
            [wrapped_tool(self.name, self.description, _schema(self.wrapped))]
        )
        self._takes = _takes(self.wrapped)

    async def _arun(
        self,
        *args: Any,
        run_manager: AsyncCallbackManagerForToolRun | None = None,
        **kwargs: Any,
    ) -> Any:
        model_call_id = kwargs.pop(_CALL_ID, None)
        run_id, call_id = _ids(model_call_id, run_manager)
        wrapped = self.wrapped
        wants_manager, config_name = self._takes

        async def run(allowed: JsonObject) -> Any:
            # What BaseTool.arun does between its callbacks, for the wrapped tool.
            args, kw = wrapped._to_args_and_kwargs(dict(allowed), model_call_id)
            if wants_manager:
                kw["run_manager"] = run_manager
            if config_name is not None:
                kw[config_name] = ensure_config()
            return await wrapped._arun(*args, **kw)

        result, outcome = await self.gate.call_framework_tool(
            run_id=run_id,
            call_id=call_id,
            name=self.name,
            arguments=kwargs,
            options=self._options,
            run=run,
            render=_render_content if self.response_format == "content_and_artifact" else _render,
        )
        return outcome.answer(result, ToolException)


def gate_langchain_tool(tool: BaseTool, gate: PrismGate) -> PrismGatedTool:
    """``tool`` behind Prism's gates, under its own name, description and schema.

    Raises:
        TypeError: ``tool`` is not a ``BaseTool`` or ``gate`` not a :class:`PrismGate`.
    """
    if not isinstance(tool, BaseTool):
        raise TypeError(f"gate_langchain_tool takes a BaseTool, got {type(tool).__name__}")
    if not isinstance(gate, PrismGate):
        raise TypeError(f"gate_langchain_tool takes a PrismGate, got {type(gate).__name__}")
    return PrismGatedTool(
        name=tool.name,
        description=tool.description,
        args_schema=_schema(tool),
        response_format=tool.response_format,
        handle_validation_error=tool.handle_validation_error,
        gate=gate,
        wrapped=tool,
    )
