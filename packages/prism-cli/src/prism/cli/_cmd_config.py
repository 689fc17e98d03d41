"""``prism config check`` and ``prism policy check``: what a configuration and a policy say."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import click

from ._output import CONTEXT, console, emit_json

if TYPE_CHECKING:
    from prism.coding.security import CommandExplanation

    from ._config import PrismConfig

__all__ = ["config", "policy"]

SandboxSetting = Literal["none", "bubblewrap", "auto"]

_VERDICT_STYLE = {"allow": "green", "ask": "yellow", "deny": "red"}


@click.group(context_settings=CONTEXT)
def config() -> None:
    """Check prism.toml files."""


def _render_config(file: Path, loaded: PrismConfig) -> None:
    out = console()
    out.print(f"[green]ok[/]: {file}")
    out.print(f"  roots: {', '.join(loaded.workspace.roots)}")
    out.print(
        f"  sandbox: {loaded.workspace.sandbox}"
        + (", read-only" if loaded.workspace.read_only else "")
    )
    servers = ", ".join(s.server_id for s in loaded.mcp_servers) or "none"
    out.print(f"  mcp servers: {servers}")
    out.print(
        f"  concurrency {loaded.agent.concurrency}, "
        f"at most {loaded.agent.max_tool_rounds} tool rounds"
    )


_HIDDEN = "[hidden]"


def _shown(resolved: dict[str, Any]) -> Any:
    """The resolved config as ``--json`` prints it: no secret a server is given.

    Header and environment values of MCP servers are hidden (their names stay);
    their arguments go through the ledger's redactor (``--token=...``, a
    password in a URL).
    """
    from prism.core.ledger import default_redactor

    redact = default_redactor()
    servers = []
    for server in resolved.get("mcp_servers", ()):
        server = dict(server)
        for table in ("env", "headers"):
            if server.get(table):
                server[table] = dict.fromkeys(server[table], _HIDDEN)
        server["args"] = redact(list(server.get("args", ())))
        servers.append(server)
    return {**resolved, "mcp_servers": servers}


@config.command("check", context_settings=CONTEXT)
@click.argument(
    "file", type=click.Path(dir_okay=False, path_type=Path), default="prism.toml", required=False
)
@click.option("--json", "json_mode", is_flag=True, help="Print the resolved config as JSON.")
def config_check(file: Path, json_mode: bool) -> None:
    """Validate FILE (default ./prism.toml) and show what it resolves to.

    Everything `prism run` and `prism serve` check before they start is checked
    here too: the roots exist, each MCP server's folder exists and its command is
    found, URLs have a host and a port that parses, [serve.auth] is complete, the
    approver command is found, and a bubblewrap sandbox can isolate.
    """
    import attrs

    from ._convert import load_config

    loaded = load_config(file)  # a mistake in the file is reported before anything is imported

    from ._preflight import check_before_run
    from ._serve import check_serve
    from ._toolset import choose_sandbox
    from ._trio import run_trio

    check_before_run(loaded)
    check_serve(loaded)
    if loaded.workspace.sandbox == "bubblewrap":
        run_trio(lambda: choose_sandbox(loaded))
    if json_mode:
        emit_json(_shown(attrs.asdict(loaded, recurse=True)))
    else:
        _render_config(file, loaded)


@click.group(context_settings=CONTEXT)
def policy() -> None:
    """Ask the coding policy what it would decide, and why."""


def _render_explanation(explanation: CommandExplanation, mode: str) -> None:
    import json

    from ._render import untrusted

    out = console()
    style = _VERDICT_STYLE[explanation.outcome]
    out.print(f"[bold {style}]{explanation.outcome}[/]: {untrusted(explanation.reason)}")
    out.print(f"  mode: {mode}")
    if explanation.execute is not None:
        out.print("  runs, rebuilt from the proved words:")
        for argv in explanation.argvs:
            out.print(f"    {untrusted(json.dumps(list(argv)))}")
    elif explanation.confined:
        out.print("  runs as written, inside the sandbox")
    for check in explanation.commands:
        indent = "  " * (check.depth + 1)
        shown = untrusted(" ".join(check.argv))
        out.print(
            f"{indent}[{_VERDICT_STYLE[check.verdict]}]{check.verdict:<5}[/] {shown}  "
            f"[dim]{untrusted(check.rule)}[/]: {untrusted(check.reason)}"
        )


def _rules(_ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    # Said in the flag's words here: the rules' own check would name CommandRules.
    if any(not rule.strip() for rule in value):
        raise click.BadParameter("a rule must not be empty", param=param)
    return value


@policy.command("check", context_settings=CONTEXT)
@click.argument("command")
@click.option(
    "--root",
    "roots",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A workspace root (repeatable; default: the config's roots, else the current directory).",
)
@click.option("--cwd", type=click.Path(file_okay=False, path_type=Path), help="Run it here.")
@click.option("--read-only", is_flag=True, help="Judge as the read-only policy would.")
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Take roots, read_only, sandbox, readable, protected_paths and [commands] from this "
    "prism.toml (default: ./prism.toml when it exists, as `prism run` does).",
)
@click.option(
    "--sandbox",
    type=click.Choice(["auto", "bubblewrap", "landlock", "none"]),
    help="Where commands would run, as workspace.sandbox in prism.toml (default: the "
    "config's, else auto). With a sandbox the policy is in confined mode.",
)
@click.option(
    "--allow", multiple=True, metavar="RULE", callback=_rules, help="An allow rule (repeatable)."
)
@click.option(
    "--deny", multiple=True, metavar="RULE", callback=_rules, help="A deny rule (repeatable)."
)
@click.option(
    "--ask", multiple=True, metavar="RULE", callback=_rules, help="An ask rule (repeatable)."
)
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
    sandbox: str | None,
    allow: tuple[str, ...],
    deny: tuple[str, ...],
    ask: tuple[str, ...],
    readable: tuple[str, ...],
    json_mode: bool,
) -> int:
    """Print whether COMMAND would run unasked (allow), need approval (ask) or be denied.

    The policy is built as `prism run` builds it: from ./prism.toml (or
    --config), in confined mode when the sandbox setting gives a working
    sandbox, else proved-safe only; the mode is printed. An allowed command
    lists the argv vectors Prism would run (rebuilt from what was proved), or
    says it runs as written inside the sandbox. Each simple command, and each
    command a wrapper or `sh -c` runs, is listed with its verdict and the rule
    or program model that decided it. Exit code: 0 allow, 1 ask or deny, 2 bad
    usage.
    """
    import attrs

    from prism.coding.security import CommandRules, explain_command

    from ._cmd_run import read_config
    from ._toolset import choose_sandbox
    from ._trio import run_trio

    loaded = read_config(config_file)
    if sandbox is not None:
        setting = cast("SandboxSetting", sandbox)
        loaded = attrs.evolve(loaded, workspace=attrs.evolve(loaded.workspace, sandbox=setting))
    root_list = [str(r) for r in roots]
    readable_list = [os.path.abspath(p) for p in readable]
    protected: tuple[str, ...] = ()
    rules = CommandRules(allow=allow, deny=deny, ask=ask)
    if loaded.found:
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
    root_list = root_list or [os.getcwd()]
    loaded = attrs.evolve(loaded, workspace=attrs.evolve(loaded.workspace, roots=tuple(root_list)))
    backend, label = run_trio(lambda: choose_sandbox(loaded))
    confines = backend is not None and getattr(backend, "confines", True) is True
    if confines:
        mode = f"confined ({label})"
    else:
        # Landlock contains what runs but the policy stays proved-safe: say both
        mode = "proved-safe" if backend is None else "proved-safe (under landlock)"
    explanation = explain_command(
        command,
        roots=root_list,
        cwd=str(cwd) if cwd is not None else None,
        read_only=read_only,
        command_rules=rules,
        readable=readable_list,
        protected_paths=protected,
        sandbox=backend,
    )
    if json_mode:
        emit_json({**explanation.to_json(), "mode": mode})
    else:
        _render_explanation(explanation, mode)
    return 0 if explanation.outcome == "allow" else 1
