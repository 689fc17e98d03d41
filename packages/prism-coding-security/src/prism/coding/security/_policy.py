"""The coding approval policy: paths contained in roots, command rules, human approval."""

from __future__ import annotations

import inspect
import os
import pwd
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Literal

import attrs
import trio

from prism.coding.tools import AccessGrant
from prism.core import (
    ConfigurationError,
    ExecutionAction,
    ExecutionDecision,
    ExecutionPolicy,
    await_callback,
    trio_native,
)
from prism.core.options import (
    boolean,
    callable_value,
    instance_of,
    number,
    optional,
    sequence_of,
    string,
)

from ._errors import SandboxUnavailableError
from ._escalation import UNNAMED, access_words, grant_of, needs_of, network_checks, ungrantable
from ._implied import (
    answered_unwalked,
    environment_patterns,
    implied_protected,
    warm_in_background,
)
from ._judge import CommandExplanation, judge_command
from ._paths import Roots, normalize_roots, protected_link_on_the_way
from ._protected import (
    AnchoredPaths,
    ProtectedPaths,
    fold_parts,
    in_git_directory,
    normalize_protected_paths,
)
from ._rules import CommandRules, CompiledRules
from ._sandbox import SandboxBackend

__all__ = [
    "ApprovalCallback",
    "ApprovalDecision",
    "CommandVerdict",
    "create_coding_approval_policy",
    "explain_command",
]

READ_KINDS = frozenset({"read", "list", "ls", "glob", "grep", "search", "find", "stat"})
WRITE_KINDS = frozenset({"write", "edit", "delete", "move", "mkdir", "create"})
_MAX_CACHED_APPROVALS = 1024


@attrs.frozen(kw_only=True)
class ApprovalDecision:
    """An approver's answer.

    Build it with keywords: ``ApprovalDecision(approved=True, remember=False)``.
    An approver may also return a plain ``bool``, which means
    ``ApprovalDecision(approved=<bool>)``.

    Attributes:
        approved: whether the action may run (required). Deny rules still win: an
            approval cannot let a denied command run.
        remember: when approved, cache the approval for this exact action (kind,
            operation, command, paths) so it is not asked again; ignored when the
            policy was built with ``cache_approvals=False``. Default True.
        reason: shown to the model with a refusal, and recorded in the decision's
            details as ``approver_reason``.
    """

    approved: bool = attrs.field(validator=attrs.validators.instance_of(bool))
    remember: bool = attrs.field(default=True, validator=attrs.validators.instance_of(bool))
    reason: str | None = None


ApprovalCallback = Callable[
    [ExecutionAction], "bool | ApprovalDecision | Awaitable[bool | ApprovalDecision]"
]
"""``approve(action) -> bool | ApprovalDecision``, sync or async.

A sync callable runs on the event loop (keep it quick; use an async one to
wait for a person). A bool means ``ApprovalDecision(approved=<bool>)``. The
action's ``metadata["approval_reason"]`` says why the policy asks (untrusted
text: it quotes the command). For an escalation, ``metadata["escalation"]``
names the extra access a yes grants this one call, in words, and
``metadata["escalation_grant"]`` is that grant exactly (``protected_writes``,
``outside_writes``, ``hosts``: lists of real paths and ``host:port``); an
approver that answers later binds its answer to both.
"""

_CacheKey = tuple[str, str, str | None, tuple[str, ...]]


@attrs.frozen(kw_only=True)
class CommandVerdict:
    """The policy's answer before approval: allow, ask or deny, with details."""

    outcome: Literal["allow", "ask", "deny"]
    reason: str
    details: dict[str, object] = attrs.field(factory=dict)
    execute: str | None = None
    # an escalation: the exact access approving it grants (for that one call)
    grant: AccessGrant | None = None
    access: str | None = None
    # a proved line that writes nothing: a sandbox may bind the roots read-only for it
    writes_nothing: bool = False
    # a confined line whose every write was proved to lie in these directories: a
    # sandbox may keep its private layer over them only
    write_dirs: tuple[str, ...] | None = None
    # a confined line whose only writes are redirections: its text with each target
    # as a descriptor the sandbox opens, and the targets (see CommandExplanation)
    redirected: tuple[str, tuple[tuple[int, str, bool], ...]] | None = None
    # a confined line that is one `sed -i` whose script is a text filter: the filter,
    # the files' real paths, the backup suffix (see CommandExplanation)
    in_place: tuple[tuple[str, ...], tuple[str, ...], str] | None = None


