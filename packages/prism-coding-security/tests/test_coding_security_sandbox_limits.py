"""BubblewrapSandbox resource limits (prlimit): memory, CPU and process caps; real processes."""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

import pytest
import trio

from prism.coding.security import (
    BubblewrapSandbox,
    SandboxUnavailableError,
    create_sandbox_shell_operations,
)
from prism.coding.tools import ShellExit, ShellSpawnRequest
from prism.core import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from prism.coding.tools import ShellExit

    RunShell = Callable[..., Awaitable[tuple[ShellExit, str]]]


_PYTHON = "/usr/bin/python3"


@pytest.mark.bwrap
@pytest.mark.prlimit
@pytest.mark.system_python
async def test_memory_hog_gets_memory_error(root: Path, run_shell: RunShell) -> None:
    (root / "hog.py").write_text(
        "try:\n    b = bytearray(1 << 30)\n    print('allocated')\n"
        "except MemoryError:\n    print('MemoryError')\n"
    )
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)], memory_bytes=256 << 20))
    result, output = await run_shell(ops, f"{_PYTHON} hog.py", root)
    assert (result.exit_code, output.strip()) == (0, "MemoryError")


@pytest.mark.bwrap
@pytest.mark.prlimit
@pytest.mark.system_python
async def test_without_limits_the_same_allocation_succeeds(root: Path, run_shell: RunShell) -> None:
    (root / "hog.py").write_text("b = bytearray(512 << 20)\nprint('allocated')\n")
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    _, output = await run_shell(ops, f"{_PYTHON} hog.py", root)
    assert output.strip() == "allocated"


@pytest.mark.bwrap
@pytest.mark.prlimit
async def test_busy_loop_is_stopped_by_the_cpu_limit(root: Path, run_shell: RunShell) -> None:
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)], cpu_time_s=1))
    result, _ = await run_shell(ops, "while :; do :; done", root)
    assert result.exit_code != 0


_FORK_PROBE = """\
import os
r, w = os.pipe()
started, error = 0, ""
for _ in range(200):
    try:
        pid = os.fork()
    except OSError as exc:
        error = exc.strerror
        break
    if pid == 0:
        os.close(w)
        os.read(r, 1)
        os._exit(0)
    started += 1
print(started, error)
"""


def _as_nobody() -> list[str] | None:
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--"]


@pytest.mark.bwrap
@pytest.mark.prlimit
@pytest.mark.system_python
@pytest.mark.skipif(_as_nobody() is None, reason="root is exempt from RLIMIT_NPROC; no setpriv")
async def test_fork_bomb_is_capped_by_max_processes() -> None:
    # The kernel does not apply RLIMIT_NPROC to root, so as root the probe runs
    # as nobody. Its launcher could not reopen our memfd, so the test hands bwrap
    # the filter on a descriptor itself.
    prefix = _as_nobody()
    assert prefix is not None
    argv = BubblewrapSandbox([], max_processes=20).wrap([_PYTHON, "-c", _FORK_PROBE], cwd="/")
    fd = os.open(argv[3], os.O_RDONLY)
    try:
        bwrap_argv = argv[4:]
        bwrap_argv[bwrap_argv.index("--seccomp") + 1] = str(fd)
        with trio.fail_after(30):
            result = await trio.run_process(
                [*prefix, *bwrap_argv], capture_stdout=True, pass_fds=(fd,), cwd="/"
            )
    finally:
        os.close(fd)
    started, _, error = result.stdout.decode().strip().partition(" ")
    assert int(started) < 20
    assert error == "Resource temporarily unavailable"


@pytest.mark.bwrap
@pytest.mark.prlimit
async def test_no_process_is_left_after_a_timeout(root: Path) -> None:
    marker = f"prism-limits-{os.getpid()}-{id(root)}"
    ops = create_sandbox_shell_operations(
        BubblewrapSandbox([str(root)], cpu_time_s=60, max_processes=4096)
    )
    started = trio.Event()

    async def sink(chunk: bytes) -> None:
        started.set()

    command = f"for i in 1 2 3 4 5; do sh -c 'sleep 600; : {marker}' & done; echo up; wait"
    request = ShellSpawnRequest(
        command=command, shell_path="/bin/sh", cwd=str(root),
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )  # fmt: skip
    with trio.fail_after(20):
        with trio.move_on_after(600) as timeout:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(ops.run, request, sink)
                await started.wait()
                timeout.cancel()
    leftover = await trio.run_process(["pgrep", "-f", marker], capture_stdout=True, check=False)
    assert leftover.stdout.split() == []


def test_limits_wrap_the_command_in_prlimit(root: Path) -> None:
    sandbox = BubblewrapSandbox(
        [str(root)], bwrap_path="/bin/true", cpu_time_s=5, memory_bytes=1 << 30, max_processes=64
    )
    argv = sandbox.wrap(["sh", "-c", "x"], cwd="/")
    tail = argv[argv.index("--") + 1 :]
    assert os.path.basename(tail[0]) == "prlimit"
    assert tail[1:] == ["--cpu=5", f"--as={1 << 30}", "--nproc=64", "--", "sh", "-c", "x"]


def test_no_limits_means_no_prlimit(root: Path) -> None:
    argv = BubblewrapSandbox([str(root)], bwrap_path="/bin/true").wrap(["true"], cwd="/")
    assert argv[argv.index("--") + 1 :] == ["true"]


def test_limits_without_prlimit_refuse_to_run(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    sandbox = BubblewrapSandbox([str(root)], bwrap_path="/bin/true", max_processes=10)
    with pytest.raises(SandboxUnavailableError, match="prlimit"):
        sandbox.wrap(["true"], cwd="/")


@pytest.mark.parametrize(
    ("option", "value"),
    [("cpu_time_s", 0), ("cpu_time_s", 1.5), ("memory_bytes", 1000), ("max_processes", True),
     ("max_processes", "10")],
)  # fmt: skip
def test_bad_limits_raise_naming_the_option(option: str, value: object) -> None:
    with pytest.raises(ConfigurationError, match=option):
        BubblewrapSandbox([], **{option: value})  # type: ignore[arg-type]
