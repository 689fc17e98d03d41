"""Which of the objects a command wrote in a ``.git`` may come back: only proved ones.

Git trusts an object file: it looks an object up by its name and does not
hash what it reads for a checkout. A command that rewrites a loose object the
host already holds (same name, other content), or adds a pack whose index
lists an existing name at another object, would change what the host's own
refs name, with no ref moved. So, in the command's private layer, before
anything of that ``.git`` is judged or moved (:func:`prove_objects`):

* an object file the host already holds (a loose object, a pack and its
  files) is never replaced: the layer's copy is dropped;
* a new loose object (``objects/xx/<rest of its name>``) stays only when its
  content, inflated, is an object whose hash (SHA-1 for a 40-digit name,
  SHA-256 for a 64-digit one: the name's length is how git finds it) is its
  name;
* a new pack stays only with the index (and reverse index) the host's git
  computes from the pack itself (``git index-pack`` under the forced
  configuration): the command's own index is never used;
* everything else under ``objects`` is dropped: alternates (they would let
  the checks read objects that never come back), commit-graphs and
  multi-pack indexes (they tell git what objects and history are, without
  hashes), pack bitmaps, temporary files.

What stays is what the commit checks read (as an alternate object directory
beside the host's own objects) and what comes back.
"""

from __future__ import annotations

import contextlib
import filecmp
import hashlib
import math
import os
import re
import select
import shutil
import signal
import stat
import subprocess
import tempfile
import zlib

from ._executables import host_environment, host_program
from ._files import open_regular_file
from ._proved import HOST_GIT_ENVIRONMENT

__all__ = ["InflationLeft", "loose_object_hashes", "prove_objects"]

_LOOSE_DIR = re.compile(r"[0-9a-f]{2}")
_LOOSE_NAME = re.compile(r"[0-9a-f]{38}|[0-9a-f]{62}")
# a pack's files; .keep, .promisor and .mtimes are kept as written: they change no object
_PACK = re.compile(
    r"(pack-[0-9a-f]{40}|pack-[0-9a-f]{64})\.(pack|idx|rev|bitmap|keep|promisor|mtimes)"
)
_TYPES = frozenset({b"blob", b"tree", b"commit", b"tag"})
_CHUNK = 1 << 16
_INDEX_TIMEOUT_S = 120

REPLACED = "git's objects are never rewritten; the host's is kept"
UNPROVED = "an object whose content does not hash to its name"
NO_PACK = "a pack git cannot index, or a pack index without its new pack"
NOT_OBJECTS = (
    "only objects proved by their names come back from objects (no alternates, "
    "commit-graph, multi-pack-index, bitmap or temporary file)"
)
LINKS = "symbolic links in .git are never kept"


def loose_object_size(path: str) -> int | None:
    """The size a loose object's header declares, read by inflating only the header.

    None when the file is no loose object git would read (no header, an unknown
    type, a size not written canonically).
    """
    fd = open_regular_file(path)
    if fd is None:
        return None
    inflate = zlib.decompressobj()
    header = b""
    try:
        while len(header) <= 64:
            data = os.read(fd, 4096)
            if not data:
                return None
            header += inflate.decompress(data, 65 - len(header))
            end = header.find(b"\0")
            if end >= 0:
                kind, _, length = header[:end].partition(b" ")
                if kind not in _TYPES or not length.isdigit():
                    return None
                return int(length) if length == str(int(length)).encode() else None
            if inflate.eof:
                return None
    except zlib.error:
        return None
    finally:
        os.close(fd)
    return None


class _Inflating(Exception):
    """Inflating went past its bound for the bytes read (see :func:`loose_object_hashes`)."""


def loose_object_hashes(path: str, name: str) -> bool:
    r"""Whether the loose object file at ``path`` holds the object named ``name`` (hex).

    Inflated as git inflates it: a header ``<type> <size>\0`` of a type git
    knows, exactly ``size`` bytes after it, nothing after the compressed stream;
    the header and content hashed with SHA-1 (40 digits) or SHA-256 (64).
    False too when it inflates to more than :data:`MAX_INFLATION` times the
    bytes read so far plus :data:`MIN_INFLATED_BOUND`: stopped there.
    """
    try:
        return _hashes(path, name)
    except _Inflating:
        return False


