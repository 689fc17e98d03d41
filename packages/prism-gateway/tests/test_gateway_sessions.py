"""HTTP sessions belong to the principal that opened them; idle ones expire; few are open."""

from __future__ import annotations

import hashlib
import json
import os
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TextIO

import httpx2
import mcp_types as types
import pytest
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from prism.coding.security import create_coding_approval_policy, create_contained_file_operations
from prism.coding.tools import create_coding_tools
from prism.core import ConfigurationError, create_rule_permission_policy
from prism.core.ledger import RunLedger
from prism.gateway import (
    CODING_TOOL_HINTS,
    BearerAuth,
    Gateway,
    HttpOptions,
    create_gateway_approver,
    open_gateway,
    serve_http,
)
from prism.gateway._approval import OpenQuestions, StaleStateError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from trio.testing import MockClock

TOKEN_A = "token-of-alice-0123456789"
TOKEN_B = "token-of-bob-0123456789ab"
ACCEPT = "application/json, text/event-stream"


@asynccontextmanager
async def serving(
    workspace: Path, fallback: Any = None, **options: Any
) -> AsyncIterator[tuple[str, Gateway]]:
    policy = create_coding_approval_policy(
        roots=[str(workspace)],
        approve=create_gateway_approver(fallback=fallback),
        cache_approvals=False,
    )
    tools = create_coding_tools(
        str(workspace),
        execution_policy=policy,
        file_operations=create_contained_file_operations([str(workspace)]),
    )
    async with (
        open_gateway(
            tools=tools,
            permission=create_rule_permission_policy(allow=["tool:*:execute"]),
            hints=CODING_TOOL_HINTS,
            ledger=RunLedger(),
        ) as gateway,
        trio.open_nursery() as nursery,
    ):
        http = HttpOptions(port=0, auth=BearerAuth(tokens=(TOKEN_A, TOKEN_B)), **options)
        url = await nursery.start(serve_http, gateway, http)
        yield url, gateway
        nursery.cancel_scope.cancel()


def headers(token: str, session: str | None = None) -> dict[str, str]:
    sent = {
        "authorization": f"Bearer {token}",
        "accept": ACCEPT,
        "content-type": "application/json",
        "mcp-protocol-version": "2025-11-25",
    }
    if session is not None:
        sent["mcp-session-id"] = session
    return sent


def open_for_writing(path: Path) -> TextIO:
    return path.open("w", encoding="utf-8")


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}


async def open_raw_session(http: httpx2.AsyncClient, url: str, token: str) -> str:
    """A session opened with a raw ``initialize`` (what a flood of clients would send)."""
    opened = await http.post(url, json=INITIALIZE, headers=headers(token))
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(url, json=note, headers=headers(token, session))).status_code == 202
    return session


async def list_tools(
    http: httpx2.AsyncClient, url: str, token: str, session: str
) -> httpx2.Response:
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    return await http.post(url, json=body, headers=headers(token, session))


