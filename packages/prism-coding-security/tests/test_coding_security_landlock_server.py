"""LandlockSandbox's fork server: one helper per sandbox, one fork per command.

Its cached Landlock ruleset follows the roots (a root replaced or renamed between
two commands), it restarts when it died, and every process of a command still ends
with the call when the command's process, the server or its guardian is killed from
outside.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import TYPE_CHECKING

import pytest
import trio

from prism.coding.security import (
    BubblewrapSandbox,
    LandlockSandbox,
    create_sandbox_shell_operations,
)
from prism.coding.tools import ShellSpawnRequest
from prism.coding.tools.testing import assert_shell_operations_conform

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from prism.coding.tools import ShellExit

    RunShell = Callable[..., Awaitable[tuple[ShellExit, str]]]

pytestmark = pytest.mark.landlock


def _server_pid(sandbox: LandlockSandbox) -> int:
    server = sandbox._server
    assert server is not None
    assert server.pid is not None
    return server.pid


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return False
    return raw[raw.rfind(b")") + 2 :].split()[0] != b"Z"


async def test_it_keeps_the_shell_operations_contract(root: Path) -> None:
    sandbox = LandlockSandbox([str(root)])
    await assert_shell_operations_conform(create_sandbox_shell_operations(sandbox), str(root))


async def test_one_server_runs_every_command(root: Path, run_shell: RunShell) -> None:
    sandbox = LandlockSandbox([str(root)])
    ops = create_sandbox_shell_operations(sandbox)
    _, first = await run_shell(ops, "echo $PPID", root)
    server = _server_pid(sandbox)
    _, second = await run_shell(ops, "echo $PPID", root)
    assert _server_pid(sandbox) == server
    # each command is spawned by an idle spawner forked by the one server, itself below
    # its guardian (the same spawner, unless the server had not yet read that it was
    # idle again when the second command came: then it forks another)
    assert server not in (int(first), int(second))
    assert _parent(_parent(int(second))) == server


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        return int(handle.read().rpartition(b")")[2].split()[1])


async def test_a_root_replaced_between_two_commands_is_the_new_directory(
    tmp_path: Path, run_shell: RunShell
) -> None:
    # A Landlock rule holds the directory it was made for, not its path: the cached
    # ruleset must follow the path, and the old directory must not stay writable.
    project = tmp_path / "project"
    project.mkdir()
    moved = tmp_path / "moved"
    sandbox = LandlockSandbox([str(project)])
    ops = create_sandbox_shell_operations(sandbox)
    result, _ = await run_shell(ops, "echo one > one.txt", project)
    assert result.exit_code == 0
    project.rename(moved)
    project.mkdir()
    result, output = await run_shell(
        ops, f"echo two > two.txt; echo old > {moved}/old.txt; echo done", project
    )
    assert (project / "two.txt").read_text() == "two\n"
    assert "Permission denied" in output
    assert "done" in output
    assert not (moved / "old.txt").exists()
    assert (moved / "one.txt").read_text() == "one\n"


async def test_a_root_replaced_by_a_link_fails_closed(tmp_path: Path, run_shell: RunShell) -> None:
    # with roots A and A/B, a command may replace B by a link to anywhere: the next
    # command's ruleset must not open its rule to the link's target
    project = tmp_path / "project"
    inner = project / "inner"
    inner.mkdir(parents=True)
    other = tmp_path / "other"
    other.mkdir()
    sandbox = LandlockSandbox([str(project), str(inner)])
    ops = create_sandbox_shell_operations(sandbox)
    result, _ = await run_shell(ops, f"mv inner gone && ln -s {other} inner", project)
    assert result.exit_code == 0
    result, output = await run_shell(ops, f"echo x > {other}/x", project)
    assert result.exit_code == 126
    assert "no longer the directory it was" in output
    assert list(other.iterdir()) == []


@pytest.mark.parametrize("killed", ["server", "guardian"])
async def test_a_killed_server_is_started_again(
    root: Path, run_shell: RunShell, killed: str
) -> None:
    sandbox = LandlockSandbox([str(root)])
    ops = create_sandbox_shell_operations(sandbox)
    _, parent = await run_shell(ops, "echo $PPID", root)
    first = _server_pid(sandbox)
    server = _parent(int(parent))  # (the command's parent is the server's spawner)
    assert _parent(server) == first
    # (a killed guardian's server ends once told so: the next command waits for that)
    ended = os.pidfd_open(server)
    try:
        os.kill(server if killed == "server" else first, signal.SIGKILL)
        with trio.fail_after(30):
            await trio.lowlevel.wait_readable(ended)
    finally:
        os.close(ended)
    result, output = await run_shell(ops, "echo again > again.txt; echo ok", root)
    assert (result.exit_code, output) == (0, "ok\n")
    assert _server_pid(sandbox) != first
    assert (root / "again.txt").exists()


async def test_a_missing_working_directory_raises_as_unsandboxed(
    root: Path, run_shell: RunShell
) -> None:
    ops = create_sandbox_shell_operations(LandlockSandbox([str(root)]))
    with pytest.raises(FileNotFoundError):
        await run_shell(ops, "echo ran > ran.txt", root / "missing")
    assert not (root / "ran.txt").exists()


async def test_a_missing_program_fails_as_the_one_shot_helper_did(root: Path) -> None:
    ops = create_sandbox_shell_operations(LandlockSandbox([str(root)]))
    chunks: list[bytes] = []

    async def sink(chunk: bytes) -> None:
        chunks.append(chunk)

    request = ShellSpawnRequest(
        command="true", shell_path=str(root / "no-shell"), cwd=str(root), env={"PATH": "/bin"}
    )
    result = await ops.run(request, sink)
    assert result.exit_code == 126
    assert b"not running the command" in b"".join(chunks)


async def test_concurrent_commands_keep_their_own_output(root: Path, run_shell: RunShell) -> None:
    ops = create_sandbox_shell_operations(LandlockSandbox([str(root)]))
    results: dict[int, str] = {}

    async def one(index: int) -> None:
        _, output = await run_shell(ops, f"for i in 1 2 3; do echo {index}-$i; done", root)
        results[index] = output

    async with trio.open_nursery() as nursery:
        for index in range(4):
            nursery.start_soon(one, index)
    assert results == {i: f"{i}-1\n{i}-2\n{i}-3\n" for i in range(4)}


async def test_a_sink_that_raises_ends_the_command(root: Path) -> None:
    ops = create_sandbox_shell_operations(LandlockSandbox([str(root)]))
    tag = f"prism-sink-{os.getpid()}-{id(root)}"

    async def sink(chunk: bytes) -> None:
        raise RuntimeError("sink broke")

    request = ShellSpawnRequest(
        command=f"echo start; exec -a {tag} sleep 300",
        shell_path="/bin/bash",
        cwd=str(root),
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    with pytest.raises(RuntimeError, match="sink broke"):
        await ops.run(request, sink)
    assert not [pid for pid in _pids() if tag.encode() in _cmdline(pid)]


@pytest.mark.parametrize("killed", ["command", "spawner", "server", "guardian"])
async def test_a_process_killed_from_outside_still_ends_the_command_tree(
    root: Path, killed: str
) -> None:
    # Killed from outside (not by the command: Landlock scopes its signals): the
    # command's own process (its spawner, the subreaper of what it leaves, kills
    # that), its spawner (the server adopts both and kills them), the server (the
    # spawner dies with it, the guardian adopts and kills the rest) or the guardian
    # (the server kills what it started and exits). What is left here is a daemon
    # that left the session and cleared its environment, which nothing else would find.
    sandbox = LandlockSandbox([str(root)])
    ops = create_sandbox_shell_operations(sandbox)
    seen = bytearray()
    ready = trio.Event()

    async def sink(chunk: bytes) -> None:
        seen.extend(chunk)
        if seen.count(b"\n") == 3:
            ready.set()

    request = ShellSpawnRequest(
        command="setsid -f env -i /bin/bash -c 'echo daemon=$$; exec sleep 300'; "
        "echo command=$$; echo spawner=$PPID; exec sleep 300",
        shell_path="/bin/bash",
        cwd=str(root),
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    outcome: list[ShellExit] = []
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:

            async def go() -> None:
                outcome.append(await ops.run(request, sink))

            nursery.start_soon(go)
            await ready.wait()
            pids = {k: int(v) for k, v in (line.split("=") for line in seen.decode().split())}
            pids["guardian"] = _server_pid(sandbox)
            pids["server"] = _parent(pids["spawner"])
            assert _parent(pids["server"]) == pids["guardian"]
            os.kill(pids[killed], signal.SIGKILL)
    # the call returned: the daemon, which holds the output pipe, is gone
    assert outcome[0].exit_code == (137 if killed == "command" else None)
    assert not _alive(pids["daemon"])


async def test_a_command_that_stops_its_spawner_still_leaves_nothing(root: Path) -> None:
    # The command shares its spawner's Landlock domain, so it may signal it: stopped,
    # the spawner would never kill what the command left. The server kills a stopped
    # spawner; what it held comes to the server, which kills it.
    ops = create_sandbox_shell_operations(LandlockSandbox([str(root)]))
    seen = bytearray()

    async def sink(chunk: bytes) -> None:
        seen.extend(chunk)

    request = ShellSpawnRequest(
        command="setsid -f env -i /bin/bash -c 'echo daemon=$$; exec sleep 300'; "
        "sleep 0.2; kill -STOP $PPID; exec sleep 300",
        shell_path="/bin/bash",
        cwd=str(root),
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    with trio.fail_after(30):
        result = await ops.run(request, sink)
    assert result.exit_code is None
    daemon = int(seen.decode().split("=")[1])
    assert not _alive(daemon)


async def test_a_command_cannot_trace_or_read_its_spawner(root: Path, run_shell: RunShell) -> None:
    # not dumpable: without CAP_SYS_PTRACE no command reads its memory or environment
    # (nor attaches to it, which the same check refuses)
    ops = create_sandbox_shell_operations(LandlockSandbox([str(root)]))
    _, output = await run_shell(
        ops,
        "cat /proc/$PPID/environ >/dev/null 2>&1; echo environ=$?; "
        "head -c1 /proc/$PPID/mem >/dev/null 2>&1; echo mem=$?; "
        "cat /proc/$$/environ >/dev/null 2>&1; echo own=$?",
        root,
    )
    said = dict(line.split("=") for line in output.split())
    assert said["own"] == "0", output  # (the check can pass: its own is readable)
    assert said["environ"] != "0", output
    assert said["mem"] != "0", output


async def test_what_an_ended_command_left_dies_not_what_a_running_one_left(root: Path) -> None:
    # each command's process adopts what it leaves while it runs: the server kills a
    # process it adopted (an ended command's) and leaves a running command's alone
    ops = create_sandbox_shell_operations(LandlockSandbox([str(root)]))
    seen = bytearray()
    ready = trio.Event()

    async def sink(chunk: bytes) -> None:
        seen.extend(chunk)
        if seen.count(b"\n") == 2:
            ready.set()

    def leaving(name: str, then: str) -> ShellSpawnRequest:
        return ShellSpawnRequest(
            command=f"mkfifo {name}; setsid -f env -i /bin/bash -c 'echo $$ > {name}; "
            f"exec sleep 300'; read d < {name}; echo {name}=$d; {then}",
            shell_path="/bin/bash",
            cwd=str(root),
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        )

    said: list[bytes] = []

    async def keep(chunk: bytes) -> None:
        said.append(chunk)

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ops.run, leaving("a", "echo command=$$; exec sleep 300"), sink)
            await ready.wait()
            running = {k: int(v) for k, v in (line.split("=") for line in seen.decode().split())}
            ended = await ops.run(leaving("b", "exit 3"), keep)
            assert ended.exit_code == 3
            gone = int(b"".join(said).decode().split("=")[1])
            assert not _alive(gone)
            assert _alive(running["a"])
            os.kill(running["command"], signal.SIGKILL)
    assert not _alive(running["a"])


async def test_a_command_that_gives_up_being_a_subreaper_leaves_nothing_either(
    root: Path, run_shell: RunShell
) -> None:
    # its orphan reaches the server while the command runs (no signal says so): it is
    # still killed before the call returns
    code = (
        "import ctypes, os, signal\n"
        "assert ctypes.CDLL(None).prctl(36, 0, 0, 0, 0) == 0\n"  # PR_SET_CHILD_SUBREAPER, 0
        "r, w = os.pipe()\n"
        "if os.fork() == 0:\n"
        "    if os.fork() == 0:\n"
        "        os.write(w, str(os.getpid()).encode())\n"
        "        signal.pause()\n"  # an orphan once its parent is gone
        "    os._exit(0)\n"
        "os.wait()\n"
        "print(os.read(r, 64).decode())\n"
    )
    ops = create_sandbox_shell_operations(LandlockSandbox([str(root)]))
    with trio.fail_after(30):
        result, output = await run_shell(ops, f'exec {sys.executable} -I -S -c "{code}"', root)
    assert result.exit_code == 0, output
    assert not _alive(int(output))


async def test_closing_the_server_ends_what_it_runs(root: Path) -> None:
    sandbox = LandlockSandbox([str(root)])
    ops = create_sandbox_shell_operations(sandbox)
    tag = f"prism-close-{os.getpid()}-{id(root)}"
    started = trio.Event()

    async def sink(chunk: bytes) -> None:
        started.set()

    request = ShellSpawnRequest(
        command=f"echo go; exec -a {tag} sleep 300",
        shell_path="/bin/bash",
        cwd=str(root),
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ops.run, request, sink)
            await started.wait()
            server = sandbox._server
            assert server is not None
            pid = _server_pid(sandbox)
            await trio.to_thread.run_sync(server.close)
    assert not _alive(pid)
    assert not [p for p in _pids() if tag.encode() in _cmdline(p)]


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read() if _alive(pid) else b""
    except OSError:
        return b""


async def test_a_helper_that_cannot_serve_makes_the_sandbox_unavailable(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prism.coding.security import SandboxUnavailableError, _landlock_server

    broken = tmp_path / "broken.py"
    broken.write_text("raise SystemExit(3)\n")
    monkeypatch.setattr(_landlock_server, "_HELPER", str(broken))
    with pytest.raises(SandboxUnavailableError, match="ended before the command started, twice"):
        await LandlockSandbox([str(root)]).ensure_available()


async def test_a_missing_interpreter_makes_the_sandbox_unavailable(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prism.coding.security import SandboxUnavailableError, _landlock_server

    monkeypatch.setattr(_landlock_server, "_PYTHON", str(tmp_path / "no-python"))
    with pytest.raises(SandboxUnavailableError, match="could not run"):
        await LandlockSandbox([str(root)]).ensure_available()


async def test_a_request_over_the_limit_is_refused_unrun(root: Path, run_shell: RunShell) -> None:
    from prism.coding.security import SandboxUnavailableError

    ops = create_sandbox_shell_operations(LandlockSandbox([str(root)]))
    huge = {"PATH": "/usr/bin:/bin", "BIG": "x" * (17 << 20)}
    with pytest.raises(SandboxUnavailableError, match="refused the command"):
        await run_shell(ops, "echo ran > ran.txt", root, env=huge)
    assert not (root / "ran.txt").exists()


async def test_a_malformed_request_is_refused_and_the_server_stays(
    root: Path, run_shell: RunShell
) -> None:
    # a field of the wrong type ends that command's request, not the server
    from prism.coding.security import SandboxUnavailableError

    sandbox = LandlockSandbox([str(root)])
    ops = create_sandbox_shell_operations(sandbox)
    await run_shell(ops, "true", root)
    server = sandbox._server
    assert server is not None
    first = _server_pid(sandbox)

    async def sink(chunk: bytes) -> None:
        pass

    with pytest.raises(SandboxUnavailableError, match="refused the command"):
        await server.run(
            ["sh", "-c", "echo ran > ran.txt"],
            cwd=str(root),
            env={"PATH": "/usr/bin:/bin"},
            on_output=sink,
            kill_grace_s=0,
            extra={"fds": 5},
        )
    assert not (root / "ran.txt").exists()
    assert _server_pid(sandbox) == first


async def test_no_descriptor_of_the_helper_reaches_the_command(
    root: Path, run_shell: RunShell
) -> None:
    # the server's control socket, the command's own socket, the ruleset: none is inherited
    ops = create_sandbox_shell_operations(LandlockSandbox([str(root)]))
    _, output = await run_shell(ops, "ls /proc/$$/fd", root)
    assert output.split() == ["0", "1", "2"]


@pytest.mark.parametrize(
    "make",
    [LandlockSandbox, pytest.param(BubblewrapSandbox, marks=pytest.mark.bwrap)],
)
async def test_commands_get_default_signals_not_the_servers(
    root: Path, run_shell: RunShell, make: type[LandlockSandbox | BubblewrapSandbox]
) -> None:
    """A closed pipe kills the writer (status 141), as outside the sandbox.

    The server is Python, which ignores SIGPIPE and SIGXFSZ, and an ignored signal
    stays ignored across exec: ``yes | head`` ended with "Broken pipe", status 1,
    and a shell loop writing to a closed pipe ran until the timeout.
    """
    ops = create_sandbox_shell_operations(make([str(root)]))
    command = (
        "(yes; echo yes=$? >&2) | head -n 1;"
        " (while :; do echo y; done; echo loop=$? >&2) | head -n 1;"
        " grep -E '^Sig(Ign|Blk)' /proc/self/status"
    )
    result, output = await run_shell(ops, command, root)
    assert result.exit_code == 0, output
    assert "yes=141" in output, output
    assert "loop=" not in output  # the subshell itself died of SIGPIPE (it looped forever)
    assert "Broken pipe" not in output
    fields = dict(line.split(":") for line in output.splitlines() if line.startswith("Sig"))
    assert int(fields["SigBlk"], 16) == 0
    ignored = int(fields["SigIgn"], 16)
    for signum in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        assert not ignored & (1 << (signum - 1)), signum
    assert ignored == 0, hex(ignored)


async def test_a_signal_ignored_where_prism_started_is_not_ignored_by_commands(
    root: Path, run_shell: RunShell
) -> None:
    """An action inherited by the helper (``nohup``, ``trap '' USR1``) is reset too."""
    previous = signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    try:
        ops = create_sandbox_shell_operations(LandlockSandbox([str(root)]))
        _, output = await run_shell(ops, "grep '^SigIgn' /proc/self/status", root)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert int(output.split()[1], 16) == 0, output


def test_the_bounding_set_is_shrunk_one_by_one_only_where_the_kernel_lets_it() -> None:
    """Each command skips the 41 PR_CAPBSET_DROP calls only where every one would fail.

    In a throwaway process: dropping CAP_SETPCAP from the bounding set succeeds
    exactly when the server's check says it may (root: yes; a user: EPERM).
    """
    import subprocess
    import sys

    from prism.coding.security import _landlock_exec

    code = (
        "from prism.coding.security import _landlock_exec as m\n"
        "may = m._may_shrink_bounding_set()\n"
        "print(may, m._libc.prctl(m.PR_CAPBSET_DROP, m._CAP_SETPCAP, 0, 0, 0) == 0)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30
    ).stdout.split()
    assert out[0] == out[1], out
    assert str(_landlock_exec._may_shrink_bounding_set()) == out[0]


def test_the_signals_each_command_resets_are_found_before_the_fork() -> None:
    """The list the server hands each command: every action not the default, and the given ones."""
    from prism.coding.security._landlock_exec import _handled_signals

    previous = signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    try:
        found = _handled_signals((signal.SIGTERM,))
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert signal.SIGPIPE in found  # Python ignores it
    assert signal.SIGUSR1 in found
    assert signal.SIGTERM in found
    assert signal.SIGKILL not in found
    assert signal.SIGUSR2 not in _handled_signals()
