"""Fixtures for prism-mcp: real servers over stdio and over HTTP bound to 127.0.0.1."""

from __future__ import annotations

import os
import re
import select
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import hypothesis
import pytest

from prism.mcp import StdioTransport
from prism.mcp.testing import UPSTREAM_WARNING_FILTERS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from prism.core import JsonObject, ToolDefinition, ToolExecutionContext

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))  # the test modules import mcp_prewarmed
import mcp_prewarmed as prewarmed  # noqa: E402

FIXTURE_SERVER = TESTS / "mcp_fixture_server.py"
# The fixture server and the reference servers start from one warm parent
# (mcp_prewarmed.py): each start skips importing the MCP SDK again (a CPU-second each).
prewarmed.configure(FIXTURE_SERVER, "-m mcp_server_time", "-m mcp_server_git")
REPO = TESTS.parents[2]
EVERYTHING_VERSION = "2026.8.31"
EVERYTHING_CACHE = REPO / ".cache" / "npm-server-everything"
EVERYTHING_MAIN = (
    EVERYTHING_CACHE / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist"
) / "index.js"

# server-everything's HTTP mode listens on every interface and has no host option:
# this preload pins every http server it starts to loopback and reports the port.
LOOPBACK_PRELOAD = r"""
const http = require("http");
const listen = http.Server.prototype.listen;
http.Server.prototype.listen = function (...args) {
  const cb = args.find((a) => typeof a === "function");
  let first = args[0];
  if (first !== null && typeof first === "object") {
    args = [{ ...first, host: "127.0.0.1" }, ...(cb ? [cb] : [])];
  } else {
    args = [Number(first) || 0, "127.0.0.1", ...(cb ? [cb] : [])];
  }
  this.once("listening", () => {
    process.stdout.write(`PRISM_PORT ${this.address().port} ${this.address().address}\n`);
  });
  return listen.apply(this, args);
};
"""


def _read_marker(proc: subprocess.Popen[bytes], pattern: str, limit_s: float) -> re.Match[bytes]:
    """Read the process's stdout until ``pattern`` matches a line (bounded)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + limit_s
    buffer = b""
    regex = re.compile(pattern.encode())
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no {pattern!r} from {proc.args!r}; got {buffer[-500:]!r}")
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            raise RuntimeError(f"{proc.args!r} exited early: {buffer[-500:]!r}")
        buffer += chunk
        match = regex.search(buffer)
        if match:
            return match


def _drain(proc: subprocess.Popen[bytes]) -> None:
    """Keep reading the server's stdout so its logging never blocks it."""
    assert proc.stdout is not None
    stream = proc.stdout

    def run() -> None:
        while stream.read(65536):
            pass

    threading.Thread(target=run, daemon=True).start()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
    if proc.stdout is not None:
        proc.stdout.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Only this package's tests tolerate the MCP SDK's unclosed HTTP generators.
    for item in items:
        if TESTS in Path(item.path).parents:
            for spec in UPSTREAM_WARNING_FILTERS:
                item.add_marker(pytest.mark.filterwarnings(spec))


@pytest.fixture(scope="session", autouse=True)
def _warm_parent() -> Iterator[None]:
    """Ends the warm parent of the fixture servers (if a test started it) with the session."""
    yield
    prewarmed.stop_all()


# The memory probes (a host process each, measuring its own peak RSS) import prism.mcp,
# the SDK's client and trio: a CPU-second and more per probe. They start from a warm
# parent of their own, which imports only what the probes import (the fixture servers'
# parent holds the SDK's server side too: a larger heap for the probes' collections).
MEMORY_PROBES = (TESTS / "mcp_flood_probe.py", TESTS / "mcp_memory_probe.py")


@pytest.fixture(scope="session")
def probe_parent() -> Iterator[prewarmed.WarmParent]:
    """The warm parent of the memory probes (``probe_parent.argv(PROBE, ARGS...)``)."""
    parent = prewarmed.WarmParent(*MEMORY_PROBES).start()
    try:
        yield parent
    finally:
        parent.stop()


@pytest.fixture
def fixture_stdio() -> StdioTransport:
    """The fixture server over stdio (a fresh server per connection, from the warm parent)."""
    return StdioTransport(*prewarmed.command(FIXTURE_SERVER, "stdio"))


