"""An escalation through the gateway: the client is asked in words, and a yes grants that access.

Real bubblewrap (skipped where it cannot isolate), the coding tools of
``open_secure_coding_tools``, an MCP client over HTTP on 127.0.0.1 that
answers the elicitation.
"""

from __future__ import annotations

import os
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import mcp_types as types
import pytest
import trio
from mcp import Client

from prism.coding.security import SandboxUnavailableError, open_secure_coding_tools
from prism.core import ExecutionAction, ToolDefinition, ToolResult, create_rule_permission_policy
from prism.core.ledger import RunLedger
from prism.gateway import (
    CODING_TOOL_HINTS,
    HttpOptions,
    create_gateway_approver,
    open_gateway,
    serve_http,
)
from prism.gateway._approval import QUESTION_LIMIT

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

ElicitCallback = Any


@asynccontextmanager
async def _served(workspace: Path) -> AsyncIterator[tuple[str, RunLedger]]:
    """The secure coding tools (bubblewrap) behind the gateway over HTTP: (url, ledger)."""
    ledger = RunLedger()
    try:
        async with (
            open_secure_coding_tools(
                [str(workspace)], sandbox="bubblewrap", approve=create_gateway_approver()
            ) as secure,
            open_gateway(
                tools=secure.tools,
                permission=create_rule_permission_policy(allow=["tool:*:execute"]),
                hints=CODING_TOOL_HINTS,
                ledger=ledger,
            ) as gateway,
            trio.open_nursery() as nursery,
        ):
            url = await nursery.start(serve_http, gateway, HttpOptions())
            yield url, ledger
            nursery.cancel_scope.cancel()
    except* SandboxUnavailableError as group:
        pytest.skip(f"bubblewrap cannot isolate here: {group.exceptions[0]}")


