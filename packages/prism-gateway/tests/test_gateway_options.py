"""Options of open_gateway, refused or honoured at construction (no client needed)."""

from __future__ import annotations

import pytest

from prism.core import JsonObject, ToolDefinition, ToolExecutionContext, ToolFilter, ToolResult
from prism.gateway import GatewayConfigurationError, ToolHints, open_gateway


async def _ok(_args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text("ok")


def _tool(name: str) -> ToolDefinition:
    return ToolDefinition(name=name, execute=_ok)


async def test_two_tools_with_one_name_are_refused() -> None:
    with pytest.raises(GatewayConfigurationError):
        async with open_gateway(tools=[_tool("a"), _tool("a")]):
            pass


async def test_two_names_with_one_alias_are_refused() -> None:
    with pytest.raises(GatewayConfigurationError, match="mcp__x__y"):
        async with open_gateway(tools=[_tool("mcp:x:y"), _tool("mcp__x__y")]):
            pass


async def test_tools_are_offered_under_provider_safe_names() -> None:
    async with open_gateway(tools=[_tool("mcp:docs:search"), _tool("read")]) as gateway:
        assert gateway.offered_names == {"mcp:docs:search": "mcp__docs__search", "read": "read"}


async def test_filtered_tools_are_not_offered() -> None:
    tools = [_tool("read"), _tool("shell")]
    async with open_gateway(tools=tools, filters=[ToolFilter(deny=frozenset({"shell"}))]) as gw:
        assert [tool.name for tool in gw.tools] == ["read"]


def test_hints_state_only_what_was_given() -> None:
    hints = ToolHints(read_only=True, open_world=False)
    assert hints.annotations_json() == {"readOnlyHint": True, "openWorldHint": False}
