"""A hostile repository against Prism's own git and the git commands it proves.

Every file of a root is hostile, ``.git`` included: what git runs or reads
because the repository's configuration, index or ``.gitmodules`` says so is
forced off from the command line (or the line asks), and each test below
first shows that real git does run or read it without that.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from typing import TYPE_CHECKING

import pytest

from prism.coding.security import SandboxUnavailableError, explain_command
from prism.coding.security._gitnames import git_entries
from prism.coding.security._overlay import gitlinks

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from prism.coding.security import CommandExplanation

GIT = shutil.which("git")
pytestmark = pytest.mark.skipif(GIT is None, reason="git is not installed")


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "HOME": str(tmp_path),
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    }


def _git(root: Path, env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, env=env, check=False
    )


def _bash(text: str, cwd: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", text], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


def _repository(root: Path, env: Mapping[str, str]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "a.txt").write_text("one\n")
    _git(root, env, "init", "-q", "-b", "main")
    _git(root, env, "add", ".")
    assert _git(root, env, "commit", "-qm", "x").returncode == 0


def _config(root: Path, text: str) -> None:
    with (root / ".git" / "config").open("a") as handle:
        handle.write(text)


# -- Prism's own git on the host ---------------------------------------------------------------


def test_prisms_own_git_on_a_root_runs_no_fsmonitor_the_repository_names(tmp_path: Path) -> None:
    """Asking git which paths it names (before a confined command) and which gitlinks
    an index holds (copy-back) reads the index: the repository's fsmonitor stays off."""
    env = _env(tmp_path)
    root = tmp_path / "project"
    _repository(root, env)
    mark = tmp_path / "MARK"
    _config(root, f'[core]\n\tfsmonitor = "touch {mark}; false"\n')
    _git(root, env, "ls-files", "--stage")
    assert mark.exists(), "reading the index runs the planted fsmonitor"
    mark.unlink()
    git_entries(str(root))
    git_dir = str(root / ".git")
    assert gitlinks(git_dir, str(root), os.path.join(git_dir, "index")) == frozenset()
    assert not mark.exists()


# -- a partial clone's lazy fetch ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "extra"),
    [
        ("ext::sh {mark_sh}", "[protocol \"ext\"]\n\tallow = always\n"),
        ("{other}", "[protocol \"file\"]\n\tallow = always\n[remote \"origin\"]\n"
         "\tuploadpack = \"touch {mark}; false\"\n"),
        ("pwn::x", "[protocol \"pwn\"]\n\tallow = always\n"),
    ],
    ids=["ext", "file-uploadpack", "helper"],
)  # fmt: skip
def test_a_promisor_remote_is_never_fetched_by_a_proved_git_command(
    tmp_path: Path, url: str, extra: str
) -> None:
    """A blob missing from a partial clone makes ``git show`` fetch it from the promisor
    remote; the repository allows the transport by name, which outranks
    ``protocol.allow``: the proved text forces that name off too."""
    env = _env(tmp_path)
    mark = tmp_path / "MARK"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    helper = bin_dir / "git-remote-pwn"
    helper.write_text(f"#!/bin/sh\ntouch {mark}\nexit 1\n")
    helper.chmod(0o755)
    (tmp_path / "mark.sh").write_text(f"touch {mark}\n")
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    root = tmp_path / "project"
    _repository(root, env)
    blob = _git(root, env, "rev-parse", "HEAD:a.txt").stdout.strip()
    (root / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    formatted = {"mark": mark, "mark_sh": tmp_path / "mark.sh", "other": tmp_path / "other"}
    _config(
        root,
        "[core]\n\trepositoryformatversion = 1\n[extensions]\n\tpartialClone = origin\n"
        f'[remote "origin"]\n\turl = {url.format(**formatted)}\n\tpromisor = true\n'
        "\tpartialclonefilter = blob:none\n" + extra.format(**formatted),
    )
    for command in ("git show HEAD:a.txt", "git log -p -1"):
        _bash(command, root, env)
        assert mark.exists(), f"{command} fetches through the repository's transport"
        mark.unlink()
        explanation = explain_command(command, roots=[str(root)], cwd=str(root))
        assert explanation.execute is not None, explanation.reason
        result = _bash(explanation.execute, root, env)
        assert result.returncode != 0
        assert not mark.exists(), result


# -- a submodule's own `ignore` ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("where", "text"),
    [(".gitmodules", '[submodule "sub"]\n\tpath = sub\n\turl = ./sub\n\tignore = none\n'),
     (".git/config", '[submodule "sub"]\n\tignore = none\n')],
)  # fmt: skip
def test_a_submodules_own_ignore_setting_does_not_start_git_in_it(
    tmp_path: Path, where: str, text: str
) -> None:
    """``ignore = none`` for a submodule outranks ``diff.ignoreSubmodules``: git would run
    ``git status`` inside it, under its own configuration (a filter that runs a program);
    the proved text carries ``--ignore-submodules=dirty``, which outranks it."""
    env = _env(tmp_path)
    mark = tmp_path / "MARK"
    root = tmp_path / "project"
    _repository(root, env)
    sub = root / "sub"
    _repository(sub, env)
    _git(root, env, "add", "sub")
    (root / where).write_text(text) if where == ".gitmodules" else _config(root, text)
    _git(root, env, "add", "-A")
    _git(root, env, "commit", "-qm", "sub")
    (sub / ".gitattributes").write_text("* filter=pwn\n")
    _config(sub, f'[filter "pwn"]\n\tclean = "touch {mark}; cat"\n')
    for number, command in enumerate(("git status --short", "git diff --stat", "git diff")):
        os.utime(sub / "a.txt", (1_700_000_000 + number, 1_700_000_000 + number))
        _bash(command, root, env)
        assert mark.exists(), f"{command} runs the submodule's filter"
        mark.unlink()
        explanation = explain_command(command, roots=[str(root)], cwd=str(root))
        assert explanation.execute is not None, explanation.reason
        os.utime(sub / "a.txt", (1_600_000_000 + number, 1_600_000_000 + number))
        result = _bash(explanation.execute, root, env)
        assert result.returncode == 0, result
        assert not mark.exists(), (command, result)
        assert "'--ignore-submodules=dirty'" in explanation.execute


