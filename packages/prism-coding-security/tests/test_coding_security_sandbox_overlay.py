"""BubblewrapSandbox's overlay of each root: invisible inside, checked on the way back.

The command sees each root exactly as the host has it (nothing added: no
placeholder, no mount point), its changes reach the root only when it has
ended, and then without protected names, git configuration, hooks or links
in ``.git``. Real bubblewrap, real git, compared byte for byte with the same
commands run unsandboxed.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import stat
import tempfile
from typing import TYPE_CHECKING

import pytest
import trio

from prism.coding.security import (
    BubblewrapSandbox,
    create_sandbox_shell_operations,
)
from prism.coding.tools import LocalShellOperations, ShellSpawnRequest

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from prism.coding.tools import ShellExit, ShellOperations

    RunShell = Callable[..., Awaitable[tuple[ShellExit, str]]]

pytestmark = [pytest.mark.bwrap, pytest.mark.git]

_ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "HOME": "/nonexistent",
    "LC_ALL": "C",
}


async def _sh(cwd: Path, command: str) -> bytes:
    result = await trio.run_process(
        ["/bin/sh", "-c", command], cwd=cwd, env=_ENV, capture_stdout=True, capture_stderr=True
    )
    return result.stdout


async def _repository(root: Path) -> None:
    for index in range(5):
        (root / f"d{index}" / "deep").mkdir(parents=True)
        (root / f"d{index}" / "deep" / "f.txt").write_text(f"{index}\n")
    (root / "README").write_text("hello\n")
    (root / ".gitignore").write_text("*.log\n")
    await _sh(root, "git init -q -b main && git add -A && git commit -qm init")
    (root / "README").write_text("changed\n")
    (root / "new.txt").write_text("new\n")
    (root / "x.log").write_text("ignored\n")


def _ops(*roots: Path, **options: object) -> ShellOperations:
    sandbox = BubblewrapSandbox([str(r) for r in roots], **options)  # type: ignore[arg-type]
    return create_sandbox_shell_operations(sandbox)


async def _run(
    ops: ShellOperations, command: str, cwd: Path, *, read_only: bool = False
) -> tuple[int, bytes]:
    chunks: list[bytes] = []

    async def sink(chunk: bytes) -> None:
        chunks.append(chunk)

    request = ShellSpawnRequest(
        command=command, shell_path="/bin/sh", cwd=str(cwd), env=_ENV, read_only=read_only
    )
    with trio.fail_after(60):
        result = await ops.run(request, sink)
    return result.exit_code or 0, b"".join(chunks)


def _tree(root: Path) -> list[tuple[str, str, int, bytes]]:
    """Every entry below ``root`` (not .git): path, type, mode, content or link target."""
    out: list[tuple[str, str, int, bytes]] = []
    for path, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in sorted(dirs + files):
            full = os.path.join(path, name)
            info = os.lstat(full)
            rel = os.path.relpath(full, root)
            if stat.S_ISLNK(info.st_mode):
                out.append((rel, "link", 0, os.readlink(full).encode()))
            elif stat.S_ISDIR(info.st_mode):
                out.append((rel, "dir", stat.S_IMODE(info.st_mode), b""))
            else:
                with open(full, "rb") as handle:
                    out.append((rel, "file", stat.S_IMODE(info.st_mode), handle.read()))
    return out


@pytest.mark.parametrize(
    "command",
    ["git status --porcelain", "ls -a", "find .", "ls -aR", "git status",
     "find . -type f -exec stat -c '%n %s %a %i %Y' {} +",
     "git ls-files --others --exclude-standard", "git add -A -n", "git diff --stat"],
)  # fmt: skip
async def test_listings_inside_are_byte_identical_to_the_host(root: Path, command: str) -> None:
    await _repository(root)
    plain = await _run(LocalShellOperations(), command, root)
    sandboxed = await _run(_ops(root), command, root)
    assert sandboxed == plain
    assert b"prism sandbox" not in sandboxed[1]


def _snapshot(root: Path) -> list[tuple[str, int, int, bytes]]:
    """Every entry below ``root``, ``.git`` included: path, mode, mtime, content or target."""
    out: list[tuple[str, int, int, bytes]] = []
    for path, dirs, files in os.walk(root):
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
            out.append((os.path.relpath(full, root), info.st_mode, info.st_mtime_ns, content))
    return out


@pytest.mark.parametrize(
    "command",
    ["git status --porcelain", "ls -aR", "find . -type f -exec stat -c '%n %s %a %i' {} +"],
)
async def test_a_command_proved_to_write_nothing_sees_the_same_bytes(
    root: Path, command: str
) -> None:
    """The read-only path (no private layer) shows the roots as the host has them."""
    await _repository(root)
    sandboxed = await _run(_ops(root), command, root, read_only=True)
    assert sandboxed == await _run(LocalShellOperations(), command, root)


_WRITES = (
    "echo x > .envrc; echo x > d0/.envrc; mkdir -p d1/.vscode; echo x > d2/deep/f.txt; "
    "git config core.fsmonitor 'touch M; false #'; ln -sf /tmp/victim .git/logs/HEAD; "
    "echo hook > .git/hooks/pre-commit; rm README; echo y >> .git/config; git add -A; "
    "cat README"
)


async def test_a_command_proved_to_write_nothing_can_write_nothing(root: Path) -> None:
    """The attack: a command the policy misjudged as writing nothing writes anyway.

    The roots are bound read-only for it: every write fails (protected names at the
    top and in directories that existed, .git's config, hooks and a link in its logs,
    an edit, a removal), so nothing reaches the host, during the call or after.
    """
    await _repository(root)
    (root / "d0" / ".vscode").mkdir()
    before = _snapshot(root)
    # a host process looks at the root while the command waits (on a fifo the host opens)
    waiting = tempfile.mkdtemp(dir="/var/tmp")
    fifo = os.path.join(waiting, "go")
    os.mkfifo(fifo)
    seen_during: list[bool] = []
    chunks: list[bytes] = []

    def release() -> None:
        with open(fifo, "wb") as handle:
            handle.write(b"go\n")

    async def sink(chunk: bytes) -> None:
        chunks.append(chunk)
        if b"ready" in b"".join(chunks) and not seen_during:
            seen_during.append(await trio.to_thread.run_sync(_snapshot, root) == before)
            await trio.to_thread.run_sync(release)

    request = ShellSpawnRequest(
        command=f"{_WRITES}; echo ready; read line < {fifo}; echo $line",
        shell_path="/bin/sh", cwd=str(root), env=_ENV, read_only=True,
    )  # fmt: skip
    try:
        with trio.fail_after(60):
            result = await _ops(root).run(request, sink)
    finally:
        shutil.rmtree(waiting)
    output = b"".join(chunks)
    assert result.exit_code == 0
    assert seen_during == [True]
    assert output.endswith(b"changed\nready\ngo\n")  # cat README still reads
    assert output.count(b"Read-only file system") >= 8, output
    assert _snapshot(root) == before
    # the host's own git runs nothing planted
    assert await _sh(root, "git status --porcelain") == b" M README\n?? new.txt\n"
    assert not (root / "M").exists()


async def test_a_command_proved_to_write_nothing_sees_no_private_layer(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read-only path still hides the layers directory (other calls' pending changes)."""
    base = tempfile.mkdtemp(dir="/var/tmp")
    try:
        monkeypatch.setattr(tempfile, "tempdir", base)
        pending = os.path.join(base, f"prism-layers-{os.getuid()}", "prism-overlay-x", "upper")
        os.makedirs(pending)
        pathlib.Path(pending, "secret.txt").write_text("pending\n")  # noqa: ASYNC240
        code, output = await _run(_ops(root), f"ls -AR {base}", root, read_only=True)
        assert code == 0
        assert b"prism-overlay-" not in output
        assert b"secret" not in output
    finally:
        shutil.rmtree(base)


