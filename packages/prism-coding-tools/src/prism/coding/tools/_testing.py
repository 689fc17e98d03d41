"""Test doubles and conformance checks for FileOperations and ShellOperations."""

from __future__ import annotations

import os
import re
from collections.abc import Awaitable, Sequence
from pathlib import Path

import attrs
import trio

from ._files import LocalFileOperations
from ._protocols import (
    FileOperations,
    FileStat,
    OutputSink,
    ShellExit,
    ShellOperations,
    ShellSpawnRequest,
)

__all__ = [
    "RecordingFileOperations",
    "ScriptedShellOperations",
    "assert_file_operations_conform",
    "assert_shell_operations_conform",
]


@attrs.define(eq=False)
class RecordingFileOperations:
    """A real :class:`FileOperations` (``inner``) that records every call it forwards.

    Attributes:
        inner: the implementation doing the work (default :class:`LocalFileOperations`).
        calls: ``(method, path)`` for every call, in order.
        bytes_read: total bytes returned by :meth:`read`.
    """

    inner: FileOperations = attrs.field(factory=LocalFileOperations)
    calls: list[tuple[str, str]] = attrs.field(factory=list, init=False)
    bytes_read: int = attrs.field(default=0, init=False)

    async def resolve(self, path: str, *, cwd: str) -> str:
        """Record and forward."""
        self.calls.append(("resolve", path))
        return await self.inner.resolve(path, cwd=cwd)

    async def stat(self, path: str) -> FileStat:
        """Record and forward."""
        self.calls.append(("stat", path))
        return await self.inner.stat(path)

    async def read(self, path: str, *, offset: int = 0, length: int) -> bytes:
        """Record and forward, counting the bytes returned."""
        self.calls.append(("read", path))
        data = await self.inner.read(path, offset=offset, length=length)
        self.bytes_read += len(data)
        return data

    async def write(self, path: str, data: bytes, *, create_parents: bool = False) -> None:
        """Record and forward."""
        self.calls.append(("write", path))
        await self.inner.write(path, data, create_parents=create_parents)


@attrs.define(eq=False)
class ScriptedShellOperations:
    """A :class:`ShellOperations` that spawns nothing: it replays ``output`` and returns ``exit``.

    Attributes:
        output: chunks fed to the sink, in order.
        exit: what :meth:`run` returns.
        requests: every request received, in order.
    """

    output: Sequence[bytes] = ()
    exit: ShellExit = attrs.field(factory=lambda: ShellExit(exit_code=0))
    requests: list[ShellSpawnRequest] = attrs.field(factory=list, init=False)

    async def run(self, request: ShellSpawnRequest, on_output: OutputSink) -> ShellExit:
        """Record ``request``, feed the scripted chunks, return the scripted exit. Checkpoints."""
        self.requests.append(request)
        await trio.lowlevel.checkpoint()
        for chunk in self.output:
            await on_output(chunk)
        return self.exit


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


async def _expect_oserror(kind: type[OSError], what: str, call: Awaitable[object]) -> None:
    try:
        await call
    except kind:
        return
    except OSError as exc:
        message = f"{what}: raised {type(exc).__name__}, expected {kind.__name__}"
        raise AssertionError(message) from exc
    raise AssertionError(f"{what}: did not raise {kind.__name__}")


