"""Apply a Landlock ruleset, a seccomp filter and rlimits to this process, then exec.

Run by path with ``python -I -S`` (standard library only, nothing from the
environment is imported)::

    python -I -S _landlock_exec.py CONFIG_JSON -- PROGRAM ARGS...

Before the restriction every capability is dropped (see
:func:`drop_capabilities`). CONFIG_JSON holds ``write`` (directories made
writable), ``network`` (false:
TCP bind/connect handled with no rule, ABI >= 4), ``filter`` (hex of the
seccomp program) and ``limits`` (``{"cpu": s, "as": bytes, "nproc": n}``).

It fails closed: any error prints one line to stderr and exits 126 without
running PROGRAM. The process that runs this file stays, as a child subreaper,
while PROGRAM runs in a restricted child: when PROGRAM ends (or this process
gets SIGTERM, SIGINT or SIGHUP), every process it left behind is killed.
Landlock and seccomp cannot be undone, which is why they are applied here, in
the child, and not in the caller.

The same file is the sandboxes' fork server (``--serve``, described with
:func:`serve`): started once per sandbox, it forks once per command instead of
starting an interpreter. For ``LandlockSandbox`` the server forks a spawner,
which restricts itself as above once and spawns (vfork and exec) each command,
one at a time, as the subreaper of what the command leaves, which it kills when
the command ends; for ``BubblewrapSandbox``
(``{"mode": "namespaces"}``) the child mounts the roots' overlays in a new user
and mount namespace and execs bwrap (with no overlay to mount it execs bwrap at
once).
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import errno
import fcntl
import importlib
import json
import os
import re
import resource
import select
import signal
import socket
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

# linux/landlock.h
CREATE_RULESET_VERSION = 1 << 0
RULE_PATH_BENEATH = 1
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REFER = 1 << 13
FS_TRUNCATE = 1 << 14
NET_BIND_TCP = 1 << 0
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1

# the same numbers on x86_64 and aarch64 (asm-generic numbering)
SYS_CREATE_RULESET = 444
SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
# the C functions below the signal module's wrappers, which turn every number into an
# enum and back: in a command's freshly forked process that cost about 0.4 ms of CPU
# (the pages of the enum machinery it touched, copied)
_c_signal: Any = importlib.import_module("_signal")


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def abi_version() -> int:
    """The Landlock ABI version of the running kernel, or 0 when it has none."""
    if not sys.platform.startswith("linux"):
        return 0  # the syscall numbers below mean something else elsewhere
    result = _libc.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), CREATE_RULESET_VERSION)
    return max(int(result), 0)


def _fs_rights(abi: int) -> int:
    rights = (1 << 13) - 1  # EXECUTE .. MAKE_SYM, ABI 1
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    return rights


def _add_path(ruleset: int, path: str, access: int, *, exact: bool = False) -> None:
    """Add a rule for ``path``.

    ``exact``: it must be a directory that has this very path (no link on the way: a
    root replaced by a link would open its rule to the link's target).
    """
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC | (os.O_DIRECTORY if exact else 0))
    try:
        if exact and os.readlink(f"/proc/self/fd/{fd}") != path:
            raise OSError(f"{path} is no longer the directory it was (a link or moved)")
        attr = _PathBeneathAttr(access, fd)
        _check(
            _libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(attr), 0),
            f"landlock_add_rule({path})",
        )
    finally:
        os.close(fd)


def build_ruleset(write: list[str], *, network: bool) -> tuple[int, int]:
    """A Landlock ruleset (its descriptor, close-on-exec) and the ABI it was made for."""
    abi = abi_version()
    if abi < 1:
        raise OSError("Landlock is not available in this kernel")
    fs = _fs_rights(abi)
    attr = _RulesetAttr(fs, 0, 0)
    size = 8
    if abi >= 4:
        size = 16
        if not network:
            attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
    if abi >= 6:
        size = 24
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
    ruleset = _check(
        _libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0),
        "landlock_create_ruleset",
    )
    try:
        _add_path(ruleset, "/", FS_EXECUTE | FS_READ_FILE | FS_READ_DIR)
        file_write = FS_WRITE_FILE | (FS_TRUNCATE if abi >= 3 else 0)
        _add_path(ruleset, "/dev/null", file_write)
        for directory in write:
            _add_path(ruleset, directory, fs, exact=True)
    except OSError:
        os.close(ruleset)
        raise
    return ruleset, abi


def restrict(write: list[str], *, network: bool) -> int:
    """Restrict this process: read and execute anywhere, write only in ``write``.

    Returns the ABI version used. Raises OSError when Landlock is missing or a
    step fails.
    """
    ruleset, abi = build_ruleset(write, network=network)
    try:
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
        _check(_libc.syscall(SYS_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi


def drop_capabilities() -> None:
    """Drop every capability: bounding set, ambient, effective, permitted, inheritable.

    Landlock does not stop a root process from using its capabilities
    (``reboot``, loading a kernel module, netlink with the network on), so
    root gives them all up; with ``PR_SET_NO_NEW_PRIVS`` an ``exec`` cannot
    bring them back. A process without ``CAP_SETPCAP`` cannot shrink its
    bounding set, and has nothing there to use anyway.
    """
    _drop_capabilities_upto(_last_cap())


# CAP_SETPCAP: without it (effective) every PR_CAPBSET_DROP fails with EPERM
_CAP_SETPCAP = 8


def _may_shrink_bounding_set() -> bool:
    """Whether this process has CAP_SETPCAP in its effective set (True if unknown).

    Read once by the server: each command's process has the server's capabilities.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            status = handle.read()
    except OSError:  # pragma: no cover - no /proc
        return True
    effective = re.search(r"^CapEff:\s*([0-9a-f]{1,16})$", status, re.MULTILINE)
    return effective is None or bool(int(effective[1], 16) >> _CAP_SETPCAP & 1)


def _last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return 63


def _drop_capabilities_upto(last: int, *, bounding: bool = True) -> None:
    """Drop every capability; the bounding set's one by one only when ``bounding``."""
    if bounding:
        for cap in range(last + 1):
            _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset")


def install_filter(program: bytes) -> None:
    """Install the classic-BPF seccomp ``program`` (NO_NEW_PRIVS must be set)."""
    buffer = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    _check(
        _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0),
        "prctl(SECCOMP)",
    )


def _limits(limits: dict[str, int]) -> None:
    names = {"cpu": resource.RLIMIT_CPU, "as": resource.RLIMIT_AS, "nproc": resource.RLIMIT_NPROC}
    for key, value in limits.items():
        resource.setrlimit(names[key], (value, value))


