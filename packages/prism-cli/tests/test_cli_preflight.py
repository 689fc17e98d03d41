"""Checks that check: `config check` refuses what `run` and `serve` refuse, in the same words.

Every message names the user's words (a flag or a prism.toml key), says each thing
once, and comes before anything is started or any connection is tried.
"""

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import cli_prewarmed as prewarmed
import pytest

CliRunner = Callable[..., subprocess.CompletedProcess[str]]

SESSION = {"turns": [{"text": "done"}]}
CLASS_NAME = re.compile(r"\b[A-Z][A-Za-z]+(Error|Spec|Rules|Config)\b[.:]")


def _write(tmp_path: Path, toml: str) -> None:
    (tmp_path / "p.toml").write_text(toml, encoding="utf-8")
    (tmp_path / "s.json").write_text(json.dumps(SESSION), encoding="utf-8")


def _one_error_line(stderr: str) -> str:
    assert stderr.count("\n") == 1, stderr
    assert stderr.startswith("prism: error: "), stderr
    assert CLASS_NAME.search(stderr) is None, stderr
    return stderr.removeprefix("prism: error: ").rstrip("\n")


BROKEN_FOR_RUN = [
    (
        '[workspace]\nroots = ["/nonexistent/x"]\n',
        "p.toml: workspace.roots[0]: must be an existing folder, got '/nonexistent/x'",
    ),
    (
        '[mcp.servers.docs]\ncommand = "no-such-program-anywhere"\n',
        "p.toml: mcp.servers.docs.command: 'no-such-program-anywhere' is not found on PATH",
    ),
    (
        '[mcp.servers.docs]\ncommand = "./missing-server.py"\n',
        "p.toml: mcp.servers.docs.command: './missing-server.py' is not an executable file",
    ),
    (
        f'[mcp.servers.docs]\ncommand = "{sys.executable}"\ncwd = "/nonexistent/y"\n',
        "p.toml: mcp.servers.docs.cwd: must be an existing folder, got '/nonexistent/y'",
    ),
    (
        '[mcp.servers.docs]\ncommand = "true"\nenv = { PATH = "/nonexistent" }\n',
        "p.toml: mcp.servers.docs.command: 'true' is not found on PATH",
    ),
    (
        '[mcp.servers.web]\nurl = "http://127.0.0.1:99999/mcp"\n',
        "p.toml: mcp.servers.web.url: must be an http:// or https:// URL with a host "
        "(and a port from 0 to 65535), got 'http://127.0.0.1:99999/mcp'",
    ),
    (
        '[mcp.servers.web]\nurl = "http:///mcp"\n',
        "p.toml: mcp.servers.web.url: must be an http:// or https:// URL with a host",
    ),
]


@pytest.mark.parametrize(("toml", "said"), BROKEN_FOR_RUN)
def test_config_check_refuses_what_run_refuses_in_the_same_words(
    run_cli: CliRunner, tmp_path: Path, toml: str, said: str
) -> None:
    _write(tmp_path, toml)
    checked = run_cli("config", "check", "p.toml")
    ran = run_cli("run", "s.json", "--config", "p.toml")
    assert checked.returncode == ran.returncode == 2, (checked.stdout, ran.stdout)
    assert _one_error_line(checked.stderr) == _one_error_line(ran.stderr)
    assert said in checked.stderr
    assert "or None" not in checked.stderr


BROKEN_FOR_SERVE = [
    (
        '[serve.auth]\ntype = "oauth"\nissuer_url = "https://a.example"\n'
        'resource_server_url = "https://b.example/mcp"\nverifier = "no_such_module:v"\n',
        "p.toml: serve.auth.verifier: cannot import 'no_such_module:v' "
        "(No module named 'no_such_module')",
    ),
    (
        '[serve.auth]\ntype = "bearer"\ntoken_env = "PRISM_TEST_TOKEN_THAT_IS_NOT_SET"\n',
        "p.toml: serve.auth: no token found in token_env or token_file",
    ),
    (
        '[serve.auth]\ntype = "bearer"\ntoken_file = "/nonexistent/tokens"\n',
        "/nonexistent/tokens: No such file or directory",
    ),
]


