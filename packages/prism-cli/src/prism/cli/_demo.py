"""``prism demo``: a scripted agent session through every gate, with no model and no network.

The demo seeds a small workspace, starts the MCP server that ships with
prism-cli (``python -m prism.cli.demo_server``) over stdio, wires the coding
tools under the coding approval policy with contained file operations, the
JSON Schema validator and a rule permission policy, then replays turns that
each show one thing Prism does.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from prism.core import AssistantMessage, TextContent, ToolCall

from ._config import (
    AgentConfig,
    McpServerConfig,
    PermissionsConfig,
    PrismConfig,
    WorkspaceConfig,
)
from ._errors import CliError
from ._session import ScriptedSession
from ._trio import run_trio

if TYPE_CHECKING:
    from rich.console import Console

    from ._runner import RunReport

__all__ = ["DemoOptions", "demo_config", "demo_session", "run_demo", "seed_workspace"]

_EDITED = "src/inventory.py"
_FILES: dict[str, str] = {
    "README.md": (
        "# inventory\n\n"
        "A tiny stock keeper. `restock(stock, count)` adds delivered items;\n"
        "`sell(stock, count)` removes sold ones and refuses to go below zero.\n"
    ),
    _EDITED: (
        '"""Stock arithmetic."""\n\n\n'
        "def restock(stock: int, count: int) -> int:\n"
        '    """Stock after a delivery of ``count`` items."""\n'
        "    return stock - count  # bug: a delivery should add\n\n\n"
        "def sell(stock: int, count: int) -> int:\n"
        '    """Stock after selling ``count`` items."""\n'
        "    if count > stock:\n"
        '        raise ValueError("not enough stock")\n'
        "    return stock - count\n"
    ),
    "tests/test_inventory.py": (
        "from inventory import restock, sell\n\n\n"
        "def test_restock_adds() -> None:\n"
        "    assert restock(2, 3) == 5\n\n\n"
        "def test_sell_removes() -> None:\n"
        "    assert sell(5, 2) == 3\n"
    ),
}
_OUTSIDE_NAME = "outside-secret.txt"


@attrs.frozen(kw_only=True)
class DemoOptions:
    """What ``prism demo`` was asked for."""

    workspace: Path | None = None
    ledger: Path | None = None
    concurrency: int = 3
    step_seconds: float = 0.15
    json_mode: bool = False
    live: bool | None = None


def _prism_command() -> str:
    """How the user can run ``prism`` again from their own shell, as printed."""
    if os.environ.get("UV"):
        return "uv run prism"  # launched through `uv run` (scripts/demo): not on PATH after
    if shutil.which("prism"):
        return "prism"
    return f"{shlex.quote(sys.executable)} -m prism.cli"


def seed_workspace(workspace: Path) -> Path:
    """Write the demo's files into ``workspace`` and plant a secret just outside it.

    Returns the path of the outside file (the target of the escape attempts).
    Existing files of the same names are overwritten; nothing else is touched.
    """
    workspace.mkdir(parents=True, exist_ok=True)
    for relative, text in _FILES.items():
        target = workspace / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    outside = workspace.parent / _OUTSIDE_NAME
    if not outside.exists():
        outside.write_text("a secret the agent must never read\n", encoding="utf-8")
    link = workspace / "notes-link.txt"
    if link.is_symlink() or link.exists():
        link.unlink()
    with contextlib.suppress(OSError):  # no symlinks here: the ../ attempt still runs
        link.symlink_to(outside)
    return outside


def demo_config(workspace: Path, *, concurrency: int, step_seconds: float) -> PrismConfig:
    """The configuration the demo runs with (what a ``prism.toml`` for it would say)."""
    server = McpServerConfig(
        server_id="docs",
        command=sys.executable,
        args=("-m", "prism.cli.demo_server", "--step-seconds", f"{step_seconds:g}"),
        call_timeout_s=10.0,
        connect_timeout_s=30.0,
        max_call_s=60.0,
    )
    return PrismConfig(
        source="prism demo",
        base_dir=str(workspace),
        agent=AgentConfig(model="scripted-demo", tool_concurrency=concurrency, max_tool_rounds=8),
        workspace=WorkspaceConfig(roots=(str(workspace),), sandbox="auto"),
        permissions=PermissionsConfig(
            allow=("tool:*:execute",), deny=("tool:mcp:docs:delete_*:execute",)
        ),
        mcp_servers=(server,),
    )


def _turn(text: str, *calls: tuple[str, str, dict[str, object]]) -> AssistantMessage:
    return AssistantMessage(
        content=(TextContent(text=text),),
        tool_calls=tuple(ToolCall(id=i, name=n, arguments=a) for i, n, a in calls),
    )


def demo_session() -> ScriptedSession:
    """The scripted turns: each one shows one thing the gates do."""
    outside = f"../{_OUTSIDE_NAME}"
    return ScriptedSession(
        prompt="The restock test fails. Find out why and fix it.",
        turns=(
            _turn(
                "Reading the code and the docs at the same time.",
                ("read-1", "read", {"path": "README.md"}),
                ("read-2", "read", {"path": _EDITED}),
                ("docs-1", "mcp:docs:search_docs", {"query": "parallel calls"}),
                ("docs-2", "mcp:docs:get_page", {"slug": "security"}),
            ),
            _turn(
                "Two shell commands: the shell is exclusive, so they run one at a time.",
                ("sh-1", "shell", {"command": "ls tests"}),
                ("sh-2", "shell", {"command": "grep -n count src/inventory.py"}),
            ),
            _turn(
                "restock subtracts; fixing it.",
                (
                    "edit-1",
                    "edit",
                    {
                        "path": _EDITED,
                        "edits": [
                            {
                                "old_text": "return stock - count  # bug: a delivery should add",
                                "new_text": "return stock + count",
                            }
                        ],
                    },
                ),
            ),
            _turn(
                "Trying things a confused or hijacked model might try.",
                ("escape-1", "read", {"path": outside}),
                ("escape-2", "read", {"path": "notes-link.txt"}),
                ("danger-1", "shell", {"command": "rm -rf /"}),
                ("bad-args", "mcp:docs:search_docs", {"query": 42}),
                ("denied-1", "mcp:docs:delete_index", {}),
            ),
            _turn(
                "Rebuilding the docs index: a slow call that reports progress.",
                ("slow-1", "mcp:docs:build_index", {"pages": 5}),
            ),
            AssistantMessage(
                content=(
                    TextContent(
                        text="Fixed restock to add the delivered count; the escape attempts, "
                        "the dangerous command and the bad calls were all refused."
                    ),
                )
            ),
        ),
    )


def _diff(before: str, after: str, name: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"a/{name}",
            tofile=f"b/{name}",
        )
    )


def run_demo(options: DemoOptions, console: Console) -> int:
    """Run the demo; print live progress, the diff, a summary table and the ledger path.

    Returns the exit code (0 when the session ran to its end).

    Raises:
        CliError: the workspace could not be prepared or the demo server did not start.
    """
    from rich.panel import Panel
    from rich.syntax import Syntax

    from ._ledgerfile import LedgerFailures, recording_ledger
    from ._render import EventView, summary_table, untrusted
    from ._runner import open_toolset, run_scripted_session

    # Everything the demo writes stays inside one folder: the agent's root is its
    # "workspace" subfolder, and the secret the escapes aim at sits beside that.
    try:
        if options.workspace is not None:
            scratch = options.workspace.resolve()
            scratch.mkdir(parents=True, exist_ok=True)
        else:
            scratch = Path(tempfile.mkdtemp(prefix="prism-demo-"))
        workspace = scratch / "workspace"
        seed_workspace(workspace)
    except OSError as exc:
        raise CliError(f"cannot prepare the demo folder: {exc}") from exc
    ledger_path = options.ledger or scratch / "prism-demo-ledger.jsonl"
    config = demo_config(
        workspace, concurrency=options.concurrency, step_seconds=options.step_seconds
    )
    session = demo_session()
    before = (workspace / _EDITED).read_text(encoding="utf-8")
    failures = LedgerFailures()
    quiet = options.json_mode

    def header(sandbox: str) -> Panel:
        server = config.mcp_servers[0]
        isolation = (
            "bubblewrap: shell commands run isolated (read-only /, no network)"
            if sandbox == "bubblewrap"
            else f"{sandbox}: shell commands run on this host, contained only by the policy"
        )
        return Panel.fit(
            f"workspace  {workspace}\n"
            f"mcp server {server.command} {' '.join(server.args)}\n"
            f"gates      rule permissions, JSON Schema validation, coding approval "
            f"policy (roots = workspace), contained file operations\n"
            f"sandbox    {isolation}\n"
            f"bound      at most {options.concurrency} calls of a turn in flight",
            title="prism demo: a scripted agent session, no model, no network",
        )

    async def go() -> RunReport:
        async with open_toolset(config) as toolset:
            if not quiet:
                console.print(header(toolset.sandbox))
            # Each record is appended as its call ends (see prism ledger show).
            with (
                recording_ledger(ledger_path, label="prism demo", failures=failures) as ledger,
                EventView(console, quiet=quiet, live=options.live) as view,
            ):
                return await run_scripted_session(
                    session, toolset, config=config, ledger=ledger, view=view
                )

    try:
        report = run_trio(go)
    finally:
        failures.report()
    after = (workspace / _EDITED).read_text(encoding="utf-8")
    diff = _diff(before, after, _EDITED)
    if options.json_mode:
        import json

        data = {
            **report.to_json(),
            "workspace": str(workspace),
            "ledger": str(ledger_path),
            "concurrency": options.concurrency,
            "diff": diff,
        }
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        return 1 if report.aborted else 0
    if diff:
        console.print(f"[bold]edit-1 changed {_EDITED}:[/]")
        console.print(Syntax(diff, "diff", theme="ansi_dark", background_color="default"))
    console.print(summary_table(report.rows, title="summary"))
    console.print(
        f"most calls in flight at once: {report.max_in_flight} (bound {options.concurrency})"
    )
    if report.final_text:
        console.print(f"final answer: {untrusted(report.final_text)}", soft_wrap=True)
    console.print(f"ledger: {ledger_path}", soft_wrap=True)
    console.print(
        f"show it again with: {_prism_command()} ledger show {os.fspath(ledger_path)}",
        soft_wrap=True,
    )
    return 1 if report.aborted else 0
