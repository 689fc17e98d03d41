"""What every command shares for output: the console, JSON on stdout, click settings."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["CONTEXT", "console", "emit_json", "write_stdout"]

CONTEXT: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
"""click context settings of every command."""


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