async def test_the_secure_tools_run_a_proved_read_only_line_without_a_layer(root: Path) -> None:
    """Through the whole pipeline: policy, shell tool, sandbox. A proved ``git status``
    gets the roots read-only: it cannot rewrite the host's index (which it would
    refresh, a stat-only change, through a private layer), and still reports the same.
    """
    from prism.coding.security import open_secure_coding_tools
    from prism.core import DispatchOptions, ToolCall, create_tool_registry, dispatch_tool_call

    await _repository(root)
    expected = await _sh(root, "git status --short")
    os.utime(root / "README", ns=(1, 1))  # the index is stale: git would refresh it
    index = (root / ".git" / "index").read_bytes(), os.stat(root / ".git" / "index").st_mtime_ns
    async with open_secure_coding_tools([str(root)]) as secure:
        options = DispatchOptions(registry=create_tool_registry(secure.tools))
        call = ToolCall(id="1", name="shell", arguments={"command": "git status --short"})
        result = await dispatch_tool_call(call, options)
    assert not result.is_error, result.joined_text
    assert result.joined_text == expected.decode()
    after = (root / ".git" / "index").read_bytes(), os.stat(root / ".git" / "index").st_mtime_ns
    assert after == index


async def test_a_line_an_allow_rule_lets_run_keeps_the_private_layer(root: Path) -> None:
    """The program behind an allow rule is not modelled, so nothing proves it writes
    nothing: it runs over the private layer and its writes reach the root (they failed
    with "Read-only file system" when a rule-allowed line counted as writing nothing).
    A line the models proved still gets the roots read-only.
    """
    from prism.coding.security import CommandRules, open_secure_coding_tools
    from prism.core import DispatchOptions, ToolCall, create_tool_registry, dispatch_tool_call

    await _repository(root)
    (root / "gen.sh").write_text("#!/bin/sh\necho generated > generated.txt\n")
    (root / "gen.sh").chmod(0o755)
    read_only: list[bool] = []

    def hook(request: ShellSpawnRequest) -> ShellSpawnRequest:
        read_only.append(request.read_only)
        return request

    rules = CommandRules(allow=["./gen.sh", "git commit *"])
    lines = ["./gen.sh", "git commit -qam work", "git log --format=%s -1",
             "test -w README && find . -writable -name README"]  # fmt: skip
    async with open_secure_coding_tools(
        [str(root)],
        sandbox="bubblewrap",
        command_rules=rules,
        shell_options={"spawn_hook": hook, "env": _ENV},
    ) as secure:
        options = DispatchOptions(registry=create_tool_registry(secure.tools))
        results = [
            await dispatch_tool_call(
                ToolCall(id=str(n), name="shell", arguments={"command": line}), options
            )
            for n, line in enumerate(lines)
        ]
    assert [r.is_error for r in results] == [False] * 4, [r.joined_text for r in results]
    # asking whether a file is writable gets the host's answer, over the private layer
    assert read_only == [False, False, True, False]
    assert results[3].joined_text.strip() == "./README"
    assert (root / "generated.txt").read_text() == "generated\n"
    assert await _sh(root, "git log --format=%s -1") == b"work\n"
    assert results[2].joined_text.strip() == "work"


