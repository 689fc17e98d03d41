"""LandlockSandbox: real Landlock and seccomp in the child (skipped where the kernel lacks them)."""

from __future__ import annotations

import os
import resource
import signal
import socket
from typing import TYPE_CHECKING

import pytest
import trio

from prism.coding.security import (
    LandlockSandbox,
    SandboxBackend,
    SandboxUnavailableError,
    _landlock_exec,
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


@pytest.mark.landlock
async def test_writes_inside_the_root_and_to_dev_null_work(root: Path, run_shell: RunShell) -> None:
    ops = create_sandbox_shell_operations(LandlockSandbox([str(root)]))
    result, _ = await run_shell(ops, "echo inside > made.txt && echo x > /dev/null", root)
    assert result.exit_code == 0
    assert (root / "made.txt").read_text() == "inside\n"


@pytest.mark.landlock
async def test_writes_outside_the_roots_are_denied(
    root: Path, tmp_path: Path, run_shell: RunShell
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ops = create_sandbox_shell_operations(LandlockSandbox([str(root)]))
    _, output = await run_shell(
        ops, f"echo x > {elsewhere}/f; mkdir {elsewhere}/d; echo done", root
    )
    assert "done" in output
    assert "Permission denied" in output
    assert list(elsewhere.iterdir()) == []


def _tree(root: Path) -> dict[str, str | None]:
    """Every path below ``root``: a file's text, None for a directory."""
    out: dict[str, str | None] = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs:
            out[os.path.relpath(os.path.join(directory, name), root)] = None
        for name in files:
            with open(os.path.join(directory, name)) as file:
                out[os.path.relpath(os.path.join(directory, name), root)] = file.read()
    return out


@pytest.mark.landlock
async def test_a_line_proved_to_write_nothing_can_write_nothing(root: Path) -> None:
    """The attack: a line the policy misjudged as writing nothing (a repository's
    driver git ran after all) writes anyway. Under Landlock such a line gets a
    ruleset in which no root is writable, so every write fails and the root is
    unchanged; the same line as an ordinary request writes (the control)."""
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / "README").write_text("text\n")
    ops = create_sandbox_shell_operations(LandlockSandbox([str(root)]))
    chunks: list[bytes] = []

    async def sink(chunk: bytes) -> None:
        chunks.append(chunk)

    line = (
        "echo x > .envrc; echo hook > .git/hooks/pre-commit; echo y >> README; rm README; "
        "mkdir d; echo x > /dev/null && cat README"
    )
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    request = ShellSpawnRequest(
        command=line, shell_path="/bin/sh", cwd=str(root), env=env, read_only=True
    )
    result = await ops.run(request, sink)
    output = b"".join(chunks).decode()
    assert result.exit_code == 0  # /dev/null is still writable and README still reads
    assert output.count("Permission denied") >= 4, output
    assert output.endswith("text\n")
    assert _tree(root) == {".git": None, ".git/hooks": None, "README": "text\n"}
    control = ShellSpawnRequest(command=line, shell_path="/bin/sh", cwd=str(root), env=env)
    await ops.run(control, sink)
    made = _tree(root)
    assert made[".envrc"] == "x\n"
    assert made["d"] is None


@pytest.mark.landlock
@pytest.mark.system_python
async def test_no_tcp_connection_without_network(root: Path, run_shell: RunShell) -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    (root / "probe.py").write_text(
        "import socket\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=5); print('connected')\n"
        "except OSError as exc:\n"
        "    print('refused', exc)\n"
    )
    ops = create_sandbox_shell_operations(LandlockSandbox([str(root)]))
    with listener:
        _, output = await run_shell(ops, f"{_PYTHON} probe.py", root)
    assert output.startswith("refused"), output


@pytest.mark.landlock
@pytest.mark.system_python
async def test_network_true_allows_tcp(root: Path, run_shell: RunShell) -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    (root / "probe.py").write_text(
        f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5); print('ok')"
    )
    ops = create_sandbox_shell_operations(LandlockSandbox([str(root)], network=True))
    with listener:
        _, output = await run_shell(ops, f"{_PYTHON} probe.py", root)
    assert output.strip() == "ok"


