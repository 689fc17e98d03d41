import io
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO

import hypothesis
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the test modules import it
import cli_prewarmed as prewarmed

# The MCP servers the tests start come from one warm parent (cli_prewarmed.py): each
# start skips importing the MCP SDK again (about a CPU-second each).
prewarmed.configure(
    "-m prism.cli.demo_server",
    Path(__file__).with_name("eliciting_mcp_server.py"),
    # what prism serve imports as it starts (test_cli_serve starts it from the parent)
    "-m prism.cli._cmd_serve",
    "-m prism.cli._serve",
    "-m prism.cli._toolset",
    "-m prism.gateway",
)

CliRunner = Callable[..., subprocess.CompletedProcess[str]]
ReadUntil = Callable[[IO[str], str, float], list[str]]
ServeConfig = Callable[..., Path]

# A shell without job control starts background commands with SIGINT ignored (scripts/test
# runs packages two at a time), and an ignored signal stays ignored across exec: every CLI
# subprocess of the Ctrl-C tests would ignore the test's SIGINT too (Python installs its
# KeyboardInterrupt handler only when SIGINT is not ignored at start-up). A handled signal
# is reset to its default on exec, so handling it here gives the children the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session", autouse=True)
def _warm_parent() -> Iterator[None]:
    """Ends the warm parent of the MCP servers (if a test started it) with the session."""
    yield
    prewarmed.stop_all()


@pytest.fixture(autouse=True)
def state_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$XDG_STATE_HOME`` for the test and the CLIs it starts: default ledgers go here."""
    home = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("XDG_STATE_HOME", str(home))
    return home


def _env() -> dict[str, str]:
    # Nothing that makes rich treat a pipe as a terminal (CI sets some of these).
    hidden = {"FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "COLUMNS", "LINES"}
    env = {k: v for k, v in os.environ.items() if k not in hidden}
    env["NO_COLOR"] = "1"
    env["COLUMNS"] = "160"
    env["PYTHONUTF8"] = "1"
    return env


@pytest.fixture(scope="session")
def cli_env() -> dict[str, str]:
    """The environment of a CLI subprocess whose output a test reads: a plain pipe."""
    return _env()


def _read_until(stream: IO[str], needle: str, timeout: float) -> list[str]:
    selector = selectors.DefaultSelector()
    selector.register(stream, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    while time.monotonic() < deadline:
        if not selector.select(timeout=max(0.0, deadline - time.monotonic())):
            continue
        line = stream.readline()
        if not line:
            break
        seen.append(line)
        if needle in line:
            return seen
    raise AssertionError(f"never saw {needle!r}; output so far: {''.join(seen)}")


@pytest.fixture(scope="session")
def read_until() -> ReadUntil:
    """``read_until(stream, needle, timeout)``: the lines read up to one holding ``needle``.

    The timeout only bounds a hang: a test never depends on how long the wait took.
    """
    return _read_until


@pytest.fixture
def run_cli_process(tmp_path: Path) -> CliRunner:
    """Run ``python -m prism.cli ARGS`` in a real subprocess (cwd = tmp_path)."""

    def run(
        *args: str, cwd: Path | None = None, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        argv: Sequence[str] = [sys.executable, "-m", "prism.cli", *args]
        return subprocess.run(
            argv,
            cwd=cwd or tmp_path,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )

    return run


@pytest.fixture
def plain_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's environment as a plain pipe or terminal gives it: no colour, 160
    columns, nothing that forces rich's terminal mode, no model API keys."""
    for name, value in _env().items():
        monkeypatch.setenv(name, value)
    hidden = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "LINES")
    for name in (*hidden, "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def run_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plain_output: None) -> CliRunner:
    """Run ``prism ARGS`` through :func:`prism.cli.main` in this process (cwd = tmp_path).

    The same entry point the console script calls, with stdin empty and stdout
    and stderr captured as a pipe would see them; for behaviour a fresh process
    matters to (signals, imports, the entry point itself) use ``run_cli_process``.
    """
    from prism.cli import main

    def run(
        *args: str, cwd: Path | None = None, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        out, err = io.StringIO(), io.StringIO()
        with monkeypatch.context() as patch:
            patch.chdir(cwd or tmp_path)
            patch.setattr(sys, "stdin", io.StringIO(""))
            patch.setattr(sys, "stdout", out)
            patch.setattr(sys, "stderr", err)
            code = main(list(args))
        return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())

    return run


@pytest.fixture
def serve_config(tmp_path: Path) -> ServeConfig:
    """Write the ``prism serve`` tests' prism.toml in tmp_path and return its path.

    A root ``ws`` holding ``readme.txt`` (``readme`` is its text), the demo docs server
    (``step_seconds`` apart between its progress steps), ``delete_*`` denied, no sandbox;
    ``coding_tools=False`` leaves the coding tools out; ``docs_server=False`` leaves the
    docs server out (a process of its own to start, for a test that never calls it);
    ``extra`` is appended (more tables).
    """

    def write(
        *,
        readme: str,
        step_seconds: str = "0",
        coding_tools: bool = True,
        docs_server: bool = True,
        extra: str = "",
    ) -> Path:
        ws = tmp_path / "ws"
        ws.mkdir()
        (ws / "readme.txt").write_text(f"{readme}\n", encoding="utf-8")
        config = tmp_path / "prism.toml"
        demo = prewarmed.toml_command("-m", "prism.cli.demo_server", "--step-seconds", step_seconds)
        docs = f"""
[mcp.servers.docs]
{demo}call_timeout_s = 10
"""
        config.write_text(
            f"""
[workspace]
roots = ["ws"]
sandbox = "none"
coding_tools = {json.dumps(coding_tools)}
{docs if docs_server else ""}
[permissions]
deny = ["tool:mcp:docs:delete_*:execute"]
{extra}
""",
            encoding="utf-8",
        )
        return config

    return write


# Hypothesis without its per-example deadline: a wall-clock limit fails on a loaded
# machine (scripts/test runs two packages at a time); speed targets live in benchmarks/.
hypothesis.settings.register_profile("prism", deadline=None)
hypothesis.settings.load_profile("prism")
