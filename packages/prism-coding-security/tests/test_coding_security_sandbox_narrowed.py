"""A line whose writes the policy proved: the private layer only over where they go.

The policy records the smallest directories holding every path a modelled line may
write (``write_dirs``); bubblewrap binds the roots read-only and keeps its private
layer (the same overlay and checked copy-back) over those directories only. A write
anywhere else fails with EROFS: the mount enforces the proved set. Real bubblewrap,
real git, compared byte for byte with the same commands run unsandboxed.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import stat
from typing import TYPE_CHECKING, Any

import pytest
import trio

from prism.coding.security import (
    BubblewrapSandbox,
    CommandRules,
    create_coding_approval_policy,
    create_sandbox_shell_operations,
    explain_command,
)
from prism.coding.tools import LocalShellOperations, ShellOperations, ShellSpawnRequest
from prism.core import ExecutionAction, ExecutionDecision

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

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


def _tree(root: Path) -> None:
    for name in ("d1/deep", "d2", ".hidden"):
        (root / name).mkdir(parents=True)
    (root / "d1" / "a.py").write_text("a = 1\n")
    (root / "d1" / "deep" / "b.py").write_text("b = 2\n")
    (root / "d2" / "c.txt").write_text("c\n")
    (root / "README").write_text("hello\n")
    os.symlink("d2/c.txt", root / "link")


def _writes(root: Path, command: str, **options: object) -> tuple[str, ...] | None:
    sandbox = BubblewrapSandbox([str(root)])
    found = explain_command(command, roots=[str(root)], sandbox=sandbox, **options)  # type: ignore[arg-type]
    return found.write_dirs


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("echo x > d1/new", ["d1"]),
        ("sed -i s/1/2/ d1/a.py", ["d1"]),
        ("cd d1 && echo x >> deep/b.py", ["d1/deep"]),
        ("mkdir -p d1/deep/x/y/z", ["d1/deep"]),
        ("touch d1/a.py d2/new && cat README | tee d1/deep/out", ["d1", "d2"]),
        ("mv d1/a.py d2/a.py", ["d1", "d2"]),
        # a link: the name's directory and the real file's both
        ("echo x > link", [""]),
        ("sed -i s/c/d/ link", [""]),
        ("cp README d2/", [""]),
        ("touch .", [""]),
        ("echo x > .gitignore", [""]),
    ],
)
def test_the_write_set_is_the_smallest_directories_holding_every_write(
    root: Path, command: str, expected: list[str]
) -> None:
    _tree(root)
    assert _writes(root, command) == tuple(
        sorted(os.path.join(str(root), e).rstrip("/") for e in expected)
    )


def test_a_cd_whose_dot_dot_follows_a_link_has_no_write_set(root: Path) -> None:
    """bash's cd is logical (``lnk/..`` is the directory holding ``lnk``), the policy's
    placement physical: such a line is not narrowed (the proved write failed read-only)."""
    _tree(root)
    os.symlink("d1/deep", root / "lnk")
    assert _writes(root, "cd lnk/.. && echo x > f") is None
    assert _writes(root, "cd d1/deep/.. && echo x > f") == (f"{root}/d1",)


@pytest.mark.parametrize(
    "command",
    [
        "python3 gen.py > d1/out",  # a program no model knows
        "echo $X > d1/new",  # a computed target
        "test -w d1/a.py && echo x > d1/new",  # asks whether a file is writable
        "find d1 -writable",
        "echo x > d1/new; ./run.sh",
        "git add -A",  # writes where its model does not say
        "sed -i -e 'w d2/out' d1/a.py",  # a sed script that writes elsewhere
    ],
)
def test_a_line_with_a_write_no_model_places_has_no_write_set(root: Path, command: str) -> None:
    _tree(root)
    assert _writes(root, command) is None


def test_a_rule_allowed_program_has_no_write_set(root: Path) -> None:
    _tree(root)
    rules = CommandRules(allow=["make *"])
    assert _writes(root, "make all > d1/log", command_rules=rules) is None


def test_the_decision_carries_the_write_set_to_the_shell_tool(root: Path) -> None:
    """Only a confined line gets it; a protected write or one outside the roots asks."""
    _tree(root)
    policy = create_coding_approval_policy(
        roots=[str(root)], sandbox=BubblewrapSandbox([str(root)])
    )

    def decide(command: str) -> ExecutionDecision:
        action = ExecutionAction(
            kind="shell", operation="shell", command=command, paths=(str(root),)
        )
        decision = policy.check(action)
        assert isinstance(decision, ExecutionDecision)
        return decision

    decision = decide("echo x > d1/new")
    assert decision.allowed
    assert decision.details["write_dirs"] == [f"{root}/d1"]
    assert decision.modified is not None
    assert decision.modified["metadata"] == {
        "write_dirs": [f"{root}/d1"],
        # its only write is a redirection: the sandbox may open it (test_..._redirects)
        "redirected": {"command": "'echo' 'x' >&4", "targets": [[4, f"{root}/d1/new", False]]},
    }
    for asking in ("echo x > d1/.envrc", "echo x > /var/tmp/prism-narrowed-x"):
        decision = decide(asking)
        assert not decision.allowed  # no approver
        assert "write_dirs" not in decision.details
    unknown = decide("./build.sh > d1/log")
    assert unknown.allowed
    assert unknown.modified is None


def _ops(*roots: Path) -> ShellOperations:
    return create_sandbox_shell_operations(BubblewrapSandbox([str(r) for r in roots]))


async def _run(
    ops: ShellOperations, command: str, cwd: Path, write_dirs: list[Path] | None
) -> tuple[int, bytes]:
    chunks: list[bytes] = []

    async def sink(chunk: bytes) -> None:
        chunks.append(chunk)

    request = ShellSpawnRequest(
        command=command,
        shell_path="/bin/sh",
        cwd=str(cwd),
        env=_ENV,
        write_dirs=None if write_dirs is None else [str(d) for d in write_dirs],
    )
    with trio.fail_after(60):
        result = await ops.run(request, sink)
    return result.exit_code or 0, b"".join(chunks)


def _snapshot(root: Path) -> list[tuple[str, int, int, int, bytes]]:
    """Every entry below ``root``, ``.git`` included: path, mode, inode, mtime, content."""
    out: list[tuple[str, int, int, int, bytes]] = []
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
            out.append((os.path.relpath(full, root), info.st_mode, info.st_ino,
                        info.st_mtime_ns, content))  # fmt: skip
    return out


async def _git(root: Path, command: str) -> bytes:
    result = await trio.run_process(
        ["/bin/sh", "-c", command], cwd=root, env=_ENV, capture_stdout=True, capture_stderr=True
    )
    return result.stdout


_ESCAPES = [
    "echo x > d2/new",  # another directory of the root
    "echo x > d1/../escaped",  # '..' out of the proved directory
    "ln -s ../d2 d1/out && echo x > d1/out/through-link; rm d1/out",  # a link planted in it
    "mv d1/a.py d2/a.py",  # a rename out of it
    "ln d2/c.txt d1/hard",  # a hard link of a file outside it
    "echo x > {other}/new",  # a second root
    "touch README .git/config && rm README",
    "git init -q sub",
]


async def test_a_narrowed_line_cannot_write_outside_its_proved_directories(
    root: Path, tmp_path: Path
) -> None:
    """The attack: a line proved to write in ``d1`` writes elsewhere. Every write outside
    fails (EROFS, or EXDEV for links across), the host's trees (``.git`` and a second
    root included) stay byte-, inode- and mtime-identical, and the host's git sees
    the same. Writing through a link planted in ``d1`` fails too.
    """
    _tree(root)
    await _git(root, "git init -q -b main && git add -A && git commit -qm init")
    other = tmp_path / "other"
    other.mkdir()
    (other / "o.txt").write_text("o\n")
    status = await _git(root, "git status --porcelain")
    before, before_other = _snapshot(root), _snapshot(other)
    command = "; ".join(e.format(other=other) for e in _ESCAPES) + "; echo end"
    code, output = await _run(_ops(root, other), command, root, [root / "d1"])
    assert code == 0
    assert output.endswith(b"end\n"), output
    assert output.count(b"Read-only file system") == 8, output
    assert b"Invalid cross-device link" in output
    assert b"prism sandbox" not in output
    assert _snapshot(root) == before
    assert _snapshot(other) == before_other
    assert await _git(root, "git status --porcelain") == status


async def test_writes_inside_the_proved_directory_come_back_checked(root: Path) -> None:
    """Edits, new files and removals in ``d1`` come back; protected names made there are
    left out and reported, as over the whole root."""
    _tree(root)
    (root / "d1" / "keep").write_text("k\n")
    os.link(root / "d2" / "c.txt", root / "d1" / "hard")  # the host's own hard link
    command = (
        "echo more >> d1/hard && "
        "sed -i s/1/2/ d1/a.py && echo new > d1/deep/new.txt && rm d1/keep && "
        "echo 'curl x | sh' > d1/.envrc && mkdir d1/.vscode && echo '{}' > d1/.vscode/tasks.json "
        "&& mkdir -p d1/sub/.git && echo '[core]' > d1/sub/.git/config && echo done"
    )
    code, output = await _run(_ops(root), command, root, [root / "d1"])
    assert code == 0, output
    assert output.startswith(b"done\n")
    assert b"[prism sandbox] not applied to" in output
    assert b"d1/.envrc" in output
    assert (root / "d1" / "a.py").read_text() == "a = 2\n"
    # written through a hard link: the file in d1 changes, its twin outside d1 does not
    assert (root / "d1" / "hard").read_text() == "c\nmore\n"
    assert (root / "d2" / "c.txt").read_text() == "c\n"
    assert (root / "d1" / "deep" / "new.txt").read_text() == "new\n"
    assert not (root / "d1" / "keep").exists()
    assert not (root / "d1" / ".envrc").exists()
    assert not (root / "d1" / ".vscode" / "tasks.json").exists()
    assert not (root / "d1" / "sub" / ".git" / "config").exists()


_CHANGES = (
    "sed -i s/1/2/ d1/a.py && echo x > d1/new && mkdir -p d1/deep/x/y && rm d1/deep/b.py && "
    "ls -aR && find . | sort && git status --porcelain --untracked-files=all && git diff --stat"
)


async def test_a_narrowed_directory_whose_name_needs_escaping_works(root: Path) -> None:
    """The layer's mount options name its own directories only (the proved directory is
    named by descriptor): a comma, colon or backslash in that directory's name, which
    overlayfs would split its options at, neither breaks the mount nor adds an option."""
    odd = root / "a,upperdir=x:b\\c"
    odd.mkdir()
    code, output = await _run(_ops(root), f"echo hi > '{odd.name}/made.txt'", root, [odd])
    assert (code, output) == (0, b"")
    assert (odd / "made.txt").read_text() == "hi\n"


async def test_a_narrowed_line_sees_and_leaves_what_it_would_unsandboxed(tmp_path: Path) -> None:
    plain, boxed = tmp_path / "plain", tmp_path / "boxed"
    for directory in (plain, boxed):
        directory.mkdir()
        _tree(directory)
        await _git(directory, "git init -q -b main && git add -A && git commit -qm init")
    expected = await _run(LocalShellOperations(), _CHANGES, plain, None)
    assert expected[0] == 0
    assert await _run(_ops(boxed), _CHANGES, boxed, [boxed / "d1"]) == expected
    files = [(e[0], e[1], e[4]) for e in _snapshot(plain) if not e[0].startswith(".git")]
    assert [(e[0], e[1], e[4]) for e in _snapshot(boxed) if not e[0].startswith(".git")] == files


async def test_a_stale_write_set_falls_back_to_the_whole_root(root: Path) -> None:
    """The host replaced the proved directory by a link since the policy looked: the
    line runs over the whole root's layer (never a layer mounted through a link)."""
    _tree(root)
    os.rename(root / "d1", root / "moved")
    os.symlink("moved", root / "d1")
    code, output = await _run(_ops(root), "echo x > d1/new", root, [root / "d1"])
    assert (code, output) == (0, b"")
    assert (root / "moved" / "new").read_text() == "x\n"


