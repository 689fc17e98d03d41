"""``prism serve``: the configured tools as a gated MCP server (prism-gateway)."""

from __future__ import annotations

from pathlib import Path

import click

from ._output import CONTEXT, config_option, ledger_option

__all__ = ["serve_command"]


@click.command("serve", context_settings=CONTEXT)
@click.argument(
    "config_path",
    required=False,
    metavar="[CONFIG]",
    type=click.Path(dir_okay=False, path_type=Path),
)
@config_option("Tools, roots, rules, limits and [serve] (also: CONFIG, or $PRISM_CONFIG)")
@click.option(
    "--http",
    "http",
    metavar="HOST:PORT",
    help="Serve MCP Streamable HTTP here (e.g. 127.0.0.1:8765) instead of stdio.",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="HTTP bearer tokens, one per line (else [serve.auth], else $PRISM_GATEWAY_TOKEN).",
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
    "stdin: exit 0 approves (default: [serve] approver, else deny).",
)
@ledger_option(
    "Append each call's record here as it ends (JSONL, or SQLite for .db; default: [ledger] path)."
)
def serve_command(
    config_path: Path | None,
    config_file: Path | None,
    http: str | None,
    token_file: Path | None,
    origins: tuple[str, ...],
    stateless: bool,
    approve_command: str | None,
    ledger_file: Path | None,
) -> None:
    """Serve the configured tools to MCP hosts; every call passes Prism's gates.

    The configuration is CONFIG, else --config FILE, else $PRISM_CONFIG, else
    ./prism.toml when there is one (a host whose own flags include --config
    can use `prism serve prism.toml` or the variable).

    Over stdio by default (point a host at `prism serve prism.toml`);
    with --http, over Streamable HTTP, on loopback unless bearer tokens or
    OAuth ([serve.auth]) are set. Actions that need approval are asked of the
    host by elicitation when it can answer, else of the configured approver,
    else denied. See docs/gateway.md.
    """
    import shlex

    from ._cmd_run import read_config

    address: tuple[str, int] | None = None
    if http is not None:
        host, sep, port = http.rpartition(":")
        if not sep or not port.isdigit() or int(port) > 65_535:
            raise click.BadParameter(f"expected HOST:PORT, got {http!r}", param_hint="--http")
        address = (host or "127.0.0.1", int(port))
    command: tuple[str, ...] | None = None
    if approve_command is not None:
        try:
            command = tuple(shlex.split(approve_command))
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--approve-command") from exc
        if not command:
            raise click.BadParameter("needs a command", param_hint="--approve-command")
    loaded = read_config(_config_path(config_path, config_file))

    from ._serve import ServeRequest, serve

    serve(
        loaded,
        ServeRequest(
            address=address,
            token_file=token_file,
            origins=origins,
            stateless=stateless,
            approve_command=command,
            ledger=ledger_file,
        ),
    )


def _config_path(positional: Path | None, option: Path | None) -> Path | None:
    """CONFIG, else ``--config``, else ``$PRISM_CONFIG`` (``None``: ./prism.toml or defaults)."""
    import os

    if positional is not None and option is not None and positional != option:
        raise click.UsageError(
            f"two configurations given: {str(positional)!r} and --config {str(option)!r}"
        )
    chosen = positional or option
    if chosen is None and os.environ.get("PRISM_CONFIG"):
        chosen = Path(os.environ["PRISM_CONFIG"])
    return chosen
