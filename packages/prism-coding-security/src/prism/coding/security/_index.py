"""A git index that comes back from the sandbox keeps only what its entries say.

Beside its entries, an index file carries extensions. The optional ones (their
signature starts with an upper-case letter) are caches git trusts without
checking: the cache-tree (``TREE``) names, for each directory, the tree object
its entries make, and the host's next ``git commit`` writes that tree as it is
for every directory whose entries did not change. A command that forged it
(entries untouched, so ``git ls-files`` and every check of them see nothing)
would have the user's own next commit record a tree the user never saw: a
protected file added, a line changed that ``git diff`` never showed. The
untracked cache (``UNTR``) likewise tells ``git status`` which files to leave
unlisted, and resolve-undo (``REUC``) what ``git checkout -m`` writes back.

So every optional extension is dropped from an index before it is judged and
placed (git rebuilds the caches it wants on its next write), and the index's
trailing checksum is written again. The cache-tree it then gets
(:func:`with_proved_cache_tree`) is the host's own, never the command's: a
node stays valid only where every entry below its directory is the same in
the host's index and the new one, which is what git itself does to its
cache-tree when entries change (a differential test compares the two node
for node); every other node is written invalid, so the host's next commit
rebuilds the trees of what changed and not of every directory. The required extensions (lower case:
``link``, a split index's shared index; ``sdir``, a sparse index) stay; git
refuses an index with a required extension it does not know, so the checks
that read the index refuse it too. The format is git's
``Documentation/gitformat-index.txt``: versions 2, 3 (an extended flags word)
and 4 (path names prefix-compressed, no padding), SHA-1 or SHA-256 object
names, and a trailer that is the checksum of what precedes it, or all zeros
under ``index.skipHash``. An index whose bytes just before the trailer read
as an end-of-index-entries extension is refused whatever the walk found: git
looks for that extension there by position, and with index threads on it
loads the entries from the offset table it leads to, so a threaded git would
list entries no single walk sees.
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_left
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = [
    "checksum_right",
    "differing_entries",
    "extension_signatures",
    "extensionless",
    "marks_intent",
    "positional_eoie",
    "restamped_entries",
    "shared_index_name",
    "strip_optional_extensions",
    "with_proved_cache_tree",
    "with_shared_stat_unknown",
    "with_stat_unknown",
]

_HEADER = 12
_STAT = 40  # ctime, mtime (seconds and nanoseconds), dev, ino, mode, uid, gid, size
_EXTENDED = 0x4000
_NAME_MASK = 0x0FFF
_INTENT_TO_ADD = 0x2000  # in the extended flags: `git add -N`, left out of the trees git writes


def _varint(data: bytes, at: int) -> tuple[int, int] | None:
    """Git's offset varint (``varint.c``): the value and the next offset, None past the end."""
    if at >= len(data):
        return None
    byte = data[at]
    at += 1
    value = byte & 0x7F
    while byte & 0x80:
        if at >= len(data) or value > 1 << 40:
            return None
        byte = data[at]
        at += 1
        value = ((value + 1) << 7) | (byte & 0x7F)
    return value, at


def _entries_end(
    data: bytes, version: int, count: int, oid: int, end: int
) -> tuple[int, bool] | None:
    """Where the entries end (the first extension starts), None if they do not parse.

    Each entry's length is read as git reads it (``read-cache.c``): the path's
    length from the flags, or up to its NUL when the flags hold 0xFFF. Also
    whether an entry is marked intent-to-add. Versions 2 and 3: a recent index
    laid out alike gives the entries whose bytes it shares (see :func:`differing_entries`).
    """
    if version != 4:
        again = _walked_again(data, version, count, oid, end)
        if again is not None:
            return again
    at = _HEADER
    intent = False
    previous = 0  # version 4: the length of the previous entry's path
    offsets, intents = [at], []
    for _ in range(count):
        fixed = at + _STAT + oid
        if fixed + 2 > end:
            return None
        flags = int.from_bytes(data[fixed : fixed + 2], "big")
        name = fixed + 2
        marked = False
        if flags & _EXTENDED:
            if version < 3:
                return None
            marked = bool(data[name] << 8 & _INTENT_TO_ADD)
            intent = intent or marked
            name += 2
        copied = 0
        if version == 4:
            strip = _varint(data, name)
            if strip is None or strip[0] > previous:
                return None
            copied = previous - strip[0]
            name = strip[1]
        length = flags & _NAME_MASK
        if length == _NAME_MASK:
            nul = data.find(b"\0", name, end)
            if nul < 0:
                return None
            length = nul - name + copied
        if length < copied:
            return None
        if version == 4:
            previous = length
            at = name + length - copied + 1
        else:
            # padded with 1 to 8 NULs to a multiple of eight from the entry's start
            at += (name - at + length + 8) & ~7
        if at > end:
            return None
        offsets.append(at)
        intents.append(marked)
    if version != 4:
        _remember_offsets(data, oid, offsets, intents)
    return at, intent


