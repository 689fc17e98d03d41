"""Downstream servers start in the background: the gateway answers at once.

One server that does not start, or dies, never takes the gateway down.
"""

from __future__ import annotations

import logging
import os
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import gateway_prewarmed as prewarmed
import mcp_types as types
import pytest
import trio
from mcp import Client
from mcp.shared.exceptions import MCPError

from prism.coding.security import create_coding_approval_policy, create_contained_file_operations
from prism.coding.tools import create_coding_tools
from prism.core import ConfigurationError, create_rule_permission_policy
from prism.core.ledger import RunLedger
from prism.gateway import (
    CODING_TOOL_HINTS,
    DownstreamServer,
    Gateway,
    GatewayError,
    HttpOptions,
    create_gateway_approver,
    open_gateway,
    serve_http,
)
from prism.mcp import StdioTransport

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

TESTS = Path(__file__).resolve().parent
GATED = TESTS / "gateway_gated_server.py"
FIXTURE = TESTS / "gateway_fixture_server.py"


@attrs.define
class Gate:
    """A FIFO the gated server reads its orders from (see gateway_gated_server.py)."""

    path: Path

    async def say(self, word: str) -> None:
        # Opening for writing waits for the server to open it for reading.
        def write() -> None:
            with open(self.path, "w", encoding="utf-8") as fifo:
                fifo.write(word + "\n")

        with trio.fail_after(60):
            await trio.to_thread.run_sync(write, abandon_on_cancel=True)


def gated(
    tmp_path: Path, server_id: str, *, required: bool = False
) -> tuple[DownstreamServer, Gate]:
    fifo = tmp_path / f"{server_id}.fifo"
    os.mkfifo(fifo)
    transport = StdioTransport(*prewarmed.command(GATED, str(fifo)))
    server = DownstreamServer(
        server_id=server_id,
        transport=transport,
        required=required,
        options={"call_timeout_s": 30, "connect_timeout_s": 60},
    )
    return server, Gate(fifo)


def fixture(server_id: str = "fx", *, legacy: bool = False) -> DownstreamServer:
    options: dict[str, object] = {"call_timeout_s": 30}
    if legacy:  # a 2025-11-25 session: the server may send requests in the middle of a call
        options["protocol"] = "legacy"
    return DownstreamServer(
        server_id=server_id,
        transport=StdioTransport(*prewarmed.command(FIXTURE)),
        options=options,
    )


@asynccontextmanager
async def serving(
    workspace: Path, servers: list[DownstreamServer]
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
            servers=servers,
            permission=create_rule_permission_policy(allow=["tool:*:execute"]),
            hints=CODING_TOOL_HINTS,
            ledger=RunLedger(),
        ) as gateway,
        trio.open_nursery() as nursery,
    ):
        url = await nursery.start(serve_http, gateway, HttpOptions(port=0))
        yield url, gateway
        nursery.cancel_scope.cancel()


