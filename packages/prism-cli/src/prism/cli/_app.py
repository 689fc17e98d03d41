"""The ``prism`` command line (click), and :func:`main`, its entry point.

Exit codes: 0 done; 1 the command ran but what it ran failed (an MCP call
returned an error result, a run was aborted); 2 bad usage, a bad config or
session file, or a server that would not start.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

import attrs
import click
from rich.console import Console

from prism.core import PrismError

from ._errors import CliError
from ._trio import run_trio as _run_trio

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from prism.core import LedgerContents, RunLedger

    from ._config import McpServerConfig

__all__ = ["cli", "main"]

_T = TypeVar("_T")
_RICH_TABLE_ROWS = 200
_CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def _console(*, json_mode: bool = False) -> Console:
    # Under --json, stdout carries one JSON document; anything human goes to stderr.
    console = Console(stderr=json_mode, highlight=False, soft_wrap=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        # Pipes and CI logs have no width; 80 columns would fold every table.
        console.width = 140
    return console


def _emit_json(value: object) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, packages_distributions, version

    try:
        return version("prism-cli")
    except PackageNotFoundError:
        pass
    # published under another distribution prefix (docs/release.md)
    for name in packages_distributions().get("prism", []):
        if name.endswith("-cli"):
            return version(name)
    return "unknown"


@click.group(context_settings=_CONTEXT)
@click.version_option(_version(), "--version", prog_name="prism", message="%(prog)s %(version)s")
def cli() -> None:
    """Prism: run tool calls through validated, permission-checked, bounded gates.

    Start with `prism demo`: a scripted agent session, no model and no network.
    """


# --------------------------------------------------------------------------- ledger


@cli.group(context_settings=_CONTEXT)
def ledger() -> None:
    """Read run ledgers (the JSONL or SQLite files `prism run` and `prism demo` write)."""


def _ledger_filters(fn: Callable[..., _T]) -> Callable[..., _T]:
    fn = click.option(
        "--blocked", is_flag=True, help="Only refused calls: blocked ones and policy denials."
    )(fn)
    fn = click.option(
        "--since",
        metavar="WHEN",
        help="Only calls started since WHEN: an ISO time, epoch seconds, or an age (30m, 2h, 1d).",
    )(fn)
    fn = click.option("--run", "run_id", metavar="ID", help="Only the run whose id starts so.")(fn)
    fn = click.option(
        "--tool", "tools", multiple=True, metavar="GLOB", help="Only these tools (repeatable)."
    )(fn)
    fn = click.option(
        "--status",
        "statuses",
        multiple=True,
        type=click.Choice(["ok", "error", "blocked", "cancelled"]),
        help="Only calls with this status (repeatable).",
    )(fn)
    fn = click.argument("file", type=click.Path(dir_okay=False, path_type=Path))(fn)
    return fn


def _read_ledger_file(
    file: Path,
    statuses: tuple[str, ...],
    tools: tuple[str, ...],
    run_id: str | None,
    since: str | None,
    blocked: bool,
) -> LedgerContents:
    from prism.core import LedgerFormatError, LedgerQuery, read_ledger

    from ._ledgerfile import parse_since

    try:
        when = None if since is None else parse_since(since)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--since") from exc
    query = LedgerQuery(
        status=statuses,
        tool=tools,
        run=run_id,
        since=when,
        blocked=blocked,
    )
    try:
        contents = read_ledger(file, strict=False, query=query)
    except OSError as exc:
        raise CliError(f"{file}: cannot read it ({exc})") from exc
    except LedgerFormatError as exc:
        raise CliError(f"{file}: {exc}") from exc
    if not contents.records and not contents.runs and contents.problems:
        # Nothing in it reads as a ledger.
        raise CliError(f"{file}: {contents.problems[0]}")
    for problem in contents.problems[:5]:
        sys.stderr.write(f"prism: warning: {file}: skipped {problem}\n")
    if len(contents.problems) > 5:
        sys.stderr.write(f"prism: warning: {file}: {len(contents.problems)} lines skipped\n")
    if contents.torn_line is not None:
        sys.stderr.write(
            f"prism: warning: {file}: line {contents.torn_line} is torn (a write cut short, "
            "probably by a killed run); it is skipped\n"
        )
    return contents


@ledger.command("show", context_settings=_CONTEXT)
@_ledger_filters
@click.option("--json", "json_mode", is_flag=True, help="Print the records as a JSON document.")
def ledger_show(
    file: Path,
    statuses: tuple[str, ...],
    tools: tuple[str, ...],
    run_id: str | None,
    since: str | None,
    blocked: bool,
    json_mode: bool,
) -> None:
    """Pretty-print the ledger FILE (JSONL or SQLite): one row per call, with its decision.

    Shows status, blocked reason and the decision (which gate or policy
    decided, the rule, the approval, the sandbox), then each run and whether
    it finished or was interrupted.
    """
    from ._render import ledger_table, ledger_text, record_to_json, run_lines, untrusted

    contents = _read_ledger_file(file, statuses, tools, run_id, since, blocked)
    records = contents.records
    counts: dict[str, int] = {}
    for record in records:
        counts[record.status] = counts.get(record.status, 0) + 1
    if json_mode:
        _emit_json(
            {
                "file": str(file),
                "counts": counts,
                "records": [record_to_json(r) for r in records],
                "runs": [attrs.asdict(run) for run in contents.runs],
                "torn_line": contents.torn_line,
            }
        )
        return
    console = _console()
    if console.is_terminal and len(records) <= _RICH_TABLE_ROWS:
        console.print(ledger_table(records, title=f"ledger {file}"))
    else:
        # Drawing a rich table costs about 2 ms a row; big ledgers and pipes get plain text.
        console.print(f"ledger {untrusted(str(file))}", soft_wrap=True)
        console.file.write(ledger_text(records) + "\n")
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no records"
    console.print(f"{len(records)} calls: {summary}")
    for line in run_lines(contents.runs):
        console.print(line, soft_wrap=True)


@ledger.command("query", context_settings=_CONTEXT)
@_ledger_filters
def ledger_query(
    file: Path,
    statuses: tuple[str, ...],
    tools: tuple[str, ...],
    run_id: str | None,
    since: str | None,
    blocked: bool,
) -> int:
    """Print the records of the ledger FILE that match the filters, one JSON object a line.

    Reads JSONL or SQLite (filters run in SQL there). Exit code 1 when nothing
    matches, so scripts can test for "any denials since 1h".
    """
    from ._render import record_to_json

    contents = _read_ledger_file(file, statuses, tools, run_id, since, blocked)
    out = sys.stdout
    for record in contents.records:
        out.write(json.dumps(record_to_json(record), ensure_ascii=False) + "\n")
    return 0 if contents.records else 1


# --------------------------------------------------------------------------- config


@cli.group(context_settings=_CONTEXT)
def config() -> None:
    """Check prism.toml files."""


@config.command("check", context_settings=_CONTEXT)
@click.argument(
    "file", type=click.Path(dir_okay=False, path_type=Path), default="prism.toml", required=False
)
@click.option("--json", "json_mode", is_flag=True, help="Print the resolved config as JSON.")
def config_check(file: Path, json_mode: bool) -> None:
    """Validate FILE (default ./prism.toml) and show what it resolves to."""
    from ._config import load_config

    loaded = load_config(file)
    data = attrs.asdict(loaded, recurse=True)
    if json_mode:
        _emit_json(data)
        return
    console = _console()
    console.print(f"[green]ok[/]: {file}")
    console.print(f"  roots: {', '.join(loaded.workspace.roots)}")
    console.print(
        f"  sandbox: {loaded.workspace.sandbox}"
        + (", read-only" if loaded.workspace.read_only else "")
    )
    servers = ", ".join(s.server_id for s in loaded.mcp_servers) or "none"
    console.print(f"  mcp servers: {servers}")
    console.print(
        f"  concurrency {loaded.agent.tool_concurrency}, "
        f"at most {loaded.agent.max_tool_rounds} tool rounds"
    )


# --------------------------------------------------------------------------- policy


@cli.group(context_settings=_CONTEXT)
def policy() -> None:
    """Ask the coding policy what it would decide, and why."""


_VERDICT_STYLE = {"allow": "green", "ask": "yellow", "deny": "red"}


@policy.command("check", context_settings=_CONTEXT)
@click.argument("command")
@click.option(
    "--root",
    "roots",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="A workspace root (repeatable; default: the config's roots, else the current directory).",
)
@click.option("--cwd", type=click.Path(file_okay=False, path_type=Path), help="Run it here.")
@click.option("--read-only", is_flag=True, help="Judge as the read-only policy would.")
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Take roots, read_only, readable, protected_paths and [commands] from this prism.toml.",
)
@click.option("--allow", multiple=True, metavar="RULE", help="An allow rule (repeatable).")
@click.option("--deny", multiple=True, metavar="RULE", help="A deny rule (repeatable).")
@click.option("--ask", multiple=True, metavar="RULE", help="An ask rule (repeatable).")
@click.option(
    "--readable", multiple=True, metavar="PATH", help="A path outside the roots that may be read."
)
@click.option("--json", "json_mode", is_flag=True, help="Print the decision as JSON.")
def policy_check(
    command: str,
    roots: tuple[Path, ...],
    cwd: Path | None,
    read_only: bool,
    config_file: Path | None,
    allow: tuple[str, ...],
    deny: tuple[str, ...],
    ask: tuple[str, ...],
    readable: tuple[str, ...],
    json_mode: bool,
) -> int:
    """Print whether COMMAND would run unasked (allow), need approval (ask) or be denied.

    Each simple command, and each command a wrapper or `sh -c` runs, is listed
    with its verdict and the rule or program model that decided it. Exit code:
    0 allow, 1 ask or deny, 2 bad usage.
    """
    from prism.coding.security import CommandRules, explain_command

    root_list = [str(r) for r in roots]
    rules = CommandRules(allow=allow, deny=deny, ask=ask)
    readable_list = [os.path.abspath(p) for p in readable]
    protected: tuple[str, ...] = ()
    if config_file is not None:
        from ._config import load_config

        loaded = load_config(config_file)
        root_list = root_list or list(loaded.workspace.roots)
        read_only = read_only or loaded.workspace.read_only
        rules = CommandRules(
            allow=(*loaded.commands.allow, *allow),
            deny=(*loaded.commands.deny, *deny),
            ask=(*loaded.commands.ask, *ask),
            use_default_deny=loaded.commands.use_default_deny,
        )
        readable_list += loaded.workspace.readable
        protected = loaded.workspace.protected_paths
    if not root_list:
        root_list = [os.getcwd()]
    explanation = explain_command(
        command,
        roots=root_list,
        cwd=str(cwd) if cwd is not None else None,
        read_only=read_only,
        command_rules=rules,
        readable=readable_list,
        protected_paths=protected,
    )
    if json_mode:
        _emit_json(explanation.to_json())
        return 0 if explanation.outcome == "allow" else 1
    from ._render import untrusted

    console = _console()
    style = _VERDICT_STYLE[explanation.outcome]
    console.print(f"[bold {style}]{explanation.outcome}[/]: {untrusted(explanation.reason)}")
    for check in explanation.commands:
        indent = "  " * (check.depth + 1)
        shown = untrusted(" ".join(check.argv))
        console.print(
            f"{indent}[{_VERDICT_STYLE[check.verdict]}]{check.verdict:<5}[/] {shown}  "
            f"[dim]{untrusted(check.rule)}[/]: {untrusted(check.reason)}"
        )
    return 0 if explanation.outcome == "allow" else 1


# --------------------------------------------------------------------------- run


@cli.command("run", context_settings=_CONTEXT)
@click.argument("session_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default="prism.toml",
    show_default=True,
    help="Tools, roots, rules and limits.",
)
@click.option(
    "--ledger",
    "ledger_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Append the ledger here as calls end (default: [ledger] path, else "
    "prism-ledger.jsonl; a .db/.sqlite path gets an SQLite ledger).",
)
@click.option("--json", "json_mode", is_flag=True, help="Print one JSON report instead of tables.")
@click.option("--live/--no-live", default=None, help="Force the live display on or off.")
@click.option(
    "--model",
    "model_spec",
    metavar="PROVIDER:MODEL",
    help="Drive a real model (openai:MODEL, anthropic:MODEL); the argument is then the task. "
    "Keys from OPENAI_API_KEY / ANTHROPIC_API_KEY.",
)
@click.option(
    "--base-url",
    metavar="URL",
    help="The model API's base URL (an OpenAI-compatible server such as vLLM or Ollama).",
)
@click.option(
    "--yes",
    "yes_mode",
    type=click.Choice(["ask", "never"]),
    default="ask",
    show_default=True,
    help="With --model: ask on the terminal before an action the policy will not allow by "
    "itself (never in a pipe), or never approve anything.",
)
def run_command(
    session_file: Path,
    config_file: Path,
    ledger_file: Path | None,
    json_mode: bool,
    live: bool | None,
    model_spec: str | None,
    base_url: str | None,
    yes_mode: Literal["ask", "never"],
) -> int:
    """Replay SESSION_FILE (scripted assistant turns, JSON) against the tools in prism.toml.

    With --model PROVIDER:MODEL, the argument is a task for that model instead:
    prism run --model openai:gpt-4.1-mini "add a test for foo". On a terminal,
    an action the coding policy will not allow by itself is asked about (yes /
    no / always); in a pipe or with --yes never, it is refused and the model is
    told why.

    Every call goes through the full gates: permission rules, JSON Schema
    validation, the coding execution policy, bounded parallelism per turn.
    """
    from ._config import load_config
    from ._ledgerfile import LedgerFailures, recording_ledger
    from ._render import EventView, summary_table, untrusted
    from ._runner import RunReport, open_toolset, run_scripted_session
    from ._session import load_session

    loaded = load_config(config_file)
    session = None if model_spec is not None else load_session(session_file)
    target = ledger_file or Path(loaded.ledger or Path.cwd() / "prism-ledger.jsonl")
    console = _console(json_mode=json_mode)
    failures = LedgerFailures()
    run_id = ""

    approver = None
    if model_spec is not None:
        from ._model_run import terminal_approver

        approver = terminal_approver(yes_mode)
        if approver is not None:
            live = False  # a live display would draw over the questions

    async def go() -> RunReport:
        nonlocal run_id
        async with open_toolset(loaded, approve=approver) as toolset:
            # Opened once the tools are up: a run that never started leaves no ledger.
            label = (
                f"prism run {session_file}"
                if model_spec is None
                else f"prism run --model {model_spec}"
            )
            with recording_ledger(
                target,
                label=label,
                failures=failures,
                fsync=loaded.ledger_fsync,
                max_bytes=loaded.ledger_max_bytes,
            ) as run_ledger:
                run_id = run_ledger.run_id
                with EventView(console, quiet=json_mode, live=live) as view:
                    if session is None:
                        from ._model_run import run_model_task

                        return await run_model_task(
                            str(session_file),
                            toolset,
                            model=str(model_spec),
                            base_url=base_url,
                            config=loaded,
                            ledger=run_ledger,
                            view=view,
                        )
                    return await run_scripted_session(
                        session, toolset, config=loaded, ledger=run_ledger, view=view
                    )

    try:
        report = _run_trio(go)
    finally:
        failures.report()
    if json_mode:
        _emit_json(
            {
                **report.to_json(),
                "ledger": str(target),
                "run_id": run_id,
                "ledger_errors": failures.count,
            }
        )
    else:
        console.print(summary_table(report.rows, title="calls"))
        if report.final_text:
            console.print(f"final answer: {untrusted(report.final_text)}", soft_wrap=True)
        console.print(f"ledger: {target} (run {run_id})", soft_wrap=True)
    return 1 if report.aborted else 0


# --------------------------------------------------------------------------- chat


def _add_chat() -> None:
    from ._chat import chat_command

    cli.add_command(chat_command)


_add_chat()


# --------------------------------------------------------------------------- demo


@cli.command("demo", context_settings=_CONTEXT)
@click.option(
    "--workspace",
    type=click.Path(file_okay=False, path_type=Path),
    help="Demo folder to use instead of a fresh temporary one (the agent's root is its "
    "workspace/ subfolder; nothing is written outside it).",
)
@click.option(
    "--ledger",
    "ledger_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the JSONL ledger here.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 16),
    default=3,
    show_default=True,
    help="Calls of one turn allowed in flight at once.",
)
@click.option(
    "--step-seconds",
    type=click.FloatRange(0, 2),
    default=0.15,
    show_default=True,
    help="Pause per step of the demo server's slow tool.",
)
@click.option("--json", "json_mode", is_flag=True, help="Print one JSON report instead of tables.")
@click.option("--live/--no-live", default=None, help="Force the live display on or off.")
def demo_command(
    workspace: Path | None,
    ledger_file: Path | None,
    concurrency: int,
    step_seconds: float,
    json_mode: bool,
    live: bool | None,
) -> int:
    """Run a scripted agent session through every Prism gate: no model, no network.

    It seeds a scratch workspace, starts the MCP server that ships with
    prism-cli over stdio, and replays turns that show parallel calls under a
    bound, a serialised shell turn, an edit, a blocked path escape, a denied
    command, a validation failure, a permission denial and a slow call with
    progress. Ends with a summary table and the ledger path.
    """
    from ._demo import DemoOptions, run_demo

    options = DemoOptions(
        workspace=workspace,
        ledger=ledger_file,
        concurrency=concurrency,
        step_seconds=step_seconds,
        json_mode=json_mode,
        live=live,
    )
    return run_demo(options, _console(json_mode=json_mode))


# --------------------------------------------------------------------------- mcp


@cli.group(context_settings=_CONTEXT)
def mcp() -> None:
    """List and call the tools of one MCP server, through Prism's gates."""


