"""One new commit's history and tree differences, read in Python from loose objects.

The copy-back judges a moved ref by what its new commits change (see
:mod:`._commits`): ``git rev-list <tip> --not --all`` lists them,
``git diff-tree -r -z`` gives each difference. For the commit an agent makes
most often (one new commit on top of ``HEAD``, its objects and its parent's
loose) those two git processes cost more than the rest of the check. Here the
same answers are read from the object files themselves, and only where the
reading is git's own:

* every object read is a loose object file (a regular file, no link followed)
  that inflates to an object of the expected type whose SHA-1 is its name
  (objects are named by their content: whichever copy git would open, packed
  or loose, holds these bytes), at most :data:`OBJECT_LIMIT` bytes;
* a commit's ``tree`` and ``parent`` lines as git's commit parser reads them
  (names in either case; a parent line anywhere else in the header: git), a tree
  whose entries are in git's order, with names git writes and modes git
  writes (no submodule in a difference: its ignore rules are git's to read),
  at most :data:`READ_LIMIT` objects and no deeper than Python recurses (a
  hostile tree of many directories is git's to walk, at C speed);
* the repository reads objects and parents as plainly: no replace refs, no
  grafts, no shallow list, no other object format or included configuration,
  no common directory, no variable that changes what git reads (another object
  directory, a replace ref base, a namespace, configuration beyond Prism's forced
  one).

Anything else is None: git is asked as before. A new commit is one whose
object is only in the command's layer; its parents must be what the host's
``HEAD`` names (read as :func:`._commits.host_ref` reads it), the boundary
``rev-list --boundary`` shows. Differential tests compare every answer with
git's.
"""

from __future__ import annotations

import hashlib
import itertools
import operator
import os
import re
import threading
import zlib
from typing import TYPE_CHECKING

from ._files import open_regular_file, read_regular_file
from ._index import differing_entries

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["EMPTY_TREE", "OBJECT_LIMIT", "LooseReader", "Unread"]

OBJECT_LIMIT = 16 << 20
"""An object read here inflates to at most this many bytes (a larger one: git is asked)."""
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
"""The empty tree's SHA-1 name: git knows it without an object file."""
READ_LIMIT = 4096
"""Objects one reader reads at most (one copy-back's ``.git``); past it git is asked."""
_HEX40 = re.compile(rb"[0-9a-f]{40}")
# an object name as git's get_oid_hex reads it: either case (a commit's parents, its tree)
_ANY_HEX40 = re.compile(rb"[0-9a-fA-F]{40}")
_ZERO = b"0" * 40
# variables that change which objects, refs or parents git reads (or its configuration:
# any GIT_CONFIG* but what Prism forces); others (GIT_SSL_CAINFO, GIT_EDITOR) change nothing
_READS = frozenset({
    "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_REPLACE_REF_BASE",
    "GIT_GRAFT_FILE", "GIT_SHALLOW_FILE", "GIT_REF_PARANOIA", "GIT_DEFAULT_HASH",
    "GIT_DEFAULT_REF_FORMAT",
})  # fmt: skip
_Entry = tuple[bytes, bytes, bytes]  # mode, name, object name (20 bytes)


class Unread(Exception):
    """Not read as git reads it: git is asked instead."""


