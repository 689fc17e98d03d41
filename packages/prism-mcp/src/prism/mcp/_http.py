"""The bounded Streamable HTTP transport: response bodies counted before the SDK reads them.

The SDK's HTTP client reads JSON bodies whole (its event-size limit applies to
legacy SSE only); this transport refuses a body or an event past
``max_message_bytes``, and any compressed body (decompression would happen
after the count).
"""

from __future__ import annotations

import codecs
import email.message
import json
import logging
import re
import socket
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
import httpx2

from mcp.client.streamable_http import streamable_http_client

from ._budget import message_refusal
from ._gate import before_parsing, gate_server_requests
from ._stdio import crowded_refusal, dropped_notification

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    import mcp_types

    from mcp.client._transport import TransportStreams

    from ._transports import StreamableHttpTransport
    from ._wire import WireState

__all__ = ["open_http_streams"]


_TEARDOWN_ERRORS = (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream)
_SDK_HTTP_LOGGER = "mcp.client.streamable_http"


class _QuietTeardown(logging.Filter):
    """Demote the SDK's tracebacks for an expected teardown to DEBUG.

    When a session closes while the server is still streaming (after a
    ``max_call_s`` timeout, say, or when the bridge closes), the SDK's HTTP
    reader keeps handing events to a stream that is already closed and logs
    each failure at ERROR with a traceback. The bridge has already turned the
    fault into one error result; the record stays available at DEBUG.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if record.levelno >= logging.ERROR and isinstance(exc, _TEARDOWN_ERRORS):
            record.levelno = logging.DEBUG
            record.levelname = "DEBUG"
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


_QUIET = _QuietTeardown()


def _quiet_sdk_teardown() -> None:
    sdk = logging.getLogger(_SDK_HTTP_LOGGER)
    if _QUIET not in sdk.filters:
        sdk.addFilter(_QUIET)


class _MessageTooLarge(httpx2.StreamError):
    """Raised inside the SDK's response reading; the SDK turns it into an error reply."""


_NOTHING = bytearray()
_LINE_ENDS = (10, 13)
_DATA = b"data: "
_EOL = b"\n"


def _json(message: mcp_types.JSONRPCError) -> bytes:
    return message.model_dump_json(by_alias=True, exclude_none=True).encode()


class _Refused(Exception):
    """An event priced over the budget (its reason)."""


class _Events:
    """Server-sent events as they stream, each event's data priced before the SDK parses it.

    Lines end with CRLF, LF or CR; a CR that ends a chunk ends its line at
    once, and an LF that begins the next chunk is then the rest of that CRLF.
    Comment lines are dropped (the SDK's reader ignores them), and so is a
    blank line that ends nothing (no field since the last one); every other
    line but a data line is handed on as it completes (ended with LF);
    the data lines of an event are held (joined with LF, as the SDK's reader
    joins them) until its blank line, priced, and handed on then as the same
    data, or, for a call's result of too many content blocks, as the error
    the gate answers it with, and a large ``structuredContent`` object parsed
    apart (``before_parsing``). The SDK parses an
    event only at its blank line, so it sees each event as the server sent it.
    """

    def __init__(self, state: WireState) -> None:
        self._state = state
        self._partial = bytearray()
        self._data: list[bytes] = []
        self._after_cr = False
        self._fields = False  # a field line was handed on since the last blank line

    async def feed(self, chunk: bytes) -> list[bytes]:
        """What to hand on to the SDK for ``chunk``; raises :class:`_Refused`."""
        if self._after_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
            self._after_cr = False  # the next LF is a line of its own
        if not chunk:
            return []
        self._after_cr = chunk.endswith(b"\r")
        self._partial += chunk
        if b"\n" not in chunk and b"\r" not in chunk:
            return []
        lines = self._partial.splitlines(keepends=True)
        self._partial = bytearray()
        if not lines[-1].endswith((b"\n", b"\r")):
            self._partial = lines.pop()
        out: list[bytes] = []
        for index, line in enumerate(lines):
            lines[index] = _NOTHING  # each line is let go once read: one copy at a time
            end = len(line)
            while end and line[end - 1] in _LINE_ENDS:
                end -= 1
            if line.startswith(b"data:"):
                start = 6 if line[5:6] == b" " else 5
                with memoryview(line) as view:
                    self._data.append(bytes(view[start:end]))
            elif end == 4 and line.startswith(b"data"):
                self._data.append(b"")  # a data field with no colon: empty data
            elif line.startswith(b":"):
                continue  # a comment: the SDK's reader ignores it
            elif end:
                out += (bytes(line[:end]), _EOL)
                self._fields = True
            elif self._data:
                data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
                self._data = []
                out += await self._event(data)
                out.append(_EOL)
                self._fields = False
            elif self._fields:
                out.append(_EOL)
                self._fields = False
            # else a blank line that ends nothing: the SDK's reader would do nothing
        return out

    async def _event(self, data: bytes) -> tuple[bytes, ...]:
        refusal = await message_refusal(data)
        if refusal is not None:
            raise _Refused(refusal)
        instead = await crowded_refusal(data, self._state)
        if isinstance(instead, int):
            # A notification of too many objects and arrays: an event without data,
            # which the SDK's reader passes over.
            dropped_notification(self._state, instead)
            return ()
        if instead is not None:
            return _DATA, _json(instead), _EOL
        handed = await before_parsing(data, self._state, detach=True)
        del data
        data = handed if isinstance(handed, bytes) else _json(handed)
        del handed
        if b"\n" in data:
            data = data.replace(b"\n", b"\n" + _DATA)
        return _DATA, data, _EOL

    async def finish(self) -> list[bytes]:
        """What to hand on once the stream ended.

        The SDK's reader takes a CR that ends the stream as a line end followed
        by a blank line (the event so far is dispatched): so does this, with
        the data held, priced as any event's.
        """
        if not self._after_cr:
            return []
        out: list[bytes] = []
        if self._data:
            data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
            self._data = []
            out += await self._event(data)
        out.append(b"\r")
        return out


