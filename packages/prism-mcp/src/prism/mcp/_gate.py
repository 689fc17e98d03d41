"""The server-request flood gate, and the check of each ``tools/list`` page.

Wraps the SDK's (read, write) streams, whichever transport carries them: at
most ``limit`` server-to-client requests are handled at once, tools/call
results are made acceptable to the SDK's result model, and a tool the SDK would
refuse is dropped from its listing page (see ``_Gate.answered``).
"""

from __future__ import annotations

import contextvars
import json
import secrets
from contextlib import suppress
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import attrs
import mcp_types
import pydantic_core
from anyio.abc import ObjectReceiveStream
from mcp_types import methods as _methods

from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.message import SessionMessage
from prism.core.text import has_lone_surrogate

from ._budget import decoder, many_strings, parse_json
from ._callbacks import call_in
from ._content import TASK_META_KEY
from ._direct import DirectCalls
from ._requests import request_key
from ._scan import scan
from ._wire import WireState

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from types import TracebackType
    from typing import Self

    from mcp.client._transport import TransportStreams

__all__ = [
    "BLOCKS_REFUSAL",
    "CHECKPOINT_NODES",
    "CHECKPOINT_TOOLS",
    "DETACHED_KEY",
    "LISTED_KEY",
    "MAX_MESSAGE_DEPTH",
    "MAX_MESSAGE_NODES",
    "MAX_PAGE_TOOLS",
    "MAX_RESULT_BLOCKS",
    "MAX_SAMPLING_MESSAGES",
    "MAX_TOOL_DEPTH",
    "MAX_TOOL_ICONS",
    "Detached",
    "Listed",
    "attach",
    "attach_raw",
    "before_parsing",
    "carried_tools",
    "gate_server_requests",
    "listed_tools",
    "result_refused",
    "skeleton",
    "tool_model",
    "written_tool",
]


_TOO_MANY_REQUESTS = -32000
MAX_PAGE_TOOLS = 4096
"""Most entries one ``tools/list`` page may hold; a longer page is dropped whole."""
CHECKPOINT_TOOLS = 64
"""Tools handled between two checkpoints when a listing is checked or prepared."""
CHECKPOINT_NODES = 4096
"""Objects and arrays (of tools' definitions) checked between two checkpoints, at most
(a tool larger than this is checked and built on a worker thread)."""
MAX_TOOL_DEPTH = 128
_CONTAINERS = (dict, list)
"""Deepest nesting of objects and arrays in one tool's definition (the SDK cannot
serialise much deeper, and no schema validator accepts deeper); a deeper tool is dropped."""
MAX_TOOL_ICONS = 64
"""A tool's ``icons`` past this many are left out before it is checked: the bridge never
uses them, and the SDK's models build one object per icon, in one step."""


def _containers(value: object, limit: int) -> int:
    """How many objects and arrays ``value`` holds; -1 when nested more than ``limit`` levels.

    Level by level, descending only into non-empty containers (no recursion):
    a page of many small schemas costs one pass over its containers, no tuple
    per node.
    """
    if type(value) not in _CONTAINERS:
        return 0
    level: list[Any] = [value]
    count = 1
    depth = 1
    while level:
        deeper: list[Any] = []
        for item in level:
            for child in item.values() if type(item) is dict else item:
                if type(child) in _CONTAINERS:
                    if depth >= limit:
                        return -1
                    count += 1
                    if child:
                        deeper.append(child)
        level = deeper
        depth += 1
    return count


def _few_icons(tool: dict[str, Any]) -> dict[str, Any]:
    """``tool`` with at most ``MAX_TOOL_ICONS`` icons (the rest are never used)."""
    icons = tool.get("icons")
    if type(icons) is list and len(icons) > MAX_TOOL_ICONS:
        return {**tool, "icons": icons[:MAX_TOOL_ICONS]}
    return tool


MAX_RESULT_BLOCKS = 1024
"""Most content blocks one tools/call result may hold; a longer result is refused."""
BLOCKS_REFUSAL = f"more than {MAX_RESULT_BLOCKS} content blocks"
MAX_SAMPLING_MESSAGES = 1024
"""Most messages one ``sampling/createMessage`` request may hold; a longer one is refused."""
MAX_MESSAGE_NODES = 65536
"""Most objects and arrays in one tools/call result or one server request."""
MAX_MESSAGE_DEPTH = 128
"""Deepest nesting of objects and arrays in one tools/call result or one server
request's parameters, the result object itself counted (anywhere in it:
``structuredContent``, ``_meta``, a content block). Every MCP client parses and
serialises this much inside a JSON-RPC envelope (pydantic's JSON parser gives
up before 200 levels, its serialiser past 250)."""
_INVALID_PARAMS = -32602
_RESULT_REFUSED = -32001


def _nodes(value: object) -> int | str:
    """How many objects and arrays ``value`` holds, or why it is refused (no recursion).

    Counted before the SDK builds its models: an empty block or ``{}`` is two or
    three bytes of JSON but a Python object (a model, for a block) of 60 to 1,000
    bytes. One pass over the containers, level by level, stopping past
    ``MAX_MESSAGE_NODES`` or ``MAX_MESSAGE_DEPTH`` levels, or at a string or
    key with a lone surrogate (:data:`LONE_SURROGATE`). An object or array of
    many members is sorted by type at C speed first (:func:`_bulk`): an array
    of 475,000 numbers or 190,000 short strings (a result of 950 kB) costs no
    Python step per member.
    """
    if type(value) not in _CONTAINERS:
        return 0
    level: list[Any] = [value]
    count = 1
    depth = 1
    while level:
        deeper: list[Any] = []
        for item in level:
            if len(item) >= _BULK:
                found = _bulk(item, deeper, count, depth)
                if isinstance(found, str):
                    return found
                count = found
                continue
            if type(item) is dict:
                children = item.values()
                for key in item:
                    # (an ASCII text holds none: asked here, without a call per string)
                    if not key.isascii() and has_lone_surrogate(key):
                        return LONE_SURROGATE
            else:
                children = item
            for child in children:
                if type(child) in _CONTAINERS:
                    count += 1
                    if count > MAX_MESSAGE_NODES:
                        return f"more than {MAX_MESSAGE_NODES} objects and arrays"
                    if depth >= MAX_MESSAGE_DEPTH:
                        return f"objects and arrays nested more than {MAX_MESSAGE_DEPTH} deep"
                    if child:
                        deeper.append(child)
                elif type(child) is str and not child.isascii() and has_lone_surrogate(child):
                    return LONE_SURROGATE
        level = deeper
        depth += 1
    return count


