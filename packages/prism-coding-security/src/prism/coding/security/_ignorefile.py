"""A ``.gitignore`` that hides itself, judged by what it holds.

``*`` in a new ``tests/fixtures/.gitignore`` hides the file and everything
beside it from every ``git status`` (a planted ``conftest.py`` included): the
review of a command's changes would show nothing. Every way a file reaches a
root judges it alike: the copy-back of a private layer, the write and edit tools
(:mod:`._contained`); the host-opened redirections and in-place edits leave such
a file to the layer (:mod:`._redirects`).
"""

from __future__ import annotations

import fnmatch

from ._protected import fold_name

__all__ = ["IGNORE_READ", "ignore_file", "self_ignoring"]

HIDES_ITSELF = (
    "an ignore file that ignores itself: git status would show neither it nor what it "
    "hides (review with git status --ignored)"
)

IGNORE_READ = 1 << 20
"""Bytes of an ignore file read, at most: a longer one is refused unread."""


def ignore_file(name: str) -> bool:
    """Whether a file named ``name`` is git's per-directory ignore file (in any case)."""
    return fold_name(name) == ".gitignore"


def self_ignoring(data: bytes) -> str | None:
    """Why a ``.gitignore`` holding ``data`` may not be written: its patterns ignore its name.

    A pattern of the directory's own entries (no slash but a trailing one) that
    matches ``.gitignore``, not undone by a later ``!`` pattern, is read as git does
    (``fnmatch``'s rules are the wildcard's; a character class, an escape, a
    ``**`` or a line past 255 characters counts as matching when it ignores and
    as not matching when it re-includes, erring toward leaving the file out).
    Past :data:`IGNORE_READ` bytes it is refused unread.
    """
    if len(data) > IGNORE_READ:
        return f"an ignore file past {IGNORE_READ} bytes (not read whole)"
    ignored = False
    # read as git reads it: a leading byte order mark skipped, lines split at \n only
    # (a \r before it dropped), names compared in any case (core.ignoreCase)
    data = data.removeprefix(b"\xef\xbb\xbf")
    for raw in data.split(b"\n"):
        line = raw.removesuffix(b"\r").decode("utf-8", "replace").rstrip(" ")
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line[1:] if negated else line
        if pattern.startswith("/"):
            pattern = pattern[1:]
        if "/" in pattern:
            # a directory only, or a path below this directory: not the file itself
            if not pattern.startswith("**/"):
                continue
            pattern = pattern[3:]
        if "\\" in pattern or "[" in pattern or "**" in pattern or len(pattern) > 255:
            # not read here (and no regular expression made of a line of any length):
            # taken as ignoring, never as re-including
            matches = not negated
        else:
            # (a pattern that ignores: in any case; one that re-includes: as written)
            matches = fnmatch.fnmatchcase(".gitignore", pattern if negated else pattern.lower())
        if matches:
            ignored = not negated
    return HIDES_ITSELF if ignored else None