_ALONE = 65536
"""A piece handed on longer than this goes alone (an event's data is not copied again)."""


def _coalesced(pieces: list[bytes]) -> list[bytes]:
    """``pieces`` with each run of short ones joined.

    A chunk of thousands of short lines reaches the SDK's reader as a few
    pieces, not one call of its decoders each.
    """
    out: list[bytes] = []
    short: list[bytes] = []
    for piece in pieces:
        if len(piece) > _ALONE:
            if short:
                out.append(b"".join(short))
                short = []
            out.append(piece)
        else:
            short.append(piece)
    if short:
        out.append(b"".join(short))
    return out


class _LimitedStream(httpx2.AsyncByteStream):
    def __init__(
        self, inner: httpx2.AsyncByteStream, *, limit: int, events: bool, state: WireState
    ) -> None:
        self._inner = inner
        self._limit = limit
        self._events = events
        self._state = state

    def _refuse(self, reason: str | None = None) -> _MessageTooLarge:
        if reason is None:
            reason = f"the server sent a message larger than max_result_bytes ({self._limit} bytes)"
        self._state.set_fault(reason, oversize=True)
        return _MessageTooLarge(reason)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        tail = b""
        events = _Events(self._state) if self._events else None
        body = bytearray()
        async for chunk in self._inner:
            if events is not None:
                # Count bytes since the last blank line: one server-sent event at a time.
                data = tail + chunk
                cut = max(data.rfind(b"\n\n") + 2, data.rfind(b"\r\n\r\n") + 4, 0)
                size = len(data) - cut if cut > 0 else size + len(chunk)
                tail = data[-3:]
                del data
                if size > self._limit:
                    raise self._refuse()
                try:
                    pieces = await events.feed(chunk)
                except _Refused as refused:
                    raise self._refuse(str(refused)) from None
                del chunk
                for piece in _coalesced(pieces):
                    yield piece
                del pieces
            else:
                size += len(chunk)
                if size > self._limit:
                    raise self._refuse()
                # The SDK reads a JSON body whole before parsing it: hold it, price it.
                body += chunk
        if events is not None:
            try:
                pieces = await events.finish()
            except _Refused as refused:
                raise self._refuse(str(refused)) from None
            for piece in pieces:
                yield piece
        elif body:
            whole = bytes(body)
            del body
            refusal = await message_refusal(whole)
            if refusal is not None:
                raise self._refuse(refusal)
            instead = await crowded_refusal(whole, self._state)
            if isinstance(instead, int):
                # A notification as a body (no client request is answered so): dropped.
                dropped_notification(self._state, instead)
                return
            if instead is not None:
                yield _json(instead)
                return
            handed = await before_parsing(whole, self._state, detach=True)
            del whole
            yield handed if isinstance(handed, bytes) else _json(handed)

    async def aclose(self) -> None:
        await self._inner.aclose()


class _EmptyRefusal(httpx2.AsyncByteStream):
    def __init__(self, error: _MessageTooLarge) -> None:
        self._error = error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        raise self._error
        yield b""  # pragma: no cover


_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
_TRACESTATE = re.compile(r"[\x20-\x7e]{1,512}")