class LooseReader:
    """Loose objects of one ``.git`` (and the command's proved ones), read as git reads them."""

    def __init__(self, git_dir: str, alternate: str | None) -> None:
        self.git_dir = git_dir
        self.stores = [os.path.join(git_dir, "objects"), *([alternate] if alternate else [])]
        self._layer = alternate
        self.reads = 0

    @classmethod
    def for_env(cls, env: Mapping[str, str], forced: Mapping[str, str]) -> LooseReader | None:
        """The reader for the git ``env`` names, or None when git would read otherwise.

        ``forced``: the variables Prism sets on every host git (their values as set).
        """
        git_dir = env.get("GIT_DIR")
        alternate = env.get("GIT_ALTERNATE_OBJECT_DIRECTORIES")
        if git_dir is None or (alternate is not None and (":" in alternate or not alternate)):
            return None
        for key, value in env.items():
            if forced.get(key, value) != value:
                return None  # (a forced value overridden)
            if key in _READS or (key.startswith(("GIT_CONFIG", "GIT_TEST_")) and key not in forced):
                return None
        for name in ("commondir", "shallow", os.path.join("info", "grafts")):
            if os.path.lexists(os.path.join(git_dir, name)):
                return None
        if os.path.lexists(os.path.join(git_dir, "refs", "replace")):
            return None
        packed = read_regular_file(os.path.join(git_dir, "packed-refs"), 1 << 24)
        if packed is None and os.path.lexists(os.path.join(git_dir, "packed-refs")):
            return None
        if packed is not None and (len(packed) >= 1 << 24 or b"refs/replace/" in packed):
            return None
        config = read_regular_file(os.path.join(git_dir, "config"), 1 << 20)
        if config is None or len(config) >= 1 << 20:
            return None
        lowered = config.lower()
        if any(word in lowered for word in (b"include", b"objectformat", b"refstorage")):
            return None
        return cls(git_dir, alternate)

    def _read(self, name: str, kind: bytes, stores: list[str]) -> bytes:
        """The content of the object ``name`` of type ``kind``; raises :class:`Unread`."""
        self.reads += 1
        if not _HEX40.fullmatch(name.encode()) or self.reads > READ_LIMIT:
            raise Unread  # (a hostile tree of many directories: git is faster at it)
        for store in stores:
            fd = open_regular_file(os.path.join(store, name[:2], name[2:]))
            if fd is None:
                continue
            try:
                data = _inflated(fd)
            finally:
                os.close(fd)
            header, _, content = data.partition(b"\0")
            if header != b"%s %d" % (kind, len(content)):
                raise Unread
            if hashlib.sha1(data, usedforsecurity=False).hexdigest() != name:
                raise Unread
            return content
        raise Unread

    def read(self, name: str, kind: bytes) -> bytes:
        """The object ``name`` (a ``kind``) from the host's store or the layer's."""
        return self._read(name, kind, self.stores)

    def only_in_layer(self, name: str) -> bool:
        """Whether ``name`` is a loose object of the layer and of no store of the host's."""
        host = os.path.join(self.stores[0], name[:2], name[2:])
        if self._layer is None or os.path.lexists(host):
            return False
        return os.path.lexists(os.path.join(self._layer, name[:2], name[2:]))

    def commit(self, name: str) -> tuple[str, list[str]]:
        """A commit's tree and parents (lower-case names); raises :class:`Unread`."""
        return _commit_head(self.read(name, b"commit"))

    def tree(self, name: str) -> list[_Entry]:
        """A tree's entries in order; raises :class:`Unread` for one git would read otherwise."""
        if name == EMPTY_TREE:
            return []
        content = self.read(name, b"tree")
        entries = _TREES.get(name)  # (its content hashed to its name: parsed alike)
        if entries is None:
            entries = _parsed_tree(content)
            if len(entries) > _TREE_KEPT_ENTRIES:
                return entries
            with _TREES_LOCK:
                while len(_TREES) >= _TREES_KEPT:
                    del _TREES[next(iter(_TREES))]
                _TREES[name] = entries
        return entries

    def new_commit(
        self, tips: tuple[str, ...], head: str | None
    ) -> tuple[dict[str, str], dict[str, list[str]]]:
        """What ``rev-list --boundary --format='%T %P' tips --not --all`` lists, read here.

        One tip, only in the layer, whose parents are each ``head`` (the commit the
        host's ``HEAD`` names): (each listed commit's tree, the new commit's
        parents). Raises :class:`Unread` otherwise.
        """
        if len(tips) != 1 or head is None or not self.only_in_layer(tips[0]):
            raise Unread
        tip = tips[0]
        tree, parents = self.commit(tip)
        trees = {tip: tree}
        for parent in parents:
            if parent != head:
                raise Unread
            trees[parent] = self.commit(parent)[0]
        return trees, {tip: parents}

    def diff(self, old: str, new: str) -> bytes:
        """What ``git diff-tree -r -z --no-renames old new`` prints; raises :class:`Unread`."""
        out: list[bytes] = []
        try:
            self._diff(old, new, b"", out)
        except RecursionError as exc:  # trees nested deeper than Python recurses
            raise Unread from exc
        return b"".join(out)

    def _diff(self, old: str | None, new: str | None, prefix: bytes, out: list[bytes]) -> None:
        before = self.tree(old) if old else []
        after = self.tree(new) if new else []
        # what differs, in git's order: an entry in one tree and not (alike) in the other
        gone = {_key(a): a for a in set(before).difference(after)}
        added = {_key(b): b for b in set(after).difference(before)}
        for key in sorted(gone.keys() | added.keys()):
            a, b = gone.get(key), added.get(key)
            if b is None:
                assert a is not None
                self._gone(a, prefix, out)
            elif a is None:
                self._added(b, prefix, out)
            else:
                path = prefix + a[1]
                if a[0] == b"40000":
                    self._diff(a[2].hex(), b[2].hex(), path + b"/", out)
                else:
                    status = b"M" if a[0] == b[0] or b"120000" not in (a[0], b[0]) else b"T"
                    out.append(b":%s %s %s %s %s\0%s\0" % (
                        _shown(a[0]), _shown(b[0]), a[2].hex().encode(), b[2].hex().encode(),
                        status, path))  # fmt: skip

    def _gone(self, entry: _Entry, prefix: bytes, out: list[bytes]) -> None:
        mode, name, oid = entry
        if mode == b"40000":
            self._diff(oid.hex(), None, prefix + name + b"/", out)
        else:
            shown = (_shown(mode), oid.hex().encode(), _ZERO, prefix, name)
            out.append(b":%s 000000 %s %s D\0%s%s\0" % shown)

    def _added(self, entry: _Entry, prefix: bytes, out: list[bytes]) -> None:
        mode, name, oid = entry
        if mode == b"40000":
            self._diff(None, oid.hex(), prefix + name + b"/", out)
        else:
            shown = (_shown(mode), _ZERO, oid.hex().encode(), prefix, name)
            out.append(b":000000 %s %s %s A\0%s%s\0" % shown)