def _decision(
    allowed: bool,
    reason: str,
    details: dict[str, object],
    *,
    exclusive: bool = False,
    execute: str | None = None,
    metadata: Mapping[str, object] | None = None,
) -> ExecutionDecision:
    details = {"policy": "coding_approval", **details}
    details.setdefault("decision", "allowed" if allowed else "denied")
    # a proved line runs as rebuilt from what was proved, never as written
    modified: dict[str, object] | None = {"command": execute} if execute is not None else None
    if metadata is not None:
        # an approved escalation's grant goes with the action to the tool, for this call
        modified = {**(modified or {}), "metadata": metadata}
    return ExecutionDecision(
        allowed=allowed, reason=reason, details=details, exclusive=exclusive, modified=modified
    )


INLINE_JUDGE_CHARS = 4096
"""Shell lines longer than this are judged in a worker thread, not on the event loop."""


# explain()'s default: the command gets this process's HOME
_THIS_HOME: object = object()


# what makes judging a short line costly: a glob character (`*`, `?`, a bracket
# expression, not the `[ ` command), or a `cd` (each command after `cd`s that may
# fail is judged in every directory the line may be in by then)
_COSTLY = re.compile(r"[*?]|\[[^\s]|\bcd\b")
# git in several repositories: each one's configuration is listed by a git the first
# time (two git commands, or one pointed elsewhere)
_GIT_ELSEWHERE = re.compile(
    r"\bgit\b.*\bgit\b|\bgit\b[^;&|\n]*\s(?:-C|--git-dir|--work-tree)\b", re.S
)


def _in_trio() -> bool:
    """Whether an event loop runs here (without one there is nothing to keep free)."""
    try:
        trio.lowlevel.current_trio_token()
    except RuntimeError:
        return False
    return True


def judged_in_thread(command: str) -> bool:
    """Whether the shell line ``command`` is judged in a worker thread, not on the event loop.

    A line longer than :data:`INLINE_JUDGE_CHARS`, or one whose globs read
    directories or whose ``cd`` makes it be judged in several, or whose git
    commands may be in several repositories (each one's configuration is listed
    by a git process the first time).
    """
    return (
        len(command) > INLINE_JUDGE_CHARS
        or _COSTLY.search(command) is not None
        or _GIT_ELSEWHERE.search(command) is not None
    )


