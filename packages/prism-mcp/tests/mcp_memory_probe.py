"""Run by test_mcp_faults in a fresh process: how much does a flood raise peak RSS?

Usage: ``python mcp_memory_probe.py <max_result_bytes> <flood_bytes>``; prints one JSON line.
"""

from __future__ import annotations

import json
import resource
import sys
from pathlib import Path

import trio

from prism.core import ToolCall, ToolExecutionContext, ToolResult
from prism.mcp import McpToolBridge, StdioTransport, open_mcp_tools

SERVER = Path(__file__).resolve().parent / "mcp_fixture_server.py"


def peak_rss_bytes() -> int:
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


async def run(bridge: McpToolBridge, name: str, arguments: dict[str, object]) -> ToolResult:
    tool = next(tool for tool in bridge.tools if tool.name == f"mcp:mem:{name}")
    ctx = ToolExecutionContext(ToolCall(id="m", name=tool.name, arguments=arguments))
    return await tool.execute(arguments, ctx)  # type: ignore[arg-type]


async def main(limit: int, flood: int) -> None:
    transport = StdioTransport(sys.executable, [str(SERVER), "stdio"])
    async with open_mcp_tools(
        server_id="mem", transport=transport, max_result_bytes=limit, call_timeout_s=30
    ) as bridge:
        await run(bridge, "echo", {"text": "warm up"})
        before = peak_rss_bytes()
        refused = await run(bridge, "raw_flood", {"size": flood})
        after = peak_rss_bytes()
        again = await run(bridge, "echo", {"text": "recovered"})
    report = {
        "limit": limit,
        "flood": flood,
        "peak_before": before,
        "peak_after": after,
        "peak_growth_bytes": after - before,
        "refused": refused.is_error and refused.details.get("mcp_error") == "result_too_large",
        "recovered": again.joined_text == "recovered",
    }
    sys.stdout.write(json.dumps(report) + "\n")


if __name__ == "__main__":
    trio.run(main, int(sys.argv[1]), int(sys.argv[2]))
