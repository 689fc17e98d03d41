"""Fixtures for prism-gateway: a real gateway (coding tools, a bridged server) on 127.0.0.1."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import attrs
import pytest
import trio

from prism.coding.security import create_coding_approval_policy, create_contained_file_operations
from prism.coding.tools import create_coding_tools
from prism.core import RunLedger, create_rule_permission_policy
from prism.gateway import (
    CODING_TOOL_HINTS,
    Gateway,
    HttpOptions,
    create_gateway_approver,
    open_gateway,
    serve_http,
)
from prism.mcp import StdioTransport, open_mcp_tools

TESTS = Path(__file__).resolve().parent
FIXTURE_SERVER = TESTS / "gateway_fixture_server.py"
STDIO_MAIN = TESTS / "gateway_stdio_main.py"


@attrs.define
class Served:
    url: str
    gateway: Gateway
    root: Path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("hello from the workspace\n", encoding="utf-8")
    return root


ServeFactory = Callable[..., AbstractAsyncContextManager[Served]]


@pytest.fixture
def serve(workspace: Path) -> ServeFactory:
    """``async with serve(**http_options) as served``: a gateway over HTTP on 127.0.0.1."""

    @asynccontextmanager
    async def run(**options: object) -> AsyncIterator[Served]:
        policy = create_coding_approval_policy(
            roots=[str(workspace)], approve=create_gateway_approver(), cache_approvals=False
        )
        tools = create_coding_tools(
            str(workspace),
            execution_policy=policy,
            file_operations=create_contained_file_operations([str(workspace)]),
        )
        transport = StdioTransport(sys.executable, [str(FIXTURE_SERVER)])
        async with (
            open_mcp_tools(server_id="fx", transport=transport, call_timeout_s=30) as bridge,
            open_gateway(
                tools=tools,
                bridges=[bridge],
                permission=create_rule_permission_policy(allow=["tool:*:execute"]),
                hints=CODING_TOOL_HINTS,
                ledger=RunLedger(),
            ) as gateway,
            trio.open_nursery() as nursery,
        ):
            http = HttpOptions(host="127.0.0.1", port=0, **options)  # type: ignore[arg-type]
            url = await nursery.start(serve_http, gateway, http)
            yield Served(url=url, gateway=gateway, root=workspace)
            nursery.cancel_scope.cancel()

    return run


# Upstream: the mcp SDK's Streamable HTTP client (mcp 2.3.0, streamable_http.py
# _handle_sse_response) returns from `async for sse in event_source` without closing
# the httpx2/httpcore2 async generators, and trio's finalizer warns when they are
# collected. Only those generators are ignored, only in this package's tests.
_UPSTREAM_ASYNCGEN_FILTERS = (
    "ignore:Async generator 'http(x2|core2)\\.[A-Za-z_.]+' was garbage collected:ResourceWarning",
    "ignore:Exception ignored in. <async_generator object (EventSource|Response|"
    "AsyncResponseStream|PoolByteStream)\\.:pytest.PytestUnraisableExceptionWarning",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if TESTS in Path(item.path).parents:
            for spec in _UPSTREAM_ASYNCGEN_FILTERS:
                item.add_marker(pytest.mark.filterwarnings(spec))
