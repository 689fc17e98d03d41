"""Sandbox backends and the sandboxed :class:`~prism.coding.tools.ShellOperations`."""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

import attrs
import trio

from prism.coding.tools import (
    AccessGrant,
    OutputSink,
    ShellExit,
    ShellOperations,
    ShellSpawnRequest,
    run_process_tree,
)
from prism.core import ConfigurationError
from prism.core.options import (
    boolean,
    instance_of,
    number,
    one_of,
    optional,
    sequence_of,
    string,
)
from prism.core.process import DEFAULT_KILL_GRACE_S

from . import _bridge
from ._errors import SandboxUnavailableError
from ._executables import host_program, loader_moved
from ._gitnames import index_restamped, remember_index
from ._implied import (
    environment_patterns,
    held_entries,
    implied_protected,
    nested_repositories,
    warm_in_background,
)
from ._inplace import SED_PANIC, EditedFile, discard_edits, open_edits, replace_edited
from ._landlock import LandlockSandbox
from ._landlock_server import ForkServer
from ._limits import CPU_TIME, MEMORY, PROCESSES, prlimit_args
from ._overlay import RootOverlay, overlay_base
from ._paths import normalize_roots
from ._protected import ProtectedPaths, normalize_protected_paths
from ._proxy import (
    PROXY_SOCKET_NAME,
    HostAllowlist,
    granted_host_refusal,
    normalize_allowed_hosts,
    serve_connect_proxy,
)
from ._redirects import OpenedTarget, close_targets, open_targets
from ._seccomp import SECCOMP_FILTER, filter_file, filter_path

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

__all__ = ["BubblewrapSandbox", "SandboxBackend", "create_sandbox_shell_operations"]

_PROBE_TIMEOUT_S = 15.0

# Host directories that hold other programs' sockets and runtime state; each is
# replaced by an empty tmpfs (the writable roots are bound back on top).
_HIDDEN_DIRS = ("/tmp", "/run", "/var/run")
# Opens the filter named by $0 on fd 3, where ``--seccomp 3`` reads it, then
# becomes bwrap (no extra process stays between the caller and bwrap).
_SECCOMP_LAUNCHER = 'exec "$@" 3<"$0"'
# Commands run by create_sandbox_shell_operations start from a fork server (one per
# sandbox, started on first use; see _landlock_exec.py), which lives in a user and
# mount namespace of its own: it mounts a command's overlays in a mount namespace made
# for that command (each on its layer's own mount point) and starts bwrap there with
# posix_spawn (no fork of its interpreter), the seccomp filter on fd 3 (from a private
# file); the namespace and its mounts go with bwrap. No launcher process per command.
_SERVER_CONFIG = json.dumps({"mode": "namespaces"})
_APPLY_LOCKS: dict[str, threading.Lock] = {}
_APPLY_LOCKS_LOCK = threading.Lock()
# Where the allowlist proxy's directory appears inside the sandbox (in its /run).
_PROXY_DIR_INSIDE = "/run/prism-proxy"
_NETWORK_MODES = ("none", "allowlist", "host")
# kernel file systems no overlay can sit on; an approved write there is not granted
_NOT_OVERLAID = ("/proc", "/sys", "/dev")


@functools.cache
def _bridge_source() -> str:
    # passed with -c: the package itself may lie under a directory the sandbox hides
    with open(_bridge.__file__, encoding="utf-8") as handle:
        return handle.read()


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


_OWNER = "BubblewrapSandbox"


def _roots(value: Sequence[str]) -> tuple[str, ...]:
    return normalize_roots(value, owner=_OWNER, option="writable_roots", allow_empty=True)


def _extra(value: Sequence[str]) -> tuple[str, ...]:
    return tuple(sequence_of(string(non_empty=False)).check(_OWNER, "extra_args", value))


def _network(value: bool | str) -> str:
    (boolean() | one_of(*_NETWORK_MODES)).check(_OWNER, "network", value)
    if isinstance(value, bool):
        return "host" if value else "none"
    return value


def _protected(value: Sequence[str] | None) -> tuple[str, ...]:
    return normalize_protected_paths(value, option=f"{_OWNER}.protected_paths")


def _allowed_hosts(value: Sequence[str]) -> tuple[str, ...]:
    return normalize_allowed_hosts(value, option=f"{_OWNER}.allowed_hosts")


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


