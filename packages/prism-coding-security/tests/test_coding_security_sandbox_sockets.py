"""BubblewrapSandbox: no host unix sockets (seccomp filter), hidden runtime dirs; real bwrap."""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import trio

from prism.coding.security import BubblewrapSandbox, create_sandbox_shell_operations
from prism.coding.security._seccomp import SECCOMP_FILTER, assemble
from prism.coding.tools import ShellExit

# The sandbox's /tmp is private, so a virtualenv under /tmp is invisible inside
# it; the probes need only the standard library and run on the system python.
if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from prism.coding.tools import ShellExit

    RunShell = Callable[..., Awaitable[tuple[ShellExit, str]]]


_PYTHON = "/usr/bin/python3"
_CONNECT_PROBE = """\
import socket, sys
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1].replace("@", "\\0"))
    print("connected")
except OSError as exc:
    print("refused", exc)
"""


def _listener(address: str) -> socket.socket:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(8)
    listener.setblocking(False)
    return listener


def _nothing_arrived(listener: socket.socket) -> bool:
    # The probe has exited: a connection it made would already sit in the backlog.
    try:
        conn, _ = listener.accept()
    except BlockingIOError:
        return True
    conn.close()
    return False


@pytest.mark.system_python
async def test_the_probe_reaches_a_unix_listener_without_a_sandbox(root: Path) -> None:
    (root / "probe.py").write_text(_CONNECT_PROBE)
    with _listener(str(root / "agent.sock")) as listener:
        result = await trio.run_process(
            [_PYTHON, str(root / "probe.py"), str(root / "agent.sock")], capture_stdout=True
        )
        assert result.stdout.decode().strip() == "connected"
        assert not _nothing_arrived(listener)


@pytest.mark.bwrap
@pytest.mark.system_python
async def test_host_unix_socket_in_a_writable_root_cannot_be_reached(
    root: Path, run_shell: RunShell
) -> None:
    (root / "probe.py").write_text(_CONNECT_PROBE)
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    with _listener(str(root / "agent.sock")) as listener:
        _, output = await run_shell(ops, f"{_PYTHON} probe.py {root / 'agent.sock'}", root)
        assert "Operation not permitted" in output, output
        assert _nothing_arrived(listener)


@pytest.mark.bwrap
@pytest.mark.system_python
async def test_abstract_unix_socket_cannot_be_reached_even_with_host_network(
    root: Path, run_shell: RunShell
) -> None:
    (root / "probe.py").write_text(_CONNECT_PROBE)
    name = f"@prism-test-{os.getpid()}-{id(root)}"
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)], network=True))
    with _listener(name.replace("@", "\0")) as listener:
        _, output = await run_shell(ops, f"{_PYTHON} probe.py {name}", root)
        assert "Operation not permitted" in output, output
        assert _nothing_arrived(listener)


@pytest.mark.bwrap
@pytest.mark.system_python
async def test_inet_sockets_and_socketpair_still_work(root: Path, run_shell: RunShell) -> None:
    code = (
        "import socket\n"
        "socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()\n"
        "a, b = socket.socketpair()\n"
        "a.sendall(b'x'); print('pair', b.recv(1).decode())\n"
    )
    (root / "probe.py").write_text(code)
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    result, output = await run_shell(ops, f"{_PYTHON} probe.py", root)
    assert (result.exit_code, output.strip()) == (0, "pair x")


@pytest.mark.bwrap
@pytest.mark.system_python
async def test_io_uring_is_refused(root: Path, run_shell: RunShell) -> None:
    code = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "params = ctypes.create_string_buffer(120)\n"
        "fd = libc.syscall(425, 8, params)\n"  # io_uring_setup, same number on both arches
        "print(fd, os.strerror(ctypes.get_errno()))\n"
    )
    (root / "probe.py").write_text(code)
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    _, output = await run_shell(ops, f"{_PYTHON} probe.py", root)
    assert output.strip() == "-1 Operation not permitted"


@pytest.mark.bwrap
@pytest.mark.system_python
async def test_kernel_keyrings_are_refused(root: Path, run_shell: RunShell) -> None:
    code = (
        "import ctypes, os, platform\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "nr = {'x86_64': 250, 'aarch64': 219}[platform.machine()]\n"
        "r = libc.syscall(nr, 0, -4, 0)\n"  # keyctl(KEYCTL_GET_KEYRING_ID, user keyring)
        "print(r, os.strerror(ctypes.get_errno()))\n"
    )
    (root / "probe.py").write_text(code)
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    _, output = await run_shell(ops, f"{_PYTHON} probe.py", root)
    assert output.strip() == "-1 Operation not permitted"


@pytest.mark.bwrap
async def test_run_is_an_empty_private_directory(root: Path, run_shell: RunShell) -> None:
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    result, output = await run_shell(ops, "ls -A /run /var/run; echo end", root)
    assert result.exit_code == 0
    assert [line for line in output.splitlines() if line and not line.endswith(":")] == ["end"]


