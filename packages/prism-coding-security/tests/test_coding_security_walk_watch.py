"""The protected walk answered again unwalked while the kernel tells no change.

Each answer given from the watch is compared with a walk made from nothing
(no listing kept, no watch) of the same tree: after every kind of change that
alters what the walk finds (a protected link made deep down, a directory
replaced by a link, removed, renamed, made unreadable, a ``.git`` made, a
file system mounted), and after changes that alter nothing (files written).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import TYPE_CHECKING

import hypothesis
import pytest
from hypothesis import strategies as st

from prism.coding.security import PROTECTED_PATHS, SandboxUnavailableError, _implied, _watch
from prism.coding.security._protected import ProtectedPaths

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

_MATCHER = ProtectedPaths(PROTECTED_PATHS)
_LISTING = _implied._walk_listing  # (the fixture below counts the calls of the module's)

pytestmark = pytest.mark.skipif(
    not _watch.local_device(os.stat(os.environ.get("TMPDIR", "/tmp")).st_dev),
    reason="the temporary directory's file system does not tell every change",
)


def _fresh(root: Path) -> tuple[list[tuple[str, str]], list[str]]:
    """The walk made from nothing: no listing kept, no watch."""
    gits, links = _LISTING(str(root), _MATCHER, ("fresh", ()), {}, None)
    return sorted(gits), sorted(links)


def _watched(root: Path) -> tuple[list[tuple[str, str]], list[str]]:
    gits, links = _implied._walk(str(root), _MATCHER)
    return sorted(gits), sorted(links)


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The roots walked (listed, not answered from the watch), in order."""
    walked: list[str] = []
    real = _implied._walk_listing

    def counting(root: str, *args: object) -> object:
        walked.append(root)
        return real(root, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(_implied, "_walk_listing", counting)
    return walked


def test_an_unchanged_tree_is_answered_unwalked_and_every_change_is_seen(
    root: Path, walks: list[str]
) -> None:
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "d" / "e").mkdir(parents=True)
    (root / "npmrc.shared").write_text("")
    assert _watched(root) == _fresh(root) == ([], [])
    assert _watched(root) == ([], [])
    assert walks == [str(root)]  # the second answer: no walk
    # files written, replaced, removed: nothing the walk finds changes
    (root / "a" / "b" / "x.py").write_text("1\n")
    (root / "a" / "b" / "y.py").write_text("1\n")
    os.replace(root / "a" / "b" / "y.py", root / "a" / "b" / "x.py")
    (root / "d" / "x.py").touch()
    os.chmod(root / "d" / "x.py", 0o600)
    (root / "d" / "x.py").unlink()
    assert _watched(root) == ([], [])
    assert walks == [str(root)]
    changes: list[Callable[[], object]] = [
        # a protected link deep down, and what it leads to
        lambda: (root / "a" / "b" / "c" / ".npmrc").symlink_to("../../../npmrc.shared"),
        lambda: (root / "a" / "b" / "c" / ".npmrc").unlink(),
        # a directory replaced by a link, and the link removed
        lambda: shutil.rmtree(root / "d" / "e"),
        lambda: (root / "d" / "e").symlink_to("../a"),
        lambda: (root / "d" / "e").unlink(),
        # repositories made below the top: a .git directory, a .git file
        lambda: (root / "d" / ".git").mkdir(),
        lambda: (root / "a" / ".git").write_text("gitdir: ../d/.git\n"),
        lambda: (root / "d" / ".git" / ".mcp.json").symlink_to("../../npmrc.shared"),
        # a directory renamed (the watch moves with it), made, removed
        lambda: os.rename(root / "a" / "b", root / "a" / "q"),
        lambda: (root / "a" / "q" / "c" / ".envrc").symlink_to("../../../npmrc.shared"),
        lambda: (root / "n" / "m").mkdir(parents=True),
        lambda: (root / "n" / "m" / ".bashrc").symlink_to("../../npmrc.shared"),
        lambda: shutil.rmtree(root / "n"),
        # a HEAD file outside a .git (git may take the directory for a repository)
        lambda: (root / "d" / "HEAD").write_text("ref: refs/heads/main\n"),
        lambda: (root / "d" / "HEAD").unlink(),
        # a pyvenv.cfg (the directory becomes a virtual environment), and its removal
        lambda: (root / "a" / "q" / "pyvenv.cfg").write_text("home = /usr/bin\n"),
        lambda: (root / "a" / "q" / "pyvenv.cfg").unlink(),
        # a directory's own attributes: made unreadable, then readable
        lambda: os.chmod(root / "a" / "q", 0),
        lambda: os.chmod(root / "a" / "q", 0o755),
    ]
    answers = [_watched(root)]
    for number, change in enumerate(changes):
        change()
        before = len(walks)
        answers.append(_watched(root))
        assert answers[-1] == _fresh(root), number
        assert len(walks) == before + 1 or answers[-1] == answers[-2], number  # told
    assert len({repr(answer) for answer in answers}) >= 8  # (the changes changed the answer)
    walked = len(walks)
    assert _watched(root) == _fresh(root)
    assert len(walks) == walked  # answered unwalked again after


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["mkdir", "link", "file", "rmtree", "rename", "git"]),
        st.sampled_from(["a", "a/b", "c", "a/b/d", "c/e"]),
        st.sampled_from([".envrc", "x", ".vscode", "b", "e", "HEAD", "pyvenv.cfg"]),
    ),
    max_size=8,
)


