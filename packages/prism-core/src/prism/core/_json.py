"""JSON value types shared by every Prism package."""

from __future__ import annotations

from typing import TypeAlias

__all__ = ["JsonObject", "JsonValue"]

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
"""Any value JSON can carry."""

JsonObject: TypeAlias = "dict[str, JsonValue]"
"""A JSON object: the shape of tool arguments and schemas."""
