"""A repository nested in a root that git gives no clean answer about.

What the host's git would read there once the repository works again is
protected (its git directory, what its configuration names under ``path`` and
``hooksPath``, read by git's own rules); the rest of the root stays writable.
A line naming a path that cannot be read leaves the whole root unwritten, as
before. Each accepted shape is held against the real git after the user's repair.
"""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
from typing import TYPE_CHECKING

import pytest
from coding_security_shadows import without_module_shadows

from prism.coding.security import (
    PROTECTED_PATHS,
    BubblewrapSandbox,
    SandboxUnavailableError,
    create_sandbox_shell_operations,
)
from prism.coding.security._implied import implied_protected
from prism.coding.security._protected import ProtectedPaths
from prism.coding.security._unanswered import read_config

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from prism.coding.tools import ShellExit

    RunShell = Callable[..., Awaitable[tuple[ShellExit, str]]]

pytestmark = pytest.mark.git

_ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "HOME": "/nonexistent",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "u",
    "GIT_AUTHOR_EMAIL": "u@example.invalid",
    "GIT_COMMITTER_NAME": "u",
    "GIT_COMMITTER_EMAIL": "u@example.invalid",
}
_MATCHER = ProtectedPaths(PROTECTED_PATHS)

# a nested repository's configuration: a hooks directory of its work tree, an include
# of a file at the root's top (relative to the config's directory), an include of a
# missing file
_CONFIG = (
    "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
    "\thooksPath = tools/hooks ; the team's\n"
    '[include]\n\tpath = "../../shared.cfg"\n'
    '[includeIf "onbranch:main"]\n\tpath = ../../missing.cfg\n'
)
# where git, once the line is repaired, reads a configuration or runs hooks from
_NAMED = ("x/tools/hooks", "shared.cfg", "missing.cfg")


def _git(*args: str, check: bool = True) -> str:
    done = subprocess.run(["git", *args], check=check, env=_ENV, capture_output=True, text=True)
    return done.stdout


def _nested(root: Path, broken: str, at: int) -> Path:
    """Repository x in root, its config holding ``broken`` as line ``at``."""
    _git("init", "-q", "-b", "main", str(root / "x"))
    (root / "shared.cfg").write_text("[user]\n\tname = u\n")
    lines = _CONFIG.splitlines(keepends=True)
    lines.insert(at, broken + "\n")
    config = root / "x" / ".git" / "config"
    config.write_text("".join(lines))
    return config


def _covered(path: str, found: set[str]) -> bool:
    parts = path.split("/")
    return any("/".join(parts[:n]) in found for n in range(1, len(parts) + 1))


def _named_by_git(root: Path) -> set[str]:
    """What the real git names in x, relative to the root: hooks, included files."""
    repo = str(root / "x")
    hooks = _git("-C", repo, "rev-parse", "--path-format=absolute", "--git-path", "hooks")
    out = {os.path.relpath(hooks.strip(), root)}
    listing = _git("-C", repo, "config", "--show-origin", "--get-regexp", r"include.*\.path")
    for line in listing.splitlines():
        origin, _, rest = line.partition("\t")
        value = rest.split(" ", 1)[1]
        holder = os.path.join(repo, origin.removeprefix("file:"))
        out.add(
            os.path.relpath(os.path.normpath(os.path.join(os.path.dirname(holder), value)), root)
        )
    return out


@pytest.mark.parametrize(
    ("broken", "at"),
    [
        ("[core", 0),  # a header never closed, first line
        ("\tnot a key", 3),  # between two keys of a section
        ('\tname = "a\\qb"', 4),  # an escape git does not know
        ("=orphan", 9),  # the last line
        ("[extensions]\n\tfuture = 1\n[core]\n\trepositoryformatversion = 1", 9),  # unknown
    ],
)
def test_a_broken_nested_repository_protects_what_it_would_name_once_repaired(
    root: Path, broken: str, at: int
) -> None:
    """Git refuses x; the answer is x's git directory and what its configuration names,
    and the rest of the root is writable. After the user's repair (the line taken out),
    everything the real git names lies in that answer."""
    config = _nested(root, broken, at)
    assert subprocess.run(["git", "-C", str(root / "x"), "status"], env=_ENV,
                          capture_output=True).returncode != 0  # fmt: skip
    found = set(implied_protected(str(root), _MATCHER))
    assert {"x/.git", *_NAMED} <= found
    assert not _covered("notes.txt", found)
    assert not _covered("x/src/main.py", found)
    config.write_text(_CONFIG)  # the user's repair
    for path in _named_by_git(root):
        assert _covered(path, found), path


