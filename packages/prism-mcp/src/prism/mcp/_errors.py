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

__all__ = ["McpBridgeError", "clip", "describe"]

_MAX_ERROR_CHARS = 2000


def clip(text: str, limit: int = _MAX_ERROR_CHARS) -> str:
    """``text`` cut to ``limit`` characters (servers are untrusted and may be verbose)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        found: list[BaseException] = []
        for inner in exc.exceptions:
            found.extend(_leaves(inner))
        return found
    return [exc]


def describe(exc: BaseException) -> str:
    """One line naming the most telling exception in ``exc`` (groups are searched)."""
    leaves = _leaves(exc)
    # The most telling leaf: an MCP error, then an OS error, then whatever came first.
    leaf: BaseException | None = next((e for e in leaves if isinstance(e, MCPError)), None)
    leaf = leaf or next((e for e in leaves if isinstance(e, OSError)), None) or leaves[0]
    text = str(leaf)
    return clip(f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__)


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