async def test_a_fresh_repository_looks_the_same_inside(root: Path) -> None:
    # the old sandbox showed 30 placeholders here (.bashrc, .envrc, .mcp.json, ...)
    await _sh(root, "git init -q -b main")
    command = (
        "ls -a; git status --porcelain --untracked-files=all; find . -path ./.git -prune -o -print"
    )
    assert await _run(_ops(root), command, root) == await _run(
        LocalShellOperations(), command, root
    )


async def test_add_all_and_commit_give_the_same_commit_as_unsandboxed(tmp_path: Path) -> None:
    plain, boxed = tmp_path / "plain", tmp_path / "boxed"
    for directory in (plain, boxed):
        directory.mkdir()
        await _repository(directory)
    command = (
        "git add -A && git commit -qm work && git rev-parse HEAD && "
        "git show --stat --format=%T HEAD"
    )
    expected = await _run(LocalShellOperations(), command, plain)
    got = await _run(_ops(boxed), command, boxed)
    assert got == expected
    assert expected[0] == 0
    for directory in (plain, boxed):
        assert await _sh(directory, "git status --porcelain --untracked-files=all") == b""
    assert await _sh(boxed, "git log --format=%H") == await _sh(plain, "git log --format=%H")
    assert _tree(boxed) == _tree(plain)


_CHANGES = (
    "rm README && rm -r d0 && mv d1 moved && chmod 700 d2/deep/f.txt && "
    "ln -s moved/deep/f.txt link && mkdir -p a/b/c && echo c > a/b/c/f && "
    "rm -r d3 && echo file > d3 && rm d4/deep/f.txt && mkdir d4/deep/f.txt && "
    "ln new.txt hard.txt && printf 'x%.0s' $(seq 1 5000) > big && : > empty && "
    "mkdir gone && rmdir gone && echo '' > d2/deep/f.txt"
)


