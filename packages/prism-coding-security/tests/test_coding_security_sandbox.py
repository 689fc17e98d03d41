"""BubblewrapSandbox: real isolation, really run (skipped only where bwrap cannot run)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import trio

from prism.coding.security import (
    BubblewrapSandbox,
    SandboxBackend,
    SandboxUnavailableError,
    create_sandbox_shell_operations,
)
from prism.coding.tools import ShellExit, ShellOperations, ShellSpawnRequest
from prism.core import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from prism.coding.tools import ShellExit

    RunShell = Callable[..., Awaitable[tuple[ShellExit, str]]]


@pytest.mark.bwrap
async def test_can_write_inside_a_writable_root(root: Path, run_shell: RunShell) -> None:
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    result, _ = await run_shell(ops, "echo inside > made.txt", root)
    assert result.exit_code == 0
    assert (root / "made.txt").read_text() == "inside\n"


@pytest.mark.bwrap
async def test_cannot_write_outside_the_writable_roots(
    root: Path, tmp_path: Path, run_shell: RunShell
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    home_target = Path("/var/tmp") / f"prism-sandbox-test-{os.getpid()}"
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    script = f"echo x > {elsewhere}/f; echo x > {home_target}; echo x > /usr/prism-test; echo done"
    _, output = await run_shell(ops, script, root)
    assert "done" in output
    assert not await trio.Path(elsewhere / "f").exists()
    assert not await trio.Path(home_target).exists()
    assert not await trio.Path("/usr/prism-test").exists()
    assert "Read-only file system" in output or "No such file" in output


@pytest.mark.bwrap
async def test_tmp_is_private(root: Path, run_shell: RunShell) -> None:
    marker = Path("/tmp") / f"prism-sandbox-private-{os.getpid()}"
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    result, _ = await run_shell(ops, f"echo x > {marker} && test -f {marker}", root)
    assert result.exit_code == 0
    assert not marker.exists()


@pytest.mark.bwrap
async def test_sees_its_working_directory(root: Path, run_shell: RunShell) -> None:
    (root / "sub").mkdir()
    (root / "sub" / "here.txt").write_text("present")
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    result, output = await run_shell(ops, "pwd; cat here.txt", root / "sub")
    assert result.exit_code == 0
    assert output.splitlines() == [str(root / "sub"), "present"]


# The sandbox's /tmp is private, so a virtualenv that lives under /tmp (a CI clone
# there, say) is invisible inside it. The probes need only the standard library,
# so they run on the real interpreter the virtualenv's python links to.
_PYTHON = os.path.realpath(sys.executable)


@pytest.mark.bwrap
async def test_no_network_by_default(root: Path, run_shell: RunShell) -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    code = (
        "import socket\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=5)\n"
        "    print('connected')\n"
        "except OSError as exc:\n"
        "    print('refused', exc)\n"
    )
    (root / "probe.py").write_text(code)
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    with listener:
        _, output = await run_shell(ops, f"{_PYTHON} probe.py", root)
    assert "refused" in output, output
    assert "connected" not in output


@pytest.mark.bwrap
async def test_network_true_shares_the_host_network(root: Path, run_shell: RunShell) -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5); print('ok')"
    (root / "probe.py").write_text(code)
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)], network=True))
    with listener:
        _, output = await run_shell(ops, f"{_PYTHON} probe.py", root)
    assert output.strip() == "ok"


@pytest.mark.bwrap
async def test_runs_in_its_own_pid_namespace(root: Path, run_shell: RunShell) -> None:
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    _, output = await run_shell(ops, "ls /proc | grep -c '^[0-9]'", root)
    assert int(output.strip()) < 10


@pytest.mark.bwrap
async def test_cancellation_kills_the_sandboxed_tree(root: Path) -> None:
    sandbox = BubblewrapSandbox([str(root)])
    ops = create_sandbox_shell_operations(sandbox)
    started = trio.Event()

    async def sink(chunk: bytes) -> None:
        started.set()

    request = ShellSpawnRequest(
        command="echo up; sleep 600", shell_path="/bin/sh", cwd=str(root),
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )  # fmt: skip
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:

            async def go() -> None:
                await ops.run(request, sink)

            nursery.start_soon(go)
            await started.wait()
            # one fork per command: bwrap is the launcher's own child (no supervisor
            # between them; its PID namespace ends whatever the command started)
            assert sandbox._server is not None
            assert sandbox._server.pid is not None
            launched = _children(sandbox._server.pid)
            assert launched
            assert [_command_name(pid) for pid in launched] == ["bwrap"] * len(launched)
            nursery.cancel_scope.cancel()
    leftover = await trio.run_process(
        ["pgrep", "-f", "sleep 600"], capture_stdout=True, check=False
    )
    assert leftover.stdout.split() == []


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as handle:
            out += [int(child) for child in handle.read().split()]
    return out


def _command_name(pid: int) -> str:
    with open(f"/proc/{pid}/comm", encoding="utf-8") as handle:
        return handle.read().strip()


async def test_missing_bwrap_refuses_to_run(root: Path, run_shell: RunShell) -> None:
    backend = BubblewrapSandbox([str(root)], bwrap_path=str(root / "no-bwrap-here"))
    ops = create_sandbox_shell_operations(backend)
    (root / "flag").write_text("")
    with pytest.raises(SandboxUnavailableError, match="refusing to run unsandboxed"):
        await run_shell(ops, "rm flag", root)
    assert (root / "flag").exists()


async def test_bwrap_that_cannot_create_namespaces_refuses_to_run(
    root: Path, run_shell: RunShell
) -> None:
    fake = root / "fake-bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\n"
                    "exit 1\n")  # fmt: skip
    fake.chmod(0o755)
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)], bwrap_path=str(fake)))
    with pytest.raises(SandboxUnavailableError, match="No permissions"):
        await run_shell(ops, "true", root)


def test_backend_satisfies_the_protocol(root: Path) -> None:
    assert isinstance(BubblewrapSandbox([str(root)]), SandboxBackend)
    assert isinstance(create_sandbox_shell_operations(BubblewrapSandbox([])), ShellOperations)


def test_wrap_builds_the_documented_isolation(root: Path) -> None:
    argv = BubblewrapSandbox([str(root)], bwrap_path="/bin/true").wrap(["sh", "-c", "x"], cwd="/")
    for flag in ("--die-with-parent", "--unshare-all", "--new-session"):
        assert flag in argv
    assert "--share-net" not in argv
    # wrap() alone has no step after the command to check its changes: read-only roots
    assert "--bind" not in argv
    bound = [argv[i + 1 : i + 3] for i, arg in enumerate(argv) if arg == "--ro-bind"]
    assert [str(root), str(root)] in bound
    assert argv[-4:] == ["--", "sh", "-c", "x"]


@pytest.mark.parametrize(
    ("kwargs", "option"),
    [({"writable_roots": "/tmp"}, "writable_roots"),
     ({"writable_roots": ["/no/such/dir"]}, "writable_roots"),
     ({"writable_roots": [], "network": "yes"}, "network"),
     ({"writable_roots": [], "bwrap_path": ""}, "bwrap_path"),
     ({"writable_roots": [], "extra_args": "--x"}, "extra_args")],
)  # fmt: skip
def test_bad_sandbox_options_raise_naming_the_option(
    kwargs: dict[str, object], option: str
) -> None:
    with pytest.raises(ConfigurationError, match=option):
        BubblewrapSandbox(**kwargs)  # type: ignore[arg-type]


def test_bad_backend_raises() -> None:
    with pytest.raises(ConfigurationError, match="backend"):
        create_sandbox_shell_operations(object())  # type: ignore[arg-type]