async def test_another_principal_can_neither_answer_the_approval_nor_use_the_session(
    workspace: Path,
) -> None:
    """Bob holds Alice's Mcp-Session-Id and his own token: her session refuses him."""
    seen: dict[str, str] = {}
    attempts: dict[str, int] = {}

    async def remember(response: httpx2.Response) -> None:
        if "mcp-session-id" in response.headers:
            seen["session"] = response.headers["mcp-session-id"]

    async with serving(workspace) as (url, gateway), httpx2.AsyncClient(timeout=60) as bob:

        async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            # Alice's command waits on this question. Bob answers it for her...
            answer = {
                "jsonrpc": "2.0",
                "id": context.request_id,
                "result": {"action": "accept", "content": {"approve": True}},
            }
            forged = await bob.post(url, json=answer, headers=headers(TOKEN_B, seen["session"]))
            attempts["answer"] = forged.status_code
            # ...and tries to list tools in her session.
            listed = await list_tools(bob, url, TOKEN_B, seen["session"])
            attempts["list"] = listed.status_code
            return types.ElicitResult(action="decline")

        alice_http = httpx2.AsyncClient(
            headers={"authorization": f"Bearer {TOKEN_A}"},
            event_hooks={"response": [remember]},
            timeout=60,
        )
        async with (
            alice_http,
            Client(
                streamable_http_client(url, http_client=alice_http),
                elicitation_callback=elicit,
                mode="legacy",
            ) as alice,
        ):
            result = await alice.call_tool("shell", {"command": "touch by-bob.txt"})
            # Alice's own session still serves her.
            names = {tool.name for tool in (await alice.list_tools()).tools}
        ledger = gateway.ledger
        assert ledger is not None
        sessions = [r.arguments for r in ledger.records if r.tool_name == "prism:session"]
        refused = [
            r for r in ledger.records if r.tool_name == "prism:session" and r.status == "blocked"
        ]
    assert attempts == {"answer": 404, "list": 404}
    assert result.is_error
    assert "declined by the client" in " ".join(
        b.text for b in result.content if isinstance(b, types.TextContent)
    )
    assert not (workspace / "by-bob.txt").exists()
    assert "shell" in names
    alice_id = BearerAuth(tokens=(TOKEN_A,)).identify(f"Bearer {TOKEN_A}".encode())
    bob_id = BearerAuth(tokens=(TOKEN_B,)).identify(f"Bearer {TOKEN_B}".encode())
    assert alice_id is not None
    assert bob_id is not None
    # (in the arguments, "token 1ddeb978": the default redactor hides "token:..." values)
    alice_id, bob_id = alice_id.replace(":", " "), bob_id.replace(":", " ")
    assert isinstance(sessions[0], dict)
    assert sessions[0]["event"] == "opened"
    assert sessions[0]["principal"] == alice_id
    assert len(refused) == 2
    assert all(isinstance(r.arguments, dict) for r in refused)
    assert [(r.arguments["principal"], r.arguments["owner"]) for r in refused] == [  # type: ignore[call-overload,index]
        (bob_id, alice_id),
        (bob_id, alice_id),
    ]
    assert refused[0].blocked_reason == "permission_denied"


async def test_a_foreign_session_is_answered_as_an_unknown_one(workspace: Path) -> None:
    async with serving(workspace) as (url, _gateway), httpx2.AsyncClient(timeout=60) as http:
        session = await open_raw_session(http, url, TOKEN_A)
        foreign = await list_tools(http, url, TOKEN_B, session)
        unknown = await list_tools(http, url, TOKEN_B, "f" * 32)
        own = await list_tools(http, url, TOKEN_A, session)
        # Nor may Bob end her session.
        ended = await http.delete(url, headers=headers(TOKEN_B, session))
        still = await list_tools(http, url, TOKEN_A, session)
    assert foreign.status_code == unknown.status_code == ended.status_code == 404
    assert foreign.json() == unknown.json()
    assert own.status_code == 200
    assert still.status_code == 200


async def test_an_idle_session_expires(workspace: Path, mock_clock: trio.testing.MockClock) -> None:
    async with (
        serving(workspace, session_idle_s=60) as (url, gateway),
        httpx2.AsyncClient(timeout=60) as http,
    ):
        session = await open_raw_session(http, url, TOKEN_A)
        assert (await list_tools(http, url, TOKEN_A, session)).status_code == 200
        mock_clock.jump(61)  # a minute of idleness, at once
        expired = await list_tools(http, url, TOKEN_A, session)
        ledger = gateway.ledger
        assert ledger is not None
        events = [r.arguments for r in ledger.records if r.tool_name == "prism:session"]
    assert expired.status_code == 404
    assert [e["event"] for e in events if isinstance(e, dict)] == ["opened", "expired"]


