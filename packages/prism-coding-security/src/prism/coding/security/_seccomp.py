"""A small, hand-written seccomp filter (classic BPF) for the sandboxes.

The filter is a few dozen instructions, assembled here with ``struct`` so that it
needs no library and can be read in full::

    arch == x86_64  -> x86_64 table     (x32 numbers, nr >= 0x40000000: kill)
    arch == aarch64 -> aarch64 table
    any other arch  -> kill the process  (i386 or arm32 compat entry points)

    socket(AF_INET / AF_INET6)            -> allow   (no network: EPERM)
    socket(AF_NETLINK, *, NETLINK_ROUTE)  -> allow   (what glibc's getaddrinfo
                                                      and if_nameindex use)
    socket(AF_UNIX, ...)                  -> EPERM   (no host unix sockets)
    socket(any other family or netlink)   -> EAFNOSUPPORT (AF_PACKET, AF_VSOCK,
                                                      AF_ALG, AF_XDP, ...)
    socketpair(AF_UNIX)                   -> allow; any other family: EAFNOSUPPORT
    io_uring_setup/enter/register         -> EPERM   (io_uring can open and
                                                      connect sockets without
                                                      the socket syscall)
    add_key, request_key, keyctl          -> EPERM   (the kernel keyrings of the
                                                      user are shared with the
                                                      host: secrets live there)
    Landlock's program (no PID or IPC namespace) also:
    System V IPC, POSIX message queues    -> EPERM   (a host process's segments)
    prlimit64, sched_set*(pid != 0)       -> EPERM   (a host process's limits)
    setpriority, ioprio_set (not self)    -> EPERM
    everything else                       -> allow

``socketpair`` stays allowed: it makes an unnamed, already connected pair that
can reach no socket outside the process tree, and ordinary programs use it.
``socket()``'s domain and protocol are ``int``, so only the low 32 bits of
the arguments are compared (the kernel ignores the rest too).

bwrap reads the compiled program from a file descriptor (``--seccomp FD``) and
installs it, with ``PR_SET_NO_NEW_PRIVS``, just before it runs the command. The
program is kept in one sealed memfd per process; the launcher reopens it by
its ``/proc/<pid>/fd/<n>`` path, so the sandboxed command's descriptor table is
not involved and nothing is written to disk.
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import os
import shutil
import struct
import sys
import tempfile
import threading

__all__ = [
    "LANDLOCK_FILTER",
    "LANDLOCK_NO_SOCKETS_FILTER",
    "SECCOMP_FILTER",
    "assemble",
    "filter_file",
    "filter_path",
]

# classic BPF opcodes (linux/filter.h)
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K

# linux/seccomp.h
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000

# linux/audit.h
AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_AARCH64 = 0xC00000B7
_X32_SYSCALL_BIT = 0x40000000

AF_UNIX = 1
AF_INET = 2
AF_INET6 = 10
AF_NETLINK = 16
NETLINK_ROUTE = 0

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]
_OFF_NR = 0
_OFF_ARCH = 4
_OFF_ARG0_LOW = 16 if sys.byteorder == "little" else 20
_OFF_ARG1_LOW = _OFF_ARG0_LOW + 8
_OFF_ARG2_LOW = _OFF_ARG0_LOW + 16

# syscall numbers (asm/unistd_64.h; asm-generic/unistd.h for aarch64)
_SYSCALLS: dict[str, dict[str, int]] = {
    "x86_64": {
        "socket": 41,
        "socketpair": 53,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "add_key": 248,
        "request_key": 249,
        "keyctl": 250,
        # (Landlock's program only: below)
        "shmget": 29, "shmat": 30, "shmctl": 31, "shmdt": 67, "semget": 64, "semop": 65,
        "semctl": 66, "semtimedop": 220, "msgget": 68, "msgsnd": 69, "msgrcv": 70,
        "msgctl": 71, "mq_open": 240, "mq_unlink": 241, "mq_timedsend": 242,
        "mq_timedreceive": 243, "mq_notify": 244, "mq_getsetattr": 245, "prlimit64": 302,
        "sched_setparam": 142, "sched_setscheduler": 144, "sched_setaffinity": 203,
        "sched_setattr": 314, "setpriority": 141, "ioprio_set": 251,
    },
    "aarch64": {
        "socket": 198,
        "socketpair": 199,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "add_key": 217,
        "request_key": 218,
        "keyctl": 219,
        "shmget": 194, "shmat": 196, "shmctl": 195, "shmdt": 197, "semget": 190, "semop": 193,
        "semctl": 191, "semtimedop": 192, "msgget": 186, "msgsnd": 189, "msgrcv": 188,
        "msgctl": 187, "mq_open": 180, "mq_unlink": 181, "mq_timedsend": 182,
        "mq_timedreceive": 183, "mq_notify": 184, "mq_getsetattr": 185, "prlimit64": 261,
        "sched_setparam": 118, "sched_setscheduler": 119, "sched_setaffinity": 122,
        "sched_setattr": 274, "setpriority": 140, "ioprio_set": 30,
    },
}  # fmt: skip

_DENIED = (
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "add_key",
    "request_key",
    "keyctl",
)

# Without a PID or IPC namespace (Landlock), the host's processes and System V IPC
# objects are the command's to reach: each IPC call fails; the calls that change
# another process's limits, scheduling or priority succeed only on the caller itself
_HOST_IPC = (
    "shmget", "shmat", "shmctl", "shmdt", "semget", "semop", "semctl", "semtimedop",
    "msgget", "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend",
    "mq_timedreceive", "mq_notify", "mq_getsetattr",
)  # fmt: skip
_SELF_ONLY = (
    "prlimit64", "sched_setparam", "sched_setscheduler", "sched_setaffinity", "sched_setattr"
)  # fmt: skip
_PRIO_PROCESS = 0  # setpriority(PRIO_PROCESS, 0, ...): this process
_IOPRIO_WHO_PROCESS = 1  # ioprio_set(IOPRIO_WHO_PROCESS, 0, ...): this process

# One instruction: (opcode, k, jump-if-true label, jump-if-false label); a label
# line is a bare string. Jumps are forward only and name a label.
_Insn = tuple[int, int, str | None, str | None]


def _arch_block(arch: str, *, no_sockets: bool, host_shared: bool) -> list[_Insn | str]:
    numbers = _SYSCALLS[arch]
    block: list[_Insn | str] = [arch, (_LD_W_ABS, _OFF_NR, None, None)]
    if arch == "x86_64":
        block.append((_JGE_K, _X32_SYSCALL_BIT, "kill", None))
    block.append((_JEQ_K, numbers["socket"], "deny" if no_sockets else "socket", None))
    block.append((_JEQ_K, numbers["socketpair"], "socketpair", None))
    for name in _DENIED:
        block.append((_JEQ_K, numbers[name], "deny", None))
    if host_shared:
        for name in _HOST_IPC:
            block.append((_JEQ_K, numbers[name], "deny", None))
        for name in _SELF_ONLY:
            block.append((_JEQ_K, numbers[name], "self_only", None))
        block.append((_JEQ_K, numbers["setpriority"], "own_priority", None))
        block.append((_JEQ_K, numbers["ioprio_set"], "own_io_priority", None))
    block.append((_RET_K, _RET_ALLOW, None, None))
    return block


def _host_shared_checks() -> list[_Insn | str]:
    return [
        "self_only",  # (pid 0: the caller)
        (_LD_W_ABS, _OFF_ARG0_LOW, None, None),
        (_JEQ_K, 0, "allow", "deny"),
        "own_priority",
        (_LD_W_ABS, _OFF_ARG0_LOW, None, None),
        (_JEQ_K, _PRIO_PROCESS, "who_is_self", "deny"),
        "own_io_priority",
        (_LD_W_ABS, _OFF_ARG0_LOW, None, None),
        (_JEQ_K, _IOPRIO_WHO_PROCESS, "who_is_self", "deny"),
        "who_is_self",
        (_LD_W_ABS, _OFF_ARG1_LOW, None, None),
        (_JEQ_K, 0, "allow", "deny"),
    ]


def _program(*, no_sockets: bool = False, host_shared: bool = False) -> list[_Insn | str]:
    return [
        (_LD_W_ABS, _OFF_ARCH, None, None),
        (_JEQ_K, AUDIT_ARCH_X86_64, "x86_64", None),
        (_JEQ_K, AUDIT_ARCH_AARCH64, "aarch64", "kill"),
        *_arch_block("x86_64", no_sockets=no_sockets, host_shared=host_shared),
        *_arch_block("aarch64", no_sockets=no_sockets, host_shared=host_shared),
        *(_host_shared_checks() if host_shared else ()),
        "socket",
        (_LD_W_ABS, _OFF_ARG0_LOW, None, None),
        (_JEQ_K, AF_INET, "allow", None),
        (_JEQ_K, AF_INET6, "allow", None),
        (_JEQ_K, AF_UNIX, "deny", None),
        (_JEQ_K, AF_NETLINK, None, "no_family"),
        (_LD_W_ABS, _OFF_ARG2_LOW, None, None),
        (_JEQ_K, NETLINK_ROUTE, "allow", "no_family"),
        "socketpair",
        (_LD_W_ABS, _OFF_ARG0_LOW, None, None),
        (_JEQ_K, AF_UNIX, "allow", "no_family"),
        "allow",
        (_RET_K, _RET_ALLOW, None, None),
        "no_family",
        (_RET_K, _RET_ERRNO | errno.EAFNOSUPPORT, None, None),
        "deny",
        (_RET_K, _RET_ERRNO | errno.EPERM, None, None),
        "kill",
        (_RET_K, _RET_KILL_PROCESS, None, None),
    ]


def assemble(program: list[_Insn | str]) -> bytes:
    """Resolve the labels of ``program`` and pack it as ``struct sock_filter[]``.

    Raises:
        ValueError: a jump goes backwards, too far (over 255) or to no label.
    """
    labels: dict[str, int] = {}
    insns: list[_Insn] = []
    for item in program:
        if isinstance(item, str):
            labels[item] = len(insns)
        else:
            insns.append(item)
    out = bytearray()
    for index, (code, k, jt, jf) in enumerate(insns):
        offsets = []
        for label in (jt, jf):
            if label is None:
                offsets.append(0)
                continue
            if label not in labels:
                raise ValueError(f"jump to unknown label {label!r}")
            offset = labels[label] - index - 1
            if not 0 <= offset <= 255:
                raise ValueError(f"jump to {label!r} from {index} is out of range")
            offsets.append(offset)
        out += struct.pack("=HBBI", code, offsets[0], offsets[1], k)
    return bytes(out)


SECCOMP_FILTER: bytes = assemble(_program())
"""The compiled filter, as bwrap's ``--seccomp`` expects it."""

