"""The Landlock fork server, from Prism's side: started once, one fork per command.

Starting ``python -I -S`` for every command cost about 30 ms of CPU. Instead one
helper process per :class:`~prism.coding.security.LandlockSandbox` is started on
first use (``_landlock_exec.py --serve``; its protocol is described there). It
keeps the Landlock ruleset and the seccomp program ready, and a spawner forked
from it that restricted itself once; for each command the spawner spawns (vfork
and exec) the command's process, which inherits every restriction, and, as the
child subreaper of what the command leaves behind, kills what is left when it
ends. No fork of an interpreter and no interpreter start per command.

Prism hands the server, over a unix socket, a socket for the command and the
write end of the command's output pipe; the command's request (argv, working
directory, environment) and its start, exit status and end travel on the
command's socket. The contract is :func:`~prism.coding.tools.run_process_tree`'s:
output streamed in order, the whole tree ended when the command ends, on
cancellation and when the output sink raises, all before returning.
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import secrets
import select
import signal
import socket
import subprocess
import sys
import weakref
from typing import TYPE_CHECKING

import trio

from prism.coding.tools import ShellExit
from prism.core.process import PROCESS_TREE_ENV_VAR, terminate_process_tree

from . import _landlock_exec
from ._errors import SandboxUnavailableError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from prism.coding.tools import OutputSink

__all__ = ["ForkServer"]

_HELPER = _landlock_exec.__file__
_PYTHON = sys.executable
_READ_SIZE = 64 * 1024
_KILL_WAIT_S = 2.0
_CLOSE_WAIT_S = 5.0


def _close(process: subprocess.Popen[bytes], control: socket.socket) -> None:
    """End a server: its end of file makes it kill what it started and exit; reap it."""
    control.close()
    try:
        process.wait(timeout=_CLOSE_WAIT_S)
    except subprocess.TimeoutExpired:  # pragma: no cover - a server stuck in the kernel
        process.kill()
        process.wait()


class _Replies:
    """Lines the server writes on the command's socket."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buffer = b""

    async def line(self) -> bytes | None:
        """The next line (without its newline), or None at end of file."""
        while b"\n" not in self.buffer:
            try:
                chunk = await self.stream.receive_some(4096)
            except trio.BrokenResourceError:  # pragma: no cover - reset: it died, our byte unread
                chunk = b""
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line


class _ServerGone(Exception):
    """The server had ended before it took the command: nothing ran."""


