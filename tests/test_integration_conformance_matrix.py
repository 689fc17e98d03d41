"""The seed design's 16-row conformance and threat-model matrix, across the real packages.

One test (or parametrised group) per row, named ``test_row_NN_<scenario>``, so the
matrix's status reads straight off the test report. Everything is real: real
schemas through the JSON Schema adapter, real MCP servers over stdio, real files and
symlinks in tmp_path, real subprocesses for the shell.
"""

from __future__ import annotations

import base64
import functools
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs
import pytest
import trio

from prism.coding.security import (
    ApprovalCallback,
    ApprovalDecision,
    CommandRules,
    create_coding_approval_policy,
    create_contained_file_operations,
)
from prism.coding.tools import (
    create_coding_tools,
    create_read_tool,
    create_shell_tool,
)
from prism.core import (
    AbortController,
    AbortSignal,
    AssistantMessage,
    DispatchOptions,
    DuplicateToolError,
    ExecutionAction,
    ImageContent,
    JsonObject,
    PermissionDeniedError,
    RunOptions,
    ScriptedProvider,
    SingleShotLoop,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    ToolResultMessage,
    create_agent,
    create_extension_kernel,
    create_rule_permission_policy,
    create_tool_registry,
    dispatch_tool_call,
    dispatch_tool_calls_in_order,
)
from prism.core.ledger import RunLedger
from prism.core.testing import RecordingTool
from prism.mcp import StdioTransport, open_mcp_tools
from prism.validation.jsonschema import create_json_schema_tool_validator

if TYPE_CHECKING:
    from pathlib import Path

TransportFactory = Callable[[str], StdioTransport]

OBJECT_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city"],
    "additionalProperties": False,
}


def _counting_tool(
    name: str = "weather", parameters: JsonObject | None = None
) -> tuple[ToolDefinition, list[JsonObject]]:
    seen: list[JsonObject] = []

    async def execute(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        seen.append(args)
        return ToolResult.text("ran")

    tool = ToolDefinition(
        name=name,
        execute=execute,
        parameters=OBJECT_SCHEMA if parameters is None else parameters,
    )
    return tool, seen


def _options(*tools: ToolDefinition, **extra: object) -> DispatchOptions:
    return DispatchOptions(
        registry=create_tool_registry(tools),
        validator=create_json_schema_tool_validator(),
        ledger=RunLedger(),
        **extra,  # type: ignore[arg-type]
    )


def _call(name: str, arguments: object, call_id: str = "c1") -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


# --------------------------------------------------------------------------- rows 1-4


@pytest.mark.parametrize(
    "arguments",
    [{"city": 3}, {}, {"city": "Oslo", "days": 0}, {"city": "Oslo", "extra": True}],
    ids=["wrong-type", "missing-required", "below-minimum", "extra-property"],
)
async def test_row_01_args_violating_the_schema_are_validation_failed_and_never_run(
    arguments: JsonObject,
) -> None:
    tool, seen = _counting_tool()
    options = _options(tool)
    result = await dispatch_tool_call(_call("weather", arguments), options)
    assert result.is_error
    assert isinstance(options.ledger, RunLedger)
    assert options.ledger.records[0].blocked_reason == "validation_failed"
    assert seen == []


async def test_row_02_schema_compile_cache_compiles_each_schema_once() -> None:
    tool, seen = _counting_tool()
    validator = create_json_schema_tool_validator()
    options = DispatchOptions(registry=create_tool_registry([tool]), validator=validator)
    for index in range(5):
        result = await dispatch_tool_call(_call("weather", {"city": f"c{index}"}), options)
        assert not result.is_error
    info = validator.cache_info()
    assert info.misses == 1
    assert len(seen) == 5


@pytest.mark.parametrize(
    "schema_kind", ["remote-http-ref", "file-ref", "relative-id-ref", "malformed-type"]
)
async def test_row_03_malformed_schema_or_remote_ref_is_rejected_without_fetching(
    schema_kind: str, tmp_path: Path
) -> None:
    connections: list[object] = []

    async def record(stream: trio.SocketStream) -> None:
        connections.append(stream)
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, host="127.0.0.1"), record, 0
        )
        port = listeners[0].socket.getsockname()[1]
        (tmp_path / "schema.json").write_text('{"type": "string"}', encoding="utf-8")
        schemas: dict[str, JsonObject] = {
            "remote-http-ref": {"$ref": f"http://127.0.0.1:{port}/schema.json"},
            "file-ref": {"$ref": (tmp_path / "schema.json").as_uri()},
            "relative-id-ref": {
                "$id": f"http://127.0.0.1:{port}/root.json",
                "properties": {"a": {"$ref": "other.json"}},
            },
            "malformed-type": {"type": 5},
        }
        tool, seen = _counting_tool(parameters=schemas[schema_kind])
        options = _options(tool)
        result = await dispatch_tool_call(_call("weather", {"a": "x"}), options)
        nursery.cancel_scope.cancel()
    assert result.is_error
    assert isinstance(options.ledger, RunLedger)
    assert options.ledger.records[0].blocked_reason == "validation_failed"
    assert seen == []
    assert connections == []  # nothing was fetched