# one tree entry as git writes it: a mode it writes, a name (no '/'), the object's 20 bytes
_TREE_ENTRY = rb"(100644|100755|120000|40000) ([^\0/]+)\0(.{20})"
_TREE_ENTRIES = re.compile(_TREE_ENTRY, re.DOTALL)
_WHOLE_TREE = re.compile(rb"(?:%s)*" % _TREE_ENTRY.replace(b"(", b"(?:"), re.DOTALL)
# the last trees parsed, by name (a tree's name is its content's hash: the same entries)
_TREES: dict[str, list[_Entry]] = {}
_TREES_KEPT = 8
_TREE_KEPT_ENTRIES = 1 << 14  # (a larger tree is parsed each time it is read)
_TREES_LOCK = threading.Lock()


def _parsed_tree(content: bytes) -> list[_Entry]:
    """A tree object's entries; raises :class:`Unread` unless git wrote it so.

    Entry after entry to the end (a mode git writes, a name without '/', its
    object), in git's order, each name once. A large tree laid out as one parsed
    recently (a commit changes a few of its entries' objects) is read by its
    differing entries only (:func:`_reparsed_tree`).
    """
    if len(content) >= _REPARSED_SIZE:
        entries = _reparsed_tree(content)
        if entries is not None:
            return entries
    if _WHOLE_TREE.fullmatch(content) is None:
        raise Unread
    entries = _TREE_ENTRIES.findall(content)
    keys = [_key(entry) for entry in entries]
    if not all(map(operator.lt, keys, keys[1:])):
        raise Unread  # out of git's order, or twice
    if len(content) >= _REPARSED_SIZE and len(entries) <= _TREE_KEPT_ENTRIES:
        global _RECENT_TREES  # (replaced whole: a reader sees the old tuple or the new one)
        offsets = [0, *itertools.accumulate(len(m) + len(n) + 22 for m, n, _ in entries)]
        _RECENT_TREES = ((content, entries, offsets), *_RECENT_TREES[: _RECENT_TREE_COUNT - 1])
    return entries