class _Swapping(BubblewrapSandbox):
    """Runs ``swap`` after the layers are made, before the launcher mounts them: the
    host replacing the proved directory between the decision and the run."""

    swap: Callable[[], None] = staticmethod(lambda: None)

    async def _launch(self, launch: Any, **kwargs: Any) -> Any:
        if launch.overlays:  # a layer to mount (not the probe)
            swap, self.swap = self.swap, lambda: None
            swap()
        return await super()._launch(launch, **kwargs)


async def test_a_directory_swapped_for_a_link_before_the_mount_is_refused(
    root: Path, tmp_path: Path
) -> None:
    """The attack: ``d1`` becomes a link to a directory outside the roots after the check,
    before the mount. The layer is never mounted through the link (the launcher opens
    ``d1`` without following links): the line does not run, sees nothing of the link's
    target and writes nothing anywhere; a real directory swapped in is refused too."""
    _tree(root)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "HOST-SECRET").write_text("s\n")

    def to_link() -> None:
        os.rename(root / "d1", root / "moved")
        os.symlink(outside, root / "d1")

    sandbox = _Swapping([str(root)])
    sandbox.swap = to_link
    ops = create_sandbox_shell_operations(sandbox)
    command = "ls d1; echo x > d1/new; echo x > d1/../escaped"
    code, output = await _run(ops, command, root, [root / "d1"])
    assert code != 0
    assert b"HOST-SECRET" not in output
    assert os.listdir(outside) == ["HOST-SECRET"]
    assert sorted(os.listdir(root / "moved")) == ["a.py", "deep"]
    assert not (root / "escaped").exists()

    os.unlink(root / "d1")
    os.rename(root / "moved", root / "d1")

    def to_other() -> None:
        os.rename(root / "d1", root / "moved")
        (root / "d1").mkdir()

    sandbox.swap = to_other
    code, output = await _run(ops, "ls; echo x > d1/new", root, [root / "d1"])
    assert code != 0
    assert os.listdir(root / "d1") == []


