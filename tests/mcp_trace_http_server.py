"""An MCP server on Streamable HTTP whose tool answers with the trace headers it received.

Run as ``python mcp_trace_http_server.py``: it listens on 127.0.0.1 (a free
port) and prints its endpoint URL on the first line of stdout. The tool
``headers`` answers ``<traceparent header or none> <tracestate header or none>``.
"""

from __future__ import annotations

from functools import partial

import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from mcp.server.mcpserver import Context, MCPServer


def build() -> MCPServer:
    server = MCPServer("trace-http", version="1.0.0", log_level="WARNING")

    @server.tool()
    def headers(ctx: Context) -> str:
        """The trace headers of this HTTP request."""
        request = ctx.request_context.request
        seen = getattr(request, "headers", {})
        return f"{seen.get('traceparent', 'none')} {seen.get('tracestate', 'none')}"

    return server


async def main() -> None:
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    app = build().streamable_http_app()
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(partial(serve, app, config))  # type: ignore[arg-type]
        print(f"{binds[0]}/mcp", flush=True)


if __name__ == "__main__":
    trio.run(main)
