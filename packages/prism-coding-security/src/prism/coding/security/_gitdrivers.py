"""The programs a repository's own configuration names for git to run on its files.

A filter driver (``filter.<name>.clean``/``smudge``/``process``), a diff
driver (``diff.<name>.textconv``/``command``) and ``diff.external`` are
commands; ``.gitattributes`` (a file of the root, hostile like every other)
picks which driver a path gets, and the driver names are open-ended, so no
fixed configuration can switch them off. Git itself lists the ones the
repository's configuration defines (local and worktree scope, where every
file is the root's; the user's and the system's configuration are the
user's own), and a proved git command runs with each of them forced empty
(:data:`GIT_ENVIRONMENT` outranks every file, and reaches the git a
submodule runs too): an empty filter is no filter, an empty diff command is
a command git cannot start. An ``include`` in that configuration makes the
answer depend on another file the line could write first, so the command is
not proved. Every ``protocol.<name>.allow`` any configuration file sets is
forced to ``never`` with them: the named key outranks ``protocol.allow``, and
a partial clone's lazy fetch would start that transport (an ``ext::``
command, a remote helper) from a plain ``git show``.
A repository configuration naming a git-lfs extension or custom transfer
(``lfs.extension.*``, ``lfs.customtransfer.*``: programs git-lfs runs when
the user's own ``lfs`` filter starts it) gets the ``lfs`` filter forced
empty.

Listing costs one git process (which runs no program: the forced
configuration, ``git config`` only reads); the answer is kept per directory
and asked again only when a file git would read for it changed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading

from ._proved import GIT_ENVIRONMENT

__all__ = ["repository_drivers"]

_PATTERN = (
    r"^(filter\..*\.(clean|smudge|process)|diff\..*\.(textconv|command)|diff\.external"
    r"|include\.path|includeif\..*\.path|protocol\..*\.allow"
    r"|lfs\.(extension|customtransfer)\..*)$"
)
_REPOSITORY_SCOPES = ("local", "worktree")
_FILTER_PARTS = ("clean", "smudge", "process")
_DIFF_PARTS = ("textconv", "command")

Drivers = tuple[tuple[str, str], ...]


def _list(start: str) -> tuple[list[str], str | None]:
    git = shutil.which("git")
    if git is None:
        return [], None
    env = {**os.environ, **dict(GIT_ENVIRONMENT)}
    try:
        result = subprocess.run(
            [git, "-C", start, "config", "--show-scope", "-z", "--name-only", "--get-regexp",
             _PATTERN],
            capture_output=True, stdin=subprocess.DEVNULL, env=env, check=False, timeout=10,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], f"git could not list the repository's configuration ({exc})"
    if result.returncode == 1:  # nothing matched
        return [], None
    if result.returncode != 0:
        error = result.stderr.decode("utf-8", "replace").strip().splitlines()
        return [], "git could not list the repository's configuration" + (
            f" ({error[-1]})" if error else ""
        )
    fields = result.stdout.decode("utf-8", "surrogateescape").split("\0")
    return [
        k
        for s, k in zip(fields[::2], fields[1::2], strict=False)
        # a transport allowed by name in any file (a helper's name is open-ended)
        if s in _REPOSITORY_SCOPES or (k.startswith("protocol.") and s != "command")
    ], None


def _drivers(start: str) -> Drivers | str:
    keys, error = _list(start)
    if error is not None:
        return error
    forced: dict[str, str] = {}
    for key in keys:
        section, _, rest = key.partition(".")
        if section in ("include", "includeif"):
            return (
                f"the repository's configuration includes another file ({key}), which could "
                "name programs git runs"
            )
        if section == "protocol":
            # a promisor remote's lazy fetch would start this transport (ext::, a
            # helper, an upload-pack command) from a plain `git show`
            forced[key] = "never"
            continue
        if section == "lfs":
            # git-lfs, started by the user's own `lfs` filter, runs the programs these
            # name from the repository's configuration: no lfs filter runs at all
            for part in _FILTER_PARTS:
                forced[f"filter.lfs.{part}"] = ""
            forced["filter.lfs.required"] = "false"
            continue
        if key == "diff.external":
            forced[key] = ""
            continue
        name, _, _ = rest.rpartition(".")
        if section == "filter":
            for part in _FILTER_PARTS:
                forced[f"filter.{name}.{part}"] = ""
            forced[f"filter.{name}.required"] = "false"
        else:
            for part in _DIFF_PARTS:
                forced[f"diff.{name}.{part}"] = ""
    return tuple(sorted(forced.items()))


def _stat(path: str) -> tuple[object, ...] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _key(start: str) -> tuple[object, ...] | None:
    """What git's answer for ``start`` depends on: every ``.git`` up the tree, the config files.

    None when git is pointed elsewhere by the environment (then it is asked every time).
    """
    if any(name in os.environ for name in ("GIT_DIR", "GIT_COMMON_DIR", "GIT_CONFIG")):
        return None
    out: list[object] = []
    current = os.path.realpath(start)
    while True:
        dot_git = os.path.join(current, ".git")
        out.append(_stat(dot_git))
        if os.path.isdir(dot_git):
            directories = [dot_git]
        elif os.path.isfile(dot_git):
            try:
                with open(dot_git, encoding="utf-8", errors="surrogateescape") as handle:
                    text = handle.read(4097).strip()
            except OSError:
                text = ""
            directories = [os.path.join(current, text.removeprefix("gitdir: "))]
        else:
            directories = []
        for directory in directories:
            common = directory
            try:
                with open(os.path.join(directory, "commondir"), encoding="utf-8") as handle:
                    common = os.path.join(directory, handle.read(4097).strip())
            except (OSError, UnicodeDecodeError):
                pass
            for base in {directory, common}:
                for name in ("config", "config.worktree", "commondir"):
                    out.append((base, name, _stat(os.path.join(base, name))))
        if directories:
            return tuple(out)
        parent = os.path.dirname(current)
        if parent == current:
            return tuple(out)
        current = parent


_cache: dict[str, tuple[tuple[object, ...], Drivers | str]] = {}
_cache_lock = threading.Lock()


def repository_drivers(start: str) -> Drivers | str:
    """The configuration forcing empty every driver the repository of ``start`` defines.

    Returns the ``(key, value)`` pairs to force (none for a repository that
    defines no driver, or no repository), or why git cannot be proved to run
    none (an include in the repository's configuration, git failing to list it).
    """
    while not os.path.isdir(start) and os.path.dirname(start) != start:
        start = os.path.dirname(start)  # made by the line: in the repository of its parent
    key = _key(start)
    if key is not None:
        with _cache_lock:
            hit = _cache.get(start)
        if hit is not None and hit[0] == key:
            return hit[1]
    found = _drivers(start)
    if key is not None:
        with _cache_lock:
            _cache[start] = (key, found)
    return found