async def test_git_finds_its_repository_from_inside_a_narrowed_directory(root: Path) -> None:
    """The narrowed directory is a mount of its own: git run from inside it found no
    repository ("Stopping at filesystem boundary"); it works as on the host."""
    await _repository(root)
    ops = _ops(root)
    code, output = await _run(ops, "cd d1 && echo x > f && git status --short", root, [root / "d1"])
    assert (code, output) == (0, b" M ../README\n?? f\n?? new.txt\n")
    command = "echo y > d1/g && cd d1 && git add g && git commit -qm m && echo ok"
    code, output = await _run(ops, command, root, [root / ".git", root / "d1"])
    assert (code, output) == (0, b"ok\n")
    assert await _git(root, "git log -1 --format=%s") == b"m\n"


async def test_the_secure_tools_narrow_a_confined_line(root: Path) -> None:
    """Through the whole pipeline: the policy proves the write set, the shell tool passes
    it on, the sandbox keeps the layer over ``d1`` only; the gates still run (the ledger
    records the decision with the write set; a protected write is still refused)."""
    from prism.coding.security import open_secure_coding_tools
    from prism.core import DispatchOptions, ToolCall, create_tool_registry, dispatch_tool_call
    from prism.core.ledger import RunLedger

    _tree(root)
    seen: list[tuple[str, ...] | None] = []

    def hook(request: ShellSpawnRequest) -> ShellSpawnRequest:
        seen.append(request.write_dirs)
        return request

    ledger = RunLedger()
    lines = ["sed -i s/1/2/ d1/a.py && echo x > d1/new", "echo x > .envrc"]
    async with open_secure_coding_tools(
        [str(root)], sandbox="bubblewrap", shell_options={"spawn_hook": hook, "env": _ENV}
    ) as secure:
        options = DispatchOptions(registry=create_tool_registry(secure.tools), ledger=ledger)
        results = [
            await dispatch_tool_call(
                ToolCall(id=str(n), name="shell", arguments={"command": line}), options
            )
            for n, line in enumerate(lines)
        ]
    assert not results[0].is_error, results[0].joined_text
    assert results[1].is_error  # asks, and there is no approver
    assert seen == [(f"{root}/d1",)]
    assert (root / "d1" / "a.py").read_text() == "a = 2\n"
    assert (root / "d1" / "new").read_text() == "x\n"
    assert not (root / ".envrc").exists()
    decisions = [record.decision for record in ledger.records]
    assert [(d.allowed, d.confined) for d in decisions if d is not None] == [
        (True, True),
        (False, False),
    ]