_BULK = 32
"""Members of one object or array past which :func:`_nodes` sorts them by type first."""
_JOINED = 4096
"""Strings joined into one text for each check of :func:`_surrogate_in`."""


def _bulk(item: Any, deeper: list[Any], count: int, depth: int) -> int | str:
    """:func:`_nodes`' step over one object or array of many members.

    Its members are sorted by type at C speed (no Python step per member):
    strings are checked a joined slice at a time, and only when it holds
    objects or arrays are its members walked one by one. Returns the count so
    far, or why the value is refused.
    """
    if type(item) is dict:
        children = item.values()
        if _surrogate_in(list(item)):
            return LONE_SURROGATE
    else:
        children = item
    kinds = set(map(type, children))
    if str in kinds and _surrogate_in(
        children if len(kinds) == 1 else [child for child in children if type(child) is str]
    ):
        return LONE_SURROGATE
    if dict in kinds or list in kinds:
        for child in children:
            if type(child) in _CONTAINERS:
                count += 1
                if count > MAX_MESSAGE_NODES:
                    return f"more than {MAX_MESSAGE_NODES} objects and arrays"
                if depth >= MAX_MESSAGE_DEPTH:
                    return f"objects and arrays nested more than {MAX_MESSAGE_DEPTH} deep"
                if child:
                    deeper.append(child)
    return count


def _surrogate_in(strings: Any) -> bool:
    """Whether a ``str`` among ``strings`` holds a lone surrogate (other members are skipped).

    Joined :data:`_JOINED` at a time: a lone surrogate stays one in the joined
    text (a Python ``str`` is code points, so a high and a low surrogate side
    by side are two of them, and UTF-8 holds neither).
    """
    if not isinstance(strings, list):
        strings = list(strings)
    for start in range(0, len(strings), _JOINED):
        part = strings[start : start + _JOINED]
        try:
            joined = "".join(part)
        except TypeError:  # a key or member that is not a str (none of a parse's keys)
            joined = "".join(text for text in part if type(text) is str)
        if has_lone_surrogate(joined):
            return True
    return False


LONE_SURROGATE = "a string with a lone surrogate (U+D800 to U+DFFF), which no UTF-8 holds"


def _result_nodes(result: dict[str, Any]) -> int | str:
    """How many objects and arrays a tools/call result holds, or why it is refused."""
    content = result.get("content")
    if type(content) is list and len(content) > MAX_RESULT_BLOCKS:
        return BLOCKS_REFUSAL
    return _nodes(result)


def _result_refusal(result: dict[str, Any]) -> str | None:
    """Why a tools/call result is refused before the SDK parses it, or ``None``."""
    found = _result_nodes(result)
    return found if type(found) is str else None


def _request_refusal(message: mcp_types.JSONRPCRequest) -> str | None:
    """Why a server request is refused before the SDK parses its parameters, or ``None``."""
    params = message.params
    if not params:
        return None
    if message.method == "sampling/createMessage":
        messages = params.get("messages")
        if type(messages) is list and len(messages) > MAX_SAMPLING_MESSAGES:
            return f"{len(messages)} messages, more than {MAX_SAMPLING_MESSAGES}"
    found = _nodes(params)
    if type(found) is str:
        return f"{found} in its parameters"
    return None


_MAX_TRACKED_CALLS = 4096


def _call_result(
    item: SessionMessage, message: mcp_types.JSONRPCResponse, state: WireState
) -> SessionMessage:
    """A tools/call answer as the SDK gets it: refused over the caps, else made acceptable.

    A ``structuredContent`` object goes on past the SDK in a :class:`Detached`
    (the SDK would validate and dump a copy of the whole value; the bridge
    checks it against the tool's output schema itself).
    """
    result = message.result
    structured = result.get("structuredContent")
    if type(structured) is dict and len(structured) == 1 and DETACHED_KEY in structured:
        token = structured[DETACHED_KEY]
        if type(token) is str and token.startswith(_DETACHED_TOKEN):
            # Parsed apart by the transport (see before_parsing): back in place
            # before the caps are counted.
            structured = state.detached.pop(token, _MISSING)
            if structured is _MISSING:
                refused = result_refused(message.id, _LOST)
                return SessionMessage(refused, metadata=item.metadata)
            result["structuredContent"] = structured
    nodes = _result_nodes(result)
    if type(nodes) is str:
        # An error in place of the result: the SDK never builds its models.
        return SessionMessage(result_refused(message.id, nodes), metadata=item.metadata)
    _carry(result, int(nodes))
    # A result with only structuredContent is valid; the 2025-11-25
    # schema still requires content, so give it an empty one.
    if "content" not in result and "structuredContent" in result:
        result["content"] = []
    elif "content" not in result and isinstance(result.get("task"), dict):
        # A task-augmented call answers with a CreateTaskResult; the SDK
        # only knows CallToolResult here, so carry the task in _meta.
        meta = result.get("_meta")
        meta = dict(meta) if isinstance(meta, dict) else {}
        meta[TASK_META_KEY] = result.pop("task")
        result["_meta"] = meta
        result["content"] = []
    return item


def _poll_result(item: SessionMessage, message: mcp_types.JSONRPCResponse) -> SessionMessage:
    """A ``tasks/get`` answer as the SDK gets it: refused over a call result's caps.

    A 2026-07-28 task's state carries the call's result once it completed
    (``result``); the bridge builds the result's models from it, so the same
    caps apply to it (and the object count to the whole state).
    """
    result = message.result
    nested = result.get("result")
    content = nested.get("content") if type(nested) is dict else None
    if type(content) is list and len(content) > MAX_RESULT_BLOCKS:
        refusal: str | None = BLOCKS_REFUSAL
    else:
        refusal = _result_refusal(result)
    if refusal is not None:
        return SessionMessage(result_refused(message.id, refusal), metadata=item.metadata)
    return item


