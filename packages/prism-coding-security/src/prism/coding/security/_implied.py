"""The protected set a root implies: what its git repositories and protected links name.

The fixed entries (:mod:`._protected`) match by name; a root's own files make more
paths protected, wherever they lie in it:

* what git names for the root's repository (:func:`._gitnames.cached_git_entries`:
  its hooks directory, included configuration, submodules' git directories);
* every ``.git`` below the root's top (a directory, a gitfile or a link: a
  workspace of clones, ``repo``'s ``x/.git -> .repo/projects/x.git``, a
  ``--separate-git-dir``): the git directory it names, when that lies in the root
  and is not itself named ``.git``, has its :data:`._gitnames.EMBEDDED_GIT`
  protected, and so has the common directory its ``commondir`` names; the
  repository's own configuration is asked (``core.hooksPath``, includes) with
  the forced configuration, as the root's is;
* every virtual environment below the root's top (a directory holding a
  ``pyvenv.cfg``, at any depth): its interpreter and console scripts
  (``bin``, ``Scripts``) and its packages (``lib``, ``lib64``, ``Lib``), which
  ``uv run``, ``pytest``, an activated shell and the editor's interpreter
  discovery start on the host; a package installed into it asks;
* every directory of this process's ``PATH`` that lies in the root, and the
  running interpreter's prefix there (:func:`_path_entries`,
  :func:`_interpreter_entries`): the user's next terminal and Prism run what
  they hold; so are the directories and files the loaders' and interpreters'
  search variables name there (:data:`SEARCH_DIRECTORIES`,
  :data:`SEARCH_FILES`: ``LD_LIBRARY_PATH``, ``PYTHONPATH``, ``LD_PRELOAD``, ...)
  and the directories Prism's own modules are imported from (an editable
  install); a relative entry of ``PATH`` or of a search variable is protected
  at any depth (:func:`environment_patterns`: the user's shell searches it
  below whatever directory it is in);
* every ``.envrc`` below the root's top, and the top's and each repository's:
  what direnv runs from it (:func:`_direnv_entries`);
* at the top and each repository's top, where the user starts ``python3 -m
  pip``: what Python would import there instead of a standard module or a tool
  run as a module (:data:`._pymodules.MODULE_SHADOWS`: ``re.py``, ``argparse/__init__.py``);
* every symbolic link whose own name is protected (``svc/.envrc ->
  ../envrc.shared``, ``app/.vscode -> ../editor``): what it leads to, when that
  lies in the root; a link on the way to an entry (``.cargo -> c`` for
  ``.cargo/config.toml``) protects what it leads to joined with the rest of the
  entry (``c/config.toml``).

One answer serves the host-opened redirect and the copy-back. Finding it walks
the whole root (never following a link, never entering a ``.git`` directory);
each directory's listing is kept by the directory's identity and times, so a
later call lists again only the directories changed since (one ``lstat`` per
directory otherwise). A directory changed in the same instant it was listed is
listed again next time (its times cannot tell a later change apart). On a local
file system every directory walked is watched (:mod:`._watch`): while the
kernel tells no change that can alter the answer and no mount, the last answer
is given again without a walk (a root of 1,000 directories: about 3 ms of
``lstat`` calls spared per call). A root of more than
:data:`MAX_WATCHED_DIRECTORIES` directories is not watched: the user's
inotify watches are shared with their editor's file watchers.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import glob
import importlib.machinery
import os
import re
import shlex
import stat
import sys
import threading
import time
import tomllib
from typing import TYPE_CHECKING, Any

from ._callees import (
    assigned_values,
    assignments,
    expand_assignments,
    glob_matches,
    loop_bound,
    own_directory,
    programs_run,
    python_imports,
    script_arguments,
    working_directory,
)
from ._errors import SandboxUnavailableError
from ._files import read_regular_file, shell_text
from ._gitnames import EMBEDDED_GIT, cached_configured, cached_git_entries, gitfile_target
from ._protected import git_takes_head
from ._pymodules import MODULE_SHADOWS, shadowed_names
from ._unanswered import unanswered_entries
from ._variables import SEARCH_DIRECTORIES, SEARCH_FILES, variable_named
from ._watch import DirectoryWatch, local_device

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ._protected import ProtectedPaths

__all__ = [
    "MAX_NESTED_REPOSITORIES",
    "MAX_WALKED_ENTRIES",
    "MAX_WATCHED_DIRECTORIES",
    "SEARCH_DIRECTORIES",
    "SEARCH_FILES",
    "answered_unwalked",
    "environment_patterns",
    "held_entries",
    "implied_protected",
    "nested_repositories",
    "warm_in_background",
]

MAX_WALKED_ENTRIES = 1_000_000
"""A root holding more entries is not walked: nothing found below its top is trusted."""

MAX_WATCHED_DIRECTORIES = 10_000
"""A root holding more directories is walked on each call, not watched (see :mod:`._watch`)."""

MAX_NESTED_REPOSITORIES = 256
"""A root holding more git repositories below its top is not asked about each."""

# a directory whose times are this recent when listed may change again unseen
# (file systems stamp times from a coarse clock)
_RACY_NS = 100_000_000
# the clock a walk compares those times with (nanoseconds since the epoch)
_clock = time.time_ns

_GIT = ".git"
_HEAD = "HEAD"
_VENV = "pyvenv.cfg"
_ENVRC = ".envrc"
# what a virtual environment runs at every start: its interpreter and console
# scripts, and the packages they import (lib/pythonX.Y/site-packages; Lib on Windows)
VENV_PARTS = ("bin", "Scripts", "lib", "lib64", "Lib")
# the walk's kinds that are no git repository
_NOT_GIT = ("venv", "envrc")

# one listing: the directory's identity and times (None: list it again), its
# subdirectories, its `.git` entry's kind ("" for none), its links worth resolving,
# whether it holds a HEAD (git may take it for a git directory: a bare repository),
# whether it holds a pyvenv.cfg (a virtual environment), whether it holds an .envrc,
# and how many entries it holds (what the walk counts of it, listed or not)
_Listing = tuple[
    tuple[int, ...] | None, tuple[str, ...], str, tuple[str, ...], bool, bool, bool, int
]
_trees: dict[tuple[str, tuple[str, ...]], dict[str, _Listing]] = {}
# per walk: the entries its root held when last walked (or when its watch last answered)
_held: dict[tuple[str, tuple[str, ...]], int] = {}
_trees_lock = threading.Lock()
# per walk: its watch and its answer when the watch covered every directory of it
_watched: dict[
    tuple[str, tuple[str, ...]],
    tuple[DirectoryWatch, tuple[list[tuple[str, str]], list[str]] | None],
] = {}
_walk_lock = threading.Lock()
# walks of more than MAX_WATCHED_DIRECTORIES directories: not watched again
_unwatched: set[tuple[str, tuple[str, ...]]] = set()
# walks watched at once (each holds one of the user's inotify queues)
_MAX_WATCHES = 8


def _identity(info: os.stat_result) -> tuple[int, ...]:
    return (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_ctime_ns)


def _interesting(parts: tuple[str, ...], matcher: ProtectedPaths) -> bool:
    return bool(matcher.covers(parts) or matcher.leads_to(parts))


def _list(
    path: str, rel: str, matcher: ProtectedPaths, info: os.stat_result, started: int
) -> tuple[_Listing, int]:
    subdirs: list[str] = []
    links: list[str] = []
    git = ""
    head = False
    venv = False
    envrc = False
    count = 0
    with os.scandir(path) as listing:
        for entry in listing:
            count += 1
            name = entry.name
            try:
                is_link = entry.is_symlink()
                is_dir = not is_link and entry.is_dir(follow_symlinks=False)
            except OSError:  # pragma: no cover - removed while listed
                continue
            if name == _HEAD and not is_dir:
                head = True
            elif name == _VENV and not is_dir:
                venv = True
            elif name == _ENVRC and not is_dir:
                envrc = True
            if name == _GIT:
                # never entered: everything in a .git directory is judged by name
                git = "link" if is_link else "dir" if is_dir else "file"
                continue
            if is_link:
                parts = (*rel.split("/"), name) if rel else (name,)
                if _interesting(parts, matcher):
                    links.append(name)
            elif is_dir:
                subdirs.append(name)
    identity = _identity(info)
    # changed in the clock's last tick: a later change may leave the times equal
    racy = max(info.st_mtime_ns, info.st_ctime_ns) >= started - _RACY_NS
    found = (
        None if racy else identity,
        tuple(subdirs),
        git,
        tuple(links),
        head,
        venv,
        envrc,
        count,
    )
    return found, count


def _walk(root: str, matcher: ProtectedPaths) -> tuple[list[tuple[str, str]], list[str]]:
    """The ``.git`` entries and bare git directories, and the interesting links.

    Each ``.git`` entry as (its directory relative to the root, its kind); each
    directory holding a ``HEAD`` outside a ``.git`` as (it, ``"bare"``); each
    directory holding a ``pyvenv.cfg`` outside a ``.git`` as (it, ``"venv"``); each
    directory holding an ``.envrc`` outside a ``.git`` as (it, ``"envrc"``).
    Answered again unwalked while the kernel told no change of a directory the
    last walk watched (:class:`._watch.DirectoryWatch`), else walked.
    """
    key = (root, matcher.entries)
    with _walk_lock:  # one walk at a time: each reads (and empties) its watch's queue
        with _trees_lock:
            kept = _trees.get(key, {})
            watched = _watched.get(key)
        if watched is not None:
            changed = watched[0].changed(root, kept, MAX_WALKED_ENTRIES)  # (every event read)
            if not changed and watched[1] is not None:
                gits, links = watched[1]
                with _trees_lock:
                    _held[key] = watched[0].walked  # (with the entries made since counted)
                return list(gits), list(links)
            if watched[0].broken:
                _unwatch(key)
                watched = None
        watch = watched[0] if watched is not None else _new_watch(key, root)
        if watch is None:
            return _walk_listing(root, matcher, key, kept, None)
        with _trees_lock:
            _watched[key] = (watch, None)  # no answer kept until this walk ends whole
        watch.begin()
        answer = _walk_listing(root, matcher, key, kept, watch)
        watch.end()
        if len(_trees.get(key, ())) > MAX_WATCHED_DIRECTORIES:
            _unwatch(key)  # (the user's watches are shared with their editor's)
            with _trees_lock:
                if len(_unwatched) >= 64:
                    _unwatched.clear()
                _unwatched.add(key)  # walked from now on, never watched again
        with _trees_lock:
            if _watched.get(key, (None,))[0] is watch:
                _watched[key] = (watch, answer if watch.complete else None)
        return list(answer[0]), list(answer[1])


def _new_watch(key: tuple[str, tuple[str, ...]], root: str) -> DirectoryWatch | None:
    """A watch for ``root``'s walk, when its file system tells every change; else None."""
    if key in _unwatched:
        return None
    try:
        device = os.lstat(root).st_dev
    except OSError:
        return None
    if not local_device(device):
        return None
    try:
        watch = DirectoryWatch(device)
    except OSError:  # pragma: no cover - the user's inotify queues are all taken
        return None
    with _trees_lock:
        if len(_watched) >= _MAX_WATCHES:
            for other in list(_watched):
                _unwatch(other, locked=True)
        _watched[key] = (watch, None)
    return watch


