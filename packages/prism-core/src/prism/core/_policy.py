"""Permission policies (name based) and execution policies (structured actions)."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from fnmatch import translate
from typing import Literal, Protocol, runtime_checkable

import attrs

from ._errors import ConfigurationError, ExecutionDeniedError, PermissionDeniedError
from ._host_calls import await_callback
from ._ledger_decision import note_execution_decision
from ._options import one_of, sequence_of, string

__all__ = [
    "ExecutionAction",
    "ExecutionDecision",
    "ExecutionPolicy",
    "PermissionDecision",
    "PermissionPolicy",
    "PermissionRequest",
    "assert_execution_allowed",
    "assert_permission",
    "create_rule_permission_policy",
]


@attrs.frozen(kw_only=True)
class PermissionRequest:
    """Asks whether ``kind:target:action`` is allowed (for example ``tool:read:execute``)."""

    kind: str
    target: str
    action: str

    @functools.cached_property
    def key(self) -> str:
        """The ``kind:target:action`` string rules are matched against."""
        return f"{self.kind}:{self.target}:{self.action}"


@attrs.frozen(kw_only=True)
class PermissionDecision:
    """A permission policy's answer."""

    allowed: bool
    reason: str | None = None


@runtime_checkable
class PermissionPolicy(Protocol):
    """Decides name-based permission requests; ``check`` may be sync or async."""

    def check(
        self, request: PermissionRequest
    ) -> PermissionDecision | Awaitable[PermissionDecision]:
        """Decide ``request``."""
        ...


_GLOBS = sequence_of(string())


def _compile_globs(name: str, patterns: Iterable[str]) -> re.Pattern[str] | None:
    # A lone string is refused rather than read as one pattern per character.
    if isinstance(patterns, Iterable) and not isinstance(patterns, (str, bytes)):
        patterns = tuple(patterns)
    items = _GLOBS.check("create_rule_permission_policy", name, patterns)
    if not items:
        return None
    return re.compile("|".join(f"(?:{translate(item)})" for item in items))


@attrs.define(eq=False)
class _RulePermissionPolicy:
    _allow: re.Pattern[str] | None
    _deny: re.Pattern[str] | None
    _default: bool
    # The policy is immutable, so a key's decision never changes.
    _decided: Callable[[str], PermissionDecision] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._decided = functools.lru_cache(maxsize=4096)(self._decide)

    def check(self, request: PermissionRequest) -> PermissionDecision:
        return self._decided(request.key)

    def _decide(self, key: str) -> PermissionDecision:
        if self._deny is not None and self._deny.match(key):
            return PermissionDecision(allowed=False, reason=f"{key} matches a deny rule")
        if self._allow is not None and self._allow.match(key):
            return PermissionDecision(allowed=True)
        if self._default:
            return PermissionDecision(allowed=True)
        return PermissionDecision(allowed=False, reason=f"{key} matches no allow rule")


def create_rule_permission_policy(
    *,
    allow: Iterable[str] = (),
    deny: Iterable[str] = (),
    default: Literal["allow", "deny"] = "deny",
) -> PermissionPolicy:
    """A policy of glob rules over ``kind:target:action`` keys.

    Deny rules win over allow rules; a key that matches neither gets ``default``.
    ``*`` matches any run of characters, colons included, so
    ``"tool:mcp:*:execute"`` covers every MCP tool.

    Decisions are cached per key (the policy is immutable), so checking is a
    dictionary lookup after the first call. ``check`` is synchronous.

    Raises:
        ConfigurationError: ``allow`` or ``deny`` is not an iterable of non-empty
            strings, or ``default`` is not ``"allow"``/``"deny"``.
    """
    one_of("allow", "deny").check("create_rule_permission_policy", "default", default)
    return _RulePermissionPolicy(
        _compile_globs("allow", allow), _compile_globs("deny", deny), default == "allow"
    )


async def assert_permission(policy: PermissionPolicy | None, request: PermissionRequest) -> None:
    """Raise :class:`PermissionDeniedError` unless ``policy`` allows ``request``.

    ``None`` allows everything. Checkpoints only when the policy's ``check`` is
    async; cancelling the caller cancels that check (:class:`trio.Cancelled`
    propagates). Exceptions raised by the policy propagate unchanged.

    Raises:
        PermissionDeniedError: the policy refused, or answered with something
            that is not a :class:`PermissionDecision` (fail closed).
    """
    if policy is None:
        return
    check = policy.check
    decision = check(request)
    if inspect.isawaitable(decision):
        decision = await await_callback(check, decision)
    if not isinstance(decision, PermissionDecision):
        # Fail closed: an answer we cannot read is not a yes.
        raise PermissionDeniedError(
            request.key,
            f"the policy returned {type(decision).__name__}, not a PermissionDecision",
        )
    if not decision.allowed:
        raise PermissionDeniedError(request.key, decision.reason)


