"""LangChain's MCP adapters as the host of ``prism serve`` (run with the host's own Python).

langchain-mcp-adapters runs on the MCP SDK 1.x, so it lives in an environment
of its own, as it would on a user's machine. It gets the gateway's tools (a
session per call, its default), reads a file and runs a command the policy
denies. Prints one JSON object: the tool names and what each call gave.

Usage: ``python cli_langchain_host.py stdio PRISM_PYTHON CONFIG`` or
``python cli_langchain_host.py http URL TOKEN``.
"""

import json
import sys

import anyio
from langchain_core.tools import ToolException

# Installed in the host's own environment only (it needs the MCP SDK 1.x).
from langchain_mcp_adapters.client import (  # type: ignore[import-not-found]
    MultiServerMCPClient,
)


async def main(mode: str, first: str, second: str) -> None:
    server: dict[str, object]
    if mode == "stdio":
        server = {
            "command": first,
            "args": ["-m", "prism.cli", "serve", second],
            "transport": "stdio",
        }
    else:
        server = {
            "url": first,
            "transport": "streamable_http",
            "headers": {"Authorization": f"Bearer {second}"},
        }
    client = MultiServerMCPClient({"prism": server})
    tools = {tool.name: tool for tool in await client.get_tools()}
    read = await tools["read"].ainvoke({"path": "notes.txt"})
    try:
        denied = await tools["shell"].ainvoke({"command": "sudo id"})
    except ToolException as exc:
        denied = f"ToolException: {exc}"
    print(json.dumps({"tools": sorted(tools), "read": str(read), "shell": str(denied)}))


anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3])  # the adapters are an asyncio library
