"""One new commit read from its object files: the same answers as git's, or git is asked.

Real git makes every object; what :class:`LooseReader` reads is compared byte for
byte with what ``git diff-tree -r -z`` and ``git rev-list --boundary`` print, and
every case it must not read (an object git would read otherwise, a repository
that reads parents or objects differently) is shown to fall back to git.
"""

from __future__ import annotations

import inspect
import os
import random
import subprocess
import sys
import zlib
from typing import TYPE_CHECKING

import pytest

from prism.coding.security import _commits, _looseread
from prism.coding.security._commits import CommitTrees
from prism.coding.security._looseread import EMPTY_TREE, LooseReader, Unread
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
_FORCED = dict(HOST_GIT_ENVIRONMENT)


def _git(root: Path, *args: str, stdin: bytes = b"", env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        ["git", *args], cwd=root, env={**_ENV, **(env or {})}, input=stdin,
        capture_output=True, check=True,
    )  # fmt: skip
    return result.stdout.decode().strip()


def _trees(root: Path, blobs: dict[str, str], specs: list[dict[str, object]]) -> list[str]:
    """Each spec's tree, made by ``git mktree --batch`` level by level (deepest first)."""
    made: dict[int, str] = {}

    def lines(spec: dict[str, object]) -> str:
        out = []
        for name, value in spec.items():
            if isinstance(value, dict):
                out.append(f"040000 tree {made[id(value)]}\t{name}")
            else:
                mode, text = value if isinstance(value, tuple) else ("100644", value)
                out.append(f"{mode} blob {blobs[text]}\t{name}")
        return "\n".join(out) + "\n"

    def depth(spec: dict[str, object]) -> int:
        subtrees = [v for v in spec.values() if isinstance(v, dict)]
        return 1 + max((depth(v) for v in subtrees), default=0)

    def all_of(spec: dict[str, object]) -> list[dict[str, object]]:
        inner = [s for v in spec.values() if isinstance(v, dict) for s in all_of(v)]
        return [*inner, spec]

    every = [s for spec in specs for s in all_of(spec)]
    for level in range(1, max(depth(s) for s in specs) + 1):
        batch = [s for s in every if depth(s) == level]
        text = "".join(lines(s) + "\n" for s in batch)
        names = _git(root, "mktree", "--batch", stdin=text.encode()).split("\n")
        made.update(zip((id(s) for s in batch), names, strict=True))
    return [made[id(s)] for s in specs]


def _random_spec(rng: random.Random, depth: int = 0) -> dict[str, object]:
    # names whose order in a tree differs from their order as plain strings
    names = ["a", "a-b", "a.b", "a0", "ab", ".envrc", "b", "z"]
    spec: dict[str, object] = {}
    for name in rng.sample(names, rng.randint(1, 5)):
        draw = rng.random()
        if draw < 0.25 and depth < 2:
            spec[name] = _random_spec(rng, depth + 1)
        elif draw < 0.35:
            spec[name] = ("100755", rng.choice("12"))
        elif draw < 0.45:
            spec[name] = ("120000", rng.choice("12"))
        else:
            spec[name] = rng.choice("123")
    return spec


def _diff_tree_stdin(root: Path, pairs: list[tuple[str, str]]) -> list[bytes]:
    """What ``git diff-tree -r -z`` prints for each pair, from one ``--stdin`` process."""
    out = subprocess.run(
        ["git", "diff-tree", "--stdin", "-r", "-z", "--no-renames", "--no-ext-diff"],
        cwd=root, env=_ENV, input="".join(f"{a} {b}\n" for a, b in pairs).encode(),
        capture_output=True, check=True,
    ).stdout  # fmt: skip
    found: list[bytes] = []
    start = 0
    for index, (a, b) in enumerate(pairs):
        assert out.startswith(f"{a} {b}".encode(), start)
        start += 82  # the pair's own line
        following = pairs[index + 1] if index + 1 < len(pairs) else None
        end = out.index(f"{following[0]} {following[1]}".encode(), start) if following else None
        found.append(out[start:end])
        start = end or len(out)
    return found