@pytest.mark.parametrize(
    "broken",
    [
        '\thooksPath = "tools/other',  # a value never closed names an unknown path
        "\t[include] path = a\\q",  # an escape git refuses in an include
        "[include path = ../../other.cfg",  # a broken header before a path
    ],
)
def test_a_broken_line_that_could_name_a_path_leaves_the_root_unwritten(
    root: Path, broken: str
) -> None:
    _nested(root, broken, 6)
    with pytest.raises(SandboxUnavailableError, match="cannot be known"):
        implied_protected(str(root), _MATCHER)


def test_the_lenient_reading_is_gits_on_valid_files(root: Path) -> None:
    """Differential: every value git reads from a valid file, read the same way."""
    text = (
        "\ufeff[core]hooksPath=a b  # comment\n"
        '[include] path = "  spaced  " ; c\n'
        '[includeIf "gitdir:/x/path]/"]\n\tPATH = q\\"uote\\\\d\n'
        "\tpath = one\\\n two\n"
        '\tpath = "tab\\there"x\n'
        "\tpath\n"
        "# path = commented\n"
        '\tpath = a\tb\rc "d\re"\r\n'
    )
    (root / "c.cfg").write_bytes(text.encode())
    listing = subprocess.run(
        ["git", "config", "--file", str(root / "c.cfg"), "--null", "--list"],
        check=True, env=_ENV, capture_output=True,
    ).stdout.decode()  # fmt: skip
    expected = [
        (key.rsplit(".", 1)[1], value if sep else None)
        for key, sep, value in (item.partition("\n") for item in listing.split("\0") if item)
    ]
    assert read_config(text) == expected
    assert len(expected) == 7


def test_a_gitfile_or_link_to_nowhere_protects_what_it_names(root: Path) -> None:
    """A gitfile and a link naming a directory that does not exist yet: that directory
    is protected (a repository made there would be what the host's git reads)."""
    (root / "y").mkdir()
    (root / "y" / ".git").write_text("gitdir: ../gd/y\n")
    (root / "z").mkdir()
    (root / "z" / ".git").symlink_to("../gd/z")
    found = set(implied_protected(str(root), _MATCHER))
    assert {"gd/y", "gd/z"} <= found
    assert not _covered("gd/other", found)
    _git("init", "-q", "--bare", str(root / "gd" / "y"))  # the user makes it
    assert _git("-C", str(root / "y"), "rev-parse", "--absolute-git-dir").strip() == str(
        root / "gd" / "y"
    )


def test_a_dot_git_that_names_no_repository_blocks_nothing(root: Path) -> None:
    """A FIFO, a socket or a dangling link at a nested .git: the root stays writable;
    the link's target is protected."""
    for name in ("f", "s", "d"):
        (root / name).mkdir()
    os.mkfifo(root / "f" / ".git")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(root / "s" / ".git"))
    (root / "d" / ".git").symlink_to("../nowhere")
    found = set(without_module_shadows(implied_protected(str(root), _MATCHER)))
    assert found == {"nowhere"}


def test_another_users_nested_repository_is_answered(root: Path) -> None:
    """As root over another user's clone (git's safe.directory would refuse it):
    its hooks directory is named."""
    if os.geteuid() != 0:
        pytest.skip("needs root to give the clone to another user")
    _git("init", "-q", str(root / "x"))
    _git("-C", str(root / "x"), "config", "core.hooksPath", "../team-hooks")
    for path in [root / "x", *(root / "x").rglob("*")]:
        os.lchown(path, 1000, 1000)
    assert "team-hooks" in implied_protected(str(root), _MATCHER)