def _hashes(path: str, name: str) -> bool:
    """:func:`loose_object_hashes`; raises _Inflating past the bound for the bytes read.

    The header's size was bounded by the file's size; bytes after the stream
    (never an object's) would raise that bound without raising what there is to
    inflate, so what is inflated is bounded by what was read of it.
    """
    algorithm = hashlib.sha1 if len(name) == 40 else hashlib.sha256
    digest = algorithm()
    inflate = zlib.decompressobj()
    header = b""
    size = -1
    seen = read = 0
    fd = open_regular_file(path)
    if fd is None:
        return False
    try:
        while True:
            data = os.read(fd, _CHUNK)
            if not data:
                break
            read += len(data)
            while data:  # (bytes after the stream end in unused_data)
                if seen > MAX_INFLATION * read + MIN_INFLATED_BOUND:
                    raise _Inflating
                out = inflate.decompress(data, _CHUNK)
                data = inflate.unconsumed_tail
                digest.update(out)
                if size < 0:
                    header += out
                    end = header.find(b"\0")
                    if end < 0:
                        if len(header) > 64:
                            return False
                        continue
                    kind, _, length = header[:end].partition(b" ")
                    canonical = length.isdigit() and length == str(int(length)).encode()
                    if kind not in _TYPES or not canonical:
                        return False
                    size = int(length)
                    seen = len(header) - end - 1
                else:
                    seen += len(out)
                if seen > size >= 0:
                    return False
    except zlib.error:
        return False
    finally:
        os.close(fd)
    return inflate.eof and not inflate.unused_data and seen == size and digest.hexdigest() == name


MAX_INFLATION = 64
"""A new loose object may inflate to at most this many times its file's size..."""
MIN_INFLATED_BOUND = 64 << 20
"""... or to this many bytes, whichever is more (a zlib stream inflates up to about 1,032x)."""
MAX_INFLATED_PER_COPY_BACK = 4 << 30
"""The loose objects of one copy-back inflate to at most this many bytes in all."""
TOO_LARGE = (
    "a loose object that would inflate to more than its bound (64 times its file, at least "
    "64 MiB; 4 GiB for all of one command's)"
)


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _whiteout(info: os.stat_result) -> bool:
    return stat.S_ISCHR(info.st_mode) and info.st_rdev == 0


def _same(upper: str, host: str) -> bool:
    try:
        return os.path.isfile(host) and filecmp.cmp(upper, host, shallow=False)
    except OSError:  # pragma: no cover - a host file it cannot read: said to differ
        return False


INDEX_CPU_S = 60
"""CPU seconds the host's ``git index-pack`` may spend on one new pack (``RLIMIT_CPU``)."""
INDEX_MEMORY = 2 << 30
"""Address space it may take beyond the pack's own size (``RLIMIT_AS``)."""
MAX_PACK_BYTES = 4 << 30
"""A new pack larger than this is not indexed: it is left out."""
PACK_BOUND = (
    "a pack that indexing on the host would cost more than its bound (a pack of at most "
    "4 GiB, indexed in at most 60 s of CPU and 2 GiB of memory beyond its size)"
)
TOO_MANY_PACKS = (
    "a pack past the 8 new packs one command's changes may bring back (each is indexed on the host)"
)
# what git says when an allocation fails (the address-space bound)
_OUT_OF_MEMORY = re.compile(rb"out of memory|malloc failed|mmap failed|cannot allocate", re.I)
# the bounds set in the shell git is started from (dash and bash both take these)
_BOUNDED = 'ulimit -t "$1" && ulimit -v "$2" && shift 2 && exec "$@"'


INDEX_CPU_PER_COPY_BACK = 60.0
"""CPU seconds all the host's ``git index-pack`` runs of one copy-back may spend together."""
PACK_BUDGET = (
    "a pack past what one command's changes may cost to index on the host (60 s of CPU and "
    "4 GiB of packs in all, each new pack counted)"
)


