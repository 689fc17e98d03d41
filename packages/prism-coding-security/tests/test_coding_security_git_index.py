"""The index reader that drops an index's caches, against real git's own reading of the result."""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
from typing import TYPE_CHECKING

import pytest

from prism.coding.security import _index
from prism.coding.security._index import (
    extension_signatures,
    extensionless,
    restamped_entries,
    strip_optional_extensions,
    with_proved_cache_tree,
    with_stat_unknown,
)

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.git]

_ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "HOME": "/nonexistent",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def _git(root: Path, *args: str) -> bytes:
    return subprocess.run(
        ["git", *args], cwd=root, env=_ENV, capture_output=True, check=True
    ).stdout


@pytest.mark.parametrize(
    ("object_format", "version", "shape"),
    [
        ("sha1", "2", "plain"),
        ("sha1", "3", "skip-worktree"),
        ("sha1", "4", "long paths"),
        ("sha1", "2", "untracked cache"),
        ("sha256", "4", "split"),
        ("sha256", "3", "long paths"),
    ],
)
def test_the_index_git_reads_is_the_same_without_its_caches(
    tmp_path: Path, object_format: str, version: str, shape: str
) -> None:
    root = tmp_path
    _git(root, "init", "-q", f"--object-format={object_format}")
    (root / "src" / "deep").mkdir(parents=True)
    (root / "src" / "deep" / "a").write_text("a")
    (root / "b").write_text("b")
    _git(root, "add", "-A")
    if shape == "long paths":
        # past 4095 bytes: the path's length in the entry's flags is then 0xFFF
        blob = _git(root, "hash-object", "-w", "b").strip().decode()
        deep = "/".join(["d" * 250] * 17)
        for name in ("y", "z"):
            _git(root, "update-index", "--add", "--cacheinfo", f"100644,{blob},{deep}/{name}")
    _git(root, "commit", "-qm", "x")
    _git(root, "update-index", f"--index-version={version}")
    if shape == "split":
        _git(root, "update-index", "--split-index")
    if shape == "untracked cache":
        _git(root, "config", "core.untrackedCache", "true")
        _git(root, "update-index", "--untracked-cache")
        (root / "u").write_text("u")
        _git(root, "status", "--porcelain")
    if shape == "skip-worktree":
        _git(root, "update-index", "--skip-worktree", "b")
    index = root / ".git" / "index"
    data = index.read_bytes()
    assert b"TREE" in (extension_signatures(data) or [])
    listed = _git(root, "ls-files", "--stage", "-v", "--debug")
    stripped = strip_optional_extensions(data)
    assert stripped is not None
    index.write_bytes(stripped)
    assert extension_signatures(stripped) == ([b"link"] if shape == "split" else [])
    assert _git(root, "ls-files", "--stage", "-v", "--debug") == listed
    assert _git(root, "write-tree") == _git(root, "rev-parse", "HEAD^{tree}")
    assert strip_optional_extensions(stripped) is stripped
    if shape == "split":
        (shared,) = root.joinpath(".git").glob("sharedindex.*")
        assert extensionless(shared.read_bytes())
        assert not extensionless(stripped)


def _index_of(tmp_path: Path) -> bytes:
    _git(tmp_path, "init", "-q")
    (tmp_path / "a").write_text("a")
    _git(tmp_path, "add", "a")
    _git(tmp_path, "commit", "-qm", "x")
    return (tmp_path / ".git" / "index").read_bytes()


def _sealed(body: bytes) -> bytes:
    return body + hashlib.sha1(body).digest()


def test_what_is_not_an_index_git_reads_is_refused(tmp_path: Path) -> None:
    data = _index_of(tmp_path)
    body = data[:-20]
    assert strip_optional_extensions(data) is not None
    assert strip_optional_extensions(b"") is None
    assert strip_optional_extensions(data[:-1]) is None  # checksum
    assert strip_optional_extensions(body + bytes(19) + b"\1") is None
    assert strip_optional_extensions(_sealed(b"DIRX" + body[4:])) is None  # signature
    assert strip_optional_extensions(_sealed(body[:7] + b"\5" + body[8:])) is None  # version
    assert strip_optional_extensions(_sealed(body[:11] + b"\x09" + body[12:])) is None  # count
    # an extension that runs past the end, and bytes after the last one
    assert strip_optional_extensions(_sealed(body + b"TREE\0\0\1\0")) is None
    assert strip_optional_extensions(_sealed(body + b"x")) is None
    # a path length in the flags past the end of the file
    flags = 12 + 40 + 20
    assert (
        strip_optional_extensions(_sealed(body[:flags] + b"\x0f\xfe" + body[flags + 2 :])) is None
    )
    # index.skipHash: no checksum (all zeros) is what git accepts too
    assert strip_optional_extensions(body + bytes(20)) is not None