@pytest.mark.parametrize(("toml", "said"), BROKEN_FOR_SERVE)
def test_config_check_refuses_what_serve_refuses_in_the_same_words(
    run_cli: CliRunner, tmp_path: Path, toml: str, said: str
) -> None:
    _write(tmp_path, toml)
    checked = run_cli("config", "check", "p.toml")
    served = run_cli("serve", "--config", "p.toml", "--http", "127.0.0.1:0")
    assert checked.returncode == served.returncode == 2, (checked.stdout, served.stdout)
    assert _one_error_line(checked.stderr) == _one_error_line(served.stderr)
    assert said in checked.stderr
    # Each thing said once: the file and the key appear one time.
    assert checked.stderr.count("p.toml") <= 1
    assert checked.stderr.count("serve.auth") <= 1


def test_config_check_refuses_an_approver_command_that_is_not_found(
    run_cli: CliRunner, tmp_path: Path
) -> None:
    _write(tmp_path, '[serve]\napprover = "command"\napprove_command = ["no-such-approver-here"]\n')
    checked = run_cli("config", "check", "p.toml")
    assert checked.returncode == 2
    assert _one_error_line(checked.stderr) == (
        "p.toml: serve.approve_command: 'no-such-approver-here' is not found "
        "(an executable file, or a program on PATH)"
    )


def test_a_config_check_passes_is_one_run_and_serve_accept(
    run_cli: CliRunner, tmp_path: Path
) -> None:
    (tmp_path / "repo").mkdir()
    _write(
        tmp_path,
        '[workspace]\nroots = ["repo"]\nsandbox = "none"\n'
        "[mcp.servers.docs]\n" + prewarmed.toml_command("-m", "prism.cli.demo_server"),
    )
    checked = run_cli("config", "check", "p.toml")
    assert checked.returncode == 0, checked.stderr
    ran = run_cli("run", "s.json", "--config", "p.toml")
    assert ran.returncode == 0, ran.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--model", "nope"],
            "--model must be PROVIDER:MODEL with PROVIDER one of openai, openai-responses, "
            "anthropic (for example openai:gpt-4.1), got 'nope'",
        ),
        (["--model", "openai:"], "--model must be PROVIDER:MODEL"),
        (["--model", "mistral:large"], "--model must be PROVIDER:MODEL"),
        (
            ["--model", "openai:gpt-4.1", "--base-url", "not-a-url"],
            "--base-url must be an http:// or https:// URL with a host "
            "(for example http://127.0.0.1:8000/v1), got 'not-a-url'",
        ),
        (
            ["--model", "openai:gpt-4.1", "--base-url", "http://127.0.0.1:70000/v1"],
            "--base-url has a port that is not a number from 0 to 65535",
        ),
        (["--base-url", "http://127.0.0.1:8000/v1"], "--base-url applies only with --model"),
    ],
)
def test_model_flags_are_refused_before_anything_starts(
    run_cli: CliRunner, tmp_path: Path, args: list[str], said: str
) -> None:
    _write(tmp_path, '[mcp.servers.docs]\ncommand = "no-such-program-anywhere"\n')
    proc = run_cli("run", "a task", "--config", "p.toml", *args)
    assert proc.returncode == 2
    line = _one_error_line(proc.stderr)
    assert line.startswith(said), line  # the flag, not the config's broken server
    assert "ModelSpec" not in line
    assert "api_key=" not in line


@pytest.mark.parametrize(
    ("model", "variable"),
    [("openai:gpt-4.1", "OPENAI_API_KEY"), ("anthropic:claude-x", "ANTHROPIC_API_KEY")],
)
def test_a_missing_key_names_the_variable_and_no_python_argument(
    run_cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str, variable: str
) -> None:
    monkeypatch.delenv(variable, raising=False)
    proc = run_cli("chat", "--model", model)
    assert proc.returncode == 2
    assert _one_error_line(proc.stderr) == (
        f"--model {model}: no API key: set {variable} in the environment "
        "(or give --base-url for a server that needs none)"
    )


def test_a_server_that_does_not_start_is_named_once(run_cli: CliRunner, tmp_path: Path) -> None:
    _write(
        tmp_path,
        f'[mcp.servers.docs]\ncommand = "{sys.executable}"\nargs = ["-c", "raise SystemExit(3)"]\n'
        "connect_timeout_s = 20\n[workspace]\ncoding_tools = false\n",
    )
    proc = run_cli("run", "s.json", "--config", "p.toml")
    assert proc.returncode == 2
    line = _one_error_line(proc.stderr)
    assert line.startswith("MCP server 'docs' did not start: "), line
    assert line.count("docs") == 1, line
