"""Approval asked of the connected MCP client (elicitation), else of a configured approver."""

from __future__ import annotations

import contextvars
import hmac
import inspect
import json
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs
import trio

from prism.coding.security import ApprovalDecision
from prism.core.options import boolean, callable_value, optional, sequence_of, string
from prism.core.text import NAME_LIMIT, clip, escape_controls

from ._rounds import UnansweredError, ask_apart

if TYPE_CHECKING:
    from prism.core import ExecutionAction

__all__ = [
    "APPROVAL_INPUT_KEY",
    "MAX_QUESTIONS_PER_PRINCIPAL",
    "QUESTION_TTL_S",
    "CallScope",
    "Eviction",
    "GatewayApprover",
    "OpenQuestions",
    "StaleStateError",
    "approval_request",
    "create_command_approver",
    "create_gateway_approver",
    "current_call",
    "principal_of",
]

APPROVAL_INPUT_KEY = "prism-approval"

GatewayApprover = Callable[
    ["ExecutionAction"], "bool | ApprovalDecision | Awaitable[bool | ApprovalDecision]"
]
"""``approve(action) -> bool | ApprovalDecision``, sync or async: the fallback approver."""


_MAX_OPEN_QUESTIONS = 1024
MAX_QUESTIONS_PER_PRINCIPAL = 32
"""At most this many questions wait for one principal's retries (its oldest goes first)."""
QUESTION_TTL_S = 600.0
"""How long a question asked by ``input_required`` waits for the client's retry."""


class StaleStateError(Exception):
    """A retry's request state names no question open for its caller (why, in words)."""


def principal_of(client: str) -> str:
    """The principal part of a client label (``<principal>/<name>/<session>``)."""
    return client.partition("/")[0]


Eviction = Literal["expired", "principal_cap", "global_cap"]
"""Why a waiting question was closed unanswered: its time ran out, or which cap pushed it out."""


