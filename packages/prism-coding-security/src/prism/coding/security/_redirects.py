"""Open a proved line's redirected writes on the host, for a sandbox that binds the roots read-only.

A line whose only writes are redirections to files inside the roots
(:attr:`~prism.coding.tools.ShellSpawnRequest.redirected`) need not run over a
private layer whose changes are checked and moved back afterwards: the host
opens each target itself, exactly as the copy-back would let the file come
back, and the command gets the open file on a descriptor (``>&4``) while the
roots stay read-only. What the copy-back refuses is never opened here:

* every step is opened without following a link, from the root down (a link
  planted at the target or on the way after the policy looked is not
  followed: the line then runs over the layer, as before);
* a ``.gitignore``, whose content the copy-back judges (:mod:`._ignorefile`);
* a protected name, a path inside a ``.git`` directory, or a path the root's
  own files make protected (:func:`._implied.implied_protected`: what git names
  for the root and for every repository nested in it, the git directories their
  ``.git`` files and links name, what a link whose name is protected leads to,
  at any depth);
* anything but a regular file with one name (a FIFO is never waited on, a
  directory, a device or a hard-linked file is not written through; an
  existing file is looked at before it is opened for writing, so no device's
  driver is ever asked to open).

Nothing is truncated until every target of the line is open and checked; when
one cannot be, the files this step created are removed again and the line
runs over the private layer instead, where bash itself reports what a
redirection cannot open ("No such file or directory", "Is a directory").
A set-user-ID or set-group-ID bit the command sets on a target through its
descriptor is cleared afterwards, as the copy-back clears it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import stat
from typing import TYPE_CHECKING

import attrs

from ._errors import SandboxUnavailableError
from ._ignorefile import ignore_file
from ._implied import implied_protected
from ._landlock_exec import _LINUX_CAPABILITY_VERSION_3, _CapData, _CapHeader
from ._protected import AnchoredPaths, fold_parts, in_git_directory

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from prism.coding.tools import RedirectedWrites

    from ._protected import ProtectedPaths

__all__ = ["OpenedTarget", "close_targets", "open_targets"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# a FIFO is not waited on (ENXIO without a reader, refused by fstat with one)
_FILE_FLAGS = os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
# the descriptors a target may be handed on (3 holds bubblewrap's seccomp program)
_DESCRIPTORS = range(4, 10)
_SET_ID = stat.S_ISUID | stat.S_ISGID
# what lets root open what the sandboxed command (no capabilities) cannot:
# CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER
_DAC_CAPABILITIES = (1 << 1) | (1 << 2) | (1 << 3)
_libc = ctypes.CDLL(None, use_errno=True)


@contextlib.contextmanager
def _as_the_sandbox() -> Iterator[bool]:
    """This thread without the capabilities that override file permissions, then back.

    The sandboxed command runs with no capability: as root, bubblewrap drops them
    all, so a file of another user or one without a write bit is not writable
    there. Capabilities are per thread: only the calling one changes. Yields
    False when they could not be read or dropped (then nothing is opened).
    """
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if _libc.capget(ctypes.byref(header), data) != 0:  # pragma: no cover - always readable
        yield False
        return
    held = data[0].effective & _DAC_CAPABILITIES
    if not held:
        yield True  # an ordinary user: the kernel checks as it does for the command
        return
    data[0].effective &= ~_DAC_CAPABILITIES
    if _libc.capset(ctypes.byref(header), data) != 0:  # pragma: no cover - lowering is allowed
        yield False
        return
    try:
        yield True
    finally:
        data[0].effective |= held  # within the permitted set: always allowed
        _libc.capset(ctypes.byref(header), data)


@attrs.define
class OpenedTarget:
    """One target open on the host: the file, its directory, the command's descriptor."""

    fd: int
    directory: int  # its directory, opened without following a link
    target: int
    root: str
    parts: tuple[str, ...]
    created: bool


def _root_of(path: str, roots: Sequence[str]) -> str | None:
    holding = [r for r in roots if path.startswith(r.rstrip("/") + "/")]
    return min(holding, key=len) if holding else None  # the outermost (its layer covers it)


def _refused(
    parts: tuple[str, ...], root: str, matcher: ProtectedPaths, protected: Sequence[str]
) -> bool:
    """Whether the copy-back would leave a new file at ``parts`` (below ``root``) out.

    Also a ``.gitignore``: the copy-back judges what it holds, which is known only
    once the command wrote it (over the layer, it is judged there).
    """
    if in_git_directory(parts) or matcher.covers(parts) or ignore_file(parts[-1]):
        return True
    try:
        anchored = implied_protected(root, matcher)
    except SandboxUnavailableError:
        # git's answer is not known (it cannot be asked, or did not answer), or the
        # root is past the walk's bounds: the copy-back refuses the root's changes for
        # the same reason, over the layer
        return True
    # as a case-insensitive file system compares names; an entry may be a pattern
    return AnchoredPaths.of(anchored).covers(fold_parts(parts)) is not None


