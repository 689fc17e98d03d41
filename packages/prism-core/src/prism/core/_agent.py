"""The agent runtime: provider turns, bounded tool rounds, abort-safe transcripts."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

import attrs
import trio

from ._abort import AbortSignal, cancel_on_abort
from ._content import (
    AssistantMessage,
    Message,
    TextContent,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    UserMessage,
    renamed_call,
)
from ._dispatch import DispatchOptions
from ._errors import ModelProviderError, PrismError, SessionBusyError
from ._events import EventSink, RunFinished, TurnFinished, TurnStarted, emit_event
from ._host_calls import await_callback
from ._ledger import PendingRecord, RunLedger, finished_records, new_run_id
from ._ledger_records import CallTracer, FinishedCall, RunOutcome, ToolCallRecord
from ._middleware import MiddlewareRegistry
from ._names import ToolNameMap, create_tool_name_map, first_come_name_map
from ._options import (
    callable_value,
    has_method,
    instance_of,
    integer,
    optional,
    sequence_of,
    string,
)
from ._outcome import cancelled_result, refuse
from ._parallel import dispatch_tool_calls_in_order, resolve_tool_concurrency
from ._policy import PermissionPolicy
from ._provider import ModelProvider, ModelRequest, ToolSpec, tool_calls_of
from ._tools import (
    ToolDefinition,
    ToolFilter,
    ToolRegistry,
    check_filters,
    create_tool_registry,
    filter_tools,
)
from ._trio_guard import require_trio
from ._validation import ToolValidator

if TYPE_CHECKING:
    from collections.abc import Sequence


__all__ = [
    "Agent",
    "AgentSession",
    "Limits",
    "RunOptions",
    "RunResult",
    "SingleShotLoop",
    "create_agent",
]

_log = logging.getLogger("prism.core")

_NO_TOOLS_LEFT = (
    "tool call refused: the tool-round limit ({limit}) was reached and no tools "
    "were offered for the final answer"
)
_TOO_MANY = (
    "tool call refused: the turn asked for {count} calls and at most {limit} are run per turn"
)


@attrs.frozen(kw_only=True)
class SingleShotLoop:
    """The loop strategy: ask the provider, run its calls, repeat.

    Attributes:
        concurrency: the most calls of one turn in flight at once (default 1,
            sequential). A turn that names an ``exclusive`` tool runs one at a time.

    Raises:
        ConfigurationError: ``concurrency`` is not an integer >= 1.
    """

    concurrency: int = attrs.field(default=1, validator=integer(minimum=1))


@attrs.frozen(kw_only=True)
class Limits:
    """Bounds on one run.

    Attributes:
        max_tool_rounds: how many provider turns may have their tool calls run
            (default 1). After that the provider is asked once more with no tools
            offered, for a final answer. ``0`` offers no tools at all.
        max_tool_calls_per_turn: the most calls of one provider turn that are
            dispatched (default 128). Calls beyond it are refused (``blocked``,
            ``tool_denied``) and answered with an error result, never run, so a
            runaway or hostile model cannot queue unbounded work.

    Raises:
        ConfigurationError: ``max_tool_rounds`` is not an integer >= 0, or
            ``max_tool_calls_per_turn`` is not an integer >= 1.
    """

    max_tool_rounds: int = attrs.field(default=1, validator=integer(minimum=0))
    max_tool_calls_per_turn: int = attrs.field(default=128, validator=integer(minimum=1))


@attrs.frozen(kw_only=True)
class RunOptions:
    """Per-run overrides; every ``None`` falls back to the agent's setting.

    Attributes:
        signal: aborting it ends the run (see :meth:`AgentSession.run`).
        limits: replaces the agent's :class:`Limits`.
        loop: replaces the agent's :class:`SingleShotLoop`.
        validator: replaces the agent's argument validator.
        on_event: receives every event of the run: tool events and
            :class:`TurnStarted`, :class:`TurnFinished`, :class:`RunFinished`.
            A sink that raises is logged and ignored.
    """

    signal: AbortSignal | None = attrs.field(
        default=None, validator=optional(instance_of(AbortSignal))
    )
    limits: Limits | None = attrs.field(default=None, validator=optional(instance_of(Limits)))
    loop: SingleShotLoop | None = attrs.field(
        default=None, validator=optional(instance_of(SingleShotLoop))
    )
    validator: ToolValidator | None = attrs.field(
        default=None, validator=optional(callable_value())
    )
    on_event: EventSink | None = attrs.field(default=None, validator=optional(callable_value()))


@attrs.frozen(kw_only=True)
class RunResult:
    """What a run produced.

    Attributes:
        messages: the session's whole transcript after the run; every tool call in
            it has exactly one tool-result message, so it can be sent to a
            provider as it is (also after an abort).
        final: the provider's last answer (after an abort, the last answer that
            arrived; an empty message if none did).
        rounds: tool rounds executed (0 when the provider answered without calls).
        aborted: the run's signal aborted it.
        records: the ledger records of this run's calls, in the order they ended.
    """

    messages: tuple[Message, ...]
    final: AssistantMessage
    rounds: int
    aborted: bool
    records: tuple[ToolCallRecord, ...] = ()


@attrs.define(eq=False)
class _RunRecords:
    """A :class:`LedgerRecorder` that records in the agent's ledger and keeps this run's entries."""

    ledger: RunLedger
    entries: list[PendingRecord] = attrs.field(factory=list)

    @property
    def records(self) -> list[ToolCallRecord]:
        """This run's records, in the order its calls ended."""
        return finished_records(self.entries)

    def record_call(self, call: FinishedCall, /) -> PendingRecord:
        """Record in the agent's ledger; keep the entry for :attr:`RunResult.records`.

        The agent's ledger and this run share the entry, built once when first read.
        """
        entry = self.ledger.record_call(call)
        self.entries.append(entry)
        return entry