def _remember_offsets(data: bytes, oid: int, offsets: list[int], intents: list[bool]) -> None:
    """Keep where each entry of ``data`` (versions 2 and 3) starts, and its marks."""
    if len(data) <= _KNOWN_SIZE:
        global _WALKED  # (replaced whole: a reader sees the old tuple or the new one)
        _WALKED = ((data, oid, offsets, intents), *_WALKED[: _KNOWN_COUNT - 1])


# the entries of the last indexes of versions 2 and 3 walked here: where each starts (and,
# last, where they end) and whether each is marked intent-to-add
_WALKED: tuple[tuple[bytes, int, list[int], list[bool]], ...] = ()
_DIFFERING = 64  # differing entries walked alone at most; past them the index is walked whole


def _walked_again(
    data: bytes, version: int, count: int, oid: int, end: int
) -> tuple[int, bool] | None:
    """:func:`_entries_end` of versions 2 and 3 from a recent index laid out alike, or None.

    An entry whose bytes are those of the recent index's entry at the same offset
    (every entry before it laid out alike) walks alike; each other one is walked
    and must end where that one ended.
    """
    for known, size, offsets, intents in _WALKED:
        if size != oid or len(intents) != count or offsets[-1] > end or known[:12] != data[:12]:
            continue
        changed = differing_entries(data, known, offsets, _DIFFERING)
        if changed is None:
            continue
        marked = list(intents)
        for index in changed:
            at = offsets[index]
            fixed = at + _STAT + oid
            flags = int.from_bytes(data[fixed : fixed + 2], "big")
            name = fixed + 2
            marked[index] = False
            if flags & _EXTENDED:
                if version < 3:
                    break  # (walked whole: refused)
                marked[index] = bool(data[name] << 8 & _INTENT_TO_ADD)
                name += 2
            length = flags & _NAME_MASK
            if length == _NAME_MASK:
                nul = data.find(b"\0", name, end)
                length = nul - name if nul >= 0 else -(1 << 40)
            # (every entry lies before the known index's entries end, no later than
            # ``end``: the walk's checks against the end hold)
            if at + ((name - at + length + 8) & ~7) != offsets[index + 1]:
                break  # laid out otherwise from here (or refused): walked whole
        else:
            _remember_offsets(data, oid, offsets, marked)  # (they start where known's do)
            return offsets[-1], any(marked)
    return None


def differing_entries(
    data: bytes, known: bytes, offsets: list[int], limit: int
) -> list[int] | None:
    """The entries of ``data`` whose bytes differ from ``known``'s at the same ``offsets``.

    ``offsets``: where each of ``known``'s entries starts, and where they end. None
    when more than ``limit`` differ. Halves are compared whole, so an index that
    differs in a few entries costs a few comparisons of its bytes.
    """
    out: list[int] = []

    def differing(low: int, high: int) -> None:
        if (
            len(out) > limit
            or data[offsets[low] : offsets[high]] == known[offsets[low] : offsets[high]]
        ):
            return
        if high - low == 1:
            out.append(low)
            return
        middle = (low + high) // 2
        differing(low, middle)
        differing(middle, high)

    if len(offsets) > 1:
        differing(0, len(offsets) - 1)
    return None if len(out) > limit else out


# an index's layout: the checksum's length, where the entries end, each extension
# (signature, start, end), whether an entry is marked intent-to-add
_Layout = tuple[int, int, list[tuple[bytes, int, int]], bool]
# the last indexes laid out or written here with their layouts: the index a copy-back
# writes is the host's index the next one reads, and its entries are walked only once
_KNOWN: tuple[tuple[bytes, _Layout], ...] = ()
_KNOWN_COUNT = 4
_KNOWN_SIZE = 1 << 24


def _known(data: bytes, layout: _Layout) -> None:
    global _KNOWN  # (replaced whole: a reader sees the old tuple or the new one)
    if len(data) <= _KNOWN_SIZE and any(data[len(data) - layout[0] :]):
        # (with a checksum: without one, which hash it is is a guess the walk makes)
        _KNOWN = ((data, layout), *_KNOWN[: _KNOWN_COUNT - 1])


def _layout(data: bytes) -> _Layout | None:
    """``data``'s layout (see ``_Layout``), None if it is no index read here."""
    for known, layout in _KNOWN:
        if known is data or known == data:
            return layout
    walked = _walk(data)
    if walked is not None:
        _known(data, walked)
    return walked