def test_a_write_set_the_sandbox_cannot_narrow_to_keeps_the_whole_roots(root: Path) -> None:
    """No write set, one outside the roots, in a root nested in another, or one
    directory inside another: every root gets its layer (None)."""
    _tree(root)
    sandbox = BubblewrapSandbox([str(root), str(root / "d2")])
    narrowed = sandbox._narrowed  # the sandbox's own choice, before any mount
    assert narrowed(None) is None
    assert narrowed(("/var",)) is None
    assert narrowed((f"{root}/d2",)) is None
    assert narrowed((f"{root}/d1", f"{root}/d1/deep")) is None
    assert narrowed((f"{root}/d1/missing",)) is None
    assert narrowed((f"{root}/d1", str(root))) is None
    assert narrowed((f"{root}/d1/deep", f"{root}/.hidden")) == {
        f"{root}/d1/deep": (str(root), ("d1", "deep")),
        f"{root}/.hidden": (str(root), (".hidden",)),
    }


def test_a_directory_the_host_replaced_meanwhile_gets_nothing(root: Path, tmp_path: Path) -> None:
    """The copy-back reaches the narrowed directory without following a link: the host
    replaced it by a link to elsewhere while the command ran, and nothing is written
    there; the note says so."""
    from prism.coding.security import PROTECTED_PATHS
    from prism.coding.security._overlay import RootOverlay
    from prism.coding.security._protected import ProtectedPaths

    _tree(root)
    base = tmp_path / "layers"
    base.mkdir()
    overlay = RootOverlay(str(root), str(base), PROTECTED_PATHS, below=("d1",))
    assert overlay.mount_option().startswith(f"lowerdir={root}/d1,")
    assert overlay.touches_work_tree()
    (tmp_path / "elsewhere").mkdir()
    os.rename(root / "d1", tmp_path / "old-d1")
    os.symlink(tmp_path / "elsewhere", root / "d1")
    (base / os.path.basename(overlay.directory) / "upper" / "new").write_text("x\n")
    try:
        notes = overlay.apply(ProtectedPaths(PROTECTED_PATHS), list)
    finally:
        overlay.discard()
    assert notes == [
        f"the changes to {root}/d1 were not applied ([Errno 20] Not a directory: 'd1')"
    ]
    assert os.listdir(tmp_path / "elsewhere") == []
    (root / ".git").mkdir()
    git_layer = RootOverlay(str(root), str(base), below=(".git",))
    try:
        assert not git_layer.touches_work_tree()
    finally:
        git_layer.discard()


