"""Each writable root as an overlay; the command's changes come back to the root checked.

Inside the sandbox a writable root is an overlay mount: the root itself is the
lower layer, read through unchanged, and every change the command makes (new
files, edits, deletions as whiteouts, renamed directories as copies) lands in
a private upper directory that Prism makes outside every root. The command sees
the root exactly as the host has it and nothing is added to it: no mount point
or placeholder is ever created in the root, so ``ls -a``, ``find``,
``git status`` and ``git add -A`` see only the real files, inside and out.
The host sees none of the command's changes while it runs.

When the command has ended (no process of it is left), :meth:`RootOverlay.apply`
moves the changes into the real root, leaving out and reporting:

* a protected name at any depth (:mod:`._protected`), or a path the root's own
  files make protected (:func:`._implied.implied_protected`: the hooks
  directory, included config files and git directories git names for the root
  and every repository nested in it, what a link whose name is protected leads
  to), created, changed or deleted;
* in any ``.git`` directory, everything but git's data and work state: only
  proved objects under ``objects`` (:mod:`._objects`: never an object file the
  host holds, a new one only when it hashes to its name, a new pack only with
  the index the host's git computes), regular files and directories under
  ``refs``, ``logs`` and ``lfs`` (never ``reftable``: refs a git that reads
  it would take unjudged; never ``refs/replace``: a replacement changes what
  every object reads as; never ``rr-cache``: the host's next merge would
  write a recorded resolution as it is), and the work state
  files at its top (:data:`COPY_BACK`, less an operation's state) come back.
  Symbolic links never do, so no link planted in ``.git`` can lead the host's
  git outside the roots. The index
  comes back only when it registers no submodule (gitlink) the real one lacked,
  ``HEAD`` only when it is a valid ref (:func:`._protected.valid_git_head`: an
  invalid one would make git take the directory, or a parent, for the
  repository), and a work state file only when the host did not change it meanwhile;
* what would make a ``.git`` directory no longer one for git (removing or
  replacing its ``HEAD``, ``objects`` or ``refs``; a ``HEAD`` that is not a
  valid ref);
* an operation left in progress (bisect, rebase, am, a cherry-pick or revert
  of several commits): its new or changed state, which names what the host's
  git would check out, run or apply when continued, with the ``HEAD``, index
  and heads it left; its end (the state removed) comes back;
* a ``.git`` file (it decides which repository git uses), a removed ``.git``
  directory, and special files (fifos, devices);
* what the host changed while the command ran: an entry whose ctime (no
  program can set it) is later than the command's start is neither
  overwritten nor removed.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import hashlib
import os
import queue
import re
import shutil
import stat
import subprocess
import tempfile
import threading
from typing import TYPE_CHECKING

from ._commits import CommitTrees, git_out
from ._errors import SandboxUnavailableError
from ._executables import host_environment, host_program
from ._files import open_regular_file, read_regular_file
from ._ignorefile import IGNORE_READ, ignore_file, self_ignoring
from ._implied import MAX_NESTED_REPOSITORIES, MAX_WALKED_ENTRIES
from ._index import (
    extension_signatures,
    extensionless,
    marks_intent,
    restamped_entries,
    shared_index_name,
    strip_optional_extensions,
    with_proved_cache_tree,
    with_shared_stat_unknown,
    with_stat_unknown,
)
from ._indexfile import in_git_order, read_index
from ._objects import NOT_OBJECTS, InflationLeft, prove_objects
from ._protected import (
    GIT_DIRECTORY,
    AnchoredPaths,
    fold_parts,
    in_git_directory,
    valid_git_head,
)
from ._proved import HOST_GIT_ENVIRONMENT

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ._protected import ProtectedPaths

__all__ = ["COPY_BACK", "RootOverlay", "mount_option", "overlay_base", "wait_discarded"]

# bound read-write before; now: data that git writes in ordinary work and never runs
_DATA = frozenset({"objects", "refs", "logs", "lfs"})
# rerere's recorded resolutions: the host's next conflicting merge writes a postimage as
# it is (code in neither side), and the directory's existence alone turns rerere on
_RERERE = (
    "recorded conflict resolutions (rr-cache) are not kept: the host's next merge would write them"
)
# a replace ref changes what every object reads as, for every git command but the
# copy-back's checks: an edit hidden from git status and diff, carried by the next commit
_REPLACE = "replace refs are not kept: they change what git shows for every object"
# the modes git writes in an index entry (a sparse index's 040000 never comes back)
_INDEX_MODES = frozenset({b"100644", b"100755", b"120000", b"160000"})
_SHARED_INDEX = re.compile(r"sharedindex\.(?:[0-9a-f]{40}|[0-9a-f]{64})")
_GIT_TWIN = "another case of .git (on a case-insensitive file system, the repository's own .git)"
_REFTABLE = "reftable data is not kept (a git that reads refs from it would take them unjudged)"
# the commits git takes for roots (no parents): a line added cuts the host's history at
# any commit (log, blame, bisect, merge-base), a line removed makes git look for
# parents it may not hold; only a fetch changes it, and a fetch inside is rare
_SHALLOW = "a shallow list is not kept: it would cut the host's history at the commits it names"
_ALTERNATES = frozenset({("objects", "info", "alternates"), ("objects", "info", "http-alternates")})
COPY_BACK = frozenset({
    "index", "HEAD", "ORIG_HEAD", "FETCH_HEAD", "MERGE_HEAD", "MERGE_MSG", "MERGE_MODE",
    "MERGE_RR", "AUTO_MERGE", "CHERRY_PICK_HEAD", "REVERT_HEAD", "REBASE_HEAD",
    "COMMIT_EDITMSG", "TAG_EDITMSG", "SQUASH_MSG", "packed-refs", "shallow",
    "BISECT_LOG", "BISECT_START", "BISECT_TERMS", "BISECT_NAMES", "BISECT_EXPECTED_REV",
    "BISECT_ANCESTORS_OK", "BISECT_HEAD",
})  # fmt: skip
"""Files at the top of a ``.git`` directory that come back: git's work state."""
_OPAQUE = "user.overlay.opaque"
# the state of an operation in progress (bisect, rebase, am, a sequence of cherry-picks):
# git continues, aborts or steps it on the host from what these name (branch names, revision
# text, todo lines, patches, commits to reset to); started or changed inside, it stays out
_OPERATION = frozenset({
    "BISECT_LOG", "BISECT_START", "BISECT_TERMS", "BISECT_NAMES", "BISECT_EXPECTED_REV",
    "BISECT_ANCESTORS_OK", "BISECT_HEAD", "BISECT_RUN", "REBASE_HEAD",
    "rebase-merge", "rebase-apply", "sequencer",
})  # fmt: skip
# what such an operation leaves beside its state, left out with it (a merge or a single
# cherry-pick stopped by a conflict is no such operation: its head is judged, the host's
# `git commit` ends it)
_WITH_OPERATION = frozenset({
    "HEAD", "index", "ORIG_HEAD", "MERGE_HEAD", "MERGE_MSG", "MERGE_MODE", "AUTO_MERGE",
    "CHERRY_PICK_HEAD", "REVERT_HEAD",
})  # fmt: skip
_OPERATION_LEFT_OUT = (
    "an operation left in progress (bisect, rebase, am, a cherry-pick or revert of several "
    "commits) is not carried to the host; finish it within one command"
)
# what makes a .git directory one for git's discovery; never removed or replaced
_KEEP = frozenset({"HEAD", "objects", "refs"})
_NAMES_A_COMMIT = frozenset(
    {"ORIG_HEAD", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "AUTO_MERGE"}
)
_OID = re.compile(rb"[0-9a-f]{40}|[0-9a-f]{64}")
# what in a .git no name git resolves reads: objects (named by their content), the index,
# the messages of an operation in progress
_NAMES_NOTHING = frozenset(
    {"objects", "index", "COMMIT_EDITMSG", "MERGE_MSG", "SQUASH_MSG", "TAG_EDITMSG"}
)
# the names a symbolic ref may point at here (git's own: refs/..., or a one-level name)
_SYMREF_TARGET = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]*(?<![./])")
_SYMREF_DEPTH = 5
# the new commits of one reflog checked at most (each costs a few git processes)
_REFLOG_COMMITS = 256
# bytes of a reflog's new lines (all of them, for one git did not append to) read at most
_REFLOG_FRESH_BYTES = 1 << 20
# reflogs one copy-back reads (a command moving a few refs changes a few)
_REFLOGS_PER_COPY_BACK = 1024
# new commits a moved ref may reach, each judged against its parents (see history_refusal)
_HISTORY_COMMITS = 1000
# new commits judged for all the refs of one copy-back (each costs the host's git and CPU)
_HISTORY_PER_COPY_BACK = 5000
# files of several names one copy-back copies across file systems (a directory kept open
# for each, for the later names' links)
_LINKED_COPIES = 256
# bytes of new git-lfs objects one copy-back hashes, and the shared indexes it reads
_LFS_BYTES_PER_COPY_BACK = 1 << 30
_SHARED_PER_COPY_BACK = 4
MAX_ADDED_ENTRIES = 100_000
"""Entries a new index may hold beyond the host's for the copy-back to judge it. Each costs
about 20 us of the host's CPU and 1 kB of memory, after the command's own timeout (an
index of 1.5 million forged entries held a call 139 s); past it the index is left out."""
MAX_MOVED_REFS = 256
"""Refs one command may move (loose, packed, reflogs, FETCH_HEAD), in all, for the
copy-back to judge; past it the rest are left out. Each costs about 20 ms of the host's
CPU in git processes, after the command's own timeout."""
# packed-refs, FETCH_HEAD, reflogs: read (and so checked) up to this size; a larger one stays out
_LIST_LIMIT = 1 << 26
_HOST_CHANGED = "changed on the host while the command ran"
# the bytes of ignore files one copy-back reads to judge them (each up to IGNORE_READ)
_IGNORE_BYTES_PER_COPY_BACK = 1 << 24
_GIT_TIMEOUT_S = 10
_NOTE_LIMIT = 12
_HEAD_LIMIT = 4096

_WHITEOUT, _DIR, _FILE, _LINK, _OTHER = "whiteout", "dir", "file", "link", "other"


def _kind(info: os.stat_result) -> str:
    mode = info.st_mode
    if stat.S_ISCHR(mode) and info.st_rdev == 0:
        return _WHITEOUT
    if stat.S_ISDIR(mode):
        return _DIR
    if stat.S_ISREG(mode):
        return _FILE
    if stat.S_ISLNK(mode):
        return _LINK
    return _OTHER


def _escape(path: str) -> str:
    # overlayfs splits its options at ',' and lowerdir at ':'; a backslash escapes both
    return path.replace("\\", "\\\\").replace(",", "\\,").replace(":", "\\:")


def mount_option(lower: str, upper: str, work: str) -> str:
    """The overlay mount options for one root (user namespace: ``userxattr``)."""
    return f"lowerdir={_escape(lower)},{_layer_options(upper, work)}"


def _layer_options(upper: str, work: str) -> str:
    """The mount options but ``lowerdir`` (the launcher names it by descriptor)."""
    return f"upperdir={_escape(upper)},workdir={_escape(work)},userxattr,volatile"


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def overlay_base(roots: Sequence[str]) -> str:
    """A directory for the private upper layers, outside every root.

    Raises:
        SandboxUnavailableError: every candidate lies inside a root.
    """
    candidates = [tempfile.gettempdir(), "/var/tmp", "/dev/shm"]
    for candidate in candidates:
        real = os.path.realpath(candidate)
        if os.path.isdir(real) and not any(_within(real, root) for root in roots):
            return _layers_directory(real)
    raise SandboxUnavailableError(
        "every temporary directory lies inside a writable root; the sandbox needs one "
        "outside them for the command's changes (set TMPDIR); refusing to run"
    )


def _layers_directory(directory: str) -> str:
    """``directory/prism-layers-UID``, mode 0700, this user's own: the layers' parent.

    The sandbox hides it (an empty tmpfs over it), so that no command sees another
    call's pending changes.

    Raises:
        OSError: it exists and is not this user's directory.
    """
    path = os.path.join(directory, f"prism-layers-{os.getuid()}")
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise OSError(f"{path} is not a directory of this user")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


def _stat_key(path: str) -> tuple[int, int, int, int] | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