def test_bytes_git_would_take_for_an_end_of_entries_extension_are_refused(tmp_path: Path) -> None:
    """git finds an EOIE by position (the 32 bytes before the trailer), not by walking.

    Here the last entry's group id and size spell one: with index threads on, git would
    load the entries from an offset table that no walk of the file sees.
    """
    from prism.coding.security._indexfile import read_index

    data = strip_optional_extensions(_index_of(tmp_path))
    assert data is not None
    body = bytearray(data[:-20])
    assert len(body) == 12 + 64  # one entry, named "a", and no extension
    body[12 + 32 : 12 + 40] = b"EOIE\0\0\0\x18"  # its gid and size
    crafted = _sealed(bytes(body))
    assert extension_signatures(crafted) == []  # a walk sees an index without extensions
    assert strip_optional_extensions(crafted) is None
    (tmp_path / ".git" / "index").write_bytes(crafted)
    git_dir = str(tmp_path / ".git")
    assert read_index(str(tmp_path / ".git" / "index"), git_dir) is None
    (tmp_path / ".git" / "index").write_bytes(data)
    assert read_index(str(tmp_path / ".git" / "index"), git_dir) is not None


def _cache_tree(data: bytes) -> dict[bytes, tuple[int, int, str | None]]:
    """Each cache-tree node of ``data`` by path: entry count, subtrees, object (None: invalid)."""
    from prism.coding.security._index import _layout

    layout = _layout(data)
    assert layout is not None
    (start, end) = next((a + 8, b) for s, a, b in layout[2] if s == b"TREE")
    payload = data[start:end]
    out: dict[bytes, tuple[int, int, str | None]] = {}

    def node(at: int, parent: bytes | None) -> int:
        nul = payload.index(b"\0", at)
        name = payload[at:nul]
        line = payload.index(b"\n", nul)
        count, subtrees = (int(n) for n in payload[nul + 1 : line].split(b" "))
        at, oid = line + 1, None
        if count >= 0:
            at, oid = at + 20, payload[at : at + 20].hex()
        path = name if not parent else parent + b"/" + name
        out[path] = (count, subtrees, oid)
        for _ in range(subtrees):
            at = node(at, path)
        return at

    assert node(0, None) == len(payload)
    return out


def _listing(root: Path, index: Path) -> dict[bytes, tuple[bytes, bytes, bytes]]:
    from prism.coding.security._overlay import index_entries

    entries = index_entries(str(root / ".git"), str(root), str(index))
    assert entries is not None
    return entries


# directories a command's index leaves unchanged, changed by its content, its mode, a
# removal and a new directory; names with odd bytes
_TREE_FILES = ("a/b/c/f", "a/b/g", "a/k/m", "d/x", "d/z", "e/y", "q\nr/s t", "\xe9/u", "top")