def _index_pack(
    git_dir: str, pack: str, work: str, *, reverse: bool, left: InflationLeft
) -> tuple[str, str | None] | str:
    """The index (and reverse index) the host's git computes from ``pack``, or why not.

    ``git index-pack`` inflates and hashes every object of a pack the command
    wrote: a few kilobytes can declare gigabytes (a zlib bomb, a delta whose result
    is huge, a long chain of them). It runs under :data:`INDEX_CPU_S` of CPU and
    :data:`INDEX_MEMORY` of address space beyond the pack (set by the shell it is
    started from, before git runs), and a pack past :data:`MAX_PACK_BYTES` is not
    indexed: each refused with :data:`PACK_BOUND`, anything else git refuses
    with :data:`NO_PACK`. What all the packs of one copy-back cost together is
    bounded by ``left`` (:data:`INDEX_CPU_PER_COPY_BACK` seconds of CPU, each run
    measured, and :data:`MAX_PACK_BYTES` of packs): past it a pack is refused with
    :data:`PACK_BUDGET`, and each run gets at most the CPU seconds left.
    """
    git = host_program("git")
    if git is None:  # pragma: no cover - the copy-back's checks need git anyway
        return NO_PACK
    size = os.lstat(pack).st_size
    if size > MAX_PACK_BYTES:
        return PACK_BOUND
    if size > left.pack_bytes or left.cpu <= 0:
        return PACK_BUDGET
    left.pack_bytes -= size
    out_dir = tempfile.mkdtemp(prefix="idx-", dir=work)
    index = os.path.join(out_dir, "pack.idx")
    env = {**host_environment(), **dict(HOST_GIT_ENVIRONMENT), "GIT_DIR": git_dir}
    memory_kib = (size + INDEX_MEMORY) // 1024
    cpu = max(1, min(INDEX_CPU_S, math.ceil(left.cpu)))
    args = ["/bin/sh", "-c", _BOUNDED, "sh", str(cpu), str(memory_kib), git,
            "index-pack", "--threads=1", "--rev-index" if reverse else "--no-rev-index",
            "-o", index, pack]  # fmt: skip
    returncode, stderr, spent = _run_measured(args, env, os.path.join(out_dir, "stderr"))
    left.cpu -= spent
    if returncode in (-signal.SIGXCPU, -signal.SIGKILL):  # pragma: no cover - a minute
        return PACK_BOUND  # (past its CPU seconds: the same bound as the memory's, by the shell)
    if returncode != 0:
        return PACK_BOUND if _OUT_OF_MEMORY.search(stderr) else NO_PACK
    return index, os.path.join(out_dir, "pack.rev") if reverse else None


def _run_measured(args: list[str], env: dict[str, str], errors: str) -> tuple[int, bytes, float]:
    """Run ``args``: its exit code, what it wrote to stderr, and the CPU seconds it spent.

    The process is reaped with ``wait4`` (its own resource usage, not that of
    every child of this process), killed past :data:`_INDEX_TIMEOUT_S` of wall
    time (a machine too loaded to finish it).
    """
    with open(errors, "wb") as err:
        proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env,
            cwd="/",
        )  # fmt: skip
    pidfd = os.pidfd_open(proc.pid)
    try:
        ready, _, _ = select.select([pidfd], [], [], _INDEX_TIMEOUT_S)
        if not ready:  # pragma: no cover - a machine too loaded to index it
            os.kill(proc.pid, signal.SIGKILL)  # (not reaped yet: the pid is still the child's)
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        os.close(pidfd)
    proc.returncode = os.waitstatus_to_exitcode(status)
    with open(errors, "rb") as err:
        stderr = err.read(65536)
    return proc.returncode, stderr, usage.ru_utime + usage.ru_stime


MAX_NEW_PACKS = 8
"""New packs one copy-back indexes, at most (each bounded on its own): more are left out."""


class InflationLeft:
    """What the objects of one copy-back may still cost, shared by its ``.git``s.

    ``left``: the bytes its loose objects may still inflate to; ``packs``: the
    new packs it may still index (:data:`MAX_NEW_PACKS`); ``cpu`` and ``pack_bytes``:
    the CPU seconds and pack bytes their indexing may still take.
    """

    def __init__(self) -> None:
        self.left = MAX_INFLATED_PER_COPY_BACK
        self.packs = MAX_NEW_PACKS
        self.cpu = INDEX_CPU_PER_COPY_BACK
        self.pack_bytes = MAX_PACK_BYTES


class _Dropped:
    def __init__(self, upper: str, inflation: InflationLeft) -> None:
        self.upper = upper
        self.said: list[tuple[str, str]] = []
        self.inflation = inflation

    def __call__(self, reason: str, rel: str, *, say: bool = True) -> None:
        _remove(os.path.join(self.upper, rel))
        if say:
            self.said.append((reason, rel))


