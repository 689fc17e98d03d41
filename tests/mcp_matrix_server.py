"""A small MCP server for the cross-package tests: ``python tests/mcp_matrix_server.py NAME``.

Tools: ``search(query)`` (every instance has it: name collisions), ``big(kib)`` (an
oversized result), ``hang()`` (never answers), ``slow(steps)`` (progress), and
``grow()`` (adds a tool and announces that the tool list changed, on both protocol
eras). Runs under trio over stdio; it touches no files and no network.
"""

import sys

import trio
from mcp.server.mcpserver import Context, MCPServer


def build(name: str) -> MCPServer:
    server = MCPServer(f"matrix-{name}", version="0.0.1", log_level="WARNING")

    @server.tool(description="Echo the query, tagged with this server's name.")
    def search(query: str) -> str:
        return f"{name}: {query}"

    @server.tool(description="Return kib KiB of text.")
    def big(kib: int) -> str:
        return "x" * (kib * 1024)

    @server.tool(description="Never answer.")
    async def hang() -> str:
        await trio.sleep_forever()
        return "unreachable"

    @server.tool(description="Report progress once per step.")
    async def slow(ctx: Context, steps: int = 3, step_s: float = 0.05) -> str:
        for step in range(1, steps + 1):
            await trio.sleep(step_s)
            await ctx.report_progress(step, steps, f"step {step}")
        return f"{steps} steps"

    @server.tool(description="Add the tool 'fresh' and say the tool list changed.")
    async def grow(ctx: Context) -> str:
        def fresh() -> str:
            return "fresh"

        server.add_tool(fresh, name="fresh", description="Added at run time.")
        await ctx.session.send_tool_list_changed()
        await ctx.notify_tools_changed()
        return "grown"

    return server


if __name__ == "__main__":
    trio.run(build(sys.argv[1] if len(sys.argv) > 1 else "a").run_stdio_async)
