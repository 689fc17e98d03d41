"""The gate every adapter shares: one framework tool call through Prism's dispatch.

An agent framework (pydantic-ai, the OpenAI Agents SDK, LangChain) runs on
asyncio and calls its tools there. Each adapter turns such a call into a
:class:`~prism.core.ToolCall` (the framework's call id as its id) and awaits
:meth:`AsyncioHost.dispatch_tool_call`: every gate runs (middleware, filters,
permission, validation, the tool's execution policy, the ledger, events). When
none of the gates is trio code, the whole dispatch, the framework's own tool
included, runs right in the framework's asyncio task, with no crossing into
trio; otherwise the gates run on the host's trio side and the framework's tool
as a task of the host's loop.
"""

from __future__ import annotations

import collections
import contextvars
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs

from prism.core import (
    AsyncioHost,
    DispatchOptions,
    ParsedJson,
    ToolCall,
    ToolDefinition,
    ToolResult,
    create_tool_registry,
)
from prism.core.ledger import RunLedger, ToolCallRecord

if TYPE_CHECKING:
    from prism.core import JsonObject, ToolExecutionContext

__all__ = ["FrameworkOutcome", "PrismGate", "wrapped_tool"]

# The framework's own tool call being dispatched (what runs it, and where its
# outcome goes): the wrapped tools' execute finds it here (the host runs each
# call in a copy of its caller's context).
_invocation: contextvars.ContextVar[FrameworkOutcome | None] = contextvars.ContextVar(
    "prism.integrations.invocation", default=None
)


@attrs.define(eq=False)
class FrameworkOutcome:
    """What the framework's own tool did in one gated call (its return value or exception).

    The adapter returns the value to the framework as it is (and re-raises the
    exception, so the framework's own control flow, such as a retry request,
    still works), while Prism records a :class:`~prism.core.ToolResult` for it.
    """

    value: object = None
    error: BaseException | None = None
    result: ToolResult | None = None
    ran: bool = False
    # How the gated call runs the framework's tool and renders its value (set
    # by PrismGate.call_framework_tool; one object per call, no closures).
    _run: Callable[..., Awaitable[Any]] | None = attrs.field(default=None, init=False, repr=False)
    _render: Callable[[Any], ToolResult] | None = attrs.field(default=None, init=False, repr=False)

    def answer(self, result: ToolResult, refusal: type[Exception] | None = None) -> object:
        """What the adapter gives back to its framework for a call that ended in ``result``.

        The framework tool's own exception is re-raised and its own value returned
        when its result stood; otherwise Prism's result as text, raised as
        ``refusal`` when it is an error and the framework reports tool errors by
        exception.
        """
        if self.error is not None:
            raise self.error
        if self.ran and result is self.result:
            return self.value
        if refusal is not None and result.is_error:
            raise refusal(result_text(result))
        return result_text(result)