def _walk(data: bytes) -> _Layout | None:
    if len(data) < _HEADER + 20 or data[:4] != b"DIRC":
        return None
    version = int.from_bytes(data[4:8], "big")
    count = int.from_bytes(data[8:12], "big")
    if version not in (2, 3, 4):
        return None
    for size in (20, 32):
        end = len(data) - size
        if end < _HEADER:
            continue
        if any(data[end:]) and not checksum_right(data, size):
            continue
        walked = _entries_end(data, version, count, size, end)
        if walked is None:
            continue
        entries, intent = walked
        extensions: list[tuple[bytes, int, int]] = []
        at = entries
        while at + 8 <= end:
            length = int.from_bytes(data[at + 4 : at + 8], "big")
            if at + 8 + length > end or len(extensions) == _MAX_EXTENSIONS:
                break  # (past the most extensions read: no index read here)
            extensions.append((data[at : at + 4], at, at + 8 + length))
            at += 8 + length
        if at == end:
            return size, entries, extensions, intent
    return None


# git writes a handful of extensions (TREE, REUC, link, UNTR, FSMN, EOIE, IEOT, sdir): an
# index of more (millions of empty ones fit in 64 MiB) is not walked one by one
_MAX_EXTENSIONS = 64

# git finds its end-of-index-entries extension by position, not by walking: the 32
# bytes (signature, size 24, offset, hash) just before the trailer; with index threads
# on it then loads the entries from the offset table that extension leads to
_EOIE = b"EOIE\0\0\0\x18"


def positional_eoie(data: bytes, hash_size: int) -> bool:
    """Whether git would take the bytes before ``data``'s trailer for an EOIE extension."""
    at = len(data) - hash_size - 32
    return at >= _HEADER and data[at : at + 8] == _EOIE


def strip_optional_extensions(data: bytes) -> bytes | None:
    """``data`` (an index file) without its optional extensions, the checksum written again.

    The same bytes when it has none; None when it is not an index this module
    can read (then it must not come back).
    """
    layout = _layout(data)
    if layout is None:
        return None
    size, entries, extensions, intent = layout
    kept = [(s, a, b) for s, a, b in extensions if not (b"A"[0] <= s[0] <= b"Z"[0])]
    if len(kept) == len(extensions):
        # nothing to drop: but bytes of an entry or a kept extension git would take
        # for an EOIE there would make a threaded git list other entries
        return None if positional_eoie(data, size) else data
    stripped = _sealed(data[:entries] + b"".join(data[a:b] for _, a, b in kept), data, size)
    moved, at = [], entries  # the kept extensions where they now lie
    for signature, start, end in kept:
        moved.append((signature, at, at + end - start))
        at += end - start
    _known(stripped, (size, entries, moved, intent))
    return None if positional_eoie(stripped, size) else stripped


def _sealed(body: bytes, data: bytes, size: int) -> bytes:
    """``body`` with a trailer of ``size`` bytes as ``data`` has one: its checksum, or zeros."""
    if not any(data[len(data) - size :]):
        return body + bytes(size)  # index.skipHash: no checksum
    sealed = body + hashlib.new("sha1" if size == 20 else "sha256", body).digest()
    _checked(sealed, size)
    return sealed


# the last indexes whose trailing checksum was found right (or written) here, with its
# length: the readers of one copy-back (the layout here, the entries' reader) hash each once
_CHECKED: tuple[tuple[bytes, int], ...] = ()
_CHECKED_COUNT = 4


def _checked(data: bytes, size: int) -> None:
    global _CHECKED  # (replaced whole: a reader sees the old tuple or the new one)
    if len(data) <= _KNOWN_SIZE:
        _CHECKED = ((data, size), *_CHECKED[: _CHECKED_COUNT - 1])


def checksum_right(data: bytes, size: int) -> bool:
    """Whether ``data`` ends with the SHA-1 (``size`` 20) or SHA-256 (32) of what precedes it.

    The same bytes checked (or sealed) here recently are not hashed again.
    """
    for known, known_size in _CHECKED:
        if known_size == size and (known is data or known == data):
            return True
    end = len(data) - size
    algorithm = "sha1" if size == 20 else "sha256"
    if end < 0 or hashlib.new(algorithm, memoryview(data)[:end]).digest() != data[end:]:
        return False
    _checked(data, size)
    return True


def extensionless(data: bytes) -> bool:
    """Whether ``data`` is an index without any extension (what git writes as a shared index)."""
    return extension_signatures(data) == []


def extension_signatures(data: bytes) -> list[bytes] | None:
    """The signatures of ``data``'s extensions in their order, None if it is no index read here."""
    layout = _layout(data)
    return None if layout is None else [signature for signature, _, _ in layout[2]]


# a cache-tree node's counts as git writes them: its entries (-1: invalid, no object
# name follows) and its subtrees; anything git's strtol would also take is not read
_COUNTS = re.compile(rb"(-1|0|[1-9][0-9]{0,9}) (0|[1-9][0-9]{0,9})\n")


