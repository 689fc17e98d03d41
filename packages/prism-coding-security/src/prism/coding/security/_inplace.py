"""Edit the files of a proved ``sed -i`` filter on the host; the roots stay read-only.

A line that is one ``sed -i`` whose script is a text filter
(:attr:`~prism.coding.tools.ShellSpawnRequest.in_place`, see :mod:`._sedfilter`)
need not run over a private layer: for each file the host opens the file for
reading and a new file beside it, the sandboxed ``sed`` (without ``-i``) reads
the one on its standard input and prints into the other with the roots
read-only, and the host then gives the new file the old one's mode and name, as
GNU ``sed -i`` does (the old file first renamed to its backup name under a
suffix). The sandbox enforces what the policy proved: whatever the script
tries, it can write nothing but its output. What the copy-back refuses is never
opened here, and then the line runs over its layer as before, where ``sed``
itself reports what it cannot edit:

* each step is opened without following a link, from the root down, so a file
  that is a link (``sed -i`` would replace the link by a file) is not edited here;
* a protected name, a path inside a ``.git`` directory, or a path the root's own
  files make protected (:func:`._implied.implied_protected`), for the file and
  for its backup name;
* anything but a regular file with one name (a FIFO is never opened, a
  directory or a device is not read, a hard-linked file is not edited here), or
  a backup name that exists as anything but a regular file.

Files are opened and checked as the sandboxed command would open them (without
the capabilities that override file permissions). A file ``sed`` fails on is
left as it was, and no later file is edited (``sed -i`` stops there too). A
set-user-ID or set-group-ID bit is not carried to the new file, as the
copy-back clears it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from typing import TYPE_CHECKING

import attrs

from ._redirects import _as_the_sandbox, _refused, _root_of

if TYPE_CHECKING:
    from collections.abc import Sequence

    from prism.coding.tools import InPlaceEdits

    from ._protected import ProtectedPaths

__all__ = ["EditedFile", "discard_edits", "open_edits", "replace_edited"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_SET_ID = stat.S_ISUID | stat.S_ISGID
# sed's exit status when it cannot edit a file ("couldn't edit", "cannot rename")
SED_PANIC = 4


@attrs.define
class EditedFile:
    """One file open on the host: the file, the new file beside it, their directory."""

    source: int
    output: int
    directory: int
    root: str
    parts: tuple[str, ...]
    temporary: str  # the new file's name in the directory
    info: os.stat_result  # the file's, as it was opened

    @property
    def name(self) -> str:
        """The file's name in its directory."""
        return self.parts[-1]


def open_edits(
    edits: InPlaceEdits,
    roots: Sequence[str],
    matcher: ProtectedPaths,
    protected: Sequence[str],
) -> list[EditedFile] | None:
    """Each file of ``edits`` open with a new file beside it; None when one cannot be.

    None: nothing was changed (the new files made so far are removed again).
    """
    opened: list[EditedFile] = []
    try:
        for path in edits.files:
            one = _open_one(path, edits.suffix, roots, matcher, protected)
            if one is None:
                discard_edits(opened)
                return None
            opened.append(one)
    except BaseException:
        discard_edits(opened)
        raise
    return opened


def _open_one(
    path: str,
    suffix: str,
    roots: Sequence[str],
    matcher: ProtectedPaths,
    protected: Sequence[str],
) -> EditedFile | None:
    root = _root_of(path, roots)
    if root is None or "/" in suffix or "\0" in suffix:
        return None
    parts = tuple(path[len(root) :].split("/")[1:])
    if not parts or any(p in ("", ".", "..") for p in parts):
        return None
    backup = (*parts[:-1], parts[-1] + suffix)
    if _refused(parts, root, matcher, protected) or (
        suffix and _refused(backup, root, matcher, protected)
    ):
        return None
    with _as_the_sandbox() as dropped:
        # opened as the command would open them (the checks above ask git as Prism's user)
        return _open_as_the_sandbox(root, parts, suffix) if dropped else None


