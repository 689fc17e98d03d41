"""BubblewrapSandbox network modes: "none", "host", and "allowlist" through a CONNECT proxy."""

from __future__ import annotations

import os
import tempfile
from typing import TYPE_CHECKING

import pytest
import trio

from prism.coding.security import (
    BubblewrapSandbox,
    SandboxUnavailableError,
    create_sandbox_shell_operations,
)
from prism.coding.security._proxy import HostAllowlist, host_own_address, serve_connect_proxy
from prism.coding.tools import ShellExit, ShellSpawnRequest
from prism.core import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from prism.coding.tools import ShellExit

    RunShell = Callable[..., Awaitable[tuple[ShellExit, str]]]


_PYTHON = "/usr/bin/python3"
# Asks the proxy named in HTTPS_PROXY for each target, prints the status line,
# and for a tunnel sends "ping" and prints what comes back.
_CONNECT_PROBE = """\
import os, socket, sys
port = int(os.environ["HTTPS_PROXY"].rsplit(":", 1)[1])
for target in sys.argv[1:]:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(f"CONNECT {target} HTTP/1.1\\r\\nHost: {target}\\r\\n\\r\\n".encode())
    status = s.recv(4096).decode(errors="replace").split("\\r\\n")[0]
    if " 200 " in status:
        s.sendall(b"ping")
        status += " " + s.recv(100).decode()
    print(target, status)
"""


class _Echo:
    """A TCP echo server on 127.0.0.1 that counts its connections."""

    def __init__(self) -> None:
        self.connections = 0
        self.port = 0

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async def echo(stream: trio.SocketStream) -> None:
            self.connections += 1
            async with stream:
                async for chunk in stream:
                    await stream.send_all(chunk)

        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, echo, listeners)
            task_status.started()


@pytest.mark.bwrap
@pytest.mark.system_python
async def test_allowlisted_host_is_reached_through_the_proxy_and_others_are_refused(
    root: Path,
    run_shell: RunShell,
) -> None:
    allowed, refused = _Echo(), _Echo()
    (root / "probe.py").write_text(_CONNECT_PROBE)
    async with trio.open_nursery() as nursery:
        await nursery.start(allowed.serve)
        await nursery.start(refused.serve)
        # a name that resolves to the host's own address is refused after resolution
        # (the proxy connects from the host): only a configured address literal is reached
        sandbox = BubblewrapSandbox(
            [str(root)],
            network="allowlist",
            allowed_hosts=[f"127.0.0.1:{allowed.port}", f"localhost:{refused.port}"],
        )
        ops = create_sandbox_shell_operations(sandbox)
        targets = (
            f"127.0.0.1:{allowed.port} 127.0.0.1:{refused.port} example.com:443 "
            f"localhost:{refused.port}"
        )
        _, output = await run_shell(ops, f"{_PYTHON} probe.py {targets}", root)
        nursery.cancel_scope.cancel()
    assert output.splitlines() == [
        f"127.0.0.1:{allowed.port} HTTP/1.1 200 Connection established ping",
        f"127.0.0.1:{refused.port} HTTP/1.1 403 Forbidden",
        "example.com:443 HTTP/1.1 403 Forbidden",
        f"localhost:{refused.port} HTTP/1.1 403 Forbidden",
    ]
    assert (allowed.connections, refused.connections) == (1, 0)


@pytest.mark.bwrap
@pytest.mark.system_python
async def test_allowlist_mode_has_no_direct_network_and_no_unix_sockets(
    root: Path, run_shell: RunShell
) -> None:
    target = _Echo()
    code = (
        "import socket, sys\n"
        "for family, address in ((socket.AF_INET, ('127.0.0.1', int(sys.argv[1]))),\n"
        "                        (socket.AF_UNIX, sys.argv[2])):\n"
        "    try:\n"
        "        socket.socket(family).connect(address); print('connected')\n"
        "    except OSError as exc:\n"
        "        print(exc.strerror)\n"
    )
    (root / "probe.py").write_text(code)
    async with trio.open_nursery() as nursery:
        await nursery.start(target.serve)
        sandbox = BubblewrapSandbox(
            [str(root)], network="allowlist", allowed_hosts=[f"127.0.0.1:{target.port}"]
        )
        ops = create_sandbox_shell_operations(sandbox)
        inside = "/run/prism-proxy/proxy.sock"
        _, output = await run_shell(ops, f"{_PYTHON} probe.py {target.port} {inside}", root)
        nursery.cancel_scope.cancel()
    assert output.splitlines() == ["Connection refused", "Operation not permitted"]
    assert target.connections == 0


