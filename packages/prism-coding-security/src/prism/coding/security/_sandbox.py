"""Sandbox backends and the sandboxed :class:`~prism.coding.tools.ShellOperations`."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs
import trio

from prism.coding.tools import (
    DEFAULT_KILL_GRACE_S,
    OutputSink,
    ShellExit,
    ShellOperations,
    ShellSpawnRequest,
    run_process_tree,
)
from prism.core import ConfigurationError

from ._errors import SandboxUnavailableError
from ._paths import normalize_roots

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["BubblewrapSandbox", "SandboxBackend", "create_sandbox_shell_operations"]

_PROBE_TIMEOUT_S = 15.0


@runtime_checkable
class SandboxBackend(Protocol):
    """Wraps a command so it runs isolated.

    A backend must never run anything unsandboxed: when it cannot isolate, its
    :meth:`ensure_available` raises :class:`SandboxUnavailableError`.
    """

    async def ensure_available(self) -> None:
        """Check (once, then remembered) that the sandbox really works here.

        Checkpoints. Cancellation abandons the check; nothing is left running.

        Raises:
            SandboxUnavailableError: the sandbox cannot provide isolation here.
        """
        ...

    def wrap(self, argv: Sequence[str], *, cwd: str) -> list[str]:
        """The argument vector that runs ``argv`` inside the sandbox, in ``cwd``."""
        ...


def _check_bool(instance: object, attribute: attrs.Attribute[bool], value: object) -> None:
    if not isinstance(value, bool):
        raise ConfigurationError(f"{attribute.name} must be a bool, got {value!r}")


def _roots(value: Sequence[str]) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)):
        raise ConfigurationError(f"writable_roots must be a sequence of directories, got {value!r}")
    if not list(value):
        return ()
    return normalize_roots(value, option="writable_roots")


def _extra(value: Sequence[str]) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)) or not all(isinstance(v, str) for v in value):
        raise ConfigurationError(f"extra_args must be a sequence of strings, got {value!r}")
    return tuple(value)


@attrs.define(eq=False)
class BubblewrapSandbox:
    """A :class:`SandboxBackend` built on bubblewrap (``bwrap``), with real isolation.

    The sandboxed process sees ``/`` read-only, ``writable_roots`` bound
    read-write, a private empty ``/tmp``, a fresh ``/dev`` and ``/proc``, and
    new PID, IPC, UTS, cgroup and network namespaces (no network but its own
    loopback unless ``network=True``). It runs in a new session and dies with
    its parent (``--die-with-parent``).

    bubblewrap is probed once, on first use, by running ``true`` with the same
    flags. When ``bwrap`` is missing or cannot create namespaces,
    :meth:`ensure_available` raises :class:`SandboxUnavailableError`; the
    backend never falls back to running a command unsandboxed.

    Attributes:
        writable_roots: directories the command may write (realpath'd, must exist).
        network: share the host's network namespace.
        bwrap_path: the ``bwrap`` executable (default: found on ``PATH``).
        extra_args: more bwrap arguments, placed before the command (for example
            ``("--ro-bind", "/opt/data", "/data")``).
    """

    writable_roots: tuple[str, ...] = attrs.field(converter=_roots)
    network: bool = attrs.field(default=False, validator=_check_bool, kw_only=True)
    bwrap_path: str | None = attrs.field(default=None, kw_only=True)
    extra_args: tuple[str, ...] = attrs.field(default=(), converter=_extra, kw_only=True)
    _ready: bool = attrs.field(default=False, init=False)
    _lock: trio.Lock = attrs.field(factory=trio.Lock, init=False)

    def __attrs_post_init__(self) -> None:
        if self.bwrap_path is not None and (
            not isinstance(self.bwrap_path, str) or not self.bwrap_path
        ):
            raise ConfigurationError(
                f"bwrap_path must be a non-empty string or None, got {self.bwrap_path!r}"
            )

    def _executable(self) -> str:
        path = self.bwrap_path or shutil.which("bwrap")
        if path is None or not os.access(path, os.X_OK):
            raise SandboxUnavailableError(
                f"bubblewrap is not installed ({self.bwrap_path or 'bwrap'} not found or not "
                "executable); install the 'bubblewrap' package; refusing to run unsandboxed"
            )
        return path

    def wrap(self, argv: Sequence[str], *, cwd: str) -> list[str]:
        """``bwrap <isolation flags> --chdir cwd -- argv``."""
        args = [
            self._executable(),
            "--die-with-parent",
            "--new-session",
            "--unshare-all",
        ]
        if self.network:
            args.append("--share-net")
        args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        for root in self.writable_roots:
            args += ["--bind", root, root]
        real_cwd = os.path.realpath(cwd)
        under_tmp = real_cwd == "/tmp" or real_cwd.startswith("/tmp/")
        covered = any(
            real_cwd == root or real_cwd.startswith(root.rstrip("/") + "/")
            for root in self.writable_roots
        )
        if under_tmp and not covered:
            # The private /tmp hides the working directory; show it, read-only.
            args += ["--ro-bind", real_cwd, real_cwd]
        args += [*self.extra_args, "--chdir", real_cwd, "--", *argv]
        return args

    async def ensure_available(self) -> None:
        """Probe bubblewrap once (``true`` under the same flags); remember success.

        Checkpoints. Cancellation stops the probe (its process is killed).

        Raises:
            SandboxUnavailableError: ``bwrap`` is missing, or cannot create the
                namespaces it needs here (its error output is in the message).
        """
        if self._ready:
            await trio.lowlevel.checkpoint()
            return
        async with self._lock:
            if self._ready:
                return
            argv = self.wrap(["true"], cwd="/")
            try:
                with trio.fail_after(_PROBE_TIMEOUT_S):
                    result = await trio.run_process(
                        argv,
                        stdin=subprocess.DEVNULL,
                        capture_stdout=True,
                        capture_stderr=True,
                        check=False,
                    )
            except trio.TooSlowError as exc:
                raise SandboxUnavailableError(
                    f"bubblewrap did not start within {_PROBE_TIMEOUT_S:g}s; refusing to run "
                    "unsandboxed"
                ) from exc
            except OSError as exc:
                raise SandboxUnavailableError(
                    f"bubblewrap could not be started ({exc}); refusing to run unsandboxed"
                ) from exc
            if result.returncode != 0:
                stderr = result.stderr.decode("utf-8", "replace").strip()[:500]
                raise SandboxUnavailableError(
                    f"bubblewrap cannot create its sandbox here (exit {result.returncode}: "
                    f"{stderr or 'no output'}); refusing to run unsandboxed"
                )
            self._ready = True


@attrs.frozen
class _SandboxShellOperations:
    backend: SandboxBackend
    kill_grace_s: float

    async def run(self, request: ShellSpawnRequest, on_output: OutputSink) -> ShellExit:
        await self.backend.ensure_available()
        argv = self.backend.wrap(request.argv, cwd=request.cwd)
        return await run_process_tree(
            argv,
            cwd=request.cwd,
            env=request.env,
            on_output=on_output,
            kill_grace_s=self.kill_grace_s,
        )


def create_sandbox_shell_operations(
    backend: SandboxBackend, *, kill_grace_s: float = DEFAULT_KILL_GRACE_S
) -> ShellOperations:
    """A :class:`~prism.coding.tools.ShellOperations` that runs every command in ``backend``.

    Before each run the backend confirms it can isolate
    (:meth:`SandboxBackend.ensure_available`, probed once); if it cannot, the
    run raises :class:`SandboxUnavailableError` and nothing is started. The
    wrapped command is run with :func:`~prism.coding.tools.run_process_tree`,
    so output streaming, timeouts and cancellation behave exactly as for
    the plain shell operations: the whole process tree is terminated
    (shielded, time-bounded) before ``trio.Cancelled`` propagates.

    Raises:
        ConfigurationError: ``backend`` is not a :class:`SandboxBackend` or
            ``kill_grace_s`` is not a number in [0, 60].
    """
    if not isinstance(backend, SandboxBackend):
        raise ConfigurationError(f"backend must be a SandboxBackend, got {backend!r}")
    if (
        isinstance(kill_grace_s, bool)
        or not isinstance(kill_grace_s, (int, float))
        or not math.isfinite(kill_grace_s)
        or not 0 <= kill_grace_s <= 60
    ):
        raise ConfigurationError(f"kill_grace_s must be a number in [0, 60], got {kill_grace_s!r}")
    return _SandboxShellOperations(backend, float(kill_grace_s))
