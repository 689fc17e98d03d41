"""A hostile MCP server cannot drive the terminal through ``prism mcp``'s output."""

import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path

import cli_prewarmed as prewarmed
import pytest

CliRunner = Callable[..., subprocess.CompletedProcess[str]]


def _server() -> str:
    """The hostile server's command line (from the warm parent, cli_prewarmed.py)."""
    command, args = prewarmed.command(Path(__file__).with_name("hostile_mcp_server.py"))
    return shlex.join([command, *args])


FORBIDDEN = ["\x1b", "\x07", "\u202e"]


@pytest.mark.parametrize(
    "args",
    [["mcp", "tools", "--stdio"], ["mcp", "call", "--stdio", "lure"]],
    ids=["tools", "call"],
)
def test_control_characters_from_a_server_are_shown_escaped(
    run_cli: CliRunner, args: list[str]
) -> None:
    proc = run_cli(*args[:3], _server(), *args[3:])
    assert proc.returncode == 0, proc.stderr
    for char in FORBIDDEN:
        assert char not in proc.stdout, repr(char)
    assert "\\x1b" in proc.stdout  # visible, not executed


def test_markup_from_a_server_is_printed_literally(run_cli: CliRunner) -> None:
    proc = run_cli("mcp", "call", "--stdio", _server(), "lure")
    assert proc.returncode == 0, proc.stderr
    assert "[link=file:///etc/passwd]click[/link]" in proc.stdout
