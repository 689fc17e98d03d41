"""Paths git itself names for a root: its hooks directory, included configs, submodules.

The sandbox protects these on top of the fixed list (they are named by the
root's git configuration and index, not by a fixed name). Asking git costs
three processes, so the answer is cached per root and asked again only when
one of the files it depends on changed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading

from ._errors import SandboxUnavailableError
from ._gitdrivers import unsafe_to_start
from ._proved import HOST_GIT_ENVIRONMENT

__all__ = ["cached_git_entries", "git_entries"]

_EMBEDDED_GIT = (
    "config", "config.worktree", "hooks", "commondir", "info", "modules", "worktrees",
)  # fmt: skip


def _git(root: str, *args: str) -> bytes | None:
    git = shutil.which("git")
    if git is None:
        return None
    try:
        result = subprocess.run(
            [git, "-C", root, *args],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            # the repository's own configuration runs nothing here (its fsmonitor would
            # run on the host when ls-files reads the index)
            env={**os.environ, **dict(HOST_GIT_ENVIRONMENT)},
            check=False,
            timeout=10,
        )
    except subprocess.TimeoutExpired as exc:  # pragma: no cover - a git that hangs
        raise SandboxUnavailableError(
            f"git did not answer about {root} within 10s ({' '.join(args[:2])}); refusing to run"
        ) from exc
    return result.stdout if result.returncode == 0 else None


def git_entries(root: str, includes: list[str] | None = None) -> list[str]:
    """Paths (relative to ``root``) git itself names: hooks directory, includes, submodules.

    * ``core.hooksPath`` may name a directory in the work tree (``.githooks``,
      ``.husky/_``): the next ``git commit`` on the host runs what is there.
      Git is asked (all config scopes, includes followed); it counts when it
      lies inside ``root``.
    * every file the configuration includes (``include.path``,
      ``includeIf.*.path``); ``includes``, when given, receives them all,
      inside the root or not;
    * for each submodule in the index (a gitlink) whose ``.git`` is a file,
      the git directory it names, when that lies in the root and is not a
      ``.git`` directory (those are covered by name).

    No git or no repository: no entries.

    Raises:
        SandboxUnavailableError: git did not answer within 10 seconds, or a file
            git reads as it starts (one an include names too) is not a regular file.
    """
    problem = unsafe_to_start(root)
    if problem is not None:
        # any git started there would wait on it (git reads it as it starts)
        raise SandboxUnavailableError(f"git cannot be asked about {root}: {problem}")
    out: list[str] = []
    hooks_out = _git(root, "rev-parse", "--path-format=absolute", "--git-path", "hooks")
    if hooks_out is not None:
        hooks = os.path.realpath(hooks_out.decode("utf-8", "surrogateescape").strip())
        if hooks.startswith(root.rstrip("/") + "/"):
            out.append(os.path.relpath(hooks, root))
    pattern = r"^include(if\..*)?\.path$"
    found = _git(root, "config", "--show-origin", "-z", "--get-regexp", pattern)
    for path in _include_targets(root, found or b""):
        if includes is not None:
            includes.append(path)
        if path.startswith(root.rstrip("/") + "/"):
            out.append(os.path.relpath(path, root))
    listing = _git(root, "ls-files", "--stage", "-z")
    for record in (listing or b"").split(b"\0"):
        meta, _, name = record.partition(b"\t")
        if not meta.startswith(b"160000 "):
            continue
        text = name.decode("utf-8", "surrogateescape")
        path = text
        dot_git = os.path.join(root, text, ".git")
        if os.path.isdir(dot_git) and not os.path.islink(dot_git):
            continue
        out.append(f"{path}/.git")
        target = _gitfile_target(dot_git)
        if target is not None and target.startswith(root.rstrip("/") + "/"):
            # the git directory a .git file names, when it lies in the root
            relative = os.path.relpath(target, root)
            out += [f"{relative}/{part}" for part in _EMBEDDED_GIT]
    return out


def _include_targets(root: str, listing: bytes) -> list[str]:
    """Files named by ``include.path`` / ``includeIf.*.path`` (``--show-origin -z`` output).

    Every include counts, whatever its condition (a command can switch the
    branch an ``onbranch:`` condition names). Relative paths are relative to
    the file that holds them (an origin is relative to ``root``); ``~/`` is
    the home directory.
    """
    out: list[str] = []
    fields = listing.split(b"\0")
    for origin, pair in zip(fields[::2], fields[1::2], strict=False):
        source = origin.decode("utf-8", "surrogateescape")
        _, _, value = pair.decode("utf-8", "surrogateescape").partition("\n")
        if not source.startswith("file:") or not value:
            continue
        value = os.path.expanduser(value)
        path = os.path.join(os.path.dirname(os.path.join(root, source[5:])), value)
        out.append(os.path.realpath(path))
    return out


def _gitfile_target(path: str) -> str | None:
    """The real git directory a ``.git`` file names, or None (not a readable gitfile)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4097)
    except OSError:
        return None
    text = head.decode("utf-8", "surrogateescape").strip()
    if not text.startswith("gitdir: ") or "\n" in text:
        return None
    target = os.path.join(os.path.dirname(path), text[len("gitdir: ") :])
    real = os.path.realpath(target)
    return real if os.path.isdir(real) else None


def _key(root: str, includes: list[str]) -> tuple[object, ...]:
    home = os.path.expanduser("~")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    files = [
        os.path.join(root, ".git", "config"),
        os.path.join(root, ".git", "index"),
        os.path.join(root, ".git"),
        os.path.join(home, ".gitconfig"),
        os.path.join(xdg, "git", "config"),
        "/etc/gitconfig",
        *includes,
    ]
    out: list[object] = [os.environ.get("GIT_CONFIG_GLOBAL"), os.environ.get("GIT_DIR")]
    for path in files:
        try:
            info = os.stat(path)
        except OSError:
            out.append(None)
            continue
        out.append((path, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns))
    return tuple(out)


_cache: dict[str, tuple[tuple[object, ...], list[str], list[str]]] = {}
_cache_lock = threading.Lock()


def cached_git_entries(root: str) -> list[str]:
    """:func:`git_entries`, asked again only when a file it depends on changed."""
    with _cache_lock:
        hit = _cache.get(root)
    if hit is not None and _key(root, hit[2]) == hit[0]:
        return hit[1]
    includes: list[str] = []
    entries = git_entries(root, includes)
    key = _key(root, includes)
    with _cache_lock:
        _cache[root] = (key, entries, includes)
    return entries