# the last large trees parsed whole: their bytes, entries and where each entry starts
# (and, last, where they end); a tree laid out alike is read by its differing entries
_RECENT_TREES: tuple[tuple[bytes, list[_Entry], list[int]], ...] = ()
_RECENT_TREE_COUNT = 4
_REPARSED_SIZE = 4096
_DIFFERING = 64  # differing entries read alone at most; past them the tree is parsed whole


def _reparsed_tree(content: bytes) -> list[_Entry] | None:
    """``content``'s entries from a recent tree of the same length, or None (parse it whole).

    An entry whose bytes are those of the recent tree's entry at the same offset
    (every entry before it laid out alike) reads alike: an entry is read from its
    own bytes alone. Each other one is read at its offset, must end where that one
    ended, and is checked in git's order against its neighbours. Raises
    :class:`Unread` for an entry git did not write so.
    """
    for known, entries, offsets in _RECENT_TREES:
        if len(known) != len(content):
            continue
        changed = differing_entries(content, known, offsets, _DIFFERING)
        if changed is None:
            continue
        out = list(entries)
        for index in changed:
            entry = _TREE_ENTRIES.match(content, offsets[index])
            if entry is None or entry.end() != offsets[index + 1]:
                break  # laid out otherwise from here: parsed whole
            out[index] = entry.groups()  # type: ignore[assignment]
        else:
            for index in changed:
                for first in (index - 1, index):
                    if 0 <= first < len(out) - 1 and not _key(out[first]) < _key(out[first + 1]):
                        raise Unread  # out of git's order, or twice
            return out
    return None


def _commit_head(content: bytes) -> tuple[str, list[str]]:
    """The tree and parents git's ``parse_commit_buffer`` reads; raises :class:`Unread`.

    Git reads ``tree <name>`` and a newline with at least one byte after it, then
    each ``parent <name>`` line while one starts there, a name in either case; a
    parent line with no byte after it is an error. Anything not read exactly so is
    git's to answer: a line that is not git's form, or another line naming a
    parent further in the header (git would not read it as one, but a reader that
    did must not be told otherwise here).
    """
    if len(content) <= 46 or not content.startswith(b"tree ") or content[45:46] != b"\n":
        raise Unread
    tree = content[5:45]
    if not _ANY_HEX40.fullmatch(tree):
        raise Unread
    parents: list[str] = []
    at = 46
    while content.startswith(b"parent ", at):
        name = content[at + 7 : at + 47]
        if len(content) <= at + 48 or content[at + 47 : at + 48] != b"\n":
            raise Unread
        if not _ANY_HEX40.fullmatch(name):
            raise Unread
        parents.append(name.decode().lower())
        at += 48
    header_end = content.find(b"\n\n", at - 1)
    header = content[at - 1 : header_end if header_end >= 0 else len(content)]
    if b"\nparent" in header:
        raise Unread  # another parent line after a header git stops at
    return tree.decode().lower(), parents


def _key(entry: _Entry) -> bytes:
    return entry[1] + (b"/" if entry[0] == b"40000" else b"\0")


def _shown(mode: bytes) -> bytes:
    return mode.rjust(6, b"0")


def _inflated(fd: int) -> bytes:
    """A loose object file inflated whole (nothing after its stream); raises :class:`Unread`."""
    data = os.read(fd, OBJECT_LIMIT + 1)  # (a regular file: read whole, up to the count)
    inflate = zlib.decompressobj()
    try:
        out = inflate.decompress(data, OBJECT_LIMIT + 64)
    except zlib.error as exc:
        raise Unread from exc
    if len(data) > OBJECT_LIMIT or not inflate.eof or inflate.unused_data:
        raise Unread
    return out