def _changed_directories(
    before: Mapping[bytes, object],
    after: Mapping[bytes, object],
    differing: Iterable[tuple[bytes, object]] | None = None,
) -> set[bytes]:
    """Every directory (b"" the top) holding an entry that differs between the two listings.

    ``differing``: the items of ``after`` not in ``before``, when the caller has them.
    """
    if differing is None:
        differing = after.items() - before.items()
    changed = [key for key, _ in differing]  # (a new entry, or another)
    changed += before.keys() - after.keys()
    out: set[bytes] = {b""} if changed else set()
    for key in changed:
        path = key.partition(b"\0")[0]
        at = path.find(b"/")
        while at >= 0:
            out.add(path[:at])
            at = path.find(b"/", at + 1)
    return out


def _node_pattern(hash_size: int) -> re.Pattern[bytes]:
    """One cache-tree node as git writes it: its name (no '/'), counts, object when valid."""
    pattern = _NODES.get(hash_size)
    if pattern is None:
        pattern = _NODES[hash_size] = re.compile(
            rb"([^\0/]*)\0(?:-1|(0|[1-9][0-9]{0,9})) (0|[1-9][0-9]{0,9})\n(?(2).{%d})" % hash_size,
            re.DOTALL,
        )
    return pattern


_NODES: dict[int, re.Pattern[bytes]] = {}


def _kept_nodes(
    tree: bytes, hash_size: int, changed: set[bytes], keys: list[bytes]
) -> bytes | None:
    """``tree`` (a cache-tree's bytes) with each node of a ``changed`` directory written invalid.

    None unless every node reads exactly as git writes one (the top unnamed and
    first, then depth first, each directory's subtrees in git's order: shorter
    names first, then by their bytes; names without '/'; counts in plain
    decimal, -1 for an invalid node), and each valid node that stays counts
    exactly the entries of ``keys`` (the new index's, sorted) below its path.
    A tree laid out as one walked recently is read by its differing nodes
    (:func:`_rewalked`).
    """
    walked = _rewalked(tree, hash_size, keys) or _walked(tree, hash_size, keys)
    if walked is None:
        return None
    _remember_walk(walked)
    if any(walked.paths[i] not in changed for i in walked.wrong):
        return None  # a valid node that stays counts other entries than the keys
    pieces: list[bytes] = []
    copied = 0
    for index in sorted(walked.index[p] for p in changed if p in walked.index):
        if walked.entries[index] is None:
            continue  # invalid already
        start, end = walked.starts[index], walked.starts[index + 1]
        name, subtrees = walked.names[index], walked.subtrees[index]
        pieces += (tree[copied:start], b"%s\0-1 %s\n" % (name, subtrees))
        copied = end
    pieces.append(tree[copied:])
    return b"".join(pieces)


class _Walk:
    """A cache-tree read node by node, and how its valid nodes count against some keys.

    ``starts``: where each node starts (and, last, where the tree ends); per node
    its name, subtree count (as written), path, entry count (None: invalid) and the
    number of ``keys`` below its path; ``wrong``: the valid nodes whose entry count
    is not that number (or that count nothing below a named path); ``index``: each
    path's node.
    """

    __slots__ = (
        "counts", "entries", "hash_size", "index", "keys", "names", "paths", "starts",
        "subtrees", "tree", "wrong",
    )  # fmt: skip

    def __init__(self, tree: bytes, hash_size: int, keys: list[bytes]) -> None:
        self.tree, self.hash_size, self.keys = tree, hash_size, keys
        self.starts: list[int] = []
        self.names: list[bytes] = []
        self.subtrees: list[bytes] = []
        self.paths: list[bytes] = []
        self.entries: list[int | None] = []
        self.counts: list[int] = []
        self.wrong: set[int] = set()
        self.index: dict[bytes, int] = {}


def _wrong(entries: int | None, count: int, path: bytes) -> bool:
    return entries is not None and (entries != count or (bool(path) and not count))