@pytest.mark.parametrize("version", ["2", "4"])
def test_kept_cache_tree_nodes_are_the_trees_git_writes(tmp_path: Path, version: str) -> None:
    """The host's nodes stay where no entry below changed; git's own invalidation agrees.

    The command's changes are made by git itself, which invalidates the nodes on
    the changed paths in its own index: the kept cache-tree is that one, node for
    node, each valid node names the tree of its directory in what the index
    writes, and the host's next commit records exactly the staged entries.
    """
    root = tmp_path
    _git(root, "init", "-q")
    for name in _TREE_FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(name)
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "x")
    _git(root, "update-index", f"--index-version={version}")
    index = root / ".git" / "index"
    host = index.read_bytes()
    before = _listing(root, index)
    (root / "a/b/g").write_text("changed")
    (root / "n").mkdir()
    (root / "n/new").write_text("new")
    _git(root, "add", "a/b/g", "n/new")
    _git(root, "rm", "-q", "d/x")
    _git(root, "update-index", "--chmod=+x", "e/y")
    theirs = index.read_bytes()
    stripped = strip_optional_extensions(theirs)
    assert stripped is not None
    index.write_bytes(stripped)
    after = _listing(root, index)
    truth = _git(root, "write-tree").strip().decode()  # without any cache-tree
    index.write_bytes(stripped)
    kept = with_proved_cache_tree(stripped, host, before, after)
    assert kept is not None
    nodes = _cache_tree(kept)
    assert nodes == _cache_tree(theirs)
    valid = {path for path, (count, _, _) in nodes.items() if count >= 0}
    assert valid == {b"a/b/c", b"a/k", b"q\nr", "\xe9".encode()}
    trees = {}
    for record in _git(root, "ls-tree", "-r", "-t", "-z", truth).split(b"\0")[:-1]:
        meta, _, path = record.partition(b"\t")
        trees[path] = meta.split(b" ")[2].decode()
    for path in valid:
        count, _, oid = nodes[path]
        assert oid == trees[path]
        assert count == sum(key.startswith(path + b"/") for key in after)
    index.write_bytes(kept)
    assert _listing(root, index) == after
    assert _git(root, "write-tree").strip().decode() == truth
    _git(root, "commit", "-qm", "y")
    committed = _git(root, "ls-tree", "-r", "-z", "HEAD").split(b"\0")[:-1]
    staged = _git(root, "ls-files", "-s", "-z").split(b"\0")[:-1]
    assert [r.replace(b" blob ", b" ").replace(b"\t", b" 0\t") for r in committed] == staged


def _tree_index(tmp_path: Path) -> tuple[bytes, dict[bytes, tuple[bytes, bytes, bytes]]]:
    """An index with a full cache-tree (a/, a/b/, c/) and its listing."""
    _git(tmp_path, "init", "-q")
    for name in ("a/b/f", "a/g", "c/h", "c/i"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "x")
    index = tmp_path / ".git" / "index"
    return index.read_bytes(), _listing(tmp_path, index)


def _with_tree(data: bytes, tree: bytes) -> bytes:
    """``data`` (an index) with its extensions replaced by the cache-tree ``tree``."""
    body = strip_optional_extensions(data)
    assert body is not None
    return _sealed(body[:-20] + b"TREE" + len(tree).to_bytes(4, "big") + tree)


def test_the_commands_cache_tree_is_never_read(tmp_path: Path) -> None:
    """Whatever cache-tree the command left, the host's is what comes back (here all of it)."""
    host, listing = _tree_index(tmp_path)
    tree = host[host.index(b"TREE\0") + 8 : -20]
    forged = [
        tree.replace(tree[-20:], bytes(20)),  # c/'s object
        tree.replace(b"c\x002 0\n", b"c\x003 0\n"),  # its entry count
        tree.replace(b"\x004 2\n", b"\x004 3\n", 1) + b"z\x001 0\n" + bytes(20),  # a node more
        tree[:-3],  # truncated
        tree + b"\n",  # overlong
        tree.replace(b"c\x00", b"c/../.git\x00"),  # an odd name
        b"",
    ]
    for mine in forged:
        stripped = strip_optional_extensions(_with_tree(host, mine))
        assert stripped is not None
        kept = with_proved_cache_tree(stripped, host, listing, listing)
        assert kept is not None
        assert kept == host  # nothing changed: every node of the host's, as it was


