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
trailing checksum is written again. The required extensions (lower case:
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

__all__ = [
    "extension_signatures",
    "extensionless",
    "positional_eoie",
    "strip_optional_extensions",
]

_HEADER = 12
_STAT = 40  # ctime, mtime (seconds and nanoseconds), dev, ino, mode, uid, gid, size
_EXTENDED = 0x4000
_NAME_MASK = 0x0FFF


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


def _entries_end(data: bytes, version: int, count: int, oid: int, end: int) -> int | None:
    """Where the entries end (the first extension starts), None if they do not parse.

    Each entry's length is read as git reads it (``read-cache.c``): the path's
    length from the flags, or up to its NUL when the flags hold 0xFFF.
    """
    at = _HEADER
    previous = 0  # version 4: the length of the previous entry's path
    for _ in range(count):
        fixed = at + _STAT + oid
        if fixed + 2 > end:
            return None
        flags = int.from_bytes(data[fixed : fixed + 2], "big")
        name = fixed + 2
        if flags & _EXTENDED:
            if version < 3:
                return None
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
    return at


def _layout(data: bytes) -> tuple[int, int, list[tuple[bytes, int, int]]] | None:
    """The checksum's length, where the entries end, and each extension (signature, start, end)."""
    if len(data) < _HEADER + 20 or data[:4] != b"DIRC":
        return None
    version = int.from_bytes(data[4:8], "big")
    count = int.from_bytes(data[8:12], "big")
    if version not in (2, 3, 4):
        return None
    for size, algorithm in ((20, "sha1"), (32, "sha256")):
        end = len(data) - size
        if end < _HEADER:
            continue
        trailer = data[end:]
        if any(trailer) and hashlib.new(algorithm, data[:end]).digest() != trailer:
            continue
        entries = _entries_end(data, version, count, size, end)
        if entries is None:
            continue
        extensions: list[tuple[bytes, int, int]] = []
        at = entries
        while at + 8 <= end:
            length = int.from_bytes(data[at + 4 : at + 8], "big")
            if at + 8 + length > end:
                break
            extensions.append((data[at : at + 4], at, at + 8 + length))
            at += 8 + length
        if at == end:
            return size, entries, extensions
    return None


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
    size, entries, extensions = layout
    kept = [(s, a, b) for s, a, b in extensions if not (b"A"[0] <= s[0] <= b"Z"[0])]
    if len(kept) == len(extensions):
        # nothing to drop: but bytes of an entry or a kept extension git would take
        # for an EOIE there would make a threaded git list other entries
        return None if positional_eoie(data, size) else data
    body = data[:entries] + b"".join(data[a:b] for _, a, b in kept)
    end = len(data) - size
    if not any(data[end:]):
        stripped = body + bytes(size)  # index.skipHash: no checksum
    else:
        stripped = body + hashlib.new("sha1" if size == 20 else "sha256", body).digest()
    return None if positional_eoie(stripped, size) else stripped


def extensionless(data: bytes) -> bool:
    """Whether ``data`` is an index without any extension (what git writes as a shared index)."""
    return extension_signatures(data) == []


def extension_signatures(data: bytes) -> list[bytes] | None:
    """The signatures of ``data``'s extensions in their order, None if it is no index read here."""
    layout = _layout(data)
    return None if layout is None else [signature for signature, _, _ in layout[2]]