IndexEntries = dict[bytes, tuple[bytes, bytes, bytes]]
# what makes git read an index with other object names, or other files, than the ones here
_INDEX_ELSEWHERE = ("GIT_COMMON_DIR", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT")


def index_entries(
    git_dir: str,
    work_tree: str,
    index: str,
    gitlinks: list[bytes] | None = None,
    *,
    content: bytes | None = None,
) -> IndexEntries | None:
    """Each path of ``index`` with its tag, mode and object, as the host's git reads it.

    ``git ls-files --stage -v``, under the forced configuration; the tag is
    ``S`` for skip-worktree and lower case for assume-unchanged. None if
    unreadable. An unmerged path has one entry per stage, each keyed
    ``path + NUL + stage`` (:func:`entry_path` gives the path back): every
    stage is judged, since ``git checkout --ours``/``--theirs`` writes
    any of them. ``gitlinks``, when given, receives the path of every gitlink
    entry git listed, in its order (once per stage of a conflicted one). An
    index whose reading in Python is proved to be git's is read so
    (:func:`._indexfile.read_index`), without a process. ``content``: the bytes
    ``index`` is to hold (written there before git is asked), else its own.
    """
    git = host_program("git")
    if git is None or not os.path.isfile(index):
        return {}
    if not any(name in os.environ for name in _INDEX_ELSEWHERE):
        read = read_index(index, git_dir, gitlinks, content=content)
        if read is not None:
            return read  # (None: one git is asked about)
    if content is not None:
        _write_index(index, content)
    env = {**host_environment(), **dict(HOST_GIT_ENVIRONMENT), "GIT_INDEX_FILE": index,
           "GIT_DIR": git_dir, "GIT_WORK_TREE": work_tree}  # fmt: skip
    try:
        result = subprocess.run(
            [git, "ls-files", "--stage", "-v", "-z"],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=work_tree,
            check=False,
            timeout=_GIT_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:  # pragma: no cover - a git that hangs
        return None
    if result.returncode != 0:
        return None
    out: IndexEntries = {}
    last, last_stage = b"", -1
    for record in result.stdout.split(b"\0"):
        meta, _, name = record.partition(b"\t")
        fields = meta.split(b" ")
        if len(fields) == 4:
            stage = int(fields[3])
            if not in_git_order(last, last_stage, name, stage):
                return None  # git lists the entries in the file's order
            last, last_stage = name, stage
            out[name if fields[3] == b"0" else name + b"\0" + fields[3]] = (
                fields[0], fields[1], fields[2],
            )  # fmt: skip
            if gitlinks is not None and fields[1] == b"160000":
                gitlinks.append(name)
    return out


# the last index listed per (.git, work tree): what identifies its listing, and the listing
_LISTED: dict[tuple[str, str], tuple[tuple[object, ...], IndexEntries]] = {}
_LISTED_LOCK = threading.Lock()
_LISTED_BYTES = 1 << 23  # an index up to this size is kept whole to compare (one per .git)


def _listing_key(
    git_dir: str, index: str, content: bytes | None = None
) -> tuple[object, ...] | None:
    """What ``git ls-files`` of ``index`` depends on; None when it cannot be read whole.

    Its bytes (``content``: those it holds), the repository's configuration file,
    the environment's git variables.
    """
    if content is None:
        content = read_regular_file(index, _LIST_LIMIT)
    if content is None or len(content) >= _LIST_LIMIT:
        return None
    return (
        # the bytes themselves, compared at memory speed (hashed only when large)
        content if len(content) <= _LISTED_BYTES else hashlib.sha256(content).digest(),
        _stat_key(os.path.join(git_dir, "config")),
        tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("GIT_"))),
    )


def remember_listing(
    git_dir: str, work_tree: str, index: str, entries: IndexEntries, content: bytes | None = None
) -> None:
    """Keep ``entries``, the listing of ``index``: the host's index may soon be those bytes.

    ``content``: the bytes ``index`` holds (else read).
    """
    key = _listing_key(git_dir, index, content)
    if key is not None:
        with _LISTED_LOCK:
            _LISTED[git_dir, work_tree] = (key, entries)


def known_listing(git_dir: str, work_tree: str, index: str) -> IndexEntries | None:
    """The listing of ``index`` when one of the same bytes (same configuration) was kept."""
    with _LISTED_LOCK:
        kept = _LISTED.get((git_dir, work_tree))
    if kept is None or not os.path.isfile(index):
        return None
    return kept[1] if _listing_key(git_dir, index) == kept[0] else None


def gitlinks(git_dir: str, work_tree: str, index: str) -> frozenset[bytes] | None:
    """Paths of the gitlinks in ``index`` as the host's git reads them; None if unreadable."""
    entries = index_entries(git_dir, work_tree, index)
    if entries is None:
        return None
    return frozenset(entry_path(key) for key, (_, mode, _) in entries.items() if mode == b"160000")


def entry_path(key: bytes) -> bytes:
    """The path of an :func:`index_entries` key (a stage of an unmerged path too)."""
    return key.partition(b"\0")[0]


