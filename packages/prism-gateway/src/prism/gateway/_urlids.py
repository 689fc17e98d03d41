"""The URL elicitations forwarded to clients: a fresh id for each, and whose it is.

A downstream server names its URL elicitations itself (2025-11-25
``elicitationId``), and so may another server, with the same names. The
client is never shown a server's id: each forwarded URL elicitation gets an
id of the gateway's own, unguessable, and the gateway keeps which server's id
it stands for and which call's client got it. A server's
``notifications/elicitation/complete`` is passed on only for an id that same
server sent, and only to the client that got it, once.
"""

from __future__ import annotations

import secrets
from collections import Counter

import attrs
import trio

from ._approval import CallScope, principal_of

__all__ = ["MAX_KEPT", "MAX_KEPT_PER_PRINCIPAL", "Issued", "UrlElicitations"]

MAX_KEPT = 256
"""URL elicitations kept waiting for their completion, over every client."""
MAX_KEPT_PER_PRINCIPAL = 32
"""Of those, the most one principal may hold over all its sessions (its oldest go first)."""


@attrs.define(eq=False, slots=True)
class Issued:
    """One forwarded URL elicitation: the id its client got, and the call it came for."""

    upstream_id: str
    scope: CallScope
    until: float


@attrs.define(eq=False)
class UrlElicitations:
    """The forwarded URL elicitations whose completion may still come.

    Each is kept until its server says it is complete, its server's process
    ends, its client's session ends, ``ttl_s`` passes, or room is needed: a
    principal (over all its sessions) that holds ``MAX_KEPT_PER_PRINCIPAL``
    loses its own oldest, never another's; past ``MAX_KEPT`` in all, the oldest of the principal
    holding the most goes, so many principals together push out only the
    largest holder's. A completion that comes after that is dropped, as one
    the server never sent.
    """

    ttl_s: float
    # By (server, the server's id); in the order they were sent (oldest first).
    _kept: dict[tuple[str, str], Issued] = attrs.field(factory=dict)

    def __len__(self) -> int:
        return len(self._kept)

    def issue(self, server_id: str, server_said: str | None, scope: CallScope) -> str:
        """The id ``scope``'s client is shown for ``server_id``'s URL elicitation ``server_said``.

        Always a fresh one. Without a server id (a 2026-07-28 server has
        none) nothing can complete it, and nothing is kept.
        """
        upstream_id = secrets.token_urlsafe(18)
        if server_said is None:
            return upstream_id
        now = trio.current_time()
        self._prune(now)
        key = (server_id, server_said)
        # A server that names a second elicitation as an earlier one: the later stands.
        self._kept.pop(key, None)
        principal = principal_of(scope.client)
        held = Counter(principal_of(issued.scope.client) for issued in self._kept.values())
        if held[principal] >= MAX_KEPT_PER_PRINCIPAL:
            self._drop_oldest_of(principal)
        elif len(self._kept) >= MAX_KEPT:
            # Never the oldest of all: that may be the one a principal holding a
            # single elicitation waits for.
            most = max(held.values())
            self._drop_oldest_of(next(p for p, n in held.items() if n == most))
        self._kept[key] = Issued(upstream_id=upstream_id, scope=scope, until=now + self.ttl_s)
        return upstream_id

    def _drop_oldest_of(self, principal: str) -> None:
        del self._kept[
            next(
                k
                for k, issued in self._kept.items()
                if principal_of(issued.scope.client) == principal
            )
        ]

    def complete(self, server_id: str, server_said: str) -> Issued | None:
        """The elicitation ``server_id`` sent as ``server_said``, now complete; ``None`` if none."""
        self._prune(trio.current_time())
        return self._kept.pop((server_id, server_said), None)

    def server_gone(self, server_id: str) -> None:
        """``server_id``'s process ended: none of its elicitations will complete."""
        for key in [key for key in self._kept if key[0] == server_id]:
            del self._kept[key]

    def clients_gone(self, label_end: str) -> None:
        """The session of the clients whose labels end in ``label_end`` is over."""
        for key in [
            k for k, issued in self._kept.items() if issued.scope.client.endswith(label_end)
        ]:
            del self._kept[key]

    def _prune(self, now: float) -> None:
        for key in [key for key, issued in self._kept.items() if issued.until <= now]:
            del self._kept[key]