def _unwatch(key: tuple[str, tuple[str, ...]], *, locked: bool = False) -> None:
    with contextlib.nullcontext() if locked else _trees_lock:
        gone = _watched.pop(key, None)
    if gone is not None:
        gone[0].close()


def _walk_listing(
    root: str,
    matcher: ProtectedPaths,
    key: tuple[str, tuple[str, ...]],
    kept: dict[str, _Listing],
    watch: DirectoryWatch | None,
) -> tuple[list[tuple[str, str]], list[str]]:
    fresh: dict[str, _Listing] = {}
    gits: list[tuple[str, str]] = []
    links: list[str] = []
    started = _clock()
    walked = 0
    pending: list[tuple[str, bool]] = [("", True)]
    while pending:
        rel, descend = pending.pop()
        path = f"{root}/{rel}" if rel else root
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode):
            continue
        if watch is not None:
            if info.st_dev != watch.device or len(fresh) >= MAX_WATCHED_DIRECTORIES:
                watch.complete = False  # another file system mounted here, or too many
            else:
                # watched before it is looked at: a change from now on is told
                seen = watch.watch(path, rel, info)
                if seen is None:
                    continue  # gone meanwhile (the answer is not kept)
                info = seen
        hit = kept.get(rel)
        if hit is not None and hit[0] == _identity(info):
            listing = hit
            walked += hit[7]  # as when it was listed: the times say nothing was added
        else:
            try:
                listing, count = _list(path, rel, matcher, info, started)
            except OSError:
                continue
            walked += count
        if watch is not None:
            watch.walked = walked
        if walked > MAX_WALKED_ENTRIES:
            raise SandboxUnavailableError(
                f"{root} holds more than {MAX_WALKED_ENTRIES:,} entries: the repositories "
                "and protected links below its top cannot all be found"
            )
        fresh[rel] = listing
        _, subdirs, git, named, head, venv, envrc, _ = listing
        links += [f"{rel}/{name}" if rel else name for name in named]
        if not descend:
            continue  # a .git directory: only the links at its top (repo's layout)
        if head:
            gits.append((rel, "bare"))
        if venv:
            gits.append((rel, "venv"))
        if envrc:
            gits.append((rel, "envrc"))
        if git:
            gits.append((rel, git))
            if git == "dir":
                pending.append((f"{rel}/{_GIT}" if rel else _GIT, False))
        pending += [(f"{rel}/{name}" if rel else name, True) for name in subdirs]
    with _trees_lock:
        if len(_trees) >= 64 and key not in _trees:
            _trees.clear()
            _held.clear()
        _trees[key] = fresh
        _held[key] = walked
    return gits, links


def _inside(path: str, root: str) -> str | None:
    """``path`` relative to ``root`` when it lies below it, else None."""
    if path.startswith(root.rstrip("/") + "/"):
        return path[len(root.rstrip("/")) + 1 :]
    return None


def _git_directory_entries(git_dir: str, root: str) -> list[str]:
    """What of the git directory ``git_dir`` (and its common directory) to protect."""
    out: list[str] = []
    common = read_regular_file(os.path.join(git_dir, "commondir"), 4097)
    directories = [git_dir]
    if common is not None:
        text = common.decode("utf-8", "surrogateescape").strip()
        directories.append(os.path.realpath(os.path.join(git_dir, text)))
    for directory in directories:
        relative = _inside(directory, root)
        if relative is not None and _GIT not in relative.split("/"):
            out += [f"{relative}/{part}" for part in EMBEDDED_GIT]
    return out


def _link_entries(rel: str, root: str, matcher: ProtectedPaths) -> list[str]:
    """What the link at ``rel`` makes protected: its target, or its target and an entry's rest."""
    path = f"{root}/{rel}"
    target = os.path.realpath(path)
    relative = _inside(target, root)
    if relative is None:
        return []  # outside the root (the roots' own checks), or the root itself
    parts = tuple(rel.split("/"))
    if matcher.covers(parts):
        return [relative]
    out: list[str] = []
    size = len(parts)
    for entry in matcher.entries:
        pattern = entry.split("/")
        for start in range(max(0, size - len(pattern) + 1), size):
            window = parts[start:]
            if all(fnmatch.fnmatchcase(p, q) for p, q in zip(window, pattern, strict=False)):
                rest = pattern[len(window) :]
                literal: list[str] = []
                for part in rest:
                    if any(ch in part for ch in "*?["):
                        break
                    literal.append(part)
                out.append("/".join([relative, *literal]))
    return out