def _server_options(fn: Callable[..., _T]) -> Callable[..., _T]:
    fn = click.option(
        "--timeout",
        type=click.FloatRange(0.1, 3600),
        default=30.0,
        show_default=True,
        help="Seconds to connect, and of silence allowed per call.",
    )(fn)
    fn = click.option(
        "--header",
        "headers",
        multiple=True,
        metavar="NAME:VALUE",
        help="HTTP header for --http (repeatable).",
    )(fn)
    fn = click.option("--http", "url", metavar="URL", help="A Streamable HTTP endpoint.")(fn)
    fn = click.option(
        "--stdio",
        "command",
        metavar='"CMD ARGS"',
        help="Launch this command; speak MCP over its stdio (split like a shell, no shell runs).",
    )(fn)
    fn = click.option(
        "--server-id",
        default="server",
        show_default=True,
        help="Id used in tool names (mcp:<id>:<tool>).",
    )(fn)
    return fn


def _server_config(
    server_id: str, command: str | None, url: str | None, headers: Sequence[str], timeout: float
) -> McpServerConfig:
    from ._config import McpServerConfig
    from ._runner import split_command

    if (command is None) == (url is None):
        raise click.UsageError("give exactly one of --stdio or --http")
    parsed: dict[str, str] = {}
    for header in headers:
        name, sep, value = header.partition(":")
        if not sep or not name.strip():
            raise click.BadParameter(f"expected NAME:VALUE, got {header!r}", param_hint="--header")
        parsed[name.strip()] = value.strip()
    if url is not None:
        if not url.startswith(("http://", "https://")):
            raise click.BadParameter(f"expected an http(s) URL, got {url!r}", param_hint="--http")
        return McpServerConfig(
            server_id=server_id,
            url=url,
            headers=parsed,
            call_timeout_s=timeout,
            connect_timeout_s=timeout,
        )
    if parsed:
        raise click.BadParameter("only --http takes headers", param_hint="--header")
    assert command is not None
    program, args = split_command(command)
    return McpServerConfig(
        server_id=server_id,
        command=program,
        args=args,
        call_timeout_s=timeout,
        connect_timeout_s=timeout,
    )