@pytest.mark.parametrize("key", ["__proto__", "constructor", "prototype"])
async def test_row_04_prototype_pollution_keys_in_arguments_are_rejected_before_execute(
    key: str,
) -> None:
    permissive: JsonObject = {"type": "object"}
    tool, seen = _counting_tool(parameters=permissive)
    options = _options(tool)
    result = await dispatch_tool_call(
        _call("weather", {"city": "x", key: {"admin": True}}), options
    )
    assert result.is_error
    assert seen == []
    nested = await dispatch_tool_call(
        _call("weather", {"outer": [{key: {"admin": True}}]}, "c2"), options
    )
    assert nested.is_error
    assert seen == []


# --------------------------------------------------------------------------- rows 5-7


def _sleeper(name: str, state: dict[str, int]) -> ToolDefinition:
    async def execute(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        state["now"] += 1
        state["peak"] = max(state["peak"], state["now"])
        try:
            delay = args["delay"]
            assert isinstance(delay, (int, float))
            await trio.sleep(delay)
        finally:
            state["now"] -= 1
        return ToolResult.text(f"{name} {args['n']}")

    return ToolDefinition(name=name, execute=execute)


@pytest.mark.parametrize("concurrency", [1, 3, 8])
async def test_row_05_parallel_calls_stay_under_the_bound_and_keep_call_order(
    concurrency: int, autojump_clock: trio.testing.MockClock
) -> None:
    state = {"now": 0, "peak": 0}
    registry = create_tool_registry([_sleeper("sleep", state)])
    # Later calls finish first: the transcript must still follow call order.
    calls = [_call("sleep", {"n": n, "delay": float(10 - n)}, f"c{n}") for n in range(8)]
    provider = ScriptedProvider([AssistantMessage(tool_calls=tuple(calls)), AssistantMessage()])
    agent = create_agent(
        model="m",
        provider=provider,
        tools=registry,
        loop=SingleShotLoop(concurrency=concurrency),
    )
    result = await agent.session().run("go")
    assert state["peak"] == concurrency
    answers = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [m.call_id for m in answers] == [f"c{n}" for n in range(8)]
    assert [m.result.joined_text for m in answers] == [f"sleep {n}" for n in range(8)]


async def test_row_06_parallel_abort_mid_turn_cancels_pending_calls_and_signals_running_ones(
    autojump_clock: trio.testing.MockClock,
) -> None:
    started: list[str] = []
    saw_abort: list[str] = []
    controller = AbortController()

    async def execute(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        started.append(ctx.call.id)
        if len(started) == 2:
            controller.abort("user pressed stop")  # both slots are busy now
        try:
            await trio.sleep(100)
        finally:
            if ctx.signal.aborted:
                saw_abort.append(ctx.call.id)
        return ToolResult.text("finished")

    tool = ToolDefinition(name="work", execute=execute)
    calls = tuple(_call("work", {}, f"c{n}") for n in range(6))
    provider = ScriptedProvider([AssistantMessage(tool_calls=calls), AssistantMessage()])
    agent = create_agent(
        model="m", provider=provider, tools=[tool], loop=SingleShotLoop(concurrency=2)
    )

    result = await agent.session().run("go", RunOptions(signal=controller.signal))
    assert result.aborted
    assert started == ["c0", "c1"]  # c2..c5 never started
    assert sorted(saw_abort) == ["c0", "c1"]  # the running ones observed context.signal
    answers = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [m.call_id for m in answers] == [f"c{n}" for n in range(6)]
    assert all(m.result.is_error for m in answers)


async def test_row_07_permission_deny_in_a_parallel_batch_fills_its_slot_and_keeps_order() -> None:
    state = {"now": 0, "peak": 0}
    registry = create_tool_registry([_sleeper("ok", state), _sleeper("forbidden", state)])
    options = DispatchOptions(
        registry=registry,
        permission=create_rule_permission_policy(
            allow=["tool:*:execute"], deny=["tool:forbidden:execute"]
        ),
        ledger=RunLedger(),
    )
    names = ["ok", "forbidden", "ok", "forbidden", "ok"]
    calls = [_call(name, {"n": i, "delay": 0.01}, f"c{i}") for i, name in enumerate(names)]
    order: list[int] = []
    results = await dispatch_tool_calls_in_order(
        calls, options, concurrency=3, on_result=lambda i, _c, _r: order.append(i)
    )
    assert order == [0, 1, 2, 3, 4]
    assert [r.is_error for r in results] == [False, True, False, True, False]
    assert results[0].joined_text == "ok 0"
    assert results[4].joined_text == "ok 4"
    assert isinstance(options.ledger, RunLedger)
    blocked = {r.call_id: r.blocked_reason for r in options.ledger.records}
    assert blocked["c1"] == blocked["c3"] == "permission_denied"


# --------------------------------------------------------------------------- rows 8-10


@pytest.mark.slow
async def test_row_08_mcp_tool_name_collision_is_namespaced_by_server(
    matrix_server: TransportFactory,
) -> None:
    with trio.fail_after(60):
        async with (
            open_mcp_tools(server_id="alpha", transport=matrix_server("alpha")) as alpha,
            open_mcp_tools(server_id="beta", transport=matrix_server("beta")) as beta,
        ):
            registry = create_tool_registry([*alpha.tools, *beta.tools])
            assert "mcp:alpha:search" in registry
            assert "mcp:beta:search" in registry
            options = DispatchOptions(registry=registry)
            a = await dispatch_tool_call(_call("mcp:alpha:search", {"query": "q"}), options)
            b = await dispatch_tool_call(_call("mcp:beta:search", {"query": "q"}), options)
            assert a.joined_text == "alpha: q"
            assert b.joined_text == "beta: q"
            # Without the namespace the two would collide, and the registry says so.
            async with (
                open_mcp_tools(
                    server_id="a2", transport=matrix_server("a2"), name_prefix=""
                ) as bare_a,
                open_mcp_tools(
                    server_id="b2", transport=matrix_server("b2"), name_prefix=""
                ) as bare_b,
            ):
                with pytest.raises(DuplicateToolError):
                    create_tool_registry([*bare_a.tools, *bare_b.tools])


@pytest.mark.slow
async def test_row_09_mcp_oversized_result_and_timeout_give_bounded_errors(
    matrix_server: TransportFactory,
) -> None:
    with trio.fail_after(60):
        async with open_mcp_tools(
            server_id="m",
            transport=matrix_server("m"),
            max_result_bytes=16_384,
            call_timeout_s=1.0,
        ) as bridge:
            options = DispatchOptions(registry=create_tool_registry(bridge.tools))
            big = await dispatch_tool_call(_call("mcp:m:big", {"kib": 256}), options)
            assert big.is_error
            assert len(big.joined_text) < 2_000
            assert "x" * 1000 not in big.joined_text
            with trio.fail_after(10):
                hung = await dispatch_tool_call(_call("mcp:m:hang", {}, "c2"), options)
            assert hung.is_error
            # The bridge recovers: the next call reconnects and works.
            again = await dispatch_tool_call(_call("mcp:m:search", {"query": "z"}, "c3"), options)
            assert again.joined_text == "m: z"


@pytest.mark.slow
async def test_row_10_mcp_list_changed_marks_the_listing_stale_until_refresh(
    matrix_server: TransportFactory,
) -> None:
    with trio.fail_after(60):
        async with open_mcp_tools(server_id="g", transport=matrix_server("g")) as bridge:
            assert not bridge.stale
            assert "mcp:g:fresh" not in {t.name for t in bridge.tools}
            options = DispatchOptions(registry=create_tool_registry(bridge.tools))
            grown = await dispatch_tool_call(_call("mcp:g:grow", {}), options)
            assert grown.joined_text == "grown"
            # The bridge exposes no event for this; the notification may trail the
            # result on the 2026-07-28 era, so poll briefly (bounded by fail_after).
            while not bridge.stale:  # noqa: ASYNC110
                await trio.sleep(0.01)
            assert "mcp:g:fresh" not in {t.name for t in bridge.tools}
            await bridge.refresh()
            assert not bridge.stale
            assert "mcp:g:fresh" in {t.name for t in bridge.tools}


# --------------------------------------------------------------------------- rows 11-15


async def test_row_11_shell_outside_the_roots_is_denied_before_spawn(
    workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    policy = create_coding_approval_policy(roots=[str(workspace)])
    shell = create_shell_tool(str(outside), execution_policy=policy)
    options = DispatchOptions(registry=create_tool_registry([shell]))
    result = await dispatch_tool_call(_call("shell", {"command": "touch spawned"}), options)
    assert result.is_error
    assert result.details.get("execution_denied") is True
    assert not (outside / "spawned").exists()


async def test_row_12_symlink_escape_under_a_root_is_denied_by_realpath(
    workspace: Path, tmp_path: Path
) -> None:
    (workspace / "link.txt").symlink_to(tmp_path / "secret.txt")
    (workspace / "linkdir").symlink_to(tmp_path)
    roots = [str(workspace)]
    policy = create_coding_approval_policy(roots=roots)
    files = create_contained_file_operations(roots)
    tools = create_coding_tools(str(workspace), execution_policy=policy, file_operations=files)
    options = DispatchOptions(registry=create_tool_registry(tools))
    read = await dispatch_tool_call(_call("read", {"path": "link.txt"}), options)
    assert read.is_error
    assert "TOP-SECRET" not in read.joined_text
    write = await dispatch_tool_call(
        _call("write", {"path": "linkdir/secret.txt", "content": "owned"}, "c2"), options
    )
    assert write.is_error
    assert (tmp_path / "secret.txt").read_text(encoding="utf-8") == "TOP-SECRET\n"


@pytest.mark.parametrize(
    ("command", "approvable"),
    [
        ('echo hi; python3 -c \'open("pwned", "w")\'', True),
        ("echo hi && install /dev/null pwned", True),
        ('echo $(python3 -c \'open("pwned", "w")\')', True),
        ("echo hi | dd of=pwned", True),
        ("sudo touch pwned", False),
        ("rm -rf /", False),
    ],
)
async def test_row_13_shell_metacharacters_need_approval_and_escalation_is_denied(
    workspace: Path, command: str, approvable: bool
) -> None:
    asked: list[ExecutionAction] = []

    async def refuse(action: ExecutionAction) -> bool:
        asked.append(action)
        return False

    policy = create_coding_approval_policy(roots=[str(workspace)], approve=refuse)
    shell = create_shell_tool(str(workspace), execution_policy=policy)
    options = DispatchOptions(registry=create_tool_registry([shell]))
    result = await dispatch_tool_call(_call("shell", {"command": command}), options)
    assert result.is_error
    assert not (workspace / "pwned").exists()
    if approvable:
        assert [a.command for a in asked] == [command]  # it needed approval
    else:
        assert asked == []  # denied outright, never even offered for approval

    # A deny rule wins even over an approver that says yes.
    async def approve(action: ExecutionAction) -> bool:
        return True

    eager = create_coding_approval_policy(
        roots=[str(workspace)], approve=approve, command_rules=CommandRules(deny=["sudo *"])
    )
    eager_shell = create_shell_tool(str(workspace), execution_policy=eager)
    options = DispatchOptions(registry=create_tool_registry([eager_shell]))
    denied = await dispatch_tool_call(_call("shell", {"command": "sudo touch pwned"}), options)
    assert denied.is_error
    assert not (workspace / "pwned").exists()


async def test_row_14_approval_denied_times_out_or_is_aborted_without_side_effects(
    workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    target = workspace / "written.txt"

    async def no(action: ExecutionAction) -> ApprovalDecision:
        return ApprovalDecision(approved=False, reason="not today")

    async def never(action: ExecutionAction) -> bool:
        await trio.sleep_forever()
        return True

    async def attempt(approve: ApprovalCallback, signal: AbortSignal | None = None) -> ToolResult:
        policy = create_coding_approval_policy(
            roots=[str(workspace)], approve=approve, approval_timeout_s=30.0
        )
        shell = create_shell_tool(str(workspace), execution_policy=policy)
        options = DispatchOptions(registry=create_tool_registry([shell]), signal=signal)
        return await dispatch_tool_call(
            _call("shell", {"command": f"echo x > {target.name}"}), options
        )

    denied = await attempt(no)
    assert denied.is_error
    assert "not today" in denied.joined_text
    assert not target.exists()

    start = trio.current_time()
    timed_out = await attempt(never)
    assert timed_out.is_error
    assert "timed_out" in timed_out.joined_text or "timed out" in timed_out.joined_text
    assert 30.0 <= trio.current_time() - start < 31.0
    assert not target.exists()

    controller = AbortController()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_abort_after, controller, 5.0)
        start = trio.current_time()
        aborted = await attempt(never, controller.signal)
    assert aborted.is_error
    assert trio.current_time() - start < 6.0  # the wait was abortable
    assert not target.exists()


async def _abort_after(controller: AbortController, delay: float) -> None:
    await trio.sleep(delay)
    controller.abort("stop")


def _png(size: int) -> bytes:
    header = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", 1, 1)
    return header + b"\x08\x02\x00\x00\x00" + b"\x00" * max(0, size - 29)


async def test_row_15_reading_an_image_over_max_image_bytes_is_a_clear_error_without_base64(
    workspace: Path,
) -> None:
    (workspace / "big.png").write_bytes(_png(50_000))
    (workspace / "small.png").write_bytes(_png(200))
    read = create_read_tool(str(workspace), max_image_bytes=10_000)
    options = DispatchOptions(registry=create_tool_registry([read]))
    big = await dispatch_tool_call(_call("read", {"path": "big.png"}), options)
    assert big.is_error
    assert "10000" in big.joined_text.replace(",", "").replace("_", "")
    assert not any(isinstance(block, ImageContent) for block in big.content)
    encoded = base64.b64encode(_png(50_000)[:30]).decode()[:16]
    assert encoded not in big.joined_text
    small = await dispatch_tool_call(_call("read", {"path": "small.png"}, "c2"), options)
    assert not small.is_error
    assert any(isinstance(block, ImageContent) for block in small.content)


# --------------------------------------------------------------------------- row 16


@attrs.define
class _Contributor:
    name: str
    tool: ToolDefinition

    def setup(self, api: object) -> None:
        api.register_tool(self.tool)  # type: ignore[attr-defined]


async def test_row_16_extension_tools_need_host_activation_and_still_pass_every_gate() -> None:
    recording = RecordingTool(name="ext_tool")
    kernel = create_extension_kernel(
        permission=create_rule_permission_policy(allow=["extension:trusted:setup"])
    )
    with pytest.raises(PermissionDeniedError):
        await kernel.load(_Contributor(name="untrusted", tool=recording.definition))
    await kernel.load(_Contributor(name="trusted", tool=recording.definition))
    assert [t.name for t in kernel.contributions.tools] == ["ext_tool"]

    # Contributed is not active: a host registry that did not register it does not know it.
    host = create_tool_registry()
    options = DispatchOptions(registry=host, ledger=RunLedger())
    unknown = await dispatch_tool_call(_call("ext_tool", {}), options)
    assert unknown.is_error
    assert recording.calls == []

    # Activated by the host, it still meets the permission gate.
    host.register(kernel.contributions.tools[0])
    gated = DispatchOptions(
        registry=host,
        permission=create_rule_permission_policy(deny=["tool:ext_tool:execute"]),
        ledger=RunLedger(),
    )
    refused = await dispatch_tool_call(_call("ext_tool", {}, "c2"), gated)
    assert refused.is_error
    assert isinstance(gated.ledger, RunLedger)
    assert gated.ledger.records[0].blocked_reason == "permission_denied"
    assert recording.calls == []
    allowed = DispatchOptions(
        registry=host, permission=create_rule_permission_policy(allow=["tool:ext_tool:execute"])
    )
    ran = await dispatch_tool_call(_call("ext_tool", {}, "c3"), allowed)
    assert not ran.is_error
    assert len(recording.calls) == 1
