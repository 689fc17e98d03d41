"""A ``.gitignore`` that hides itself, judged by what it holds.

``*`` in a new ``tests/fixtures/.gitignore`` hides the file and everything
beside it from every ``git status`` (a planted ``conftest.py`` included): the
review of a command's changes would show nothing. Every way a file reaches a
root judges it alike: the copy-back of a private layer, the write and edit tools
(:mod:`._contained`); the host-opened redirections and in-place edits leave such
a file to the layer (:mod:`._redirects`).
"""

from __future__ import annotations

from ._protected import fold_name

__all__ = ["IGNORE_READ", "ignore_file", "self_ignoring", "wildcard_match"]

HIDES_ITSELF = (
    "an ignore file that ignores itself: git status would show neither it nor what it "
    "hides (review with git status --ignored)"
)

IGNORE_READ = 1 << 20
"""Bytes of an ignore file read, at most: a longer one is refused unread."""


_NAME = ".gitignore"


def ignore_file(name: str) -> bool:
    """Whether a file named ``name`` is git's per-directory ignore file (in any case)."""
    return fold_name(name) == _NAME


def self_ignoring(data: bytes) -> str | None:
    """Why a ``.gitignore`` holding ``data`` may not be written: its patterns ignore its name.

    A pattern of the directory's own entries (no slash but a trailing one) that
    matches ``.gitignore``, not undone by a later ``!`` pattern, is read as git does
    (each line cut at a NUL, as git holds it as a C string; ``*`` and ``?`` are the
    wildcard's, matched without a regular expression; a character class, an
    escape, a ``**`` or a line past 255 characters counts as matching when it
    ignores and as not matching when it re-includes, erring toward leaving the
    file out). Past :data:`IGNORE_READ` bytes it is refused unread.
    """
    if len(data) > IGNORE_READ:
        return f"an ignore file past {IGNORE_READ} bytes (not read whole)"
    ignored = False
    # read as git reads it: a leading byte order mark skipped, lines split at \n only
    # (a \r before it dropped), names compared in any case (core.ignoreCase)
    data = data.removeprefix(b"\xef\xbb\xbf")
    for raw in data.split(b"\n"):
        line = raw.removesuffix(b"\r").split(b"\0", 1)[0].decode("utf-8", "replace").rstrip(" ")
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
            matches = wildcard_match(pattern if negated else pattern.lower())
        if matches:
            ignored = not negated
    return HIDES_ITSELF if ignored else None


def _same(part: str, text: str) -> bool:
    """Whether ``part`` (literals and ``?``) matches ``text`` of its length."""
    return all(p in ("?", t) for p, t in zip(part, text, strict=True))


def _find(part: str, text: str, start: int) -> int:
    """Where ``part`` first matches in ``text`` from ``start`` (-1: nowhere)."""
    for at in range(start, len(text) - len(part) + 1):
        if _same(part, text[at : at + len(part)]):
            return at
    return -1


def wildcard_match(pattern: str, name: str = _NAME) -> bool:
    """Whether ``pattern`` (``*``, ``?`` and literals only) matches all of ``name``.

    No regular expression is made: a pattern of more characters than the name
    but its stars fails at once; otherwise its parts between stars are placed in
    order, each as early as it fits (which finds a match whenever there is one).
    """
    if len(pattern) - pattern.count("*") > len(name):
        return False
    parts = pattern.split("*")
    if len(parts) == 1:
        return len(pattern) == len(name) and _same(pattern, name)
    first, last = parts[0], parts[-1]
    if len(first) + len(last) > len(name):
        return False
    if not _same(first, name[: len(first)]) or not _same(last, name[len(name) - len(last) :]):
        return False
    at, end = len(first), len(name) - len(last)
    for part in parts[1:-1]:
        if not part:
            continue
        found = _find(part, name[:end], at)
        if found < 0:
            return False
        at = found + len(part)
    return True