def _schema_summary(schema: object) -> str:
    if not isinstance(schema, dict):
        return ""
    props = schema.get("properties")
    required = set(schema.get("required") or [])
    if not isinstance(props, dict) or not props:
        return "(no arguments)"
    parts = []
    for name, spec in props.items():
        kind = spec.get("type", "any") if isinstance(spec, dict) else "any"
        mark = "" if name in required else "?"
        parts.append(f"{name}{mark}: {kind}")
    return ", ".join(parts)


@mcp.command("tools", context_settings=_CONTEXT)
@_server_options
@click.option("--json", "json_mode", is_flag=True, help="Print the tools as JSON.")
def mcp_tools(
    server_id: str,
    command: str | None,
    url: str | None,
    headers: tuple[str, ...],
    timeout: float,
    json_mode: bool,
) -> None:
    """List a server's tools: name, description and a summary of the argument schema."""
    from rich.table import Table

    from prism.core import ToolDefinition

    from ._render import untrusted
    from ._runner import open_mcp_server

    server = _server_config(server_id, command, url, headers, timeout)

    async def go() -> tuple[tuple[ToolDefinition, ...], object, object]:
        async with open_mcp_server(server) as bridge:
            return (tuple(bridge.tools), bridge.server_info, bridge.protocol_version)

    tools, info, protocol = _run_trio(go)
    if json_mode:
        _emit_json(
            {
                "server": str(info) if info is not None else None,
                "protocol_version": protocol,
                "tools": [
                    {"name": t.name, "description": t.description, "parameters": t.parameters}
                    for t in tools
                ],
            }
        )
        return
    table = Table(title=f"{len(tools)} tools (protocol {protocol})", title_justify="left")
    table.add_column("tool")
    table.add_column("description", overflow="fold", max_width=50)
    table.add_column("arguments", overflow="fold", max_width=40)
    for tool in tools:
        table.add_row(
            untrusted(tool.name),
            untrusted(tool.description or ""),
            untrusted(_schema_summary(tool.parameters)),
        )
    _console().print(table)


