"""A 2026-07-28 client's call kept running while the client answers its questions.

Such a client cannot be sent a request in the middle of a call. When a
downstream server asks something during its call (elicitation, sampling,
roots), or the gateway asks for an approval, the call goes on waiting in the
gateway (nothing it did is undone or done again), and the client gets an
``input_required`` result with the questions and a request state: the nonce
of an :class:`~prism.gateway._approval.OpenQuestions` entry that holds the
call, bound to the caller and the call. The client's retry with its answers
takes the entry (once), the answers go to the waiting server, and the retry
waits for what the call says next: its result, or more questions.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

import attrs
import trio

from prism.core import AbortController

from ._errors import GatewayError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["ROUND_STATE_PREFIX", "CallSlots", "Round", "UnansweredError", "ask_apart"]

ROUND_STATE_PREFIX = "call:"
"""How the request state of a call waiting for answers starts (an approval's does not)."""


class UnansweredError(GatewayError):
    """The client did not answer a question its call's server asked (in time, or at all)."""


_MISSING: Any = object()
_log = logging.getLogger("prism.gateway")


@attrs.define(eq=False)
class CallSlots:
    """The concurrency slots a running call holds (its client's, then the gateway's).

    Held on behalf of this object, not of a task, so a call that waits for its
    client's answer lets them go (:meth:`let_go`) from whichever task asks: a
    call parked for minutes keeps no other call from running.

    Safe for concurrent use by the call's tasks: the questions of one call
    asked at once share one letting go (the slots are given back when the
    first starts waiting, taken again when the last is answered); only one
    task acquires at a time, and only what is not held; every slot held is
    released exactly once. After :meth:`close` nothing is taken again.
    """

    limiters: tuple[trio.CapacityLimiter, ...]
    _held: list[trio.CapacityLimiter] = attrs.field(factory=list)
    # Questions waiting with the slots let go; whether the call got its slots once
    # (it started), and whether it is over.
    _apart: int = 0
    started: bool = False
    _closed: bool = False
    # Held while a task waits for slots; made by the first that has to (most calls never do)
    _taking: trio.Lock | None = None

    async def take(self) -> None:
        """Acquire each slot not held, in order (what a cancellation interrupts stays held).

        Gives up (holding nothing) when a question lets the slots go meanwhile,
        or the call is over: the last question answered takes them again.
        """
        taking = self._taking
        busy = taking is not None and taking.locked()
        if not (self._held or self._apart or self._closed or busy):
            # The usual case, every slot free: taken in order without yielding (a
            # limiter gives a token at once only while nobody waits for one).
            await trio.lowlevel.checkpoint_if_cancelled()
            for limiter in self.limiters:
                try:
                    limiter.acquire_on_behalf_of_nowait(self)
                except trio.WouldBlock:
                    break  # this one and the rest are waited for below
                self._held.append(limiter)
            else:
                self.started = True
                return
        if taking is None:
            taking = self._taking = trio.Lock()
        async with taking:
            for limiter in self.limiters:
                if self._apart or self._closed:
                    break
                if limiter in self._held:
                    continue
                await limiter.acquire_on_behalf_of(self)
                self._held.append(limiter)
            if self._apart or self._closed:
                self.give_back()
            else:
                self.started = True

    def free(self) -> bool:
        """Whether :meth:`take` would take every slot now, without waiting."""
        taking = self._taking
        busy = taking is not None and taking.locked()
        return not (self._held or self._apart or self._closed or busy) and all(
            limiter.available_tokens and not limiter.statistics().tasks_waiting
            for limiter in self.limiters
        )

    def take_now(self) -> bool:
        """Take every slot now if :meth:`free`; ``False``: none taken (it would wait)."""
        if self._held or self._apart or self._closed or self._taking is not None:
            return False
        limiters = self.limiters
        for limiter in limiters:
            if not limiter.available_tokens or limiter.statistics().tasks_waiting:
                return False
        for limiter in limiters:
            limiter.acquire_on_behalf_of_nowait(self)
            self._held.append(limiter)
        self.started = True
        return True

    def give_back(self) -> None:
        """Release every slot held, each once (a release that fails does not keep the others)."""
        while self._held:
            limiter = self._held.pop()
            try:
                limiter.release_on_behalf_of(self)
            except RuntimeError:  # not held after all: nothing to give back
                _log.warning("a call's concurrency slot was not held when given back")

    def close(self) -> None:
        """The call is over: release every slot held, and take none again."""
        self._closed = True
        self.give_back()

    @contextlib.asynccontextmanager
    async def let_go(self) -> AsyncIterator[None]:
        """Hold no slot inside; take them again after (when no other question still waits)."""
        self._apart += 1
        self.give_back()
        try:
            yield
        finally:
            self._apart -= 1
            if not self._apart and not self._closed:
                await self.take()


async def ask_apart(call: Any, prefix: str, request: dict[str, Any], *, exact: bool = False) -> Any:
    """``call.round.ask(...)``, the call's slots let go while it waits (``call``: a CallScope)."""
    async with call.slots.let_go():
        return await call.round.ask(prefix, request, exact=exact)


@attrs.define(eq=False)
class _Question:
    request: dict[str, Any]
    answered: trio.Event = attrs.field(factory=trio.Event)
    answer: Any = _MISSING


@attrs.define(eq=False)
class Round:
    """One call of a 2026-07-28 client, run apart from the requests that wait for it.

    ``ask`` is called by the forwarder in the call's task; the requests of
    the client (the first one, then each retry) wait with :meth:`next`.
    ``scope`` cancels the whole call.
    """

    owner: str
    timeout_s: float
    call: Any = None  # the call's CallScope
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    # Ends the call's dispatch with a reason (its ledger record and result say it):
    # the call's waiting question was closed unanswered.
    abort: AbortController = attrs.field(factory=AbortController)
    # The request state's nonce of the call's latest parking (its questions put to the
    # client, no request waiting), and what is called when a question is not answered
    # within ``timeout_s`` (it ends the call).
    nonce: str | None = None
    expired: Callable[[Round], None] | None = None
    done: bool = False
    result: Any = None
    _keys: Iterator[int] = attrs.field(factory=lambda: itertools.count(1))
    # Asked, not yet put to the client; put to it and waiting for its retry.
    _new: dict[str, _Question] = attrs.field(factory=dict)
    _sent: dict[str, _Question] = attrs.field(factory=dict)
    _changed: trio.Event = attrs.field(factory=trio.Event)

    async def ask(self, prefix: str, request: dict[str, Any], *, exact: bool = False) -> Any:
        """Put ``request`` (an input request, wire form) to the client; its answer.

        Its key is ``<prefix>:<n>``; with ``exact``, ``prefix`` itself while no
        other open question has it.

        Raises:
            UnansweredError: the client's retry did not answer it, or none
                came within ``timeout_s``.
        """
        key = f"{prefix}:{next(self._keys)}"
        if exact and prefix not in self._new and prefix not in self._sent:
            key = prefix
        question = _Question(request)
        self._new[key] = question
        self._changed.set()
        with trio.move_on_after(self.timeout_s):
            await question.answered.wait()
        if question.answer is _MISSING:
            self._new.pop(key, None)
            self._sent.pop(key, None)
            if question.answered.is_set():
                raise UnansweredError("the client's retry did not answer the question")
            if self.expired is not None:
                self.expired(self)  # ends the call (its abort): the next checkpoint raises
                await trio.lowlevel.checkpoint()
            raise UnansweredError(
                f"the client did not answer within {self.timeout_s:g} s (no retry came)"
            )
        return question.answer

    def finish(self, result: Any) -> None:
        """The call is over: ``result`` is what its last request answers."""
        self.done = True
        self.result = result
        self._changed.set()

    async def next(self) -> dict[str, dict[str, Any]] | None:
        """Wait for the call's next word: questions to put to the client, or ``None``.

        ``None`` once the call is over (its result is :attr:`result`).
        Questions asked while the call also ended are still put (the server waits).
        """
        while not self._new and not self.done:
            await self._changed.wait()
            self._changed = trio.Event()
        if not self._new:
            return None
        asked = {key: question.request for key, question in self._new.items()}
        self._sent.update(self._new)
        self._new.clear()
        return asked

    def answer(self, responses: Mapping[str, Any] | None) -> None:
        """The client's retry: each question put to it gets its answer (or none)."""
        given = responses or {}
        for key, question in self._sent.items():
            if key in given:
                question.answer = given[key]
            question.answered.set()
        self._sent.clear()
