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

import hashlib
import os
import struct
from binascii import hexlify

from ._files import read_regular_file
from ._index import positional_eoie

__all__ = ["in_git_order", "read_index"]

# what an entry of the listing holds: the tag (H, S, M; lower case when assume-unchanged),
# the mode and the object name as git prints them
IndexEntries = dict[bytes, tuple[bytes, bytes, bytes]]

_LIMIT = 1 << 26
_HEADER = struct.Struct(">4sII")
_ENTRY = struct.Struct(">I12x20sH")
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


def read_index(path: str, git_dir: str, gitlinks: list[bytes] | None = None) -> IndexEntries | None:
    """The entries of the index at ``path`` keyed as :func:`._overlay.index_entries` keys them.

    ``git_dir``: the repository git reads it for (its object names' length).
    None when it is not an index read here (see the module): git is asked.
    ``gitlinks`` receives each gitlink's path in the file's order.
    """
    if not _sha1_repository(git_dir):
        return None
    content = read_regular_file(path, _LIMIT)
    if content is None or len(content) >= _LIMIT:
        return None
    hash_size = 20
    if len(content) < 12 + hash_size or hashlib.sha1(content[:-20]).digest() != content[-20:]:
        return None
    if positional_eoie(content, hash_size):
        return None  # git finds an EOIE by position: a threaded git may list other entries
    signature, version, count = _HEADER.unpack_from(content, 0)
    if signature != b"DIRC" or version not in (2, 3):
        return None
    end = len(content) - hash_size
    fixed = 40 + hash_size  # times, device, inode, mode, ids, size, object name
    entry = _ENTRY.unpack_from  # from the mode: mode, (ids, size), object name, flags
    modes: dict[int, bytes] = {}
    out: IndexEntries = {}
    links: list[bytes] = []
    at = 12
    find = content.find
    last = b""  # the previous entry's name and stage: git writes them strictly in order
    last_stage = -1
    for _ in range(count):
        name_at = at + fixed + 2
        if name_at > end:
            return None
        mode, oid, flags = entry(content, at + 24)
        length = flags & _NAME_MASK
        if not flags & 0xF000 and length != _NAME_MASK:
            # (the usual entry: stage 0, no flag; its name ends with the NUL at its length)
            tail = name_at + length
            if not length or tail >= end or find(b"\0", name_at, tail + 1) != tail:
                return None  # (git reads a name on to its NUL)
            key = content[name_at:tail]
            tag = b"H"
            if key <= last:
                return None  # out of git's order, or a name twice (see in_git_order)
            last, last_stage = key, 0
        else:
            extended = 0
            if flags & _EXTENDED:
                if name_at + 2 > end:
                    return None
                (extended,) = struct.unpack_from(">H", content, name_at)
                if extended & ~(_INTENT_TO_ADD | _SKIP_WORKTREE):
                    return None  # git refuses the index
                name_at += 2
            if length == _NAME_MASK:  # a longer name: up to its NUL
                length = find(b"\0", name_at, end) - name_at
            tail = name_at + length
            if length <= 0 or tail >= end or find(b"\0", name_at, tail + 1) != tail:
                return None
            stage = (flags >> _STAGE_SHIFT) & 3
            tag = b"M" if stage else b"S" if extended & _SKIP_WORKTREE else b"H"
            if flags & _VALID:
                tag = tag.lower()
            name = content[name_at:tail]
            if not in_git_order(last, last_stage, name, stage):
                return None
            last, last_stage = name, stage
            key = name + (b"\0%d" % stage if stage else b"")
        shown = modes.get(mode)
        if shown is None:
            shown = modes[mode] = b"%06o" % mode
        out[key] = (tag, shown, hexlify(oid))
        if mode == _GITLINK:
            links.append(key.partition(b"\0")[0])
        at += (tail + 8 - at) & ~7  # the entry, its name's NUL and padding
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
        gitlinks += links
    return out
