"""A line whose only writes are redirections: its targets opened by the host, the roots read-only.

The policy proves the line and its targets (``redirected``); bubblewrap opens each
target itself, as the copy-back would let the file come back (no link followed,
no protected name, nothing git names, a regular file with one name), hands it to
the command on a descriptor (``>&4``) and binds the roots read-only. Anything it
cannot open so runs over the private layer as before. Real bubblewrap, real bash,
compared with bash running the line as written.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import sys
import threading
from typing import TYPE_CHECKING

import attrs
import pytest
import trio

from prism.coding.security import (
    BubblewrapSandbox,
    SandboxUnavailableError,
    create_sandbox_shell_operations,
    explain_command,
)
from prism.coding.security._gitnames import cached_git_entries, git_entries
from prism.coding.security._protected import ProtectedPaths
from prism.coding.security._redirects import close_targets, open_targets
from prism.coding.tools import (
    LocalShellOperations,
    RedirectedWrites,
    ShellOperations,
    ShellSpawnRequest,
    ShellToolOptions,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "HOME": "/nonexistent"}
_BASH = "/bin/bash"


def _redirected(root: Path, command: str, cwd: Path | None = None) -> RedirectedWrites | None:
    sandbox = BubblewrapSandbox([str(root)])
    found = explain_command(command, roots=[str(root)], cwd=str(cwd or root), sandbox=sandbox)
    if found.redirected is None:
        return None
    text, targets = found.redirected
    return RedirectedWrites(command=text, targets=targets)


@pytest.mark.parametrize(
    ("command", "text", "targets"),
    [
        ("echo x > f", "'echo' 'x' >&4", [("f", False)]),
        ("echo x >> f", "'echo' 'x' >&4", [("f", True)]),
        ("ls nope 2> f", "'ls' 'nope' 2>&4", [("f", False)]),
        ("ls nope &> f", "'ls' 'nope' >&4 2>&1", [("f", False)]),
        ("ls nope &>> f", "'ls' 'nope' >&4 2>&1", [("f", True)]),
        ("ls nope >& f", "'ls' 'nope' >&4 2>&1", [("f", False)]),
        ("echo x >| f", "'echo' 'x' >&4", [("f", False)]),
        ("echo x 2>&1 > f", "'echo' 'x' 2>&1 >&4", [("f", False)]),
        ("echo x > f 2> g", "'echo' 'x' >&4 2>&5", [("f", False), ("g", False)]),
        ("echo x | tr x y > d/f", "'echo' 'x' | 'tr' 'x' 'y' >&4", [("d/f", False)]),
        ("cat f > f", "'cat' 'f' >&4", [("f", False)]),  # one command: bash opens first
        ("ls nope 1>& f", "'ls' 'nope' >&4 2>&1", [("f", False)]),  # bash: `1>&FILE` is `&>FILE`
    ],
)
def test_a_line_whose_only_writes_are_redirections_is_rebuilt_on_descriptors(
    root: Path, command: str, text: str, targets: list[tuple[str, bool]]
) -> None:
    (root / "d").mkdir()
    found = _redirected(root, command)
    assert found is not None
    assert found.command == text
    assert found.targets == tuple(
        (4 + n, f"{root}/{name}", append) for n, (name, append) in enumerate(targets)
    )


@pytest.mark.parametrize(
    "command",
    [
        "echo x > f; ls",  # a list: a later command could read what an earlier one wrote
        "echo x > f && cat f",
        "cat f | sort > f",  # a pipeline naming its target: who reads first is a race
        "cat ./f | sort > f",
        "cat l | sort > f",  # l is a link to f
        "echo a > f > f",  # one file twice
        "echo a > f >> ./f",
        "echo x 3> f",  # a descriptor the host's could be
        "echo x > f >&5",
        "{ echo x; } > f",  # a group
        "sh -c 'echo x > f'",  # a redirection inside another shell's script
        "sed -i s/a/b/ g > f",  # another write
        "echo x > .envrc",  # protected: asks
        "echo x > ../f",  # outside the roots: asks
        "echo x > $F",  # computed
        "cd d && echo x > f",
        "cat > f << EOF\nx\nEOF",  # a here-document is not proved
        "echo x 2>&f",  # bash: "ambiguous redirect", nothing runs, no file
        "echo x {v}>f",  # f on a new descriptor whose number bash stores in $v
        "ls {v}>>f",
    ],
)
def test_a_line_whose_writes_could_differ_keeps_its_private_layer(root: Path, command: str) -> None:
    (root / "d").mkdir()
    (root / "f").write_text("f\n")
    (root / "g").write_text("g\n")
    os.symlink("f", root / "l")
    assert _redirected(root, command) is None


# each: the line, and the root's entries before it (a str is a file, None a directory,
# ("link", target) a symbolic link)
_CASES: list[tuple[str, dict[str, object]]] = [
    ("echo a > f", {}),
    ("echo a > f", {"f": "old content\n"}),
    ("echo b >> f", {"f": "old\n"}),
    ("echo b >> f", {}),
    ("ls nope 2> f", {}),
    ("ls nope . &> f", {"f": "old\n", "x": "x\n"}),
    ("ls nope . &>> f", {"f": "old\n"}),
    ("echo a 2>&1 > f", {}),
    ("echo a > f 2> g", {"g": "old\n"}),
    ("echo a | tr a b > f", {"f": "longer old content\n"}),
    ("echo a > link", {"f": "old\n", "link": ("link", "f")}),
    ("echo a > dangling", {"dangling": ("link", "made")}),
    ("echo a > d", {"d": None}),  # a directory: bash's error
    ("echo a > missing/f", {}),  # a missing directory: bash's error
]


def _lay_out(directory: Path, entries: dict[str, object]) -> None:
    directory.mkdir()
    for name, what in entries.items():
        if what is None:
            (directory / name).mkdir()
        elif isinstance(what, tuple):
            os.symlink(what[1], directory / name)
        else:
            (directory / name).write_text(str(what))
            os.chmod(directory / name, 0o444 if name == "ro" else 0o640)


def _snapshot(directory: Path) -> list[tuple[str, int, bytes]]:
    out: list[tuple[str, int, bytes]] = []
    for path, dirs, files in os.walk(directory):
        dirs.sort()
        for name in sorted(dirs + files):
            full = os.path.join(path, name)
            info = os.lstat(full)
            content = b""
            if stat.S_ISLNK(info.st_mode):
                content = os.readlink(full).encode()
            elif stat.S_ISREG(info.st_mode):
                with open(full, "rb") as handle:
                    content = handle.read()
            out.append((os.path.relpath(full, directory), info.st_mode, content))
    return out


async def _run(
    ops: ShellOperations, command: str, cwd: Path, redirected: RedirectedWrites | None = None
) -> tuple[int | None, bytes]:
    chunks: list[bytes] = []

    async def sink(chunk: bytes) -> None:
        chunks.append(chunk)

    request = ShellSpawnRequest(
        command=command, shell_path=_BASH, cwd=str(cwd), env=_ENV, redirected=redirected
    )
    with trio.fail_after(60):
        result = await ops.run(request, sink)
    return result.exit_code, b"".join(chunks)


@pytest.mark.bwrap
async def test_redirections_opened_by_the_host_do_what_bash_does(root: Path) -> None:
    """Same content, mode, creation, output and status as bash running the line as
    written: a target that exists or not, appended to, a link, a directory, in a
    missing directory (not writable: the next test)."""
    plain_top = root.parent / "plain"
    plain_top.mkdir()
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    local = LocalShellOperations()
    for number, (command, entries) in enumerate(_CASES):
        sandboxed, plain = root / f"c{number}", plain_top / f"c{number}"
        _lay_out(sandboxed, entries)
        _lay_out(plain, entries)
        redirected = _redirected(root, command, sandboxed)
        assert redirected is not None, command
        got = await _run(ops, command, sandboxed, redirected)
        expected = await _run(local, command, plain)
        assert got == expected, command
        assert _snapshot(sandboxed) == _snapshot(plain), command


@pytest.mark.bwrap
async def test_a_file_the_sandboxed_command_may_not_write_is_not_opened_for_it(root: Path) -> None:
    """The host opens a target as the command would: with no capability. As root,
    Prism may write a file without a write bit or another user's file, which the
    sandboxed command (root without capabilities) may not: through the host's open
    and over the layer alike, bash's "Permission denied" and the file unchanged."""
    (root / "ro").write_text("r\n")
    os.chmod(root / "ro", 0o444)
    names = ["ro"]
    if os.geteuid() == 0:
        (root / "theirs").write_text("t\n")
        os.chown(root / "theirs", 1000, 1000)
        names.append("theirs")
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    for name in names:
        before = (root / name).read_text()
        redirected = _redirected(root, f"echo x > {name}")
        assert redirected is not None
        for way in (redirected, None):  # opened by the host, or over the layer
            status, output = await _run(ops, f"echo x > {name}", root, way)
            assert (status, output) == (1, f"{_BASH}: line 1: {name}: Permission denied\n".encode())
            assert (root / name).read_text() == before