# -- git-lfs, the user's own filter, runs what the repository names ------------------------------


def test_a_repository_naming_a_git_lfs_extension_gets_no_lfs_filter(tmp_path: Path) -> None:
    """The user's global config starts ``git-lfs`` as the ``lfs`` filter (what
    ``git lfs install`` writes); git-lfs reads ``lfs.extension.*`` from the repository's
    config and runs it. A stand-in ``git-lfs`` that leaves a marker shows git starts it;
    the proved text of a repository that names an extension starts no lfs filter."""
    env = _env(tmp_path)
    mark = tmp_path / "MARK"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    lfs = bin_dir / "git-lfs"
    lfs.write_text(f"#!/bin/sh\ntouch {mark}\ncat\n")
    lfs.chmod(0o755)
    config = tmp_path / "global"
    config.write_text('[filter "lfs"]\n\tclean = git-lfs clean -- %f\n\trequired = true\n')
    env.update(PATH=f"{bin_dir}:{env['PATH']}", GIT_CONFIG_GLOBAL=str(config))
    root = tmp_path / "project"
    _repository(root, env)
    (root / ".gitattributes").write_text("*.txt filter=lfs\n")
    _config(root, '[lfs "extension.pwn"]\n\tclean = sh pwn.sh\n\tpriority = 0\n')
    for number, command in enumerate(("git status --short", "git diff")):
        os.utime(root / "a.txt", (1_700_000_000 + number, 1_700_000_000 + number))
        _bash(command, root, env)
        assert mark.exists(), f"{command} starts the user's lfs filter"
        mark.unlink()
        explanation = explain_command(command, roots=[str(root)], cwd=str(root))
        assert explanation.execute is not None, explanation.reason
        os.utime(root / "a.txt", (1_600_000_000 + number, 1_600_000_000 + number))
        result = _bash(explanation.execute, root, env)
        assert result.returncode == 0, result
        assert not mark.exists(), (command, result)


# -- files of .git that are not regular files ---------------------------------------------------


def _explain_releasing(fifo: Path, command: str, root: Path) -> CommandExplanation:
    """``explain_command`` in a thread; a FIFO it still waits on after a while is released
    (so a regression fails instead of hanging the suite)."""
    found: list[CommandExplanation] = []
    worker = threading.Thread(
        target=lambda: found.append(explain_command(command, roots=[str(root)], cwd=str(root)))
    )
    worker.start()
    worker.join(60)
    if worker.is_alive():
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, b"x")
        os.close(fd)
        worker.join()
        pytest.fail("the policy waited on a FIFO of the repository")
    return found[0]


@pytest.mark.parametrize("name", ["commondir", "config", "HEAD"])
def test_a_fifo_where_git_reads_a_file_is_never_opened(tmp_path: Path, name: str) -> None:
    env = _env(tmp_path)
    root = tmp_path / "project"
    _repository(root, env)
    fifo = root / ".git" / name
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    explanation = _explain_releasing(fifo, "git log -1", root)
    assert explanation.outcome == "ask"
    assert "is not a regular file" in explanation.reason, explanation.reason


