"""A call's concurrency slots under questions asked at once, and while it waits for its slots."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from prism.gateway._approval import CallScope
from prism.gateway._forward import Forwarder, UpstreamCannotAnswerError
from prism.gateway._rounds import CallSlots


async def test_questions_while_the_call_waits_for_its_slot_leave_nothing_held() -> None:
    """A question let go while the call still waits for its client's slot, and a second
    question at once: when all is over each slot is held once, then released once."""
    everyone, mine = trio.CapacityLimiter(4), trio.CapacityLimiter(1)
    other = object()
    await mine.acquire_on_behalf_of(other)  # the client's one slot is busy
    slots = CallSlots((everyone, mine))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(slots.take)
        await trio.testing.wait_all_tasks_blocked()
        assert everyone.borrowed_tokens == 1  # taken; waiting for the client's slot

        async def ask(answered: trio.Event) -> None:
            async with slots.let_go():
                await answered.wait()

        first, second = trio.Event(), trio.Event()
        nursery.start_soon(ask, first)
        nursery.start_soon(ask, second)
        await trio.testing.wait_all_tasks_blocked()
        assert everyone.borrowed_tokens == 0  # let go while the questions wait
        mine.release_on_behalf_of(other)
        first.set()
        await trio.testing.wait_all_tasks_blocked()
        assert (everyone.borrowed_tokens, mine.borrowed_tokens) == (0, 0)  # one still waits
        second.set()
    assert (everyone.borrowed_tokens, mine.borrowed_tokens) == (1, 1)
    assert slots.started
    slots.close()
    assert (everyone.borrowed_tokens, mine.borrowed_tokens) == (0, 0)
    async with slots.let_go():  # a question after the call is over takes nothing back
        pass
    assert (everyone.borrowed_tokens, mine.borrowed_tokens) == (0, 0)


async def test_a_release_that_fails_does_not_keep_the_other_slots() -> None:
    everyone, mine = trio.CapacityLimiter(4), trio.CapacityLimiter(1)
    slots = CallSlots((everyone, mine))
    await slots.take()
    mine.release_on_behalf_of(slots)  # released behind its back
    slots.close()
    assert (everyone.borrowed_tokens, mine.borrowed_tokens) == (0, 0)


async def test_a_request_is_never_put_to_a_call_waiting_for_its_slots() -> None:
    """With no call id, a server's request goes to the one client's started call only."""
    forwarder = Forwarder()
    waiting = CallScope(session=None, request_id=1, client="alice", tool_name="mcp:fx:echo")
    waiting.slots = CallSlots((trio.CapacityLimiter(1),))
    with forwarder.calling("fx", waiting):
        with pytest.raises(UpstreamCannotAnswerError, match="started"):
            forwarder._caller("fx", None)
        await waiting.slots.take()
        assert forwarder._caller("fx", None) is waiting


async def test_calls_that_ended_unanswered_are_kept_once_per_client_and_only_if_sent() -> None:
    """A reviewer's findings: every call that ended unanswered was kept (50,000 cancelled
    calls: 50,000 entries, never dropped), and so was a call that never got its slots
    (never sent: one client could switch off the server's questions for everybody)."""
    forwarder = Forwarder()
    for _ in range(50):
        ended = CallScope(session=None, request_id=1, client="alice", tool_name="mcp:fx:echo")
        ended.slots = CallSlots((trio.CapacityLimiter(1),))
        with forwarder.calling("fx", ended):
            await ended.slots.take()
        ended.slots.close()
    never_sent = CallScope(session=None, request_id=2, client="bob", tool_name="mcp:fx:echo")
    never_sent.slots = CallSlots((trio.CapacityLimiter(1),))
    with forwarder.calling("fx", never_sent):
        pass
    assert list(forwarder._leftovers["fx"]) == ["alice"]
    assert forwarder._left_by("fx") == {"alice"}