@trio_native  # Prism's own trio code: stays on trio under an asyncio host
@attrs.define(eq=False)
class _CodingApprovalPolicy:
    roots: Roots
    rules: CompiledRules
    approve: ApprovalCallback | None
    read_only: bool
    timeout_s: float
    cache_approvals: bool
    readable: tuple[str, ...]
    protected: ProtectedPaths
    sandbox: SandboxBackend | None = None
    sandbox_name: str = ""
    _approved: dict[_CacheKey, None] = attrs.field(factory=dict)

    def check(self, action: ExecutionAction) -> ExecutionDecision | Awaitable[ExecutionDecision]:
        """Decide ``action``; returns a plain decision unless a human must be asked.

        Rule-based answers (allow or deny) are returned synchronously, so the
        caller never awaits more than its own checkpoint for them. Only an
        action that needs approval returns an awaitable, which waits for the
        approver for at most ``approval_timeout_s``, and so does an action judged
        in a worker thread (see :meth:`_judged_in_thread`).
        """
        if self._judged_in_thread(action) and _in_trio():
            return self._judge_in_thread(action)
        return self._decide(action, self._judge(action))

    def _judged_in_thread(self, action: ExecutionAction) -> bool:
        """Whether judging ``action`` may take long enough to hold the event loop.

        (Only inside trio: without an event loop the action is judged at once.)
        A shell line :func:`judged_in_thread` names, and a write while a root's
        walk is not answered from its watch (:func:`._implied.answered_unwalked`:
        the first check waits for the walk :func:`open_secure_coding_tools` warms,
        a root too large to watch is walked whole on every check).
        """
        if action.kind == "shell" and isinstance(action.command, str):
            return judged_in_thread(action.command)
        if action.kind in WRITE_KINDS and not self.read_only:
            return not all(answered_unwalked(root, self.protected) for root in self.roots.paths)
        return False

    async def _judge_in_thread(self, action: ExecutionAction) -> ExecutionDecision:
        # judging a long line takes up to seconds (parse, expansion, the walk): off the
        # event loop, so other calls, timeouts and cancellation go on meanwhile
        verdict = await trio.to_thread.run_sync(self._judge, action, abandon_on_cancel=True)
        decided = self._decide(action, verdict)
        if inspect.isawaitable(decided):
            return await decided
        return decided

    def _decide(
        self, action: ExecutionAction, verdict: CommandVerdict
    ) -> ExecutionDecision | Awaitable[ExecutionDecision]:
        exclusive = action.kind == "shell"
        if verdict.outcome == "allow":
            return _decision(
                True,
                verdict.reason,
                verdict.details,
                exclusive=exclusive,
                execute=verdict.execute,
                # the shell tool asks its operations to bind the roots read-only, or
                # to keep the private layer over the proved write set only
                metadata=_spawn_metadata(action, verdict),
            )
        if verdict.outcome == "deny":
            return _decision(False, verdict.reason, verdict.details, exclusive=exclusive)
        key = _cache_key(action)
        # an escalation's approval is never remembered: its access is granted per call
        if self.cache_approvals and verdict.grant is None and key in self._approved:
            return _decision(
                True,
                f"{verdict.reason}; approved earlier for this exact action",
                {**verdict.details, "approval": "cached", "decision": "approved"},
                exclusive=exclusive,
            )
        if self.approve is None:
            return _decision(
                False,
                f"{verdict.reason}; it needs approval and no approver is configured",
                {**verdict.details, "approval": "unavailable", "needs_approval": True},
                exclusive=exclusive,
            )
        return self._ask(action, verdict, key, exclusive)

    async def _ask(
        self, action: ExecutionAction, verdict: CommandVerdict, key: _CacheKey, exclusive: bool
    ) -> ExecutionDecision:
        assert self.approve is not None
        details: dict[str, object] = {**verdict.details, "needs_approval": True}
        answer: object = None
        with trio.move_on_after(self.timeout_s) as scope:
            try:
                # the approver sees why it is asked (a person deciding needs the reason)
                metadata = {**action.metadata, "approval_reason": verdict.reason}
                if verdict.access is not None:
                    # the access approving it grants, in words (for a person, a client)
                    metadata["escalation"] = verdict.access
                if verdict.grant is not None:
                    # and exactly (an approver binds its answer to this access)
                    metadata["escalation_grant"] = verdict.details.get("grant")
                asked = attrs.evolve(action, metadata=metadata)
                approve = self.approve
                answer = approve(asked)
                if inspect.isawaitable(answer):
                    # An asyncio approver under an asyncio host runs on its loop.
                    answer = await await_callback(approve, answer)
                else:
                    await trio.lowlevel.checkpoint()
            except Exception as exc:
                return _decision(
                    False,
                    f"{verdict.reason}; the approver failed ({type(exc).__name__}: {exc})",
                    {**details, "approval": "error", "error": type(exc).__name__},
                    exclusive=exclusive,
                )
        if scope.cancelled_caught:
            return _decision(
                False,
                f"{verdict.reason}; approval timed_out after {self.timeout_s:g}s, so it is "
                "denied",
                {**details, "approval": "timed_out", "decision": "timed_out",
                 "timeout_s": self.timeout_s},
                exclusive=exclusive,
            )  # fmt: skip
        if isinstance(answer, bool):
            answer = ApprovalDecision(approved=answer)
        if not isinstance(answer, ApprovalDecision):
            return _decision(
                False,
                f"{verdict.reason}; the approver returned {answer!r}, not a bool or "
                "ApprovalDecision",
                {**details, "approval": "error"},
                exclusive=exclusive,
            )
        if not answer.approved:
            why = f": {answer.reason}" if answer.reason else ""
            return _decision(
                False,
                f"{verdict.reason}; the approver denied it{why}",
                {**details, "approval": "denied", "approver_reason": answer.reason},
                exclusive=exclusive,
            )
        remember = self.cache_approvals and answer.remember and verdict.grant is None
        if remember:
            if len(self._approved) >= _MAX_CACHED_APPROVALS:
                del self._approved[next(iter(self._approved))]
            self._approved[key] = None
        details.update(approval="approved", decision="approved", remembered=remember)
        if answer.reason:
            details["approver_reason"] = answer.reason
        if verdict.grant is None:
            return _decision(True, f"{verdict.reason}; approved", details, exclusive=exclusive)
        return _decision(
            True,
            f"{verdict.reason}; approved: this call may {verdict.access}",
            details,
            exclusive=exclusive,
            metadata={**action.metadata, "grant": verdict.grant},
        )

    def _judge(self, action: ExecutionAction) -> CommandVerdict:
        kind = action.kind
        cwd_value = action.metadata.get("cwd")
        base = cwd_value if isinstance(cwd_value, str) else None
        resolved = [self.roots.resolve(path, base=base) for path in action.paths]
        for verdict in resolved:
            if not verdict.inside:
                return CommandVerdict(
                    outcome="deny",
                    reason=f"{kind} of {verdict.path!r} denied: {verdict.reason}",
                    details={
                        "kind": kind,
                        "path": verdict.path,
                        "real": verdict.real,
                        "check": "path",
                    },
                )
        if kind == "shell":
            return self._judge_shell(action, resolved[0].real if resolved else None)
        paths = list(action.paths)
        if kind in WRITE_KINDS:
            if self.read_only:
                return CommandVerdict(
                    outcome="deny",
                    reason=f"{kind} of {', '.join(map(repr, paths))} denied: the policy is "
                    "read-only",
                    details={"kind": kind, "paths": paths, "read_only": True},
                )
            for path, target in zip(paths, resolved, strict=True):
                relative = (target.real or "")[len(target.root or "") :].lstrip("/")
                if in_git_directory(relative.split("/")):
                    return CommandVerdict(
                        outcome="deny",
                        reason=f"{kind} of {path!r} denied: the write and edit tools never "
                        "write a .git file or inside a .git directory (git decides from them "
                        "which repository it uses and what it runs)",
                        details={"kind": kind, "paths": paths, "check": "git_directory"},
                    )
                entry = self.protected.match("/" + relative) if relative else None
                if entry is None and isinstance(path, str):
                    # the path as named: a link whose own name is protected leads there
                    named = os.path.join(base or self.roots.paths[0], path)
                    entry = protected_link_on_the_way(named, self.roots, self.protected)
                if entry is None and relative and target.root is not None:
                    entry = self._implied(target.root, relative)
                if entry is not None:
                    return CommandVerdict(
                        outcome="ask",
                        reason=f"{kind} of {path!r}: a protected path ({entry}) that can run "
                        "commands later, outside any gate",
                        details={
                            "kind": kind,
                            "paths": paths,
                            "protected": entry,
                            "check": "protected",
                        },
                    )
            return CommandVerdict(
                outcome="allow",
                reason=f"{kind} inside the roots",
                details={"kind": kind, "paths": paths},
            )
        if kind in READ_KINDS:
            return CommandVerdict(
                outcome="allow",
                reason=f"{kind} inside the roots",
                details={"kind": kind, "paths": paths},
            )
        return CommandVerdict(
            outcome="ask",
            reason=f"{kind!r} actions are not known to the coding policy",
            details={"kind": kind, "paths": paths},
        )

    def warm(self) -> None:
        """Start finding what each root's own files make protected, on a thread of its own.

        The write tool's first check in a root then waits for that walk in a worker
        thread, not walking the root itself (see :func:`._implied.implied_protected`);
        later ones answer from the walk's cache at once. Not waited for
        (:func:`._implied.warm_in_background`).
        """
        if not self.read_only:
            warm_in_background(self.roots.paths, self.protected)

    def _implied(self, root: str, relative: str) -> str | None:
        """What the root's own files make protected at ``relative``, as the copy-back sees it.

        A bare repository's configuration, a virtual environment's interpreter and
        packages, the hooks directory git names (see :func:`._implied.implied_protected`).
        """
        try:
            anchored = implied_protected(root, self.protected)
        except SandboxUnavailableError as exc:
            return f"what the root's repositories name is unknown: {exc}"
        # as a case-insensitive file system compares names; an entry may be a pattern
        return AnchoredPaths.of(anchored).covers(fold_parts(relative.split("/")))

    def _judge_shell(self, action: ExecutionAction, real_cwd: str | None) -> CommandVerdict:
        if not action.paths:
            return CommandVerdict(
                outcome="deny",
                reason="shell action denied: it names no working directory",
                details={"kind": "shell"},
            )
        cwd = real_cwd or self.roots.paths[0]
        command = action.command
        if not isinstance(command, str):
            return CommandVerdict(
                outcome="deny",
                reason=f"shell action denied: the command is {command!r}, not a string",
                details={"kind": "shell"},
            )
        child_path = action.metadata.get("env_path")
        # the HOME the command gets: bash expands a `~` at the start of a PATH entry with it
        child_home = action.metadata.get("env_home", _THIS_HOME)
        explanation = self.explain(
            command,
            cwd,
            child_path if isinstance(child_path, str) else None,
            child_home if isinstance(child_home, str) or child_home is None else _THIS_HOME,
        )
        details: dict[str, object] = {
            "kind": "shell",
            "command": command,
            "rule": explanation.rule,
            "commands": [c.to_json() for c in explanation.commands],
        }
        if self.sandbox is not None:
            # the ledger records the sandbox's name, so it carries the mode too
            confines = self._confines()
            details["mode"] = "confined" if confines else "proved-safe"
            details["sandbox"] = (
                self.sandbox_name if confines else f"{self.sandbox_name} (proved-safe)"
            )
        reason = f"command {command!r}: {explanation.reason}"
        # a network command whose argv names no host: approving it opens no network
        unnamed = next((c.reason for c in explanation.commands if c.rule == UNNAMED), "")
        if unnamed:
            details["network"] = unnamed
            reason += f"; {unnamed}"
        if explanation.execute is not None and action.metadata.get("env_posixly_correct") is True:
            # the models read options as GNU getopt does by default: with POSIXLY_CORRECT
            # every word after the first operand is an operand (`head f -n /etc/x`)
            return CommandVerdict(
                outcome="ask",
                reason=f"{reason}; but the command's environment sets POSIXLY_CORRECT, "
                "so its programs would read their options otherwise than proved",
                details=details,
            )
        if explanation.execute is not None:
            details["proved"] = True
            details["execute"] = explanation.execute
            details["argvs"] = [list(a) for a in explanation.argvs]
            return CommandVerdict(
                outcome="allow",
                reason=reason,
                details=details,
                execute=explanation.execute,
                # only a sandbox has a use for it (it binds the roots read-only)
                writes_nothing=self.sandbox is not None and not explanation.writes,
            )
        if explanation.confined:
            details["confined"] = True
            if explanation.write_dirs is not None:
                # what the sandbox's private layer covers; the rest of the roots is read-only
                details["write_dirs"] = list(explanation.write_dirs)
            return CommandVerdict(
                outcome="allow",
                reason=f"command {command!r} runs confined in the {self.sandbox_name} "
                f"sandbox ({explanation.reason})" + (f"; {unnamed}" if unnamed else ""),
                details=details,
                write_dirs=explanation.write_dirs,
                redirected=explanation.redirected,
                # with POSIXLY_CORRECT, sed would read a word after a file as a file
                in_place=explanation.in_place
                if action.metadata.get("env_posixly_correct") is not True
                else None,
            )
        if self.sandbox is not None and explanation.outcome == "ask":
            confines = self._confines()
            needs = needs_of(explanation.commands, self.roots, confines=confines)
            if confines or needs:
                details["escalation"] = True
                details["rule"] = explanation.rule
            blocked = ungrantable(needs, self.sandbox, self.roots)
            if blocked is not None:
                # approving it would change nothing: the sandbox would still refuse the
                # access, so nobody is asked; the refusal says why
                need, why = blocked
                details["access"] = need.words
                return CommandVerdict(
                    outcome="deny",
                    reason=f"command {command!r} needs access the {self.sandbox_name} "
                    f"sandbox cannot grant, even approved: to {need.words} ({why}); it is "
                    "not asked; "
                    + (
                        "run it outside the sandbox"
                        if need.kind in ("direct", "network")
                        else "make this change outside the sandbox"
                    ),
                    details=details,
                )
            if needs:
                words = access_words(needs)
                grant = grant_of(needs)
                details["access"] = words
                details["grant"] = {
                    "protected_writes": list(grant.protected_writes),
                    "outside_writes": list(grant.outside_writes),
                    "hosts": list(grant.hosts),
                }
                return CommandVerdict(
                    outcome="ask",
                    reason=f"command {command!r} needs more than the sandbox allows: "
                    f"{explanation.reason}; approving it lets this one call {words}, which "
                    "the sandbox would otherwise refuse",
                    details=details,
                    grant=grant,
                    access=words,
                )
            if confines:
                reason = (
                    f"command {command!r} needs more than the sandbox allows: {explanation.reason}"
                )
        return CommandVerdict(outcome=explanation.outcome, reason=reason, details=details)

    def _confines(self) -> bool:
        """Whether the policy is in confined mode.

        A backend that cannot keep protected paths (Landlock) leaves the policy in
        proved-safe mode: what is not proved safe asks, as without a sandbox.
        """
        return self.sandbox is not None and getattr(self.sandbox, "confines", True) is True

    def explain(
        self,
        command: str,
        cwd: str,
        child_path: str | None = None,
        child_home: str | object | None = _THIS_HOME,
    ) -> CommandExplanation:
        """Judge ``command`` run in ``cwd`` (a real directory) with ``PATH=child_path``.

        ``child_path`` is the ``PATH`` the command will get (the shell tool's
        environment); None means this process's own. ``child_home`` is the
        ``HOME`` it will get (None: unset, bash then takes the user's home from
        the password database); by default this process's own.
        """
        path = os.environ.get("PATH", "") if child_path is None else child_path
        if child_home is _THIS_HOME:
            child_home = os.environ.get("HOME")
        home = child_home if isinstance(child_home, str) else _user_home()
        explanation = judge_command(
            command,
            roots=self.roots,
            rules=self.rules,
            protected=self.protected,
            cwd=cwd,
            read_only=self.read_only,
            readable=self.readable,
            shadow_dirs=_shadow_dirs(self.roots, path, home),
        )
        if self.sandbox is not None and explanation.outcome == "ask":
            reached = network_checks(explanation.commands, self.sandbox)
            if reached:
                explanation = attrs.evolve(explanation, commands=(*explanation.commands, *reached))
        if not self._confines() or explanation.outcome != "ask":
            return explanation
        blocking = [c for c in explanation.commands
                    if c.verdict == "ask" and not _confinable(c.rule)]  # fmt: skip
        if not blocking:
            return attrs.evolve(
                explanation,
                outcome="allow",
                confined=True,
                reason=f"not proved safe: {explanation.reason}",
            )
        first = blocking[0]
        return attrs.evolve(
            explanation, reason=f"{' '.join(first.argv)!r}: {first.reason}", rule=first.rule
        )


