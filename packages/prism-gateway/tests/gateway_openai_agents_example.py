"""An agent framework (the OpenAI Agents SDK) as the MCP host of a gateway.

The agent's MCP server is the gateway, over stdio (``MCPServerStdio`` starting
gateway_stdio_main.py) or over Streamable HTTP (``MCPServerStreamableHttp`` on
a URL). The model is a local fake implementing the SDK's ``Model`` interface
(no network, tracing off): its first turn checks that the gateway's tools were
offered and calls ``read``; its second calls ``shell`` with a command the
gateway's policy denies; its third answers with what both calls returned.
Prints that answer. Runs on asyncio through ``anyio.run`` (the Agents SDK is an
asyncio framework).

Usage: ``python gateway_openai_agents_example.py stdio WORKSPACE`` or
``python gateway_openai_agents_example.py http URL``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from agents import Agent, Model, ModelResponse, RunConfig, Runner, Usage, set_tracing_disabled
from agents.mcp import MCPServerStdio, MCPServerStreamableHttp
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

GATEWAY = Path(__file__).resolve().parent / "gateway_stdio_main.py"
CALLS = [("read", {"path": "notes.txt"}), ("shell", {"command": "sudo id"})]


def _text(output: object) -> str:
    """A tool output as text (the SDK hands MCP content back as a list of input parts)."""
    if isinstance(output, list):
        return "".join(str(part.get("text", "")) for part in output if isinstance(part, dict))
    return str(output)


class ScriptedModel(Model):
    """Calls the tools in ``CALLS`` one turn each, then answers with their outputs."""

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        **_: Any,
    ) -> ModelResponse:
        items = [] if isinstance(input, str) else [dict(item) for item in input]
        outputs = [_text(i["output"]) for i in items if i.get("type") == "function_call_output"]
        turn = len(outputs)
        if turn == 0:
            offered = sorted(tool.name for tool in tools)
            assert {"read", "shell", "mcp__fx__echo"} <= set(offered), offered
        if turn < len(CALLS):
            name, arguments = CALLS[turn]
            call = ResponseFunctionToolCall(
                type="function_call",
                id=f"fc_{turn}",
                call_id=f"call_{turn}",
                name=name,
                arguments=json.dumps(arguments),
            )
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        text = ResponseOutputText(type="output_text", text=" | ".join(outputs), annotations=[])
        message = ResponseOutputMessage(
            type="message", id="msg_0", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("this example does not stream")


def gateway_server(
    mode: str, target: str, fifo: str | None = None
) -> MCPServerStdio | MCPServerStreamableHttp:
    if mode == "stdio" and fifo:
        # A bridged server that never starts, and the SDK's default session timeout (5 s).
        return MCPServerStdio(
            params={"command": sys.executable, "args": [str(GATEWAY), target, "--gated", fifo]},
            name="prism",
        )
    if mode == "stdio":
        return MCPServerStdio(
            params={"command": sys.executable, "args": [str(GATEWAY), target]},
            name="prism",
            client_session_timeout_seconds=60,
        )
    return MCPServerStreamableHttp(
        params={"url": target}, name="prism", client_session_timeout_seconds=60
    )


async def main(mode: str, target: str, fifo: str | None = None) -> None:
    set_tracing_disabled(True)
    async with gateway_server(mode, target, fifo) as prism:
        agent = Agent(name="assistant", model=ScriptedModel(), mcp_servers=[prism])
        result = await Runner.run(
            agent, "What do my notes say?", run_config=RunConfig(tracing_disabled=True)
        )
    print("ANSWER:", result.final_output)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
