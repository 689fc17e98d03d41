"""What a client gets back: content blocks, progress, and approval questions, seen from a client."""

from __future__ import annotations

import functools
import math
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import mcp_types as types
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.server.connection import Connection, NotifyOnlyOutbound
from mcp.server.lowlevel.server import Server
from mcp.server.runner import ServerRunner
from mcp_types.methods import CACHEABLE_METHODS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS, SUPPORTED_PROTOCOL_VERSIONS

from prism.coding.security import ApprovalDecision
from prism.core import (
    AgentEvent,
    ExecutionAction,
    ImageContent,
    JsonObject,
    ResourceContent,
    ResourceLink,
    TextContent,
    ToolDefinition,
    ToolExecutionContext,
    ToolExecutionProgress,
    ToolResult,
)
from prism.gateway import HttpOptions, _upstream, create_gateway_approver, open_gateway, serve_http
from prism.gateway._content import call_tool_result_json

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from contextlib import AbstractAsyncContextManager

    ServeFactory = Callable[..., AbstractAsyncContextManager[Any]]

PIXEL = "iVBORw0KGgo="


async def _blocks(_args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult(
        content=[
            TextContent(text="text"),
            ImageContent(data=PIXEL, mime_type="image/png"),
            ResourceContent(uri="file:///a.bin", mime_type="application/octet-stream", blob="AAE="),
            ResourceContent(uri="file:///a.txt", text="inline"),
            ResourceLink(uri="file:///b.txt", mime_type="text/plain", description="a link"),
        ],
        structured=[1, 2],  # not an object: only 2026-07-28 clients may get it
    )


async def _steps(_args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
    ctx.report_progress("warming up")  # no number: the client still sees it advance
    ctx.report_progress("half", progress=5, total=10)
    ctx.report_progress("again", progress=5, total=10)  # not beyond the last: bumped
    # No JSON form (went out as null, which the schema refuses): bumped, total dropped.
    ctx.report_progress("endless", progress=math.inf, total=math.nan)
    return ToolResult.text("done")


approve = create_gateway_approver()


async def _deploy(_args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    decision = await approve(ExecutionAction(kind="custom", operation="deploy", risk="high"))
    return ToolResult.text(f"approved={decision.approved}: {decision.reason}")


async def _deploy_in_steps(_args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
    ctx.report_progress("checking")
    first = await approve(ExecutionAction(kind="custom", operation="build", risk="low"))
    ctx.report_progress("built", progress=10, total=30)
    second = await approve(ExecutionAction(kind="custom", operation="deploy", risk="high"))
    ctx.report_progress("deployed", progress=20, total=30)
    ctx.report_progress("checked", progress=30, total=30)
    return ToolResult.text(f"{first.approved} {second.approved}")


TOOLS = [
    ToolDefinition(name="blocks", execute=_blocks),
    ToolDefinition(name="steps", execute=_steps),
    ToolDefinition(name="deploy", execute=_deploy),
    ToolDefinition(name="deploy_in_steps", execute=_deploy_in_steps),
]


@asynccontextmanager
async def _client(events: list[AgentEvent], **client: Any) -> AsyncIterator[Client]:
    async with (
        open_gateway(tools=TOOLS, on_event=events.append) as gateway,
        trio.open_nursery() as nursery,
    ):
        url = await nursery.start(serve_http, gateway, HttpOptions())
        async with Client(url, **client) as connected:
            yield connected
        nursery.cancel_scope.cancel()


def _text(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def test_every_kind_of_content_reaches_the_client() -> None:
    async with _client([], mode="legacy") as client:
        result = await client.call_tool("blocks", {})
    text, image, blob, inline, link = result.content
    assert isinstance(text, types.TextContent)
    assert isinstance(image, types.ImageContent)
    assert (image.data, image.mime_type) == (PIXEL, "image/png")
    assert isinstance(blob, types.EmbeddedResource)
    assert isinstance(blob.resource, types.BlobResourceContents)
    assert blob.resource.blob == "AAE="
    assert isinstance(inline, types.EmbeddedResource)
    assert isinstance(inline.resource, types.TextResourceContents)
    assert inline.resource.text == "inline"
    assert isinstance(link, types.ResourceLink)
    assert (link.name, link.description) == ("file:///b.txt", "a link")
    assert result.structured_content is None  # a list is not an object on 2025-11-25


async def test_progress_reaches_the_client_and_the_event_sink() -> None:
    seen: list[tuple[float, float | None, str | None]] = []
    events: list[AgentEvent] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with _client(events) as client:
        result = await client.call_tool("steps", {}, progress_callback=progress)
    assert _text(result) == "done"
    assert seen == [
        (1.0, None, "warming up"),
        (5.0, 10.0, "half"),
        (6.0, 10.0, "again"),
        (7.0, None, "endless"),
    ]
    assert len([e for e in events if isinstance(e, ToolExecutionProgress)]) == 4


async def test_a_waiting_calls_progress_reaches_each_retry() -> None:
    """A 2026-07-28 client's call waits in the gateway while the client answers; what
    it reports after an answer goes with the retry that answered (its own progress
    token), up to the result."""
    seen: list[tuple[float, float | None, str | None]] = []
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with _client([], elicitation_callback=elicit) as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("deploy_in_steps", {}, progress_callback=progress)
    assert _text(result) == "True True"
    assert len(asked) == 2
    # What the call reported while no request of the client waited for it may be lost
    # ("checking", before the first question, races the question); after the last
    # answer, everything arrives before the result.
    after = [entry for entry in seen if entry[2] != "checking"]
    assert after[-2:] == [(20.0, 30.0, "deployed"), (30.0, 30.0, "checked")]
    assert [entry[0] for entry in seen] == sorted({entry[0] for entry in seen})


async def test_the_approval_question_names_the_tool_and_the_operation() -> None:
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="cancel")

    async with _client([], elicitation_callback=elicit, mode="legacy") as client:
        result = await client.call_tool("deploy", {})
    assert asked == ["Prism asks whether the tool 'deploy' may deploy; risk: high"]
    assert _text(result) == "approved=False: cancelled by the client"


async def test_a_client_that_fails_to_answer_is_a_denial(serve: ServeFactory) -> None:
    async def broken(context: Any, params: types.ElicitRequestParams) -> types.ErrorData:
        return types.ErrorData(code=types.INTERNAL_ERROR, message="no UI here")

    async with (
        serve(bridged=False) as served,
        Client(served.url, elicitation_callback=broken, mode="legacy") as client,
    ):
        result = await client.call_tool("shell", {"command": "touch no.txt"})
    assert result.is_error
    assert "the client did not answer" in _text(result)
    assert not (served.root / "no.txt").exists()


async def test_the_fallback_approver_decides_outside_a_client_call() -> None:
    action = ExecutionAction(kind="shell", operation="shell", command="make")

    async def async_yes(_action: ExecutionAction) -> bool:
        return True

    decided = ApprovalDecision(approved=True, remember=True, reason="policy file")
    assert (await create_gateway_approver(fallback=async_yes)(action)).approved
    assert await create_gateway_approver(fallback=lambda _a: decided)(action) == decided
    sloppy: Any = lambda _a: "yes"  # noqa: E731 (a fallback that breaks its contract)
    no = await create_gateway_approver(fallback=sloppy)(action)  # only True approves
    assert not no.approved
    denied = await create_gateway_approver()(action)
    assert not denied.approved
    assert "no approver is configured" in (denied.reason or "")


def _as_models(result: ToolResult, *, any_structured: bool) -> types.CallToolResult:
    """The result built from the SDK's own models (what the JSON must dump as)."""
    blocks: list[Any] = []
    for block in result.content:
        if isinstance(block, TextContent):
            blocks.append(types.TextContent(type="text", text=block.text))
        elif isinstance(block, ImageContent):
            blocks.append(
                types.ImageContent(type="image", data=block.data, mime_type=block.mime_type)
            )
        elif isinstance(block, ResourceContent):
            resource: Any = (
                types.BlobResourceContents(
                    uri=block.uri, mime_type=block.mime_type, blob=block.blob
                )
                if block.blob is not None
                else types.TextResourceContents(
                    uri=block.uri, mime_type=block.mime_type, text=block.text or ""
                )
            )
            blocks.append(types.EmbeddedResource(type="resource", resource=resource))
        else:
            assert isinstance(block, ResourceLink)
            blocks.append(
                types.ResourceLink(
                    type="resource_link",
                    uri=block.uri,
                    name=block.name or block.uri,
                    mime_type=block.mime_type,
                    description=block.description,
                )
            )
    structured = result.structured
    keep = structured is not None and (any_structured or isinstance(structured, dict))
    return types.CallToolResult(
        content=blocks, structured_content=structured if keep else None, is_error=result.is_error
    )


def test_the_result_json_is_what_the_sdk_models_dump() -> None:
    results = [
        ToolResult(
            content=[
                TextContent(text="t"),
                ImageContent(data=PIXEL, mime_type="image/png"),
                ResourceContent(uri="file:///a.txt", text="a"),
                ResourceContent(uri="file:///a.txt", mime_type="text/plain"),
                ResourceContent(uri="file:///b.bin", mime_type="application/x", blob="AAE="),
                ResourceLink(uri="file:///c"),
                ResourceLink(
                    uri="https://x.test/d", name="d", mime_type="text/html", description="D"
                ),
            ],
            structured={"a": None, "b": [1, None]},
        ),
        ToolResult.error("refused"),
        ToolResult(content=[], structured=[1, 2]),
        ToolResult(content=[TextContent(text="")], structured="text"),
    ]
    for result in results:
        for any_structured in (False, True):
            model = _as_models(result, any_structured=any_structured)
            dumped = model.model_dump(by_alias=True, mode="json", exclude_none=True)
            assert call_tool_result_json(result, any_structured=any_structured) == dumped


def json_nest(depth: int) -> dict[str, Any]:
    """An object ``depth`` levels deep."""
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


_OK = {"isError": False, "resultType": "complete"}
_MANY = 40
"""Past the count of members the plain check sorts by type first."""
_PLAIN_RESULTS: list[dict[str, Any]] = [
    {"content": [{"type": "text", "text": "a"}], "isError": False, "resultType": "complete"},
    {"content": [], "isError": True, "resultType": "complete"},
    {
        "content": [{"type": "text", "text": "é\u2028\x00"}, {"type": "text", "text": ""}],
        "structuredContent": {"b": [1, 2.5, None, {"c": True}], "z": -0.0, "n": 10**30},
        "isError": True,
        "resultType": "complete",
    },
    # Many members (sorted by type first): the floats' sum passes a float's range.
    {**_OK, "content": [], "structuredContent": {"a": [*_MANY * [1e308], "s", None, True, {}]}},
    {**_OK, "content": [], "structuredContent": {"a": [*_MANY * [7], "s", None, False, 0.5]}},
    {**_OK, "content": [], "structuredContent": {f"k{n}": [n, 0.5] for n in range(_MANY)}},
]
# Plain at 2026-07-28 only (structuredContent any JSON value there, an object before)
_MODERN_PLAIN: list[dict[str, Any]] = [
    {"content": [], "structuredContent": [1, "2"], "isError": False, "resultType": "complete"},
    {"content": [], "structuredContent": "s", "isError": False, "resultType": "complete"},
]
# Never taken as plain: the SDK's models shape (or refuse) each
_NOT_PLAIN: list[Any] = [
    {**_OK, "content": [], "structuredContent": None},
    # Many members (sorted by type first): each problem still found among them.
    *(
        {**_OK, "content": [], "structuredContent": {"a": [*_MANY * [around], odd]}}
        for around in (1.5, 1, "s", 1e308)  # (1e308: the floats' sum overflows)
        for odd in (math.nan, math.inf, -math.inf, (1, 2), b"x", json_nest(64))
    ),
    {**_OK, "content": [], "structuredContent": {"a": [math.inf, -math.inf, *_MANY * [0.5]]}},
    {**_OK, "content": [], "structuredContent": {**{f"k{n}": 1 for n in range(_MANY)}, 1: 2}},
    {**_OK, "content": [], "structuredContent": {"x": math.inf}},
    {**_OK, "content": [], "structuredContent": {1: "k"}},
    {**_OK, "content": [], "structuredContent": {"t": (1, 2)}},
    {**_OK, "content": [], "structuredContent": {"b": b"x"}},
    {**_OK, "content": [], "structuredContent": json_nest(65)},
    {**_OK, "content": [], "_meta": {"a": 1}},
    {**_OK, "content": ({"type": "text", "text": "a"},)},
    {**_OK, "content": [{"type": "text", "text": 1}]},
    {**_OK, "content": [{"type": "text", "text": "a", "x": 1}]},
    {**_OK, "content": [{"type": "image", "data": PIXEL, "mimeType": "image/png"}]},
    {"content": [], "isError": 1, "resultType": "complete"},
    {"content": [], "isError": False, "resultType": "input_required"},
    {"content": [], "isError": False},
    types.CallToolResult(content=[]),
]


def _answers(version: str, result: Any) -> tuple[bytes | str, bytes | str]:
    """The answer line the stdio call kernel writes for ``result``, and the SDK's runner's."""
    server: Server[Any] = Server("s")
    if version in MODERN_PROTOCOL_VERSIONS:
        connection = Connection.from_envelope(version, None, {})
    else:
        connection = Connection(NotifyOnlyOutbound(None), protocol_version=version)  # type: ignore[arg-type]
    runner = _upstream._Runner(server, connection, None)
    answers: list[bytes | str] = []
    for serialize in (runner._serialize, functools.partial(ServerRunner._serialize, runner)):
        try:
            answers.append(_upstream.result_line(7, serialize("tools/call", version, result)))
        except Exception as exc:  # the same failure both ways
            answers.append(type(exc).__name__)
    return answers[0], answers[1]


def _among(result: object, results: list[dict[str, Any]]) -> bool:
    return any(result is listed for listed in results)  # (1 == True: equality would not do)


def test_a_plain_result_is_answered_as_the_sdk_answers_it() -> None:
    assert "tools/call" not in CACHEABLE_METHODS  # (no cache hint is ever added to its result)
    for version in SUPPORTED_PROTOCOL_VERSIONS:
        modern = version in MODERN_PROTOCOL_VERSIONS
        for result in [*_PLAIN_RESULTS, *_MODERN_PLAIN, *_NOT_PLAIN]:
            fast, sdk = _answers(version, result)
            assert fast == sdk, (version, result)
            plain = _among(result, _PLAIN_RESULTS) or (modern and _among(result, _MODERN_PLAIN))
            # (taken as plain exactly where claimed: the comparison above is not vacuous)
            assert (_upstream.plain_result(version, result) is not None) is plain, (version, result)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=40, deadline=None)
@given(structured=_JSON, texts=st.lists(st.text(max_size=4), max_size=2), error=st.booleans())
def test_any_result_is_answered_as_the_sdk_answers_it(
    structured: Any, texts: list[str], error: bool
) -> None:
    result = {
        "content": [{"type": "text", "text": text} for text in texts],
        "structuredContent": structured,
        "isError": error,
        "resultType": "complete",
    }
    for version in ("2025-11-25", "2026-07-28"):
        fast, sdk = _answers(version, result)
        assert fast == sdk, (version, result)
