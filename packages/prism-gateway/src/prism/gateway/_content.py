"""A Prism ``ToolResult`` as an MCP ``CallToolResult``."""

from __future__ import annotations

from typing import Any

import mcp_types as types

from prism.core import (
    ImageContent,
    ResourceContent,
    ResourceLink,
    TextContent,
    ToolResult,
)

__all__ = ["to_call_tool_result"]


def _block(block: object) -> Any:
    if isinstance(block, TextContent):
        return types.TextContent(type="text", text=block.text)
    if isinstance(block, ImageContent):
        return types.ImageContent(type="image", data=block.data, mime_type=block.mime_type)
    if isinstance(block, ResourceContent):
        resource: Any
        if block.blob is not None:
            resource = types.BlobResourceContents(
                uri=block.uri, mime_type=block.mime_type, blob=block.blob
            )
        else:
            resource = types.TextResourceContents(
                uri=block.uri, mime_type=block.mime_type, text=block.text or ""
            )
        return types.EmbeddedResource(type="resource", resource=resource)
    if isinstance(block, ResourceLink):
        return types.ResourceLink(
            type="resource_link",
            uri=block.uri,
            name=block.name or block.uri,
            mime_type=block.mime_type,
            description=block.description,
        )
    return types.TextContent(type="text", text=str(block))


def to_call_tool_result(result: ToolResult, *, any_structured: bool) -> types.CallToolResult:
    """The wire form of ``result``.

    ``any_structured`` says whether the connection's protocol accepts any JSON
    value as ``structuredContent`` (2026-07-28); older ones accept objects only.
    """
    structured: Any = None
    if result.structured is not None and (any_structured or isinstance(result.structured, dict)):
        structured = result.structured
    return types.CallToolResult(
        content=[_block(block) for block in result.content],
        structured_content=structured,
        is_error=result.is_error,
    )
