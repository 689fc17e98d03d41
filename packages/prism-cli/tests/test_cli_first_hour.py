"""What a new user meets first: no prism.toml, typos in files and flags, tool names.

Local files are checked before anything heavy is imported; every config error
names the file and the dotted key; argument mistakes are usage errors (exit 2).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from typing import TYPE_CHECKING

import cli_prewarmed as prewarmed
import pytest

if TYPE_CHECKING:
    from pathlib import Path

    from conftest import CliRunner


def _demo_server() -> str:
    """The demo server's command line (from the warm parent, cli_prewarmed.py)."""
    command, args = prewarmed.command("-m", "prism.cli.demo_server")
    return shlex.join([command, *args])


HEAVY = ("mcp", "prism.mcp", "openai", "anthropic", "httpx", "prism.gateway", "prism.providers")


def _session(tmp_path: Path, calls: list[dict[str, object]]) -> None:
    (tmp_path / "session.json").write_text(json.dumps([{"tool_calls": calls}]), encoding="utf-8")


def test_run_without_a_prism_toml_uses_the_defaults(
    run_cli: CliRunner, tmp_path: Path, state_home: Path
) -> None:
    (tmp_path / "notes.txt").write_text("hello\n", encoding="utf-8")
    _session(tmp_path, [{"id": "r", "name": "read", "arguments": {"path": "notes.txt"}}])
    proc = run_cli("run", "session.json", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [(c["call_id"], c["status"]) for c in report["calls"]] == [("r", "ok")]
    assert "hint" not in proc.stderr  # nothing was missing: no hint
    # The default ledger is kept in the state folder, outside the agent's root.
    assert not (tmp_path / "prism-ledger.jsonl").exists()
    assert report["ledger"] == str(state_home / "prism" / "prism-ledger.jsonl")
    assert (state_home / "prism" / "prism-ledger.jsonl").is_file()


def test_without_a_prism_toml_a_missing_tool_gets_a_hint_about_config(
    run_cli: CliRunner, tmp_path: Path
) -> None:
    _session(tmp_path, [{"id": "m", "name": "mcp:docs:search_docs", "arguments": {}}])
    proc = run_cli("run", "session.json")
    assert proc.returncode == 0, proc.stderr
    assert "no prism.toml here" in proc.stderr
    assert "--config FILE" in proc.stderr


def test_a_config_named_on_the_command_line_must_exist(run_cli: CliRunner, tmp_path: Path) -> None:
    _session(tmp_path, [])
    proc = run_cli("run", "session.json", "--config", "other.toml")
    assert proc.returncode == 2
    assert "other.toml: cannot read it" in proc.stderr


def test_a_root_that_is_not_a_folder_names_the_file_and_the_key(
    run_cli: CliRunner, tmp_path: Path
) -> None:
    (tmp_path / "prism.toml").write_text('[workspace]\nroots = [".", "gone"]\n', "utf-8")
    _session(tmp_path, [{"name": "read", "arguments": {"path": "x"}}])
    proc = run_cli("run", "session.json")
    assert proc.returncode == 2
    assert "prism.toml: workspace.roots[1]: must be an existing folder" in proc.stderr
    assert "gone" in proc.stderr


def test_a_bad_server_id_is_a_usage_error_not_a_start_failure(run_cli: CliRunner) -> None:
    proc = run_cli("mcp", "tools", "--stdio", _demo_server(), "--server-id", "a b")
    assert proc.returncode == 2
    assert "--server-id" in proc.stderr
    assert "did not start" not in proc.stderr


def test_a_tool_name_with_another_servers_prefix_gets_a_hint(run_cli: CliRunner) -> None:
    proc = run_cli(
        "mcp", "call", "--stdio", _demo_server(), "mcp:docs:search_docs", "--args", '{"query": "x"}'
    )
    assert proc.returncode == 1
    assert "unknown_tool" in proc.stdout
    assert "pass --server-id docs, or call 'search_docs'" in proc.stderr


def test_the_right_prefix_needs_no_hint(run_cli: CliRunner) -> None:
    proc = run_cli(
        "mcp", "call", "--stdio", _demo_server(), "--server-id", "docs", "mcp:docs:search_docs",
        "--args", '{"query": "ledger"}',
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "hint" not in proc.stderr


def _loaded_after(commands: list[list[str]], cwd: Path) -> tuple[list[int], list[str]]:
    """Run ``prism ARGS`` for each ARGS in turn in one fresh interpreter; the exit codes
    and the heavy modules loaded."""
    probe = (
        "import json, sys\n"
        "from prism.cli import main\n"
        f"codes = [main(args) for args in {commands!r}]\n"
        f"print(json.dumps([codes, [m for m in {HEAVY!r} if m in sys.modules]]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    codes, loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    return codes, loaded


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["run", "missing.json"],
        ["run", "--help"],
        ["chat", "--model", "openai:x", "--config", "missing.toml"],
        ["serve", "--config", "missing.toml"],
        ["mcp", "call", "--stdio", "x", "--server-id", "a b", "t"],
        ["config", "check", "missing.toml"],
    ],
    ids=lambda a: " ".join(a),
)
def test_help_and_file_errors_import_nothing_heavy(args: list[str], tmp_path: Path) -> None:
    codes, loaded = _loaded_after([args], tmp_path)
    assert codes[0] in (0, 2)
    assert loaded == []


def test_the_policy_and_config_checks_import_nothing_heavy(tmp_path: Path) -> None:
    """`prism policy check` and `prism config check` judge a configuration that names
    MCP servers without importing the MCP SDK (a CPU-second at each start) or a model's."""
    (tmp_path / "prism.toml").write_text(
        '[workspace]\nsandbox = "none"\n\n'
        '[mcp.servers.local]\ncommand = "python3"\n\n'
        '[mcp.servers.web]\nurl = "http://127.0.0.1:1/mcp"\n',
        encoding="utf-8",
    )
    checks = [
        ["policy", "check", "--json", "ls -la | grep py"],
        ["policy", "check", "--deny", "make *", "make test"],
        ["config", "check", "prism.toml"],
    ]
    codes, loaded = _loaded_after(checks, tmp_path)
    assert codes == [0, 1, 0]
    assert loaded == []


@pytest.mark.parametrize(
    ("args", "flag", "problem"),
    [
        (["--http", "http://127.0.0.1:1/mcp", "--header", "no-colon"], "--header", "NAME:VALUE"),
        (["--http", "http://127.0.0.1:1/mcp", "--header", ":v"], "--header", "NAME:VALUE"),
        (["--stdio", "x", "--header", "A: b"], "--header", "only --http takes headers"),
        (["--stdio", ""], "--stdio", "needs a command"),
        (["--stdio", "x", "--http", "http://127.0.0.1:1/mcp"], "", "exactly one of"),
    ],
    ids=["header without colon", "header without name", "header on stdio", "empty", "both"],
)
def test_mcp_option_mistakes_are_usage_errors(
    run_cli: CliRunner, args: list[str], flag: str, problem: str
) -> None:
    proc = run_cli("mcp", "tools", *args)
    assert proc.returncode == 2
    assert flag in proc.stderr
    assert problem in proc.stderr
    assert "did not start" not in proc.stderr
