"""What a test suite that drives MCP servers over HTTP on trio must tolerate from upstream."""

from __future__ import annotations

__all__ = ["UPSTREAM_WARNING_FILTERS"]

# Upstream: the mcp SDK's Streamable HTTP client (mcp 2.3.0, streamable_http.py
# _handle_sse_response) returns from `async for sse in event_source` without closing
# the httpx2/httpcore2 async generators, and trio's finalizer warns when they are
# collected. Only those generators are named.
UPSTREAM_WARNING_FILTERS: tuple[str, ...] = (
    "ignore:Async generator 'http(x2|core2)\\.[A-Za-z_.]+' was garbage collected:ResourceWarning",
    "ignore:Exception ignored in. <async_generator object (EventSource|Response|"
    "AsyncResponseStream|PoolByteStream)\\.:pytest.PytestUnraisableExceptionWarning",
)
"""pytest ``filterwarnings`` specs for the SDK's unclosed HTTP async generators, and only those."""