@pytest.mark.bwrap
async def test_a_broken_nested_repository_no_longer_blocks_its_root(
    root: Path, tmp_path: Path, run_shell: RunShell
) -> None:
    """Over real bubblewrap: writes to what x would read once repaired are left out and
    reported, an ordinary file comes back (on the old code nothing came back); after the
    repair the host's git commit in x runs nothing the model wrote."""
    _nested(root, "[core", 0)
    marker = tmp_path / "ran"
    hook = f"#!/bin/sh\ntouch {marker}\n"
    writes = {
        "x/tools/hooks/pre-commit": hook,
        "x/.git/hooks/pre-commit": hook,
        "shared.cfg": f"[core]\n\thooksPath = {root}/evil\n",
        "missing.cfg": f"[core]\n\thooksPath = {root}/evil\n",
    }
    line = "; ".join(
        f"mkdir -p {shlex.quote(os.path.dirname(path))}; printf '%s' {shlex.quote(text)} > {path};"
        f" chmod +x {path}"
        for path, text in writes.items()
    )
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    _, output = await run_shell(ops, f"{line}; echo ok > notes.txt", root)
    assert (root / "notes.txt").read_text() == "ok\n", output
    assert "not applied" in output
    assert not (root / "x" / "tools" / "hooks").exists()
    assert not (root / "missing.cfg").exists()
    assert (root / "shared.cfg").read_text() == "[user]\n\tname = u\n"
    (root / "x" / ".git" / "config").write_text(_CONFIG)
    _git("-C", str(root / "x"), "commit", "-q", "--allow-empty", "-m", "repaired")
    assert not marker.exists()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[a "b\\"c]"] path = v', [("path", "v")]),
        ("[core] ", []),
        ("[unclosed", []),  # skipped: it cannot name a path
        ("x = 1\nnot a line\ny", [("x", "1"), ("y", None)]),
        ("path = a\\", None),  # a backslash at the end of the file
        ('path = "abc', None),  # a quote never closed at the end of the file
        ("[worktree", None),
    ],
)
def test_the_lenient_reading_of_broken_text(
    text: str, expected: list[tuple[str, str | None]] | None
) -> None:
    from prism.coding.security._unanswered import _Unknown

    if expected is None:
        with pytest.raises(_Unknown):
            read_config(text)
    else:
        assert read_config(text) == expected


def _bare(directory: Path, config: str) -> None:
    """A git directory as git makes it, with ``config`` (git refuses it when broken)."""
    for part in ("objects", "refs"):
        (directory / part).mkdir(parents=True)
    (directory / "HEAD").write_text("ref: refs/heads/main\n")
    (directory / "config").write_text(config)


def test_a_broken_repositorys_worktree_links_and_includes(root: Path) -> None:
    """A linked worktree of a broken repository protects both git directories; a
    hooks directory reached through a link and one relative to core.worktree are
    protected as named and where they lead; includes are followed (a loop once)."""
    _bare(root / "x" / ".git", "[core\n[include]\n\tpath = a.cfg\n")
    (root / "x" / ".git" / "a.cfg").write_text("[include]\n\tpath = b.cfg\n")
    (root / "x" / ".git" / "b.cfg").write_text(
        "[include]\n\tpath = a.cfg\n[core]\n\tworktree = ../../wt\n\thooksPath = tools/hooks\n"
    )
    (root / "x" / "tools").symlink_to("../shared-tools")
    (root / "w").mkdir()
    (root / "w" / ".git").write_text(f"gitdir: {root}/x/.git/worktrees/w\n")
    (root / "x" / ".git" / "worktrees" / "w").mkdir(parents=True)
    (root / "x" / ".git" / "worktrees" / "w" / "commondir").write_text("../..\n")
    found = set(implied_protected(str(root), _MATCHER))
    assert {"x/.git", "x/.git/worktrees/w", "x/tools/hooks", "x/tools", "shared-tools"} <= found
    assert {"wt/tools/hooks", "shared-tools/hooks", "w/tools/hooks"} <= found
    assert not _covered("w/src.py", found)


