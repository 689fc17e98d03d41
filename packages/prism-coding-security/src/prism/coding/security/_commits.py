"""What the commits that moved refs name would change, asked of the host's git once per call.

The copy-back judges every ref, reflog, head file and ``packed-refs`` line a
command moved (see :mod:`._overlay`): the trees of the commit it names (and of
its other parents) against the tree the ref held before, each difference read
by the host's git under the forced configuration. A commit moves several of
them at once (the branch, ``HEAD``'s reflog and the branch's), all naming the
same commit against the same tree. :class:`CommitTrees` keeps, for one
``.git`` and one copy-back, every answer git gave (a name's tree, a commit's
parents, the difference of two trees), and :meth:`CommitTrees.prepare` asks
for many at once: one ``git cat-file --batch-check`` resolves every tree, one
``git diff-tree --stdin`` gives every difference. What a batch cannot answer
exactly as one git process per question would (a name that is not plain text,
a batch that failed) is asked as before, one process each. One new commit on
top of ``HEAD`` whose objects are loose is read without git at all (see
:mod:`._looseread`).
"""

from __future__ import annotations

import os
import re
import subprocess
from typing import TYPE_CHECKING

from ._executables import host_program
from ._files import read_regular_file
from ._looseread import EMPTY_TREE, LooseReader, Unread
from ._proved import HOST_GIT_ENVIRONMENT

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["CommitTrees", "git_out", "host_ref"]

_GIT_TIMEOUT_S = 10
# what a ref file holds when git wrote it: a full object name
_HEX = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
# ref names asked in a batch (one per line): nothing git's revision syntax gives a
# meaning to beyond a name ('..', '@{', ':', '^', '~', spaces); any other is asked alone
_PLAIN_REF = re.compile(r"(?!.*\.\.)(?!-)[A-Za-z0-9_./-]+")
# what git resolves without reading a reflog: an object name, a plain ref name, its tree
_READS_NO_REFLOG = re.compile(
    r"(?:[0-9a-f]{40}|[0-9a-f]{64}|(?!.*\.\.)(?!-)[A-Za-z0-9_./-]+)(?:\^\{tree\})?"
)


# a ref name read here: components git accepts (no '..', no leading dot, no '.lock' end)
_REF_PART = r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*(?<!\.lock)"
_HOST_REF = re.compile(rf"HEAD|refs/{_REF_PART}(?:/{_REF_PART})*")
# what makes git read refs other than the loose files of GIT_DIR
_REFS_ELSEWHERE = ("GIT_COMMON_DIR", "GIT_NAMESPACE")
_FORCED = dict(HOST_GIT_ENVIRONMENT)


def host_ref(git_dir: str, name: str) -> str | None:
    """The object name git resolves the ref ``name`` (``HEAD``, ``refs/...``) to, read in Python.

    Only where git's reading is this one: the loose file ``git_dir/name`` holds
    a full lower-case object name and a newline, or ``ref: <name>`` and a
    newline naming such a loose file; a repository whose configuration names no
    ref storage and includes no file, with no common directory. Anything else
    (a packed ref, a link, other spacing, a chain, a missing ref): None, and git
    is asked. (A differential test compares it with ``git rev-parse``.)
    """
    if not _HOST_REF.fullmatch(name) or os.path.lexists(os.path.join(git_dir, "commondir")):
        return None
    config = read_regular_file(os.path.join(git_dir, "config"), 1 << 20)
    if config is None or b"refstorage" in config.lower() or b"include" in config.lower():
        return None
    content = read_regular_file(os.path.join(git_dir, name), 4096)
    if content is not None and content.startswith(b"ref: "):
        target = content[5:-1].decode("ascii", "replace")
        if not content.endswith(b"\n") or not _HOST_REF.fullmatch(target) or target == "HEAD":
            return None
        content = read_regular_file(os.path.join(git_dir, target), 4096)
    if (
        content is None
        or not content.endswith(b"\n")
        or not _HEX.fullmatch(content[:-1].decode("ascii", "replace"))
    ):
        return None
    return content[:-1].decode()


def git_out(env: dict[str, str], *args: str, stdin: bytes | None = None) -> bytes | None:
    """The output of ``git args`` run from ``/`` in ``env``; None if it failed."""
    git = host_program("git")
    if git is None:
        return None
    try:
        result = subprocess.run(
            [git, *args], capture_output=True, env=env, cwd="/", check=False,
            timeout=_GIT_TIMEOUT_S, input=b"" if stdin is None else stdin,
        )  # fmt: skip
    except subprocess.TimeoutExpired:  # pragma: no cover - a git that hangs
        return None
    return result.stdout if result.returncode == 0 else None