def _packed(content: bytes | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in (content or b"").splitlines():
        if line.startswith((b"#", b"^")):
            continue
        oid, _, ref = line.decode("utf-8", "surrogateescape").partition(" ")
        if ref:
            out[ref] = oid
    return out


# a packed-refs line as git writes it: an object name and a ref name, or a peeled object
_PACKED_REF = re.compile(rb"([0-9a-f]{40}|[0-9a-f]{64}) (refs/[^\0\s]+)")
_PEELED = re.compile(rb"\^([0-9a-f]{40}|[0-9a-f]{64})")


def _packed_as_written(content: bytes) -> dict[str, str] | None:
    """The refs of a ``packed-refs`` as git writes it, None when git would not write it so.

    Git writes one header line, then each ref once, sorted by name (bytewise),
    each followed by at most one peeled line, every line ended. It reads a
    file it would not write in ways a reader here could not follow: a sorted
    file is searched by halves, so of a name given twice it takes whichever
    line the search lands on.
    """
    out: dict[str, str] = {}
    last: bytes | None = None
    peeled = True  # no ref line before: a peeled line here is out of place
    lines = content.split(b"\n")
    if lines.pop() != b"":
        return None  # the last line unended
    for number, line in enumerate(lines):
        if line.startswith(b"# pack-refs with:") and number == 0:
            continue
        if _PEELED.fullmatch(line):
            if peeled:
                return None
            peeled = True
            continue
        match = _PACKED_REF.fullmatch(line)
        if match is None:
            return None
        ref = match[2]
        if last is not None and ref <= last:
            return None
        last, peeled = ref, False
        out[ref.decode("utf-8", "surrogateescape")] = match[1].decode()
    return out


# where git-lfs keeps an object: objects/<2 hex>/<2 hex>/<its SHA-256>
_LFS_OBJECT = re.compile(r"objects/([0-9a-f]{2})/([0-9a-f]{2})/\1\2[0-9a-f]{60}")
_LFS_LEFT_OUT = "only new git-lfs objects whose content hashes to their name come back"


def _self_ignoring(path: str) -> str | None:
    """Why a ``.gitignore`` may not come back (see :func:`._ignorefile.self_ignoring`)."""
    data = read_regular_file(path, IGNORE_READ + 1)
    return None if data is None else self_ignoring(data)


def _unsparse_size(path: str) -> int | None:
    """The size of the file at ``path``, None when most of it is a hole (or no file).

    A sparse file costs the command nothing to make (``truncate -s 8G``) and its
    reader everything: what is read of it after the command's time is up goes
    by the data it holds. (A small file may hold fewer blocks than its size,
    kept inline by its file system: only a file past 1 MiB is judged so.)
    """
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if info.st_size > 1 << 20 and info.st_blocks * 512 < info.st_size // 2:
        return None
    return info.st_size


def _sha256_named(path: str, name: str) -> bool:
    """Whether the regular file at ``path`` hashes (SHA-256) to ``name``."""
    fd = open_regular_file(path)
    if fd is None:
        return False
    digest = hashlib.sha256()
    with os.fdopen(fd, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest() == name


def _name_git_writes(path: bytes) -> bool:
    """Whether git would write ``path`` into an index (its ``verify_path``, with NTFS's rules).

    No empty, ``.`` or ``..`` component (so no leading, trailing or doubled
    ``/``), and no component git would take for ``.git``: any case, trailing
    dots and spaces, the short name ``git~1``.
    """
    for part in path.split(b"/"):
        if part in (b"", b".", b".."):
            return False
        folded = part.rstrip(b" .").lower()
        if folded in (b".git", b"git~1"):
            return False
    return True


def _hidden(tag: bytes) -> bool:
    """An index entry git status and git diff pass over (skip-worktree, assume-unchanged)."""
    return tag == b"S" or tag.islower()


# what git's `@{-N}` (`git checkout -`) reads from a reflog line: the name after this
_MOVING = b"checkout: moving from "
# a local branch's name as git writes it there (check_refname_format's rules, stricter)
_BRANCH = re.compile(
    rb"(?!.*\.lock(/|$))(?!.*[./]$)[A-Za-z0-9_-][A-Za-z0-9_.-]*(/[A-Za-z0-9_-][A-Za-z0-9_.-]*)*"
)

# a name git could read as an abbreviated object name when no ref has it ('deadbeef',
# a `git describe` name 'v1-2-gdeadbeef')
_ABBREVIATED = re.compile(rb"^[0-9a-fA-F]+$|-g[0-9a-fA-F]+$")


def _checkout_sources(line: bytes) -> list[bytes] | None:
    """The names a reflog line's checkout message gives ``@{-N}``; None: not a name git writes.

    Every ``checkout: moving from X to`` anywhere in the line counts (git reads
    the message's start only: a superset). Git writes ``X`` as a full object
    name (a detached ``HEAD``) or a local branch's name; anything else (a
    revision such as ``<tree>:<path>``, ``main~2``, a name git could read as an
    abbreviated object name) is refused, never resolved.
    """
    names: list[bytes] = []
    at = line.find(_MOVING)
    while at >= 0:
        rest = line[at + len(_MOVING) :]
        end = rest.find(b" to ")
        if end >= 0:
            name = rest[:end]
            if not _OID.fullmatch(name) and (
                not _BRANCH.fullmatch(name) or b".." in name or _ABBREVIATED.search(name)
            ):
                return None
            names.append(name)
        at = line.find(_MOVING, at + 1)
    return names


def _holds_state(path: str) -> bool:
    """Whether the layer's ``path`` holds anything but removals (whiteouts)."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    if _kind(info) != _DIR:
        return _kind(info) != _WHITEOUT
    with os.scandir(path) as listing:
        return any(_holds_state(entry.path) for entry in listing)


def _head_is_valid(path: str) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        content = os.read(fd, _HEAD_LIMIT + 1)
    finally:
        os.close(fd)
    return len(content) <= _HEAD_LIMIT and valid_git_head(content)


# per host reflog: the bytes last read or placed, whether git reads each of their lines as
# one, and the object names of their lines (their first two words); bounded
_REFLOGS: dict[str, tuple[bytes, bool, frozenset[bytes]]] = {}
_REFLOGS_LOCK = threading.Lock()
_REFLOGS_KEPT = 64


def _reflog_words(path: str, content: bytes) -> tuple[bool, frozenset[bytes]]:
    """Whether git reads each line of the reflog ``content`` as one; the words naming objects.

    The first two words of each line (read from the last reading of the same
    bytes at ``path``, compared whole, when there is one).
    """
    with _REFLOGS_LOCK:
        kept = _REFLOGS.get(path)
    if kept is not None and kept[0] == content:
        return kept[1], kept[2]
    words: set[bytes] = set()
    readable = True
    for line in content.splitlines():
        first = line.split(b" ", 2)
        words.update(first[:2])
        if len(first) < 3 or not all(_OID.fullmatch(word) for word in first[:2]):
            readable = False
    known = frozenset(words)
    _keep_reflog_words(path, content, known, readable)
    return readable, known


def _keep_reflog_words(
    path: str, content: bytes, known: frozenset[bytes], readable: bool = True
) -> None:
    if len(content) > _LISTED_BYTES:
        return
    with _REFLOGS_LOCK:
        if path not in _REFLOGS and len(_REFLOGS) >= _REFLOGS_KEPT:
            _REFLOGS.pop(next(iter(_REFLOGS)))
        _REFLOGS[path] = (content, readable, known)


class _Notes:
    def __init__(self) -> None:
        self.refused: dict[str, list[str]] = {}

    def add(self, reason: str, path: str) -> None:
        self.refused.setdefault(reason, []).append(path)

    def lines(self, root: str) -> list[str]:
        out: list[str] = []
        for reason, paths in self.refused.items():
            shown = ", ".join(paths[:_NOTE_LIMIT])
            more = f" and {len(paths) - _NOTE_LIMIT} more" if len(paths) > _NOTE_LIMIT else ""
            out.append(f"not applied to {root} ({reason}): {shown}{more}")
        return out


def _layer_top_mode(seen: os.stat_result) -> int:
    """The mode of a layer's top directory (Prism's own) for the directory ``seen``.

    The directory's mode; as root, without the owner's write bit when the
    sandboxed command (Prism's user and groups, no capability: bubblewrap drops
    them) may not create in the directory itself (another user's, or without a
    write bit for it): the command owns the layer's top and would otherwise
    create there what the copy-back then puts in the directory. The layer's own
    copy-ups (Prism's, with its capabilities) are not hindered by it.
    """
    mode = stat.S_IMODE(seen.st_mode)
    if os.geteuid() != 0:
        return mode  # the layer's top and the directory are both Prism's user's
    if seen.st_uid == 0:
        bits = mode >> 6
    elif seen.st_gid == os.getegid() or seen.st_gid in os.getgroups():
        bits = mode >> 3
    else:
        bits = mode
    if bits & 0o3 != 0o3:  # write and search
        mode &= ~stat.S_IWUSR
    return mode


class RootOverlay:
    """The private upper layer of one root while one command runs (see the module docstring)."""

    def __init__(
        self, root: str, base: str, entries: Sequence[str] = (), *, below: Sequence[str] = ()
    ) -> None:
        """Make the upper and work directories under ``base``; note git's work state.

        ``entries``: the protected entries (what the root's own links and
        repositories make protected besides comes from ``anchored`` in :meth:`apply`).
        ``below``: the layer covers only this directory of the root (its names,
        relative to the root); what it holds comes back under the same rules, each
        path judged from the root's top (a ``.git`` two levels down is still one).

        Raises:
            OSError: the directories could not be made.
        """
        self.root = root
        self.below = tuple(below)
        self.lower = os.path.join(root, *self.below)
        # an emptied layer of an earlier call when there is one (its directories made
        # and removed again cost the file system more than the command's own writes)
        ready = _ready_layer(base, (root, self.below))
        self.directory = (
            tempfile.mkdtemp(prefix="prism-overlay-", dir=base) if ready is None else (ready[0])
        )
        self.upper = os.path.join(self.directory, "upper")
        self.work = os.path.join(self.directory, "work")
        if ready is None:
            os.mkdir(self.upper, 0o755)
            os.mkdir(self.work, 0o700)
        # the directories of .git its upper directory kept from the last call over the same
        # directory (see recycle), by their paths below it: each with its mode
        self._kept: dict[tuple[str, ...], int] = {} if ready is None else ready[1]
        # the layer is mounted on a directory of its own, never on the root's
        # directory by path: the launcher opens that directory without following a
        # link, checks it is the one seen here, mounts the layer over that descriptor
        # (in its own mount namespace, where other calls' layers are mounted too) and
        # bubblewrap binds the layer from here (a link swapped in meanwhile cannot
        # redirect the mount nor the bind)
        self.mount_point = os.path.join(self.directory, "mnt")
        if not _real_directory(self.mount_point):
            os.mkdir(self.mount_point, 0o700)
        if self.below:
            fd = _open_below(root, self.below)
            try:
                seen = os.fstat(fd)
                self._kept = _kept_still(self.upper, fd, self._kept)
            finally:
                os.close(fd)
        else:
            seen = os.stat(self.lower)
            if self._kept:
                fd = _open_below(root, ())
                try:
                    same = os.fstat(fd)
                    self._kept = (
                        _kept_still(self.upper, fd, self._kept)
                        if (same.st_dev, same.st_ino) == (seen.st_dev, seen.st_ino)
                        else _kept_still(self.upper, -1, self._kept)
                    )
                finally:
                    os.close(fd)
        self.identity = (seen.st_dev, seen.st_ino)
        os.chmod(self.upper, _layer_top_mode(seen))
        upper = os.stat(self.upper)
        self._same_device = upper.st_dev == seen.st_dev
        # the file systems' own clock when the command starts (the chmod just set the
        # upper directory's ctime): an entry of the root whose ctime (which no program
        # can set) is later was changed by the host while it ran
        self.started = upper.st_ctime_ns
        git_dir = os.path.join(root, ".git")
        # git's work state at the root's top, compared when it comes back (only a layer
        # over the whole root or over that .git can hold it)
        self._before = (
            {name: _stat_key(os.path.join(git_dir, name)) for name in COPY_BACK}
            if self.below[:1] in ((), (".git",)) and os.path.isdir(git_dir)
            else dict.fromkeys(COPY_BACK)
        )
        self._entries = tuple(entries)

    def mount_option(self) -> str:
        """The overlay's mount options (mounted on :attr:`lower`)."""
        return mount_option(self.lower, self.upper, self.work)

    def mount_request(self) -> list[str]:
        """What the launcher mounts: options, mount point, root, below, device, inode.

        ``[options without lowerdir, its own mount point, root, below (joined by
        '/'; empty for the whole root), device, inode]``: the launcher opens
        root/below step by step without following a link, refuses another directory
        than the one seen when the layer was made, and mounts the layer with that
        descriptor as its lower directory.
        """
        options = _layer_options(self.upper, self.work)
        device, inode = self.identity
        return [options, self.mount_point, self.root, "/".join(self.below), str(device), str(inode)]

    def changed(self) -> bool:
        """Whether the command left any change (a kept directory as it was is none)."""
        if not self._kept:
            return bool(os.listdir(self.upper))
        return _changed_beyond(self.upper, (), self._kept)

    def touches_work_tree(self) -> bool:
        """Whether the command changed anything outside the root's top ``.git``."""
        if self.below:
            return self.below[0] != ".git"
        return any(name != ".git" for name in os.listdir(self.upper))

    def apply(
        self,
        protected: ProtectedPaths,
        anchored: Callable[[], Sequence[str]],
        *,
        granted: Sequence[tuple[str, ...]] = (),
        only_granted: bool = False,
        index_placed: Callable[[list[bytes], os.stat_result], None] | None = None,
        index_restamped: Callable[[os.stat_result, os.stat_result], None] | None = None,
        repositories: Callable[[], int] | None = None,
        entries: Callable[[], int] | None = None,
    ) -> list[str]:
        """Move the command's changes into the root; return what was left out, as notes.

        Call once, after the command ended. ``anchored()`` gives more protected
        paths relative to the root (asked when the work tree changed, or when
        a new index or a moved ref must be judged).
        ``granted``: paths (relative, as parts) an approval lets back although
        protected: each path itself as a file, a directory or a removal (never
        a symbolic link, nor what is below it); the directories on the way to
        one are entered.
        ``only_granted``: nothing else comes back (a directory outside the roots).
        ``index_placed(gitlinks, stat)``: told when the root's own ``.git/index`` was
        moved into place, with its gitlinks as the index check listed them, and
        when the check listed the host's index (as it was before the listing).
        ``index_restamped(before, after)``: told when the root's own index was
        rewritten with the entries of the work tree files placed made stat-unknown
        (see :meth:`_Applier.unknown_placed`), with its stat before and after.
        ``repositories()``, ``entries()``: how many git repositories the root holds
        below its top, and how many entries its walk counts (asked when the layer
        makes a new one): what would put the root past the walk's bounds
        (:data:`.MAX_NESTED_REPOSITORIES`, :data:`.MAX_WALKED_ENTRIES`) is left out.
        Never raises for a refusal; an ``OSError`` while applying is reported.
        """
        notes = _Notes()
        extra: AnchoredPaths | None = None

        def compute() -> AnchoredPaths:
            # compared folded, as a case-insensitive file system compares names
            return AnchoredPaths.of(anchored())

        if only_granted:
            extra = AnchoredPaths(())
        elif self.touches_work_tree():
            try:
                extra = compute()
            except SandboxUnavailableError as exc:
                return [f"the changes to {self.root} were not applied: {exc}"]
        applier = _Applier(self, protected, extra, notes, tuple(granted), only_granted)
        applier.index_placed = index_placed
        applier.index_restamped = index_restamped
        applier.repositories = repositories
        applier.entries = entries
        # only .git changed: the anchored paths are still needed to judge the
        # entries of a new index or of the commits a moved ref names (a hook
        # under core.hooksPath, an included config), computed when first asked
        applier.compute_extra = compute
        try:
            fd = _open_below(self.root, self.below)
        except OSError as exc:
            return [f"the changes to {self.lower} were not applied ({exc})"]
        try:
            applier.directory(self.upper, fd, self.below, opaque=False)
        except (OSError, RecursionError) as exc:
            notes.add(f"applying stopped: {exc}", "the rest of the changes")
        finally:
            os.close(fd)
            for directory, _ in applier._copied_inodes.values():
                os.close(directory)
        applier.unknown_placed()
        return notes.lines(self.root)

    def discard_later(self) -> None:
        """Have the private layer emptied in the background (see :func:`wait_discarded`).

        Emptying it takes the file system a while (many milliseconds of waiting on a
        journalled one, little CPU); the command's result does not wait for it. The
        emptied layer is kept for another call or removed (:meth:`recycle`).
        """
        _JANITOR.put(self)

    def discard(self) -> None:
        """Remove the private layer (idempotent)."""
        _remove_layer(self.directory)

    def recycle(self) -> None:
        """Empty the private layer for another call (see :func:`_ready_layer`), else remove it.

        Its ``work`` directory is emptied, its ``upper`` directory but for the plain
        directories of ``.git`` (:func:`_keep_directories`); the layer is kept while
        fewer than :data:`_READY_KEPT` are kept under its layers directory.
        """
        try:
            _unlock(self.work)
            _empty(self.work)
            # the directories of .git its git copied up (objects, refs, logs, refs/heads...)
            # stay for the next call over the same directory (its git copies them up again)
            found = _keep_directories(self.upper, self.below, [0])
        except (OSError, RecursionError):
            self.discard()
            return
        kept = {} if found is None else found
        with _READY_LOCK:
            ready = _READY.setdefault(os.path.dirname(self.directory), [])
            if not _READY_CLOSED and len(ready) < _READY_KEPT:
                ready.append((self.directory, (self.root, self.below), kept))
                return
        self.discard()


def _remove_layer(directory: str) -> None:
    """Remove a private layer's directory (idempotent)."""
    try:
        _unlock(os.path.join(directory, "work"))
        shutil.rmtree(directory)
    except FileNotFoundError:
        return
    except (OSError, RecursionError):
        # a tree deeper than Python's recursion (or PATH_MAX): the tools walk it
        # without either limit
        for argv in (["chmod", "-R", "u+rwx", "--", directory],
                     ["rm", "-rf", "--one-file-system", "--", directory]):  # fmt: skip
            program = host_program(argv[0])  # (never one a root's PATH entry holds)
            if program is not None:
                subprocess.run(argv, executable=program, capture_output=True,
                               stdin=subprocess.DEVNULL, env=host_environment(),
                               check=False)  # fmt: skip


def _unlock(work: str) -> None:
    """Give the directories in a layer's ``work`` their permissions back (overlayfs drops them)."""
    for path, dirs, _files in os.walk(work):
        for name in dirs:
            os.chmod(os.path.join(path, name), 0o700)


def _empty(directory: str) -> None:
    """Remove everything in ``directory`` (a layer's ``upper`` or ``work``), links unfollowed.

    Raises:
        OSError: something could not be removed (a directory without permissions
            as another user than root, for one).
    """
    with os.scandir(directory) as listing:
        entries = list(listing)
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)


# emptied layers kept for the next calls, per layers directory (see RootOverlay.recycle):
# each its directory, the (root, below) it was over, and the directories its upper kept
_Ready = tuple[str, tuple[str, tuple[str, ...]], dict[tuple[str, ...], int]]
_READY: dict[str, list[_Ready]] = {}
_READY_LOCK = threading.Lock()
_READY_KEPT = 4
_READY_CLOSED = False
# directories one layer keeps at most (each costs the next call two system calls)
_KEPT_DIRECTORIES = 32
# what the overlay itself writes on a directory it copied up, which may stay
_OVERLAY_MARKS = frozenset({"user.overlay.origin", "user.overlay.impure"})


def _ready_layer(
    base: str, over: tuple[str, tuple[str, ...]]
) -> tuple[str, dict[tuple[str, ...], int]] | None:
    """A kept layer under ``base`` (the last one over ``over`` first); None if none fits.

    Its ``work`` directory is empty, and its ``upper`` directory holds only the
    directories it kept (checked against the host's by :func:`_kept_still`), none
    when it was over another directory. One holding anything else (put there since
    it was emptied) is removed.
    """
    with _READY_LOCK:
        ready = _READY.get(base) or []
        # the last one over the same directory, else one that kept nothing, else any
        at = next((i for i, r in enumerate(ready) if r[1] == over), None)
        if at is None:
            at = next((i for i, r in enumerate(ready) if not r[2]), len(ready) - 1)
        taken = ready.pop(at) if ready else None
    if taken is None:
        return None
    directory, was_over, kept = taken
    try:
        info = os.lstat(directory)
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid():
            upper = os.path.join(directory, "upper")
            if was_over != over and kept:
                _empty(upper)
                kept = {}
            if not os.listdir(os.path.join(directory, "work")):
                if not kept and not os.listdir(upper):
                    return directory, {}
                if kept and not _changed_beyond(upper, (), kept):
                    return directory, kept
    except OSError:
        pass
    _remove_layer(directory)
    return None


def _remove_ready() -> None:
    """Remove every kept layer; none is kept from now on (at exit)."""
    global _READY_CLOSED
    with _READY_LOCK:
        _READY_CLOSED = True
        directories = [r[0] for ready in _READY.values() for r in ready]
        _READY.clear()
    for directory in directories:
        _remove_layer(directory)


def _keep_directories(
    upper: str, below: tuple[str, ...], count: list[int], rel: tuple[str, ...] = ()
) -> dict[tuple[str, ...], int] | None:
    """Empty ``upper`` (a layer's, after the copy-back) but for plain directories of ``.git``.

    A directory stays when it lies in a ``.git`` (not below its ``objects``: a commit's
    objects land in other ones each time), holds nothing but directories that stay,
    and bears no mark of the overlay's but its origin and impure marks (no opaque
    directory); at most :data:`_KEPT_DIRECTORIES`. Returns the directories kept
    below ``rel`` (paths below ``upper``, with their modes), or None when ``rel``
    itself does not stay (its parent removes it).
    """
    kept: dict[tuple[str, ...], int] = {}
    whole = True
    with os.scandir(os.path.join(upper, *rel)) as listing:
        entries = list(listing)
    for entry in entries:
        child = (*rel, entry.name)
        full = (*below, *child)
        inside = full[full.index(".git") + 1 :] if ".git" in full else None
        if (
            inside is not None
            and not (inside[:1] == ("objects",) and len(inside) > 1)
            and entry.is_dir(follow_symlinks=False)
            and count[0] < _KEPT_DIRECTORIES
        ):
            below_kept = _keep_directories(upper, below, count, child)
            if below_kept is not None:
                kept.update(below_kept)
                continue
        whole = False
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)
    if not rel:
        return kept
    path = os.path.join(upper, *rel)
    marks = os.listxattr(path, follow_symlinks=False)
    if not whole or any(m.startswith(("user.overlay.", "trusted.overlay.")) and m not in
                        _OVERLAY_MARKS for m in marks):  # fmt: skip
        return None
    kept[rel] = stat.S_IMODE(os.lstat(path).st_mode)
    count[0] += 1
    return kept


