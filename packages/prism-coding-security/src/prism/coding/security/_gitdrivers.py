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
import stat
import subprocess
import threading

from ._executables import host_environment, host_program
from ._files import read_regular_file
from ._proved import GIT_ENVIRONMENT

__all__ = ["repository_drivers", "repository_reads", "unsafe_to_start"]

_PATTERN = (
    r"^(filter\..*\.(clean|smudge|process)|diff\..*\.(textconv|command)|diff\.external"
    r"|include\.path|includeif\..*\.path|protocol\..*\.allow"
    r"|lfs\.(extension|customtransfer)\..*"
    r"|core\.(worktree|excludesfile|attributesfile)|mailmap\.(file|blob))$"
)
_REPOSITORY_SCOPES = ("local", "worktree")
_FILTER_PARTS = ("clean", "smudge", "process")
_DIFF_PARTS = ("textconv", "command")

_TIMEOUT_S = 3.0  # the policy waits for it while deciding

Drivers = tuple[tuple[str, str], ...]


def _list(start: str) -> tuple[list[str], str | None]:
    git = host_program("git")
    if git is None:
        return [], None
    env = {**host_environment(), **dict(GIT_ENVIRONMENT)}
    try:
        result = subprocess.run(
            # an include asks whatever it holds: its target is never opened (a FIFO
            # there would block git)
            [git, "-C", start, "config", "--show-scope", "-z", "--name-only", "--no-includes",
             "--get-regexp", _PATTERN],
            capture_output=True, stdin=subprocess.DEVNULL, env=env, check=False,
            timeout=_TIMEOUT_S,
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


def _includes(configs: list[str]) -> list[tuple[str, str, str]] | str:
    """Every ``(file, key, path)`` include of ``configs``, or why git could not list them.

    Asked of each file alone (``--file``, ``--no-includes``, outside the
    repository), before any git starts in the repository: that git reads its
    configuration, includes followed, as it starts, and an included FIFO
    would block it.
    """
    git = host_program("git")
    out: list[tuple[str, str, str]] = []
    for config in configs if git is not None else []:
        try:
            result = subprocess.run(
                [git, "config", "--file", config, "--no-includes", "-z",  # type: ignore[list-item]
                 "--get-regexp", r"^include(if\..*)?\.path$"],
                capture_output=True, stdin=subprocess.DEVNULL, cwd="/", check=False,
                env={**host_environment(), **dict(GIT_ENVIRONMENT)}, timeout=_TIMEOUT_S,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"git could not list the repository's configuration ({exc})"
        for record in result.stdout.decode("utf-8", "surrogateescape").split("\0"):
            key, _, value = record.partition("\n")
            if key:
                out.append((config, key, value))
    return out


def _included(configs: list[str]) -> str | None:
    """Why a repository whose config file includes another is not proved, or None."""
    found = _includes(configs)
    if isinstance(found, str):
        return found
    if found:
        return (
            f"the repository's configuration includes another file ({found[0][1]}), which "
            "could name programs git runs"
        )
    return None


def _blocking_include(configs: list[str], depth: int = 0) -> str | None:
    """An include (at any depth) naming something other than a regular file, or None."""
    found = _includes(configs)
    if isinstance(found, str):
        return found
    targets: list[str] = []
    for config, _, value in found:
        if not value:
            continue  # git passes over an empty include
        target = os.path.join(os.path.dirname(config), os.path.expanduser(value))
        try:
            mode = os.stat(target).st_mode
        except OSError:
            continue  # git passes over a missing include
        if stat.S_ISDIR(mode):
            continue  # git fails on it at once
        if not stat.S_ISREG(mode):
            return (
                f"{target!r}, which the repository's configuration includes, is not a regular file"
            )
        targets.append(target)
    if targets and depth >= 10:
        return "the repository's configuration includes files more than 10 deep"
    return _blocking_include(targets, depth + 1) if targets else None


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
        if key == "core.worktree":
            return (
                "the repository's configuration sets core.worktree, which points git at "
                "files elsewhere"
            )
        if section in ("core", "mailmap"):
            # files git reads, wherever they are: the repository's own setting is
            # switched off (a user's own one is outranked by it anyway)
            forced[key] = ""
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
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_mode)


def _read(path: str, limit: int = 4097) -> str | None:
    """A small regular file's text; None for anything else (a FIFO is never waited on)."""
    data = read_regular_file(path, limit)
    return None if data is None else data.decode("utf-8", "surrogateescape")


# files git opens and reads whole while finding a repository and its configuration:
# anything but a regular file there (a FIFO, a device) would block git, and Prism
_READ_BY_GIT = ("HEAD", "commondir", "config", "config.worktree")


def _key(
    start: str, reads: list[str] | None = None
) -> tuple[tuple[object, ...] | None, str | None, list[str]]:
    """What git's answer for ``start`` depends on, a file git would block on, the configs.

    The key: every ``.git`` up the tree, the config files; None when git is
    pointed elsewhere by the environment (then it is asked every time). The
    second part names a file git would read that is not a regular file; the
    third lists the repository's configuration files found on the way.
    ``reads``, when given, receives the directories git reads the repository
    from: its work tree's top, the git directory, the common directory and
    every object directory the alternates name.
    """
    out: list[object] = []
    irregular: str | None = None
    configs: list[str] = []
    current = os.path.realpath(start)
    while True:
        dot_git = os.path.join(current, ".git")
        out.append(_stat(dot_git))
        directories = [current]  # git looks at each directory itself too (bare)
        if os.path.isdir(dot_git):
            directories.append(dot_git)
        elif os.path.isfile(dot_git):
            text = (_read(dot_git) or "").strip()
            directories.append(os.path.join(current, text.removeprefix("gitdir: ")))
        for directory in directories[1:]:
            common = _read(os.path.join(directory, "commondir"))
            if common is not None:
                directories.append(os.path.join(directory, common.strip()))
        for base in dict.fromkeys(directories):
            if base == current and not (
                os.path.isdir(os.path.join(base, "objects"))
                and os.path.isdir(os.path.join(base, "refs"))
            ):
                continue  # not a repository git would read
            for name in _READ_BY_GIT:
                info = _stat(os.path.join(base, name))
                out.append((base, name, info))
                mode = info[-1] if info is not None else None
                if irregular is None and isinstance(mode, int) and not stat.S_ISREG(mode):
                    irregular = os.path.join(base, name)
                elif mode is not None and name.startswith("config"):
                    configs.append(os.path.join(base, name))
        if len(directories) > 1:
            if reads is not None:
                reads += [os.path.realpath(d) for d in dict.fromkeys(directories)]
                reads += _alternates(os.path.join(directories[-1], "objects"))
            break
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    if any(name in os.environ for name in ("GIT_DIR", "GIT_COMMON_DIR", "GIT_CONFIG")):
        return None, irregular, configs
    return tuple(out), irregular, configs


def _alternates(objects: str, depth: int = 0) -> list[str]:
    """The object directories ``objects/info/alternates`` names, at any depth."""
    text = _read(os.path.join(objects, "info", "alternates"), 1 << 16)
    out: list[str] = []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        # a quoted line is taken as written: a path no root holds, so git asks
        path = os.path.realpath(os.path.join(objects, line))
        out.append(path)
        if depth < 5:
            out += _alternates(path, depth + 1)
    return out


def repository_reads(start: str) -> list[str]:
    """The directories git reads the repository of ``start`` from (none: no repository).

    Its work tree's top (a root inside a larger repository: git's pathspecs
    and ``rev:path`` reach the whole of it), the git directory a ``.git`` file
    names, the common directory, and the object directories of alternates.
    """
    while not os.path.isdir(start) and os.path.dirname(start) != start:
        start = os.path.dirname(start)
    reads: list[str] = []
    _key(start, reads)
    return reads


def unsafe_to_start(start: str) -> str | None:
    """Why no git may start in the repository of ``start`` on the host, or None.

    A file git reads whole as it starts (``HEAD``, ``commondir``, a config)
    that is not a regular file, or one the repository's configuration
    includes (git follows includes as it starts: a FIFO would block it).
    """
    _, irregular, configs = _key(start)
    if irregular is not None:
        return f"{irregular!r}, which git reads, is not a regular file"
    return _blocking_include(configs)


_cache: dict[str, tuple[tuple[object, ...], Drivers | str]] = {}
_by_configs: dict[tuple[tuple[str, tuple[object, ...] | None], ...], Drivers | str] = {}
_cache_lock = threading.Lock()


def repository_drivers(start: str) -> Drivers | str:
    """The configuration forcing empty every driver the repository of ``start`` defines.

    Returns the ``(key, value)`` pairs to force (none for a repository that
    defines no driver, or no repository), or why git cannot be proved to run
    none (an include in the repository's configuration, git failing to list it).
    """
    while not os.path.isdir(start) and os.path.dirname(start) != start:
        start = os.path.dirname(start)  # made by the line: in the repository of its parent
    key, irregular, configs = _key(start)
    if irregular is not None:
        return f"{irregular!r}, which git reads, is not a regular file"
    if key is not None:
        with _cache_lock:
            hit = _cache.get(start)
        if hit is not None and hit[0] == key:
            return hit[1]
    # one repository's directories share its answer: what git lists depends on its
    # configuration files alone (each directory a line names is not one more git)
    files = tuple((config, _stat(config)) for config in configs)
    with _cache_lock:
        shared = _by_configs.get(files) if key is not None and configs else None
    if shared is not None:
        found = shared
    else:
        found = _too_large(files) or _included(configs) or _drivers(start)
    if key is not None:
        with _cache_lock:
            if len(_cache) >= 4096:
                _cache.clear()
            _cache[start] = (key, found)
            if configs:
                if len(_by_configs) >= 1024:
                    _by_configs.clear()
                _by_configs[files] = found
    return found


MAX_CONFIG_BYTES = 262_144
"""The repository's configuration files, in all, at most (git parses them whole as it
starts; a repository's own configuration is a few kilobytes): past this a line's git
asks, and no git is started to list them while the policy decides."""


def _too_large(files: tuple[tuple[str, tuple[object, ...] | None], ...]) -> str | None:
    size = sum(i[1] for _, i in files if i is not None and isinstance(i[1], int))
    if size <= MAX_CONFIG_BYTES:
        return None
    return (
        f"the repository's configuration is {size:,} bytes (more than {MAX_CONFIG_BYTES:,}): "
        "what it names is not listed"
    )