async def test_the_oldest_idle_session_goes_first_when_the_cap_is_reached(workspace: Path) -> None:
    async with (
        serving(workspace, max_sessions=3) as (url, gateway),
        httpx2.AsyncClient(timeout=60) as http,
    ):
        first = await open_raw_session(http, url, TOKEN_A)
        second = await open_raw_session(http, url, TOKEN_B)
        third = await open_raw_session(http, url, TOKEN_A)
        # The first is used again, so the second is now the one idle the longest.
        assert (await list_tools(http, url, TOKEN_A, first)).status_code == 200
        fourth = await open_raw_session(http, url, TOKEN_B)
        statuses = {
            name: (await list_tools(http, url, token, session)).status_code
            for name, token, session in [
                ("first", TOKEN_A, first),
                ("second", TOKEN_B, second),
                ("third", TOKEN_A, third),
                ("fourth", TOKEN_B, fourth),
            ]
        }
        ledger = gateway.ledger
        assert ledger is not None
        evicted = [
            r.arguments
            for r in ledger.records
            if r.tool_name == "prism:session"
            and isinstance(r.arguments, dict)
            and r.arguments["event"] == "evicted"
        ]
    assert statuses == {"first": 200, "second": 404, "third": 200, "fourth": 200}
    assert len(evicted) == 1
    assert isinstance(evicted[0], dict)
    assert evicted[0]["session"] == second[:16]


async def test_a_flood_of_sessions_stays_within_the_cap(workspace: Path) -> None:
    async with (
        serving(workspace, max_sessions=5) as (url, gateway),
        httpx2.AsyncClient(timeout=60) as http,
    ):
        opened = [await open_raw_session(http, url, TOKEN_B) for _ in range(40)]
        alive = [(await list_tools(http, url, TOKEN_B, s)).status_code for s in opened]
        manager = gateway.server._session_manager  # the SDK's own count of sessions
        sdk_sessions = len(manager._server_instances)  # type: ignore[union-attr]
    assert alive == [404] * 35 + [200] * 5
    assert sdk_sessions <= 5


async def test_a_session_busy_with_a_call_is_not_evicted(workspace: Path) -> None:
    """With the cap reached and every session busy, a new one is refused (503)."""
    fifo = workspace / "slow.fifo"
    os.mkfifo(fifo)
    async with (
        serving(workspace, max_sessions=1) as (url, _gateway),
        httpx2.AsyncClient(timeout=60) as http,
    ):
        session = await open_raw_session(http, url, TOKEN_A)
        call = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "shell", "arguments": {"command": "cat slow.fifo"}},
        }
        answer: list[httpx2.Response] = []

        async def busy() -> None:
            answer.append(await http.post(url, json=call, headers=headers(TOKEN_A, session)))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(busy)
            # Opening the FIFO for writing returns once the command opened it: the call runs.
            with trio.fail_after(60):
                writer = await trio.to_thread.run_sync(
                    open_for_writing, fifo, abandon_on_cancel=True
                )
            with writer:
                refused = await http.post(url, json=INITIALIZE, headers=headers(TOKEN_B))
                writer.write("done\n")
        listed = await list_tools(http, url, TOKEN_A, session)
    assert refused.status_code == 503
    assert "too many open sessions" in refused.json()["error"]["message"]
    assert answer[0].status_code == 200
    assert "done" in answer[0].text
    assert listed.status_code == 200