@pytest.mark.bwrap
async def test_a_directory_the_sandboxed_command_may_not_create_in_stays_as_it_is(
    root: Path,
) -> None:
    """A new target in a directory without a write bit, or (as root) in another
    user's directory: the host does not create it, and over the layer narrowed to
    that directory (its top not writable for the command either) bash says
    "Permission denied" as in the directory itself; a directory open to all is
    written both ways."""
    cases = [("shut", 0o555, False), ("open", 0o777, True)]
    if os.geteuid() == 0:
        cases.append(("theirs", 0o755, False))
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    for name, mode, writable in cases:
        (root / name).mkdir()
        if name != "shut" and os.geteuid() == 0:
            os.chown(root / name, 1000, 1000)
        os.chmod(root / name, mode)
        command = f"echo x > {name}/new"
        found = explain_command(command, roots=[str(root)], cwd=str(root),
                                sandbox=BubblewrapSandbox([str(root)]))  # fmt: skip
        assert found.redirected is not None
        assert found.write_dirs == (f"{root}/{name}",)
        text, targets = found.redirected
        for way in (RedirectedWrites(command=text, targets=targets), None):
            request = ShellSpawnRequest(
                command=command, shell_path=_BASH, cwd=str(root), env=_ENV,
                redirected=way, write_dirs=tuple(found.write_dirs),
            )  # fmt: skip
            chunks: list[bytes] = []

            async def sink(chunk: bytes, chunks: list[bytes] = chunks) -> None:
                chunks.append(chunk)

            with trio.fail_after(60):
                result = await ops.run(request, sink)
            if writable:
                assert (result.exit_code, chunks) == (0, []), name
                assert (root / name / "new").read_text() == "x\n"
                os.unlink(root / name / "new")
            else:
                denied = f"{_BASH}: line 1: {name}/new: Permission denied\n".encode()
                assert (result.exit_code, b"".join(chunks)) == (1, denied), name
                assert not (root / name / "new").exists()


