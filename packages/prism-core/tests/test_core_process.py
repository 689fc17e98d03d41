"""terminate_process_tree against real process trees, checked by PID."""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from prism.core import ConfigurationError, _process
from prism.core.process import DEFAULT_KILL_GRACE_S, PROCESS_TREE_ENV_VAR, terminate_process_tree

PR_SET_CHILD_SUBREAPER = 36

# A child, a grandchild that started its own session, and a double-forked daemon
# (setsid -f: its parent exits at once, so it is re-parented away from our tree).
TREE = (
    "sleep 300 & echo child=$!; "
    "( setsid sleep 300 & echo grandchild=$!; wait ) & "
    "setsid -f sh -c 'echo daemon=$$; exec sleep 300'; "
    "wait"
)

# Only the double-forked daemon, left behind by a root that exits at once.
DAEMON_ONLY = "setsid -f sh -c 'echo daemon=$$; exec sleep 300 >/dev/null'"

IGNORES_TERM = """
import signal, sys, time
def on_term(signum, frame):
    sys.stdout.write("got-term\\n")
    sys.stdout.flush()
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
while True:
    time.sleep(1)
"""


def _alive(pid: int) -> bool:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return False
    return raw[raw.rfind(b")") + 2 :].split()[0] != b"Z"


def _env(marker: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != PROCESS_TREE_ENV_VAR}
    if marker is not None:
        env[PROCESS_TREE_ENV_VAR] = marker
    return env


async def _spawn(argv: list[str], marker: str | None) -> trio.Process:
    return await trio.lowlevel.open_process(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        env=_env(marker),
        start_new_session=True,
    )


async def _read_until(process: trio.Process, done: bytes | set[str]) -> bytes:
    """Read the process's stdout until it contains ``done`` (bytes or every PID name)."""
    assert process.stdout is not None
    seen = bytearray()
    while True:
        if isinstance(done, bytes) and done in seen:
            return bytes(seen)
        if isinstance(done, set) and seen.endswith(b"\n") and set(_pids(seen)) >= done:
            return bytes(seen)
        chunk = await process.stdout.receive_some(4096)
        assert chunk, f"stdout closed early: {bytes(seen)!r}"
        seen += chunk


def _pids(text: bytes | bytearray) -> dict[str, int]:
    return {name: int(pid) for name, pid in re.findall(r"(\w+)=(\d+)", text.decode())}


async def _close(process: trio.Process) -> None:
    with trio.fail_after(5):
        await process.wait()
    if process.stdout is not None:
        await process.stdout.aclose()


