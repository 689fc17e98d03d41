"""Concurrency limits of the gateway, per client and overall, seen from real clients."""

from __future__ import annotations

import mcp_types as types
import pytest
import trio
import trio.testing
from mcp import Client
from mcp.shared.exceptions import MCPError

from prism.core import JsonObject, ToolDefinition, ToolExecutionContext, ToolResult
from prism.core.ledger import RunLedger
from prism.gateway import HttpOptions, open_gateway, serve_http


class _Gauge:
    def __init__(self, release_at: int) -> None:
        self.running = 0
        self.peak = 0
        self.started = 0
        self.release_at = release_at
        self.release = trio.Event()

    async def execute(self, _args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        self.running += 1
        self.started += 1
        self.peak = max(self.peak, self.running)
        if self.started >= self.release_at:
            self.release.set()
        try:
            if not self.release.is_set():
                # Hold the slot until the other calls either started too or are
                # stuck (every task in this process blocked): then let all go.
                await trio.testing.wait_all_tasks_blocked(cushion=0.01)
                self.release.set()
        finally:
            self.running -= 1
        return ToolResult.text("done")


async def _run_calls(url: str, clients: int, calls_each: int) -> None:
    async def one_client(number: int) -> None:
        # Two sessions are two clients (2026-07-28 requests have no session: one
        # principal's are one client, whatever name each declares).
        info = types.Implementation(name=f"client{number}", version="1")
        async with (
            Client(url, client_info=info, mode="legacy") as client,
            trio.open_nursery() as nursery,
        ):
            for _ in range(calls_each):
                nursery.start_soon(client.call_tool, "gauge", {})

    async with trio.open_nursery() as nursery:
        for number in range(clients):
            nursery.start_soon(one_client, number)


@pytest.mark.parametrize(("clients", "expected_peak"), [(1, 1), (2, 2)])
async def test_one_client_gets_at_most_its_share(clients: int, expected_peak: int) -> None:
    gauge = _Gauge(release_at=2)
    tool = ToolDefinition(name="gauge", execute=gauge.execute)
    async with (
        open_gateway(tools=[tool], max_calls_per_client=1) as gateway,
        trio.open_nursery() as nursery,
    ):
        url = await nursery.start(serve_http, gateway, HttpOptions())
        await _run_calls(url, clients=clients, calls_each=2)
        nursery.cancel_scope.cancel()
    assert gauge.peak == expected_peak


async def test_a_call_waiting_for_its_clients_turn_holds_none_of_the_gateways_slots() -> None:
    """Alice queues more calls than the gateway has slots; Bob's call runs at once.

    Before, a call waiting for its client's slot held one of the gateway's while it
    waited, and Alice's later calls were ahead of Bob in the gateway's queue: her
    queue held every slot, and Bob waited behind all of her calls (Alice over the
    in-process stream transport, Bob over the in-process 2026-07-28 one).
    """
    started: list[str] = []
    go = trio.Event()

    async def turn(arguments: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        started.append(str(arguments["who"]))
        await go.wait()
        return ToolResult.text("done")

    tool = ToolDefinition(name="turn", execute=turn)
    async with (
        open_gateway(tools=[tool], max_concurrent_calls=2, max_calls_per_client=1) as gateway,
        Client(gateway.server, mode="legacy") as alice,
        Client(gateway.server) as bob,
        trio.open_nursery() as nursery,
    ):
        for _ in range(3):
            nursery.start_soon(alice.call_tool, "turn", {"who": "alice"})
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(bob.call_tool, "turn", {"who": "bob"})
        await trio.testing.wait_all_tasks_blocked()
        assert started == ["alice", "bob"]  # (before: ["alice"], Bob waiting)
        go.set()
    assert started == ["alice", "bob", "alice", "alice"]


async def test_calls_past_the_gateways_waiting_cap_are_refused_past_each_clients_share() -> None:
    """max_waiting_calls bounds the calls waiting of all clients together, fairly.

    Each client's own cap (max_waiting_calls_per_client) left the whole unbounded:
    many clients, each under its cap, piled up calls without end. Alice's calls fill
    the gateway's cap (2). Bob's call whose slots are free runs (it waits for
    nothing); his next one may still wait, being under his share of the cap (one of
    two clients: 1), so Alice's queue never locks him out; his third, and Alice's
    next, are refused at once with the per-client cap's error code, and recorded the
    same way.
    """
    started: list[str] = []
    go = trio.Event()
    ledger = RunLedger()

    async def turn(arguments: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        started.append(str(arguments["who"]))
        await go.wait()
        return ToolResult.text("done")

    tool = ToolDefinition(name="turn", execute=turn)
    refused: dict[str, MCPError] = {}
    async with (
        open_gateway(
            tools=[tool],
            ledger=ledger,
            max_concurrent_calls=2,
            max_calls_per_client=1,
            max_waiting_calls=2,
        ) as gateway,
        Client(gateway.server, mode="legacy") as alice,
        Client(gateway.server, mode="legacy") as bob,
        trio.open_nursery() as nursery,
    ):

        async def call(client: Client, who: str) -> None:
            try:
                await client.call_tool("turn", {"who": who})
            except MCPError as exc:
                refused[who] = exc

        for n in range(3):  # one runs, two wait for her turn: the gateway's cap
            nursery.start_soon(call, alice, f"alice {n}")
        await trio.testing.wait_all_tasks_blocked()
        for who in ("bob 0", "bob 1", "bob 2", "alice 3"):  # free slots; his share; past it
            nursery.start_soon(call, bob if who.startswith("bob") else alice, who)
            await trio.testing.wait_all_tasks_blocked()
        assert sorted(refused) == ["alice 3", "bob 2"]  # answered at once (before: waiting)
        assert [who.split()[0] for who in started] == ["alice", "bob"]
        go.set()
    for exc in refused.values():
        assert exc.error.code == -32029
        assert exc.error.message == (
            "too many calls waiting: the gateway has 2 calls of its clients waiting for their "
            "turn (max_waiting_calls), and this client its share of them; call again when one "
            "has ended"
        )
    assert sorted(started) == ["alice 0", "alice 1", "alice 2", "bob 0", "bob 1"]
    blocked = [r for r in ledger.records if r.status == "blocked"]
    assert sorted((r.tool_name, r.blocked_reason, str(r.arguments)) for r in blocked) == [
        ("turn", "tool_denied", str({"who": "alice 3"})),
        ("turn", "tool_denied", str({"who": "bob 2"})),
    ]