def _paths(value: Iterable[str]) -> tuple[str, ...]:
    # A lone string would otherwise become a tuple of one-character "paths".
    if isinstance(value, (str, bytes)):
        raise ConfigurationError(
            f"ExecutionAction.paths must be a sequence of paths, got {value!r}",
            option="ExecutionAction.paths",
            value=value,
        )
    items = tuple(value)
    for item in items:
        if not isinstance(item, str):
            raise ConfigurationError(
                f"ExecutionAction.paths must be strings, got {item!r}",
                option="ExecutionAction.paths",
                value=value,
            )
    return items


@attrs.frozen(kw_only=True)
class ExecutionAction:
    """A side effect a tool is about to perform, described for an execution policy.

    Attributes:
        kind: what sort of action (``shell``, ``read``, ``write``, ``edit``, ...).
        operation: the specific operation (often the tool name).
        paths: the paths the action touches, as the tool resolved them.
        command: the command line, for shell actions.
        risk: the tool's own estimate.
        metadata: anything else the policy may use.
    """

    kind: str
    operation: str
    paths: tuple[str, ...] = attrs.field(default=(), converter=_paths)
    command: str | None = None
    risk: Literal["low", "medium", "high"] | None = None
    metadata: Mapping[str, object] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ExecutionDecision:
    """An execution policy's answer.

    Attributes:
        allowed: whether the action may run.
        reason: why not (or why, for the record).
        modified: fields of :class:`ExecutionAction` to replace before running.
        exclusive: the action must not run beside others.
        details: structured facts about the decision (for events and the ledger).
    """

    allowed: bool
    reason: str | None = None
    modified: Mapping[str, object] | None = None
    exclusive: bool = False
    details: Mapping[str, object] = attrs.field(factory=dict)


@runtime_checkable
class ExecutionPolicy(Protocol):
    """Decides structured actions; ``check`` may be sync or async."""

    def check(self, action: ExecutionAction) -> ExecutionDecision | Awaitable[ExecutionDecision]:
        """Decide ``action``."""
        ...


_ACTION_FIELDS = frozenset(field.name for field in attrs.fields(ExecutionAction))


async def assert_execution_allowed(
    policy: ExecutionPolicy | None, action: ExecutionAction
) -> ExecutionAction:
    """Check ``action`` against ``policy`` and return it with ``modified`` applied.

    ``None`` allows everything. Checkpoints only when the policy's ``check`` is
    async; cancelling the caller cancels that check (:class:`trio.Cancelled`
    propagates). Exceptions raised by the policy propagate unchanged.

    Raises:
        ExecutionDeniedError: the policy refused (``reason`` and ``details`` say
            why), or answered with something that is not an
            :class:`ExecutionDecision` (fail closed).
        ConfigurationError: the policy's ``modified`` names a field actions do
            not have, or gives a field a value it cannot take.
    """
    if policy is None:
        return action
    check = policy.check
    decision = check(action)
    if inspect.isawaitable(decision):
        decision = await await_callback(check, decision)
    if not isinstance(decision, ExecutionDecision):
        # Fail closed: an answer we cannot read is not a yes.
        why = f"the execution policy returned {type(decision).__name__}, not an ExecutionDecision"
        note_execution_decision(False, why, {})
        raise ExecutionDeniedError(why)
    # The ledger records what decided the call, approvals included.
    note_execution_decision(decision.allowed, decision.reason, decision.details)
    if not decision.allowed:
        raise ExecutionDeniedError(
            decision.reason or f"{action.kind} action denied by the execution policy",
            details=dict(decision.details),
        )
    if decision.modified:
        unknown = set(decision.modified) - _ACTION_FIELDS
        if unknown:
            raise ConfigurationError(
                f"execution policy modified unknown action fields: {sorted(unknown)}"
            )
        try:
            return attrs.evolve(action, **decision.modified)  # type: ignore[arg-type]
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(
                f"execution policy modified the action with a bad value: {exc}"
            ) from exc
    return action