def _walked(tree: bytes, hash_size: int, keys: list[bytes]) -> _Walk | None:
    """``tree`` walked whole (see :func:`_kept_nodes`); None unless every node reads as git's."""
    walk = _Walk(tree, hash_size, keys)
    at = 0
    # the directory whose subtrees are being read (None: the top is next), how many
    # of them are still to come, the last one's name; the directories above it
    parent: bytes | None = None
    left, last = 0, b""
    stack: list[tuple[bytes | None, int, bytes]] = []
    for node in _node_pattern(hash_size).finditer(tree, at):
        start, end = node.span()
        if start != at:
            return None
        at = end
        name, entries, subtrees = node.groups()
        if parent is None:
            if start or name:
                return None  # a second top, or a named one
            path, count = b"", len(keys)
        else:
            if not name or (len(last), last) >= (len(name), name):
                return None  # (the first name compares after b"": its length is above 0)
            path = parent + b"/" + name if parent else name
            last = name
            left -= 1
            if not left:
                parent, left, last = stack.pop() if stack else (None, 0, b"")
            below = bisect_left(keys, path + b"/")
            count = bisect_left(keys, path + b"0", below) - below  # ('0' follows '/')
        valid = None if entries is None else int(entries)
        if _wrong(valid, count, path):
            walk.wrong.add(len(walk.starts))
        walk.index[path] = len(walk.starts)
        walk.starts.append(start)
        walk.names.append(name)
        walk.subtrees.append(subtrees)
        walk.paths.append(path)
        walk.entries.append(valid)
        walk.counts.append(count)
        if subtrees != b"0":
            if parent is not None:
                stack.append((parent, left, last))
            parent, left, last = path, int(subtrees), b""
        elif parent is None:
            break  # the last node of the top's tree
    if at != len(tree) or parent is not None:
        return None
    walk.starts.append(at)
    return walk


# the last cache-trees walked here (see _Walk); a host's next one is mostly laid out alike
_WALKS: tuple[_Walk, ...] = ()
_WALKS_COUNT = 2
_WALK_NODES = 1 << 14  # a tree of more nodes is walked whole each time
_DIFFERING_NODES = 64  # differing nodes read alone at most; past them the tree is walked whole


def _remember_walk(walk: _Walk) -> None:
    global _WALKS  # (replaced whole: a reader sees the old tuple or the new one)
    if len(walk.paths) <= _WALK_NODES and not any(w is walk for w in _WALKS):
        _WALKS = (walk, *_WALKS[: _WALKS_COUNT - 1])


def _rewalked(tree: bytes, hash_size: int, keys: list[bytes]) -> _Walk | None:
    """:func:`_walked` of ``tree`` from a recent walk of a tree laid out alike, or None.

    A node whose bytes are those of the recent tree's node at the same offset
    (every node before it laid out alike) reads alike: it is read from its own
    bytes, its path from its ancestors'. Each other node is read at its offset and
    must end where that one ended with the same name and subtree count (the tree's
    shape unchanged); only its entry count may differ. A node's count of ``keys``
    below its path is found again when its directory (or one below it) holds a key
    that only one of the two key lists holds.
    """
    for known in _WALKS:
        if known.hash_size != hash_size or len(known.tree) != len(tree):
            continue
        changed = differing_entries(tree, known.tree, known.starts, _DIFFERING_NODES)
        if changed is None:
            continue
        walk = _Walk(tree, hash_size, keys)
        walk.starts, walk.names, walk.subtrees = known.starts, known.names, known.subtrees
        walk.paths, walk.index = known.paths, known.index
        walk.entries, walk.counts = list(known.entries), known.counts
        pattern = _node_pattern(hash_size)
        for index in changed:
            node = pattern.match(tree, known.starts[index])
            if (
                node is None
                or node.end() != known.starts[index + 1]
                or node[1] != known.names[index]
                or node[3] != known.subtrees[index]
            ):
                break  # shaped otherwise: walked whole
            walk.entries[index] = None if node[2] is None else int(node[2])
        else:
            again = set(changed)
            if keys != known.keys:
                walk.counts = list(known.counts)
                directories = {b""}
                for key in set(keys).symmetric_difference(known.keys):
                    path = key.partition(b"\0")[0]
                    at = path.find(b"/")
                    while at >= 0:
                        directories.add(path[:at])
                        at = path.find(b"/", at + 1)
                for directory in directories:
                    found = known.index.get(directory)
                    if found is None:
                        continue
                    if directory:
                        below = bisect_left(keys, directory + b"/")
                        walk.counts[found] = bisect_left(keys, directory + b"0", below) - below
                    else:
                        walk.counts[found] = len(keys)
                    again.add(found)
            walk.wrong = known.wrong - again
            for index in again:
                if _wrong(walk.entries[index], walk.counts[index], walk.paths[index]):
                    walk.wrong.add(index)
            return walk
    return None


def _sorted_listing(data: bytes, listing: Mapping[bytes, object]) -> list[bytes] | None:
    """The listing's keys when they are the file's entries, each once, in git's order."""
    keys = list(listing)
    if int.from_bytes(data[8:12], "big") != len(keys) or keys != sorted(keys):
        return None  # an entry twice (the listing keeps one), or out of order
    return keys


