"""A stdio MCP server whose one tool starts a process that leaves the server's session.

Usage: ``python mcp_setsid_server.py``. The tool ``spawn_escapee`` starts a
child that calls ``setsid`` (its own session and process group) and returns
its PID: the host's grandchild, out of reach of a process-group kill and
re-parented away from the server once the server exits.
"""

from __future__ import annotations

import subprocess
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("prism-setsid", version="1.0.0")


@server.tool()
def spawn_escapee() -> int:
    """Start a long-lived child in a new session; return its pid."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return child.pid


if __name__ == "__main__":
    server.run()
