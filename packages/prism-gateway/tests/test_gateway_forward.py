"""A downstream server's requests and logs reach the client whose call caused them.

Elicitation, sampling and roots requests, log messages, progress and
cancellation, with real SDK clients (several at once) and a real downstream
server over Streamable HTTP (which tells which call a request is for) and
over stdio (which does not).
"""

from __future__ import annotations

import hashlib
import logging
import math
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import gateway_prewarmed as prewarmed
import httpx2
import mcp_types as types
import pytest
import trio
import trio.testing
from mcp import Client, ClientSession, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.memory import create_client_server_memory_streams
from mcp.shared.message import SessionMessage

from prism.coding.security import create_coding_approval_policy, create_contained_file_operations
from prism.coding.tools import create_coding_tools
from prism.core import (
    AgentEvent,
    EventSink,
    ToolExecutionError,
    ToolExecutionFinished,
    create_rule_permission_policy,
)
from prism.core.ledger import RunLedger
from prism.gateway import (
    CODING_TOOL_HINTS,
    BearerAuth,
    DownstreamServer,
    Gateway,
    HttpOptions,
    create_gateway_approver,
    open_gateway,
    serve_http,
)
from prism.gateway._approval import CallScope
from prism.gateway._forward import Forwarder
from prism.gateway._urlids import MAX_KEPT, MAX_KEPT_PER_PRINCIPAL, UrlElicitations
from prism.mcp import (
    McpElicitationComplete,
    McpLogMessage,
    StdioTransport,
    StreamableHttpTransport,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from conftest import RawStdioFactory

TESTS = Path(__file__).resolve().parent
_MALLORY = {"name": "mallory", "version": "1"}
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


def stdio_server(protocol: str = "legacy", server_id: str = "fx") -> DownstreamServer:
    return DownstreamServer(
        server_id=server_id,
        transport=StdioTransport(*prewarmed.command(FIXTURE)),
        options={"call_timeout_s": 30, "protocol": protocol},
    )


@asynccontextmanager
async def serving(
    workspace: Path,
    server: DownstreamServer | list[DownstreamServer],
    roots: tuple[str, ...] = (),
    http: HttpOptions | None = None,
    question_ttl_s: float = 600.0,
    on_event: EventSink | None = None,
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
            servers=server if isinstance(server, list) else [server],
            permission=create_rule_permission_policy(allow=["tool:*:execute"]),
            hints=CODING_TOOL_HINTS,
            ledger=RunLedger(),
            roots=roots,
            question_ttl_s=question_ttl_s,
            on_event=on_event,
        ) as gateway,
        trio.open_nursery() as nursery,
    ):
        url = await nursery.start(serve_http, gateway, http or HttpOptions(port=0))
        with trio.fail_after(60):
            await gateway.wait_servers()
        status = gateway.server_status()
        assert {state for state, *_ in status.values()} == {"up"}, status
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


class FormOnly(ClientSession):
    """A real SDK client session that declares elicitation in form mode only."""

    def _build_capabilities(self, version: str) -> types.ClientCapabilities:
        declared = super()._build_capabilities(version)
        return declared.model_copy(update={"elicitation": types.ElicitationCapability()})


