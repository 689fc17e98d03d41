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

The dynamic loader's variables are the same hazard one step down
(``LD_LIBRARY_PATH=$PWD/build/lib``): every program Prism runs on the host gets
:func:`host_environment`, where they hold no entry that is relative or leads into
a root (bubblewrap gets none of them: it hands them to the command, inside).
"""

from __future__ import annotations

import os
import re
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = [
    "LOADER_VARIABLES",
    "claim_roots",
    "claimed_roots",
    "host_environment",
    "host_program",
    "loader_moved",
]

LOADER_VARIABLES = ("LD_LIBRARY_PATH", "LD_PRELOAD", "LD_AUDIT", "GCONV_PATH", "GIT_EXEC_PATH")
"""What names code a host program loads or runs by its place (libraries, its helpers)."""

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


def host_environment() -> dict[str, str]:
    """This process's environment for a program Prism runs on the host (git).

    Each of :data:`LOADER_VARIABLES` without its entries that are relative (they
    name a directory below wherever the program runs) or lead into a claimed
    root; a variable left without entries is dropped.
    """
    env = dict(os.environ)
    roots = _roots
    for name in LOADER_VARIABLES:
        value = env.get(name)
        if value is None:
            continue
        # (ld.so splits LD_PRELOAD at spaces too)
        entries = re.split("[: ]", value) if name == "LD_PRELOAD" else value.split(":")
        kept = [e for e in entries if e.startswith("/") and not _inside(os.path.realpath(e), roots)]
        if kept:
            env[name] = ":".join(kept)
        else:
            del env[name]
    return env


def loader_moved(argv: list[str], env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """The ``argv`` and ``env`` of bwrap with the loader's variables handed to the command.

    bwrap itself (``argv[0]``) runs on the host: it gets no ``LD_*`` variable (nor
    ``GCONV_PATH``); each is set for the command with ``--setenv`` instead.
    """
    moved = [name for name in env if name.startswith("LD_") or name == "GCONV_PATH"]
    if not moved:
        return argv, dict(env)
    options = [part for name in moved for part in ("--setenv", name, env[name])]
    kept = {name: value for name, value in env.items() if name not in moved}
    return [argv[0], *options, *argv[1:]], kept
