"""Spawning a command, streaming its merged output, and terminating its whole tree.

A process tree is found three ways at once, because each alone misses
something: the descendants of the root (by walking ``/proc`` parent links),
every process still in the root's session or process group (descendants that
were re-parented to init after their parent exited), and every process whose
environment carries the run's random marker (descendants that called
``setsid`` *and* lost their parent). Only a process that both escaped the
session and cleared its environment can get away; a PID-namespace sandbox
closes that gap.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import signal
import subprocess
from typing import TYPE_CHECKING

import attrs
import trio

from ._errors import InvalidToolOptionError
from ._protocols import OutputSink, ShellExit, ShellSpawnRequest

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "DEFAULT_KILL_GRACE_S",
    "PROCESS_TREE_ENV_VAR",
    "LocalShellOperations",
    "default_shell_path",
    "run_process_tree",
    "terminate_process_tree",
]

PROCESS_TREE_ENV_VAR = "PRISM_PROCESS_TREE"
"""Environment variable carrying each run's random marker, used to find escaped descendants."""

DEFAULT_KILL_GRACE_S = 1.0
"""Seconds between SIGTERM and SIGKILL when a tree is terminated."""

_READ_SIZE = 64 * 1024
_DRAIN_AFTER_EXIT_S = 0.25
_KILL_WAIT_S = 2.0
_POLL_S = 0.01


def default_shell_path() -> str:
    """The shell the tools use when none is configured: ``bash`` on ``PATH``, else ``/bin/sh``."""
    return shutil.which("bash") or "/bin/sh"


@attrs.frozen
class _Proc:
    pid: int
    ppid: int
    pgrp: int
    session: int
    start: int
    state: str


def _read_proc(pid: int) -> _Proc | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    # The command name sits in parentheses and may itself contain spaces and ')'.
    end = raw.rfind(b")")
    fields = raw[end + 2 :].split()
    try:
        return _Proc(
            pid=pid,
            state=fields[0].decode("ascii", "replace"),
            ppid=int(fields[1]),
            pgrp=int(fields[2]),
            session=int(fields[3]),
            start=int(fields[19]),
        )
    except (IndexError, ValueError):
        return None


def _all_procs() -> list[_Proc]:
    procs = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if name.isdigit():
            proc = _read_proc(int(name))
            if proc is not None:
                procs.append(proc)
    return procs


