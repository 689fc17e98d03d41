"""What ``prism mcp tools`` and ``prism mcp call`` run against one server."""

from __future__ import annotations

import contextlib
import re
from typing import TYPE_CHECKING

import attrs

from prism.core import ToolDefinition, ToolResult
from prism.core.ledger import ToolCallRecord

from ._elicit import terminal_elicitor
from ._trio import run_trio

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from prism.core.ledger import RunLedger

    from ._config import McpServerConfig

__all__ = ["CallOutcome", "ToolListing", "call_tool", "list_tools", "prefix_hint"]

_PREFIXED = re.compile(r"^mcp:([^:]+):(.+)$")


@attrs.frozen(kw_only=True)
class ToolListing:
    """A server's tools, who it says it is, and the protocol version it speaks."""

    tools: tuple[ToolDefinition, ...]
    server_info: object
    protocol_version: object


@attrs.frozen(kw_only=True)
class CallOutcome:
    """One gated call: the tool's full name, its result, its ledger record, and a hint."""

    tool: str
    result: ToolResult
    record: ToolCallRecord | None
    hint: str | None = None


def list_tools(server: McpServerConfig) -> ToolListing:
    """Connect ``server`` and list its tools (blocking: runs trio)."""
    from ._toolset import open_mcp_server

    async def go() -> ToolListing:
        async with open_mcp_server(server, elicit=terminal_elicitor()) as bridge:
            return ToolListing(
                tools=tuple(bridge.tools),
                server_info=bridge.server_info,
                protocol_version=bridge.protocol_version,
            )

    return run_trio(go)


def prefix_hint(name: str, server_id: str, offered: Sequence[str]) -> str | None:
    """Why ``name`` was not found when it names another server's prefix, else ``None``."""
    match = _PREFIXED.match(name)
    if match is None or match.group(1) == server_id:
        return None
    other, tool = match.group(1), match.group(2)
    if f"mcp:{server_id}:{tool}" in offered:
        return f"{name!r} names server {other!r}: pass --server-id {other}, or call {tool!r}"
    return f"{name!r} names server {other!r}: pass --server-id {other}"


def call_tool(
    server: McpServerConfig,
    name: str,
    arguments: object,
    *,
    ledger_file: Path | None,
    allow: Sequence[str],
    deny: Sequence[str],
) -> CallOutcome:
    """Call ``name`` on ``server`` once through the full gates (blocking: runs trio)."""
    from prism.core import (
        DispatchOptions,
        ToolCall,
        create_rule_permission_policy,
        create_tool_registry,
        dispatch_tool_call,
    )
    from prism.core.ledger import RunLedger
    from prism.validation.jsonschema import create_json_schema_tool_validator

    from ._ledgerfile import LedgerFailures, recording_ledger
    from ._toolset import open_mcp_server

    prefix = f"mcp:{server.server_id}:"
    full_name = name if name.startswith(prefix) else prefix + name
    policy = create_rule_permission_policy(allow=allow or (f"tool:{full_name}:execute",), deny=deny)
    failures = LedgerFailures()
    records: list[ToolCallRecord] = []
    offered: list[str] = []

    async def go() -> ToolResult:
        async with open_mcp_server(server, elicit=terminal_elicitor()) as bridge:
            offered.extend(tool.name for tool in bridge.tools)
            recording: contextlib.AbstractContextManager[RunLedger] = (
                contextlib.nullcontext(RunLedger())
                if ledger_file is None
                else recording_ledger(
                    ledger_file, label=f"prism mcp call {full_name}", failures=failures
                )
            )
            # The record reaches the file when the call ends, even if Ctrl-C follows.
            with recording as run_ledger:
                options = DispatchOptions(
                    registry=create_tool_registry(bridge.tools),
                    permission=policy,
                    validator=create_json_schema_tool_validator(),
                    ledger=run_ledger,
                )
                call = ToolCall(id="cli-1", name=full_name, arguments=arguments)
                try:
                    return await dispatch_tool_call(call, options)
                finally:
                    records.extend(run_ledger.records)

    try:
        result = run_trio(go)
    finally:
        failures.report()
    record = records[-1] if records else None
    hint = None
    if record is not None and record.blocked_reason == "unknown_tool":
        hint = prefix_hint(name, server.server_id, offered)
    return CallOutcome(tool=full_name, result=result, record=record, hint=hint)