def with_proved_cache_tree(
    new: bytes,
    host: bytes,
    before: Mapping[bytes, object],
    after: Mapping[bytes, object],
    differing: Iterable[tuple[bytes, object]] | None = None,
) -> bytes | None:
    """``new`` with the nodes of the ``host`` index's cache-tree that are proved right for it.

    ``new``: an index without extensions (what a command left, its caches
    dropped), listed as ``after``; ``host``: the host's index it replaces,
    listed as ``before`` (keys and entries as :func:`._overlay.index_entries`
    gives them). The command's own cache-tree is never read. A node of the
    host's is kept when every entry below its directory is the same in both
    listings (path, stage, mode, object, flags): it names the tree those
    entries make, so the host's next commit reuses it rightly. Every other
    node, and so each ancestor of a changed entry, is written invalid (entry
    count -1), which git recomputes. None (the index stays without one) when
    either index is not read here, holds an entry marked intent-to-add, lists
    an entry twice or out of order, or the host's cache-tree does not read
    exactly as git writes one. ``differing``: the items of ``after`` not in
    ``before``, when the caller has them (else found here).
    """
    layout = _layout(new)
    if layout is None or layout[2] or layout[3]:
        return None
    size, entries, _, _ = layout
    old = _layout(host)
    if old is None or old[0] != size or old[3] or any(s[0] > 90 for s, _, _ in old[2]):
        return None  # (a split or sparse host index: its listing is another file's too)
    tree = next((host[a + 8 : b] for s, a, b in old[2] if s == b"TREE"), None)
    keys = _sorted_listing(new, after)
    if tree is None or keys is None or _sorted_listing(host, before) is None:
        return None
    kept = _kept_nodes(tree, size, _changed_directories(before, after, differing), keys)
    if kept is None:
        return None
    out = _sealed(new[:entries] + b"TREE" + len(kept).to_bytes(4, "big") + kept, new, size)
    _known(out, (size, entries, [(b"TREE", entries, entries + 8 + len(kept))], False))
    return None if positional_eoie(out, size) else out


# an entry's cached stat data but its mode: ctime and mtime (seconds, nanoseconds), dev
# and ino; then, after the mode, uid, gid and size
_STAT_BEFORE_MODE = 24
_STAT_AFTER_MODE = (28, 40)


def with_stat_unknown(data: bytes, keys: set[bytes], *, held: bool = False) -> bytes | None:
    """``data`` (an index file) with the cached stat data of the entries ``keys`` zeroed.

    ``keys``: listing keys (the path, or the path, a NUL and the stage of an
    unmerged entry), as :func:`._overlay.index_entries` gives them. Git takes an
    entry whose stat data is the work tree file's own for that file's content
    (``git diff`` shows nothing, and ``git diff --cached`` reads the file in the
    staged blob's place): with zeros there it hashes the file instead, as it does
    for an entry it cannot trust. The mode stays. The same bytes when ``keys`` is
    empty; None when ``data`` is no index read here or (unless ``held``: then the
    keys it holds are zeroed, the same bytes when it holds none) holds no entry
    of a key. An index of version 2 or 3 walked before (its entries' offsets kept) is
    searched by halves, not walked. A split index (its entries those changed
    since its shared index, a replaced one without its name) has every entry
    it holds zeroed.
    """
    if not keys:
        return data
    layout = _layout(data)
    if layout is None:
        return None
    size, end = layout[0], layout[1]
    version = int.from_bytes(data[4:8], "big")
    split = any(signature == b"link" for signature, _, _ in layout[2])
    offsets = _offsets(data, size, end) if version != 4 and not split else None
    starts = (
        _walked_starts(data, version, size, end, None if split else keys, every=not held)
        if offsets is None
        else _searched_starts(data, size, offsets, keys, every=not held)
    )
    if starts is None:
        return None
    if not starts:
        return data
    out = bytearray(data)
    for at in starts:
        out[at : at + _STAT_BEFORE_MODE] = bytes(_STAT_BEFORE_MODE)
        out[at + _STAT_AFTER_MODE[0] : at + _STAT_AFTER_MODE[1]] = bytes(12)
    sealed = _sealed(bytes(out[: len(data) - size]), data, size)
    _known(sealed, layout)
    return sealed


def marks_intent(data: bytes) -> bool:
    """Whether an entry of ``data`` (an index) is marked intent-to-add (True: unreadable)."""
    layout = _layout(data)
    return layout is None or layout[3]


