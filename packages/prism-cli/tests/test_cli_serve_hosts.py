"""MCP hosts no one here wrote, on ``prism serve``: the MCP Inspector's CLI,
LangChain's MCP adapters, and a Claude Desktop ``mcpServers`` entry.

Each host is installed the way its users get it, once, into the ignored
``.cache`` folder: the Inspector from npm, the adapters into a Python
environment of their own (they run on the MCP SDK 1.x). Without node/npm or
uv, or when the install fails, the test is skipped and says why.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp import Client, StdioServerParameters

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parents[2]
CACHE = REPO / ".cache"
INSPECTOR_VERSION = "2.12.0"
INSPECTOR = CACHE / "npm-inspector" / "node_modules" / ".bin" / "mcp-inspector"
LANGCHAIN_HOST = CACHE / "langchain-host"
LANGCHAIN_PYTHON = LANGCHAIN_HOST / "venv" / "bin" / "python"
TOKEN = "host-test-token-0123456789"

# Each host is a real program started several times: scripts/test --hosts runs these.
pytestmark = [pytest.mark.slow, pytest.mark.hosts]


@pytest.fixture(scope="session")
def inspector() -> Path:
    """The MCP Inspector (its ``--cli`` mode) from npm."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node/npm are not installed (scripts/test installs Debian's nodejs npm)")
    if not INSPECTOR.exists():
        folder = CACHE / "npm-inspector"
        folder.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["npm", "install", "--prefix", str(folder), "--no-audit", "--no-fund",
             f"@modelcontextprotocol/inspector@{INSPECTOR_VERSION}"],
            capture_output=True, timeout=600, check=False,
        )  # fmt: skip
        if done.returncode != 0 or not INSPECTOR.exists():
            pytest.skip(f"npm could not install the Inspector: {done.stderr[-500:]!r}")
    return INSPECTOR