def _carry(result: dict[str, Any], nodes: int) -> None:
    """Put ``result``'s ``structuredContent`` object in a :class:`Detached`."""
    structured = result.get("structuredContent")
    if type(structured) is dict and structured:
        result["structuredContent"] = {DETACHED_KEY: Detached(structured, nodes)}


def result_refused(request_id: int | str, refusal: str) -> mcp_types.JSONRPCError:
    """The error that answers a tools/call in place of its refused result."""
    error = mcp_types.ErrorData(code=_RESULT_REFUSED, message=f"result refused: {refusal}")
    return mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)


DETACHED_KEY = "io.prism/detached"


class Detached(str):
    """A ``structuredContent`` object carried past the SDK's models (see :func:`attach`).

    A ``str`` to the SDK (its models keep any value of a ``structuredContent``
    member as it is, and its result check dumps it as this short text); no
    parse of a message ever makes one, so a server cannot forge it.
    """

    value: dict[str, Any]
    nodes: int
    """How many objects and arrays the whole result held (the gate counted them)."""

    def __new__(cls, value: dict[str, Any], nodes: int = 0) -> Self:
        carried = super().__new__(cls, DETACHED_KEY)
        carried.value = value
        carried.nodes = nodes
        return carried


def attach(result: mcp_types.CallToolResult) -> int:
    """Put back the ``structuredContent`` the gate carried past the SDK in ``result``.

    Returns how many objects and arrays the result held (0 when nothing was carried).
    """
    structured = result.structured_content
    if type(structured) is dict and len(structured) == 1:
        carried = structured.get(DETACHED_KEY)
        if type(carried) is Detached:
            result.structured_content = carried.value
            return carried.nodes
    return 0


def attach_raw(result: dict[str, Any]) -> int:
    """:func:`attach` for a result not made a model (a plain answer's dict)."""
    structured = result.get("structuredContent")
    if type(structured) is dict and len(structured) == 1:
        carried = structured.get(DETACHED_KEY)
        if type(carried) is Detached:
            result["structuredContent"] = carried.value
            return carried.nodes
    return 0


class _GatedRead(ObjectReceiveStream[SessionMessage | Exception]):
    """The SDK's read stream, admitting at most ``limit`` server requests at a time.

    The SDK starts a task for every request a server sends and keeps it until its
    answer is written; a server that floods requests (and never reads the answers)
    would grow those without bound. Past the limit a request is answered with an
    error when the writer can take it at once, and dropped otherwise.
    """

    def __init__(self, inner: Any, gate: _Gate) -> None:
        self._inner = inner
        self._gate = gate

    @property
    def last_context(self) -> object:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        sent = self._gate.state.sent
        while True:
            item: SessionMessage | Exception = await self._inner.receive()
            if isinstance(item, SessionMessage):
                message = item.message
                if (
                    isinstance(message, (mcp_types.JSONRPCResponse, mcp_types.JSONRPCError))
                    and type(message.id) is str
                    and type(request_key(message.id)) is int
                ):
                    # The SDK takes "7", " 7 " or Arabic-Indic digits for request 7:
                    # every check below sees the id it correlates by.
                    message = message.model_copy(update={"id": coerce_request_id(message.id)})
                    item = SessionMessage(message, metadata=item.metadata)
                if isinstance(message, mcp_types.JSONRPCResponse):
                    sent.answered(message.id, message.result)
                elif isinstance(message, mcp_types.JSONRPCError):
                    sent.answered(message.id, None)
                elif (
                    isinstance(message, mcp_types.JSONRPCNotification)
                    and message.method == _PROGRESS
                    # Only under a token the bridge gave, on the stream of its call.
                    and sent.progress(
                        message,
                        call_in(context := self.last_context),
                        streams_named=isinstance(context, contextvars.Context),
                    )
                    is None
                ):
                    continue
                elif isinstance(message, mcp_types.JSONRPCRequest):
                    if type(message.id) is str and has_lone_surrogate(message.id):
                        # No answer under that id could be written: refused under none
                        # (as a request that cannot be read), before anyone is asked.
                        text = f"request refused: {LONE_SURROGATE} in its id"
                        self._gate.refuse(None, _INVALID_PARAMS, text)
                        continue
                    refusal = _request_refusal(message)
                    if refusal is not None:
                        text = f"request refused: {refusal}"
                        self._gate.refuse(message.id, _INVALID_PARAMS, text)
                        continue
                    if not self._gate.admit(message.id):
                        continue
                if isinstance(message, mcp_types.JSONRPCResponse) and self._gate.pending:
                    await self._gate.answered(message)
                state = self._gate.state
                calls = state.calls
                direct = self._gate.direct
                if isinstance(message, (mcp_types.JSONRPCResponse, mcp_types.JSONRPCError)):
                    ours = direct is not None and direct.awaits(message.id)
                    if ours or (calls and message.id in calls):
                        calls.discard(message.id)
                        if isinstance(message, mcp_types.JSONRPCResponse):
                            item = _call_result(item, message, state)
                        else:
                            error = message.error
                            found = _nodes([error.message, error.data])
                            if type(found) is str and message.id is not None:
                                # No UTF-8 holds it (or past the caps): refused as a result is.
                                refused = result_refused(message.id, found)
                                item = SessionMessage(refused, metadata=item.metadata)
                        if ours:
                            # A direct call's answer, checked as the SDK's: to its caller.
                            assert direct is not None
                            direct.answer(str(message.id), item.message)
                            continue
                        if isinstance(message, mcp_types.JSONRPCResponse):
                            return item
                    polls = state.polls
                    if polls and message.id in polls:
                        polls.discard(message.id)
                        if isinstance(message, mcp_types.JSONRPCResponse):
                            return _poll_result(item, message)
                elif (
                    direct is not None
                    and type(message) is mcp_types.JSONRPCNotification
                    and message.method == "notifications/progress"
                ):
                    direct.progress(message.params)  # and on to the SDK, as before
            return item

    async def aclose(self) -> None:
        # Before the SDK fails its waiting calls with CONNECTION_CLOSED (it closes
        # this stream first, however its reading ended), so the bridge can tell its
        # code from the same code in a server's error answer.
        self._gate.state.streams_closed = True
        direct = self._gate.direct
        if direct is not None:
            direct.close()
        await self._inner.aclose()