def text(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def test_the_gateway_serves_before_a_server_is_up_and_announces_it(
    workspace: Path, tmp_path: Path
) -> None:
    slow, gate = gated(tmp_path, "slow")
    changed = trio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with (
        serving(workspace, [slow]) as (url, gateway),
        Client(url, message_handler=on_message, mode="legacy") as client,
    ):
        # The server waits for its gate: everything here happens before it is up.
        names = {tool.name for tool in (await client.list_tools()).tools}
        early = await client.call_tool("mcp__slow__echo", {"text": "x"})
        read = await client.call_tool("read", {"path": "notes.txt"})
        assert gateway.server_status() == {"slow": ("starting", None)}
        await gate.say("start")
        with trio.fail_after(60):
            await changed.wait()
        later = {tool.name for tool in (await client.list_tools()).tools}
        echo = await client.call_tool("mcp__slow__echo", {"text": "up now"})
        assert gateway.server_status() == {"slow": ("up", None)}
    assert {"read", "write", "edit", "shell"} <= names
    assert not any(name.startswith("mcp__slow__") for name in names)
    assert early.is_error
    assert "MCP server 'slow' is still starting" in text(early)
    assert not read.is_error
    assert "mcp__slow__echo" in later
    assert not echo.is_error
    assert text(echo) == "up now"


async def test_a_server_that_fails_to_start_is_reported_and_the_rest_serve(
    workspace: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bad, gate = gated(tmp_path, "bad")
    caplog.set_level(logging.INFO, logger="prism.gateway")
    async with serving(workspace, [bad, fixture()]) as (url, gateway), Client(url) as client:
        await gate.say("no thanks")
        with trio.fail_after(60):
            await gateway.wait_servers()
        failed = await client.call_tool("mcp__bad__echo", {"text": "x"})
        echo = await client.call_tool("mcp__fx__echo", {"text": "still here"})
        read = await client.call_tool("read", {"path": "notes.txt"})
        status = gateway.server_status()
        ledger = gateway.ledger
        assert ledger is not None
        refused = [(r.tool_name, r.status, r.blocked_reason) for r in ledger.records]
    assert status["fx"] == ("up", None)
    # The call of the failed server is recorded as refused (the others ran).
    assert ("mcp__bad__echo", "blocked", "unknown_tool") in refused
    assert status["bad"][0] == "failed"
    assert failed.is_error
    # The error names the server and says why (its exit status and its stderr).
    assert "MCP server 'bad' is unavailable" in text(failed)
    assert "exit status 3" in text(failed)
    assert "told not to start: no thanks" in text(failed)
    assert text(echo) == "still here"
    assert not read.is_error
    logged = [r.getMessage() for r in caplog.records if r.name == "prism.gateway"]
    assert any("'bad' did not start" in line and "exit status 3" in line for line in logged)
    assert any("'fx' is up" in line for line in logged)


async def test_a_tool_of_no_server_is_still_a_protocol_error(
    workspace: Path, tmp_path: Path
) -> None:
    """...and, like a call of a server that is still starting or did not start, it is
    recorded in the ledger as refused (an unknown tool)."""
    slow, gate = gated(tmp_path, "slow")
    async with serving(workspace, [slow]) as (url, gateway), Client(url) as client:
        with pytest.raises(MCPError, match="Unknown tool"):
            await client.call_tool("mcp__other__echo", {"text": "probe"})
        starting = await client.call_tool("mcp__slow__echo", {"text": "early"})
        await gate.say("no")  # (it may fail while the gateway closes: see the test below)
        ledger = gateway.ledger
        assert ledger is not None
        records = list(ledger.records)
    assert starting.is_error
    assert [(r.tool_name, r.status, r.blocked_reason, r.arguments) for r in records] == [
        ("mcp__other__echo", "blocked", "unknown_tool", {"text": "probe"}),
        ("mcp__slow__echo", "blocked", "unknown_tool", {"text": "early"}),
    ]
    assert "unknown tool: 'mcp__other__echo'" in (records[0].result_preview or "")
    assert "is still starting" in (records[1].result_preview or "")


async def test_a_server_that_dies_is_reported_and_restarted_on_the_next_call(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="prism.gateway")
    async with serving(workspace, [fixture()]) as (url, gateway), Client(url) as client:
        with trio.fail_after(60):
            await gateway.wait_servers()
        died = await client.call_tool("mcp__fx__die", {})
        read = await client.call_tool("read", {"path": "notes.txt"})
        echo = await client.call_tool("mcp__fx__echo", {"text": "back"})
    assert died.is_error
    assert "MCP server 'fx' went away" in text(died)
    assert not read.is_error
    assert text(echo) == "back"
    logged = [r.getMessage() for r in caplog.records if r.name == "prism.gateway"]
    assert any("'fx' went away" in line for line in logged), logged


class _CancelAsTheStartFails(trio.abc.Instrument):
    """Once armed: cancels ``scope`` right after the step of the task that hands a
    server's connecting task its next result (the server's failure, once it exited),
    before the connecting task runs again. The gateway closing in the very instant
    its server's start fails, every time, instead of by chance."""

    def __init__(self, scope: trio.CancelScope) -> None:
        self.scope = scope
        self.armed = False
        self.woken = False
        self.fired = False

    def task_scheduled(self, task: trio.lowlevel.Task) -> None:
        # prism-mcp's session task connects (a task's name is its function's)
        if self.armed and task.name.endswith("._session.Sessions._run"):
            self.woken = True

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if self.woken and not self.fired:
            self.fired = True
            self.scope.cancel()


async def test_a_start_that_fails_as_the_gateway_closes_raises_nothing(tmp_path: Path) -> None:
    """The server's failure and the gateway's cancellation arrive together: the gateway
    closes quietly, no error of the server's escapes it."""
    bad, gate = gated(tmp_path, "bad")
    with trio.fail_after(60), trio.CancelScope() as scope:
        race = _CancelAsTheStartFails(scope)
        trio.lowlevel.add_instrument(race)
        try:
            async with open_gateway(servers=[bad]) as gateway:
                await gate.say("no")
                race.armed = True
                await trio.sleep_forever()
        finally:
            trio.lowlevel.remove_instrument(race)
    assert race.fired
    assert scope.cancelled_caught
    # (the bridge records the failure; the gateway, closing, may not have read it yet)
    assert gateway.server_status()["bad"][0] in {"starting", "failed"}


async def test_a_required_server_that_does_not_start_fails_the_gateway(
    workspace: Path, tmp_path: Path
) -> None:
    bad, gate = gated(tmp_path, "bad", required=True)

    async def serve_without_it() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(gate.say, "no")
            async with serving(workspace, [bad]):
                raise AssertionError("served without its required server")

    with pytest.raises(ExceptionGroup) as raised:  # (from the test's own nursery)
        await serve_without_it()
    assert raised.group_contains(
        GatewayError, match="required MCP server 'bad' did not start.*exit status 3"
    )


async def test_a_required_server_is_up_before_the_gateway_serves(
    workspace: Path, tmp_path: Path
) -> None:
    needed, gate = gated(tmp_path, "needed", required=True)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(gate.say, "start")
        async with serving(workspace, [needed]) as (url, gateway), Client(url) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert gateway.server_status()["needed"] == ("up", None)
    assert "mcp__needed__echo" in names


def test_downstream_server_options_are_checked() -> None:
    transport = StdioTransport(sys.executable, [str(FIXTURE)])
    with pytest.raises(ConfigurationError, match="may not set elicit"):
        DownstreamServer(server_id="x", transport=transport, options={"elicit": None})
    with pytest.raises(ConfigurationError, match="mapping"):
        DownstreamServer(server_id="x", transport=transport, options=[("a", 1)])
    with pytest.raises(ConfigurationError, match="required"):
        DownstreamServer(server_id="x", transport=transport, required="yes")  # type: ignore[arg-type]


async def test_two_servers_with_one_id_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="share the id 'fx'"):
        async with open_gateway(servers=[fixture(), fixture()]):
            raise AssertionError("opened")


async def test_a_servers_elicitation_and_sampling_reach_the_calling_client(
    workspace: Path,
) -> None:
    """Forwarded questions say which server asks; the gateway's own approvals stay apart."""
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        if params.message.startswith("Prism asks whether"):  # the gateway's approval
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"colour": "green"})

    sampled: list[object] = []

    async def sample(
        context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        sampled.append((params.include_context, params.meta))
        prompt = params.messages[0].content
        assert isinstance(prompt, types.TextContent)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"about {prompt.text}"),
            model="host-model",
        )

    async with (
        serving(workspace, [fixture(legacy=True)]) as (url, gateway),
        Client(url, elicitation_callback=elicit, sampling_callback=sample, mode="legacy") as client,
    ):
        with trio.fail_after(60):
            await gateway.wait_servers()
        answered = await client.call_tool("mcp__fx__ask", {"question": "Your colour?"})
        thought = await client.call_tool("mcp__fx__think", {"prompt": "tea"})
        approval = await client.call_tool("shell", {"command": "touch asked.txt"})
    assert text(answered) == "the user said green"
    assert text(thought) == "the model wrote about tea (host-model)"
    # The server asked for every server's context under a _meta of its own: to the
    # client that would be the whole gateway's, so neither is passed on.
    assert sampled == [("none", None)]
    assert approval.is_error
    assert asked[0] == "MCP server 'fx' asks (forwarded by Prism): Your colour?"
    assert asked[1].startswith("Prism asks whether the tool 'shell'")


