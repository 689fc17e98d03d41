"""A gateway over stdio for the tests: coding tools in ROOT, a local echo, the fixture bridged."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import gateway_prewarmed
import trio

from prism.coding.security import create_coding_approval_policy, create_contained_file_operations
from prism.coding.tools import create_coding_tools
from prism.core import (
    JsonObject,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    create_rule_permission_policy,
)
from prism.core.ledger import JsonlLedgerSink, RunLedger
from prism.gateway import (
    CODING_TOOL_HINTS,
    DownstreamServer,
    create_gateway_approver,
    open_gateway,
    serve_stdio,
)
from prism.mcp import StdioTransport, open_mcp_tools
from prism.validation.jsonschema import create_json_schema_tool_validator

FIXTURE = Path(__file__).resolve().parent / "gateway_fixture_server.py"
GATED = Path(__file__).resolve().parent / "gateway_gated_server.py"


async def _echo(arguments: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text(str(arguments["text"]))


# The fixture server's echo, in this process: what the gateway costs without a bridge hop.
LOCAL_ECHO = ToolDefinition(
    name="local_echo",
    execute=_echo,
    description="Echo the text back.",
    parameters={
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
        "additionalProperties": False,
    },
)


async def _served_by(_arguments: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    # The function the task answering this request started in: the gateway's own call
    # kernel, or the SDK's request machinery.
    code = trio.lowlevel.current_task().coro.cr_code
    return ToolResult.text(code.co_qualname)


# Which path answered the request (for the tests: each gate fired on the gateway's kernel).
SERVED_BY = ToolDefinition(name="served_by", execute=_served_by, description="Who answers.")


async def main(root: str, max_message_bytes: int, gated: str | None = None) -> None:
    policy = create_coding_approval_policy(
        roots=[root], approve=create_gateway_approver(), cache_approvals=False
    )
    tools = create_coding_tools(
        root, execution_policy=policy, file_operations=create_contained_file_operations([root])
    )
    # From the warm parent that started this gateway, if one did (gateway_prewarmed.py).
    transport = StdioTransport(*gateway_prewarmed.inherited_command(FIXTURE))
    ledger_path = os.environ.get("GATEWAY_TEST_LEDGER")
    async with (
        open_mcp_tools(
            server_id="fx", transport=transport, call_timeout_s=30, max_result_bytes=262_144
        ) as bridge,
        open_gateway(
            tools=[*tools, LOCAL_ECHO, SERVED_BY],
            bridges=[bridge],
            # A server that starts only when its FIFO says so (gateway_gated_server.py): the
            # gateway must answer its host meanwhile.
            servers=[
                DownstreamServer(
                    server_id="slow",
                    transport=StdioTransport(*gateway_prewarmed.inherited_command(GATED, gated)),
                )
            ]
            if gated
            else [],
            permission=create_rule_permission_policy(
                allow=["tool:*:execute"], deny=["tool:mcp:fx:forbidden:execute"]
            ),
            validator=create_json_schema_tool_validator(),
            hints=CODING_TOOL_HINTS,
            # GATEWAY_TEST_LEDGER: a JSONL file the calls are recorded in, for the tests to read.
            ledger=RunLedger(sinks=[JsonlLedgerSink(ledger_path)] if ledger_path else []),
        ) as gateway,
    ):
        await serve_stdio(gateway, max_message_bytes=max_message_bytes)


if __name__ == "__main__":
    # argv: ROOT [MAX_MESSAGE_BYTES] [--gated FIFO]
    args = sys.argv[1:]
    fifo = None
    if "--gated" in args:
        at = args.index("--gated")
        fifo = args[at + 1]
        del args[at : at + 2]
    trio.run(main, args[0], int(args[1]) if len(args) > 1 else 16 * 1024 * 1024, fifo)