def test_tree_differences_are_the_bytes_git_prints(root: Path) -> None:
    """Adds, removals, edits, 644/755 and file/link/directory swaps under names git orders
    otherwise than plain strings, nested, and the empty tree: as git prints them."""
    _git(root, "init", "-q")
    blobs = {
        text: _git(root, "hash-object", "-w", "--stdin", stdin=text.encode()) for text in "123"
    }
    rng = random.Random(25)
    specs: list[dict[str, object]] = [_random_spec(rng) for _ in range(24)]
    specs += [{"a": "1", "b": "2"}, {"a": {"x": "1"}, "b": "2"}, {"a": ("120000", "1")}]
    trees = _trees(root, blobs, specs)
    pairs = [(a, b) for a in trees[::2] for b in trees[1::2] if a != b]
    pairs += [(trees[-3], trees[-2]), (trees[-2], trees[-3]), (trees[-3], trees[-1])]
    pairs += [(EMPTY_TREE, trees[-2]), (trees[-2], EMPTY_TREE)]
    reader = LooseReader(str(root / ".git"), None)
    statuses: set[bytes] = set()
    for (a, b), expected in zip(pairs, _diff_tree_stdin(root, pairs), strict=True):
        assert reader.diff(a, b) == expected, (a, b)
        statuses.update(meta[-1:] for meta in expected.split(b"\0")[::2] if meta)
    assert statuses == {b"A", b"D", b"M", b"T"}  # every kind was compared


