"""Serving a gateway: over stdio, or over Streamable HTTP behind an auth/Origin/size guard."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import json
import logging
import socket
from typing import TYPE_CHECKING, Any

import attrs
import trio

from prism.core import ParsedJson
from prism.core.options import (
    OptionCheck,
    boolean,
    has_method,
    instance_of,
    integer,
    number,
    optional,
    sequence_of,
    string,
)
from prism.core.text import describe_exception
from prism.mcp import mcp_message_refusal

from ._errors import GatewayConfigurationError, GatewayError
from ._fast import StdioFastPath, current_link
from ._gateway import Gateway
from ._sessions import Place, SessionTable, record_session_event
from ._stdio import DEFAULT_MAX_MESSAGE_BYTES, stdio_streams

if TYPE_CHECKING:
    from collections.abc import Iterator

    from starlette.types import ASGIApp, Message, Receive, Scope, Send


__all__ = [
    "BearerAuth",
    "HttpOptions",
    "OAuthResourceServer",
    "is_loopback",
    "serve_http",
    "serve_stdio",
]

_log = logging.getLogger("prism.gateway")
DEFAULT_MAX_REQUEST_BYTES = 1_000_000
_HARD_MAX_REQUEST_BYTES = 64 * 1024 * 1024
_MIN_TOKEN_CHARS = 16
_MESSAGE_BYTES = integer(minimum=1024)
_MAX_IDLE_S = 7 * 24 * 3600.0
# Room the SDK's own session limit leaves above ours (sessions being opened right now).
_SDK_SESSION_SLACK = 64


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an IP literal or ``localhost``) names this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _as_tuple(value: object) -> object:
    """A list or tuple as a tuple, a string as a 1-tuple; anything else as given (refused)."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return value


def _check_tokens(_instance: object, _attribute: object, value: object) -> None:
    # Never show a token in the message: say what is wrong with it instead.
    def usable(token: object) -> bool:
        return isinstance(token, str) and len(token) >= _MIN_TOKEN_CHARS and token.isprintable()

    if not isinstance(value, tuple) or not value or not all(map(usable, value)):
        shown = (
            f"{len(value)} value(s), not all printable strings of {_MIN_TOKEN_CHARS}+ characters"
            if isinstance(value, tuple)
            else f"a {type(value).__name__}"
        )
        raise GatewayConfigurationError(
            "BearerAuth.tokens must be a non-empty sequence of printable strings of at least "
            f"{_MIN_TOKEN_CHARS} characters, got {shown} (tokens are not shown)",
            option="BearerAuth.tokens",
            value=shown,
        )


@attrs.frozen(kw_only=True)
class BearerAuth:
    """Bearer-token authentication: ``Authorization: Bearer <token>``.

    Tokens are compared in constant time; a client's identity in the ledger is
    ``token:<first 8 hex digits of the token's SHA-256>``, never the token.

    Raises:
        GatewayConfigurationError: no token, or a token shorter than 16
            characters (the message describes the value without showing it).
    """

    tokens: tuple[str, ...] = attrs.field(converter=_as_tuple, validator=_check_tokens, repr=False)

    def identify(self, header: bytes | None) -> str | None:
        """The identity behind an ``Authorization`` header value, or ``None`` if refused."""
        if header is None or header[:7].lower() != b"bearer ":
            return None
        offered = header[7:].strip()
        found = None
        for token in self.tokens:
            # Every token is compared, whatever matched, so timing says nothing.
            if hmac.compare_digest(offered, token.encode("utf-8")):
                found = token
        if found is None:
            return None
        return "token:" + hashlib.sha256(found.encode("utf-8")).hexdigest()[:8]


_URL = OptionCheck(
    "an http(s) URL",
    lambda value: isinstance(value, str) and value.startswith(("https://", "http://")),
)


