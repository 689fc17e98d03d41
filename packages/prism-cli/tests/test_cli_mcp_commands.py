import json
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import cli_prewarmed as prewarmed
import pytest

CliRunner = Callable[..., subprocess.CompletedProcess[str]]


def _server() -> str:
    """The demo server's command line (from the warm parent, cli_prewarmed.py)."""
    command, args = prewarmed.command("-m", "prism.cli.demo_server", "--step-seconds", "0.01")
    return shlex.join([command, *args])


def test_mcp_tools_lists_namespaced_tools_with_a_schema_summary(run_cli: CliRunner) -> None:
    proc = run_cli("mcp", "tools", "--stdio", _server(), "--server-id", "docs")
    assert proc.returncode == 0, proc.stderr
    assert "mcp:docs:search_docs" in proc.stdout
    assert "query: string" in proc.stdout
    assert "limit?: integer" in proc.stdout


def test_mcp_tools_json_carries_the_full_schemas(run_cli: CliRunner) -> None:
    proc = run_cli("mcp", "tools", "--stdio", _server(), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    tools = {tool["name"]: tool for tool in data["tools"]}
    assert set(tools) == {
        "mcp:server:search_docs",
        "mcp:server:get_page",
        "mcp:server:build_index",
        "mcp:server:delete_index",
    }
    assert tools["mcp:server:get_page"]["parameters"]["required"] == ["slug"]


def test_mcp_call_prints_the_result_and_exits_zero(run_cli: CliRunner) -> None:
    proc = run_cli("mcp", "call", "--stdio", _server(), "get_page", "--args", '{"slug": "ledger"}')
    assert proc.returncode == 0, proc.stderr
    assert "# The run ledger" in proc.stdout


def test_mcp_call_with_bad_arguments_is_blocked_before_the_server_sees_it(
    run_cli: CliRunner, tmp_path: Path
) -> None:
    ledger = tmp_path / "call.jsonl"
    proc = run_cli(
        "mcp",
        "call",
        "--stdio",
        _server(),
        "search_docs",
        "--args",
        '{"query": 5}',
        "--ledger",
        str(ledger),
        "--json",
    )
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert data["is_error"] is True
    assert data["record"]["blocked_reason"] == "validation_failed"
    assert '"blocked_reason": "validation_failed"' in ledger.read_text(encoding="utf-8")


def test_mcp_call_honours_deny_rules(run_cli: CliRunner) -> None:
    proc = run_cli(
        "mcp",
        "call",
        "--stdio",
        _server(),
        "delete_index",
        "--deny",
        "tool:mcp:*:delete_*:execute",
    )
    assert proc.returncode == 1
    assert "blocked (permission_denied)" in proc.stdout


def test_mcp_call_only_allows_the_named_tool_by_default(run_cli: CliRunner) -> None:
    proc = run_cli(
        "mcp", "call", "--stdio", _server(), "get_page", "--args", '{"slug": "x"}', "--json"
    )
    assert proc.returncode == 1  # the server's own error result
    data = json.loads(proc.stdout)
    assert data["record"]["status"] == "error"
    assert "no page 'x'" in data["text"]


def test_a_server_that_does_not_start_is_a_clean_error(run_cli: CliRunner) -> None:
    proc = run_cli("mcp", "tools", "--stdio", "/nonexistent/server --flag", "--timeout", "5")
    assert proc.returncode == 2
    assert "did not start" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_server_that_exits_at_once_is_a_clean_error(run_cli: CliRunner) -> None:
    command = shlex.join([sys.executable, "-c", "pass"])
    proc = run_cli("mcp", "tools", "--stdio", command, "--timeout", "5")
    assert proc.returncode == 2
    assert "did not start" in proc.stderr


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/mcp", "file:///etc/passwd"])
def test_mcp_http_refuses_urls_that_are_not_http(run_cli: CliRunner, url: str) -> None:
    proc = run_cli("mcp", "tools", "--http", url)
    assert proc.returncode == 2
    assert "http(s) URL" in proc.stderr


def test_an_unreachable_http_server_is_a_clean_error(run_cli: CliRunner) -> None:
    proc = run_cli("mcp", "tools", "--http", "http://127.0.0.1:9/mcp", "--timeout", "5")
    assert proc.returncode == 2
    assert "did not start" in proc.stderr
    assert "Traceback" not in proc.stderr


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_until_listening(port: int, server: subprocess.Popen[bytes], timeout: float) -> None:
    import socket
    import time

    # The SDK's HTTP runner gives no readiness signal: try to connect, and between
    # tries wait (bounded) on the server process itself, so an early exit fails fast.
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            pass
        try:
            code = server.wait(timeout=0.1)
        except subprocess.TimeoutExpired:
            continue
        raise AssertionError(f"the HTTP demo server exited with {code}")
    raise AssertionError(f"nothing listened on 127.0.0.1:{port} within {timeout} s")


def test_mcp_tools_and_call_over_streamable_http_on_loopback(run_cli: CliRunner) -> None:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "prism.cli.demo_server", "--http", str(port), "--step-seconds", "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_until_listening(port, server, timeout=30)
        url = f"http://127.0.0.1:{port}/mcp"
        listed = run_cli("mcp", "tools", "--http", url, "--server-id", "web", "--json")
        assert listed.returncode == 0, listed.stderr
        names = {tool["name"] for tool in json.loads(listed.stdout)["tools"]}
        assert "mcp:web:build_index" in names
        called = run_cli(
            "mcp",
            "call",
            "--http",
            url,
            "--server-id",
            "web",
            "build_index",
            "--args",
            '{"pages": 2}',
        )
        assert called.returncode == 0, called.stderr
        assert "indexed 2 pages" in called.stdout
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
