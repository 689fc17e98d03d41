"""A git index read in Python exactly as ``git ls-files --stage -v -z`` lists it, or not at all.

The copy-back judges a command's new index by its entries (path, stage, mode,
object, skip-worktree and assume-unchanged bits), and the host's index beside
it; asking git costs a process each. :func:`read_index` reads the file itself
only where its reading is proved to be git's (a differential test compares it
with ``git ls-files`` on indexes git wrote and on hostile mutations of them):
format version 2 or 3 in a repository of SHA-1 object names, the whole file's
checksum right (git itself does not check it), every entry inside
the file, no name holding a NUL, no extended flag git does not know, and no
extension but the cache tree, the resolve-undo record and the untracked cache
(none of which changes an entry as listed). Any other index (version 4, a
split or sparse index, an fsmonitor extension, entry offset tables, which git
may load the entries by, one git would refuse or read past its end) is
answered None: the caller asks git.
"""

from __future__ import annotations

import os
import struct
from binascii import hexlify

from ._files import read_regular_file
from ._index import checksum_right, differing_entries, positional_eoie

__all__ = ["in_git_order", "read_index"]

# what an entry of the listing holds: the tag (H, S, M; lower case when assume-unchanged),
# the mode and the object name as git prints them
IndexEntries = dict[bytes, tuple[bytes, bytes, bytes]]

_LIMIT = 1 << 26
_HEADER = struct.Struct(">4sII")
_ENTRY = struct.Struct(">I12x20sH")
_FLAGS = struct.Struct(">H")
_NAME_MASK = 0x0FFF
_EXTENDED = 0x4000
_VALID = 0x8000  # assume-unchanged
_STAGE_SHIFT = 12
_INTENT_TO_ADD = 0x2000  # the extended flags git knows
_SKIP_WORKTREE = 0x4000
# extensions that change no entry as ls-files lists them
# (the entry offset table is not: with index.threads git loads the entries from its offsets)
_HARMLESS = frozenset({b"TREE", b"REUC", b"UNTR"})
_GITLINK = 0o160000


def in_git_order(last: bytes, last_stage: int, name: bytes, stage: int) -> bool:
    """Whether entry ``(name, stage)`` may follow ``(last, last_stage)`` as git writes them.

    Git keeps its entries sorted by name (bytewise), then stage, each once, and
    never a path at stage 0 beside the same path's conflict stages. It reads an
    index breaking that without complaint, and its lookups, its tree writer and
    ``git checkout`` then take the FIRST of two entries of one path: a reader
    keeping the last would judge an entry git never uses and miss the one it
    does. An index out of this order is refused, never judged.
    """
    if name != last:
        return name > last
    return last_stage > 0 and stage > last_stage


def _sha1_repository(git_dir: str) -> bool:
    """Whether git reads the repository of ``git_dir`` with SHA-1 object names (its default).

    Its ``config`` names no object format (not even in a comment) and includes no
    other file, and no common directory holds another configuration.
    """
    if os.path.lexists(os.path.join(git_dir, "commondir")):
        return False
    config = read_regular_file(os.path.join(git_dir, "config"), _LIMIT)
    if config is None:
        return not os.path.lexists(os.path.join(git_dir, "config"))
    lowered = config.lower()
    return b"objectformat" not in lowered and b"include" not in lowered


def read_index(
    path: str, git_dir: str, gitlinks: list[bytes] | None = None, *, content: bytes | None = None
) -> IndexEntries | None:
    """The entries of the index at ``path`` keyed as :func:`._overlay.index_entries` keys them.

    ``git_dir``: the repository git reads it for (its object names' length).
    None when it is not an index read here (see the module): git is asked.
    ``gitlinks`` receives each gitlink's path in the file's order. ``content``:
    the index's bytes (then ``path`` is not read).
    """
    if not _sha1_repository(git_dir):
        return None
    if content is None:
        content = read_regular_file(path, _LIMIT)
    if content is None or len(content) >= _LIMIT:
        return None
    hash_size = 20
    if len(content) < 12 + hash_size or not checksum_right(content, hash_size):
        return None
    if positional_eoie(content, hash_size):
        return None  # git finds an EOIE by position: a threaded git may list other entries
    signature, version, count = _HEADER.unpack_from(content, 0)
    if signature != b"DIRC" or version not in (2, 3):
        return None
    end = len(content) - hash_size
    parsed = _reparsed(content, count, end)
    if parsed is None:
        parsed = _parsed(content, count, end)
        if parsed is None:
            return None
    elif parsed is _REFUSED:
        return None
    _remember(content, parsed)
    keys, values, offsets = parsed
    at = offsets[-1]
    if at > end:
        return None
    while at < end:
        if at + 8 > end:
            return None
        signature, size = struct.unpack_from(">4sI", content, at)
        if signature not in _HARMLESS or at + 8 + size > end:
            return None
        at += 8 + size
    if gitlinks is not None:
        pairs = zip(keys, values, strict=True)
        gitlinks += [key.partition(b"\0")[0] for key, value in pairs if value[1] == b"160000"]
    return dict(zip(keys, values, strict=True))