def test_a_config_including_a_fifo_asks_without_git_reading_it(tmp_path: Path) -> None:
    """Any git started in the repository reads its configuration, includes followed,
    and would wait on the FIFO: the include is found with each config file read alone."""
    env = _env(tmp_path)
    root = tmp_path / "project"
    _repository(root, env)
    os.mkfifo(root / "cfg.fifo")
    _config(root, "[include]\n\tpath = ../cfg.fifo\n")
    explanation = _explain_releasing(root / "cfg.fifo", "git status --short", root)
    assert explanation.outcome == "ask"
    assert "includes another file (include.path)" in explanation.reason, explanation.reason


def test_the_narrowed_write_set_of_git_commit_never_waits_on_an_included_fifo(
    tmp_path: Path,
) -> None:
    from prism.coding.security._gitwrites import git_directory_writes
    from prism.coding.security._paths import Roots

    env = _env(tmp_path)
    root = tmp_path / "project"
    _repository(root, env)
    argv = ("git", "commit", "-qm", "x")
    roots = Roots((str(root),))
    (root / "plain.cfg").write_text("[include]\n\tpath = deeper.cfg\n")
    os.mkfifo(root / "deeper.cfg")
    _config(root, "[include]\n\tpath = ../plain.cfg\n")
    found: list[object] = []
    worker = threading.Thread(
        target=lambda: found.append(git_directory_writes(argv, [str(root)], roots))
    )
    worker.start()
    worker.join(60)
    if worker.is_alive():
        fd = os.open(root / "deeper.cfg", os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, b"x")
        os.close(fd)
        worker.join()
    assert found == [None]  # the whole root, as for any repository git cannot be asked about


# -- files outside the roots the repository names ------------------------------------------------


@pytest.mark.parametrize(
    ("key", "content", "command"),
    [
        ("blame.ignoreRevsFile", "not-a-revision\n", "git blame -s a.txt"),
        ("mailmap.file", "Outside <o@example.invalid> t <t@example.invalid>\n",
         "git log -1 --use-mailmap --format=%aN"),
        ("core.excludesFile", "*.txt\n", "git status --short"),
        ("core.attributesFile", "*.txt -diff\n", "git diff"),
    ],
)  # fmt: skip
def test_a_file_outside_the_roots_named_by_the_repository_is_not_read(
    tmp_path: Path, key: str, content: str, command: str
) -> None:
    """Real git reads the file the repository's config names (the output changes); the
    proved text prints what git prints without that setting."""
    env = _env(tmp_path)
    root = tmp_path / "project"
    _repository(root, env)
    (root / "a.txt").write_text("one\ntwo\n")
    (root / "new.txt").write_text("new\n")
    expected = _bash(command, root, env)
    outside = tmp_path / "outside"
    outside.write_text(content)
    _git(root, env, "config", key, str(outside))
    assert _bash(command, root, env).stdout + _bash(command, root, env).stderr != (
        expected.stdout + expected.stderr
    ), "git reads the file the setting names"
    explanation = explain_command(command, roots=[str(root)], cwd=str(root))
    assert explanation.execute is not None, explanation.reason
    got = _bash(explanation.execute, root, env)
    assert (got.returncode, got.stdout) == (expected.returncode, expected.stdout), got.stderr


def test_a_repository_that_reads_elsewhere_asks(tmp_path: Path) -> None:
    env = _env(tmp_path)
    root = tmp_path / "project"
    _repository(root, env)
    assert explain_command("git log -1", roots=[str(root)]).outcome == "allow"
    # core.worktree
    _git(root, env, "config", "core.worktree", str(tmp_path))
    explanation = explain_command("git grep -e x", roots=[str(root)])
    assert explanation.outcome == "ask"
    assert "core.worktree" in explanation.reason
    _git(root, env, "config", "--unset", "core.worktree")
    # an alternate object directory outside the roots
    other = tmp_path / "other"
    _repository(other, env)
    alternates = root / ".git" / "objects" / "info" / "alternates"
    alternates.write_text(f"{other}/.git/objects\n")
    explanation = explain_command("git log -1", roots=[str(root)])
    assert explanation.outcome == "ask"
    assert f"{other}/.git/objects" in explanation.reason
    alternates.unlink()
    # a .git file naming a git directory outside the roots
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / ".git").write_text(f"gitdir: {other}/.git\n")
    explanation = explain_command("git log -1", roots=[str(linked)])
    assert explanation.outcome == "ask"
    assert f"{other}/.git" in explanation.reason