@attrs.define(eq=False)
class OpenQuestions:
    """The questions asked by ``input_required`` and not answered yet (one gateway's).

    Each is known by an unguessable nonce (the request state, or its start),
    kept here with its owner (whom it was asked of, and for which call), a
    deadline and a value. One retry of its owner takes it, so an answer
    applies once; a retry of anyone else is refused and leaves it open;
    after ``ttl_s`` it is closed as expired. One principal has at most
    ``per_principal`` open: past that its own oldest is pushed out, never
    another's. Past ``limit`` in all, an expired question goes first, else
    the oldest of the principal holding the most, so many principals
    together can push out only the largest holder's questions.

    ``closed(value, why, reason)`` is called with each question closed
    unanswered (``why``: an :data:`Eviction`; ``reason``: the same in words),
    and its owner's retry is told that reason (once; the latest ``limit``
    closed questions are remembered).
    """

    ttl_s: float = QUESTION_TTL_S
    limit: int = _MAX_OPEN_QUESTIONS
    per_principal: int = MAX_QUESTIONS_PER_PRINCIPAL
    closed: Callable[[Any, Eviction, str], None] | None = None
    # nonce -> (owner, deadline, value, principal), oldest first
    _asked: OrderedDict[str, tuple[str, float, Any, str]] = attrs.field(factory=OrderedDict)
    # principal -> how many of its questions are open
    _held: dict[str, int] = attrs.field(factory=dict)
    # nonce -> (owner, why in words) of the latest questions closed unanswered
    _gone: OrderedDict[str, tuple[str, str]] = attrs.field(factory=OrderedDict)

    def open(self, owner: str, value: Any, principal: str) -> str:
        """A fresh nonce for a question asked of ``owner`` (``value``: what to keep with it)."""
        if self._held.get(principal, 0) >= self.per_principal:
            oldest = next(n for n, entry in self._asked.items() if entry[3] == principal)
            self._close(oldest, "principal_cap")
        nonce = secrets.token_hex(16)
        self._asked[nonce] = (owner, trio.current_time() + self.ttl_s, value, principal)
        self._held[principal] = self._held.get(principal, 0) + 1
        while len(self._asked) > self.limit:
            self._close(*self._evictable())
        return nonce

    def _evictable(self) -> tuple[str, Eviction]:
        # Oldest first, so deadlines ascend too (one ttl_s): an expired question
        # is found before any live one of the largest holder.
        now = trio.current_time()
        most = max(self._held.values())
        for nonce, (_owner, deadline, _value, principal) in self._asked.items():
            if deadline < now:
                return nonce, "expired"
            if self._held[principal] == most:
                return nonce, "global_cap"
        raise AssertionError("a principal holds the most")  # pragma: no cover

    def take(self, nonce: str, owner: str) -> Any:
        """The question's value, once, for its owner.

        Raises:
            StaleStateError: no such question (never asked, or answered
                already), another owner's (left open), or closed unanswered
                (expired, or pushed out: the reason, told once).
        """
        entry = self._asked.get(nonce)
        if entry is None:
            gone = self._gone.get(nonce)
            if gone is not None and _same(gone[0], owner):
                del self._gone[nonce]
                raise StaleStateError(gone[1])
            raise StaleStateError("its question is unknown or was answered already")
        if not _same(entry[0], owner):
            raise StaleStateError("its question was asked of another client or for another call")
        if trio.current_time() > entry[1]:
            reason = self._close(nonce, "expired")
            self._gone.pop(nonce, None)  # told now, once
            raise StaleStateError(reason)
        return self._pop(nonce)

    def expire(self, nonce: str) -> bool:
        """Close the question as expired (its call stopped waiting); whether it was open."""
        if nonce not in self._asked:
            return False
        self._close(nonce, "expired")
        return True

    def _pop(self, nonce: str) -> Any:
        _owner, _deadline, value, principal = self._asked.pop(nonce)
        held = self._held[principal] - 1
        if held:
            self._held[principal] = held
        else:
            del self._held[principal]
        return value

    def _close(self, nonce: str, why: Eviction) -> str:
        """Close the question unanswered; the reason its owner's retry is told."""
        owner = self._asked[nonce][0]
        value = self._pop(nonce)
        reason = self.reason(why)
        self._gone[nonce] = (owner, reason)
        while len(self._gone) > self.limit:
            self._gone.popitem(last=False)
        if self.closed is not None:
            self.closed(value, why, reason)
        return reason

    def reason(self, why: Eviction) -> str:
        """Why a question was closed unanswered, in words."""
        if why == "expired":
            return f"its question expired ({self.ttl_s:g} s without a retry answering it)"
        if why == "principal_cap":
            return (
                f"its question was pushed out: its principal had {self.per_principal} "
                "questions waiting, the most allowed, and it was their oldest"
            )
        return (
            f"its question was pushed out: the gateway had {self.limit} questions waiting, "
            "the most allowed, and it was the oldest of the principal holding the most"
        )


def _same(kept: str, given: str) -> bool:
    return hmac.compare_digest(kept.encode("utf-8"), given.encode("utf-8"))


@attrs.define(kw_only=True, eq=False)
class CallScope:
    """The MCP request a gated call is serving (what the approver may ask through).

    On a 2026-07-28 connection a server cannot send the client a request in
    the middle of a call; the call then runs apart (``round``) and its
    questions go out as ``input_required``, the call waiting for the retry
    that answers them.
    """

    session: Any
    request_id: Any
    client: str
    tool_name: str
    modern: bool = False
    arguments: Any = None
    # The gated call's id (ToolCall.id), and the log levels its client may be sent.
    call_id: str | None = None
    log_levels: frozenset[str] = frozenset()
    # A 2026-07-28 client's call run apart: its server's questions go through it.
    round: Any = None
    # The concurrency slots the call holds while it runs (a CallSlots), let go while
    # it waits for its client's answer.
    slots: Any = None
    # Whether its server answered its request (a result, not a cancellation or a
    # timeout): a call that ends unanswered may still be running there.
    server_answered: bool = False
    # Where the call's progress goes: the session of the request now waiting for the
    # call when that request asked for progress (the first request, then each retry);
    # ``None`` while no such request waits (progress then reaches no client).
    progress: Any = None


current_call: contextvars.ContextVar[CallScope | None] = contextvars.ContextVar(
    "prism_gateway_call", default=None
)


def _access(action: ExecutionAction) -> str:
    """The extra access approving ``action`` grants, in words ("" when none)."""
    escalation = action.metadata.get("escalation")
    return escalation if isinstance(escalation, str) else ""


QUESTION_LIMIT = 8_000
"""Characters of an approval question: a command that does not fit whole is not asked about."""