def _children(of: int = 0) -> list[int]:
    """The children of process ``of`` (this one by default; orphans a subreaper adopted)."""
    of = of or os.getpid()
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{of}/task")
    except OSError:
        tasks = []
    for task in tasks:
        try:
            with open(f"/proc/{of}/task/{task}/children", encoding="ascii") as handle:
                out += [int(pid) for pid in handle.read().split()]
        except (OSError, ValueError):
            continue
    return out


def _end_all() -> None:
    """Kill every descendant: each child, then the orphans it leaves, until none is left."""
    while True:
        for pid in _children():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _supervise(child: int) -> int:
    """Wait for ``child``; then end every process it left behind; its exit status."""
    status = 0
    while True:
        try:
            pid, raw = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries
            continue
        if pid == child:
            status = os.waitstatus_to_exitcode(raw)
            break
    _end_all()
    return status if status >= 0 else 128 - status


def _stop(signum: int, frame: object) -> None:
    _end_all()
    os._exit(128 + signum)


def main(args: list[str]) -> int:
    """Parse ``CONFIG_JSON -- PROGRAM ARGS...``, restrict, run; 126 on any failure.

    This process becomes a child subreaper and runs the command in a restricted
    child: a process the command starts and leaves behind (a ``setsid`` daemon, a
    double fork) is adopted here and killed when the command ends, or when this
    process is told to stop.
    """
    try:
        if len(args) < 3 or args[1] != "--":
            raise ValueError("usage: _landlock_exec.py CONFIG_JSON -- PROGRAM ARGS...")
        config = json.loads(args[0])
        program = args[2:]
        _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")
        _check(_libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(CHILD_SUBREAPER)")
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, _stop)
        read_end, write_end = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - measured in the child, which execs or exits
            os.close(read_end)
            _run(config, program, write_end)
        os.close(write_end)
        failure = os.read(read_end, 4096)
        os.close(read_end)
        status = _supervise(child)
        if failure:
            print(failure.decode("utf-8", "replace"), file=sys.stderr)
        return status
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"prism landlock sandbox: {exc}; not running the command", file=sys.stderr)
        return 126


def _handled_signals(also: tuple[int, ...] = ()) -> tuple[int, ...]:
    """The signals whose action here is not the default, and ``also``.

    Python knows each one's action: read at its start, set since only by this file.
    """
    return tuple(
        signum
        for signum in signal.valid_signals()
        if signum not in (signal.SIGKILL, signal.SIGSTOP)
        and (signum in also or signal.getsignal(signum) is not signal.SIG_DFL)
    )


def _default_signals(which: tuple[int, ...] | None = None) -> None:  # pragma: no cover
    """Every signal's default action and an empty mask, as a command expects (in a child).

    An ignored signal stays ignored across exec, and Python ignores SIGPIPE and
    SIGXFSZ: without this, ``yes | head -1`` ends with "Broken pipe" (status 1,
    not 141) and a shell loop writing to a closed pipe runs until the timeout.
    Only the signals whose action is not already the default are set
    (:func:`_handled_signals`; ``which``: those, found before the fork);
    setting all 62 cost about 0.06 ms of CPU more a command.
    """
    for signum in _handled_signals() if which is None else which:
        with contextlib.suppress(OSError, ValueError):
            _c_signal.signal(signum, _c_signal.SIG_DFL)
    _c_signal.pthread_sigmask(_c_signal.SIG_SETMASK, ())


def _run(config: dict[str, object], program: list[str], report: int) -> None:  # pragma: no cover
    """In the child: restrict, exec; on failure write one line to ``report`` and exit 126."""
    try:
        _default_signals()
        _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")
        limits = config["limits"]
        assert isinstance(limits, dict)
        _limits(limits)
        drop_capabilities()
        write = config["write"]
        assert isinstance(write, list)
        restrict(write, network=config["network"] is True)
        install_filter(bytes.fromhex(str(config["filter"])))
        os.set_inheritable(report, False)
        os.execvp(program[0], program)
    except (OSError, ValueError, KeyError, TypeError, AssertionError) as exc:
        os.write(report, f"prism landlock sandbox: {exc}; not running the command".encode())
    os._exit(126)


# --- the fork server ---------------------------------------------------------------
#
# ``python -I -S _landlock_exec.py --serve FD CONFIG_JSON``, FD a SOCK_SEQPACKET unix
# socket to the caller: started once per sandbox, it keeps the Landlock ruleset and the
# seccomp program ready, and for each command forks (no interpreter start). Protocol:
#
# * caller -> server (FD): one message b"R" carrying two descriptors (SCM_RIGHTS): a
#   stream socket for this command and the write end of its output pipe; in
#   ``namespaces`` mode up to six more, files the command gets on the descriptors its
#   request's "fds" lists (4 to 9: a line's redirected writes; 0 and 1: a file and
#   the new file a filter reads and prints into; opened by the caller). The server
#   answers nothing on FD; when FD reaches end of file (the caller closed it, or
#   died) every process it started is killed and it exits.
# * the server reads on each command's stream socket (as its bytes arrive, between
#   other commands) a 4-byte length and a JSON object {"argv", "cwd", "env"} (and
#   "read_only": true for a line proved to write nothing), forks the command's
#   process and writes lines back:
#     b"E <errno> <text>\n"  the working directory could not be entered (nothing ran)
#     b"S <pid>\n"           the command runs (or failed to start: exit status 126 and
#                            one line of output, as in the one-shot mode)
#     b"X <status>\n"        it ended and every process it left was killed (status:
#                            the exit code, 128 + N for signal N)
#   A byte (or end of file) from the caller on the stream socket kills the command and
#   everything it started; the server then answers b"X ...". One fork per command.
# * Landlock: the server hands the command (its request, socket and output) to an
#   idle spawner (see _Spawner), forking one when none is. The spawner restricted
#   itself once (rlimits, capabilities dropped, no new privileges, Landlock, seccomp)
#   and spawns the command's process (new session, vfork and exec), which inherits it
#   all; it is the child subreaper of what the command leaves behind while it runs
#   (``setsid -f``, a double fork). When the command's process ends (or the caller
#   asks), it kills every process it holds until none is left, answers b"X ...", and
#   is idle again. The server runs below a guardian, the process Prism started, also
#   a child subreaper: a spawner killed from outside leaves its command and what it
#   held to the server, which kills them (any child of its that is no spawner), and a
#   stopped one is killed; the server killed, its spawners die with it (their
#   parent-death signal) and the guardian kills what they held; a killed guardian
#   makes the server (its parent-death signal, SIGTERM) kill everything it started
#   and exit.
# * In ``namespaces`` mode (bubblewrap's launcher) the command's process mounts its
#   overlays and execs bwrap, whose PID namespace ends every process the command
#   starts; the server answers b"X ..." once it reaped bwrap and its namespace's first
#   process.
#
# The ruleset is built once and rebuilt when a path it names (a writable root, ``/`` or
# ``/dev/null``) is no longer the same directory or file (device and inode compared on
# every command): a rule holds the inode it was made for, not the path.