@pytest.mark.landlock
@pytest.mark.system_python
async def test_host_unix_socket_cannot_be_reached_even_with_network(
    root: Path, run_shell: RunShell
) -> None:
    path = str(root / "agent.sock")
    (root / "probe.py").write_text(
        "import socket, sys\n"
        "try:\n"
        "    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print('connected')\n"
        "except OSError as exc:\n"
        "    print('refused', exc)\n"
    )
    ops = create_sandbox_shell_operations(LandlockSandbox([str(root)], network=True))
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(path)
        listener.listen(1)
        listener.setblocking(False)
        _, output = await run_shell(ops, f"{_PYTHON} probe.py {path}", root)
        assert "Operation not permitted" in output, output
        with pytest.raises(BlockingIOError):
            listener.accept()


_HOST_SHARED_PROBE = """
import ctypes, os, resource, sys
libc = ctypes.CDLL(None, use_errno=True)
def told(result, name):
    print(name, "ok" if result >= 0 else os.strerror(ctypes.get_errno()))
shm = libc.shmget(0, 4096, 0o1600)  # (IPC_PRIVATE, IPC_CREAT | 0600)
told(shm, "shmget")
if shm >= 0:
    libc.shmctl(shm, 0, None)  # (IPC_RMID)
queue = libc.msgget(0, 0o1600)
told(queue, "msgget")
if queue >= 0:
    libc.msgctl(queue, 0, None)
semaphores = libc.semget(0, 1, 0o1600)
told(semaphores, "semget")
if semaphores >= 0:
    libc.semctl(semaphores, 0, 0)
other = int(sys.argv[1])
for name, call in [
    ("prlimit other", lambda: resource.prlimit(other, resource.RLIMIT_NOFILE, (64, 64))),
    ("prlimit self", lambda: resource.prlimit(0, resource.RLIMIT_NOFILE)),
    ("nice other", lambda: os.setpriority(os.PRIO_PROCESS, other, 5)),
    ("nice self", lambda: os.setpriority(os.PRIO_PROCESS, 0, 5)),
    ("affinity other", lambda: os.sched_setaffinity(other, {0})),
]:
    try:
        call()
        print(name, "ok")
    except OSError as exc:
        print(name, exc.strerror)
"""


@pytest.mark.landlock
@pytest.mark.system_python
async def test_host_processes_and_ipc_are_out_of_reach(root: Path, run_shell: RunShell) -> None:
    """Without a PID or IPC namespace, a command could write a host process's System V
    shared memory, leave segments behind, or set another process's limits and priority
    (Prism's own open-file limit lowered to 5: its next call failed). Each fails; what a
    command does to itself still works."""
    (root / "probe.py").write_text(_HOST_SHARED_PROBE)
    ops = create_sandbox_shell_operations(LandlockSandbox([str(root)]))
    host = await trio.lowlevel.open_process(["sleep", "60"])
    try:
        _, output = await run_shell(ops, f"{_PYTHON} probe.py {host.pid}", root)
        limits = resource.prlimit(host.pid, resource.RLIMIT_NOFILE)
    finally:
        host.kill()
        await host.wait()
    assert output.splitlines() == [
        "shmget Operation not permitted",
        "msgget Operation not permitted",
        "semget Operation not permitted",
        "prlimit other Operation not permitted",
        "prlimit self ok",
        "nice other Operation not permitted",
        "nice self ok",
        "affinity other Operation not permitted",
    ], output
    assert limits != (64, 64)


@pytest.mark.landlock
@pytest.mark.system_python
async def test_memory_limit_applies(root: Path, run_shell: RunShell) -> None:
    (root / "hog.py").write_text(
        "try:\n    b = bytearray(1 << 30); print('allocated')\n"
        "except MemoryError:\n    print('MemoryError')\n"
    )
    ops = create_sandbox_shell_operations(LandlockSandbox([str(root)], memory_bytes=256 << 20))
    _, output = await run_shell(ops, f"{_PYTHON} hog.py", root)
    assert output.strip() == "MemoryError"


@pytest.mark.landlock
async def test_helper_fails_closed_when_a_root_vanishes(
    root: Path, tmp_path: Path, run_shell: RunShell
) -> None:
    doomed = tmp_path / "doomed"
    doomed.mkdir()
    sandbox = LandlockSandbox([str(root), str(doomed)])
    await sandbox.ensure_available()
    doomed.rmdir()
    ops = create_sandbox_shell_operations(sandbox)
    result, output = await run_shell(ops, "echo ran > ran.txt", root)
    assert result.exit_code == 126
    assert "not running the command" in output
    assert not (root / "ran.txt").exists()


