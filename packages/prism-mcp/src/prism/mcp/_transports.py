"""How to reach an MCP server: a subprocess over stdio, or Streamable HTTP."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias
from urllib.parse import urlsplit

import attrs
import httpx2

from prism.core import ConfigurationError

__all__ = ["McpTransport", "StdioTransport", "StreamableHttpTransport"]


def _command(_instance: object, _attribute: object, value: Any) -> None:
    if not isinstance(value, str) or not value or "\x00" in value:
        raise ConfigurationError(
            f"StdioTransport.command must be a non-empty string without NUL, got {value!r}"
        )


def _args(value: Sequence[str]) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)):
        raise ConfigurationError(
            f"StdioTransport.args must be a sequence of strings, not the string {value!r}"
        )
    items = tuple(value)
    for item in items:
        if not isinstance(item, str) or "\x00" in item:
            raise ConfigurationError(
                f"StdioTransport.args must hold strings without NUL, got {item!r}"
            )
    return items


def _str_map(owner: str, value: Mapping[str, str] | None) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"{owner} must be a mapping of strings, got {value!r}")
    out: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str) or not key:
            raise ConfigurationError(
                f"{owner} must map non-empty strings to strings, got {key!r}: {item!r}"
            )
        if "\x00" in key or "\x00" in item or "\n" in key or "\r" in key:
            raise ConfigurationError(f"{owner} has a control character in {key!r}")
        out[key] = item
    return out


def _env(value: Mapping[str, str] | None) -> dict[str, str] | None:
    return _str_map("StdioTransport.env", value)


def _passthrough(value: Sequence[str]) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)):
        raise ConfigurationError(
            f"StdioTransport.env_passthrough must be a sequence of names or patterns, "
            f"not the string {value!r}"
        )
    items = tuple(value)
    for item in items:
        if not isinstance(item, str) or not item or "\x00" in item or "=" in item:
            raise ConfigurationError(
                "StdioTransport.env_passthrough must hold non-empty names or patterns "
                f"without NUL or '=', got {item!r}"
            )
    return items


def _cwd(_instance: object, _attribute: object, value: Any) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise ConfigurationError(f"StdioTransport.cwd must be a non-empty string, got {value!r}")


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
    :func:`prism.core.terminate_process_tree`).

    Attributes:
        command: the executable (looked up on ``PATH`` when not a path).
        args: its arguments.
        env: extra environment variables for the server.
        cwd: its working directory (the host's when ``None``).
        env_passthrough: host variables to pass on when set: exact names
            (``"HTTPS_PROXY"``) or ``fnmatch`` patterns (``"AWS_*"``),
            case-sensitive. ``env`` wins over a passed-through value.
    """

    command: str = attrs.field(validator=_command)
    args: tuple[str, ...] = attrs.field(default=(), converter=_args)
    env: Mapping[str, str] | None = attrs.field(default=None, converter=_env)
    cwd: str | None = attrs.field(default=None, validator=_cwd)
    env_passthrough: tuple[str, ...] = attrs.field(default=(), converter=_passthrough)


def _url(_instance: object, _attribute: object, value: Any) -> None:
    if not isinstance(value, str):
        raise ConfigurationError(f"StreamableHttpTransport.url must be a string, got {value!r}")
    try:
        parts = urlsplit(value)
    except ValueError as exc:
        raise ConfigurationError(f"StreamableHttpTransport.url is not a URL: {value!r}") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"StreamableHttpTransport.url must be an http:// or https:// URL, got {value!r}"
        )


def _headers(value: Mapping[str, str]) -> dict[str, str]:
    converted = _str_map("StreamableHttpTransport.headers", value)
    return {} if converted is None else converted


def _auth(_instance: object, _attribute: object, value: Any) -> None:
    if value is not None and not isinstance(value, httpx2.Auth):
        raise ConfigurationError(
            "StreamableHttpTransport.auth must be an httpx2.Auth (for example the SDK's "
            f"mcp.client.auth.OAuthClientProvider) or None, got {value!r}"
        )


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

    url: str = attrs.field(validator=_url)
    headers: Mapping[str, str] = attrs.field(factory=dict, converter=_headers, repr=False)
    auth: httpx2.Auth | None = attrs.field(default=None, validator=_auth, repr=False, eq=False)


McpTransport: TypeAlias = StdioTransport | StreamableHttpTransport
