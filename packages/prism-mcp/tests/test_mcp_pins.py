"""Tool drift: a tool whose definition changes after it was pinned is refused until accepted."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import trio

from prism.core import (
    DispatchOptions,
    ToolCall,
    ToolExecutionContext,
    ToolResult,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.mcp import (
    McpBridgeError,
    McpToolInfo,
    StdioTransport,
    create_mcp_permission_policy,
    open_mcp_tools,
)

if TYPE_CHECKING:
    from prism.mcp import McpToolBridge

TESTS = Path(__file__).resolve().parent
SHAPES = StdioTransport(sys.executable, [str(TESTS / "mcp_flood_server.py"), "shapes", "0"])


async def run(bridge: McpToolBridge, name: str) -> ToolResult:
    tool = next(tool for tool in bridge.tools if tool.name == f"mcp:sh:{name}")
    ctx = ToolExecutionContext(ToolCall(id="p", name=tool.name, arguments={}))
    return await tool.execute({}, ctx)


def offer(bridge: McpToolBridge, name: str) -> tuple[str | None, object]:
    """What the model is offered of the tool ``name``: its description and parameters."""
    tool = next(tool for tool in bridge.tools if tool.name == f"mcp:sh:{name}")
    return tool.description, tool.parameters


async def mutate_and_refresh(bridge: McpToolBridge) -> None:
    await run(bridge, "mutate")
    await bridge.wait_stale()
    await bridge.refresh()


async def test_a_tool_changed_after_it_was_pinned_is_refused_naming_what_changed(
    tmp_path: Path,
) -> None:
    pins = tmp_path / "pins.json"
    with trio.fail_after(20):
        async with open_mcp_tools(
            server_id="sh", transport=SHAPES, protocol="legacy", pins_file=pins
        ) as bridge:
            first = json.loads(pins.read_text())["tools"]["good"]
            offered = offer(bridge, "good")
            before = await run(bridge, "good")
            await mutate_and_refresh(bridge)
            info = bridge.tool_info["mcp:sh:good"]
            # The model is still offered the pinned text, not the new one.
            offered_after = offer(bridge, "good")
            await bridge.refresh()
            offered_again = offer(bridge, "good")
            after = await run(bridge, "good")
            policy = create_mcp_permission_policy([bridge], trusted_servers=["sh"])
            options = DispatchOptions(
                registry=create_tool_registry(bridge.tools), permission=policy
            )
            dispatched = await dispatch_tool_call(
                ToolCall(id="d", name="mcp:sh:good", arguments={}), options
            )
    assert not before.is_error
    assert info.changed == ("description",)
    assert offered_after == offered_again == offered
    assert after.is_error
    assert after.details["mcp_error"] == "definition_changed"
    assert after.details["changed"] == ["description"]
    assert dispatched.is_error
    assert "changed since it was pinned (description)" in dispatched.joined_text
    # The pin on disk still holds the definition first seen.
    assert json.loads(pins.read_text())["tools"]["good"] == first


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_an_accepted_change_is_pinned_and_runs(tmp_path: Path, asynchronous: bool) -> None:
    pins = tmp_path / "pins.json"
    asked: list[McpToolInfo] = []

    def accept_now(info: McpToolInfo) -> bool:
        asked.append(info)
        return True

    async def accept_later(info: McpToolInfo) -> bool:
        await trio.lowlevel.checkpoint()
        return accept_now(info)

    accept = accept_later if asynchronous else accept_now

    with trio.fail_after(20):
        async with open_mcp_tools(
            server_id="sh",
            transport=SHAPES,
            protocol="legacy",
            pins_file=pins,
            accept_change=accept,
        ) as bridge:
            await mutate_and_refresh(bridge)
            result = await run(bridge, "good")
            info = bridge.tool_info["mcp:sh:good"]
    assert [(i.name, i.changed) for i in asked] == [("good", ("description",))]
    assert not result.is_error, result.joined_text
    assert info.changed == ()
    assert json.loads(pins.read_text())["tools"]["good"] == dict(info.definition_parts)


async def test_a_pins_file_that_disagrees_blocks_at_open_and_accepts_by_editing_it(
    tmp_path: Path,
) -> None:
    pins = tmp_path / "pins.json"
    stale_pin = {"description": "0" * 64}
    pins.write_text(json.dumps({"tools": {"good": stale_pin}}))
    with trio.fail_after(20):
        async with open_mcp_tools(
            server_id="sh", transport=SHAPES, protocol="legacy", pins_file=pins
        ) as bridge:
            info = bridge.tool_info["mcp:sh:good"]
            # Never offered as this bridge saw it accepted: no text of the server's.
            withheld = offer(bridge, "good")
            blocked = await run(bridge, "good")
            # The host reviews the new definition and writes its pin.
            data = json.loads(pins.read_text())
            data["tools"]["good"] = dict(info.definition_parts)
            pins.write_text(json.dumps(data))
            await bridge.refresh()
            allowed = await run(bridge, "good")
    assert set(info.changed) == set(info.definition_parts)
    assert withheld == (None, {"type": "object"})
    assert blocked.details["mcp_error"] == "definition_changed"
    assert not allowed.is_error, allowed.joined_text
    assert offer(bridge, "good")[0]


async def test_without_a_pins_file_tools_are_still_pinned_for_the_bridge_lifetime() -> None:
    with trio.fail_after(20):
        async with open_mcp_tools(server_id="sh", transport=SHAPES, protocol="legacy") as bridge:
            await mutate_and_refresh(bridge)
            result = await run(bridge, "good")
    assert result.details["mcp_error"] == "definition_changed"


@pytest.mark.parametrize("kind", ["not json", "a directory"])
async def test_an_unreadable_pins_file_fails_open(tmp_path: Path, kind: str) -> None:
    pins = tmp_path / "pins.json"
    if kind == "a directory":
        pins.mkdir()
    else:
        pins.write_text("not json")
    with trio.fail_after(20), pytest.raises(McpBridgeError, match="pins_file"):
        async with open_mcp_tools(
            server_id="sh", transport=SHAPES, protocol="legacy", pins_file=pins
        ):
            pass


async def test_an_accept_callback_that_raises_accepts_nothing() -> None:
    def accept(info: McpToolInfo) -> bool:
        raise RuntimeError("no reviewer")

    with trio.fail_after(20):
        async with open_mcp_tools(
            server_id="sh", transport=SHAPES, protocol="legacy", accept_change=accept
        ) as bridge:
            await mutate_and_refresh(bridge)
            result = await run(bridge, "good")
    assert result.details["mcp_error"] == "definition_changed"


async def test_a_pins_file_that_cannot_be_written_is_a_warning_not_a_failure(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pins = tmp_path / "missing-directory" / "pins.json"
    with trio.fail_after(20):
        async with open_mcp_tools(
            server_id="sh", transport=SHAPES, protocol="legacy", pins_file=pins
        ) as bridge:
            assert bridge.tools
    assert not pins.exists()
    assert any("could not write pins_file" in record.getMessage() for record in caplog.records)


async def test_links_planted_at_the_pins_file_and_its_temporary_name_are_never_written_through(
    tmp_path: Path,
) -> None:
    import os

    home = tmp_path / "home"
    home.mkdir()
    victim = home / ".bashrc"
    victim.write_text("export PS1='$ '\n")
    pins = tmp_path / "pins.json"
    # The name a writer that used its pid for the temporary file would write to.
    (tmp_path / f".pins.json.{os.getpid()}.tmp").symlink_to(victim)
    with trio.fail_after(20):
        async with open_mcp_tools(
            server_id="sh", transport=SHAPES, protocol="legacy", pins_file=pins
        ) as bridge:
            assert bridge.tools
    assert victim.read_text() == "export PS1='$ '\n"
    assert not pins.is_symlink()
    assert "good" in json.loads(pins.read_text())["tools"]
    assert sorted(name for name in os.listdir(tmp_path) if name.endswith(".tmp")) == [
        f".pins.json.{os.getpid()}.tmp"
    ]


async def test_a_switch_to_task_augmented_runs_after_pinning_is_drift() -> None:
    # Only execution.taskSupport changes (forbidden -> optional): the call would
    # now run as a task the host never approved.
    with trio.fail_after(20):
        async with open_mcp_tools(server_id="sh", transport=SHAPES, protocol="legacy") as bridge:
            first = dict(bridge.tool_info["mcp:sh:good"].definition_parts)
            tool = next(tool for tool in bridge.tools if tool.name == "mcp:sh:mutate")
            ctx = ToolExecutionContext(ToolCall(id="m", name=tool.name, arguments={}))
            await tool.execute({"part": "task"}, ctx)
            await bridge.wait_stale()
            await bridge.refresh()
            info = bridge.tool_info["mcp:sh:good"]
            after = await run(bridge, "good")
    # Pins of tools that are not task-augmented have no such part (older pins hold).
    assert "taskSupport" not in first
    assert info.task_support == "optional"
    assert info.changed == ("taskSupport",)
    assert after.details["mcp_error"] == "definition_changed"