def _names_a_repository(dot_git: str) -> bool:
    """Whether git could take ``dot_git`` for a repository (a directory or a gitfile).

    Anything else (a FIFO, a device, a link to one or to nothing) names none:
    git is not asked about it (it would wait on a FIFO, as the host's own git
    there would) and nothing is run from it.
    """
    try:
        mode = os.stat(dot_git).st_mode
    except OSError:
        return False
    return stat.S_ISDIR(mode) or stat.S_ISREG(mode)


# an answer kept until a file read for it (or looked for) changes: the files' identities,
# the files, the answer
_Kept = tuple[tuple[object, ...], list[str], list[str]]


# per (repository, root) git could not answer about: the identities of the files
# read for it, those files, and what it protects
_unanswered: dict[tuple[str, str], _Kept] = {}


def _identities(paths: list[str]) -> tuple[object, ...]:
    out: list[object] = []
    for path in paths:
        for look in (os.lstat, os.stat):
            try:
                info = look(path)
            except OSError:
                out.append(None)
            else:
                out.append((info.st_dev, info.st_ino, info.st_size, info.st_mode, info.st_mtime_ns,
                            info.st_ctime_ns))  # fmt: skip
    return tuple(out)


def _kept_answer(cache: Mapping[Any, _Kept], key: object) -> list[str] | None:
    """The answer ``cache`` keeps for ``key`` while no file read for it changed, else None."""
    with _trees_lock:
        hit = cache.get(key)
    return hit[2] if hit is not None and _identities(hit[1]) == hit[0] else None


def _keep_answer(
    cache: dict[Any, _Kept], key: object, reads: list[str], answer: list[str], most: int = 64
) -> None:
    """Keep ``answer`` in ``cache`` for ``key`` with the identities of the files ``reads``."""
    kept = (_identities(reads), reads, answer)
    with _trees_lock:
        if len(cache) >= most:
            cache.clear()
        cache[key] = kept


def _led_inside(path: str, root: str) -> list[str]:
    """``path`` (normalised) as written and where it leads, relative to ``root``: those in it."""
    candidates = dict.fromkeys((path, os.path.realpath(path)))
    return [where for c in candidates if (where := _inside(c, root)) is not None]


def _bare(directory: str) -> bool:
    """Whether git may take ``directory`` (it holds a ``HEAD``) for a git directory.

    Its ``HEAD`` is one git accepts, read as git reads it (:func:`._protected.git_takes_head`:
    ``ref:refs/heads/main``, trailing blanks, 40 hex digits and text), or any link
    (git follows an old-style one); it need not have ``objects`` and ``refs`` yet (a
    command can make those, never a ``HEAD``).
    """
    head = f"{directory}/{_HEAD}"
    if os.path.islink(head):
        return True
    content = read_regular_file(head, 4097)
    return content is not None and git_takes_head(content)


def _nested_configured(repository: str, root: str, *, bare: bool = False) -> list[str]:
    """What a nested repository's own configuration protects.

    When git gives no clean answer about it, what it would read once repaired
    (:func:`._unanswered.unanswered_entries`), kept until a file read for that
    answer changes (git is not asked again meanwhile).
    """
    with _trees_lock:
        hit = _unanswered.get((repository, root))
    if hit is not None and _identities(hit[1]) == hit[0]:
        return hit[2]
    try:
        answer = cached_configured(repository, root)
    except SandboxUnavailableError as exc:
        why = str(exc)
    else:
        if hit is not None:
            with _trees_lock:
                _unanswered.pop((repository, root), None)
        return answer
    entries, reads = unanswered_entries(repository, root, why, bare=bare)
    reads = [f"{repository}/{_GIT}", f"{repository}/{_HEAD}", *reads]
    _keep_answer(_unanswered, (repository, root), reads, entries, most=4096)
    return entries


def answered_unwalked(root: str, matcher: ProtectedPaths) -> bool:
    """Whether asking :func:`implied_protected` about ``root`` now needs no whole walk.

    True while the last walk's answer is kept by its watch and no walk is under
    way. Else asking walks the root, or waits for the walk another thread does
    (the first one, warmed on opening; every one of a root too large to watch,
    more than :data:`MAX_WATCHED_DIRECTORIES` directories): seconds in a root of
    many directories.
    """
    key = (root, matcher.entries)
    if _walk_lock.locked():
        return False
    with _trees_lock:
        watched = _watched.get(key)
        return key not in _warming and watched is not None and watched[1] is not None


def held_entries(root: str, matcher: ProtectedPaths) -> int:
    """How many entries ``root``'s walk counts (its last walk's count, else a walk).

    The count a copy-back adds its new entries to: past :data:`MAX_WALKED_ENTRIES`
    every later walk of the root is refused, and with it every change to it.

    Raises:
        SandboxUnavailableError: the root holds more than :data:`MAX_WALKED_ENTRIES`.
    """
    key = (root, matcher.entries)
    with _trees_lock:
        held = _held.get(key)
    if held is None:
        _walk(root, matcher)
        with _trees_lock:
            held = _held.get(key, 0)
    return held


def nested_repositories(root: str, matcher: ProtectedPaths) -> int:
    """How many git repositories ``root`` holds below its top (its walk, kept while unchanged)."""
    gits, _ = _walk(root, matcher)
    return sum(1 for rel, kind in gits if rel and kind not in _NOT_GIT)


def implied_protected(root: str, matcher: ProtectedPaths) -> list[str]:
    """The paths (relative to ``root``) that ``root``'s own files make protected.

    See the module's docstring. A path in the answer protects everything below it.

    Raises:
        SandboxUnavailableError: git cannot be asked about the root's repository or
            one nested in it, the root holds more than :data:`MAX_WALKED_ENTRIES`
            entries or more than :data:`MAX_NESTED_REPOSITORIES` repositories.
    """
    out = list(cached_git_entries(root))
    gits, links = _walk(root, matcher)
    if sum(1 for rel, kind in gits if rel and kind not in _NOT_GIT) > MAX_NESTED_REPOSITORIES:
        raise SandboxUnavailableError(
            f"{root} holds more than {MAX_NESTED_REPOSITORIES} git repositories below its "
            "top: their configurations are not all asked"
        )
    for rel, kind in gits:
        if kind == "venv":
            out += [f"{rel}/{part}" if rel else part for part in VENV_PARTS]
            continue
        if kind == "envrc":
            continue
        repository = f"{root}/{rel}" if rel else root
        dot_git = f"{repository}/{_GIT}"
        if kind == "link":
            target = os.path.realpath(dot_git)
            if os.path.isdir(target):
                out += _git_directory_entries(target, root)
        elif kind == "file":
            named = gitfile_target(dot_git)
            if named is not None:
                out += _git_directory_entries(named, root)
        elif kind == "bare":
            if not _bare(repository):
                continue
            out += _git_directory_entries(repository, root) if rel else list(EMBEDDED_GIT)
        else:
            out += _git_directory_entries(dot_git, root)
        if rel and (kind in ("link", "bare") or _names_a_repository(dot_git)):
            # its own configuration: a hooks directory, includes, anywhere in the root
            out += _nested_configured(repository, root, bare=kind == "bare")
    for rel in links:
        out += _link_entries(rel, root, matcher)
    # (the top's and each repository's, made or not, and every other the walk found)
    tops = dict.fromkeys(["", *(rel for rel, kind in gits if kind != "venv")])
    out += _direnv_entries(root, tuple(tops))
    out += _mise_entries(root, tuple(tops))
    # (where the user runs `python3 -m pip`: the top's and each repository's)
    out += _top_python_shadows(["", *(rel for rel, kind in gits if kind not in _NOT_GIT)])
    out += _home_entries(root)
    out += _environment_entries(root, matcher)
    return list(dict.fromkeys(out))