_REQUEST_LIMIT = 1 << 24
_MAX_PASSED = 6  # files passed to a command (namespaces mode), on descriptors 0, 1, 4 to 9


class _Ruleset:
    """The Landlock ruleset of the server's writable roots, rebuilt when a path moved."""

    def __init__(self, write: list[str], *, network: bool) -> None:
        self.write = write
        self.network = network
        self.fd = -1
        self.abi = 0
        self.error = ""
        self.identity: list[tuple[int, int]] = []
        self.generation = 0  # counts the builds: a spawner restricted by an older one retires

    def _identity(self) -> list[tuple[int, int]]:
        out = []
        for path in ("/", "/dev/null", *self.write):
            info = os.stat(path)
            out.append((info.st_dev, info.st_ino))
        return out

    def current(self) -> int:
        """The ruleset's descriptor (built or rebuilt as needed); raises OSError."""
        identity = self._identity()
        if self.fd >= 0 and identity == self.identity:
            return self.fd
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.fd, self.abi = build_ruleset(self.write, network=self.network)
        self.identity = identity
        self.generation += 1
        return self.fd


class _Prepared:
    """What every command needs, made once: the seccomp program, limits, cap_last_cap.

    In ``namespaces`` mode (bubblewrap's launcher) nothing: bubblewrap restricts.
    """

    ruleset: _Ruleset
    read_only: _Ruleset
    limits: list[tuple[int, int]]
    filter: _SockFprog
    last_cap: int

    def __init__(self, config: dict[str, object]) -> None:
        self.namespaces = config.get("mode") == "namespaces"
        # what each command resets (see serve): the server's handled signals, and
        # SIGTERM, SIGINT and SIGHUP (the Landlock server's own, see _guard)
        self.signals: tuple[int, ...] | None = None
        # namespaces mode: the server's own mount namespace (in a user namespace of its
        # own), where each command's is made from (-1: none, the reason in the error)
        self.own_namespace = -1
        self.namespace_error = ""
        if self.namespaces:
            return  # bubblewrap restricts the command; the server only mounts its overlays
        write = config["write"]
        assert isinstance(write, list)
        self.ruleset = _Ruleset([str(p) for p in write], network=config["network"] is True)
        # for a line proved to write nothing: no root writable (``/dev/null`` only)
        self.read_only = _Ruleset([], network=config["network"] is True)
        limits = config["limits"]
        assert isinstance(limits, dict)
        names = {"cpu": resource.RLIMIT_CPU, "as": resource.RLIMIT_AS}
        names["nproc"] = resource.RLIMIT_NPROC
        self.limits = [(names[key], int(value)) for key, value in limits.items()]
        program = bytes.fromhex(str(config["filter"]))
        self.filter_buffer = ctypes.create_string_buffer(program, len(program))
        pointer = ctypes.cast(self.filter_buffer, ctypes.c_void_p)
        self.filter = _SockFprog(len(program) // 8, pointer)
        self.last_cap = _last_cap()
        self.bounding = _may_shrink_bounding_set()


def _send(sock: socket.socket, line: str) -> None:
    with contextlib.suppress(OSError):
        sock.sendall(line.encode())


def _wakeup() -> int:
    """A pipe's read end that becomes readable on SIGCHLD."""
    read_end, write_end = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    return read_end


def _drain(fd: int) -> None:
    with contextlib.suppress(BlockingIOError):
        while os.read(fd, 4096):
            pass


def _command(
    prepared: _Prepared,
    ruleset: int,
    request: dict[str, object],
    output: int,
    report: int,
    passed: tuple[int, ...] = (),
) -> None:  # pragma: no cover - in the command's process, which execs or exits
    """Become the command and exec it; on failure write why to ``report`` and exit 126.

    In order: a new session, the descriptors, the working directory, the limits, no
    capabilities, Landlock, seccomp. The report starts with the stage (``cwd``, ``run``).
    """
    stage = "run"
    try:
        signal.set_wakeup_fd(-1)
        _default_signals(prepared.signals)
        os.setsid()
        _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(output, 1)
        os.dup2(output, 2)
        argv = [str(a) for a in request["argv"]]  # type: ignore[attr-defined]
        env = {str(k): str(v) for k, v in request["env"].items()}  # type: ignore[attr-defined]
        stage = "cwd"
        os.chdir(str(request["cwd"]))
        stage = "run"
        if prepared.namespaces:
            report = fcntl.fcntl(report, fcntl.F_DUPFD_CLOEXEC, 64)
            # out of the way first: a passed file may sit on another one's descriptor
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 64) for fd in passed]
            stage = "mount"
            if request["overlays"]:
                # no layer to mount (the roots read-only): no namespace of our own,
                # bwrap makes its user namespace from this one (one less to set up)
                _overlays(request["overlays"])  # type: ignore[arg-type]
            stage = "run"
            _seccomp_on_fd_3(request.get("seccomp"))
            targets = request.get("fds") or []
            assert isinstance(targets, list)
            for fd, target in zip(high, targets, strict=True):
                if type(target) is not int or not (target in (0, 1) or 3 < target < 10):
                    raise ValueError(
                        f"a passed file's descriptor is 0, 1 or 4 to 9, got {target!r}"
                    )
                os.dup2(fd, target)  # inheritable there
            os.execvpe(argv[0], argv, env)
        # (a Landlock command is spawned by a spawner, never forked here)
        raise ValueError("a Landlock command's process is spawned, not forked")
    except BaseException as exc:  # report it; never run unrestricted
        number = exc.errno if isinstance(exc, OSError) and exc.errno else 0
        with contextlib.suppress(OSError):
            os.write(report, f"{stage} {number} {exc}".encode(errors="replace")[:4000])
    os._exit(125 if stage == "mount" else 126)


CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _overlays(overlays: list[list[str]]) -> None:  # pragma: no cover - in the child
    """Enter a new user and mount namespace and mount each overlay there.

    This user is the namespace's root; each item is ``[options, target]``. What
    ``unshare --user --map-root-user --mount --propagation private`` and
    ``mount -t overlay`` do.
    """
    uid, gid = os.getuid(), os.getgid()
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare(user, mount)")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"0 {uid} 1")
    _write("/proc/self/gid_map", f"0 {gid} 1")
    _check(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount(private /)")
    for request in overlays:
        options, target = request[0], request[1]
        if len(request) > 2:
            # a narrowed layer: its lower directory opened without following a link
            # and checked to be the one the policy placed, then named by descriptor
            root, below, device, inode = request[2:6]
            fd = _open_nofollow(root, [p for p in below.split("/") if p])
            seen = os.fstat(fd)
            if (seen.st_dev, seen.st_ino) != (int(device), int(inode)):
                raise OSError(errno.ESTALE, f"{root}/{below} was replaced since it was checked")
            options = f"lowerdir=/proc/self/fd/{fd},{options}"
        _check(
            _libc.mount(b"prism", os.fsencode(target), b"overlay", 0, os.fsencode(options)),
            f"mount overlay on {target}",
        )


def _open_nofollow(root: str, below: list[str]) -> int:  # pragma: no cover - in the child
    """A descriptor of ``root``/``below``, each step opened without following a link."""
    flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(root, flags)
    for name in below:
        try:
            step = os.open(name, flags, dir_fd=fd)
        finally:
            os.close(fd)
        fd = step
    return fd


def _seccomp_on_fd_3(path: object) -> None:  # pragma: no cover - in the child
    """Open the seccomp program at ``path`` on descriptor 3 (``bwrap --seccomp 3``).

    Nothing when ``path`` is None.
    """
    if path is None:
        return
    fd = os.open(str(path), os.O_RDONLY | os.O_CLOEXEC)
    if fd == 3:
        os.set_inheritable(3, True)
    else:
        os.dup2(fd, 3)
        os.close(fd)


def serve(config: dict[str, object], control: socket.socket) -> int:  # pragma: no cover
    """The fork server's loop (see the protocol above); returns when ``control`` closes."""
    prepared = _Prepared(config)
    _check(_libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(CHILD_SUBREAPER)")
    if prepared.namespaces:
        try:
            prepared.own_namespace = _own_namespace()
        except OSError as exc:
            prepared.namespace_error = str(exc)  # (each command with an overlay forks)
    wakeup = _wakeup()
    # found once: what each command resets (SIGCHLD is set here already), as numbers
    handled = _handled_signals((signal.SIGTERM, signal.SIGINT, signal.SIGHUP))
    prepared.signals = tuple(int(signum) for signum in handled)
    if not prepared.namespaces and prepared.bounding:
        # the bounding set emptied once, here, for every command (0.26 ms of a command's
        # CPU): it bounds what an exec gains, and this process never execs (it keeps
        # its own capabilities); each command empties its other sets itself
        for cap in range(prepared.last_cap + 1):
            _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
        prepared.bounding = False
    # the commands' processes (and a killed bwrap's namespace): every other child is
    # a process an ended command left behind, killed
    started: set[int] = set()
    control_fd = control.fileno()
    fd_size = array.array("i").itemsize
    poller = select.poll()
    poller.register(control_fd, select.POLLIN)
    poller.register(wakeup, select.POLLIN)
    # each command's state, by its socket's descriptor
    direct: dict[int, _Direct] = {}
    # Landlock: the restricted processes that spawn the commands, by their channel's descriptor
    spawners: dict[int, _Spawner] = {}
    while True:
        ready = {ready_fd for ready_fd, _ in poller.poll()}
        if wakeup in ready:
            _drain(wakeup)
            _reap(prepared, started, direct, poller, spawners)
        for fd in ready & spawners.keys():
            spawners[fd].said(spawners, poller)
        for fd in ready & direct.keys():
            _step(prepared, direct[fd], direct, started, poller, spawners)
        if control_fd not in ready:
            continue
        try:
            message, ancillary, _, _ = control.recvmsg(
                16, socket.CMSG_SPACE((2 + _MAX_PASSED) * fd_size), socket.MSG_CMSG_CLOEXEC
            )
        except InterruptedError:
            continue
        fds = array.array("i")
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - len(data) % fd_size])
        if not message:
            for fd in fds:
                os.close(fd)
            _end_all()
            return 0
        if message != b"R" or not 2 <= len(fds) <= 2 + _MAX_PASSED:
            for fd in fds:
                os.close(fd)
            continue
        # read as its bytes arrive; the command's process is forked once it is whole
        direct[fds[0]] = _Direct(socket.socket(fileno=fds[0]), fds[1], tuple(fds[2:]))
        poller.register(fds[0], select.POLLIN)


def _reap(
    prepared: _Prepared,
    started: set[int],
    direct: dict[int, _Direct],
    poller: select.poll,
    spawners: dict[int, _Spawner],
) -> None:  # pragma: no cover - in the fork server
    """Collect ended commands and spawners; kill every other child; answer for the commands.

    Landlock: a spawner killed from outside leaves its command and what it left to
    this process, which kills them (the command's caller sees its socket end).
    """
    commands = {command.pid: command for command in direct.values() if command.pid}
    while True:
        try:
            pid, raw = os.waitpid(-1, os.WNOHANG | os.WUNTRACED)
        except ChildProcessError:
            break
        if pid == 0:
            break
        if os.WIFSTOPPED(raw):
            # a spawner stopped (by its command, which shares its domain): it would
            # never end what its command leaves; killed, they come here and die
            if any(spawner.pid == pid for spawner in spawners.values()):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            continue
        started.discard(pid)
        for spawner in list(spawners.values()):
            if spawner.pid == pid:
                spawner.close(spawners, poller)
        for running in direct.values():
            running.inner.discard(pid)  # (a killed bwrap's namespace, adopted here, gone)
        ended = commands.get(pid)
        if ended is not None:
            code = os.waitstatus_to_exitcode(raw)
            ended.status = f"X {code if code >= 0 else 128 - code}\n"
            if ended.inner:
                # (adopted as bwrap ended, or already reaped by it: then not waited for)
                ended.inner &= set(_children())
    left = [pid for pid in _children() if pid not in started]
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for command in list(direct.values()):
        # bwrap: answered once its namespace is gone too (the namespace's first process
        # outlives a killed bwrap until the kernel has ended every process in it);
        # Landlock: once every process left behind was killed and reaped
        if command.status and not command.inner and (prepared.namespaces or not left):
            _send(command.connection, command.status)
            command.close(direct, poller)