@attrs.frozen(kw_only=True)
class OAuthResourceServer:
    """OAuth 2.1 resource-server auth: the gateway checks access tokens, never issues them.

    Each request's bearer token goes to ``verifier`` (the MCP SDK's
    ``TokenVerifier`` protocol: ``async verify_token(token) -> AccessToken | None``);
    only a token issued for ``resource_server_url`` (RFC 8707) with every
    ``required_scopes`` is let in. The Protected Resource Metadata (RFC 9728)
    naming ``issuer_url`` is served, and a refused request's
    ``WWW-Authenticate`` points at it. A caller's identity in the ledger is
    ``oauth:<client id>|<issuer>|<subject>`` (the parts the token has). A
    verifier that raises refuses the request (401) and is recorded.

    Attributes:
        verifier: checks a token (introspection, JWT validation...).
        issuer_url: the authorization server that issues the tokens.
        resource_server_url: this gateway's MCP endpoint URL, as clients reach it.
        required_scopes: scopes every token must carry.

    Raises:
        ConfigurationError: an option of the wrong type or form (named in the message).
    """

    verifier: Any = attrs.field(
        validator=has_method("verify_token", description="a TokenVerifier (verify_token())")
    )
    issuer_url: str = attrs.field(validator=_URL)
    resource_server_url: str = attrs.field(validator=_URL)
    required_scopes: tuple[str, ...] = attrs.field(
        default=(), converter=_as_tuple, validator=sequence_of(string())
    )


_ORIGIN = OptionCheck(
    "an http(s) origin",
    lambda value: isinstance(value, str) and value.startswith(("http://", "https://")),
)
_PATH = OptionCheck(
    "a path starting with '/'", lambda value: isinstance(value, str) and value.startswith("/")
)


@attrs.frozen(kw_only=True)
class HttpOptions:
    """How :func:`serve_http` listens and whom it lets in.

    Attributes:
        host: the address to bind (loopback by default). A non-loopback
            address is refused unless ``auth`` is set.
        port: the TCP port (0: any free port; the bound URL is reported).
        path: the MCP endpoint path.
        auth: bearer tokens or an OAuth resource server; ``None`` lets any
            local process in (loopback only).
        allowed_origins: ``Origin`` values accepted besides loopback ones
            (``http://localhost:*``-style wildcards on the port are allowed).
            A request with any other ``Origin`` is refused (DNS rebinding).
        max_request_bytes: a larger request body is refused with 413.
        stateless: serve without sessions (every request stands alone), so
            several gateways can sit behind a load balancer; server-to-client
            requests (elicitation) are then unavailable and approval falls
            back to the configured approver.
        session_idle_s: a session with no request in flight (an open event
            stream does not count) for this long is closed.
        max_sessions: at most this many sessions are open; opening one more
            (an ``initialize``) closes the session idle the longest once the
            new one is open (none idle: refused with 503).
        max_sessions_per_principal: at most this many of them belong to one
            principal (a bearer token, an OAuth subject; without auth every
            local client is one principal); opening one more closes that
            principal's session idle the longest (none idle: refused with
            503), never another's, so one principal cannot take them all.
        body_timeout_s: a request body not complete this many seconds after
            its headers is refused with 408 (nothing is held for the request
            before its body is in).

    Raises:
        ConfigurationError: an option of the wrong type or out of range (named
            in the message, with the value).
        GatewayConfigurationError: a non-loopback ``host`` without ``auth``.
    """

    host: str = attrs.field(default="127.0.0.1", validator=string())
    port: int = attrs.field(default=0, validator=integer(minimum=0, maximum=65535))
    path: str = attrs.field(default="/mcp", validator=_PATH)
    auth: BearerAuth | OAuthResourceServer | None = attrs.field(
        default=None, validator=optional(instance_of(BearerAuth, OAuthResourceServer))
    )
    allowed_origins: tuple[str, ...] = attrs.field(
        default=(), converter=_as_tuple, validator=sequence_of(_ORIGIN)
    )
    max_request_bytes: int = attrs.field(
        default=DEFAULT_MAX_REQUEST_BYTES,
        validator=integer(minimum=1024, maximum=_HARD_MAX_REQUEST_BYTES),
    )
    stateless: bool = attrs.field(default=False, validator=boolean())
    session_idle_s: float = attrs.field(
        default=1800.0, validator=number(minimum=1.0, maximum=_MAX_IDLE_S)
    )
    max_sessions: int = attrs.field(default=1000, validator=integer(minimum=1, maximum=100_000))
    max_sessions_per_principal: int = attrs.field(
        default=100, validator=integer(minimum=1, maximum=100_000)
    )
    body_timeout_s: float = attrs.field(default=30.0, validator=number(minimum=0.1, maximum=3600.0))

    def __attrs_post_init__(self) -> None:
        if not is_loopback(self.host) and self.auth is None:
            raise GatewayConfigurationError(
                f"HttpOptions.host: refusing to serve on {self.host!r} without auth: a "
                "non-loopback address needs bearer tokens (BearerAuth / --token-file / "
                "PRISM_GATEWAY_TOKEN)",
                option="HttpOptions.host",
                value=self.host,
            )