# the walks a warming thread is doing now, or is about to do
_warming: set[tuple[str, tuple[str, ...]]] = set()


def warm_in_background(roots: Sequence[str], matcher: ProtectedPaths) -> None:
    """Find what each of ``roots`` implies (:func:`implied_protected`) on a thread of its own.

    Best effort, started now and not waited for: the first command or write that
    needs the answer then finds it cached (or waits on the walk's lock for the
    rest of it) instead of walking the whole root itself; a failure here is said
    by that check when it asks. A root already being warmed for ``matcher`` is not
    warmed twice. A daemon thread, not a task: nothing of the caller's (its
    nursery, its exceptions) is held by it.
    """
    with _trees_lock:
        keys = [
            (root, matcher.entries) for root in roots if (root, matcher.entries) not in _warming
        ]
        _warming.update(keys)
    if keys:
        threading.Thread(target=_warm, args=(keys, matcher), name="prism-warm", daemon=True).start()


def _warm(keys: list[tuple[str, tuple[str, ...]]], matcher: ProtectedPaths) -> None:
    for key in keys:
        try:
            # (the check that needs it says why it cannot be found, when it asks)
            with contextlib.suppress(Exception):
                implied_protected(key[0], matcher)
        finally:
            with _trees_lock:
                _warming.discard(key)


# directories of the home directory a login shell puts first on PATH when they exist
# (Debian's ~/.profile adds ~/bin; Go installs to ~/go/bin): a program written there
# shadows git, ls or python in the user's next terminal
_HOME_PATH = ("bin", "go/bin")
# the home's own files of tools that read the same name in a project as a project
# file (bazel's --workspace_status_command runs a program): protected at the home only
_HOME_ONLY = (".bazelrc",)


# the directories the XDG variables (and pre-commit's own) move the protected home
# entries to: husky's init.sh, git's configuration, ignore and attributes files,
# pre-commit's hook checkouts, Neovim's plugins
_MOVED = (("XDG_CONFIG_HOME", "husky"), ("XDG_CONFIG_HOME", "git"),
          ("XDG_CACHE_HOME", "pre-commit"), ("PRE_COMMIT_HOME", ""),
          ("XDG_DATA_HOME", "nvim/site"), ("XDG_DATA_HOME", "nvim/lazy"),
          ("XDG_DATA_HOME", "zinit"))  # fmt: skip


def _moved_entries(root: str) -> list[str]:
    """What :data:`_MOVED` names in ``root`` (absolute values only), relative to it."""
    out: list[str] = []
    for name, part in _MOVED:
        value = os.environ.get(name, "")
        if not os.path.isabs(value):
            continue
        for path in dict.fromkeys((value, os.path.realpath(value))):
            where = _below(os.path.normpath(os.path.join(path, part)), root)
            if where is not None and where != "." and where not in out:
                out.append(where)
    return out


def _home_entries(root: str) -> list[str]:
    """The home directory's PATH directories, relative to ``root``, when it lies in it.

    With them, what the home's start-up files source and run (:func:`_home_sourced`),
    and the home's protected entries the XDG variables move (:func:`_moved_entries`).
    """
    moved = _moved_entries(root)
    home = os.environ.get("HOME", "")
    if not os.path.isabs(home):
        return moved
    real = os.path.realpath(home)
    where = os.path.relpath(real, root)
    if where == ".." or where.startswith("../"):
        return moved
    out = [part if where == "." else f"{where}/{part}" for part in _HOME_PATH + _HOME_ONLY]
    return moved + out + _home_sourced(real, root)


# the start-up files a login or interactive shell (and a desktop session) reads from
# the home directory: what they source, run by path or put on PATH runs in the
# user's next terminal as surely as they do
_HOME_START = (
    ".profile", ".bash_profile", ".bash_login", ".bashrc", ".bash_aliases", ".bash_logout",
    ".zshenv", ".zprofile", ".zshrc", ".zlogin", ".zlogout", ".kshrc", ".mkshrc",
    ".xprofile", ".xsessionrc",
)  # fmt: skip
_HOME_READ = 32  # files read for one home, at most (start-up files and what they source)
_HOME_BYTES = 65536  # bytes read of each, at most
_HOME_TILDE = re.compile(r"(^|[\s\"'=:(`])~(?=/)", re.MULTILINE)
_PATH_VALUE = re.compile(r"\bPATH\+?=[\"']?([^\"'\s;&|)]*)")
_ZSH_PATH = re.compile(r"\bpath\+?=\(([^)]*)\)")
# `for rc in ~/.bashrc.d/*; do . "$rc"; done`: every file of the directory runs
_FOR_LIST = re.compile(r"\bfor[ \t]+\w+[ \t]+in[ \t]+([^;\n]*)")
# the home's configurations that name programs its tools run (kubectl's exec credential
# plugin, the AWS tools' credential_process, docker's plugin directories, ssh's
# ProxyCommand, tmux's run-shell and source-file and TPM's plugins): each line's program
# or directory, read as configuration (not as a shell script)
_HOME_CONFIGS = (".kube/config", ".aws/config", ".docker/config.json", ".ssh/config",
                 ".tmux.conf", ".config/tmux/tmux.conf", ".inputrc")  # fmt: skip
_CONFIG_COMMAND = re.compile(
    r"^[ \t-]*(?:command:|credential_process[ \t]*=|(?:ProxyCommand|LocalCommand|"
    r"KnownHostsCommand)[ \t=]|run(?:-shell)?[ \t]+(?:-\w+[ \t]+)*)[ \t]*(.+)$",
    re.MULTILINE | re.IGNORECASE,
)
_CONFIG_SOURCED = re.compile(
    r"^[ \t]*(?:source(?:-file)?|\$include)[ \t]+(?:-\w+[ \t]+)*([^\n#]+)", re.M
)
_DOCKER_DIRECTORIES = re.compile(r"\"cliPluginsExtraDirs\"[ \t\r\n]*:[ \t\r\n]*\[([^\]]*)\]")
# a file's own directory, as bash spells it in a file it sources (dotfile managers'
# idiom): $(dirname "${BASH_SOURCE[0]}"), ${BASH_SOURCE%/*}, through readlink -f too
_OWN_DIRECTORY = re.compile(
    r"\$\(\s*(?:cd\s+)?dirname\s+[\"']?(?:\$\(\s*(?:readlink|realpath)(?:\s+-\w+)*\s+"
    r"[\"']?)?\$\{?(?:BASH_SOURCE(?:\[0\])?|0)\}?[\"']?\s*\)?[\"']?\s*(?:&&\s*pwd\s*)?\)"
    r"|\$\{BASH_SOURCE(?:\[0\])?%/\*\}|\$\{0:a:h\}|\$\{\(%\):-%x\}:h"
)
# `eval "$(cat FILE)"`, `source <(cat FILE)`: the file read is run
_CAT_RUN = re.compile(r"(?:\$\(|<\()\s*cat\s+([^)]+)\)")
# `. DIR/*.sh`, `source DIR/*`: every file of the directory
_SOURCE_GLOB = re.compile(
    r"(?:^|[\s;&|(])(?:\.|source)[ \t]+[\"']?([^\s;&|\"'()]*[*?[][^\s;&|\"'()]*)"
)


def _own_directory(path: str, real: str, match: re.Match[str]) -> str:
    """The directory ``match`` spells: where ``real`` lies through readlink, else ``path``'s."""
    resolved = re.search(r"readlink|realpath", match.group(0)) is not None
    return os.path.dirname(real if resolved else path)


