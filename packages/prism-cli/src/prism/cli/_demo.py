"""``prism demo``: a scripted agent session through every gate, with no model and no network.

The demo seeds a small workspace, starts the MCP server that ships with
prism-cli (``prism.cli.demo_server``, under the running interpreter) over
stdio, wires the coding tools under the coding approval policy with contained
file operations and the sandbox (when one runs here), the JSON Schema
validator, a tool filter and a rule permission policy, then replays turns that
each show one thing Prism does: every gate refuses something at least once, a
scripted approver answers the policy's questions on screen, the sandbox stops a
write the policy could not see, and the ledger redacts a secret.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import attrs

from prism.core import AssistantMessage, ExecutionAction, TextContent, ToolCall, ToolFilter

from ._config import (
    AgentConfig,
    CommandRulesConfig,
    McpServerConfig,
    PermissionsConfig,
    PrismConfig,
    WorkspaceConfig,
)
from ._errors import CliError
from ._session import ScriptedSession
from ._trio import run_trio

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from rich.console import Console

    from prism.core.ledger import ToolCallRecord

    from ._report import RunReport

__all__ = [
    "DemoOptions",
    "ScriptedApprover",
    "demo_config",
    "demo_filters",
    "demo_session",
    "gate_lines",
    "run_demo",
    "seed_workspace",
]

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
    # A stale copy the agent cleans up: an ``rm`` the demo's rules make it ask about.
    f"{_EDITED}.orig": "# stale copy of inventory.py from an old merge\n",
    # A build step that also plants a shell start-up hook (.envrc, a protected path).
    # The policy cannot see inside a script: with a sandbox it runs confined, and the
    # sandbox (which leaves changes to protected paths out of the root) stops the hook.
    "tools/build.sh": (
        "set -e\n"
        'echo "built" > build-stamp.txt\n'
        "echo 'export PATH=\"$PWD/tools:$PATH\"' >> .envrc\n"
    ),
}
_OUTSIDE_NAME = "outside-secret.txt"
# Looks like an API key to the ledger's redactor; it is not a real key.
_FAKE_KEY = "sk-demo-7f3a9c2e5b8d1f4a6c0e"
_CLEANUP = f"rm {_EDITED}.orig"
_HIDDEN_TOOL = "write"


@attrs.frozen(kw_only=True)
class DemoOptions:
    """What ``prism demo`` was asked for."""

    workspace: Path | None = None
    ledger: Path | None = None
    concurrency: int = 3
    step_seconds: float = 0.15
    json_mode: bool = False
    live: bool | None = None
    sandbox: Literal["auto", "bubblewrap", "none"] = "auto"


def _prism_command() -> str:
    """How the user can run ``prism`` again from their own shell, in any folder, as printed."""
    given = os.environ.get("PRISM_DEMO_COMMAND")  # scripts/demo: its checkout's scripts/prism
    if given:
        return given
    if not os.environ.get("UV") and shutil.which("prism"):
        return "prism"
    # Under `uv run` the environment's bin folder is on PATH only for this run.
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


def demo_config(
    workspace: Path,
    *,
    concurrency: int,
    step_seconds: float,
    sandbox: Literal["auto", "bubblewrap", "none"] = "auto",
) -> PrismConfig:
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
        agent=AgentConfig(model="scripted-demo", concurrency=concurrency, max_tool_rounds=8),
        workspace=WorkspaceConfig(roots=(str(workspace),), sandbox=sandbox),
        commands=CommandRulesConfig(ask=("rm *",)),
        permissions=PermissionsConfig(
            allow=("tool:*:execute",), deny=("tool:mcp:docs:delete_*:execute",)
        ),
        mcp_servers=(server,),
    )


def demo_filters() -> tuple[ToolFilter, ...]:
    """The demo host's tool filter: it offers no ``write`` tool (edits only)."""
    return (ToolFilter(deny=frozenset({_HIDDEN_TOOL})),)