@hypothesis.settings(
    max_examples=12,
    deadline=None,
    database=None,
    suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture],
)
@hypothesis.given(ops=_OPS)
def test_the_watched_walk_answers_as_a_fresh_walk(
    tmp_path: Path, ops: list[tuple[str, ...]]
) -> None:
    root = tmp_path / f"r{len(os.listdir(tmp_path))}"
    (root / "a" / "b").mkdir(parents=True)
    (root / "c").mkdir()
    _watched(root)
    for op, where, name in ops:
        path = root / where / name
        try:
            if op == "mkdir":
                path.mkdir(parents=True)
            elif op == "link":
                path.symlink_to("../c")
            elif op == "file":
                path.write_text("")
            elif op == "rmtree":
                shutil.rmtree(root / where)
            elif op == "rename":
                os.rename(root / where, root / name)
            else:
                (root / where / ".git").mkdir()
        except OSError:
            continue
        assert _watched(root) == _fresh(root), (op, where, name)


def test_events_lost_or_watches_failed_leave_no_answer_kept(
    root: Path, walks: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "a").mkdir()
    _watched(root)
    key = (str(root), _MATCHER.entries)
    watch = _implied._watched[key][0]
    assert watch._event_changes(str(root), {}, -1, _watch._IN_Q_OVERFLOW, "")  # lost events
    assert watch.broken
    _watched(root)
    assert len(walks) == 2
    assert _implied._watched[key][0] is not watch  # a new watch: the old one told nothing
    fresh = _implied._watched[key][0]
    assert fresh.watch(str(root / "gone"), "gone", os.lstat(root)) is None  # cannot be watched
    assert not fresh.complete
    real = _watch.DirectoryWatch.watch

    def failing(self: _watch.DirectoryWatch, path: str, rel: str, info: os.stat_result) -> None:
        self.complete = False  # as when the user's watches are all taken
        monkeypatch.setattr(_watch.DirectoryWatch, "watch", real)

    monkeypatch.setattr(_watch.DirectoryWatch, "watch", failing)
    (root / "b").mkdir()
    assert _watched(root) == _fresh(root)  # a walk one directory of which went unwatched
    _watched(root)
    assert len(walks) == 4  # its answer was not kept
    _watched(root)
    assert len(walks) == 4  # complete again after a whole walk


def test_walks_watched_at_once_are_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, walks: list[str]
) -> None:
    monkeypatch.setattr(_implied, "_MAX_WATCHES", 1)
    first, second = tmp_path / "one", tmp_path / "two"
    first.mkdir()
    second.mkdir()
    _watched(first)
    _watched(second)  # the first root's watch closed
    _watched(first)
    assert walks == [str(first), str(second), str(first)]


def test_only_file_systems_that_tell_every_change_are_watched(root: Path, walks: list[str]) -> None:
    assert not _watch.local_device(os.stat("/proc").st_dev)
    assert not _watch.local_device(os.makedev(4095, 4095))  # no such mount
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return
    (root / "a").mkdir()
    (root / "shared").write_text("")
    _watched(root)
    mount = ["mount", "-t", "tmpfs", "-o", "size=1m", "prism-test", str(root / "a")]
    mounted = subprocess.run(mount, capture_output=True, check=False)
    if mounted.returncode != 0:
        return  # no mounting here
    try:
        (root / "a" / ".envrc").symlink_to("../shared")  # no event: another file system
        assert (
            _watched(root) == _fresh(root) == ([("a", "envrc")], ["a/.envrc"])
        )  # told by the mount table
        assert _watched(root) == ([("a", "envrc")], ["a/.envrc"])
        assert len(walks) == 3  # a walk over two file systems is never kept
    finally:
        subprocess.run(["umount", str(root / "a")], check=True)
    assert _watched(root) == _fresh(root) == ([], [])


def test_entries_made_since_the_walk_count_toward_its_bound(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files alone change no answer, but a root grown past the walk's bound is refused
    as a walk would refuse it, not answered from the watch."""
    (root / "a").mkdir()
    for name in "xyz":
        (root / "a" / name).write_text("")
    monkeypatch.setattr(_implied, "MAX_WALKED_ENTRIES", 8)
    found = _implied.implied_protected(str(root), _MATCHER)
    assert found == _implied._top_python_shadows([""])  # (what replaces a standard module)
    for name in "pqrst":
        (root / "a" / name).write_text("")
    with pytest.raises(SandboxUnavailableError, match="more than 8 entries"):
        _implied.implied_protected(str(root), _MATCHER)


def test_a_root_of_too_many_directories_is_walked_each_time(
    root: Path, monkeypatch: pytest.MonkeyPatch, walks: list[str]
) -> None:
    monkeypatch.setattr(_implied, "MAX_WATCHED_DIRECTORIES", 2)
    monkeypatch.setattr(_implied, "_unwatched", set())
    for name in "abc":
        (root / name).mkdir()
    _watched(root)
    assert (str(root), _MATCHER.entries) not in _implied._watched  # its watches released
    (root / "c" / ".envrc").symlink_to("../a")
    assert _watched(root) == _fresh(root) == ([("c", "envrc")], ["c/.envrc"])
    assert len(walks) == 2
    assert (str(root), _MATCHER.entries) not in _implied._watched  # not watched again
