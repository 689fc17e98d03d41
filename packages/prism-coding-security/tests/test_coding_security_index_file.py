"""A git index read in Python, against ``git ls-files --stage -v -z`` on the same file.

Every index here is read both ways: the Python reading must give exactly git's
listing (and gitlinks), or decline (None) so that git is asked. The indexes are
the ones git writes (conflicted stages, skip-worktree, assume-unchanged,
intent-to-add, gitlinks, links, a name longer than the name field, versions 2,
3 and 4, a split index) and hostile mutations of them (random bytes, with the
checksum made right again).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from typing import TYPE_CHECKING

import hypothesis
import pytest
from hypothesis import strategies as st

from prism.coding.security._indexfile import read_index
from prism.coding.security._proved import HOST_GIT_ENVIRONMENT

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.git

_ZERO = "0" * 40


def _git(root: Path, *args: str, stdin: bytes = b"", env: dict[str, str] | None = None) -> bytes:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=root, input=stdin, capture_output=True, check=True, env=env,
    ).stdout  # fmt: skip


def _listed_by_git(
    git_dir: str, index: str
) -> tuple[dict[bytes, tuple[bytes, bytes, bytes]], list[bytes]] | None:
    """What the copy-back's git listing gives (parsed as it parses it), or None: git failed."""
    env = {**os.environ, **dict(HOST_GIT_ENVIRONMENT), "GIT_INDEX_FILE": index,
           "GIT_DIR": git_dir, "GIT_WORK_TREE": os.path.dirname(git_dir)}  # fmt: skip
    argv = ["git", "ls-files", "--stage", "-v", "-z"]
    result = subprocess.run(argv, env=env, cwd=os.path.dirname(git_dir), capture_output=True)
    if result.returncode != 0:
        return None
    out: dict[bytes, tuple[bytes, bytes, bytes]] = {}
    links: list[bytes] = []
    for record in result.stdout.split(b"\0"):
        meta, _, name = record.partition(b"\t")
        fields = meta.split(b" ")
        if len(fields) == 4:
            key = name if fields[3] == b"0" else name + b"\0" + fields[3]
            out[key] = (fields[0], fields[1], fields[2])
            if fields[1] == b"160000":
                links.append(name)
    return out, links


def _same_as_git(git_dir: str, index: str) -> bool:
    """Read both ways; True when Python read it (and so read it as git does)."""
    links: list[bytes] = []
    mine = read_index(index, git_dir, links)
    if mine is None:
        return False
    assert (mine, links) == _listed_by_git(git_dir, index)
    return True


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository whose index holds every kind of entry git writes (version 3)."""
    root = tmp_path_factory.mktemp("index") / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    for name in ("a.py", "run.sh", "src/b.txt", "skip.txt", "assumed.txt", "new.txt"):
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_text(f"{name}\n")
    os.chmod(root / "run.sh", 0o755)
    (root / "link").symlink_to("a.py")
    _git(root, "add", "a.py", "run.sh", "src", "skip.txt", "assumed.txt", "link")
    _git(root, "add", "-N", "new.txt")  # intent-to-add: an extended flag (version 3)
    _git(root, "commit", "-qm", "one")
    _git(root, "update-index", "--skip-worktree", "skip.txt")
    _git(root, "update-index", "--assume-unchanged", "assumed.txt")
    long_name = "/".join(["d" * 200] * 25)  # longer than the 12-bit name field
    blob = _git(root, "hash-object", "-w", "--stdin", stdin=b"x\n").decode().strip()
    info = (
        f"160000 {'1' * 40} 0\tsub\n"
        f"100644 {blob} 1\tconflict.txt\n100644 {blob} 2\tconflict.txt\n"
        f"100755 {blob} 3\tconflict.txt\n160000 {'2' * 40} 2\tsublink\n"
        f"100644 {blob} 0\t{long_name}\n"
    )
    _git(root, "update-index", "--index-info", stdin=info.encode())
    return root


def test_an_index_of_every_kind_of_entry_reads_as_git_lists_it(repository: Path) -> None:
    git_dir = str(repository / ".git")
    index = str(repository / ".git" / "index")
    assert _same_as_git(git_dir, index)
    entries = read_index(index, git_dir)
    assert entries is not None
    tags = {key.partition(b"\0")[0]: value[0] for key, value in entries.items()}
    assert (tags[b"skip.txt"], tags[b"assumed.txt"], tags[b"conflict.txt"]) == (b"S", b"h", b"M")
    assert len(entries) == 13


def test_an_index_read_otherwise_is_left_to_git(repository: Path, tmp_path: Path) -> None:
    git_dir = str(repository / ".git")
    copy = tmp_path / "index"
    env = {**os.environ, "GIT_INDEX_FILE": str(copy)}
    for version in ("2", "3", "4"):
        copy.write_bytes((repository / ".git" / "index").read_bytes())
        _git(repository, "update-index", "--index-version", version, env=env)
        # (version 2 cannot hold the extended flags: git writes 3 whatever was asked)
        assert _same_as_git(git_dir, str(copy)) is (version != "4"), version
    split = tmp_path / "split"
    split.mkdir()
    _git(split, "init", "-q")
    (split / "f").write_text("f\n")
    _git(split, "-c", "core.splitIndex=true", "add", "f")
    assert not _same_as_git(str(split / ".git"), str(split / ".git" / "index"))  # a split index
    (split / ".git" / "config").write_text("[extensions]\n\tobjectFormat = sha256\n")
    assert read_index(str(copy), str(split / ".git")) is None  # other object names
    assert read_index(str(tmp_path / "missing"), git_dir) is None


_INDEX_BYTES: dict[str, bytes] = {}


@hypothesis.settings(
    max_examples=int(os.environ.get("PRISM_INDEX_EXAMPLES", "40")),
    deadline=None,
    database=None,
    suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture],
)
@hypothesis.given(
    changes=st.lists(
        # (the entries before the long name hold most of what a reader decides)
        st.tuples(st.one_of(st.integers(0, 1100), st.integers(0, 10**6)), st.integers(0, 255)),
        min_size=1,
        max_size=3,
    )
)
def test_a_hostile_index_is_read_as_git_reads_it_or_left_to_git(
    repository: Path, tmp_path: Path, changes: list[tuple[int, int]]
) -> None:
    """Bytes changed anywhere but the checksum (which is then made right): the Python
    reading is git's, or none (git refused or read it some other way)."""
    original = (repository / ".git" / "index").read_bytes()
    body = bytearray(original[:-20])
    for where, value in changes:
        body[where % len(body)] = value
    index = tmp_path / f"index-{len(os.listdir(tmp_path))}"
    index.write_bytes(bytes(body) + hashlib.sha1(body).digest())
    _same_as_git(str(repository / ".git"), str(index))