def _layer(root: Path, layer: Path, files: dict[str, str]) -> str:
    """A commit of ``files`` on ``HEAD`` whose new objects are only in ``layer``."""
    env = {"GIT_OBJECT_DIRECTORY": str(layer), "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(
        root / ".git" / "objects"), "GIT_INDEX_FILE": str(layer.parent / "index")}  # fmt: skip
    _git(root, "read-tree", "HEAD", env=env)
    for path, text in files.items():
        blob = _git(root, "hash-object", "-w", "--stdin", stdin=text.encode(), env=env)
        _git(root, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
    tree = _git(root, "write-tree", env=env)
    return _git(root, "commit-tree", tree, "-p", "HEAD", "-m", "new", env=env)


def _host(root: Path, layer: Path | None, *, git_only: bool = False) -> CommitTrees:
    env = {**os.environ, **_FORCED, "GIT_DIR": str(root / ".git")}
    if layer is not None:
        env["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = str(layer)
    return CommitTrees({**env, "GIT_DEFAULT_HASH": "sha1"} if git_only else env)


def _repository(root: Path) -> Path:
    _git(root, "init", "-q", "-b", "main")
    for index in range(2):
        (root / "d").mkdir(exist_ok=True)
        (root / "d" / "f.txt").write_text(f"{index}\n")
        (root / "g.txt").write_text("g\n")
        _git(root, "add", "-A")
        _git(root, "commit", "-qm", f"c{index}")
    layer = root.parent / "layer" / "objects"
    layer.mkdir(parents=True)
    return layer


def test_one_new_commit_is_judged_without_git_as_git_judges_it(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy-back's questions for an agent's commit (one on HEAD adding .envrc) read from
    the object files: the same listing and history git gives, and no git process."""
    layer = _repository(root)
    commit = _layer(root, layer, {".envrc": "echo\n", "d/f.txt": "2\n"})
    moved = [("HEAD", commit), ("refs/heads/main", commit)]
    by_git = _host(root, layer, git_only=True)
    by_git.prepare(moved, 10)
    expected = ([by_git.listing(r, o) for r, o in moved], by_git.history([commit], 10))
    assert by_git.read_here == 0
    assert expected[0][0] is not None and b"\0.envrc\0" in expected[0][0]  # noqa: PT018
    asked: list[str] = []
    real = _commits.git_out

    def counted(env: dict[str, str], *args: str, stdin: bytes | None = None) -> bytes | None:
        asked.append(args[0])
        return real(env, *args, stdin=stdin)

    monkeypatch.setattr(_commits, "git_out", counted)
    here = _host(root, layer)
    here.prepare(moved, 10)
    assert ([here.listing(r, o) for r, o in moved], here.history([commit], 10)) == expected
    assert asked == []
    assert here.read_here >= 2


def _write_loose(store: Path, kind: bytes, content: bytes, name: str | None = None) -> str:
    import hashlib

    data = b"%s %d\0%s" % (kind, len(content), content)
    name = name or hashlib.sha1(data, usedforsecurity=False).hexdigest()
    (store / name[:2]).mkdir(parents=True, exist_ok=True)
    (store / name[:2] / name[2:]).write_bytes(zlib.compress(data))
    return name


def test_what_git_would_read_otherwise_is_asked_of_git(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An object not loose, a link, a file that does not hash to its name, trailing bytes,
    a mode or an order git never writes, a submodule: not read here; git answers."""
    layer = _repository(root)
    objects = root / ".git" / "objects"
    reader = LooseReader(str(root / ".git"), str(layer))
    head = _git(root, "rev-parse", "HEAD")
    tree = _git(root, "rev-parse", "HEAD^{tree}")
    blob = _git(root, "rev-parse", "HEAD:g.txt")
    raw = bytes.fromhex(blob)
    odd = [
        _write_loose(layer, b"tree", b"100664 a\0" + raw),  # a mode git never writes
        _write_loose(layer, b"tree", b"100644 b\0" + raw + b"100644 a\0" + raw),  # order
        _write_loose(layer, b"tree", b"160000 s\0" + raw),  # a submodule
        _write_loose(layer, b"tree", b"100644 a/b\0" + raw),  # a name git never writes
        _write_loose(layer, b"tree", b"100644 a\0" + raw[:10]),  # cut short
        _write_loose(layer, b"tree", b"", name="1" * 40),  # does not hash to its name
        "2" * 40,  # no such object
    ]
    for name in odd:
        with pytest.raises(Unread):
            reader.diff(tree, name)
    with pytest.raises(Unread):
        reader.read(blob, b"tree")  # another type than asked
    with pytest.raises(Unread):
        reader.commit(_write_loose(layer, b"commit", b"author t <t@e> 1 +0000\n"))  # no tree
    garbage = _write_loose(layer, b"blob", b"z")
    (layer / garbage[:2] / garbage[2:]).write_bytes(b"not zlib")
    with pytest.raises(Unread):
        reader.read(garbage, b"blob")
    # past the bound: a file larger than it, or one inflating past it (the bound lowered)
    monkeypatch.setattr(_looseread, "OBJECT_LIMIT", 1000)
    for content in (os.urandom(2000), b"0" * 5000):
        with pytest.raises(Unread):
            reader.read(_write_loose(layer, b"blob", content), b"blob")
    monkeypatch.undo()
    # nested deeper than Python recurses, or more objects than one reader reads
    deep = _write_loose(layer, b"tree", b"100644 a\0" + raw)
    for _ in range(40):
        deep = _write_loose(layer, b"tree", b"40000 d\0" + bytes.fromhex(deep))
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack()) + 40)  # (40 levels take 80 frames)
    try:
        with pytest.raises(Unread):
            reader.diff(tree, deep)
    finally:
        sys.setrecursionlimit(limit)
    assert b"\0" + b"d/" * 40 + b"a\0" in reader.diff(tree, deep)  # (within the limit)
    assert LooseReader(str(root / ".git"), None).diff(EMPTY_TREE, tree)  # (two trees)
    monkeypatch.setattr(_looseread, "READ_LIMIT", 1)
    with pytest.raises(Unread):
        LooseReader(str(root / ".git"), None).diff(EMPTY_TREE, tree)
    monkeypatch.undo()
    trailing = _write_loose(layer, b"blob", b"x")
    path = layer / trailing[:2] / trailing[2:]
    path.write_bytes(path.read_bytes() + b"junk")
    with pytest.raises(Unread):
        reader.read(trailing, b"blob")
    linked = _write_loose(layer, b"blob", b"y")
    target = layer / linked[:2] / linked[2:]
    os.rename(target, root.parent / "elsewhere")
    target.symlink_to(root.parent / "elsewhere")
    with pytest.raises(Unread):
        reader.read(linked, b"blob")
    # a new commit whose parent is not the host's HEAD, or two tips, or the host's own
    commit = _layer(root, layer, {"n.txt": "n\n"})
    assert reader.new_commit((commit,), head)[1] == {commit: [head]}
    for tips, named in (((commit,), blob), ((commit, commit), head), ((head,), head)):
        with pytest.raises(Unread):
            reader.new_commit(tips, named)
    # the parent packed (as after git gc): git lists the commit, as before
    _git(root, "gc", "-q")
    assert not (objects / head[:2] / head[2:]).exists()
    with pytest.raises(Unread):
        reader.new_commit((commit,), head)
    trees = _host(root, layer)
    assert trees.history([commit], 10) == _host(root, layer, git_only=True).history([commit], 10)
    assert trees.read_here == 0


def test_a_repository_that_reads_parents_or_objects_otherwise_is_asked_of_git(root: Path) -> None:
    """Replace refs, grafts, a shallow list, a common directory, an included or missing
    configuration, an unreadable packed-refs, a variable or forced value changed: git."""
    layer = _repository(root)
    git_dir = root / ".git"
    base = {**os.environ, **_FORCED, "GIT_DIR": str(git_dir)}
    assert LooseReader.for_env(base, _FORCED) is not None
    for name in ("shallow", "info/grafts", "refs/replace/x", "commondir"):
        (git_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (git_dir / name).write_text("x\n")
        assert LooseReader.for_env(base, _FORCED) is None, name
        (git_dir / name).unlink()
    (git_dir / "packed-refs").write_text(f"{'1' * 40} refs/replace/{'2' * 40}\n")
    assert LooseReader.for_env(base, _FORCED) is None
    (git_dir / "packed-refs").unlink()
    (git_dir / "packed-refs").symlink_to(root.parent / "elsewhere")
    assert LooseReader.for_env(base, _FORCED) is None
    (git_dir / "packed-refs").unlink()
    config = (git_dir / "config").read_text()
    (git_dir / "config").write_text(config + "[include]\n\tpath = other\n")
    assert LooseReader.for_env(base, _FORCED) is None
    (git_dir / "config").unlink()
    assert LooseReader.for_env(base, _FORCED) is None
    (git_dir / "config").write_text(config)
    for changed in (
        {"GIT_REPLACE_REF_BASE": "refs/heads/"},
        {"GIT_CONFIG_VALUE_0": "true"},  # a forced value overridden
        {"GIT_ALTERNATE_OBJECT_DIRECTORIES": f"{layer}:x"},
    ):
        assert LooseReader.for_env({**base, **changed}, _FORCED) is None, changed
    (git_dir / "refs" / "replace").rmdir()  # (an empty one still says replace refs may be)
    assert LooseReader.for_env(base, _FORCED) is not None


def test_a_commit_header_is_read_as_git_reads_it_or_asked_of_git(root: Path) -> None:
    """Parents and trees named in upper or mixed case (git reads them), a parent line after
    another header, a last parent line with nothing after it: the tree and parents git
    lists, or git is asked; never fewer parents than git reads."""
    layer = _repository(root)
    head = _git(root, "rev-parse", "HEAD")
    tree = _git(root, "rev-parse", "HEAD^{tree}")
    other = _git(root, "rev-parse", "HEAD~1")
    who = b"author t <t@e> 1 +0000\ncommitter t <t@e> 1 +0000\n"
    up, mixed = head.upper().encode(), (head[:20] + head[20:].upper()).encode()
    heads = [
        b"tree %s\nparent %s\nparent %s\n" % (tree.encode(), head.encode(), other.upper().encode()),
        b"tree %s\nparent %s\nparent %s\nparent %s\n" % (tree.encode(), head.encode(), up, mixed),
        b"tree %s\nparent %s\n" % (tree.upper().encode(), up),
        b"tree %s\nparent %s\nx y\nparent %s\n" % (tree.encode(), head.encode(), other.encode()),
        b"tree %s\nparent %s\n" % (tree.encode(), head.encode()),
    ]
    commits = [_write_loose(layer, b"commit", h + who + b"\nm\n") for h in heads]
    commits.append(_write_loose(layer, b"commit", b"tree %s\nparent %s\n" % (tree.encode(), up)))
    reader = LooseReader(str(root / ".git"), str(layer))
    env = {"GIT_ALTERNATE_OBJECT_DIRECTORIES": str(layer)}
    read = 0
    for commit in commits:
        listed = subprocess.run(
            ["git", "rev-list", "--no-walk", "--format=%T %P", commit], cwd=root,
            env={**_ENV, **env}, capture_output=True, check=False,
        )  # fmt: skip
        try:
            here = reader.commit(commit)
        except Unread:
            continue
        words = listed.stdout.decode().split("\n")[1].split()
        assert listed.returncode == 0
        assert here == (words[0], words[1:]), commit
        read += 1
    assert read == 4  # the case-insensitive ones are read here, not asked
    trees, parents = reader.new_commit((commits[1],), head)
    assert parents == {commits[1]: [head, head, head]}
    assert trees == {commits[1]: tree, head: tree}


def test_a_tree_laid_out_as_a_recent_one_parses_as_it_does_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Read by its differing entries, a large tree gives what a whole parse gives, or Unread.

    A tree of 300 entries (files and directories, names that sort differently with
    the '/' git reads after a directory's name) is parsed whole; then hundreds of
    copies with a few bytes changed anywhere (object names, names, modes, the NUL
    between) are parsed as it was just parsed, each compared with a whole parse
    (no recent tree) of the same bytes: the same entries, or Unread for both.
    """
    rng = random.Random(7)
    names = {f"n{i}".encode() for i in range(150)} | {f"n{i}.x".encode() for i in range(150)}
    entries = [(b"40000" if rng.random() < 0.3 else b"100644", name, rng.randbytes(20))
               for name in names]  # fmt: skip
    entries.sort(key=lambda e: e[1] + (b"/" if e[0] == b"40000" else b"\0"))
    tree = b"".join(b"%s %s\0%s" % entry for entry in entries)
    assert len(tree) >= _looseread._REPARSED_SIZE

    def whole(content: bytes) -> list[tuple[bytes, bytes, bytes]] | None:
        monkeypatch.setattr(_looseread, "_RECENT_TREES", ())
        try:
            return _looseread._parsed_tree(content)
        except Unread:
            return None

    assert whole(tree) == entries
    alphabet = b"0123456789abcdefnx./\0 " + bytes(range(256))
    read_alone = 0
    for _ in range(400):
        changed = bytearray(tree)
        for _ in range(rng.randint(1, 3)):
            changed[rng.randrange(len(tree))] = rng.choice(alphabet)
        content = bytes(changed)
        expected = whole(content)
        monkeypatch.setattr(_looseread, "_RECENT_TREES", ())
        _looseread._parsed_tree(tree)  # the recent tree it is laid out as
        try:
            read_alone += _looseread._reparsed_tree(content) is not None
        except Unread:
            read_alone += 1  # (refused by its differing entries)
        try:
            got: list[tuple[bytes, bytes, bytes]] | None = _looseread._parsed_tree(content)
        except Unread:
            got = None
        assert got == expected, content
    assert read_alone > 200  # most were read by their differing entries