# -- git add and git commit: only .git ------------------------------------------------------


async def _repository(root: Path) -> None:
    _tree(root)
    await _git(root, "git init -q -b main && git add -A && git commit -qm init")
    (root / "README").write_text("changed\n")
    (root / "d1" / "new.txt").write_text("new\n")


@pytest.mark.parametrize(
    ("command", "narrowed"),
    [
        ("git add -A", True),
        ("git add -A && git commit -qm x", True),
        ("git commit -am 'a message'", True),
        ("git commit -q --amend --no-edit", True),
        ("git add -- d1 README && git commit -F - <<< msg", True),
        ("timeout 60 git commit -qam x", True),
        ("git commit", False),  # an editor
        ("git commit -m x --edit", False),
        ("git commit -S -m x", False),  # gpg
        ("git commit -m x --trailer 'a: b'", False),  # trailer.*.cmd
        ("git commit -m", False),
        ("git add -p", False),
        ("git add --interactive", False),
        ("git -C d1 add x", False),
        ("git -c core.hooksPath=h commit -m x", False),
        ("git stash", False),
    ],
)
async def test_git_add_and_commit_write_only_in_dot_git(
    root: Path, command: str, narrowed: bool
) -> None:
    await _repository(root)
    expected = (f"{root}/.git",) if narrowed else None
    assert _writes(root, command) == expected