_LOOPBACK_ORIGINS = ("http://127.0.0.1", "http://localhost", "http://[::1]")


def _origin_allowed(origin: str, extra: tuple[str, ...]) -> bool:
    for allowed in (*(f"{o}:*" for o in _LOOPBACK_ORIGINS), *_LOOPBACK_ORIGINS, *extra):
        if allowed.endswith(":*"):
            base = allowed[:-2]
            if origin.startswith(base + ":") and origin[len(base) + 1 :].isdigit():
                return True
        elif origin == allowed:
            return True
    return False


# Headers the guard and the SDK both read: each must come once, or the two could read
# different copies (a session the guard checked and another the SDK serves).
_ONCE = {
    b"mcp-session-id": "Mcp-Session-Id",
    b"authorization": "Authorization",
    b"mcp-protocol-version": "MCP-Protocol-Version",
}


@attrs.frozen
class _Refusal:
    """A request the guard refuses: the status and message it is answered with."""

    status: int
    message: str
    extra: list[tuple[bytes, bytes]] | None = None

    async def send(self, send: Send) -> None:
        await _refuse(send, self.status, self.message, self.extra)


def _headers(scope: Scope) -> dict[bytes, bytes] | _Refusal:
    """The request's headers by lower-case name (a binding header sent twice: refused)."""
    headers: dict[bytes, bytes] = {}
    for key, value in scope.get("headers", ()):
        name = key.lower()
        if name in headers and name in _ONCE:
            return _Refusal(400, f"the {_ONCE[name]} header is sent twice")
        headers.setdefault(name, value)
    return headers


def _as_websocket_response(send: Send) -> Send:
    """``send`` for an HTTP response that refuses a WebSocket handshake (ASGI's extension)."""

    async def respond(message: Message) -> None:
        await send({**message, "type": "websocket." + message["type"]})

    return respond


@attrs.frozen
class _Peek:
    """What the guard needs of a request body (the SDK parses it again, alike)."""

    method: str | None = None
    call: bool = False  # a tools/call request: cancelled when its connection drops
    # A tools/call request's arguments as the guard parsed them, with what the
    # body's text proves of them: the gateway builds the call from these.
    arguments: ParsedJson | None = None


def _peek(body: bytes) -> _Peek | tuple[int, str]:
    """The JSON-RPC method of a POST body; or the error it is refused with."""
    try:
        parsed = ParsedJson.parse(body)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
        return -32700, "Parse error: the body is not JSON (or is nested too deep)"
    message = parsed.value
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return _Peek()  # a response, or not a JSON-RPC message (the SDK says which)
    method = message["method"]
    if "id" not in message:
        return _Peek(method)  # a notification
    request_id = message["id"]
    if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
        # The SDK would take it for a notification: run nothing and answer nothing.
        return -32600, "Invalid Request: a request id must be a string or an integer"
    if method != "tools/call":
        return _Peek(method)
    params = parsed.member("params")
    arguments = None if params is None else params.member("arguments")
    return _Peek(method, call=True, arguments=arguments)


