"""A private top level of each root's ``.git`` inside the sandbox, copied back with checks.

Everything git runs on its own (hooks, ``core.fsmonitor`` and the other
program-valued settings) comes from a repository's git directory, and the
host's ``git status`` also enters every submodule registered in the index.
The index must stay writable for ordinary work (``git add``, ``git commit``),
so a sandboxed command could register a new submodule whose git directory,
made by the command anywhere in the root, sets ``core.fsmonitor``; the host's
next ``git status`` would run it, even while the command still runs.

So, for each writable root whose ``.git`` is a directory, the sandbox mounts
a private directory (on the host, outside every root) at ``.git``:

* the data directories git writes in ordinary work (``objects``, ``refs``,
  ``logs``, ``rr-cache``, ``lfs``, ``reftable``) are the real ones, bound
  read-write;
* every other directory (``hooks``, ``info``, ``modules``, ``worktrees``, …)
  is the real one bound read-only; a new one stays private;
* the files (``config``, ``index``, ``HEAD``, ``packed-refs``, …) and the
  state directories of a merge or rebase in progress are copies.

After the command, :meth:`GitShadow.commit` copies back only the state that
ordinary work changes (:data:`_COPY_BACK`), and the index only when it names
no submodule (gitlink) that the real index did not have: the host never sees
an index, a config or a hook the command made. A copy that changed while the
real file changed too (another program wrote it during the command) is not
copied back; every refusal is reported.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from typing import TYPE_CHECKING

from ._errors import SandboxUnavailableError

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["SHADOWED_ENTRIES", "GitShadow"]

# bound read-write: data that git writes in ordinary work and never runs
_LIVE = frozenset({"objects", "refs", "logs", "rr-cache", "lfs", "reftable"})
# copied in and, when changed, copied back (state of the work in progress)
_STATE_DIRS = frozenset({"rebase-merge", "rebase-apply", "sequencer"})
_COPY_BACK = frozenset({
    "index", "HEAD", "ORIG_HEAD", "FETCH_HEAD", "MERGE_HEAD", "MERGE_MSG", "MERGE_MODE",
    "MERGE_RR", "AUTO_MERGE", "CHERRY_PICK_HEAD", "REVERT_HEAD", "REBASE_HEAD",
    "COMMIT_EDITMSG", "TAG_EDITMSG", "SQUASH_MSG", "packed-refs", "shallow",
    "BISECT_LOG", "BISECT_START", "BISECT_TERMS", "BISECT_NAMES", "BISECT_EXPECTED_REV",
    "BISECT_ANCESTORS_OK", "BISECT_HEAD", *_STATE_DIRS,
})  # fmt: skip
SHADOWED_ENTRIES = frozenset({
    ".git/config", ".git/config.worktree", ".git/hooks", ".git/info/attributes",
    ".git/commondir", ".git/worktrees", ".git/modules/*/config", ".git/modules/*/hooks",
    ".git/modules/*/commondir",
})  # fmt: skip
"""Protected entries a shadowed ``.git`` covers whole (they need no mounts of their own)."""
_GIT_TIMEOUT_S = 10


def _digest(path: str) -> bytes | None:
    """A digest of a regular file or a directory tree (not following links); None if absent."""
    hasher = hashlib.blake2b(digest_size=20)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    for relative, kind, content in _walk(path, info):
        hasher.update(f"{len(relative)}:{relative}:{kind}:{len(content)}:".encode())
        hasher.update(content)
    return hasher.digest()


def _walk(path: str, info: os.stat_result, relative: str = "") -> Iterator[tuple[str, str, bytes]]:
    if stat.S_ISREG(info.st_mode):
        yield relative, "f", _read(path)
    elif stat.S_ISDIR(info.st_mode):
        yield relative, "d", b""
        for name in sorted(os.listdir(path)):
            child = os.path.join(path, name)
            yield from _walk(child, os.lstat(child), f"{relative}/{name}")
    else:
        yield relative, "other", b""


def _read(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def _copy(source: str, target: str) -> None:
    """Copy regular files and directories only (links and devices are left out)."""
    info = os.lstat(source)
    if stat.S_ISREG(info.st_mode):
        with open(target, "xb") as handle:
            handle.write(_read(source))
        os.chmod(target, stat.S_IMODE(info.st_mode) & 0o777)
    elif stat.S_ISDIR(info.st_mode):
        os.mkdir(target, 0o700)
        for name in os.listdir(source):
            _copy(os.path.join(source, name), os.path.join(target, name))
        os.chmod(target, stat.S_IMODE(info.st_mode) & 0o777)


def _replace(source: str | None, target: str) -> None:
    """Make ``target`` (in the real git directory) a copy of ``source``, or remove it."""
    directory = os.path.dirname(target)
    staged = None
    if source is not None:
        staged = tempfile.mkdtemp(prefix=".prism-", dir=directory)
        _copy(source, os.path.join(staged, "x"))
    try:
        if os.path.isdir(target) and not os.path.islink(target):
            shutil.rmtree(target)
        if staged is not None:
            os.replace(os.path.join(staged, "x"), target)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target)
    finally:
        if staged is not None:
            shutil.rmtree(staged, ignore_errors=True)


def _gitlinks(git_dir: str, work_tree: str, index: str) -> frozenset[bytes] | None:
    """Paths of the gitlinks in ``index`` as the host's git reads them; None if unreadable."""
    git = shutil.which("git")
    if git is None or not os.path.isfile(index):
        return frozenset()
    env = {**os.environ, "GIT_INDEX_FILE": index, "GIT_DIR": git_dir, "GIT_WORK_TREE": work_tree}
    try:
        result = subprocess.run(
            [git, "ls-files", "--stage", "-z"],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=work_tree,
            check=False,
            timeout=_GIT_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return None
    if result.returncode != 0:
        return None
    return frozenset(
        name
        for meta, _, name in (record.partition(b"\t") for record in result.stdout.split(b"\0"))
        if meta.startswith(b"160000 ")
    )


class GitShadow:
    """The private ``.git`` of one root while one command runs (see the module docstring)."""

    def __init__(self, root: str) -> None:
        """Copy the top level of ``root/.git`` into a fresh private directory.

        Raises:
            SandboxUnavailableError: the copy could not be made, or git could
                not read the real index.
        """
        self.root = root
        self.git_dir = os.path.join(root, ".git")
        self.directory = tempfile.mkdtemp(prefix="prism-git-")
        self.shadow = os.path.join(self.directory, "git")
        self._before: dict[str, bytes | None] = {}
        self._mounts: list[tuple[str, str]] = []
        try:
            self._populate()
            gitlinks = _gitlinks(self.git_dir, root, os.path.join(self.git_dir, "index"))
        except OSError as exc:
            self.discard()
            raise SandboxUnavailableError(
                f"cannot prepare a private copy of {self.git_dir} ({exc}); refusing to run"
            ) from exc
        if gitlinks is None:
            self.discard()
            raise SandboxUnavailableError(f"git cannot read the index of {root}; refusing to run")
        self._gitlinks = gitlinks

    def _populate(self) -> None:
        os.mkdir(self.shadow, 0o700)
        for entry in sorted(os.scandir(self.git_dir), key=lambda e: e.name):
            name, target = entry.name, os.path.join(self.shadow, entry.name)
            if entry.is_dir(follow_symlinks=False) and name not in _STATE_DIRS:
                os.mkdir(target, 0o700)
                self._mounts.append(("--bind" if name in _LIVE else "--ro-bind", name))
            elif entry.is_file(follow_symlinks=False) or entry.is_dir(follow_symlinks=False):
                _copy(entry.path, target)
                self._before[name] = _digest(entry.path)
            elif entry.is_symlink():
                # a link at the top of .git (a config kept elsewhere): the same link
                os.symlink(os.readlink(entry.path), target)
                self._before[name] = _digest(target)
            # sockets (the fsmonitor daemon's) and the like stay out
        for name in _COPY_BACK - self._before.keys():
            self._before.setdefault(name, None)

    def mount_args(self) -> list[str]:
        """The bwrap arguments (after ``--bind root root``) that put the shadow at ``.git``."""
        args = ["--bind", self.shadow, self.git_dir]
        for kind, name in self._mounts:
            path = os.path.join(self.git_dir, name)
            args += [kind, path, path]
        return args

    def commit(self) -> list[str]:
        """Copy the allowed changes back into the real ``.git``; say what was refused.

        Call once, after the command ended (no process of it is left). Never
        raises for a refusal; an ``OSError`` while copying is reported too.
        """
        notes: list[str] = []
        names = set(self._before) | set(os.listdir(self.shadow))
        for name in sorted(names):
            if any(name == mount for _, mount in self._mounts):
                continue
            path = os.path.join(self.shadow, name)
            now = _digest(path)
            before = self._before.get(name)
            if now == before or name.endswith(".lock"):
                continue
            where = f".git/{name} in {self.root}"
            if name not in _COPY_BACK:
                notes.append(f"the change to {where} was discarded (only git's work state is kept)")
                continue
            if _digest(os.path.join(self.git_dir, name)) != before:
                notes.append(f"the change to {where} was discarded: it changed outside meanwhile")
                continue
            if name == "index" and now is not None:
                after = _gitlinks(self.git_dir, self.root, path)
                if after is None or not after <= self._gitlinks:
                    added = (after or frozenset()) - self._gitlinks
                    new = sorted(p.decode("utf-8", "replace") for p in added)
                    notes.append(
                        f"the index of {self.root} was not kept: it registers a new submodule "
                        f"({', '.join(new) or 'unreadable index'}), which the host's git would "
                        "enter; register submodules outside the sandbox"
                    )
                    continue
            try:
                _replace(path if now is not None else None, os.path.join(self.git_dir, name))
            except OSError as exc:
                notes.append(f"the change to {where} could not be copied back ({exc})")
        return notes

    def discard(self) -> None:
        """Remove the private copy (idempotent)."""
        shutil.rmtree(self.directory, ignore_errors=True)