def _config_named(text: str) -> tuple[list[str], list[str]]:
    """The programs and directories (first) and configurations sourced (second) of ``text``."""
    named: list[str] = []
    for value in _CONFIG_COMMAND.findall(text):
        value = value.strip().strip("\"'")
        named += [w for w in programs_run(value) if "/" in w]
        named += python_imports(value)
        named += [w for w in script_arguments(value) if w.startswith("/") or w.endswith(".sh")]
        first = value.split()[0] if value.split() else ""
        if first.startswith("/"):
            named.append(first)
    for value in _DOCKER_DIRECTORIES.findall(text):
        named += re.findall(r"\"([^\"]+)\"", value)
    sourced = [v.strip().strip("\"'") for v in _CONFIG_SOURCED.findall(text)]
    return [w for w in named if "$" not in w], [w for w in sourced if w and "$" not in w]


# home, root -> (the identities of the files read, those files, the answer)
_sourced: dict[tuple[str, str], _Kept] = {}


def _home_sourced(home: str, root: str) -> list[str]:
    """What the home's start-up files source, run by path or put on ``PATH``, in ``root``.

    Each start-up file (:data:`_HOME_START`) is read as a shell script, with
    ``$HOME``, ``${HOME}`` and a leading ``~/`` taken for ``home``: every program
    it runs named by a path (``. "$HOME/.cargo/env"``, ``source ~/.nvm/nvm.sh``,
    ``eval "$(~/.local/x/bin/y init)"``; a relative path from ``home``, where a
    login shell starts) and every directory it puts on ``PATH`` is protected when
    it lies in ``root``, and a sourced file is read in turn, at most
    :data:`_HOME_READ` files. Kept until a file read (or looked for) changes.
    """
    key = (home, root)
    kept = _kept_answer(_sourced, key)
    if kept is not None:
        return kept
    queue = [os.path.join(home, name) for name in _HOME_START]
    configs = {os.path.join(home, name) for name in _HOME_CONFIGS}
    queue += sorted(configs)
    reads: list[str] = []
    out: list[str] = []
    inside = root.rstrip("/") + "/"
    opened = 0  # (a file looked for and missing costs a stat: it counts four times less)
    while queue and opened < _HOME_READ and len(reads) < 4 * _HOME_READ:
        path = queue.pop(0)
        if path in reads:
            continue
        reads.append(path)
        # (links followed as a shell's `.` follows them; a FIFO is never waited on)
        real = os.path.realpath(path)
        data = read_regular_file(real, _HOME_BYTES)
        text = None if data is None else shell_text(data)
        if text is None:
            continue
        opened += 1
        text = _HOME_TILDE.sub(lambda match: match.group(1) + home, _braces(text))
        if path in configs:
            named, sourced = _config_named(text.replace("$HOME", home).replace("${HOME}", home))
            for word in named + sourced:
                full = os.path.normpath(os.path.join(home, word))
                for candidate in dict.fromkeys((full, os.path.realpath(full))):
                    if candidate.startswith(inside) and os.path.relpath(candidate, root) not in out:
                        out.append(os.path.relpath(candidate, root))
                if word in sourced:
                    configs.add(full)  # (read as configuration in turn)
                queue.append(full)
            continue
        # the file's own directory: as sourced, or where it really lies (through readlink)
        text = _OWN_DIRECTORY.sub(functools.partial(_own_directory, path, real), text)
        text = expand_assignments(text, {"HOME": home})
        named = [w for w in programs_run(text) if "/" in w and "$" not in w]
        named += python_imports(text)
        named += [
            w.strip("\"'")
            for value in _CAT_RUN.findall(text)
            for w in value.split()
            if not w.startswith("-") and "$" not in w
        ]
        # what the file hands to later programs: a variable naming a file or program
        # (PAGER, EDITOR, LD_PRELOAD, PYTHONSTARTUP, sh's ENV), an alias's command, an
        # argument named like a script (a helper function that sources it)
        named += [
            entry
            for value in assigned_values(text)
            for entry in value.split(":")
            if entry.startswith("/") and "$" not in entry
        ]
        for groups in _ALIAS.findall(text):
            value = next((g for g in groups if g), "")
            named += [w for w in programs_run(value) if "/" in w and "$" not in w]
        named += [w for w in script_arguments(text) if w.startswith("/") or w.endswith(".sh")]
        directories = [
            entry
            for value in _PATH_VALUE.findall(text)
            for entry in value.split(":")
            if entry.startswith("/") and "$" not in entry
        ]
        directories += [
            entry.strip("\"'")
            for value in _ZSH_PATH.findall(text)
            for entry in value.split()
            if entry.strip("\"'").startswith("/") and "$" not in entry
        ]
        for word in _SOURCE_GLOB.findall(text):
            if word.startswith("/") and "$" not in word:
                parts = word.split("/")
                glob = next(i for i, part in enumerate(parts) if any(c in part for c in "*?["))
                directories.append("/".join(parts[:glob]) or "/")
        for value in _FOR_LIST.findall(text):
            for word in value.split():
                word = word.strip("\"'")
                if word.startswith("/") and any(c in word for c in "*?["):
                    parts = word.split("/")
                    glob = next(i for i, part in enumerate(parts) if any(c in part for c in "*?["))
                    directories.append("/".join(parts[:glob]) or "/")
                elif word.startswith("/") and "$" not in word:
                    named.append(word)  # (each file of the list is sourced in turn)
        for word in named + directories:
            full = os.path.normpath(os.path.join(home, word))
            out += _led_inside(full, root)
            if word in named:
                queue.append(full)
    answer = list(dict.fromkeys(out))
    _keep_answer(_sourced, key, reads, answer)
    return answer


# direnv: what an .envrc (evaluated by bash at every `cd` into its directory, once
# allowed) sources, puts on PATH or has a tool evaluate
_DIRENV_READ = 128  # files read for one root, at most
_DIRENV_SOURCE = re.compile(
    r"^[ \t]*(?:source_env|source_env_if_exists|source|\.)[ \t]+[\"']?([^\"'\s;&|]+)", re.M
)
_DIRENV_DIRECTORIES = re.compile(
    r"^[ \t]*(?:PATH_add|path_add[ \t]+\w+|load_prefix)[ \t]+([^;&|\n#]+)", re.M
)
_DIRENV_DOTENV = re.compile(r"^[ \t]*dotenv(?:_if_exists)?\b[ \t]*([^;&|\s#]*)", re.M)
_DIRENV_USE = re.compile(r"^[ \t]*(use|layout)(?:_|[ \t]+)(\w+)", re.M)
# `use flake ./nix#dev`, `use flake path:./nix`: a flake in a directory of the project
_DIRENV_FLAKE = re.compile(
    r"^[ \t]*use(?:_|[ \t]+)flake[ \t]+[\"']?(?:path:)?"
    r"(\.{1,2}(?:/[^\s\"'#?;&|]*)?|/[^\s\"'#?;&|]*)",
    re.M,
)
# what each `use X` / `layout X` evaluates or puts on PATH, from the .envrc's directory
_DIRENV_FILES = {
    "nix": ("shell.nix", "default.nix"), "flake": ("flake.nix", "flake.lock"),
    "devbox": ("devbox.json", "devbox.lock"), "guix": ("manifest.scm", "guix.scm"),
    "python": (".direnv",), "python3": (".direnv",), "node": ("node_modules",),
    "pipenv": ("Pipfile", "Pipfile.lock"), "poetry": ("pyproject.toml", "poetry.lock"),
    "pyenv": (".python-version",), "uv": (".venv", "pyproject.toml"),
}  # fmt: skip
# root, tops -> (the identities of the files read, those files, the answer)
_direnvs: dict[tuple[str, tuple[str, ...]], _Kept] = {}