def _has_marker(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return marker in f.read()
    except OSError:
        return False


def _collect(root: int, marker: bytes | None, root_reaped: bool) -> dict[int, int]:
    """Live members of ``root``'s tree, as ``{pid: start time}`` (zombies left out).

    Once the root has been reaped its PID may belong to a stranger: then the
    PID and its children are never taken, and the session and group IDs only
    while no live process holds that PID (the kernel does not hand out a PID
    still used as a session or group ID, so a holder means reuse).
    """
    procs = _all_procs()
    protected = {0, 1, os.getpid(), os.getppid()}
    reused = root_reaped and any(proc.pid == root for proc in procs)
    children: dict[int, list[_Proc]] = {}
    for proc in procs:
        children.setdefault(proc.ppid, []).append(proc)
    found: dict[int, _Proc] = {}
    stack = [] if root_reaped else [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child.pid not in found:
                found[child.pid] = child
                stack.append(child.pid)
    for proc in procs:
        if proc.pid in found or proc.pid in protected:
            continue
        if root_reaped and proc.pid == root:
            continue
        in_session = not reused and root in (proc.pid, proc.session, proc.pgrp)
        if in_session or (marker is not None and _has_marker(proc.pid, marker)):
            found[proc.pid] = proc
    return {
        pid: proc.start for pid, proc in found.items() if pid not in protected and proc.state != "Z"
    }


def _alive(members: Mapping[int, int]) -> dict[int, int]:
    alive = {}
    for pid, start in members.items():
        proc = _read_proc(pid)
        if proc is not None and proc.start == start and proc.state != "Z":
            alive[pid] = start
    return alive


def _signal_all(members: Iterable[int], signum: int) -> None:
    for pid in members:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def _freeze_and_collect(root: int, marker: bytes | None, root_reaped: bool) -> dict[int, int]:
    """Stop every member so none can fork past us, re-walking until the set is stable."""
    members: dict[int, int] = {}
    for _ in range(8):
        found = _collect(root, marker, root_reaped)
        new = {pid: start for pid, start in found.items() if pid not in members}
        if not new:
            break
        _signal_all(_alive(new), signal.SIGSTOP)
        members.update(new)
    return members


async def _wait_gone(members: dict[int, int], limit_s: float) -> dict[int, int]:
    with trio.move_on_after(limit_s):
        while True:
            members = _alive(members)
            if not members:
                return members
            await trio.sleep(_POLL_S)
    return _alive(members)


async def terminate_process_tree(
    root: int,
    *,
    marker: str | None = None,
    grace_s: float = DEFAULT_KILL_GRACE_S,
    root_reaped: bool = False,
) -> None:
    """Terminate ``root`` and all its descendants: SIGTERM, ``grace_s`` of grace, SIGKILL.

    Members are found by walking ``/proc`` (children of children), by the
    root's session and process group, and, when ``marker`` is given, by the
    ``PRISM_PROCESS_TREE=<marker>`` entry in a process's environment, which
    catches grandchildren that called ``setsid`` and were re-parented. Every
    member is stopped (SIGSTOP) before it is signalled so it cannot fork new
    ones in between; the caller's own process and its parent are never
    signalled. Pass ``root_reaped=True`` once the root's exit status has
    been collected: its PID may then be reused, and only what is provably
    ours (session members while the PID is unused, marked processes) is taken.

    Checkpoints. The work is shielded from cancellation and bounded in time
    (about ``grace_s`` plus two seconds); it returns when every member found
    is gone or that bound has passed.
    """
    needle = f"{PROCESS_TREE_ENV_VAR}={marker}".encode() if marker else None
    with trio.CancelScope(shield=True), trio.move_on_after(grace_s + 2 * _KILL_WAIT_S):
        members = await trio.to_thread.run_sync(_freeze_and_collect, root, needle, root_reaped)
        if not members:
            return
        _signal_all(members, signal.SIGTERM)
        _signal_all(members, signal.SIGCONT)
        remaining = await _wait_gone(members, grace_s)
        late = await trio.to_thread.run_sync(_freeze_and_collect, root, needle, root_reaped)
        remaining.update(late)
        if remaining:
            _signal_all(remaining, signal.SIGKILL)
            await _wait_gone(remaining, _KILL_WAIT_S)


def _exit_of(returncode: int, pid: int) -> ShellExit:
    if returncode < 0:
        return ShellExit(exit_code=None, signal=-returncode, pid=pid)
    return ShellExit(exit_code=returncode, signal=None, pid=pid)


async def run_process_tree(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    on_output: OutputSink,
    kill_grace_s: float = DEFAULT_KILL_GRACE_S,
) -> ShellExit:
    """Run ``argv`` in a new session, stream its merged output, and leave no process behind.

    The building block of :class:`LocalShellOperations`, public so that a
    sandbox can wrap ``argv`` in its launcher and keep the same contract.
    stdin is ``/dev/null``; stdout and stderr share one pipe, read in chunks
    of 64 KiB, each awaited through ``on_output`` before the next read. The
    environment is ``env`` plus ``PRISM_PROCESS_TREE`` (a random marker used
    to find escaped descendants).

    When the root process exits, output still in the pipe is drained for a
    moment; then anything left of its tree is terminated (see
    :func:`terminate_process_tree`) and the rest of the output is read.

    Checkpoints. On cancellation, or when ``on_output`` raises, the whole tree
    is terminated (shielded, time-bounded) before the exception propagates.

    Raises:
        OSError: the process could not be started (missing program or ``cwd``).
        InvalidToolOptionError: ``argv`` is empty or ``kill_grace_s`` is not
            a finite number >= 0.
    """
    argv = list(argv)
    if not argv:
        raise InvalidToolOptionError("argv must not be empty")
    if not isinstance(kill_grace_s, (int, float)) or not 0 <= kill_grace_s < float("inf"):
        raise InvalidToolOptionError(f"kill_grace_s must be a number >= 0, got {kill_grace_s!r}")
    marker = secrets.token_hex(16)
    full_env = {**env, PROCESS_TREE_ENV_VAR: marker}
    process = await trio.lowlevel.open_process(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=cwd,
        env=full_env,
        start_new_session=True,
    )
    stdout = process.stdout
    assert stdout is not None
    eof = trio.Event()
    swept = False

    async def reap_leftovers() -> None:
        nonlocal swept
        await process.wait()
        with trio.move_on_after(_DRAIN_AFTER_EXIT_S):
            await eof.wait()
        await terminate_process_tree(
            process.pid, marker=marker, grace_s=kill_grace_s, root_reaped=True
        )
        swept = True

    sink_error: Exception | None = None
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(reap_leftovers)
            while True:
                try:
                    chunk = await stdout.receive_some(_READ_SIZE)
                except trio.ClosedResourceError:
                    break
                if not chunk:
                    break
                try:
                    await on_output(chunk if isinstance(chunk, bytes) else bytes(chunk))
                except Exception as exc:
                    # Re-raised below as it is, not wrapped in the nursery's ExceptionGroup.
                    sink_error = exc
                    nursery.cancel_scope.cancel()
                    break
            eof.set()
    finally:
        if not swept:
            await terminate_process_tree(
                process.pid,
                marker=marker,
                grace_s=kill_grace_s,
                root_reaped=process.returncode is not None,
            )
        with trio.CancelScope(shield=True):
            with trio.move_on_after(_KILL_WAIT_S):
                await process.wait()
            await stdout.aclose()
    if sink_error is not None:
        raise sink_error
    returncode = process.returncode
    if returncode is None:  # pragma: no cover - the root ignored SIGKILL for two seconds
        raise OSError(errno.ETIMEDOUT, f"process {process.pid} did not exit after SIGKILL")
    return _exit_of(returncode, process.pid)


@attrs.frozen(kw_only=True)
class LocalShellOperations:
    """The plain :class:`ShellOperations`: runs ``shell_path -c command`` on this host.

    **Not contained**: the command runs with this process's user, filesystem
    and network; only the execution policy stands in front of it. The
    process runs in a new session and its whole tree is terminated on
    timeout, cancellation and after it exits (see :func:`run_process_tree`).

    Attributes:
        kill_grace_s: seconds between SIGTERM and SIGKILL (default 1).
    """

    kill_grace_s: float = DEFAULT_KILL_GRACE_S

    def __attrs_post_init__(self) -> None:
        grace = self.kill_grace_s
        if isinstance(grace, bool) or not isinstance(grace, (int, float)):
            raise InvalidToolOptionError(f"kill_grace_s must be a number, got {grace!r}")
        if not 0 <= grace <= 60:
            raise InvalidToolOptionError(f"kill_grace_s must be within [0, 60], got {grace!r}")

    async def run(self, request: ShellSpawnRequest, on_output: OutputSink) -> ShellExit:
        """Run ``request.argv``; see :meth:`ShellOperations.run` for the contract."""
        return await run_process_tree(
            request.argv,
            cwd=request.cwd,
            env=request.env,
            on_output=on_output,
            kill_grace_s=self.kill_grace_s,
        )