# what a rev-list of new commits gave: each listed commit's tree (boundary ones too),
# each new commit's parents
_Listed = tuple[dict[str, str], dict[str, list[str]]]


def _parse_listing(out: bytes) -> _Listed | None:
    """``rev-list --boundary --format=%T %P`` output as (trees, parents); None if odd."""
    trees: dict[str, str] = {}
    parents: dict[str, list[str]] = {}
    lines = out.decode("ascii", "replace").split("\n")
    for header, body in zip(lines[::2], lines[1::2], strict=False):
        name = header.removeprefix("commit ")
        words = body.split()
        if not words or not _HEX.fullmatch(words[0]):  # pragma: no cover - git prints it
            return None
        trees[name.removeprefix("-")] = words[0]
        if not name.startswith("-"):
            parents[name] = words[1:]
    return trees, parents


class CommitTrees:
    """The trees and differences of one ``.git``'s moved refs, each asked of git once."""

    def __init__(self, env: dict[str, str], refs: Sequence[str] = ()) -> None:
        """``env``: the forced environment naming the ``.git`` and the command's objects.

        ``refs``: names of refs the command moved, whose old trees the first batch
        asks too (a commit moves ``HEAD``'s reflog first, then the branch).
        """
        self.env = env
        self._refs = [f"{r}^{{tree}}" for r in refs if _PLAIN_REF.fullmatch(r)]
        self._trees: dict[str, str | None] = {}
        self._parents: dict[str, list[str] | None] = {}
        self._diffs: dict[tuple[str, str], bytes | None] = {}
        self._empty: str | None = None
        # the last rev-list of new commits: (tips, limit) -> (trees, parents), or None
        self._listed: tuple[tuple[tuple[str, ...], int], _Listed | None] | None = None
        # tips whose every new commit was judged: kept across forget (a commit's own
        # history does not change; the host's refs only grow what it already had)
        self.judged: set[str] = set()
        # the object files read as git reads them (None: git is asked); made on first use
        self._reader: LooseReader | bool | None = False
        self.read_here = 0
        """How many answers were read from the object files instead of asked of git."""

    def _loose(self) -> LooseReader | None:
        if self._reader is False:
            self._reader = LooseReader.for_env(self.env, _FORCED)
        return self._reader if isinstance(self._reader, LooseReader) else None

    def _diff_here(self, old: str, new: str) -> bytes | None:
        """``old`` against ``new`` read from the object files, or None (ask git)."""
        reader = self._loose()
        if reader is None:
            return None
        try:
            listing = reader.diff(old, new)
        except (Unread, OSError):
            return None
        self.read_here += 1
        return listing

    def forget(self, *, reflogs_only: bool = False) -> None:
        """Drop the answers a change the copy-back made to the host's ``.git`` may alter.

        Every answer when a ref, ``HEAD`` or another head file changed (a name is
        then resolved against the host's refs as they are now, as when each ref
        was asked alone; a replacement under ``refs/replace`` changes even what an
        object name reads). ``reflogs_only``: a reflog changed, which only a name
        that is not plain reads (``main@{1}``): only those answers.
        """
        if not reflogs_only:
            self._trees.clear()
            self._parents.clear()
            self._diffs.clear()
            self._empty = None
            self._listed = None  # `--not --all`: the host's refs
            return
        self._trees = {e: t for e, t in self._trees.items() if _READS_NO_REFLOG.fullmatch(e)}
        self._parents = {o: p for o, p in self._parents.items() if _HEX.fullmatch(o)}
        self._diffs = {k: d for k, d in self._diffs.items() if _READS_NO_REFLOG.fullmatch(k[1])}

    def listing(self, refname: str, oid: str) -> bytes | None:
        """What ``oid`` changes against the tree ``refname`` holds (a new ref: ``HEAD``'s).

        ``git diff-tree -r -z`` records: the commit's tree, then the trees of its
        other parents (a stash keeps the staged state and the untracked files of
        ``stash -u`` there, which ``stash pop`` writes), each against that old
        tree (no ``HEAD`` yet: the empty tree). None: git cannot read one of them.
        """
        # a suffix only after a plain ref name (one from a packed-refs line is the
        # command's text: 'x:sub' + '^{tree}' would name a path in x's tree)
        plain = _PLAIN_REF.fullmatch(refname) is not None
        old = (plain and self._tree(f"{refname}^{{tree}}", verify=True)) or self._tree(
            "HEAD^{tree}", verify=True
        )
        if old is None:
            old = self._empty_tree()
        parents = self._parents_of(oid)
        wanted = [f"{oid}^{{tree}}", *(f"{p}^{{tree}}" for p in (parents or [])[1:])]
        listing = b""
        for expression in wanted:
            part = self._diff(old or "", expression)
            if part is None:
                return None
            listing += part
        return listing

    def prepare(self, moved: Sequence[tuple[str, str]], limit: int | None = None) -> None:
        """Ask git, in a few processes, what :meth:`listing` will need for ``moved``.

        Only fills the caches: a question it leaves unanswered is asked alone later.
        ``limit``: what :meth:`history` will be asked for the same tips; its listing
        of the new commits (each one's tree and parents) is made first, and answers
        the new tips' trees and parents too.
        """
        plain = [(r, o) for r, o in moved if _HEX.fullmatch(o) and _PLAIN_REF.fullmatch(r)]
        if not plain:
            return
        if limit is not None:
            listed = self._rev_list([o for _, o in moved], limit)
            if listed is not None and len(listed[1]) <= limit:
                for commit, its_tree in listed[0].items():
                    self._trees.setdefault(f"{commit}^{{tree}}", its_tree)
                for commit, above in listed[1].items():
                    self._parents.setdefault(commit, above)
        names = [e for r, o in plain for e in (f"{r}^{{tree}}", "HEAD^{tree}", f"{o}^{{tree}}")]
        self._resolve(names + self._refs)
        self._refs = []
        for _, oid in plain:
            self._parents_of(oid)
        self._resolve(
            [f"{p}^{{tree}}" for _, oid in plain for p in (self._parents.get(oid) or [])[1:]]
        )
        pairs: dict[tuple[str, str], None] = {}
        for refname, oid in plain:
            old = self._trees.get(f"{refname}^{{tree}}") or self._trees.get("HEAD^{tree}")
            if old is None:
                continue  # the empty tree: asked alone
            for p in [oid, *(self._parents.get(oid) or [])[1:]]:
                tree = self._trees.get(f"{p}^{{tree}}")
                if tree is not None and (old, tree) not in self._diffs:
                    pairs[old, tree] = None
        self._diff_all(list(pairs))

    def history(
        self, oids: Sequence[str], limit: int
    ) -> tuple[int, list[tuple[str, bytes]]] | None:
        """What each commit ``oids`` newly reach changes against each of its parents.

        The commits are those of ``git rev-list <oids> --not --all``: reachable
        from them and from no ref (nor ``HEAD``) the host has; at most ``limit``
        plus one are listed. Returns their number and, per commit and parent,
        (commit, the ``diff-tree -r -z`` records of its tree against the
        parent's, or the empty tree's for a root), the differences asked in one
        ``git diff-tree --stdin``. None: git could not list or read them. Tips
        already in :attr:`judged` are not asked.
        """
        listed = self._rev_list(oids, limit)
        if listed is None:
            return None
        trees, parents = listed
        if not parents and not trees:
            return 0, []
        if len(parents) > limit:
            return len(parents), []
        pairs: list[tuple[str, str, str]] = []
        for commit, above in parents.items():
            for parent in above or [""]:
                # every parent is listed, new or (--boundary) the host's
                old = trees.get(parent) if parent else self._empty_tree()
                if old is None:  # pragma: no cover - git lists every parent
                    return None
                pairs.append((commit, old, trees[commit]))
        self._diff_all([(a, b) for _, a, b in dict.fromkeys(pairs) if (a, b) not in self._diffs])
        found: list[tuple[str, bytes]] = []
        for commit, old, new in pairs:
            listing = self._diff(old, new)
            if listing is None:
                return None
            found.append((commit, listing))
        return len(parents), found

    def _rev_list(self, oids: Sequence[str], limit: int) -> _Listed | None:
        """``git rev-list <oids> --not --all``: each new commit's tree and parents.

        The trees of the boundary commits (the host's parents of new ones) too; at
        most ``limit`` plus one commits. Nothing for tips already :attr:`judged`.
        Asked once while the host's refs stay as they were (see :meth:`forget`).
        None: git could not list them.
        """
        todo = tuple(o for o in dict.fromkeys(oids) if o not in self.judged)
        if not todo:
            return {}, {}
        key = (todo, limit)
        if self._listed is not None and self._listed[0] == key:
            return self._listed[1]
        reader = self._loose()
        if reader is not None:
            try:
                here = reader.new_commit(todo, host_ref(reader.git_dir, "HEAD"))
            except (Unread, OSError):
                pass
            else:
                self.read_here += 1
                self._listed = (key, here)
                return here
        out = git_out(
            self.env, "rev-list", "--boundary", f"--max-count={limit + 1}",
            "--format=%T %P", *todo, "--not", "--all", "--",
        )  # fmt: skip
        listed: _Listed | None = None
        if out is not None:
            listed = _parse_listing(out)
        self._listed = (key, listed)
        return listed

    def _tree(self, expression: str, *, verify: bool) -> str | None:
        if expression not in self._trees:
            out = git_out(self.env, "rev-parse", "-q", "--verify", expression) if verify else None
            self._trees[expression] = out.decode().strip() if out else None
        return self._trees[expression]

    def _empty_tree(self) -> str | None:
        if self._empty is None and self._loose() is not None:
            self._empty = EMPTY_TREE  # (a SHA-1 repository: the reader reads no other)
        if self._empty is None:
            out = git_out(self.env, "hash-object", "-t", "tree", "/dev/null")
            self._empty = out.decode().strip() if out else ""
        return self._empty or None

    def _parents_of(self, oid: str) -> list[str] | None:
        if oid not in self._parents:
            out = git_out(self.env, "rev-parse", f"{oid}^@")
            self._parents[oid] = None if out is None else out.decode().split()
        return self._parents[oid]

    def _diff(self, old: str, expression: str) -> bytes | None:
        # a tree the batch resolved is diffed by its name, one it could not resolve cannot
        # be read (diff-tree resolves the name the same way); any other as asked before
        if expression in self._trees and self._trees[expression] is None:
            return None
        tree = self._trees.get(expression)
        key = (old, tree if tree is not None else expression)
        if key not in self._diffs and tree is not None:
            here = self._diff_here(old, tree)
            if here is not None:
                self._diffs[key] = here
        if key not in self._diffs:
            self._diffs[key] = git_out(
                self.env, "diff-tree", "-r", "-z", "--no-renames", "--no-ext-diff", *key
            )
        return self._diffs[key]

    def _resolve(self, expressions: list[str]) -> None:
        """Resolve names to object names with one ``git cat-file --batch-check``.

        With ``%(objectname)`` alone, git prints the name's object name (the
        object itself is not read) or ``<name> missing`` exactly when the name
        does not resolve, when ``rev-parse --verify`` (and ``diff-tree``, given
        the name) fail too: both answers are kept. A host ref (or ``HEAD``)
        whose loose file names a commit git already listed (a new commit's
        parent, as a rule) is answered without git: see :func:`host_ref`.
        """
        todo = [e for e in dict.fromkeys(expressions) if e not in self._trees]
        git_dir = self.env.get("GIT_DIR")
        if git_dir is not None and not any(n in self.env for n in _REFS_ELSEWHERE):
            for expression in list(todo):
                name = expression.removesuffix("^{tree}")
                commit = host_ref(git_dir, name) if name != expression else None
                tree = self._trees.get(f"{commit}^{{tree}}") if commit else None
                if tree is not None:  # (that commit's tree as git listed it)
                    self._trees[expression] = tree
                    todo.remove(expression)
        if not todo:
            return
        out = git_out(
            self.env, "cat-file", "--batch-check=%(objectname)",
            stdin="".join(f"{e}\n" for e in todo).encode(),
        )  # fmt: skip
        lines = (out or b"").decode("ascii", "replace").split("\n")
        if out is None or len(lines) != len(todo) + 1:
            return
        for expression, line in zip(todo, lines, strict=False):
            if _HEX.fullmatch(line):
                self._trees[expression] = line
            elif line == f"{expression} missing":  # pragma: no branch - nothing else is printed
                self._trees[expression] = None

    def _diff_all(self, pairs: list[tuple[str, str]]) -> None:
        """The differences of tree pairs with one ``git diff-tree --stdin``.

        Each pair's output starts with its own line ``old new``; the records that
        follow are what ``git diff-tree -r -z old new`` prints. Nothing is kept
        unless every pair's line came back in order and git succeeded.
        """
        asked = pairs
        pairs = []
        for pair in asked:
            here = self._diff_here(*pair)
            if here is None:
                pairs.append(pair)
            else:
                self._diffs[pair] = here
        if not pairs:
            return
        out = git_out(
            self.env, "diff-tree", "--stdin", "-r", "-z", "--no-renames", "--no-ext-diff",
            stdin="".join(f"{a} {b}\n" for a, b in pairs).encode(),
        )  # fmt: skip
        if out is None:
            return
        found: dict[tuple[str, str], bytes] = {}
        at = 0
        for pair in pairs:
            header = f"{pair[0]} {pair[1]}".encode()
            end = at + len(header)
            if not out.startswith(header, at) or out[end : end + 1] not in (b"\n", b"\0"):
                return
            start = at = end + 1
            while at < len(out) and out[at : at + 1] == b":":
                meta_end = out.find(b"\0", at)
                path_end = out.find(b"\0", meta_end + 1) if meta_end >= 0 else -1
                if path_end < 0:  # pragma: no cover - git ends every -z record with NUL
                    return
                at = path_end + 1
            found[pair] = out[start:at]
        if at == len(out):  # pragma: no branch - git prints nothing after the last pair
            self._diffs.update(found)
