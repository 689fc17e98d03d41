"""A permission policy for bridged MCP tools that reads their (untrusted) annotations."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from prism.core import PermissionDecision, PermissionPolicy, PermissionRequest, trio_native
from prism.core.options import OptionCheck, callable_value, optional, sequence_of, string

if TYPE_CHECKING:
    from ._annotations import McpApprovalCallback, McpToolInfo
    from ._bridge import McpToolBridge

__all__ = ["create_mcp_permission_policy"]

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
