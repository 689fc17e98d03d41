"""An agent framework as the MCP host: an OpenAI Agents SDK agent calls the gateway's tools."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import trio

# A third-party host or framework process per test: scripts/test --hosts runs these.
pytestmark = pytest.mark.hosts

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager

    ServeFactory = Callable[..., AbstractAsyncContextManager[Any]]

EXAMPLE = Path(__file__).resolve().parent / "gateway_openai_agents_example.py"


async def _run_example(*args: str) -> str:
    with trio.fail_after(120):
        done = await trio.run_process(
            [sys.executable, str(EXAMPLE), *args],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return done.stdout.decode()


def _check(answer: str) -> None:
    # The read went through the gates and ran; the denied command came back as an error.
    assert "ANSWER: hello from the workspace" in answer
    assert "matches the deny rule 'sudo *'" in answer


async def test_openai_agents_sdk_agent_over_stdio(workspace: Path) -> None:
    _check(await _run_example("stdio", str(workspace)))


async def test_openai_agents_sdk_at_its_default_timeout_with_a_server_that_never_starts(
    workspace: Path, tmp_path: Path
) -> None:
    fifo = tmp_path / "never.fifo"
    os.mkfifo(fifo)  # nobody writes it: the bridged server never starts
    _check(await _run_example("stdio", str(workspace), str(fifo)))


async def test_openai_agents_sdk_agent_over_http(serve: ServeFactory) -> None:
    async with serve() as served:
        answer = await _run_example("http", served.url)
        ledger = served.gateway.ledger
        assert ledger is not None
        records = [(record.tool_name, record.status) for record in ledger.records]
    _check(answer)
    assert records == [("read", "ok"), ("shell", "error")]
