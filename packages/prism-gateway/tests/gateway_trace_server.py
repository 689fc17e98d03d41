"""An MCP server (stdio) whose one tool answers with the ``traceparent`` its request carried."""

from __future__ import annotations

import sys

from mcp.server.mcpserver import Context, MCPServer


def build() -> MCPServer:
    server = MCPServer("gateway-trace", version="1.0.0", log_level="WARNING")

    @server.tool()
    def traceparent(ctx: Context) -> str:
        """The W3C traceparent of this request's params._meta, or "none"."""
        meta = ctx.request_context.meta or {}
        return str(meta.get("traceparent", "none"))

    return server


if __name__ == "__main__":
    build().run()
    sys.exit(0)
