"""A gateway over stdio for the tests: coding tools in ROOT, the fixture server bridged."""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from prism.coding.security import create_coding_approval_policy, create_contained_file_operations
from prism.coding.tools import create_coding_tools
from prism.core import RunLedger, create_rule_permission_policy
from prism.gateway import CODING_TOOL_HINTS, create_gateway_approver, open_gateway, serve_stdio
from prism.mcp import StdioTransport, open_mcp_tools

FIXTURE = Path(__file__).resolve().parent / "gateway_fixture_server.py"


async def main(root: str) -> None:
    policy = create_coding_approval_policy(
        roots=[root], approve=create_gateway_approver(), cache_approvals=False
    )
    tools = create_coding_tools(
        root, execution_policy=policy, file_operations=create_contained_file_operations([root])
    )
    transport = StdioTransport(sys.executable, [str(FIXTURE)])
    async with (
        open_mcp_tools(server_id="fx", transport=transport, call_timeout_s=30) as bridge,
        open_gateway(
            tools=tools,
            bridges=[bridge],
            permission=create_rule_permission_policy(allow=["tool:*:execute"]),
            hints=CODING_TOOL_HINTS,
            ledger=RunLedger(),
        ) as gateway,
    ):
        await serve_stdio(gateway)


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