async def assert_file_operations_conform(files: FileOperations, directory: str) -> None:
    """Check that ``files`` keeps the :class:`FileOperations` contract inside ``directory``.

    ``directory`` must be an existing, empty, writable directory that ``files``
    allows. Checks resolution, bounded ranged reads, atomic writes that keep
    the mode, and the ``OSError`` subclasses the tools rely on. Leaves a few
    small files (and one sparse 1 GB file) in ``directory``.

    Raises:
        AssertionError: the first broken rule, described.
    """
    real = await trio.to_thread.run_sync(os.path.realpath, directory)
    resolved = await files.resolve("sub/../f.txt", cwd=directory)
    _check(resolved == os.path.join(real, "f.txt"), f"resolve gave {resolved!r}")
    nested = await files.resolve("a/b/c.txt", cwd=directory)
    await files.write(nested, b"hello", create_parents=True)
    st = await files.stat(nested)
    _check((st.kind, st.size) == ("file", 5), f"stat after write gave {st!r}")
    _check(await files.read(nested, length=3) == b"hel", "read(length=3) is not the prefix")
    _check(await files.read(nested, offset=3, length=100) == b"lo", "read(offset=3) is wrong")
    _check(await files.read(nested, offset=10, length=5) == b"", "read past EOF is not empty")
    os.chmod(nested, 0o640)
    await files.write(nested, b"replaced")
    st = await files.stat(nested)
    _check(st.mode == 0o640, f"write did not keep the mode: {oct(st.mode)}")
    _check(await files.read(nested, length=100) == b"replaced", "write did not replace")
    leftovers = [n for n in os.listdir(os.path.dirname(nested)) if n != "c.txt"]
    _check(leftovers == [], f"write left files behind: {leftovers}")
    big = await files.resolve("sparse.bin", cwd=directory)
    await files.write(big, b"head")
    os.truncate(big, 1024**3)
    with trio.fail_after(5):
        chunk = await files.read(big, offset=0, length=10)
    _check(chunk == b"head" + b"\0" * 6, "a bounded read of a 1 GB file returned the wrong bytes")
    missing = await files.resolve("missing.txt", cwd=directory)
    await _expect_oserror(FileNotFoundError, "stat(missing)", files.stat(missing))
    await _expect_oserror(FileNotFoundError, "read(missing)", files.read(missing, length=1))
    no_parent = await files.resolve("nope/x.txt", cwd=directory)
    await _expect_oserror(FileNotFoundError, "write without parents", files.write(no_parent, b"x"))
    st = await files.stat(real)
    _check(st.kind == "directory", f"stat(directory) gave kind {st.kind!r}")
    await _expect_oserror(IsADirectoryError, "read(directory)", files.read(real, length=1))
    await _expect_oserror(IsADirectoryError, "write(directory)", files.write(real, b"x"))


_TREE = "sleep 300 & echo child=$!; ( setsid sleep 300 & echo grandchild=$!; wait ) & wait"


def _alive(pid: int) -> bool:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return False
    return raw[raw.rfind(b")") + 2 :].split()[0] != b"Z"


async def assert_shell_operations_conform(
    shell: ShellOperations, cwd: str, *, shell_path: str = "/bin/sh", check_pids: bool = True
) -> None:
    """Check that ``shell`` keeps the :class:`ShellOperations` contract.

    Runs a few commands in ``cwd``: output merged in order, exit codes,
    signals (``signal=15``, or exit status 143 from a launcher), the
    environment, and cancellation terminating a child and a
    ``setsid`` grandchild. The grandchild check reads ``/proc`` by PID, which
    only works when the commands share this process's PID namespace; pass
    ``check_pids=False`` for a sandbox with its own.

    Raises:
        AssertionError: the first broken rule, described.
    """
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PRISM_CONFORMANCE": "yes"}

    async def run(command: str) -> tuple[bytes, ShellExit]:
        seen = bytearray()

        async def sink(chunk: bytes) -> None:
            seen.extend(chunk)

        request = ShellSpawnRequest(command=command, shell_path=shell_path, cwd=cwd, env=env)
        with trio.fail_after(30):
            result = await shell.run(request, sink)
        return bytes(seen), result

    output, result = await run("echo out; echo err >&2; echo $PRISM_CONFORMANCE; exit 3")
    _check(output == b"out\nerr\nyes\n", f"merged output was {output!r}")
    _check(result.exit_code == 3, f"exit code was {result.exit_code!r}, expected 3")
    _, result = await run("kill -TERM $$")
    # A launcher (a sandbox) may report its child's death by signal N as exit status 128+N.
    by_signal = result.signal == 15 and result.exit_code is None
    _check(by_signal or result.exit_code == 128 + 15, f"a shell killed by SIGTERM gave {result!r}")

    seen = bytearray()
    ready = trio.Event()

    async def watch(chunk: bytes) -> None:
        seen.extend(chunk)
        if b"child=" in seen and b"grandchild=" in seen and seen.endswith(b"\n"):
            ready.set()

    request = ShellSpawnRequest(command=_TREE, shell_path=shell_path, cwd=cwd, env=env)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:

            async def go() -> None:
                await shell.run(request, watch)

            nursery.start_soon(go)
            await ready.wait()
            nursery.cancel_scope.cancel()
    if check_pids:
        pids = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", seen.decode())}
        _check(set(pids) == {"child", "grandchild"}, f"tree command printed {seen!r}")
        survivors = [name for name, pid in pids.items() if _alive(pid)]
        _check(survivors == [], f"cancellation left these running: {survivors}")