@pytest.mark.bwrap
async def test_the_line_runs_on_the_descriptors_with_the_roots_read_only(root: Path) -> None:
    """The host opened the target (the rebuilt line writes through >&4), and nothing
    else of the roots can be written; a target it cannot open runs the line as
    written, over the private layer."""
    (root / "d").mkdir()
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    fast = RedirectedWrites(
        command="echo opened >&4; echo other > d/other",
        targets=((4, f"{root}/d/out", False),),
    )
    status, output = await _run(ops, "echo layer > d/out", root, fast)
    assert (root / "d" / "out").read_text() == "opened\n"
    assert b"Read-only file system" in output
    assert status == 1
    assert not (root / "d" / "other").exists()
    # its directory is missing: the line as written, over the layer (bash's own error)
    missing = RedirectedWrites(command="echo opened >&4", targets=((4, f"{root}/e/out", False),))
    status, output = await _run(ops, "echo layer > d/out2", root, missing)
    assert (status, output) == (0, b"")
    assert (root / "d" / "out2").read_text() == "layer\n"


@pytest.mark.bwrap
async def test_a_link_planted_after_the_check_is_not_followed(root: Path, tmp_path: Path) -> None:
    """Between the policy's check and the host's open, the target or a directory on
    the way becomes a link out of the root: the host does not follow it, and the line
    runs over the layer, where the link leads nowhere writable."""
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim"
    victim.write_text("precious\n")
    (root / "d").mkdir()
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    redirected = _redirected(root, "echo owned > d/out")
    assert redirected is not None
    os.symlink(victim, root / "d" / "out")
    status, output = await _run(ops, "echo owned > d/out", root, redirected)
    assert victim.read_text() == "precious\n"
    assert status == 1  # (the sandbox's /tmp is its own: the link leads nowhere there)
    assert b"d/out: " in output
    # a directory on the way swapped for a link to the outside
    (root / "e").mkdir()
    redirected = _redirected(root, "echo owned > e/victim")
    assert redirected is not None
    os.rmdir(root / "e")
    os.symlink(outside, root / "e")
    status, output = await _run(ops, "echo owned > e/victim", root, redirected)
    assert victim.read_text() == "precious\n"
    assert status == 1