def test_a_host_cache_tree_not_read_as_git_writes_it_keeps_none(tmp_path: Path) -> None:
    """Each node must read exactly as git writes it and count the entries below it."""
    host, listing = _tree_index(tmp_path)
    tree = host[host.index(b"TREE\0") + 8 : -20]
    stripped = strip_optional_extensions(host)
    assert stripped is not None
    assert with_proved_cache_tree(stripped, host, listing, listing) == host
    c = tree.index(b"c\x00")
    top, a, b = tree[:25], tree[25 : tree.index(b"b\x00")], tree[tree.index(b"b\x00") : c]
    assert top + a + b + tree[c:] == tree
    assert a.startswith(b"a\x002 1\n")
    bad = [
        top + tree[c:] + a + b,  # subtrees out of git's order
        tree.replace(b"\x004 2\n", b"\x004 3\n", 1) + tree[c:],  # a name twice
        top + tree[c:] + b"a/" + b,  # a name holding '/' (counts right)
        tree.replace(b"c\x002 0\n", b"c\x003 0\n"),  # an entry count
        tree.replace(b"c\x002 0\n", b"c\x00+2 0\n"),  # a count git's strtol would take too
        tree.replace(b"c\x002 0\n", b"c\x0002 0\n"),
        tree.replace(b"c\x002 0\n", b"c\x00-2 0\n"),
        tree.replace(b"\x004 2\n", b"\x004 3\n", 1) + b"z\x000 0\n" + bytes(20),  # no entries
        tree.replace(b"\x004 2\n", b"\x004 3\n", 1) + b"z\x001 0\n" + bytes(20),  # none below
        tree[:-3],
        tree + b"\0",
        tree.replace(b"c\x00", b"c/d\x00"),
        tree.replace(b"c\x00", b"\x00"),
        tree[:c] + tree[c:].replace(b"c\x00", b"a\x00"),  # a name twice (out of git's order)
        tree.replace(b"\x00", b"x\x00", 1),  # a named top
        tree + tree,  # a second top
    ]
    for forged in bad:
        assert forged != tree
        assert with_proved_cache_tree(stripped, _with_tree(host, forged), listing, listing) is None
    # nodes git left invalid stay so, the valid ones below them are kept
    partly = b"\x00-1 2\n" + a + b + b"c\x00-1 0\n"
    assert with_proved_cache_tree(stripped, _with_tree(host, partly), listing, listing) == (
        _with_tree(host, partly)
    )
    # a host index holding an entry twice, or intent-to-add entries, keeps none either
    doubled = bytearray(stripped[:-20])
    doubled[11] += 1
    first = doubled[12 : 12 + 72]  # "a/b/f": 62 bytes, its name and two NULs
    assert first[62:67] == b"a/b/f"
    twice = _sealed(bytes(doubled[:12] + first + doubled[12:]))
    assert strip_optional_extensions(twice) == twice
    assert with_proved_cache_tree(stripped, _with_tree(twice, tree), listing, listing) is None
    assert with_proved_cache_tree(twice, host, listing, listing) is None
    # two entries of c/ swapped: each directory still counts its own
    swapped = _sealed(stripped[:156] + stripped[228:300] + stripped[156:228] + stripped[300:-20])
    # (the copy-back refuses such an index before: the listing as a walk would give it)
    out_of_order = {key: listing[key] for key in (b"a/b/f", b"a/g", b"c/i", b"c/h")}
    assert with_proved_cache_tree(swapped, host, listing, out_of_order) is None
    (tmp_path / ".git" / "index").write_bytes(host)
    (tmp_path / "new").write_text("n")
    _git(tmp_path, "add", "-N", "new")
    intent = strip_optional_extensions((tmp_path / ".git" / "index").read_bytes())
    assert intent is not None
    after = _listing(tmp_path, tmp_path / ".git" / "index")
    assert with_proved_cache_tree(intent, host, listing, after) is None
    assert with_proved_cache_tree(stripped, _with_tree(intent, tree), after, listing) is None