async def test_url_elicitations_get_ids_of_the_gateways_and_only_their_servers_complete_them(
    workspace: Path, downstream_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Two servers name their URL elicitations alike ("e-1"): the client sees a fresh,
    unguessable id for each, and a completion reaches it (under that id, once) only from
    the server that sent that elicitation; a completion of an id the server never sent,
    of another server's, or sent twice, is dropped. A client that declared form mode
    only is not sent a URL elicitation."""
    shown: list[str] = []
    completed: list[str] = []
    arrived = trio.Event()

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams)
        assert params.url == "https://auth.example/login"
        assert params.elicitation_id is not None
        shown.append(params.elicitation_id)
        return types.ElicitResult(action="accept")

    async def on_message(message: object) -> None:
        if isinstance(message, types.ElicitCompleteNotification):
            completed.append(message.params.elicitation_id)
            if len(completed) in (3, 4):
                arrived.set()

    servers = [http_server(downstream_url), stdio_server(server_id="fy")]
    async with serving(workspace, servers) as (url, gateway):
        async with Client(
            url, elicitation_callback=elicit, message_handler=on_message, mode="legacy"
        ) as c:

            async def sign_in(server: str, elicitation_id: str, *done: str) -> str:
                arguments = {"elicitation_id": elicitation_id, "done": list(done)}
                return text(await c.call_tool(f"mcp__{server}__sign_in", arguments))

            assert await sign_in("fx", "e-1", "e-1") == "the user chose accept"
            await sign_in("fx", "x-7")  # left waiting for its completion
            # fy completes its own e-1 (twice), and fx's x-7 and z-0..z-6 nobody sent.
            await sign_in("fy", "e-1", "e-1", "e-1", "x-7", *(f"z-{n}" for n in range(7)))
            await sign_in("fx", "x-8", "x-7")  # fx completes x-7, its call long over
            with trio.fail_after(30):
                await arrived.wait()

            # fy's URLElicitationRequiredError (-32042): the error itself, the id the gateway's.
            with pytest.raises(MCPError) as required:
                await c.call_tool("mcp__fy__sign_in", {"elicitation_id": "r-1", "required": True})
            arrived = trio.Event()
            await sign_in("fy", "r-2", "r-1")  # fy completes r-1
            with trio.fail_after(30):
                await arrived.wait()

            async with (
                streamable_http_client(url) as (read, write),
                FormOnly(read, write, elicitation_callback=elicit) as form_only,
            ):
                await form_only.initialize()
                refused = await form_only.call_tool("mcp__fx__sign_in", {"elicitation_id": "f-1"})
                not_shown = await form_only.call_tool(
                    "mcp__fx__sign_in", {"elicitation_id": "f-2", "required": True}
                )
            kept = len(gateway._forward._urls)  # x-8 and r-2, never completed
        # Alice's client closed its session (DELETE): what was kept for it goes.
        await trio.testing.wait_all_tasks_blocked()
        assert (kept, len(gateway._forward._urls)) == (2, 0)
    assert len(set(shown)) == 5, shown
    assert not {"e-1", "x-7", "x-8", "r-2"} & set(shown)
    assert all(len(each) >= 24 for each in shown)
    fx_e1, fx_x7, fy_e1, _fx_x8, _fy_r2 = shown
    error = required.value.error
    assert error.code == types.URL_ELICITATION_REQUIRED
    assert isinstance(error.data, dict)
    (page,) = error.data["elicitations"]
    assert page["message"] == "MCP server 'fy' asks (forwarded by Prism): sign in first"
    assert (page["mode"], page["url"]) == ("url", "https://auth.example/login")
    fy_r1 = page["elicitationId"]
    assert fy_r1 not in {"r-1", *shown}
    assert len(fy_r1) >= 24
    assert completed == [fx_e1, fy_e1, fx_x7, fy_r1]
    assert not_shown.is_error
    assert text(not_shown).endswith(
        "the client cannot be shown them: it did not declare elicitation in URL mode"
    )
    dropped = [
        r.getMessage()
        for r in caplog.records
        if "dropped MCP server" in r.getMessage() and r.levelno == logging.WARNING
    ]
    # Nine dropped (one more at debug level only): fy cannot flood the log.
    assert len(dropped) == 8, dropped
    assert all(message.startswith("dropped MCP server 'fy'") for message in dropped)
    assert [m.split("complete for ")[1].split(":")[0] for m in dropped[:3]] == [
        "'e-1'",
        "'x-7'",
        "'z-0'",
    ]
    assert dropped[-1].endswith("(more from this server are logged at debug level)")
    assert refused.is_error
    assert "UpstreamCannotAnswerError" in text(refused)
    assert "did not declare elicitation in URL mode" in caplog.text


async def test_a_client_that_stops_reading_holds_up_no_other_clients_messages(
    workspace: Path, downstream_url: str
) -> None:
    """Mallory's call on fx logs, and mallory stops reading (its session's writes block,
    as a client that stops reading its call's stream makes them): alice's call on fy
    still gets its log message while it runs, and her URL elicitation's completion
    after it ended. Messages are sent per session, never one client's after another's."""
    logged = trio.Event()
    completed: list[str] = []
    arrived = trio.Event()

    async def alice_log(params: types.LoggingMessageNotificationParams) -> None:
        assert (params.logger, params.data) == ("mcp:fy/auth", "signing in")
        logged.set()

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        with trio.fail_after(30):
            await logged.wait()  # the call's log message came first, while it runs
        return types.ElicitResult(action="accept")

    async def on_message(message: object) -> None:
        if isinstance(message, types.ElicitCompleteNotification):
            completed.append(message.params.elicitation_id)
            arrived.set()

    servers = [http_server(downstream_url), stdio_server(server_id="fy")]
    async with (
        serving(workspace, servers) as (url, gateway),
        create_client_server_memory_streams() as ((read, write), server_streams),
        trio.open_nursery() as nursery,
    ):
        options = gateway.initialization_options()
        nursery.start_soon(gateway.server.run, *server_streams, options)

        # Mallory: a client of raw messages that reads until its call's first log message.
        async def send(message: types.JSONRPCMessage) -> None:
            await write.send(SessionMessage(message))

        async def receive(method: str | None = None) -> Any:
            while True:
                got = await read.receive()
                assert isinstance(got, SessionMessage), got
                if method is None or getattr(got.message, "method", None) == method:
                    return got.message

        hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": _MALLORY}
        await send(types.JSONRPCRequest(jsonrpc="2.0", id=0, method="initialize", params=hello))
        with trio.fail_after(30):
            await receive()
        await send(types.JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized"))
        call = {"name": "mcp__fx__chatter", "arguments": {"count": 4}}
        await send(types.JSONRPCRequest(jsonrpc="2.0", id=1, method="tools/call", params=call))
        with trio.fail_after(30):
            await receive("notifications/message")
        # From here on mallory reads nothing: the gateway's writes to it block.

        async with Client(
            url,
            elicitation_callback=elicit,
            logging_callback=alice_log,
            message_handler=on_message,
            mode="legacy",
        ) as alice:
            signed = await alice.call_tool(
                "mcp__fy__sign_in", {"elicitation_id": "h-1", "log": True}
            )
            assert text(signed) == "the user chose accept"
            await alice.call_tool("mcp__fy__sign_in", {"elicitation_id": "h-2", "done": ["h-1"]})
            with trio.fail_after(30):
                await arrived.wait()  # h-1's call is over: on alice's session
        nursery.cancel_scope.cancel()
    assert len(completed) == 1


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
    command, args = prewarmed.command(TESTS / "gateway_stdio_main.py", str(TESTS))
    params = StdioServerParameters(command=command, args=args)
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


async def test_a_2026_client_answers_its_servers_question_and_the_approval_by_retry(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A 2026-07-28 client cannot be sent a request mid-call: the server's elicitation and
    the gateway's own approval question come back as input_required, and the SDK client's
    retries answer them (each question told apart by who asks)."""
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        if isinstance(params, types.ElicitRequestURLParams):
            asked.append(f"{params.url} {params.elicitation_id}")
            return types.ElicitResult(action="decline")
        if params.message.startswith("Prism asks"):
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action="accept", content={"colour": "green"})

    async def sample(
        context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="hi"), model="m"
        )

    async def list_roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=workspace.as_uri())])  # type: ignore[arg-type]

    async with (
        serving(workspace, stdio_server()) as (url, gateway),
        Client(
            url,
            elicitation_callback=elicit,
            sampling_callback=sample,
            list_roots_callback=list_roots,
        ) as client,
    ):
        assert client.protocol_version == "2026-07-28"
        answered = await client.call_tool("mcp__fx__ask", {"question": "colour?"})
        approved = await client.call_tool("shell", {"command": "touch made.txt && echo made"})
        sampled = await client.call_tool("mcp__fx__think", {"prompt": "say hi"})
        listed = await client.call_tool("mcp__fx__roots", {})
        # Its completion has no id to go under (2026-07-28 has none): dropped.
        signed = await client.call_tool("mcp__fx__sign_in", {"done": ["e-1"]})
        required = await client.call_tool("mcp__fx__sign_in", {"required": True})
        # A call run apart is still the client's to cancel: its server's call ends too.
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
            nursery.cancel_scope.cancel()
        cancelled = await client.call_tool("mcp__fx__was_hang_cancelled", {})
        ledger = gateway.ledger
        assert ledger is not None
        records = [(r.tool_name, r.status) for r in ledger.records]
    assert text(answered) == "the user said green"
    assert text(sampled) == "the model wrote hi (m)"
    assert listed.structured_content == {"result": [workspace.as_uri()]}
    assert text(signed) == "the user chose decline"
    assert required.is_error
    assert text(required).endswith("cannot be shown them: 2026-07-28 has no such error")
    assert "dropped MCP server 'fx''s notifications/elicitation/complete for 'e-1'" in caplog.text
    assert cancelled.structured_content == {"result": True}
    assert asked[2:] == [
        "MCP server 'fx' asks (forwarded by Prism): sign in please",
        "https://auth.example/login None",  # 2026-07-28 has no elicitationId
    ]
    assert not approved.is_error, approved.content
    assert (workspace / "made.txt").exists()
    assert asked[0] == "MCP server 'fx' asks (forwarded by Prism): colour?"
    assert asked[1].startswith("Prism asks whether the tool 'shell'")
    assert records[0] == ("mcp:fx:ask", "ok")