def _describe(action: ExecutionAction, scope: CallScope) -> str | None:
    """The approval question about ``action``; None when its command cannot be shown whole.

    Every part a model chose is shown with its control characters escaped (a
    carriage return or an escape sequence after a ``#`` would redraw the
    question on a terminal). The access approving it grants comes first; the
    command comes last, whole: the head of a long command is where a model puts
    what looks harmless, so a command clipped to fit would ask about another.
    """
    name = escape_controls(clip(repr(scope.tool_name), NAME_LIMIT))
    parts = [f"Prism asks whether the tool {name} may {escape_controls(action.operation)}"]
    escalation = _access(action)
    if escalation:
        # the extra access approving it grants this one call (the sandbox refuses it otherwise)
        parts.append(f"approving it lets this one call {escape_controls(escalation)}, which "
                     "the sandbox would otherwise refuse")  # fmt: skip
    if action.risk is not None:
        parts.append(escape_controls(clip(f"risk: {action.risk}", 100)))
    if action.paths:
        parts.append(escape_controls(clip("paths: " + ", ".join(action.paths), 300)))
    head = "; ".join(parts)
    if action.command is None:
        return head
    question = f"{head}; the command: {escape_controls(action.command)}"
    return question if len(question) <= QUESTION_LIMIT else None


def _unshown(action: ExecutionAction) -> ApprovalDecision:
    return _refused(
        f"not asked: the command ({len(action.command or '')} characters) is too long to "
        f"show whole in an approval question (at most {QUESTION_LIMIT} characters with "
        "the question); run it in shorter calls"
    )


def declares_elicitation(capabilities: Any, mode: str) -> bool:
    """Whether a client that declared ``capabilities`` may be sent ``mode`` elicitations.

    An ``elicitation`` capability that names no mode means form only (a
    client from before URL mode); URL mode must be named.
    """
    declared = getattr(capabilities, "elicitation", None)
    if declared is None:
        return False
    form = getattr(declared, "form", None)
    url = getattr(declared, "url", None)
    if mode == "url":
        return url is not None
    return form is not None or url is None


def _declared_elicitation(scope: CallScope) -> bool:
    return declares_elicitation(scope.session.client_capabilities, "form")


def _can_elicit(scope: CallScope) -> bool:
    return _declared_elicitation(scope) and bool(scope.session.can_send_request)


def approval_request(action: ExecutionAction, scope: CallScope) -> dict[str, Any] | None:
    """The ``elicitation/create`` request (wire form) asking about ``action`` (None: unshown)."""
    message = _describe(action, scope)
    if message is None:
        return None
    return {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": message, "requestedSchema": _SCHEMA},
    }


def _answer(response: Any) -> ApprovalDecision:
    # An ElicitResult, or (from a hostile client) any other result type: then a no.
    action = getattr(response, "action", None)
    content = getattr(response, "content", None)
    if action == "accept" and isinstance(content, dict) and content.get("approve") is True:
        return ApprovalDecision(approved=True, remember=False, reason="approved by the client")
    why = "cancelled" if action == "cancel" else "declined"
    return ApprovalDecision(approved=False, remember=False, reason=f"{why} by the client")


def _refused(reason: str) -> ApprovalDecision:
    return ApprovalDecision(approved=False, remember=False, reason=reason)


async def _from_round(action: ExecutionAction, scope: CallScope) -> ApprovalDecision:
    # The call waits in the gateway while the client answers (see _rounds): a yes or a
    # no reaches this very call, so nothing it did before asking runs again.
    request = approval_request(action, scope)
    if request is None:
        return _unshown(action)
    try:
        answer = await ask_apart(scope, APPROVAL_INPUT_KEY, request, exact=True)
    except UnansweredError as exc:
        return _refused(f"approval was requested from the client: {exc}")
    return _answer(answer)


_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Approve",
            "description": "Let this one action run (it is not remembered).",
        }
    },
    "required": ["approve"],
}


async def _elicit(action: ExecutionAction, scope: CallScope) -> ApprovalDecision:
    message = _describe(action, scope)
    if message is None:
        return _unshown(action)
    try:
        result = await scope.session.elicit_form(
            message, _SCHEMA, related_request_id=scope.request_id
        )
    except Exception as exc:  # the client failed to answer: that is a no
        return ApprovalDecision(
            approved=False, remember=False, reason=f"the client did not answer: {exc}"
        )
    return _answer(result)