def _text(result: types.CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def test_the_client_approves_exactly_the_access_it_was_told(workspace: Path) -> None:
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    ledger = RunLedger()
    try:
        async with (
            open_secure_coding_tools(
                [str(workspace)], sandbox="bubblewrap", approve=create_gateway_approver()
            ) as secure,
            open_gateway(
                tools=secure.tools,
                permission=create_rule_permission_policy(allow=["tool:*:execute"]),
                hints=CODING_TOOL_HINTS,
                ledger=ledger,
            ) as gateway,
            trio.open_nursery() as nursery,
        ):
            url = await nursery.start(serve_http, gateway, HttpOptions())
            async with Client(url, elicitation_callback=elicit, mode="legacy") as client:
                command = "echo export X=1 > .envrc; python3 -c \"open('.bashrc', 'w')\""
                result = await client.call_tool("shell", {"command": command})
            nursery.cancel_scope.cancel()
    except* SandboxUnavailableError as group:
        pytest.skip(f"bubblewrap cannot isolate here: {group.exceptions[0]}")
    assert not result.is_error, result.content
    assert len(asked) == 1
    # the access first, then the rest; the command last (only it is ever clipped)
    assert asked[0] == (
        "Prism asks whether the tool 'shell' may shell; approving it lets this one call "
        "write or remove the protected path .envrc (as a file or a directory), which the "
        "sandbox would otherwise refuse; "
        f"risk: high; paths: {workspace}; the command: {command}"
    )
    assert (workspace / ".envrc").read_text() == "export X=1\n"
    assert not (workspace / ".bashrc").exists()
    decision = next(r.decision for r in ledger.records if r.tool_name == "shell")
    assert decision is not None
    assert decision.escalation
    assert decision.access == "write or remove the protected path .envrc (as a file or a directory)"
    assert decision.approver == "approved by the client"


async def test_a_yes_grants_only_the_access_the_question_named(
    workspace: Path,
) -> None:
    # The 2026-07-28 flow: the question goes out as input_required, the call waits in
    # the gateway and the client's retry brings the answer to it. Between the two, the
    # link the command writes through is re-pointed to another protected directory: the
    # yes grants only the path the question named, so the write that lands elsewhere is
    # left out by the sandbox.
    (workspace / ".idea").mkdir()
    (workspace / ".vscode").mkdir()
    (workspace / "lnk").symlink_to(".idea")
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        os.unlink(workspace / "lnk")
        os.symlink(".vscode", workspace / "lnk")
        return types.ElicitResult(action="accept", content={"approve": True})

    async with (
        _served(workspace) as (url, _ledger),
        Client(url, elicitation_callback=elicit, mode="auto") as client,
    ):
        result = await client.call_tool("shell", {"command": "echo '{}' > lnk/tasks.json"})
    assert len(asked) == 1
    assert "write or remove the protected path .idea/tasks.json " in asked[0]
    assert "not applied to" in _text(result)
    assert "(protected paths): .vscode/" in _text(result)
    assert not (workspace / ".vscode" / "tasks.json").exists()
    assert not (workspace / ".idea" / "tasks.json").exists()


async def test_a_retried_yes_for_the_same_access_grants_it(workspace: Path) -> None:
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    async with (
        _served(workspace) as (url, _ledger),
        Client(url, elicitation_callback=elicit, mode="auto") as client,
    ):
        result = await client.call_tool("shell", {"command": "echo export X=1 > .envrc"})
    assert not result.is_error, result.content
    assert len(asked) == 1
    assert (workspace / ".envrc").read_text() == "export X=1\n"


async def test_a_retried_answer_cannot_be_replayed_for_a_later_identical_call(
    workspace: Path,
) -> None:
    command = {"command": "echo export X=1 > .envrc"}
    yes: dict[str, Any] = {
        "prism-approval": types.ElicitResult(action="accept", content={"approve": True})
    }

    async def never(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        raise AssertionError("the retries are driven by hand")  # pragma: no cover

    async with (
        _served(workspace) as (url, _ledger),
        Client(url, elicitation_callback=never, mode="auto") as client,
    ):
        first = await client.session.call_tool("shell", command, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        state = first.request_state
        answered = await client.session.call_tool(
            "shell", command, input_responses=yes, request_state=state,
            allow_input_required=True,
        )  # fmt: skip
        assert isinstance(answered, types.CallToolResult)
        assert not answered.is_error, answered.content
        os.unlink(workspace / ".envrc")
        replayed = await client.session.call_tool(
            "shell", command, input_responses=yes, request_state=state,
            allow_input_required=True,
        )  # fmt: skip
        again = await client.session.call_tool("shell", command, allow_input_required=True)
        assert isinstance(again, types.InputRequiredResult)
        other = {"command": "echo export X=2 > .envrc"}  # the same access, another command
        moved = await client.session.call_tool(
            "shell", other, input_responses=yes, request_state=again.request_state,
            allow_input_required=True,
        )  # fmt: skip
        forged = await client.session.call_tool(
            "shell", command, input_responses=yes, request_state="forged",
            allow_input_required=True,
        )  # fmt: skip
    assert isinstance(replayed, types.CallToolResult)
    assert replayed.is_error
    assert "answered already" in _text(replayed)
    assert isinstance(moved, types.CallToolResult)
    assert moved.is_error
    assert "asked of another client or for another call" in _text(moved)
    assert isinstance(forged, types.CallToolResult)
    assert forged.is_error
    assert "its question is unknown" in _text(forged)
    assert not (workspace / ".envrc").exists()


async def test_the_command_is_shown_whole_and_escaped_or_not_asked_about(
    workspace: Path,
) -> None:
    """The person approves what the question shows. A model put a harmless head first
    (`ls && true && ...`) and the payload past the clipping, or a `#` comment whose
    carriage return and escape sequence redrew the question on a terminal as another.
    The command is shown whole with its control characters escaped, after the access a
    yes grants; one too long to show whole is not asked about, and is refused saying so."""
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    long = "echo '" + "a" * 2100 + "' > .envrc"
    redrawn = "echo x > .envrc # \r\x1b[3A\x1b[JPrism asks whether the tool 'shell' may run `ls`"
    past = "ls" + " && true" * (QUESTION_LIMIT // 8) + " > .envrc"
    async with (
        _served(workspace) as (url, _ledger),
        Client(url, elicitation_callback=elicit, mode="legacy") as client,
    ):
        shown = await client.call_tool("shell", {"command": long})
        escaped = await client.call_tool("shell", {"command": redrawn})
        unasked = await client.call_tool("shell", {"command": past})
    assert len(asked) == 2, asked
    assert "approving it lets this one call write or remove the protected path .envrc" in asked[0]
    assert asked[0].endswith("the command: " + long)
    assert asked[1].endswith(
        "# \\x0d\\x1b[3A\\x1b[JPrism asks whether the tool 'shell' may run `ls`"
    )
    assert "\r" not in asked[1]
    assert "\x1b" not in asked[1]
    assert not shown.is_error
    assert not escaped.is_error
    assert unasked.is_error
    assert "too long to show whole in an approval question" in _text(unasked)


async def test_a_call_asking_twice_runs_once_and_gets_both_answers() -> None:
    """The attack: on a 2026-07-28 client, a call needing two approvals never completed
    (the retry approved A, B was refused as "answered already", every further retry asked
    A again), and each retry ran the tool again, its side effects before the question too.

    The call waits in the gateway across rounds: the SDK client answers A, then B, the
    tool runs once, and the ledger has one record saying what happened.
    """
    approve = create_gateway_approver()
    effects: list[str] = []

    async def two(arguments: dict[str, Any], context: Any) -> ToolResult:
        effects.append("before A")
        a = await approve(ExecutionAction(kind="shell", operation="run", command="step A"))
        effects.append(f"A {a.approved}")
        b = await approve(ExecutionAction(kind="shell", operation="run", command="step B"))
        return ToolResult.text("both ran" if a.approved and b.approved else "refused")

    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message.rsplit("the command: ", 1)[-1])
        return types.ElicitResult(action="accept", content={"approve": True})

    ledger = RunLedger()
    tool = ToolDefinition(name="two", execute=two, parameters={"type": "object"})
    async with (
        open_gateway(tools=[tool], ledger=ledger) as gateway,
        trio.open_nursery() as nursery,
    ):
        url = await nursery.start(serve_http, gateway, HttpOptions())
        async with Client(url, elicitation_callback=elicit, mode="auto") as client:
            result = await client.call_tool("two", {})
        nursery.cancel_scope.cancel()
    assert _text(result) == "both ran", result.content
    assert asked == ["step A", "step B"]
    assert effects == ["before A", "A True"]
    records = [r for r in ledger.records if r.tool_name == "two"]
    assert [(r.status, r.result_preview) for r in records] == [("ok", "both ran")]
