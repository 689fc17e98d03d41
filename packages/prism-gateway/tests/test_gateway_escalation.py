"""An escalation through the gateway: the client is asked in words, and a yes grants that access.

Real bubblewrap (skipped where it cannot isolate), the coding tools of
``open_secure_coding_tools``, an MCP client over HTTP on 127.0.0.1 that
answers the elicitation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcp_types as types
import pytest
import trio
from mcp import Client

from prism.coding.security import SandboxUnavailableError, open_secure_coding_tools
from prism.core import create_rule_permission_policy
from prism.core.ledger import RunLedger
from prism.gateway import (
    CODING_TOOL_HINTS,
    HttpOptions,
    create_gateway_approver,
    open_gateway,
    serve_http,
)

if TYPE_CHECKING:
    from pathlib import Path


async def test_the_client_approves_exactly_the_access_it_was_told(workspace: Path) -> None:
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    ledger = RunLedger()
    try:
        async with (
            open_secure_coding_tools(
                [str(workspace)], sandbox="bubblewrap", approve=create_gateway_approver()
            ) as secure,
            open_gateway(
                tools=secure.tools,
                permission=create_rule_permission_policy(allow=["tool:*:execute"]),
                hints=CODING_TOOL_HINTS,
                ledger=ledger,
            ) as gateway,
            trio.open_nursery() as nursery,
        ):
            url = await nursery.start(serve_http, gateway, HttpOptions())
            async with Client(url, elicitation_callback=elicit, mode="legacy") as client:
                command = "echo export X=1 > .envrc; python3 -c \"open('.bashrc', 'w')\""
                result = await client.call_tool("shell", {"command": command})
            nursery.cancel_scope.cancel()
    except* SandboxUnavailableError as group:
        pytest.skip(f"bubblewrap cannot isolate here: {group.exceptions[0]}")
    assert not result.is_error, result.content
    assert len(asked) == 1
    assert asked[0].endswith(
        "approving it lets this one call write the protected file .envrc, which the sandbox "
        "would otherwise refuse; paths: " + str(workspace) + "; risk: high"
    )
    assert (workspace / ".envrc").read_text() == "export X=1\n"
    assert not (workspace / ".bashrc").exists()
    decision = next(r.decision for r in ledger.records if r.tool_name == "shell")
    assert decision is not None
    assert decision.escalation
    assert decision.access == "write the protected file .envrc"
    assert decision.approver == "approved by the client"