@attrs.define(eq=False)
class Agent:
    """A model, a provider and the tools it may call, with every gate configured.

    Build one with :func:`create_agent`; start conversations with :meth:`session`.
    The registry is live: tools added to it later are offered on the next run.

    Attributes:
        model: the model name sent in every :class:`ModelRequest`.
        provider: answers the requests.
        registry: the tools (registry names).
        ledger: receives a record for every call of every run.
        tracer: times each run, model request and call in a span, if set.
    """

    model: str
    provider: ModelProvider
    registry: ToolRegistry
    validator: ToolValidator | None
    permission: PermissionPolicy | None
    middleware: MiddlewareRegistry | None
    filters: tuple[ToolFilter, ...]
    loop: SingleShotLoop
    limits: Limits
    ledger: RunLedger
    tracer: CallTracer | None
    _names: ToolNameMap = attrs.field(alias="names")
    _names_key: tuple[str, ...] = attrs.field(alias="names_key")

    def session(self, messages: Iterable[Message] = ()) -> AgentSession:
        """A new conversation, optionally continuing ``messages``."""
        return AgentSession(agent=self, messages=list(messages))

    def name_map(self) -> ToolNameMap:
        """The registry-name/provider-alias map for the registry as it is now.

        ``create_agent`` refuses tools that share an alias. A registry that
        changed since (an MCP listing refreshed) never fails the agent: a tool
        whose alias an earlier tool has is left out of the map, and so not
        offered, with a warning.
        """
        key = tuple(tool.name for tool in self.registry.list())
        if key != self._names_key:
            names, left_out = first_come_name_map(key)
            for name, alias, other in left_out:
                _log.warning(
                    "tool %r is not offered: it would be offered to the model as %r, like %r",
                    name,
                    alias,
                    other,
                )
            self._names = names
            self._names_key = key
        return self._names

    def tool_specs(self) -> tuple[ToolSpec, ...]:
        """The tools offered to the provider: filtered, under provider-safe names."""
        names = self.name_map()
        return tuple(
            ToolSpec(
                name=alias,
                description=tool.description,
                parameters=tool.parameters,
            )
            for tool in filter_tools(self.registry.list(), *self.filters)
            if names.registry_name(alias := names.alias(tool.name)) == tool.name
        )


def _user_message(prompt: str | UserMessage) -> UserMessage:
    if isinstance(prompt, UserMessage):
        return prompt
    if isinstance(prompt, str):
        return UserMessage(content=(TextContent(text=prompt),))
    raise TypeError(f"run() takes a str or a UserMessage prompt, got {type(prompt).__name__}")