async def test_edits_deletions_renames_and_links_come_back_as_made(tmp_path: Path) -> None:
    plain, boxed = tmp_path / "plain", tmp_path / "boxed"
    for directory in (plain, boxed):
        directory.mkdir()
        await _repository(directory)
    expected = await _run(LocalShellOperations(), _CHANGES, plain)
    assert expected == (0, b"")
    assert await _run(_ops(boxed), _CHANGES, boxed) == expected
    assert _tree(boxed) == _tree(plain)
    assert os.stat(boxed / "new.txt").st_ino == os.stat(boxed / "hard.txt").st_ino


def _other_device(path: str) -> bool:
    return os.path.isdir(path) and os.stat(path).st_dev != os.stat(tempfile.gettempdir()).st_dev


async def test_a_root_on_another_file_system_is_copied_back(tmp_path: Path) -> None:
    shm = "/dev/shm"
    if not _other_device(shm):
        pytest.skip("no second file system for the root")
    plain = tmp_path / "plain"
    plain.mkdir()
    boxed_dir = tempfile.mkdtemp(dir=shm)
    try:
        from pathlib import Path as _Path

        boxed = _Path(boxed_dir)
        for directory in (plain, boxed):
            await _repository(directory)
        expected = await _run(LocalShellOperations(), _CHANGES, plain)
        assert await _run(_ops(boxed), _CHANGES, boxed) == expected
        assert _tree(boxed) == _tree(plain)
    finally:
        shutil.rmtree(boxed_dir)


async def test_holes_come_back_as_holes_across_file_systems() -> None:
    """A file of 4 GiB made by `truncate` holds no data: copied byte by byte into a root on
    another file system it took the host 4 GiB of disk and 26 s after the call's time was
    up. Only the data comes back; the rest stays a hole."""
    shm = "/dev/shm"
    if not _other_device(shm):
        pytest.skip("no second file system for the root")
    boxed_dir = tempfile.mkdtemp(dir=shm)
    try:
        from pathlib import Path as _Path

        boxed = _Path(boxed_dir)
        line = "truncate -s 1G big && printf x | dd of=big bs=1 seek=536870912 conv=notrunc"
        code, _ = await _run(_ops(boxed), line + " 2>/dev/null", boxed)
        # (each name of a file would come back a copy of its own: they are links to one)
        linked = "head -c 65536 /dev/zero > one && for i in 1 2 3; do ln one link$i; done"
        linked_code, said = await _run(_ops(boxed), linked, boxed)
        names = [name for name in os.listdir(boxed_dir) if name.startswith(("one", "link"))]
        links = [(os.stat(os.path.join(boxed_dir, n)).st_ino, n) for n in names]
        info = (boxed / "big").stat()
        fd = os.open(boxed / "big", os.O_RDONLY)
        data = os.pread(fd, 2, 1 << 29)
        os.close(fd)
    finally:
        shutil.rmtree(boxed_dir)
    assert code == 0
    assert (info.st_size, data) == (1 << 30, b"x\0")
    assert linked_code == 0
    assert len(names) == 4, (names, said)
    assert len({inode for inode, _ in links}) == 1, (links, said)
    assert info.st_blocks * 512 < 1 << 20


async def test_a_command_holds_no_other_commands_layer(root: Path) -> None:
    """Each command's layers are mounted in a mount namespace of its own: a command
    running beside another one of the same sandbox has its own overlay in its mount
    table and not the other's (a copy would keep that layer mounted, hidden, until
    this command ended, while the other's copy-back and the next call's mount reuse
    it)."""
    ops = _ops(root)
    await _run(ops, "true", root)  # the sandbox probed, its launcher started
    started = trio.Event()

    async def first_sink(chunk: bytes) -> None:
        started.set()

    first = ShellSpawnRequest(
        command="echo up; exec sleep 30", shell_path="/bin/sh", cwd=str(root), env=_ENV
    )
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ops.run, first, first_sink)
            await started.wait()
            # the upper directories of the overlays in its mount table: its own only
            code, output = await _run(
                ops, "grep -o ' - overlay .*upperdir=[^,]*' /proc/self/mountinfo", root
            )
            nursery.cancel_scope.cancel()
    assert code == 0, output
    uppers = {line.rpartition(b"upperdir=")[2] for line in output.splitlines()}
    assert len(uppers) == 1, output