@pytest.mark.bwrap
async def test_the_command_cannot_read_the_bridge(root: Path, run_shell: RunShell) -> None:
    # The bridge may open unix sockets; the command must not borrow that.
    sandbox = BubblewrapSandbox([str(root)], network="allowlist", allowed_hosts=["pypi.org"])
    ops = create_sandbox_shell_operations(sandbox)
    _, output = await run_shell(
        ops, "cat /proc/$PPID/environ >/dev/null && echo READ; echo end", root
    )
    assert "READ" not in output
    assert output.strip().endswith("end")


@pytest.mark.bwrap
async def test_exit_status_passes_through_the_bridge(root: Path, run_shell: RunShell) -> None:
    sandbox = BubblewrapSandbox([str(root)], network="allowlist", allowed_hosts=["pypi.org"])
    ops = create_sandbox_shell_operations(sandbox)
    result, _ = await run_shell(ops, "exit 3", root)
    assert result.exit_code == 3


@pytest.mark.bwrap
async def test_proxy_directory_is_removed_after_the_run(root: Path, run_shell: RunShell) -> None:
    before = set(os.listdir(tempfile.gettempdir()))
    sandbox = BubblewrapSandbox([str(root)], network="allowlist", allowed_hosts=["pypi.org"])
    ops = create_sandbox_shell_operations(sandbox)
    await run_shell(ops, "ls /run/prism-proxy", root)
    after = set(os.listdir(tempfile.gettempdir()))
    assert [name for name in after - before if name.startswith("prism-proxy-")] == []


@pytest.mark.bwrap
async def test_cancelled_allowlist_run_leaves_no_process(root: Path) -> None:
    marker = f"prism-allowlist-{os.getpid()}-{id(root)}"
    sandbox = BubblewrapSandbox([str(root)], network="allowlist", allowed_hosts=["pypi.org"])
    ops = create_sandbox_shell_operations(sandbox)
    started = trio.Event()

    async def sink(chunk: bytes) -> None:
        started.set()

    request = ShellSpawnRequest(
        command=f"sh -c 'sleep 600; : {marker}' & echo up; wait", shell_path="/bin/sh",
        cwd=str(root), env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )  # fmt: skip
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ops.run, request, sink)
            await started.wait()
            nursery.cancel_scope.cancel()
    leftover = await trio.run_process(["pgrep", "-f", marker], capture_stdout=True, check=False)
    assert leftover.stdout.split() == []


def test_allowlist_mode_cannot_be_wrapped_alone(root: Path) -> None:
    sandbox = BubblewrapSandbox(
        [str(root)], bwrap_path="/bin/true", network="allowlist", allowed_hosts=["pypi.org"]
    )
    with pytest.raises(SandboxUnavailableError, match="proxy"):
        sandbox.wrap(["true"], cwd="/")


@pytest.mark.parametrize(
    ("network", "expected"), [(False, "none"), (True, "host"), ("none", "none"), ("host", "host")]
)
def test_network_bool_is_still_accepted(network: bool | str, expected: str) -> None:
    assert BubblewrapSandbox([], network=network).network == expected


@pytest.mark.parametrize(
    "kwargs",
    [{"network": "allowlist"},
     {"network": "none", "allowed_hosts": ["pypi.org"]},
     {"network": "allowlist", "allowed_hosts": "pypi.org"},
     {"network": "allowlist", "allowed_hosts": ["*"]},
     {"network": "allowlist", "allowed_hosts": ["py*.org"]},
     {"network": "allowlist", "allowed_hosts": ["pypi.org:0"]},
     {"network": "allowlist", "allowed_hosts": ["http://pypi.org"]}],
)  # fmt: skip
def test_bad_network_options_raise_naming_the_option(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError, match="allowed_hosts"):
        BubblewrapSandbox([], **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("host", "port", "allowed"),
    [("pypi.org", 443, True), ("PyPI.org.", 80, True), ("pypi.org", 8443, False),
     ("files.pythonhosted.org", 443, True), ("pythonhosted.org", 443, False),
     ("evil-pypi.org", 443, False), ("127.0.0.1", 9000, True), ("127.0.0.1", 443, False),
     ("::1", 8080, True), ("0:0::1", 8080, True)],
)  # fmt: skip
def test_allowlist_matching(host: str, port: int, allowed: bool) -> None:
    allowlist = HostAllowlist(("pypi.org", "*.pythonhosted.org", "127.0.0.1:9000", "[::1]:8080"))
    assert allowlist.allows(host, port) is allowed