def _open_as_the_sandbox(root: str, parts: tuple[str, ...], suffix: str) -> EditedFile | None:
    try:
        directory = os.open(root, _DIR_FLAGS)
    except OSError:
        return None
    source = output = -1
    try:
        for name in parts[:-1]:
            step = os.open(name, _DIR_FLAGS, dir_fd=directory)
            os.close(directory)
            directory = step
        source, info = _regular(parts[-1], directory)
        if source < 0 or (suffix and not _replaceable(parts[-1] + suffix, directory)):
            raise FileNotFoundError  # (closed below)
        temporary = f".sed{secrets.token_hex(6)}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        output = os.open(temporary, flags, 0o600, dir_fd=directory)
    except OSError:
        # a step is missing, a link or not a directory; the file is a link, a FIFO,
        # a directory, not readable; the directory is not writable: sed says which
        # over the layer
        for fd in (source, directory):
            if fd >= 0:
                os.close(fd)
        return None
    return EditedFile(source, output, directory, root, parts, temporary, info)


def _regular(name: str, directory: int) -> tuple[int, os.stat_result]:
    """``name`` open for reading if it is a regular file of one name (else -1).

    Looked at first as a mere location (``O_PATH``: no driver's ``open`` runs, a
    FIFO is not waited on, a link is not followed), then opened through it.
    """
    located = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory)
    try:
        info = os.fstat(located)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            return -1, info
        return os.open(f"/proc/self/fd/{located}", os.O_RDONLY | os.O_CLOEXEC), info
    finally:
        os.close(located)


def _replaceable(name: str, directory: int) -> bool:
    """Whether a backup may take ``name``: nothing is there, or a regular file."""
    try:
        info = os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        return True
    return stat.S_ISREG(info.st_mode)


def replace_edited(one: EditedFile, suffix: str) -> tuple[str | None, str | None]:
    """Give the new file the old one's mode and name (the old one first to its backup).

    Returns (a note for the output, or None; an error in sed's words, or None: then
    the file is left as it was).
    """
    note = None
    mode = stat.S_IMODE(one.info.st_mode)
    if mode & _SET_ID:
        note = (
            f"not applied to {one.root} (set-user-ID and set-group-ID bits are "
            f"cleared): {'/'.join(one.parts)}"
        )
    shown = "/".join(one.parts)
    try:
        os.fchmod(one.output, mode & ~_SET_ID)
        now = os.stat(one.name, dir_fd=one.directory, follow_symlinks=False)
        if (now.st_dev, now.st_ino) != (one.info.st_dev, one.info.st_ino):
            return None, f"sed: couldn't edit {shown}: it was replaced while it was read"
        if suffix:
            backup = one.name + suffix
            if not _replaceable(backup, one.directory):
                return None, f"sed: cannot rename {shown}: the backup name is not a file"
            os.rename(one.name, backup, src_dir_fd=one.directory, dst_dir_fd=one.directory)
        os.rename(one.temporary, one.name, src_dir_fd=one.directory, dst_dir_fd=one.directory)
    except OSError as exc:
        return None, f"sed: couldn't edit {shown}: {exc.strerror or exc}"
    one.temporary = ""  # it is the file now
    return note, None


def discard_edits(opened: Sequence[EditedFile]) -> None:
    """Close each file; remove each new file that did not take its file's name.

    A set-user-ID or set-group-ID bit the command set on a file through its
    descriptor (``/proc/self/fd/0``) is cleared again, as the copy-back clears it.
    """
    for one in opened:
        try:
            with contextlib.suppress(OSError):
                now = os.fstat(one.source).st_mode
                added = now & _SET_ID & ~one.info.st_mode
                if added:
                    os.fchmod(one.source, stat.S_IMODE(now) & ~added)
            if one.temporary:
                with contextlib.suppress(OSError):
                    made = os.fstat(one.output).st_ino
                    there = os.stat(one.temporary, dir_fd=one.directory, follow_symlinks=False)
                    if there.st_ino == made:
                        os.unlink(one.temporary, dir_fd=one.directory)
        finally:
            os.close(one.source)
            os.close(one.output)
            os.close(one.directory)
