"""What the gateway tells MCP hosts about each tool besides its schema."""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING

import attrs

from prism.core import JsonObject
from prism.core.options import boolean, instance_of, optional, string

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["CODING_TOOL_HINTS", "ToolHints"]

_FLAG = optional(boolean())


@attrs.frozen(kw_only=True)
class ToolHints:
    """MCP tool annotations (``None``: not stated, so the spec's default applies).

    For Prism's own tools these are stated truthfully; for a bridged tool they
    are the bridged server's hints, passed through unchanged (hosts treat them
    as untrusted, as the spec says).

    Attributes:
        title: a display title.
        read_only: the tool does not change its environment (``readOnlyHint``).
        destructive: it may destroy or overwrite (``destructiveHint``; default true).
        idempotent: a second identical call does nothing more (``idempotentHint``).
        open_world: it reaches beyond the workspace (``openWorldHint``; default true).
        output_schema: the JSON Schema of the tool's structured result, if any.

    Raises:
        ConfigurationError: a hint of the wrong type (the message names it).
    """

    title: str | None = attrs.field(default=None, validator=optional(string()))
    read_only: bool | None = attrs.field(default=None, validator=_FLAG)
    destructive: bool | None = attrs.field(default=None, validator=_FLAG)
    idempotent: bool | None = attrs.field(default=None, validator=_FLAG)
    open_world: bool | None = attrs.field(default=None, validator=_FLAG)
    output_schema: JsonObject | None = attrs.field(
        default=None, eq=False, validator=optional(instance_of(dict, description="a JSON object"))
    )

    def annotations_json(self) -> JsonObject:
        """The stated hints under their wire names (``readOnlyHint``...)."""
        out: JsonObject = {}
        for key, value in (
            ("title", self.title),
            ("readOnlyHint", self.read_only),
            ("destructiveHint", self.destructive),
            ("idempotentHint", self.idempotent),
            ("openWorldHint", self.open_world),
        ):
            if value is not None:
                out[key] = value
        return out


CODING_TOOL_HINTS: Mapping[str, ToolHints] = MappingProxyType(
    {
        "read": ToolHints(read_only=True, destructive=False, idempotent=True, open_world=False),
        "write": ToolHints(read_only=False, destructive=True, idempotent=True, open_world=False),
        "edit": ToolHints(read_only=False, destructive=True, idempotent=False, open_world=False),
        # A command may do anything the policy lets it do, network included.
        "shell": ToolHints(read_only=False, destructive=True, idempotent=False, open_world=True),
    }
)
"""The truthful hints of ``prism.coding.tools``' ``read``, ``write``, ``edit`` and ``shell``."""