def _without(scope: Scope, header: bytes) -> Scope:
    inner = dict(scope)
    inner["headers"] = [(k, v) for k, v in scope.get("headers", ()) if k.lower() != header]
    return inner


class _Guard:
    """ASGI middleware in front of the SDK's app: headers, Origin, auth, session, body.

    The session id it checked, the principal and the call's cancel key go to
    the gateway in the scope (``prism.session``, ``prism.principal``,
    ``prism.call``). It also watches the connection of each ``tools/call``:
    when the client drops it before the result, the call is cancelled (the
    gateway keeps no event store, so nobody could ever read that result).
    """

    def __init__(
        self, app: ASGIApp, options: HttpOptions, gateway: Gateway, manager: object = None
    ) -> None:
        self.app = app
        self.options = options
        self.gateway = gateway
        self.sessions: SessionTable | None = None
        if not options.stateless:
            self.sessions = SessionTable(
                idle_s=options.session_idle_s,
                limit=options.max_sessions,
                per_principal=options.max_sessions_per_principal,
                ledger=gateway.ledger,
                closer=_session_closer(manager),
                on_end=gateway.session_ended,
            )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":  # runs until the server stops
            return await self.app(scope, receive, send)
        if kind == "websocket":
            return await self._websocket(scope, receive, send)
        if kind != "http":  # no other kind of request is served: the SDK never sees one
            _log.warning("refused an ASGI %r request: not served", kind)
            return None
        headers = _headers(scope)
        if isinstance(headers, _Refusal):
            return await headers.send(send)
        admitted = await self._admit(headers)
        if isinstance(admitted, _Refusal):
            return await admitted.send(send)
        if admitted is None:
            # OAuth: the SDK answers (401 pointing at the metadata, or the metadata itself)
            # without the token: no second verification can let it in.
            return await self.app(_without(scope, b"authorization"), receive, send)
        identity, principal = admitted
        session = headers.get(b"mcp-session-id")
        sessions = self.sessions
        session_id = session.decode("latin-1") if session is not None else None
        if sessions is not None and session_id is not None:
            owner = sessions.owner(session_id)
            if owner is None:
                return await _refuse(send, 404, "Session not found", code=-32001)
            if owner != principal:
                sessions.refused(session_id, principal, owner)
                return await _refuse(send, 404, "Session not found", code=-32001)
        await self._serve(scope, receive, send, headers, identity, principal, session_id)

    async def _admit(self, headers: dict[bytes, bytes]) -> tuple[str, str] | _Refusal | None:
        """The request's identity and principal after the Origin and auth checks.

        Or the refusal; ``None``: an OAuth token that is missing or not
        verified (the SDK's app answers it, pointing at the metadata).
        """
        origin = headers.get(b"origin")
        if origin is not None and not _origin_allowed(
            origin.decode("latin-1"), self.options.allowed_origins
        ):
            # (hypercorn may end this task as soon as the refusal is sent.)
            return _Refusal(403, f"Origin {origin.decode('latin-1')!r} is not allowed")
        identity = "anonymous"
        if isinstance(self.options.auth, BearerAuth):
            found = self.options.auth.identify(headers.get(b"authorization"))
            if found is None:
                return _Refusal(
                    401,
                    "missing or wrong bearer token",
                    extra=[(b"www-authenticate", b'Bearer realm="prism"')],
                )
            identity = found
        principal = identity
        if isinstance(self.options.auth, OAuthResourceServer):
            verified = await self._oauth(self.options.auth, headers)
            if verified is None:
                return None
            principal = verified
        return identity, principal

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse a WebSocket handshake: the MCP endpoint serves none.

        It passes the same checks as any request first (binding headers,
        Origin, auth), so it is refused as they would refuse it; one that
        passes is refused with 400 and recorded in the ledger, with its
        principal. The SDK's app never sees it.
        """
        await receive()  # websocket.connect
        refusal = _headers(scope)
        if not isinstance(refusal, _Refusal):
            admitted = await self._admit(refusal)
            if isinstance(admitted, _Refusal):
                refusal = admitted
            elif admitted is None:  # an OAuth token missing or not verified
                challenge = _oauth_challenge(self.options)
                refusal = _Refusal(401, "missing or unverified access token", extra=[challenge])
            else:
                principal = admitted[1]
                path = str(scope.get("path", ""))
                _log.warning("refused a WebSocket request of %s to %r", principal, path[:200])
                record_session_event(
                    self.gateway.ledger,
                    "-",
                    principal,
                    "refused",
                    reason="a WebSocket request: the gateway serves MCP over Streamable HTTP only",
                )
                refusal = _Refusal(
                    400, "WebSocket is not served here: MCP goes over Streamable HTTP (POST)"
                )
        if "websocket.http.response" in (scope.get("extensions") or {}):
            return await refusal.send(_as_websocket_response(send))
        # A server without the denial-response extension answers this close with 403.
        await send({"type": "websocket.close", "code": 1008})

    async def _oauth(self, auth: OAuthResourceServer, headers: dict[bytes, bytes]) -> str | None:
        """The principal of the token (``None``: refused; a verifier failure is recorded)."""
        try:
            return await _oauth_principal(auth, headers.get(b"authorization"))
        except Exception as exc:
            said = describe_exception(exc)
            _log.warning("the OAuth token verifier failed; request refused: %s", said)
            session = headers.get(b"mcp-session-id")
            record_session_event(
                self.gateway.ledger,
                session.decode("latin-1") if session is not None else "-",
                "oauth:unverified",
                "refused",
                reason=f"the token verifier failed: {said}",
            )
            return None

    async def _serve(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        headers: dict[bytes, bytes],
        identity: str,
        principal: str,
        session_id: str | None,
    ) -> None:
        limit = self.options.max_request_bytes
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                too_big = int(declared) > limit
            except ValueError:
                return await _refuse(send, 400, "bad Content-Length")
            if too_big:
                return await _refuse(send, 413, f"request body larger than {limit} bytes")
        # The whole body, under a deadline, before anything is held for the request.
        body = bytearray()
        more = scope.get("method") in ("POST", "PUT", "PATCH")
        with trio.move_on_after(self.options.body_timeout_s):
            while more:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                body.extend(message.get("body", b""))
                if len(body) > limit:
                    return await _refuse(send, 413, f"request body larger than {limit} bytes")
                more = message.get("more_body", False)
        if more:
            return await _refuse(
                send,
                408,
                f"the request body did not arrive within {self.options.body_timeout_s:g} s",
            )
        raw = bytes(body)  # one copy, priced, peeked at and passed on
        peek = _Peek()
        if scope.get("method") == "POST":
            # Priced on its bytes before anything parses it: 1 MB of '[]' would take
            # 37 MB and a second of the event loop to build, whatever is refused later.
            refusal = await mcp_message_refusal(raw, sender="the client")
            if refusal is not None:
                return await _refuse(send, 413, refusal)
            seen = _peek(raw)
            if isinstance(seen, tuple):
                return await _refuse(send, 400, seen[1], code=seen[0])
            peek = seen
        sessions = self.sessions
        # Only an initialize can open a session, so only it may take (or make) room for one.
        opening = sessions is not None and session_id is None and peek.method == "initialize"
        room: Any = sessions.room(principal) if opening and sessions is not None else _no_room()
        with room as place:
            if isinstance(place, str):
                return await _refuse(send, 503, place, code=-32603)
            await self._pass(
                scope, receive, send, raw, identity, principal, session_id, peek, place
            )

    async def _pass(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        body: bytes,
        identity: str,
        principal: str,
        session_id: str | None,
        peek: _Peek,
        place: Place | None,
    ) -> None:
        """Hand the checked request to the SDK's app, and watch its connection."""
        sessions = self.sessions
        inner = dict(scope)
        inner["prism.identity"] = identity
        inner["prism.principal"] = principal
        inner["prism.session"] = session_id if sessions is not None else None
        call_key = object() if peek.call else None
        inner["prism.call"] = call_key
        inner["prism.arguments"] = peek.arguments
        if any(key.lower() == b"last-event-id" for key, _ in scope.get("headers", ())):
            # The gateway keeps no event store, so there is nothing to resume; the SDK
            # (mcp 2.3) would then answer a resuming GET with nothing at all (a 500).
            inner["headers"] = _without(scope, b"last-event-id")["headers"]
        gone = trio.Event()
        replayed = False

        async def replay() -> Message:
            # The body once; then (we alone read the client's side) wait for it to go.
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()
            if call_key is not None:
                self.gateway.client_gone(call_key)

        respond = send
        release: Any = None
        if sessions is not None and place is not None:
            respond = _opening(send, sessions, principal, place)
        if sessions is not None and session_id is not None:
            # Busy until its response is complete (the app may stay on, watching the connection).
            release = sessions.begin(session_id, stream=scope.get("method") == "GET")
            respond = _released_at_end(send, release)
        started = False
        inner_send = respond

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await inner_send(message)

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch)
                await self.app(inner, replay, tracked)
                nursery.cancel_scope.cancel()
            if not started:  # the app answered nothing: say so, rather than the server's 500
                await _refuse(
                    respond, 400, "the request was not answered (not a valid MCP request)"
                )
        finally:
            if release is not None:
                release()
        if sessions is not None and session_id is not None and scope.get("method") == "DELETE":
            sessions.ended(session_id)