def test_xdg_runtime_dir_is_hidden(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = root / "runtime"
    runtime.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    argv = BubblewrapSandbox([], bwrap_path="/bin/true").wrap(["true"], cwd="/")
    tmpfs = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--tmpfs"]
    assert str(runtime) in tmpfs or any(str(runtime).startswith(t + "/") for t in tmpfs)
    assert "/run" in tmpfs


def test_filter_is_whole_instructions_and_short() -> None:
    assert len(SECCOMP_FILTER) % 8 == 0
    assert len(SECCOMP_FILTER) // 8 < 64
    # the first instruction loads the architecture (offset 4 of seccomp_data)
    assert struct.unpack("=HBBI", SECCOMP_FILTER[:8]) == (0x20, 0, 0, 4)


def test_assembler_refuses_backward_jumps() -> None:
    with pytest.raises(ValueError, match="out of range"):
        assemble(["top", (0x06, 0, None, None), (0x15, 1, "top", None)])


def test_wrap_passes_the_filter_on_fd_3(root: Path) -> None:
    argv = BubblewrapSandbox([str(root)], bwrap_path="/bin/true").wrap(["true"], cwd="/")
    assert argv[argv.index("--seccomp") + 1] == "3"
    assert argv[:3] == ["/bin/sh", "-c", 'exec "$@" 3<"$0"']
    assert Path(argv[3]).read_bytes() == SECCOMP_FILTER


_FAMILY_PROBE = """\
import socket
AF_VSOCK, AF_PACKET, AF_ALG, AF_NETLINK = 40, 17, 38, 16
NETLINK_ROUTE, NETLINK_AUDIT, NETLINK_KOBJECT_UEVENT = 0, 9, 15
cases = [
    ("inet", socket.AF_INET, socket.SOCK_STREAM, 0),
    ("inet6", socket.AF_INET6, socket.SOCK_DGRAM, 0),
    ("netlink-route", AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE),
    ("netlink-audit", AF_NETLINK, socket.SOCK_RAW, NETLINK_AUDIT),
    ("netlink-uevent", AF_NETLINK, socket.SOCK_DGRAM, NETLINK_KOBJECT_UEVENT),
    ("unix", socket.AF_UNIX, socket.SOCK_STREAM, 0),
    ("vsock", AF_VSOCK, socket.SOCK_STREAM, 0),
    ("packet", AF_PACKET, socket.SOCK_RAW, 0),
    ("alg", AF_ALG, socket.SOCK_SEQPACKET, 0),
]
for name, family, kind, proto in cases:
    try:
        socket.socket(family, kind, proto).close()
        print(name, "ok")
    except OSError as exc:
        print(name, exc.errno)
a, b = socket.socketpair()
print("pair ok")
try:
    socket.socketpair(socket.AF_INET)
    print("inet pair ok")
except OSError as exc:
    print("inet pair", exc.errno)
"""

_ALLOWED = {"inet": "ok", "inet6": "ok", "netlink-route": "ok", "pair": "ok"}


def _family_results(output: str) -> dict[str, str]:
    results = {}
    for line in output.splitlines():
        name, _, value = line.rpartition(" ")
        results[name] = value
    return results


@pytest.mark.system_python
async def test_the_family_probe_creates_every_socket_unsandboxed_as_root(
    root: Path, run_shell: RunShell
) -> None:
    from prism.coding.tools import LocalShellOperations

    if os.geteuid() != 0:
        pytest.skip("AF_PACKET needs root")
    (root / "probe.py").write_text(_FAMILY_PROBE)
    _, output = await run_shell(LocalShellOperations(), f"{_PYTHON} probe.py", root)
    results = _family_results(output)
    assert results["unix"] == "ok"
    assert results["packet"] == "ok"
    assert results["netlink-audit"] == "ok"


@pytest.mark.bwrap
@pytest.mark.system_python
@pytest.mark.parametrize("network", ["none", "host"])
async def test_only_the_families_the_network_needs_exist_in_bubblewrap(
    root: Path, run_shell: RunShell, network: str
) -> None:
    (root / "probe.py").write_text(_FAMILY_PROBE)
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)], network=network))
    _, output = await run_shell(ops, f"{_PYTHON} probe.py", root)
    results = _family_results(output)
    for name in ("inet", "inet6", "netlink-route", "pair"):
        assert results[name] == "ok", output
    assert results["unix"] == "1", output  # EPERM
    for name in ("netlink-audit", "netlink-uevent", "vsock", "packet", "alg", "inet pair"):
        assert results[name] == "97", (name, output)  # EAFNOSUPPORT


@pytest.mark.landlock
@pytest.mark.system_python
@pytest.mark.parametrize("network", [False, True])
async def test_only_the_families_the_network_needs_exist_under_landlock(
    root: Path, run_shell: RunShell, network: bool
) -> None:
    from prism.coding.security import LandlockSandbox

    (root / "probe.py").write_text(_FAMILY_PROBE)
    ops = create_sandbox_shell_operations(LandlockSandbox([str(root)], network=network))
    _, output = await run_shell(ops, f"{_PYTHON} probe.py", root)
    results = _family_results(output)
    allowed = ("inet", "inet6", "netlink-route") if network else ()
    for name in allowed:
        assert results[name] == "ok", output
    for name in ("unix", "netlink-audit", "vsock", "packet", "alg"):
        assert results[name] in ("1", "97"), (name, output)
    if not network:
        assert results["inet"] == "1"