def restamped_entries(data: bytes, host: bytes) -> tuple[set[bytes], set[bytes]] | None:
    """The entries ``data`` holds as ``host`` does but stamped otherwise: their keys.

    Returns the keys of those whose cached stat data differ, and of those newly
    marked intent-to-add. Both are the command's to forge while the listing
    (path, mode, object) stays the host's:

    - git takes an entry whose stat data matches the work tree file for the
      file's content and never reads the file. Through the overlay a command
      sees the host's files' real stat data, so it can stamp the unchanged
      entry of a changed file with that file's stat data: every diff of the
      host's git would then pass over the change (their stat data is to be made
      unknown, :func:`with_stat_unknown`);
    - git leaves an entry marked intent-to-add (``git add -N``, which never marks
      a tracked path) out of every tree it writes: the host's next commit would
      delete the file.

    Keys as :func:`._overlay.index_entries` gives them (the path, or the path,
    a NUL and the stage). An entry ``host`` does not hold is left out (a new
    entry: the listing's comparison finds it). None when either is no index
    read here or a split index (whose entries live in two files): then every
    entry is to be taken as stamped otherwise.
    """
    new, old = _layout(data), _layout(host)
    if new is None or old is None or new[0] != old[0]:
        return None
    if any(s == b"link" for s, _, _ in new[2]) or any(s == b"link" for s, _, _ in old[2]):
        return None
    size = new[0]
    version = int.from_bytes(data[4:8], "big")
    offsets = None
    if version != 4 and data[:12] == host[:12] and new[1] == old[1]:
        # where each entry starts, from a recent walk of either index (the host's git
        # may have written its own since the last copy-back): an entry whose bytes are
        # the same in both starts and ends alike in both, each other one is read in both
        offsets = _offsets(host, size, old[1]) or _offsets(data, size, new[1])
    if offsets is not None:
        differing = differing_entries(data, host, offsets, _DIFFERING)
        if differing is not None:
            restamped: set[bytes] = set()
            intended: set[bytes] = set()
            for index in differing:
                at, following = offsets[index], offsets[index + 1]
                mine, theirs = _stamp(data, at, size), _stamp(host, at, size)
                if mine[0] != theirs[0] or mine[1] != following or theirs[1] != following:
                    break  # another entry there, or laid out otherwise: read whole
                key = _listing_key(*mine[0])
                if mine[2] != theirs[2]:
                    restamped.add(key)
                if mine[3] and not theirs[3]:
                    intended.add(key)
            else:
                return restamped, intended
    mine_all = _stamps(data, version, size, new[1])
    theirs_all = _stamps(host, int.from_bytes(host[4:8], "big"), size, old[1])
    if mine_all is None or theirs_all is None:
        return None
    restamped, intended = set(), set()
    for key, (stamp, intent) in mine_all.items():
        held = theirs_all.get(key)
        if held is None:
            continue
        if stamp != held[0]:
            restamped.add(key)
        if intent and not held[1]:
            intended.add(key)
    return restamped, intended


def _listing_key(path: bytes, stage: int) -> bytes:
    return path if not stage else path + b"\0" + str(stage).encode()


def _flags(data: bytes, at: int, size: int) -> tuple[int, int, bytes, bool]:
    """The entry at ``at``: its flags, name's start, stat data, intent-to-add mark.

    The stat data is without the mode.
    """
    fixed = at + _STAT + size
    flags = int.from_bytes(data[fixed : fixed + 2], "big")
    name = fixed + 2
    intent = False
    if flags & _EXTENDED:
        intent = bool(data[name] << 8 & _INTENT_TO_ADD)
        name += 2
    stamp = data[at : at + _STAT_BEFORE_MODE] + data[at + _STAT_AFTER_MODE[0] : at + _STAT]
    return flags, name, stamp, intent


def _stamp(data: bytes, at: int, size: int) -> tuple[tuple[bytes, int], int, bytes, bool]:
    """The entry (version 2 or 3) at ``at``: its key, end, stat data, intent-to-add mark.

    The key is the path and the stage; the stat data is without the mode.
    """
    _, name, stamp, intent = _flags(data, at, size)
    key = _entry_key(data, at, size)
    return key, at + ((name - at + len(key[0]) + 8) & ~7), stamp, intent


def _stamps(
    data: bytes, version: int, size: int, end: int
) -> dict[bytes, tuple[bytes, bool]] | None:
    """Each entry's key, its stat data but the mode, whether it is marked intent-to-add."""
    out: dict[bytes, tuple[bytes, bool]] = {}
    at = _HEADER
    previous = b""
    for _ in range(int.from_bytes(data[8:12], "big")):
        if version != 4:
            (path, stage), following, stamp, intent = _stamp(data, at, size)
        else:
            flags, name, stamp, intent = _flags(data, at, size)
            strip = _varint(data, name)
            nul = -1 if strip is None else data.find(b"\0", strip[1], end)
            if strip is None or nul < 0 or strip[0] > len(previous):
                return None
            path = previous[: len(previous) - strip[0]] + data[strip[1] : nul]
            previous, following, stage = path, nul + 1, (flags >> 12) & 3
        if following > end:
            return None
        out[_listing_key(path, stage)] = (stamp, intent)
        at = following
    return out


def shared_index_name(data: bytes) -> str | None:
    """The file name of the shared index that ``data``, a split index, names (None: not split)."""
    layout = _layout(data)
    link = None if layout is None else next((a for s, a, _ in layout[2] if s == b"link"), None)
    if layout is None or link is None:
        return None
    return "sharedindex." + data[link + 8 : link + 8 + layout[0]].hex()