@pytest.fixture(scope="session")
def langchain_python() -> Path:
    """A Python with langchain-mcp-adapters (and the MCP SDK 1.x it needs)."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed")
    if not LANGCHAIN_PYTHON.exists() or subprocess.run(
        [str(LANGCHAIN_PYTHON), "-c", "import langchain_mcp_adapters.client"],
        capture_output=True, check=False,
    ).returncode != 0:  # fmt: skip
        LANGCHAIN_HOST.mkdir(parents=True, exist_ok=True)
        for argv in (
            [uv, "venv", "-q", "--allow-existing", str(LANGCHAIN_HOST / "venv"),
             "-p", sys.executable],
            [uv, "pip", "install", "-q", "--python", str(LANGCHAIN_PYTHON),
             "langchain-mcp-adapters==0.3.1", "mcp>=1.20,<2"],
        ):  # fmt: skip
            done = subprocess.run(argv, capture_output=True, timeout=600, check=False)
            if done.returncode != 0:
                pytest.skip(f"could not install langchain-mcp-adapters: {done.stderr[-500:]!r}")
    return LANGCHAIN_PYTHON


@pytest.fixture
def config(tmp_path: Path) -> Path:
    (tmp_path / "notes.txt").write_text("hello from the workspace\n", encoding="utf-8")
    path = tmp_path / "prism.toml"
    path.write_text('[workspace]\nroots = ["."]\nsandbox = "none"\n', encoding="utf-8")
    return path


async def _run(argv: list[str], cwd: Path, *, status: int = 0) -> str:
    with trio.fail_after(180):
        done = await trio.run_process(
            argv, cwd=cwd, capture_stdout=True, capture_stderr=True, check=False
        )
    out = done.stdout.decode()
    assert done.returncode == status, (out[-1500:], done.stderr.decode()[-1500:])
    return out


def _json(text: str) -> Any:
    """The first JSON value printed (the Inspector may print more after it)."""
    value, _end = json.JSONDecoder().raw_decode(text[text.index("{") :])
    return value


async def _serve_http(nursery: trio.Nursery, config: Path) -> str:
    """``prism serve --http 127.0.0.1:0`` with one bearer token; its endpoint URL."""
    tokens = config.parent / "tokens.txt"
    tokens.write_text(TOKEN + "\n", encoding="utf-8")
    argv = [sys.executable, "-m", "prism.cli", "serve", str(config), "--http", "127.0.0.1:0",
            "--token-file", str(tokens)]  # fmt: skip
    run = functools.partial(
        trio.run_process, argv, cwd=config.parent, stderr=subprocess.PIPE, check=False
    )
    proc: trio.Process = await nursery.start(run)
    assert proc.stderr is not None
    seen = b""
    with trio.fail_after(60):
        while not re.search(rb"MCP endpoint (\S+)\n", seen):
            chunk = await proc.stderr.receive_some(4096)
            assert chunk, seen.decode(errors="replace")
            seen += chunk
    found = re.search(rb"MCP endpoint (\S+)\n", seen)
    assert found is not None
    return found.group(1).decode()


async def test_inspector_cli_over_stdio(inspector: Path, config: Path) -> None:
    """The config as a positional path, then as PRISM_CONFIG: the Inspector keeps --config."""
    serve = [sys.executable, "-m", "prism.cli", "serve"]
    listed = _json(await _run([str(inspector), "--cli", *serve, str(config),
                               "--method", "tools/list"], config.parent))  # fmt: skip
    read = _json(await _run([str(inspector), "--cli", *serve, str(config), "--method",
                             "tools/call", "--tool-name", "read", "--tool-arg", "path=notes.txt"],
                            config.parent))  # fmt: skip
    denied = _json(
        await _run(
            [
                str(inspector),
                "--cli",
                "-e",
                f"PRISM_CONFIG={config}",
                *serve,
                "--method",
                "tools/call",
                "--tool-name",
                "shell",
                "--tool-arg",
                "command=sudo id",
            ],
            config.parent,
            status=5,
        )
    )  # fmt: skip  (the Inspector exits 5 on isError)
    names = {tool["name"] for tool in listed["tools"]}
    assert {"read", "write", "edit", "shell"} <= names
    assert read == {"content": [{"type": "text", "text": "hello from the workspace"}],
                    "isError": False}  # fmt: skip
    assert denied["isError"] is True
    assert "matches the deny rule 'sudo *'" in denied["content"][0]["text"]


async def test_inspector_cli_over_http_with_a_bearer_token(inspector: Path, config: Path) -> None:
    async with trio.open_nursery() as nursery:
        url = await _serve_http(nursery, config)
        base = [str(inspector), "--cli", url, "--transport", "http"]
        refused = await trio.run_process(
            [*base, "--method", "tools/list"], capture_stdout=True, capture_stderr=True,
            check=False,
        )  # fmt: skip
        read = _json(await _run([*base, "--header", f"Authorization: Bearer {TOKEN}",
                                 "--method", "tools/call", "--tool-name", "read",
                                 "--tool-arg", "path=notes.txt"], config.parent))  # fmt: skip
        nursery.cancel_scope.cancel()
    assert refused.returncode != 0  # no token: 401
    assert read["content"][0]["text"] == "hello from the workspace"


async def test_langchain_mcp_adapters_over_stdio_and_http(
    langchain_python: Path, config: Path
) -> None:
    host = [str(langchain_python), str(TESTS / "cli_langchain_host.py")]
    over_stdio = json.loads(
        await _run([*host, "stdio", sys.executable, str(config)], config.parent)
    )
    async with trio.open_nursery() as nursery:
        url = await _serve_http(nursery, config)
        over_http = json.loads(await _run([*host, "http", url, TOKEN], config.parent))
        nursery.cancel_scope.cancel()
    for seen in (over_stdio, over_http):
        assert {"read", "write", "edit", "shell"} <= set(seen["tools"])
        assert "hello from the workspace" in seen["read"]
        assert "matches the deny rule 'sudo *'" in seen["shell"]


def _documented_claude_config() -> dict[str, Any]:
    """The ``mcpServers`` JSON that docs/gateway.md gives for Claude Desktop."""
    text = (REPO / "docs" / "gateway.md").read_text(encoding="utf-8")
    section = text[text.index("### Claude Desktop") :]
    block = re.search(r"```json\n(.*?)```", section, re.DOTALL)
    assert block is not None, "docs/gateway.md gives no Claude Desktop config"
    parsed: dict[str, Any] = json.loads(block.group(1))
    return parsed


async def test_the_documented_claude_desktop_config_starts_prism_serve(config: Path) -> None:
    """The command, args and env of the documented entry, run as Claude Desktop runs
    them: over stdio, in another working folder (/), with only that env."""
    entry = _documented_claude_config()["mcpServers"]["prism"]
    assert entry["args"][0] == "serve"
    assert Path(entry["args"][1]).is_absolute()
    # The documented paths, made this machine's: where prism is installed, our config.
    command = str(Path(sys.executable).with_name("prism"))
    args = ["serve", str(config)]
    env = {key: str(value) for key, value in entry.get("env", {}).items()}
    params = StdioServerParameters(command=command, args=args, env=env, cwd="/")
    with trio.fail_after(120):
        async with Client(params, mode="legacy") as client:
            listed = await client.list_tools()
            read = await client.call_tool("read", {"path": "notes.txt"})
    assert "read" in {tool.name for tool in listed.tools}
    assert isinstance(read.content[0], types.TextContent)
    assert read.content[0].text == "hello from the workspace"