async def test_one_principal_flooding_sessions_closes_only_its_own(workspace: Path) -> None:
    """Alice opens sessions in a loop: past her cap her own idle ones go, never Bob's."""
    async with (
        serving(workspace, max_sessions=10, max_sessions_per_principal=3) as (url, gateway),
        httpx2.AsyncClient(timeout=60) as http,
    ):
        bobs = [await open_raw_session(http, url, TOKEN_B) for _ in range(2)]
        alices = [await open_raw_session(http, url, TOKEN_A) for _ in range(12)]
        alive_b = [(await list_tools(http, url, TOKEN_B, s)).status_code for s in bobs]
        alive_a = [(await list_tools(http, url, TOKEN_A, s)).status_code for s in alices]
        ledger = gateway.ledger
        assert ledger is not None
        evicted = [
            r.arguments
            for r in ledger.records
            if r.tool_name == "prism:session"
            and isinstance(r.arguments, dict)
            and r.arguments["event"] == "evicted"
        ]
    assert alive_b == [200, 200]
    assert alive_a == [404] * 9 + [200] * 3
    assert len(evicted) == 9
    assert all(isinstance(e, dict) and str(e["principal"]).startswith("token ") for e in evicted)
    assert {e["session"] for e in evicted if isinstance(e, dict)} == {s[:16] for s in alices[:9]}


async def test_a_principal_whose_sessions_are_all_busy_is_refused_and_recorded(
    workspace: Path,
) -> None:
    fifo = workspace / "slow.fifo"
    os.mkfifo(fifo)
    async with (
        serving(workspace, max_sessions_per_principal=1) as (url, gateway),
        httpx2.AsyncClient(timeout=60) as http,
    ):
        session = await open_raw_session(http, url, TOKEN_A)
        call = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "shell", "arguments": {"command": "cat slow.fifo"}},
        }
        answer: list[httpx2.Response] = []

        async def busy() -> None:
            answer.append(await http.post(url, json=call, headers=headers(TOKEN_A, session)))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(busy)
            with trio.fail_after(60):  # returns once the command opened the FIFO: it runs
                writer = await trio.to_thread.run_sync(
                    open_for_writing, fifo, abandon_on_cancel=True
                )
            with writer:
                refused = await http.post(url, json=INITIALIZE, headers=headers(TOKEN_A))
                bobs = await http.post(url, json=INITIALIZE, headers=headers(TOKEN_B))
                writer.write("done\n")
        ledger = gateway.ledger
        assert ledger is not None
        over = [
            r
            for r in ledger.records
            if isinstance(r.arguments, dict) and r.arguments.get("event") == "over_limit"
        ]
    assert refused.status_code == 503
    assert "too many open sessions for one principal (1)" in refused.json()["error"]["message"]
    assert bobs.status_code == 200
    assert answer[0].status_code == 200
    assert len(over) == 1
    assert over[0].status == "blocked"
    assert isinstance(over[0].arguments, dict)
    assert str(over[0].arguments["principal"]).startswith("token ")


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("session_idle_s", 0.5),
        ("max_sessions", 0),
        ("max_sessions", "9"),
        ("max_sessions_per_principal", 0),
    ],
)
def test_session_limits_are_checked(option: str, value: object) -> None:
    with pytest.raises(ConfigurationError, match=option):
        HttpOptions(**{option: value})  # type: ignore[arg-type]


def write_call(path: str, number: int = 5) -> dict[str, Any]:
    arguments = {"path": path, "content": "written"}
    params = {"name": "write", "arguments": arguments}
    return {"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": params}


def records_of(gateway: Gateway, tool: str) -> list[Any]:
    ledger = gateway.ledger
    assert ledger is not None
    return [record for record in ledger.records if record.tool_name == tool]