async def test_a_2026_client_answers_two_questions_its_server_asks_at_once(
    workspace: Path,
) -> None:
    """Two questions of one call wait at once (the call's slots let go once, taken back
    once): each answer reaches the server, and the slots are free again after."""
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        colour = "red" if "first?" in params.message else "blue"
        return types.ElicitResult(action="accept", content={"colour": colour})

    async with (
        serving(workspace, stdio_server()) as (url, gateway),
        Client(url, elicitation_callback=elicit) as client,
    ):
        both = await client.call_tool("mcp__fx__ask_two", {})
        again = await client.call_tool("mcp__fx__ask_two", {})
        assert gateway._limiter.borrowed_tokens == 0
    assert text(both) == "red blue", both.content
    assert text(again) == "red blue", again.content
    assert sorted(asked) == sorted(
        [f"MCP server 'fx' asks (forwarded by Prism): {q}" for q in ("first?", "second?")] * 2
    )


TOKENS = {"alice": "token-of-alice-0123456789", "bob": "token-of-bob-0123456789ab"}


@asynccontextmanager
async def as_principal(url: str, who: str) -> AsyncIterator[Client]:
    """A 2026-07-28 client holding ``who``'s bearer token, that answers nothing by itself."""

    async def never(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        raise AssertionError("the retries are driven by hand")  # pragma: no cover

    async with (
        httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKENS[who]}"}) as http,
        Client(streamable_http_client(url, http_client=http), elicitation_callback=never) as c,
    ):
        yield c