async def test_a_root_whose_name_needs_escaping_works(tmp_path: Path) -> None:
    root = tmp_path / "a,b:c\\d e"
    root.mkdir()
    code, output = await _run(_ops(root), "echo hi > made.txt && cat made.txt", root)
    assert (code, output) == (0, b"hi\n")
    assert (root / "made.txt").read_text() == "hi\n"


_PROTECTED = [
    ".envrc", "sub/.envrc", "sub/.vscode/tasks.json", ".vscode/settings.json", "lefthook.yml",
    "lefthook.yaml", "lefthook-local.yml", ".idea/workspace.xml",
    ".devcontainer/devcontainer.json", ".zed/settings.json", ".nvim.lua", ".bashrc",
    ".mcp.json", "prism.toml", ".husky/pre-commit", "made/later/.envrc", ".yarnrc.yml",
    ".gitmodules", "sub/.git/config",
]  # fmt: skip


@pytest.mark.parametrize("name", _PROTECTED)
async def test_protected_names_are_never_created_even_in_existing_directories(
    root: Path, name: str
) -> None:
    await _sh(root, "git init -q -b main")
    (root / "sub").mkdir()
    before = _tree(root)
    parent = os.path.dirname(name) or "."
    command = f"mkdir -p {parent} && echo 'touch pwned' > {name} && cat {name} && echo ok > ok.txt"
    code, output = await _run(_ops(root), command, root)
    assert code == 0
    assert output.startswith(b"touch pwned\n")  # the command itself saw its file
    assert name.encode() in output or os.path.dirname(name).encode() in output  # reported
    assert not (root / name).exists()
    assert (root / "ok.txt").read_text() == "ok\n"
    assert [e for e in _tree(root) if e[0] != "ok.txt" and e[1] != "dir"] == [
        e for e in before if e[1] != "dir"
    ]


# other version control systems, tool managers and build tools that run what a
# file in the project names on the host's next command (hg status runs .hg/hgrc's
# hooks, mise runs mise.local.toml's [hooks] on entering the directory, cargo runs
# .cargo/config.toml's rustc-wrapper)
_RUN_BY_OTHER_TOOLS = [
    ".hg/hgrc", ".hg/requires", ".hg/sharedpath", "sub/.hg/hgrc", ".jj/repo/config.toml",
    ".sl/config", "mise.local.toml", ".mise.local.toml", "mise.dev.toml", "mise/config.toml",
    ".config/mise.toml", ".tool-versions", ".cargo/config.toml", ".cargo/config",
    "rust-toolchain.toml", "rust-toolchain", ".env", ".Rprofile", "bunfig.toml",
]  # fmt: skip


async def test_files_other_tools_run_never_come_back(root: Path) -> None:
    """The attack: plant an hg repository with a hook (and the rest) in one command."""
    (root / "sub").mkdir()
    plant = " && ".join(
        f"mkdir -p {os.path.dirname(n) or '.'} && echo '[hooks]' > {n}" for n in _RUN_BY_OTHER_TOOLS
    )
    # one under a name that is not UTF-8: reported escaped, not a failed call (the
    # command's output and the report lost)
    plant += """ && d=$(printf 'd\\377') && mkdir "$d" && echo x > "$d/.envrc" """
    plant += """ && echo x > "$d/ok" """
    code, output = await _run(_ops(root), f"{plant} && echo ok > ok.txt", root)
    assert code == 0, output
    assert (root / "ok.txt").read_text() == "ok\n"
    assert b"[prism sandbox] not applied to" in output  # reported
    assert b".hg/" in output
    assert b"d\\xff/.envrc" in output
    assert os.listdir(bytes(root / "d\udcff")) == [b"ok"]
    for name in _RUN_BY_OTHER_TOOLS:
        assert not (root / name).exists(), name