async def test_a_binding_header_sent_twice_is_refused(workspace: Path) -> None:
    """Bob adds a second Mcp-Session-Id (Alice's), Authorization or MCP-Protocol-Version
    to his call: refused whole, nothing runs, nothing is recorded under Alice's session."""
    async with serving(workspace) as (url, gateway), httpx2.AsyncClient(timeout=60) as http:
        alice = await open_raw_session(http, url, TOKEN_A)
        bob = await open_raw_session(http, url, TOKEN_B)
        second = {
            "mcp-session-id": alice,
            "authorization": f"Bearer {TOKEN_A}",
            "mcp-protocol-version": "2026-07-28",
        }
        answers = {}
        for name, value in second.items():
            sent = [*headers(TOKEN_B, bob).items(), (name, value)]
            answers[name] = await http.post(url, json=write_call(f"{name}.txt"), headers=sent)
        own = await http.post(url, json=write_call("own.txt"), headers=headers(TOKEN_B, bob))
        writes = records_of(gateway, "write")
    assert {name: answer.status_code for name, answer in answers.items()} == dict.fromkeys(
        second, 400
    )
    assert all("sent twice" in answer.json()["error"]["message"] for answer in answers.values())
    assert sorted(os.listdir(workspace)) == ["notes.txt", "own.txt"]
    assert own.status_code == 200
    # Bob's own call, recorded under his principal and his whole session id.
    bob_id = BearerAuth(tokens=(TOKEN_B,)).identify(f"Bearer {TOKEN_B}".encode())
    assert [record.call_id.rsplit("#", 1)[0] for record in writes] == [f"{bob_id}/raw/{bob}"]


async def test_a_second_session_header_cannot_keep_a_dropped_call_running(
    workspace: Path, tree: Any
) -> None:
    """Bob reuses the JSON-RPC id of Alice's running call, with her session id as a second
    header: refused, and when Alice drops her connection her call's process tree ends."""
    async with (
        serving(workspace, fallback=lambda _action: True) as (url, _gateway),
        httpx2.AsyncClient(timeout=None) as http,
    ):
        alice = await open_raw_session(http, url, TOKEN_A)
        bob = await open_raw_session(http, url, TOKEN_B)
        shell = {"name": "shell", "arguments": {"command": tree.command}}
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": shell}
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:

                async def alice_waits() -> None:
                    sent = headers(TOKEN_A, alice)
                    async with http.stream("POST", url, json=call, headers=sent) as stream:
                        async for _chunk in stream.aiter_bytes():
                            pass

                nursery.start_soon(alice_waits)
                pids = await tree.started()
                read = {"name": "read", "arguments": {"path": "notes.txt"}}
                forged = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": read}
                sent = [*headers(TOKEN_B, bob).items(), ("mcp-session-id", alice)]
                answer = await http.post(url, json=forged, headers=sent)
                nursery.cancel_scope.cancel()  # Alice drops the call's connection
        await tree.assert_ends(pids)
    assert answer.status_code == 400