# What a sandbox confines: a part that asks only for one of these runs confined unasked.
# Not confinable: an uncertain parse (deny rules may not have seen everything), writes
# outside the roots or to protected paths, read-only mode, the host's own ask rules.
_CONFINABLE_RULES = frozenset(
    {"unknown-program", "path-qualified", "dynamic", "assignment", "function", "background",
     "path:read", "write", "path_shadow", "grammar", UNNAMED}
)  # fmt: skip


def _spawn_metadata(action: ExecutionAction, verdict: CommandVerdict) -> dict[str, object] | None:
    if verdict.writes_nothing:
        return {**action.metadata, "writes_nothing": True}
    if verdict.write_dirs:
        metadata: dict[str, object] = {**action.metadata, "write_dirs": list(verdict.write_dirs)}
        if verdict.redirected is not None:
            command, targets = verdict.redirected
            metadata["redirected"] = {
                "command": command,
                "targets": [[fd, path, append] for fd, path, append in targets],
            }
        if verdict.in_place is not None:
            argv, files, suffix = verdict.in_place
            metadata["in_place"] = {"filter": list(argv), "files": list(files), "suffix": suffix}
        return metadata
    return None


def _confinable(rule: str) -> bool:
    return rule in _CONFINABLE_RULES or rule.startswith("model:")


