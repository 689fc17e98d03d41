"""The inline path's helpers on their own: taking a call's slots without waiting, and the
result JSON's lone-surrogate scan."""

from __future__ import annotations

from typing import Any

import trio

from prism.gateway._content import _block, lone_surrogate_in
from prism.gateway._rounds import CallSlots


async def test_slots_are_taken_now_only_when_every_one_is_free() -> None:
    client, everyone = trio.CapacityLimiter(1), trio.CapacityLimiter(1)
    slots = CallSlots((client, everyone))
    assert slots.free()
    assert slots.take_now()
    assert (client.borrowed_tokens, everyone.borrowed_tokens) == (1, 1)
    assert not slots.take_now()  # (held already: nothing taken twice)
    other = CallSlots((client, everyone))
    assert not other.free()
    assert not other.take_now()  # the client's slot is busy: none taken
    assert everyone.borrowed_tokens == 1
    slots.close()
    assert (client.borrowed_tokens, everyone.borrowed_tokens) == (0, 0)
    assert not slots.take_now()  # (closed: nothing taken again)
    # one slot held already, the other taken by the waiting path: each held once
    third = CallSlots((client, everyone))
    client.acquire_on_behalf_of_nowait(third)
    third._held.append(client)
    await third.take()
    assert third.started
    assert (client.borrowed_tokens, everyone.borrowed_tokens) == (1, 1)
    third.close()
    assert (client.borrowed_tokens, everyone.borrowed_tokens) == (0, 0)


def test_a_lone_surrogate_is_found_in_lists_as_in_objects() -> None:
    assert lone_surrogate_in({"content": [{"text": "a"}, ["b", "\ud800"]]})
    assert lone_surrogate_in({"content": [[["\udfff"]]]})
    assert not lone_surrogate_in({"content": [["b", 1, None], {"k": ["v"]}]})
    assert lone_surrogate_in({"\ud800": 1})


def test_an_unknown_content_block_is_sent_as_its_text() -> None:
    assert _block(12) == {"type": "text", "text": "12"}


def test_a_label_part_that_is_long_or_unsafe_keeps_a_digest_of_the_whole() -> None:
    from prism.gateway._gateway import _whole

    assert _whole("claude-code") == "claude-code"
    long_a, long_b = "a" * 70 + "x", "a" * 70 + "y"
    assert len(_whole(long_a)) == 64
    assert _whole(long_a) != _whole(long_b)  # (the same start, different texts)
    unsafe = _whole("me/you")
    assert "/" not in unsafe
    assert unsafe.startswith("me_you~")
    assert _whole("") != _whole("-")


async def test_a_session_idle_past_its_time_has_no_owner_any_more(mock_clock: Any) -> None:
    from prism.gateway._sessions import Place, SessionTable

    table = SessionTable(idle_s=60.0, limit=4)
    with table.room("alice") as place:
        assert isinstance(place, Place)
        table.opened("s-1", "alice", place)
    assert len(table) == 1
    assert table.owner("s-1") == "alice"
    mock_clock.jump(61)
    assert table.owner("s-1") is None  # (expired: closed when asked)
    assert len(table) == 0
