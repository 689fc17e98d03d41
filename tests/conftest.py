"""Shared fixtures for the cross-package tests (root ``tests/``)."""

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from prism.mcp import StdioTransport

HERE = Path(__file__).resolve().parent

TransportFactory = Callable[[str], StdioTransport]


@pytest.fixture
def matrix_server() -> TransportFactory:
    """Make a transport that starts tests/mcp_matrix_server.py as the named server."""

    def make(name: str = "a") -> StdioTransport:
        return StdioTransport(
            command=sys.executable, args=(str(HERE / "mcp_matrix_server.py"), name)
        )

    return make


@pytest.fixture
def demo_server() -> StdioTransport:
    """A transport that starts the demo MCP server shipped with prism-cli."""
    return StdioTransport(
        command=sys.executable,
        args=("-m", "prism.cli.demo_server", "--step-seconds", "0.05"),
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A root folder with a file inside, and a secret beside it (outside the root)."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "inside.txt").write_text("inside\n", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("TOP-SECRET\n", encoding="utf-8")
    return root
