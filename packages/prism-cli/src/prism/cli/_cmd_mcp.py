"""``prism mcp tools`` and ``prism mcp call``: one MCP server, through Prism's gates."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, TypeVar

import click

from ._output import CONTEXT, console, emit_json, ledger_option

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from ._config import McpServerConfig
    from ._mcp_runner import CallOutcome, ToolListing

__all__ = ["mcp"]

_T = TypeVar("_T")


@click.group(context_settings=CONTEXT)
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


def server_config(
    server_id: str, command: str | None, url: str | None, headers: Sequence[str], timeout: float
) -> McpServerConfig:
    """The server the options name; every mistake in them is a usage error (exit code 2)."""
    import shlex

    from prism.core import ConfigurationError

    from ._config import McpServerConfig

    if (command is None) == (url is None):
        raise click.UsageError("give exactly one of --stdio or --http")
    parsed: dict[str, str] = {}
    for header in headers:
        name, sep, value = header.partition(":")
        if not sep or not name.strip():
            raise click.BadParameter(f"expected NAME:VALUE, got {header!r}", param_hint="--header")
        parsed[name.strip()] = value.strip()
    if url is not None and not url.startswith(("http://", "https://")):
        raise click.BadParameter(f"expected an http(s) URL, got {url!r}", param_hint="--http")
    if url is None and parsed:
        raise click.BadParameter("only --http takes headers", param_hint="--header")
    program: str | None = None
    args: tuple[str, ...] = ()
    if command is not None:
        try:
            program, *rest = shlex.split(command) or [""]
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--stdio") from exc
        if not program:
            raise click.BadParameter("needs a command", param_hint="--stdio")
        args = tuple(rest)
    try:
        return McpServerConfig(
            server_id=server_id,
            command=program,
            args=args,
            url=url,
            headers=parsed,
            call_timeout_s=timeout,
            connect_timeout_s=timeout,
        )
    except ConfigurationError as exc:
        # Only the id can be wrong here: the rest was checked above.
        message = str(exc).split(" ", 1)[1]
        raise click.BadParameter(message, param_hint="--server-id") from exc


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


def _render_tools(listing: ToolListing, *, json_mode: bool) -> None:
    from rich.table import Table

    from ._render import untrusted

    tools = listing.tools
    if json_mode:
        emit_json(
            {
                "server": str(listing.server_info) if listing.server_info is not None else None,
                "protocol_version": listing.protocol_version,
                "tools": [
                    {"name": t.name, "description": t.description, "parameters": t.parameters}
                    for t in tools
                ],
            }
        )
        return
    table = Table(
        title=f"{len(tools)} tools (protocol {listing.protocol_version})", title_justify="left"
    )
    table.add_column("tool")
    table.add_column("description", overflow="fold", max_width=50)
    table.add_column("arguments", overflow="fold", max_width=40)
    for tool in tools:
        table.add_row(
            untrusted(tool.name),
            untrusted(tool.description or ""),
            untrusted(_schema_summary(tool.parameters)),
        )
    console().print(table)


@mcp.command("tools", context_settings=CONTEXT)
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
    server = server_config(server_id, command, url, headers, timeout)

    from ._mcp_runner import list_tools

    _render_tools(list_tools(server), json_mode=json_mode)


def _render_call(outcome: CallOutcome, *, json_mode: bool) -> None:
    from ._render import content_lines, content_to_json, record_to_json, safe_text

    result, record = outcome.result, outcome.record
    if json_mode:
        emit_json(
            {
                "tool": outcome.tool,
                "is_error": result.is_error,
                "text": result.joined_text,
                "content": content_to_json(result.content),
                "structured": result.structured,
                "record": record_to_json(record) if record is not None else None,
            }
        )
        return
    out = console()
    if record is not None and record.status == "blocked":
        out.print(f"[yellow]blocked[/] ({record.blocked_reason})")
    elif result.is_error:
        out.print("[red]error[/]")
    lines = content_lines(result.content)
    if not lines and result.structured is not None:
        # A result may carry only structuredContent: show that.
        structured = json.dumps(result.structured, indent=2, ensure_ascii=False, default=str)
        lines = [safe_text(structured)]
    for line in lines or [safe_text(result.joined_text)]:
        out.print(line, markup=False, soft_wrap=True, highlight=False)
    if outcome.hint:
        console(json_mode=True).print(f"hint: {outcome.hint}", markup=False, soft_wrap=True)


@mcp.command("call", context_settings=CONTEXT)
@_server_options
@click.argument("name")
@click.option(
    "--args", "args_json", default="{}", show_default=True, help="The arguments, as JSON."
)
@ledger_option("Also append the call's ledger record here (JSONL, or SQLite for .db/.sqlite).")
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
    server = server_config(server_id, command, url, headers, timeout)

    from ._mcp_runner import call_tool

    outcome = call_tool(server, name, arguments, ledger_file=ledger_file, allow=allow, deny=deny)
    _render_call(outcome, json_mode=json_mode)
    return 1 if outcome.result.is_error else 0
