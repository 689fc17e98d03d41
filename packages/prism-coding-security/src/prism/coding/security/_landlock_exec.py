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
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import signal
import sys

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
PR_SET_CHILD_SUBREAPER = 36
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


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


def _add_path(ruleset: int, path: str, access: int) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        attr = _PathBeneathAttr(access, fd)
        _check(
            _libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(attr), 0),
            f"landlock_add_rule({path})",
        )
    finally:
        os.close(fd)


def restrict(write: list[str], *, network: bool) -> int:
    """Restrict this process: read and execute anywhere, write only in ``write``.

    Returns the ABI version used. Raises OSError when Landlock is missing or a
    step fails.
    """
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
            _add_path(ruleset, directory, fs)
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
    try:
        with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as handle:
            last = int(handle.read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EPERM without CAP_SETPCAP: fine
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


def _children() -> list[int]:
    """This process's children (orphans a subreaper adopted included)."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{os.getpid()}/task")
    except OSError:
        tasks = []
    for task in tasks:
        try:
            with open(f"/proc/{os.getpid()}/task/{task}/children", encoding="ascii") as handle:
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


def _run(config: dict[str, object], program: list[str], report: int) -> None:  # pragma: no cover
    """In the child: restrict, exec; on failure write one line to ``report`` and exit 126."""
    try:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
