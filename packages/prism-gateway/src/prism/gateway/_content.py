"""A Prism ``ToolResult`` as the JSON of an MCP ``CallToolResult``.

The gateway hands the SDK this JSON, not the SDK's models: the SDK checks every
result against the negotiated revision's schema before it is sent (its
``serialize_server_result``), so models built here would be checked twice.
The JSON is what the models would dump to (``by_alias``, ``exclude_none``); a
test holds the two equal for every kind of content.
"""

from __future__ import annotations

from typing import Any

from prism.core import (
    ImageContent,
    ResourceContent,
    ResourceLink,
    TextContent,
    ToolResult,
)
from prism.core.text import has_lone_surrogate

__all__ = ["call_tool_result_json", "lone_surrogate_in"]


def _set(block: dict[str, Any], key: str, value: object) -> dict[str, Any]:
    if value is not None:
        block[key] = value
    return block


def _block(block: object) -> dict[str, Any]:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageContent):
        return {"type": "image", "data": block.data, "mimeType": block.mime_type}
    if isinstance(block, ResourceContent):
        resource = _set({"uri": block.uri}, "mimeType", block.mime_type)
        if block.blob is not None:
            resource["blob"] = block.blob
        else:
            resource["text"] = block.text or ""
        return {"type": "resource", "resource": resource}
    if isinstance(block, ResourceLink):
        link = {"type": "resource_link", "uri": block.uri, "name": block.name or block.uri}
        _set(link, "mimeType", block.mime_type)
        return _set(link, "description", block.description)
    return {"type": "text", "text": str(block)}


def call_tool_result_json(result: ToolResult, *, any_structured: bool) -> dict[str, Any]:
    """The wire form of ``result``, as a ``CallToolResult``'s JSON.

    ``any_structured`` says whether the connection's protocol accepts any JSON
    value as ``structuredContent`` (2026-07-28); older ones accept objects only.
    """
    wire: dict[str, Any] = {"content": [_block(block) for block in result.content]}
    structured = result.structured
    if structured is not None and (any_structured or isinstance(structured, dict)):
        wire["structuredContent"] = structured
    wire["isError"] = result.is_error
    wire["resultType"] = "complete"
    return wire


def lone_surrogate_in(wire: dict[str, Any]) -> bool:
    """Whether a string or key of the result JSON ``wire`` holds a lone surrogate.

    No answer can carry one (JSON-RPC is UTF-8): the SDK's encoder failed on it
    (a JSON-RPC error of code 0) or, in a key, wrote U+FFFD in its place. One
    pass, no recursion; an ASCII string costs one test.
    """
    stack: list[Any] = [wire]
    while stack:
        node = stack.pop()
        if type(node) is dict:
            for key, value in node.items():
                if has_lone_surrogate(key):
                    return True
                if type(value) is str:
                    if has_lone_surrogate(value):
                        return True
                elif type(value) in (dict, list):
                    stack.append(value)
        else:
            for value in node:
                if type(value) is str:
                    if has_lone_surrogate(value):
                        return True
                elif type(value) in (dict, list):
                    stack.append(value)
    return False