class _GatedWrite:
    """The SDK's write stream; an answer to an admitted server request frees its slot."""

    def __init__(self, inner: Any, gate: _Gate) -> None:
        self._inner = inner
        self._gate = gate

    async def send(self, item: SessionMessage, /) -> None:
        try:
            await self._send(item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            # The SDK fails the request with CONNECTION_CLOSED: the session's, not the server's.
            self._gate.state.streams_closed = True
            raise

    async def _send(self, item: SessionMessage) -> None:
        message = item.message
        if type(message) is mcp_types.JSONRPCRequest:
            self._gate.state.sent.sending(message)  # its progress token: the bridge's own
            if message.method in _CALL_RESULTS:
                self._gate.track_call(message.id)
            elif message.method == "tasks/get":
                self._gate.track_poll(message.id)
            elif message.method in _WATCHED:
                self._gate.track(message.id, message.method)
        elif type(message) is mcp_types.JSONRPCNotification and message.method == _CANCELLED:
            unsent = self._gate.unsent
            params = message.params
            if unsent and params is not None and params.get("requestId") in unsent:
                # The SDK's courtesy cancel of a request the server never got.
                unsent.discard(params["requestId"])
                return
            self._gate.state.sent.cancelled(params)
        if self._gate.unsent is not None and type(message) is mcp_types.JSONRPCRequest:
            try:
                await self._inner.send(item)
            except anyio.get_cancelled_exc_class():
                # Cancelled while its line waited its turn: not a byte of it was written.
                self._gate.state.sent.unsent(message.id)
                self._gate.state.calls.discard(message.id)
                _remember(self._gate.unsent, message.id)
                raise
            return
        if not self._gate.inflight or not isinstance(
            message, (mcp_types.JSONRPCResponse, mcp_types.JSONRPCError)
        ):
            await self._inner.send(item)
            return
        try:
            await self._inner.send(item)
        finally:
            # The slot frees only once the answer is handed on: a task still waiting
            # to write is a task the flood made.
            self._gate.inflight.discard(message.id)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


# Requests answered with a call's result: a tools/call, and the result of a
# 2025-11-25 task-augmented call (tasks/result), held to the same caps.
_CALL_RESULTS = frozenset({"tools/call", "tasks/result"})
# Requests whose answers the gate reads: the handshake (for the protocol
# version) and tool listings (to drop a tool the SDK would refuse).
_WATCHED = frozenset({"initialize", "tools/list"})
_PROGRESS = "notifications/progress"
_CANCELLED = "notifications/cancelled"
_MAX_DROPPED = 64
_LATEST = "2026-07-28"
_KNOWN_VERSIONS = frozenset(version for _method, version in _methods.SERVER_RESULTS)


_SCHEMA_FIELDS = ("type", "$schema", "required")


_NO_KEYWORDS: dict[str, Any] = {}
"""Each object entry of a skeleton's ``properties`` (one object: nothing writes to it)."""


def skeleton(tool: object, *, blank: bool = False) -> object:
    """``tool`` with each schema cut to the fields the SDK's models type.

    The SDK's tool models read ``type``, ``$schema``, ``required`` and the kind
    (object or boolean) of each ``properties`` entry of an ``inputSchema`` or
    ``outputSchema`` and keep every other keyword as any JSON: a page of
    skeletons passes the SDK's check exactly when the page does (a test holds
    this against the SDK on hostile shapes), at a fraction of the cost on a
    listing of large schemas. A tool refused in skeleton is checked whole
    before it is dropped. With ``blank``, each :data:`FREE_TEXT` field that is
    a ``str`` is ``""`` (see :func:`shape_key`).
    """
    if type(tool) is not dict:
        return tool
    out = dict(tool)
    if blank:
        for name in FREE_TEXT:
            if type(out.get(name)) is str:
                out[name] = ""
    for key in ("inputSchema", "outputSchema"):
        schema = out.get(key)
        if type(schema) is not dict:
            continue
        small = {name: schema[name] for name in _SCHEMA_FIELDS if name in schema}
        if "properties" in schema:
            props = schema["properties"]
            small["properties"] = (
                {
                    name: _NO_KEYWORDS if type(value) is dict else value
                    for name, value in props.items()
                }
                if type(props) is dict
                else props
            )
        out[key] = small
    return out


def _page_refusal(page: dict[str, Any], version: str) -> str | None:
    """Why the SDK would refuse a ``tools/list`` page, or ``None`` (one check per page)."""
    try:
        with suppress(KeyError):
            _methods.validate_server_result("tools/list", version, page)
        mcp_types.ListToolsResult.model_validate(page, by_name=False)
    except ValueError as exc:
        return str(exc)[:300]
    return None


def _as_the_sdk_reads(rest: dict[str, Any], version: str) -> dict[str, Any]:
    """A page's fields around its tools as the SDK's client session checks them.

    The session floors a negative ``ttlMs`` to 0 and leaves out the fields only
    a later revision than the session's declares, before its models see the page.
    """
    around = dict(rest)
    ttl = around.get("ttlMs")
    if isinstance(ttl, int | float) and not isinstance(ttl, bool) and ttl < 0:
        around["ttlMs"] = 0
    surface = _methods.SERVER_RESULTS.get(("tools/list", version))
    if isinstance(surface, type):
        declared = _wire_fields(surface)
        for name in _wire_fields(mcp_types.ListToolsResult) - declared:
            around.pop(name, None)
    return around


def _wire_fields(model: type[Any]) -> frozenset[str]:
    fields = getattr(model, "model_fields", {})
    return frozenset(field.alias or name for name, field in fields.items())


def _reason(exc: ValueError, where: tuple[object, ...] = ()) -> str:
    """The first error of a pydantic ``ValidationError`` (a ``ValueError``), as ``loc: msg``."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        with suppress(Exception):
            first = errors()[0]
            loc = ".".join(str(part) for part in (*where, *first.get("loc", ())))
            return f"{loc}: {first.get('msg', '')}"[:300]
    return str(exc)[:300]


def _surface_refusal(rest: dict[str, Any], tool: object, version: str) -> str | None:
    """Why the revision's page model refuses ``tool`` in a page of ``rest``, or ``None``."""
    surface = _methods.SERVER_RESULTS.get(("tools/list", version))
    if surface is None:
        return None  # no model of that page in this revision
    page = {**rest, "tools": [tool]}
    try:
        if isinstance(surface, type):
            # What validate_server_result checks, without the dump it then makes.
            surface.model_validate(page, by_name=False)
        else:
            _methods.validate_server_result("tools/list", version, page)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        return _reason(exc)
    return None


FREE_TEXT = ("name", "title", "description")
"""A tool's fields each revision's tool model types as a plain ``str``, with no
constraint and no validator on it or its models (a test holds the models to
this): a tool's verdict depends on their types, never on the text in them."""


def shape_key(tool: object, version: str) -> bytes | None:
    """What the revision's page model's verdict on the skeleton of ``tool`` depends on.

    Two tools of one page with the same key get the same verdict. Usually
    (:func:`_written_shape`) the tool's JSON text (pydantic-core's, which keeps
    every type and value apart) without its :data:`FREE_TEXT` fields and with
    each entry of a schema's ``properties`` that is an object written as
    ``{}``, after the kinds of those fields: it tells apart every two tools
    whose skeletons differ (a test holds it to that), in one pass in Rust
    with no copy of the tool. Otherwise the skeleton's JSON text with each
    :data:`FREE_TEXT` field that is a ``str`` written as ``""``. ``None`` when
    there is no such key (the revision's check is not one model, or the tool
    holds a lone surrogate).
    """
    if type(tool) is not dict or not isinstance(
        _methods.SERVER_RESULTS.get(("tools/list", version)), type
    ):
        return None
    try:
        written = _written_shape(tool)
        if written is not None:
            return written
        return pydantic_core.to_json(skeleton(tool, blank=True), inf_nan_mode="constants")
    except ValueError:
        return None


class _Absent:
    """The kind of a field a tool does not have (see :func:`_written_shape`)."""


_ABSENT = _Absent()
_KIND_LETTERS = {str: "s", type(None): "n", _Absent: "a"}
_FREE_KINDS: dict[tuple[object, ...], bytes] = {
    (first, second, third): f"{_KIND_LETTERS[first]}{_KIND_LETTERS[second]}"
    f"{_KIND_LETTERS[third]}".encode()
    for first in _KIND_LETTERS
    for second in _KIND_LETTERS
    for third in _KIND_LETTERS
}
"""Each kind of the three :data:`FREE_TEXT` fields (a ``str``, ``null``, absent), by type."""
_SCHEMAS = ("inputSchema", "outputSchema")
_EMPTIED = {"properties": {"__all__": {"__all__"}}}
_SHAPE_LEFT_OUT: dict[str, Any] = {
    **dict.fromkeys(FREE_TEXT, True),
    **dict.fromkeys(_SCHEMAS, _EMPTIED),
}
"""pydantic-core's filter: the free text left out, each object in a schema's properties ``{}``."""
_PROPERTY_KINDS = frozenset({dict, bool, str, int, float, type(None)})
"""What a ``properties`` entry may be for :data:`_SHAPE_LEFT_OUT` to write it as the skeleton
does (an array's members would be filtered too)."""


def _free_kinds(get: Callable[[str, object], object]) -> bytes | None:
    """The kinds of a tool's name, title and description, as :data:`_FREE_KINDS` writes them.

    ``get``: the tool's ``dict.get``. None for a kind it does not list.
    """
    return _FREE_KINDS.get(
        (type(get("name", _ABSENT)), type(get("title", _ABSENT)), type(get("description", _ABSENT)))
    )


def _written_shape(tool: dict[str, Any]) -> bytes | None:
    """:func:`shape_key` of a tool without copying it, or ``None`` when it takes the skeleton.

    The kinds of the :data:`FREE_TEXT` fields (``s``, ``n`` or ``a`` each), then
    the tool's JSON text written through :data:`_SHAPE_LEFT_OUT`. The skeleton
    is a function of that text: the text leaves out only the free text, whose
    kinds come first, and the keywords of each object entry of a schema's
    ``properties``, which the skeleton writes as ``{}`` too (it keeps more of a
    schema than the skeleton does, so it may tell apart tools the skeleton
    does not, never the reverse). A schema that is not an object, a
    ``properties`` that is not an object, or an entry that is an array (the
    filter would empty it where the skeleton keeps it), takes the skeleton;
    so does a free-text field of any other kind. Never starts with ``{``, as
    the skeleton's text does. Raises ``ValueError`` as ``pydantic_core.to_json``.
    """
    get = tool.get
    kinds = _free_kinds(get)
    if kinds is None:
        return None
    for field in _SCHEMAS:
        schema = get(field)
        if schema is None:
            continue
        if type(schema) is not dict:
            return None
        properties = schema.get("properties")
        if properties is None:
            continue
        if type(properties) is not dict or not _PROPERTY_KINDS.issuperset(
            map(type, properties.values())
        ):
            return None
    return kinds + pydantic_core.to_json(tool, exclude=_SHAPE_LEFT_OUT, inf_nan_mode="constants")


def tool_model(
    rest: dict[str, Any],
    tool: dict[str, Any],
    version: str,
    passed: set[bytes] | None = None,
    written: bytes | None = None,
) -> mcp_types.Tool | str:
    """``tool`` as the SDK would build it in a ``tools/list`` page, or why it would refuse it.

    The SDK validates a whole page against the negotiated revision's model
    (through 2025-11-25 an ``outputSchema`` must say ``"type": "object"``) and
    then builds its own model of each tool: one bad tool would fail the listing
    of every tool, and a large page held the event loop in one step. Here each
    tool is checked alone, in a page of one beside the page's other fields
    (``rest``): first in skeleton (see :func:`skeleton`; a tool refused in
    skeleton is checked whole), then built with the SDK's own tool model.
    With ``passed`` (one per page), a skeleton whose :func:`shape_key` passed
    before in the page is not checked again (the tools of a listing repeat
    their shapes); only a pass is remembered. ``written`` (the tool's
    :func:`written_tool`) is remembered with it: a later tool written the same
    is not even keyed (one text is one skeleton: it is the tool but its free
    text, whose kinds it starts with).
    """
    if passed is None or written is None or written not in passed:
        key = None if passed is None else shape_key(tool, version)
        if passed is None or key is None or key not in passed:
            refused = _surface_refusal(rest, skeleton(tool), version)
            if refused is None and passed is not None and key is not None:
                passed.add(key)
            reason = refused and _surface_refusal(rest, tool, version)
            if reason is not None:
                return reason
        if passed is not None and written is not None:
            passed.add(written)
    try:
        # What Tool.model_validate runs, without its wrapper's own steps.
        return _BUILD_TOOL(tool, by_name=False)  # type: ignore[no-any-return]
    except ValueError as exc:
        return _reason(exc, ("tools", 0))


_FREE_LEFT_OUT = dict.fromkeys(FREE_TEXT, True)


def written_tool(tool: dict[str, Any]) -> bytes | None:
    """The tool's JSON text without its :data:`FREE_TEXT` fields, after their kinds.

    pydantic-core's text (every type and value kept apart), in one pass with
    no copy of the tool: two tools written the same differ in their free text
    alone (of the same kinds: ``str``, ``null`` or absent), so every part
    prepared from the rest of a definition is theirs to share (see
    ``SharedParts.body``), and so is the page model's verdict. ``None`` for a
    free-text field of another kind, or a tool no JSON holds (a lone
    surrogate).
    """
    get = tool.get
    kinds = _free_kinds(get)
    if kinds is None:
        return None
    try:
        return kinds + pydantic_core.to_json(tool, exclude=_FREE_LEFT_OUT, inf_nan_mode="constants")
    except ValueError:
        return None


_BUILD_TOOL = mcp_types.Tool.__pydantic_validator__.validate_python


PAGE_ON_THREAD = 256
"""A ``tools/list`` page of more entries than this is checked and built on a worker thread."""


def _measured(entry: object) -> tuple[dict[str, Any] | None, bytes | None, int]:
    """A page entry as it is checked: (the tool, its :func:`written_tool`, its size).

    The size bounds its objects and arrays (the checkpoint's share). The tool is
    ``None`` when the entry is dropped before any model check: not an object
    (size 0), or nested deeper than ``MAX_TOOL_DEPTH`` (size -1).
    """
    if type(entry) is not dict:
        return None, None, 0
    tool = _few_icons(entry)
    written = written_tool(tool)
    # Each object and array of the tool is a { or [ of its text (its free text,
    # all str or null, left out): never more of them, nor deeper.
    size = -1 if written is None else written.count(b"{") + written.count(b"[")
    if not 0 <= size <= MAX_TOOL_DEPTH:
        size = _containers(tool, MAX_TOOL_DEPTH)
        if size < 0:
            return None, None, -1
    return tool, written, size


def _dropped_entry(entry: object, size: int) -> tuple[str, str]:
    """(name, reason) of an entry :func:`_measured` dropped."""
    if size == 0:
        return repr(entry)[:130], "the entry is not a JSON object"
    name = entry.get("name") if type(entry) is dict else None
    return repr(name)[:130], f"its definition nests deeper than {MAX_TOOL_DEPTH} levels"


def _built_page(
    rest: dict[str, Any], tools: list[Any], version: str
) -> tuple[list[mcp_types.Tool], dict[int, bytes], list[tuple[str, str]]]:
    """The page's tools checked and built in one step (on a worker thread).

    Returns the models built, each one's :func:`written_tool` (by the identity
    of its model), and the (name, reason) of each tool dropped.
    """
    built: list[mcp_types.Tool] = []
    texts: dict[int, bytes] = {}
    dropped: list[tuple[str, str]] = []
    passed: set[bytes] = set()
    for index, entry in enumerate(tools):
        tools[index] = None
        tool, written, size = _measured(entry)
        if tool is None:
            if len(dropped) < _MAX_DROPPED:
                dropped.append(_dropped_entry(entry, size))
            continue
        model = tool_model(rest, tool, version, passed, written)
        if type(model) is str:
            if len(dropped) < _MAX_DROPPED:
                dropped.append((repr(tool.get("name"))[:130], model))
            continue
        built.append(model)  # type: ignore[arg-type]
        if written is not None:
            texts[id(model)] = written
    return built, texts, dropped


LISTED_KEY = "io.prism/listed"


class Listed(str):
    """A ``tools/list`` page's tools as the gate built them, carried past the SDK.

    The SDK gets the page without its tools and this in its ``_meta``: a
    ``str`` to the SDK (its page model keeps any ``_meta`` value as it is); no
    parse of a message ever makes one, so a server cannot forge it. See
    :func:`listed_tools`. ``written`` holds each tool's :func:`written_tool`
    (by the identity of its model, which the tools hold alive), when it has one.
    """

    tools: list[mcp_types.Tool]
    written: dict[int, bytes]

    def __new__(cls, tools: list[mcp_types.Tool], written: dict[int, bytes] | None = None) -> Self:
        carried = super().__new__(cls, LISTED_KEY)
        carried.tools = tools
        carried.written = {} if written is None else written
        return carried


def carried_tools(page: mcp_types.ListToolsResult) -> tuple[list[mcp_types.Tool], dict[int, bytes]]:
    """The tools of a page the SDK returned, and the text of each the gate wrote.

    The gate's tools when it carried them (with each one's :func:`written_tool`,
    by the identity of its model), else the SDK's (and no text).
    """
    meta = page.meta
    if meta is not None:
        carried = meta.get(LISTED_KEY)
        if type(carried) is Listed:
            # Taken once: the SDK's reader keeps the last message it read until
            # the next one comes, and the page's tools need not stay with it.
            tools, carried.tools = carried.tools, []
            written, carried.written = carried.written, {}
            return tools, written
    return page.tools, {}


def listed_tools(page: mcp_types.ListToolsResult) -> list[mcp_types.Tool]:
    """The tools of a page the SDK returned: the gate's when it carried them, else the SDK's."""
    return carried_tools(page)[0]


@attrs.define(eq=False)
class _Gate:
    limit: int
    state: WireState
    write: Any
    inflight: set[int | str] = attrs.field(factory=set)
    pending: dict[int | str, str] = attrs.field(factory=dict)
    version: str | None = None
    direct: DirectCalls | None = None
    unsent: set[int | str] | None = None
    """With a stdio server's stdin (a cancelled send wrote nothing): the requests
    whose sender was cancelled before they were written, so never sent."""

    def track(self, request_id: int | str, method: str) -> None:
        if len(self.pending) >= _MAX_TRACKED_CALLS:
            self.pending.clear()
        self.pending[request_id] = method

    async def answered(self, message: mcp_types.JSONRPCResponse) -> None:
        method = self.pending.pop(message.id, None)
        result = message.result
        if method == "initialize":
            version = result.get("protocolVersion")
            # Only a revision the SDK knows (it refuses a handshake on any other).
            self.version = version if version in _KNOWN_VERSIONS else None
        elif method == "tools/list" and isinstance(result.get("tools"), list):
            version = self.version or _LATEST
            tools = result["tools"]
            if len(tools) > MAX_PAGE_TOOLS:
                # Refused whole, before any per-entry check: a small page of junk
                # entries (``1`` is two bytes) would cost two model checks each.
                self._drop("(page)", f"{len(tools)} entries, more than {MAX_PAGE_TOOLS}")
                result["tools"] = []
                return
            rest = {key: value for key, value in result.items() if key != "tools"}
            if _page_refusal({**_as_the_sdk_reads(rest, version), "tools": []}, version):
                # The page itself is wrong, not a tool: the SDK says so, and never
                # gets a tool the gate did not check and build.
                self._drop("(page)", "the page around the tools is refused")
                result["tools"] = []
                return
            if len(tools) > PAGE_ON_THREAD:
                # A long page is checked and built on a worker thread, in one hop:
                # its models (the most objects a listing makes) and whatever
                # collection of the interpreter's heap they cause land there, and
                # the event loop runs between the interpreter's switches.
                built, texts, dropped = await anyio.to_thread.run_sync(
                    _built_page, rest, tools, version
                )
                for name, reason in dropped:
                    self._drop(name, reason)
            else:
                built, texts = await self._built_here(rest, tools, version)
            # The SDK checks and builds only the page around them (see listed_tools).
            meta = result.get("_meta")
            result["_meta"] = {**(meta or {}), LISTED_KEY: Listed(built, texts)}
            result["tools"] = []

    async def _built_here(
        self, rest: dict[str, Any], tools: list[Any], version: str
    ) -> tuple[list[mcp_types.Tool], dict[int, bytes]]:
        """The page's tools checked and built on the event loop, a few at a time.

        Returns the models built and each one's :func:`written_tool`, by the
        identity of its model; a dropped tool is recorded (``_drop``).
        """
        built: list[mcp_types.Tool] = []
        texts: dict[int, bytes] = {}
        # The skeletons' shapes this page's model passed (see tool_model).
        passed: set[bytes] = set()
        # Objects and arrays checked since the last checkpoint, and tools.
        nodes = 0
        for index, entry in enumerate(tools):
            if nodes >= CHECKPOINT_NODES or index % CHECKPOINT_TOOLS == CHECKPOINT_TOOLS - 1:
                # Each tool is checked and built alone: let other tasks run.
                await anyio.lowlevel.checkpoint()
                nodes = 0
            # Let go of each entry as it is checked: the page's parse is freed
            # as the tools' models are built, not held beside all of them.
            tools[index] = None
            tool, written, size = _measured(entry)
            if tool is None:
                self._drop(*_dropped_entry(entry, size))
                continue
            if size > CHECKPOINT_NODES:
                # One tool larger than a checkpoint's share (40,000 properties
                # held the loop 0.2 s): checked and built on a worker thread.
                model = await anyio.to_thread.run_sync(
                    tool_model, rest, tool, version, passed, written
                )
                nodes = 0
            else:
                nodes += size
                model = tool_model(rest, tool, version, passed, written)
            if type(model) is str:
                self._drop(repr(tool.get("name"))[:130], model)
                continue
            built.append(model)  # type: ignore[arg-type]
            if written is not None:
                texts[id(model)] = written
        return built, texts

    def _drop(self, name: str, reason: str) -> None:
        if len(self.state.dropped_tools) < _MAX_DROPPED:
            self.state.dropped_tools.append((name, reason))

    def track_call(self, request_id: int | str) -> None:
        _remember(self.state.calls, request_id)

    def track_poll(self, request_id: int | str) -> None:
        _remember(self.state.polls, request_id)

    def admit(self, request_id: int | str) -> bool:
        if request_id not in self.inflight and len(self.inflight) < self.limit:
            self.inflight.add(request_id)
            return True
        self.refuse(
            request_id, _TOO_MANY_REQUESTS, f"too many concurrent requests (at most {self.limit})"
        )
        return False

    def refuse(self, request_id: int | str | None, code: int, text: str) -> None:
        """Answer a server request with an error, never waiting for the writer."""
        self.state.refused_requests += 1
        refusal = SessionMessage(
            mcp_types.JSONRPCError(
                jsonrpc="2.0", id=request_id, error=mcp_types.ErrorData(code=code, message=text)
            )
        )
        send_nowait = getattr(self.write, "send_nowait", None)
        if send_nowait is not None:
            # Never wait: a server that does not read its answers just loses this one.
            with suppress(anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                send_nowait(refusal)


def _remember(ids: set[int | str], request_id: int | str) -> None:
    # Bounded: ids of requests abandoned without an answer are forgotten in bulk.
    if len(ids) >= _MAX_TRACKED_CALLS:
        ids.clear()
    ids.add(request_id)


def gate_server_requests(
    streams: TransportStreams,
    *,
    limit: int,
    state: WireState,
    send_line: Callable[[bytes], Awaitable[None]] | None = None,
    write_now: Callable[[bytes], bool] | None = None,
) -> TransportStreams:
    """Wrap ``streams`` so at most ``limit`` server-to-client requests are handled at once.

    With ``send_line`` (writing a line to a stdio server's stdin; ``write_now``
    writes one without waiting, if it can), ``state.direct`` sends tools/call
    requests past the SDK's dispatcher,
    their answers checked here as the SDK's (see ``_direct``).
    """
    read, write = streams
    gate = _Gate(limit=limit, state=state, write=write)
    gated_write = _GatedWrite(write, gate)
    if send_line is not None:
        gate.unsent = set()
        gate.direct = state.direct = DirectCalls(
            send_line=send_line,
            write_now=write_now,
            send=gated_write.send,
            track=gate.track_call,
            state=state,
        )
    return _GatedRead(read, gate), gated_write


_SCAN_ON_THREAD = 65536
"""Messages longer than this are scanned on a worker thread."""
DETACH_OVER = 65536
"""A ``structuredContent`` object longer than this is parsed apart (see :func:`before_parsing`)."""
_DETACHED_TOKEN = DETACHED_KEY + ":"
_MAX_DETACHED = 64
_MISSING = object()
_LOST = "its structuredContent was not kept (too many large results at once)"
_OPEN_OBJECT = ord("{")
_CONTINUATION = tuple(bytes([byte]) for byte in range(0x80, 0xC0))


@attrs.frozen
class _Found:
    """What the scan of one tools/call answer found: refuse it, or a value parsed apart."""

    request_id: int | str
    refused: bool = False
    token: str = ""
    value: object = None
    rest: bytes = b""


def _parse_apart(raw: bytes, start: int, end: int) -> object:
    """``json.loads(raw[start:end])``; raises ``ValueError``.

    A span of many strings is copied and goes to :func:`parse_json` (one
    ``str`` for equal short strings); any other is parsed in place, without
    copying the span first.
    """
    if many_strings(raw, start, end):
        return parse_json(raw[start:end])
    text = raw.decode("utf-8", "surrogatepass")  # as json.loads decodes bytes
    if not raw.isascii():
        # The span's place in characters: each UTF-8 continuation byte before it is none.
        before = sum(raw.count(byte, 0, start) for byte in _CONTINUATION)
        start, end = (
            start - before,
            end - before - sum(raw.count(byte, start, end) for byte in _CONTINUATION),
        )
    value, stop = decoder().raw_decode(text, start)
    if stop != end:
        raise ValueError("not the whole span")
    return value


def _examine(raw: bytes, calls: frozenset[int | str], detach: bool) -> _Found | None:
    layout = scan(raw, limit=MAX_RESULT_BLOCKS)
    if layout is None or layout.request_id is None or not layout.is_result:
        return None
    try:
        request_id = json.loads(layout.request_id)
    except ValueError:
        return None
    if type(request_id) is str:
        request_id = coerce_request_id(request_id)  # as the SDK correlates it
    # Only the answer to a call in flight, as the gate after parsing.
    if (type(request_id) is not int and type(request_id) is not str) or request_id not in calls:
        return None
    if layout.blocks is not None and layout.blocks > MAX_RESULT_BLOCKS:
        return _Found(request_id, refused=True)
    if not detach or layout.structured is None:
        return None
    start, end = layout.structured
    if end - start <= DETACH_OVER or raw[start] != _OPEN_OBJECT:
        return None
    try:
        value = _parse_apart(raw, start, end)
    except (ValueError, RecursionError):
        return None  # left to the SDK's parser, which refuses it as before
    token = _DETACHED_TOKEN + secrets.token_hex(16)
    marker = json.dumps({DETACHED_KEY: token}, separators=(",", ":")).encode()
    return _Found(request_id, token=token, value=value, rest=raw[:start] + marker + raw[end:])


async def before_parsing(
    raw: bytes, state: WireState, *, detach: bool = False
) -> bytes | mcp_types.JSONRPCError:
    """What the SDK's parser gets in place of the server message ``raw``.

    Only an answer to a tools/call in flight is changed, found by a scan of
    the raw bytes (:func:`scan`, on a worker thread for a long message):

    - more than ``MAX_RESULT_BLOCKS`` content blocks: the gate's error (as
      after parsing, the session kept), without ``json.loads`` building a dict
      per block first; scanned only when the message holds enough commas.
    - with ``detach``, a ``structuredContent`` object of more than
      ``DETACH_OVER`` bytes: parsed here by the json module (the SDK's HTTP
      parser holds about half as much again for the same records, and its
      server-sent event reader three more copies of the text), kept in
      ``state``, and handed on as a marker the gate replaces with it. A span
      the json module refuses is left in place for the SDK to refuse.
    """
    if not state.calls:
        return raw
    if raw.count(b",") < MAX_RESULT_BLOCKS and not (
        detach and len(raw) > DETACH_OVER and b'"structuredContent"' in raw
    ):
        return raw
    calls = frozenset(state.calls)
    if len(raw) > _SCAN_ON_THREAD:
        found = await anyio.to_thread.run_sync(_examine, raw, calls, detach)
    else:
        found = _examine(raw, calls, detach)
    if found is None:
        return raw
    if found.refused:
        return result_refused(found.request_id, BLOCKS_REFUSAL)
    detached = state.detached
    if len(detached) >= _MAX_DETACHED:
        # Answers the SDK failed to hand on (a broken message): the oldest goes.
        del detached[next(iter(detached))]
    detached[found.token] = found.value
    return found.rest
