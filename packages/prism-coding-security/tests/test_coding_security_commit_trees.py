"""The copy-back's questions about moved refs, asked in batches: the same answers as one by one.

Real git on real repositories: what :meth:`CommitTrees.listing` gives after
:meth:`CommitTrees.prepare` filled its caches with one ``cat-file --batch-check``
and one ``diff-tree --stdin`` is compared with what it gives asking git one
process per question (as the copy-back did before), for ordinary commits, a
merge, an octopus, a commit whose second parent is missing, a tree, a blob, a
new ref, names that are not plain and paths that look like ``diff-tree``'s own
lines.
"""

from __future__ import annotations

import os
import subprocess
from typing import TYPE_CHECKING

import pytest

from prism.coding.security import _commits
from prism.coding.security._commits import CommitTrees
from prism.coding.security._proved import HOST_GIT_ENVIRONMENT

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.git

_ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "HOME": "/nonexistent",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


def _git(root: Path, *args: str, stdin: bytes | None = None) -> str:
    result = subprocess.run(
        ["git", *args], cwd=root, env=_ENV, input=stdin, capture_output=True, check=True
    )
    return result.stdout.decode().strip()


def _commit(root: Path, files: dict[str, str], *parents: str) -> str:
    """A commit of exactly ``files`` with ``parents``, made without touching the work tree."""
    _git(root, "read-tree", "--empty")
    for path, text in files.items():
        blob = _git(root, "hash-object", "-w", "--stdin", stdin=text.encode())
        _git(root, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}")
    tree = _git(root, "write-tree")
    return _git(root, "commit-tree", tree, *(a for p in parents for a in ("-p", p)), "-m", "c")


def _trees(root: Path, *, git_only: bool = False) -> CommitTrees:
    """The questions of the ``.git`` of ``root``; ``git_only``: every answer asked of git.

    (A variable that changes what git reads makes the copy-back ask git instead of
    reading the object files; GIT_DEFAULT_HASH changes only what ``git init`` makes.)
    """
    env = {**os.environ, **dict(HOST_GIT_ENVIRONMENT), "GIT_DIR": str(root / ".git")}
    return CommitTrees({**env, "GIT_DEFAULT_HASH": "sha1"} if git_only else env)