async def retry_unanswered(
    client: Client, arguments: dict[str, Any], answer: dict[str, Any] | None = None
) -> types.CallToolResult:
    """Call ``ask``, and retry its question with ``answer`` (raw wire) or no answer at all."""
    first = await client.session.call_tool("mcp__fx__ask", arguments, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult)
    assert first.input_requests is not None
    responses = None if answer is None else dict.fromkeys(first.input_requests, answer)
    result = await client.session.call_tool(
        "mcp__fx__ask",
        arguments,
        input_responses=responses,  # type: ignore[arg-type]
        request_state=first.request_state,
        allow_input_required=True,
    )
    assert isinstance(result, types.CallToolResult)
    return result


async def test_a_waiting_calls_state_is_its_callers_once_and_for_that_call_only(
    workspace: Path, mock_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The request state of a call waiting for its server's question is refused (and
    recorded) when Bob sends it, when Alice sends it for other arguments, forged, replayed,
    or after the question expired; Alice's own retry gets the answer through."""
    red: dict[str, Any] = {"colour": "red"}
    options = HttpOptions(port=0, auth=BearerAuth(tokens=tuple(TOKENS.values())))
    question = {"question": "colour?"}
    cancelled = trio.Event()
    ended: list[AgentEvent] = []

    def on_event(event: AgentEvent) -> None:
        if isinstance(event, (ToolExecutionError, ToolExecutionFinished)):
            ended.append(event)
            if len(ended) == 4:  # answered, unanswered, nonsense, and the call that expired
                cancelled.set()

    async with (
        serving(workspace, stdio_server(), http=options, question_ttl_s=10, on_event=on_event) as (
            url,
            gateway,
        ),
        as_principal(url, "alice") as alice,
        as_principal(url, "bob") as bob,
    ):
        first = await alice.session.call_tool("mcp__fx__ask", question, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        assert first.input_requests is not None
        (key,) = first.input_requests
        state = first.request_state
        assert state is not None

        async def retry(
            client: Client, arguments: dict[str, Any], sent: str | None
        ) -> types.CallToolResult:
            answer = {key: types.ElicitResult(action="accept", content=red)}
            result = await client.session.call_tool(
                "mcp__fx__ask",
                arguments,
                input_responses=answer,  # type: ignore[arg-type]
                request_state=sent,
                allow_input_required=True,
            )
            assert isinstance(result, types.CallToolResult)
            return result

        by_bob = await retry(bob, question, state)
        other_call = await retry(alice, {"question": "size?"}, state)
        forged = await retry(alice, question, "call:" + "0" * 32)
        answered = await retry(alice, question, state)
        replayed = await retry(alice, question, state)
        unanswered = await retry_unanswered(alice, question)
        nonsense = await retry_unanswered(alice, question, {"roots": []})
        second = await alice.session.call_tool("mcp__fx__ask", question, allow_input_required=True)
        assert isinstance(second, types.InputRequiredResult)
        mock_clock.jump(11)  # past question_ttl_s (not past the bridge's call_timeout_s)
        expired = await retry(alice, question, second.request_state)
        with trio.fail_after(30):  # the call's end (its server is told to stop first)
            await cancelled.wait()
        ledger = gateway.ledger
        assert ledger is not None
        refused = [r for r in ledger.records if r.status == "blocked"]
        evicted = [r for r in ledger.records if r.tool_name == "prism:question"]
        ended_records = [r for r in ledger.records if r.status == "cancelled"]
    assert key.startswith("mcp:fx:")
    assert text(answered) == "the user said red"
    # A retry that answers nothing, or with no elicitation answer: the server is told so
    # (its tool fails here), and why is logged.
    assert "the host could not answer" in text(unanswered)
    assert "the host could not answer" in text(nonsense)
    said = caplog.text
    assert "the client's retry did not answer the question" in said
    assert "the client's answer is not a ElicitResult" in said
    assert "asked of another client or for another call" in text(by_bob)
    assert "asked of another client or for another call" in text(other_call)
    assert "unknown or was answered already" in text(forged)
    assert "unknown or was answered already" in text(replayed)
    assert "its question expired (10 s without a retry answering it)" in text(expired)
    # The expired call ended (its own record says why) and the expiry is recorded.
    assert [(r.arguments, r.result_preview) for r in evicted] == [
        (
            {
                "event": "evicted",
                "why": "expired",
                "principal": "token " + hashlib.sha256(TOKENS["alice"].encode()).hexdigest()[:8],
                "session": "-",
                "call": evicted[0].arguments["call"],  # type: ignore[call-overload,index]
                "tool": "mcp:fx:ask",
            },
            "its question expired (10 s without a retry answering it)",
        )
    ]
    assert [(r.tool_name, r.result_preview) for r in ended_records] == [
        (
            "mcp:fx:ask",
            "tool call mcp:fx:ask was cancelled: its question expired (10 s "
            "without a retry answering it)",
        )
    ]
    assert all(r.is_error for r in (by_bob, other_call, forged, replayed, expired))
    assert [r.blocked_reason for r in refused] == ["permission_denied"] * 5
    assert [r.call_id.split("/")[0] for r in refused] == [
        "token:" + hashlib.sha256(TOKENS[who].encode()).hexdigest()[:8]
        for who in ("bob", "alice", "alice", "alice", "alice")
    ]


async def test_a_2026_server_over_stdio_asks_each_caller_for_its_own_call(
    workspace: Path,
) -> None:
    """A server over stdio that speaks 2026-07-28 asks inside each call's result, so its
    questions are routed by call: Alice (2025-11-25, asked mid-call) and Bob (2026-07-28,
    asked by input_required) call it at once and each gets only their own question."""
    both = Both()
    colours = {"alice": "red", "bob": "blue"}

    def elicit_for(who: str) -> Any:
        async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            await both.meet(who, params.message)
            return types.ElicitResult(action="accept", content={"colour": colours[who]})

        return elicit

    results: dict[str, types.CallToolResult] = {}
    async with (
        serving(workspace, stdio_server("auto")) as (url, _gateway),
        Client(url, elicitation_callback=elicit_for("alice"), mode="legacy") as alice,
        Client(url, elicitation_callback=elicit_for("bob")) as bob,
        trio.open_nursery() as nursery,
    ):
        assert bob.protocol_version == "2026-07-28"

        async def ask(who: str, client: Client) -> None:
            arguments = {"question": f"{who}?"}
            results[who] = await client.call_tool("mcp__fx__ask_resolved", arguments)

        nursery.start_soon(ask, "alice", alice)
        nursery.start_soon(ask, "bob", bob)
    assert text(results["alice"]) == "the user said red"
    assert text(results["bob"]) == "the user said blue"
    assert both.asked == {
        "alice": ["MCP server 'fx' asks (forwarded by Prism): alice?"],
        "bob": ["MCP server 'fx' asks (forwarded by Prism): bob?"],
    }


async def test_a_waiting_calls_retry_is_resumed_after_its_tool_left_the_listing(
    workspace: Path,
) -> None:
    """The tool of a 2026-07-28 call waiting for its client's answer leaves the server's
    listing: the retry with its state still answers the call and gets its result."""

    async def never(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        raise AssertionError("the retry is driven by hand")  # pragma: no cover

    async with (
        serving(workspace, stdio_server()) as (url, _gateway),
        Client(url, elicitation_callback=never) as client,
    ):
        await client.list_tools()
        async with client.listen(tools_list_changed=True) as subscription:
            first = await client.session.call_tool(
                "mcp__fx__ask_vanish", {}, allow_input_required=True
            )
            with trio.fail_after(30):
                async for _event in subscription:
                    break
        names = {tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools}
        assert "mcp__fx__ask_vanish" not in names
        assert isinstance(first, types.InputRequiredResult)
        assert first.input_requests is not None
        answers = dict.fromkeys(
            first.input_requests, types.ElicitResult(action="accept", content={"colour": "red"})
        )
        result = await client.session.call_tool(
            "mcp__fx__ask_vanish",
            {},
            input_responses=answers,  # type: ignore[arg-type]
            request_state=first.request_state,
            allow_input_required=True,
        )
    assert isinstance(result, types.CallToolResult)
    assert text(result) == "the user said red"


async def _spoofing(
    alice: Client, bob: Client, replay: bool, standalone: bool = False
) -> tuple[list[str | None], str]:
    """Alice watches for progress while Bob's call makes the server send progress under
    other calls' tokens: what Alice's progress callback got, and Bob's result."""
    seen: list[str | None] = []
    started = trio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message)
        started.set()

    watched: list[types.CallToolResult] = []
    async with trio.open_nursery() as nursery:

        async def watch() -> None:
            watched.append(
                await alice.call_tool("mcp__fx__watch", {}, progress_callback=on_progress)
            )

        nursery.start_soon(watch)
        with trio.fail_after(60):
            await started.wait()
        arguments = {"guesses": list(range(64)), "replay": replay, "standalone": standalone}
        spoofed = await bob.call_tool("mcp__fx__spoof", arguments)
    assert [text(result) for result in watched] == ["watched"]
    return seen, text(spoofed)


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
async def test_a_server_cannot_put_progress_into_another_clients_call(
    workspace: Path, downstream_url: str, protocol: str
) -> None:
    """Over Streamable HTTP, on Bob's call's own stream (and on the session's standalone
    stream, at 2025-11-25), the server sends progress under the real token of Alice's call
    and under 64 guessed ones (the SDK's tokens were its request ids 0, 1, 2...): Alice
    gets only her call's own progress (2025-11-25 and 2026-07-28 sessions)."""
    server = http_server(downstream_url)
    server = DownstreamServer(
        server_id="fx", transport=server.transport, options={"protocol": protocol}
    )
    async with serving(workspace, server) as (url, gateway):
        (bridge,) = gateway._bridges
        assert bridge.protocol_version == {"legacy": "2025-11-25", "auto": "2026-07-28"}[protocol]
        async with Client(url, mode="legacy") as alice, Client(url, mode="legacy") as bob:
            seen, said = await _spoofing(alice, bob, replay=True, standalone=True)
    assert said == "spoofed 1 + 64"
    assert seen == ["mine"]


async def _cancel_once_started(client: Client, tool: str) -> None:
    """Call ``tool`` and cancel the call once the server says (progress) it started."""
    async with trio.open_nursery() as nursery:
        started = trio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            started.set()

        nursery.start_soon(lambda: client.call_tool(tool, {}, progress_callback=on_progress))
        with trio.fail_after(60):
            await started.wait()
        nursery.cancel_scope.cancel()


async def test_a_cancelled_call_counts_as_its_clients_until_its_server_answers_it(
    workspace: Path,
) -> None:
    """Alice cancels a call her stdio server still runs, and it asks later, during Bob's
    call: the gateway refuses (the server cannot say which call it is for), Bob is asked
    nothing. Alice cancels a call her server finishes all the same and answers late: that
    answer says the call is over there, so the server's question during Bob's call goes
    to Bob (before, Alice's call counted for 120 s and Bob's question was refused). And
    over the same pipe (which says nothing of which call a notification is for), Bob's
    call makes the server send progress under 64 guessed tokens: none reaches Alice's
    call (Alice's is a 2026-07-28 client, Bob's a 2025-11-25 one)."""
    options = HttpOptions(port=0, auth=BearerAuth(tokens=tuple(TOKENS.values())))
    bob_asked: list[str] = []

    async def bob_answers(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        bob_asked.append(params.message)
        return types.ElicitResult(action="accept", content={"colour": "blue"})

    async with (
        serving(workspace, stdio_server(), http=options) as (url, _gateway),
        as_principal(url, "alice") as alice,
        httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKENS['bob']}"}) as http,
        Client(
            streamable_http_client(url, http_client=http), elicitation_callback=bob_answers
        ) as bob,
    ):
        await _cancel_once_started(alice, "mcp__fx__answer_late")
        # Its result comes after the late answer on the same pipe.
        late = await bob.call_tool("mcp__fx__was_answered_late", {})
        # (a carriage return and an erase would redraw the prefix away on a terminal)
        asked = await bob.call_tool("mcp__fx__ask", {"question": "\r\x1b[2Kcolour?"})
        seen, said = await _spoofing(alice, bob, replay=False)
        # A call the server never answers counts on (until unanswered_call_s).
        await _cancel_once_started(alice, "mcp__fx__ask_late")
        held = await bob.call_tool("mcp__fx__hold", {})
    assert late.structured_content == {"result": True}
    assert text(asked) == "the user said blue", asked.content
    assert said == "spoofed 0 + 64"
    assert seen == ["mine"]
    assert text(held).startswith("refused"), held.content
    assert bob_asked == ["MCP server 'fx' asks (forwarded by Prism): \\x0d\\x1b[2Kcolour?"]


class _Session:
    """A client session as the forwarder sees it: what it is sent goes into a channel
    (of no buffer for a client that reads nothing: each send then waits)."""

    def __init__(self, buffer: float) -> None:
        self.sent, self.got = trio.open_memory_channel[tuple[Any, Any]](buffer)

    async def send_notification(self, notification: Any, related_request_id: Any = None) -> None:
        await self.sent.send((notification, related_request_id))


async def test_a_client_that_reads_nothing_loses_only_its_own_messages(
    mock_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Mallory's session takes nothing: alice's log message and completion are sent at
    once all the same; mallory's (a call's, and a session's once the call is over) are
    dropped, and said, when one is not taken within the bound; past 32 completions
    waiting for one call, more are dropped, and said."""
    forward = Forwarder()
    forward.log("s1")
    forward.log("s2")
    mallory, alice = _Session(0), _Session(math.inf)
    started = SimpleNamespace(started=True)
    levels = frozenset({"info"})
    m = CallScope(
        session=mallory,
        request_id=7,
        client="token:mmmm/h/s",
        tool_name="mcp:s1:t",
        call_id="m",
        log_levels=levels,
    )
    a = CallScope(
        session=alice,
        request_id=1,
        client="token:aaaa/h/s",
        tool_name="mcp:s2:t",
        call_id="a",
        log_levels=levels,
    )
    m.slots = a.slots = started

    def log(server_id: str, call_id: str) -> None:
        message = McpLogMessage(
            server_id=server_id, level="info", logger=None, data="x", call_id=call_id
        )
        forward.log(server_id)(message)

    def complete(server_id: str, said: str) -> None:
        notice = McpElicitationComplete(server_id=server_id, elicitation_id=said)
        forward.completed(server_id)(notice)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(forward.send_logs)
        with forward.calling("s1", m), forward.calling("s2", a):
            log("s1", "m")
            log("s1", "m")
            for n in range(MAX_KEPT_PER_PRINCIPAL):
                forward._urls.issue("s1", f"m-{n}", m)
            log("s2", "a")
            shown = forward._urls.issue("s2", "a-1", a)
            complete("s2", "a-1")
            # (the clock stands still: mallory's send waits, its bound is not met)
            await trio.testing.wait_all_tasks_blocked()
            logged, to_call = alice.got.receive_nowait()
            assert (logged.params.logger, to_call) == ("mcp:s2", 1)
            completed, to_call = alice.got.receive_nowait()
            assert (completed.params.elicitation_id, to_call) == (shown, 1)
            for n in range(MAX_KEPT_PER_PRINCIPAL):
                complete("s1", f"m-{n}")
            forward._urls.issue("s1", "m-past", m)
            complete("s1", "m-past")  # 32 wait already
            mock_clock.jump(5)
            await trio.testing.wait_all_tasks_blocked()
        forward._urls.issue("s1", "m-late", m)
        complete("s1", "m-late")  # the call is over: to the session
        forward._urls.issue("s2", "a-late", a)
        complete("s2", "a-late")
        await trio.testing.wait_all_tasks_blocked()
        completed, to_call = alice.got.receive_nowait()
        assert to_call is None
        mock_clock.jump(5)
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert said == [
        "dropped MCP server 's1''s completion of a URL elicitation for token:mmmm/h/s: "
        "32 wait to be sent to that client already",
        "dropped 34 forwarded notification(s) for token:mmmm/h/s's call of 'mcp:s1:t': "
        "its client took no message within 5 s",
        "dropped 1 forwarded notification(s) for a client's session: it took no message within 5 s",
    ]


async def test_url_elicitation_ids_are_kept_per_server_capped_and_expire(
    mock_clock: trio.testing.MockClock,
) -> None:
    """The map behind the forwarded ids: one principal's many elicitations, over all its
    sessions, push out only its own oldest; past the cap in all, the largest holder's
    oldest goes, never another principal's; an id expires at its TTL and goes with its
    server; a server id named twice stands for the later one only."""
    ids = UrlElicitations(ttl_s=60.0)

    def scope(client: str) -> CallScope:
        return CallScope(session=None, request_id=1, client=client, tool_name="mcp:fx:sign_in")

    alice, bob = scope("token:aaaa/host/s1"), scope("token:bbbb/host/s1")
    first = ids.issue("fx", "a-0", alice)
    assert ids.issue("fx", None, alice) != first  # nothing to complete it by: not kept
    assert len(ids) == 1
    # Mallory, one principal, with eight sessions of 32 each: she keeps 32 in all.
    for session in range(8):
        mallory = scope(f"token:mmmm/host/s{session}")
        for n in range(MAX_KEPT_PER_PRINCIPAL):
            ids.issue("fm", f"m-{session}-{n}", mallory)
    assert len(ids) == 1 + MAX_KEPT_PER_PRINCIPAL
    assert ids.complete("fm", "m-6-31") is None  # her own oldest went to make room
    # Many principals of one each fill the map: the largest holder's oldest goes.
    others = MAX_KEPT - len(ids)
    for n in range(others + 2):
        ids.issue("fy", f"b-{n}", scope(f"token:c{n}/host/s"))
    assert len(ids) == MAX_KEPT
    assert ids.complete("fm", "m-7-0") is None  # mallory's two oldest went
    assert ids.complete("fm", "m-7-1") is None
    assert ids.complete("fm", "m-7-2") is not None
    assert ids.complete("fy", "b-0") is not None
    issued = ids.complete("fx", "a-0")  # alice's single one stays, whatever others hold
    assert issued is not None
    assert (issued.upstream_id, issued.scope) == (first, alice)

    again = ids.issue("fy", "b-1", bob)  # fy names b-1 a second time, for bob
    issued = ids.complete("fy", "b-1")
    assert issued is not None
    assert (issued.upstream_id, issued.scope) == (again, bob)
    assert ids.complete("fy", "b-1") is None  # once

    ids.issue("fx", "a-9", alice)
    ids.server_gone("fy")
    ids.server_gone("fm")
    assert ids.complete("fy", "b-3") is None
    assert len(ids) == 1
    mock_clock.jump(61)
    assert ids.complete("fx", "a-9") is None  # past its TTL
    assert len(ids) == 0


@pytest.mark.parametrize(
    ("schema", "unshowable"),
    [
        ({"type": "object", "properties": {"ok": {"type": "string", "title": "t\r"}}}, False),
        ({"type": "object", "properties": {"ok\r\x1b[2K": {"type": "string"}}}, True),
        ({"type": "object", "properties": {"ok": {"enum": ["yes\x1b[1A", "no"]}}}, True),
        ({"type": "object", "properties": {"ok": {"type": "string", "default": "y\u202e"}}}, True),
        ({"type": "object", "properties": {"ok": {"const": "a\x08"}}}, True),
        ({"type": "object", "properties": {"ok": {"enum": ["yes", "no"], "default": "no"}}}, False),
    ],
)
def test_a_form_answered_with_unshowable_strings_is_not_forwarded(
    schema: dict[str, Any], unshowable: bool
) -> None:
    """Titles and descriptions are shown escaped; field names and the values an answer is
    made of (enum, const, default, examples) must be sent as they are, so a form holding
    control characters there is declined, never put in front of the person."""
    from prism.gateway._forward import _answers_unshowable, _shown_schema

    assert _answers_unshowable(schema) is unshowable
    shown = _shown_schema(schema)
    assert "\r" not in shown["properties"].get("ok", {}).get("title", "")
