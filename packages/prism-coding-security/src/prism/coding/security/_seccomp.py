"""A small, hand-written seccomp filter (classic BPF) for the bubblewrap sandbox.

The filter is a few dozen instructions, assembled here with ``struct`` so that it
needs no library and can be read in full::

    arch == x86_64  -> x86_64 table     (x32 numbers, nr >= 0x40000000: kill)
    arch == aarch64 -> aarch64 table
    any other arch  -> kill the process  (i386 or arm32 compat entry points)

    socket(AF_INET / AF_INET6)            -> allow   (NO_SOCKETS_FILTER: EPERM)
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

__all__ = ["NO_SOCKETS_FILTER", "SECCOMP_FILTER", "assemble", "filter_file", "filter_path"]

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
    },
}

_DENIED = (
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "add_key",
    "request_key",
    "keyctl",
)

# One instruction: (opcode, k, jump-if-true label, jump-if-false label); a label
# line is a bare string. Jumps are forward only and name a label.
_Insn = tuple[int, int, str | None, str | None]


def _arch_block(arch: str, *, no_sockets: bool) -> list[_Insn | str]:
    numbers = _SYSCALLS[arch]
    block: list[_Insn | str] = [arch, (_LD_W_ABS, _OFF_NR, None, None)]
    if arch == "x86_64":
        block.append((_JGE_K, _X32_SYSCALL_BIT, "kill", None))
    block.append((_JEQ_K, numbers["socket"], "deny" if no_sockets else "socket", None))
    block.append((_JEQ_K, numbers["socketpair"], "socketpair", None))
    for name in _DENIED:
        block.append((_JEQ_K, numbers[name], "deny", None))
    block.append((_RET_K, _RET_ALLOW, None, None))
    return block


def _program(*, no_sockets: bool = False) -> list[_Insn | str]:
    return [
        (_LD_W_ABS, _OFF_ARCH, None, None),
        (_JEQ_K, AUDIT_ARCH_X86_64, "x86_64", None),
        (_JEQ_K, AUDIT_ARCH_AARCH64, "aarch64", "kill"),
        *_arch_block("x86_64", no_sockets=no_sockets),
        *_arch_block("aarch64", no_sockets=no_sockets),
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

NO_SOCKETS_FILTER: bytes = assemble(_program(no_sockets=True))
"""The same filter, but ``socket()`` fails for every domain (Landlock without network)."""

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
