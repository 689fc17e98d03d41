"""prism.mcp.testing: what a host's test suite needs to drive MCP servers through Prism.

Tests run with warnings as errors; the MCP SDK's Streamable HTTP client leaves
async generators unclosed, which trio reports when they are collected. Mark the
tests that reach servers over HTTP with these filters, and nothing else is
ignored::

    import pytest
    from prism.mcp.testing import UPSTREAM_WARNING_FILTERS

    def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
        for item in items:
            for spec in UPSTREAM_WARNING_FILTERS:
                item.add_marker(pytest.mark.filterwarnings(spec))
"""

from ._testing import UPSTREAM_WARNING_FILTERS as UPSTREAM_WARNING_FILTERS

__all__ = ["UPSTREAM_WARNING_FILTERS"]
