"""``--help`` everywhere, usage errors, version: in-process through ``prism.cli.main``."""

import tomllib
from pathlib import Path

import pytest

from prism.cli import main

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
def test_every_command_has_help(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*command, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Usage: prism")
    assert "-h, --help" in out


def test_version_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    # The version of the installed distribution (prismgate-cli), the one its pyproject names.
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    declared = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]
    assert capsys.readouterr().out == f"prism {declared}\n"


def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explode"]) == 2
    assert "No such command" in capsys.readouterr().err


def test_mcp_commands_need_exactly_one_server(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mcp", "tools"]) == 2
    assert "exactly one of --stdio or --http" in capsys.readouterr().err


def test_mcp_call_rejects_arguments_that_are_not_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["mcp", "call", "--stdio", "true", "x", "--args", "{nope"]) == 2
    assert "--args" in capsys.readouterr().err


def test_broken_stdio_quoting_is_a_clean_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mcp", "tools", "--stdio", 'python "unclosed']) == 2
    assert "No closing quotation" in capsys.readouterr().err


def test_the_console_script_entry_point_works_as_a_subprocess() -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "prism.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0
    assert "prism demo" in proc.stdout


def test_python_dash_m_runs_the_same_main(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import runpy
    import sys

    monkeypatch.setattr(sys, "argv", ["prism", "--version"])
    with pytest.raises(SystemExit) as info:
        runpy.run_module("prism.cli", run_name="__main__")
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith("prism ")