def test_an_index_walked_after_one_laid_out_alike_is_walked_as_a_whole_walk_finds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After an index is walked, one of the same layout is walked only where its bytes
    differ: an entry newly marked intent-to-add, a name's length changed, bytes changed
    anywhere; each layout is the one a walk of the whole file finds."""
    import random

    from prism.coding.security import _index

    _git(tmp_path, "init", "-q")
    for name in ("a", "b", "c", "d/e"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(name)
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "update-index", "--skip-worktree", "b")  # version 3: b's extended flags
    data = strip_optional_extensions((tmp_path / ".git" / "index").read_bytes())
    assert data is not None
    flags = data.index(b"b\0") - 2  # b's extended flags word
    assert data[flags] == 0x40  # skip-worktree
    body = data[:-20]
    variants = [
        _sealed(body[:flags] + b"\x60" + body[flags + 1 :]),  # intent-to-add too
        _sealed(body[:flags] + b"\x20" + body[flags + 1 :]),  # intent-to-add only
        _sealed(body[: flags - 1] + b"\x08" + body[flags:]),  # b's name length 8
        _sealed(body[: flags - 1] + b"\x0f" + body[flags:]),
    ]
    rng = random.Random(7)
    for _ in range(300):
        mutated = bytearray(body)
        for _ in range(rng.randint(1, 3)):
            mutated[rng.randrange(12, len(body))] = rng.randrange(256)
        variants.append(_sealed(bytes(mutated)))
    walked = 0
    for variant in variants:
        monkeypatch.setattr(_index, "_KNOWN", ())
        monkeypatch.setattr(_index, "_WALKED", ())
        whole = _index._layout(variant)
        monkeypatch.setattr(_index, "_KNOWN", ())
        monkeypatch.setattr(_index, "_WALKED", ())
        assert _index._layout(data) is not None  # walked: the variant's is walked after it
        again = _index._walk(variant)
        assert again == whole
        walked += again is not None
    assert _index._walk(variants[0]) == (20, len(body), [], True)
    assert walked > 100  # (most variants are indexes a walk reads)


def _stat_blocks(root: Path) -> dict[str, list[str]]:
    """``git ls-files --debug --stage``: per 'path stage', its line and its stat lines."""
    lines = _git(root, "ls-files", "--debug", "--stage").decode().splitlines()
    blocks: dict[str, list[str]] = {}
    last = ""
    for line in lines:
        if line.startswith(" "):
            blocks[last].append(line.split("flags")[0].strip())
        else:
            meta, path = line.split("\t")
            last = f"{path} {meta.split()[2]}"
            blocks[last] = [meta]
    return blocks


@pytest.mark.parametrize(
    ("version", "object_format"), [("2", "sha1"), ("3", "sha1"), ("4", "sha256")]
)
def test_the_stat_data_of_chosen_entries_is_zeroed_as_git_reads_it(
    tmp_path: Path, version: str, object_format: str
) -> None:
    """Only the entries named (a conflicted one by its stage, one past a name longer than
    the flags hold) lose their stat data, their mode kept; git reads every other entry's
    stat data as it was."""
    root = tmp_path
    _git(root, "init", "-q", f"--object-format={object_format}")
    long = "/".join(["x" * 200] * 21)  # (a name past the flags' 12 bits)
    (root / "dir").mkdir()
    for name in ("a", "dir/b", "dir/c", "zz"):
        (root / name).write_text(name)
    (root / "dir" / "c").chmod(0o755)
    _git(root, "add", "-A")
    if version == "3":
        _git(root, "update-index", "--skip-worktree", "a")
    blob = _git(root, "rev-parse", ":a").decode().strip()
    subprocess.run(
        ["git", "update-index", "--add", "--index-info"], cwd=root, env=_ENV, check=True,
        input=f"100644 {blob} 0\t{long}\n100644 {blob} 2\tz\n100644 {blob} 3\tz\n".encode(),
    )  # fmt: skip
    _git(root, "update-index", f"--index-version={version}")
    data = (root / ".git" / "index").read_bytes()
    before = _stat_blocks(root)
    assert with_stat_unknown(data, set()) is data
    assert with_stat_unknown(data, {b"missing"}) is None
    # held: the keys the index holds (none: the same bytes)
    assert with_stat_unknown(data, {b"missing"}, held=True) is data
    only = with_stat_unknown(data, {b"missing", b"dir/c"}, held=True)
    assert only is not None
    (root / ".git" / "index").write_bytes(only)
    assert {k for k, v in _stat_blocks(root).items() if before[k] != v} == {"dir/c 0"}
    # (the long name and the conflicted entry hold no stat data: found by their keys, the
    # entry after them is found where the walk past them leads)
    out = with_stat_unknown(data, {b"dir/c", b"z\x003", long.encode(), b"zz"})
    assert out is not None
    (root / ".git" / "index").write_bytes(out)
    after = _stat_blocks(root)
    zero = ["ctime: 0:0", "mtime: 0:0", "dev: 0\tino: 0", "uid: 0\tgid: 0", "size: 0"]
    changed = {key for key in before if before[key] != after[key]}
    assert changed == {"dir/c 0", "zz 0"}
    for key in changed:
        assert after[key] == [before[key][0], *zero], key
    assert before["dir/c 0"][0].startswith("100755")


@pytest.mark.parametrize(
    ("version", "added"), [("2", False), ("3", False), ("4", False), ("2", True), ("4", True)]
)
def test_the_entries_stamped_otherwise_are_found_as_git_stamps_them(
    tmp_path: Path, version: str, added: bool
) -> None:
    """An entry git itself stamped again (the file touched, its content the same: `git
    update-index --really-refresh`) is found, whether the two indexes are laid out alike
    (compared where they differ) or not (an entry added: read whole); an entry the host
    did not hold, intent-to-add or not, is the listing's to judge."""
    root = tmp_path
    _git(root, "init", "-q")
    (root / "dir").mkdir()
    for name in ("a", "dir/b", "zz"):
        (root / name).write_text(name)
        os.utime(root / name, (1, 1))
    _git(root, "add", "-A")
    _git(root, "update-index", f"--index-version={version}")
    host = (root / ".git" / "index").read_bytes()
    assert restamped_entries(host, host) == (set(), set())
    os.utime(root / "dir" / "b", (2, 2))
    if added:
        (root / "new").write_text("new")
        _git(root, "add", "-N", "new")
    # (exits 1 when an intent-to-add entry "needs update": the refresh is written all the same)
    subprocess.run(["git", "update-index", "-q", "--really-refresh"], cwd=root, env=_ENV)
    new = (root / ".git" / "index").read_bytes()
    assert restamped_entries(new, host) == ({b"dir/b"}, set())
    _git(root, "update-index", "--split-index")
    assert restamped_entries((root / ".git" / "index").read_bytes(), host) is None