def with_shared_stat_unknown(
    data: bytes, shared: bytes, keys: set[bytes]
) -> tuple[bytes, bytes] | None:
    """A split index ``data`` and its shared index ``shared``, the entries ``keys`` unknown there.

    See :func:`with_stat_unknown`: an entry of a split index may be held by its
    shared index alone, with the cached stat data that index gives it. Returns
    the shared index with the stat data of each entry of ``keys`` it holds
    zeroed, and ``data`` naming that index (its checksum is its name); both as
    they were when it holds none. None when either is no index read here, the
    shared index has extensions or no checksum to be named by, or ``data`` is
    not split.
    """
    layout, held = _layout(data), _layout(shared)
    if layout is None or held is None or held[2] or held[0] != layout[0]:
        return None
    size = layout[0]
    link = next((a for s, a, _ in layout[2] if s == b"link"), None)
    if link is None or not any(shared[len(shared) - size :]):
        return None
    version = int.from_bytes(shared[4:8], "big")
    starts = _walked_starts(shared, version, size, held[1], keys, every=False)
    if starts is None:
        return None
    if not starts:
        return data, shared
    out = bytearray(shared)
    for at in starts:
        out[at : at + _STAT_BEFORE_MODE] = bytes(_STAT_BEFORE_MODE)
        out[at + _STAT_AFTER_MODE[0] : at + _STAT_AFTER_MODE[1]] = bytes(12)
    new_shared = _sealed(bytes(out[: len(shared) - size]), shared, size)
    at = link + 8
    body = data[:at] + new_shared[-size:] + data[at + size : len(data) - size]
    new_data = _sealed(body, data, size)
    _known(new_data, layout)
    return new_data, new_shared


def _offsets(data: bytes, size: int, end: int) -> list[int] | None:
    """Where each entry of ``data`` starts (and, last, where they end), from a recent walk."""
    for known, oid, offsets, _ in _WALKED:
        if oid == size and offsets[-1] == end and known[:end] == data[:end]:
            return offsets
    return None


def _entry_key(data: bytes, at: int, size: int) -> tuple[bytes, int]:
    """The path and stage of the entry (version 2 or 3) at ``at``."""
    fixed = at + _STAT + size
    flags = int.from_bytes(data[fixed : fixed + 2], "big")
    name = fixed + 2 + (2 if flags & _EXTENDED else 0)
    length = flags & _NAME_MASK
    nul = name + length if length < _NAME_MASK else data.find(b"\0", name)
    return data[name:nul], (flags >> 12) & 3


def _split_key(key: bytes) -> tuple[bytes, int]:
    path, _, stage = key.partition(b"\0")
    return path, int(stage or b"0")


def _searched_starts(
    data: bytes, size: int, offsets: list[int], keys: set[bytes], *, every: bool = True
) -> list[int] | None:
    """Where each key's entry starts, each found by halves (entries in git's order).

    None when a key is not held (unless not ``every``: then where those held start).
    """
    starts: list[int] = []
    for key in keys:
        wanted = _split_key(key)
        low, high = 0, len(offsets) - 1
        while low < high:
            middle = (low + high) // 2
            if _entry_key(data, offsets[middle], size) < wanted:
                low = middle + 1
            else:
                high = middle
        if low == len(offsets) - 1 or _entry_key(data, offsets[low], size) != wanted:
            if every:
                return None
            continue
        starts.append(offsets[low])
    return starts


def _walked_starts(
    data: bytes, version: int, size: int, end: int, keys: set[bytes] | None, *, every: bool = True
) -> list[int] | None:
    """Where each key's entry starts (None: every entry), the entries walked in order.

    None when a key is not held (unless not ``every``: then where those held start).
    """
    wanted = {_split_key(key) for key in keys or ()}
    starts: list[int] = []
    at = _HEADER
    previous = b""
    for _ in range(int.from_bytes(data[8:12], "big")):
        fixed = at + _STAT + size
        flags = int.from_bytes(data[fixed : fixed + 2], "big")
        name = fixed + 2 + (2 if flags & _EXTENDED else 0)
        if version == 4:
            strip = _varint(data, name)
            nul = -1 if strip is None else data.find(b"\0", strip[1], end)
            if strip is None or nul < 0:
                return None
            path = previous[: len(previous) - strip[0]] + data[strip[1] : nul]
            previous, following = path, nul + 1
        else:
            path, _ = _entry_key(data, at, size)
            following = at + ((name - at + len(path) + 8) & ~7)
        if keys is None or (path, (flags >> 12) & 3) in wanted:
            starts.append(at)
            if keys is not None and len(starts) == len(wanted):
                return starts
        at = following
    return starts if keys is None or not every else None  # (a key the file does not hold)