async def test_git_that_may_run_a_program_keeps_the_whole_root(root: Path, tmp_path: Path) -> None:
    """A hook (a pre-commit formatter rewrites files), a hooks directory named by the
    configuration, a clean filter, an fsmonitor, commit signing: git runs a program, so
    nothing proves where it writes. A repository git does not find as a plain ``.git``
    directory of a root is not narrowed either."""
    await _repository(root)
    command = "git add -A && git commit -qm x"
    hooks = root / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "pre-commit.sample").write_text("#!/bin/sh\n")
    assert _writes(root, command) == (f"{root}/.git",)
    (hooks / "pre-commit").write_text("#!/bin/sh\nblack .\n")
    assert _writes(root, command) is None
    (hooks / "pre-commit").unlink()
    assert _writes(root, command) == (f"{root}/.git",)
    (root / "githooks").mkdir()
    await _git(root, "git config core.hooksPath githooks")
    assert _writes(root, command) == (f"{root}/.git",)
    (root / "githooks" / "post-commit").write_text("#!/bin/sh\n")
    assert _writes(root, command) is None
    await _git(root, "git config --unset core.hooksPath")
    for setting in ("filter.fmt.clean 'sed s/a/b/'", "core.fsmonitor 'touch M'",
                    "commit.gpgSign true"):  # fmt: skip
        await _git(root, f"git config {setting}")
        assert _writes(root, command) is None, setting
        await _git(root, f"git config --unset {setting.split()[0]}")
        assert _writes(root, command) == (f"{root}/.git",)
    # another work tree (its hooks and files), submodules (their own configuration)
    await _git(root, f"git config core.worktree {root}/d1")
    assert _writes(root, command) is None
    await _git(root, "git config --unset core.worktree")
    (root / ".gitmodules").write_text("")
    assert _writes(root, command) is None
    (root / ".gitmodules").unlink()
    (root / ".git" / "modules").mkdir()
    assert _writes(root, command) is None
    (root / ".git" / "modules").rmdir()
    assert _writes(root, command) == (f"{root}/.git",)
    # a linked worktree (.git is a file), a repository above the roots
    await _git(root, f"git worktree add -q {tmp_path}/wt")
    assert _writes(tmp_path / "wt", command) is None
    inner = root / "d2"
    assert _writes(inner, command) is None


async def test_a_narrowed_commit_gives_the_same_commit_as_unsandboxed(tmp_path: Path) -> None:
    plain, boxed = tmp_path / "plain", tmp_path / "boxed"
    for directory in (plain, boxed):
        directory.mkdir()
        await _repository(directory)
    command = (
        "git add -A && git commit -qm work && git rev-parse HEAD && "
        "git show --stat --format=%T HEAD && git status --porcelain && ls -a .git"
    )
    assert _writes(boxed, "git add -A && git commit -qm work") == (f"{boxed}/.git",)
    expected = await _run(LocalShellOperations(), command, plain, None)
    assert expected[0] == 0
    assert await _run(_ops(boxed), command, boxed, [boxed / ".git"]) == expected
    for directory in (plain, boxed):
        assert await _git(directory, "git status --porcelain --untracked-files=all") == b""
    assert await _git(boxed, "git log --format=%H") == await _git(plain, "git log --format=%H")
    assert await _git(boxed, "git fsck --strict 2>&1") == b""