def _cache_key(action: ExecutionAction) -> _CacheKey:
    return (action.kind, action.operation, action.command, tuple(action.paths))


# the first character of a shadow entry bash takes from its directory stack or OLDPWD
UNKNOWN_ENTRY = "\0"


def _user_home() -> str:
    """The home bash gives ``~`` when ``HOME`` is unset: the password database's."""
    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:  # pragma: no cover - a user without an entry
        return "/"


def path_entry(entry: str, home: str) -> str | None:
    """``PATH``'s ``entry`` as bash searches it; None when it depends on the directory stack.

    Bash (not ``execvp``) expands a tilde prefix of each entry as it searches
    (``PATH='~/bin'`` as written, quoted): ``~`` is ``home`` (an empty one
    makes ``~/bin`` ``/bin``), ``~user`` that user's home (an unknown user: the
    entry as written, relative), ``~+`` and ``~0`` the working directory (``.``);
    ``~-`` (``OLDPWD``) and the other directory-stack forms are not known here.
    """
    if not entry.startswith("~"):
        return entry
    prefix, slash, rest = entry[1:].partition("/")
    if prefix == "":
        base = home
    elif prefix in ("+", "0", "+0"):
        return rest or "."  # relative: below each directory the line may be in
    elif prefix[0] in "+-" or prefix[0].isdigit():
        return None
    else:
        try:
            base = pwd.getpwnam(prefix).pw_dir
        except KeyError:
            return entry  # no such user: bash keeps the entry as written
    return base + slash + rest


