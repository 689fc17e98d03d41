"""An agent framework as the MCP host: pydantic-ai's agent calls the gateway's tools over stdio."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import trio

# A third-party host or framework process per test: scripts/test --hosts runs these.
pytestmark = pytest.mark.hosts

EXAMPLE = Path(__file__).resolve().parent / "gateway_pydantic_ai_example.py"


@pytest.mark.parametrize("slow_server", [False, True])
async def test_pydantic_ai_agent_reads_through_the_gateway(
    workspace: Path, tmp_path: Path, slow_server: bool
) -> None:
    """With a bridged server that never starts, too: the gateway answers at once."""
    extra = []
    if slow_server:
        fifo = tmp_path / "never.fifo"
        os.mkfifo(fifo)  # nobody writes it: the server never starts
        extra.append(str(fifo))
    with trio.fail_after(120):
        done = await trio.run_process(
            [sys.executable, str(EXAMPLE), str(workspace), *extra],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert "ANSWER: hello from the workspace" in out