async def test_the_dot_git_directories_kept_for_the_next_call_are_the_hosts_as_it_is_then(
    root: Path,
) -> None:
    """A commit's layer keeps the directories of ``.git`` its git copied up (refs, logs...)
    for the next call over ``.git``: that call sees the host's ``.git`` as it is then (a
    time, a mode the host changed, a directory it removed), nothing put into the kept
    layer comes back, and its copy-back puts back nothing of the last call's."""
    from prism.coding.security import _overlay

    await _repository(root)
    ops = _ops(root)
    dot_git = root / ".git"
    check = "ls -a .git; stat -c '%n %a %Y' .git/refs .git/refs/heads"

    async def kept() -> list[str]:
        assert await trio.to_thread.run_sync(_overlay.wait_discarded, 60)
        return [r[0] for ready in _overlay._READY.values() for r in ready
                if r[2] and r[1][0] == str(root)]  # fmt: skip

    assert (await _run(ops, "git add -A && git commit -qm one", root, [dot_git]))[0] == 0
    assert await kept()
    os.utime(dot_git / "refs" / "heads", ns=(10**18, 10**18))
    code, output = await _run(ops, check, root, [dot_git])
    assert code == 0
    assert b".git/refs/heads 755 1000000000\n" in output, output
    (layer,) = await kept()
    head = (dot_git / "refs" / "heads" / "main").read_bytes()
    (pathlib.Path(layer) / "upper" / "refs" / "heads" / "planted").write_bytes(head)
    assert (await _run(ops, "git commit -q --allow-empty -m two", root, [dot_git]))[0] == 0
    assert sorted(os.listdir(dot_git / "refs" / "heads")) == ["main"]
    assert await kept()
    os.chmod(dot_git / "refs", 0o700)
    shutil.rmtree(dot_git / "logs")
    code, output = await _run(ops, check, root, [dot_git])
    assert code == 0
    assert b"logs" not in output, output
    assert b".git/refs 700 " in output, output
    assert sorted(os.listdir(dot_git / "refs" / "heads")) == ["main"]
    assert not (dot_git / "logs").exists()
    assert stat.S_IMODE((dot_git / "refs").stat().st_mode) == 0o700


_GIT_ESCAPES = (
    "echo x > README; echo x > d1/planted; echo '[core] hooksPath = /tmp' >> .git/config; "
    "echo hook > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; "
    "ln -sf /var/tmp/victim .git/logs/HEAD; echo x > .git/info/exclude; "
    "echo 'gitdir: /elsewhere' > .git/commondir; echo end"
)


async def test_a_line_narrowed_to_dot_git_cannot_touch_the_work_tree(root: Path) -> None:
    """The attack: a line proved to write only in ``.git`` writes the work tree (fails
    read-only) and plants configuration, a hook, a link, a commondir in ``.git``: the
    same copy-back leaves them out and reports them; the host's git runs nothing."""
    await _repository(root)
    status = await _git(root, "git status --porcelain")
    before = [e for e in _snapshot(root) if not e[0].startswith(".git")]
    git_before = {p: c for p, _, _, _, c in _snapshot(root / ".git")}
    code, output = await _run(_ops(root), _GIT_ESCAPES, root, [root / ".git"])
    assert code == 0
    assert output.count(b"Read-only file system") == 2, output
    assert b"[prism sandbox] not applied to" in output
    assert [e for e in _snapshot(root) if not e[0].startswith(".git")] == before
    git_after = {p: c for p, _, _, _, c in _snapshot(root / ".git")}
    assert git_after == git_before
    assert not (root / ".git" / "logs" / "HEAD").is_symlink()
    assert await _git(root, "git status --porcelain") == status


async def test_the_secure_tools_narrow_a_commit_unless_a_hook_runs(root: Path) -> None:
    """Through the whole pipeline: a commit without hooks gets the layer over ``.git``
    only; with a pre-commit hook that rewrites a file, the whole root's layer, and the
    hook's change comes back as unsandboxed."""
    from prism.coding.security import open_secure_coding_tools
    from prism.core import DispatchOptions, ToolCall, create_tool_registry, dispatch_tool_call

    await _repository(root)
    seen: list[tuple[str, ...] | None] = []

    def hook(request: ShellSpawnRequest) -> ShellSpawnRequest:
        seen.append(request.write_dirs)
        return request

    async with open_secure_coding_tools(
        [str(root)], sandbox="bubblewrap", shell_options={"spawn_hook": hook, "env": _ENV}
    ) as secure:
        options = DispatchOptions(registry=create_tool_registry(secure.tools))

        async def shell(command: str) -> str:
            call = ToolCall(id="1", name="shell", arguments={"command": command})
            result = await dispatch_tool_call(call, options)
            assert not result.is_error, result.joined_text
            return result.joined_text

        await shell("git add -A && git commit -qm first")
        pre_commit = root / ".git" / "hooks" / "pre-commit"
        pre_commit.parent.mkdir(exist_ok=True)
        pre_commit.write_text("#!/bin/sh\necho formatted > d2/c.txt\ngit add d2/c.txt\n")
        pre_commit.chmod(0o755)
        await shell("git commit -q --allow-empty -m second")
    assert seen == [(f"{root}/.git",), None]
    assert await _git(root, "git log --format=%s") == b"second\nfirst\ninit\n"
    assert (root / "d2" / "c.txt").read_text() == "formatted\n"
    assert await _git(root, "git show --format= --name-only HEAD") == b"d2/c.txt\n"


