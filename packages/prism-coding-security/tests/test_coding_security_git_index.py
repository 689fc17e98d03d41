"""The index reader that drops an index's caches, against real git's own reading of the result."""

from __future__ import annotations

import hashlib
import os
import subprocess
from typing import TYPE_CHECKING

import pytest

from prism.coding.security._index import (
    extension_signatures,
    extensionless,
    strip_optional_extensions,
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