@pytest.mark.parametrize("children_lists", [True, False], ids=["search", "every-process"])
async def test_child_setsid_grandchild_and_double_forked_daemon_are_all_terminated(
    children_lists: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # without per-task children lists in /proc (a kernel without CONFIG_PROC_CHILDREN)
    # every process on the machine is read instead
    monkeypatch.setattr(_process, "_LISTS_CHILDREN", children_lists)
    marker = secrets.token_hex(16)
    stranger = await _spawn(["sleep", "300"], marker=None)
    root = await _spawn(["sh", "-c", TREE], marker)
    try:
        with trio.fail_after(15):
            pids = _pids(await _read_until(root, {"child", "grandchild", "daemon"}))
            assert all(_alive(pid) for pid in pids.values())
            await terminate_process_tree(root.pid, marker=marker, grace_s=0.5)
        assert [name for name, pid in pids.items() if _alive(pid)] == []
        assert not _alive(root.pid)
        # A process outside the tree (own session, no marker) is never touched.
        assert _alive(stranger.pid)
    finally:
        stranger.kill()
        await _close(stranger)
        await _close(root)


async def test_a_cancelled_caller_still_gets_the_whole_tree_terminated() -> None:
    marker = secrets.token_hex(16)
    root = await _spawn(["sh", "-c", TREE], marker)
    try:
        with trio.fail_after(15):
            pids = _pids(await _read_until(root, {"child", "grandchild", "daemon"}))
            with trio.CancelScope() as scope:
                scope.cancel()
                # Never raises Cancelled itself (safe in a finally block) ...
                await terminate_process_tree(root.pid, marker=marker, grace_s=0.5)
                assert [name for name, pid in pids.items() if _alive(pid)] == []
                # ... the cancellation arrives at the caller's next checkpoint.
                await trio.lowlevel.checkpoint()
            assert scope.cancelled_caught
        assert [name for name, pid in pids.items() if _alive(pid)] == []
    finally:
        await _close(root)


async def test_a_process_ignoring_sigterm_gets_sigterm_then_sigkill_after_the_grace() -> None:
    root = await _spawn([sys.executable, "-c", IGNORES_TERM], marker=None)
    try:
        with trio.fail_after(15):
            await _read_until(root, b"ready\n")
            await terminate_process_tree(root.pid, grace_s=1.0)
            assert not _alive(root.pid)
            await root.wait()
            assert root.stdout is not None
            rest = bytearray()
            while chunk := await root.stdout.receive_some(4096):
                rest += chunk
        assert b"got-term" in rest
        assert root.returncode == -9
    finally:
        await _close(root)


async def test_the_marker_finds_a_daemon_that_left_a_reaped_roots_session() -> None:
    marker = secrets.token_hex(16)
    root = await _spawn(["sh", "-c", DAEMON_ONLY], marker)
    try:
        with trio.fail_after(15):
            daemon = _pids(await _read_until(root, {"daemon"}))["daemon"]
            await root.wait()
            # Not a descendant, not in the session: without the marker it is out of reach.
            await terminate_process_tree(root.pid, grace_s=0.1, root_reaped=True)
            assert _alive(daemon)
            await terminate_process_tree(root.pid, marker=marker, grace_s=0.5, root_reaped=True)
        assert not _alive(daemon)
    finally:
        if _alive(daemon):
            os.kill(daemon, 9)
        await _close(root)


# A marked daemon whose child left the session and cleared its environment while
# the daemon lived: only its parentage ties it to the tree.
DAEMON_AND_ESCAPEE = (
    'setsid -f sh -c \'env -i setsid sh -c "echo escapee=\\$\\$; exec sleep 300 >/dev/null" & '
    "echo daemon=$$; exec sleep 300 >/dev/null'"
)


def _environ(pid: int) -> bytes:
    return Path(f"/proc/{pid}/environ").read_bytes()


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _parent(pid: int) -> int:
    raw = Path(f"/proc/{pid}/stat").read_bytes()
    return int(raw[raw.rfind(b")") + 2 :].split()[1])


async def test_a_marked_daemons_child_that_cleared_its_environment_goes_with_it() -> None:
    marker = secrets.token_hex(16)
    root = await _spawn(["sh", "-c", DAEMON_AND_ESCAPEE], marker)
    pids: dict[str, int] = {}
    try:
        with trio.fail_after(15):
            pids = _pids(await _read_until(root, {"daemon", "escapee"}))
            await root.wait()
            escapee = pids["escapee"]
            assert PROCESS_TREE_ENV_VAR.encode() not in _environ(escapee)
            assert _parent(escapee) == pids["daemon"]
            await terminate_process_tree(root.pid, marker=marker, grace_s=0.5, root_reaped=True)
        assert [name for name, pid in pids.items() if _alive(pid)] == []
    finally:
        for pid in pids.values():
            if _alive(pid):
                os.kill(pid, 9)
        await _close(root)


async def test_a_daemon_adopted_by_the_caller_as_child_subreaper_is_found() -> None:
    # Orphans go to the nearest child subreaper above them, here this process, not init.
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    marker = secrets.token_hex(16)
    daemon = 0
    try:
        root = await _spawn(["sh", "-c", DAEMON_ONLY], marker)
        with trio.fail_after(15):
            daemon = _pids(await _read_until(root, {"daemon"}))["daemon"]
            await root.wait()
            assert _parent(daemon) == os.getpid()
            await terminate_process_tree(root.pid, marker=marker, grace_s=0.5, root_reaped=True)
            assert not _alive(daemon)
        await _close(root)
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        if daemon:
            with contextlib.suppress(ProcessLookupError):
                os.kill(daemon, 9)
            _reap(daemon)  # adopted here: ours to reap


async def test_terminate_never_signals_the_caller() -> None:
    # Our own PID as the root: the walk must skip this process and its parent.
    with trio.fail_after(5):
        await terminate_process_tree(os.getpid(), grace_s=0.1)
    assert _alive(os.getpid())
    assert _alive(os.getppid())


async def test_a_reaped_roots_reused_pid_is_never_signalled() -> None:
    # A stranger that now holds the PID (and leads its own session, as a reused PID may).
    stranger = await trio.lowlevel.open_process(["sleep", "30"], start_new_session=True)
    try:
        with trio.fail_after(5):
            await terminate_process_tree(stranger.pid, grace_s=0.1, root_reaped=True)
        assert _alive(stranger.pid)
    finally:
        stranger.kill()
        await stranger.wait()


async def test_a_tree_that_is_already_gone_returns_at_once() -> None:
    root = await _spawn(["true"], marker=None)
    await _close(root)
    with trio.fail_after(5):
        await terminate_process_tree(root.pid, grace_s=DEFAULT_KILL_GRACE_S, root_reaped=True)


@pytest.mark.parametrize(
    ("option", "kwargs"),
    [
        ("root", {"root": 0}),
        ("root", {"root": 1}),
        ("root", {"root": -3}),
        ("root", {"root": True}),
        ("root", {"root": "123"}),
        ("marker", {"marker": ""}),
        ("grace_s", {"grace_s": -1}),
        ("grace_s", {"grace_s": math.nan}),
        ("grace_s", {"grace_s": math.inf}),
        ("grace_s", {"grace_s": True}),
        ("grace_s", {"grace_s": "1"}),
    ],
)
async def test_bad_options_raise_configuration_error_naming_the_option(
    option: str, kwargs: dict[str, object]
) -> None:
    arguments: dict[str, object] = {"root": 2**22 + 12345, **kwargs}
    with pytest.raises(ConfigurationError, match=option):
        await terminate_process_tree(**arguments)  # type: ignore[arg-type]