def _open_one(
    path: str,
    target: int,
    append: bool,
    roots: Sequence[str],
    matcher: ProtectedPaths,
    protected: Sequence[str],
) -> OpenedTarget | None:
    root = _root_of(path, roots)
    if root is None or target not in _DESCRIPTORS:
        return None
    parts = tuple(path[len(root) :].split("/")[1:])
    if not parts or any(p in ("", ".", "..") for p in parts):
        return None
    if _refused(parts, root, matcher, protected):
        return None
    with _as_the_sandbox() as dropped:
        # opened as the command would open it (the checks above ask git as Prism's user)
        return _open_as_the_sandbox(root, parts, target, append) if dropped else None


def _open_as_the_sandbox(
    root: str, parts: tuple[str, ...], target: int, append: bool
) -> OpenedTarget | None:
    flags = _FILE_FLAGS | (os.O_APPEND if append else 0)
    try:
        directory = os.open(root, _DIR_FLAGS)
    except OSError:
        return None
    try:
        for name in parts[:-1]:
            step = os.open(name, _DIR_FLAGS, dir_fd=directory)
            os.close(directory)
            directory = step
        created = False
        try:
            fd = os.open(parts[-1], flags | os.O_CREAT | os.O_EXCL, 0o666, dir_fd=directory)
            created = True
        except FileExistsError:
            existing = _reopened_regular(parts[-1], directory, flags)
            if existing is None:
                os.close(directory)
                return None
            fd = existing
    except OSError:
        # a step is missing, a link or not a directory; the target is a link, a FIFO
        # with no reader, a directory, not writable: bash says which over the layer
        os.close(directory)
        return None
    opened = OpenedTarget(fd, directory, target, root, parts, created)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            close_targets([opened], failed=True)
            return None
        os.set_blocking(fd, True)  # as bash's own descriptor (a FIFO was refused above)
    except BaseException:
        close_targets([opened], failed=True)
        raise
    return opened


def _reopened_regular(name: str, directory: int, flags: int) -> int | None:
    """``name`` (in ``directory``) opened with ``flags`` only if it is a regular file of one name.

    The file is first opened as a mere location (``O_PATH``: no driver's ``open``
    runs, a FIFO is not waited on, a link is not followed) and looked at; only a
    regular file is then opened for writing, through that same location, so a
    device, FIFO or link swapped in meanwhile is never opened.
    """
    located = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory)
    try:
        info = os.fstat(located)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            return None
        return os.open(f"/proc/self/fd/{located}", flags & ~os.O_NOFOLLOW)
    finally:
        os.close(located)


def open_targets(
    redirected: RedirectedWrites,
    roots: Sequence[str],
    matcher: ProtectedPaths,
    protected: Sequence[str],
) -> list[OpenedTarget] | None:
    """Each target of ``redirected`` open for writing, truncated or appended to as written.

    None when one cannot be opened as described above (nothing was truncated, and
    what this call created is removed again): run the line over the private layer.
    """
    opened: list[OpenedTarget] = []
    try:
        for target, path, append in redirected.targets:
            one = _open_one(path, target, append, roots, matcher, protected)
            if one is None:
                close_targets(opened, failed=True)
                return None
            opened.append(one)
        for one, (_, _, append) in zip(opened, redirected.targets, strict=True):
            if not append and not one.created:
                os.ftruncate(one.fd, 0)
    except BaseException:
        close_targets(opened, failed=True)
        raise
    return opened


def close_targets(opened: Sequence[OpenedTarget], *, failed: bool = False) -> list[str]:
    """Close each target; the notes of what was changed back, as the copy-back words them.

    ``failed``: the command did not run: each file this step created is removed
    again when it is still that empty file.
    """
    notes: list[str] = []
    for one in opened:
        try:
            info = os.fstat(one.fd)
            name = one.parts[-1]
            if failed and one.created and info.st_size == 0:
                with contextlib.suppress(OSError):
                    if os.stat(name, dir_fd=one.directory, follow_symlinks=False).st_ino == (
                        info.st_ino
                    ):
                        os.unlink(name, dir_fd=one.directory)
            elif stat.S_IMODE(info.st_mode) & _SET_ID:
                # a set-user-ID file made inside (as root: owned by root) stays an ordinary one
                os.fchmod(one.fd, stat.S_IMODE(info.st_mode) & ~_SET_ID)
                notes.append(
                    f"not applied to {one.root} (set-user-ID and set-group-ID bits are "
                    f"cleared): {'/'.join(one.parts)}"
                )
        finally:
            os.close(one.fd)
            os.close(one.directory)
    return notes
