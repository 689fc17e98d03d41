"""Fixtures shared by the prism-coding-tools tests (no mocks: real files, real processes)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import hypothesis
import pytest

from prism.core import JsonObject, ToolCall, ToolDefinition, ToolExecutionContext, ToolResult

RunTool = Callable[[ToolDefinition, JsonObject], Awaitable[ToolResult]]


@pytest.fixture
def run_tool() -> RunTool:
    """Call a tool's ``execute`` the way the dispatcher does."""

    async def run(tool: ToolDefinition, arguments: JsonObject) -> ToolResult:
        ctx = ToolExecutionContext(call=ToolCall(id="t1", name=tool.name, arguments=arguments))
        return await tool.execute(arguments, ctx)

    return run


# Hypothesis without its per-example deadline: a wall-clock limit fails on a loaded
# machine (scripts/test runs two packages at a time); speed targets live in benchmarks/.
hypothesis.settings.register_profile("prism", deadline=None)
hypothesis.settings.load_profile("prism")