@mcp.command("call", context_settings=_CONTEXT)
@_server_options
@click.argument("name")
@click.option(
    "--args", "args_json", default="{}", show_default=True, help="The arguments, as JSON."
)
@click.option(
    "--ledger",
    "ledger_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also append the call's ledger record here (JSONL, or SQLite for .db/.sqlite).",
)
@click.option(
    "--allow",
    "allow",
    multiple=True,
    metavar="PATTERN",
    help="Permission rule to allow (default: only the named tool).",
)
@click.option("--deny", "deny", multiple=True, metavar="PATTERN", help="Permission rule to deny.")
@click.option("--json", "json_mode", is_flag=True, help="Print the result as JSON.")
def mcp_call(
    server_id: str,
    command: str | None,
    url: str | None,
    headers: tuple[str, ...],
    timeout: float,
    name: str,
    args_json: str,
    ledger_file: Path | None,
    allow: tuple[str, ...],
    deny: tuple[str, ...],
    json_mode: bool,
) -> int:
    """Call tool NAME once through the full gates and print its result.

    NAME is the server's own tool name (`search`) or the namespaced one
    (`mcp:server:search`). Arguments are checked against the tool's schema
    before anything is sent. Exit code 1 when the result is an error.
    """
    try:
        arguments = json.loads(args_json)
    except ValueError as exc:
        raise click.BadParameter(f"not valid JSON ({exc})", param_hint="--args") from exc
    server = _server_config(server_id, command, url, headers, timeout)

    from prism.core import (
        DispatchOptions,
        RunLedger,
        ToolCall,
        ToolCallRecord,
        ToolResult,
        create_rule_permission_policy,
        create_tool_registry,
        dispatch_tool_call,
    )
    from prism.validation.jsonschema import create_json_schema_tool_argument_validator

    from ._ledgerfile import LedgerFailures, recording_ledger
    from ._render import content_lines, content_to_json, safe_text
    from ._runner import open_mcp_server

    prefix = f"mcp:{server_id}:"
    full_name = name if name.startswith(prefix) else prefix + name
    policy = create_rule_permission_policy(allow=allow or (f"tool:{full_name}:execute",), deny=deny)
    failures = LedgerFailures()
    records: list[ToolCallRecord] = []

    async def go() -> ToolResult:
        async with open_mcp_server(server) as bridge:
            recording: contextlib.AbstractContextManager[RunLedger] = (
                contextlib.nullcontext(RunLedger())
                if ledger_file is None
                else recording_ledger(
                    ledger_file, label=f"prism mcp call {full_name}", failures=failures
                )
            )
            # The record reaches the file when the call ends, even if Ctrl-C follows.
            with recording as run_ledger:
                options = DispatchOptions(
                    registry=create_tool_registry(bridge.tools),
                    permission=policy,
                    validate=create_json_schema_tool_argument_validator(),
                    ledger=run_ledger,
                )
                call = ToolCall(id="cli-1", name=full_name, arguments=arguments)
                try:
                    return await dispatch_tool_call(call, options)
                finally:
                    records.extend(run_ledger.records)

    try:
        result = _run_trio(go)
    finally:
        failures.report()
    record = records[-1] if records else None
    if json_mode:
        from ._render import record_to_json

        _emit_json(
            {
                "tool": full_name,
                "is_error": result.is_error,
                "text": result.joined_text,
                "content": content_to_json(result.content),
                "structured": result.structured,
                "record": record_to_json(record) if record is not None else None,
            }
        )
    else:
        console = _console()
        if record is not None and record.status == "blocked":
            console.print(f"[yellow]blocked[/] ({record.blocked_reason})")
        elif result.is_error:
            console.print("[red]error[/]")
        lines = content_lines(result.content)
        if not lines and result.structured is not None:
            # A result may carry only structuredContent: show that.
            structured = json.dumps(result.structured, indent=2, ensure_ascii=False, default=str)
            lines = [safe_text(structured)]
        for line in lines or [safe_text(result.joined_text)]:
            console.print(line, markup=False, soft_wrap=True, highlight=False)
    return 1 if result.is_error else 0


