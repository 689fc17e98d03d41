"""The programs Prism itself runs on the host (bwrap, git, prlimit), never a root's files.

Prism finds them through ``PATH``, as the user's shell would, but a directory of
``PATH`` may lie inside a root (direnv's ``PATH_add bin``, a project's
``node_modules/.bin`` or ``tools/bin``): a file a command wrote there would be
run by Prism itself, outside any sandbox. So every root this process is given
(:func:`claim_roots`, called wherever roots are normalised) is remembered, and
:func:`host_program` passes over a ``PATH`` entry that is relative (it names a
directory below wherever this process is) or that leads into a root, and over a
program whose file leads into one (a link from outside to a root's file). What
it answers is the program's real path: no link on the way is followed again
when it runs.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["claim_roots", "claimed_roots", "host_program"]

_lock = threading.Lock()
_roots: tuple[str, ...] = ()
# (name, PATH, how many roots were claimed then) -> the program found (None: none)
_found: dict[tuple[str, str, int], str | None] = {}


def claim_roots(roots: Iterable[str]) -> None:
    """Remember real root directories: no program Prism runs is taken from them."""
    global _roots
    with _lock:
        new = [root for root in roots if root not in _roots]
        if new:
            _roots = (*_roots, *new)


def claimed_roots() -> tuple[str, ...]:
    """Every root claimed so far in this process."""
    return _roots


def _inside(real: str, roots: tuple[str, ...]) -> bool:
    return any(real == root or real.startswith(root.rstrip("/") + "/") for root in roots)


def host_program(name: str) -> str | None:
    """The real path of the program ``name`` found on ``PATH`` outside every root; None: none.

    Searched as ``execvp`` searches (the first executable regular file of that name),
    passing over relative entries, entries that lead into a claimed root and files
    that do.
    """
    path = os.environ.get("PATH", os.defpath)
    roots = _roots
    key = (name, path, len(roots))
    if key in _found:
        return _found[key]
    found: str | None = None
    for entry in path.split(os.pathsep):
        if not entry.startswith("/") or _inside(os.path.realpath(entry), roots):
            continue
        real = os.path.realpath(os.path.join(entry, name))
        if _inside(real, roots) or not os.path.isfile(real) or not os.access(real, os.X_OK):
            continue
        found = real
        break
    with _lock:
        if len(_found) >= 256:
            _found.clear()
        _found[key] = found
    return found