@contextlib.contextmanager
def _no_room() -> Iterator[None]:
    yield None


def _released_at_end(send: Send, release: Any) -> Send:
    """``send``, calling ``release`` as the response's last body part goes out."""

    async def respond(message: Message) -> None:
        # Released before the last part is sent: sending it may wait on the connection.
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            release()
        await send(message)

    return respond


def _opening(send: Send, sessions: SessionTable, principal: str, place: Place) -> Send:
    """``send``, noting the session a response opens (its ``Mcp-Session-Id``) as ``principal``'s."""

    async def respond(message: Message) -> None:
        if message["type"] == "http.response.start" and message.get("status", 500) < 400:
            for key, value in message.get("headers", ()):
                if key.lower() == b"mcp-session-id":
                    sessions.opened(bytes(value).decode("latin-1"), principal, place)
        await send(message)

    return respond


def _oauth_challenge(options: HttpOptions) -> tuple[bytes, bytes]:
    """The ``WWW-Authenticate`` header of a refused OAuth request (pointing at the metadata)."""
    from mcp.server.auth.routes import build_resource_metadata_url

    auth = options.auth
    assert isinstance(auth, OAuthResourceServer)
    metadata = build_resource_metadata_url(auth.resource_server_url)  # type: ignore[arg-type]
    value = f'Bearer error="invalid_token", resource_metadata="{metadata}"'
    return b"www-authenticate", value.encode("latin-1", "replace")