LANDLOCK_FILTER: bytes = assemble(_program(host_shared=True))
"""The filter for a command that shares the host's PID and IPC namespaces (Landlock).

Also: System V IPC and POSIX message queues fail (EPERM); ``prlimit64`` and
``sched_set*`` succeed only for pid 0, ``setpriority`` and ``ioprio_set``
only for this process (``who`` 0), so no host process's memory, limits or
priorities are the command's to change.
"""

LANDLOCK_NO_SOCKETS_FILTER: bytes = assemble(_program(no_sockets=True, host_shared=True))
""":data:`LANDLOCK_FILTER`, and ``socket()`` fails for every domain (no network)."""

_lock = threading.Lock()
_memfd: int | None = None


def filter_path() -> str:
    """A path that opens a fresh, read-only copy of :data:`SECCOMP_FILTER`.

    The program lives in a sealed memfd held for the life of the process (one
    descriptor, created on first use); each open of the returned path starts at
    offset 0, so any number of sandboxes can read it at once.

    Raises:
        OSError: the memfd could not be created (``memfd_create`` missing).
    """
    global _memfd
    with _lock:
        if _memfd is None:
            fd = os.memfd_create("prism-seccomp", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            try:
                os.write(fd, SECCOMP_FILTER)
                seals = (
                    fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
                )
                fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
            except OSError:
                os.close(fd)
                raise
            _memfd = fd
        return f"/proc/{os.getpid()}/fd/{_memfd}"


_file: str | None = None


def filter_file() -> str:
    """A private, read-only file holding :data:`SECCOMP_FILTER` (made once per process).

    For launchers that open the program from inside a new user namespace,
    where the caller's ``/proc/<pid>/fd`` cannot be opened. It lives in a
    directory only this user can enter, outside every root (the sandbox
    hides it), and is removed when the process exits.

    Raises:
        OSError: the file could not be written.
    """
    global _file
    with _lock:
        if _file is None or not os.path.isfile(_file):
            directory = tempfile.mkdtemp(prefix="prism-seccomp-")
            path = os.path.join(directory, "filter.bpf")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o400)
            try:
                os.write(fd, SECCOMP_FILTER)
            finally:
                os.close(fd)
            atexit.register(shutil.rmtree, directory, True)
            _file = path
        return _file
