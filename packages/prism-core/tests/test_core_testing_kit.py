"""The conformance kit passes against sound wiring and fails against broken wiring."""

from __future__ import annotations

import attrs
import pytest
import trio

from prism.core import (
    DispatchOptions,
    ExecutionAction,
    JsonObject,
    MiddlewareRegistry,
    PermissionRequest,
    ToolCall,
    ToolDefinition,
    ToolExecutionBlocked,
    ToolExecutionContext,
    ToolExecutionFinished,
    ToolExecutionStarted,
    ToolFilter,
    ToolResult,
    create_rule_permission_policy,
    create_tool_parameter_validator,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.core.ledger import RunLedger
from prism.core.testing import (
    AllowAllExecutionPolicy,
    AllowAllPermissionPolicy,
    BlockingTool,
    DenyAllExecutionPolicy,
    DenyAllPermissionPolicy,
    Dispatcher,
    FailingTool,
    RecordingSink,
    RecordingTool,
    assert_tool_dispatch_conforms,
    echo_tool,
)

VALID: JsonObject = {"q": "prism"}


def _default_wiring(tool: ToolDefinition) -> DispatchOptions:
    return DispatchOptions(registry=create_tool_registry([tool]))


# --- passes against sound wiring -------------------------------------------------------


async def test_kit_passes_against_the_default_wiring() -> None:
    tool = echo_tool()
    await assert_tool_dispatch_conforms(lambda: _default_wiring(tool), tool, valid_arguments=VALID)


async def test_kit_passes_against_a_fully_gated_host_wiring() -> None:
    tool = echo_tool("search")
    host_sink = RecordingSink()
    host_ledger = RunLedger()
    middleware = MiddlewareRegistry()
    middleware.on_tool_call(lambda call, ctx: None)
    middleware.on_tool_result(lambda call, result, ctx: None)

    class Permissive:
        def validate(self, schema: JsonObject, value: object) -> object:
            from prism.core import ToolArgumentValidationResult

            return ToolArgumentValidationResult(ok=True)

    def make() -> DispatchOptions:
        return DispatchOptions(
            registry=create_tool_registry([tool, echo_tool("other")]),
            filters=[ToolFilter(allow=frozenset({"search", "other"}))],
            permission=create_rule_permission_policy(allow=["tool:*:execute"]),
            validator=create_tool_parameter_validator(Permissive()),  # type: ignore[arg-type]
            middleware=middleware,
            on_event=host_sink,
            ledger=host_ledger,
        )

    await assert_tool_dispatch_conforms(make, tool, valid_arguments=VALID)
    # The kit forwarded events to the host's sink and wrote to the host's ledger.
    assert host_sink.of_type(ToolExecutionFinished)
    assert {r.status for r in host_ledger.records} == {"blocked", "cancelled", "ok"}


async def test_kit_registers_the_tool_when_the_host_registry_lacks_it() -> None:
    tool = echo_tool()
    make = lambda: DispatchOptions(registry=create_tool_registry())  # noqa: E731
    await assert_tool_dispatch_conforms(make, tool, valid_arguments=VALID)


async def test_kit_accepts_a_host_dispatcher_that_wraps_the_default() -> None:
    tool = echo_tool()
    seen: list[str] = []

    async def traced(call: ToolCall, options: DispatchOptions) -> ToolResult:
        seen.append(call.id)
        return await dispatch_tool_call(call, options)

    await assert_tool_dispatch_conforms(
        lambda: _default_wiring(tool), tool, valid_arguments=VALID, dispatch=traced
    )
    assert "conformance-success" in seen


async def test_kit_accepts_a_tool_that_answers_with_an_error_result() -> None:
    tool = RecordingTool(result=ToolResult.error("no results")).definition
    await assert_tool_dispatch_conforms(lambda: _default_wiring(tool), tool, valid_arguments=VALID)


# --- fails against broken wiring -------------------------------------------------------


async def test_kit_fails_when_middleware_repairs_invalid_arguments() -> None:
    tool = echo_tool()
    middleware = MiddlewareRegistry()

    @middleware.on_tool_call
    def coerce(call: ToolCall, ctx: ToolExecutionContext) -> ToolCall | None:
        if not isinstance(call.arguments, dict):
            return attrs.evolve(call, arguments={})
        return None

    def make() -> DispatchOptions:
        return DispatchOptions(registry=create_tool_registry([tool]), middleware=middleware)

    with pytest.raises(AssertionError, match=r"invalid_arguments \(list\).*tool ran"):
        await assert_tool_dispatch_conforms(make, tool, valid_arguments=VALID)


async def test_kit_fails_when_middleware_routes_unknown_names_to_a_real_tool() -> None:
    tool = echo_tool()
    middleware = MiddlewareRegistry()

    @middleware.on_tool_call
    def fallback(call: ToolCall, ctx: ToolExecutionContext) -> ToolCall:
        return attrs.evolve(call, name="echo")

    def make() -> DispatchOptions:
        return DispatchOptions(registry=create_tool_registry([tool]), middleware=middleware)

    with pytest.raises(AssertionError, match="unknown_tool"):
        await assert_tool_dispatch_conforms(make, tool, valid_arguments=VALID)


async def test_kit_fails_against_a_dispatcher_that_skips_permission() -> None:
    tool = echo_tool()

    async def no_permission(call: ToolCall, options: DispatchOptions) -> ToolResult:
        return await dispatch_tool_call(call, attrs.evolve(options, permission=None))

    with pytest.raises(AssertionError, match=r"permission_denied.*tool ran"):
        await assert_tool_dispatch_conforms(
            lambda: _default_wiring(tool), tool, valid_arguments=VALID, dispatch=no_permission
        )


async def test_kit_fails_against_a_dispatcher_that_ignores_filters() -> None:
    tool = echo_tool()

    async def no_filters(call: ToolCall, options: DispatchOptions) -> ToolResult:
        return await dispatch_tool_call(call, attrs.evolve(options, filters=()))

    with pytest.raises(AssertionError, match="'tool_denied'"):
        await assert_tool_dispatch_conforms(
            lambda: _default_wiring(tool), tool, valid_arguments=VALID, dispatch=no_filters
        )


async def test_kit_fails_against_a_dispatcher_that_skips_validation() -> None:
    tool = echo_tool()

    async def no_validation(call: ToolCall, options: DispatchOptions) -> ToolResult:
        return await dispatch_tool_call(call, attrs.evolve(options, validator=None))

    with pytest.raises(AssertionError, match="validation_failed"):
        await assert_tool_dispatch_conforms(
            lambda: _default_wiring(tool), tool, valid_arguments=VALID, dispatch=no_validation
        )


async def test_kit_fails_against_a_dispatcher_that_calls_tools_directly() -> None:
    tool = echo_tool()

    async def direct(call: ToolCall, options: DispatchOptions) -> ToolResult:
        found = options.registry.get(call.name)
        if found is None:
            return ToolResult.error("unknown")
        ctx = ToolExecutionContext(call)
        return await found.execute(call.arguments, ctx)  # type: ignore[arg-type]

    with pytest.raises(AssertionError, match=r"'success'.*started event"):
        await assert_tool_dispatch_conforms(
            lambda: _default_wiring(tool), tool, valid_arguments=VALID, dispatch=direct
        )


async def test_kit_fails_when_the_dispatcher_ignores_the_abort_signal() -> None:
    tool = echo_tool()

    async def no_abort(call: ToolCall, options: DispatchOptions) -> ToolResult:
        return await dispatch_tool_call(call, attrs.evolve(options, signal=None))

    with pytest.raises(AssertionError, match="aborted"):
        await assert_tool_dispatch_conforms(
            lambda: _default_wiring(tool), tool, valid_arguments=VALID, dispatch=no_abort
        )


async def test_kit_fails_when_the_dispatcher_drops_the_ledger() -> None:
    tool = echo_tool()

    async def no_ledger(call: ToolCall, options: DispatchOptions) -> ToolResult:
        return await dispatch_tool_call(call, attrs.evolve(options, ledger=None))

    with pytest.raises(AssertionError, match="ledger record"):
        await assert_tool_dispatch_conforms(
            lambda: _default_wiring(tool), tool, valid_arguments=VALID, dispatch=no_ledger
        )


async def test_kit_fails_when_the_dispatcher_raises() -> None:
    tool = echo_tool()

    async def raising(call: ToolCall, options: DispatchOptions) -> ToolResult:
        raise RuntimeError("wiring bug")

    with pytest.raises(AssertionError, match="dispatch raised RuntimeError: wiring bug"):
        await assert_tool_dispatch_conforms(
            lambda: _default_wiring(tool), tool, valid_arguments=VALID, dispatch=raising
        )


async def test_kit_fails_when_the_hosts_own_gates_refuse_valid_arguments() -> None:
    tool = echo_tool()

    def make() -> DispatchOptions:
        return DispatchOptions(
            registry=create_tool_registry([tool]), permission=DenyAllPermissionPolicy()
        )

    with pytest.raises(AssertionError, match=r"'success'.*permission_denied"):
        await assert_tool_dispatch_conforms(make, tool, valid_arguments=VALID)


async def test_kit_fails_when_make_options_returns_something_else() -> None:
    tool = echo_tool()
    with pytest.raises(AssertionError, match="make_options"):
        await assert_tool_dispatch_conforms(
            lambda: "options",  # type: ignore[arg-type,return-value]
            tool,
            valid_arguments=VALID,
        )


# --- the doubles -----------------------------------------------------------------------


async def test_echo_tool_answers_with_sorted_json() -> None:
    tool = echo_tool()
    ctx = ToolExecutionContext(ToolCall(id="1", name="echo", arguments={}))
    result = await tool.execute({"b": 1, "a": "x"}, ctx)
    assert result.joined_text == '{"a": "x", "b": 1}'
    assert result.structured == {"b": 1, "a": "x"}
    assert not result.is_error


async def test_failing_tool_raises_and_counts() -> None:
    tool = FailingTool(message="nope", exception_type=ValueError)
    ctx = ToolExecutionContext(ToolCall(id="1", name="fail", arguments={}))
    with pytest.raises(ValueError, match="nope"):
        await tool.execute({}, ctx)
    assert tool.calls == 1


async def test_blocking_tool_tracks_concurrency_and_release() -> None:
    tool = BlockingTool()
    ctx = ToolExecutionContext(ToolCall(id="1", name="block", arguments={}))
    results: list[ToolResult] = []

    async def run() -> None:
        results.append(await tool.execute({}, ctx))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        nursery.start_soon(run)
        await tool.started.wait()
        await trio.testing.wait_all_tasks_blocked()
        assert tool.running == 2
        tool.release()
    assert tool.max_running == 2
    assert tool.finished == 2
    assert tool.running == 0
    assert [r.joined_text for r in results] == ["released", "released"]


def test_recording_sink_forwards_and_filters() -> None:
    forwarded: list[object] = []
    sink = RecordingSink(forward=forwarded.append)
    event = ToolExecutionFinished(
        call_id="a", tool_name="t", result=ToolResult.text("x"), duration_s=0.0
    )
    sink(event)
    assert forwarded == [event]
    assert sink.of_type(ToolExecutionFinished) == [event]
    assert sink.for_call("a") == [event]
    assert sink.for_call("b") == []
    assert sink.types == ["tool_execution_finished"]
    sink.clear()
    assert sink.events == []


def test_policy_doubles_record_what_they_decide() -> None:
    request = PermissionRequest(kind="tool", target="t", action="execute")
    action = ExecutionAction(kind="read", operation="read")
    allow_p, deny_p = AllowAllPermissionPolicy(), DenyAllPermissionPolicy(reason="r")
    allow_e, deny_e = AllowAllExecutionPolicy(), DenyAllExecutionPolicy(reason="r")
    assert allow_p.check(request).allowed
    assert not deny_p.check(request).allowed
    assert deny_p.check(request).reason == "r"
    assert allow_e.check(action).allowed
    assert not deny_e.check(action).allowed
    assert (len(allow_p.requests), len(deny_p.requests)) == (1, 2)
    assert (allow_e.actions, deny_e.actions) == ([action], [action])


# --- broken hosts the kit names ----------------------------------------------------------


def _is_row(call: ToolCall, row: str) -> bool:
    return call.id == f"conformance-{row}"


async def _not_a_result(call: ToolCall, options: DispatchOptions) -> ToolResult:
    return "done"  # type: ignore[return-value]


async def _blocked_looks_fine(call: ToolCall, options: DispatchOptions) -> ToolResult:
    result = await dispatch_tool_call(call, options)
    return ToolResult.text("fine") if _is_row(call, "unknown_tool") else result


async def _blocked_says_nothing(call: ToolCall, options: DispatchOptions) -> ToolResult:
    result = await dispatch_tool_call(call, options)
    return ToolResult(is_error=True) if _is_row(call, "unknown_tool") else result


async def _blocked_twice(call: ToolCall, options: DispatchOptions) -> ToolResult:
    result = await dispatch_tool_call(call, options)
    if _is_row(call, "unknown_tool") and options.on_event is not None:
        options.on_event(
            ToolExecutionBlocked(
                call_id=call.id, tool_name=call.name, reason="tool_denied", message="again"
            )
        )
    return result


async def _blocked_for_the_wrong_reason(call: ToolCall, options: DispatchOptions) -> ToolResult:
    if _is_row(call, "unknown_tool"):
        call = attrs.evolve(call, name="echo")
        options = attrs.evolve(options, filters=(ToolFilter(deny={"echo"}),))
    return await dispatch_tool_call(call, options)


async def _started_while_blocked(call: ToolCall, options: DispatchOptions) -> ToolResult:
    if _is_row(call, "unknown_tool") and options.on_event is not None:
        options.on_event(ToolExecutionStarted(call_id=call.id, tool_name=call.name, arguments={}))
    return await dispatch_tool_call(call, options)


async def _aborted_looks_fine(call: ToolCall, options: DispatchOptions) -> ToolResult:
    if _is_row(call, "aborted"):
        return ToolResult.text("fine")
    return await dispatch_tool_call(call, options)


async def _aborted_recorded_twice(call: ToolCall, options: DispatchOptions) -> ToolResult:
    if _is_row(call, "aborted"):
        await dispatch_tool_call(call, options)
    return await dispatch_tool_call(call, options)


@pytest.mark.parametrize(
    ("dispatch", "message"),
    [
        (_not_a_result, "dispatch returned str, not a ToolResult"),
        (_blocked_looks_fine, "'unknown_tool': the result is not an error result"),
        (_blocked_says_nothing, "'unknown_tool': the error result has no text"),
        (_blocked_twice, "'unknown_tool': expected exactly one ToolExecutionBlocked event, got 2"),
        (_blocked_for_the_wrong_reason, "blocked reason is 'tool_denied', expected 'unknown_tool'"),
        (
            _started_while_blocked,
            r"'unknown_tool': a blocked call emitted \['tool_execution_started'\]",
        ),
        (_aborted_looks_fine, "'aborted': an aborted call did not get an error result"),
        (_aborted_recorded_twice, "'aborted': expected one 'cancelled' ledger record"),
    ],
)
async def test_kit_names_what_a_broken_host_got_wrong(dispatch: Dispatcher, message: str) -> None:
    tool = echo_tool()
    with pytest.raises(AssertionError, match=message):
        await assert_tool_dispatch_conforms(
            lambda: _default_wiring(tool), tool, valid_arguments=VALID, dispatch=dispatch
        )