def _direnv_entries(root: str, tops: tuple[str, ...]) -> list[str]:
    """What each ``.envrc`` of ``root`` runs: in ``tops``, and each repository's top.

    direnv evaluates an allowed ``.envrc`` with bash at every ``cd`` into its
    directory or below: the ``.envrc`` is protected by name, and so is what it
    runs there, as a hook's callees are. Each is read as a shell script from its
    own directory (``$PWD``, ``$(pwd)``, ``$(dirname "${BASH_SOURCE[0]}")`` taken for it):
    every file it sources (``source_env``, ``source_env_if_exists``,
    ``source``, ``.``; a directory's ``.envrc``), read in turn; every directory
    it puts on ``PATH`` (``PATH_add``, ``path_add``, ``load_prefix``,
    ``PATH=DIR:$PATH``); the
    files its ``use`` and ``layout`` evaluate or put on ``PATH`` (``use nix``:
    ``shell.nix``, ``default.nix``; ``use flake``: ``flake.nix``, ``flake.lock``, in
    the directory ``use flake ./nix#dev`` names;
    ``layout python``: ``.direnv``, ...; :data:`_DIRENV_FILES`) and devbox's
    files when it names devbox; a ``dotenv`` file (``.env`` by default: its
    variables); and every program or script it runs by a path. At most
    :data:`_DIRENV_READ` files. Kept until a file read (or looked for) changes.
    """
    key = (root, tops)
    kept = _kept_answer(_direnvs, key)
    if kept is not None:
        return kept
    queue = [
        os.path.join(root, top, ".envrc") if top else os.path.join(root, ".envrc") for top in tops
    ]
    reads: list[str] = []
    out: list[str] = []
    while queue and len(reads) < _DIRENV_READ:
        path = queue.pop(0)
        if path in reads:
            continue
        reads.append(path)
        data = read_regular_file(os.path.realpath(path), _HOME_BYTES)
        text = None if data is None else shell_text(data)
        if text is None:
            continue
        here = os.path.dirname(path)
        text = own_directory(text, here)
        text = working_directory(text, here)
        text = expand_assignments(text, {"PWD": here})
        # (`for f in env.d/*.sh; do source "$f"; done`: each word of the list sourced)
        bound = loop_bound(text, here, reads)
        text = f"{text}\n{bound}" if bound else text
        sourced = _DIRENV_SOURCE.findall(text)
        named = [w for w in programs_run(text) if "/" in w and "$" not in w]
        named += python_imports(text)
        named += [w for w in script_arguments(text) if "/" in w or w.endswith(".sh")]
        named += [w.strip("\"'") for v in _DIRENV_DIRECTORIES.findall(text) for w in v.split()]
        named += [value or ".env" for value in _DIRENV_DOTENV.findall(text)]
        named += [e for value in _PATH_VALUE.findall(text) for e in value.split(":") if e]
        exported, python_dirs = _exported_entries(text)
        named += exported
        for _, tool in _DIRENV_USE.findall(text):
            named += _DIRENV_FILES.get(tool, ())
        for flake in _DIRENV_FLAKE.findall(text):
            named += [f"{flake}/{name}" for name in _DIRENV_FILES["flake"]]
        if re.search(r"\bdevbox\b", text):
            named += _DIRENV_FILES["devbox"]
        # a file below a directory, its name made at run time (`source "d/$f"` in a loop
        # over `$(ls d)`): anything in that directory
        for word in dict.fromkeys(sourced + programs_run(text)):
            made = os.path.dirname(word.split("$", 1)[0]) if "$" in word else ""
            if made not in ("", ".") and not word.startswith(("-", "#")) and "`" not in made:
                out += _led_inside(os.path.normpath(os.path.join(here, made, "*")), root)
        for word in dict.fromkeys(sourced + named):
            if "$" in word:
                continue
            full = os.path.normpath(os.path.join(here, os.path.expanduser(word)))
            out += _led_inside(full, root)
            if word in sourced and glob.has_magic(full):
                # a pattern (`source env.d/*.sh`): protected as written, whatever it
                # matches now or later; what it matches now read in turn
                directory, matches = glob_matches(full, _DIRENV_READ)
                reads.append(directory)
                queue += matches
            elif word in sourced:
                # (source_env of a directory loads its .envrc)
                queue.append(os.path.join(full, ".envrc") if os.path.isdir(full) else full)
        for word in python_dirs:
            # (a PYTHONPATH directory: what would shadow the standard library there,
            # the directory found once, not each name)
            full = os.path.normpath(os.path.join(here, os.path.expanduser(word)))
            for candidate in dict.fromkeys((full, os.path.realpath(full))):
                where = _below(candidate, root)
                if where is not None:
                    prefix = "" if where == "." else f"{where}/"
                    out += [prefix + name for name in _python_shadows()]
    answer = list(dict.fromkeys(out))
    _keep_answer(_direnvs, key, reads, answer)
    return answer


# mise's configurations at a project's top (mise.*.toml, .mise.*.toml by glob)
_MISE_FILES = (
    "mise.toml", ".mise.toml", "mise.local.toml", ".mise.local.toml", "mise/config.toml",
    ".mise/config.toml", ".config/mise.toml", ".config/mise/config.toml",
)  # fmt: skip
_MISE_GLOBS = ("mise.*.toml", ".mise.*.toml", ".config/mise/conf.d/*.toml")
_MISE_HOOKS = ("enter", "cd", "leave", "preinstall", "postinstall")
_MISE_ROOT = re.compile(r"\{\{\s*config_root\s*\}\}")
_mises: dict[tuple[str, tuple[str, ...]], _Kept] = {}


def _mise_values(value: object, keys: tuple[str, ...] = ("path", "script", "run")) -> list[str]:
    """The strings of a mise setting: a string, a list, or a table's ``keys``."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for item in value for s in _mise_values(item, keys)]
    if isinstance(value, dict):
        return [s for key in keys for s in _mise_values(value.get(key), keys)]
    return []


def _mise_named(data: dict[str, object]) -> tuple[list[str], list[str]]:
    """What a mise configuration names: (files and directories, commands)."""
    named: list[str] = []
    env = data.get("env")
    special = env.get("_") if isinstance(env, dict) else None
    if isinstance(special, dict):
        for key in ("source", "path", "file"):
            named += _mise_values(special.get(key))
        python = special.get("python")
        if isinstance(python, dict):
            named += _mise_values(python.get("venv"))
    tools = data.get("tools")
    for tool in tools.values() if isinstance(tools, dict) else ():
        if isinstance(tool, dict):
            named += _mise_values(tool.get("virtualenv"))
    hooks = data.get("hooks")
    commands = [
        c for key in _MISE_HOOKS for c in _mise_values((hooks or {}).get(key))
    ] if isinstance(hooks, dict) else []  # fmt: skip
    return named, commands


# git's variables naming a file or directory it reads its configuration (and so what it
# runs) from
_GIT_FILE_VARIABLES = ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG", "GIT_DIR",
                       "GIT_COMMON_DIR", "GIT_EXEC_PATH", "GIT_TEMPLATE_DIR")  # fmt: skip


def _mise_variables(data: dict[str, object]) -> list[tuple[str, str]]:
    """The variables a mise configuration's ``[env]`` sets to a string (not its ``_``)."""
    env = data.get("env")
    if not isinstance(env, dict):
        return []
    return [
        (name, value)
        for name, value in env.items()
        if name != "_" and isinstance(value, str) and re.fullmatch(r"[A-Za-z_]\w*", name)
    ]