class _Direct:  # pragma: no cover - in the fork server
    """A command the server runs itself (namespaces mode): its request, then its process."""

    def __init__(self, connection: socket.socket, output: int, passed: tuple[int, ...]) -> None:
        self.connection = connection
        self.output = output
        self.passed = passed
        self.request = b""
        self.pid = 0
        self.status = ""  # its answer, once bwrap was reaped
        self.inner: set[int] = set()  # a killed bwrap's namespace: its first process

    def release(self) -> None:
        """Close the command's output and passed files (its process has its own)."""
        for fd in (self.output, *self.passed):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.output, self.passed = -1, ()

    def close(self, direct: dict[int, _Direct], poller: select.poll) -> None:
        """Forget the command: nothing more is read or said on its socket."""
        self.release()
        fd = self.connection.fileno()
        direct.pop(fd, None)
        with contextlib.suppress(KeyError):
            poller.unregister(fd)
        self.connection.close()


def _step(
    prepared: _Prepared,
    command: _Direct,
    direct: dict[int, _Direct],
    started: set[int],
    poller: select.poll,
    spawners: dict[int, _Spawner],
) -> None:  # pragma: no cover - in the fork server
    """The command's socket is readable: more of its request, or (running) a stop."""
    fd = command.connection.fileno()
    if command.pid:
        # a byte or end of file: the command is killed (bwrap's namespace with it;
        # under Landlock what it started is re-parented here and killed); its status
        # is answered when it is reaped
        with contextlib.suppress(KeyError):
            poller.unregister(fd)
        if prepared.namespaces:
            # (its namespace's first process is adopted here when bwrap dies; the answer
            # waits until it is reaped, after the kernel ended everything in the namespace)
            command.inner = set(_children(command.pid))
            started.update(command.inner)
        with contextlib.suppress(ProcessLookupError):
            os.kill(command.pid, signal.SIGKILL)
        return
    try:
        chunk = os.read(fd, 1 << 16)
    except OSError:
        chunk = b""
    command.request += chunk
    size = int.from_bytes(command.request[:4], "big")
    if not chunk or size > _REQUEST_LIMIT or len(command.request) > 4 + size:
        command.close(direct, poller)  # ended, too large, or stopped: nothing ran
        return
    if len(command.request) < 4 or len(command.request) < 4 + size:
        return  # (the rest is on its way)
    try:
        request = json.loads(command.request[4:])
        assert isinstance(request, dict)
        # files are passed only to bwrap's launcher, one for each descriptor named
        assert not command.passed or prepared.namespaces
        assert len(request.get("fds") or ()) == len(command.passed)
    except (ValueError, AssertionError, TypeError):
        command.close(direct, poller)
        return
    name = "sandbox" if prepared.namespaces else "landlock sandbox"
    ruleset = -1
    if not prepared.namespaces:
        try:
            chosen = prepared.read_only if request.get("read_only") is True else prepared.ruleset
            ruleset = chosen.current()
            for _ in range(2):  # (a spawner that just ended: another one)
                spawner = _spawner(prepared, chosen, ruleset, spawners, started, poller)
                if spawner.run(command, spawners, poller):
                    break
            else:
                raise OSError(errno.ECHILD, "no process to spawn the command")
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.write(command.output, f"prism {name}: {exc}; not running the command\n".encode())
            command.release()
            _send(command.connection, f"S {os.getpid()}\nX 126\n")
        command.close(direct, poller)  # the spawner answers on its own copy
        return
    if _spawned_at_once(prepared, request):
        # bwrap started without a fork of this interpreter, its overlays mounted here
        status = 125  # (a layer that cannot be mounted: as the forked child said it)
        overlays = request.get("overlays") or []
        try:
            with _command_namespace(prepared, bool(overlays)):
                _mount_overlays(overlays)
                status = 126
                child = _spawn_bwrap(request, command.output, command.passed)
        except (OSError, ValueError, TypeError) as exc:
            with contextlib.suppress(OSError):
                os.write(command.output, f"prism {name}: {exc}; not running the command\n".encode())
            command.release()
            _send(command.connection, f"S {os.getpid()}\nX {status}\n")
            command.close(direct, poller)
            return
        command.release()
        command.pid = child
        started.add(child)
        _send(command.connection, f"S {child}\n")
        return
    report_read, report_write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(report_read)
        _command(prepared, ruleset, request, command.output, report_write, command.passed)
    os.close(report_write)
    failure = ""
    with contextlib.suppress(OSError):
        failure = os.read(report_read, 4096).decode(errors="replace")  # (until its exec)
    os.close(report_read)
    if failure.startswith("cwd "):
        command.release()
        _, number, text = failure.split(" ", 2)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(child, 0)
        _send(command.connection, f"E {number} {text}\n".replace("\n", " ").rstrip() + "\n")
        command.close(direct, poller)
        return
    if failure:
        with contextlib.suppress(OSError, IndexError):
            text = failure.split(" ", 2)[2]
            os.write(command.output, f"prism {name}: {text}; not running the command\n".encode())
    command.release()
    command.pid = child
    started.add(child)
    _send(command.connection, f"S {child}\n")


# Landlock's spawners. Forking this process for each command cost about 2 ms of CPU
# more than a plain spawn (the copy of its page tables, this process's writes faulting
# after, the command's Python before exec, and exec freeing the copy). So a command is
# spawned (vfork and exec: posix_spawn) by a spawner: a process forked from this one
# that restricted itself once (limits, no capabilities, no new privileges, Landlock,
# seccomp: what each command's process did before), which every command it spawns
# inherits. A spawner runs one command at a time and is the child subreaper of what
# the command leaves: when the command's process ends it kills every process it holds,
# until none is left, then answers b"X ..." and tells the server it is idle (b"d").
# Spawners are kept per ruleset (read-write, read-only) while it is not rebuilt; a
# spawner whose CPU time neared its own RLIMIT_CPU says b"q" instead, and ends.

_IDLE_KEPT = 2  # idle spawners kept per ruleset; one more concurrent command forks one


class _Spawner:  # pragma: no cover - in the fork server
    """The server's side of one spawner: its process and its channel."""

    def __init__(self, pid: int, channel: socket.socket, ruleset: _Ruleset) -> None:
        self.pid = pid
        self.channel = channel
        self.ruleset = ruleset
        self.generation = ruleset.generation
        self.busy = False

    def run(self, command: _Direct, spawners: dict[int, _Spawner], poller: select.poll) -> bool:
        """Hand ``command`` (its request, socket and output) over; False if it had ended."""
        payload = command.request
        try:
            sent = self.channel.sendmsg(
                [payload],
                [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                  array.array("i", [command.connection.fileno(), command.output]))],
            )  # fmt: skip
            self.channel.sendall(payload[sent:])
        except OSError:
            self.close(spawners, poller)
            return False
        self.busy = True
        return True

    def said(self, spawners: dict[int, _Spawner], poller: select.poll) -> None:
        """Its channel is readable: idle again (b"d"), or ending (b"q", end of file)."""
        try:
            word = self.channel.recv(64)
        except OSError:
            word = b""
        if not word or word.endswith(b"q"):
            self.close(spawners, poller)
            return
        self.busy = False
        idle = [
            other for other in spawners.values() if other.ruleset is self.ruleset and not other.busy
        ]
        if self.generation != self.ruleset.generation or len(idle) > _IDLE_KEPT:
            self.close(spawners, poller)  # its end of file ends it

    def close(self, spawners: dict[int, _Spawner], poller: select.poll) -> None:
        """Forget it; closing its channel ends it (reaped as any child)."""
        fd = self.channel.fileno()
        if fd >= 0:
            spawners.pop(fd, None)
            with contextlib.suppress(KeyError):
                poller.unregister(fd)
            self.channel.close()


