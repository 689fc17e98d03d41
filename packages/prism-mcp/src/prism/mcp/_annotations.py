"""What a server says about its tools (untrusted hints), and a policy that uses it."""

from __future__ import annotations

import fnmatch
import hashlib
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from prism.core import (
    JsonObject,
    PermissionDecision,
    PermissionPolicy,
    PermissionRequest,
    trio_native,
)
from prism.core.options import OptionCheck, callable_value, optional, sequence_of, string

if TYPE_CHECKING:
    from ._bridge import McpToolBridge

__all__ = [
    "McpApprovalCallback",
    "McpToolAnnotations",
    "McpToolInfo",
    "create_mcp_permission_policy",
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


def _sha(value: object) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def definition_parts(
    description: str | None,
    input_schema: object,
    output_schema: object,
    annotations: McpToolAnnotations,
    title: str | None,
) -> dict[str, str]:
    """The SHA-256 of each part of what a tool says it is."""
    return {
        "description": _sha(description),
        "inputSchema": _sha(input_schema),
        "outputSchema": _sha(output_schema),
        "annotations": _sha(annotations.to_json()),
        "title": _sha(title),
    }


def definition_hash(parts: Mapping[str, str]) -> str:
    """One hash over a tool's :func:`definition_parts`."""
    return _sha(dict(parts))


def changed_parts(pinned: Mapping[str, str], parts: Mapping[str, str]) -> tuple[str, ...]:
    """The parts whose hash differs from the pin, in a stable order."""
    return tuple(sorted(key for key in {*pinned, *parts} if pinned.get(key) != parts.get(key)))


McpApprovalCallback = Callable[[McpToolInfo], "bool | Awaitable[bool]"]
"""``approve(info) -> bool``, sync or async: asked for a tool the policy will not allow alone."""


_TRUSTED = sequence_of(string())
_BRIDGES = sequence_of(
    OptionCheck(
        "an McpToolBridge",
        lambda value: hasattr(value, "tool_info") and hasattr(value, "server_id"),
    )
)
_OWNER = "create_mcp_permission_policy"


def _listed(value: object) -> Any:
    # Any iterable but a string is taken (a generator, say), checked as a tuple.
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        return value
    return tuple(value)


@trio_native  # Prism's own trio code: stays on trio under an asyncio host
class _McpPermissionPolicy:
    def __init__(
        self,
        bridges: Mapping[str, McpToolBridge],
        trusted: tuple[str, ...],
        approve: McpApprovalCallback | None,
    ) -> None:
        self.bridges = bridges
        self.trusted = trusted
        self.approve = approve

    def _info(self, request: PermissionRequest) -> McpToolInfo | None:
        if request.kind != "tool" or request.action != "execute":
            return None
        for bridge in self.bridges.values():
            info = bridge.tool_info.get(request.target)
            if info is not None:
                return info
        return None

    async def check(self, request: PermissionRequest) -> PermissionDecision:
        info = self._info(request)
        if info is None:
            return PermissionDecision(allowed=True)
        if info.changed:
            return PermissionDecision(
                allowed=False,
                reason=(
                    f"MCP tool {info.tool_name} changed since it was pinned "
                    f"({', '.join(info.changed)}); the host has not accepted the new definition"
                ),
            )
        trusted = any(fnmatch.fnmatchcase(info.server_id, p) for p in self.trusted)
        hints = info.annotations
        if trusted and (hints.read_only or not (hints.destructive or hints.open_world)):
            return PermissionDecision(allowed=True)
        why = (
            f"MCP server {info.server_id} is not trusted, so its annotations are not relied on"
            if not trusted
            else "the tool is destructive or open-world (by its annotations or their defaults)"
        )
        if self.approve is None:
            return PermissionDecision(allowed=False, reason=f"{why}; no approver is configured")
        answer = self.approve(info)
        if not isinstance(answer, bool):
            answer = await answer
        if answer is True:
            return PermissionDecision(allowed=True, reason=f"{why}; approved")
        return PermissionDecision(allowed=False, reason=f"{why}; not approved")


def create_mcp_permission_policy(
    bridges: Iterable[McpToolBridge],
    *,
    trusted_servers: Iterable[str] = (),
    approve: McpApprovalCallback | None = None,
) -> PermissionPolicy:
    """A permission policy for bridged MCP tools that reads their annotations.

    For a ``tool:<name>:execute`` request naming a tool of one of ``bridges``:

    * a tool whose definition changed since it was pinned (see
      :attr:`McpToolInfo.changed`) is denied, naming what changed;
    * on a server in ``trusted_servers`` (ids or ``fnmatch`` patterns), a tool
      whose hints say read-only, or neither destructive nor open-world, is
      allowed; any other tool asks;
    * on any other server every tool asks: annotations from an untrusted
      server are untrusted, so a ``readOnlyHint`` does not relax anything.

    Asking calls ``approve(info)``; without an approver the call is denied
    with the reason. Requests for anything else are allowed, so combine this
    with the host's own policy (deny wins there).

    Args:
        bridges: the open bridges whose tools the policy knows.
        trusted_servers: server ids (or patterns) whose hints are believed.
        approve: asked for tools the policy will not allow alone.

    Raises:
        ConfigurationError: ``bridges`` is not a sequence of bridges,
            ``trusted_servers`` not a sequence of strings, or ``approve`` not callable.
    """
    listed = _BRIDGES.check(_OWNER, "bridges", _listed(bridges))
    return _McpPermissionPolicy(
        bridges={bridge.server_id: bridge for bridge in listed},
        trusted=_TRUSTED.check(_OWNER, "trusted_servers", _listed(trusted_servers)),
        approve=optional(callable_value()).check(_OWNER, "approve", approve),
    )