def _mise_entries(root: str, tops: tuple[str, ...]) -> list[str]:
    """What mise's configurations at the root's top and each repository's top run, in ``root``.

    mise, activated in the user's shell, runs a trusted configuration's ``[hooks]``
    (``enter``, ``cd``, ...) on entering its directory, sources its ``[env]``
    ``_.source`` scripts at every prompt, puts its ``_.path`` directories first on
    ``PATH``, loads its ``_.file`` files and activates a tool's ``virtualenv`` (or
    ``_.python.venv``). The configurations are protected by name; these are kept
    too, from the project's top (``{{config_root}}`` is it), and each hook's command
    is read as a hook's is (the programs and scripts it runs by a path). The
    variables ``[env]`` exports into the user's shell are read as an ``.envrc``'s
    exports are (the loaders' search variables, ``PYTHONPATH``), and git's
    configuration variables (``GIT_CONFIG_GLOBAL``...) keep the file they name.
    Kept until a file read (or looked for) changes.
    """
    key = (root, tops)
    kept = _kept_answer(_mises, key)
    if kept is not None:
        return kept
    reads: list[str] = []
    out: list[str] = []
    for top in tops:
        here = os.path.join(root, top) if top else root
        reads.append(here)  # (a mise.<env>.toml made there changes the answer)
        paths = [os.path.join(here, name) for name in _MISE_FILES]
        for pattern in _MISE_GLOBS:
            paths += sorted(glob.glob(os.path.join(glob.escape(here), pattern)))[:8]
            reads.append(os.path.dirname(os.path.join(here, pattern)))
        for path in dict.fromkeys(paths):
            reads.append(path)
            data = read_regular_file(os.path.realpath(path), _HOME_BYTES)
            if data is None:
                continue
            text = _MISE_ROOT.sub(here.replace("\\", "\\\\"), data.decode("utf-8", "replace"))
            try:
                parsed = tomllib.loads(text)
            except tomllib.TOMLDecodeError:
                continue
            named, commands = _mise_named(parsed)
            # `[env]`, exported into the user's shell on entering the directory: what
            # its search variables and git's configuration variables name
            variables = _mise_variables(parsed)
            exported, python_dirs = _exported_entries(
                "\n".join(f"export {name}={shlex.quote(value)}" for name, value in variables)
            )
            named += exported
            named += [value for name, value in variables if name in _GIT_FILE_VARIABLES]
            for word in python_dirs:
                full = os.path.normpath(os.path.join(here, os.path.expanduser(word)))
                where = _below(full, root)
                if where is not None:
                    prefix = "" if where == "." else f"{where}/"
                    out += [prefix + name for name in _python_shadows()]
            for command in commands:
                named += [w for w in programs_run(command) if "/" in w]
                named += python_imports(command)
                named += script_arguments(command)
            for word in dict.fromkeys(named):
                if "$" in word or "{{" in word:
                    continue
                full = os.path.normpath(os.path.join(here, os.path.expanduser(word)))
                out += _led_inside(full, root)
    answer = list(dict.fromkeys(out))
    _keep_answer(_mises, key, reads, answer)
    return answer


def _exported_entries(text: str) -> tuple[list[str], list[str]]:
    """What the search variables a shell text sets name, as written (relative: to its directory).

    The other search lists' directories and files (:data:`SEARCH_DIRECTORIES`,
    :data:`SEARCH_FILES`), protected whole, the modules ``NODE_OPTIONS``
    preloads (``--require``, ``--import``, ``--loader``), the files and
    directories git, the shell and other tools load from what a variable names,
    and what a command a variable holds runs (:func:`._variables.variable_named`:
    ``GIT_CONFIG_GLOBAL``, ``XDG_CONFIG_HOME``, ``EDITOR``, ``PROMPT_COMMAND``); then, apart,
    ``PYTHONPATH``'s directories: a project's source there (``$PWD/src``) keeps
    writable what does not shadow the standard library or a tool run as a
    module (as for this process's own, :func:`_search_entries`).
    """
    out: list[str] = []
    python: list[str] = []
    for name, value in assignments(text):
        if name == "PYTHONPATH":
            python += [e for e in value.split(":") if e and "$" not in e]
            continue
        # a search list, git's configuration, a configuration tree, a command run
        loaded, command = variable_named(name, value)
        out += loaded
        if command is not None:
            out += [w for w in programs_run(command) if "/" in w]
            out += [w for w in script_arguments(command) if "/" in w or w.endswith(".sh")]
            out += python_imports(command)
    return out, python


_ALIAS = re.compile(r"\balias[ \t]+[\w.:+-]+=(?:'([^'\n]*)'|\"([^\"\n]*)\"|(\S+))")
_BRACES = re.compile(r"([^\s{}'\"]*)\{([^{}\s'\"]*,[^{}\s'\"]*)\}([^\s{}'\"]*)")


def _braces(text: str) -> str:
    """``text`` with each plain brace list expanded as bash does (``~/.{a,b}``)."""
    return _BRACES.sub(
        lambda m: " ".join(m.group(1) + part + m.group(3) for part in m.group(2).split(",")), text
    )


# per (root, PATH, HOME, the interpreter's prefixes, the search variables): the walk's
# answer they were found with (while the walk is answered again unwalked, no link in the
# root changed) and them
_environment: dict[tuple[str, ...], tuple[object, list[str]]] = {}


def _environment_entries(root: str, matcher: ProtectedPaths) -> list[str]:
    """What this process's environment makes protected in ``root``, found again after a change.

    :func:`_path_entries`, :func:`_interpreter_entries`, :func:`_search_entries`
    and :func:`_prism_entries`.
    """
    key = (root, os.environ.get("PATH", ""), os.environ.get("HOME", ""), sys.prefix,
           sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, *_prism_directories(),
           *(os.environ.get(n, "") for n in (*SEARCH_DIRECTORIES, *SEARCH_FILES)))  # fmt: skip
    with _trees_lock:
        watched = _watched.get((root, matcher.entries))
        hit = _environment.get(key)
    token = watched[1] if watched is not None else None
    if token is not None and hit is not None and hit[0] is token:
        return hit[1]
    found = _path_entries(root) + _interpreter_entries(root)
    more = _search_entries(root) + _prism_entries(root) + _shadowing_entries(root)
    found += [e for e in more if e not in found]
    if token is not None:
        with _trees_lock:
            if len(_environment) >= 64:
                _environment.clear()
            _environment[key] = (token, found)
    return found


def _below(path: str, root: str) -> str | None:
    """``path`` (absolute, normalised) relative to ``root``: ``.`` for the root; None outside."""
    where = os.path.relpath(path, root)
    return None if where == ".." or where.startswith("../") else where


def _path_entries(root: str) -> list[str]:
    """This process's ``PATH`` directories that lie in ``root``, relative to it.

    A program written there shadows git, ls or python in the user's next terminal
    (started with this ``PATH``: direnv's ``PATH_add bin``, a project's
    ``node_modules/.bin``). Each entry as written (a link there leads elsewhere:
    the link is kept) and where it leads; a relative one below the root's top; a
    leading ``~`` as bash expands it. The root itself on ``PATH`` (or ``.``) is not
    protected whole: its files stay the tools' to write.
    """
    home = os.environ.get("HOME", "")
    out: list[str] = []
    for entry in dict.fromkeys(os.environ.get("PATH", "").split(os.pathsep)):
        if entry == "~" or entry.startswith("~/"):
            entry = home + entry[1:]
        elif entry.startswith("~"):
            continue  # (another user's home, the directory stack: not a root's, as a rule)
        written = os.path.normpath(os.path.join(root, entry))
        for path in (written, os.path.realpath(written)):
            where = _below(path, root)
            if where is not None and where != "." and where not in out:
                out.append(where)
    return out