def _changed_beyond(upper: str, rel: tuple[str, ...], kept: dict[tuple[str, ...], int]) -> bool:
    """Whether ``upper`` holds anything but the ``kept`` directories, each with its mode."""
    with os.scandir(os.path.join(upper, *rel)) as listing:
        for entry in listing:
            child = (*rel, entry.name)
            mode = kept.get(child)
            if (
                mode is None
                or not entry.is_dir(follow_symlinks=False)
                or stat.S_IMODE(entry.stat(follow_symlinks=False).st_mode) != mode
                or _changed_beyond(upper, child, kept)
            ):
                return True
    return False


def _kept_still(
    upper: str, lower: int, kept: dict[tuple[str, ...], int]
) -> dict[tuple[str, ...], int]:
    """``kept`` when each kept directory is still one of the host's (``lower``, a descriptor).

    The host's directory of the same path (each step opened without following a
    link) with the same mode, owner and extended attributes; each kept one then
    gets its times, as a copy-up gives them. Else ``upper`` is emptied and nothing
    is kept. ``lower`` -1: emptied.
    """
    if not kept:
        return kept
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    opened: dict[tuple[str, ...], int] = {(): lower}
    try:
        if lower < 0:
            raise OSError("another directory")
        for rel in sorted(kept, key=len):
            fd = opened[rel] = os.open(rel[-1], flags, dir_fd=opened[rel[:-1]])
            host = os.fstat(fd)
            path = os.path.join(upper, *rel)
            mine = os.lstat(path)
            if (
                stat.S_IMODE(host.st_mode) != kept[rel]
                or stat.S_IMODE(mine.st_mode) != kept[rel]
                or (host.st_uid, host.st_gid) != (mine.st_uid, mine.st_gid)
                or _attributes(fd) != _attributes(path)
            ):
                raise OSError("changed")
            os.utime(path, ns=(host.st_atime_ns, host.st_mtime_ns), follow_symlinks=False)
    except (OSError, KeyError):
        _empty(upper)
        return {}
    finally:
        for rel, fd in opened.items():
            if rel:
                os.close(fd)
    return kept


def _attributes(target: int | str) -> dict[str, bytes]:
    """The extended attributes of a directory (descriptor or path), the overlay's marks aside."""
    names = (
        os.listxattr(target)
        if isinstance(target, int)
        else os.listxattr(target, follow_symlinks=False)
    )
    return {
        name: os.getxattr(target, name)
        if isinstance(target, int)
        else os.getxattr(target, name, follow_symlinks=False)
        for name in names
        if name not in _OVERLAY_MARKS
    }


_SHARED_CACHES = "a shared index is kept only without extensions (as git writes one)"


_INDEX_LIMIT = 1 << 28  # an index past 256 MiB is not read back in


