"""``prism serve``: the configured tools behind the gates, for any MCP host (stdio and HTTP)."""

from __future__ import annotations

import functools
import json
import os
import sys
from typing import TYPE_CHECKING

import cli_prewarmed as prewarmed
import httpx2
import mcp_types as types
import pytest
import trio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

if TYPE_CHECKING:
    from pathlib import Path

    from conftest import CliRunner, ServeConfig


def _text(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUTF8"] = "1"
    return env


def _serve(*args: str) -> tuple[str, list[str]]:
    """``prism serve ARGS`` from the warm parent (cli_prewarmed.py): these tests are about
    what it serves; test_cli_serve_signals starts it as a process of its own."""
    return prewarmed.command("-m", "prism.cli", "serve", *args)


class Changes:
    """Tool-list changes the gateway announces (its MCP servers start in the background)."""

    def __init__(self) -> None:
        self.event = trio.Event()

    async def handle(self, message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.event.set()

    async def wait_for(self, client: Client, name: str) -> set[str]:
        """The tool names once ``name`` is among them (listed again at each change)."""
        with trio.fail_after(60):
            while True:
                self.event = trio.Event()
                names = {tool.name for tool in (await client.list_tools()).tools}
                if name in names:
                    return names
                await self.event.wait()


async def test_serve_over_stdio_offers_coding_and_bridged_tools(
    tmp_path: Path, serve_config: ServeConfig
) -> None:
    config = serve_config(readme="served by prism", step_seconds="0.01")
    command, args = _serve("--config", str(config), "--ledger", "calls.jsonl")
    params = StdioServerParameters(command=command, args=args, cwd=str(tmp_path), env=_env())
    changed = Changes()
    async with Client(params, message_handler=changed.handle, mode="legacy") as client:
        names = await changed.wait_for(client, "mcp__docs__search_docs")
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


async def _serve_http(
    nursery: trio.Nursery, tmp_path: Path, address: str, env: dict[str, str] | None = None
) -> tuple[trio.Process, str]:
    """Start ``prism serve --http ADDRESS`` in ``tmp_path``; the process and its endpoint URL."""
    command, args = _serve("--http", address)
    argv = [command, *args]
    run = functools.partial(
        trio.run_process, argv, cwd=tmp_path, env=env or _env(), stdin=None, stderr=-1, check=False
    )
    proc: trio.Process = await nursery.start(run)
    assert proc.stderr is not None
    seen = b""
    with trio.fail_after(60):
        while b"MCP endpoint " not in seen or not seen.rstrip(b" ").endswith(b"\n"):
            chunk = await proc.stderr.receive_some(4096)
            assert chunk, seen.decode(errors="replace")
            seen += chunk
    line = next(x for x in seen.decode().splitlines() if "MCP endpoint " in x)
    return proc, line.split("MCP endpoint ", 1)[1].strip()


async def test_serve_over_http_on_loopback(tmp_path: Path, serve_config: ServeConfig) -> None:
    serve_config(readme="served by prism", docs_server=False)
    async with trio.open_nursery() as nursery:
        proc, url = await _serve_http(nursery, tmp_path, "127.0.0.1:0")
        assert url.startswith("http://127.0.0.1:")
        async with Client(url) as client:
            result = await client.call_tool("read", {"path": "readme.txt"})
        assert "served by prism" in _text(result)
        proc.terminate()


_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
_ACCEPT = "application/json, text/event-stream"


async def test_serve_takes_bearer_tokens_from_the_serve_table(
    tmp_path: Path, serve_config: ServeConfig
) -> None:
    config = serve_config(readme="served by prism", docs_server=False)
    with config.open("a", encoding="utf-8") as file:
        file.write('\n[serve.auth]\ntype = "bearer"\ntoken_env = "MY_GATEWAY_TOKEN"\n')
    token = "a-token-long-enough-for-the-gateway"
    async with trio.open_nursery() as nursery:
        proc, url = await _serve_http(
            nursery, tmp_path, "127.0.0.1:0", {**_env(), "MY_GATEWAY_TOKEN": token}
        )
        async with httpx2.AsyncClient() as http:
            refused = await http.post(url, json=_LIST, headers={"accept": _ACCEPT})
        async with (
            httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            result = await client.call_tool("read", {"path": "readme.txt"})
        proc.terminate()
    assert refused.status_code == 401
    assert "served by prism" in _text(result)


VERIFIER = """
from mcp.server.auth.provider import AccessToken


class Verifier:
    async def verify_token(self, token):
        if token != "good-token":
            return None
        return AccessToken(token=token, client_id="ide-1", scopes=["mcp"], resource=RESOURCE)
"""


async def test_serve_is_an_oauth_resource_server_from_the_serve_table(
    tmp_path: Path, serve_config: ServeConfig
) -> None:
    config = serve_config(readme="served by prism", docs_server=False)
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    resource = f"http://127.0.0.1:{port}/mcp"
    (tmp_path / "my_verifier.py").write_text(f"RESOURCE = {resource!r}\n{VERIFIER}", "utf-8")
    with config.open("a", encoding="utf-8") as file:
        file.write(
            f"""
[serve.auth]
type = "oauth"
issuer_url = "https://auth.example"
resource_server_url = "{resource}"
required_scopes = ["mcp"]
verifier = "my_verifier:Verifier"
"""
        )
    env = {
        **_env(),
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
    }
    async with trio.open_nursery() as nursery:
        proc, url = await _serve_http(nursery, tmp_path, f"127.0.0.1:{port}", env)
        async with httpx2.AsyncClient() as http:
            refused = await http.post(
                url, json=_LIST, headers={"accept": _ACCEPT, "authorization": "Bearer bad"}
            )
        async with (
            httpx2.AsyncClient(headers={"authorization": "Bearer good-token"}) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            result = await client.call_tool("read", {"path": "readme.txt"})
        proc.terminate()
    assert refused.status_code == 401
    assert "resource_metadata" in refused.headers["www-authenticate"]
    assert "served by prism" in _text(result)


def test_an_oauth_verifier_that_cannot_be_imported_names_the_key(
    tmp_path: Path, run_cli: CliRunner, serve_config: ServeConfig
) -> None:
    config = serve_config(readme="served by prism", step_seconds="0.01")
    with config.open("a", encoding="utf-8") as file:
        file.write(
            '\n[serve.auth]\ntype = "oauth"\nissuer_url = "https://a.example"\n'
            'resource_server_url = "http://127.0.0.1:1/mcp"\nverifier = "no_such_mod:V"\n'
        )
    proc = run_cli("serve", "--config", str(config), "--http", "127.0.0.1:0")
    assert proc.returncode == 2
    assert "prism.toml: serve.auth.verifier: cannot import 'no_such_mod:V'" in proc.stderr


def test_a_bearer_table_with_no_token_set_says_so(
    tmp_path: Path, run_cli: CliRunner, serve_config: ServeConfig
) -> None:
    config = serve_config(readme="served by prism", step_seconds="0.01")
    with config.open("a", encoding="utf-8") as file:
        file.write('\n[serve.auth]\ntype = "bearer"\ntoken_env = "UNSET_PRISM_TOKEN_VAR"\n')
    proc = run_cli("serve", "--config", str(config), "--http", "127.0.0.1:0")
    assert proc.returncode == 2
    assert "prism.toml: serve.auth: no token found" in proc.stderr


def test_serve_refuses_a_public_bind_without_a_token(
    tmp_path: Path, run_cli: CliRunner, serve_config: ServeConfig
) -> None:
    config = serve_config(readme="served by prism", step_seconds="0.01")
    proc = run_cli("serve", "--config", str(config), "--http", "0.0.0.0:8765")
    assert proc.returncode == 2
    assert "without auth" in proc.stderr


def test_serve_rejects_a_bad_http_address(
    tmp_path: Path, run_cli: CliRunner, serve_config: ServeConfig
) -> None:
    config = serve_config(readme="served by prism", step_seconds="0.01")
    proc = run_cli("serve", "--config", str(config), "--http", "localhost")
    assert proc.returncode == 2
    assert "HOST:PORT" in proc.stderr


JUDGE = "import json,sys; a=json.load(sys.stdin); sys.exit('ok.txt' not in a['command'])"


@pytest.mark.parametrize("where", ["flag", "serve table"])
async def test_serve_asks_the_approve_command_when_the_host_cannot_answer(
    tmp_path: Path, where: str, serve_config: ServeConfig
) -> None:
    """--approve-command, or [serve] approver = "command" in prism.toml."""
    config = serve_config(readme="served by prism", docs_server=False)
    flags: list[str] = []
    if where == "flag":
        flags += ["--config", str(config), "--approve-command"]
        flags.append(f"{sys.executable} -c {json.dumps(JUDGE)}")
    else:
        with config.open("a", encoding="utf-8") as file:
            file.write(
                f'\n[serve]\napprover = "command"\n'
                f"approve_command = {json.dumps([sys.executable, '-c', JUDGE])}\n"
            )
    command, args = _serve(*flags)
    params = StdioServerParameters(command=command, args=args, cwd=str(tmp_path), env=_env())
    async with Client(params) as client:
        approved = await client.call_tool("shell", {"command": "touch ok.txt"})
        refused = await client.call_tool("shell", {"command": "touch other.txt"})
    assert not approved.is_error, _text(approved)
    assert (tmp_path / "ws" / "ok.txt").exists()
    assert refused.is_error
    assert not (tmp_path / "ws" / "other.txt").exists()


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        (["--token-file", "missing.txt"], "--token-file: missing.txt:"),
        (["--token-file", "short.txt"], "bearer tokens: "),
        ('[serve.auth]\ntype = "bearer"\ntoken_file = "short.txt"\n', "bearer tokens: "),
        (
            '[serve.auth]\ntype = "bearer"\ntoken_file = "missing.txt"\n',
            "serve.auth.token_file: ",
        ),
        (
            '[serve.auth]\ntype = "oauth"\nissuer_url = "https://a.example"\n'
            'resource_server_url = "http://127.0.0.1:1/mcp"\nverifier = "json:__name__"\n',
            "prism.toml: serve.auth: ",
        ),
    ],
    ids=["missing token file", "short token", "short token in the table", "missing table file",
         "not a verifier"],
)  # fmt: skip
def test_serve_auth_mistakes_are_reported_before_serving(
    tmp_path: Path,
    run_cli: CliRunner,
    setting: list[str] | str,
    expected: str,
    serve_config: ServeConfig,
) -> None:
    config = serve_config(readme="served by prism", step_seconds="0.01")
    (tmp_path / "short.txt").write_text("short\n", encoding="utf-8")
    flags = setting if isinstance(setting, list) else []
    if isinstance(setting, str):
        with config.open("a", encoding="utf-8") as file:
            file.write("\n" + setting)
    proc = run_cli("serve", "--config", str(config), "--http", "127.0.0.1:0", *flags)
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("command", "problem"), [('judge "unclosed', "No closing quotation"), ("", "needs a command")]
)
def test_a_bad_approve_command_is_a_usage_error(
    tmp_path: Path, run_cli: CliRunner, command: str, problem: str, serve_config: ServeConfig
) -> None:
    proc = run_cli(
        "serve",
        "--config",
        str(serve_config(readme="served by prism", step_seconds="0.01")),
        "--approve-command",
        command,
    )
    assert proc.returncode == 2
    assert "--approve-command" in proc.stderr
    assert problem in proc.stderr


class Stderr:
    """What ``prism serve`` writes to stderr, read from a pipe as it comes."""

    def __init__(self, stream: trio.lowlevel.FdStream) -> None:
        self.stream = stream
        self.text = ""

    async def wait_for(self, text: str) -> None:
        with trio.fail_after(60):
            while text not in self.text:
                chunk = await self.stream.receive_some()
                assert chunk, self.text
                self.text += chunk.decode(errors="replace")


_BAD_SERVER = f"""
[mcp.servers.bad]
command = {json.dumps(sys.executable)}
args = ["-c", "import sys; print('no config for me', file=sys.stderr); sys.exit(4)"]
"""


@pytest.mark.parametrize("how", ["positional", "PRISM_CONFIG"])
async def test_serve_serves_while_a_server_fails_to_start_and_logs_it(
    tmp_path: Path, serve_config: ServeConfig, how: str
) -> None:
    """One MCP server that does not start never takes the gateway down (nor the config flag)."""
    config = serve_config(readme="served by prism", extra=_BAD_SERVER)
    env = _env()
    flags: list[str] = []
    if how == "positional":
        flags.append(str(config))
    else:
        env["PRISM_CONFIG"] = str(config)
    command, args = _serve(*flags)
    params = StdioServerParameters(command=command, args=args, cwd=str(tmp_path / "ws"), env=env)
    changed = Changes()
    read_end, write_end = os.pipe()
    with os.fdopen(write_end, "w") as errlog:
        stderr = Stderr(trio.lowlevel.FdStream(read_end))
        async with Client(
            stdio_client(params, errlog=errlog), message_handler=changed.handle, mode="legacy"
        ) as client:
            await changed.wait_for(client, "mcp__docs__search_docs")
            search = await client.call_tool("mcp__docs__search_docs", {"query": "gates"})
            read = await client.call_tool("read", {"path": "readme.txt"})
            await stderr.wait_for("MCP server 'bad' did not start")
            await stderr.wait_for("MCP server 'docs' is up")
            failed = await client.call_tool("mcp__bad__anything", {})
    logged = stderr.text
    await stderr.stream.aclose()
    assert not search.is_error
    assert "served by prism" in _text(read)
    assert "MCP server 'bad' is unavailable" in _text(failed)
    assert "exit status 4" in _text(failed)
    assert "no config for me" in _text(failed)
    assert "prism serve: MCP server 'bad' did not start" in logged
    assert "prism serve: MCP server 'docs' is up" in logged


def test_serve_exits_when_a_required_server_does_not_start(
    run_cli: CliRunner, serve_config: ServeConfig
) -> None:
    config = serve_config(readme="served by prism", extra=_BAD_SERVER + "required = true\n")
    proc = run_cli("serve", str(config))
    assert proc.returncode == 2, proc.stderr
    assert "required MCP server 'bad' did not start" in proc.stderr
    assert "exit status 4" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_serve_refuses_two_different_configurations(
    run_cli: CliRunner, serve_config: ServeConfig, tmp_path: Path
) -> None:
    config = serve_config(readme="served by prism")
    proc = run_cli("serve", str(config), "--config", str(tmp_path / "other.toml"))
    assert proc.returncode == 2
    assert "two configurations given" in proc.stderr
