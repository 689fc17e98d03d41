"""A call's concurrency slots under questions asked at once, and while it waits for its slots."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from prism.core.ledger import RunLedger
from prism.gateway import open_gateway
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


async def test_a_call_waiting_for_its_slots_does_not_make_its_client_count() -> None:
    """Alice's call was sent; Bob's waits for a concurrency slot (the server has not been
    sent it): the server's request is Alice's call's, not refused as if two clients'
    calls ran there (before, it was refused: 'calls of 2 clients are running')."""
    forwarder = Forwarder()
    sent = CallScope(session=None, request_id=1, client="alice", tool_name="mcp:fx:echo")
    sent.slots = CallSlots((trio.CapacityLimiter(1),))
    waiting = CallScope(session=None, request_id=2, client="bob", tool_name="mcp:fx:echo")
    waiting.slots = CallSlots((trio.CapacityLimiter(1),))
    unassigned = CallScope(session=None, request_id=3, client="carol", tool_name="mcp:fx:echo")
    with (
        forwarder.calling("fx", waiting),
        forwarder.calling("fx", sent),
        forwarder.calling("fx", unassigned),
    ):
        await sent.slots.take()
        assert forwarder._caller("fx", None) is sent
        await waiting.slots.take()  # sent now: two clients' calls run there
        with pytest.raises(UpstreamCannotAnswerError, match="calls of 2 clients"):
            forwarder._caller("fx", None)


async def _end_unanswered(
    forwarder: Forwarder, client: str, call_id: str | None, server_id: str = "fx"
) -> None:
    """A call of ``client`` sent to ``server_id`` that ends with no answer from it."""
    ended = CallScope(
        session=None, request_id=1, client=client, tool_name="mcp:fx:echo", call_id=call_id
    )
    ended.slots = CallSlots((trio.CapacityLimiter(1),))
    with forwarder.calling(server_id, ended):
        await ended.slots.take()
    ended.slots.close()


async def test_calls_that_ended_unanswered_are_kept_once_per_client_and_only_if_sent() -> None:
    """A reviewer's findings: every call that ended unanswered was kept (50,000 cancelled
    calls: 50,000 entries, never dropped), and so was a call that never got its slots
    (never sent: one client could switch off the server's questions for everybody)."""
    forwarder = Forwarder()
    forwarder.watch("fx", lambda call_id: True)  # the server answers none of them
    for index in range(200):
        await _end_unanswered(forwarder, "alice", f"alice#{index}")
    never_sent = CallScope(session=None, request_id=2, client="bob", tool_name="mcp:fx:echo")
    never_sent.slots = CallSlots((trio.CapacityLimiter(1),))
    with forwarder.calling("fx", never_sent):
        pass
    assert list(forwarder._leftovers["fx"]) == ["alice"]
    left = forwarder._leftovers["fx"]["alice"]
    assert (len(left.calls), left.overflow) == (64, True)  # ids kept up to a bound
    assert forwarder._left_by("fx") == {"alice"}
    # A server whose requests do not come through the forwarder keeps nothing.
    await _end_unanswered(forwarder, "alice", "alice#x", server_id="other")
    assert "other" not in forwarder._leftovers


async def test_an_unanswered_call_counts_until_its_server_answers_it_or_the_cap(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A call that ended unanswered counts as running on its server until the server
    answers it (late), the session that carried it ends, or unanswered_call_s after its
    client's latest such call: reaching the cap is said once (the ledger's record)."""
    capped: list[tuple[str, str, int, float]] = []
    forwarder = Forwarder(unanswered_call_s=120.0, on_capped=lambda *said: capped.append(said))
    running = {"alice#1", "alice#2", "bob#1", "carol#1"}
    forwarder.watch("fx", running.__contains__)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(forwarder.expire_unanswered)
        await _end_unanswered(forwarder, "dave", "dave#1")  # answered before it ended
        assert forwarder._left_by("fx") == set()
        for call_id in ("alice#1", "bob#1", "carol#1"):
            await _end_unanswered(forwarder, call_id.partition("#")[0], call_id)
        await _end_unanswered(forwarder, "erin", None)  # no id: counts until the cap
        await trio.sleep(60)
        await _end_unanswered(forwarder, "alice", "alice#2")  # Alice's cap moves on
        assert forwarder._left_by("fx") == {"alice", "bob", "carol", "erin"}
        running.discard("bob#1")  # the server answered Bob's call after he left
        assert forwarder._left_by("fx") == {"alice", "carol", "erin"}
        await trio.sleep(61)  # carol's and erin's caps: 120 s after their calls
        assert forwarder._left_by("fx") == {"alice"}
        assert sorted(capped) == [("fx", "carol", 1, 120.0), ("fx", "erin", -1, 120.0)]
        running.discard("alice#1")
        await trio.sleep(60)
        assert capped[2:] == [("fx", "alice", 1, 120.0)]  # alice#2 still unanswered
        assert forwarder._leftovers == {}
        await _end_unanswered(forwarder, "frank", "frank#1")
        running.add("frank#1")
        await _end_unanswered(forwarder, "frank", "frank#1")
        forwarder.watch("fx", None)  # the server is gone: nothing of it counts
        assert forwarder._leftovers == {}
        assert forwarder._left_by("fx") == set()
        nursery.cancel_scope.cancel()
    assert len(capped) == 3


async def test_the_cap_of_a_clients_unanswered_calls_is_recorded_in_the_ledger() -> None:
    ledger = RunLedger()
    async with open_gateway(ledger=ledger, unanswered_call_s=30) as gateway:
        assert gateway._forward.unanswered_call_s == 30
        assert gateway._forward.on_capped is not None
        gateway._forward.on_capped("fx", "token:1ddeb978/ide/0123456789abcdef0123", 2, 30.0)
    (record,) = [r for r in ledger.records if r.tool_name == "prism:question"]
    assert record.arguments == {
        "event": "unanswered",
        "server": "fx",
        "principal": "token 1ddeb978",
        "session": "0123456789abcdef",
        "calls": 2,
    }
    assert record.status == "ok"
    said = record.result_preview or ""
    assert "MCP server 'fx' did not answer 2 call(s)" in said
    assert "unanswered_call_s (30 s)" in said