# an index's entries as read: their keys, their listings, where each starts (and, last,
# where the entries end)
_Parsed = tuple[list[bytes], list[tuple[bytes, bytes, bytes]], list[int]]
_REFUSED: _Parsed = ([], [], [])  # (an entry git would not read as read here)
# the last indexes read, with their entries: a command's new index is mostly the host's
# one, entry for entry at the same offsets, and only the entries that differ are read
_RECENT: tuple[tuple[bytes, _Parsed], ...] = ()
_RECENT_COUNT = 2  # (a command's new index and the host's)
_RECENT_SIZE = 1 << 23  # (about 100,000 entries: their listing is kept beside the bytes)
_MODES: dict[int, bytes] = {}
_DIFFERING = 64  # differing entries read alone at most; past them the index is read whole


def _remember(content: bytes, parsed: _Parsed) -> None:
    global _RECENT  # (replaced whole: a reader sees the old tuple or the new one)
    if len(content) <= _RECENT_SIZE and not any(known is content for known, _ in _RECENT):
        _RECENT = ((content, parsed), *_RECENT[: _RECENT_COUNT - 1])


def _entry(
    content: bytes, at: int, end: int
) -> tuple[bytes, tuple[bytes, bytes, bytes], int, bytes, int] | None:
    """The entry at ``at``: its key, its listing, where the next starts, its name and stage.

    None when git would read it otherwise (see the module).
    """
    name_at = at + 62  # times, device, inode, mode, ids, size, object name, flags
    if name_at > end:
        return None
    mode, oid, flags = _ENTRY.unpack_from(content, at + 24)
    length = flags & _NAME_MASK
    extended = 0
    if flags & _EXTENDED:
        if name_at + 2 > end:
            return None
        (extended,) = _FLAGS.unpack_from(content, name_at)
        if extended & ~(_INTENT_TO_ADD | _SKIP_WORKTREE):
            return None  # git refuses the index
        name_at += 2
    if length == _NAME_MASK:  # a longer name: up to its NUL
        length = content.find(b"\0", name_at, end) - name_at
    tail = name_at + length
    if length <= 0 or tail >= end or content.find(b"\0", name_at, tail + 1) != tail:
        return None  # (git reads a name on to its NUL)
    stage = (flags >> _STAGE_SHIFT) & 3
    tag = b"M" if stage else b"S" if extended & _SKIP_WORKTREE else b"H"
    if flags & _VALID:
        tag = tag.lower()
    name = content[name_at:tail]
    shown = _MODES.get(mode)
    if shown is None:
        shown = _MODES[mode] = b"%06o" % mode
    key = name + b"\0%d" % stage if stage else name
    # the entry, its name's NUL and padding
    return key, (tag, shown, hexlify(oid)), at + ((tail + 8 - at) & ~7), name, stage


def _parsed(content: bytes, count: int, end: int) -> _Parsed | None:
    """Every entry read in turn, each in git's order after the last; None: refused."""
    keys: list[bytes] = []
    values: list[tuple[bytes, bytes, bytes]] = []
    offsets = [12]
    last, last_stage = b"", -1  # git writes them strictly in order
    at = 12
    entry = _entry
    for _ in range(count):
        read = entry(content, at, end)
        if read is None:
            return None
        key, value, at, name, stage = read
        if stage or last_stage:
            if not in_git_order(last, last_stage, name, stage):
                return None
        elif name <= last:
            return None  # out of git's order, or a name twice (see in_git_order)
        last, last_stage = name, stage
        keys.append(key)
        values.append(value)
        offsets.append(at)
    if at > end:
        return None
    return keys, values, offsets


def _reparsed(content: bytes, count: int, end: int) -> _Parsed | None:
    """The entries read from a recent index laid out alike: only the differing ones read.

    An entry whose bytes are those of the recent index's entry at the same offset
    (every entry before it laid out alike) reads alike; each other one is read and
    must end where that one ended, and is checked in order against its neighbours.
    None when no recent index is laid out so; :data:`_REFUSED` when an entry is refused.
    """
    for known, (keys, values, offsets) in _RECENT:
        if len(keys) != count or offsets[-1] > end or known[:12] != content[:12]:
            continue
        changed = differing_entries(content, known, offsets, _DIFFERING)
        if changed is None:
            continue  # (read whole: about as fast)
        keys, values = list(keys), list(values)
        for index in changed:
            read = _entry(content, offsets[index], end)
            if read is None:
                return _REFUSED
            if read[2] != offsets[index + 1]:
                break  # laid out otherwise from here
            keys[index], values[index] = read[0], read[1]
        else:
            for index in changed:
                for first in (index - 1, index):
                    if first >= 0 and first + 1 < count and not _ordered(keys, first):
                        return _REFUSED
            return keys, values, offsets
    return None


def _ordered(keys: list[bytes], first: int) -> bool:
    """Whether entry ``first + 1`` may follow entry ``first`` (see :func:`in_git_order`)."""
    name, _, stage = keys[first].partition(b"\0")
    next_name, _, next_stage = keys[first + 1].partition(b"\0")
    return in_git_order(name, int(stage or 0), next_name, int(next_stage or 0))