def _interpreter_entries(root: str) -> list[str]:
    """The running interpreter's prefixes that lie in ``root``, relative to it.

    Prism imports its own modules from there (lazily too) and runs that
    interpreter (the Landlock helper, ``uv run``): a virtual environment without
    a ``pyvenv.cfg`` of its own (a conda environment), a Python installed in a
    home directory, the base interpreter of a virtual environment. The root
    itself as a prefix: its interpreter's and packages' directories.
    """
    out: list[str] = []
    prefixes = (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix)
    for prefix in dict.fromkeys(prefixes):
        for path in (os.path.abspath(prefix), os.path.realpath(prefix)):
            where = _below(path, root)
            if where == ".":
                out += [part for part in VENV_PARTS if part not in out]
            elif where is not None and where not in out:
                out.append(where)
    return out


# with ``.`` (or an empty entry) on PATH, every directory is a PATH directory: these
# names (what the user and Prism commonly run, and what git itself runs through PATH:
# its default editor and pager, git-lfs, credential helpers, signing programs) are
# protected at any depth
_COMMON_PROGRAMS = ("git", "ls", "cat", "sh", "bash", "python", "python3", "pip", "pip3", "node",
                    "npm", "npx", "make", "sudo", "ssh", "grep", "sed", "find", "uv",
                    "editor", "sensible-editor", "vi", "vim", "nvim", "nano", "emacs", "pager",
                    "less", "more", "git-lfs", "git-credential-*", "gpg", "gpg2", "gpgsm",
                    "ssh-keygen", "delta", "gh", "code", "docker", "cargo", "go", "rm", "cp",
                    "mv", "env", "which", "curl", "wget", "tar", "awk", "xargs", "perl", "ruby",
                    "zsh", "tmux", "head", "tail", "diff", "pnpm", "yarn", "bun",
                    "python2", "pip2", "pytest")  # fmt: skip


def _variable_entries(name: str) -> list[str]:
    """The entries of the environment variable ``name`` (a search list, or files)."""
    value = os.environ.get(name, "")
    if name == "LD_PRELOAD":
        return re.split("[: ]", value)  # (ld.so splits it at spaces too)
    entries = value.split(os.pathsep)
    if name == "CLASSPATH":
        # ``lib/*``: every jar of lib
        entries = [e[:-2] if e.endswith("/*") else e for e in entries]
    return entries


def _search_entries(root: str) -> list[str]:
    """What the search variables name in ``root`` (absolute entries), relative to it.

    Each entry as written and where it leads; the root itself is not protected
    whole (its files stay the tools' to write). Relative entries:
    :func:`environment_patterns`.
    """
    home = os.environ.get("HOME", "")
    out: list[str] = []
    for name in (*SEARCH_DIRECTORIES, *SEARCH_FILES):
        for entry in _variable_entries(name):
            if entry == "~" or entry.startswith("~/"):
                entry = home + entry[1:]
            if not entry.startswith("/"):
                continue
            written = os.path.normpath(entry)
            for path in (written, os.path.realpath(written)):
                where = _below(path, root)
                if where is None or where == ".":
                    continue
                if name == "PYTHONPATH":
                    # (a project's own source directory, PYTHONPATH=$PWD/src: its files
                    # stay the tools' to write; what would shadow the standard library
                    # in every python the user starts does not)
                    out += [f"{where}/{n}" for n in _python_shadows() if f"{where}/{n}" not in out]
                elif where not in out:
                    out.append(where)
    return out


def _prism_directories() -> list[str]:
    """The directories Prism's own modules are imported from (``prism``'s package path)."""
    package = sys.modules.get("prism")
    return [str(path) for path in getattr(package, "__path__", ())]


@functools.lru_cache(maxsize=4)
def _prism_paths(directories: tuple[str, ...]) -> tuple[str, ...]:
    """Each of ``directories`` as written and where it leads (found once)."""
    paths = [p for d in directories for p in (os.path.abspath(d), os.path.realpath(d))]
    return tuple(dict.fromkeys(paths))


def _prism_entries(root: str) -> list[str]:
    """Prism's own package directories that lie in ``root`` (an editable install), relative.

    Prism imports its modules from there (lazily too) and runs its sandbox's
    launcher by its file: a rewrite of them would run on the host, as Prism.
    """
    out: list[str] = []
    inside = root.rstrip("/") + "/"
    for path in _prism_paths(tuple(_prism_directories())):
        where = _below(path, root) if path.startswith(inside) else None
        if where is not None and where != "." and where not in out:
            out.append(where)
    return out


def environment_patterns() -> tuple[str, ...]:
    """Protected entries (matched at any depth) for the relative entries of the search lists.

    A relative entry of ``PATH`` (``node_modules/.bin``, ``./bin``) or of a search
    variable (:data:`SEARCH_DIRECTORIES`) names a directory below wherever a
    program runs: the user's shell in any directory of a root. Each is
    protected wherever it lies (``../bin`` as ``bin``); ``.`` or an empty entry
    on ``PATH`` makes every directory one: a few common programs' names are
    protected at any depth.
    """
    out: list[str] = []
    lists = [("PATH", os.environ.get("PATH", "").split(os.pathsep))]
    lists += [(name, _variable_entries(name)) for name in SEARCH_DIRECTORIES if name in os.environ]
    for name, entries in lists:
        for entry in entries:
            if entry.startswith(("/", "~", "$")) or _WILDCARD_CHARACTERS.search(entry):
                continue
            parts = [p for p in os.path.normpath(entry or ".").split("/") if p not in ("", "..")]
            if parts == ["."] or not parts:
                if name == "PATH":
                    out += [p for p in _COMMON_PROGRAMS if p not in out]
                continue
            joined = "/".join(parts)
            if joined not in out:
                out.append(joined)
    return tuple(out)


_WILDCARD_CHARACTERS = re.compile(r"[*?\[\]\\]")


@functools.lru_cache(maxsize=1)
def _python_shadows() -> tuple[str, ...]:
    """The names that shadow a standard module from a directory before the standard library.

    Each top-level module of ``sys.stdlib_module_names`` (and ``sitecustomize``,
    ``usercustomize``, the modules site-packages' ``.pth`` files import:
    :func:`._pymodules.pth_modules`) as a package directory and with each suffix this
    interpreter imports (``.py``, ``.pyc``, its extension modules' suffixes).
    """
    suffixes = ("", *importlib.machinery.all_suffixes())
    return tuple(f"{name}{suffix}" for name in shadowed_names() for suffix in suffixes)


def _top_python_shadows(tops: list[str]) -> list[str]:
    """What replaces a standard module at each of ``tops`` (relative to the root; ``""``: the top).

    ``python3 -m pip``, ``-c`` and the interactive interpreter search the
    directory they start in first: one :data:`MODULE_SHADOWS` entry per top
    (see :func:`._pymodules.module_shadow_names`).
    """
    return [f"{top}/{MODULE_SHADOWS}" if top else MODULE_SHADOWS for top in tops]


def _shadowing_entries(root: str) -> list[str]:
    """What shadows a later program's own when ``PATH`` or ``PYTHONPATH`` names the root itself.

    The root is not protected whole (its files stay the tools' to write), but at
    its top the names of common programs (``PATH``) and of the standard library's
    modules (``PYTHONPATH=$PWD``: a ``re.py`` there runs in every python the user
    starts) are.
    """
    home = os.environ.get("HOME", "")
    out: list[str] = []
    for name, names in (("PATH", _COMMON_PROGRAMS), ("PYTHONPATH", None)):
        for entry in os.environ.get(name, "").split(os.pathsep):
            if entry == "~" or entry.startswith("~/"):
                entry = home + entry[1:]
            if not entry.startswith("/"):
                continue
            written = os.path.normpath(entry)
            if _below(written, root) == "." or _below(os.path.realpath(written), root) == ".":
                out += [n for n in (names or _python_shadows()) if n not in out]
                break
    return out