async def _run_framework_tool(arguments: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    # The execute of every wrapped framework tool: asyncio code, so the host
    # awaits it in the calling framework task (or, when a gate is trio code, as
    # a task of its loop), in a copy of that task's context.
    outcome = _invocation.get()
    if outcome is None:
        return ToolResult.error(
            "this wrapped tool runs only inside its framework's call (through PrismGate)"
        )
    run, render = outcome._run, outcome._render
    # Both are set with the context variable.
    assert run is not None
    assert render is not None
    outcome.ran = True
    try:
        value = outcome.value = await run(arguments)
    except Exception as exc:
        # Kept for the framework (its retry and deferral signals must reach it
        # as they are); Prism records the call as an error.
        outcome.error = exc
        raise
    result = outcome.result = render(value)
    return result


def wrapped_tool(
    name: str, description: str | None, parameters: JsonObject | None
) -> ToolDefinition:
    """The Prism :class:`~prism.core.ToolDefinition` standing for a framework's own tool.

    Its ``execute`` runs the framework tool the current gated call carries.
    """
    return ToolDefinition(
        name=name, execute=_run_framework_tool, description=description, parameters=parameters
    )


@attrs.define(eq=False)
class PrismGate:
    """Prism's gates for an asyncio agent framework's tool calls, through an asyncio host.

    Every adapter of :mod:`prism.integrations` takes one. A call goes through
    :meth:`AsyncioHost.dispatch_tool_call` with ``options``: the framework's
    call id is the :class:`~prism.core.ToolCall`'s id, so the ledger and the
    events carry it. When ``options.ledger`` is a :class:`~prism.core.RunLedger`,
    each framework run is recorded in a ledger of its own whose ``run_id`` is
    the framework's run id, with ``options.ledger``'s redaction, sinks and
    error handler (so a file or SQLite sink holds every run);
    :meth:`records` lists them. Any other recorder is used as it is.

    Args:
        host: the open asyncio host (:func:`~prism.core.open_asyncio_host`).
        options: the gates, and in ``registry`` the Prism tools an adapter offers.
        keep_runs: how many runs' ledgers are kept in memory (older ones were
            already handed to the sinks).

    Raises:
        TypeError: ``host`` or ``options`` has the wrong type.
    """

    host: AsyncioHost = attrs.field(validator=attrs.validators.instance_of(AsyncioHost))
    options: DispatchOptions = attrs.field(validator=attrs.validators.instance_of(DispatchOptions))
    keep_runs: int = attrs.field(default=256, kw_only=True)
    _runs: collections.OrderedDict[str, RunLedger] = attrs.field(
        factory=collections.OrderedDict, init=False
    )
    # (run id, id(options)) -> (options, its per-run copy). The options object is
    # held, so its id cannot be reused by another while the entry exists, and is
    # compared: a copy is never served for options it was not made from.
    _per_run: dict[tuple[str, int], tuple[DispatchOptions, DispatchOptions]] = attrs.field(
        factory=dict, init=False
    )

    def records(self, run_id: str | None = None) -> list[ToolCallRecord]:
        """The records of the kept runs (or of one run), each run's in the order its calls ended."""
        if run_id is not None:
            ledger = self._runs.get(run_id)
            return ledger.records if ledger is not None else []
        return [record for ledger in self._runs.values() for record in ledger.records]

    def run_ids(self) -> list[str]:
        """The framework run ids of the kept runs, oldest first."""
        return list(self._runs)

    def _run_options(self, run_id: str | None, options: DispatchOptions) -> DispatchOptions:
        template = options.ledger
        if run_id is None or not isinstance(template, RunLedger):
            return options
        key = (run_id, id(options))
        cached = self._per_run.get(key)
        if cached is not None and cached[0] is options and run_id in self._runs:
            self._runs.move_to_end(run_id)
            return cached[1]
        ledger = self._runs.get(run_id)
        if ledger is None:
            ledger = RunLedger(
                redact=template.redact,
                sinks=template.sinks,
                on_error=template.on_error,
                run_id=run_id,
                max_records=template.max_records,
            )
            self._runs[run_id] = ledger
            while len(self._runs) > max(1, self.keep_runs):
                gone, _ = self._runs.popitem(last=False)
                for stale in [k for k in self._per_run if k[0] == gone]:
                    del self._per_run[stale]
        per_run = attrs.evolve(options, ledger=ledger)
        self._per_run[key] = (options, per_run)
        return per_run

    def wrapper_options(self, tools: list[ToolDefinition]) -> DispatchOptions:
        """These gates over a registry of wrapped framework tools (see :func:`wrapped_tool`)."""
        return attrs.evolve(self.options, registry=create_tool_registry(tools, duplicate="replace"))

    async def call(
        self,
        *,
        run_id: str | None,
        call_id: str,
        name: str,
        arguments: object,
        options: DispatchOptions | None = None,
    ) -> ToolResult:
        """Dispatch one framework call to a Prism tool through every gate.

        ``arguments`` is what the framework parsed, or a :class:`~prism.core.ParsedJson`
        of the model's JSON text (the call then carries what the text proves,
        and the validator need not walk it).

        Returns:
            The call's result; a refusal is an error result (``details["blocked_reason"]``).
        """
        opts = self._run_options(run_id, self.options if options is None else options)
        return await self.host.dispatch_tool_call(_call(call_id, name, arguments), opts)

    async def call_framework_tool(
        self,
        *,
        run_id: str | None,
        call_id: str,
        name: str,
        arguments: object,
        options: DispatchOptions,
        run: Callable[[JsonObject], Awaitable[Any]],
        render: Callable[[Any], ToolResult],
    ) -> tuple[ToolResult, FrameworkOutcome]:
        """Dispatch a call to a framework's own tool through every gate.

        ``arguments`` as for :meth:`call`.

        ``options.registry`` holds the :func:`wrapped_tool` for ``name``; once
        the gates allow the call, ``run(arguments)`` (the framework's tool, with
        the arguments as middleware left them) runs as asyncio code (in the
        calling task when no gate is trio code), and ``render`` turns its
        return value into the result Prism records.

        Returns:
            Prism's result (a refusal is an error result) and what the framework's
            tool did, if it ran.
        """
        outcome = FrameworkOutcome()
        outcome._run = run
        outcome._render = render
        token = _invocation.set(outcome)
        try:
            # PrismGate.call, inline (a coroutine less on every step of the call).
            opts = self._run_options(run_id, options)
            result = await self.host.dispatch_tool_call(_call(call_id, name, arguments), opts)
        finally:
            _invocation.reset(token)
        return result, outcome


def _call(call_id: str, name: str, arguments: object) -> ToolCall:
    if type(arguments) is ParsedJson:
        return ToolCall.from_parsed(id=call_id, name=name, arguments=arguments)
    return ToolCall(id=call_id, name=name, arguments=arguments)


def result_text(result: ToolResult) -> str:
    """The text a framework shows the model for ``result``."""
    text = result.joined_text
    if text or result.structured is None:
        return text
    import json

    return json.dumps(result.structured, ensure_ascii=False, sort_keys=True)