def _entry(name: bytes, *, flags: int = -1, extended: int | None = None, mode: int = 0o100644,
           pad: bytes | None = None) -> bytes:  # fmt: skip
    """One index entry as git lays it out (``flags`` -1: the name's length, nothing else)."""
    length = len(name) if flags < 0 else flags
    head = bytes(24) + mode.to_bytes(4, "big") + bytes(12) + b"\x11" * 20
    if extended is None:
        head += length.to_bytes(2, "big")
    else:
        head += (length | 0x4000).to_bytes(2, "big") + extended.to_bytes(2, "big")
    size = (len(head) + len(name) + 8) & ~7
    return head + name + (pad if pad is not None else bytes(size - len(head) - len(name)))


def _index(entries: list[bytes], count: int | None = None, tail: bytes = b"") -> bytes:
    body = b"DIRC" + (2).to_bytes(4, "big") + (count or len(entries)).to_bytes(4, "big")
    body += b"".join(entries) + tail
    return body + hashlib.sha1(body).digest()


def test_indexes_laid_out_otherwise_are_left_to_git(tmp_path: Path) -> None:
    """Shapes the random changes may miss, each read here as git does or left to it."""
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    git_dir = str(root / ".git")
    index = tmp_path / "index"
    cases = {
        "plain": (_index([_entry(b"a"), _entry(b"b/c", extended=0x4000)]), True),
        "short": (b"DIRC", False),
        "bad checksum": (_index([_entry(b"a")])[:-1] + b"\0", False),
        "more entries counted": (_index([_entry(b"a")], count=2), False),
        "no NUL after the name": (_index([_entry(b"ab", flags=1)]), False),
        "a NUL in the name": (_index([_entry(b"a\0b")]), False),
        "an unknown extended flag": (_index([_entry(b"a", extended=0x8000)]), False),
        "a long name without its NUL": (_index([_entry(b"a" * 10, flags=0xFFF, pad=b"")]), False),
        "an entry past the end": (_index([_entry(b"abc", pad=b"\0")]), False),
        "a short extension": (_index([_entry(b"a")], tail=b"TREE"), False),
        "a split index": (_index([_entry(b"a")], tail=b"link" + bytes(4)), False),
        "an empty cache tree": (_index([_entry(b"a")], tail=b"TREE" + bytes(4)), True),
        # git takes the first of a name listed twice: never judged by the last
        "a name twice": (_index([_entry(b"a"), _entry(b"a")]), False),
        "names out of order": (_index([_entry(b"b"), _entry(b"a")]), False),
        "a prefix after its longer name": (_index([_entry(b"a/b"), _entry(b"a")]), False),
        "stage 0 beside stage 1": (_index([_entry(b"a"), _entry(b"a", flags=0x1001)]), False),
        "stage 2 before stage 1": (
            _index([_entry(b"a", flags=0x2001), _entry(b"a", flags=0x1001)]),
            False,
        ),
        "stages in order": (_index([_entry(b"a", flags=0x1001), _entry(b"a", flags=0x3001)]), True),
        "a name then its longer name": (
            _index([_entry(b"a"), _entry(b"a/b"), _entry(b"a0")]),
            True,
        ),
    }
    for name, (content, read) in cases.items():
        index.write_bytes(content)
        assert _same_as_git(git_dir, str(index)) is read, name
    (root / ".git" / "config").unlink()  # no configuration: SHA-1 names
    index.write_bytes(cases["plain"][0])
    assert read_index(str(index), git_dir) is not None
    (root / ".git" / "commondir").write_text("..\n")  # another repository's configuration
    assert read_index(str(index), git_dir) is None


