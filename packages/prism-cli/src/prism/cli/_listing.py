"""The ``tools/list`` answer of ``prism serve`` over stdio, made before the gateway is loaded.

A host lists the tools right after ``initialize``, and hosts give the two
about 5 s together. The gateway lists the coding tools (when they are on)
and, once each is up, the MCP servers' tools; the servers start only once the
gateway is loaded, so until then its listing is the coding tools alone. That
listing is made here from the tools' own definitions
(``prism.coding.tools``, which loads none of the policy and sandbox
machinery, nor the MCP SDK) and written in the gateway's wire form, so the
front (``_front``) can answer ``tools/list`` while the rest loads. A test
compares it, byte for byte, with the loaded gateway's answer.

Nothing here is trusted to be right: when the gateway, once serving, would
answer the same request differently (a server came up meanwhile), it writes
``notifications/tools/list_changed`` instead of its answer, and the host
lists again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._config import PrismConfig

__all__ = ["early_listing"]

# The annotations the gateway states for the coding tools (prism.gateway's
# CODING_TOOL_HINTS), in the order its wire form writes them.
_ANNOTATIONS: dict[str, dict[str, bool]] = {
    "read": {
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
        "readOnlyHint": True,
    },
    "write": {
        "destructiveHint": True,
        "idempotentHint": True,
        "openWorldHint": False,
        "readOnlyHint": False,
    },
    "edit": {
        "destructiveHint": True,
        "idempotentHint": False,
        "openWorldHint": False,
        "readOnlyHint": False,
    },
    "shell": {
        "destructiveHint": True,
        "idempotentHint": False,
        "openWorldHint": True,
        "readOnlyHint": False,
    },
}
# An input schema's keys the wire form writes first, in this order; the rest follow as given.
_SCHEMA_FIRST = ("$schema", "properties", "required", "type")


def _plain(value: object) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"not JSON: {type(value).__name__}")


def early_listing(config: PrismConfig) -> bytes | None:
    """The ``tools`` array (JSON) the gateway of ``config`` lists before any server is up.

    None when it cannot be told without loading the gateway: a workspace root
    that is not a folder (``prism serve`` exits with its error), tools other
    than the four coding tools, or text the wire form might write otherwise
    (an escaped control character, a lone surrogate).
    """
    workspace = config.workspace
    if not workspace.coding_tools:
        return b"[]"
    roots = list(workspace.roots)
    if not roots or not all(os.path.isdir(root) for root in roots):
        return None
    from prism.coding.tools import create_coding_tools

    try:
        tools = create_coding_tools(roots[0])
    except Exception:
        return None
    entries: list[dict[str, Any]] = []
    for tool in tools:
        annotations = _ANNOTATIONS.get(tool.name)
        schema = dict(tool.parameters) if tool.parameters else {"type": "object"}
        if annotations is None or tool.description is None or schema.get("type") != "object":
            return None
        ordered = {key: schema[key] for key in _SCHEMA_FIRST if key in schema}
        ordered.update((key, value) for key, value in schema.items() if key not in ordered)
        entries.append(
            {
                "annotations": annotations,
                "description": tool.description,
                "inputSchema": ordered,
                "name": tool.name,
            }
        )
    try:
        text = json.dumps(
            entries, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_plain
        )
        listing = text.encode("utf-8")
    except (TypeError, ValueError):  # (UnicodeEncodeError: a lone surrogate)
        return None
    return None if b"\\u" in listing else listing
