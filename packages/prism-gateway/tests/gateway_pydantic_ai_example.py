"""An agent framework (pydantic-ai) as the MCP host of a stdio gateway.

The model is pydantic-ai's ``FunctionModel`` (no network): its first turn checks
that the gateway's tools were offered and calls ``read``; its second turn
answers with what the tool returned. Prints that answer. Runs on asyncio
through ``anyio.run`` (pydantic-ai is an asyncio framework).

Usage: ``python gateway_pydantic_ai_example.py WORKSPACE [FIFO]``: with FIFO the
gateway also bridges a server that starts only when FIFO says so (never, here):
the toolset connects at pydantic-ai's default timeouts all the same.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
from fastmcp.client import Client
from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

GATEWAY = Path(__file__).resolve().parent / "gateway_stdio_main.py"


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returned = [
        part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    if not returned:
        offered = sorted(tool.name for tool in info.function_tools)
        assert "read" in offered, offered
        assert "mcp__fx__echo" in offered, offered
        return ModelResponse(parts=[ToolCallPart("read", {"path": "notes.txt"})])
    return ModelResponse(parts=[TextPart("; ".join(str(p.content) for p in returned))])


async def main(root: str, fifo: str | None = None) -> None:
    extra = ["--gated", fifo] if fifo else []
    transport = StdioTransport(command=sys.executable, args=[str(GATEWAY), root, *extra])
    toolset: MCPToolset[Any] = MCPToolset(Client(transport))  # its default timeouts
    agent = Agent(FunctionModel(model), toolsets=[toolset])
    async with agent:
        result = await agent.run("What do my notes say?")
    print("ANSWER:", result.output)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
