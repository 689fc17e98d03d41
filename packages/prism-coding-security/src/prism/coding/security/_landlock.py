"""A :class:`SandboxBackend` built on Landlock and seccomp, for where bwrap cannot run."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, ClassVar

import attrs
import trio

from prism.core.options import boolean

from . import _landlock_exec
from ._errors import SandboxUnavailableError
from ._landlock_server import ForkServer
from ._limits import CPU_TIME, MEMORY, PROCESSES
from ._paths import normalize_roots
from ._seccomp import LANDLOCK_FILTER, LANDLOCK_NO_SOCKETS_FILTER

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from prism.coding.tools import OutputSink, ShellExit

__all__ = ["LandlockSandbox"]

_PROBE_TIMEOUT_S = 15.0
_HELPER = _landlock_exec.__file__


def _roots(value: Sequence[str]) -> tuple[str, ...]:
    return normalize_roots(
        value, owner="LandlockSandbox", option="writable_roots", allow_empty=True
    )


@attrs.define(eq=False)
class LandlockSandbox:
    """A :class:`SandboxBackend` built on Landlock, for machines where bwrap cannot run.

    A small helper (``python -I -S``, standard library only) restricts itself
    and then ``exec``s the command, so the restriction holds for the command
    and everything it starts, and cannot be lifted:

    * files: read and execute anywhere, write only below ``writable_roots``
      (and ``/dev/null``);
    * seccomp: ``socket(AF_UNIX, ...)`` and io_uring fail with EPERM; without
      ``network``, ``socket()`` fails for every address family;
    * Landlock ABI >= 4, without ``network``: TCP bind and connect are refused
      as well; ABI >= 6: no abstract unix socket or signal outside the sandbox.

    It is weaker than :class:`BubblewrapSandbox`: no private ``/tmp`` (set
    ``TMPDIR`` to a writable root), no PID namespace, and the protected paths
    inside a writable root are *not* read-only (Landlock rules only add
    access, so a writable root is writable all the way down). So it gives
    the approval policy no confined mode (``confines`` is False): with it,
    a command that is not proved safe asks, as without a sandbox, and
    Landlock adds containment to what runs. The command's process is a child
    subreaper, the parent of every process the command leaves behind
    (``setsid`` daemons, double forks); when it ends the helper kills them
    all. See ``docs/sandbox.md``.

    :meth:`ensure_available` checks the kernel's Landlock ABI and runs
    ``true`` through the helper once; where Landlock is missing it raises
    :class:`SandboxUnavailableError`. Nothing is ever run unrestricted.

    Attributes:
        writable_roots: directories the command may write (realpath'd, must exist).
        network: allow sockets (and TCP) as on the host.
        cpu_time_s: ``RLIMIT_CPU`` of each process, or None.
        memory_bytes: ``RLIMIT_AS`` of each process, or None.
        max_processes: ``RLIMIT_NPROC`` of the user (not applied to root), or None.
    """

    confines: ClassVar[bool] = False
    """Landlock cannot keep protected paths inside a writable root: no confined mode."""

    writable_roots: tuple[str, ...] = attrs.field(converter=_roots)
    network: bool = attrs.field(default=False, validator=boolean(), kw_only=True)
    cpu_time_s: int | None = attrs.field(default=None, validator=CPU_TIME, kw_only=True)
    memory_bytes: int | None = attrs.field(default=None, validator=MEMORY, kw_only=True)
    max_processes: int | None = attrs.field(default=None, validator=PROCESSES, kw_only=True)
    _ready: bool = attrs.field(default=False, init=False)
    _lock: trio.Lock = attrs.field(factory=trio.Lock, init=False)
    _server: ForkServer | None = attrs.field(default=None, init=False)

    def _config(self) -> str:
        limits = {
            key: value
            for key, value in (
                ("cpu", self.cpu_time_s),
                ("as", self.memory_bytes),
                ("nproc", self.max_processes),
            )
            if value is not None
        }
        return json.dumps(
            {
                "write": list(self.writable_roots),
                "network": self.network,
                "filter": (LANDLOCK_FILTER if self.network else LANDLOCK_NO_SOCKETS_FILTER).hex(),
                "limits": limits,
            }
        )

    def wrap(self, argv: Sequence[str], *, cwd: str) -> list[str]:
        """``python -I -S <helper> CONFIG -- argv`` (``cwd`` is the caller's to set).

        For running the command yourself: it starts an interpreter per command.
        :func:`create_sandbox_shell_operations` runs commands through the
        backend's fork server instead, with the same restrictions.
        """
        return [sys.executable, "-I", "-S", _HELPER, self._config(), "--", *argv]

    def _fork_server(self) -> ForkServer:
        if self._server is None:
            self._server = ForkServer(self._config(), what="Landlock helper")
        return self._server

    async def _run(
        self,
        argv: Sequence[str],
        *,
        cwd: str,
        env: Mapping[str, str],
        on_output: OutputSink,
        kill_grace_s: float,
        read_only: bool = False,
    ) -> ShellExit:
        # read_only: a line the policy proved writes nothing gets a ruleset in
        # which no root is writable, so a misjudged program's write fails (EACCES)
        return await self._fork_server().run(
            argv,
            cwd=cwd,
            env=env,
            on_output=on_output,
            kill_grace_s=kill_grace_s,
            extra={"read_only": True} if read_only else None,
        )

    async def ensure_available(self) -> None:
        """Check the Landlock ABI and run ``true`` through the helper, once.

        Checkpoints. Cancellation stops the probe (its process is killed).

        Raises:
            SandboxUnavailableError: the kernel has no Landlock (or it is
                disabled), or the helper fails here (its message is included).
        """
        if self._ready:
            await trio.lowlevel.checkpoint()
            return
        async with self._lock:
            if self._ready:
                return
            abi = _landlock_exec.abi_version()
            if abi < 1:
                raise SandboxUnavailableError(
                    "Landlock is not available in this kernel (not built in, or not in the "
                    "lsm= boot list); refusing to run unsandboxed"
                )
            said: list[bytes] = []

            async def collect(chunk: bytes) -> None:
                said.append(chunk)

            try:
                with trio.fail_after(_PROBE_TIMEOUT_S):
                    result = await self._run(
                        ["true"], cwd="/", env={"PATH": os.defpath}, on_output=collect,
                        kill_grace_s=0,
                    )  # fmt: skip
            except (trio.TooSlowError, OSError) as exc:
                raise SandboxUnavailableError(
                    f"the Landlock helper could not run ({exc!r}); refusing to run unsandboxed"
                ) from exc
            if result.exit_code != 0:
                output = b"".join(said).decode("utf-8", "replace").strip()[:500]
                raise SandboxUnavailableError(
                    f"the Landlock helper failed (exit {result.exit_code}: "
                    f"{output or 'no output'}); refusing to run unsandboxed"
                )
            self._ready = True
