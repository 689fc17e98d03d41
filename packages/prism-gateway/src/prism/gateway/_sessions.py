"""HTTP sessions bound to the principal that opened them, expired when idle, capped in number."""

from __future__ import annotations

import contextlib
import logging
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Literal

import attrs
import trio

from prism.core.ledger import FinishedCall, RunLedger

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["SESSION_TOOL", "Place", "SessionEvent", "SessionTable", "record_session_event", "shown"]

_log = logging.getLogger("prism.gateway")

SessionEvent = Literal["opened", "closed", "expired", "evicted", "refused", "over_limit"]
SESSION_TOOL = "prism:session"
"""The tool name the ledger records session events under."""


def shown(principal: str) -> str:
    """A principal as the ledger's arguments hold it: ``token 1ddeb978``.

    (``token:1ddeb978``, as in call ids, would be hidden by the default
    redactor, which takes any ``token:...`` value for a credential; the
    principal is a digest's first digits, never a secret.)
    """
    return principal.replace(":", " ", 1)


def _nothing() -> None:
    return None


@attrs.define(eq=False)
class Place:
    """A place in the table held for one session ``principal`` is opening."""

    principal: str
    free: bool = False  # a free place (else, when ``promise``: an idle session goes)
    promise: bool = False
    held: bool = False  # counted among the principal's sessions


@attrs.define(eq=False)
class _Session:
    principal: str
    last: float
    busy: int = 0  # requests in flight other than the event stream (GET)


