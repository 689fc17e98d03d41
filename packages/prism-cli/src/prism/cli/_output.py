"""What every command shares for output: the console, JSON on stdout, click settings."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console

__all__ = ["CONTEXT", "config_option", "console", "emit_json", "ledger_option", "write_stdout"]

CONTEXT: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
"""click context settings of every command."""


def config_option(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--config FILE``: ``what`` it holds; without it ./prism.toml, else the defaults."""
    return click.option(
        "--config",
        "config_file",
        type=click.Path(dir_okay=False, path_type=Path),
        help=f"{what} (default: ./prism.toml when there is one, else the defaults).",
    )


def ledger_option(help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--ledger FILE``, a ledger path."""
    return click.option(
        "--ledger",
        "ledger_file",
        type=click.Path(dir_okay=False, path_type=Path),
        help=help_text,
    )


def console(*, json_mode: bool = False) -> Console:
    """A console for human output (stderr under ``--json``: stdout carries the document)."""
    from rich.console import Console

    out = Console(stderr=json_mode, highlight=False, soft_wrap=False)
    if not out.is_terminal and "COLUMNS" not in os.environ:
        # Pipes and CI logs have no width; 80 columns would fold every table.
        out.width = 140
    return out


def emit_json(value: object) -> None:
    """Print ``value`` as one JSON document on stdout."""
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")


def write_stdout(text: str) -> None:
    """Write ``text`` to stdout at once (questions, prompts and streamed model text)."""
    sys.stdout.write(text)
    sys.stdout.flush()
