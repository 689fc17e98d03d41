"""A downstream server's requests and logs reach the client whose call caused them.

Elicitation, sampling and roots requests, log messages, progress and
cancellation, with real SDK clients (several at once) and a real downstream
server over Streamable HTTP (which tells which call a request is for) and
over stdio (which does not).
"""

from __future__ import annotations

import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mcp_types as types
import pytest
import trio
from mcp import Client, StdioServerParameters

from prism.coding.security import create_coding_approval_policy, create_contained_file_operations
from prism.coding.tools import create_coding_tools
from prism.core import create_rule_permission_policy
from prism.core.ledger import RunLedger
from prism.gateway import (
    CODING_TOOL_HINTS,
    DownstreamServer,
    Gateway,
    HttpOptions,
    create_gateway_approver,
    open_gateway,
    serve_http,
)
from prism.mcp import StdioTransport, StreamableHttpTransport

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from conftest import RawStdioFactory

TESTS = Path(__file__).resolve().parent
FIXTURE = TESTS / "gateway_fixture_server.py"


@pytest.fixture(scope="module")
def downstream_url() -> Iterator[str]:
    """The fixture server over Streamable HTTP on 127.0.0.1 (one for this module)."""
    proc = subprocess.Popen(
        [sys.executable, str(FIXTURE), "http"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        assert line.startswith("PORT "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()  # type: ignore[union-attr]


def http_server(url: str) -> DownstreamServer:
    # A 2025-11-25 session: the server asks in the middle of the call, on its stream.
    return DownstreamServer(
        server_id="fx",
        transport=StreamableHttpTransport(url),
        options={"call_timeout_s": 30, "protocol": "legacy"},
    )


def stdio_server() -> DownstreamServer:
    return DownstreamServer(
        server_id="fx",
        transport=StdioTransport(sys.executable, [str(FIXTURE)]),
        options={"call_timeout_s": 30, "protocol": "legacy"},
    )


@asynccontextmanager
async def serving(
    workspace: Path, server: DownstreamServer, roots: tuple[str, ...] = ()
) -> AsyncIterator[tuple[str, Gateway]]:
    policy = create_coding_approval_policy(
        roots=[str(workspace)], approve=create_gateway_approver(), cache_approvals=False
    )
    tools = create_coding_tools(
        str(workspace),
        execution_policy=policy,
        file_operations=create_contained_file_operations([str(workspace)]),
    )
    async with (
        open_gateway(
            tools=tools,
            servers=[server],
            permission=create_rule_permission_policy(allow=["tool:*:execute"]),
            hints=CODING_TOOL_HINTS,
            ledger=RunLedger(),
            roots=roots,
        ) as gateway,
        trio.open_nursery() as nursery,
    ):
        url = await nursery.start(serve_http, gateway, HttpOptions(port=0))
        with trio.fail_after(60):
            await gateway.wait_servers()
        assert gateway.server_status()["fx"][0] == "up", gateway.server_status()
        yield url, gateway
        nursery.cancel_scope.cancel()


def text(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


class Both:
    """Holds each client's question until the other client's has arrived too."""

    def __init__(self) -> None:
        self.arrived: dict[str, trio.Event] = {"alice": trio.Event(), "bob": trio.Event()}
        self.asked: dict[str, list[str]] = {"alice": [], "bob": []}

    async def meet(self, who: str, what: str) -> None:
        self.asked[who].append(what)
        self.arrived[who].set()
        other = "bob" if who == "alice" else "alice"
        with trio.fail_after(60):
            await self.arrived[other].wait()


async def test_two_clients_questions_each_reach_their_own_client(
    workspace: Path, downstream_url: str
) -> None:
    """Alice and Bob ask through one downstream server at once; neither sees the other's."""
    both = Both()
    colours = {"alice": "red", "bob": "blue"}

    def elicit_for(who: str) -> Any:
        async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            await both.meet(who, params.message)
            return types.ElicitResult(action="accept", content={"colour": colours[who]})

        return elicit

    def sample_for(who: str) -> Any:
        async def sample(
            context: Any, params: types.CreateMessageRequestParams
        ) -> types.CreateMessageResult:
            prompt = params.messages[0].content
            assert isinstance(prompt, types.TextContent)
            await both.meet(who, prompt.text)
            return types.CreateMessageResult(
                role="assistant",
                content=types.TextContent(type="text", text=f"{who}'s answer"),
                model=f"{who}-model",
            )

        return sample

    results: dict[str, types.CallToolResult] = {}
    async with serving(workspace, http_server(downstream_url)) as (url, _gateway):
        async with (
            Client(url, elicitation_callback=elicit_for("alice"), mode="legacy") as alice,
            Client(url, elicitation_callback=elicit_for("bob"), mode="legacy") as bob,
            trio.open_nursery() as nursery,
        ):

            async def ask(who: str, client: Client) -> None:
                results[who] = await client.call_tool("mcp__fx__ask", {"question": f"{who}?"})

            nursery.start_soon(ask, "alice", alice)
            nursery.start_soon(ask, "bob", bob)
        assert text(results["alice"]) == "the user said red"
        assert text(results["bob"]) == "the user said blue"
        assert both.asked == {
            "alice": ["MCP server 'fx' asks (forwarded by Prism): alice?"],
            "bob": ["MCP server 'fx' asks (forwarded by Prism): bob?"],
        }

        both = Both()
        async with (
            Client(url, sampling_callback=sample_for("alice"), mode="legacy") as alice,
            Client(url, sampling_callback=sample_for("bob"), mode="legacy") as bob,
            trio.open_nursery() as nursery,
        ):

            async def think(who: str, client: Client) -> None:
                results[who] = await client.call_tool("mcp__fx__think", {"prompt": who})

            nursery.start_soon(think, "alice", alice)
            nursery.start_soon(think, "bob", bob)
    assert text(results["alice"]) == "the model wrote alice's answer (alice-model)"
    assert text(results["bob"]) == "the model wrote bob's answer (bob-model)"
    assert both.asked == {"alice": ["alice"], "bob": ["bob"]}


async def test_each_client_gets_its_own_roots_or_the_gateways(
    workspace: Path, downstream_url: str, tmp_path: Path
) -> None:
    """Two clients list different roots at once; one without roots gets the gateway's."""
    both = Both()
    mine = {"alice": (tmp_path / "a").as_uri(), "bob": (tmp_path / "b").as_uri()}

    def roots_for(who: str) -> Any:
        async def list_roots(context: Any) -> types.ListRootsResult:
            await both.meet(who, "roots")
            return types.ListRootsResult(roots=[types.Root(uri=mine[who])])  # type: ignore[arg-type]

        return list_roots

    results: dict[str, types.CallToolResult] = {}
    gateway_root = str(workspace)
    async with (
        serving(workspace, http_server(downstream_url), roots=(gateway_root,)) as (url, _),
        Client(url, list_roots_callback=roots_for("alice"), mode="legacy") as alice,
        Client(url, list_roots_callback=roots_for("bob"), mode="legacy") as bob,
        Client(url, mode="legacy") as carol,  # declares no roots
    ):
        async with trio.open_nursery() as nursery:

            async def roots(who: str, client: Client) -> None:
                results[who] = await client.call_tool("mcp__fx__roots", {})

            nursery.start_soon(roots, "alice", alice)
            nursery.start_soon(roots, "bob", bob)
        results["carol"] = await carol.call_tool("mcp__fx__roots", {})
    assert results["alice"].structured_content == {"result": [mine["alice"]]}
    assert results["bob"].structured_content == {"result": [mine["bob"]]}
    assert results["carol"].structured_content == {"result": [workspace.as_uri()]}


async def test_roots_no_client_can_give_are_refused_without_gateway_roots(
    workspace: Path, downstream_url: str
) -> None:
    async with (
        serving(workspace, http_server(downstream_url)) as (url, _),
        Client(url, mode="legacy") as client,
    ):
        result = await client.call_tool("mcp__fx__roots", {})
    assert result.is_error
    assert "UpstreamCannotAnswerError" in text(result)


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_logs_reach_a_2026_client_only_at_the_level_its_call_asked(
    workspace: Path, downstream_url: str, transport: str
) -> None:
    """A 2026-07-28 client opts in per request (``_meta`` logLevel); a 2025 one gets all."""
    logged: dict[str, list[tuple[str, str | None, object]]] = {"opted": [], "silent": []}

    def on_log_for(who: str) -> Any:
        async def on_log(params: types.LoggingMessageNotificationParams) -> None:
            logged[who].append((params.level, params.logger, params.data))

        return on_log

    server = http_server(downstream_url) if transport == "http" else stdio_server()
    async with (
        serving(workspace, server) as (url, _),
        Client(url, logging_callback=on_log_for("opted"), log_level="info") as opted,
        Client(url, logging_callback=on_log_for("silent")) as silent,
    ):
        assert opted.protocol_version == silent.protocol_version == "2026-07-28"
        first = await opted.call_tool("mcp__fx__chatty", {})
        second = await silent.call_tool("mcp__fx__chatty", {})
    assert text(first) == text(second) == "done"
    assert logged == {"opted": [("info", "mcp:fx/brain", "thinking hard")], "silent": []}


async def test_a_2026_client_asking_for_warnings_gets_no_info(
    workspace: Path, downstream_url: str
) -> None:
    logged: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params.level)

    async with (
        serving(workspace, http_server(downstream_url)) as (url, _),
        Client(url, logging_callback=on_log, log_level="warning") as client,
    ):
        result = await client.call_tool("mcp__fx__chatty", {})
    assert text(result) == "done"
    assert logged == []


async def test_progress_and_cancellation_pass_through_over_the_wire(
    raw_stdio: RawStdioFactory, initialize: Any
) -> None:
    """On the wire: the client's progressToken comes back on each progress
    notification, and its ``notifications/cancelled`` cancels the downstream call."""
    async with raw_stdio() as gateway:
        await gateway.send(initialize())
        assert (await gateway.receive())["id"] == 1
        await gateway.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        count = {
            "name": "mcp__fx__count",
            "arguments": {"steps": 2},
            "_meta": {"progressToken": "tok-7"},
        }
        await gateway.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": count})
        seen: list[dict[str, Any]] = []
        with trio.fail_after(60):
            while True:
                message = await gateway.receive()
                if message.get("id") == 2:
                    break
                if message.get("method") == "notifications/progress":
                    seen.append(message["params"])
        assert [(p["progressToken"], p["progress"], p["total"]) for p in seen] == [
            ("tok-7", 1.0, 2.0),
            ("tok-7", 2.0, 2.0),
        ]
        assert message["result"]["structuredContent"] == {"result": 2}

        hang = {"name": "mcp__fx__hang", "arguments": {}, "_meta": {"progressToken": 3}}
        await gateway.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": hang})
        with trio.fail_after(60):  # the downstream call has started
            while (await gateway.receive()).get("method") != "notifications/progress":
                pass
        check = {"name": "mcp__fx__was_hang_cancelled", "arguments": {}}
        await gateway.send({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": check})
        cancel = {"requestId": 3, "reason": "the user stopped it"}
        await gateway.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel}
        )
        with trio.fail_after(60):
            while (message := await gateway.receive()).get("id") != 4:
                assert message.get("id") != 3, message  # a cancelled request gets no answer
    assert message["result"].get("structuredContent") == {"result": True}, message


async def test_a_stdio_client_cancelling_with_the_sdk_cancels_the_downstream_call() -> None:
    params = StdioServerParameters(
        command=sys.executable, args=[str(TESTS / "gateway_stdio_main.py"), str(TESTS)]
    )
    async with Client(params, mode="legacy") as client:
        async with trio.open_nursery() as nursery:
            started = trio.Event()

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                started.set()

            nursery.start_soon(
                lambda: client.call_tool("mcp__fx__hang", {}, progress_callback=on_progress)
            )
            with trio.fail_after(60):
                await started.wait()  # the downstream call has started
            nursery.cancel_scope.cancel()  # the SDK sends notifications/cancelled
        cancelled = await client.call_tool("mcp__fx__was_hang_cancelled", {})
    assert cancelled.structured_content == {"result": True}