@pytest.mark.parametrize("version", ["2", "3"])
def test_a_host_index_its_own_git_wrote_is_compared_from_the_new_indexs_walk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str
) -> None:
    """The host's index written by its own git since the last copy-back (never walked
    here): the entries are compared where they differ, from where the walk of the new
    index found them, with the answer a whole reading gives; an entry laid out otherwise
    in the host's (its flags extended, eight bytes longer) is no shortcut."""
    from prism.coding.security import _index

    root = tmp_path
    _git(root, "init", "-q")
    (root / "dir").mkdir()
    for name in ("a", "dir/bcd", "dir/c", *(f"z{i}" for i in range(20))):
        (root / name).write_text(name)
        os.utime(root / name, (1, 1))
    _git(root, "add", "-A")
    if version == "3":
        _git(root, "update-index", "--skip-worktree", "z19")
    _git(root, "update-index", f"--index-version={version}")
    host = (root / ".git" / "index").read_bytes()
    os.utime(root / "dir" / "c", (2, 2))
    subprocess.run(["git", "update-index", "-q", "--really-refresh"], cwd=root, env=_ENV)
    new = (root / ".git" / "index").read_bytes()
    expected: tuple[set[bytes], set[bytes]] = ({b"dir/c"}, set())
    cases = [(new, host, expected)]
    if version == "3":
        # dir/bcd marked in the new index only: its entry 8 bytes longer, the rest moved
        _git(root, "update-index", "--skip-worktree", "dir/bcd")
        cases.append(((root / ".git" / "index").read_bytes(), host, expected))
    for data, old, answer in cases:
        monkeypatch.setattr(_index, "_WALKED", ())
        monkeypatch.setattr(_index, "_KNOWN", ())
        assert _index._layout(data) is not None  # the new index walked, not the host's
        whole = _index._stamps
        if data is new:  # compared where they differ: never read whole

            def unread(*args: object) -> None:
                raise AssertionError("read whole")

            monkeypatch.setattr(_index, "_stamps", unread)
        assert restamped_entries(data, old) == answer
        monkeypatch.setattr(_index, "_stamps", whole)