@pytest.mark.bwrap
@pytest.mark.git
async def test_what_the_copy_back_leaves_out_is_never_opened(root: Path) -> None:
    """A protected name, a path in .git, the hooks directory git's configuration names,
    what a protected link at the root's top leads to: the policy placed these writes
    inside the roots (or a request names them), but the host opens none of them; over
    the layer they are left out and reported, as before."""
    await trio.run_process(["git", "init", "-q", str(root)])
    await trio.run_process(["git", "-C", str(root), "config", "core.hooksPath", "myhooks"])
    (root / "myhooks").mkdir()
    (root / "c").mkdir()
    os.symlink("c", root / ".cargo")
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    for path in ("myhooks/pre-commit", "c/config.toml", ".git/notes.txt"):
        redirected = _redirected(root, f"echo x > {path}")
        assert redirected is not None, path
        _, output = await _run(ops, f"echo x > {path}", root, redirected)
        assert not (root / path).exists(), path
        assert b"[prism sandbox] not applied" in output, (path, output)
    # a request naming a protected path itself (a spawn hook can write any)
    hostile = RedirectedWrites(command="echo x >&4", targets=((4, f"{root}/.envrc", False),))
    _, output = await _run(ops, "echo x > .envrc", root, hostile)
    assert not (root / ".envrc").exists()
    assert b"protected paths" in output


@pytest.mark.bwrap
async def test_a_set_user_id_bit_set_through_the_descriptor_is_cleared(root: Path) -> None:
    """The command owns its descriptor: whatever mode it sets through it, a set-user-ID
    or set-group-ID bit does not stay on the host's file (as the copy-back clears it)."""
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    hostile = RedirectedWrites(
        command="echo x >&4; chmod 6755 /proc/self/fd/4 2>/dev/null; :",
        targets=((4, f"{root}/tool", False),),
    )
    await _run(ops, "echo x > tool", root, hostile)
    mode = stat.S_IMODE(os.stat(root / "tool").st_mode)
    assert not mode & (stat.S_ISUID | stat.S_ISGID)


opened_for_writing: list[object] = []


def _audit(event: str, args: tuple[object, ...]) -> None:
    if event == "open" and args[0] == "device" and isinstance(args[2], int):
        exclusive = os.O_CREAT | os.O_EXCL  # fails on an existing name: opens nothing
        if args[2] & (os.O_WRONLY | os.O_RDWR) and args[2] & exclusive != exclusive:
            opened_for_writing.append(args)


