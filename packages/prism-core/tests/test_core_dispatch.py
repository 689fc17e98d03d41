"""The dispatcher lifecycle: order, the five blocked reasons, middleware, validators, failures."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import ClassVar

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from prism.core import (
    BlockedReason,
    ConfigurationError,
    DispatchOptions,
    ErrorInfo,
    ExecutionAction,
    ExecutionDeniedError,
    JsonObject,
    MiddlewareRegistry,
    PermissionDecision,
    PermissionRequest,
    TextContent,
    ToolCall,
    ToolDefinition,
    ToolExecutionBlocked,
    ToolExecutionContext,
    ToolExecutionError,
    ToolExecutionFinished,
    ToolExecutionProgress,
    ToolExecutionStarted,
    ToolFilter,
    ToolResult,
    assert_execution_allowed,
    create_rule_permission_policy,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.core.ledger import RunLedger
from prism.core.testing import (
    DenyAllExecutionPolicy,
    DenyAllPermissionPolicy,
    FailingTool,
    RecordingSink,
    RecordingTool,
)


def _call(name: str = "record", arguments: object = None, call_id: str = "c1") -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments={"x": 1} if arguments is None else arguments)


def _options(*tools: ToolDefinition, **kwargs: object) -> DispatchOptions:
    return DispatchOptions(registry=create_tool_registry(tools), **kwargs)  # type: ignore[arg-type]


def _assert_blocked(
    result: ToolResult,
    sink: RecordingSink,
    ledger: RunLedger,
    reason: BlockedReason,
    tool: RecordingTool,
) -> None:
    assert tool.calls == []
    assert result.is_error
    assert result.joined_text
    blocked = sink.of_type(ToolExecutionBlocked)
    assert len(blocked) == 1
    assert blocked[0].reason == reason
    assert blocked[0].message
    assert sink.of_type(ToolExecutionStarted) == []
    assert sink.of_type(ToolExecutionFinished) == []
    assert sink.of_type(ToolExecutionError) == []
    assert [(r.status, r.blocked_reason) for r in ledger.records] == [("blocked", reason)]


# --- the fixed order -------------------------------------------------------------------


async def test_gates_run_in_the_fixed_order() -> None:
    trace: list[str] = []

    async def execute(arguments: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        trace.append("execute")
        return ToolResult.text("done")

    class Policy:
        def check(self, request: PermissionRequest) -> PermissionDecision:
            trace.append(f"permission {request.key}")
            return PermissionDecision(allowed=True)

    def validate(tool: ToolDefinition, arguments: JsonObject, ctx: ToolExecutionContext) -> None:
        trace.append("validate")

    middleware = MiddlewareRegistry()

    @middleware.on_tool_call
    def on_call(call: ToolCall, ctx: ToolExecutionContext) -> None:
        trace.append("middleware call")

    @middleware.on_tool_result
    def on_result(call: ToolCall, result: ToolResult, ctx: ToolExecutionContext) -> None:
        trace.append("middleware result")

    def sink(event: object) -> None:
        trace.append(f"event {type(event).__name__}")

    ledger = RunLedger()
    options = _options(
        ToolDefinition(name="t", execute=execute),
        permission=Policy(),
        validator=validate,
        middleware=middleware,
        on_event=sink,
        ledger=ledger,
    )
    result = await dispatch_tool_call(_call("t"), options)

    assert result.joined_text == "done"
    assert trace == [
        "middleware call",
        "permission tool:t:execute",
        "validate",
        "event ToolExecutionStarted",
        "execute",
        "middleware result",
        "event ToolExecutionFinished",
    ]
    assert [r.status for r in ledger.records] == ["ok"]


async def test_successful_call_emits_started_then_finished_and_an_ok_record() -> None:
    tool = RecordingTool(result=ToolResult.text("hi"))
    sink = RecordingSink()
    ledger = RunLedger()
    result = await dispatch_tool_call(
        _call(arguments={"a": [1, 2.5, None, True, {"b": "c"}]}),
        _options(tool.definition, on_event=sink, ledger=ledger),
    )
    assert result == ToolResult.text("hi")
    assert [arguments for arguments, _ in tool.calls] == [{"a": [1, 2.5, None, True, {"b": "c"}]}]
    assert sink.types == ["tool_execution_started", "tool_execution_finished"]
    finished = sink.of_type(ToolExecutionFinished)[0]
    assert finished.result == result
    assert finished.duration_s >= 0
    assert finished.call_id == "c1"
    assert finished.tool_name == "record"
    record = ledger.records[0]
    assert (record.call_id, record.tool_name, record.status) == ("c1", "record", "ok")
    assert record.result_preview == "hi"
    assert record.finished_at >= record.started_at


async def test_error_result_from_a_tool_is_recorded_as_error_with_a_finished_event() -> None:
    tool = RecordingTool(result=ToolResult.error("nope"))
    sink = RecordingSink()
    ledger = RunLedger()
    result = await dispatch_tool_call(
        _call(), _options(tool.definition, on_event=sink, ledger=ledger)
    )
    assert result.is_error
    assert sink.types == ["tool_execution_started", "tool_execution_finished"]
    assert ledger.records[0].status == "error"


async def test_metadata_is_a_read_only_copy_tools_cannot_change() -> None:
    source = {"user": "ada"}

    async def meddle(arguments: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        ctx.metadata["user"] = "mallory"  # type: ignore[index]
        return ToolResult.text("unreachable")  # pragma: no cover

    options = _options(ToolDefinition(name="t", execute=meddle), metadata=source)
    source["user"] = "changed later"
    result = await dispatch_tool_call(_call("t"), options)
    assert result.is_error
    assert "TypeError" in result.joined_text
    assert options.metadata == {"user": "ada"}


async def test_context_carries_call_signal_and_metadata() -> None:
    tool = RecordingTool()
    call = _call()
    await dispatch_tool_call(call, _options(tool.definition, metadata={"user": "ada"}))
    (_, ctx) = tool.calls[0]
    assert ctx.call == call
    assert ctx.metadata == {"user": "ada"}
    assert not ctx.signal.aborted


# --- the five blocked reasons ----------------------------------------------------------


async def test_unknown_tool_is_blocked() -> None:
    tool = RecordingTool()
    sink, ledger = RecordingSink(), RunLedger()
    result = await dispatch_tool_call(
        _call("missing"), _options(tool.definition, on_event=sink, ledger=ledger)
    )
    _assert_blocked(result, sink, ledger, "unknown_tool", tool)
    assert "missing" in result.joined_text
    assert result.details["blocked_reason"] == "unknown_tool"


async def test_filter_denied_tool_is_blocked() -> None:
    tool = RecordingTool()
    sink, ledger = RecordingSink(), RunLedger()
    options = _options(
        tool.definition,
        filters=[ToolFilter(allow=frozenset({"other"}))],
        on_event=sink,
        ledger=ledger,
    )
    result = await dispatch_tool_call(_call(), options)
    _assert_blocked(result, sink, ledger, "tool_denied", tool)


@pytest.mark.parametrize(
    "arguments",
    [
        [1, 2],
        "{}",
        42,
        None,
        {1: "int key"},
        {"nested": {2: "int key"}},
        {"nan": float("nan")},
        {"inf": [float("inf")]},
        {"tuple": (1, 2)},
        {"set": {1, 2}},
        {"object": object()},
        {"bytes": b"raw"},
    ],
    ids=repr,
)
async def test_non_json_object_arguments_are_blocked(arguments: object) -> None:
    tool = RecordingTool()
    sink, ledger = RecordingSink(), RunLedger()
    call = ToolCall(id="c1", name="record", arguments=arguments)
    result = await dispatch_tool_call(call, _options(tool.definition, on_event=sink, ledger=ledger))
    _assert_blocked(result, sink, ledger, "invalid_arguments", tool)


async def test_deeply_nested_arguments_are_checked_without_recursion() -> None:
    nested: object = "leaf"
    for _ in range(100_000):
        nested = {"a": nested}
    tool = RecordingTool()
    result = await dispatch_tool_call(_call(arguments=nested), _options(tool.definition))
    assert not result.is_error
    assert len(tool.calls) == 1


async def test_permission_denied_call_is_blocked_and_names_the_key() -> None:
    tool = RecordingTool()
    sink, ledger = RecordingSink(), RunLedger()
    policy = DenyAllPermissionPolicy(reason="not today")
    options = _options(tool.definition, permission=policy, on_event=sink, ledger=ledger)
    result = await dispatch_tool_call(_call(), options)
    _assert_blocked(result, sink, ledger, "permission_denied", tool)
    assert "tool:record:execute" in result.joined_text
    assert "not today" in result.joined_text
    assert policy.requests == [PermissionRequest(kind="tool", target="record", action="execute")]


async def test_validation_failure_is_blocked() -> None:
    tool = RecordingTool()
    sink, ledger = RecordingSink(), RunLedger()

    def validate(t: ToolDefinition, arguments: JsonObject, ctx: ToolExecutionContext) -> str:
        return "x must be a string"

    options = _options(tool.definition, validator=validate, on_event=sink, ledger=ledger)
    result = await dispatch_tool_call(_call(), options)
    _assert_blocked(result, sink, ledger, "validation_failed", tool)
    assert result.joined_text == "x must be a string"


async def test_earlier_gate_wins_when_several_would_refuse() -> None:
    tool = RecordingTool()
    sink = RecordingSink()
    options = _options(
        tool.definition,
        filters=[ToolFilter(deny={"record"})],
        permission=DenyAllPermissionPolicy(),
        on_event=sink,
    )
    await dispatch_tool_call(_call(arguments=[1]), options)
    assert [e.reason for e in sink.of_type(ToolExecutionBlocked)] == ["tool_denied"]


async def test_permission_is_not_consulted_for_an_unknown_tool() -> None:
    policy = DenyAllPermissionPolicy()
    await dispatch_tool_call(_call("missing"), _options(permission=policy))
    assert policy.requests == []


# --- permission policies: sync, async, misbehaving ------------------------------------


async def test_async_permission_policy_is_awaited() -> None:
    tool = RecordingTool()

    class AsyncPolicy:
        async def check(self, request: PermissionRequest) -> PermissionDecision:
            await trio.lowlevel.checkpoint()
            return PermissionDecision(allowed=request.target == "record")

    ok = await dispatch_tool_call(_call(), _options(tool.definition, permission=AsyncPolicy()))
    assert not ok.is_error
    assert len(tool.calls) == 1


async def test_async_permission_denial_blocks() -> None:
    tool = RecordingTool()
    sink, ledger = RecordingSink(), RunLedger()

    class AsyncDeny:
        async def check(self, request: PermissionRequest) -> PermissionDecision:
            await trio.lowlevel.checkpoint()
            return PermissionDecision(allowed=False)

    options = _options(tool.definition, permission=AsyncDeny(), on_event=sink, ledger=ledger)
    result = await dispatch_tool_call(_call(), options)
    _assert_blocked(result, sink, ledger, "permission_denied", tool)


@pytest.mark.parametrize("answer", [True, "yes", None, {"allowed": True}], ids=repr)
async def test_permission_policy_returning_a_non_decision_fails_closed(answer: object) -> None:
    tool = RecordingTool()
    sink, ledger = RecordingSink(), RunLedger()

    class Sloppy:
        def check(self, request: PermissionRequest) -> object:
            return answer

    options = _options(tool.definition, permission=Sloppy(), on_event=sink, ledger=ledger)
    result = await dispatch_tool_call(_call(), options)
    _assert_blocked(result, sink, ledger, "permission_denied", tool)


async def test_permission_policy_that_raises_blocks_the_call() -> None:
    tool = RecordingTool()
    sink, ledger = RecordingSink(), RunLedger()

    class Broken:
        def check(self, request: PermissionRequest) -> PermissionDecision:
            raise KeyError("policy store unavailable")

    options = _options(tool.definition, permission=Broken(), on_event=sink, ledger=ledger)
    result = await dispatch_tool_call(_call(), options)
    _assert_blocked(result, sink, ledger, "permission_denied", tool)
    assert "policy store unavailable" in result.joined_text


async def test_rule_policy_wired_into_dispatch_allows_and_denies_by_glob() -> None:
    read, shell = RecordingTool(name="read"), RecordingTool(name="shell")
    policy = create_rule_permission_policy(allow=["tool:*:execute"], deny=["tool:shell:*"])
    options = _options(read.definition, shell.definition, permission=policy)
    assert not (await dispatch_tool_call(_call("read"), options)).is_error
    assert (await dispatch_tool_call(_call("shell"), options)).is_error
    assert (len(read.calls), len(shell.calls)) == (1, 0)


# --- validator return forms ------------------------------------------------------------

Validator = Callable[[ToolDefinition, JsonObject, ToolExecutionContext], object]


def _sync(value: object) -> Validator:
    def validate(tool: ToolDefinition, arguments: JsonObject, ctx: ToolExecutionContext) -> object:
        return value

    return validate


def _async(value: object) -> Validator:
    async def validate(
        tool: ToolDefinition, arguments: JsonObject, ctx: ToolExecutionContext
    ) -> object:
        await trio.lowlevel.checkpoint()
        return value

    return validate


@pytest.mark.parametrize("wrap", [_sync, _async], ids=["sync", "async"])
async def test_validator_returning_none_lets_the_call_run(
    wrap: Callable[[object], Validator],
) -> None:
    tool = RecordingTool()
    result = await dispatch_tool_call(_call(), _options(tool.definition, validator=wrap(None)))
    assert not result.is_error
    assert len(tool.calls) == 1


@pytest.mark.parametrize("wrap", [_sync, _async], ids=["sync", "async"])
async def test_validator_returning_a_string_blocks_with_that_text(
    wrap: Callable[[object], Validator],
) -> None:
    tool = RecordingTool()
    sink, ledger = RecordingSink(), RunLedger()
    options = _options(tool.definition, validator=wrap("bad x"), on_event=sink, ledger=ledger)
    result = await dispatch_tool_call(_call(), options)
    _assert_blocked(result, sink, ledger, "validation_failed", tool)
    assert result.joined_text == "bad x"


@pytest.mark.parametrize("wrap", [_sync, _async], ids=["sync", "async"])
async def test_validator_returning_error_info_blocks_and_keeps_code_and_details(
    wrap: Callable[[object], Validator],
) -> None:
    tool = RecordingTool()
    sink, ledger = RecordingSink(), RunLedger()
    info = ErrorInfo(message="x too big", code="maximum", details={"limit": 3})
    options = _options(tool.definition, validator=wrap(info), on_event=sink, ledger=ledger)
    result = await dispatch_tool_call(_call(), options)
    _assert_blocked(result, sink, ledger, "validation_failed", tool)
    assert result.joined_text == "x too big"
    assert result.details["code"] == "maximum"
    assert result.details["details"] == {"limit": 3}


@pytest.mark.parametrize("wrap", [_sync, _async], ids=["sync", "async"])
async def test_validator_that_raises_blocks_instead_of_escaping(
    wrap: Callable[[object], Validator],
) -> None:
    tool = RecordingTool()
    sink, ledger = RecordingSink(), RunLedger()

    def raising(t: ToolDefinition, a: JsonObject, c: ToolExecutionContext) -> None:
        raise ValueError("schema compiler exploded")

    async def raising_async(t: ToolDefinition, a: JsonObject, c: ToolExecutionContext) -> None:
        raise ValueError("schema compiler exploded")

    validate = raising if wrap is _sync else raising_async
    options = _options(tool.definition, validator=validate, on_event=sink, ledger=ledger)
    result = await dispatch_tool_call(_call(), options)
    _assert_blocked(result, sink, ledger, "validation_failed", tool)
    assert "schema compiler exploded" in result.joined_text


async def test_validator_returning_another_type_blocks() -> None:
    tool = RecordingTool()
    sink, ledger = RecordingSink(), RunLedger()
    options = _options(tool.definition, validator=_sync(42), on_event=sink, ledger=ledger)
    result = await dispatch_tool_call(_call(), options)
    _assert_blocked(result, sink, ledger, "validation_failed", tool)


async def test_validator_sees_the_tool_and_the_arguments() -> None:
    tool = RecordingTool(parameters={"type": "object"})
    seen: list[tuple[str, JsonObject]] = []

    def validate(t: ToolDefinition, arguments: JsonObject, ctx: ToolExecutionContext) -> None:
        seen.append((t.name, arguments))

    await dispatch_tool_call(
        _call(arguments={"q": "v"}), _options(tool.definition, validator=validate)
    )
    assert seen == [("record", {"q": "v"})]


# --- middleware ------------------------------------------------------------------------


async def test_middleware_rewrite_is_looked_up_again() -> None:
    tool = RecordingTool()
    sink, ledger = RecordingSink(), RunLedger()
    middleware = MiddlewareRegistry()

    @middleware.on_tool_call
    def rename(call: ToolCall, ctx: ToolExecutionContext) -> ToolCall:
        return ToolCall(id=call.id, name="ghost", arguments=call.arguments)

    options = _options(tool.definition, middleware=middleware, on_event=sink, ledger=ledger)
    result = await dispatch_tool_call(_call(), options)
    _assert_blocked(result, sink, ledger, "unknown_tool", tool)
    assert sink.of_type(ToolExecutionBlocked)[0].tool_name == "ghost"
    assert ledger.records[0].tool_name == "ghost"


async def test_middleware_rewrite_is_filtered_again() -> None:
    tool, secret = RecordingTool(), RecordingTool(name="secret")
    sink, ledger = RecordingSink(), RunLedger()
    middleware = MiddlewareRegistry()

    @middleware.on_tool_call
    def redirect(call: ToolCall, ctx: ToolExecutionContext) -> ToolCall:
        return ToolCall(id=call.id, name="secret", arguments=call.arguments)

    options = _options(
        tool.definition,
        secret.definition,
        filters=[ToolFilter(deny={"secret"})],
        middleware=middleware,
        on_event=sink,
        ledger=ledger,
    )
    result = await dispatch_tool_call(_call(), options)
    _assert_blocked(result, sink, ledger, "tool_denied", tool)
    assert secret.calls == []


async def test_middleware_rewrite_arguments_are_checked_again() -> None:
    tool = RecordingTool()
    sink, ledger = RecordingSink(), RunLedger()
    middleware = MiddlewareRegistry()

    @middleware.on_tool_call
    async def corrupt(call: ToolCall, ctx: ToolExecutionContext) -> ToolCall:
        await trio.lowlevel.checkpoint()
        return ToolCall(id=call.id, name=call.name, arguments=["not", "an", "object"])

    options = _options(tool.definition, middleware=middleware, on_event=sink, ledger=ledger)
    result = await dispatch_tool_call(_call(), options)
    _assert_blocked(result, sink, ledger, "invalid_arguments", tool)


async def test_middleware_rewrite_reaches_the_tool_and_keeps_the_call_id() -> None:
    tool = RecordingTool()
    middleware = MiddlewareRegistry()

    @middleware.on_tool_call
    def add_default(call: ToolCall, ctx: ToolExecutionContext) -> ToolCall:
        assert isinstance(call.arguments, dict)
        return ToolCall(id="forged", name=call.name, arguments={**call.arguments, "limit": 10})

    sink = RecordingSink()
    await dispatch_tool_call(
        _call(), _options(tool.definition, middleware=middleware, on_event=sink)
    )
    arguments, ctx = tool.calls[0]
    assert arguments == {"x": 1, "limit": 10}
    assert ctx.call.id == "c1"
    assert {e.call_id for e in sink.of_type(ToolExecutionStarted)} == {"c1"}


async def test_middleware_hooks_run_in_registration_order_and_chain() -> None:
    tool = RecordingTool()
    middleware = MiddlewareRegistry()
    order: list[str] = []

    @middleware.on_tool_call
    def first(call: ToolCall, ctx: ToolExecutionContext) -> ToolCall:
        order.append("first")
        return ToolCall(id=call.id, name=call.name, arguments={"step": 1})

    @middleware.on_tool_call
    def second(call: ToolCall, ctx: ToolExecutionContext) -> None:
        order.append(f"second saw {call.arguments}")

    await dispatch_tool_call(_call(), _options(tool.definition, middleware=middleware))
    assert order == ["first", "second saw {'step': 1}"]
    assert tool.calls[0][0] == {"step": 1}


@pytest.mark.parametrize("is_error", [True, False])
async def test_middleware_short_circuit_counts_as_tool_denied(is_error: bool) -> None:
    tool = RecordingTool()
    sink, ledger = RecordingSink(), RunLedger()
    middleware = MiddlewareRegistry()

    @middleware.on_tool_call
    def block(call: ToolCall, ctx: ToolExecutionContext) -> ToolResult:
        return ToolResult.text("quota exhausted", is_error=is_error)

    options = _options(tool.definition, middleware=middleware, on_event=sink, ledger=ledger)
    result = await dispatch_tool_call(_call(), options)
    _assert_blocked(result, sink, ledger, "tool_denied", tool)
    assert result.joined_text == "quota exhausted"
    assert sink.of_type(ToolExecutionBlocked)[0].message == "quota exhausted"


async def test_middleware_short_circuit_without_text_still_answers_the_model() -> None:
    tool = RecordingTool()
    middleware = MiddlewareRegistry()
    middleware.on_tool_call(lambda call, ctx: ToolResult())
    result = await dispatch_tool_call(_call(), _options(tool.definition, middleware=middleware))
    assert result.is_error
    assert "blocked by middleware" in result.joined_text


@pytest.mark.parametrize("kind", ["raises", "returns junk"])
async def test_broken_call_middleware_blocks_the_call(kind: str) -> None:
    tool = RecordingTool()
    sink, ledger = RecordingSink(), RunLedger()
    middleware = MiddlewareRegistry()

    @middleware.on_tool_call  # type: ignore[arg-type]
    def broken(call: ToolCall, ctx: ToolExecutionContext) -> object:
        if kind == "raises":
            raise RuntimeError("hook bug")
        return 42

    options = _options(tool.definition, middleware=middleware, on_event=sink, ledger=ledger)
    result = await dispatch_tool_call(_call(), options)
    _assert_blocked(result, sink, ledger, "tool_denied", tool)


async def test_result_middleware_rewrites_the_result_events_and_ledger_see() -> None:
    tool = RecordingTool(result=ToolResult.text("raw"))
    sink, ledger = RecordingSink(), RunLedger()
    middleware = MiddlewareRegistry()

    @middleware.on_tool_result
    async def wrap(call: ToolCall, result: ToolResult, ctx: ToolExecutionContext) -> ToolResult:
        await trio.lowlevel.checkpoint()
        return ToolResult.text(f"<{result.joined_text}>")

    options = _options(tool.definition, middleware=middleware, on_event=sink, ledger=ledger)
    result = await dispatch_tool_call(_call(), options)
    assert result.joined_text == "<raw>"
    assert sink.of_type(ToolExecutionFinished)[0].result.joined_text == "<raw>"
    assert ledger.records[0].result_preview == "<raw>"


async def test_result_middleware_is_not_run_for_blocked_calls() -> None:
    middleware = MiddlewareRegistry()
    seen: list[ToolCall] = []
    middleware.on_tool_result(lambda call, result, ctx: seen.append(call))
    await dispatch_tool_call(_call("missing"), _options(middleware=middleware))
    assert seen == []


@pytest.mark.parametrize("kind", ["raises", "returns junk"])
async def test_broken_result_middleware_gives_an_error_result(kind: str) -> None:
    tool = RecordingTool()
    ledger = RunLedger()
    middleware = MiddlewareRegistry()

    @middleware.on_tool_result  # type: ignore[arg-type]
    def broken(call: ToolCall, result: ToolResult, ctx: ToolExecutionContext) -> object:
        if kind == "raises":
            raise RuntimeError("hook bug")
        return "not a result"

    result = await dispatch_tool_call(
        _call(), _options(tool.definition, middleware=middleware, ledger=ledger)
    )
    assert result.is_error
    assert "result middleware" in result.joined_text
    assert ledger.records[0].status == "error"


def test_middleware_registry_rejects_non_callables() -> None:
    middleware = MiddlewareRegistry()
    with pytest.raises(ConfigurationError, match="on_tool_call"):
        middleware.on_tool_call(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="on_tool_result"):
        middleware.on_tool_result("x")  # type: ignore[arg-type]


# --- tools that fail -------------------------------------------------------------------


async def test_raising_tool_gives_an_error_result_and_an_error_event() -> None:
    tool = FailingTool(message="disk on fire")
    sink, ledger = RecordingSink(), RunLedger()
    result = await dispatch_tool_call(
        _call("fail"), _options(tool.definition, on_event=sink, ledger=ledger)
    )
    assert tool.calls == 1
    assert result.is_error
    assert "disk on fire" in result.joined_text
    assert result.details["error"] == "RuntimeError: disk on fire"
    assert sink.types == ["tool_execution_started", "tool_execution_error"]
    error = sink.of_type(ToolExecutionError)[0]
    assert error.error == "RuntimeError: disk on fire"
    assert not error.cancelled
    assert ledger.records[0].status == "error"


@pytest.mark.parametrize(
    "exc",
    [ValueError("v"), KeyError("k"), OSError(5, "io"), ExceptionGroup("g", [ValueError("x")])],
    ids=repr,
)
async def test_no_tool_exception_escapes(exc: Exception) -> None:
    async def execute(arguments: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        raise exc

    result = await dispatch_tool_call(
        _call("t"), _options(ToolDefinition(name="t", execute=execute))
    )
    assert result.is_error


async def test_huge_exception_message_is_bounded() -> None:
    tool = FailingTool(message="x" * 100_000)
    result = await dispatch_tool_call(_call("fail"), _options(tool.definition))
    assert len(result.joined_text) < 3000


async def test_exception_details_reach_the_result_without_clobbering_error() -> None:
    class Detailed(Exception):
        details: ClassVar[dict[str, object]] = {
            "error": "spoofed",
            "path": "/etc",
            "blob": object(),
        }

    async def execute(arguments: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        raise Detailed("boom")

    result = await dispatch_tool_call(
        _call("t"), _options(ToolDefinition(name="t", execute=execute))
    )
    assert result.details["error"] == "Detailed: boom"
    assert result.details["path"] == "/etc"
    assert result.details["blob"] == "<object>"


async def test_execution_policy_denial_inside_a_tool_is_an_error_result() -> None:
    async def execute(arguments: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        await assert_execution_allowed(
            DenyAllExecutionPolicy(reason="outside the roots"),
            ExecutionAction(kind="write", operation="write", paths=("/etc/passwd",)),
        )
        raise AssertionError("unreachable")  # pragma: no cover

    sink = RecordingSink()
    result = await dispatch_tool_call(
        _call("write"), _options(ToolDefinition(name="write", execute=execute), on_event=sink)
    )
    assert result.is_error
    assert "outside the roots" in result.joined_text
    assert result.details["execution_denied"] is True
    assert sink.of_type(ToolExecutionError)[0].error.startswith(ExecutionDeniedError.__name__)


@pytest.mark.parametrize("returned", [None, "text", {"content": []}, 3], ids=repr)
async def test_tool_returning_a_non_result_gives_an_error(returned: object) -> None:
    async def execute(arguments: JsonObject, ctx: ToolExecutionContext) -> object:
        return returned

    sink, ledger = RecordingSink(), RunLedger()
    definition = ToolDefinition(name="t", execute=execute)  # type: ignore[arg-type]
    result = await dispatch_tool_call(
        _call("t"), _options(definition, on_event=sink, ledger=ledger)
    )
    assert result.is_error
    assert "not a ToolResult" in result.joined_text
    assert sink.types == ["tool_execution_started", "tool_execution_error"]
    assert ledger.records[0].status == "error"


async def test_keyboard_interrupt_from_a_tool_is_not_swallowed() -> None:
    async def execute(arguments: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        await dispatch_tool_call(_call("t"), _options(ToolDefinition(name="t", execute=execute)))


# --- events ----------------------------------------------------------------------------


async def test_progress_reports_become_progress_events() -> None:
    async def execute(arguments: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        ctx.report_progress("half", progress=1, total=2)
        ctx.report_progress(progress=2.0)
        return ToolResult.text("done")

    sink = RecordingSink()
    await dispatch_tool_call(
        _call("t"), _options(ToolDefinition(name="t", execute=execute), on_event=sink)
    )
    assert sink.types == [
        "tool_execution_started",
        "tool_execution_progress",
        "tool_execution_progress",
        "tool_execution_finished",
    ]
    first, second = sink.of_type(ToolExecutionProgress)
    assert (first.call_id, first.tool_name, first.message, first.progress, first.total) == (
        "c1",
        "t",
        "half",
        1,
        2,
    )
    assert (second.message, second.progress, second.total) == (None, 2.0, None)


async def test_progress_without_a_sink_is_a_no_op() -> None:
    async def execute(arguments: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        ctx.report_progress("ignored")
        return ToolResult.text("done")

    result = await dispatch_tool_call(
        _call("t"), _options(ToolDefinition(name="t", execute=execute))
    )
    assert result.joined_text == "done"


async def test_raising_event_sink_does_not_break_dispatch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def sink(event: object) -> None:
        raise RuntimeError("sink down")

    async def execute(arguments: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        ctx.report_progress("still fine")
        return ToolResult.text("done")

    ledger = RunLedger()
    with caplog.at_level(logging.ERROR, logger="prism.core"):
        ok = await dispatch_tool_call(
            _call("t"),
            _options(ToolDefinition(name="t", execute=execute), on_event=sink, ledger=ledger),
        )
        blocked = await dispatch_tool_call(_call("missing"), _options(on_event=sink, ledger=ledger))
    assert ok.joined_text == "done"
    assert blocked.is_error
    assert [r.status for r in ledger.records] == ["ok", "blocked"]
    assert "an event sink raised" in caplog.text


async def test_every_dispatch_emits_exactly_one_terminal_event() -> None:
    tools = [RecordingTool().definition, FailingTool().definition]
    sink = RecordingSink()
    options = _options(*tools, on_event=sink)
    calls = [_call("record", call_id="a"), _call("fail", call_id="b"), _call("nope", call_id="c")]
    for call in calls:
        await dispatch_tool_call(call, options)
    terminal = (ToolExecutionBlocked, ToolExecutionFinished, ToolExecutionError)
    for call in calls:
        assert len([e for e in sink.for_call(call.id) if isinstance(e, terminal)]) == 1


# --- misuse ----------------------------------------------------------------------------


async def test_dispatch_rejects_a_non_call() -> None:
    with pytest.raises(TypeError, match="ToolCall"):
        await dispatch_tool_call({"name": "x"}, _options())  # type: ignore[arg-type]


def test_dispatch_options_accept_a_single_filter() -> None:
    only = ToolFilter(deny={"x"})
    options = DispatchOptions(registry=create_tool_registry(), filters=only)
    assert options.filters == (only,)


async def test_tool_result_content_types_pass_through_untouched() -> None:
    result = ToolResult(content=[TextContent(text="a")], structured={"k": [1]})
    tool = RecordingTool(result=result)
    got = await dispatch_tool_call(_call(), _options(tool.definition))
    assert got is result


# --- the JSON-object check over many shapes --------------------------------------------

_json_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5)
)
_json = st.recursive(
    _json_leaves,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=12,
)
_bad_leaves = st.sampled_from(
    [float("nan"), float("inf"), (1,), {1}, b"x", object(), frozenset(), 1j]
)


def _dispatch_sync(arguments: object) -> tuple[ToolResult, RecordingTool]:
    tool = RecordingTool()
    result = trio.run(dispatch_tool_call, _call(arguments=arguments), _options(tool.definition))
    return result, tool


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(max_size=6), _json, max_size=5))
def test_any_json_object_reaches_the_tool_unchanged(arguments: dict[str, object]) -> None:
    result, tool = _dispatch_sync(arguments)
    assert not result.is_error
    assert [args for args, _ in tool.calls] == [arguments]


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(st.text(max_size=6), _json, max_size=4),
    st.lists(st.text(max_size=3), min_size=1, max_size=4),
    _bad_leaves,
)
def test_one_non_json_leaf_anywhere_blocks_the_call(
    arguments: dict[str, object], path: list[str], bad: object
) -> None:
    target: dict[str, object] = arguments
    for key in path[:-1]:
        child: dict[str, object] = {}
        target[key] = [child]
        target = child
    target[path[-1]] = bad
    result, tool = _dispatch_sync(arguments)
    assert result.is_error
    assert result.details["blocked_reason"] == "invalid_arguments"
    assert tool.calls == []


class _CountingList(list[object]):
    """A JSON array that counts how often something iterates it."""

    iterations = 0

    def __iter__(self):  # type: ignore[no-untyped-def]
        type(self).iterations += 1
        return super().__iter__()


async def test_a_validator_bounds_the_arguments_before_the_dispatcher_walks_them() -> None:
    # The dispatcher's own JSON walk used to run first: a 2,000,000-item
    # argument held the event loop for about 180 ms although the validator
    # refused it at once. With a validator, the walk runs on what it let through.
    tool = RecordingTool()
    seen: list[object] = []

    def refuse_big(definition: ToolDefinition, arguments: JsonObject, ctx: object) -> str | None:
        seen.append(arguments)
        return "too big" if "big" in arguments else None

    _CountingList.iterations = 0
    big = _CountingList(["x"] * 10)
    options = _options(tool.definition, validator=refuse_big)
    refused = await dispatch_tool_call(_call(arguments={"big": big}), options)
    assert refused.details["blocked_reason"] == "validation_failed"
    assert _CountingList.iterations == 0
    # What the validator lets through is still walked: a non-JSON leaf is refused.
    bad = await dispatch_tool_call(_call(arguments={"small": [{1, 2}]}), options)
    assert bad.details["blocked_reason"] == "invalid_arguments"
    assert tool.calls == []
    # Without a validator the walk runs first, as before.
    plain = await dispatch_tool_call(_call(arguments={"big": big}), _options(tool.definition))
    assert not plain.is_error
    assert _CountingList.iterations == 1
    # A value that is not an object never reaches the validator.
    seen.clear()
    odd = await dispatch_tool_call(_call(arguments=["not", "an", "object"]), options)
    assert odd.details["blocked_reason"] == "invalid_arguments"
    assert seen == []


@pytest.mark.parametrize("shape", ["cycle", "shared"])
async def test_arguments_holding_a_container_twice_are_refused_at_once(shape: str) -> None:
    # Arguments built in Python (an integration, a hook) can hold a list inside itself:
    # the walk looped forever on the event loop. Sharing one list at every level of a
    # deep chain made it exponential (2**20 visits here; 2**60 never ends).
    tool = RecordingTool()
    value: list[object] = []
    if shape == "cycle":
        value.append(value)
    else:
        for _ in range(20):
            value = [value, value]
    result = await dispatch_tool_call(_call(arguments={"x": value}), _options(tool.definition))
    assert result.details["blocked_reason"] == "invalid_arguments"
    assert "held twice (a cycle or a shared value)" in result.joined_text
    assert tool.calls == []
