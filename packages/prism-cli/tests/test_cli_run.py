"""End to end: ``prism run SESSION.json`` against a ``prism.toml``, in real subprocesses."""

import json
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import cli_prewarmed as prewarmed
import pytest

from prism.core.ledger import RunLedger

CliRunner = Callable[..., subprocess.CompletedProcess[str]]


def _setup(tmp_path: Path, config: str, session: object) -> None:
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    (tmp_path / "prism.toml").write_text(config, encoding="utf-8")
    (tmp_path / "session.json").write_text(json.dumps(session), encoding="utf-8")


CODING_ONLY = """
[agent]
concurrency = 2
max_tool_rounds = 4

[workspace]
roots = ["repo"]

[ledger]
path = "out/ledger.jsonl"
"""


def test_run_replays_the_session_and_writes_the_configured_ledger(
    run_cli: CliRunner, tmp_path: Path
) -> None:
    _setup(
        tmp_path,
        CODING_ONLY,
        {
            "prompt": "add a line",
            "turns": [
                {"tool_calls": [{"id": "r", "name": "read", "arguments": {"path": "notes.txt"}}]},
                {
                    "tool_calls": [
                        {
                            "id": "w",
                            "name": "write",
                            "arguments": {"path": "new.txt", "content": "gamma\n"},
                        }
                    ]
                },
                {"text": "done"},
            ],
        },
    )
    proc = run_cli("run", "session.json")
    assert proc.returncode == 0, proc.stderr
    assert "final answer: done" in proc.stdout
    ledger = tmp_path / "out" / "ledger.jsonl"
    assert f"ledger: {ledger}" in proc.stdout
    records = RunLedger.from_jsonl(ledger.read_text(encoding="utf-8")).records
    assert [(r.call_id, r.status) for r in records] == [("r", "ok"), ("w", "ok")]
    assert (tmp_path / "repo" / "new.txt").read_text(encoding="utf-8") == "gamma\n"