async def test_a_servers_question_is_refused_when_the_client_cannot_answer(
    workspace: Path,
) -> None:
    async with (
        serving(workspace, [fixture(legacy=True)]) as (url, gateway),
        Client(url, mode="legacy") as client,  # no elicitation, no sampling
    ):
        with trio.fail_after(60):
            await gateway.wait_servers()
        answered = await client.call_tool("mcp__fx__ask", {"question": "Your colour?"})
        thought = await client.call_tool("mcp__fx__think", {"prompt": "tea"})
    # The server got an error for its request: its tool fails, and says so.
    assert answered.is_error or "did not answer" in text(answered), text(answered)
    assert thought.is_error, text(thought)
    assert "UpstreamCannotAnswerError" in text(answered) + text(thought)


async def test_a_servers_question_is_never_put_to_another_clients_call(workspace: Path) -> None:
    """With calls of two clients running on the server, nobody is asked."""
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"colour": "red"})

    async with (
        serving(workspace, [fixture(legacy=True)]) as (url, gateway),
        Client(url, elicitation_callback=elicit, mode="legacy") as alice,
        Client(url, elicitation_callback=elicit, mode="legacy") as bob,
    ):
        with trio.fail_after(60):
            await gateway.wait_servers()
        results: dict[str, types.CallToolResult] = {}
        async with trio.open_nursery() as nursery:
            # Bob's call holds the server (hang) while Alice's asks its question.
            async def hang() -> None:
                with trio.move_on_after(120):
                    results["bob"] = await bob.call_tool("mcp__fx__hang", {})

            nursery.start_soon(hang)
            with trio.fail_after(60):
                while not gateway._forward._calls.get("fx"):
                    await trio.lowlevel.checkpoint()  # (until Bob's call is running)
            results["alice"] = await alice.call_tool("mcp__fx__ask", {"question": "Colour?"})
            nursery.cancel_scope.cancel()
    assert asked == []
    assert "UpstreamCannotAnswerError" in text(results["alice"])


