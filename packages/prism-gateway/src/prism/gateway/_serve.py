"""Serving a gateway: over stdio, or over Streamable HTTP behind an auth/Origin/size guard."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ._errors import GatewayConfigurationError, GatewayError

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from ._gateway import Gateway

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


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an IP literal or ``localhost``) names this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _tokens(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, Sequence):
        raise GatewayConfigurationError(f"tokens must be a sequence of strings, got {value!r}")
    tokens = tuple(value)
    if not tokens:
        raise GatewayConfigurationError("tokens must hold at least one token")
    for token in tokens:
        if not isinstance(token, str) or len(token) < _MIN_TOKEN_CHARS or not token.isprintable():
            raise GatewayConfigurationError(
                f"each token must be a printable string of at least {_MIN_TOKEN_CHARS} "
                "characters (got one that is not)"
            )
    return tokens


@attrs.frozen(kw_only=True)
class BearerAuth:
    """Bearer-token authentication: ``Authorization: Bearer <token>``.

    Tokens are compared in constant time; a client's identity in the ledger is
    ``token:<first 8 hex digits of the token's SHA-256>``, never the token.

    Raises:
        GatewayConfigurationError: no token, or a token shorter than 16 characters.
    """

    tokens: tuple[str, ...] = attrs.field(converter=_tokens, repr=False)

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


def _url(_instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str) or not value.startswith(("https://", "http://")):
        raise GatewayConfigurationError(f"{attribute.name} must be an http(s) URL, got {value!r}")


def _scopes(value: Iterable[str]) -> tuple[str, ...]:
    scopes = (value,) if isinstance(value, str) else tuple(value)
    if not all(isinstance(scope, str) and scope for scope in scopes):
        raise GatewayConfigurationError(f"required_scopes must be non-empty strings: {scopes!r}")
    return scopes


@attrs.frozen(kw_only=True)
class OAuthResourceServer:
    """OAuth 2.1 resource-server auth: the gateway checks access tokens, never issues them.

    Each request's bearer token goes to ``verifier`` (the MCP SDK's
    ``TokenVerifier`` protocol: ``async verify_token(token) -> AccessToken | None``);
    only a token issued for ``resource_server_url`` (RFC 8707) with every
    ``required_scopes`` is let in. The Protected Resource Metadata (RFC 9728)
    naming ``issuer_url`` is served, and a refused request's
    ``WWW-Authenticate`` points at it. A caller's identity in the ledger is
    ``oauth:<client id>``.

    Attributes:
        verifier: checks a token (introspection, JWT validation...).
        issuer_url: the authorization server that issues the tokens.
        resource_server_url: this gateway's MCP endpoint URL, as clients reach it.
        required_scopes: scopes every token must carry.
    """

    verifier: Any
    issuer_url: str = attrs.field(validator=_url)
    resource_server_url: str = attrs.field(validator=_url)
    required_scopes: tuple[str, ...] = attrs.field(default=(), converter=_scopes)

    def __attrs_post_init__(self) -> None:
        if not callable(getattr(self.verifier, "verify_token", None)):
            raise GatewayConfigurationError(
                f"verifier must have an async verify_token(token) method, got {self.verifier!r}"
            )


def _max_bytes(_instance: object, _attribute: object, value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not (1024 <= value <= _HARD_MAX_REQUEST_BYTES)
    ):
        raise GatewayConfigurationError(
            f"max_request_bytes must be an int in 1024..{_HARD_MAX_REQUEST_BYTES}, got {value!r}"
        )


def _origins(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        value = (value,)
    origins = tuple(value)
    for origin in origins:
        if not isinstance(origin, str) or not origin.startswith(("http://", "https://")):
            raise GatewayConfigurationError(
                f"allowed_origins must hold http(s) origins, got {origin!r}"
            )
    return origins


def _port(_instance: object, _attribute: object, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
        raise GatewayConfigurationError(f"port must be an int in 0..65535, got {value!r}")


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
    """

    host: str = "127.0.0.1"
    port: int = attrs.field(default=0, validator=_port)
    path: str = "/mcp"
    auth: BearerAuth | OAuthResourceServer | None = None
    allowed_origins: tuple[str, ...] = attrs.field(default=(), converter=_origins)
    max_request_bytes: int = attrs.field(default=DEFAULT_MAX_REQUEST_BYTES, validator=_max_bytes)
    stateless: bool = False

    def __attrs_post_init__(self) -> None:
        if not is_loopback(self.host) and self.auth is None:
            raise GatewayConfigurationError(
                f"refusing to serve on {self.host!r} without auth: a non-loopback address "
                "needs bearer tokens (BearerAuth / --token-file / PRISM_GATEWAY_TOKEN)"
            )
        if not self.path.startswith("/"):
            raise GatewayConfigurationError(f"path must start with '/', got {self.path!r}")


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