# --------------------------------------------------------------------------- main


# --------------------------------------------------------------------------- serve

if TYPE_CHECKING:
    from prism.gateway import HttpOptions

    from ._config import PrismConfig


@cli.command("serve", context_settings=_CONTEXT)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default="prism.toml",
    show_default=True,
    help="Tools, roots, rules and limits.",
)
@click.option(
    "--http",
    "http",
    metavar="HOST:PORT",
    help="Serve MCP Streamable HTTP here (e.g. 127.0.0.1:8765) instead of stdio.",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="HTTP bearer tokens, one per line (else $PRISM_GATEWAY_TOKEN).",
)
@click.option(
    "--allow-origin",
    "origins",
    multiple=True,
    metavar="ORIGIN",
    help="An HTTP Origin accepted besides loopback ones (repeatable).",
)
@click.option("--stateless", is_flag=True, help="HTTP without sessions (for load balancing).")
@click.option(
    "--approve-command",
    "approve_command",
    metavar="CMD",
    help="When the host cannot be asked, run CMD (no shell) with the action as JSON on "
    "stdin: exit 0 approves (default: deny).",
)
@click.option(
    "--ledger",
    "ledger_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Append each call's record here as it ends (JSONL, or SQLite for .db; "
    "default: [ledger] path).",
)
def serve_command(
    config_file: Path,
    http: str | None,
    token_file: Path | None,
    origins: tuple[str, ...],
    stateless: bool,
    approve_command: str | None,
    ledger_file: Path | None,
) -> None:
    """Serve the configured tools to MCP hosts; every call passes Prism's gates.

    Over stdio by default (point a host at `prism serve --config prism.toml`);
    with --http, over Streamable HTTP, on loopback unless bearer tokens are
    set. Actions that need approval are asked of the host by elicitation
    when it can answer, else of --approve-command, else denied. See
    docs/gateway.md.
    """
    from prism.gateway import BearerAuth, HttpOptions

    from ._config import load_config

    loaded = load_config(config_file)
    options = None
    if http is not None:
        host, sep, port = http.rpartition(":")
        if not sep or not port.isdigit():
            raise CliError(f"--http expects HOST:PORT, got {http!r}")
        if token_file is not None:
            try:
                lines = token_file.read_text(encoding="utf-8").splitlines()
            except OSError as exc:
                raise CliError(f"--token-file {token_file}: {exc.strerror or exc}") from exc
        else:
            lines = [os.environ.get("PRISM_GATEWAY_TOKEN", "")]
        tokens = tuple(line.strip() for line in lines if line.strip())
        options = HttpOptions(
            host=host or "127.0.0.1",
            port=int(port),
            auth=BearerAuth(tokens=tokens) if tokens else None,
            allowed_origins=origins,
            stateless=stateless,
        )
    approver: tuple[str, ...] = ()
    if approve_command is not None:
        import shlex

        try:
            approver = tuple(shlex.split(approve_command))
        except ValueError as exc:
            raise CliError(f"--approve-command {approve_command!r}: {exc}") from exc
        if not approver:
            raise CliError("--approve-command needs a command, got an empty string")
    ledger_path = ledger_file if ledger_file is not None else loaded.ledger
    _run_trio(lambda: _serve(loaded, options, ledger_path, approver))


