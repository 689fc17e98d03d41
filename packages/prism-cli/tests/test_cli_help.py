import subprocess
from collections.abc import Callable

import pytest

CliRunner = Callable[..., subprocess.CompletedProcess[str]]


COMMANDS = [
    [],
    ["demo"],
    ["run"],
    ["mcp"],
    ["mcp", "tools"],
    ["mcp", "call"],
    ["ledger"],
    ["ledger", "show"],
    ["config"],
    ["config", "check"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "prism")
def test_every_command_has_help(run_cli: CliRunner, command: list[str]) -> None:
    proc = run_cli(*command, "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Usage: prism")


def test_version_is_printed(run_cli: CliRunner) -> None:
    proc = run_cli("--version")
    assert proc.returncode == 0
    assert proc.stdout.startswith("prism ")


def test_unknown_command_is_a_usage_error(run_cli: CliRunner) -> None:
    proc = run_cli("explode")
    assert proc.returncode == 2
    assert "No such command" in proc.stderr


def test_mcp_commands_need_exactly_one_server(run_cli: CliRunner) -> None:
    proc = run_cli("mcp", "tools")
    assert proc.returncode == 2
    assert "exactly one of --stdio or --http" in proc.stderr


def test_mcp_call_rejects_arguments_that_are_not_json(run_cli: CliRunner) -> None:
    proc = run_cli("mcp", "call", "--stdio", "true", "x", "--args", "{nope")
    assert proc.returncode == 2
    assert "--args" in proc.stderr
