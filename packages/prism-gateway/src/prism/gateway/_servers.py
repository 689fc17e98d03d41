"""Downstream MCP servers the gateway starts itself, in the background."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs
import trio

from prism.core import ConfigurationError
from prism.core.options import boolean, instance_of, string
from prism.mcp import StdioTransport, StreamableHttpTransport

__all__ = ["DownstreamServer", "ServerState"]

# open_mcp_tools arguments the gateway sets itself (the server's identity and
# the callbacks that forward its requests to the calling client).
_RESERVED = frozenset(
    {"server_id", "transport", "elicit", "sample", "roots", "on_log", "on_elicitation_complete"}
)


def _options(value: object) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ConfigurationError(
            "DownstreamServer.options must be a mapping of open_mcp_tools keyword arguments, "
            f"got {type(value).__name__}",
            option="DownstreamServer.options",
            value=value,
        )
    taken = sorted(_RESERVED.intersection(value))
    if taken:
        raise ConfigurationError(
            f"DownstreamServer.options may not set {', '.join(taken)}: the gateway sets them",
            option="DownstreamServer.options",
            value=taken,
        )
    return dict(value)


@attrs.frozen(kw_only=True)
class DownstreamServer:
    """An MCP server the gateway starts in the background and bridges.

    :func:`~prism.gateway.open_gateway` answers clients at once; each
    downstream server is started in parallel, and its tools are offered
    (with ``notifications/tools/list_changed``) as soon as it is up. A server
    that fails to start, or dies, is reported: its tools answer with an
    error naming the server and why, and every other tool keeps serving.

    Attributes:
        server_id: its tools are ``mcp:<server_id>:<tool>``.
        transport: how to reach it (``prism.mcp.StdioTransport`` or
            ``StreamableHttpTransport``).
        required: ``open_gateway`` waits for this server and raises
            :class:`~prism.gateway.GatewayError` when it does not start
            (fail fast), instead of serving without it.
        options: more keyword arguments for ``prism.mcp.open_mcp_tools``
            (timeouts, byte limits, pins); ``elicit``, ``sample``, ``roots``
            and ``on_log`` are the gateway's own (it forwards them to the
            calling client).

    Raises:
        ConfigurationError: an attribute of the wrong type, or ``options``
            naming one the gateway sets.
    """

    server_id: str = attrs.field(validator=string())
    transport: StdioTransport | StreamableHttpTransport = attrs.field(
        validator=instance_of(StdioTransport, StreamableHttpTransport)
    )
    required: bool = attrs.field(default=False, validator=boolean())
    options: Mapping[str, Any] = attrs.field(factory=dict, converter=_options)


@attrs.define(eq=False)
class ServerState:
    """Where one downstream server stands: starting, up, or failed (and why)."""

    server: DownstreamServer
    status: Literal["starting", "up", "failed"] = "starting"
    reason: str | None = None
    # Set once the server is up or has failed.
    ready: trio.Event = attrs.field(factory=trio.Event)