def _shadow_dirs(roots: Roots, path: str, home: str) -> tuple[str, ...]:
    """Entries of ``path`` through which a file inside the roots could run as a program name.

    Found again for each line (never cached): an entry leads where its links lead
    now, and a link in a root (``.venv`` to a directory outside) may have been
    replaced by a real directory since.

    A relative entry is kept as written (an empty one as ``.``) and resolved
    against each directory the line may be in when a command is judged
    (``./node_modules/.bin`` after ``cd pkg`` is ``pkg/node_modules/.bin``).
    A tilde prefix is expanded as bash expands it (:func:`path_entry`, ``~``
    with ``home``); an entry whose directory is not known here is kept as
    :data:`UNKNOWN_ENTRY`, the entry and the absolute entries before it, each
    after a NUL (a program found in one of those never reaches it).
    """
    found: list[str] = []
    before: list[str] = []
    for written in path.split(os.pathsep):
        entry = path_entry(written, home)
        if entry is None:
            found.append(UNKNOWN_ENTRY + UNKNOWN_ENTRY.join([written, *before]))
            continue
        if not entry.startswith("/"):
            relative = entry or "."
            if relative not in found:
                found.append(relative)
            continue
        before.append(entry)
        real = os.path.realpath(entry)
        if roots.contains_real(real) and real not in found:
            found.append(real)
    return tuple(found)