@attrs.define(eq=False)
class AgentSession:
    """One conversation with an :class:`Agent`; its transcript grows run by run.

    Runs on one session are sequential: starting a second run while one is in
    progress raises :class:`SessionBusyError`.
    """

    agent: Agent
    _messages: list[Message] = attrs.field(factory=list, alias="messages")
    _running: bool = attrs.field(default=False, init=False)

    @property
    def messages(self) -> tuple[Message, ...]:
        """The transcript so far."""
        return tuple(self._messages)

    async def run(self, prompt: str | UserMessage, options: RunOptions | None = None) -> RunResult:
        """Send ``prompt``, run the tool rounds, and return the provider's final answer.

        Each provider turn's calls are mapped back to registry names and
        dispatched through every gate with :func:`dispatch_tool_calls_in_order`
        (bounded by the loop's ``concurrency``, one at a time when a call
        names an exclusive tool). Tool-result messages are appended in call
        order. The loop ends when the provider answers without calls; after
        ``max_tool_rounds`` rounds it is asked once more with no tools offered.
        Calls it still makes then are refused (``blocked``, ``tool_denied``)
        and answered with an error result, never run.

        Abort (``options.signal``): a provider request in progress is cancelled;
        calls in flight are cancelled, calls not started never start, and every
        call of the turn still gets a tool-result message, so the transcript
        stays valid. The run then returns with ``aborted=True``; it does not raise.

        Cancellation of the caller's scope propagates as :class:`trio.Cancelled`;
        the session's transcript is still left valid (unanswered calls get
        cancellation results) and the ledger still covers every call. Always
        checkpoints.

        Raises:
            SessionBusyError: another run of this session is in progress.
            ModelProviderError: the provider raised (chained) or answered with
                something that is not an :class:`AssistantMessage`.
            ConfigurationError: two tools of the registry now share an alias.
            TypeError: ``prompt`` is neither a ``str`` nor a :class:`UserMessage`.
            TrioRequiredError: awaited outside a trio task (from asyncio, use
                :meth:`AsyncioHost.run_agent`).
        """
        require_trio("AgentSession.run()")
        if self._running:
            raise SessionBusyError("this AgentSession is already running; runs are sequential")
        if options is None:
            options = RunOptions()
        elif not isinstance(options, RunOptions):
            raise TypeError(f"run() takes RunOptions, got {type(options).__name__}")
        user = _user_message(prompt)
        agent = self.agent
        names = agent.name_map()
        specs = agent.tool_specs()
        self._running = True
        try:
            tracer = agent.tracer
            if tracer is None:
                return await self._marked_run(user, options, names, specs)
            # The run's span is current for the whole run: model requests and
            # tool calls (in the round's worker tasks, which copy the context) nest under it.
            with tracer.trace_run(agent.model):
                return await self._marked_run(user, options, names, specs)
        finally:
            self._running = False

    async def _marked_run(
        self,
        user: UserMessage,
        options: RunOptions,
        names: ToolNameMap,
        specs: tuple[ToolSpec, ...],
    ) -> RunResult:
        """The run between its ledger markers, unless the caller has a run open already."""
        ledger = self.agent.ledger
        if ledger.in_run:  # ledger.run() around it: the run is the caller's
            return await self._run(user, options, names, specs)
        if ledger._runs_ended:
            # Each run its own id, so a reader tells a later interrupted run from
            # an earlier finished one.
            ledger.run_id = new_run_id()
        ledger.start_run(label=f"agent {self.agent.model}")
        outcome: RunOutcome = "aborted"  # cancelled (or KeyboardInterrupt) unless said below
        try:
            result = await self._run(user, options, names, specs)
            outcome = "aborted" if result.aborted else "finished"
            return result
        except Exception:
            outcome = "failed"
            raise
        finally:
            ledger.end_run(outcome)

    async def _run(
        self,
        user: UserMessage,
        options: RunOptions,
        names: ToolNameMap,
        specs: tuple[ToolSpec, ...],
    ) -> RunResult:
        agent = self.agent
        loop = options.loop or agent.loop
        limits = options.limits or agent.limits
        signal = options.signal
        sink = options.on_event
        run_ledger = _RunRecords(agent.ledger)
        dispatch = DispatchOptions(
            registry=agent.registry,
            filters=agent.filters,
            permission=agent.permission,
            validator=options.validator if options.validator is not None else agent.validator,
            middleware=agent.middleware,
            on_event=sink,
            ledger=run_ledger,
            signal=signal,
            tracer=agent.tracer,
        )
        messages = self._messages
        messages.append(user)
        rounds = 0
        turn = 0
        aborted = False
        final = AssistantMessage()
        while True:
            if signal is not None and signal.aborted:
                aborted = True
                break
            offer = rounds < limits.max_tool_rounds
            turn += 1
            if sink is not None:
                emit_event(sink, TurnStarted(turn=turn))
            request = ModelRequest(
                model=agent.model, messages=tuple(messages), tools=specs if offer else ()
            )
            reply: AssistantMessage | None = None
            with cancel_on_abort(signal):
                reply = await _complete(agent.provider, request, agent.tracer)
            if reply is None:
                aborted = True
                if sink is not None:
                    emit_event(sink, TurnFinished(turn=turn, tool_calls=0))
                break
            calls = tool_calls_of(reply)
            messages.append(reply)
            final = reply
            if calls:
                if offer:
                    allowed = limits.max_tool_calls_per_turn
                    try:
                        await _run_round(
                            messages, calls[:allowed], names, dispatch, loop, agent.registry
                        )
                    finally:
                        # Even when the caller cancels the round, the refused
                        # tail is answered so that the transcript stays valid.
                        if len(calls) > allowed:
                            message = _TOO_MANY.format(count=len(calls), limit=allowed)
                            _refuse_all(messages, calls[allowed:], names, dispatch, message)
                    rounds += 1
                else:
                    message = _NO_TOOLS_LEFT.format(limit=limits.max_tool_rounds)
                    _refuse_all(messages, calls, names, dispatch, message)
            if sink is not None:
                emit_event(sink, TurnFinished(turn=turn, tool_calls=len(calls)))
            if not calls or not offer:
                aborted = signal is not None and signal.aborted
                break
        if turn == 0:
            # Aborted before the first request: still a checkpoint, as promised.
            await trio.lowlevel.checkpoint()
        if sink is not None:
            emit_event(sink, RunFinished(rounds=rounds, aborted=aborted))
        return RunResult(
            messages=tuple(messages),
            final=final,
            rounds=rounds,
            aborted=aborted,
            records=tuple(run_ledger.records),
        )