def test_run_json_reports_blocked_and_refused_calls(run_cli: CliRunner, tmp_path: Path) -> None:
    config = CODING_ONLY + '\n[permissions]\ndeny = ["tool:write:execute"]\n'
    _setup(
        tmp_path,
        config,
        [
            {
                "tool_calls": [
                    {"id": "u", "name": "no_such_tool", "arguments": {}},
                    {"id": "w", "name": "write", "arguments": {"path": "x", "content": "y"}},
                    {"id": "e", "name": "read", "arguments": {"path": "/etc/passwd"}},
                    {"id": "a", "name": "read", "arguments": "not an object"},
                ]
            }
        ],
    )
    proc = run_cli("run", "session.json", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    calls = {c["call_id"]: c for c in data["calls"]}
    assert calls["u"]["blocked_reason"] == "unknown_tool"
    assert calls["w"]["blocked_reason"] == "permission_denied"
    assert calls["a"]["blocked_reason"] == "invalid_arguments"
    assert calls["e"]["status"] == "error"
    assert calls["e"]["refused_by"] in {"path_escape", "execution_denied"}
    assert "root:" not in proc.stdout  # /etc/passwd was never read
    assert not (tmp_path / "repo" / "x").exists()


def test_run_in_read_only_workspace_refuses_writes(run_cli: CliRunner, tmp_path: Path) -> None:
    config = CODING_ONLY.replace('roots = ["repo"]', 'roots = ["repo"]\nread_only = true')
    _setup(
        tmp_path,
        config,
        [{"tool_calls": [{"name": "write", "arguments": {"path": "x", "content": "y"}}]}],
    )
    proc = run_cli("run", "session.json", "--json")
    assert proc.returncode == 0, proc.stderr
    call = json.loads(proc.stdout)["calls"][0]
    assert call["status"] == "error"
    assert call["refused_by"] == "execution_denied"
    assert not (tmp_path / "repo" / "x").exists()


def test_run_with_an_mcp_server_from_the_config(run_cli: CliRunner, tmp_path: Path) -> None:
    config = f"""
[workspace]
coding_tools = false

[mcp.servers.docs]
{prewarmed.toml_command("-m", "prism.cli.demo_server", "--step-seconds", "0.01")}call_timeout_s = 10

[permissions]
deny = ["tool:mcp:docs:delete_*:execute"]
"""
    _setup(
        tmp_path,
        config,
        [
            {
                "tool_calls": [
                    {"id": "s", "name": "mcp:docs:search_docs", "arguments": {"query": "ledger"}},
                    {"id": "p", "name": "mcp__docs__build_index", "arguments": {"pages": 2}},
                    {"id": "d", "name": "mcp:docs:delete_index", "arguments": {}},
                ]
            }
        ],
    )
    proc = run_cli("run", "session.json", "--json")
    assert proc.returncode == 0, proc.stderr
    calls = {c["call_id"]: c for c in json.loads(proc.stdout)["calls"]}
    assert calls["s"]["status"] == "ok"
    assert calls["s"]["tool_name"] == "mcp:docs:search_docs"
    assert calls["p"]["status"] == "ok"  # a provider alias maps back to the registry name
    assert calls["p"]["tool_name"] == "mcp:docs:build_index"
    assert calls["d"]["blocked_reason"] == "permission_denied"


def test_run_with_a_bad_config_names_the_key_and_runs_nothing(
    run_cli: CliRunner, tmp_path: Path
) -> None:
    _setup(tmp_path, "[agent]\nconcurrency = 0\n", ["hi"])
    proc = run_cli("run", "session.json")
    assert proc.returncode == 2
    assert "prism.toml: agent.concurrency: must be an integer >= 1 and <= 64, got 0" in (
        proc.stderr
    )
    assert not (tmp_path / "prism-ledger.jsonl").exists()


def test_run_with_a_bad_session_names_the_json_path(run_cli: CliRunner, tmp_path: Path) -> None:
    _setup(tmp_path, CODING_ONLY, {"turns": [{"tool_calls": [{"arguments": {}}]}]})
    proc = run_cli("run", "session.json")
    assert proc.returncode == 2
    assert "session.json: turns[0].tool_calls[0].name: is required" in proc.stderr


def test_run_with_a_server_that_will_not_start_fails_cleanly(
    run_cli: CliRunner, tmp_path: Path
) -> None:
    config = '[mcp.servers.broken]\ncommand = "/nonexistent/server"\nconnect_timeout_s = 5\n'
    _setup(tmp_path, config, ["hi"])
    proc = run_cli("run", "session.json")
    assert proc.returncode == 2
    # Found missing before anything starts (`prism config check` says the same).
    assert "mcp.servers.broken.command: '/nonexistent/server' is not an executable file" in (
        proc.stderr
    )
    assert "Traceback" not in proc.stderr


def test_run_shell_metacharacters_need_approval_and_are_refused(
    run_cli: CliRunner, tmp_path: Path
) -> None:
    marker = tmp_path / "repo" / "pwned"
    command = f"echo hi > {shlex.quote(str(marker))}"
    _setup(
        tmp_path,
        _with_sandbox("none"),  # on the host only proved-safe (read-only) commands run
        [{"tool_calls": [{"id": "s", "name": "shell", "arguments": {"command": command}}]}],
    )
    proc = run_cli("run", "session.json", "--json")
    assert proc.returncode == 0, proc.stderr
    call = json.loads(proc.stdout)["calls"][0]
    assert call["status"] == "error"
    assert call["refused_by"] == "execution_denied"
    assert not marker.exists()


def _no_bwrap_env(tmp_path: Path, cli_env: dict[str, str]) -> dict[str, str]:

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # Only the basics the shell needs, and no bwrap: bubblewrap "cannot work here".
    for tool in ("sh", "ls", "cat"):
        for folder in ("/bin", "/usr/bin"):
            if Path(folder, tool).exists():
                (bin_dir / tool).symlink_to(Path(folder, tool))
                break
    return {**cli_env, "PATH": str(bin_dir)}


def _run_in(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "prism.cli", "run", "session.json", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def _with_sandbox(mode: str) -> str:
    return CODING_ONLY.replace('roots = ["repo"]', f'roots = ["repo"]\nsandbox = "{mode}"')


SHELL_SESSION = [{"tool_calls": [{"id": "s", "name": "shell", "arguments": {"command": "ls"}}]}]


def test_sandbox_bubblewrap_fails_closed_when_it_cannot_isolate(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    _setup(
        tmp_path,
        CODING_ONLY.replace('roots = ["repo"]', 'roots = ["repo"]\nsandbox = "bubblewrap"'),
        SHELL_SESSION,
    )
    proc = _run_in(tmp_path, _no_bwrap_env(tmp_path, cli_env))
    assert proc.returncode == 2
    assert "workspace.sandbox: bubblewrap cannot isolate commands here" in proc.stderr
    assert not (tmp_path / "out" / "ledger.jsonl").exists()  # nothing ran


def test_sandbox_auto_says_when_commands_run_on_the_host(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    _setup(
        tmp_path,
        CODING_ONLY.replace('roots = ["repo"]', 'roots = ["repo"]\nsandbox = "auto"'),
        SHELL_SESSION,
    )
    proc = _run_in(tmp_path, _no_bwrap_env(tmp_path, cli_env))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    # the same meaning as open_secure_coding_tools: Landlock next, then the host
    assert report["sandbox"] in (
        "landlock (proved-safe only; bubblewrap unavailable)",
        "none (bubblewrap and landlock unavailable)",
    )
    assert report["calls"][0]["status"] == "ok"


def test_sandbox_bubblewrap_runs_the_shell_isolated_where_it_works(
    run_cli: CliRunner, tmp_path: Path
) -> None:
    import shutil

    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed (scripts/test installs it)")
    _setup(
        tmp_path,
        CODING_ONLY.replace('roots = ["repo"]', 'roots = ["repo"]\nsandbox = "bubblewrap"'),
        SHELL_SESSION,
    )
    proc = run_cli("run", "session.json", "--json")
    if proc.returncode == 2 and "cannot isolate" in proc.stderr:
        pytest.skip("bubblewrap is installed but cannot create namespaces here")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["sandbox"] == "bubblewrap"
    assert report["calls"][0]["status"] == "ok"
    assert "notes.txt" in report["calls"][0]["detail"]