async def test_existing_protected_files_are_neither_changed_nor_deleted(root: Path) -> None:
    (root / ".envrc").write_text("export SAFE=1\n")
    (root / "sub").mkdir()
    (root / "sub" / ".bashrc").write_text("# mine\n")
    command = "echo 'curl x | sh' >> .envrc && rm sub/.bashrc && echo done"
    code, output = await _run(_ops(root), command, root)
    assert code == 0
    assert output.startswith(b"done\n")
    assert b"[prism sandbox] not applied" in output
    assert (root / ".envrc").read_text() == "export SAFE=1\n"
    assert (root / "sub" / ".bashrc").read_text() == "# mine\n"


async def test_the_protected_paths_option_counts_at_apply_time(root: Path) -> None:
    code, output = await _run(_ops(root, protected_paths=["Makefile"]), "echo x > Makefile", root)
    assert code == 0
    assert b"Makefile" in output
    assert not (root / "Makefile").exists()


async def test_a_host_watching_during_the_command_sees_nothing_of_it(
    root: Path, tmp_path: Path
) -> None:
    """The host lists the root and runs git while the command waits: nothing planted runs."""
    await _repository(root)
    marker = tmp_path / "marker"
    pipes = tmp_path / "pipes"
    pipes.mkdir()
    os.mkfifo(pipes / "go")
    before = _tree(root)
    command = (
        "echo 'touch {m}' > .envrc && mkdir -p d0/.vscode && echo '{{}}' > d0/.vscode/tasks.json"
        " && git config core.fsmonitor 'touch {m}; false #'"
        " && printf '#!/bin/sh\\ntouch {m}\\n' > .git/hooks/pre-commit"
        " && chmod +x .git/hooks/pre-commit"
        " && echo made > made.txt && echo ready && cat {go}"
    ).format(m=marker, go=pipes / "go")
    ready = trio.Event()
    seen: list[bytes] = []

    async def sink(chunk: bytes) -> None:
        seen.append(chunk)
        if b"ready" in b"".join(seen):
            ready.set()

    request = ShellSpawnRequest(command=command, shell_path="/bin/sh", cwd=str(root), env=_ENV)
    sandbox = BubblewrapSandbox([str(root)], extra_args=("--ro-bind", str(pipes), str(pipes)))

    def release() -> None:
        with open(pipes / "go", "w") as fifo:
            fifo.write("go\n")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(create_sandbox_shell_operations(sandbox).run, request, sink)
        with trio.fail_after(60):
            await ready.wait()
        # while the command runs: the host sees the root as it was, and its git runs nothing
        assert _tree(root) == before
        await _sh(root, "git status; git add -A; git commit -qm host; git reset -q HEAD~")
        assert not marker.exists()
        await trio.to_thread.run_sync(release)
    # afterwards: only the ordinary file came back
    assert (root / "made.txt").read_text() == "made\n"
    assert not (root / ".envrc").exists()
    assert not (root / "d0" / ".vscode").exists()
    await _sh(root, "git status; git add -A; git commit -qm after")
    await _sh(root, "for f in .envrc .bashrc .profile; do [ -f $f ] && . ./$f; done; true")
    assert not marker.exists()
    assert b"fsmonitor" not in await _sh(root, "git config --list --local")


@pytest.mark.parametrize(
    "plant",
    [
        "ln -sf {victim} .git/logs/HEAD",
        "mkdir -p .git/logs/refs/heads && ln -sf {victim} .git/logs/refs/heads/main",
        "rm -rf .git/logs && ln -s {outside} .git/logs",
        "ln -sf {victim} .git/refs/heads/evil",
        "rm -rf .git/refs/heads && ln -s {outside} .git/refs/heads",
        "ln -sf {victim} .git/ORIG_HEAD",
        "ln -sf {victim} .git/index",
        "ln -sf {victim} .git/COMMIT_EDITMSG",
        "rm -rf .git/objects/info && ln -s {outside} .git/objects/info",
    ],
)
async def test_links_planted_in_dot_git_never_lead_the_host_git_outside(
    root: Path, tmp_path: Path, plant: str
) -> None:
    await _repository(root)
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim"
    victim.write_text("precious\n")
    command = plant.format(victim=victim, outside=outside)
    code, output = await _run(_ops(root), command, root)
    assert code == 0, output
    await _sh(root, "git add -A && git commit -qm host && git checkout -qb other && git gc -q")
    assert victim.read_text() == "precious\n"
    assert sorted(os.listdir(outside)) == ["victim"]
    assert not _links_in(root / ".git")


