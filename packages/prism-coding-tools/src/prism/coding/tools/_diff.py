"""A unified diff of two versions of a text, cheap when the change is small."""

from __future__ import annotations

import difflib
import re

__all__ = ["unified_diff"]

_HUNK = re.compile(r"^@@ -(\d+)((?:,\d+)?) \+(\d+)((?:,\d+)?) @@")
_NO_NEWLINE = "\\ No newline at end of file\n"


def unified_diff(
    old: str, new: str, *, path: str, context: int = 3, max_lines: int = 20_000
) -> tuple[str, int, int]:
    """The diff of ``old`` to ``new`` with ``a/`` and ``b/`` labels, plus lines added and removed.

    Common leading and trailing lines are skipped before ``difflib`` runs, so
    a small edit of a big file costs little. When the changed region spans
    more than ``max_lines`` lines the diff is replaced by a one-line note.
    """
    a = old.splitlines(keepends=True)
    b = new.splitlines(keepends=True)
    shortest = min(len(a), len(b))
    prefix = 0
    while prefix < shortest and a[prefix] == b[prefix]:
        prefix += 1
    suffix = 0
    while suffix < shortest - prefix and a[-1 - suffix] == b[-1 - suffix]:
        suffix += 1
    removed = len(a) - prefix - suffix
    added = len(b) - prefix - suffix
    if removed + added > max_lines:
        note = f"(diff omitted: the change spans {removed} old and {added} new lines)\n"
        return note, added, removed
    low = max(0, prefix - context)
    high_a = len(a) - max(0, suffix - context)
    high_b = len(b) - max(0, suffix - context)
    out: list[str] = []
    for line in difflib.unified_diff(
        a[low:high_a], b[low:high_b], fromfile=f"a/{path}", tofile=f"b/{path}", n=context
    ):
        match = _HUNK.match(line)
        if match is not None:
            start_a = int(match.group(1)) + low
            start_b = int(match.group(3)) + low
            line = f"@@ -{start_a}{match.group(2)} +{start_b}{match.group(4)} @@\n"
        elif not line.endswith("\n"):
            line = line + "\n" + _NO_NEWLINE
        out.append(line)
    return "".join(out), added, removed