@pytest.mark.parametrize(
    ("request_head", "status"),
    [(b"GET http://pypi.org/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n", b"405"),
     (b"CONNECT pypi.org HTTP/1.1\r\n\r\n", b"400"),
     (b"CONNECT evil.example:443 HTTP/1.1\r\n\r\n", b"403")],
)  # fmt: skip
async def test_proxy_answers_what_it_will_not_tunnel(request_head: bytes, status: bytes) -> None:
    async with trio.open_nursery() as nursery:
        directory = await nursery.start(serve_connect_proxy, HostAllowlist(("pypi.org",)))
        stream = await trio.open_unix_socket(os.path.join(directory, "proxy.sock"))
        async with stream:
            await stream.send_all(request_head)
            answer = b""
            while chunk := await stream.receive_some(4096):
                answer += chunk
        nursery.cancel_scope.cancel()
    assert answer.split(b" ")[1] == status
    assert not await trio.Path(directory).exists()


async def _connect_through(allowlist: HostAllowlist, target: str) -> bytes:
    async with trio.open_nursery() as nursery:
        directory = await nursery.start(serve_connect_proxy, allowlist)
        stream = await trio.open_unix_socket(os.path.join(directory, "proxy.sock"))
        async with stream:
            await stream.send_all(f"CONNECT {target} HTTP/1.1\r\n\r\n".encode())
            answer = await stream.receive_some(4096)
        nursery.cancel_scope.cancel()
    return answer


async def test_the_proxy_never_connects_to_the_host_itself_unless_configured_literally() -> None:
    """The attack: an approved [::ffff:7f00:1]:PORT (or localhost:PORT) read a service on
    the host's 127.0.0.1, because the proxy connects from the host.

    The address the proxy would connect to is checked after resolution; only an
    ``allowed_hosts`` entry that is that address literally lets it through.
    """
    echo = _Echo()
    async with trio.open_nursery() as nursery:
        await nursery.start(echo.serve)
        port = echo.port
        answers = [
            await _connect_through(HostAllowlist(allowlist, granted=granted), target)
            for allowlist, granted, target in (
                ((), (f"127.0.0.1:{port}",), f"127.0.0.1:{port}"),
                ((), (f"[::ffff:7f00:1]:{port}",), f"[::ffff:7f00:1]:{port}"),
                ((), (f"0.0.0.0:{port}",), f"0.0.0.0:{port}"),
                ((f"localhost:{port}",), (), f"localhost:{port}"),
                ((), (f"localhost:{port}",), f"localhost:{port}"),
                ((f"127.0.0.1:{port}",), (), f"127.0.0.1:{port}"),
            )
        ]
        nursery.cancel_scope.cancel()
    refusals = [a.split(b"\r\n")[0] for a in answers[:-1]]
    assert refusals == [b"HTTP/1.1 403 Forbidden"] * 5
    assert b"never connects to the host itself" in answers[0]
    assert answers[-1].startswith(b"HTTP/1.1 200")
    assert echo.connections == 1


@pytest.mark.parametrize(
    ("address", "what"),
    [("127.0.0.1", "loopback"), ("::1", "loopback"), ("0.0.0.0", "unspecified"),
     ("0.1.2.3", "unspecified"), ("::", "unspecified"), ("169.254.169.254", "link-local"),
     ("fe80::1%eth0", "link-local"), ("224.0.0.1", "multicast"),
     ("::ffff:7f00:1", "loopback"), ("::127.0.0.1", "loopback"), ("64:ff9b::7f00:1", "loopback"),
     ("2002:7f00:1::", "loopback"), ("8.8.8.8", None), ("10.1.2.3", None),
     ("::ffff:8.8.8.8", None), ("example.com", None)],
)  # fmt: skip
def test_the_hosts_own_addresses(address: str, what: str | None) -> None:
    found = host_own_address(address)
    if what is None:
        assert found is None
    else:
        assert found is not None
        assert what in found
