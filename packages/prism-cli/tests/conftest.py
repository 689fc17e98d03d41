import copy
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

CliRunner = Callable[..., subprocess.CompletedProcess[str]]


def _measure_subprocesses() -> None:
    """Under ``coverage run``, measure the ``prism`` processes the tests start too.

    The CLI is tested as users run it, in real subprocesses; coverage.py's own
    startup hook measures them when ``COVERAGE_PROCESS_CONFIG`` is set. Their data
    files (absolute paths: the processes run in temporary folders) are combined
    into this process's data when the session ends.
    """
    try:
        import coverage
    except ImportError:
        return
    current = coverage.Coverage.current()
    if current is None:
        return
    config = copy.copy(current.config)
    config.parallel = True
    # A process that runs none of the measured source (an MCP server) says nothing.
    config.disable_warnings = [*config.disable_warnings, "no-data-collected", "module-not-measured"]
    config.data_file = os.path.abspath(config.data_file)
    config.source = [os.path.abspath(s) if os.path.isdir(s) else s for s in config.source or []]
    os.environ["COVERAGE_PROCESS_CONFIG"] = config.serialize()


def pytest_sessionstart(session: pytest.Session) -> None:
    _measure_subprocesses()


def pytest_sessionfinish(session: pytest.Session) -> None:
    try:
        import coverage
    except ImportError:
        return
    current = coverage.Coverage.current()
    if current is None or os.environ.pop("COVERAGE_PROCESS_CONFIG", None) is None:
        return
    # This process's data so far joins the subprocesses' files, then all are combined
    # into it; coverage.py saves the result when the run ends.
    current.save()
    data_file = os.path.abspath(current.config.data_file)
    os.replace(data_file, f"{data_file}.pytest.{os.getpid()}")
    current.combine(data_paths=[os.path.dirname(data_file)])


def _env() -> dict[str, str]:
    # Nothing that makes rich treat a pipe as a terminal (CI sets some of these).
    hidden = {"FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "COLUMNS", "LINES"}
    env = {k: v for k, v in os.environ.items() if k not in hidden}
    env["NO_COLOR"] = "1"
    env["COLUMNS"] = "160"
    env["PYTHONUTF8"] = "1"
    return env


@pytest.fixture
def run_cli(tmp_path: Path) -> CliRunner:
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
