"""The two seams the coding tools run through: file access and shell spawning.

The tools never touch the filesystem or spawn a process themselves; they go
through a :class:`FileOperations` and a :class:`ShellOperations`. The plain
implementations (:class:`~prism.coding.tools.LocalFileOperations`,
:class:`~prism.coding.tools.LocalShellOperations`) are **not contained**: they
reach any path and run any command the execution policy lets through.
``prism.coding.security`` supplies contained and sandboxed ones.

Error contract shared by every method here:

* filesystem conditions raise the builtin :class:`OSError` subclass that fits
  (``FileNotFoundError``, ``IsADirectoryError``, ``NotADirectoryError``,
  ``PermissionError``, ...); the tools turn them into error results;
* a refusal by the implementation itself (a path outside the allowed roots, a
  symlink swapped in after the check, a sandbox that cannot start) raises a
  :class:`~prism.core.PrismError` subclass whose message says why; the tools
  turn those into error results too;
* ``trio.Cancelled`` always passes through, after the cleanup each method
  documents.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat as stat_module
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Literal, Protocol, runtime_checkable

import attrs

__all__ = [
    "FileKind",
    "FileOperations",
    "FileStat",
    "OutputSink",
    "ShellExit",
    "ShellOperations",
    "ShellSpawnRequest",
    "read_file_range",
    "replace_file_in_directory",
]

FileKind = Literal["file", "directory", "other"]
"""What a path is: a regular file, a directory, or anything else (device, fifo, socket)."""

OutputSink = Callable[[bytes], Awaitable[None]]
"""Receives a process's merged stdout/stderr, chunk by chunk, in the order it was written.