def _registry_call(call: ToolCall, names: ToolNameMap) -> ToolCall:
    name = names.registry_name(call.name)
    if name is None or name == call.name:
        # An unknown alias is dispatched as the model sent it: the dispatcher
        # blocks it as unknown_tool under the name the model used.
        return call
    # The same arguments object: what its text proved still holds.
    return renamed_call(call, name)


async def _run_round(
    messages: list[Message],
    calls: tuple[ToolCall, ...],
    names: ToolNameMap,
    dispatch: DispatchOptions,
    loop: SingleShotLoop,
    registry: ToolRegistry,
) -> None:
    mapped = [_registry_call(call, names) for call in calls]
    concurrency = resolve_tool_concurrency(loop.concurrency, mapped, registry)
    answered = 0

    def append(index: int, _call: ToolCall, result: ToolResult) -> None:
        nonlocal answered
        original = calls[index]
        messages.append(
            ToolResultMessage(call_id=original.id, tool_name=original.name, result=result)
        )
        answered = index + 1

    try:
        await dispatch_tool_calls_in_order(
            mapped, dispatch, concurrency=concurrency, on_result=append
        )
    finally:
        # The caller's scope was cancelled mid-turn: answer the rest so the
        # transcript stays valid (their ledger records were already written).
        signal = dispatch.signal
        reason = signal.reason if signal is not None else "the run was cancelled"
        for index in range(answered, len(calls)):
            original = calls[index]
            messages.append(
                ToolResultMessage(
                    call_id=original.id,
                    tool_name=original.name,
                    result=cancelled_result(original, reason),
                )
            )


def _refuse_all(
    messages: list[Message],
    calls: tuple[ToolCall, ...],
    names: ToolNameMap,
    dispatch: DispatchOptions,
    message: str,
) -> None:
    for call in calls:
        mapped = _registry_call(call, names)
        result = refuse(dispatch.on_event, dispatch.ledger, mapped, "tool_denied", message)
        messages.append(ToolResultMessage(call_id=call.id, tool_name=call.name, result=result))