@attrs.define(eq=False)
class ScriptedApprover:
    """The demo's stand-in for a person: approves the clean-up command, nothing else.

    Each question is printed as it is asked: the command or paths, why the
    policy asks, and the answer. ``asked`` keeps (what, reason, answer) triples.
    """

    say: Callable[[str], object] | None
    approve_commands: frozenset[str] = frozenset({_CLEANUP})
    asked: list[tuple[str, str, bool]] = attrs.field(factory=list)

    def __call__(self, action: ExecutionAction) -> bool:
        from ._render import untrusted

        what = action.command if action.command is not None else ", ".join(action.paths)
        what = f"{action.kind}: {what}"
        reason = str(action.metadata.get("approval_reason") or "the policy asks")
        answer = action.command in self.approve_commands
        self.asked.append((what, reason, answer))
        if self.say is not None:
            said = (
                "yes (the scripted approver approves this clean-up)"
                if answer
                else "no (the scripted approver approves only the clean-up)"
            )
            self.say(
                f"  [bold cyan]approval[/] asked for {untrusted(what)}\n"
                f"           why: {untrusted(reason)}\n"
                f"           answer: {said}"
            )
        return answer


def _turn(text: str, *calls: tuple[str, str, object]) -> AssistantMessage:
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
                ("ghost-1", "mcp:docs:drop_tables", {}),
                ("notobj-1", "read", "README.md"),
                ("hidden-1", _HIDDEN_TOOL, {"path": "src/backdoor.py", "content": "pass\n"}),
            ),
            _turn(
                "Cleaning up and stamping the build: both need more than reading.",
                ("approve-1", "shell", {"command": _CLEANUP}),
                ("sandbox-1", "shell", {"command": "sh tools/build.sh"}),
            ),
            _turn(
                "Rebuilding the docs index (slow, with progress); a search that pastes a key.",
                ("slow-1", "mcp:docs:build_index", {"pages": 5}),
                ("redact-1", "mcp:docs:search_docs", {"query": f"OPENAI_API_KEY={_FAKE_KEY}"}),
            ),
            AssistantMessage(
                content=(
                    TextContent(
                        text="Fixed restock to add the delivered count and removed the stale "
                        "copy; the escapes, the dangerous command, the bad calls and the "
                        "start-up hook the build script tried to plant were all stopped."
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


_GATES: tuple[tuple[str, str], ...] = (
    ("registry", "registry: unknown tool"),
    ("filter", "filter: tool hidden by the host"),
    ("arguments", "arguments are an object"),
    ("permission", "permission policy"),
    ("validator", "JSON Schema validator"),
    ("containment", "path containment"),
    ("execution_policy", "execution policy"),
)


def gate_lines(
    records: Mapping[str, ToolCallRecord],
    *,
    sandbox: str,
    approvals: Sequence[tuple[str, str, bool]],
) -> list[tuple[str, list[str], str]]:
    """(gate, call ids, what it did) for every gate the demo passes through, in pipeline order."""
    lines: list[tuple[str, list[str], str]] = []
    for gate, title in _GATES:
        hits = [
            r
            for r in records.values()
            if r.decision is not None and r.decision.gate == gate and not r.decision.allowed
        ]
        shown = ""
        if hits:
            first = hits[0]
            shown = first.blocked_reason or (first.decision.label if first.decision else "")
        lines.append((title, [r.call_id for r in hits], shown))
    asked = [r for r in records.values() if r.decision is not None and r.decision.approval_asked]
    answers = ", ".join(f"{what}: {'yes' if ok else 'no'}" for what, _, ok in approvals)
    lines.append(("approval (scripted approver)", [r.call_id for r in asked], answers))
    stamp = records.get("sandbox-1")
    if stamp is not None and sandbox == "bubblewrap":
        said = " ".join((stamp.result_preview or "").split())
        kept_out = "[prism sandbox] not applied" in said
        verdict = "stopped" if stamp.status == "error" or kept_out else "did not stop it"
        lines.append(("sandbox (bubblewrap)", ["sandbox-1"], f"{verdict}: {said}"))
    else:
        lines.append((f"sandbox ({sandbox})", [], "no sandbox runs here: the policy asked instead"))
    redacted = [r.call_id for r in records.values() if "[REDACTED]" in repr(r.arguments)]
    lines.append(("ledger redaction", redacted, "secret-looking values stored as [REDACTED]"))
    return lines


def run_demo(options: DemoOptions, console: Console) -> int:
    """Run the demo and print what happened, gate by gate.

    It prints live progress, the diff, a summary table, every gate with the call
    that met it, the redacted call's ledger line and the ledger path.

    ``options.sandbox`` picks the shell's sandbox (``"auto"``: bubblewrap when it runs
    here); without one the demo says so and its approver refuses the build script.

    Returns the exit code (0 when the session ran to its end).

    Raises:
        CliError: the workspace could not be prepared or the demo server did not start.
    """
    from rich.panel import Panel
    from rich.syntax import Syntax

    from ._ledgerfile import LedgerFailures, recording_ledger
    from ._render import EventView, ledger_text, summary_table, untrusted
    from ._runner import run_scripted_session
    from ._toolset import open_toolset

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
        workspace,
        concurrency=options.concurrency,
        step_seconds=options.step_seconds,
        sandbox=options.sandbox,
    )
    session = demo_session()
    before = (workspace / _EDITED).read_text(encoding="utf-8")
    failures = LedgerFailures()
    quiet = options.json_mode

    def header(sandbox: str) -> Panel:
        server = config.mcp_servers[0]
        if sandbox == "bubblewrap":
            isolation = "bubblewrap: shell commands run isolated (read-only /, no network)"
        elif sandbox.startswith("landlock"):
            isolation = f"{sandbox}: Landlock contains what the policy lets run"
        else:
            isolation = f"{sandbox}: shell commands run on this host, contained only by the policy"
        return Panel.fit(
            f"workspace  {workspace}\n"
            f"mcp server {server.command} {' '.join(server.args)}\n"
            f"gates      tool registry, filter (no {_HIDDEN_TOOL!r} tool), arguments are an "
            f"object, rule permissions, JSON Schema validation, coding approval policy "
            f"(roots = workspace; ask before rm) with a scripted approver, contained file "
            f"operations, a redacting ledger\n"
            f"sandbox    {isolation}\n"
            f"bound      at most {options.concurrency} calls of a turn in flight",
            title="prism demo: a scripted agent session, no model, no network",
        )

    approver = ScriptedApprover(
        None if quiet else functools.partial(console.print, highlight=False, soft_wrap=True)
    )
    recorded: list[ToolCallRecord] = []

    async def go() -> RunReport:
        async with open_toolset(config, approve=approver) as opened:
            toolset = attrs.evolve(opened, filters=demo_filters())
            if not quiet:
                console.print(header(toolset.sandbox))
            # Each record is appended as its call ends (see prism ledger show).
            with (
                recording_ledger(ledger_path, label="prism demo", failures=failures) as ledger,
                EventView(console, quiet=quiet, live=options.live) as view,
            ):
                report = await run_scripted_session(
                    session, toolset, config=config, ledger=ledger, view=view
                )
                recorded.extend(ledger.records)
                return report

    try:
        report = run_trio(go)
    finally:
        failures.report()
    after = (workspace / _EDITED).read_text(encoding="utf-8")
    diff = _diff(before, after, _EDITED)
    records = {record.call_id: record for record in recorded}
    gates = gate_lines(records, sandbox=report.sandbox, approvals=approver.asked)
    if options.json_mode:
        import json

        data = {
            **report.to_json(),
            "workspace": str(workspace),
            "ledger": str(ledger_path),
            "concurrency": options.concurrency,
            "diff": diff,
            "gates": [
                {"gate": gate, "calls": calls, "shown": shown} for gate, calls, shown in gates
            ],
            "approvals": [
                {"asked_for": what, "why": why, "approved": answer}
                for what, why, answer in approver.asked
            ],
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
    console.print("[bold]every gate, and the call that met it:[/]")
    width = max(len(gate) for gate, _, _ in gates)
    for gate, calls, shown in gates:
        console.print(
            f"  {gate:<{width}}  {untrusted(', '.join(calls) or '-'):<22} {untrusted(shown)}",
            highlight=False,
            soft_wrap=True,
        )
    redacted = records.get("redact-1")
    if redacted is not None:
        console.print("[bold]the ledger's line for redact-1 (the key is not stored):[/]")
        console.print(untrusted(ledger_text([redacted])), highlight=False, soft_wrap=True)
    if report.final_text:
        console.print(f"final answer: {untrusted(report.final_text)}", soft_wrap=True)
    console.print(f"ledger: {ledger_path}", soft_wrap=True)
    console.print(
        f"show it again with: {_prism_command()} ledger show "
        f"{shlex.quote(os.fspath(ledger_path.resolve()))}",
        soft_wrap=True,
    )
    return 1 if report.aborted else 0