async def _serve(
    loaded: PrismConfig,
    options: HttpOptions | None,
    ledger: Path | str | None,
    approve_command: tuple[str, ...] = (),
) -> None:
    import trio

    from prism.coding.security import (
        CommandRules,
        create_coding_approval_policy,
        create_contained_file_operations,
        create_sandbox_shell_operations,
    )
    from prism.coding.tools import create_coding_tools
    from prism.core import RunLedger, ToolDefinition
    from prism.gateway import (
        CODING_TOOL_HINTS,
        create_command_approver,
        create_gateway_approver,
        open_gateway,
        serve_http,
        serve_stdio,
    )

    from ._ledgerfile import LedgerFailures, recording_ledger
    from ._runner import _sandbox, open_toolset

    # The bridges, permission and validator come from the usual wiring; the
    # coding tools are built here so their approver can ask the MCP client.
    bridged = attrs.evolve(loaded, workspace=attrs.evolve(loaded.workspace, coding_tools=False))
    tools: list[ToolDefinition] = []
    if loaded.workspace.coding_tools:
        roots = list(loaded.workspace.roots)
        sandbox, _label = await _sandbox(loaded)
        policy = create_coding_approval_policy(
            roots=roots,
            approve=create_gateway_approver(
                fallback=create_command_approver(approve_command) if approve_command else None
            ),
            read_only=loaded.workspace.read_only,
            command_rules=CommandRules(
                allow=loaded.commands.allow,
                deny=loaded.commands.deny,
                ask=loaded.commands.ask,
                use_default_deny=loaded.commands.use_default_deny,
            ),
            sandbox=sandbox,
            readable=loaded.workspace.readable,
            protected_paths=loaded.workspace.protected_paths,
            cache_approvals=False,
        )
        tools = create_coding_tools(
            roots[0],
            execution_policy=policy,
            file_operations=create_contained_file_operations(roots),
            shell_operations=None if sandbox is None else create_sandbox_shell_operations(sandbox),
        )
    async with contextlib.AsyncExitStack() as stack:
        failures = LedgerFailures()
        stack.callback(failures.report)
        if ledger is None:
            run_ledger = RunLedger()
        else:
            run_ledger = stack.enter_context(
                recording_ledger(
                    Path(ledger),
                    label="prism serve",
                    failures=failures,
                    fsync=loaded.ledger_fsync,
                    max_bytes=loaded.ledger_max_bytes,
                )
            )
        toolset = await stack.enter_async_context(open_toolset(bridged))
        gateway = await stack.enter_async_context(
            open_gateway(
                tools=tools,
                bridges=toolset.bridges,
                permission=toolset.permission,
                validator=toolset.validator,
                hints=CODING_TOOL_HINTS,
                ledger=run_ledger,
            )
        )
        if options is None:
            await serve_stdio(gateway)
            return
        async with trio.open_nursery() as nursery:
            url = await nursery.start(serve_http, gateway, options)
            sys.stderr.write(f"prism serve: MCP endpoint {url}\n")
            sys.stderr.flush()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``prism`` command with ``argv`` (default: ``sys.argv[1:]``); return the exit code.

    Usage errors and the command's own errors (bad config, bad session file, a
    server that will not start) print one line to stderr and return 2.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        outcome = cli.main(args=args, prog_name="prism", standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort:
        sys.stderr.write("prism: aborted\n")
        return 130
    except CliError as exc:
        sys.stderr.write(f"prism: error: {exc}\n")
        return 2
    except PrismError as exc:
        sys.stderr.write(f"prism: error: {type(exc).__name__}: {exc}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("prism: interrupted\n")
        return 130
    return outcome if isinstance(outcome, int) else 0