@pytest.mark.parametrize(
    "command",
    ["git grep -e token -- ':/'", "git show HEAD:../credentials", "git log -p -1", "git status"],
)
def test_a_root_inside_a_larger_repository_asks_for_git(tmp_path: Path, command: str) -> None:
    """git reaches the whole repository (``:/``, ``rev:../path``): its top is read."""
    env = _env(tmp_path)
    top = tmp_path / "home"
    top.mkdir()
    (top / "credentials").write_text("token\n")
    (top / "app").mkdir()
    (top / "app" / "main.py").write_text("")
    _repository(top, env)
    root = top / "app"
    leaked = _bash(command, root, env)
    assert command == "git status" or "token" in leaked.stdout, leaked
    explanation = explain_command(command, roots=[str(root)], cwd=str(root))
    assert explanation.outcome == "ask"
    assert f"reads {str(top)!r} outside the roots" in explanation.reason
    # the same repository as a root, or readable, is proved
    assert explain_command(command, roots=[str(top)], cwd=str(root)).outcome == "allow"


def test_the_paths_git_names_are_not_asked_of_a_git_that_would_wait_on_a_fifo(
    tmp_path: Path,
) -> None:
    """Before a confined command the sandbox asks git which paths it names; with an
    included FIFO that git would wait (10 s, then the changes are dropped): it is not
    started, and the sandbox says why."""
    env = _env(tmp_path)
    root = tmp_path / "project"
    _repository(root, env)
    os.mkfifo(root / "cfg.fifo")
    _config(root, "[include]\n\tpath = ../cfg.fifo\n")
    raised: list[BaseException] = []

    def ask() -> None:
        try:
            git_entries(str(root))
        except SandboxUnavailableError as exc:
            raised.append(exc)

    worker = threading.Thread(target=ask)
    worker.start()
    worker.join(60)
    if worker.is_alive():  # pragma: no cover - the regression this guards against
        fd = os.open(root / "cfg.fifo", os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, b"x")
        os.close(fd)
        worker.join()
    assert len(raised) == 1
    assert "is not a regular file" in str(raised[0])


def test_a_submodule_naming_a_repository_outside_the_roots_is_never_read(tmp_path: Path) -> None:
    """A submodule's ``.git`` file may name any repository: ``--recurse-submodules``
    (or the repository's ``submodule.recurse``) has ``git grep`` read that repository's
    index and objects, so the option asks and the key is forced off."""
    env = _env(tmp_path)
    private = tmp_path / "private"
    _repository(private, env)
    (private / "creds.txt").write_text("SECRET=outside\n")
    _git(private, env, "add", ".")
    _git(private, env, "commit", "-qm", "s")
    root = tmp_path / "project"
    _repository(root, env)
    commit = _git(private, env, "rev-parse", "HEAD").stdout.strip()
    _git(root, env, "update-index", "--add", "--cacheinfo", f"160000,{commit},sub")
    (root / ".gitmodules").write_text('[submodule "sub"]\n\tpath = sub\n\turl = ./sub\n')
    _git(root, env, "add", ".gitmodules")
    _git(root, env, "commit", "-qm", "sub")
    _git(root, env, "config", "submodule.sub.url", "./sub")
    (root / "sub").mkdir()
    (root / "sub" / ".git").write_text(f"gitdir: {private}/.git\n")
    for command in (
        "git grep --cached --recurse-submodules -e SECRET",
        "git ls-files --recurse-submodules",
    ):
        assert "creds.txt" in _bash(command, root, env).stdout, command  # git reads it
        explanation = explain_command(command, roots=[str(root)], cwd=str(root))
        assert explanation.outcome == "ask", command
        assert "--recurse-submodules" in explanation.reason, explanation.reason
    # `--submodule=log` walks that repository's new commits and prints their subjects
    (private / "creds.txt").write_text("SECRET=rotated\n")
    _git(private, env, "commit", "-qam", "PRIVATE subject")
    for command in ("git diff --submodule=log", "git diff --submodule", "git log -p --submodule"):
        if command.startswith("git diff"):
            assert "PRIVATE subject" in _bash(command, root, env).stdout, command
        explanation = explain_command(command, roots=[str(root)], cwd=str(root))
        assert explanation.outcome == "ask", command
        assert "reads each submodule's repository" in explanation.reason, explanation.reason
    _git(root, env, "config", "submodule.recurse", "true")
    command = "git grep --cached -e SECRET"
    assert "SECRET=rotated" in _bash(command, root, env).stdout  # the key alone recurses
    explanation = explain_command(command, roots=[str(root)], cwd=str(root))
    assert explanation.execute is not None, explanation.reason
    assert "SECRET=" not in _bash(explanation.execute, root, env).stdout