@attrs.define(eq=False)
class SessionTable:
    """Who opened each session, when it was last used, and which go when room is needed.

    A session is used only by the principal that opened it (a bearer token's
    id, an OAuth subject): a request of another principal is answered as if
    the session did not exist. A session idle (no request in flight but its
    event stream) for ``idle_s`` is closed; when ``limit`` sessions are open,
    the one idle the longest is closed to make room for a new one, once the
    new one is open (none idle: the new one is refused). One principal holds
    at most ``per_principal`` sessions: past that its own longest-idle session is closed (none idle:
    refused), so one principal cannot take every session. Each of these is
    recorded in ``ledger``.
    """

    idle_s: float
    limit: int
    ledger: RunLedger | None = None
    per_principal: int = 2**31
    # Called with a session id to end it at the transport (the SDK's session manager).
    closer: Any = None
    # Called with a session id once it is over, however it ended (the gateway forgets
    # what it kept for it).
    on_end: Any = None
    # Least recently used first.
    _open: OrderedDict[str, _Session] = attrs.field(factory=OrderedDict)
    _opening: int = 0  # free places taken by sessions being opened
    _promised: int = 0  # idle sessions promised to sessions being opened
    # principal -> its sessions open or being opened
    _held: dict[str, int] = attrs.field(factory=dict)

    def __len__(self) -> int:
        return len(self._open)

    def owner(self, session_id: str) -> str | None:
        """The principal that opened ``session_id`` (``None``: unknown, closed or expired)."""
        entry = self._open.get(session_id)
        if entry is None:
            return None
        if entry.busy == 0 and trio.current_time() - entry.last > self.idle_s:
            self._close(session_id, "expired")
            return None
        return entry.principal

    def opened(self, session_id: str, principal: str, place: Place) -> None:
        """``principal`` opened ``session_id`` in ``place`` (see :meth:`room`)."""
        promised = place.promise
        self._release(place)
        if promised:  # the table is full: the session idle the longest makes room now
            self._evict(None)
        self._open[session_id] = _Session(principal=principal, last=trio.current_time())
        self._held[principal] = self._held.get(principal, 0) + 1
        self._record(session_id, principal, "opened")

    def refused(self, session_id: str, principal: str, owner: str) -> None:
        _log.warning(
            "refused %s's request in a session opened by %s (%s...)",
            principal,
            owner,
            session_id[:8],
        )
        self._record(session_id, principal, "refused", owner=shown(owner))

    def ended(self, session_id: str) -> None:
        """The client closed ``session_id`` (DELETE)."""
        entry = self._open.pop(session_id, None)
        if entry is not None:
            self._forget(entry.principal)
            self._ended(session_id)
            self._record(session_id, entry.principal, "closed")

    def _forget(self, principal: str) -> None:
        held = self._held.get(principal, 0) - 1
        if held > 0:
            self._held[principal] = held
        else:
            self._held.pop(principal, None)

    def _evict(self, principal: str | None) -> bool:
        """Close the longest-idle session (of ``principal`` only, if given)."""
        for session_id, entry in self._open.items():
            if entry.busy == 0 and principal in (None, entry.principal):
                self._close(session_id, "evicted")
                return True
        return False

    @contextlib.contextmanager
    def room(self, principal: str) -> Iterator[Place | str]:
        """A place for one session ``principal`` is about to open (or why there is none).

        Only an ``initialize`` asks for one, once its body has arrived. A
        principal at its own cap has its longest-idle session closed to make
        room (only its own). While fewer than ``limit`` sessions are open or
        being opened the place is a free one; when the table is full it is the
        promise of an idle session, closed only once the new session is open,
        so a request that opens none closes nothing of anyone else's. With no
        idle session (or every idle one promised already) there is no room,
        and the refusal is recorded. The place is held while the request is
        served.
        """
        self.sweep()
        place = Place(principal)
        refusal: str | None = None
        if self._held.get(principal, 0) >= self.per_principal and not self._evict(principal):
            refusal = f"too many open sessions for one principal ({self.per_principal}), none idle"
        elif len(self._open) + self._opening < self.limit:
            place.free = True
            self._opening += 1
        elif sum(1 for entry in self._open.values() if entry.busy == 0) > self._promised:
            place.promise = True
            self._promised += 1
        else:
            refusal = "too many open sessions, none idle"
        if refusal is not None:
            _log.warning("refused a new session of %s: %s", principal, refusal)
            self._record("-", principal, "over_limit", reason=refusal)
            yield refusal
            return
        # Counted while it opens (the session id comes later), then by opened().
        place.held = True
        self._held[principal] = self._held.get(principal, 0) + 1
        try:
            yield place
        finally:
            self._release(place)

    def _release(self, place: Place) -> None:
        if place.free:
            place.free = False
            self._opening -= 1
        if place.promise:
            place.promise = False
            self._promised -= 1
        if place.held:
            place.held = False
            self._forget(place.principal)

    def sweep(self) -> None:
        """Close every session idle for longer than ``idle_s``."""
        now = trio.current_time()
        expired = [
            sid
            for sid, entry in self._open.items()
            if entry.busy == 0 and now - entry.last > self.idle_s
        ]
        for session_id in expired:
            self._close(session_id, "expired")

    def begin(self, session_id: str, *, stream: bool) -> Any:
        """Mark ``session_id`` in use by one request; returns the (idempotent) release.

        An event stream (GET) keeps no session busy: a client holding one is
        idle until it sends a request.
        """
        entry = self._open.get(session_id)
        self._open.move_to_end(session_id) if entry is not None else None
        if entry is None:
            return _nothing
        entry.last = trio.current_time()
        if stream:
            return _nothing
        entry.busy += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                entry.busy -= 1
                entry.last = trio.current_time()

        return release

    def close_all(self) -> None:
        """Forget every session (the server is stopping and ends them itself)."""
        for session_id in list(self._open):
            self._close(session_id, "closed", end=False)

    def _close(self, session_id: str, why: SessionEvent, *, end: bool = True) -> None:
        entry = self._open.pop(session_id, None)
        if entry is None:
            return
        self._forget(entry.principal)
        _log.info("session %s... of %s %s", session_id[:8], entry.principal, why)
        if end and self.closer is not None:
            with contextlib.suppress(Exception):
                self.closer(session_id)
        self._ended(session_id)
        self._record(session_id, entry.principal, why)

    def _ended(self, session_id: str) -> None:
        if self.on_end is not None:
            with contextlib.suppress(Exception):
                self.on_end(session_id)

    def _record(self, session_id: str, principal: str, event: SessionEvent, **more: str) -> None:
        record_session_event(self.ledger, session_id, principal, event, **more)


def record_session_event(
    ledger: Any, session_id: str, principal: str, event: SessionEvent, **more: str
) -> None:
    """Record one session event in ``ledger`` (a ``record_call`` recorder), if any."""
    if ledger is None:
        return
    now = time.time()
    refused = event in ("refused", "over_limit")
    with contextlib.suppress(Exception):  # the ledger reports its own failures
        ledger.record_call(
            FinishedCall(
                call_id=f"{principal}/session/{session_id[:16]}",
                tool_name=SESSION_TOOL,
                arguments={
                    "event": event,
                    "session": session_id[:16],
                    "principal": shown(principal),
                    **more,
                },
                status="blocked" if refused else "ok",
                blocked_reason="permission_denied" if refused else None,
                started_at=now,
                finished_at=now,
                duration_s=0.0,
                arguments_owned=True,
            )
        )
