"""The ``prism`` command line (click), and :func:`main`, its entry point.

Each command lives with its group (``_cmd_*`` modules): it parses its
arguments, calls a runner and renders what the runner returned. Nothing heavy
(the agent runtime, the MCP SDK, model SDKs) is imported before a command runs
and has checked its local files.

Exit codes: 0 done; 1 the command ran but what it ran failed (an MCP call
returned an error result, a run was aborted); 2 bad usage, a bad config or
session file, or a server that would not start.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from ._cmd_config import config, policy
from ._cmd_ledger import ledger
from ._cmd_mcp import mcp
from ._cmd_run import chat_command, demo_command, run_command
from ._cmd_serve import serve_command
from ._output import CONTEXT
from ._safe import safe_text

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["cli", "main"]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("prismgate-cli")
    except PackageNotFoundError:  # a source tree on sys.path, never installed
        return "unknown"


def _show_version(context: click.Context, _param: click.Parameter, value: bool) -> None:
    # Looked up only when asked: reading package metadata costs start-up time.
    if value and not context.resilient_parsing:
        click.echo(f"prism {_version()}")
        context.exit()


@click.group(context_settings=CONTEXT)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_show_version,
    help="Show the version and exit.",
)
def cli() -> None:
    """Prism: run tool calls through validated, permission-checked, bounded gates.

    Start with `prism demo`: a scripted agent session, no model and no network.
    """


for _command in (
    ledger,
    config,
    policy,
    run_command,
    chat_command,
    demo_command,
    mcp,
    serve_command,
):
    cli.add_command(_command)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``prism`` command with ``argv`` (default: ``sys.argv[1:]``); return the exit code.

    Usage errors and the command's own errors (bad config, bad session file, a
    server that will not start) print one line to stderr and return 2.
    """
    from prism.core import PrismError

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        outcome = cli.main(args=args, prog_name="prism", standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort:
        sys.stderr.write("prism: aborted\n")
        return 130
    except PrismError as exc:  # CliError included
        # Messages quote ledgers, servers' output and files: never raw to a terminal.
        sys.stderr.write(f"prism: error: {safe_text(str(exc))}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("prism: interrupted\n")
        return 130
    return outcome if isinstance(outcome, int) else 0