async def _oauth_principal(auth: OAuthResourceServer, header: bytes | None) -> str | None:
    """Whose token this is (``oauth:<client>|<issuer>|<subject>``), or ``None`` if refused."""
    if header is None or header[:7].lower() != b"bearer ":
        return None
    try:
        text = header[7:].strip().decode("utf-8")
    except UnicodeDecodeError:
        return None
    # A verifier that raises is the caller's to handle (it is refused, never let through).
    token = await auth.verifier.verify_token(text)
    client = getattr(token, "client_id", None)
    if not isinstance(client, str):
        return None
    subject = getattr(token, "subject", None)
    issuer = (getattr(token, "claims", None) or {}).get("iss")
    parts = [client, *(str(p) for p in (issuer, subject) if p)]
    return "oauth:" + "|".join(parts)


def _session_closer(manager: object) -> Any:
    """Ends a session at the SDK's session manager (its transport and server task)."""
    if manager is None:
        return None

    def close(session_id: str) -> None:
        # mcp<3 keeps the open sessions and their task group on the manager, with no
        # public way to end one from the server side; a missing attribute ends nothing
        # here (the guard refuses the session anyway, and the SDK's idle timer reaps it).
        instances = getattr(manager, "_server_instances", None)
        group = getattr(manager, "_task_group", None)
        discard = getattr(manager, "_discard_session", None)
        transport = instances.get(session_id) if isinstance(instances, dict) else None
        if transport is not None and group is not None and discard is not None:
            group.start_soon(discard, session_id, transport)

    return close