def _copy_data(source: int, target: int, size: int) -> None:
    """Copy a file of ``size`` bytes, its holes kept holes (``truncate -s 4G f`` is no data).

    Only the ranges the file system says hold data are read and written
    (``SEEK_DATA``/``SEEK_HOLE``; a file system without them says the whole file
    does); the target is then cut to ``size``, which leaves the rest a hole.
    """
    at = 0
    while at < size:
        try:
            start = os.lseek(source, at, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                break  # only a hole is left
            raise
        end = os.lseek(source, start, os.SEEK_HOLE)
        os.lseek(source, start, os.SEEK_SET)
        os.lseek(target, start, os.SEEK_SET)
        while start < end:
            chunk = os.read(source, min(1 << 20, end - start))
            if not chunk:
                break
            view = memoryview(chunk)
            while view:
                view = view[os.write(target, view) :]
            start += len(chunk)
        at = end
    os.ftruncate(target, size)


def _same_small_file(one: str, other: str) -> bool:
    """Whether two regular files hold the same bytes (each read up to the index limit)."""
    try:
        if os.lstat(one).st_size != os.lstat(other).st_size:
            return False
    except OSError:
        return False
    data = _read_small(one)
    return data is not None and data == _read_small(other)


def _entry_count(path: str) -> int:
    """The count of entries an index file's header gives (0: no index, or unreadable)."""
    head = read_regular_file(path, 12)
    if head is None or len(head) < 12 or head[:4] != b"DIRC":
        return 0
    return int.from_bytes(head[8:12], "big")


def _read_small(path: str) -> bytes | None:
    data = read_regular_file(path, _INDEX_LIMIT)
    return None if data is None or len(data) >= _INDEX_LIMIT else data


_SPARSE = (
    "a sparse index is not kept: its directory entries name trees that the host's git "
    "expands unjudged"
)


def _without_caches(path: str) -> tuple[str | None, bytes | None]:
    """The layer's index at ``path`` without its optional extensions (see :mod:`._index`).

    Returns why it may not come back, if so: not in git's index format, or a
    sparse index (``sdir``); else (None, the bytes the index is to hold, or None
    when it holds them already). Nothing is written.
    """
    data = _read_small(path)
    stripped = None if data is None else strip_optional_extensions(data)
    if stripped is None:
        return "an unreadable index (not in git's index format)", None
    if b"sdir" in (extension_signatures(stripped) or ()):
        return _SPARSE, None
    return None, None if stripped is data else stripped


_INTENDED_UNREAD = (
    "a split index marking an entry intent-to-add (git leaves such an entry out of the "
    "trees it writes: the host's next commit could delete a tracked file)"
)


def _intended(keys: set[bytes]) -> str:
    shown = ", ".join(sorted(entry_path(k).decode("utf-8", "replace") for k in keys)[:5])
    return (
        f"a tracked entry newly marked intent-to-add ({shown}): git leaves it out of the "
        "trees it writes, so the host's next commit would delete the file"
    )


def _write_index(path: str, data: bytes) -> None:
    """Replace the layer's index at ``path`` by ``data``, with the index's own mode.

    Written over its own bytes when it is a regular file of no other name (the
    command's processes are gone: nothing else holds it), which spares the file
    system a new file and the old one's removal; else under a fresh name beside it.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        fd = -1
    if fd >= 0:
        try:
            info = os.fstat(fd)
            if stat.S_ISREG(info.st_mode) and info.st_nlink == 1:
                view, at = memoryview(data), 0
                while at < len(data):
                    at += os.pwrite(fd, view[at:], at)
                os.ftruncate(fd, len(data))
                return
        finally:
            os.close(fd)
    # a fresh name beside it: one the command made in its layer is never opened
    fd, temporary = tempfile.mkstemp(prefix="index.prism-", dir=os.path.dirname(path))
    os.fchmod(fd, stat.S_IMODE(os.lstat(path).st_mode))
    with os.fdopen(fd, "wb") as file:
        file.write(data)
    os.replace(temporary, path)


_INDEX_UNREAD = (
    "an index not read here: its entries of the files changed keep their cached stat data"
)
_INDEX_LOCKED = (
    "git's index was locked: its entries of the files changed keep their cached stat "
    "data (`git update-index --really-refresh` makes git read those files again)"
)


def _index_stat_unknown(
    git_dir: str,
    work_tree: str,
    paths: set[bytes],
    restamped: Callable[[os.stat_result, os.stat_result], None] | None,
) -> str | None:
    """Zero the cached stat data of the entries ``paths`` in ``git_dir``'s index.

    See :meth:`_Applier.unknown_placed`. Returns why it was not done, or None
    (done, or nothing to do: no index, or no entry of ``paths``). The listing
    kept for the old bytes is kept for the new ones (the entries' paths, modes
    and objects are the same); ``restamped(before, after)`` is told (the root's
    own index) with the file's stat before and after.
    """
    fd = os.open(git_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            lock = os.open("index.lock", flags, 0o600, dir_fd=fd)
        except FileExistsError:
            return _INDEX_LOCKED
        done = False
        try:
            try:
                source = os.open(
                    "index", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd
                )
            except FileNotFoundError:
                return None
            try:
                before = os.fstat(source)
                if not stat.S_ISREG(before.st_mode) or before.st_size >= _INDEX_LIMIT:
                    return "an index that is no regular file, or past the size read here"
                with os.fdopen(os.dup(source), "rb") as file:
                    data = file.read()
            finally:
                os.close(source)
            new = with_stat_unknown(data, paths, held=True)
            shared_name = None if new is None else shared_index_name(new)
            if new is not None and shared_name is not None:
                shared = read_regular_file(os.path.join(git_dir, shared_name), _INDEX_LIMIT)
                both = None if shared is None else with_shared_stat_unknown(new, shared, paths)
                if both is None or both[1] is not shared:
                    new = None if both is None else both[0]
                if both is not None and both[1] is not shared:
                    _write_new_file(fd, shared_index_name(both[0]) or "", both[1], before.st_mode)
            if new is None:
                return _INDEX_UNREAD
            if new is data or new == data:
                return None  # (no entry of them, or each unknown already)
            kept = known_listing(git_dir, work_tree, os.path.join(git_dir, "index"))
            view, at = memoryview(new), 0
            while at < len(new):
                at += os.write(lock, view[at:])
            os.fchmod(lock, stat.S_IMODE(before.st_mode))
            os.close(lock)
            lock = -1
            os.rename("index.lock", "index", src_dir_fd=fd, dst_dir_fd=fd)
            done = True
            after = os.stat("index", dir_fd=fd, follow_symlinks=False)
            if kept is not None:
                remember_listing(git_dir, work_tree, os.path.join(git_dir, "index"), kept, new)
            if restamped is not None:
                restamped(before, after)
            return None
        finally:
            if lock >= 0:
                os.close(lock)
            if not done:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink("index.lock", dir_fd=fd)
    finally:
        os.close(fd)


def _write_new_file(dir_fd: int, name: str, data: bytes, mode: int) -> None:
    """Write ``data`` as ``name`` under ``dir_fd`` (a fresh file renamed there)."""
    temporary = f".prism-{os.getpid()}-{name}"[:255]
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    file = os.open(temporary, flags, 0o600, dir_fd=dir_fd)
    with os.fdopen(file, "wb") as out:
        out.write(data)
        os.fchmod(out.fileno(), stat.S_IMODE(mode))
    os.rename(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def _real_directory(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _loose_refs(directory: str, limit: int = 64) -> list[str]:
    """Names of the loose refs the layer holds under ``directory`` (a ``.git``'s ``refs``).

    At most ``limit``; links are not followed. Only a hint of what to ask git first.
    """
    out: list[str] = []
    top = os.path.dirname(directory)
    for path, _dirs, files in os.walk(directory):
        for name in files:
            out.append(os.path.relpath(os.path.join(path, name), top))
            if len(out) >= limit:
                return out
    return out


def _open_below(root: str, below: Sequence[str]) -> int:
    """A descriptor of ``root``/``below``, each step opened without following a link.

    Raises:
        OSError: a step is missing, a link or not a directory (the host changed it).
    """
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(root, flags)
    for name in below:
        try:
            step = os.open(name, flags, dir_fd=fd)
        finally:
            os.close(fd)
        fd = step
    return fd


class _Applier:
    def __init__(
        self,
        overlay: RootOverlay,
        protected: ProtectedPaths,
        extra: AnchoredPaths | None,
        notes: _Notes,
        granted: tuple[tuple[str, ...], ...] = (),
        only_granted: bool = False,
    ) -> None:
        self.overlay = overlay
        self.protected = protected
        # None: not computed yet (only .git changed); see entry_extra
        self.extra = extra
        self.compute_extra: Callable[[], AnchoredPaths] | None = None
        self.notes = notes
        self.granted = granted
        self.only_granted = only_granted
        self._packed_out: dict[tuple[str, ...], bool] = {}
        self._operations: dict[tuple[str, ...], bool] = {}
        self._commit_trees: dict[str, CommitTrees] = {}
        self._refs_judged = 0  # refs (and reflog entries) judged in this copy-back
        # how many git repositories the root holds below its top (asked once, when the
        # layer makes one), and how many the layer adds
        self.repositories: Callable[[], int] | None = None
        self._held_repositories: int | None = None
        self._new_repositories = 0
        # how many entries the root's walk counts (asked once, when the layer makes one)
        # and how many new ones this copy-back placed where the walk counts them
        self.entries: Callable[[], int] | None = None
        self._held_entries: int | None = None
        self._new_entries = 0
        # the files with more than one name copied into the root (across file systems):
        # where the first name went (its directory, open, and the name)
        self._copied_inodes: dict[tuple[int, int], tuple[int, str]] = {}
        self._history_judged = 0  # new commits judged against their parents, all refs
        self._lfs_hashed = 0  # bytes of new git-lfs objects hashed
        self._shared_read = 0  # new shared indexes read
        self._ignore_read = 0  # bytes of new or changed ignore files read
        self._reflogs_read = 0  # changed reflogs read
        self._packed_reasons: dict[tuple[tuple[str, ...], str], str | None] = {}
        # the .git directories whose new objects were proved (see objects_proved)
        self._proved: dict[tuple[str, ...], bool] = {}
        # what their loose objects may still inflate to, all together
        self.inflation = InflationLeft()
        self.index_placed: Callable[[list[bytes], os.stat_result], None] | None = None
        # told when unknown_placed rewrote the root's own index (its stat before, after)
        self.index_restamped: Callable[[os.stat_result, os.stat_result], None] | None = None
        # the root's own new index's gitlinks, listed by its check (None: not listed)
        self._new_gitlinks: list[bytes] | None = None
        # the shared indexes this copy-back placed (a split index's), by host path
        self._placed_shared: set[str] = set()
        # the work tree's files and links this copy-back placed (see unknown_placed)
        self.placed: list[tuple[str, ...]] = []

    def upper_path(self, rel: tuple[str, ...]) -> str:
        """Where the layer holds ``rel`` (a path from the root's top, below its ``below``)."""
        return os.path.join(self.overlay.upper, *rel[len(self.overlay.below) :])

    def is_granted(self, rel: tuple[str, ...], kind: str) -> bool:
        """Whether an approval lets the change ``kind`` at ``rel`` back."""
        for path in self.granted:
            if rel == path and kind not in (_LINK, _OTHER):
                return True  # the approved path itself (not what is below it)
            if path[: len(rel)] == rel and kind == _DIR:
                return True  # a directory on the way to it (entered)
        return False

    def refusal(self, rel: tuple[str, ...], kind: str) -> str | None:
        """Why the change ``kind`` at ``rel`` is not applied, or None."""
        if self.only_granted:
            return None if self.is_granted(rel, kind) else "outside the roots, not approved"
        folded = fold_parts(rel)
        extra = self.extra
        if extra is not None and extra.covers(folded) and not self.is_granted(rel, kind):
            # what the root's own files protect; an approved path itself comes back
            return "protected paths"
        if kind == _LINK and (
            self.protected.leads_to(rel) or (extra is not None and extra.leads_to(folded))
        ):
            # a link on the way to a protected entry (`.cargo -> c` with `c/config.toml`)
            # makes what it points at that entry
            return "protected paths"
        if ".git" not in rel:
            if GIT_DIRECTORY in folded:
                # on a case-insensitive file system the same .git (its refs, index,
                # objects): never judged as one under another name
                return _GIT_TWIN
            if self.protected.covers(rel) and not self.is_granted(rel, kind):
                return "protected paths"
            if ignore_file(folded[-1]) and kind == _FILE:
                return self.ignore_refusal(rel)
            return None
        at = rel.index(".git")
        inside = rel[at + 1 :]
        if not inside:
            if at and kind in (_DIR, _FILE) and self.past_repositories(rel):
                return (
                    f"a git repository past the {MAX_NESTED_REPOSITORIES} a root may hold "
                    "below its top"
                )
            if kind == _DIR:
                return None
            if kind == _WHITEOUT:
                return "a git directory is not removed from inside the sandbox"
            return "a .git file decides which repository git uses"
        if kind == _LINK:
            return "symbolic links in .git are never kept"
        if kind != _WHITEOUT and rel[-1].endswith(".lock"):
            # git's lock of a file it is replacing (refs/heads/main.lock, index.lock): one
            # left behind makes the host's git refuse to write that file
            return "a stale lock"
        name = inside[0]
        if len(inside) == 1 and name in _KEEP and kind != (_FILE if name == "HEAD" else _DIR):
            return f"a .git directory keeps its {name}"
        if name in _OPERATION or inside[:2] == ("refs", "bisect"):
            # its end (the state removed) comes back; anything else stays out
            if kind == _WHITEOUT or (kind == _DIR and not _holds_state(self.upper_path(rel))):
                return None
            return _OPERATION_LEFT_OUT
        if name == "refs" and inside[1:2] == ("replace",) and kind == _FILE:
            return _REPLACE
        if name == "rr-cache":
            return _RERERE
        if name == "refs" and kind == _FILE:
            return self.ref_refusal(rel, at)
        if name == "refs" and kind == _WHITEOUT and self.packed_left_out(rel, at):
            # `git pack-refs` moves loose refs into packed-refs: with that file left
            # out, the refs it removed stay too, or the host would lose them
            return "a ref removed while the new packed-refs was left out"
        if name == "refs" and kind == _WHITEOUT:
            return self.removed_ref_refusal(rel, at)
        if name == "logs" and kind == _FILE:
            return self.reflog_refusal(rel, at)
        if name == "reftable":
            return _REFTABLE
        if name == "objects" and not self.objects_proved(rel, at):
            return NOT_OBJECTS
        if name == "lfs":
            return self.lfs_refusal(rel, inside, kind)
        if name in _DATA and inside[:3] not in _ALTERNATES:
            return None
        if len(inside) == 1 and name in COPY_BACK and kind in (_FILE, _WHITEOUT):
            if name != "packed-refs":
                return self.state_refusal(rel, at, name, kind)
            # asked again for each loose ref the command removed (packed_left_out):
            # judged once per call, its full reason kept
            if (rel, kind) not in self._packed_reasons:
                self._packed_reasons[rel, kind] = self.state_refusal(rel, at, name, kind)
            return self._packed_reasons[rel, kind]
        if len(inside) == 1 and _SHARED_INDEX.fullmatch(name):
            # a split index (`git update-index --split-index`, `core.splitIndex`) names
            # its shared index by hash: index data like the index itself, which would
            # not open on the host without it; git expires old ones itself
            if kind != _FILE:
                return "a shared index is not removed from inside"
            upper = self.upper_path(rel)
            held = os.path.join(self.overlay.root, *rel)
            if os.path.lexists(held):
                # git never rewrites one (it only touches it, to keep it from expiring:
                # the same bytes come back); other bytes would break the split indexes
                # naming it
                if _same_small_file(upper, held):
                    return None
                return "a shared index the host has is never replaced"
            self._shared_read += 1
            if self._shared_read > _SHARED_PER_COPY_BACK:
                return f"more than {_SHARED_PER_COPY_BACK} new shared indexes from one command"
            if _unsparse_size(upper) is None:
                return "a sparse shared index (its size is not data it holds)"
            host = os.path.join(self.overlay.root, *rel[:at], ".git", "index")
            if _entry_count(upper) - _entry_count(host) > MAX_ADDED_ENTRIES:
                return f"a shared index adding more than {MAX_ADDED_ENTRIES} entries"
            data = _read_small(upper)
            digest = name.removeprefix("sharedindex.")
            if data is None or data[-len(digest) // 2 :].hex() != digest:
                # git names one by its trailing checksum; the index naming it checks that
                return "a shared index not named by its checksum"
            return None if extensionless(data) else _SHARED_CACHES
        return "only git's data and work state are kept from .git"

    def ignore_refusal(self, rel: tuple[str, ...]) -> str | None:
        """Why a new or changed ``.gitignore`` may not come back (see :mod:`._ignorefile`).

        Its bytes count toward :data:`_IGNORE_BYTES_PER_COPY_BACK`: past them the
        ignore files are left out unread (their number is the command's to choose).
        """
        upper = self.upper_path(rel)
        try:
            size = os.lstat(upper).st_size
        except OSError:
            return None
        self._ignore_read += min(size, IGNORE_READ + 1)
        if self._ignore_read > _IGNORE_BYTES_PER_COPY_BACK:
            return f"ignore files past {_IGNORE_BYTES_PER_COPY_BACK} bytes from one command"
        return _self_ignoring(upper)

    def past_repositories(self, rel: tuple[str, ...]) -> bool:
        """Whether a ``.git`` at ``rel`` the host lacks would put the root past its bound.

        The next call's walk refuses a root holding more than
        :data:`.MAX_NESTED_REPOSITORIES` repositories below its top, and with it
        every change to the root: a command may not bring it there.
        """
        if self.repositories is None or os.path.lexists(os.path.join(self.overlay.root, *rel)):
            return False
        if self._held_repositories is None:
            try:
                self._held_repositories = self.repositories()
            except SandboxUnavailableError:  # (a root the walk refuses already)
                self._held_repositories = MAX_NESTED_REPOSITORIES
        self._new_repositories += 1
        return self._held_repositories + self._new_repositories > MAX_NESTED_REPOSITORIES

    def past_entries(self, real_fd: int, rel: tuple[str, ...]) -> bool:
        """Whether a new entry at ``rel`` (the host lacks it) would put the root past its bound.

        The next walk of the root refuses it past :data:`.MAX_WALKED_ENTRIES`
        entries, and with it every change to the root (the write tool's too):
        a command may not bring it there. Counted as the walk counts: every
        entry but those below a ``.git`` directory's top.
        """
        if self.entries is None:
            return False
        if ".git" in rel[:-1] and rel.index(".git") != len(rel) - 2:
            return False  # (below a .git directory's top: never walked)
        try:
            os.lstat(rel[-1], dir_fd=real_fd)
        except FileNotFoundError:
            pass
        else:
            return False  # replaced, not added
        if self._held_entries is None:
            try:
                self._held_entries = self.entries()
            except SandboxUnavailableError:  # (a root the walk refuses already)
                self._held_entries = MAX_WALKED_ENTRIES
        if self._held_entries + self._new_entries >= MAX_WALKED_ENTRIES:
            return True
        self._new_entries += 1
        return False

    def objects_proved(self, rel: tuple[str, ...], at: int) -> bool:
        """Drop from the layer what of this ``.git``'s objects may not come back (once).

        See :mod:`._objects`: before any ref of it is judged or any object moved.
        False: the layer lies inside ``objects`` (nothing of it can be proved).
        """
        git_rel = rel[: at + 1]
        done = self._proved.get(git_rel)
        if done is not None:
            return done
        objects = (*git_rel, "objects")
        below = self.overlay.below
        done = self._proved[git_rel] = below[: len(objects)] != objects or below == objects
        upper = self.upper_path(objects)
        if objects[: len(below)] != below or not _real_directory(upper):
            return done  # the layer does not hold this objects directory
        git_dir = os.path.join(self.overlay.root, *git_rel)
        host = os.path.join(git_dir, "objects")
        for reason, path in prove_objects(
            upper, host, git_dir, self.overlay.directory, self.inflation
        ):
            self.notes.add(reason, "/".join((*objects, path)))
        return done

    def packed_left_out(self, rel: tuple[str, ...], at: int) -> bool:
        """Whether this ``.git``'s changed packed-refs is left out (judged once)."""
        packed = (*rel[: at + 1], "packed-refs")
        cached = self._packed_out.get(packed)
        if cached is None:
            try:
                info = os.lstat(self.upper_path(packed))
            except OSError:
                cached = False  # unchanged (or removed): loose refs are judged alone
            else:
                if stat.S_ISREG(info.st_mode):
                    kind = _FILE
                elif stat.S_ISCHR(info.st_mode) and info.st_rdev == 0:
                    kind = _WHITEOUT  # removed
                else:
                    kind = _OTHER
                cached = self.refusal(packed, kind) is not None
            self._packed_out[packed] = cached
        return cached

    def operation_left(self, rel: tuple[str, ...], at: int) -> bool:
        """Whether the layer holds a new or changed state of an operation in progress.

        Then the ``HEAD`` and index that operation left stay out with it.
        """
        git_dir = rel[: at + 1]
        cached = self._operations.get(git_dir)
        if cached is None:
            cached = False
            cached = any(
                _holds_state(self.upper_path((*git_dir, *name.split("/"))))
                for name in (*_OPERATION, "refs/bisect")
            )
            self._operations[git_dir] = cached
        return cached

    def lfs_refusal(self, rel: tuple[str, ...], inside: tuple[str, ...], kind: str) -> str | None:
        """What of ``.git/lfs`` may come back: new git-lfs objects proved by their content.

        git-lfs's smudge filter takes a local object by its name and checks only its
        size, so a rewritten one would put other bytes into the host's next checkout
        of the file, with its pointer (and so ``git diff``) unchanged. As with git's
        own objects, an object the host holds is never replaced, and a new one comes
        back only when its SHA-256 is its name; nothing else of ``lfs`` (its ``tmp``
        and ``incomplete`` downloads) does. Removing an object loses nothing the
        server does not hold.
        """
        if kind in (_WHITEOUT, _DIR) and inside[1:2] in ((), ("objects",)):
            return None
        if kind != _FILE or not _LFS_OBJECT.fullmatch("/".join(inside[1:])):
            return _LFS_LEFT_OUT
        if os.path.lexists(os.path.join(self.overlay.root, *rel)):
            return "a git-lfs object the host holds is never replaced"
        upper = self.upper_path(rel)
        size = _unsparse_size(upper)
        if size is None:
            return "a sparse git-lfs object (its size is not data it holds)"
        self._lfs_hashed += size
        if self._lfs_hashed > _LFS_BYTES_PER_COPY_BACK:
            return f"new git-lfs objects past {_LFS_BYTES_PER_COPY_BACK} bytes from one command"
        return None if _sha256_named(upper, inside[-1]) else _LFS_LEFT_OUT

    def marks_shared_intent(self, git_dir: str, data: bytes) -> bool:
        """Whether the shared index the command placed for ``data`` marks an entry intent-to-add."""
        name = shared_index_name(data)
        placed = None if name is None else os.path.join(git_dir, name)
        if placed is None or placed not in self._placed_shared:
            return False
        shared = _read_small(placed)
        return shared is None or marks_intent(shared)

    def shared_stat_unknown(self, git_dir: str, data: bytes, keys: set[bytes]) -> bytes | None:
        """``data`` (a new index) naming a shared index whose entries ``keys`` are unknown.

        A split index's entry may be held by its shared index alone: when that
        index is one this copy-back placed (the command wrote it), the stat data
        it gives the entries ``keys`` is the command's to forge as well (see
        :func:`.with_stat_unknown`). It is replaced by a copy with them zeroed,
        named by its own checksum as git names one, and ``data`` names that
        copy. A shared index the host had is the host's git's own: ``data`` as
        it is. None: not read here.
        """
        name = shared_index_name(data)
        placed = None if name is None else os.path.join(git_dir, name)
        if placed is None or placed not in self._placed_shared:
            return data
        shared = _read_small(placed)
        rewritten = None if shared is None else with_shared_stat_unknown(data, shared, keys)
        if rewritten is None:
            return None
        data, new_shared = rewritten
        if new_shared is not shared:
            fd = os.open(git_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                temporary = f".prism-{os.getpid()}-sharedindex"
                file = os.open(
                    temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644,
                    dir_fd=fd,
                )  # fmt: skip
                with os.fdopen(file, "wb") as out:
                    out.write(new_shared)
                os.rename(temporary, shared_index_name(data) or "", src_dir_fd=fd, dst_dir_fd=fd)
                os.unlink(os.path.basename(placed), dir_fd=fd)  # (the command's, unnamed now)
            finally:
                os.close(fd)
            self._placed_shared.discard(placed)
        return data

    def state_refusal(self, rel: tuple[str, ...], at: int, name: str, kind: str) -> str | None:
        overlay = self.overlay
        git_dir = os.path.join(overlay.root, *rel[: at + 1])
        if at == 0 and _stat_key(os.path.join(git_dir, name)) != overlay._before[name]:
            return "changed on the host meanwhile; the host's version is kept"
        if name in _WITH_OPERATION and kind == _FILE and self.operation_left(rel, at):
            return _OPERATION_LEFT_OUT  # where the operation left them, with its state
        if name == "shallow":
            return _SHALLOW
        if name == "HEAD":
            # an invalid (or removed) HEAD makes git pass over this .git and take the
            # directory itself, or a parent, for the repository
            if kind != _FILE:
                return "a .git directory keeps its HEAD"
            if not _head_is_valid(self.upper_path(rel)):
                return "a HEAD that is not a valid ref would make git look elsewhere"
            return self.ref_refusal(rel, at)  # a detached HEAD names a commit
        if name == "packed-refs" and kind == _FILE:
            return self.packed_refusal(rel, at)
        if name == "FETCH_HEAD" and kind == _FILE:
            return self.fetch_head_refusal(rel, at)
        if name in _NAMES_A_COMMIT and kind == _FILE:
            # the host's `git reset --hard ORIG_HEAD`, `merge --continue`... checks it out
            return self.ref_refusal(rel, at)
        if name == "index" and kind == _FILE:
            work_tree = os.path.join(overlay.root, *rel[:at])
            new = self.upper_path(rel)
            return self.index_refusal(rel[:at], git_dir, work_tree, new)
        return None

    def index_refusal(
        self, top: tuple[str, ...], git_dir: str, work_tree: str, new: str
    ) -> str | None:
        """Why a new index may not come back: what the host's git would do with it.

        A new submodule (the host's git would enter it), a protected path staged
        or changed (the host's next ``git stash``, ``reset --hard`` or
        ``checkout .`` would write it), an entry newly marked skip-worktree or
        assume-unchanged (the host's ``git status`` and ``git diff`` would not
        show what the command changed there).
        """
        unreadable = (
            "an index the host's git would read otherwise than it is checked here "
            "(unreadable index, or a path listed twice or out of git's order)"
        )
        added = _entry_count(new) - _entry_count(os.path.join(git_dir, "index"))
        if added > MAX_ADDED_ENTRIES:
            # each entry is listed and judged after the command's time is up
            return f"an index adding more than {MAX_ADDED_ENTRIES} entries ({added})"
        format_refusal, stripped = _without_caches(new)
        if format_refusal is not None:
            return format_refusal
        gitlinks: list[bytes] = []
        after = index_entries(git_dir, work_tree, new, gitlinks, content=stripped)
        if after is None:
            return unreadable
        if not top:
            self._new_gitlinks = gitlinks
        host_index = os.path.join(git_dir, "index")
        # the host's index listed before (the one the last call placed, as a rule), else
        # listed now: an entry it holds exactly is no new submodule, staged path or
        # hidden entry (each test below asks the entry to differ from the host's)
        before = known_listing(git_dir, work_tree, host_index)
        if before is None:
            before = self.host_index_entries(top, git_dir, work_tree, host_index)
        data = stripped if stripped is not None else _read_small(new)
        # (the items that differ, looked up by path: a third of the CPU of a set of the
        # items, whose every tuple is hashed; then in the index's order)
        changed = (
            after.items()
            if before is None
            else sorted([(k, v) for k, v in after.items() if before.get(k) != v])
        )
        kept = None
        host_data = _read_small(host_index) if before is not None else None
        if before is not None and data is not None and host_data is not None:
            kept = with_proved_cache_tree(data, host_data, before, after, changed)
        unknown = None
        if data is not None:
            # an entry's stat data is the command's to forge: the work tree file's own
            # would have git take that file for the staged blob (or, the object kept, for
            # the host's content) in every diff; so only an entry the host holds with the
            # same stat data keeps it
            stale = {p for p, _ in changed}
            if before is not None:
                stamped = None if host_data is None else restamped_entries(data, host_data)
                if stamped is None:
                    stale |= set(after)
                    if marks_intent(data) or self.marks_shared_intent(git_dir, data):
                        return _INTENDED_UNREAD
                else:
                    stale |= stamped[0]
                    if stamped[1]:
                        return _intended(stamped[1])
            unknown = with_stat_unknown(kept or data, stale)
            if unknown is not None and stale:
                unknown = self.shared_stat_unknown(git_dir, unknown, stale)
            if unknown is None:
                return unreadable
        if kept is not None or stripped is not None or unknown is not (kept or data):
            # the index is written once: without the command's caches, with the host's
            # proved nodes (every check below reads the listing, not the file)
            data = unknown
            assert data is not None
            _write_index(new, data)
        remember_listing(git_dir, work_tree, new, after, data)
        odd = [p for p, entry in changed if entry[1] not in _INDEX_MODES]
        if odd:
            # git takes any mode by its type bits (160644 is a submodule, 120755 a link)
            shown = ", ".join(
                dict.fromkeys(entry_path(p).decode("utf-8", "replace") for p in odd[:5])
            )
            return f"the index holds a mode git never writes ({shown})"
        spelled = [p for p, _ in changed if not _name_git_writes(entry_path(p))]
        if spelled:
            # git reads any name back, and `git checkout` opens it as spelled: `x/../f`
            # writes `f`, which no check of the name as written would find protected
            shown = ", ".join(
                dict.fromkeys(entry_path(p).decode("utf-8", "replace") for p in spelled[:5])
            )
            return f"the index holds a path git never writes ({shown})"
        if before is not None:
            # (counted from the few changed items first: the key sets compared only when
            # an entry is gone)
            new_keys = sum(1 for p, _ in changed if p not in before)
            if len(before) - (len(after) - new_keys) > 0:
                gone = sorted(
                    p for p in before.keys() - after.keys()
                    if self._protected_entry(top, entry_path(p))
                )  # fmt: skip
                if gone:
                    # the host's next commit would delete it from the repository
                    paths = dict.fromkeys(entry_path(p).decode("utf-8", "replace") for p in gone)
                    return f"the index removes a protected path ({', '.join(list(paths)[:5])})"
        suspect = {
            p: entry for p, entry in changed
            if entry[1] == b"160000" or _hidden(entry[0])
            or self._protected_entry(top, entry_path(p))
        }  # fmt: skip
        if not suspect:
            return None  # nothing in it the old index could make harmless
        if before is None:
            return unreadable
        links = sorted(
            p for p, e in suspect.items()
            if e[1] == b"160000" and before.get(p, (b"", b"", b""))[1] != b"160000"
        )  # fmt: skip
        if links:
            names = ", ".join(
                dict.fromkeys(entry_path(p).decode("utf-8", "replace") for p in links)
            )
            return (
                f"the index registers a new submodule ({names}), which the host's git "
                "would enter; register submodules outside the sandbox"
            )
        staged = sorted(
            p for p, e in suspect.items()
            if self._protected_entry(top, entry_path(p))
            and before.get(p, (b"",))[1:] != e[1:]
            and not self._same_as_host(top, entry_path(p), e[1], e[2])
        )  # fmt: skip
        if staged:
            paths = dict.fromkeys(entry_path(p).decode("utf-8", "replace") for p in staged)
            shown = ", ".join(list(paths)[:5])
            return f"the index stages a protected path ({shown})"
        hidden = sorted(
            p for p, e in suspect.items()
            if _hidden(e[0]) and not _hidden(before.get(p, (b"H",))[0])
        )  # fmt: skip
        if hidden:
            paths = dict.fromkeys(entry_path(p).decode("utf-8", "replace") for p in hidden)
            shown = ", ".join(list(paths)[:5])
            return (
                f"the index newly hides {shown} from git status and git diff "
                "(skip-worktree or assume-unchanged)"
            )
        return None

    def host_index_entries(
        self, top: tuple[str, ...], git_dir: str, work_tree: str, index: str
    ) -> IndexEntries | None:
        """The host's ``index`` listed by git (None: unreadable); its gitlinks told.

        The root's own index's gitlinks go to :attr:`index_placed` with the file as
        seen before the listing (kept only while the file stays that one), so that
        the anchored paths need no second listing of the same index.
        """
        try:
            seen: os.stat_result | None = os.stat(index)
        except OSError:
            seen = None
        links: list[bytes] = []
        entries = index_entries(git_dir, work_tree, index, links)
        if entries is not None and seen is not None and not top and self.index_placed:
            self.index_placed(links, seen)
        return entries

    def ref_refusal(self, rel: tuple[str, ...], at: int) -> str | None:
        """A loose ref (or a detached HEAD) naming a commit that adds a protected path."""
        text = (read_regular_file(self.upper_path(rel), 4096) or b"").strip()
        refname = "/".join(rel[at + 1 :])
        if text.startswith(b"ref:"):
            # a symbolic ref: judged by what it finally names, in the layer or on the host
            named = self.symbolic_ref_commits(rel, at, text)
            if isinstance(named, str):
                return named
            return self.commits_refusal(rel, at, [(refname, oid) for oid in named])
        return self.commits_refusal(rel, at, [(refname, text.decode("ascii", "replace"))])

    def symbolic_ref_commits(self, rel: tuple[str, ...], at: int, text: bytes) -> list[str] | str:
        """What the symbolic ref ``text`` (``ref: <name>``) may finally name; or why not read.

        Followed as git follows it (at most five links), each name read where the
        host's git will find it: the layer's loose ref or the host's (either may
        stay after the copy-back), else a ``packed-refs`` line (the layer's or the
        host's). Every object name met counts; a name nothing holds is an unborn
        branch and names nothing.
        """
        git_rel = rel[: at + 1]
        git_dir = os.path.join(self.overlay.root, *git_rel)
        packed: list[dict[str, str]] | None = None
        found: dict[str, None] = {}
        pending = [(text, 0)]
        while pending:
            content, depth = pending.pop()
            name = content[4:].strip().decode("ascii", "replace")
            if depth >= _SYMREF_DEPTH:
                return "a chain of symbolic refs longer than git follows"
            if not _SYMREF_TARGET.fullmatch(name) or ".." in name or "//" in name:
                return f"a symbolic ref to a name git would not read ({name[:80]})"
            loose = [
                read_regular_file(path, 4096)
                for path in (self.upper_path((*git_rel, *name.split("/"))),
                             os.path.join(git_dir, name))
            ]  # fmt: skip
            if None in loose:  # either copy may be the one the host's git finds
                if packed is None:
                    layer = self.upper_path((*git_rel, "packed-refs"))
                    packed = [
                        _packed(read_regular_file(path, _LIST_LIMIT))
                        for path in (layer, os.path.join(git_dir, "packed-refs"))
                    ]
                loose += [table[name].encode() for table in packed if name in table]
            for value in loose:
                value = (value or b"").strip()
                words = value.split()
                if value.startswith(b"ref:"):
                    pending.append((value, depth + 1))
                elif words and _OID.fullmatch(words[0]):
                    found[words[0].decode()] = None  # (git reads what follows as nothing)
        return list(found)

    def removed_ref_refusal(self, rel: tuple[str, ...], at: int) -> str | None:
        """A loose ref removed while a ``packed-refs`` line still names the ref.

        Git then reads the packed line (often an older commit): the ref moves
        there, judged like any move. (A removed directory: each ref in it is
        asked alone.)
        """
        real = os.path.join(self.overlay.root, *rel)
        loose = read_regular_file(real, 4096)
        if loose is None:
            return None
        refname = "/".join(rel[at + 1 :])
        packed = read_regular_file(self.upper_path((*rel[: at + 1], "packed-refs")), _LIST_LIMIT)
        if packed is None:
            git_dir = os.path.join(self.overlay.root, *rel[: at + 1])
            packed = read_regular_file(os.path.join(git_dir, "packed-refs"), _LIST_LIMIT)
        oid = _packed(packed).get(refname)
        if oid is None or oid.encode() == loose.strip():
            return None  # the ref is gone, or the packed line names what the loose one did
        return self.commits_refusal(rel, at, [(refname, oid)])

    def packed_refusal(self, rel: tuple[str, ...], at: int) -> str | None:
        """``packed-refs`` whose moved refs name commits that add a protected path.

        Or one git would not write (see :func:`_packed_as_written`): git reads
        such a file its own way, and a name given twice may be read as either.
        """
        git_dir = os.path.join(self.overlay.root, *rel[: at + 1])
        content = read_regular_file(self.upper_path(rel), _LIST_LIMIT)
        if content is None or len(content) >= _LIST_LIMIT:
            return "packed-refs too large to check"
        new = _packed_as_written(content)
        if new is None:
            return (
                "a packed-refs git would not write (a ref named twice or out of order, "
                "or a line git does not write)"
            )
        old = _packed(read_regular_file(os.path.join(git_dir, "packed-refs"), _LIST_LIMIT))
        moved = [(ref, oid) for ref, oid in new.items() if old.get(ref) != oid]
        if any(ref.startswith("refs/bisect/") for ref, _ in moved):
            return _OPERATION_LEFT_OUT
        if any(ref.startswith("refs/replace/") for ref, _ in moved):
            return _REPLACE
        return self.commits_refusal(rel, at, moved) if moved else None

    def reflog_refusal(self, rel: tuple[str, ...], at: int) -> str | None:
        """A reflog naming a commit the host's copy does not, which adds a protected path.

        The host's ``git reset --hard HEAD@{1}``, ``checkout -`` or ``stash
        apply stash@{1}`` would write it. Only the lines git appended to the
        host's reflog are read line by line: what its own lines hold is kept
        from the last reading of the same bytes (:func:`_reflog_words`).
        """
        real = os.path.join(self.overlay.root, *rel)
        self._reflogs_read += 1
        if self._reflogs_read > _REFLOGS_PER_COPY_BACK:
            return f"more than {_REFLOGS_PER_COPY_BACK} reflogs changed by one command"
        try:
            grown = os.lstat(self.upper_path(rel)).st_size - (
                os.lstat(real).st_size if os.path.lexists(real) else 0
            )
        except OSError:
            return "a reflog too large to check"
        if grown > _REFLOG_FRESH_BYTES:
            # (its size said, before a byte of it is read: a sparse one costs nothing to make)
            return f"a reflog of more than {_REFLOG_FRESH_BYTES} new bytes"
        new = read_regular_file(self.upper_path(rel), _LIST_LIMIT)
        host = read_regular_file(real, _LIST_LIMIT) if os.path.lexists(real) else b""
        if new is None or host is None or max(len(new), len(host)) >= _LIST_LIMIT:
            return "a reflog too large to check"
        readable, known = _reflog_words(real, host)
        # the lines git appended after the host's reflog; any line when it is not a prefix
        # (a host line moved to the end would be what `@{-1}` reads)
        appended = new.startswith(host) and host.endswith(b"\n")
        if appended and not readable:
            return "a reflog line git would not read"  # one of the host's, kept at the top
        if len(new) - (len(host) if appended else 0) > _REFLOG_FRESH_BYTES:
            # (git appends one line of about 150 bytes per update)
            return f"a reflog of more than {_REFLOG_FRESH_BYTES} new bytes"
        fresh = (new[len(host) :] if appended else new).splitlines()
        oids: dict[str, None] = {}
        branches: dict[str, None] = {}
        for line in fresh:
            if len(oids) > _REFLOG_COMMITS or len(branches) > _REFLOG_COMMITS:
                return f"a reflog naming more than {_REFLOG_COMMITS} new commits or branches"
            words = line.split(b" ", 2)
            if len(words) < 3 or not all(_OID.fullmatch(word) for word in words[:2]):
                return "a reflog line git would not read"
            named = _checkout_sources(line)
            if named is None:
                return "a reflog line whose checkout message names a revision, not a branch"
            for word in [*words[:2], *named]:
                if not _OID.fullmatch(word):
                    branches[word.decode()] = None
                elif word not in known and word.strip(b"0"):
                    oids[word.decode()] = None
        if branches:
            # `git checkout -` takes the name: a local branch of that name, else any ref git
            # finds for it (a tag, a remote's branch): each of those the host has is judged
            found = self.dwim_commits(rel, at, list(branches))
            if found is None:
                return "a reflog line whose checkout message names a ref git cannot list"
            oids.update(dict.fromkeys(o for o in found if o.encode() not in known))
        if len(oids) > _REFLOG_COMMITS:
            return f"a reflog naming more than {_REFLOG_COMMITS} new commits"
        reason = self.commits_refusal(rel, at, [("HEAD", oid) for oid in oids])
        if reason is None and appended:
            # it comes back: the host's reflog is these bytes next time (every line read)
            added = {word for line in fresh for word in line.split(b" ", 2)[:2]}
            _keep_reflog_words(real, new, known | added)
        return reason

    def dwim_commits(self, rel: tuple[str, ...], at: int, names: list[str]) -> list[str] | None:
        """What the host's refs other than its local branches that git may read ``names`` as name.

        ``git checkout -`` reads a name from the reflog; without a local branch
        of that name, git takes ``refs/<name>``, ``refs/tags/<name>``,
        ``refs/remotes/<name>`` or ``refs/remotes/<name>/HEAD``. Those the host
        has are listed (a superset: everything below them too), peeled to the
        object a tag names; those the command moves are judged as its refs.
        """
        patterns = [f"refs/{k}{n}" for n in names for k in ("", "tags/", "remotes/")]
        out = git_out(
            self.commit_trees(rel, at).env, "for-each-ref",
            "--format=%(objectname) %(*objectname)", "--", *patterns,
        )  # fmt: skip
        if out is None:
            return None
        return [line.split()[-1] for line in out.decode("ascii", "replace").splitlines() if line]

    def fetch_head_refusal(self, rel: tuple[str, ...], at: int) -> str | None:
        """``FETCH_HEAD`` whose commits (each line's first column) add a protected path.

        The host's ``git reset --hard FETCH_HEAD`` or ``git merge FETCH_HEAD``
        would write them.
        """
        content = read_regular_file(self.upper_path(rel), _LIST_LIMIT)
        if content is None or len(content) >= _LIST_LIMIT:
            return "FETCH_HEAD too large to check"
        oids = dict.fromkeys(
            line.split(b"\t", 1)[0].strip().decode("ascii", "replace")
            for line in content.splitlines()
            if line.strip()
        )
        return self.commits_refusal(rel, at, [("FETCH_HEAD", oid) for oid in oids])

    def commits_refusal(
        self, rel: tuple[str, ...], at: int, moved: list[tuple[str, str]]
    ) -> str | None:
        """Why refs moved to ``moved`` may not come back: a protected path, a submodule.

        The host's next ``git stash``, ``reset --hard``, ``checkout`` of that
        branch (or a push of it) would write what the command could not. Each
        new tree is compared with the ref's old one (a new ref: with ``HEAD``),
        the command's new objects read from its layer.
        """
        self._refs_judged += len(moved)
        if self._refs_judged > MAX_MOVED_REFS:
            # each costs the host git processes, after the call's own time is up
            return (
                f"more than {MAX_MOVED_REFS} refs moved by one command (each is judged "
                "with git on the host)"
            )
        top = rel[:at]
        trees = self.commit_trees(rel, at)
        trees.prepare(moved, _HISTORY_COMMITS)
        for refname, oid in moved:
            if not _OID.fullmatch(oid.encode("utf-8", "surrogateescape")):
                # git writes a full object name there; any other text would be read by
                # the check's git as a revision expression, maybe not as the host reads it
                return f"a ref ({refname}) naming no commit"
            listing = trees.listing(refname, oid)
            if listing is None:
                return f"a ref ({refname}) naming a commit git cannot read"
            reason = self._listing_refusal(top, refname, listing)
            if reason is not None:
                return reason
        return self.history_refusal(rel, at, moved)

    def history_refusal(
        self, rel: tuple[str, ...], at: int, moved: list[tuple[str, str]]
    ) -> str | None:
        """Why the commits ``moved`` newly reach may not come back (each, not only the tip).

        A command that commits ``.envrc`` then removes it in a second commit
        leaves a tip that adds nothing; the host's ``git checkout main~1``,
        ``rebase`` or ``reset --hard HEAD~1`` would write the first. Every commit
        reachable from the moved refs and from no ref the host has is judged
        against each of its parents; more than :data:`_HISTORY_COMMITS` are not.
        """
        trees = self.commit_trees(rel, at)
        oids = [oid for _, oid in moved]
        limit = min(_HISTORY_COMMITS, max(_HISTORY_PER_COPY_BACK - self._history_judged, 0))
        found = trees.history(oids, limit)
        refname = moved[0][0] if len(moved) == 1 else "several refs"
        if found is None:
            return f"a ref ({refname}) whose new history git cannot read"
        count, listings = found
        if count > limit:
            if limit < _HISTORY_COMMITS:
                # disjoint histories share nothing: 256 refs of 1,000 commits each
                return (
                    f"more than {_HISTORY_PER_COPY_BACK} new commits judged for one command's "
                    f"refs ({refname} is left out)"
                )
            return f"a ref ({refname}) reaching more than {_HISTORY_COMMITS} new commits"
        self._history_judged += count
        for commit, listing in listings:
            reason = self._listing_refusal(rel[:at], f"{refname}, in its history {commit}", listing)
            if reason is not None:
                return reason
        trees.judged.update(oids)
        return None

    def _listing_refusal(self, top: tuple[str, ...], refname: str, listing: bytes) -> str | None:
        """Why ``diff-tree -r -z`` records of a commit may not come back, or None."""
        fields = listing.split(b"\0")
        for meta, path in zip(fields[::2], fields[1::2], strict=False):
            parts = meta.split(b" ")
            if len(parts) < 5:
                continue
            if parts[1] == b"160000" and parts[0] != b":160000":
                shown = path.decode("utf-8", "replace")
                return (
                    f"a commit ({refname}) registers a new submodule ({shown}), which the "
                    "host's git would enter once checked out"
                )
            if not self._protected_entry(top, path):
                continue
            if not self._same_as_host(top, path, parts[1], parts[3]):
                shown = path.decode("utf-8", "replace")
                return f"a commit ({refname}) adds or changes a protected path ({shown})"
        return None

    def host_refs_changed(self, rel: tuple[str, ...], kind: str) -> None:
        """``rel`` is about to change in the root: forget what git answered, if stale.

        When the change can alter what a name resolves to in its ``.git`` (a ref,
        ``HEAD``, a head file, a reflog), a later ref is judged against the host as
        it is then, as when each was asked alone.
        """
        if kind == _DIR or ".git" not in rel:
            return  # a directory entered changes nothing itself (its entries are told)
        at = rel.index(".git")
        inside = rel[at + 1 :]
        if not inside or inside[0] in _NAMES_NOTHING:
            return
        trees = self._commit_trees.get(os.path.join(self.overlay.root, *rel[: at + 1]))
        if trees is not None:
            trees.forget(reflogs_only=inside[0] == "logs")

    def commit_trees(self, rel: tuple[str, ...], at: int) -> CommitTrees:
        """The git answers about the moved refs of the ``.git`` at ``rel[: at + 1]`` (this call)."""
        git_dir = os.path.join(self.overlay.root, *rel[: at + 1])
        trees = self._commit_trees.get(git_dir)
        if trees is None:
            objects = self.upper_path((*rel[: at + 1], "objects"))
            env = {**host_environment(), **dict(HOST_GIT_ENVIRONMENT), "GIT_DIR": git_dir}
            # only the objects that come back are read beside the host's: proved first,
            # alternates and indexes of the command's own dropped
            holds = (*rel[: at + 1], "objects")[: len(self.overlay.below)] == self.overlay.below
            if holds and self.objects_proved(rel, at) and _real_directory(objects):
                env["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = objects
            refs = _loose_refs(self.upper_path((*rel[: at + 1], "refs")))
            trees = self._commit_trees[git_dir] = CommitTrees(env, refs)
        return trees

    def _same_as_host(self, top: tuple[str, ...], path: bytes, mode: bytes, oid: bytes) -> bool:
        """Whether the host's own file at ``path`` already holds exactly this blob."""
        if mode not in (b"100644", b"100755"):
            return False
        real = os.path.join(self.overlay.root, *top, os.fsdecode(path))
        try:
            info = os.lstat(real)
        except OSError:
            return False
        # a mode change is a change: a hook staged executable is not the host's file
        if not stat.S_ISREG(info.st_mode) or bool(info.st_mode & stat.S_IXUSR) != (
            mode == b"100755"
        ):
            return False
        content = read_regular_file(real, 1 << 26)
        if content is None or len(content) >= 1 << 26:
            return False
        algorithm = hashlib.sha256 if len(oid) == 64 else hashlib.sha1
        header = b"blob %d\0" % len(content)
        return algorithm(header + content).hexdigest().encode() == oid

    def entry_extra(self) -> AnchoredPaths | None:
        """The anchored protected paths (computed once when first needed); None if unknown."""
        if self.extra is None and self.compute_extra is not None:
            try:
                self.extra = self.compute_extra()
            except SandboxUnavailableError:
                return None
        return self.extra

    def _protected_entry(self, top: tuple[str, ...], path: bytes) -> bool:
        parts = (*top, *path.decode("utf-8", "surrogateescape").split("/"))
        extra = self.entry_extra()
        if extra is None:
            return True  # the anchored paths are unknown: every entry counts as protected
        folded = fold_parts(parts)
        # (asked for every entry of a new index: only the anchored paths that start with
        # the entry's first name, or with a pattern, are tried)
        if in_git_directory(parts) or extra.covers(folded):
            return not self.is_granted(parts, _FILE)
        return bool(self.protected.covers(parts)) and not self.is_granted(parts, _FILE)

    def directory(self, upper: str, real_fd: int, rel: tuple[str, ...], *, opaque: bool) -> None:
        with os.scandir(upper) as listing:
            # a split index's shared index is in place before the index naming it (the
            # checks of the refs that follow run git, which reads the index)
            entries = sorted(listing, key=lambda e: (not e.name.startswith("sharedindex."), e.name))
        if opaque:
            names = {e.name for e in entries}
            for name in sorted(os.listdir(real_fd)):
                if name not in names:
                    self.change(os.path.join(upper, name), real_fd, (*rel, name), None)
        for entry in entries:
            info = entry.stat(follow_symlinks=False)
            self.change(entry.path, real_fd, (*rel, entry.name), info)

    def change(
        self, upper: str, real_fd: int, rel: tuple[str, ...], info: os.stat_result | None
    ) -> None:
        """Apply one upper entry (``info`` None: a deletion an opaque directory implies)."""
        kind = _WHITEOUT if info is None else _kind(info)
        reason = self.refusal(rel, kind)
        if reason is None and kind == _OTHER:
            reason = "special files are not kept"
        if reason is None and kind != _WHITEOUT and self.past_entries(real_fd, rel):
            reason = f"past the {MAX_WALKED_ENTRIES:,} entries a root may hold"
        path = "/".join(rel)
        if reason is not None:
            if reason != "a stale lock":
                self.notes.add(reason, path + ("/" if kind == _DIR else ""))
            return
        name = rel[-1]
        try:
            if self.host_changed(real_fd, rel):
                return
            self.host_refs_changed(rel, kind)
            if kind == _WHITEOUT:
                self.remove(real_fd, rel)
            elif kind == _DIR:
                assert info is not None
                self.enter(upper, real_fd, rel, info)
            elif kind == _FILE:
                moved = rel == (".git", "index") and self._new_gitlinks is not None
                inode = os.lstat(upper).st_ino if moved else None
                self.place_file(upper, real_fd, rel)
                if ".git" not in rel:
                    self.placed.append(rel)
                if _SHARED_INDEX.fullmatch(name):
                    self._placed_shared.add(os.path.join(self.overlay.root, *rel))
                if moved and self.index_placed is not None:
                    placed = os.stat("index", dir_fd=real_fd, follow_symlinks=False)
                    if placed.st_ino == inode:  # moved, not copied: the file that was listed
                        self.index_placed(self._new_gitlinks or [], placed)
            else:
                target = os.readlink(upper)
                with contextlib.suppress(FileNotFoundError):
                    current = os.stat(name, dir_fd=real_fd, follow_symlinks=False)
                    if stat.S_ISDIR(current.st_mode) and not self.remove(real_fd, rel):
                        return
                temporary = f".prism-{os.getpid()}-{name}"[:255]
                os.symlink(target, temporary, dir_fd=real_fd)
                os.rename(temporary, name, src_dir_fd=real_fd, dst_dir_fd=real_fd)
                if ".git" not in rel:
                    self.placed.append(rel)
        except OSError as exc:
            self.notes.add(f"could not be applied: {exc.strerror}", path)

    def unknown_placed(self) -> None:
        """Make the host's index entries of the work tree files placed stat-unknown.

        Git takes an entry whose cached stat data match the file for that file's
        content. A file placed here is new (another inode, a new ctime), but under
        ``core.checkStat=minimal`` and ``core.trustctime=false`` git compares only
        its mtime's seconds and its size, both the command's to choose: a rewrite
        of the same size, its mtime put back, would show in no ``git status`` nor
        ``git diff``. So the index of each repository holding a placed file (the
        root's own, a nested one) gets those entries' stat data zeroed, as git's
        own ``read-tree`` leaves them: git then compares the file's content, and
        its next refresh writes the file's stat data back. Written as git writes
        it (under ``index.lock``, renamed into place); an index git holds locked
        is left as it is and reported.
        """
        repositories: dict[tuple[str, ...], bool] = {}
        keys: dict[tuple[str, ...], set[bytes]] = {}
        for rel in self.placed:
            for cut in range(len(rel) - 1, -1, -1):
                top = rel[:cut]
                held = repositories.get(top)
                if held is None:
                    git = os.path.join(self.overlay.root, *top, ".git")
                    held = repositories[top] = _real_directory(git)
                if held:
                    keys.setdefault(top, set()).add(os.fsencode("/".join(rel[cut:])))
        for top, paths in keys.items():
            git_dir = os.path.join(self.overlay.root, *top, ".git")
            work_tree = os.path.join(self.overlay.root, *top)
            try:
                told = None if top else self.index_restamped
                reason = _index_stat_unknown(git_dir, work_tree, paths, told)
            except OSError as exc:
                reason = f"could not be applied: {exc.strerror}"
            if reason is not None:
                self.notes.add(reason, "/".join((*top, ".git", "index")))

    def host_changed(self, dir_fd: int, rel: tuple[str, ...], *, directory: bool = False) -> bool:
        """Whether the host changed ``rel`` while the command ran (then reported, left alone).

        A directory counts only when ``directory``: a file or link in its place,
        or (``directory`` True) the directory itself.
        """
        try:
            info = os.stat(rel[-1], dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if stat.S_ISDIR(info.st_mode) and not directory:
            return False
        if info.st_ctime_ns <= self.overlay.started:
            return False
        self.notes.add(_HOST_CHANGED, "/".join(rel) + ("/" if stat.S_ISDIR(info.st_mode) else ""))
        return True

    def remove(self, dir_fd: int, rel: tuple[str, ...]) -> bool:
        """Remove ``rel`` (its last part, under ``dir_fd``) except what may not be removed.

        A directory is emptied entry by entry: a protected entry inside it (a
        ``.envrc``, a nested ``.git``) stays, with the directories above it, and
        is reported. Returns whether ``rel`` is gone.
        """
        name = rel[-1]
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return True
        if not stat.S_ISDIR(info.st_mode):
            if info.st_ctime_ns > self.overlay.started:
                self.notes.add(_HOST_CHANGED, "/".join(rel))
                return False
            os.unlink(name, dir_fd=dir_fd)
            return True
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(name, flags, dir_fd=dir_fd)
        # entries the host added, removed or renamed meanwhile: the directory stays
        # (what inside it the host did not change is still removed)
        kept = info.st_ctime_ns > self.overlay.started
        try:
            for child in sorted(os.listdir(fd)):
                below = (*rel, child)
                reason = self.refusal(below, _WHITEOUT)
                if reason is not None:
                    self.notes.add(reason, "/".join(below))
                    kept = True
                elif not self.remove(fd, below):
                    kept = True
        finally:
            os.close(fd)
        if kept:
            if info.st_ctime_ns > self.overlay.started:
                self.notes.add(_HOST_CHANGED, "/".join(rel) + "/")
            return False
        os.rmdir(name, dir_fd=dir_fd)
        return True

    def enter(self, upper: str, real_fd: int, rel: tuple[str, ...], info: os.stat_result) -> None:
        name = rel[-1]
        mode = stat.S_IMODE(info.st_mode)
        try:
            current = os.stat(name, dir_fd=real_fd, follow_symlinks=False)
        except FileNotFoundError:
            current = None
        if current is not None and not stat.S_ISDIR(current.st_mode):
            os.unlink(name, dir_fd=real_fd)
            current = None
        opaque = False
        with contextlib.suppress(OSError):
            opaque = os.getxattr(upper, _OPAQUE, follow_symlinks=False) == b"y"
        if current is None:
            os.mkdir(name, 0o700, dir_fd=real_fd)
            opaque = False
        fd = os.open(
            name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=real_fd
        )
        try:
            mode = _kept_mode(mode, current, real_fd, git=GIT_DIRECTORY in rel)
            if current is None or stat.S_IMODE(current.st_mode) != mode:
                os.fchmod(fd, mode)
            self.directory(upper, fd, rel, opaque=opaque)
        finally:
            os.close(fd)

    def place_file(self, upper: str, real_fd: int, rel: tuple[str, ...]) -> None:
        name = rel[-1]
        current: os.stat_result | None = None
        with contextlib.suppress(FileNotFoundError):
            current = os.stat(name, dir_fd=real_fd, follow_symlinks=False)
            if stat.S_ISDIR(current.st_mode) and not self.remove(real_fd, rel):
                return  # a protected entry inside the directory stays; reported
            if not stat.S_ISREG(current.st_mode):
                current = None  # (a link's mode says nothing of what may write the file)
        info = os.stat(upper, follow_symlinks=False)
        mode = stat.S_IMODE(info.st_mode)
        if mode & (stat.S_ISUID | stat.S_ISGID):
            # a set-user-ID file made inside (as root: owned by root) stays an ordinary one
            mode &= ~(stat.S_ISUID | stat.S_ISGID)
            os.chmod(upper, mode, follow_symlinks=False)
            self.notes.add("set-user-ID and set-group-ID bits are cleared", "/".join(rel))
        kept = _kept_mode(mode, current, real_fd, git=GIT_DIRECTORY in rel)
        if kept != mode:
            mode = kept
            os.chmod(upper, mode, follow_symlinks=False)
        # an approved path with other names in the layer is copied: moved, an approved
        # .envrc hard-linked to notes.txt would change with every edit of notes.txt
        if self.overlay._same_device and (info.st_nlink == 1 or rel not in self.granted):
            os.rename(upper, name, dst_dir_fd=real_fd)
            return
        if info.st_nlink > 1:
            # copied, each name would be a copy of its own (a file of 10 MB and 200 links
            # took 1.9 GB of the root's disk): a later name is a link to the first copy
            seen = (info.st_dev, info.st_ino)
            first = self._copied_inodes.get(seen)
            if first is not None:
                temporary = f".prism-{os.getpid()}-{name}"[:255]
                os.link(first[1], temporary, src_dir_fd=first[0], dst_dir_fd=real_fd,
                        follow_symlinks=False)  # fmt: skip
                os.rename(temporary, name, src_dir_fd=real_fd, dst_dir_fd=real_fd)
                return
            if len(self._copied_inodes) >= _LINKED_COPIES:
                self.notes.add("more files with other names than are copied", "/".join(rel))
                return
            self._copied_inodes[seen] = (os.dup(real_fd), name)
        temporary = f".prism-{os.getpid()}-{name}"[:255]
        source = os.open(upper, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            target = os.open(temporary, flags, 0o600, dir_fd=real_fd)
            try:
                _copy_data(source, target, info.st_size)
                os.fchmod(target, mode)
                os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))
            finally:
                os.close(target)
        finally:
            os.close(source)
        os.rename(temporary, name, src_dir_fd=real_fd, dst_dir_fd=real_fd)


_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


def _kept_mode(mode: int, current: os.stat_result | None, parent_fd: int, *, git: bool) -> int:
    """The mode an entry of the layer comes back with (``current``: the host's entry).

    Write for others lets them replace what the owner's programs then run: a
    ``Makefile``, a nested repository's ``.git`` (renamed away in its
    world-writable directory), a ``.git``'s ``config`` or ``hooks``; and git
    records no such bit, so no review shows it. No entry gains group or other
    write its host entry lacks; a new one gets no write for others, nor for
    the group unless the directory it is made in gives the group write. In a
    ``.git`` (``git``) an entry the host has gains no bit at all: git makes
    nothing there writable by others but under ``core.sharedRepository``, the
    host's to set.
    """
    if current is not None:
        held = stat.S_IMODE(current.st_mode)
        return mode & held if git else mode & ~(_OTHERS_WRITE & ~held)
    mode &= ~stat.S_IWOTH
    if mode & stat.S_IWGRP and not os.fstat(parent_fd).st_mode & stat.S_IWGRP:
        mode &= ~stat.S_IWGRP
    return mode


class _Janitor:
    """One background thread that empties the private layers handed to it, in order.

    Each is kept for another call or removed (see :meth:`RootOverlay.recycle`).
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[RootOverlay] = queue.SimpleQueue()
        self._pending = 0
        self._idle = threading.Condition()
        self._thread: threading.Thread | None = None

    def put(self, overlay: RootOverlay) -> None:
        with self._idle:
            self._pending += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._work, name="prism-overlay-janitor", daemon=True
                )
                self._thread.start()
        self._queue.put(overlay)

    def _work(self) -> None:
        while True:
            overlay = self._queue.get()
            try:
                overlay.recycle()
            finally:
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()

    def wait(self, timeout: float | None) -> bool:
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)


_JANITOR = _Janitor()


def wait_discarded(timeout: float | None = None) -> bool:
    """Block until every private layer handed to :meth:`RootOverlay.discard_later` is empty.

    Each is then kept (empty) for another call, or removed. Returns False when
    ``timeout`` (seconds) passed first. Runs at interpreter exit too (up to 10 s), then
    the kept ones are removed, so no layer is left behind by a process that ends normally.
    """
    return _JANITOR.wait(timeout)


# (run in reverse order: the layers handed over are discarded first, then the kept ones)
atexit.register(_remove_ready)
atexit.register(wait_discarded, 10.0)