@pytest.fixture
def fixture_stdio_process() -> StdioTransport:
    """The fixture server over stdio as a process of its own (``python SCRIPT stdio``): for
    the tests about the server's process (its pid, its children, what it inherits)."""
    return StdioTransport(sys.executable, [str(FIXTURE_SERVER), "stdio"])


@pytest.fixture(scope="session")
def fixture_http_url() -> Iterator[str]:
    """The fixture server over Streamable HTTP on 127.0.0.1 (one per test session)."""
    proc = subprocess.Popen(
        [sys.executable, str(FIXTURE_SERVER), "http"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    try:
        port = int(_read_marker(proc, r"PORT (\d+)\n", 30).group(1))
        _drain(proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        _stop(proc)


@pytest.fixture(scope="session")
def everything_main() -> Path:
    """server-everything installed from npm into the ignored .cache folder."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node/npm are not installed (scripts/test installs Debian's nodejs npm)")
    if not EVERYTHING_MAIN.exists():
        EVERYTHING_CACHE.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [
                "npm",
                "install",
                "--prefix",
                str(EVERYTHING_CACHE),
                "--no-audit",
                "--no-fund",
                f"@modelcontextprotocol/server-everything@{EVERYTHING_VERSION}",
            ],
            capture_output=True,
            timeout=300,
            check=False,
        )
        if done.returncode != 0 or not EVERYTHING_MAIN.exists():
            pytest.skip(f"npm could not install server-everything: {done.stderr[-500:]!r}")
    return EVERYTHING_MAIN


@pytest.fixture(scope="session")
def everything_http_url(everything_main: Path) -> Iterator[str]:
    """server-everything in Streamable HTTP mode, pinned to 127.0.0.1 on a free port."""
    preload = EVERYTHING_CACHE / "prism-loopback-preload.cjs"
    preload.write_text(LOOPBACK_PRELOAD)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/"), "PORT": "0"}
    proc = subprocess.Popen(
        ["node", "--require", str(preload), str(everything_main), "streamableHttp"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    try:
        match = _read_marker(proc, r"PRISM_PORT (\d+) (\S+)\n", 30)
        assert match.group(2) == b"127.0.0.1", match.group(0)
        _drain(proc)
        yield f"http://127.0.0.1:{int(match.group(1))}/mcp"
    finally:
        _stop(proc)


@pytest.fixture
def everything_stdio(everything_main: Path) -> StdioTransport:
    """server-everything over stdio."""
    node = shutil.which("node")
    assert node is not None
    return StdioTransport(node, [str(everything_main), "stdio"])


def _process_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # Field 3 (after the parenthesised name) is the state; a zombie is already dead.
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def process_alive() -> Callable[[int], bool]:
    """Whether a process id is a live (non-zombie) process."""
    return _process_alive


def _schema_validator(
    tool: ToolDefinition, args: JsonObject, ctx: ToolExecutionContext
) -> str | None:
    """A deliberately small JSON Schema check: required keys and primitive types."""
    schema = tool.parameters or {}
    required = schema.get("required", [])
    assert isinstance(required, list)
    for key in required:
        if key not in args:
            return f"missing required argument {key!r}"
    properties = schema.get("properties", {})
    assert isinstance(properties, dict)
    types: dict[str, tuple[type, ...]] = {
        "string": (str,),
        "integer": (int,),
        "number": (int, float),
        "boolean": (bool,),
    }
    for key, value in args.items():
        spec = properties.get(key)
        if isinstance(spec, dict) and isinstance(spec.get("type"), str):
            expected = types.get(str(spec["type"]))
            if expected and (
                not isinstance(value, expected)
                or isinstance(value, bool) != (spec["type"] == "boolean")
            ):
                return f"argument {key!r} must be {spec['type']}"
    return None


@pytest.fixture
def schema_validator() -> Callable[[ToolDefinition, JsonObject, ToolExecutionContext], str | None]:
    """A tiny validator standing in for prism-validation-jsonschema."""
    return _schema_validator


# Hypothesis without its per-example deadline: a wall-clock limit fails on a loaded
# machine (scripts/test runs two packages at a time); speed targets live in benchmarks/.
hypothesis.settings.register_profile("prism", deadline=None)
hypothesis.settings.load_profile("prism")