def create_gateway_approver(
    *, fallback: GatewayApprover | None = None, elicit: bool = True
) -> Callable[[ExecutionAction], Awaitable[ApprovalDecision]]:
    """An ``approve=`` callback for ``create_coding_approval_policy`` behind the gateway.

    During a call served by the gateway, an action that needs approval is put
    to the calling client as a form elicitation (one boolean, ``approve``)
    when that client declared the elicitation capability: as a server request
    where the connection can carry one (the 2025-11-25 era), else (2026-07-28)
    as an ``input_required`` answer that the client retries with its reply,
    bound to the client, the call and the action by an HMAC'd request state.
    Otherwise ``fallback`` decides (sync or
    async); with no fallback the action is denied. Decisions asked of a
    client are never remembered (``remember=False``), so one client's yes
    never lets another client's call through.

    Cancellation: cancelling the call cancels the pending question.

    Raises:
        ConfigurationError: ``fallback`` is given and is not callable, or
            ``elicit`` is not a bool.
    """
    optional(callable_value()).check("create_gateway_approver", "fallback", fallback)
    boolean().check("create_gateway_approver", "elicit", elicit)

    async def approve(action: ExecutionAction) -> ApprovalDecision:
        scope = current_call.get()
        if elicit and scope is not None and _can_elicit(scope):
            return await _elicit(action, scope)
        if (
            elicit
            and scope is not None
            and scope.round is not None
            and _declared_elicitation(scope)
        ):
            return await _from_round(action, scope)
        if fallback is None:
            return ApprovalDecision(
                approved=False,
                remember=False,
                reason="approval needed: the client cannot be asked (no elicitation) "
                "and no approver is configured",
            )
        answer = fallback(action)
        if inspect.isawaitable(answer):
            answer = await answer
        if isinstance(answer, ApprovalDecision):
            return answer
        return ApprovalDecision(approved=answer is True, remember=False)

    return approve


_MAX_APPROVER_OUTPUT = 64 * 1024
_COMMAND = sequence_of(string(), non_empty=True)


def create_command_approver(
    command: Sequence[str],
) -> Callable[[ExecutionAction], Awaitable[ApprovalDecision]]:
    """A fallback approver that runs ``command`` (never through a shell) for each question.

    The action goes to its stdin as one JSON object (``kind``, ``operation``,
    ``command``, ``paths``, ``risk``; for an escalation ``escalation``, the
    extra access a yes grants in words, and ``escalation_grant``, that grant
    exactly (both null otherwise); plus ``tool`` and ``client`` when a
    gateway call is being served); exit status 0 approves, anything else
    denies, and the first line of its output (clipped) is the reason. The
    decision is not remembered.

    Cancellation: cancelling the question (the policy's approval timeout, or
    the call) kills the command.

    Raises:
        ConfigurationError: ``command`` is not a non-empty sequence of
            non-empty strings (a shell line is refused: split it first).
    """
    _COMMAND.check("create_command_approver", "command", command)
    argv = tuple(command)

    async def approve(action: ExecutionAction) -> ApprovalDecision:
        scope = current_call.get()
        question = {
            "kind": action.kind,
            "operation": action.operation,
            "command": action.command,
            "paths": list(action.paths),
            "risk": action.risk,
            "escalation": _access(action) or None,
            "escalation_grant": action.metadata.get("escalation_grant"),
            "tool": scope.tool_name if scope is not None else None,
            "client": scope.client if scope is not None else None,
        }
        try:
            done = await trio.run_process(
                argv,
                stdin=json.dumps(question).encode("utf-8"),
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
        except OSError as exc:
            return ApprovalDecision(
                approved=False, remember=False, reason=f"the approver could not run: {exc}"
            )
        said = (done.stdout or b"")[:_MAX_APPROVER_OUTPUT].decode("utf-8", "replace").strip()
        first = clip(said.splitlines()[0], NAME_LIMIT) if said else ""
        if done.returncode == 0:
            return ApprovalDecision(
                approved=True, remember=False, reason=first or "approved by the approver command"
            )
        return ApprovalDecision(
            approved=False,
            remember=False,
            reason=first or f"the approver command said no (exit {done.returncode})",
        )

    return approve