@attrs.define(eq=False)
class BubblewrapSandbox:
    """A :class:`SandboxBackend` built on bubblewrap (``bwrap``), with real isolation.

    The sandboxed process sees ``/`` read-only, ``writable_roots`` bound
    read-write, a fresh ``/dev`` and ``/proc``, empty private ``/tmp``,
    ``/run`` and ``$XDG_RUNTIME_DIR``, and new PID, IPC, UTS, cgroup and
    network namespaces. It runs in a new session and dies with its parent
    (``--die-with-parent``), with no capabilities (``--cap-drop ALL``, which
    matters when Prism runs as root: with them a command could remount ``/``
    read-write or unmount the protected paths).

    A seccomp filter makes ``socket(AF_UNIX, ...)`` fail with EPERM (no host
    unix socket can be reached: not a docker, ssh-agent or D-Bus socket, in a
    writable root or anywhere else) and refuses io_uring, which could open
    sockets around the filter; ``socketpair`` still works.

    For commands run by :func:`create_sandbox_shell_operations`, each
    writable root is an overlay inside the sandbox: the command sees the root
    exactly as the host has it, and its changes land in a private layer
    outside every root. When the command has ended they are moved into the
    root, except changes to the protected paths (``.envrc``, ``.mcp.json``,
    ``.vscode`` and the rest of :data:`~prism.coding.security.PROTECTED_PATHS`,
    plus ``protected_paths``, at any depth) and, in ``.git``, everything but
    git's objects, refs, logs and work state (no config, hook or link); what
    was left out is reported at the end of the output (lines starting
    ``[prism sandbox]``). Nothing is ever added to a root. Running
    :meth:`wrap`'s argument vector yourself has no step after the command, so
    there the roots are read-only.

    ``cpu_time_s``, ``memory_bytes`` and ``max_processes`` set the
    ``RLIMIT_CPU``, ``RLIMIT_AS`` and ``RLIMIT_NPROC`` limits of the command
    through ``prlimit`` (util-linux); when a limit is asked for and
    ``prlimit`` is missing, the sandbox is unavailable.

    ``network`` is ``"none"`` (or ``False``, the default: only the sandbox's
    own loopback), ``"host"`` (or ``True``: the host's network namespace) or
    ``"allowlist"``: no network but an HTTP CONNECT proxy, run by
    :func:`create_sandbox_shell_operations` for each command, that reaches
    only ``allowed_hosts``; inside, ``HTTPS_PROXY`` and friends point at it.

    bubblewrap is probed once, on first use, by running ``true`` with the same
    flags. When ``bwrap`` is missing or cannot create namespaces,
    :meth:`ensure_available` raises :class:`SandboxUnavailableError`; the
    backend never falls back to running a command unsandboxed.

    Attributes:
        writable_roots: directories the command may write (realpath'd, must exist).
        network: ``"none"``, ``"allowlist"`` or ``"host"`` (``False`` and
            ``True`` mean ``"none"`` and ``"host"``).
        allowed_hosts: for ``"allowlist"``: ``host``, ``*.domain``,
            ``host:port`` or ``[v6]:port`` entries (no port: 80 and 443).
        bwrap_path: the ``bwrap`` executable (default: found on ``PATH``).
        extra_args: more bwrap arguments, placed before the command (for example
            ``("--ro-bind", "/opt/data", "/data")``).
        protected_paths: more protected entries (relative, matched under each
            writable root), added to the default list.
        cpu_time_s: CPU seconds each process may use (``RLIMIT_CPU``), or None.
        memory_bytes: address space of each process (``RLIMIT_AS``), or None.
        max_processes: processes the sandbox's user may have (``RLIMIT_NPROC``;
            the kernel does not apply it to root), or None.
    """

    confines: ClassVar[bool] = True
    """The approval policy may run commands confined in it (see ``docs/security.md``)."""

    writable_roots: tuple[str, ...] = attrs.field(converter=_roots)
    network: str = attrs.field(default="none", converter=_network, kw_only=True)
    allowed_hosts: tuple[str, ...] = attrs.field(default=(), converter=_allowed_hosts, kw_only=True)
    bwrap_path: str | None = attrs.field(default=None, validator=optional(string()), kw_only=True)
    extra_args: tuple[str, ...] = attrs.field(default=(), converter=_extra, kw_only=True)
    protected_paths: tuple[str, ...] = attrs.field(default=None, converter=_protected, kw_only=True)
    cpu_time_s: int | None = attrs.field(default=None, validator=CPU_TIME, kw_only=True)
    memory_bytes: int | None = attrs.field(default=None, validator=MEMORY, kw_only=True)
    max_processes: int | None = attrs.field(default=None, validator=PROCESSES, kw_only=True)
    _ready: bool = attrs.field(default=False, init=False)
    _lock: trio.Lock = attrs.field(factory=trio.Lock, init=False)
    _matcher: ProtectedPaths = attrs.field(init=False)
    _server: ForkServer | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        if (self.network == "allowlist") != bool(self.allowed_hosts):
            raise ConfigurationError(
                f"{_OWNER}.allowed_hosts goes with network='allowlist' and it needs at least "
                f"one entry; got network={self.network!r}, allowed_hosts={self.allowed_hosts!r}",
                option=f"{_OWNER}.allowed_hosts",
                value=self.allowed_hosts,
            )
        # relative PATH (and search) entries, at any depth
        self._matcher = ProtectedPaths((*self.protected_paths, *environment_patterns()))

    def grant_refusal(self, kind: str, target: str) -> str | None:
        """Why it cannot give one command this access (None: it can).

        ``kind`` is ``"protected"`` (``target``: a real path inside a writable
        root), ``"outside"`` (a real path outside them) or ``"network"``
        (``host:port``). A protected path comes back from the private layer
        (every other protected change the command makes is still left out);
        a path outside the roots is written through a private layer over its
        directory, of which only that path comes back; a host is added to the
        command's own allowlist proxy, unless it is this machine's own or not
        a global address (the proxy connects from this machine).
        """
        if kind == "network":
            return granted_host_refusal(target)
        if kind == "protected":
            if any(_within(target, root) for root in self.writable_roots):
                return None
            return f"{target} is not in a writable root of the sandbox"
        if kind != "outside":
            return f"it grants no {kind!r} access"
        directory = os.path.dirname(target)
        if directory == "/" or any(_within(directory, d) for d in _NOT_OVERLAID):
            return f"the sandbox cannot put a private layer over {directory}"
        if not os.path.isdir(directory) or os.path.islink(directory):
            return f"{directory} is not an existing directory"
        if any(_within(root, directory) for root in self.writable_roots):
            return f"{directory} holds a writable root"
        for hidden in self._hidden_dirs():
            if _within(directory, hidden):
                # a layer over it would show the host's files there, not only the target
                return f"the sandbox's {hidden} is private and empty; it shows none of the host's"
        return None

    def _executable(self) -> str:
        path = self.bwrap_path or host_program("bwrap")
        if path is None or not os.access(path, os.X_OK):
            raise SandboxUnavailableError(
                f"bubblewrap is not installed ({self.bwrap_path or 'bwrap'} not found or not "
                "executable); install the 'bubblewrap' package; refusing to run unsandboxed"
            )
        return path

    def _hidden_dirs(self) -> list[str]:
        candidates = list(_HIDDEN_DIRS)
        runtime = os.environ.get("XDG_RUNTIME_DIR", "")
        if runtime.startswith("/"):
            candidates.append(runtime)
        hidden: list[str] = []
        for candidate in candidates:
            real = os.path.realpath(candidate)
            if real != "/" and os.path.isdir(real) and not any(_within(real, h) for h in hidden):
                hidden.append(real)
        return hidden

    def wrap(self, argv: Sequence[str], *, cwd: str) -> list[str]:
        """``sh -c <open the seccomp filter> bwrap <isolation flags> --chdir cwd -- argv``.

        Raises:
            SandboxUnavailableError: ``bwrap`` (or ``prlimit``, when a limit is
                set) is missing, a protected path is a dangling link, or
                ``network`` is ``"allowlist"`` (its proxy runs only inside
                :func:`create_sandbox_shell_operations`).
        """
        if self.network == "allowlist":
            raise SandboxUnavailableError(
                "network='allowlist' needs its proxy, which create_sandbox_shell_operations "
                "runs for each command; wrap() alone cannot provide it"
            )
        return self._wrap(argv, cwd, None)

    def _wrap(
        self,
        argv: Sequence[str],
        cwd: str,
        proxy_dir: str | None,
        overlays: dict[str, RootOverlay] | None = None,
        *,
        read_only: bool = False,
        narrowed: bool = False,
        layers: Sequence[str] = (),
    ) -> list[str]:
        limits = prlimit_args(
            cpu_time_s=self.cpu_time_s,
            memory_bytes=self.memory_bytes,
            max_processes=self.max_processes,
        )
        # with overlays, the fork server is the launcher (see _SERVER_CONFIG)
        launcher = ["/bin/sh", "-c", _SECCOMP_LAUNCHER, filter_path()] if overlays is None else []
        args = [
            *launcher,
            self._executable(),
            "--die-with-parent",
            "--new-session",
            "--unshare-all",
            # Run as root, bwrap keeps the capabilities in its user namespace, and
            # with them 'mount -o remount,bind,rw /' or 'umount .git/config' undo
            # every read-only mount (reproduced). Unprivileged, this changes nothing.
            "--cap-drop",
            "ALL",
        ]
        if overlays is not None and os.getuid() != 0:
            # bwrap runs as root of the namespace that holds the overlays; the
            # command keeps the caller's own ids
            args += ["--unshare-user", "--uid", str(os.getuid()), "--gid", str(os.getgid())]
        if self.network == "host":
            args.append("--share-net")
        args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        # The fresh /proc has a writable /proc/sys for host root: as root the command
        # could set global sysctls (vm.swappiness, reproduced). Cover it read-only.
        args += ["--ro-bind", "/proc/sys", "/proc/sys"]
        hidden = self._hidden_dirs()
        for directory in hidden:
            args += ["--tmpfs", directory]
        private = {os.path.dirname(o.directory) for o in (overlays or {}).values()}
        for directory in sorted(private | set(layers)):
            if not any(_within(directory, h) for h in hidden):
                # every call's private layers (this one's are mounted already)
                args += ["--tmpfs", directory]
        resolv = os.path.realpath("/etc/resolv.conf")
        if (
            self.network == "host"
            and os.path.isfile(resolv)
            and any(_within(resolv, h) for h in hidden)
        ):
            # systemd-resolved keeps it under /run; name lookups need it back.
            args += ["--ro-bind", resolv, resolv]
        # Every root read-only (without overlays, wrap() alone, nothing would check
        # the changes; a command proved to write nothing needs no private layer), but
        # for the private layers, each bound after, on top, from its own mount point
        # (in the launcher's namespace), never by the directory's path (which a link
        # swapped in could redirect): over each root, over the directories a command's
        # writes were proved to stay in, over the directory of an approved write
        # outside the roots. A root inside a layer's directory is seen through it.
        layered = sorted((overlays or {}).items())
        for root in self.writable_roots:
            if not any(_within(root, directory) for directory, _ in layered):
                args += ["--ro-bind", root, root]
        for directory, overlay in layered:
            args += ["--bind", overlay.mount_point, directory]
        if narrowed:
            # each narrowed layer is a file system of its own: git run inside one would
            # stop looking for its repository there (the host's tree is one file system)
            args += ["--setenv", "GIT_DISCOVERY_ACROSS_FILESYSTEM", "1"]
        real_cwd = os.path.realpath(cwd)
        covered = any(_within(real_cwd, root) for root in self.writable_roots)
        if not covered and any(_within(real_cwd, h) for h in hidden):
            # A private tmpfs hides the working directory; show it, read-only.
            args += ["--ro-bind", real_cwd, real_cwd]
        if proxy_dir is None:
            args += ["--seccomp", "3", *self.extra_args, "--chdir", real_cwd, "--"]
            return [*args, *limits, *argv]
        # The bridge applies the same filter to the command itself (it needs unix
        # sockets to reach the proxy); it runs on this interpreter, made visible.
        python = os.path.realpath(sys.executable)
        prefix = os.path.realpath(sys.base_prefix)
        for path in (prefix, python):
            if any(_within(path, h) for h in hidden) and not any(
                _within(path, root) for root in self.writable_roots
            ):
                args += ["--ro-bind", path, path]
        args += ["--ro-bind", proxy_dir, _PROXY_DIR_INSIDE]
        args += [*self.extra_args, "--chdir", real_cwd, "--"]
        socket_inside = f"{_PROXY_DIR_INSIDE}/{PROXY_SOCKET_NAME}"
        bridge = [python, "-I", "-S", "-c", _bridge_source(), socket_inside, SECCOMP_FILTER.hex()]
        return [*args, *bridge, "--", *limits, *argv]

    def _overlaid_roots(self) -> list[str]:
        # a root inside another root is already part of that root's overlay
        return [
            root
            for root in self.writable_roots
            if not any(o != root and _within(root, o) for o in self.writable_roots)
        ]

    def _prepare(
        self, session: _Session, argv: Sequence[str], cwd: str, proxy_dir: str | None
    ) -> _Launch:
        # Runs in a thread: making the private layers touches the filesystem.
        for path in () if session.grant is None else session.grant.outside_writes:
            refusal = self.grant_refusal("outside", path)
            if refusal is not None:
                raise SandboxUnavailableError(
                    f"cannot grant the write to {path}: {refusal}; refusing to run"
                )
        outside = session.outside_directories()
        narrowed = self._narrowed(session.write_dirs) if session.grant is None else None
        try:
            base = overlay_base((*self.writable_roots, *outside))
            if narrowed is not None:
                for directory, (root, below) in narrowed.items():
                    session.overlays[directory] = RootOverlay(
                        root, base, self.protected_paths, below=below
                    )
            else:
                for root in self._overlaid_roots():
                    session.overlays[root] = RootOverlay(root, base, self.protected_paths)
            for directory in outside:
                session.overlays[directory] = RootOverlay(directory, base)
        except OSError as exc:
            raise SandboxUnavailableError(
                f"cannot prepare the private layer of the writable roots ({exc}); "
                "refusing to run unsandboxed"
            ) from exc
        return _Launch(
            argv=self._wrap(argv, cwd, proxy_dir, session.overlays, narrowed=narrowed is not None),
            overlays=[o.mount_request() for o in session.overlays.values()],
            seccomp=None if proxy_dir else filter_file(),
        )

    def _narrowed(
        self, write_dirs: Sequence[str] | None
    ) -> dict[str, tuple[str, tuple[str, ...]]] | None:
        """Each directory of a proved write set with its root and its names below it.

        None (the whole roots get their layers) when there is no write set, or when
        a directory is no longer a real directory inside a writable root reached
        without a link (the host changed it since the policy looked), or when one
        lies inside another or in a root nested in another root.
        """
        if write_dirs is None:
            return None
        out: dict[str, tuple[str, tuple[str, ...]]] = {}
        outermost = self._overlaid_roots()
        for directory in write_dirs:
            root = next((r for r in outermost if _within(directory, r)), None)
            nested = [r for r in self.writable_roots if r != root and _within(directory, r)]
            if (
                root is None
                or nested
                or any(_within(directory, d) or _within(d, directory) for d in out)
                or os.path.realpath(directory) != directory
                or not os.path.isdir(directory)
            ):
                return None
            below = tuple(p for p in directory[len(root) :].split("/") if p)
            if any(p in (".", "..") for p in below):  # pragma: no cover - realpath'd above
                return None
            out[directory] = (root, below)
        return out

    def _prepare_read_only(self, argv: Sequence[str], cwd: str, proxy_dir: str | None) -> _Launch:
        """A command proved to write nothing: the roots bound read-only, no private layer.

        The layers directory is still hidden (other calls' pending changes).
        """
        try:
            base = overlay_base(self.writable_roots)
        except OSError as exc:
            raise SandboxUnavailableError(
                f"cannot prepare the sandbox's private directory ({exc}); refusing to run "
                "unsandboxed"
            ) from exc
        return _Launch(
            argv=self._wrap(argv, cwd, proxy_dir, {}, read_only=True, layers=[base]),
            overlays=[],
            seccomp=None if proxy_dir else filter_file(),
        )

    async def _run_read_only(
        self, argv: Sequence[str], cwd: str, run: Callable[[_Launch], Awaitable[ShellExit]]
    ) -> ShellExit:
        async def body(proxy_dir: str | None) -> ShellExit:
            return await run(self._prepare_read_only(argv, cwd, proxy_dir))

        return await self._with_proxy(body)

    async def _run_redirected(
        self, request: ShellSpawnRequest, on_output: OutputSink, kill_grace_s: float
    ) -> ShellExit | None:
        """Run a line whose only writes are redirections with its targets opened here.

        None (nothing ran, nothing changed) when a target cannot be opened as the
        copy-back would let it come back (see :mod:`._redirects`) or the allowlist
        proxy runs: then the line runs over its private layer.
        """
        redirected = request.redirected
        # the checks may ask git about the root (an index of any size): off the event loop
        opened = await trio.to_thread.run_sync(self._open_redirected, request)
        if redirected is None or opened is None:
            return None
        argv = (request.shell_path, "-c", redirected.command)
        passed = [(one.fd, one.target) for one in opened]
        sink_failed = False

        async def sink(chunk: bytes) -> None:
            nonlocal sink_failed
            try:
                await on_output(chunk)
            except BaseException:
                sink_failed = True
                raise

        async def run(launch: _Launch) -> ShellExit:
            argv, env = loader_moved(launch.argv, request.env)  # (bwrap runs on the host)
            return await self._fork_server().run(
                argv,
                cwd="/",
                env=env,
                on_output=sink,
                kill_grace_s=kill_grace_s,
                extra={"overlays": launch.overlays, "seccomp": launch.seccomp},
                passed=passed,
            )

        try:
            result = await self._run_read_only(argv, request.cwd, run)
        except (OSError, SandboxUnavailableError):
            # unless the output's sink failed, nothing ran (the working directory could
            # not be entered, no sandbox): what was created for it goes again
            close_targets(opened, failed=not sink_failed)
            raise
        except BaseException:
            close_targets(opened)
            raise
        notes = close_targets(opened)
        if notes:
            await on_output(_reported(notes))
        return result

    async def _run_in_place(
        self, request: ShellSpawnRequest, on_output: OutputSink, kill_grace_s: float
    ) -> ShellExit | None:
        """Run a proved ``sed -i`` filter on each file with the files opened and replaced here.

        None (nothing ran, nothing changed) when a file cannot be opened as the
        copy-back would let it come back (see :mod:`._inplace`) or the allowlist
        proxy runs: then the line runs over its private layer. Each file is one
        sandboxed ``sed`` (no shell) reading it as its standard input and printing
        into the new file as its standard output (its errors still reach
        ``on_output``); the first that fails (or cannot be replaced) ends the line
        with its status, that file and every later one left as they were.
        """
        edits = request.in_place
        opened = await trio.to_thread.run_sync(self._open_in_place, request)
        if edits is None or opened is None:
            return None
        argv = edits.filter  # no shell: the file is its standard input, the new file its output
        result = ShellExit(exit_code=0)
        notes: list[str] = []
        try:
            for one in opened:

                async def run(launch: _Launch, one: EditedFile = one) -> ShellExit:
                    argv, env = loader_moved(launch.argv, request.env)
                    return await self._fork_server().run(
                        argv,
                        cwd="/",
                        env=env,
                        on_output=on_output,
                        kill_grace_s=kill_grace_s,
                        extra={"overlays": launch.overlays, "seccomp": launch.seccomp},
                        passed=[(one.source, 0), (one.output, 1)],
                    )

                result = await self._run_read_only(argv, request.cwd, run)
                if result.exit_code != 0:
                    break
                note, error = replace_edited(one, edits.suffix)
                if note is not None:
                    notes.append(note)
                if error is not None:
                    await on_output(_shown(f"{error}\n"))
                    result = ShellExit(exit_code=SED_PANIC, pid=result.pid)
                    break
        finally:
            discard_edits(opened)
        if notes:
            await on_output(_reported(notes))
        return result

    def _open_in_place(self, request: ShellSpawnRequest) -> list[EditedFile] | None:
        """The request's files open (see :func:`._inplace.open_edits`), or None."""
        edits = request.in_place
        if edits is None or self.network == "allowlist" or not os.path.isdir(request.cwd):
            return None  # (bwrap would fail to enter a missing directory after the open)
        return open_edits(edits, self._overlaid_roots(), self._matcher, self.protected_paths)

    def _open_redirected(self, request: ShellSpawnRequest) -> list[OpenedTarget] | None:
        """The request's targets open (see :func:`._redirects.open_targets`), or None."""
        redirected = request.redirected
        if redirected is None or self.network == "allowlist" or not os.path.isdir(request.cwd):
            return None  # (bwrap would fail to enter a missing directory after the open)
        return open_targets(redirected, self._overlaid_roots(), self._matcher, self.protected_paths)

    def _fork_server(self) -> ForkServer:
        if self._server is None:
            self._server = ForkServer(_SERVER_CONFIG, what="bubblewrap launcher")
        return self._server

    async def _launch(
        self, launch: _Launch, *, env: Mapping[str, str], on_output: OutputSink, kill_grace_s: float
    ) -> ShellExit:
        """Run ``launch`` through the fork server (see :class:`ForkServer`).

        bwrap runs on the host: the dynamic loader's variables are handed to the
        command with ``--setenv`` (:func:`._executables.loader_moved`), bwrap gets none.
        """
        argv, moved = loader_moved(launch.argv, env)
        return await self._fork_server().run(
            argv,
            cwd="/",
            env=moved,
            on_output=on_output,
            kill_grace_s=kill_grace_s,
            extra={"overlays": launch.overlays, "seccomp": launch.seccomp},
        )

    def _finish(self, session: _Session) -> None:
        """Apply each root's changes (one command at a time per root), then discard."""
        overlays, session.overlays = session.overlays, {}
        for directory, overlay in overlays.items():
            try:
                if overlay.changed():
                    granted, only = session.granted(directory)
                    # one command at a time per root, whichever part of it its layer covers
                    with _apply_lock(overlay.root):
                        session.notes += overlay.apply(
                            self._matcher,
                            _anchored(overlay.root, self._matcher),
                            granted=granted,
                            only_granted=only,
                            index_placed=functools.partial(remember_index, overlay.root),
                            index_restamped=functools.partial(index_restamped, overlay.root),
                            repositories=functools.partial(
                                nested_repositories, overlay.root, self._matcher
                            ),
                            entries=functools.partial(held_entries, overlay.root, self._matcher),
                        )
            finally:
                overlay.discard_later()

    async def _with_proxy(
        self, body: Callable[[str | None], Awaitable[ShellExit]], hosts: Sequence[str] = ()
    ) -> ShellExit:
        # Runs body(proxy directory or None); the proxy, when there is one, lives
        # exactly as long. Errors are carried out of the nursery unwrapped. ``hosts``:
        # approved for this command only, on top of the allowlist (or alone).
        if self.network == "host" or (self.network != "allowlist" and not hosts):
            return await body(None)
        for host in hosts:
            refusal = granted_host_refusal(host)
            if refusal is not None:
                raise SandboxUnavailableError(
                    f"cannot grant the connection to {host}: {refusal}; refusing to run"
                )
        allowlist = HostAllowlist(self.allowed_hosts, granted=tuple(hosts))
        results: list[ShellExit] = []
        raised: list[BaseException] = []
        async with trio.open_nursery() as nursery:
            try:
                directory: str = await nursery.start(serve_connect_proxy, allowlist)
                results.append(await body(directory))
            except BaseException as exc:
                # Carried out and re-raised below, so that it is not wrapped in the
                # nursery's ExceptionGroup (callers catch Cancelled and our errors).
                raised.append(exc)
            nursery.cancel_scope.cancel()
        if raised:
            raise raised[0]
        return results[0]

    async def _run_overlaid(
        self,
        argv: Sequence[str],
        cwd: str,
        run: Callable[[_Launch], Awaitable[ShellExit]],
        notes: list[str] | None = None,
        grant: AccessGrant | None = None,
        write_dirs: tuple[str, ...] | None = None,
    ) -> ShellExit:
        async def body(proxy_dir: str | None) -> ShellExit:
            session = _Session(grant=grant, write_dirs=write_dirs)
            try:
                launch = await trio.to_thread.run_sync(self._prepare, session, argv, cwd, proxy_dir)
                return await run(launch)
            finally:
                # after the command (its whole tree is gone), also when cancelled
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(self._finish, session)
                if notes is not None:
                    notes.extend(session.notes)

        return await self._with_proxy(body, () if grant is None else grant.hosts)

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
            try:
                await self._run_overlaid(["true"], "/", self._probe)
            except OSError as exc:
                raise SandboxUnavailableError(
                    f"the sandbox could not be prepared ({exc}); refusing to run unsandboxed"
                ) from exc
            self._ready = True

    async def _probe(self, launch: _Launch) -> ShellExit:
        said: list[bytes] = []

        async def collect(chunk: bytes) -> None:
            said.append(chunk)

        try:
            with trio.fail_after(_PROBE_TIMEOUT_S):
                result = await self._launch(
                    launch, env={"PATH": os.defpath}, on_output=collect, kill_grace_s=0
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
        if result.exit_code != 0:
            output = b"".join(said).decode("utf-8", "replace").strip()[:500]
            raise SandboxUnavailableError(
                f"bubblewrap cannot create its sandbox here (exit {result.exit_code}: "
                f"{output or 'no output'}); refusing to run unsandboxed"
            )
        return result


@attrs.frozen
class _Launch:
    """How one command starts.

    bwrap's argument vector, the overlays its launcher mounts (``[options, root]``)
    and the seccomp program's file (None: the bridge applies it).
    """

    argv: list[str]
    overlays: list[list[str]]
    seccomp: str | None


@attrs.define
class _Session:
    """The private layers of one command, and what applying them left out."""

    overlays: dict[str, RootOverlay] = attrs.field(factory=dict)
    notes: list[str] = attrs.field(factory=list)
    grant: AccessGrant | None = None
    # the directories the policy proved every write of the command lies in (None: any)
    write_dirs: tuple[str, ...] | None = None

    def outside_directories(self) -> list[str]:
        """The directories of the approved writes outside the roots (each once)."""
        out: list[str] = []
        for path in () if self.grant is None else self.grant.outside_writes:
            directory = os.path.dirname(path)
            if directory not in out:
                out.append(directory)
        return out

    def granted(self, directory: str) -> tuple[list[tuple[str, ...]], bool]:
        """What the grant lets back from the layer over ``directory``; whether only that.

        A directory outside the roots lets back only its approved paths; a root,
        everything as usual plus its approved protected paths.
        """
        if self.grant is None:
            return [], False
        if directory in self.outside_directories():
            names = [os.path.basename(p) for p in self.grant.outside_writes
                     if os.path.dirname(p) == directory]  # fmt: skip
            return [(name,) for name in names], True
        prefix = directory.rstrip("/") + "/"
        inside = [p[len(prefix) :] for p in self.grant.protected_writes if p.startswith(prefix)]
        return [tuple(p.split("/")) for p in inside], False


def _shown(text: str) -> bytes:
    r"""``text`` as UTF-8, each byte of a name that is not UTF-8 shown as its escape.

    A name the copy-back left out is text decoded with ``surrogateescape``; its
    raw bytes in the output would be read as a replacement character (and a
    strict encoding raised, the finished call reported as a tool failure)::

        >>> _shown("not applied to d\udcff/.envrc")
        b'not applied to d\\xff/.envrc'
    """
    raw = text.encode("utf-8", "surrogateescape")
    return raw.decode("utf-8", "backslashreplace").encode()


def _reported(notes: Sequence[str]) -> bytes:
    """The copy-back's notes as the lines put after the command's output."""
    return _shown("".join(f"\n[prism sandbox] {note}" for note in notes) + "\n")


def _apply_lock(root: str) -> threading.Lock:
    with _APPLY_LOCKS_LOCK:
        return _APPLY_LOCKS.setdefault(root, threading.Lock())


def _anchored(root: str, matcher: ProtectedPaths) -> Callable[[], Sequence[str]]:
    def entries() -> Sequence[str]:
        return implied_protected(root, matcher)

    return entries


@attrs.frozen
class _SandboxShellOperations:
    backend: SandboxBackend
    kill_grace_s: float

    async def run(self, request: ShellSpawnRequest, on_output: OutputSink) -> ShellExit:
        await self.backend.ensure_available()
        if isinstance(self.backend, LandlockSandbox):
            return await self.backend._run(
                request.argv,
                cwd=request.cwd,
                env=request.env,
                on_output=on_output,
                kill_grace_s=self.kill_grace_s,
                read_only=request.read_only and request.grant is None,
            )
        if not isinstance(self.backend, BubblewrapSandbox):
            argv = self.backend.wrap(request.argv, cwd=request.cwd)
            return await self._run(argv, request, on_output)

        backend = self.backend

        async def run(launch: _Launch) -> ShellExit:
            return await backend._launch(
                launch, env=request.env, on_output=on_output, kill_grace_s=self.kill_grace_s
            )

        if request.read_only and request.grant is None:
            # proved to write nothing: the roots read-only, no layer to take back
            return await self.backend._run_read_only(request.argv, request.cwd, run)
        if request.in_place is not None and request.grant is None:
            # one `sed -i` proved a text filter: the files edited here, the roots read-only
            result = await self.backend._run_in_place(request, on_output, self.kill_grace_s)
            if result is not None:
                return result
        if request.redirected is not None and request.grant is None:
            # its only writes are redirections: opened here, the roots read-only
            result = await self.backend._run_redirected(request, on_output, self.kill_grace_s)
            if result is not None:
                return result
        notes: list[str] = []
        result = await self.backend._run_overlaid(
            request.argv, request.cwd, run, notes, request.grant, request.write_dirs
        )
        if notes:
            await on_output(_reported(notes))
        return result

    async def _run(
        self, argv: Sequence[str], request: ShellSpawnRequest, on_output: OutputSink
    ) -> ShellExit:
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
    (shielded, time-bounded) before ``trio.Cancelled`` propagates. For a
    :class:`BubblewrapSandbox`, the command's changes to the roots are applied
    when it has ended, protected paths left out and reported; what the roots'
    own files protect (their repositories' hooks, virtual environments, ...) is
    looked for on a thread of its own as soon as the operations are made, so the
    first command does not wait for a walk of every root.

    Raises:
        ConfigurationError: ``backend`` is not a :class:`SandboxBackend` or
            ``kill_grace_s`` is not a number in [0, 60].
    """
    owner = "create_sandbox_shell_operations"
    instance_of(SandboxBackend, description="a SandboxBackend").check(owner, "backend", backend)
    number(minimum=0, maximum=60).check(owner, "kill_grace_s", kill_grace_s)
    if isinstance(backend, BubblewrapSandbox):
        # each call's copy-back asks what the roots' own files protect: found now, off
        # the event loop, the first call does not pay the walk of every root
        warm_in_background(backend.writable_roots, backend._matcher)
    return _SandboxShellOperations(backend, float(kill_grace_s))
