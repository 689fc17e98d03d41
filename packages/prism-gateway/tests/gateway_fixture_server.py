"""A small MCP server for the gateway tests: echo, progress, a list change, questions, roots.

Over stdio by default; ``http`` serves Streamable HTTP on 127.0.0.1 (a free port, said
as ``PORT <n>`` on stdout).
"""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import Annotated, Any

import anyio
import anyio.lowlevel
from mcp import UrlElicitationRequiredError
from mcp.server.elicitation import AcceptedElicitation
from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, Resolve
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    CallToolResult,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestURLParams,
    ListRootsRequest,
    ListRootsResult,
    TextContent,
    ToolAnnotations,
)
from pydantic import BaseModel

# The protocol pipe over stdio, kept before the SDK moves fd 1 away (None over HTTP).
RAW_STDOUT: int | None = None


class Answer(BaseModel):
    colour: str


class Count(BaseModel):
    count: int


def colour_question(question: str) -> Elicit[Answer]:
    """Ask the user the tool's question for a colour (a resolver of ``ask_resolved``)."""
    return Elicit(question, Answer)


def build() -> MCPServer:
    server = MCPServer("gateway-fixture", version="1.0.0", log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    @server.tool()
    async def count(steps: int, ctx: Context) -> int:
        """Count to steps, reporting progress at each."""
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step}")
            await anyio.lowlevel.checkpoint()
        return steps

    @server.tool()
    async def grow(ctx: Context) -> str:
        """Add a tool named 'extra' and announce the change."""

        def extra() -> str:
            """A tool that appeared later."""
            return "extra"

        server.add_tool(extra, name="extra")
        await ctx.session.send_tool_list_changed()
        await ctx.notify_tools_changed()
        return "grown"

    hang_cancelled = anyio.Event()

    @server.tool()
    async def hang(ctx: Context) -> str:
        """Never returns (until cancelled); says it started as progress."""
        try:
            await ctx.report_progress(0, None, "hanging")
            await anyio.sleep_forever()
        finally:
            hang_cancelled.set()
        return "unreachable"

    holding = anyio.Event()
    late: list[str] = []
    late_asked = anyio.Event()

    @server.tool()
    async def ask_late(ctx: Context) -> str:
        """Says it started (progress), then, once cancelled, asks during a hold call."""
        try:
            await ctx.report_progress(0, None, "started")
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(30):
                await holding.wait()
                try:
                    answer = await ctx.elicit("the cancelled call's question", Answer)
                    late.append(f"answered {answer.action}")
                except Exception as exc:  # the host refused to ask anybody
                    late.append(f"refused: {exc}")
                late_asked.set()
        return "unreachable"

    answered_late = anyio.Event()

    @server.tool()
    async def answer_late(ctx: Context) -> str:
        """Says it started (progress); once cancelled, answers its own request all the
        same, as a server that finishes what it was cancelled in the middle of (stdio)."""
        try:
            await ctx.report_progress(0, None, "started")
            await anyio.sleep_forever()
        finally:
            if RAW_STDOUT is not None:
                late = {"content": [{"type": "text", "text": "late"}], "resultType": "complete"}
                line = {"jsonrpc": "2.0", "id": ctx.request_context.request_id, "result": late}
                os.write(RAW_STDOUT, json.dumps(line).encode() + b"\n")
            answered_late.set()
        return "unreachable"

    @server.tool()
    async def was_answered_late() -> bool:
        """Whether an answer_late call answered after it was cancelled (waits up to 30 s)."""
        with anyio.move_on_after(30):
            await answered_late.wait()
        return answered_late.is_set()

    @server.tool()
    async def hold() -> str:
        """Runs until ask_late's late question is over; says what became of it."""
        holding.set()
        with anyio.move_on_after(30):
            await late_asked.wait()
        return late[0] if late else "no late question"

    # The progress tokens of the watch calls since the last spoof call, and what ends them.
    watching: dict[str, Any] = {"tokens": [], "spoofed": anyio.Event()}

    @server.tool()
    async def watch(ctx: Context) -> str:
        """Report progress once (keeping its token), then wait for a spoof call."""
        spoofed = watching["spoofed"]
        meta = ctx.request_context.meta or {}
        token = meta.get("progress_token", meta.get("progressToken"))
        if isinstance(token, (str, int)):
            watching["tokens"].append(token)
        await ctx.report_progress(1, None, "mine")
        with anyio.move_on_after(30):
            await spoofed.wait()
        return "watched"

    @server.tool()
    async def spoof(
        guesses: list[int], ctx: Context, replay: bool = True, standalone: bool = False
    ) -> str:
        """Send progress on this call's own stream (``standalone``: also on the session's
        standalone stream) under other calls' tokens: each of ``guesses`` and (``replay``)
        each token a watch call was given; then end watch calls."""
        tokens = watching["tokens"] if replay else []
        for token in [*tokens, *guesses]:
            await ctx.session.send_progress_notification(
                token, 99, None, "spoofed", related_request_id=ctx.request_id
            )
            if standalone:
                await ctx.session.send_progress_notification(token, 99, None, "spoofed")
        watching["spoofed"].set()
        watching.update(tokens=[], spoofed=anyio.Event())
        return f"spoofed {len(tokens)} + {len(guesses)}"

    @server.tool()
    async def was_hang_cancelled() -> bool:
        """Whether a hang call was cancelled (waits up to 30 s for it)."""
        with anyio.move_on_after(30):
            await hang_cancelled.wait()
        return hang_cancelled.is_set()

    @server.tool()
    async def ask(question: str, ctx: Context) -> str:
        """Ask the user (elicitation) and say what they answered."""
        answer = await ctx.elicit(question, Answer)
        if answer.action == "accept":
            return f"the user said {answer.data.colour}"
        return f"the user did not answer ({answer.action})"

    @server.tool()
    async def ask_two(ctx: Context) -> str:
        """Ask the user two questions at once (two tasks) and say both answers."""
        said: dict[str, str] = {}

        async def one(question: str) -> None:
            answer = await ctx.elicit(question, Answer)
            said[question] = answer.data.colour if answer.action == "accept" else answer.action

        async with anyio.create_task_group() as group:
            group.start_soon(one, "first?")
            group.start_soon(one, "second?")
        return f"{said['first?']} {said['second?']}"

    @server.tool()
    async def ask_vanish(ctx: Context) -> str:
        """Drop itself from the tool list (and say so), then ask the user."""
        server.remove_tool("ask_vanish")
        await ctx.session.send_tool_list_changed()
        answer = await ctx.elicit("colour?", Answer)
        return f"the user said {answer.data.colour}" if answer.action == "accept" else "no"

    @server.tool()
    async def ask_resolved(
        question: str, answer: Annotated[ElicitationResult[Answer], Resolve(colour_question)]
    ) -> str:
        """Ask the user the way the protocol version wants (inside the result on 2026-07-28)."""
        if isinstance(answer, AcceptedElicitation):
            return f"the user said {answer.data.colour}"
        return f"the user did not answer ({answer.action})"

    @server.tool()
    async def sign_in(
        ctx: Context,
        elicitation_id: str = "e-1",
        done: list[str] | None = None,
        required: bool = False,
        log: bool = False,
    ) -> str:
        """Ask the user to visit a page (URL elicitation ``elicitation_id``) and say what
        they did; then say each of ``done`` is complete (notifications/elicitation/complete).
        ``required``: answer with a URLElicitationRequiredError naming it instead.
        ``log``: send a log message first."""
        if log:
            await ctx.info("signing in", logger_name="auth")
        if required:
            page = ElicitRequestURLParams(
                message="sign in first",
                url="https://auth.example/login",
                elicitation_id=elicitation_id,
            )
            raise UrlElicitationRequiredError([page])
        answer = await ctx.elicit_url(
            "sign in please", "https://auth.example/login", elicitation_id
        )
        for each in done or ():
            await ctx.session.send_elicit_complete(each, related_request_id=ctx.request_id)
        return f"the user chose {answer.action}"

    @server.tool()
    async def think(prompt: str, ctx: Context) -> str:
        """Ask the host's model (sampling) and say what it wrote."""
        # Asking for every server's context, with a _meta of its own: the gateway
        # passes on neither.
        params = CreateMessageRequestParams.model_validate(
            {
                "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
                "maxTokens": 50,
                "includeContext": "allServers",
                "_meta": {"progressToken": "the-servers-own"},
            }
        )
        result = await ctx.session.send_request(
            CreateMessageRequest(params=params),
            CreateMessageResult,
            # On its call's own stream (over HTTP), as a server that knows why it asks.
            metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
        )
        text = result.content.text if isinstance(result.content, TextContent) else "?"
        return f"the model wrote {text} ({result.model})"

    @server.tool()
    async def roots(ctx: Context) -> list[str]:
        """The client's roots (roots/list), as URIs."""
        listed = await ctx.session.send_request(
            ListRootsRequest(),
            ListRootsResult,
            metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
        )
        return [str(root.uri) for root in listed.roots]

    @server.tool()
    async def chatty(ctx: Context) -> str:
        """Send a log message, then answer."""
        await ctx.info("thinking hard", logger_name="brain")
        return "done"

    @server.tool()
    def shaped(valid: bool) -> CallToolResult:
        """Answer a structuredContent matching the tool's outputSchema, or (valid false) not."""
        count: Any = 3 if valid else "three"
        return CallToolResult(
            content=[TextContent(type="text", text=str(count))],
            structured_content={"count": count},
        )

    # Its outputSchema stated after the fact: the server itself checks nothing (a server
    # whose results do not match what it says).
    stated = server._tool_manager.get_tool("shaped")
    assert stated is not None
    stated.output_schema = Count.model_json_schema()

    @server.tool()
    async def chatter(count: int, ctx: Context) -> str:
        """Send ``count`` log messages, then never return (until cancelled)."""
        for n in range(count):
            await ctx.info(f"chatter {n}", logger_name="chatter")
        await anyio.sleep_forever()
        return "unreachable"

    @server.tool()
    def blocks(count: int) -> CallToolResult:
        """Answer with ``count`` text blocks."""
        return CallToolResult(content=[TextContent(type="text", text="b")] * count)

    @server.tool()
    def fail() -> str:
        """Fail: the server answers with an error result."""
        raise ValueError("the server says no")

    @server.tool()
    def forbidden() -> str:
        """A tool the test gateway's permission policy denies."""
        return "ran"

    @server.tool()
    async def request_id(ctx: Context) -> str:
        """The JSON-RPC id this call came under (the bridge's direct calls: prism:<n>)."""
        return str(ctx.request_id)

    @server.tool()
    def die() -> str:
        """End this server's process at once (a server that crashes mid-call)."""
        os._exit(3)

    return server


def serve_http() -> None:
    import trio
    from hypercorn.config import Config
    from hypercorn.trio import serve

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    config = Config()
    config.bind = [f"fd://{sock.detach()}"]
    config.loglevel = "WARNING"
    app = build().streamable_http_app(host="127.0.0.1")
    sys.stdout.write(f"PORT {port}\n")
    sys.stdout.flush()
    trio.run(serve, app, config)  # type: ignore[arg-type]


if __name__ == "__main__":
    if sys.argv[1:] == ["http"]:
        serve_http()
    else:
        RAW_STDOUT = os.dup(1)
        build().run()
    sys.exit(0)
