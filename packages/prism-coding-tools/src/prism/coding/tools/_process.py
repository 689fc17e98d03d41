"""Spawning a command, streaming its merged output, and terminating its whole tree.

The tree is terminated with :func:`prism.core.process.terminate_process_tree`, which
finds it three ways at once: the descendants of the root (by walking ``/proc``
parent links), every process still in the root's session or process group,
and every process whose environment carries the run's random marker
(:data:`~prism.core.process.PROCESS_TREE_ENV_VAR`). Only a process that both
escaped the session and cleared its environment can get away; a PID-namespace
sandbox closes that gap.
"""

from __future__ import annotations

import errno
import secrets
import shutil
import subprocess
from typing import TYPE_CHECKING

import attrs
import trio

from prism.core.options import number, sequence_of, string
from prism.core.process import DEFAULT_KILL_GRACE_S, PROCESS_TREE_ENV_VAR, terminate_process_tree

from ._common import check_option
from ._protocols import OutputSink, ShellExit, ShellSpawnRequest

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["LocalShellOperations", "default_shell_path", "run_process_tree"]

_READ_SIZE = 64 * 1024
_DRAIN_AFTER_EXIT_S = 0.25
_KILL_WAIT_S = 2.0
_ARGV = sequence_of(string(non_empty=False), non_empty=True)
_GRACE = number(minimum=0)
_SHELL_GRACE = number(minimum=0, maximum=60)


def default_shell_path() -> str:
    """The shell the tools use when none is configured: ``bash`` on ``PATH``, else ``/bin/sh``."""
    return shutil.which("bash") or "/bin/sh"


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
        CodingToolsConfigurationError: ``argv`` is empty or ``kill_grace_s`` is not
            a finite number >= 0.
    """
    argv = list(argv)
    check_option(_ARGV, "run_process_tree", "argv", argv)
    check_option(_GRACE, "run_process_tree", "kill_grace_s", kill_grace_s)
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
        check_option(_SHELL_GRACE, "LocalShellOperations", "kill_grace_s", self.kill_grace_s)

    async def run(self, request: ShellSpawnRequest, on_output: OutputSink) -> ShellExit:
        """Run ``request.argv``; see :meth:`ShellOperations.run` for the contract."""
        return await run_process_tree(
            request.argv,
            cwd=request.cwd,
            env=request.env,
            on_output=on_output,
            kill_grace_s=self.kill_grace_s,
        )