def _readable(owner: str, value: Sequence[str]) -> tuple[str, ...]:
    sequence_of(string() | instance_of(os.PathLike, description="a path")).check(
        owner, "readable", value
    )
    out: list[str] = []
    for item in value:
        text = os.fspath(item)
        if not isinstance(text, str) or "\x00" in text or not os.path.isabs(text):
            raise ConfigurationError(
                f"{owner}.readable entries must be absolute paths, got {item!r}",
                option=f"{owner}.readable",
                value=value,
            )
        out.append(os.path.realpath(text))
    return tuple(out)


_SANDBOX = optional(instance_of(SandboxBackend, description="a SandboxBackend"))
_RULES = optional(instance_of(CommandRules))


def _build(
    roots: Sequence[str],
    approve: ApprovalCallback | None,
    read_only: bool,
    command_rules: CommandRules | None,
    approval_timeout_s: float,
    cache_approvals: bool,
    readable: Sequence[str],
    protected_paths: Sequence[str] | None,
    sandbox: SandboxBackend | None = None,
    *,
    owner: str = "create_coding_approval_policy",
) -> _CodingApprovalPolicy:
    real_roots = normalize_roots(roots, owner=owner)
    _SANDBOX.check(owner, "sandbox", sandbox)
    optional(callable_value()).check(owner, "approve", approve)
    _RULES.check(owner, "command_rules", command_rules)
    number(minimum=0, above=True).check(owner, "approval_timeout_s", approval_timeout_s)
    boolean().check(owner, "read_only", read_only)
    boolean().check(owner, "cache_approvals", cache_approvals)
    if command_rules is None:
        command_rules = CommandRules()
    root_set = Roots(real_roots)
    return _CodingApprovalPolicy(
        roots=root_set,
        rules=CompiledRules.build(command_rules),
        approve=approve,
        read_only=read_only,
        timeout_s=float(approval_timeout_s),
        cache_approvals=cache_approvals,
        readable=_readable(owner, readable),
        protected=ProtectedPaths(
            (
                *normalize_protected_paths(protected_paths, option=f"{owner}.protected_paths"),
                *environment_patterns(),  # relative PATH (and search) entries, at any depth
            )
        ),
        sandbox=sandbox,
        sandbox_name="" if sandbox is None else type(sandbox).__name__,
    )


