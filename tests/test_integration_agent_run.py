"""One agent run that uses every package together, then aborts mid-turn.

prism.core's agent runtime drives a scripted provider; prism.validation.jsonschema
checks every call; prism.mcp bridges a real stdio MCP server (the demo server that
ships with prism-cli); prism.coding.tools runs shell/read/write/edit under
prism.coding.security's approval policy and contained file operations; calls of a
turn run in parallel under a bound; and an abort lands while a slow MCP call and a
shell command are running.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from prism.coding.security import (
    BubblewrapSandbox,
    SandboxUnavailableError,
    create_coding_approval_policy,
    create_contained_file_operations,
    create_sandbox_shell_operations,
)
from prism.coding.tools import LocalShellOperations, ShellOperations, create_coding_tools
from prism.core import (
    AbortController,
    AgentEvent,
    AssistantMessage,
    Limits,
    RunOptions,
    ScriptedProvider,
    SingleShotLoop,
    ToolCall,
    ToolExecutionFinished,
    ToolExecutionProgress,
    ToolExecutionStarted,
    ToolResultMessage,
    create_agent,
    create_rule_permission_policy,
)
from prism.core.ledger import RunLedger
from prism.mcp import StdioTransport, open_mcp_tools
from prism.validation.jsonschema import create_json_schema_tool_validator

if TYPE_CHECKING:
    from pathlib import Path


def _turn(*calls: tuple[str, str, object]) -> AssistantMessage:
    return AssistantMessage(
        tool_calls=tuple(ToolCall(id=i, name=n, arguments=a) for i, n, a in calls)
    )


async def test_one_agent_run_through_every_package_then_an_abort_mid_turn(
    workspace: Path, tmp_path: Path, demo_server: StdioTransport
) -> None:
    roots = [str(workspace)]
    controller = AbortController()
    in_flight = 0
    peak = 0
    progress: list[str] = []

    def on_event(event: AgentEvent) -> None:
        nonlocal in_flight, peak
        if isinstance(event, ToolExecutionStarted):
            in_flight += 1
            peak = max(peak, in_flight)
        elif isinstance(event, ToolExecutionFinished):
            in_flight -= 1
        elif isinstance(event, ToolExecutionProgress):
            progress.append(event.call_id)
            if event.call_id == "slow" and not controller.signal.aborted:
                controller.abort("the user stopped the run")

    script = [
        # Turn 1, in parallel: reads and MCP calls, a bad MCP call, an escape, a denied tool.
        _turn(
            ("r1", "read", {"path": "inside.txt"}),
            ("m1", "mcp__docs__search_docs", {"query": "parallel"}),
            ("m2", "mcp:docs:get_page", {"slug": "ledger"}),
            ("v1", "mcp:docs:search_docs", {"query": ["not", "a", "string"]}),
            ("x1", "read", {"path": "../secret.txt"}),
            ("p1", "mcp:docs:delete_index", {}),
        ),
        # Turn 2: a write and an edit of what was written; a shell turn (serialised).
        _turn(("w1", "write", {"path": "notes.md", "content": "draft\n"})),
        _turn(("sh1", "shell", {"command": "ls"}), ("sh2", "shell", {"command": "wc -l notes.md"})),
        _turn(
            (
                "e1",
                "edit",
                {"path": "notes.md", "edits": [{"old_text": "draft", "new_text": "final"}]},
            )
        ),
        # Turn 3: a slow MCP call with progress; the abort lands while it runs.
        _turn(
            ("slow", "mcp:docs:build_index", {"pages": 50}),
            ("r2", "read", {"path": "inside.txt"}),
        ),
        # After the abort, the next run of the same session.
        _turn(("again", "mcp:docs:search_docs", {"query": "ledger"})),
        AssistantMessage(),
    ]
    provider = ScriptedProvider(script)
    # The shell runs under bubblewrap where it works here, as the security docs advise.
    sandbox = BubblewrapSandbox(writable_roots=roots)
    shell_operations: ShellOperations
    try:
        await sandbox.ensure_available()
        shell_operations = create_sandbox_shell_operations(sandbox)
    except SandboxUnavailableError:
        shell_operations = LocalShellOperations()
    ledger = RunLedger()
    with trio.fail_after(60):
        async with open_mcp_tools(
            server_id="docs", transport=demo_server, call_timeout_s=10.0
        ) as bridge:
            tools = [
                *create_coding_tools(
                    str(workspace),
                    execution_policy=create_coding_approval_policy(roots=roots),
                    file_operations=create_contained_file_operations(roots),
                    shell_operations=shell_operations,
                ),
                *bridge.tools,
            ]
            agent = create_agent(
                model="scripted",
                provider=provider,
                tools=tools,
                validator=create_json_schema_tool_validator(),
                permission=create_rule_permission_policy(
                    allow=["tool:*:execute"], deny=["tool:mcp:docs:delete_*:execute"]
                ),
                loop=SingleShotLoop(concurrency=3),
                limits=Limits(max_tool_rounds=8),
                ledger=ledger,
            )
            session = agent.session()
            result = await session.run(
                "tidy the notes", RunOptions(signal=controller.signal, on_event=on_event)
            )

            assert result.aborted
            assert peak == 3  # turn 1 ran in parallel, never above the bound
            records = {r.call_id: r for r in ledger.records}
            assert records["r1"].status == "ok"
            assert records["m1"].status == "ok"  # a provider alias reached the MCP tool
            assert records["m1"].tool_name == "mcp:docs:search_docs"
            assert records["m2"].status == "ok"
            assert records["v1"].blocked_reason == "validation_failed"
            assert records["x1"].status == "error"
            assert records["p1"].blocked_reason == "permission_denied"
            assert records["w1"].status == "ok"
            assert records["e1"].status == "ok"
            assert records["sh1"].status == "ok"
            assert "notes.md" in (records["sh1"].result_preview or "")
            assert records["sh1"].finished_at <= records["sh2"].started_at  # exclusive shell
            assert records["slow"].status == "cancelled"
            assert "slow" in progress
            assert (workspace / "notes.md").read_text(encoding="utf-8") == "final\n"
            assert all("TOP-SECRET" not in (r.result_preview or "") for r in ledger.records)

            # Every call of every turn has its answer, in call order, even after the abort.
            asked = [
                c.id
                for m in result.messages
                if isinstance(m, AssistantMessage)
                for c in m.tool_calls
            ]
            answered = [m.call_id for m in result.messages if isinstance(m, ToolResultMessage)]
            assert answered == asked

            # The transcript is valid as it stands: the same session carries on (the
            # provider is sent every earlier call with its answer), and the MCP server
            # is still usable after the cancelled call.
            second = await session.run("once more")
            assert not second.aborted
            request = provider.requests[-2]
            sent_calls = [
                c.id
                for m in request.messages
                if isinstance(m, AssistantMessage)
                for c in m.tool_calls
            ]
            sent_answers = [m.call_id for m in request.messages if isinstance(m, ToolResultMessage)]
            assert sent_answers == sent_calls
            assert "slow" in sent_calls
            again = [m for m in second.messages if isinstance(m, ToolResultMessage)][-1]
            assert again.call_id == "again"
            assert not again.result.is_error
