"""How to reach an MCP server: a subprocess over stdio, or Streamable HTTP."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TypeAlias
from urllib.parse import urlsplit

import attrs
import httpx2

from prism.core import ConfigurationError
from prism.core.options import OptionCheck, instance_of, optional, sequence_of, string

__all__ = ["McpTransport", "StdioTransport", "StreamableHttpTransport"]


_NO_NUL = OptionCheck(
    "a non-empty string without NUL",
    lambda value: isinstance(value, str) and bool(value) and "\x00" not in value,
)
_ARG = OptionCheck(
    "a string without NUL", lambda value: isinstance(value, str) and "\x00" not in value
)
_PATTERN = OptionCheck(
    "a non-empty name or pattern without NUL or '='",
    lambda value: _NO_NUL.accepts(value) and "=" not in value,  # type: ignore[operator]
)
_ARGS = sequence_of(_ARG)
_PATTERNS = sequence_of(_PATTERN)


def _items(check: OptionCheck, owner: str, option: str, value: object) -> tuple[str, ...]:
    # Any iterable but a string is taken (a generator, say), checked as a tuple.
    if isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
        value = tuple(value)
    check.check(owner, option, value)
    return value  # type: ignore[return-value]


def _str_map(owner: str, option: str, value: Mapping[str, str] | None) -> dict[str, str] | None:
    # The message names the offending key, never a value: env values and headers
    # carry secrets (tokens, Authorization).
    if value is None:
        return None

    def refuse(what: str) -> ConfigurationError:
        return ConfigurationError(
            f"{owner}.{option} {what}", option=f"{owner}.{option}", value=value
        )

    if not isinstance(value, Mapping):
        raise refuse(f"must be a mapping of strings to strings, got {type(value).__name__}")
    out: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise refuse(f"must have non-empty string keys, got {key!r}")
        if not isinstance(item, str):
            raise refuse(f"must map {key!r} to a string, got {type(item).__name__}")
        if "\x00" in key or "\x00" in item or "\n" in key or "\r" in key:
            raise refuse(f"has a control character in {key!r} or its value")
        out[key] = item
    return out


def _args(value: Sequence[str]) -> tuple[str, ...]:
    return _items(_ARGS, "StdioTransport", "args", value)


def _env(value: Mapping[str, str] | None) -> dict[str, str] | None:
    return _str_map("StdioTransport", "env", value)


def _passthrough(value: Sequence[str]) -> tuple[str, ...]:
    return _items(_PATTERNS, "StdioTransport", "env_passthrough", value)


@attrs.frozen
class StdioTransport:
    """Launch an MCP server as a subprocess and talk to it over stdin/stdout.

    The server gets only the MCP SDK's safe default environment (``HOME``,
    ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM``, ``USER``), the host's TLS
    variables (``SSL_CERT_FILE``, ``SSL_CERT_DIR``, ``REQUESTS_CA_BUNDLE``)
    and the host variables ``env_passthrough`` names, plus ``env``; the host's
    other variables (tokens, keys) are never passed on; Prism adds only
    ``PRISM_PROCESS_TREE`` (a random marker). It runs in its own session, and
    the bridge terminates its whole process tree when it closes (see
    :func:`prism.core.process.terminate_process_tree`).

    Attributes:
        command: the executable (looked up on ``PATH`` when not a path).
        args: its arguments.
        env: extra environment variables for the server.
        cwd: its working directory (the host's when ``None``).
        env_passthrough: host variables to pass on when set: exact names
            (``"HTTPS_PROXY"``) or ``fnmatch`` patterns (``"AWS_*"``),
            case-sensitive. ``env`` wins over a passed-through value.
    """

    command: str = attrs.field(validator=_NO_NUL)
    args: tuple[str, ...] = attrs.field(default=(), converter=_args)
    env: Mapping[str, str] | None = attrs.field(default=None, converter=_env)
    cwd: str | None = attrs.field(default=None, validator=optional(string()))
    env_passthrough: tuple[str, ...] = attrs.field(default=(), converter=_passthrough)


def _is_http_url(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        parts = urlsplit(value)
        return parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        return False


def _headers(value: Mapping[str, str]) -> dict[str, str]:
    converted = _str_map("StreamableHttpTransport", "headers", value)
    return {} if converted is None else converted


@attrs.frozen
class StreamableHttpTransport:
    """Reach an MCP server over Streamable HTTP (the server's ``/mcp`` endpoint).

    Attributes:
        url: the endpoint, e.g. ``http://127.0.0.1:8000/mcp``.
        headers: sent with every request (for example an ``Authorization``
            header); never logged.
        auth: an ``httpx2.Auth`` applied to every request, typically the MCP
            SDK's ``mcp.client.auth.OAuthClientProvider`` (OAuth 2.1 with
            protected resource metadata); never logged.
    """

    url: str = attrs.field(validator=OptionCheck("an http:// or https:// URL", _is_http_url))
    headers: Mapping[str, str] = attrs.field(factory=dict, converter=_headers, repr=False)
    auth: httpx2.Auth | None = attrs.field(
        default=None,
        validator=optional(
            instance_of(
                httpx2.Auth,
                description="an httpx2.Auth (such as the SDK's "
                "mcp.client.auth.OAuthClientProvider)",
            )
        ),
        repr=False,
        eq=False,
    )


McpTransport: TypeAlias = StdioTransport | StreamableHttpTransport