def _spawner(
    prepared: _Prepared,
    chosen: _Ruleset,
    ruleset: int,
    spawners: dict[int, _Spawner],
    started: set[int],
    poller: select.poll,
) -> _Spawner:  # pragma: no cover - in the fork server
    """An idle spawner restricted by ``chosen``'s current build, forked when none is."""
    for spawner in list(spawners.values()):
        if spawner.ruleset is chosen and not spawner.busy:
            if spawner.generation == chosen.generation:
                return spawner
            spawner.close(spawners, poller)  # restricted by a build since replaced
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    server = os.getpid()
    pid = os.fork()
    if pid == 0:
        code = 126
        try:
            code = _spawner_main(prepared, ruleset, theirs.fileno(), server)
        finally:
            os._exit(code)
    theirs.close()
    started.add(pid)
    spawner = _Spawner(pid, ours, chosen)
    spawners[ours.fileno()] = spawner
    poller.register(ours.fileno(), select.POLLIN)
    return spawner


def _spawner_main(
    prepared: _Prepared, ruleset: int, channel_fd: int, server: int
) -> int:  # pragma: no cover - in a spawner
    """Restrict this process (once, for every command it spawns), then serve the server."""
    signal.set_wakeup_fd(-1)
    # nothing of the server's: its control socket, other commands' sockets and outputs
    low, high = sorted((channel_fd, ruleset))
    os.closerange(3, low)
    os.closerange(low + 1, high)
    os.closerange(high + 1, 1 << 20)
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")
    if os.getppid() != server:
        return 1  # the server is already gone
    # what a command leaves behind while it runs is adopted here, not by the server
    _check(_libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(CHILD_SUBREAPER)")
    # its commands share its Landlock domain, which lets them signal it (the server
    # kills it when it stops, see _reap) but not trace it: not dumpable, a process
    # without CAP_SYS_PTRACE cannot (nor read its memory); each exec makes a command
    # dumpable again
    _check(_libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(DUMPABLE)")
    # an address-space limit is set in each command's process (forked, see
    # _spawn_one): set here, it would bound this interpreter too
    memory = dict(prepared.limits).get(resource.RLIMIT_AS)
    for which, value in prepared.limits:
        if which != resource.RLIMIT_AS:
            resource.setrlimit(which, (value, value))
    _drop_capabilities_upto(prepared.last_cap, bounding=prepared.bounding)
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
    _check(_libc.syscall(SYS_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
    os.close(ruleset)
    _check(
        _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prepared.filter), 0, 0),
        "prctl(SECCOMP)",
    )
    wakeup = _wakeup()
    # every action not the default back to it (an ignored one stays ignored across
    # exec), but the handlers' (exec resets them: SIGCHLD's, SIGTERM's, SIGINT's,
    # SIGHUP's) and SIGPIPE's (ignored: a write to a closed socket fails instead;
    # each command gets it back through subprocess's restore_signals)
    keep = (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE)
    for signum in _handled_signals():
        if signum not in keep:
            with contextlib.suppress(OSError, ValueError):
                _c_signal.signal(signum, _c_signal.SIG_DFL)
    importlib.import_module("subprocess")  # (here: in the server each fork would pay for it)
    cpu_limit = dict(prepared.limits).get(resource.RLIMIT_CPU)
    channel = socket.socket(fileno=channel_fd)
    while True:
        received = _receive(channel)
        if received is None:
            _end_all()
            return 0
        request, connection, output = received
        _spawn_one(request, connection, output, wakeup, memory)
        used = resource.getrusage(resource.RUSAGE_SELF)
        if cpu_limit is not None and (used.ru_utime + used.ru_stime) * 2 > cpu_limit:
            channel.sendall(b"q")  # its own CPU time nears the limit it runs under
            return 0
        channel.sendall(b"d")


def _receive(
    channel: socket.socket,
) -> tuple[bytes, socket.socket, int] | None:  # pragma: no cover - in a spawner
    """The next command from the server: its request, socket and output; None at its end."""
    fd_size = array.array("i").itemsize
    try:
        data, ancillary, _, _ = channel.recvmsg(
            1 << 16, socket.CMSG_SPACE(2 * fd_size), socket.MSG_CMSG_CLOEXEC
        )
    except OSError:
        return None
    fds = array.array("i")
    for level, kind, item in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(item[: len(item) - len(item) % fd_size])
    if not data or len(fds) != 2:
        for fd in fds:
            os.close(fd)
        return None
    while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
        chunk = channel.recv(1 << 16)
        if not chunk:
            for fd in fds:
                os.close(fd)
            return None
        data += chunk
    return data[4:], socket.socket(fileno=fds[0]), fds[1]


def _spawn_one(
    raw: bytes, connection: socket.socket, output: int, wakeup: int, memory: int | None
) -> None:  # pragma: no cover - in a spawner
    """Run one command: spawn it, answer ``S``, wait, kill what it left, answer ``X``."""
    import subprocess  # (imported by the spawner once; not by the server, see above)

    try:
        request = json.loads(raw)
        argv = [str(a) for a in request["argv"]]
        env = {str(k): str(v) for k, v in request["env"].items()}
        cwd = str(request["cwd"])
    except (ValueError, KeyError, TypeError, AttributeError):
        os.close(output)
        connection.close()
        return
    try:
        os.chdir(cwd)
    except OSError as exc:
        os.close(output)
        text = f"{exc}".replace("\n", " ")
        _send(connection, f"E {exc.errno or 0} {text}\n")
        connection.close()
        return
    if memory is not None:
        pid = _fork_one(argv, env, output, memory)
        os.chdir("/")
        os.close(output)
        _send(connection, f"S {pid}\n")
        status = _wait_command(pid, connection, wakeup)
        _end_all()
        _send(connection, f"X {status if status >= 0 else 128 - status}\n")
        connection.close()
        return
    try:
        # vfork and exec (no preexec function): the program looked up in the command's
        # PATH, a new session, every descriptor but 0 to 2 closed, every signal action
        # not the default here back to it (restore_signals: SIGPIPE and SIGXFSZ; the
        # rest was set so when this process started, but for SIGCHLD's, which exec resets)
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        with contextlib.suppress(OSError):
            os.write(output, f"prism landlock sandbox: {exc}; not running the command\n".encode())
        os.close(output)
        _send(connection, f"S {os.getpid()}\nX 126\n")
        connection.close()
        return
    finally:
        os.chdir("/")
    pid = process.pid
    os.close(output)
    _send(connection, f"S {pid}\n")
    status = _wait_command(pid, connection, wakeup)
    process.returncode = status  # (reaped here: subprocess must not wait for it)
    _end_all()  # every process it left, adopted here, until none is left
    _send(connection, f"X {status if status >= 0 else 128 - status}\n")
    connection.close()


def _fork_one(
    argv: list[str], env: dict[str, str], output: int, memory: int
) -> int:  # pragma: no cover - in a spawner
    """Fork the command's process, which sets its address-space limit and execs; its pid.

    On failure it writes one line to ``output`` and exits 126.
    """
    report_read, report_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(report_read)
            os.setsid()
            null = os.open("/dev/null", os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(output, 1)
            os.dup2(output, 2)
            _c_signal.signal(signal.SIGPIPE, _c_signal.SIG_DFL)  # (the rest are defaults)
            _c_signal.pthread_sigmask(_c_signal.SIG_SETMASK, ())
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
            os.execvpe(argv[0], argv, env)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.write(report_write, f"{exc}".encode(errors="replace")[:4000])
        os._exit(126)
    os.close(report_write)
    failure = b""
    with contextlib.suppress(OSError):
        failure = os.read(report_read, 4096)  # (until its exec)
    os.close(report_read)
    if failure:
        with contextlib.suppress(OSError):
            os.write(output, b"prism landlock sandbox: " + failure + b"; not running the command\n")
    return pid


def _wait_command(
    pid: int, connection: socket.socket, wakeup: int
) -> int:  # pragma: no cover - in a spawner
    """Wait for the command's process (killed on a byte or end of file); its exit code."""
    poller = select.poll()
    poller.register(connection.fileno(), select.POLLIN)
    poller.register(wakeup, select.POLLIN)
    while True:
        while True:  # reap: the command's process, or an orphan it left that ended
            try:
                ended, raw = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:  # pragma: no cover - the command was reaped already
                return 128 + signal.SIGKILL
            if ended == 0:
                break
            if ended == pid:
                return os.waitstatus_to_exitcode(raw)
        for fd, _ in poller.poll():
            if fd == wakeup:
                _drain(wakeup)
            else:
                with contextlib.suppress(KeyError):
                    poller.unregister(fd)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def _spawned_at_once(prepared: _Prepared, request: dict[str, object]) -> bool:
    """Whether the command's bwrap starts with ``posix_spawn``, no fork of the server.

    In ``namespaces`` mode the server mounts a command's overlays in a mount namespace
    made for the command from its own (:func:`_command_namespace`), each on its
    layer's own mount point (bwrap binds it on the directory), so nothing is left to
    do in the command's process before bwrap's ``exec``: what the forked child did
    (a new session, the descriptors, default signals) ``posix_spawn`` does
    (``vfork``: the server's memory is not copied, nor torn down again at ``exec``;
    a fork and ``exec`` cost the server and the child about 3 ms of CPU here, a spawn
    under 1 ms). bwrap gives itself its parent-death signal (``--die-with-parent``),
    and the server kills every child it has when it ends.
    """
    argv = request.get("argv")
    return (
        prepared.namespaces
        and (not request.get("overlays") or prepared.own_namespace >= 0)
        and request.get("cwd") == "/"
        and isinstance(argv, list)
        and bool(argv)
        and isinstance(argv[0], str)
        and argv[0].startswith("/")
    )


def _spawn_bwrap(
    request: dict[str, object], output: int, passed: tuple[int, ...]
) -> int:  # pragma: no cover - in the fork server
    """Start the command's bwrap with ``posix_spawn`` (see :func:`_spawned_at_once`).

    Its standard input ``/dev/null``, its output and errors ``output``, the seccomp
    program on descriptor 3 and each passed file on the descriptor its request names,
    as :func:`_command` gives them; a new session, an empty signal mask, every
    signal's default action. Called through ctypes, not ``os.posix_spawn``: the C
    library's child sets the signals it keeps for itself (glibc's 32 and 33, musl's
    32 to 34) to ignored unless the set of signals made default names them, which
    only a set built without ``sigaddset`` (it refuses them) can, and an ignored
    signal stays ignored in bwrap and the command. Raises OSError (nothing
    started), ValueError.
    """
    argv = [os.fsencode(str(a)) for a in request["argv"]]  # type: ignore[attr-defined]
    env = [os.fsencode(f"{k}={v}") for k, v in request["env"].items()]  # type: ignore[attr-defined]
    targets = request.get("fds") or []
    assert isinstance(targets, list)
    for target in targets:
        if type(target) is not int or not (target in (0, 1) or 3 < target < 10):
            raise ValueError(f"a passed file's descriptor is 0, 1 or 4 to 9, got {target!r}")
    if len(targets) != len(passed):
        raise ValueError("one descriptor for each passed file")
    high: list[int] = []
    actions = ctypes.create_string_buffer(_SPAWN_STRUCT_BYTES)
    attributes = ctypes.create_string_buffer(_SPAWN_STRUCT_BYTES)
    _spawn_check(_libc.posix_spawn_file_actions_init(actions))
    try:
        _spawn_check(_libc.posix_spawnattr_init(attributes))
        try:
            # above every target first: a file received on descriptor 4 may be another's
            for fd in (output, *passed):
                high.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 64))
            _spawn_check(
                _libc.posix_spawn_file_actions_addopen(actions, 0, b"/dev/null", os.O_RDONLY, 0)
            )
            _spawn_check(_libc.posix_spawn_file_actions_adddup2(actions, high[0], 1))
            _spawn_check(_libc.posix_spawn_file_actions_adddup2(actions, high[0], 2))
            seccomp = request.get("seccomp")
            if seccomp is not None:
                path = os.fsencode(str(seccomp))
                _spawn_check(
                    _libc.posix_spawn_file_actions_addopen(actions, 3, path, os.O_RDONLY, 0)
                )
            for fd, target in zip(high[1:], targets, strict=True):
                _spawn_check(_libc.posix_spawn_file_actions_adddup2(actions, fd, target))
            flags = _POSIX_SPAWN_SETSIGDEF | _POSIX_SPAWN_SETSIGMASK | _POSIX_SPAWN_SETSID
            _spawn_check(_libc.posix_spawnattr_setflags(attributes, flags))
            _spawn_check(_libc.posix_spawnattr_setsigdefault(attributes, _EVERY_SIGNAL))
            _spawn_check(_libc.posix_spawnattr_setsigmask(attributes, _NO_SIGNAL))
            pid = ctypes.c_int()
            c_argv = (ctypes.c_char_p * (len(argv) + 1))(*argv, None)
            c_env = (ctypes.c_char_p * (len(env) + 1))(*env, None)
            _spawn_check(
                _libc.posix_spawn(ctypes.byref(pid), argv[0], actions, attributes, c_argv, c_env)
            )
            return pid.value
        finally:
            _libc.posix_spawnattr_destroy(attributes)
    finally:
        _libc.posix_spawn_file_actions_destroy(actions)
        for fd in high:
            os.close(fd)


def _spawn_check(result: int) -> None:
    """The posix_spawn functions return their error number (0: done)."""
    if result:
        raise OSError(result, os.strerror(result))


# posix_spawnattr_t and posix_spawn_file_actions_t (a few hundred bytes at most in glibc
# and musl): room to spare; the flags' values are glibc's and musl's
_SPAWN_STRUCT_BYTES = 1024
_POSIX_SPAWN_SETSIGDEF = 0x04
_POSIX_SPAWN_SETSIGMASK = 0x08
_POSIX_SPAWN_SETSID = 0x80


def _signal_set(numbers: range | tuple[int, ...]) -> ctypes.Array[ctypes.c_ulong]:
    """A sigset_t (128 bytes) holding ``numbers``, bit by bit (no ``sigaddset``)."""
    bits = ctypes.sizeof(ctypes.c_ulong) * 8
    words = (ctypes.c_ulong * (128 * 8 // bits))()
    for number in numbers:
        words[(number - 1) // bits] |= 1 << ((number - 1) % bits)
    return words


# every signal but SIGKILL and SIGSTOP (whose action cannot change), and none
_EVERY_SIGNAL = _signal_set(
    tuple(n for n in range(1, signal.NSIG) if n not in (signal.SIGKILL, signal.SIGSTOP))
)
_NO_SIGNAL = _signal_set(())


MS_SLAVE = 1 << 19


def _own_namespace() -> int:  # pragma: no cover - in the fork server
    """Enter a new user and mount namespace (this user its root); that mount namespace.

    Each command's mount namespace is made from it (:func:`_command_namespace`): the
    host's mounts and unmounts still reach it (slave), none of its own reaches the
    host. Returns a descriptor of it; raises OSError.
    """
    uid, gid = os.getuid(), os.getgid()
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare(user, mount)")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"0 {uid} 1")
    _write("/proc/self/gid_map", f"0 {gid} 1")
    _check(_libc.mount(None, b"/", None, MS_REC | MS_SLAVE, None), "mount(slave /)")
    return os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)


@contextlib.contextmanager
def _command_namespace(
    prepared: _Prepared, needed: bool
) -> Iterator[None]:  # pragma: no cover - in the fork server
    """Inside: the server is in a new mount namespace, the command's, made from its own.

    What is mounted there (the command's overlays) is seen by the command's bwrap
    alone, which is spawned inside and holds the namespace: it goes, with its mounts,
    when bwrap and its own namespace are gone (no other command's sandbox keeps a
    copy of a layer). On leaving, the server is back in its own namespace; if it
    cannot go back it ends (every process it started is killed), never mounting a
    later command's layers beside this one's. Nothing when not ``needed``.
    """
    if not needed:
        yield
        return
    _check(_libc.unshare(CLONE_NEWNS), "unshare(mount)")
    try:
        yield
    finally:
        if _libc.setns(prepared.own_namespace, CLONE_NEWNS) != 0:
            _end_all()
            os._exit(1)


def _mount_overlays(overlays: list[list[str]]) -> None:  # pragma: no cover - server
    """Mount each overlay on its own mount point here (see ``_overlays``).

    Each item is ``[options, mount point, root, below, device, inode]``: its lower
    directory ``root``/``below`` opened without following a link, checked to be the
    one the caller saw, and named by descriptor. Raises OSError (or ValueError for a
    malformed item); what was mounted goes with the command's namespace.
    """
    for request in overlays:
        if not isinstance(request, list) or len(request) != 6:
            raise ValueError(
                "an overlay request is [options, mount point, root, below, device, inode]"
            )
        options, target, root, below, device, inode = (str(p) for p in request)
        fd = _open_nofollow(root, [p for p in below.split("/") if p])
        try:
            seen = os.fstat(fd)
            if (seen.st_dev, seen.st_ino) != (int(device), int(inode)):
                raise OSError(errno.ESTALE, f"{root}/{below} was replaced since it was checked")
            options = f"lowerdir=/proc/self/fd/{fd},{options}"
            _check(
                _libc.mount(b"prism", os.fsencode(target), b"overlay", 0, os.fsencode(options)),
                f"mount overlay on {target}",
            )
        finally:
            os.close(fd)


def _guard(control: int) -> None:  # pragma: no cover - the guardian and the server
    """Fork the Landlock server below this process, which guards it; returns in the server.

    The guardian, a child subreaper holding nothing, waits for the server; once it
    ended, it kills every process it adopted (what the server's commands left) and
    exits. The server's parent-death signal (SIGTERM) makes it kill what it started
    and exit when the guardian is killed.
    """
    _check(_libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(CHILD_SUBREAPER)")
    guardian = os.getpid()
    server = os.fork()
    if server:
        os.close(control)  # the caller sees the server's end of file, not ours
        while True:
            try:
                pid, _ = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            if pid == server:
                break
        _end_all()
        os._exit(0)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _stop)
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0), "prctl(PDEATHSIG)")
    if os.getppid() != guardian:
        os._exit(1)  # the guardian is already gone


def _serve_main(args: list[str]) -> int:  # pragma: no cover - the server process
    """``FD CONFIG_JSON``: serve on the unix socket ``FD``."""
    try:
        fd = int(args[0])
        config = json.loads(args[1])
        assert isinstance(config, dict)
    except (IndexError, ValueError, AssertionError):
        return 2
    os.set_inheritable(fd, False)
    if config.get("mode") != "namespaces":
        _guard(fd)
    return serve(config, socket.socket(fileno=fd))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        sys.exit(_serve_main(sys.argv[2:]))
    sys.exit(main(sys.argv[1:]))