sys.addaudithook(_audit)


def test_a_target_that_is_not_a_plain_file_of_one_name_is_not_opened(root: Path) -> None:
    """A FIFO (never waited on), a hard-linked file, a link, a directory, a descriptor
    outside 4-9, a path outside the roots: nothing opened, nothing truncated, and what
    was created for the line before it is removed again."""
    matcher = ProtectedPaths(())
    (root / "kept").write_text("kept\n")
    os.mkfifo(root / "fifo")
    (root / "linked").write_text("l\n")
    os.link(root / "linked", root / "other-name")
    os.symlink("kept", root / "link")
    (root / "dir").mkdir()

    def attempt(*targets: tuple[int, str, bool]) -> object:
        found = open_targets(RedirectedWrites(command=":", targets=targets), [str(root)],
                             matcher, ())  # fmt: skip
        if found is not None:
            close_targets(found)
        return found

    for name in ("fifo", "linked", "link", "dir"):
        made = (4, f"{root}/new", False)
        assert attempt(made, (5, f"{root}/{name}", False)) is None, name
        assert not (root / "new").exists()
        assert attempt((4, f"{root}/kept", False), (5, f"{root}/{name}", False)) is None
        assert (root / "kept").read_text() == "kept\n"
    assert attempt((3, f"{root}/kept", False)) is None
    try:  # a character device (the numbers of /dev/null): its driver is never asked to open
        os.mknod(root / "device", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pass  # making a device node needs CAP_MKNOD
    else:
        opened_for_writing.clear()
        assert attempt((4, f"{root}/device", False)) is None
        assert opened_for_writing == []
    assert attempt((4, "/etc/hostname", False)) is None
    assert attempt((4, f"{root}/kept", True)) is not None
    assert (root / "kept").read_text() == "kept\n"  # appended to: not truncated
    assert attempt((4, f"{root}/kept", False)) is not None
    assert (root / "kept").read_text() == ""


@pytest.mark.bwrap
async def test_the_shell_tool_hands_the_proved_redirections_to_the_sandbox(root: Path) -> None:
    """Through open_secure_coding_tools: the decision's redirections reach the sandbox,
    the file is written and the ledger records the confined decision as before; with a
    command prefix of the host's (not part of the proof) they do not."""
    from prism.coding.security import open_secure_coding_tools
    from prism.core import DispatchOptions, ToolCall, create_tool_registry, dispatch_tool_call
    from prism.core.ledger import RunLedger

    seen: list[RedirectedWrites | None] = []

    def hook(request: ShellSpawnRequest) -> ShellSpawnRequest:
        seen.append(request.redirected)
        return request

    ledger = RunLedger()
    for prefix in (None, "umask 022"):
        options: ShellToolOptions = {"spawn_hook": hook, "env": _ENV, "command_prefix": prefix}
        async with open_secure_coding_tools(
            [str(root)], sandbox="bubblewrap", shell_options=options
        ) as secure:
            dispatch = DispatchOptions(registry=create_tool_registry(secure.tools), ledger=ledger)
            call = ToolCall(id="1", name="shell", arguments={"command": "echo hi > out.txt"})
            result = await dispatch_tool_call(call, dispatch)
        assert not result.is_error, result.joined_text
        assert (root / "out.txt").read_text() == "hi\n"
    assert seen == [RedirectedWrites(command="'echo' 'hi' >&4",
                                     targets=((4, f"{root}/out.txt", False),)), None]  # fmt: skip
    decisions = [record.decision for record in ledger.records if record.decision is not None]
    assert [(d.allowed, d.confined) for d in decisions] == [(True, True), (True, True)]


@pytest.mark.bwrap
async def test_a_line_that_could_not_start_leaves_no_target_behind(root: Path) -> None:
    """Its working directory is gone, or the sandbox cannot start: nothing ran, and no
    target was made for it; with the allowlist proxy the line keeps its layer."""
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    redirected = RedirectedWrites(command="echo x >&4", targets=((4, f"{root}/made", False),))
    status, _ = await _run(ops, "echo x > made", root / "gone", redirected)
    assert status != 0
    assert not (root / "made").exists()
    broken = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    await _run(broken, "true", root)  # probed: the next call goes straight to bwrap
    broken.backend.bwrap_path = str(root / "no-bwrap")  # type: ignore[attr-defined]
    with pytest.raises(SandboxUnavailableError):
        await _run(broken, "echo x > made", root, redirected)
    assert not (root / "made").exists()
    listing = BubblewrapSandbox([str(root)], network="allowlist", allowed_hosts=["example.com"])

    async def sink(chunk: bytes) -> None:
        raise AssertionError(chunk)

    request = ShellSpawnRequest(
        command="echo x > made", shell_path=_BASH, cwd=str(root), env=_ENV, redirected=redirected
    )
    assert await listing._run_redirected(request, sink, 1.0) is None
    assert not (root / "made").exists()


@pytest.mark.bwrap
async def test_a_spawn_hook_that_rewrites_the_line_drops_the_proved_redirections(
    root: Path,
) -> None:
    """The host's hook replaces the command: its line runs (never the model's proved
    one on descriptors), and the targets are opened off the event loop."""
    from prism.coding.security import open_secure_coding_tools
    from prism.core import DispatchOptions, ToolCall, create_tool_registry, dispatch_tool_call

    threads: list[int] = []

    class Watched(BubblewrapSandbox):
        def _open_redirected(self, request: ShellSpawnRequest) -> object:  # type: ignore[override]
            threads.append(threading.get_ident())
            return super()._open_redirected(request)

    def hook(request: ShellSpawnRequest) -> ShellSpawnRequest:
        if "blocked" in request.command:
            return attrs.evolve(request, command="echo refused by the host >&2; exit 7")
        return request

    options: ShellToolOptions = {"spawn_hook": hook, "env": _ENV}
    async with open_secure_coding_tools(
        [str(root)], sandbox=Watched([str(root)]), shell_options=options
    ) as secure:
        dispatch = DispatchOptions(registry=create_tool_registry(secure.tools))
        for line in ("echo blocked > out.txt", "echo kept > kept.txt"):
            call = ToolCall(id="1", name="shell", arguments={"command": line})
            result = await dispatch_tool_call(call, dispatch)
    assert not (root / "out.txt").exists()
    assert (root / "kept.txt").read_text() == "kept\n"
    assert not result.is_error, result.joined_text
    assert threads
    assert threading.get_ident() not in threads


async def _bounded(function: Callable[[], object], fifos: Sequence[Path]) -> object:
    """``function()`` in a thread; past 30 s it is abandoned and the FIFOs get a writer
    (the open it waits on returns), so a blocking read fails the test, never hangs it."""
    try:
        with trio.fail_after(30):
            return await trio.to_thread.run_sync(function, abandon_on_cancel=True)
    except trio.TooSlowError:
        for fifo in fifos:
            with contextlib.suppress(OSError):  # (no reader: ENXIO)
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        raise


@pytest.mark.bwrap
@pytest.mark.git
async def test_a_fifo_where_git_files_are_is_never_waited_on(root: Path, tmp_path: Path) -> None:
    """A FIFO at a submodule's `.git`, a `.git` link to a FIFO, or a FIFO as the root's
    own `.git`: the host reads none of them (no wait, no link followed) and never points
    git at them. The gitlink's directory stays out of the host's open; the root whose
    `.git` is a FIFO is not judged (git cannot be asked): its write runs over the layer
    and its changes are not applied, with the reason."""
    await trio.run_process(["git", "init", "-q", str(root)])
    for name in ("sub", "linked"):
        (root / name).mkdir()
        await trio.run_process(
            [
                "git",
                "-C",
                str(root),
                "update-index",
                "--add",
                "--cacheinfo",
                f"160000,{'1' * 40},{name}",
            ]
        )
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    os.mkfifo(root / "sub" / ".git")
    os.symlink(fifo, root / "linked" / ".git")
    bare = tmp_path / "bare"
    bare.mkdir()
    os.mkfifo(bare / ".git")
    fifos = [fifo, root / "sub" / ".git", bare / ".git"]

    def entries() -> object:
        return cached_git_entries(str(root))

    def refused() -> object:
        with pytest.raises(SandboxUnavailableError, match="neither a directory nor a regular"):
            cached_git_entries(str(bare))
        return None

    assert await _bounded(entries, fifos) == [".git/hooks", "linked/.git", "sub/.git"]
    await _bounded(refused, fifos)
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root), str(bare)]))
    for directory in (root, bare):
        redirected = _redirected(directory, "echo x > n.txt")
        assert redirected is not None
        opener = functools.partial(
            open_targets, redirected, [str(directory)], ProtectedPaths(()), ()
        )
        opened = await _bounded(opener, fifos)
        if directory == root:
            assert isinstance(opened, list)
            close_targets(opened, failed=True)
            continue
        assert opened is None
        status, output = await _run(ops, "echo x > n.txt", directory, redirected)
        assert status == 0
        assert b"were not applied" in output
        assert not (directory / "n.txt").exists()