async def _refuse(
    send: Send,
    status: int,
    message: str,
    extra: list[tuple[bytes, bytes]] | None = None,
    *,
    code: int = -32600,
) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    ).encode("utf-8")
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode("ascii")),
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _check_serving(owner: str, gateway: object, options: object) -> None:
    instance_of(Gateway, description="a Gateway (from open_gateway)").check(
        owner, "gateway", gateway
    )
    optional(instance_of(HttpOptions)).check(owner, "options", options)


def build_http_app(gateway: Gateway, options: HttpOptions) -> ASGIApp:
    """The ASGI app :func:`serve_http` runs (for hosting it in another ASGI server).

    Raises:
        ConfigurationError: ``gateway`` or ``options`` is of the wrong type.
    """
    _check_serving("build_http_app", gateway, options)
    from mcp.server.transport_security import TransportSecuritySettings

    host = options.host if ":" not in options.host else f"[{options.host.strip('[]')}]"
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=is_loopback(options.host),
        allowed_hosts=[f"{host}:*", "127.0.0.1:*", "localhost:*", "[::1]:*", host],
        allowed_origins=[
            *(f"{o}:*" for o in _LOOPBACK_ORIGINS),
            *_LOOPBACK_ORIGINS,
            *options.allowed_origins,
        ],
    )
    oauth: dict[str, Any] = {}
    if isinstance(options.auth, OAuthResourceServer):
        from mcp.server.auth.settings import AuthSettings

        oauth = {
            "auth": AuthSettings(
                issuer_url=options.auth.issuer_url,  # type: ignore[arg-type]
                resource_server_url=options.auth.resource_server_url,  # type: ignore[arg-type]
                required_scopes=list(options.auth.required_scopes) or None,
                validate_token_resource=True,
            ),
            "token_verifier": options.auth.verifier,
        }
    app = gateway.server.streamable_http_app(
        streamable_http_path=options.path,
        stateless_http=options.stateless,
        max_request_body_size=options.max_request_bytes,
        session_idle_timeout=options.session_idle_s,
        max_sessions=options.max_sessions + _SDK_SESSION_SLACK,
        transport_security=security,
        host=options.host,
        **oauth,
    )
    return _Guard(app, options, gateway, getattr(gateway.server, "_session_manager", None))