@pytest.mark.parametrize(
    ("command", "kept_out"),
    [
        ("echo '[core]' >> .git/config", ".git/config"),
        ("echo x > .git/objects/info/alternates", ".git/objects/info/alternates"),
        ("echo . > .git/commondir", ".git/commondir"),
        ("mkdir -p .git/info && echo '* diff=x' > .git/info/attributes", ".git/info/"),
        ("mkdir -p .git/worktrees/w && echo /x > .git/worktrees/w/gitdir", ".git/worktrees/"),
        ("mkdir -p .git/modules/m && echo x > .git/modules/m/config", ".git/modules/"),
        ("echo x > .git/hooks/post-checkout", ".git/hooks/"),
        ("rm -rf .git", ".git"),
        ("echo 'gitdir: /tmp' > d0/.git", "d0/.git"),
    ],
)
async def test_what_git_runs_or_where_it_writes_stays_private(
    root: Path, command: str, kept_out: str
) -> None:
    await _repository(root)
    before = _git_files(root)
    code, output = await _run(_ops(root), command, root)
    assert code == 0, output
    assert kept_out.encode() in output
    after = _git_files(root)
    assert after == before
    assert not (root / "d0" / ".git").exists()


def _links_in(directory: Path) -> list[str]:
    return [
        os.path.join(path, name)
        for path, dirs, files in os.walk(directory)
        for name in dirs + files
        if os.path.islink(os.path.join(path, name))
    ]


def _git_files(root: Path) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for path, _dirs, files in os.walk(root / ".git"):
        if "/objects" in path:
            continue
        for name in files:
            full = os.path.join(path, name)
            with open(full, "rb") as handle:
                out[os.path.relpath(full, root)] = handle.read()
    return out


async def test_wrap_alone_binds_the_roots_read_only(root: Path) -> None:
    argv = BubblewrapSandbox([str(root)]).wrap(["sh", "-c", "echo x > made.txt"], cwd=str(root))
    result = await trio.run_process(argv, cwd=root, check=False, capture_stderr=True)
    assert result.returncode != 0
    assert b"Read-only file system" in result.stderr
    assert os.listdir(root) == []


async def test_overlays_need_no_mount_tool_on_path(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the launcher mounts the overlays itself: no unshare, mount or sh is looked up
    bwrap = shutil.which("bwrap")
    assert bwrap is not None
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)], bwrap_path=bwrap))
    code, _ = await _run(ops, "/bin/sh -c 'echo x > made.txt'", root)
    assert code == 0
    assert (root / "made.txt").read_text() == "x\n"