@pytest.mark.parametrize(
    ("dot_git", "why"),
    [
        ("garbage\n", "names no git directory"),
        ("gitdir: " + "a" * 5000, "neither a git directory nor a gitfile"),
        ("include", "more than 10 deep"),
        ("fifo", "not a regular file"),
        ("root", "the root or above"),
    ],
)
def test_what_a_broken_repository_names_is_unknown(root: Path, dot_git: str, why: str) -> None:
    (root / "x").mkdir()
    if dot_git == "include":
        _bare(root / "x" / ".git", "[core\n[include]\n\tpath = i0\n")
        for n in range(12):
            (root / "x" / ".git" / f"i{n}").write_text(f"[include]\n\tpath = i{n + 1}\n")
    elif dot_git == "fifo":
        _bare(root / "x" / ".git", "")
        os.unlink(root / "x" / ".git" / "config")
        os.mkfifo(root / "x" / ".git" / "config")
    elif dot_git == "root":
        _bare(root / "x" / ".git", "[core\n\thooksPath = ../..\n")
    else:
        (root / "x" / ".git").write_text(dot_git)
    with pytest.raises(SandboxUnavailableError, match=why):
        implied_protected(str(root), _MATCHER)


def test_an_unanswered_repository_is_kept_until_its_files_change(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Git is asked again only once a file read for the answer changed."""
    from prism.coding.security import _implied
    from prism.coding.security._gitnames import cached_configured as real

    asked: list[str] = []

    def counting(repository: str, within: str) -> list[str]:
        asked.append(repository)
        return real(repository, within)

    monkeypatch.setattr(_implied, "cached_configured", counting)
    _bare(root / "x" / ".git", "[core\n\thooksPath = one\n")
    assert "x/one" in implied_protected(str(root), _MATCHER)
    assert "x/one" in implied_protected(str(root), _MATCHER)
    assert len(asked) == 1
    (root / "x" / ".git" / "config").write_text("[core]\n\thooksPath = two\n")
    found = implied_protected(str(root), _MATCHER)
    assert "x/two" in found
    assert "x/one" not in found
    assert len(asked) == 2
    assert (str(root / "x"), str(root)) not in _implied._unanswered


@pytest.mark.bwrap
async def test_a_conditional_includes_hooks_directory_is_protected_before_it_applies(
    root: Path, tmp_path: Path, run_shell: RunShell
) -> None:
    """The root's config includes team.cfg only on branch feature (git reads nothing of
    it on main), and team.cfg names hooks-feature as the hooks directory: a command that
    plants hooks-feature/pre-commit and switches to feature gets its hook left out, and
    the host's next commit runs nothing (it ran on the old code)."""
    _git("init", "-q", "-b", "main", str(root))
    _git("-C", str(root), "commit", "-q", "--allow-empty", "-m", "a")
    (root / "team.cfg").write_text("[core]\n\thooksPath = hooks-feature\n")
    _git("-C", str(root), "config", "includeIf.onbranch:feature.path", "../team.cfg")
    assert "hooks-feature" in implied_protected(str(root), _MATCHER)
    marker = tmp_path / "ran"
    hook = f"#!/bin/sh\ntouch {marker}\n"
    line = (
        f"mkdir hooks-feature && printf '%s' {shlex.quote(hook)} > hooks-feature/pre-commit"
        " && chmod +x hooks-feature/pre-commit && git checkout -q -b feature"
    )
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    _, output = await run_shell(ops, line, root, env=_ENV)
    assert "hooks-feature" in output
    assert not (root / "hooks-feature" / "pre-commit").exists()
    assert _git("-C", str(root), "branch", "--show-current").strip() == "feature"
    _git("-C", str(root), "commit", "-q", "--allow-empty", "-m", "b")
    assert not marker.exists()


def test_a_hooks_directory_that_is_the_root_leaves_it_unwritten(root: Path) -> None:
    """core.hooksPath naming the root itself (or, from a nested repository, its
    parent the root): any file at the top could be a hook."""
    _git("init", "-q", str(root / "x"))
    _git("-C", str(root / "x"), "config", "core.hooksPath", "..")
    with pytest.raises(SandboxUnavailableError, match="the root itself"):
        implied_protected(str(root), _MATCHER)
    _git("-C", str(root / "x"), "config", "core.hooksPath", ".")
    assert "x" in implied_protected(str(root), _MATCHER)  # its whole work tree
    _git("init", "-q", str(root))
    _git("-C", str(root), "config", "core.hooksPath", ".")
    with pytest.raises(SandboxUnavailableError, match="the root itself"):
        implied_protected(str(root), _MATCHER)