The runner awaits each call before reading more, so a slow sink slows the
process down (through the pipe) instead of piling up memory.
"""


def _env(value: Mapping[str, str]) -> Mapping[str, str]:
    env = dict(value)
    for key, item in env.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise TypeError(f"env must map str to str, got {key!r}: {item!r}")
    return env


@attrs.frozen(kw_only=True)
class FileStat:
    """What :meth:`FileOperations.stat` reports about a path (symlinks followed).

    Attributes:
        path: the path that was stat'ed, as given.
        kind: ``"file"``, ``"directory"`` or ``"other"``.
        size: size in bytes (the apparent size: a sparse file reports its full length).
        mode: the permission bits (``st_mode & 0o7777``).
        mtime_ns: last modification time, nanoseconds since the epoch.
    """

    path: str
    kind: FileKind
    size: int
    mode: int
    mtime_ns: int

    @classmethod
    def from_stat_result(cls, path: str, st: os.stat_result) -> FileStat:
        """The :class:`FileStat` of an ``os.stat``/``os.fstat`` result for ``path``."""
        mode = st.st_mode
        kind: FileKind = (
            "file"
            if stat_module.S_ISREG(mode)
            else "directory"
            if stat_module.S_ISDIR(mode)
            else "other"
        )
        return cls(
            path=path,
            kind=kind,
            size=st.st_size,
            mode=stat_module.S_IMODE(mode),
            mtime_ns=st.st_mtime_ns,
        )


@runtime_checkable
class FileOperations(Protocol):
    """How the read, write and edit tools resolve, stat, read and write files.

    Every path the tools pass to :meth:`stat`, :meth:`read` and :meth:`write`
    was first returned by :meth:`resolve`. The tools hand the resolved path to
    the execution policy and key their per-path write queue on it, so
    ``resolve`` must return one canonical string per file (a real path:
    absolute, normalised, symlinks resolved as far as the path exists).

    Implementations must be safe to call from several trio tasks at once; the
    tools serialise writes to one path themselves.
    """

    async def resolve(self, path: str, *, cwd: str) -> str:
        """The canonical absolute path for ``path`` (relative paths are taken from ``cwd``).

        The target need not exist (``write`` creates files); existing leading
        components are resolved through their symlinks, the rest is appended
        normalised. ``~`` is expanded to the home directory.

        Checkpoints. Cancellation leaves nothing behind.

        Raises:
            OSError: resolution needed the filesystem and it failed.
            PrismError: the implementation refuses the path (for example it
                escapes the allowed roots).
        """
        ...

    async def stat(self, path: str) -> FileStat:
        """Stat ``path``, following symlinks.

        Checkpoints. Cancellation leaves nothing behind.

        Raises:
            FileNotFoundError: nothing is there.
            OSError: any other filesystem failure.
            PrismError: the implementation refuses the path.
        """
        ...

    async def read(self, path: str, *, offset: int = 0, length: int) -> bytes:
        """Read at most ``length`` bytes of the file at ``path``, starting at byte ``offset``.

        Never reads more than ``length`` bytes whatever the file's size, so
        callers bound memory by choosing ``length``; a 1 GB file costs only
        what is asked for. Returns fewer than ``length`` bytes only at end of
        file (an empty result means ``offset`` is at or past the end).

        Checkpoints. Cancelling the caller waits for the current bounded read
        to finish, then raises; nothing is left open.

        Raises:
            ValueError: ``offset`` or ``length`` is negative.
            FileNotFoundError: nothing is there.
            IsADirectoryError: ``path`` is a directory.
            OSError: any other filesystem failure.
            PrismError: the implementation refuses the path.
        """
        ...

    async def write(self, path: str, data: bytes, *, create_parents: bool = False) -> None:
        """Replace the file at ``path`` with ``data``, atomically.

        Writes a temporary file in the same directory, flushes it to disk
        (``fsync``), then renames it over ``path``: a reader sees either the
        old content or the new, never a mix, and a crash leaves one of the
        two. An existing file keeps its permission bits; a new one gets the
        usual ``0o666 & ~umask``. With ``create_parents`` missing parent
        directories are created first.

        Checkpoints. A write that has started runs to completion (old or new
        content, never a torn file) before a cancellation is delivered; the
        temporary file never survives a failure.

        Raises:
            IsADirectoryError: ``path`` is a directory.
            FileNotFoundError: the parent directory is missing and ``create_parents`` is false.
            PermissionError: the directory or file is not writable.
            OSError: any other filesystem failure.
            PrismError: the implementation refuses the path.
        """
        ...


def _paths_tuple(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)):
        raise TypeError(f"AccessGrant fields are sequences of strings, got {value!r}")
    items = tuple(value)
    if not all(isinstance(item, str) for item in items):
        raise TypeError(f"AccessGrant fields are sequences of strings, got {items!r}")
    return items


def _write_dirs(value: Iterable[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)):
        raise TypeError(f"write_dirs is a sequence of absolute paths, got {value!r}")
    items = tuple(value)
    if not all(isinstance(item, str) and item.startswith("/") for item in items):
        raise TypeError(f"write_dirs is a sequence of absolute paths, got {items!r}")
    return items


@attrs.frozen(kw_only=True)
class AccessGrant:
    """Extra access an approver granted one command, beyond what its sandbox allows.

    An execution policy puts it in the action's ``metadata["grant"]`` (through
    its decision's ``modified``) when the approved command needs it; the shell
    tool hands it, for that one command only, to :meth:`ShellOperations.run`
    in :attr:`ShellSpawnRequest.grant`. A sandboxed ``ShellOperations`` gives
    exactly this access and nothing more; the plain local one ignores it (on
    the host there is nothing to grant).

    Attributes:
        protected_writes: real absolute paths inside the roots, of protected
            names (``.envrc``, ``.vscode/tasks.json``...) the command may change.
        outside_writes: real absolute paths outside the roots the command may write.
        hosts: ``host:port`` entries the command may connect to.
    """

    protected_writes: tuple[str, ...] = attrs.field(default=(), converter=_paths_tuple)
    outside_writes: tuple[str, ...] = attrs.field(default=(), converter=_paths_tuple)
    hosts: tuple[str, ...] = attrs.field(default=(), converter=_paths_tuple)

    def __bool__(self) -> bool:
        return bool(self.protected_writes or self.outside_writes or self.hosts)

    def describe(self) -> str:
        """The access in words: ``write the protected file .envrc, connect to a.example:443``."""
        parts = [f"write the protected path {p}" for p in self.protected_writes]
        parts += [f"write {p} outside the roots" for p in self.outside_writes]
        parts += [f"connect to {h}" for h in self.hosts]
        return ", ".join(parts)


def _targets(value: Iterable[tuple[int, str, bool]]) -> tuple[tuple[int, str, bool], ...]:
    items = tuple(tuple(item) for item in value)
    for item in items:
        if (
            len(item) != 3
            or type(item[0]) is not int
            or not 3 <= item[0] <= 9
            or not isinstance(item[1], str)
            or not item[1].startswith("/")
            or not isinstance(item[2], bool)
        ):
            raise TypeError(f"a target is (descriptor 3-9, absolute path, append), got {item!r}")
    if len({item[0] for item in items}) != len(items):
        raise TypeError(f"each target has a descriptor of its own, got {items!r}")
    return items  # type: ignore[return-value]


@attrs.frozen(kw_only=True)
class RedirectedWrites:
    """A command whose only writes are redirections to files, proved by the execution policy.

    An execution policy puts it in the action's ``metadata["redirected"]``
    (``{"command": ..., "targets": [[fd, path, append], ...]}``) for a line that
    writes nothing but the files it redirects to; the shell tool hands it to
    :meth:`ShellOperations.run` in :attr:`ShellSpawnRequest.redirected`.

    Attributes:
        command: the line as proved, each target written as a duplication of
            its descriptor (``'echo' 'x' >&4``).
        targets: each target: its descriptor, its real absolute path, and
            whether it is appended to (``>>``) rather than truncated (``>``).
    """

    command: str = attrs.field(validator=attrs.validators.instance_of(str))
    targets: tuple[tuple[int, str, bool], ...] = attrs.field(converter=_targets)


def _words(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)):
        raise TypeError(f"expected a sequence of strings, got {value!r}")
    items = tuple(value)
    if not all(isinstance(item, str) for item in items):
        raise TypeError(f"expected a sequence of strings, got {items!r}")
    return items


def _edited_files(value: Iterable[str]) -> tuple[str, ...]:
    items = _words(value)
    if not items or not all(item.startswith("/") for item in items):
        raise TypeError(f"files is a non-empty sequence of absolute paths, got {items!r}")
    return items


def _backup_suffix(_instance: object, _attribute: object, value: object) -> None:
    if not isinstance(value, str) or "/" in value or "*" in value or "\0" in value:
        raise TypeError(f"suffix is a string without '/', '*' or NUL, got {value!r}")


@attrs.frozen(kw_only=True)
class InPlaceEdits:
    """A ``sed -i`` line proved to be a text filter over files, by the execution policy.

    An execution policy puts it in the action's ``metadata["in_place"]``
    (``{"filter": [...], "files": [...], "suffix": ...}``) for a line that is
    one ``sed -i`` whose script only turns its input into its output; the shell
    tool hands it to :meth:`ShellOperations.run` in
    :attr:`ShellSpawnRequest.in_place`.

    Attributes:
        filter: the ``sed`` command without ``-i`` and without files: each file,
            read on its standard input, becomes its standard output.
        files: each file's real absolute path, in the order given.
        suffix: the backup suffix (``-i.bak``: ``.bak``; empty: no backup).
    """

    filter: tuple[str, ...] = attrs.field(converter=_words)
    files: tuple[str, ...] = attrs.field(converter=_edited_files)
    suffix: str = attrs.field(default="", validator=_backup_suffix)


@attrs.frozen(kw_only=True)
class ShellSpawnRequest:
    """One command for :meth:`ShellOperations.run`, after prefix and spawn hook.

    Attributes:
        command: the command text handed to the shell (already including any
            ``command_prefix``).
        shell_path: the shell to run it with (``bash`` by default).
        cwd: the working directory, absolute.
        env: the complete environment of the process (nothing is inherited
            beyond what is here).
        grant: extra access approved for this one command (see
            :class:`AccessGrant`), or None.
        read_only: the execution policy proved that the command writes no
            file (``metadata["writes_nothing"]`` in its decision): a sandboxed
            ``ShellOperations`` may then give it the roots read-only, which
            costs less than taking its changes back; a write there fails. The
            plain local one ignores it.
        write_dirs: the execution policy proved that every file the command may
            write lies in these real directories (``metadata["write_dirs"]`` in
            its decision), or None: a sandboxed ``ShellOperations`` may then keep
            its private layer over these directories only and give it the rest
            of the roots read-only, where a write fails. The plain local one
            ignores it.
        redirected: the execution policy proved that the command's only writes
            are these redirections (see :class:`RedirectedWrites`), or None: a
            sandboxed ``ShellOperations`` may open each target itself and run
            ``redirected.command`` with the target on its descriptor and the
            roots read-only; when it opens them not, it runs ``command`` as it
            would without this. The plain local one ignores it. A spawn hook
            that changes ``command``, ``cwd`` or ``shell_path`` drops it: the
            redirections were proved for the line it replaced.
        in_place: the execution policy proved that the command is one ``sed -i``
            whose script is a text filter (see :class:`InPlaceEdits`), or None: a
            sandboxed ``ShellOperations`` may run the filter on each file with the
            roots read-only and replace the file itself, as ``sed -i`` does; when
            it cannot, it runs ``command`` as it would without this. The plain
            local one ignores it. A spawn hook that changes ``command``, ``cwd``
            or ``shell_path`` drops it.
    """

    command: str
    shell_path: str
    cwd: str
    env: Mapping[str, str] = attrs.field(converter=_env)
    grant: AccessGrant | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(AccessGrant))
    )
    read_only: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))
    write_dirs: tuple[str, ...] | None = attrs.field(default=None, converter=_write_dirs)
    redirected: RedirectedWrites | None = attrs.field(
        default=None,
        validator=attrs.validators.optional(attrs.validators.instance_of(RedirectedWrites)),
    )
    in_place: InPlaceEdits | None = attrs.field(
        default=None,
        validator=attrs.validators.optional(attrs.validators.instance_of(InPlaceEdits)),
    )

    @property
    def argv(self) -> tuple[str, ...]:
        """The plain argument vector: ``(shell_path, "-c", command)``."""
        return (self.shell_path, "-c", self.command)


@attrs.frozen(kw_only=True)
class ShellExit:
    """How a process ended.

    Attributes:
        exit_code: the exit status, or ``None`` when a signal ended it.
        signal: the number of the signal that ended it, or ``None``.
        pid: the process id the command ran under (the shell, or the sandbox wrapper).
    """

    exit_code: int | None
    signal: int | None = None
    pid: int | None = None


@runtime_checkable
class ShellOperations(Protocol):
    """How the shell tool spawns a command and streams its output.

    The timeout is not a parameter: the tool runs :meth:`run` inside a
    ``trio.move_on_after`` scope, so a timeout is a cancellation, and both
    must be handled the same way (terminate the whole tree).

    A sandbox implementation typically wraps ``request.argv`` in its own
    launcher and delegates to :func:`~prism.coding.tools.run_process_tree`,
    which implements the streaming and tree-termination contract below.
    """

    async def run(self, request: ShellSpawnRequest, on_output: OutputSink) -> ShellExit:
        """Run ``request`` to completion, feeding its merged output to ``on_output``.

        The process gets ``/dev/null`` as stdin, stdout and stderr merged into
        one stream (in the order written) and is started in a new session.
        ``on_output`` is awaited with each chunk as it arrives, before the
        next read; the implementation itself holds no more than one chunk (a
        few tens of kilobytes) at a time, so memory stays bounded whatever the
        command prints. Returns when the process has exited and its output is
        drained; anything it left running in the background (a daemon, a
        ``cmd &`` still holding the pipe) is terminated as below before
        returning, so a call never leaves processes behind.

        Checkpoints. On cancellation (including the tool's timeout) the whole
        process tree is terminated: every descendant found by walking
        ``/proc``, including grandchildren that called ``setsid``, gets
        SIGTERM, then after a short grace SIGKILL; this cleanup is shielded
        and time-bounded, then ``trio.Cancelled`` propagates. No process
        started for the request outlives the call. If ``on_output`` raises,
        the tree is terminated the same way and the exception propagates.

        Raises:
            OSError: the process could not be started (for example the shell
                or ``cwd`` does not exist).
            PrismError: the implementation refuses or cannot set up the run
                (for example a sandbox that is not available).
        """
        ...


def read_file_range(fd: int, *, offset: int, length: int, path: str) -> bytes:
    """At most ``length`` bytes from byte ``offset`` of the open file ``fd`` (``pread``).

    A building block for :class:`FileOperations` implementations: it never reads
    more than asked, whatever the file's size, and refuses what is not a regular
    file. Blocking: call it from a worker thread. ``fd`` is left open.

    Raises:
        IsADirectoryError: ``fd`` is a directory.
        OSError: ``fd`` is not a regular file (``EINVAL``), or reading failed.
    """
    mode = os.fstat(fd).st_mode
    if stat_module.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    if not stat_module.S_ISREG(mode):
        raise OSError(errno.EINVAL, "not a regular file", path)
    chunks: list[bytes] = []
    remaining = length
    position = offset
    while remaining > 0:
        piece = os.pread(fd, min(remaining, 1 << 20), position)
        if not piece:
            break
        chunks.append(piece)
        remaining -= len(piece)
        position += len(piece)
    return b"".join(chunks)


def replace_file_in_directory(
    dir_fd: int, name: str, data: bytes, *, existing: os.stat_result | None
) -> None:
    """Atomically replace (or create) ``name`` in the open directory ``dir_fd`` with ``data``.

    A building block for :class:`FileOperations` implementations. The data goes
    to a fresh temp file beside the target (``O_EXCL | O_NOFOLLOW``), which takes
    the mode of the file it replaces (``existing``; and its owner, when running as
    root; a new file gets ``0o666 & ~umask``), is fsynced and renamed over
    ``name``; then the directory is fsynced. On any failure the temp file is
    removed and ``name`` is left as it was. Blocking: call it from a worker
    thread. ``dir_fd`` is left open.

    Raises:
        OSError: creating, writing or renaming failed.
    """
    temp = f".{name[:200]}.{secrets.token_hex(6)}.prism-tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temp, flags, 0o666, dir_fd=dir_fd)
    renamed = False
    try:
        try:
            if existing is not None:
                os.fchmod(fd, stat_module.S_IMODE(existing.st_mode))
                if os.geteuid() == 0:
                    with contextlib.suppress(OSError):
                        os.fchown(fd, existing.st_uid, existing.st_gid)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        renamed = True
    finally:
        if not renamed:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=dir_fd)
    with contextlib.suppress(OSError):
        os.fsync(dir_fd)