def create_coding_approval_policy(
    *,
    roots: Sequence[str],
    approve: ApprovalCallback | None = None,
    read_only: bool = False,
    command_rules: CommandRules | None = None,
    approval_timeout_s: float = 300.0,
    cache_approvals: bool = True,
    readable: Sequence[str] = (),
    protected_paths: Sequence[str] | None = None,
    sandbox: SandboxBackend | None = None,
) -> ExecutionPolicy:
    """The execution policy that makes the coding tools safe to hand to a model.

    Every path of an action must resolve (realpath) inside one of ``roots``.
    A shell command runs without approval only when it is *proved safe*:
    parsed into every simple command it would run (pipelines, lists, ``{ }``,
    ``( )``, loops, ``$( )``, backticks, ``<( )``), each word expanded the way
    bash would (quotes, braces, ``~``/``~user``, globs against the real file
    system), wrappers (``env``, ``timeout``, ``nice``, ``sh -c``...) unwrapped
    through their grammar, and every resulting command either a program of the
    safe set whose options and operands its model accepts, or matched by an
    allow rule; every path it reads inside the roots or ``readable``; and no
    file written (a shell write asks even inside the roots, also for a command
    an allow rule covers: the write and edit tools write files unasked).
    Anything else asks. Deny rules (``command_rules``
    and the defaults) win over everything, an approver's yes included. Writes
    by the write and edit tools to a protected path (:data:`PROTECTED_PATHS`
    plus ``protected_paths``) always ask. ``read_only=True`` denies the write
    and edit tools.

    **Confined mode.** With ``sandbox=backend`` (the same backend the shell
    tool runs its commands in, e.g. through
    :func:`create_sandbox_shell_operations`), a command that is not proved
    safe still runs without asking when everything it asks for is something
    the sandbox confines: an unknown program, a code-running option, a
    write inside the roots, a read anywhere. It still asks (and an approved
    one is recorded with ``details["escalation"]``) when it writes outside
    the roots or to a protected path, when the line cannot be parsed with
    confidence, in read-only mode, or when an ask rule matches; deny rules
    still deny. ``details["confined"]`` marks a decision made this way. A
    backend whose ``confines`` attribute is False (:class:`LandlockSandbox`:
    it cannot keep protected paths inside a writable root) gives no confined
    mode: the policy stays proved-safe-only. Shell decisions record
    ``details["sandbox"]`` and ``details["mode"]`` (``"confined"`` or
    ``"proved-safe"``). A part needing access the backend never grants, even
    approved (its ``withholds`` rules: for :class:`BubblewrapSandbox` a write to
    a protected path, whose change it leaves out), is denied without asking,
    and the reason says so.

    Needing approval means calling ``approve(action)`` (sync or async) and
    waiting at most ``approval_timeout_s`` seconds: a timeout denies (reason and
    ``details["approval"]`` say ``timed_out``), an exception from the approver
    denies, and cancelling the caller cancels the wait. With ``approve=None``
    anything that needs approval is denied. Approvals are cached per exact
    action (kind, operation, command, paths) unless ``cache_approvals=False``
    or the approver answers ``ApprovalDecision(approved=True, remember=False)``.

    Decisions that need no approval are returned synchronously (no await).
    Relative paths resolve against ``action.metadata["cwd"]`` when it is a
    string, else against the first root. A shell decision's ``details`` carry
    ``commands``: each simple command with its verdict, reason and rule.

    Raises:
        ConfigurationError: a root is not an existing directory, ``approve`` is not
            callable, ``command_rules`` is not :class:`CommandRules` (or a rule's
            example contradicts it), ``approval_timeout_s`` is not a positive
            finite number, or a ``readable``/``protected_paths`` entry is unusable.
    """
    return _build(
        roots,
        approve,
        read_only,
        command_rules,
        approval_timeout_s,
        cache_approvals,
        readable,
        protected_paths,
        sandbox,
    )


def explain_command(
    command: str,
    *,
    roots: Sequence[str],
    cwd: str | None = None,
    read_only: bool = False,
    command_rules: CommandRules | None = None,
    readable: Sequence[str] = (),
    protected_paths: Sequence[str] | None = None,
    sandbox: SandboxBackend | None = None,
) -> CommandExplanation:
    """Why the coding policy built with the same options would allow, ask about or deny ``command``.

    ``cwd`` defaults to the first root. The result lists every simple command
    (and every layer a wrapper or ``sh -c`` runs) with its verdict, reason and
    the rule or model that decided it; ``prism policy check`` prints it. An
    allowed line carries what would run: ``execute`` and ``argvs`` (rebuilt
    from what was proved), or ``confined`` (with ``sandbox``, the policy's
    confined mode: it runs as written, inside the sandbox).

    Raises:
        ConfigurationError: as :func:`create_coding_approval_policy`, or ``cwd``
            is not inside a root.
    """
    owner = "explain_command"
    policy = _build(
        roots,
        None,
        read_only,
        command_rules,
        300.0,
        True,
        readable,
        protected_paths,
        sandbox,
        owner=owner,
    )
    string(non_empty=False).check(owner, "command", command)
    where = policy.roots.paths[0] if cwd is None else os.path.realpath(os.fspath(cwd))
    if not policy.roots.contains_real(where):
        raise ConfigurationError(
            f"{owner}.cwd must lie inside a root, got {cwd!r}", option=f"{owner}.cwd", value=cwd
        )
    return policy.explain(command, where)