async def test_no_landlock_refuses_to_run(
    root: Path, monkeypatch: pytest.MonkeyPatch, run_shell: RunShell
) -> None:
    monkeypatch.setattr(_landlock_exec, "abi_version", lambda: 0)
    ops = create_sandbox_shell_operations(LandlockSandbox([str(root)]))
    (root / "flag").write_text("")
    with pytest.raises(SandboxUnavailableError, match="Landlock is not available"):
        await run_shell(ops, "rm flag", root)
    assert (root / "flag").exists()


def test_landlock_backend_satisfies_the_protocol(root: Path) -> None:
    assert isinstance(LandlockSandbox([str(root)]), SandboxBackend)


@pytest.mark.parametrize(
    ("kwargs", "option"),
    [({"writable_roots": "/tmp"}, "writable_roots"),
     ({"writable_roots": [], "network": 1}, "network"),
     ({"writable_roots": [], "max_processes": 0}, "max_processes")],
)  # fmt: skip
def test_bad_landlock_options_raise_naming_the_option(
    kwargs: dict[str, object], option: str
) -> None:
    with pytest.raises(ConfigurationError, match=option):
        LandlockSandbox(**kwargs)  # type: ignore[arg-type]


@pytest.mark.landlock
async def test_the_command_has_no_capabilities(root: Path, run_shell: RunShell) -> None:
    # As root, Landlock alone would leave reboot, module loading and the rest.
    ops = create_sandbox_shell_operations(LandlockSandbox([str(root)]))
    _, output = await run_shell(ops, "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status", root)
    values = [line.split()[1] for line in output.splitlines()]
    assert len(values) == 5
    assert set(values) == {"0000000000000000"}


def _daemons(tag: str, where: str) -> str:
    """Three processes that outlive the command (setsid + env -i, double fork, nohup)."""
    mark = f"touch {where}/{tag}"
    return (
        f"setsid -f env -i /bin/bash -c '{mark}-a; exec -a {tag}-a sleep 300' >/dev/null 2>&1; "
        f"/bin/bash -c '( ( {mark}-b; exec -a {tag}-b sleep 300 & ) & )' >/dev/null 2>&1; "
        f"nohup /bin/bash -c '{mark}-c; exec -a {tag}-c sleep 300' >/dev/null 2>&1 & "
        f"until [ -e {where}/{tag}-a ] && [ -e {where}/{tag}-b ] && [ -e {where}/{tag}-c ]; "
        "do :; done; echo started"
    )


def _running(tag: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    if tag.encode() in handle.read():
                        found.append(int(pid))
            except OSError:
                continue
    return found


async def test_a_setsid_daemon_outlives_an_unsandboxed_call(
    root: Path, run_shell: RunShell
) -> None:
    from prism.coding.tools import LocalShellOperations

    tag = f"prism-control-{os.getpid()}-{id(root)}"
    _, output = await run_shell(LocalShellOperations(), _daemons(tag, str(root)), root)
    left = _running(tag)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert output.strip() == "started"
    assert left  # the control: without a subreaper, the env -i daemon stays


@pytest.mark.landlock
async def test_every_process_the_command_starts_ends_with_the_call(
    root: Path, run_shell: RunShell
) -> None:
    tag = f"prism-daemon-{os.getpid()}-{id(root)}"
    ops = create_sandbox_shell_operations(LandlockSandbox([str(root)]))
    result, output = await run_shell(ops, _daemons(tag, str(root)), root)
    assert (result.exit_code, output.strip()) == (0, "started")
    assert _running(tag) == []


@pytest.mark.landlock
async def test_a_cancelled_call_ends_its_daemons_too(root: Path) -> None:
    from prism.coding.tools import ShellSpawnRequest

    tag = f"prism-cancel-{os.getpid()}-{id(root)}"
    ops = create_sandbox_shell_operations(LandlockSandbox([str(root)]), kill_grace_s=5)
    started = trio.Event()

    async def sink(chunk: bytes) -> None:
        if b"started" in chunk:
            started.set()

    request = ShellSpawnRequest(
        command=_daemons(tag, str(root)) + "; sleep 300",
        shell_path="/bin/sh",
        cwd=str(root),
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ops.run, request, sink)
        with trio.fail_after(30):
            await started.wait()
        nursery.cancel_scope.cancel()
    assert _running(tag) == []
