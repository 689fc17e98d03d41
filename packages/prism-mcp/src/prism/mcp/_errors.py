"""The error tree of ``prism.mcp``.

::

    PrismError (prism.core)
    ├── ConfigurationError (prism.core, ValueError)   a bad option, raised at construction
    └── McpBridgeError                                 the bridge could not reach or keep a server

Tool failures (timeouts, oversized results, a server that dies mid-call) are
never raised: the call gets an error :class:`~prism.core.ToolResult`.
:class:`McpBridgeError` is raised only by :func:`~prism.mcp.open_mcp_tools`
and :meth:`~prism.mcp.McpToolBridge.refresh`, always chained to the SDK
exception it translates.
"""

from __future__ import annotations

from mcp.shared.exceptions import MCPError
from prism.core import PrismError

__all__ = ["TELLING_ERRORS", "McpBridgeError"]

TELLING_ERRORS: tuple[type[BaseException], ...] = (MCPError, OSError)
"""The leaves of a failure worth naming first (see :func:`prism.core.text.describe_exception`)."""


class McpBridgeError(PrismError):
    """The bridge could not connect to, list, or keep talking to an MCP server.

    Attributes:
        server_id: the ``server_id`` given to :func:`~prism.mcp.open_mcp_tools`.
        reason: a short, model-safe description of what went wrong.
    """

    def __init__(self, server_id: str, reason: str) -> None:
        super().__init__(f"MCP server {server_id!r}: {reason}")
        self.server_id = server_id
        self.reason = reason