async def test_the_private_layers_are_emptied_after_the_call(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # emptied in the background (the result does not wait for the file system), all of
    # them; a few kept (empty) for the next calls, removed at exit
    from prism.coding.security import _overlay

    base = tmp_path / "base"
    base.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    monkeypatch.setattr(_overlay, "_READY_CLOSED", False)
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    for command in ("true", "echo x > made.txt", "mkdir -p a/b && echo y > a/b/c"):
        code, _ = await _run(ops, command, root)
        assert code == 0
    assert await trio.to_thread.run_sync(_overlay.wait_discarded, 60)
    layers = base / f"prism-layers-{os.getuid()}"
    kept = list(layers.iterdir())
    assert 0 < len(kept) <= _overlay._READY_KEPT
    for layer in kept:
        assert [p for p in layer.rglob("*") if p.name not in ("upper", "work", "mnt")] == []
    assert (root / "a" / "b" / "c").read_text() == "y\n"
    _overlay._remove_ready()  # at exit
    assert list(layers.iterdir()) == []


async def test_a_kept_layer_holding_anything_is_not_used_again(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack: a file put into a kept layer's upper directory between two calls would
    come back as the next command's change."""
    from prism.coding.security import _overlay

    base = tmp_path / "base"
    base.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    monkeypatch.setattr(_overlay, "_READY_CLOSED", False)
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    assert (await _run(ops, "true", root))[0] == 0
    assert await trio.to_thread.run_sync(_overlay.wait_discarded, 60)
    kept = list((base / f"prism-layers-{os.getuid()}").iterdir())
    assert kept  # (the probe's and the call's, unless the call's reused the probe's)
    for layer in kept:
        (layer / "upper" / ".envrc").write_text("echo planted\n")
        (layer / "upper" / "planted.txt").write_text("x\n")
    for index in range(len(kept)):
        assert (await _run(ops, f"echo {index} > made.txt", root))[0] == 0
        assert (root / "made.txt").read_text() == f"{index}\n"
    assert not (root / "planted.txt").exists()
    assert not (root / ".envrc").exists()
    assert await trio.to_thread.run_sync(_overlay.wait_discarded, 60)
    # (a call takes the last layer kept: one the janitor emptied may be taken before a
    # planted one, so each layer still kept is asked for until none is left)
    assert _planted_layers_taken(str(base / f"prism-layers-{os.getuid()}"), str(root)) == []
    _overlay._remove_ready()


def _planted_layers_taken(layers: str, root: str) -> list[str]:
    """Each layer still kept under ``layers`` taken in turn: those holding a planted file."""
    from prism.coding.security import _overlay

    planted = []
    while (taken := _overlay._ready_layer(layers, (root, ()))) is not None:
        if os.path.lexists(os.path.join(taken[0], "upper", "planted.txt")):
            planted.append(taken[0])
        _overlay._remove_layer(taken[0])
    return planted


async def test_no_call_sees_the_private_layers(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The attack: the layers under /var/tmp were readable, another call's pending changes too."""
    from prism.coding.security._overlay import wait_discarded

    base = tempfile.mkdtemp(dir="/var/tmp")
    try:
        monkeypatch.setattr(tempfile, "tempdir", base)
        ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
        code, output = await _run(ops, f"echo secret > made.txt; ls -AR {base}", root)
        assert code == 0
        assert b"prism-overlay-" not in output
        assert b"made.txt" not in output
        assert b"secret" not in output
        assert (root / "made.txt").read_text() == "secret\n"
        layers = os.stat(os.path.join(base, f"prism-layers-{os.getuid()}"))
        assert stat.S_IMODE(layers.st_mode) == 0o700
    finally:
        # the layers are removed in the background: wait for that, then remove the base
        assert await trio.to_thread.run_sync(wait_discarded, 60)
        shutil.rmtree(base)


async def test_no_descriptor_of_the_launcher_reaches_the_command(root: Path) -> None:
    # the fork server's sockets and the seccomp program's descriptor stay outside
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    code, output = await _run(ops, "ls /proc/$$/fd", root)
    assert code == 0
    assert output.split() == [b"0", b"1", b"2"]


def daemon_command(tag: str, where: str) -> str:
    """Three processes that outlive the command: setsid + env -i, a double fork, nohup.

    Each marks itself started (a file in ``where``) before it becomes ``sleep``;
    the command ends only once all three run.
    """
    mark = f"touch {where}/{tag}"
    return (
        f"setsid -f env -i /bin/bash -c '{mark}-a; exec -a {tag}-a sleep 300' >/dev/null 2>&1; "
        f"/bin/bash -c '( ( {mark}-b; exec -a {tag}-b sleep 300 & ) & )' >/dev/null 2>&1; "
        f"nohup /bin/bash -c '{mark}-c; exec -a {tag}-c sleep 300' >/dev/null 2>&1 & "
        f"until [ -e {where}/{tag}-a ] && [ -e {where}/{tag}-b ] && [ -e {where}/{tag}-c ]; "
        "do :; done; echo started"
    )


async def test_daemons_and_double_forks_end_with_the_call(root: Path) -> None:
    tag = f"prism-daemon-{os.getpid()}-{id(root)}"
    code, output = await _run(_ops(root), daemon_command(tag, "/tmp"), root)
    assert (code, output) == (0, b"started\n")
    assert processes_named(tag) == []


def processes_named(tag: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                cmdline = handle.read()
        except OSError:
            continue
        if tag.encode() in cmdline:
            found.append(pid)
    return found


async def test_set_user_id_bits_are_cleared_on_the_way_back(root: Path) -> None:
    code, output = await _run(_ops(root), "cp /bin/true t && chmod 6755 t && ls -l t", root)
    assert code == 0
    assert output.startswith(b"-rwsr-sr-x")  # inside, as made
    assert b"set-user-ID" in output
    assert stat.S_IMODE(os.stat(root / "t").st_mode) == 0o755
