"""The coding approval policy: paths contained in roots, command rules, human approval."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence

import attrs
import trio

from prism.core import ConfigurationError, ExecutionAction, ExecutionDecision, ExecutionPolicy

from ._commands import parse_command
from ._paths import Roots, normalize_roots
from ._rules import CommandRules, CommandVerdict, CompiledRules, evaluate_command

__all__ = [
    "ApprovalCallback",
    "ApprovalDecision",
    "create_coding_approval_policy",
]

READ_KINDS = frozenset({"read", "list", "ls", "glob", "grep", "search", "find", "stat"})
WRITE_KINDS = frozenset({"write", "edit", "delete", "move", "mkdir", "create"})
_MAX_CACHED_APPROVALS = 1024


@attrs.frozen(kw_only=True)
class ApprovalDecision:
    """An approver's answer.

    Attributes:
        approved: whether the action may run.
        remember: cache this approval for the exact same action (when the policy caches).
        reason: shown to the model with a refusal.
    """

    approved: bool
    remember: bool = True
    reason: str | None = None


ApprovalCallback = Callable[[ExecutionAction], Awaitable["bool | ApprovalDecision"]]
"""``async def approve(action) -> bool | ApprovalDecision``; a bool means ``remember=True``."""

_CacheKey = tuple[str, str, str | None, tuple[str, ...]]


def _decision(
    allowed: bool, reason: str, details: dict[str, object], *, exclusive: bool = False
) -> ExecutionDecision:
    details = {"policy": "coding_approval", **details}
    details.setdefault("decision", "allowed" if allowed else "denied")
    return ExecutionDecision(allowed=allowed, reason=reason, details=details, exclusive=exclusive)


@attrs.define(eq=False)
class _CodingApprovalPolicy:
    roots: Roots
    rules: CompiledRules
    approve: ApprovalCallback | None
    read_only: bool
    timeout_s: float
    cache_approvals: bool
    _approved: dict[_CacheKey, None] = attrs.field(factory=dict)

    def check(self, action: ExecutionAction) -> ExecutionDecision | Awaitable[ExecutionDecision]:
        """Decide ``action``; returns a plain decision unless a human must be asked.

        Rule-based answers (allow or deny) are returned synchronously, so the
        caller never awaits more than its own checkpoint for them. Only an
        action that needs approval returns an awaitable, which waits for the
        approver for at most ``approval_timeout_s``.
        """
        verdict = self._judge(action)
        exclusive = action.kind == "shell"
        if verdict.outcome == "allow":
            return _decision(True, verdict.reason, verdict.details, exclusive=exclusive)
        if verdict.outcome == "deny":
            return _decision(False, verdict.reason, verdict.details, exclusive=exclusive)
        key = _cache_key(action)
        if self.cache_approvals and key in self._approved:
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
                answer = await self.approve(action)
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
        if self.cache_approvals and answer.remember:
            if len(self._approved) >= _MAX_CACHED_APPROVALS:
                del self._approved[next(iter(self._approved))]
            self._approved[key] = None
        return _decision(
            True,
            f"{verdict.reason}; approved",
            {**details, "approval": "approved", "decision": "approved",
             "remembered": self.cache_approvals and answer.remember},
            exclusive=exclusive,
        )  # fmt: skip

    def _judge(self, action: ExecutionAction) -> CommandVerdict:
        kind = action.kind
        cwd_value = action.metadata.get("cwd")
        base = cwd_value if isinstance(cwd_value, str) else None
        for path in action.paths:
            verdict = self.roots.resolve(path, base=base)
            if not verdict.inside:
                return CommandVerdict(
                    outcome="deny",
                    reason=f"{kind} of {verdict.path!r} denied: {verdict.reason}",
                    details={"kind": kind, "path": verdict.path, "real": verdict.real,
                             "check": "path"},
                )  # fmt: skip
        if kind == "shell":
            if not action.paths:
                return CommandVerdict(
                    outcome="deny",
                    reason="shell action denied: it names no working directory",
                    details={"kind": kind},
                )
            cwd = self.roots.resolve(action.paths[0], base=base).real or self.roots.paths[0]
            command = action.command
            if not isinstance(command, str):
                return CommandVerdict(
                    outcome="deny",
                    reason=f"shell action denied: the command is {command!r}, not a string",
                    details={"kind": kind},
                )
            judged = evaluate_command(
                parse_command(command), self.rules, roots=self.roots, cwd=cwd,
                read_only=self.read_only,
            )  # fmt: skip
            return attrs.evolve(judged, details={"kind": kind, **judged.details})
        paths = list(action.paths)
        if kind in WRITE_KINDS:
            if self.read_only:
                return CommandVerdict(
                    outcome="deny",
                    reason=f"{kind} of {', '.join(map(repr, paths))} denied: the policy is "
                    "read-only",
                    details={"kind": kind, "paths": paths, "read_only": True},
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


def _cache_key(action: ExecutionAction) -> _CacheKey:
    return (action.kind, action.operation, action.command, tuple(action.paths))


def create_coding_approval_policy(
    *,
    roots: Sequence[str],
    approve: ApprovalCallback | None = None,
    read_only: bool = False,
    command_rules: CommandRules | None = None,
    approval_timeout_s: float = 300.0,
    cache_approvals: bool = True,
) -> ExecutionPolicy:
    """The execution policy that makes the coding tools safe to hand to a model.

    Every path of an action must resolve (realpath) inside one of ``roots``.
    Shell commands are parsed into simple commands and judged by
    ``command_rules`` (deny wins, then ask, then allow); a plain command with
    no shell metacharacters that matches no deny or ask rule runs; anything
    with chaining, substitution, redirection or newlines needs approval unless
    every simple command matches an allow rule; a command that cannot be
    parsed with confidence always needs approval. ``read_only=True`` denies
    writes and edits and lets only known read-only commands run unasked.

    Needing approval means awaiting ``approve(action)`` for at most
    ``approval_timeout_s`` seconds: a timeout denies (reason and
    ``details["approval"]`` say ``timed_out``), an exception from the approver
    denies, and cancelling the caller cancels the wait. With ``approve=None``
    anything that needs approval is denied. Approvals are cached per exact
    action (kind, operation, command, paths) unless ``cache_approvals=False``
    or the approver answers ``ApprovalDecision(approved=True, remember=False)``.

    Decisions that need no approval are returned synchronously (no await).
    Relative paths resolve against ``action.metadata["cwd"]`` when it is a
    string, else against the first root.

    Raises:
        ConfigurationError: a root is not an existing directory, ``approve`` is not
            callable, ``command_rules`` is not :class:`CommandRules`, or
            ``approval_timeout_s`` is not a positive finite number.
    """
    real_roots = normalize_roots(roots)
    if approve is not None and not callable(approve):
        raise ConfigurationError(f"approve must be an async callable or None, got {approve!r}")
    if command_rules is None:
        command_rules = CommandRules()
    if not isinstance(command_rules, CommandRules):
        raise ConfigurationError(
            f"command_rules must be a CommandRules or None, got {command_rules!r}"
        )
    if (
        isinstance(approval_timeout_s, bool)
        or not isinstance(approval_timeout_s, (int, float))
        or not math.isfinite(approval_timeout_s)
        or approval_timeout_s <= 0
    ):
        raise ConfigurationError(
            f"approval_timeout_s must be a positive finite number, got {approval_timeout_s!r}"
        )
    for name, flag in (("read_only", read_only), ("cache_approvals", cache_approvals)):
        if not isinstance(flag, bool):
            raise ConfigurationError(f"{name} must be a bool, got {flag!r}")
    return _CodingApprovalPolicy(
        roots=Roots(real_roots),
        rules=CompiledRules.build(command_rules),
        approve=approve,
        read_only=read_only,
        timeout_s=float(approval_timeout_s),
        cache_approvals=cache_approvals,
    )