async def _complete(
    provider: ModelProvider, request: ModelRequest, tracer: CallTracer | None
) -> AssistantMessage:
    if tracer is None:
        return await _ask(provider, request)
    with tracer.trace_model(request.model) as report:
        reply = await _ask(provider, request)
        report(reply)
        return reply


async def _ask(provider: ModelProvider, request: ModelRequest) -> AssistantMessage:
    try:
        complete = provider.complete
        reply = await await_callback(complete, complete(request))
    except PrismError:
        raise
    except Exception as exc:
        raise ModelProviderError(
            f"the model provider {type(provider).__name__} raised {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(reply, AssistantMessage):
        raise ModelProviderError(
            f"the model provider {type(provider).__name__} returned {type(reply).__name__}, "
            "not an AssistantMessage"
        )
    return reply


def _as_registry(tools: Iterable[ToolDefinition] | ToolRegistry) -> ToolRegistry:
    if isinstance(tools, ToolRegistry):
        return tools
    if isinstance(tools, Iterable) and not isinstance(tools, (str, bytes)):
        tools = tuple(tools)
    return create_tool_registry(_TOOLS.check("create_agent", "tools", tools))


_TOOLS = sequence_of(instance_of(ToolDefinition))


def create_agent(
    *,
    model: str,
    provider: ModelProvider,
    tools: Iterable[ToolDefinition] | ToolRegistry = (),
    validator: ToolValidator | None = None,
    permission: PermissionPolicy | None = None,
    middleware: MiddlewareRegistry | None = None,
    filters: Sequence[ToolFilter] = (),
    loop: SingleShotLoop | None = None,
    limits: Limits | None = None,
    ledger: RunLedger | None = None,
    tracer: CallTracer | None = None,
) -> Agent:
    """An :class:`Agent` over ``tools``, checked now rather than at the first run.

    Args:
        model: the model name put in every request.
        provider: the :class:`ModelProvider` that answers.
        tools: tool definitions, or a live :class:`ToolRegistry` to use as it is.
        validator: argument validator for every call (``RunOptions.validator`` overrides).
        permission: checked as ``tool:<name>:execute`` for every call.
        middleware: call and result hooks.
        filters: name filters; filtered-out tools are neither offered nor run.
        loop: the loop strategy (default ``SingleShotLoop(concurrency=1)``).
        limits: run bounds (default ``Limits(max_tool_rounds=1)``).
        ledger: receives every call's record (default: a new :class:`RunLedger`).
        tracer: opens a span for each run (``invoke_agent``), model request
            (``chat``) and tool call (``execute_tool``), current while it runs;
            default: the ledger's first sink that is a :class:`CallTracer`
            (an :class:`~prism.core.ledger.OtelLedgerSink`), if any.

    Raises:
        ConfigurationError: an option has the wrong type or value, or two tools
            would be offered to the provider under the same alias (the message
            names both).
        DuplicateToolError: two of ``tools`` share a name.
    """
    owner = "create_agent"
    string().check(owner, "model", model)
    has_method("complete").check(owner, "provider", provider)
    registry = _as_registry(tools)
    optional(callable_value()).check(owner, "validator", validator)
    optional(has_method("check")).check(owner, "permission", permission)
    optional(instance_of(MiddlewareRegistry)).check(owner, "middleware", middleware)
    filter_tuple = check_filters(owner, filters)
    optional(instance_of(SingleShotLoop)).check(owner, "loop", loop)
    optional(instance_of(Limits)).check(owner, "limits", limits)
    optional(instance_of(RunLedger)).check(owner, "ledger", ledger)
    optional(has_method("trace_run", "trace_call", "trace_model")).check(owner, "tracer", tracer)
    if ledger is None:
        ledger = RunLedger()
    if tracer is None:
        tracer = ledger.tracer
    key = tuple(tool.name for tool in registry.list())
    names = create_tool_name_map(key)
    return Agent(
        model=model,
        provider=provider,
        registry=registry,
        validator=validator,
        permission=permission,
        middleware=middleware,
        filters=filter_tuple,
        loop=loop if loop is not None else SingleShotLoop(),
        limits=limits if limits is not None else Limits(),
        ledger=ledger,
        tracer=tracer,
        names=names,
        names_key=key,
    )