@pytest.mark.parametrize(
    ("argv", "runs_nothing"),
    [
        (["git", "commit", "-m"], False),  # its value is missing
        (["git", "commit", "-qm"], False),
        (["git", "commit", "-F"], False),
        (["git", "add", "--chmod"], False),
        (["git", "commit", "--quiet=1", "-m", "x"], False),  # a value it takes none of
        (["git", "commit", "--message=x"], True),
        (["git", "commit", "-mx"], True),
        (["git", "commit", "-uno", "-m", "x"], True),
        (["git", "commit", "--untracked-files=no", "-m", "x"], True),
        (["git", "commit", "--author", "a <a@b>", "-C", "HEAD"], True),
        (["git", "commit", "-a"], False),  # no message: an editor
        (["git", "add", "--", "-p"], True),  # a pathspec
        (["git", "add", None], False),
        (["git", "status"], False),
        (["git"], False),
    ],
)
def test_only_known_options_that_run_nothing_pass(
    argv: list[str | None], runs_nothing: bool
) -> None:
    from prism.coding.security._gitwrites import _arguments_run_nothing

    assert _arguments_run_nothing(argv) is runs_nothing


async def test_the_repository_must_be_a_plain_dot_git_directory_of_a_root(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prism.coding.security import _gitwrites
    from prism.coding.security._gitwrites import git_directory_writes
    from prism.coding.security._paths import Roots

    await _repository(root)
    roots = Roots((str(root),))
    argv = ("git", "commit", "-qm", "x")
    git_dir = f"{root}/.git"
    assert git_directory_writes(argv, [str(root), f"{root}/d1"], roots) == [git_dir]
    # no hooks directory at all; an empty hooksPath is the default one
    await _git(root, "rm -r .git/hooks && git config core.hooksPath ''")
    assert git_directory_writes(argv, [str(root)], roots) == [git_dir]
    # hooksPath naming a file: unreadable as a directory, so a hook may run
    await _git(root, "git config core.hooksPath README")
    assert git_directory_writes(argv, [str(root)], roots) is None
    await _git(root, "git config --unset core.hooksPath")
    # settings that run nothing
    await _git(root, "git config core.fsmonitor false && git config commit.gpgSign false")
    assert git_directory_writes(argv, [str(root)], roots) == [git_dir]
    # an included file is not in the cache's key: asked again every time
    (root / "extra.cfg").write_text("")
    await _git(root, "git config include.path ../extra.cfg")
    assert git_directory_writes(argv, [str(root)], roots) == [git_dir]
    (root / "extra.cfg").write_text('[filter "x"]\n\tclean = cat\n')
    assert git_directory_writes(argv, [str(root)], roots) is None
    await _git(root, "git config --unset include.path")
    # configuration pointed elsewhere by the environment: not cached either
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    assert git_directory_writes(argv, [str(root)], roots) == [git_dir]
    monkeypatch.setattr(_gitwrites, "host_program", lambda name: None)  # no git to ask
    assert git_directory_writes(argv, [str(root)], roots) is None
    monkeypatch.undo()
    # .git without HEAD, as a link, with a commondir; a bare repository in the root
    (root / ".git" / "commondir").write_text("../elsewhere\n")
    assert git_directory_writes(argv, [str(root)], roots) is None
    (root / ".git" / "commondir").unlink()
    os.rename(root / ".git", root / "real.git")
    os.symlink("real.git", root / ".git")
    assert git_directory_writes(argv, [str(root)], roots) is None
    (root / ".git").unlink()
    (root / ".git").mkdir()
    assert git_directory_writes(argv, [str(root)], roots) is None
    (root / ".git").rmdir()
    assert git_directory_writes(argv, [str(root / "real.git")], roots) is None
    assert git_directory_writes(argv, [str(root / "d1")], roots) is None  # none found
