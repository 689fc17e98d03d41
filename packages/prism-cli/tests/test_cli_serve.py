"""``prism serve``: the configured tools behind the gates, for any MCP host (stdio and HTTP)."""

from __future__ import annotations

import functools
import json
import os
import sys
from typing import TYPE_CHECKING

import mcp_types as types
import trio
from mcp import Client, StdioServerParameters

if TYPE_CHECKING:
    from pathlib import Path

    from conftest import CliRunner


def _config(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "readme.txt").write_text("served by prism\n", encoding="utf-8")
    config = tmp_path / "prism.toml"
    config.write_text(
        f"""
[workspace]
roots = ["ws"]
sandbox = "none"

[mcp.servers.docs]
command = {json.dumps(sys.executable)}
args = ["-m", "prism.cli.demo_server", "--step-seconds", "0.01"]
call_timeout_s = 10

[permissions]
deny = ["tool:mcp:docs:delete_*:execute"]
""",
        encoding="utf-8",
    )
    return config


def _text(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUTF8"] = "1"
    return env


async def test_serve_over_stdio_offers_coding_and_bridged_tools(tmp_path: Path) -> None:
    config = _config(tmp_path)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "prism.cli", "serve", "--config", str(config), "--ledger", "calls.jsonl"],
        cwd=str(tmp_path),
        env=_env(),
    )
    async with Client(params) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        read = await client.call_tool("read", {"path": "readme.txt"})
        search = await client.call_tool("mcp__docs__search_docs", {"query": "gates"})
        refused = await client.call_tool("mcp__docs__delete_index", {})
    assert {"read", "write", "edit", "shell", "mcp__docs__search_docs"} <= names
    assert "served by prism" in _text(read)
    assert not search.is_error
    assert refused.is_error
    assert "permission" in _text(refused).lower()
    records = [
        json.loads(line)
        for line in (tmp_path / "calls.jsonl").read_text(encoding="utf-8").splitlines()
        if '"call_id"' in line
    ]
    assert [r["tool_name"] for r in records] == [
        "read",
        "mcp:docs:search_docs",
        "mcp:docs:delete_index",
    ]
    assert all(r["call_id"].startswith("stdio/") for r in records)


async def test_serve_over_http_on_loopback(tmp_path: Path) -> None:
    config = _config(tmp_path)
    argv = [sys.executable, "-m", "prism.cli", "serve", "--config", str(config)]
    argv += ["--http", "127.0.0.1:0"]
    async with trio.open_nursery() as nursery:
        run = functools.partial(
            trio.run_process, argv, cwd=tmp_path, env=_env(), stdin=None, stderr=-1, check=False
        )
        proc = await nursery.start(run)
        assert proc.stderr is not None
        seen = b""
        with trio.fail_after(60):
            while b"MCP endpoint " not in seen or not seen.rstrip(b" ").endswith(b"\n"):
                chunk = await proc.stderr.receive_some(4096)
                assert chunk, seen.decode(errors="replace")
                seen += chunk
        line = next(x for x in seen.decode().splitlines() if "MCP endpoint " in x)
        url = line.split("MCP endpoint ", 1)[1].strip()
        assert url.startswith("http://127.0.0.1:")
        async with Client(url) as client:
            result = await client.call_tool("read", {"path": "readme.txt"})
        assert "served by prism" in _text(result)
        proc.terminate()


def test_serve_refuses_a_public_bind_without_a_token(tmp_path: Path, run_cli: CliRunner) -> None:
    config = _config(tmp_path)
    proc = run_cli("serve", "--config", str(config), "--http", "0.0.0.0:8765")
    assert proc.returncode == 2
    assert "without auth" in proc.stderr


def test_serve_rejects_a_bad_http_address(tmp_path: Path, run_cli: CliRunner) -> None:
    config = _config(tmp_path)
    proc = run_cli("serve", "--config", str(config), "--http", "localhost")
    assert proc.returncode == 2
    assert "HOST:PORT" in proc.stderr


async def test_serve_asks_the_approve_command_when_the_host_cannot_answer(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path)
    judge = "import json,sys; a=json.load(sys.stdin); sys.exit('ok.txt' not in a['command'])"
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "prism.cli",
            "serve",
            "--config",
            str(config),
            "--approve-command",
            f"{sys.executable} -c {json.dumps(judge)}",
        ],
        cwd=str(tmp_path),
        env=_env(),
    )
    async with Client(params) as client:
        approved = await client.call_tool("shell", {"command": "touch ok.txt"})
        refused = await client.call_tool("shell", {"command": "touch other.txt"})
    assert not approved.is_error, _text(approved)
    assert (tmp_path / "ws" / "ok.txt").exists()
    assert refused.is_error
    assert not (tmp_path / "ws" / "other.txt").exists()
