"""serve_stdio(read_ahead=..., answered=...): serving what was read and answered before it began."""

from __future__ import annotations

import logging
import os

import mcp_types as types
import pytest
import trio
from gateway_std_fds import std_fds_on_pipes
from mcp.shared.message import SessionMessage

from prism.core import ConfigurationError
from prism.gateway import GatewayConfigurationError, open_gateway, serve_stdio

INITIALIZE = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    b'"capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}\n'
)
PING = b'{"jsonrpc":"2.0","id":2,"method":"ping"}\n'


async def _serve(read_ahead: bytes, answered: bytes | None, then: bytes) -> list[bytes]:
    """What serve_stdio writes, given ``read_ahead`` and ``answered``, with ``then`` on stdin."""
    async with open_gateway(tools=[]) as gateway:
        with std_fds_on_pipes() as (stdin, stdout):
            os.write(stdin, then)
            os.close(stdin)
            with trio.fail_after(30):
                await serve_stdio(gateway, read_ahead=read_ahead, answered=answered)
    written = b""
    while chunk := os.read(stdout, 65536):
        written += chunk
    os.close(stdout)
    return written.splitlines()


async def test_read_ahead_is_served_first_and_an_answered_request_is_not_answered_again() -> None:
    plain = await _serve(b"", None, INITIALIZE + PING)
    # The first line split across what was read ahead and what is still on stdin.
    ahead = await _serve(INITIALIZE + PING[:10], plain[0] + b"\n", PING[10:])
    assert len(plain) == 2
    assert ahead == plain[1:]


async def test_a_differing_early_answer_is_logged_and_not_doubled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    wrong = b'{"jsonrpc":"2.0","id":1,"result":{}}\n'
    with caplog.at_level(logging.ERROR, logger="prism.gateway"):
        written = await _serve(INITIALIZE, wrong, PING)
    assert written == [b'{"jsonrpc":"2.0","id":2,"result":{}}']
    assert any("differs" in record.getMessage() for record in caplog.records)


async def test_read_ahead_is_checked() -> None:
    async with open_gateway(tools=[]) as gateway:
        with pytest.raises(ConfigurationError, match="read_ahead"):
            await serve_stdio(gateway, read_ahead="text")  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="answered"):
            await serve_stdio(gateway, answered="text")  # type: ignore[arg-type]
        with pytest.raises(GatewayConfigurationError, match="read_ahead"):
            await serve_stdio(gateway, stdin=object(), read_ahead=INITIALIZE)


INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
LIST = b'{"jsonrpc":"2.0","id":"l","method":"tools/list"}\n'
LIST_CHANGED = b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}'


async def test_several_early_answers_are_each_written_once() -> None:
    plain = await _serve(b"", None, INITIALIZE + INITIALIZED + LIST + PING)
    assert [line[:26] for line in plain] == [
        b'{"jsonrpc":"2.0","id":1,"r',
        b'{"jsonrpc":"2.0","id":"l",',
        b'{"jsonrpc":"2.0","id":2,"r',
    ]
    early = b"\n".join(plain[:2]) + b"\n"
    ahead = await _serve(INITIALIZE + INITIALIZED + LIST, early, PING)
    assert ahead == plain[2:]


async def test_an_early_listing_the_gateway_would_not_give_becomes_list_changed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The tools changed between the early answer and the gateway's (a server came up):
    # the client is told to list again, and gets one answer for the id, the early one.
    plain = await _serve(b"", None, INITIALIZE)
    stale = b'{"jsonrpc":"2.0","id":"l","result":{"tools":[{"name":"gone"}]}}\n'
    with caplog.at_level(logging.ERROR, logger="prism.gateway"):
        written = await _serve(INITIALIZE + INITIALIZED + LIST, plain[0] + b"\n" + stale, PING)
    assert written == [LIST_CHANGED, b'{"jsonrpc":"2.0","id":2,"result":{}}']
    assert not caplog.records


async def test_an_early_answer_to_an_id_of_another_type_is_not_taken_for_it() -> None:
    # "1" answered early is not the answer to id 1: the gateway answers 1 itself.
    plain = await _serve(b"", None, INITIALIZE)
    other = plain[0].replace(b'"id":1,', b'"id":"1",') + b"\n"
    written = await _serve(INITIALIZE, other, b"")
    assert written == plain


async def test_a_cancel_of_an_early_answered_request_leaves_a_later_one_of_its_id_answered() -> (
    None
):
    # The client cancels the listing it was answered already, then (against the spec,
    # but it happens) reuses the id: the later request gets its own answer.
    plain = await _serve(b"", None, INITIALIZE + INITIALIZED + LIST)
    early = b"\n".join(plain[:2]) + b"\n"
    cancel = b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"l"}}\n'
    again = b'{"jsonrpc":"2.0","id":"l","method":"ping"}\n'
    written = await _serve(INITIALIZE + INITIALIZED + LIST + cancel, early, again)
    assert written == [b'{"jsonrpc":"2.0","id":"l","result":{}}']


async def test_only_a_cancel_of_an_early_answered_id_is_taken_for_one() -> None:
    from prism.gateway._stdio import LineWriter

    read, write = os.pipe()
    os.close(read)
    async with trio.lowlevel.FdStream(write) as stream:
        writer = LineWriter(stream)
        cancel = b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%b}}'
        assert not writer.answered_early(cancel % b'"l"')  # (nothing answered early yet)
        # (blank lines between the answers are skipped)
        writer.answered(b'\n{"jsonrpc":"2.0","id":"l","result":{"tools":[]}}\n\n')
        assert writer.answered_early(cancel % b'"l"')
        assert not writer.answered_early(cancel % b'"m"')  # another id
        assert not writer.answered_early(cancel % b"1")  # another type
        assert not writer.answered_early(b'{"jsonrpc":"2.0","id":"l","method":"ping"}')
        assert not writer.answered_early(b"notifications/cancelled, not JSON")
        assert not writer.answered_early(b'{"method":"notifications/cancelled"}')  # no params
        assert not writer.answered_early(  # a request of that name, not the notification
            b'{"method":"x","params":{"requestId":"l","note":"notifications/cancelled"}}'
        )
        # only an answer stands in for an early one: a request of that id is written
        request = SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id="l", method="ping"))
        assert writer._instead(request, b"{}") is None
        assert writer.answered_early(cancel % b'"l"')  # (still answered early)