def _written_cache_tree(keys: list[bytes], invalid: set[bytes], rng: random.Random) -> bytes:
    """A cache-tree as git writes one for ``keys`` (``invalid``: directories written -1)."""
    children: dict[bytes, set[bytes]] = {b"": set()}
    for key in keys:
        parts = key.partition(b"\0")[0].split(b"/")[:-1]
        for depth in range(len(parts)):
            parent, path = b"/".join(parts[:depth]), b"/".join(parts[: depth + 1])
            children.setdefault(parent, set()).add(parts[depth])
            children.setdefault(path, set())

    def node(path: bytes, name: bytes) -> bytes:
        below = sorted(children[path], key=lambda n: (len(n), n))
        count = sum(1 for k in keys if k.startswith(path + b"/")) if path else len(keys)
        head = b"%s\0%s %d\n" % (name, b"-1" if path in invalid else b"%d" % count, len(below))
        oid = b"" if path in invalid else rng.randbytes(20)
        return head + oid + b"".join(node(f"{path.decode()}/{n.decode()}".lstrip("/").encode(), n)
                                     for n in below)  # fmt: skip

    return node(b"", b"")


def test_a_cache_tree_laid_out_as_a_recent_one_is_judged_as_walked_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The host's cache-tree read by its differing nodes keeps and refuses what a whole walk does.

    A cache-tree of 40 directories (three levels, some nodes invalid) is walked whole
    against its keys; then hundreds of trees with a few bytes changed (counts, names,
    object names, the newlines) against key lists with entries added or removed and
    random changed directories are judged as it was just walked, each compared with a
    whole walk (no recent tree) of the same bytes and keys: the same tree back, or None.
    """
    rng = random.Random(11)
    names = [b"a", b"b", b"cc", b"d1", b"zz", b"a.b"]
    keys = sorted({b"/".join(rng.choices(names, k=rng.randint(1, 3))) + b"/f%d" % rng.randrange(9)
                   for _ in range(300)})  # fmt: skip
    directories = sorted({k.rpartition(b"/")[0] for k in keys} | {b""})
    invalid = set(rng.sample(directories, 5))
    tree = _written_cache_tree(keys, invalid, rng)

    def walked(tree: bytes, changed: set[bytes], keys: list[bytes]) -> bytes | None:
        monkeypatch.setattr(_index, "_WALKS", ())
        return _index._kept_nodes(tree, 20, changed, keys)

    assert walked(tree, set(), keys) == tree

    def mutated_tree(tree: bytes, counts: tuple[int, ...]) -> bytes:
        mutated = bytearray(tree)
        for _ in range(rng.choice(counts)):
            mutated[rng.randrange(len(tree))] = rng.choice(b"0123456789-\n\0/ab")
        return bytes(mutated)

    def moved_keys(keys: list[bytes]) -> list[bytes]:
        moved = list(keys)
        for _ in range(rng.choice((0, 0, 1, 3))):
            if rng.random() < 0.5:
                moved.remove(rng.choice(moved))
            else:
                moved.append(rng.choice(directories).lstrip(b"/") + b"/new%d" % rng.randrange(9))
        return sorted({k.lstrip(b"/") for k in moved})

    read_alone = 0
    for _ in range(500):
        base = mutated_tree(tree, (0, 1))  # (a count of it may be wrong)
        mutated = mutated_tree(base, (0, 0, 1, 2))
        primed, moved = moved_keys(keys), moved_keys(keys)
        changed = set(rng.sample(directories, rng.randint(0, 4)))
        expected = walked(mutated, changed, moved)
        # the recent walk: of the tree against other keys (some of its nodes then wrong)
        monkeypatch.setattr(_index, "_WALKS", ())
        _index._kept_nodes(base, 20, set(rng.sample(directories, 2)), primed)
        read_alone += _index._rewalked(mutated, 20, moved) is not None
        assert _index._kept_nodes(mutated, 20, changed, moved) == expected
    assert read_alone > 250


def test_an_index_of_more_extensions_than_git_writes_is_not_walked(tmp_path: Path) -> None:
    """Millions of empty extensions (8 bytes each) in 64 MiB were walked one by one after
    the command's time was up: 35 s and 1.6 GB. Past 64 (with git's own), none is read."""
    body = _index_of(tmp_path)[:-20]
    assert strip_optional_extensions(_sealed(body + b"ZZZZ\0\0\0\0" * 60)) is not None
    assert strip_optional_extensions(_sealed(body + b"ZZZZ\0\0\0\0" * 65)) is None