async def serve_http(
    gateway: Gateway,
    options: HttpOptions | None = None,
    *,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``gateway`` over MCP Streamable HTTP until cancelled.

    Use with ``nursery.start``: it reports the endpoint URL
    (``http://127.0.0.1:PORT/mcp``) once the socket listens. Each request
    passes the guard first: an ``Origin`` that is neither loopback nor
    allowed gets 403, a missing or wrong bearer token 401, a body over
    ``max_request_bytes`` 413.

    Cancellation: stops listening and closes every session.

    Raises:
        ConfigurationError: ``gateway`` or ``options`` is of the wrong type.
        GatewayError: the address could not be bound (or the socket failed).
    """
    _check_serving("serve_http", gateway, options)
    from hypercorn.config import Config
    from hypercorn.trio import serve

    options = options or HttpOptions()
    app = build_http_app(gateway, options)
    config = Config()
    host = options.host if ":" not in options.host else f"[{options.host.strip('[]')}]"
    config.accesslog = None
    config.errorlog = logging.getLogger("prism.gateway.http")
    config.graceful_timeout = 1.0

    async def run(task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
        await serve(app, config, task_status=task_status)  # type: ignore[arg-type]

    try:
        # Bound here, not by hypercorn: its own bind leaves the socket open when it fails.
        config.bind = [f"fd://{_listening_fd(options.host.strip('[]'), options.port)}"]
        async with trio.open_nursery() as nursery:
            binds: list[str] = await nursery.start(run)
            if isinstance(app, _Guard) and app.sessions is not None:
                nursery.start_soon(_sweep, app.sessions)
            task_status.started(f"{binds[0]}{options.path}")
    except* OSError as group:  # the bind error, inside hypercorn's and our nurseries
        reason: BaseException = group
        while isinstance(reason, BaseExceptionGroup):
            reason = reason.exceptions[0]
        raise GatewayError(f"cannot serve on {host}:{options.port}: {reason}") from None


async def _sweep(sessions: SessionTable) -> None:
    """Close idle sessions now and then (a request also closes those it finds expired)."""
    period = min(max(sessions.idle_s / 4, 1.0), 60.0)
    try:
        while True:
            await trio.sleep(period)
            sessions.sweep()
    finally:
        sessions.close_all()


def _listening_fd(host: str, port: int) -> int:
    """A TCP socket bound to ``host:port``, as a file descriptor hypercorn takes over."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock.detach()


async def serve_stdio(
    gateway: Gateway,
    *,
    stdin: Any = None,
    stdout: Any = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    read_ahead: bytes = b"",
    answered: bytes | None = None,
) -> None:
    """Serve ``gateway`` to one MCP client over this process's stdin and stdout.

    Returns when the client closes stdin. While serving, fd 0 reads the null
    device and fd 1 writes to stderr, so a child's stray output never corrupts
    the wire; both are restored afterwards. The pipe is read and written in
    the event loop (no worker thread per message). A line that is not a
    JSON-RPC message, or is longer than ``max_message_bytes`` (16 MiB by
    default), is answered with a parse error (``-32700``) and skipped.
    ``stdin``/``stdout`` (anyio text files) replace the process's streams and
    are served by the SDK's own stdio transport instead.

    A process that answered the client's first requests before the gateway
    was ready (as ``prism serve`` does with ``initialize`` and ``tools/list``,
    to answer at once) passes what it read from stdin as ``read_ahead``
    (served first, those requests included) and the answer lines it wrote as
    ``answered``: the gateway then serves those requests as usual (its
    session is the same) but writes no second answer to them. When its own
    answer to such a ``tools/list`` differs (the tools changed meanwhile), it
    writes ``notifications/tools/list_changed`` instead, so the client lists
    again.

    Cancellation: stops serving; calls in flight are cancelled.

    Raises:
        ConfigurationError: ``gateway`` is not a Gateway, or ``max_message_bytes``
            is not an int of at least 1024.
        GatewayError: another ``serve_stdio`` is serving this process's stdin
            and stdout.
    """
    _check_serving("serve_stdio", gateway, None)
    _MESSAGE_BYTES.check("serve_stdio", "max_message_bytes", max_message_bytes)
    instance_of(bytes).check("serve_stdio", "read_ahead", read_ahead)
    optional(instance_of(bytes)).check("serve_stdio", "answered", answered)
    if (read_ahead or answered is not None) and (stdin is not None or stdout is not None):
        raise GatewayConfigurationError(
            "serve_stdio: read_ahead and answered are for this process's stdin and stdout, "
            "not for stdin= and stdout=",
            option="serve_stdio.read_ahead",
            value="given with stdin or stdout",
        )
    if stdin is not None or stdout is not None:
        from mcp.server.stdio import stdio_server

        async with stdio_server(stdin, stdout) as (read, write):
            await gateway.server.run(read, write, gateway.initialization_options())
        return
    fast = StdioFastPath(gateway.server, gateway._on_call_tool, gateway._begin_inline)
    token = current_link.set(fast)  # the SDK's tasks for this connection see it
    try:
        async with stdio_streams(
            max_message_bytes, fast, read_ahead=read_ahead, answered=answered
        ) as (read, write):
            await gateway.server.run(read, write, gateway.initialization_options())
    finally:
        current_link.reset(token)
