"""What a server says about its tools: untrusted hints, and the pins that notice a change."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs

from prism.core import (
    JsonObject,
)

__all__ = [
    "McpApprovalCallback",
    "McpToolAnnotations",
    "McpToolInfo",
]

_MAX_TITLE_CHARS = 256


def _hint(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


@attrs.frozen(kw_only=True)
class McpToolAnnotations:
    """A tool's annotations as the server sent them (``None``: not given).

    They are hints from an untrusted server: a policy may relax its defaults
    on them only for a server the host trusts. When a hint is missing the
    spec's defaults apply, which :attr:`destructive` and :attr:`open_world`
    report.

    Attributes:
        title: a display title.
        read_only_hint: the tool does not change its environment.
        destructive_hint: it may destroy or overwrite (spec default: true).
        idempotent_hint: calling it twice with the same arguments does no more.
        open_world_hint: it reaches beyond a closed world (spec default: true).
    """

    title: str | None = None
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    idempotent_hint: bool | None = None
    open_world_hint: bool | None = None

    @property
    def read_only(self) -> bool:
        """``read_only_hint`` with its default (false)."""
        return self.read_only_hint is True

    @property
    def destructive(self) -> bool:
        """``destructive_hint`` with its default (true); a read-only tool is not destructive."""
        if self.read_only:
            return False
        return self.destructive_hint is not False

    @property
    def open_world(self) -> bool:
        """``open_world_hint`` with its default (true)."""
        return self.open_world_hint is not False

    @classmethod
    def from_mcp(cls, annotations: Any) -> McpToolAnnotations:
        """Read an SDK ``ToolAnnotations`` (or ``None``) leniently."""
        if annotations is None:
            return cls()
        title = getattr(annotations, "title", None)
        return cls(
            title=title[:_MAX_TITLE_CHARS] if isinstance(title, str) else None,
            read_only_hint=_hint(getattr(annotations, "read_only_hint", None)),
            destructive_hint=_hint(getattr(annotations, "destructive_hint", None)),
            idempotent_hint=_hint(getattr(annotations, "idempotent_hint", None)),
            open_world_hint=_hint(getattr(annotations, "open_world_hint", None)),
        )

    def to_json(self) -> JsonObject:
        """The hints that were given, under their wire names."""
        out: JsonObject = {}
        for key, value in (
            ("title", self.title),
            ("readOnlyHint", self.read_only_hint),
            ("destructiveHint", self.destructive_hint),
            ("idempotentHint", self.idempotent_hint),
            ("openWorldHint", self.open_world_hint),
        ):
            if value is not None:
                out[key] = value
        return out


@attrs.frozen(kw_only=True)
class McpToolInfo:
    """What the bridge knows about one bridged tool, beyond its ``ToolDefinition``.

    Attributes:
        server_id: the bridge's ``server_id``.
        name: the tool's name on the server.
        tool_name: its Prism name (``mcp:<server_id>:<name>``).
        title: the tool's ``title`` (or its annotations' title), clipped.
        annotations: the server's hints.
        output_schema: the tool's ``outputSchema``, if any.
        task_support: ``"forbidden"``, ``"optional"`` or ``"required"`` (2025-11-25 tasks).
        definition_hash: SHA-256 of the definition (description, input and
            output schema, annotations, title) the call runs against.
        definition_parts: the SHA-256 of each of those parts, by wire name
            (``description``, ``inputSchema``, ``outputSchema``, ``annotations``,
            ``title``); what a pin holds.
        changed: the parts that differ from the tool's pin. Non-empty means the
            server changed the tool after it was pinned: calls are refused
            until the host accepts the new definition.
    """

    server_id: str
    name: str
    tool_name: str
    title: str | None = None
    annotations: McpToolAnnotations = attrs.field(factory=McpToolAnnotations)
    output_schema: JsonObject | None = attrs.field(default=None, eq=False)
    task_support: str = "forbidden"
    definition_hash: str = ""
    definition_parts: Mapping[str, str] = attrs.field(factory=dict, eq=False)
    changed: tuple[str, ...] = ()


_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str)
"""What ``json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)``
uses, made once (a listing hashes each of its tools' parts)."""


def _sha(value: object) -> str:
    text = _ENCODER.encode(value)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@functools.lru_cache(maxsize=256)
def _annotations_sha(annotations: McpToolAnnotations) -> str:
    # The tools of a listing share a few sets of hints: each is hashed once.
    return _sha(annotations.to_json())


def definition_parts(
    description: str | None,
    input_schema: object,
    output_schema: object,
    annotations: McpToolAnnotations,
    title: str | None,
    task_support: str = "forbidden",
) -> dict[str, str]:
    """The SHA-256 of each part of what a tool says it is.

    ``taskSupport`` is a part only when it is not ``"forbidden"`` (the default),
    so pins written before it was one still hold for tools that never ran as tasks.
    """
    parts = {
        "description": _sha(description),
        "inputSchema": _sha(input_schema),
        "outputSchema": _sha(output_schema),
        "annotations": _annotations_sha(annotations),
        "title": _sha(title),
    }
    if task_support != "forbidden":
        parts["taskSupport"] = _sha(task_support)
    return parts


def _plain(text: object) -> bool:
    """Whether ``text`` is a ``str`` of ASCII letters and digits (JSON writes it as it is)."""
    return type(text) is str and text.isascii() and text.isalnum()


def definition_hash(parts: Mapping[str, str]) -> str:
    """One hash over a tool's :func:`definition_parts`."""
    if all(_plain(key) and _plain(value) for key, value in parts.items()):
        # What _sha writes for such a dict (letters and digits need no escape), by hand.
        text = ",".join(f'"{key}":"{parts[key]}"' for key in sorted(parts))
        return hashlib.sha256(f"{{{text}}}".encode()).hexdigest()
    return _sha(dict(parts))


def changed_parts(pinned: Mapping[str, str], parts: Mapping[str, str]) -> tuple[str, ...]:
    """The parts whose hash differs from the pin, in a stable order."""
    return tuple(sorted(key for key in {*pinned, *parts} if pinned.get(key) != parts.get(key)))


McpApprovalCallback = Callable[[McpToolInfo], "bool | Awaitable[bool]"]
"""``approve(info) -> bool``, sync or async: asked for a tool the policy will not allow alone."""
