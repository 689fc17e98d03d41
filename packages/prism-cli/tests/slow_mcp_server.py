"""An MCP server with a tool that says it was called (on the FIFO named in argv), then hangs."""

import sys

import trio
from mcp.server.mcpserver import MCPServer


def build(fifo: str) -> MCPServer:
    server = MCPServer("slow", version="0.0.1", log_level="WARNING")

    @server.tool(description="Hangs until cancelled.")
    async def hang(text: str = "") -> str:
        with open(fifo, "w", encoding="utf-8") as out:  # noqa: ASYNC230 (a FIFO the test reads)
            out.write("hang called\n")
        await trio.sleep_forever()
        return "never"

    return server


if __name__ == "__main__":
    trio.run(build(sys.argv[1]).run_stdio_async)
