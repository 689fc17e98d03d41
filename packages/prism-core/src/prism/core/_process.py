"""Terminating a whole process tree: every descendant, however it tried to get away.

A process tree is found three ways at once, because each alone misses
something: the descendants of the root (by walking ``/proc`` parent links),
every process still in the root's session or process group (descendants that
were re-parented to init after their parent exited), and every process whose
environment carries the run's random marker (descendants that called
``setsid`` *and* lost their parent). Only a process that both escaped the
session and cleared its environment can get away; a PID-namespace sandbox
closes that gap.

Used by ``prism.coding.tools`` (shell commands) and ``prism.mcp`` (stdio
servers), so that both keep one contract: nothing they start outlives them.
"""

from __future__ import annotations

import contextlib
import os
import signal
from typing import TYPE_CHECKING, NamedTuple

import trio

from ._options import integer, number, optional, string

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = ["DEFAULT_KILL_GRACE_S", "PROCESS_TREE_ENV_VAR", "terminate_process_tree"]

PROCESS_TREE_ENV_VAR = "PRISM_PROCESS_TREE"
"""Environment variable carrying a run's random marker, used to find escaped descendants."""

DEFAULT_KILL_GRACE_S = 1.0
"""Seconds between SIGTERM and SIGKILL when a tree is terminated."""

_KILL_WAIT_S = 2.0
_POLL_S = 0.01
_FREEZE_ROUNDS = 8


class _Proc(NamedTuple):
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
    for _ in range(_FREEZE_ROUNDS):
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
    ``PRISM_PROCESS_TREE=<marker>`` entry in a process's environment (see
    :data:`PROCESS_TREE_ENV_VAR`), which catches descendants that called
    ``setsid`` and were re-parented. Start the root in a new session with
    that entry in its environment to get all three. Every member is stopped
    (SIGSTOP) before it is signalled so it cannot fork new ones in between,
    and its start time is re-checked before SIGKILL so a PID reused in the
    meantime is left alone; the caller's own process and its parent are never
    signalled. Pass ``root_reaped=True`` once the root's exit status has been
    collected: its PID may then be reused, and only what is provably ours
    (session members while the PID is unused, marked processes) is taken.

    A process that left the session *and* cleared its environment *and* was
    orphaned cannot be found from userspace; a PID-namespace sandbox closes
    that gap. Linux only (it reads ``/proc``); elsewhere it finds nothing.

    Args:
        root: PID of the process at the top of the tree (>= 2).
        marker: the random value the tree's processes carry in
            :data:`PROCESS_TREE_ENV_VAR`, or ``None`` to skip that search.
        grace_s: seconds between SIGTERM and SIGKILL (finite, >= 0).
        root_reaped: the root's exit status has already been collected.

    Raises:
        ConfigurationError: ``root`` is not a PID >= 2, ``marker`` is empty,
            or ``grace_s`` is not a finite number >= 0 (raised before any signal).

    Checkpoints, but only inside a shield: the work is shielded from
    cancellation and bounded in time (about ``grace_s`` plus four seconds).
    It never raises ``trio.Cancelled`` itself, so it is safe in a ``finally``
    block: a cancelled caller still gets a terminated tree, and the pending
    cancellation is delivered at the caller's next checkpoint. It returns when
    every member found is gone or that bound has passed.
    """
    owner = "terminate_process_tree"
    integer(minimum=2).check(owner, "root", root)
    optional(string()).check(owner, "marker", marker)
    number(minimum=0).check(owner, "grace_s", grace_s)
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