def _trace_headers(request: httpx2.Request) -> None:
    """Copy the W3C trace context of a JSON-RPC request's ``params._meta`` to its headers.

    The call's span is current in the task that makes the request, which puts
    it in ``_meta`` (see ``trace_meta``); the SDK then sends the HTTP request
    from a task of its own, where that context is gone. The body says which
    call it is, so the headers are taken from there: HTTP-level tracing (a
    proxy, the server's framework) sees the call's trace too. Only well-formed
    values are copied.
    """
    if request.method != "POST":
        return
    try:
        body = request.content
    except httpx2.RequestNotRead:  # pragma: no cover - the SDK sends whole JSON bodies
        return
    if b'"traceparent"' not in body:
        return
    try:
        message = json.loads(body)
    except ValueError:
        return
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict):
        return
    parent = meta.get("traceparent")
    if not isinstance(parent, str) or not _TRACEPARENT.fullmatch(parent):
        return
    request.headers["traceparent"] = parent
    state = meta.get("tracestate")
    if isinstance(state, str) and _TRACESTATE.fullmatch(state):
        request.headers["tracestate"] = state


_CHARSETS_OF_UTF8 = ("utf-8", "ascii")


def _events_charset_refusal(content_type: str) -> str | None:
    """Why an event stream's declared charset is refused, or ``None``.

    Events are priced as UTF-8 bytes (the encoding the SSE format mandates);
    a stream declared in another charset (UTF-7, UTF-16...) would be decoded
    by the SDK's reader into lines this transport never saw as data. The
    charset is read the way the HTTP client reads it.
    """
    message = email.message.Message()
    message["content-type"] = content_type
    charset = message.get_content_charset(failobj=None)
    if charset is None:
        return None
    try:
        name = codecs.lookup(charset).name
    except LookupError:
        name = ""
    if name in _CHARSETS_OF_UTF8:
        return None
    return f"the server sent an event stream in charset {charset[:40]!r}; only UTF-8 is accepted"


class _LimitedTransport(httpx2.AsyncBaseTransport):
    def __init__(self, *, limit: int, state: WireState) -> None:
        # Nagle's algorithm off, whatever the network backend: the SDK writes a request
        # as two sends (headers, then body), and with Nagle on the second would wait for
        # the server's delayed ACK (~40 ms per call). trio already sets this by default.
        self._inner = httpx2.AsyncHTTPTransport(
            socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
        )
        self._limit = limit
        self._state = state

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        _trace_headers(request)
        response = await self._inner.handle_async_request(request)
        content_type = response.headers.get("content-type", "").lower()
        events = content_type.startswith("text/event-stream")
        declared = response.headers.get("content-length", "")
        inner = response.stream
        assert isinstance(inner, httpx2.AsyncByteStream)
        stream: httpx2.AsyncByteStream
        headers = response.headers
        encoding = headers.get("content-encoding", "identity").strip().lower()
        charset_refusal = _events_charset_refusal(content_type) if events else None
        if events:
            # The SDK's reader decodes the stream by its declared charset: hand it the
            # one the events were priced in, whatever the server declared.
            headers = headers.copy()
            media = content_type.partition(";")[0].strip()
            headers["content-type"] = f"{media}; charset=utf-8"
        if charset_refusal is not None:
            await inner.aclose()
            self._state.set_fault(charset_refusal)
            stream = _EmptyRefusal(_MessageTooLarge(charset_refusal))
        elif encoding not in ("", "identity"):
            # Decompression happens after this byte count, so a small compressed body
            # could still expand without bound: refuse it (we asked for identity).
            await inner.aclose()
            reason = f"the server sent a {encoding!r}-encoded body; only identity is accepted"
            self._state.set_fault(reason)
            stream = _EmptyRefusal(_MessageTooLarge(reason))
        elif not events and declared.isdigit() and int(declared) > self._limit:
            await inner.aclose()
            stream = _EmptyRefusal(
                _LimitedStream(inner, limit=self._limit, events=False, state=self._state)._refuse()
            )
        else:
            stream = _LimitedStream(inner, limit=self._limit, events=events, state=self._state)
        return httpx2.Response(
            status_code=response.status_code,
            headers=headers,
            stream=stream,
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


@asynccontextmanager
async def open_http_streams(
    transport: StreamableHttpTransport,
    *,
    max_message_bytes: int,
    connect_timeout_s: float,
    state: WireState,
    max_server_requests: int,
) -> AsyncIterator[TransportStreams]:
    """Yield the SDK's (read, write) streams over Streamable HTTP, with bounded bodies."""
    _quiet_sdk_teardown()
    client = httpx2.AsyncClient(
        transport=_LimitedTransport(limit=max_message_bytes, state=state),
        headers={**dict(transport.headers), "accept-encoding": "identity"},
        auth=transport.auth,
        timeout=httpx2.Timeout(connect_timeout_s, read=None),
        follow_redirects=False,
    )
    async with (
        client,
        streamable_http_client(
            transport.url, http_client=client, max_sse_event_size=max_message_bytes
        ) as streams,
    ):
        yield gate_server_requests(streams, limit=max_server_requests, state=state)