def test_an_index_laid_out_as_the_last_one_read_is_read_as_git_reads_it(tmp_path: Path) -> None:
    """Indexes read one after another, each laid out as the one before (entries of the same
    lengths at the same offsets, as a command's new index mostly is the host's): only the
    entries that differ are read again, and order, stages and flags are still git's."""
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    git_dir = str(root / ".git")
    index = tmp_path / "index"
    c3 = 0x3001  # "c" at stage 3
    steps = [
        ([_entry(b"a"), _entry(b"b"), _entry(b"c"), _entry(b"d")], True),
        ([_entry(b"a"), _entry(b"b", mode=0o100755), _entry(b"c"), _entry(b"d")], True),
        ([_entry(b"a"), _entry(b"a"), _entry(b"c"), _entry(b"d")], False),  # a name twice
        ([_entry(b"a"), _entry(b"b"), _entry(b"c"), _entry(b"c")], False),
        ([_entry(b"a"), _entry(b"e"), _entry(b"c"), _entry(b"d")], False),  # out of order
        ([_entry(b"b"), _entry(b"b"), _entry(b"c"), _entry(b"d")], False),
        ([_entry(b"a"), _entry(b"b"), _entry(b"c", flags=0x1001), _entry(b"c", flags=c3)], True),
        ([_entry(b"a"), _entry(b"b"), _entry(b"c", flags=c3), _entry(b"c", flags=0x1001)], False),
        ([_entry(b"a"), _entry(b"b"), _entry(b"c"), _entry(b"c", flags=0x1001)], False),
        ([_entry(b"a"), _entry(b"b", flags=0x8001), _entry(b"c"), _entry(b"d")], True),
        ([_entry(b"a"), _entry(b"b", extended=0x4000), _entry(b"c"), _entry(b"d")], True),
        ([_entry(b"a"), _entry(b"b", extended=0x8000), _entry(b"c"), _entry(b"d")], False),
        ([_entry(b"a"), _entry(b"b", flags=2), _entry(b"c"), _entry(b"d")], False),  # no NUL
        ([_entry(b"a"), _entry(b"b", mode=0o160000), _entry(b"c"), _entry(b"d")], True),
        ([_entry(b"a"), _entry(b"b"), _entry(b"c"), _entry(b"d")], True),
    ]
    for number, (entries, read) in enumerate(steps):
        for _ in range(2):  # (read once after the step before, then after itself)
            index.write_bytes(_index(entries))
            assert _same_as_git(git_dir, str(index)) is read, number


def test_git_listing_a_path_twice_is_no_listing(tmp_path: Path) -> None:
    """Where git is asked (here: a configuration that includes another file), its listing
    of a name twice or out of order is refused as the Python reading refuses it."""
    from prism.coding.security._overlay import index_entries

    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    _git(root, "config", "include.path", "nowhere")
    git_dir = str(root / ".git")
    index = tmp_path / "index"
    for entries, listed in [
        ([_entry(b"a"), _entry(b"b")], True),
        ([_entry(b"a"), _entry(b"a")], False),
        ([_entry(b"b"), _entry(b"a")], False),
        ([_entry(b"a"), _entry(b"a", flags=0x2001)], False),
    ]:
        index.write_bytes(_index(entries))
        assert read_index(str(index), git_dir) is None  # left to git
        assert _listed_by_git(git_dir, str(index)) is not None  # which lists it
        assert (index_entries(git_dir, str(root), str(index)) is not None) is listed, entries
