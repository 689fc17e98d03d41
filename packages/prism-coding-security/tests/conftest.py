"""Shared fixtures and markers of the prism-coding-security tests.

Markers (each test skips, with the reason, where the tool is missing):

* ``bwrap``: bubblewrap can create its namespaces here;
* ``git``: git is installed;
* ``prlimit``: util-linux ``prlimit`` is installed;
* ``landlock``: the kernel has Landlock enabled;
* ``system_python``: ``/usr/bin/python3`` exists (the sandbox's private
  ``/tmp`` hides a virtualenv there, so probes run on the system python).

Fixtures: ``root`` (an empty project directory) and ``run_shell`` (runs a
command through any :class:`~prism.coding.tools.ShellOperations` and returns
its exit and output).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path as _Path
from typing import TYPE_CHECKING

import hypothesis
import pytest
import trio

from prism.coding.security import LandlockSandbox, SandboxUnavailableError
from prism.coding.tools import ShellExit, ShellOperations, ShellSpawnRequest

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping
    from pathlib import Path

SYSTEM_PYTHON = "/usr/bin/python3"
# the test modules import their helper modules (coding_security_shadows) from here
sys.path.insert(0, str(_Path(__file__).resolve().parent))


@functools.cache
def _bwrap_missing() -> str | None:
    path = shutil.which("bwrap")
    if path is None:
        return "bwrap is not installed (apt-get install bubblewrap)"
    probe = subprocess.run(
        [path, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all",
         "--die-with-parent", "true"],
        capture_output=True, check=False, timeout=30,
    )  # fmt: skip
    if probe.returncode != 0:
        return f"bwrap cannot create namespaces here: {probe.stderr.decode(errors='replace')}"
    return None


@functools.cache
def _landlock_missing(tmp: str) -> str | None:
    try:
        trio.run(LandlockSandbox([tmp]).ensure_available)
    except SandboxUnavailableError as exc:
        return f"Landlock is not usable here: {exc}"
    return None


def _missing(name: str, tmp: str) -> str | None:
    if name == "bwrap":
        return _bwrap_missing()
    if name == "landlock":
        return _landlock_missing(tmp)
    if name == "system_python":
        return None if os.access(SYSTEM_PYTHON, os.X_OK) else f"{SYSTEM_PYTHON} is missing"
    return None if shutil.which(name) else f"{name} is not installed"


_MARKERS = {
    "bwrap": "needs bubblewrap that can create namespaces",
    "git": "needs git",
    "prlimit": "needs util-linux prlimit",
    "landlock": "needs a kernel with Landlock",
    "system_python": "needs /usr/bin/python3",
}


def pytest_configure(config: pytest.Config) -> None:
    for name, text in _MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")


def pytest_runtest_setup(item: pytest.Item) -> None:
    for name in _MARKERS:
        if item.get_closest_marker(name) is not None:
            reason = _missing(name, os.path.dirname(os.path.abspath(__file__)))
            if reason is not None:
                pytest.skip(reason)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    directory = tmp_path / "project"
    directory.mkdir()
    return directory


@pytest.fixture
def run_shell() -> Callable[..., Awaitable[tuple[ShellExit, str]]]:
    """``await run_shell(ops, command, cwd, env=None)``: the exit and the decoded output."""

    async def run(
        ops: ShellOperations, command: str, cwd: Path, env: Mapping[str, str] | None = None
    ) -> tuple[ShellExit, str]:
        chunks: list[bytes] = []

        async def sink(chunk: bytes) -> None:
            chunks.append(chunk)

        request = ShellSpawnRequest(
            command=command,
            shell_path="/bin/sh",
            cwd=str(cwd),
            env=dict(env) if env is not None else {"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        )
        with trio.fail_after(30):
            result = await ops.run(request, sink)
        return result, b"".join(chunks).decode(errors="replace")

    return run


# Hypothesis without its per-example deadline: a wall-clock limit fails on a loaded
# machine (scripts/test runs two packages at a time); speed targets live in benchmarks/.
hypothesis.settings.register_profile("prism", deadline=None)
hypothesis.settings.load_profile("prism")
