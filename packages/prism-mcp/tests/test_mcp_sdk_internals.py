"""The places where the bridge relies on the MCP SDK's internals (pinned by mcp<3).

If one of these fails after an ``mcp`` upgrade, the bridge's protection is gone
silently; find the new place before raising the pin:

* ``ClientSession.validate_tool_result`` is replaced per session: the bridge
  checks ``structuredContent`` itself, and the SDK's check would re-list tools
  unbounded for an unlisted name and raise the whole result away on a mismatch.
* ``ClientSession._tool_output_schemas`` and ``_tool_output_validators`` are
  cleared after each listing: the SDK adds every page's schemas and prunes only
  after a complete single-page listing, so paged listings with fresh names
  would grow them without bound.
* ``ClientSession._x_mcp_header_maps`` is pruned after each listing to the tools
  the listing's pages held, for the same reason (2026-07-28 sessions).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

import trio
from mcp import Client, StdioServerParameters

if TYPE_CHECKING:
    from prism.mcp import StdioTransport


async def test_the_sdk_session_still_has_what_the_bridge_relies_on(
    fixture_stdio: StdioTransport,
) -> None:
    server = StdioServerParameters(command=fixture_stdio.command, args=list(fixture_stdio.args))
    with trio.fail_after(30):
        async with Client(server) as client:
            await client.list_tools()
            session = client.session
            validate = getattr(type(session), "validate_tool_result", None)
            assert inspect.iscoroutinefunction(validate), (
                "mcp's ClientSession.validate_tool_result is gone or no longer async: "
                "prism.mcp turns the SDK's output check off through it"
            )
            assert list(inspect.signature(validate).parameters) == ["self", "name", "result"]
            for attribute in ("_tool_output_schemas", "_tool_output_validators"):
                kept = getattr(session, attribute, None)
                assert isinstance(kept, dict), (
                    f"mcp's ClientSession.{attribute} is gone: prism.mcp clears it after each "
                    "listing to bound the SDK's memory; find where the SDK keeps output "
                    "schemas now"
                )
            assert session._tool_output_schemas, "the SDK no longer keeps listed output schemas"
            assert isinstance(getattr(session, "_x_mcp_header_maps", None), dict), (
                "mcp's ClientSession._x_mcp_header_maps is gone: prism.mcp prunes it after "
                "each listing; find where the SDK keeps x-mcp-header maps now"
            )