def prove_objects(
    upper: str, host: str, git_dir: str, work: str, inflation: InflationLeft | None = None
) -> list[tuple[str, str]]:
    """Drop from the layer's ``objects`` directory ``upper`` what may not come back.

    ``host``: the host's ``objects`` directory of the same ``.git`` (``git_dir``);
    ``work``: a private directory for the indexes git computes; ``inflation``:
    what the loose objects may still inflate to (one for every ``.git`` of a
    copy-back; default: a fresh one). Returns what was
    dropped and why, as (reason, path relative to ``upper``); an object file the
    host already holds byte for byte (git refreshing its time) is dropped unsaid.
    """
    drop = _Dropped(upper, InflationLeft() if inflation is None else inflation)
    for name in sorted(os.listdir(upper)):
        path = os.path.join(upper, name)
        info = os.lstat(path)
        if _whiteout(info):
            continue
        if stat.S_ISLNK(info.st_mode):
            drop(LINKS, name)
        elif not stat.S_ISDIR(info.st_mode):
            drop(NOT_OBJECTS, name)
        elif _LOOSE_DIR.fullmatch(name):
            _prove_loose(upper, host, name, drop)
        elif name == "pack":
            _prove_packs(upper, host, git_dir, work, drop)
        elif name == "info":
            for child in sorted(os.listdir(path)):
                rel = f"info/{child}"
                child_info = os.lstat(os.path.join(upper, rel))
                if _whiteout(child_info):
                    continue
                if stat.S_ISLNK(child_info.st_mode):
                    drop(LINKS, rel)
                elif child != "packs" or not stat.S_ISREG(child_info.st_mode):
                    drop(NOT_OBJECTS, rel)
        else:
            drop(NOT_OBJECTS, name + "/")
    return drop.said


def _prove_loose(upper: str, host: str, directory: str, drop: _Dropped) -> None:
    for name in sorted(os.listdir(os.path.join(upper, directory))):
        rel = f"{directory}/{name}"
        path = os.path.join(upper, rel)
        info = os.lstat(path)
        if _whiteout(info):
            continue
        if stat.S_ISLNK(info.st_mode):
            drop(LINKS, rel)
        elif not stat.S_ISREG(info.st_mode) or not _LOOSE_NAME.fullmatch(name):
            drop(NOT_OBJECTS, rel)
        elif os.path.lexists(os.path.join(host, rel)):
            drop(REPLACED, rel, say=not _same(path, os.path.join(host, rel)))
        else:
            # what proving it costs is bounded before it is inflated: a few bytes of
            # zlib can declare (and hold) a gigabyte for the host to inflate and hash
            size = loose_object_size(path)
            bound = max(MIN_INFLATED_BOUND, MAX_INFLATION * info.st_size)
            if size is None:
                drop(UNPROVED, rel)
            elif size > bound or size > drop.inflation.left:
                drop(TOO_LARGE, rel)
            else:
                drop.inflation.left -= size
                try:
                    proved = _hashes(path, directory + name)
                except _Inflating:
                    drop(TOO_LARGE, rel)
                else:
                    if not proved:
                        drop(UNPROVED, rel)


def _prove_packs(upper: str, host: str, git_dir: str, work: str, drop: _Dropped) -> None:
    directory = os.path.join(upper, "pack")
    files: dict[str, dict[str, str]] = {}
    for name in sorted(os.listdir(directory)):
        rel = f"pack/{name}"
        info = os.lstat(os.path.join(upper, rel))
        if _whiteout(info):
            continue
        match = _PACK.fullmatch(name)
        if stat.S_ISLNK(info.st_mode):
            drop(LINKS, rel)
        elif match is None or not stat.S_ISREG(info.st_mode):
            drop(NOT_OBJECTS, rel + ("/" if stat.S_ISDIR(info.st_mode) else ""))
        else:
            files.setdefault(match[1], {})[match[2]] = rel
    for base, kinds in files.items():
        for rel in kinds.values():
            existing = os.path.join(host, rel)
            if os.path.lexists(existing):
                # the host's pack files stay as they are (a refreshed time copied the file)
                drop(REPLACED, rel, say=not _same(os.path.join(upper, rel), existing))
        pack = kinds.get("pack")
        if pack is None or os.path.lexists(os.path.join(host, pack)):
            for kind in ("idx", "rev", "bitmap"):
                if kind in kinds and not os.path.lexists(os.path.join(host, kinds[kind])):
                    drop(NO_PACK, kinds[kind])
            continue
        if "bitmap" in kinds:
            drop(NOT_OBJECTS, kinds["bitmap"])
        if drop.inflation.packs > 0:
            drop.inflation.packs -= 1
            computed = _index_pack(
                git_dir, os.path.join(upper, pack), work, reverse="rev" in kinds,
                left=drop.inflation,
            )  # fmt: skip
        else:
            computed = TOO_MANY_PACKS
        if isinstance(computed, str):
            for kind in ("pack", "idx", "rev"):
                if kind in kinds:
                    drop(computed, kinds[kind])
            continue
        index, rev = computed
        os.replace(index, os.path.join(directory, f"{base}.idx"))
        if rev is not None:
            os.replace(rev, os.path.join(directory, f"{base}.rev"))
