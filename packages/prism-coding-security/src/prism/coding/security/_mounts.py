"""Protected paths inside writable roots, as bubblewrap mounts and host placeholders.

For each writable root, each protected entry (``_protected.py``, plus the
hooks directory and submodules git names there: :func:`git_entries`) is walked one component
at a time from the root:

* an existing directory on the way is bound onto itself read-write ("pinned"):
  a mount point cannot be renamed, so ``mv .git elsewhere && mkdir .git`` fails
  with EBUSY instead of swapping in a fresh ``.git/config``;
* the entry itself, or the first component that is a file where a directory was
  expected (a worktree's ``.git`` file), is bound onto itself read-only;
* a symbolic link: its target is bound read-only; the link itself can still be
  replaced (a mount cannot sit on a link), so a dangling link refuses the run;
* the first missing component gets a placeholder bound read-only, so nothing
  can be created there (see ``_MODE`` below for what it looks like).

A bind mount needs its mount point to exist on the host. bwrap would create a
missing one itself (an empty ``0444`` file) and leave it behind, so
:class:`PlaceholderLease` creates them first, holds a shared ``flock`` on the
root while commands run, and removes them afterwards when no other run holds
the root. Without a lease (``wrap()`` alone) ``/dev/null`` is bound at each
missing path and bwrap's own mount points stay behind.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import fnmatch
import glob
import os
import shutil
import stat
import subprocess
from typing import TYPE_CHECKING

from ._errors import SandboxUnavailableError
from ._gitshadow import GitShadow

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

__all__ = [
    "PlaceholderLease",
    "git_entries",
    "is_placeholder",
    "nested_entries",
    "protected_mount_args",
    "protected_plan",
]

_PIN, _RO = "pin", "ro"
_PLACEHOLDER, _PLACEHOLDER_DIR = "placeholder", "placeholder-dir"

# Placeholders are empty regular files with mode 1444, or empty directories
# with mode 1555 (for .git, and for a missing parent such as .vscode): readable,
# so `grep -r .` and `cp -r` inside the sandbox pass them by, and marked by the
# sticky bit, which no one sets on a file or a private directory, so only ours
# are ever removed. Inside the sandbox each is bound read-only onto itself. git
# dies on a .git *file* it cannot parse but skips an empty .git directory (on
# the host too). A placeholder git reads must hold something git accepts: an
# empty commondir makes every git command die; "." names the git directory.
_MODE, _DIR_MODE = 0o1444, 0o1555
#: directories read, per root and command, looking for protected names below the top
WALK_LIMIT = 20_000
_CONTENT = {"commondir": b".\n"}
_EMBEDDED_GIT = (
    "config", "config.worktree", "hooks", "commondir", "info/attributes", "modules", "worktrees",
)  # fmt: skip


def _concrete(root: str, entries: Sequence[str]) -> Iterator[list[str]]:
    """Each entry as components under ``root``.

    A glob component expands to the existing directory entries it matches; the
    literal components after it are kept even when missing, so
    ``.git/modules/*/commondir`` names a placeholder in every existing module.
    """
    for entry in entries:
        prefixes: list[list[str]] = [[]]
        for part in entry.split("/"):
            if not any(ch in part for ch in "*?["):
                prefixes = [[*prefix, part] for prefix in prefixes]
                continue
            expanded: list[list[str]] = []
            for prefix in prefixes:
                base = os.path.join(root, *prefix)
                pattern = os.path.join(glob.escape(base), part)
                for match in sorted(glob.glob(pattern, include_hidden=True)):
                    expanded.append([*prefix, os.path.basename(match)])
            prefixes = expanded
        yield from prefixes


def _git(root: str, *args: str) -> bytes | None:
    git = shutil.which("git")
    if git is None:
        return None
    try:
        result = subprocess.run(
            [git, "-C", root, *args],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            check=False,
            timeout=10,
        )
    except subprocess.TimeoutExpired as exc:
        raise SandboxUnavailableError(
            f"git did not answer about {root} within 10s ({' '.join(args[:2])}); refusing to run"
        ) from exc
    return result.stdout if result.returncode == 0 else None


def git_entries(root: str) -> list[str]:
    """Entries git itself names for ``root``: its hooks directory and its submodules.

    * ``core.hooksPath`` may name a directory in the work tree (``.githooks``,
      ``.husky/_``): the next ``git commit`` on the host runs what is there.
      Git is asked (all config scopes, includes followed); it counts when it
      lies inside ``root``.
    * for each submodule in the index (a gitlink), ``<path>/.git``: repointed,
      the host's ``git status`` would run a command-made git directory's
      ``core.fsmonitor``. An embedded ``.git`` directory keeps its objects
      writable: its ``config``, ``hooks``, ``commondir`` and
      ``info/attributes`` are protected instead.

    No git or no repository: no entries.

    Raises:
        SandboxUnavailableError: git did not answer within 10 seconds.
    """
    out: list[str] = []
    hooks_out = _git(root, "rev-parse", "--path-format=absolute", "--git-path", "hooks")
    if hooks_out is not None:
        hooks = os.path.realpath(hooks_out.decode("utf-8", "surrogateescape").strip())
        if hooks.startswith(root.rstrip("/") + "/"):
            out.append(glob.escape(os.path.relpath(hooks, root)))
    pattern = r"^include(if\..*)?\.path$"
    includes = _git(root, "config", "--show-origin", "-z", "--get-regexp", pattern)
    for path in _include_targets(root, includes or b""):
        if path.startswith(root.rstrip("/") + "/"):
            out.append(glob.escape(os.path.relpath(path, root)))
    listing = _git(root, "ls-files", "--stage", "-z")
    for record in (listing or b"").split(b"\0"):
        meta, _, name = record.partition(b"\t")
        if not meta.startswith(b"160000 "):
            continue
        text = name.decode("utf-8", "surrogateescape")
        path = glob.escape(text)
        dot_git = os.path.join(root, text, ".git")
        if os.path.isdir(dot_git) and not os.path.islink(dot_git):
            out += [f"{path}/.git/{part}" for part in _EMBEDDED_GIT]
            continue
        out.append(f"{path}/.git")
        target = _gitfile_target(dot_git)
        if target is not None and target.startswith(root.rstrip("/") + "/"):
            # the git directory a .git file names, when it lies in the root
            relative = glob.escape(os.path.relpath(target, root))
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


def nested_entries(
    root: str, entries: Sequence[str], *, max_directories: int = WALK_LIMIT
) -> tuple[list[str], bool]:
    """``entries`` that exist below the top of ``root`` now, as entries relative to ``root``.

    Walks the tree breadth first (not into ``.git`` directories, not through
    links), reading at most ``max_directories`` directories, so a huge tree
    (a ``node_modules`` of 100,000 directories) costs a bounded time per
    command. Below a nested ``.git`` directory each ``.git/...`` entry counts,
    existing or not (its placeholders stay inside that git directory); any
    other entry counts when it exists. What is created later is not covered.

    Returns:
        The entries found, and whether the walk read the whole tree.
    """
    literal: dict[str, list[str]] = {}
    patterns: list[tuple[str, str]] = []
    for entry in entries:
        first = entry.split("/", 1)[0]
        if any(ch in first for ch in "*?["):
            patterns.append((first, entry))
        else:
            literal.setdefault(first, []).append(entry)
    out: list[str] = []
    queue = collections.deque([root])
    read = 0
    while queue:
        if read >= max_directories:
            return out, False
        read += 1
        directory = queue.popleft()
        try:
            with os.scandir(directory) as listing:
                children = list(listing)
        except OSError:
            continue
        below_top = directory != root
        prefix = glob.escape(os.path.relpath(directory, root))
        for child in children:
            if below_top:
                matching = literal.get(child.name, []) + [
                    e for p, e in patterns if fnmatch.fnmatchcase(child.name, p)
                ]
                for entry in matching:
                    for parts in _concrete(directory, [entry]):
                        if parts[0] == ".git" or os.path.lexists(os.path.join(directory, *parts)):
                            out.append(f"{prefix}/" + "/".join(glob.escape(p) for p in parts))
            if (
                child.name != ".git"
                and child.is_dir(follow_symlinks=False)
                and not is_placeholder(child.path)
            ):
                queue.append(child.path)
    return out, True


def protected_plan(
    root: str, entries: Sequence[str], extra: Sequence[str] | None = None
) -> list[tuple[str, str]]:
    """``(kind, path)`` mounts protecting ``entries`` under ``root``, parents first.

    ``kind`` is ``"pin"`` (bind onto itself read-write), ``"ro"`` (bind the
    path, a link's target, or an existing placeholder read-only), or
    ``"placeholder"`` / ``"placeholder-dir"`` (missing: a placeholder file or
    directory is due; without one bwrap gets ``/dev/null``).

    ``extra`` adds entries; None asks git for them (:func:`git_entries`).

    Raises:
        SandboxUnavailableError: a protected path is a dangling symbolic link.
    """
    plan: dict[str, str] = {}
    if extra is None:
        extra = git_entries(root)
    for parts in _concrete(root, [*entries, *extra]):
        current = root
        for index, part in enumerate(parts):
            path = os.path.join(current, part)
            try:
                info = os.lstat(path)
            except FileNotFoundError:
                as_dir = part == ".git" or index < len(parts) - 1
                if as_dir or plan.get(path) != _PLACEHOLDER_DIR:
                    plan[path] = _PLACEHOLDER_DIR if as_dir else _PLACEHOLDER
                break
            if is_placeholder(path):
                plan[path] = _RO
                break
            if stat.S_ISLNK(info.st_mode):
                target = os.path.realpath(path)
                if not os.path.exists(target):
                    raise SandboxUnavailableError(
                        f"protected path {path} is a dangling symbolic link; the sandbox "
                        "cannot keep a file from being created through it; remove it or "
                        "point it at an existing file"
                    )
                plan[target] = _RO
                break
            if index == len(parts) - 1 or not stat.S_ISDIR(info.st_mode):
                plan[path] = _RO
                break
            plan.setdefault(path, _PIN)
            current = path
    ordered = sorted(plan.items(), key=lambda item: (item[0].count("/"), item[0]))
    sealed: list[str] = []
    out: list[tuple[str, str]] = []
    for path, kind in ordered:
        # below a read-only bind or a placeholder everything is covered already
        if any(path.startswith(s.rstrip("/") + "/") for s in sealed):
            continue
        if kind != _PIN:
            sealed.append(path)
        out.append((kind, path))
    return out


def protected_mount_args(
    root: str, entries: Sequence[str], extra: Sequence[str] | None = None, *, shadowed: bool = False
) -> list[str]:
    """The bwrap arguments for :func:`protected_plan` (after ``--bind root root``).

    ``shadowed``: ``root/.git`` is a :class:`~._gitshadow.GitShadow`, whose
    mounts come first; only the plan's mounts inside ``.git/objects`` remain.
    """
    args: list[str] = []
    for kind, path in _plan(root, entries, extra, shadowed=shadowed):
        if kind == _PIN:
            args += ["--bind", path, path]
        elif kind == _RO:
            args += ["--ro-bind", path, path]
        else:
            args += ["--ro-bind", "/dev/null", path]
    return args


def _plan(
    root: str, entries: Sequence[str], extra: Sequence[str] | None, *, shadowed: bool
) -> list[tuple[str, str]]:
    plan = protected_plan(root, entries, extra)
    if not shadowed:
        return plan
    git_dir = os.path.join(root, ".git")
    objects = os.path.join(git_dir, "objects")
    return [
        (kind, path) for kind, path in plan if not _within(path, git_dir) or _within(path, objects)
    ]


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory + "/")


def is_placeholder(path: str) -> bool:
    """Whether ``path`` is one of our placeholders.

    An empty directory with mode ``1555``, or a regular file with mode ``1444``
    holding exactly the placeholder content for its name (empty, or ``.`` for
    a ``commondir``).
    """
    try:
        info = os.lstat(path)
    except OSError:
        return False
    if stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == _DIR_MODE:
        try:
            return not os.listdir(path)
        except OSError:
            return False
    if not stat.S_ISREG(info.st_mode) or stat.S_IMODE(info.st_mode) != _MODE:
        return False
    content = _CONTENT.get(os.path.basename(path), b"")
    if info.st_size != len(content):
        return False
    if not content:
        return True
    try:
        with open(path, "rb") as handle:
            return handle.read(len(content) + 1) == content
    except OSError:
        return False


class PlaceholderLease:
    """Placeholders for missing protected paths, held while sandboxed commands run.

    :meth:`acquire` takes a shared ``flock`` on each root and creates the
    placeholders; :meth:`release` removes every placeholder under a root (also
    ones a crashed run left) if it can take the lock exclusively, that is when
    no other run, in this process or another, is using that root. A
    placeholder removed while another sandbox had it mounted would be detached
    from that sandbox (Linux unmounts a mount point unlinked from another
    namespace), hence the lock. Both methods block briefly; call them from a
    thread.
    """

    def __init__(
        self, roots: Sequence[str], entries: Sequence[str], *, max_directories: int = WALK_LIMIT
    ) -> None:
        """Lease placeholders for ``entries`` under each of ``roots`` (not yet acquired).

        ``max_directories`` bounds the walk for protected names below the top
        of each root (see :func:`nested_entries`).
        """
        self._walk = max_directories
        self._roots = tuple(roots)
        self._entries = tuple(entries)
        self._fds: list[tuple[int, str]] = []
        self._shadows: dict[str, GitShadow] = {}
        self.extra: dict[str, list[str]] = {}
        self.notes: list[str] = []

    def acquire(self) -> None:
        """Lock the roots (shared), copy each root's ``.git``, create the placeholders.

        Raises:
            SandboxUnavailableError: a root cannot be locked or a placeholder
                cannot be created (the run would leave bwrap's own behind).
        """
        try:
            for root in self._roots:
                fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                self._fds.append((fd, root))
                fcntl.flock(fd, fcntl.LOCK_SH)
                nested, whole = nested_entries(root, self._entries, max_directories=self._walk)
                if not whole and self._walk:  # 0: the caller asked for the top only
                    self.notes.append(
                        f"{root} has more than {self._walk} directories: protected names were "
                        f"looked for in the first {self._walk} (nearest the top) only"
                    )
                self.extra[root] = [*git_entries(root), *nested]
                dot_git = os.path.join(root, ".git")
                real_dir = not os.path.islink(dot_git) and not is_placeholder(dot_git)
                if real_dir and os.path.isdir(dot_git):
                    self._shadows[root] = GitShadow(root)
                plan = _plan(root, self._entries, self.extra[root], shadowed=root in self._shadows)
                for kind, path in plan:
                    if kind in (_PLACEHOLDER, _PLACEHOLDER_DIR) and not os.path.lexists(path):
                        _create_placeholder(path, directory=kind == _PLACEHOLDER_DIR)
        except SandboxUnavailableError:
            self.release()
            raise
        except OSError as exc:
            self.release()
            raise SandboxUnavailableError(
                f"cannot prepare the protected paths under the writable roots ({exc}); "
                "refusing to run unsandboxed"
            ) from exc

    def mount_args(self, root: str) -> list[str]:
        """The bwrap arguments protecting ``root`` (after ``--bind root root``)."""
        shadow = self._shadows.get(root)
        head = [] if shadow is None else shadow.mount_args()
        more = self.extra.get(root)
        return [*head, *protected_mount_args(root, self._entries, more, shadowed=bool(head))]

    def release(self) -> None:
        """Copy allowed ``.git`` changes back, remove placeholders no other run holds; unlock.

        What was not copied back is added to :attr:`notes`.
        """
        shadows, self._shadows = self._shadows, {}
        for shadow in shadows.values():
            try:
                self.notes += shadow.commit()
            except OSError as exc:
                # the roots must still be unlocked and the placeholders removed
                self.notes.append(f"the .git changes in {shadow.root} were not copied back ({exc})")
            finally:
                shadow.discard()
        fds, self._fds = self._fds, []
        for fd, root in fds:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            try:
                _remove_placeholders(root, [*self._entries, *self.extra.get(root, ())])
            finally:
                os.close(fd)


def _create_placeholder(path: str, *, directory: bool) -> None:
    if directory:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            return
        os.chmod(path, _DIR_MODE)
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0)
    except FileExistsError:
        return
    try:
        content = _CONTENT.get(os.path.basename(path))
        if content is not None:
            os.write(fd, content)
        os.fchmod(fd, _MODE)
    finally:
        os.close(fd)


def _remove_placeholders(root: str, entries: Sequence[str]) -> None:
    for parts in _concrete(root, entries):
        current = root
        for part in parts:
            path = os.path.join(current, part)
            if is_placeholder(path):
                with contextlib.suppress(OSError):
                    if os.path.isdir(path):
                        os.rmdir(path)
                    else:
                        os.unlink(path)
                break
            if not os.path.isdir(path) or os.path.islink(path):
                break
            current = path
