"""What a session sent for tool calls: each request's own progress token, and its answers.

The gate rewrites every request that asks for progress to carry a token of
its own and hands a server's progress back to the SDK only under a token it
gave, from the stream of the same call; a call counts as unanswered until the
server answers its tools/call (or says its task is over).
"""

from __future__ import annotations

import contextvars
import math
from typing import Any

import mcp_types

from prism.mcp._callbacks import call_in, calling
from prism.mcp._requests import SentRequests


def _request(request_id: int, method: str = "tools/call", token: object = None) -> Any:
    params: dict[str, Any] = {"name": "t"}
    if token is not None:
        params["_meta"] = {"progressToken": token, "traceparent": "00-x"}
    return mcp_types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method=method, params=params)


def _progress(token: object) -> mcp_types.JSONRPCNotification:
    params = {"progressToken": token, "progress": 1, "message": "m"}
    return mcp_types.JSONRPCNotification(
        jsonrpc="2.0", method="notifications/progress", params=params
    )


def _token(sent: mcp_types.JSONRPCRequest) -> str:
    assert sent.params is not None
    token = sent.params["_meta"]["progressToken"]
    assert isinstance(token, str)
    return token


def test_each_request_gets_an_unguessable_progress_token_of_its_own() -> None:
    sent = SentRequests()
    first, second = _request(7, token=7), _request(8, token=8)
    sdk_meta = first.params["_meta"]
    with calling("alice#1"):
        sent.sending(first)
    with calling("bob#1"):
        sent.sending(second)
    assert sdk_meta == {"progressToken": 7, "traceparent": "00-x"}  # the SDK's own, as it was
    one, two = _token(first), _token(second)
    assert len(one) >= 22
    assert one != two
    assert one != "7"
    assert first.params is not None
    assert first.params["_meta"]["traceparent"] == "00-x"
    assert first.id == 7
    assert first.method == "tools/call"
    assert first.params["name"] == "t"
    # The server's progress goes back to the SDK under the SDK's own token (its id).
    back = sent.progress(_progress(one), None, streams_named=False)
    assert back is not None
    assert back.params == {"progressToken": 7, "progress": 1, "message": "m"}
    # Where streams are named (HTTP): only on the stream of that call's request.
    assert sent.progress(_progress(one), "alice#1", streams_named=True) is not None
    assert sent.progress(_progress(one), "bob#1", streams_named=True) is None
    assert sent.progress(_progress(one), None, streams_named=True) is None  # standalone
    # A progress or total past any float is dropped: the SDK's read loop takes float()
    # of both, and its OverflowError ended the session (every call on it failed).
    for key in ("progress", "total"):
        huge = _progress(one)
        assert huge.params is not None
        huge.params[key] = 10**400
        assert sent.progress(huge, None, streams_named=False) is None
        huge.params[key] = -(10**308) * 10**10
        assert sent.progress(huge, None, streams_named=False) is None
        for endless in (math.inf, -math.inf, math.nan):  # 1e400 parses as inf: no JSON form
            huge.params[key] = endless
            assert sent.progress(huge, None, streams_named=False) is None
        huge.params[key] = 10**300  # a float holds it
        assert sent.progress(huge, None, streams_named=False) is huge
    # The SDK's sequential tokens, anything unknown or not a string: dropped.
    for forged in (7, 8, "7", "tok", None, 1.5, True):
        assert sent.progress(_progress(forged), None, streams_named=False) is None
    # Once answered (or cancelled by the client), its token names nothing.
    sent.answered(7, {"content": []})
    assert sent.progress(_progress(one), None, streams_named=False) is None
    sent.cancelled({"requestId": 8, "reason": "stop"})
    assert sent.progress(_progress(two), None, streams_named=False) is None
    sent.cancelled({"requestId": 8})  # twice, or an unknown or malformed id: nothing
    sent.cancelled({"requestId": 99})
    sent.cancelled({"requestId": [8]})
    sent.cancelled(None)


def test_a_request_with_nothing_to_track_goes_out_as_it_is() -> None:
    sent = SentRequests()
    plain = _request(1, method="tools/list")
    sent.sending(plain)  # no progress asked, no call
    with calling("alice#1"):
        sent.sending(_request(2, method="tools/list"))  # a call's, but not one that runs it
    sent.sending(_request(3))  # a tools/call sent for no call
    assert plain.params == {"name": "t"}
    sent.answered(3, {"content": []})
    sent.answered([3], None)  # an id no JSON-RPC answer may carry
    assert not sent.unanswered("alice#1")


def test_a_call_counts_until_the_server_answers_it_or_its_task_ends() -> None:
    sent = SentRequests()
    with calling("alice#1"):
        sent.sending(_request(1, token=1))
    assert sent.unanswered("alice#1")
    sent.cancelled({"requestId": 1})  # the caller gave up: the server may still run it
    assert sent.unanswered("alice#1")
    sent.answered("1", {"content": []})  # a late answer (its id as a string: the same id)
    assert not sent.unanswered("alice#1")

    with calling("bob#1"):
        sent.sending(_request(2))
    sent.answered(2, None)  # an error answers it too
    assert not sent.unanswered("bob#1")

    # A call the server runs as a task counts until the task is over.
    for task in ({"task": {"taskId": "t1"}}, {"resultType": "task", "taskId": "t1"}):
        with calling("carol#1"):
            sent.sending(_request(3))
        sent.answered(3, task)
        assert sent.unanswered("carol#1")
        with calling("carol#1"):
            sent.sending(_request(4, method="tasks/get"))
            sent.sending(_request(5, method="tasks/get"))
            sent.sending(_request(6, method="tasks/cancel"))
        sent.answered(4, {"status": "working"})
        sent.answered(5, None)
        assert sent.unanswered("carol#1")
        sent.answered(6, {"status": "cancelled"})
        assert not sent.unanswered("carol#1")
    with calling("carol#2"):
        sent.sending(_request(7))
        sent.sending(_request(8, method="tasks/result"))
    sent.answered(7, {"task": {"taskId": "t2"}})
    sent.answered(8, None)
    assert not sent.unanswered("carol#2")
    sent.answered(4, {"status": "completed"})  # answered twice: nothing more
    # A task request of a call already answered changes nothing.
    with calling("carol#2"):
        sent.sending(_request(9, method="tasks/get"))
    sent.answered(9, {"status": "working"})
    assert not sent.unanswered("carol#2")


def test_past_the_bound_every_call_counts_as_unanswered() -> None:
    sent = SentRequests()
    with calling("alice#1"):
        for request_id in range(4097):
            sent.sending(_request(request_id))
    assert sent.forgot
    assert sent.unanswered("anyone#1")


def test_the_call_a_message_was_sent_for_is_read_from_its_senders_context() -> None:
    with calling("alice#1"):
        inside = contextvars.copy_context()
    assert call_in(inside) == "alice#1"
    assert call_in(contextvars.copy_context()) is None
    assert call_in(None) is None