class _Guard:
    """ASGI middleware in front of the SDK's app: Origin, auth, then body size."""

    def __init__(self, app: ASGIApp, options: HttpOptions) -> None:
        self.app = app
        self.options = options

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[bytes, bytes] = {}
        for key, value in scope.get("headers", ()):
            headers.setdefault(key.lower(), value)
        origin = headers.get(b"origin")
        if origin is not None and not _origin_allowed(
            origin.decode("latin-1"), self.options.allowed_origins
        ):
            await _refuse(send, 403, f"Origin {origin.decode('latin-1')!r} is not allowed")
            return
        identity = "anonymous"
        if isinstance(self.options.auth, BearerAuth):
            found = self.options.auth.identify(headers.get(b"authorization"))
            if found is None:
                await _refuse(
                    send,
                    401,
                    "missing or wrong bearer token",
                    extra=[(b"www-authenticate", b'Bearer realm="prism"')],
                )
                return
            identity = found
        limit = self.options.max_request_bytes
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                too_big = int(declared) > limit
            except ValueError:
                await _refuse(send, 400, "bad Content-Length")
                return
            if too_big:
                await _refuse(send, 413, f"request body larger than {limit} bytes")
                return
        body = bytearray()
        more = scope.get("method") in ("POST", "PUT", "PATCH")
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            body.extend(message.get("body", b""))
            if len(body) > limit:
                await _refuse(send, 413, f"request body larger than {limit} bytes")
                return
            more = message.get("more_body", False)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        inner = dict(scope)
        inner["prism.identity"] = identity
        await self.app(inner, replay, send)


async def _refuse(
    send: Send, status: int, message: str, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    ).encode("utf-8")
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode("ascii")),
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def build_http_app(gateway: Gateway, options: HttpOptions) -> ASGIApp:
    """The ASGI app :func:`serve_http` runs (for hosting it in another ASGI server)."""
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
        transport_security=security,
        host=options.host,
        **oauth,
    )
    return _Guard(app, options)


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
        GatewayError: the address could not be bound.
    """
    from hypercorn.config import Config
    from hypercorn.trio import serve

    options = options or HttpOptions()
    app = build_http_app(gateway, options)
    config = Config()
    host = options.host if ":" not in options.host else f"[{options.host.strip('[]')}]"
    config.bind = [f"{host}:{options.port}"]
    config.accesslog = None
    config.errorlog = _log
    config.graceful_timeout = 1.0

    async def run(task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
        await serve(app, config, task_status=task_status)  # type: ignore[arg-type]

    async with trio.open_nursery() as nursery:
        try:
            binds: list[str] = await nursery.start(run)
        except OSError as exc:
            raise GatewayError(f"cannot listen on {host}:{options.port}: {exc}") from exc
        task_status.started(f"{binds[0]}{options.path}")


async def serve_stdio(gateway: Gateway, *, stdin: Any = None, stdout: Any = None) -> None:
    """Serve ``gateway`` to one MCP client over this process's stdin and stdout.

    Returns when the client closes stdin. While serving, fd 0 and fd 1 are
    moved off the protocol pipe (by the SDK), so a child's stray output never
    corrupts the wire. ``stdin``/``stdout`` (anyio text files) replace them.

    Cancellation: stops serving; calls in flight are cancelled.
    """
    from mcp.server.stdio import stdio_server

    async with stdio_server(stdin, stdout) as (read, write):
        await gateway.server.run(read, write, gateway.initialization_options())