def test_batched_answers_equal_one_process_per_question(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _git(root, "init", "-q", "-b", "main")
    base = _commit(root, {"f.txt": "1\n"})
    # a path holding what diff-tree --stdin prints between pairs: a pair's own line
    tricky = f"x\n{'a' * 40} {'b' * 40}\n:100644 y"
    child = _commit(root, {"f.txt": "2\n", ".envrc": "echo\n", tricky: "t\n"}, base)
    side = _commit(root, {"f.txt": "1\n", "s.txt": "s\n"}, base)
    merge = _commit(root, {"f.txt": "3\n"}, child, side)
    octopus = _commit(root, {"f.txt": "4\n"}, base, child, side, merge)
    _git(root, "update-ref", "refs/heads/main", base)
    _git(root, "update-ref", "refs/heads/side", side)
    # its second parent is listed in the commit but not in the object store
    missing = "1" * 40
    tree = _git(root, "rev-parse", f"{base}^{{tree}}")
    broken = _git(
        root, "hash-object", "-t", "commit", "-w", "--stdin", "--literally",
        stdin=f"tree {tree}\nparent {base}\nparent {missing}\nauthor t <t@e> 1 +0000\n"
        f"committer t <t@e> 1 +0000\n\nm\n".encode(),
    )  # fmt: skip
    blob = _git(root, "hash-object", "-w", "--stdin", stdin=b"blob\n")
    # its tree is named but absent: resolved without being read, then diff-tree fails
    treeless = _git(
        root, "hash-object", "-t", "commit", "-w", "--stdin", "--literally",
        stdin=f"tree {missing}\nparent {base}\nauthor t <t@e> 1 +0000\n"
        f"committer t <t@e> 1 +0000\n\nm\n".encode(),
    )  # fmt: skip
    moved = [
        ("refs/heads/main", child), ("HEAD", child), ("refs/heads/side", merge),
        ("refs/heads/new", octopus), ("refs/stash", octopus), ("refs/heads/main", broken),
        ("refs/heads/main", tree), ("FETCH_HEAD", blob), ("refs/heads/main", missing),
        ("refs/heads/a..b", child), ("refs/heads/main", f"{child}~1"), ("HEAD", "main"),
        ("refs/heads/main", treeless),
    ]  # fmt: skip
    alone = [_trees(root, git_only=True).listing(r, o) for r, o in moved]
    assert alone[0] is not None and b".envrc" in alone[0]  # noqa: PT018
    assert alone[5] is None and alone[8] is None and alone[-1] is None  # noqa: PT018
    batched = _trees(root)
    batched.prepare(moved)
    asked: list[str] = []
    real = _commits.git_out

    def counted(env: dict[str, str], *args: str, stdin: bytes | None = None) -> bytes | None:
        asked.append(args[0])
        return real(env, *args, stdin=stdin)

    monkeypatch.setattr(_commits, "git_out", counted)
    assert [batched.listing(r, o) for r, o in moved] == alone
    # the plain ones were answered by the batch; the rest asked one by one, as before
    assert asked.count("cat-file") == 0
    assert len(asked) <= 6, asked


def test_without_a_head_the_empty_tree_is_the_old_one(root: Path) -> None:
    _git(root, "init", "-q", "-b", "main")
    first = _commit(root, {".envrc": "echo\n"})
    alone = _trees(root, git_only=True).listing("refs/heads/main", first)
    batched = _trees(root)
    batched.prepare([("refs/heads/main", first)])
    assert batched.listing("refs/heads/main", first) == alone
    assert alone is not None and b"\t.envrc" not in alone and b".envrc" in alone  # noqa: PT018


def test_a_pair_git_prints_otherwise_is_asked_alone(root: Path) -> None:
    """diff-tree --stdin prints each pair as git names it: one it prints otherwise keeps nothing."""
    _git(root, "init", "-q", "-b", "main")
    base = _commit(root, {"f.txt": "1\n"})
    child = _commit(root, {"f.txt": "2\n", ".envrc": "x\n"}, base)
    old, new = (_git(root, "rev-parse", f"{c}^{{tree}}") for c in (base, child))
    trees = _trees(root)
    trees._diff_all([(old.upper(), new)])  # git reads upper case, prints lower case
    assert trees._diffs == {}
    trees._diff_all([(old, new)])
    assert b".envrc" in (trees._diffs[old, new] or b"")


def test_without_git_nothing_can_be_read(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(root))
    trees = _trees(root)
    trees.prepare([("HEAD", "1" * 40)])
    assert trees.listing("HEAD", "1" * 40) is None


def test_a_changed_ref_drops_the_answers_a_reflog_only_those_that_read_it(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy-back forgets git's answers when it changes what a name resolves to."""
    _git(root, "init", "-q", "-b", "main")
    base = _commit(root, {"f.txt": "1\n"})
    child = _commit(root, {"f.txt": "2\n"}, base)
    _git(root, "update-ref", "refs/heads/main", base)
    moved = [("refs/heads/main", child), ("HEAD", "main@{0}")]
    trees = _trees(root)
    trees.prepare(moved)
    first = [trees.listing(r, o) for r, o in moved]
    asked: list[str] = []
    real = _commits.git_out

    def counted(env: dict[str, str], *args: str, stdin: bytes | None = None) -> bytes | None:
        asked.append(args[0])
        return real(env, *args, stdin=stdin)

    monkeypatch.setattr(_commits, "git_out", counted)
    assert [trees.listing(r, o) for r, o in moved] == first
    assert asked == []
    trees.forget(reflogs_only=True)  # main@{0} reads the reflog: asked again, the rest kept
    assert [trees.listing(r, o) for r, o in moved] == first
    assert asked == ["rev-parse", "diff-tree"], asked
    asked.clear()
    # the host's main moves (as the copy-back applying a ref would): its old tree changes
    _git(root, "update-ref", "refs/heads/main", child)
    trees.forget()
    assert trees.listing("refs/heads/main", child) == b""
    assert "rev-parse" in asked


def test_history_lists_every_new_commit_against_each_parent(root: Path) -> None:
    """Every commit a tip newly reaches (none the host's refs reach), each against each
    parent: a .envrc added then removed is in the first one's records, not the tip's."""
    _git(root, "init", "-q", "-b", "main")
    base = _commit(root, {"f.txt": "1\n"})
    _git(root, "update-ref", "refs/heads/main", base)
    added = _commit(root, {"f.txt": "1\n", ".envrc": "echo\n"}, base)
    removed = _commit(root, {"f.txt": "1\n"}, added)
    side = _commit(root, {"g.txt": "2\n"})  # a root commit: against the empty tree
    merge = _commit(root, {"f.txt": "1\n", "g.txt": "2\n"}, removed, side)
    trees = _trees(root)
    found = trees.history([merge], 10)
    assert found is not None
    count, listings = found
    assert count == 4
    by_commit: dict[str, list[bytes]] = {}
    for commit, listing in listings:
        by_commit.setdefault(commit, []).append(listing)
    assert sorted(by_commit) == sorted([added, removed, side, merge])
    assert [b".envrc" in x for x in by_commit[added]] == [True]
    assert [b".envrc" in x for x in by_commit[removed]] == [True]  # its removal
    assert [x.count(b"\0") for x in by_commit[side]] == [2]  # g.txt against nothing
    assert len(by_commit[merge]) == 2  # one per parent
    assert trees.history([base], 10) == (0, [])  # the host's own: nothing new
    assert trees.history([merge], 2) == (3, [])  # a cap of 2 lists 3, asks nothing more
    trees.judged.add(merge)
    assert trees.history([merge], 10) == (0, [])  # judged: not asked again
    orphan = _git(
        root, "hash-object", "-t", "commit", "-w", "--stdin", "--literally",
        stdin=f"tree {_git(root, 'write-tree')}\nparent {'1' * 40}\nauthor t <t@e> 1 +0000\n"
        "committer t <t@e> 1 +0000\n\nx\n".encode(),
    )  # fmt: skip
    assert trees.history([orphan], 10) is None  # a parent git cannot read
    treeless = _git(
        root, "hash-object", "-t", "commit", "-w", "--stdin", "--literally",
        stdin=f"tree {'2' * 40}\nauthor t <t@e> 1 +0000\ncommitter t <t@e> 1 +0000\n\nx\n".encode(),
    )  # fmt: skip
    above = _git(root, "commit-tree", _git(root, "write-tree"), "-p", treeless, "-m", "x")
    assert trees.history([above], 10) is None  # below the tip, a tree git cannot read


def test_the_history_listing_answers_the_new_tips_trees_and_parents(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """prepare() lists the new commits first (rev-list, as history() will): their trees
    and parents are what cat-file and rev-parse would answer, so a commit's copy-back
    asks no rev-parse; history() reuses the listing until the host's refs change."""
    _git(root, "init", "-q", "-b", "main")
    base = _commit(root, {"f.txt": "1\n"})
    child = _commit(root, {"f.txt": "2\n", ".envrc": "echo\n"}, base)
    side = _commit(root, {"s.txt": "s\n"})  # a root commit
    merge = _commit(root, {"f.txt": "3\n"}, child, side)
    octopus = _commit(root, {"f.txt": "4\n"}, base, child, side, merge)
    _git(root, "update-ref", "refs/heads/main", base)
    moved = [
        ("refs/heads/main", child), ("HEAD", child), ("refs/heads/side", merge),
        ("refs/heads/new", octopus), ("refs/heads/root", side), ("refs/heads/old", base),
    ]  # fmt: skip
    alone = [_trees(root, git_only=True).listing(r, o) for r, o in moved]
    history = _trees(root, git_only=True).history([o for _, o in moved], 10)
    asked: list[str] = []
    real = _commits.git_out

    def counted(env: dict[str, str], *args: str, stdin: bytes | None = None) -> bytes | None:
        asked.append(args[0])
        return real(env, *args, stdin=stdin)

    monkeypatch.setattr(_commits, "git_out", counted)
    batched = _trees(root)
    batched.prepare(moved, 10)
    assert [batched.listing(r, o) for r, o in moved] == alone
    for oid in (child, merge, octopus, side):
        assert batched._parents[oid] == _git(root, "rev-parse", f"{oid}^@").split()
        assert batched._trees[f"{oid}^{{tree}}"] == _git(root, "rev-parse", f"{oid}^{{tree}}")
    assert asked.count("rev-parse") == 1, asked  # the host's own base only
    assert batched.history([o for _, o in moved], 10) == history
    assert asked.count("rev-list") == 1, asked
    batched.forget()  # the host's refs changed: listed again
    assert batched.history([o for _, o in moved], 10) == history
    assert asked.count("rev-list") == 2, asked


def test_host_refs_read_in_python_are_what_git_resolves(root: Path) -> None:
    """Whenever the loose file is read here, its answer is git's; every other shape of
    ref is left to git (None)."""
    from prism.coding.security._commits import host_ref

    _git(root, "init", "-q", "-b", "main")
    base = _commit(root, {"f.txt": "1\n"})
    child = _commit(root, {"f.txt": "2\n"}, base)
    git_dir = str(root / ".git")
    _git(root, "update-ref", "refs/heads/main", child)
    _git(root, "update-ref", "refs/heads/old", base)
    _git(root, "tag", "-a", "-m", "t", "v1", base)
    refs = root / ".git" / "refs" / "heads"

    def same(name: str) -> str | None:
        mine = host_ref(git_dir, name)
        if mine is not None:
            assert mine == _git(root, "rev-parse", "--verify", "-q", name), name
        return mine

    assert same("HEAD") == same("refs/heads/main") == child  # symbolic, then loose
    assert same("refs/tags/v1") is not None  # a tag object (no commit git listed)
    (root / ".git" / "HEAD").write_text(f"{base}\n")  # detached
    assert same("HEAD") == base
    # what git reads otherwise, or may: each left to it
    leave = {
        "refs/heads/spaced": f"{child} \n", "refs/heads/upper": f"{child.upper()}\n",
        "refs/heads/bare": child, "refs/heads/chain": "ref: refs/heads/main2\n",
        "refs/heads/main2": "ref: refs/heads/main\n", "refs/heads/crlf": f"{child}\r\n",
    }  # fmt: skip
    for name, text in leave.items():
        (root / ".git" / name).write_text(text)
    (refs / "linked").symlink_to("main")
    _git(root, "pack-refs", "--all")  # every ref packed, the loose files removed
    assert not (refs / "old").exists()
    for name in [*leave, "refs/heads/chain", "refs/heads/linked", "refs/heads/old",
                 "refs/heads/../main", "refs/heads/x.lock", "refs/.hidden", "HEADS"]:  # fmt: skip
        assert same(name) is None or name == "refs/heads/main2", name
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    assert same("HEAD") is None  # packed only
    (refs / "main").write_text(f"{base}\n")  # loose again, beside its packed line
    assert same("HEAD") == base  # (the loose file outranks the packed line)
    for blocker, text in (("config", "[include]\n\tpath = x\n"), ("commondir", "..\n")):
        saved = (root / ".git" / blocker).read_text() if blocker == "config" else None
        (root / ".git" / blocker).write_text(text)
        assert host_ref(git_dir, "HEAD") is None, blocker
        if saved is None:
            (root / ".git" / blocker).unlink()
        else:
            (root / ".git" / blocker).write_text(saved)
    assert same("HEAD") == base


def test_a_commits_old_trees_need_no_cat_file(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ordinary commit on the host's branch: the old trees of HEAD and the branch are
    its parent's, which the listing of new commits gave; git is asked no name. (The
    commit is the host's own, so git lists it; its difference is read from the object
    files, the same bytes git printed.)"""
    _git(root, "init", "-q", "-b", "main")
    base = _commit(root, {"f.txt": "1\n"})
    child = _commit(root, {"f.txt": "2\n", ".envrc": "echo\n"}, base)
    _git(root, "update-ref", "refs/heads/main", base)
    moved = [("HEAD", child), ("refs/heads/main", child)]
    alone = [_trees(root, git_only=True).listing(r, o) for r, o in moved]
    asked: list[str] = []
    real = _commits.git_out

    def counted(env: dict[str, str], *args: str, stdin: bytes | None = None) -> bytes | None:
        asked.append(args[0])
        return real(env, *args, stdin=stdin)

    monkeypatch.setattr(_commits, "git_out", counted)
    batched = CommitTrees(_trees(root).env, ["refs/heads/main"])
    batched.prepare(moved, 10)
    assert [batched.listing(r, o) for r, o in moved] == alone
    assert b".envrc" in (alone[0] or b"")
    assert asked == ["rev-list"], asked
    assert batched.read_here == 1
