"""Judge a command line: every simple command proved safe, or it asks (or is denied)."""

from __future__ import annotations

import os
import posixpath
from typing import TYPE_CHECKING, Literal

import attrs

from ._commands import (
    MAX_NESTING,
    Group,
    Leaf,
    List,
    Node,
    Pipeline,
    Script,
    SimpleCommand,
    Word,
    parse_script,
    rough_segments,
)
from ._evaluates import evaluates_code
from ._gitdrivers import repository_drivers, repository_reads
from ._gitwrites import git_directory_writes
from ._paths import Roots, protected_link_on_the_way, protected_links_on_the_way
from ._programs import (
    CANNOT_RUN_PROGRAMS,
    Inner,
    Use,
    describe,
    git_without_drivers,
    harmless_assignment,
)
from ._protected import ProtectedPaths
from ._proved import ProvedCommand, ProvedRedirect, emit
from ._rules import (
    CompiledRules,
    NormalizedArgv,
    block_device,
    destructive_target,
    normalize_argv,
)
from ._sedfilter import sed_filter
from ._words import Listings, _WordError, expand_word

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["CommandCheck", "CommandExplanation", "judge_command", "layer_directories"]

Verdict = Literal["allow", "ask", "deny"]
_RANK: dict[str, int] = {"allow": 0, "ask": 1, "deny": 2}
# The words a line's globs and braces may expand to in all: past it a word counts as
# computed (bash would expand it at run time), so a short line of repeated globs over a
# large directory cannot make the judge build and check hundreds of thousands of words.
MAX_LINE_WORDS = 8192
# directories the line may be in at one point (each `cd x || cd y` may double them, each
# `cd ..` after a `cd` that may fail adds one): past this, the line asks
MAX_LINE_DIRECTORIES = 16
# commands judged in a directory the line may be in, all together (a command after
# `cd`s that may fail is judged in each directory the line may be in by then); past
# this, the rest of the line is not judged
MAX_LINE_WORK = 2048


class _TooCostly(Exception):
    """Judging the line would cost more than :data:`MAX_LINE_WORK`."""


_WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>"})
# writes the sandbox's host side may open for the command (``>|`` is ``>``, ``>&f`` ``&>f``)
_OPENED_OPS = frozenset({">", ">>", "&>", "&>>"})
# the descriptors such a target is handed on (bash and sh read one digit; 3 is bwrap's)
_OPENED_FDS = range(4, 10)
_HARMLESS_WRITES = frozenset(
    {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/fd/1", "/dev/fd/2", "/dev/tty"}
)
_HARMLESS_READS = _HARMLESS_WRITES | {
    "/dev/stdin", "/dev/fd/0", "/dev/zero", "/dev/urandom", "/dev/random"
}  # fmt: skip
_DESTRUCTIVE = frozenset({"rm", "chmod", "chown", "chgrp"})
# wrappers that pass their environment on unchanged to the command they run
# the HOME a proved jq runs with: no $HOME/.jq can exist below a device file
JQ_HOME = ("HOME", "/dev/null")
_ENVIRONMENT_KEEPING = frozenset(
    {"nice", "nohup", "timeout", "stdbuf", "ionice", "setsid", "command", "builtin"}
)
_DEVICE_WRITERS = frozenset(
    {
        "dd",
        "tee",
        "cp",
        "mv",
        "install",
        "shred",
        "truncate",
        "cat",
        "pv",
        "ln",
        "mkswap",
        "badblocks",
        "hdparm",
        "wipefs",
        "mkfs",
        "mke2fs",
    }
)


@attrs.frozen(kw_only=True)
class CommandCheck:
    """The verdict on one simple command (or one layer of a wrapped command).

    Attributes:
        argv: the words as they would run (a word computed at run time is shown as written).
        program: the program's name as rules see it (basename).
        verdict: ``allow``, ``ask`` or ``deny``.
        reason: why.
        rule: what decided it: ``model:<program>``, ``deny:<rule>``, ``allow:<rule>``,
            ``default:<check>``, ``path``, ``redirect``, ``parse``...
        depth: 0 for a command on the line, 1+ for one run by a wrapper or ``sh -c``.
        target: what a check about access names: the real path of a write
            outside the roots (rule ``path:write``) or to a protected path
            (``protected``), the ``host:port`` of a connection (``network``).
        via: for a protected write, each link whose own name is protected that
            the path as named goes through (``svc/.envrc -> ../envrc.shared``):
            a program may write the link's target or replace the link itself.
    """

    argv: tuple[str, ...]
    program: str
    verdict: Verdict
    reason: str
    rule: str
    depth: int = 0
    target: str | None = None
    via: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict."""
        out: dict[str, object] = {
            "argv": list(self.argv),
            "program": self.program,
            "verdict": self.verdict,
            "reason": self.reason,
            "rule": self.rule,
            "depth": self.depth,
        }
        if self.target is not None:
            out["target"] = self.target
        if self.via:
            out["via"] = list(self.via)
        return out


@attrs.frozen(kw_only=True)
class CommandExplanation:
    """Why a command line is allowed, asks, or is denied.

    Attributes:
        command: the command line.
        outcome: ``allow`` (every part proved safe or explicitly allowed), ``ask``
            or ``deny`` (a deny rule or default check matched).
        reason: the deciding part's reason.
        rule: the deciding part's rule.
        commands: every simple command and wrapper layer with its own verdict.
        execute: for a line that is allowed, the text that runs: rebuilt from the
            proved words (each single-quoted), not the text as written.
        argvs: for a line that is allowed, every argv it runs, in order (``cd``
            included), as proved.
        confined: allowed only because a sandbox confines it (confined mode): it
            runs as written, inside the sandbox, and ``execute`` is None.
        writes: whether some part may write a file (a redirect to a file, a
            program modelled as writing, a program an allow rule lets run, which
            is not modelled); False only for an allowed line whose every program
            was modelled and proved to write nothing.
        write_dirs: for a line whose every part was modelled (each program
            proved safe, or asking only because it writes a file inside the
            roots), the smallest existing real directories holding every path
            it may write or remove (see :func:`layer_directories`); None when
            something may write where no model says.
        redirected: for a line whose only writes are redirections to files
            inside the roots (one command or one pipeline, each target written
            once and named nowhere else on the line): the line rebuilt from
            the proved words with each target written as ``>&N``, and each
            ``(N, the target's real path, whether it appends)``. A sandbox may
            open the targets itself and run that line with the roots read-only.
        in_place: for a line that is one ``sed -i`` whose script is a text
            filter (see :mod:`._sedfilter`) on files inside the roots, each named
            by its real path: the ``sed`` without ``-i`` and without files, each
            file's real path, and the backup suffix. A sandbox may run the filter
            on each file with the roots read-only and replace the file itself.
    """

    command: str
    outcome: Verdict
    reason: str
    rule: str
    commands: tuple[CommandCheck, ...] = ()
    execute: str | None = None
    argvs: tuple[tuple[str, ...], ...] = ()
    confined: bool = False
    writes: bool = True
    write_dirs: tuple[str, ...] | None = None
    redirected: tuple[str, tuple[tuple[int, str, bool], ...]] | None = None
    in_place: tuple[tuple[str, ...], tuple[str, ...], str] | None = None

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict."""
        out: dict[str, object] = {
            "command": self.command,
            "outcome": self.outcome,
            "reason": self.reason,
            "rule": self.rule,
            "commands": [c.to_json() for c in self.commands],
        }
        if self.execute is not None:
            out["execute"] = self.execute
            out["argvs"] = [list(a) for a in self.argvs]
        if self.confined:
            out["confined"] = True
        return out


# a shadow entry bash takes from its directory stack or OLDPWD (see _policy._shadow_dirs)
_UNKNOWN = "\0"


def _runnable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


@attrs.define
class _Judge:
    roots: Roots
    rules: CompiledRules
    protected: ProtectedPaths
    read_only: bool
    readable: tuple[str, ...]
    cwds: list[str]
    # PATH directories inside a root (a file written there could shadow a program name),
    # and relative PATH entries as written, which resolve against the working directory
    shadow_dirs: tuple[str, ...] = ()
    checks: list[CommandCheck] = attrs.field(factory=list)
    # each simple command of the top-level line, as proved (None: not provable)
    proved: dict[int, ProvedCommand | None] = attrs.field(factory=dict)
    # every directory the line may be in at some point (for commands that never run)
    seen_cwds: list[str] = attrs.field(factory=list)
    blocked: bool = False  # some check is not "allow"
    # configuration every proved git of the line gets on top of the fixed one: the
    # drivers its repositories define, emptied
    git_config: dict[str, str] = attrs.field(factory=dict)
    # some part may write a file (a redirect, a modelled writer, a rule-allowed program)
    wrote: bool = False
    # what each write inside the roots names: (the path as written, made absolute against
    # a directory the line may be in; its real path)
    write_targets: list[tuple[str, str]] = attrs.field(factory=list)
    # some part may write where no model says (a rule-allowed program, a writer whose
    # model names no path, a line asking whether a file is writable)
    unknown_writes: bool = False
    # checks that ask although what they write is known (a git add or commit that
    # writes only inside .git): their targets are in write_targets
    placed: list[CommandCheck] = attrs.field(factory=list)
    # why the line (or a script it runs) may run a program not written in it
    evaluates: list[str] = attrs.field(factory=list)
    # words the line's expansions have made so far (bounded by MAX_LINE_WORDS)
    expanded_words: int = 0
    # what judging the line's commands has cost so far (bounded by MAX_LINE_WORK)
    work: int = 0
    # the directories the line's globs have listed, and what is left of their budget
    listings: Listings = attrs.field(factory=Listings)
    # the checks of redirected writes the sandbox's host side may open (by id)
    openable: set[int] = attrs.field(factory=set)
    # each top-level `sed -i` whose only checks are its writes inside the roots, as written
    edited: dict[int, ProvedCommand] = attrs.field(factory=dict)

    def add(
        self,
        argv: tuple[str, ...],
        verdict: Verdict,
        reason: str,
        rule: str,
        depth: int,
        target: str | None = None,
        via: tuple[str, ...] = (),
    ) -> Verdict:
        program = posixpath.basename(argv[0]) if argv else ""
        if verdict != "allow":
            self.blocked = True
        self.checks.append(
            CommandCheck(
                argv=argv,
                program=program,
                verdict=verdict,
                reason=reason,
                rule=rule,
                depth=depth,
                target=target,
                via=via,
            )
        )
        return verdict

    # -- scripts -------------------------------------------------------------------------

    def script(self, script: Script, depth: int, *, bash: bool = True) -> None:
        shown = (script.source,)
        if depth > MAX_NESTING:
            self.add(shown, "ask", "commands are nested too deeply to inspect", "parse", depth)
            return
        if self.rules.defaults:
            for hazard in script.hazards:
                self.add(shown, "deny", f"denied: {hazard}", "default:structure", depth)
        if script.uncertain or not bash:
            # another shell's syntax, or what the parser missed: deny rules still apply
            for tokens in rough_segments(script.source):
                rule = self.rules.first("deny", normalize_argv(tokens))
                if rule is not None:
                    self.add(
                        tokens,
                        "deny",
                        f"{' '.join(tokens)!r} (in text not parsed as bash "
                        f"with confidence) matches the deny rule {rule.text!r}",
                        f"deny:{rule.text}",
                        depth,
                    )
                    break
        if bash and self.rules.deny and not script.uncertain:
            why = evaluates_code(script)
            if why is not None:
                self.evaluates.append(why)
        if script.uncertain:
            self.add(
                shown,
                "ask",
                f"cannot be parsed with confidence: {script.uncertain[0]}",
                "parse",
                depth,
            )
        if not bash:
            self.add(
                shown,
                "ask",
                "the script is not in bash syntax, so it is not proved",
                "parse",
                depth,
            )
        for name in script.functions:
            self.add(
                shown,
                "ask",
                f"defines the function {name!r}, which could shadow a program",
                "function",
                depth,
            )
        if script.background:
            self.add(shown, "ask", "runs a command in the background", "background", depth)
        if depth == 0 and bash and script.tree is not None:
            self.seen_cwds = list(self.cwds)
            try:
                self.walk(script.tree, script, list(self.cwds))
            except _TooCostly:
                self.add(shown, "ask", "the line's commands, in every directory it may be in "
                         "by then, are too many to judge", "grammar", depth)  # fmt: skip
            return
        for command in script.commands:
            self.simple(command, depth)
        if depth == 0 and bash and script.outside and not script.uncertain:
            self.add(shown, "ask", f"outside the proved grammar: {script.outside}", "grammar",
                     depth)  # fmt: skip

    # -- the proved grammar: walk the structure, knowing where each command runs ----------

    def walk(self, node: Node, script: Script, state: list[str]) -> tuple[list[str], list[str]]:
        """Judge ``node`` run in one of ``state``; where the line may be after it.

        Returns the directories after it succeeds and after it fails (a ``cd``
        changes the first; a failed one leaves the second).
        """
        if isinstance(node, Leaf):
            if len(state) > MAX_LINE_DIRECTORIES:
                # each command is judged in every directory the line may be in: bound it
                self.add(("cd",), "ask", f"the line may be in any of more than "
                         f"{MAX_LINE_DIRECTORIES} directories by then", "grammar", 0)  # fmt: skip
                state = state[:1]
            self.cwds = list(state) or list(self.seen_cwds)
            self.work += len(self.cwds)
            if self.work > MAX_LINE_WORK:
                raise _TooCostly
            moved = self.leaf(node.index, script.commands[node.index])
            for real in moved or ():
                if real not in self.seen_cwds:
                    self.seen_cwds.append(real)
            return (moved if moved is not None else list(state)), list(state)
        if isinstance(node, Pipeline):
            if len(node.parts) == 1:  # no subshell: a `cd` in it moves the line
                ok, failed = self.walk(node.parts[0], script, state)
                return (failed, ok) if node.negated else (ok, failed)
            for part in node.parts:
                self.walk(part, script, state)
            return list(state), list(state)
        if isinstance(node, List):
            ok, failed = self.walk(node.parts[0], script, state)
            for op, part in zip(node.ops, node.parts[1:], strict=True):
                if op == "&&":
                    part_ok, part_failed = self.walk(part, script, ok)
                    ok, failed = part_ok, _union(failed, part_failed)
                elif op == "||":
                    part_ok, part_failed = self.walk(part, script, failed)
                    ok, failed = _union(ok, part_ok), part_failed
                else:
                    ok, failed = self.walk(part, script, _union(ok, failed))
            return ok, failed
        assert isinstance(node, Group)
        if node.redirects is not None:
            self.cwds = list(state) or list(self.seen_cwds)
            self.leaf(node.redirects, script.commands[node.redirects])
        ok, failed = self.walk(node.body, script, state)
        return (list(state), list(state)) if node.subshell else (ok, failed)

    def leaf(self, index: int, command: SimpleCommand) -> list[str] | None:
        """Judge a top-level simple command and record its proved form.

        Returns the directories a proved ``cd`` moves the line to (None: it does not move).
        """
        start = len(self.checks)
        state = list(self.cwds)
        form = self.simple(command, 0)
        self.cwds = state  # a `cd` judged in it appended its target: resolve against the start
        mine = self.checks[start:]
        self.proved[index] = None
        if form is None:
            return None
        if mine and all(
            c.verdict == "ask" and c.rule == "write" and c.depth == 0 and c.program == "sed"
            for c in mine
        ):
            # only its writes inside the roots ask: the host may edit the files for it
            self.edited[index] = form
            return None
        programs = set()
        for check in mine:
            if check.verdict != "allow" and id(check) not in self.openable:
                return None
            programs.add(check.program)
        if "cd" in programs:
            if form.argv[:1] == ("cd",) and len(mine) == 1:
                return self.cd(index, form)
            self.add(form.argv, "ask", "cd through a wrapper is not proved", "grammar", 0)
            return None
        if "jq" in programs:
            # jq loads $HOME/.jq into every program (its definitions replace the
            # builtins the filter was judged by): run it with a HOME that holds none
            if not self.environment_reaches(form, mine, "jq", "the HOME it is run with"):
                return None
            form = attrs.evolve(form, assignments=(*form.assignments, JQ_HOME))
        if "git" in programs:
            gits = [c for c in mine if c.program == "git"]
            # the forced configuration travels in the environment: every layer above git
            # must pass it on (`env -i`, `env -u`, `exec -c` would drop it)
            if not self.environment_reaches(form, mine, "git", "its forced configuration"):
                return None
            git = gits[0].argv
            at = len(form.argv) - len(git)
            argv = form.argv
            if len(gits) == 1 and at >= 0 and form.argv[at:] == git:
                # wrappers only come before it: its diffs run no driver the repository names
                argv = form.argv[:at] + git_without_drivers(git)
            form = ProvedCommand(argv, form.assignments, form.redirects, forced_git=True)
        self.proved[index] = form
        return None

    def cd(self, index: int, form: ProvedCommand) -> list[str] | None:
        # the model proved at most one operand, after options
        operands = [w for w in form.argv[1:] if not (w.startswith("-") and len(w) > 1)]
        if "--" in form.argv[1:]:
            operands = list(form.argv[form.argv.index("--") + 1 :])
        target = operands[0] if operands else (os.environ.get("HOME") or os.path.expanduser("~"))
        if not target.startswith("/"):
            # never through CDPATH: the policy resolved the target against the directory
            target = "./" + target
        # -P: the kernel resolves `..` after symlinks, as the policy did (realpath)
        self.proved[index] = attrs.evolve(form, argv=("cd", "-P", "--", target))
        if ".." in target.split("/"):
            for base in self.cwds:
                joined = os.path.join(base, target)
                if os.path.realpath(os.path.normpath(joined)) != os.path.realpath(joined):
                    # a line run as written (confined) goes where bash's logical cd goes,
                    # not where the writes were placed: no write set to narrow to
                    self.unknown_writes = True
        return self.resolve_all(target)

    # -- simple commands -----------------------------------------------------------------

    def expand(self, word: Word) -> tuple[list[str | None], str | None]:
        if word.dynamic:
            return [None], f"{word.raw!r} is computed at run time"
        if self.expanded_words > MAX_LINE_WORDS:
            # past the budget no word is expanded (or globbed) any more
            return [None], f"the line's words expand to more than {MAX_LINE_WORDS} words"
        first: tuple[str, ...] = ()
        try:
            # after a `cd` the line may run in any of several directories (a `cd` in a
            # subshell does not move the rest): a glob must match the same in each
            for position, cwd in enumerate(self.cwds):
                expanded = expand_word(word.raw, cwd=cwd, listings=self.listings)
                if position == 0:
                    first = expanded.values
                elif expanded.values != first:
                    return [None], (f"what {word.raw!r} matches depends on which directory "
                                    "the line is in by then")  # fmt: skip
                if not expanded.globbed:
                    break
        except _WordError as exc:
            return [None], str(exc)
        self.expanded_words += len(first)
        if self.expanded_words > MAX_LINE_WORDS:
            return [None], f"the line's words expand to more than {MAX_LINE_WORDS} words"
        return list(first), None

    def simple(self, command: SimpleCommand, depth: int) -> ProvedCommand | None:
        """Judge ``command``; its proved form when every word and redirect is static."""
        start = len(self.checks)
        argv: list[str | None] = []
        shown: list[str] = []
        dynamic_reason: str | None = None
        for word in command.words:
            values, why = self.expand(word)
            argv.extend(values)
            shown.extend(v if v is not None else word.raw for v in values)
            dynamic_reason = dynamic_reason or why
        display = tuple(shown) or tuple(w.raw for w in command.assignments) or ("(redirect)",)
        assignments: list[tuple[str, str]] | None = []
        for assignment in command.assignments:
            if assignment.dynamic or not harmless_assignment(assignment.raw):
                what = "assigns" if not command.words else "sets"
                self.add(
                    display,
                    "ask",
                    f"{what} {assignment.raw!r}, which can change what later commands run",
                    "assignment",
                    depth,
                )
                assignments = None
            elif assignments is not None:
                value = _assignment_value(assignment.raw)
                if value is None:
                    self.add(display, "ask", f"the assignment {assignment.raw!r} is not a plain "
                             "value", "grammar", depth)  # fmt: skip
                    assignments = None
                else:
                    assignments.append(value)
        redirects: list[ProvedRedirect] | None = []
        for redirect in command.redirects:
            made = self.redirect(redirect.op, redirect.target, display, depth, redirect.fd)
            if made is None and redirect.dup is not None and redirect.op in (">&", "<&"):
                made = ProvedRedirect(op=redirect.op, target=redirect.dup, fd=redirect.fd,
                                      kind="dup")  # fmt: skip
            if made is None or redirects is None:
                redirects = None
            else:
                redirects.append(made)
        if argv:
            self.argv(tuple(argv), tuple(shown), depth, dynamic_reason)
        if redirects is None or assignments is None or None in argv:
            if all(c.verdict == "allow" for c in self.checks[start:]):
                self.add(display, "ask", "not proved: a part of it is computed at run time",
                         "dynamic", depth)  # fmt: skip
            return None
        if not argv and not assignments and not redirects:
            self.add(display, "ask", "the command expands to no words", "grammar", depth)
            return None
        return ProvedCommand(
            argv=tuple(a for a in argv if a is not None),
            assignments=tuple(assignments),
            redirects=tuple(redirects),
        )

    def redirect(
        self, op: str, target: Word | None, display: tuple[str, ...], depth: int, fd: int | None
    ) -> ProvedRedirect | None:
        if target is None:
            return None
        values, why = self.expand(target)
        if op == "<<<":
            if why is not None or None in values:  # the string is data; its expansions are not
                self.add(display, "ask", f"here-string {target.raw}: {why}", "redirect", depth)
                return None
            if len(values) != 1 or values[0] is None:
                return None
            return ProvedRedirect(op=op, target=values[0], fd=fd, kind="string")
        if why is not None or len(values) != 1 or values[0] is None:
            reason = why or f"the redirect target {target.raw!r} is ambiguous"
            self.add(display, "ask", f"redirect {op} {target.raw}: {reason}", "redirect", depth)
            return None
        path = values[0]
        if op in (">&", "<&") and (path.isdigit() or path == "-"):
            return ProvedRedirect(op=op, target=path, fd=fd, kind="dup")
        writes = op in _WRITE_OPS or op in (">&", "<>")
        start = len(self.checks)
        if writes and not self.write(path, display, depth, f"redirect {op}"):
            added = self.checks[start:]
            opened = ">" if op == ">|" else "&>" if op == ">&" else op
            if (
                depth == 0
                and opened in _OPENED_OPS
                and fd in (None, 1, 2)
                # bash reads `N>&FILE` as `&>FILE` only for N 1; `2>&FILE` is ambiguous
                and not (op == ">&" and fd not in (None, 1))
                and len(added) == 1
                and added[0].rule == "write"
                and len(self.cwds) == 1
                and self.write_targets[-1][1]
            ):
                # inside the roots, not protected: the host may open it for the command
                self.openable.add(id(added[0]))
                real = self.write_targets[-1][1]
                return ProvedRedirect(op=opened, target=path, fd=fd, kind="open", real=real)
            return None
        if op in ("<", "<&", "<>") and not self.read(path, display, depth, f"redirect {op}"):
            return None
        if op in (">&", "<&"):
            if op == "<&" or fd is not None:
                self.add(display, "ask", f"redirect {op} {path}: not a plain redirection",
                         "grammar", depth)  # fmt: skip
                return None
            op = "&>"  # `>&FILE` is `&>FILE`
        return ProvedRedirect(op=op, target=path, fd=fd)

    # -- paths -----------------------------------------------------------------------------

    def _readable(self, real: str) -> bool:
        return any(real == r or real.startswith(r.rstrip("/") + "/") for r in self.readable)

    def read(self, path: str, display: tuple[str, ...], depth: int, what: str) -> bool:
        if path in _HARMLESS_READS:
            return True
        for base in self.cwds:
            verdict = self.roots.resolve(path, base=base)
            if verdict.inside or (verdict.real is not None and self._readable(verdict.real)):
                continue
            self.add(
                display,
                "ask",
                f"{what} reads {path!r} outside the roots"
                f"{' (' + verdict.reason + ')' if verdict.reason else ''}",
                "path:read",
                depth,
            )
            return False
        return True

    def write(self, path: str, display: tuple[str, ...], depth: int, what: str) -> bool:
        if path in _HARMLESS_WRITES:
            return True
        self.wrote = True
        targets: list[tuple[str, str]] = []
        for base in self.cwds:
            verdict = self.roots.resolve(path, base=base)
            real = verdict.real or ""
            targets.append((os.path.join(base, path), real))
            if self.rules.defaults and block_device(real):
                self.add(
                    display,
                    "deny",
                    f"{what} writes to the block device {path!r}",
                    "default:block_device",
                    depth,
                )
                return False
            if not verdict.inside:
                self.add(
                    display,
                    "ask",
                    f"{what} writes {path!r} outside the roots"
                    f"{' (' + verdict.reason + ')' if verdict.reason else ''}",
                    "path:write",
                    depth,
                    verdict.real,
                )
                return False
            relative = real[len(verdict.root or "") :].lstrip("/")
            entry = self.protected.match("/" + relative) if relative else None
            if entry is None:
                # the path as named: a link whose own name is protected leads there
                entry = protected_link_on_the_way(
                    os.path.join(base, path), self.roots, self.protected
                )
            if entry is not None:
                via = protected_links_on_the_way(
                    os.path.join(base, path), self.roots, self.protected
                )
                self.add(
                    display,
                    "ask",
                    f"{what} writes {path!r}, a protected path ({entry}) "
                    "that can run commands later, outside any gate",
                    "protected",
                    depth,
                    real,
                    tuple(via),
                )
                return False
            if self.read_only:
                self.add(
                    display,
                    "ask",
                    f"{what} writes {path!r} and the policy is read-only",
                    "read_only",
                    depth,
                )
                return False
        # Inside the roots and not protected, but still a write: the shell runs
        # unasked only what is proved read-only (the write and edit tools write
        # files without asking, through contained, race-free file operations).
        self.write_targets += targets
        self.add(
            display,
            "ask",
            f"{what} writes {path!r}; only read-only shell commands run without approval "
            "(use the write or edit tool)",
            "write",
            depth,
        )
        return False

    def resolve_all(self, path: str) -> list[str]:
        out = []
        for base in self.cwds:
            verdict = self.roots.resolve(path, base=base)
            out.append(verdict.real or os.path.normpath(os.path.join(base, path)))
        return out

    # -- argv ------------------------------------------------------------------------------

    def structural(
        self, argv: tuple[str | None, ...], norm: NormalizedArgv, depth: int, shown: tuple[str, ...]
    ) -> bool:
        """Apply the default structural denies; True when one matched."""
        program = norm.program
        if program in _DESTRUCTIVE:
            recursive = any(n in ("--recursive", "-r", "-R") for n, _ in norm.options)
            if recursive:
                operands = list(norm.operands)
                if program != "rm" and not any(n == "--reference" for n, _ in norm.options):
                    operands = operands[1:]  # the mode or owner
                for operand in operands:
                    if operand is None:
                        continue
                    for real in self.resolve_all(operand):
                        why = destructive_target(real, self.roots.paths)
                        if why is not None:
                            self.add(
                                shown,
                                "deny",
                                f"{program} recursively changes {operand!r}, {why}",
                                f"default:{program}",
                                depth,
                            )
                            return True
                    if operand.endswith("/*") or operand == "*":
                        base = operand[:-1] or "."
                        for real in self.resolve_all(base):
                            why = destructive_target(real, self.roots.paths)
                            if why is not None:
                                self.add(
                                    shown,
                                    "deny",
                                    f"{program} recursively changes everything in {why}",
                                    f"default:{program}",
                                    depth,
                                )
                                return True
        if program in _DEVICE_WRITERS or program.startswith("mkfs"):
            for operand in norm.operands:
                if operand is None:
                    continue
                target = operand[3:] if program == "dd" and operand.startswith("of=") else operand
                if program == "dd" and not operand.startswith("of="):
                    continue
                for real in self.resolve_all(target):
                    if block_device(real):
                        self.add(
                            shown,
                            "deny",
                            f"{program} writes to the block device {target!r}",
                            "default:block_device",
                            depth,
                        )
                        return True
        return False

    def argv(
        self,
        argv: tuple[str | None, ...],
        shown: tuple[str, ...],
        depth: int,
        dynamic_reason: str | None,
    ) -> Verdict:
        if depth > MAX_NESTING:
            return self.add(
                shown, "ask", "commands are nested too deeply to inspect", "parse", depth
            )
        if argv[0] is None:
            if self.rules.deny:
                # it could be any program, a denied one included: confined mode asks
                return self.add(shown, "ask", "the command name is computed at run time "
                                f"({dynamic_reason}), and a deny rule could match it",
                                "dynamic-deny", depth)  # fmt: skip
            return self.add(
                shown,
                "ask",
                f"the command name is computed at run time ({dynamic_reason})",
                "dynamic",
                depth,
            )
        norm = normalize_argv(argv)
        deny = self.rules.first("deny", norm)
        if deny is not None:
            return self.add(
                shown, "deny", f"matches the deny rule {deny.text!r}", f"deny:{deny.text}", depth
            )
        if self.rules.defaults and self.structural(argv, norm, depth, shown):
            return "deny"
        if None in argv and self.rules.deny and self.may_run_denied(norm):
            self.add(shown, "ask", f"{norm.program} gets a word computed at run time "
                     f"({dynamic_reason}), and a deny rule could match what it then runs",
                     "dynamic-deny", depth)  # fmt: skip
        use = describe(argv)
        try:
            verdict = self.layer(use, norm, shown, depth, dynamic_reason)
            if verdict == "ask" and norm.program == "git" and use.verdict == "ask":
                self.place_git(argv)
            return verdict
        finally:
            # commands this one runs are judged whatever its own verdict, so deny rules
            # reach them; each adds its own check, and the line's outcome is the worst
            for inner in use.inner:
                self.inner(inner, depth + 1)

    def place_git(self, argv: tuple[str | None, ...]) -> None:
        """A git add or commit that writes only in ``.git``: its writes are known."""
        check = self.checks[-1]
        if check.program != "git" or not check.rule.startswith(
            ("model:git add", "model:git commit")
        ):
            return  # fmt: skip
        git_dirs = git_directory_writes(argv, self.cwds, self.roots)
        if git_dirs is not None:
            self.placed.append(check)
            self.write_targets += [(os.path.join(d, "index"),) * 2 for d in git_dirs]

    def may_run_denied(self, norm: NormalizedArgv) -> bool:
        """Whether a computed word could make this command one a deny rule matches.

        True when a deny rule names this program, or when the program can start
        another one from its arguments (wrappers, shells, ``eval``, ``find``,
        ``git``, ``sed``, ``awk``, interpreters, anything outside the safe set).
        """
        if norm.program not in CANNOT_RUN_PROGRAMS:
            return True
        return self.rules.names("deny", norm.program)

    def layer(
        self,
        use: Use,
        norm: NormalizedArgv,
        shown: tuple[str, ...],
        depth: int,
        dynamic_reason: str | None,
    ) -> Verdict:
        ask = self.rules.first("ask", norm)
        if ask is not None:
            return self.add(
                shown, "ask", f"matches the ask rule {ask.text!r}", f"ask:{ask.text}", depth
            )
        unknown = self.unknown_entry(norm)
        if unknown is not None:
            why = (
                f"{norm.program!r} is looked for in the PATH entry {unknown!r}, which bash "
                "takes from its directory stack or OLDPWD: where it would run from is not known"
            )
            return self.add(shown, "ask", why, "path_shadow", depth)
        shadow = self.shadowed(norm)
        if shadow is not None:
            return self.add(shown, "ask", f"{norm.program!r} would run {shadow!r}, a file "
                            "inside the roots found on PATH", "path_shadow", depth)  # fmt: skip
        allow = self.rules.first("allow", norm)
        if allow is not None:
            # the program behind a rule is not modelled: nothing proves it writes nothing
            self.wrote = True
            self.unknown_writes = True
            self.paths(use, shown, depth, reads=False)
            return self.add(
                shown,
                "allow",
                f"matches the allow rule {allow.text!r}",
                f"allow:{allow.text}",
                depth,
            )
        if use.verdict == "ask":
            why = use.reason if dynamic_reason is None else f"{use.reason} ({dynamic_reason})"
            return self.add(shown, "ask", why, use.rule, depth)
        if dynamic_reason is not None:
            return self.add(shown, "ask", dynamic_reason, "dynamic", depth)
        asks_writable = _asks_writable(norm.program, shown)
        self.wrote = self.wrote or use.writer or asks_writable
        if asks_writable or (use.writer and not use.writes):
            self.unknown_writes = True
        if use.writer and self.read_only:
            return self.add(
                shown,
                "ask",
                f"{norm.program} writes files and the policy is read-only",
                "read_only",
                depth,
            )
        if not self.paths(use, shown, depth, reads=True):
            return "ask"
        if norm.program == "git":
            starts = self.resolve_all(use.cwd) if use.cwd is not None else list(self.cwds)
            for start in starts:
                bare = _bare_repository(start, self.roots)
                if bare is not None:
                    return self.add(shown, "ask", f"git would use the repository at {bare!r}, "
                                    "whose config (which can run programs) is not a protected "
                                    "path", "git:bare_repository", depth)  # fmt: skip
                drivers = repository_drivers(start)
                if isinstance(drivers, str):
                    return self.add(shown, "ask", drivers, "git:drivers", depth)
                self.git_config.update(drivers)
                # the repository git reads: above the roots, or objects elsewhere
                for path in repository_reads(start):
                    if not self.read(path, shown, depth, "git (its repository)"):
                        return "ask"
        if use.cwd is not None:
            for real in self.resolve_all(use.cwd):
                if real not in self.cwds:
                    self.cwds.append(real)
        return self.add(shown, "allow", use.reason, use.rule, depth)

    def environment_reaches(
        self, form: ProvedCommand, mine: Sequence[CommandCheck], program: str, what: str
    ) -> bool:
        """Whether every layer above ``program`` in ``form`` passes its environment on.

        Else the line asks, saying that ``what`` (carried in the environment) might
        not reach the program.
        """
        depth = max(c.depth for c in mine if c.program == program)
        above = {c.program for c in mine if c.depth < depth}
        if above <= _ENVIRONMENT_KEEPING:
            return True
        self.add(form.argv, "ask", f"{program} runs under a wrapper that may change its "
                 f"environment, so {what} might not reach it", "grammar", 0)  # fmt: skip
        return False

    def shadowed(self, norm: NormalizedArgv) -> str | None:
        """The file a bare program name would resolve to inside the roots, if any."""
        if not self.shadow_dirs or "/" in norm.written:
            return None
        for directory in self.shadow_dirs:
            if directory.startswith(_UNKNOWN):
                continue  # (unknown_entry)
            if directory.startswith("/"):
                bases: tuple[str, ...] = (directory,)
            else:
                bases = tuple(os.path.join(cwd, directory) for cwd in self.cwds)
            for base in bases:
                candidate = os.path.join(base, norm.program)
                if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                    return candidate
        return None

    def unknown_entry(self, norm: NormalizedArgv) -> str | None:
        """A PATH entry bash takes from its directory stack that a bare name reaches, if any.

        Reached: the program is not an executable file of an absolute entry before it.
        """
        if "/" in norm.written:
            return None
        for directory in self.shadow_dirs:
            if directory.startswith(_UNKNOWN):
                entry, *before = directory[1:].split(_UNKNOWN)
                if not any(_runnable(os.path.join(b, norm.program)) for b in before):
                    return entry
        return None

    def paths(self, use: Use, shown: tuple[str, ...], depth: int, *, reads: bool) -> bool:
        ok = True
        if reads:
            for path in use.reads:
                ok = self.read(path, shown, depth, use.rule.removeprefix("model:")) and ok
        for path in use.writes:
            ok = self.write(path, shown, depth, use.rule.removeprefix("model:")) and ok
        for path in use.files_only:
            for real in self.resolve_all(path):
                if os.path.isdir(real):
                    self.add(
                        shown,
                        "ask",
                        f"{path!r} is a directory; copying or moving a tree is not proved safe",
                        use.rule,
                        depth,
                    )
                    return False
        return ok

    def inner(self, inner: Inner, depth: int) -> None:
        """Judge a command ``inner`` runs; its checks join the line's."""
        if inner.script is not None:
            self.script(parse_script(inner.script), depth, bash=inner.bash_syntax)
        elif inner.argv:
            shown = tuple(a if a is not None else "<computed>" for a in inner.argv)
            dynamic = "an argument is computed at run time" if None in inner.argv else None
            self.argv(inner.argv, shown, depth, dynamic)


def _asks_writable(program: str, words: tuple[str, ...]) -> bool:
    """Whether the command asks whether a file is writable (``test -w``, ``find -writable``).

    With the roots read-only every answer would be no, so such a line runs over the
    private layer, where the answer is the host's.
    """
    if program in ("test", "["):
        return "-w" in words[1:]
    return program == "find" and "-writable" in words[1:]


def _union(first: list[str], second: list[str]) -> list[str]:
    return first + [d for d in second if d not in first]


def _assignment_value(raw: str) -> tuple[str, str] | None:
    """``NAME=value`` as bash assigns it (no globbing, no brace expansion), or None."""
    try:
        expanded = expand_word(raw, cwd="/nonexistent")
    except _WordError:
        return None
    if len(expanded.values) != 1 or expanded.globbed:
        return None
    name, eq, value = expanded.values[0].partition("=")
    if not eq or name != raw.partition("=")[0]:
        return None
    return name, value


def _bare_repository(start: str, roots: Roots) -> str | None:
    """A directory git would take as a bare repository before any ``.git``, inside the roots.

    A ``.git`` directory's config is a protected path; a bare repository's ``config``
    (next to ``HEAD``, ``objects`` and ``refs``) is not, and can name programs git runs
    (``diff.external``, ``core.fsmonitor``...). Git finds one by walking up from its
    working directory, as this does.
    """
    current = start  # already resolved (a working directory or a resolved -C)
    while roots.contains_real(current):
        dotgit = os.path.join(current, ".git")
        if os.path.isfile(os.path.join(dotgit, "HEAD")) or os.path.isfile(dotgit):
            return None  # a repository (or a link to one) git takes first
        # a `.git` that is not a repository does not stop git: it looks at the directory
        # itself next (the policy also forces safe.bareRepository=explicit when git runs)
        if (
            os.path.isfile(os.path.join(current, "HEAD"))
            and os.path.isdir(os.path.join(current, "objects"))
            and os.path.isdir(os.path.join(current, "refs"))
        ):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return None


def judge_command(
    command: str,
    *,
    roots: Roots,
    rules: CompiledRules,
    protected: ProtectedPaths,
    cwd: str,
    read_only: bool,
    readable: tuple[str, ...] = (),
    shadow_dirs: tuple[str, ...] = (),
) -> CommandExplanation:
    """Judge ``command`` run by bash in ``cwd``."""
    judge = _Judge(
        roots=roots,
        rules=rules,
        protected=protected,
        read_only=read_only,
        readable=readable,
        cwds=[cwd],
        shadow_dirs=shadow_dirs,
    )
    script = parse_script(command)
    judge.script(script, 0)
    execute: str | None = None
    argvs: tuple[tuple[str, ...], ...] = ()
    if script.tree is not None and not judge.blocked:
        forms = [judge.proved.get(i) for i in range(len(script.commands))]
        extra = tuple(sorted(judge.git_config.items()))
        forms = [
            attrs.evolve(form, git_config=extra) if form is not None and form.forced_git else form
            for form in forms
        ]
        try:
            execute = emit(script.tree, forms)
        except ValueError:
            judge.add((command,), "ask", "not every part of the line is proved", "grammar", 0)
        argvs = tuple(form.argv for form in forms if form is not None and form.argv)
    if judge.evaluates and any(c.verdict == "ask" for c in judge.checks):
        # not proved, so it would run as written: deny rules cannot see what it may run
        why = f"{judge.evaluates[0]}: it can run a program not written in the line"
        judge.add((command,), "ask", f"{why}, and a deny rule could match it", "dynamic-deny", 0)
    checks = tuple(judge.checks)
    if not checks:
        return CommandExplanation(
            command=command, outcome="ask", reason="nothing to run", rule="parse"
        )
    # among equal verdicts, a write to a protected path or outside the roots names the
    # line (an approver told only "sed writes 'f'" would not see its backup '.bashrc')
    worst = max(checks, key=lambda c: (_RANK[c.verdict], c.rule in ("protected", "path:write")))
    if worst.verdict == "allow":
        reason = (
            f"{checks[0].reason}"
            if len(checks) == 1
            else f"all {len(checks)} commands are proved safe or allowed"
        )
        return CommandExplanation(
            command=command,
            outcome="allow",
            reason=reason,
            rule=checks[0].rule if len(checks) == 1 else "all",
            commands=checks,
            execute=execute,
            argvs=argvs,
            writes=judge.wrote,
            write_dirs=() if not judge.wrote else None,
        )
    what = " ".join(worst.argv)
    write_dirs: tuple[str, ...] | None = None
    placed = {id(c) for c in judge.placed}
    if not judge.unknown_writes and all(_modelled(c) or id(c) in placed for c in checks):
        write_dirs = layer_directories(judge.write_targets, roots)
    return CommandExplanation(
        command=command,
        outcome=worst.verdict,
        reason=f"{what!r}: {worst.reason}" if what != command else worst.reason,
        rule=worst.rule,
        commands=checks,
        write_dirs=write_dirs,
        redirected=_redirected(judge, script, cwd) if write_dirs else None,
        in_place=_in_place(judge, script, cwd) if write_dirs else None,
    )


def _in_place(
    judge: _Judge, script: Script, cwd: str
) -> tuple[tuple[str, ...], tuple[str, ...], str] | None:
    """The line as a ``sed`` filter and its files, when it is one ``sed -i`` that is one.

    One simple command with no assignment and no redirection, each file named by
    its real path (no link on the way, each once, no backup name another file's).
    """
    tree = script.tree
    if (
        not isinstance(tree, Leaf)
        or judge.unknown_writes
        or judge.evaluates
        or len(judge.cwds) != 1
        or tree.index not in judge.edited
    ):
        return None
    form = judge.edited[tree.index]
    if form.assignments or form.redirects or form.forced_git:
        return None
    found = sed_filter(form.argv)
    if found is None or posixpath.basename(form.argv[0]) != "sed":
        return None
    files = tuple(os.path.normpath(os.path.join(cwd, f)) for f in found.files)
    backups = {f + found.suffix for f in files} if found.suffix else set()
    if len(set(files)) != len(files) or backups & set(files):
        return None
    if any(os.path.realpath(f) != f or not judge.roots.contains_real(f) for f in files):
        return None
    return found.argv, files, found.suffix


def _redirected(
    judge: _Judge, script: Script, cwd: str
) -> tuple[str, tuple[tuple[int, str, bool], ...]] | None:
    """The line with its redirected writes as descriptors, when they are its only writes.

    Only one command (bash opens its targets before it runs, as the host will) or
    one pipeline whose words name no target (another command of it could read
    the target before or after bash truncated it), each target once, only
    descriptors 0 to 2 named by the line (a higher one would reach a target).
    """
    tree = script.tree
    if tree is None or judge.unknown_writes or judge.evaluates or not judge.openable:
        return None
    if any(c.verdict != "allow" and id(c) not in judge.openable for c in judge.checks):
        return None
    leaves = tree.parts if isinstance(tree, Pipeline) else (tree,)
    if not all(isinstance(leaf, Leaf) for leaf in leaves):
        return None
    forms = [judge.proved.get(i) for i in range(len(script.commands))]
    if None in forms:
        return None
    opened: list[ProvedRedirect] = []
    words: list[str] = []
    for form in forms:
        assert form is not None
        words += form.argv
        for redirect in form.redirects:
            if redirect.kind == "open":
                opened.append(redirect)
                continue
            named = {redirect.fd, *([redirect.target] if redirect.kind == "dup" else [])}
            if not named <= {None, 0, 1, 2, "0", "1", "2", "-"}:
                return None  # a descriptor above 2: it could be one the targets are on
            if redirect.kind == "file":
                words.append(redirect.target)
    if len(opened) != len(judge.openable) or len(opened) > len(_OPENED_FDS):
        return None
    reals = [r.real for r in opened]
    named = {os.path.normpath(os.path.join(cwd, r.target)) for r in opened}
    if len(set(reals)) != len(reals) or len(named) != len(opened):
        return None
    for word in words if len(leaves) > 1 else ():
        # in a pipeline bash opens each command's targets as that command starts; the
        # others may already run (one command opens its targets before it runs)
        joined = os.path.normpath(os.path.join(cwd, word))
        if joined in named or joined in reals or os.path.realpath(joined) in reals:
            return None
    vias = dict(zip((id(r) for r in opened), _OPENED_FDS, strict=False))
    extra = tuple(sorted(judge.git_config.items()))
    numbered: list[ProvedCommand | None] = []
    for form in forms:
        assert form is not None
        redirects = tuple(
            attrs.evolve(r, via=vias[id(r)]) if r.kind == "open" else r for r in form.redirects
        )
        form = attrs.evolve(form, redirects=redirects)
        numbered.append(attrs.evolve(form, git_config=extra) if form.forced_git else form)
    targets = tuple((vias[id(r)], r.real, r.op in (">>", "&>>")) for r in opened)
    return emit(tree, numbered), targets


def _modelled(check: CommandCheck) -> bool:
    """Whether a check leaves what its part writes known.

    A model proved the part, or it asks only for a write inside the roots (whose
    path was recorded).
    """
    if check.verdict == "allow":
        return check.rule.startswith("model:")
    return check.verdict == "ask" and check.rule == "write"


def layer_directories(targets: Sequence[tuple[str, str]], roots: Roots) -> tuple[str, ...] | None:
    """The smallest existing real directories a private layer must cover for ``targets``.

    Each target is (the path as written, absolute; its real path). A write may
    create, replace or remove the name where it is written (``sed -i`` replaces a
    link by a file) or the file it leads to, so both directories count: the
    real directory of the written name and the directory of the real path (the
    nearest existing one above, for a path still to be made). A target that is a
    root itself counts as that root. None when one lies outside every root.
    """
    found: list[str] = []
    for written, real in targets:
        if not real:
            return None
        holders = [os.path.realpath(os.path.dirname(written)), os.path.dirname(real)]
        if real in roots.paths:
            holders = [real]
        for holder in holders:
            while not os.path.isdir(holder) and holder != "/":
                holder = os.path.dirname(holder)
            holder = os.path.realpath(holder)
            if not roots.contains_real(holder):
                return None
            if holder not in found:
                found.append(holder)
    outermost = [
        d for d in found if not any(o != d and o != "/" and posixpath.commonpath((o, d)) == o
                                    for o in found)
    ]  # fmt: skip
    return tuple(sorted(outermost))