class ForkServer:
    """One fork server process and its control socket (started on first use)."""

    def __init__(self, config: str, *, what: str) -> None:
        """Remember ``config``, ``_landlock_exec.py``'s JSON; ``what`` names it in errors.

        ``config``: ``{"mode": "namespaces"}`` for bubblewrap's launcher, else the
        Landlock configuration (roots, network, seccomp program, limits).
        """
        self._config = config
        self._what = what
        self._control: socket.socket | None = None
        self._finalizer: weakref.finalize[..., ForkServer] | None = None
        self._lock = trio.Lock()
        self.pid: int | None = None
        """The process id of the process started (Landlock: the server's guardian,
        the server's parent) while it runs (for tests and diagnostics)."""

    def _spawn(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            process = subprocess.Popen(
                [_PYTHON, "-I", "-S", _HELPER, "--serve", str(theirs.fileno()), self._config],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
                cwd="/",
                env={"PATH": os.defpath},
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        self._control = ours
        self.pid = process.pid
        self._finalizer = weakref.finalize(self, _close, process, ours)

    def close(self) -> None:
        """Stop the server (it kills whatever still runs) and reap it. Idempotent."""
        if self._finalizer is not None:
            self._finalizer()
        self._finalizer = None
        self._control = None
        self.pid = None

    async def _forget(self, control: socket.socket) -> None:
        async with self._lock:
            if self._control is control:
                self.close()

    async def _hand_over(self, fds: list[int]) -> socket.socket:
        """Give ``fds`` to the server, started first when none runs; the control socket.

        Raises:
            _ServerGone: the server had ended (it is forgotten: the next call starts one).
        """
        async with self._lock:
            if self._control is None:
                await trio.to_thread.run_sync(self._spawn)
            control = self._control
            assert control is not None
        message = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
        while True:
            try:
                control.sendmsg([b"R"], message)
            except BlockingIOError:  # pragma: no cover - a server busy forking under load
                await trio.lowlevel.wait_writable(control)
                continue
            except (BrokenPipeError, ConnectionResetError) as exc:
                await self._forget(control)
                raise _ServerGone from exc
            await trio.lowlevel.checkpoint()
            return control

    @staticmethod
    def _gone(control: socket.socket) -> bool:
        """Whether the server behind ``control`` has ended (its end of the socket closed)."""
        poller = select.poll()
        poller.register(control, select.POLLIN)
        return bool(poller.poll(0))

    async def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str,
        env: Mapping[str, str],
        on_output: OutputSink,
        kill_grace_s: float,
        extra: Mapping[str, object] | None = None,
        passed: Sequence[tuple[int, int]] = (),
    ) -> ShellExit:
        """Run ``argv`` restricted, stream its merged output; leave no process behind.

        ``extra``: more request fields (bubblewrap's launcher: ``overlays``, ``seccomp``).
        ``passed``: (a descriptor of ours, the descriptor the command gets it on), for
        bubblewrap's launcher only; ours stay open.

        A server that had died is started again, and the command given to the new
        one (the dead one ran nothing of it).

        Raises:
            OSError: ``cwd`` cannot be entered (nothing ran).
            SandboxUnavailableError: the helper ended before the command started.
        """
        marker = secrets.token_hex(16)
        request = {
            "argv": list(argv),
            "cwd": os.path.join(os.getcwd(), cwd),
            "env": {**env, PROCESS_TREE_ENV_VAR: marker},
            **(extra or {}),
        }
        if passed:
            request["fds"] = [target for _, target in passed]
        payload = json.dumps(request).encode()
        payload = len(payload).to_bytes(4, "big") + payload
        for _ in range(2):
            with contextlib.suppress(_ServerGone):
                return await self._attempt(
                    payload, marker, cwd, on_output, kill_grace_s, [fd for fd, _ in passed]
                )
        raise SandboxUnavailableError(
            f"the {self._what} ended before the command started, twice; refusing to run unsandboxed"
        )

    async def _attempt(
        self,
        payload: bytes,
        marker: str,
        cwd: str,
        on_output: OutputSink,
        kill_grace_s: float,
        passed: list[int],
    ) -> ShellExit:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        read_fd, write_fd = os.pipe()
        try:
            control = await self._hand_over([theirs.fileno(), write_fd, *passed])
        except BaseException:
            ours.close()
            os.close(read_fd)
            raise
        finally:
            theirs.close()
            os.close(write_fd)
        ours.setblocking(False)
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
        output = trio.lowlevel.FdStream(read_fd)
        replies = _Replies(stream)
        pid: int | None = None
        status: int | None = None
        ended = False
        sink_error: Exception | None = None

        async def wait_for_end() -> None:
            nonlocal status, ended
            line = await replies.line()
            if line is not None and line.startswith(b"X "):
                status = int(line[2:])
                ended = True
                return
            # the server died (killed from outside): find the tree as run_process_tree does
            assert pid is not None
            await terminate_process_tree(pid, marker=marker, grace_s=kill_grace_s, root_reaped=True)
            ended = True

        try:
            with contextlib.suppress(trio.BrokenResourceError):
                await stream.send_all(payload)
            first = await replies.line()
            if first is None:
                ended = True  # nothing ran
                if self._gone(control):
                    await self._forget(control)
                    raise _ServerGone
                raise SandboxUnavailableError(
                    f"the {self._what} refused the command before it started; refusing to "
                    "run unsandboxed"
                )
            kind, _, rest = first.partition(b" ")
            if kind == b"E":
                ended = True  # nothing ran
                number, _, text = rest.partition(b" ")
                raise OSError(int(number), f"{text.decode(errors='replace')}: {cwd!r}")
            pid = int(rest)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(wait_for_end)
                while True:
                    chunk = await output.receive_some(_READ_SIZE)
                    if not chunk:
                        break
                    try:
                        await on_output(chunk)
                    except Exception as exc:
                        # Re-raised below as it is, not wrapped in the nursery's ExceptionGroup.
                        sink_error = exc
                        nursery.cancel_scope.cancel()
                        break
        finally:
            with trio.CancelScope(shield=True):
                if not ended:
                    await self._stop(stream, replies, pid, marker, kill_grace_s)
                await stream.aclose()
                await output.aclose()
        if sink_error is not None:
            raise sink_error
        assert pid is not None
        if status is None:
            return ShellExit(exit_code=None, signal=signal.SIGKILL, pid=pid)
        return ShellExit(exit_code=status, signal=None, pid=pid)

    async def _stop(
        self,
        stream: trio.SocketStream,
        replies: _Replies,
        pid: int | None,
        marker: str,
        kill_grace_s: float,
    ) -> None:
        """Ask the server to end the command's tree and wait until it says it did."""
        with contextlib.suppress(trio.BrokenResourceError):
            await stream.send_all(b"k")
        with trio.move_on_after(kill_grace_s + 2 * _KILL_WAIT_S):
            while (line := await replies.line()) is not None:
                if line.startswith(b"X "):
                    return
        if pid is not None:
            await terminate_process_tree(pid, marker=marker, grace_s=kill_grace_s, root_reaped=True)