async def half_sent(url: str, token: str) -> trio.SocketStream:
    """An ``initialize`` whose headers are in (the server said 100 Continue) and half its body."""
    where = httpx2.URL(url)
    assert where.port is not None
    stream = await trio.open_tcp_stream(where.host, where.port)
    body = json.dumps(INITIALIZE).encode()
    head = (
        f"POST {where.path} HTTP/1.1\r\nHost: {where.host}:{where.port}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        f"Accept: {ACCEPT}\r\nContent-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n"
    )
    await stream.send_all(head.encode())
    seen = b""
    while b"\r\n\r\n" not in seen:
        seen += await stream.receive_some()
    assert seen.startswith(b"HTTP/1.1 100"), seen
    await stream.send_all(body[: len(body) // 2])
    return stream


async def status_of(stream: trio.SocketStream) -> int:
    seen = b""
    while b"\r\n" not in seen:
        chunk = await stream.receive_some()
        assert chunk, seen
        seen += chunk
    await stream.aclose()
    return int(seen.split(b" ", 2)[1])


def session_events(gateway: Gateway) -> list[object]:
    return [r.arguments["event"] for r in records_of(gateway, "prism:session")]


async def test_half_sent_bodies_take_no_place_and_are_cut_off(workspace: Path) -> None:
    """Alice holds more half-sent initialize bodies than there are places: Bob's idle
    session stays, his new initialize is answered, and each of hers gets 408 at the deadline."""
    async with (
        serving(workspace, max_sessions=2, body_timeout_s=1.0) as (url, gateway),
        httpx2.AsyncClient(timeout=60) as http,
    ):
        bob = await open_raw_session(http, url, TOKEN_B)
        held = [await half_sent(url, TOKEN_A) for _ in range(3)]
        listed = await list_tools(http, url, TOKEN_B, bob)
        opened = await http.post(url, json=INITIALIZE, headers=headers(TOKEN_B))
        with trio.fail_after(60):
            answers = [await status_of(stream) for stream in held]
        events = session_events(gateway)
    assert listed.status_code == 200
    assert opened.status_code == 200
    assert answers == [408, 408, 408]
    assert events == ["opened", "opened"]


async def test_a_request_that_opens_no_session_closes_none(workspace: Path) -> None:
    """The table is full of Bob's idle sessions; Alice's requests without a session id that
    are not an initialize (answered 400) close none of them."""
    async with (
        serving(workspace, max_sessions=2) as (url, gateway),
        httpx2.AsyncClient(timeout=60) as http,
    ):
        bobs = [await open_raw_session(http, url, TOKEN_B) for _ in range(2)]
        junk = [
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        ]
        answers = [
            (await http.post(url, json=body, headers=headers(TOKEN_A))).status_code for body in junk
        ]
        listed = [(await list_tools(http, url, TOKEN_B, bob)).status_code for bob in bobs]
        events = session_events(gateway)
    assert all(400 <= status < 500 for status in answers), answers
    assert listed == [200, 200]
    assert events == ["opened", "opened"]


async def test_a_call_with_an_odd_id_is_answered_with_an_error(workspace: Path) -> None:
    """A tools/call whose id is neither a string nor an integer: a JSON-RPC error, not a
    silent 202, and nothing runs."""
    async with serving(workspace) as (url, gateway), httpx2.AsyncClient(timeout=60) as http:
        session = await open_raw_session(http, url, TOKEN_A)
        answers = []
        for odd in ({"a": 1}, True, 1.5, None):
            call = {**write_call("odd.txt"), "id": odd}
            answers.append(await http.post(url, json=call, headers=headers(TOKEN_A, session)))
        writes = records_of(gateway, "write")
    assert [answer.status_code for answer in answers] == [400] * 4
    assert {answer.json()["error"]["code"] for answer in answers} == {-32600}
    assert all("string or an integer" in a.json()["error"]["message"] for a in answers)
    assert not (workspace / "odd.txt").exists()
    assert writes == []


@asynccontextmanager
async def modern_client(url: str, token: str) -> AsyncIterator[Client]:
    """A 2026-07-28 client with ``token`` that declares elicitation and answers nothing itself."""

    async def never(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        raise AssertionError("the retries are driven by hand")  # pragma: no cover

    async with (
        httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http), elicitation_callback=never) as c,
    ):
        yield c


async def test_a_principal_flooding_approval_questions_forgets_only_its_own(
    workspace: Path,
) -> None:
    """Mallory leaves 33 approval questions unanswered (one past a principal's 32): her
    oldest is forgotten, Alice's question, asked first, is still answered."""
    yes = {"prism-approval": types.ElicitResult(action="accept", content={"approve": True})}

    async def ask(client: Client, name: str) -> str:
        command = {"command": f"touch {name} && echo made"}
        asked = await client.session.call_tool("shell", command, allow_input_required=True)
        assert isinstance(asked, types.InputRequiredResult), asked
        assert asked.request_state is not None
        return asked.request_state

    async def answer(client: Client, name: str, state: str) -> types.CallToolResult:
        command = {"command": f"touch {name} && echo made"}
        result = await client.session.call_tool(
            "shell",
            command,
            input_responses=yes,  # type: ignore[arg-type]
            request_state=state,
            allow_input_required=True,
        )
        assert isinstance(result, types.CallToolResult)
        return result

    async with (
        serving(workspace) as (url, _gateway),
        modern_client(url, TOKEN_A) as alice,
        modern_client(url, TOKEN_B) as mallory,
    ):
        alices = await ask(alice, "alice.txt")
        mallorys = [await ask(mallory, f"m{n}.txt") for n in range(33)]
        first = await answer(mallory, "m0.txt", mallorys[0])
        last = await answer(mallory, "m32.txt", mallorys[32])
        answered = await answer(alice, "alice.txt", alices)
    assert not answered.is_error, answered.content
    assert (workspace / "alice.txt").exists()
    assert first.is_error
    assert "its principal had 32 questions waiting" in first.content[0].text  # type: ignore[union-attr]
    assert not (workspace / "m0.txt").exists()
    assert not last.is_error, last.content


async def test_each_pushed_out_waiting_call_is_recorded_and_ends_with_its_reason(
    workspace: Path,
) -> None:
    """A waiting call whose question a cap pushes out ends (cancelled, the reason in its
    result and its ledger record), the eviction has a record of its own (principal,
    session, call, why), and the call's retry is told why; the rest still run."""
    yes = {"prism-approval": types.ElicitResult(action="accept", content={"approve": True})}

    async def ask(client: Client, name: str) -> str:
        command = {"command": f"touch {name}"}
        asked = await client.session.call_tool("shell", command, allow_input_required=True)
        assert isinstance(asked, types.InputRequiredResult), asked
        assert asked.request_state is not None
        return asked.request_state

    async def answer(client: Client, name: str, state: str) -> str:
        result = await client.session.call_tool(
            "shell",
            {"command": f"touch {name}"},
            input_responses=yes,  # type: ignore[arg-type]
            request_state=state,
            allow_input_required=True,
        )
        assert isinstance(result, types.CallToolResult)
        return ("error: " if result.is_error else "") + " ".join(
            block.text for block in result.content if isinstance(block, types.TextContent)
        )

    async with (
        serving(workspace) as (url, gateway),
        modern_client(url, TOKEN_A) as alice,
        modern_client(url, TOKEN_B) as mallory,
    ):
        gateway._parked.limit, gateway._parked.per_principal = 3, 2
        mallorys = [await ask(mallory, f"m{n}") for n in range(3)]  # m0 pushed out (its cap)
        alices = [await ask(alice, f"a{n}") for n in range(2)]  # m1 pushed out (the gateway's)
        said = [await answer(mallory, f"m{n}", mallorys[n]) for n in range(3)]
        said.append(await answer(alice, "a0", alices[0]))
        ledger = gateway.ledger
        assert ledger is not None
        records = list(ledger.records)
    assert [(workspace / name).exists() for name in ("m0", "m1", "m2", "a0")] == [
        False,
        False,
        True,
        True,
    ]
    assert said[0].startswith("error: the request state is not applied: its question was "
                              "pushed out: its principal had 2 questions waiting")  # fmt: skip
    assert said[1].startswith("error: the request state is not applied: its question was "
                              "pushed out: the gateway had 3 questions waiting")  # fmt: skip
    assert not said[2].startswith("error"), said
    assert not said[3].startswith("error"), said
    evicted = [r for r in records if r.tool_name == "prism:question"]
    mallory_is = "token " + hashlib.sha256(TOKEN_B.encode()).hexdigest()[:8]
    said_of: list[Any] = [r.arguments for r in evicted]
    assert [(a["why"], a["principal"]) for a in said_of] == [
        ("principal_cap", mallory_is),
        ("global_cap", mallory_is),
    ]
    assert [r.result_preview for r in evicted] == [
        "its question was pushed out: its principal had 2 questions waiting, the most "
        "allowed, and it was their oldest",
        "its question was pushed out: the gateway had 3 questions waiting, the most "
        "allowed, and it was the oldest of the principal holding the most",
    ]
    for record in evicted:
        arguments: Any = record.arguments
        assert arguments["event"] == "evicted"
        assert arguments["tool"] == "shell"
        assert arguments["call"].startswith(mallory_is + "/")
        # (a 2026-07-28 client has no HTTP session: "-")
        assert arguments["call"].rpartition("#")[0].endswith("/" + arguments["session"])
    ended = [r for r in records if r.tool_name == "shell" and r.status == "cancelled"]
    assert len(ended) == 2
    assert [r.result_preview for r in ended] == [
        "tool call shell was cancelled: its question was pushed out: its principal had 2 "
        "questions waiting, the most allowed, and it was their oldest",
        "tool call shell was cancelled: its question was pushed out: the gateway had 3 "
        "questions waiting, the most allowed, and it was the oldest of the principal holding "
        "the most",
    ]


async def test_past_the_gateway_wide_cap_the_largest_holder_loses_its_oldest() -> None:
    """Many principals together fill the gateway's table: the question pushed out is the
    oldest of the principal holding the most, never Alice's single, older one."""
    forgotten: list[Any] = []
    questions = OpenQuestions(
        limit=4, per_principal=3, closed=lambda value, why, _: forgotten.append((value, why))
    )
    alices = questions.open("alice", "a", "token:alice")
    bobs = [questions.open("bob", f"b{n}", "token:bob") for n in range(3)]
    questions.open("carol", "c", "token:carol")
    assert forgotten == [("b0", "global_cap")]
    assert questions.take(alices, "alice") == "a"
    with pytest.raises(StaleStateError, match="unknown or was answered"):
        questions.take(bobs[0], "carol")  # the reason is its owner's alone
    with pytest.raises(StaleStateError, match="the gateway had 4 questions waiting"):
        questions.take(bobs[0], "bob")
    with pytest.raises(StaleStateError, match="unknown or was answered"):
        questions.take(bobs[0], "bob")  # told once
    assert questions.take(bobs[1], "bob") == "b1"


async def test_past_the_gateway_wide_cap_an_expired_question_goes_first(
    mock_clock: MockClock,
) -> None:
    """An expired question is pushed out before a live one of the largest holder."""
    forgotten: list[Any] = []
    questions = OpenQuestions(
        ttl_s=10,
        limit=3,
        per_principal=3,
        closed=lambda value, why, _: forgotten.append((value, why)),
    )
    carols = questions.open("carol", "c", "token:carol")
    mock_clock.jump(11)
    bobs = [questions.open("bob", f"b{n}", "token:bob") for n in range(2)]
    questions.open("alice", "a", "token:alice")
    assert forgotten == [("c", "expired")]
    assert [questions.take(state, "bob") for state in bobs] == ["b0", "b1"]
    with pytest.raises(StaleStateError, match=r"expired \(10 s without a retry"):
        questions.take(carols, "carol")


async def test_only_the_latest_closed_questions_keep_their_reason() -> None:
    """What a closed question's retry is told is kept for the latest ``limit`` of them."""
    questions = OpenQuestions(limit=2, per_principal=1)
    states = [questions.open("bob", n, "token:bob") for n in range(4)]
    with pytest.raises(StaleStateError, match="unknown or was answered"):
        questions.take(states[0], "bob")
    with pytest.raises(StaleStateError, match="its principal had 1 questions waiting"):
        questions.take(states[1], "bob")
    assert not questions.expire(states[1])
    assert questions.expire(states[3])
    with pytest.raises(StaleStateError, match="expired"):
        questions.take(states[3], "bob")


async def test_a_question_retried_past_its_time_is_closed_as_expired(
    mock_clock: MockClock,
) -> None:
    """A retry that comes after ``ttl_s`` (before anything else closed the question)
    closes it as expired, and is told so; a second retry finds nothing."""
    closed: list[Any] = []
    questions = OpenQuestions(ttl_s=10, closed=lambda value, why, _: closed.append((value, why)))
    state = questions.open("bob", "b", "token:bob")
    mock_clock.jump(11)
    with pytest.raises(StaleStateError, match=r"expired \(10 s without a retry"):
        questions.take(state, "bob")
    assert closed == [("b", "expired")]
    with pytest.raises(StaleStateError, match="unknown or was answered"):
        questions.take(state, "bob")