@pytest.mark.bwrap
@pytest.mark.git
async def test_what_git_names_is_asked_of_a_repository_git_refuses_or_the_write_stays_out(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hooks directory a repository's configuration names is known, or nothing of
    the root is written. A checkout of another user (Prism as root over the user's
    files: git refuses it as of "dubious ownership") is asked all the same, and its
    hook stays out of the host's open and of the copy-back; a repository git cannot
    read (an extension it does not know), or no git on PATH: the host opens nothing
    there. A directory with no repository needs no git."""
    hook = root / ".githooks" / "pre-commit"
    await trio.run_process(["git", "init", "-q", str(root)])
    await trio.run_process(["git", "-C", str(root), "config", "core.hooksPath", ".githooks"])
    hook.parent.mkdir()
    hook.write_text("#!/bin/sh\necho lint\n")
    os.chmod(hook, 0o777)
    if os.geteuid() == 0:  # the checkout (its top and its .git) is another user's
        os.chown(root, 1000, 1000)
        for path, dirs, files in os.walk(root / ".git"):
            for name in [path, *(os.path.join(path, n) for n in dirs + files)]:
                os.chown(name, 1000, 1000, follow_symlinks=False)
        plain = await trio.run_process(
            ["git", "-C", str(root), "rev-parse"], check=False, capture_stderr=True
        )
        assert b"dubious ownership" in plain.stderr
    assert ".githooks" in cached_git_entries(str(root))
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    redirected = _redirected(root, "echo planted >> .githooks/pre-commit")
    assert redirected is not None
    assert open_targets(redirected, [str(root)], ProtectedPaths(()), ()) is None
    _, output = await _run(ops, "echo planted >> .githooks/pre-commit", root, redirected)
    assert hook.read_text() == "#!/bin/sh\necho lint\n"
    assert b"not applied" in output
    # a repository git cannot read
    other = tmp_path / "other"
    await trio.run_process(["git", "init", "-q", str(other)])
    for key, value in (("core.repositoryformatversion", "1"), ("extensions.prismTest", "x")):
        await trio.run_process(["git", "-C", str(other), "config", key, value])
    with pytest.raises(SandboxUnavailableError, match="could not be asked"):
        cached_git_entries(str(other))
    written = RedirectedWrites(command="echo x >&4", targets=((4, f"{other}/n.txt", False),))
    assert open_targets(written, [str(other)], ProtectedPaths(()), ()) is None
    assert not (other / "n.txt").exists()
    # no git on PATH
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    with pytest.raises(SandboxUnavailableError, match="not on PATH"):
        git_entries(str(root))
    assert git_entries(str(tmp_path / "nothing")) == []