async def test_a_servers_log_messages_reach_the_calling_client(workspace: Path) -> None:
    logged: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params)

    async with (
        serving(workspace, [fixture(legacy=True)]) as (url, gateway),
        Client(url, logging_callback=on_log, mode="legacy") as client,
    ):
        with trio.fail_after(60):
            await gateway.wait_servers()
        result = await client.call_tool("mcp__fx__chatty", {})
    assert text(result) == "done"
    assert [(p.level, p.logger, p.data) for p in logged] == [
        ("info", "mcp:fx/brain", "thinking hard")
    ]


RAW = TESTS / "gateway_raw_server.py"


def raw(mode: str, *args: str) -> DownstreamServer:
    transport = StdioTransport(sys.executable, [str(RAW), mode, *args])
    return DownstreamServer(server_id="raw", transport=transport, options={"call_timeout_s": 30})


async def test_a_server_announcing_after_every_listing_is_relisted_a_bounded_number_of_times(
    tmp_path: Path,
) -> None:
    # Each of its listings differs and announces the next: the gateway re-listed it
    # and told every client, about 150 times a second, without end.
    log = tmp_path / "listings"
    warned = trio.Event()

    class Watch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "keeps changing its tool list" in record.getMessage():
                warned.set()

    watch = Watch()
    logging.getLogger("prism.gateway").addHandler(watch)
    try:
        async with open_gateway(servers=[raw("churn", str(log))]) as gateway:
            with trio.fail_after(60):
                await gateway.wait_servers()
                await warned.wait()
            listings = len(log.read_text().splitlines())
    finally:
        logging.getLogger("prism.gateway").removeHandler(watch)
    # The first listing and its check, then three re-listings (each checked).
    assert listings <= 10, listings


async def test_a_changed_tool_is_offered_to_clients_as_accepted_until_accepted() -> None:
    # The new description (an instruction to the model), title and annotations
    # reached every client's tools/list; only the tool's calls were blocked.
    changed = [trio.Event()]

    async def on_message(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed[0].set()

    async with (
        open_gateway(
            servers=[raw("drift")], permission=create_rule_permission_policy(allow=["*"])
        ) as gateway,
        Client(gateway.server, mode="legacy", message_handler=on_message) as client,
    ):
        with trio.fail_after(60):
            await gateway.wait_servers()
            (before,) = (await client.list_tools()).tools
            first = await client.call_tool("mcp__raw__good", {})
            after = before
            while after == before:  # the first notification may say the server is up
                await changed[0].wait()
                changed[0] = trio.Event()
                (after,) = (await client.list_tools()).tools
            blocked = await client.call_tool("mcp__raw__good", {})
    assert (before.description, before.title) == ("fine", "Fine")
    assert not first.is_error
    assert after.description == "fine"
    assert after.title is None
    assert after.annotations is None
    assert after.output_schema is None
    assert blocked.is_error
    assert "definition changed since it was pinned" in text(blocked)
