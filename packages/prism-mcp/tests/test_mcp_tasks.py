"""The 2026-07-28 tasks extension against a hand-written server: polls, results, cancels."""

from __future__ import annotations

import json
import math
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing

from prism.core import AgentEvent, ToolCall, ToolExecutionContext, ToolResult
from prism.mcp import (
    McpBridgeError,
    McpLogMessage,
    McpToolBridge,
    StdioTransport,
    open_mcp_tools,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

SERVER = Path(__file__).resolve().parent / "mcp_task_server.py"


def requests(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def cancels(log: Path) -> list[str]:
    return [r["params"]["taskId"] for r in requests(log) if r["method"] == "tasks/cancel"]


def polls(log: Path) -> int:
    return sum(1 for r in requests(log) if r["method"] == "tasks/get")


@asynccontextmanager
async def task_bridge(log: Path, *extra: str, **options: Any) -> AsyncIterator[McpToolBridge]:
    transport = StdioTransport(sys.executable, [str(SERVER), str(log), *extra])
    async with open_mcp_tools(server_id="tasks", transport=transport, **options) as bridge:
        assert bridge.protocol_version == "2026-07-28"
        yield bridge


async def run(
    bridge: McpToolBridge, name: str, events: list[AgentEvent] | None = None
) -> ToolResult:
    tool = next(t for t in bridge.tools if t.name == f"mcp:tasks:{name}")
    call = ToolCall(id="t", name=tool.name, arguments={})
    ctx = ToolExecutionContext(call, on_event=events.append if events is not None else None)
    return await tool.execute({}, ctx)


@pytest.mark.parametrize("cut", [False, True])
async def test_a_task_that_completes_is_polled_with_progress(tmp_path: Path, cut: bool) -> None:
    log = tmp_path / "log"
    events: list[AgentEvent] = []
    with trio.fail_after(30):
        async with task_bridge(log, *(["cut"] if cut else [])) as bridge:
            result = await run(bridge, "completes", events)
    assert not result.is_error, result.joined_text
    assert result.joined_text == "completes done after 3 polls"
    assert polls(log) == 3
    messages = [getattr(event, "message", None) for event in events]
    assert "step 1 of 2" in messages
    assert "step 2 of 2" in messages
    assert cancels(log) == []
    # The client declared the extension on the call it made.
    (call,) = [r for r in requests(log) if r["method"] == "tools/call"]
    capabilities = call["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    assert "io.modelcontextprotocol/tasks" in capabilities["extensions"]


async def run_once(tmp_path: Path, name: str) -> tuple[ToolResult, Path]:
    """One call of ``name`` on a fresh server; its result and the server's request log."""
    log = tmp_path / "log"
    with trio.fail_after(30):
        async with task_bridge(log) as bridge:
            return await run(bridge, name), log


@pytest.mark.parametrize(
    ("tool", "says", "cancelled"),
    [
        # The task ended by itself: nothing to cancel.
        ("fails", "task task-1 failed: the build broke (code -32603)", []),
        ("server_cancels", "task task-1 was cancelled by the server: an operator stopped it", []),
        # A status the bridge cannot follow: the task is cancelled.
        ("strange_status", "unknown status 'paused'", ["task-1"]),
        ("needs_input", "asks for input", ["task-1"]),
        ("bad_id", "unusable task id", []),
        # The completed task's result is held to a call result's caps.
        ("many_blocks", "result refused: more than 1024 content blocks", ["task-1"]),
    ],
)
async def test_a_task_that_does_not_complete_is_an_error_result_naming_why(
    tmp_path: Path, tool: str, says: str, cancelled: list[str]
) -> None:
    result, log = await run_once(tmp_path, tool)
    assert result.is_error
    assert says in result.joined_text
    assert cancels(log) == cancelled


async def test_a_task_that_outlives_max_call_s_is_cancelled(tmp_path: Path) -> None:
    log = tmp_path / "log"
    events: list[AgentEvent] = []
    with trio.fail_after(30):
        async with task_bridge(log, max_call_s=1.0, call_timeout_s=100.0) as bridge:
            result = await run(bridge, "forever", events)
            await run(bridge, "plain")
    assert result.is_error
    assert result.details["limit"] == "max_call_s"
    assert cancels(log) == ["task-1"]
    assert polls(log) >= 2
    assert any(getattr(event, "message", "").startswith("still going") for event in events)


async def test_aborting_a_call_mid_poll_sends_tasks_cancel(tmp_path: Path) -> None:
    log = tmp_path / "log"
    events: list[AgentEvent] = []
    with trio.fail_after(30):
        async with task_bridge(log) as bridge:
            polled = trio.Event()

            def seen(event: AgentEvent) -> None:
                events.append(event)
                polled.set()

            tool = next(t for t in bridge.tools if t.name == "mcp:tasks:forever")
            ctx = ToolExecutionContext(
                ToolCall(id="a", name=tool.name, arguments={}), on_event=seen
            )
            async with trio.open_nursery() as nursery:
                nursery.start_soon(tool.execute, {}, ctx)
                await polled.wait()
                nursery.cancel_scope.cancel()
            # The cancel was sent (shielded) before the call gave up; ask the
            # server something else so its log is complete.
            await run(bridge, "plain")
    assert cancels(log) == ["task-1"]


@pytest.mark.parametrize(
    ("tool", "waits"),
    [("poll_zero", 0.05), ("poll_negative", 0.05), ("poll_huge", 5.0), ("poll_text", 0.5)],
)
async def test_a_hostile_poll_interval_is_kept_within_bounds(
    tmp_path: Path, mock_clock: trio.testing.MockClock, tool: str, waits: float
) -> None:
    log = tmp_path / "log"
    async with task_bridge(log, call_timeout_s=1e6) as bridge:
        # Trio's clock stands still but for the jumps it makes once every task has
        # waited a second: the polls' sleeps are all it measures.
        mock_clock.autojump_threshold = 1.0
        start = trio.current_time()
        result = await run(bridge, tool)
        waited = trio.current_time() - start
        mock_clock.autojump_threshold = math.inf
    assert not result.is_error, result.joined_text
    assert polls(log) == 3
    # 50 ms at least however small the interval, 5 s at most however large,
    # 0.5 s when it is not a number.
    assert waited == pytest.approx(3 * waits)


async def test_an_ordinary_answer_from_a_task_capable_server_is_not_a_task(
    tmp_path: Path,
) -> None:
    result, log = await run_once(tmp_path, "plain")
    assert result.joined_text == "no task"
    assert polls(log) == 0


async def test_hostile_shapes_are_skipped_or_contained(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = tmp_path / "log"
    with trio.fail_after(30):
        async with task_bridge(log) as bridge:
            names = {tool.name.removeprefix("mcp:tasks:") for tool in bridge.tools}
            deep = await run(bridge, "deep")
            deep_list = await run(bridge, "deep_list")
            nan = await run(bridge, "nan_structured")
            unchecked = bridge.tool_info["mcp:tasks:bad_output"].output_schema
            # Output schemas are compiled on a tool's first call, not at listing.
            listed = " ".join(record.getMessage() for record in caplog.records)
            bad = await run(bridge, "bad_output")
    # A schema that is not JSON (NaN) makes the tool unusable: skipped, with a warning.
    assert "nan_input" not in names
    assert {"deep", "nan_structured", "nan_output", "bad_output"} <= names
    warnings = " ".join(record.getMessage() for record in caplog.records)
    assert "nan_input: inputSchema is not a JSON object" in warnings
    assert "outputSchema cannot be used" not in listed
    assert "mcp:tasks:bad_output: outputSchema cannot be used" in warnings
    assert bad.details.get("mcp_error") != "output_invalid"
    assert unchecked == {"type": 12}
    # Deeper than the fast copy goes: still copied, through the json module.
    value = deep.structured
    for _ in range(40):
        assert isinstance(value, dict)
        value = value["down"]
    assert value == "bottom"
    assert isinstance(deep_list.structured, dict)
    value = deep_list.structured["down"]
    for _ in range(40):
        assert isinstance(value, list)
        (value,) = value
    assert value == "bottom"
    assert deep.details["mcp_content_annotations"] == [{"index": 0, "priority": 0.5}]
    # A structuredContent that is not JSON (NaN) is refused, never passed on without it.
    assert nan.is_error
    assert nan.details["mcp_error"] == "server_error"
    assert "non-finite number" in nan.joined_text


async def test_after_a_crash_a_changed_listing_marks_stale_and_a_failed_restart_is_an_error(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log"
    with trio.fail_after(60):
        async with task_bridge(log) as bridge:
            crashed = await run(bridge, "crash")
            assert crashed.details["mcp_error"] == "connection_lost"
            assert "crashing on purpose" in str(crashed.details["stderr_tail"])
            assert not bridge.stale
            # The next server lists one tool more: the bridge says so, keeps its tools.
            assert (await run(bridge, "plain")).joined_text == "no task"
            assert bridge.stale
            assert "mcp:tasks:second" not in {tool.name for tool in bridge.tools}
            await run(bridge, "crash")
            (tmp_path / "log.nostart").touch()
            refused = await run(bridge, "plain")
    assert refused.is_error
    assert refused.details["mcp_error"] == "connect"
    assert "could not run" in refused.joined_text


async def test_a_server_whose_listing_fails_is_refused_at_open(tmp_path: Path) -> None:
    log = tmp_path / "log"
    (tmp_path / "log.nolist").touch()
    with trio.fail_after(30), pytest.raises(McpBridgeError, match="tools/list failed"):
        async with task_bridge(log):
            pass


async def test_a_listing_that_fails_after_an_announcement_or_a_reconnect_marks_stale(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log"
    nolist = tmp_path / "log.nolist"
    with trio.fail_after(60):
        async with task_bridge(log) as bridge:
            nolist.touch()
            assert (await run(bridge, "announce")).joined_text == "announced"
            # The change cannot be checked against a listing: the bridge says stale.
            await bridge.wait_stale()
            assert bridge.stale
            with pytest.raises(McpBridgeError, match="tools/list failed"):
                await bridge.refresh()
            assert bridge.stale
            # A new session whose listing fails still serves calls with the old tools.
            await run(bridge, "crash")
            assert (await run(bridge, "plain")).joined_text == "no task"
            nolist.unlink()
            await bridge.refresh()
            assert not bridge.stale


async def test_a_log_message_whose_data_is_not_json_arrives_without_its_data(
    tmp_path: Path,
) -> None:
    logged: list[McpLogMessage] = []
    with trio.fail_after(30):
        async with task_bridge(tmp_path / "log", on_log=logged.append) as bridge:
            result = await run(bridge, "nan_log")
    assert result.joined_text == "logged"
    (message,) = logged
    assert message.server_id == "tasks"
    assert message.level == "warning"
    assert message.logger == "odd"
    assert message.data is None


async def test_paged_listings_of_fresh_names_keep_header_maps_only_for_the_listed_tools(
    tmp_path: Path,
) -> None:
    # The SDK keeps each listed tool's x-mcp-header map (to mirror its arguments into
    # Mcp-Param-* headers) and prunes only after a single-page listing: the bridge
    # keeps the maps of the tools its latest listing holds, however many came before.
    log = tmp_path / "log"
    (tmp_path / "log.pages").touch()
    with trio.fail_after(60):
        async with task_bridge(log) as bridge:
            for _ in range(3):
                await bridge.refresh()
            names = {tool.name.removeprefix("mcp:tasks:") for tool in bridge.tools}
            conn = bridge._sessions.current
            assert conn is not None
            assert conn.client is not None
            maps = dict(conn.client.session._x_mcp_header_maps)
    assert "fresh_4" in names
    assert not any(name.startswith("fresh_") and name != "fresh_4" for name in names)
    assert set(maps) <= names
    assert maps["fresh_4"] == {("region",): "Region"}
    assert not any(name.startswith("fresh_") and name != "fresh_4" for name in maps)
