"""prism.mcp: an MCP client bridge whose tools go through Prism's gates.

Connect to an MCP server (a subprocess over stdio, or Streamable HTTP) and get
its tools as :class:`~prism.core.ToolDefinition` values named
``mcp:<server_id>:<name>``, with the server's ``inputSchema`` as parameters.
Every call is bounded in time and bytes; a failing server gives error results,
never a hung or crashed host.

Example::

    import sys
    import trio
    from prism.core import DispatchOptions, ToolCall, create_tool_registry, dispatch_tool_call
    from prism.mcp import StdioTransport, open_mcp_tools

    async def main() -> None:
        transport = StdioTransport(sys.executable, ["-m", "mcp_server_time"])
        async with open_mcp_tools(server_id="time", transport=transport) as bridge:
            options = DispatchOptions(registry=create_tool_registry(bridge.tools))
            call = ToolCall(
                id="1", name="mcp:time:get_current_time", arguments={"timezone": "UTC"}
            )
            result = await dispatch_tool_call(call, options)
            print(result.joined_text)

    trio.run(main)
"""

from ._annotations import McpApprovalCallback as McpApprovalCallback
from ._annotations import McpToolAnnotations as McpToolAnnotations
from ._annotations import McpToolInfo as McpToolInfo
from ._bridge import McpToolBridge as McpToolBridge
from ._bridge import open_mcp_tools as open_mcp_tools
from ._budget import mcp_message_refusal as mcp_message_refusal
from ._callbacks import McpElicitation as McpElicitation
from ._callbacks import McpElicitationAnswer as McpElicitationAnswer
from ._callbacks import McpElicitationComplete as McpElicitationComplete
from ._callbacks import McpElicitationCompleteCallback as McpElicitationCompleteCallback
from ._callbacks import McpElicitCallback as McpElicitCallback
from ._callbacks import McpLogCallback as McpLogCallback
from ._callbacks import McpLogMessage as McpLogMessage
from ._callbacks import McpRootsCallback as McpRootsCallback
from ._callbacks import McpRootsRequest as McpRootsRequest
from ._callbacks import McpSampleCallback as McpSampleCallback
from ._callbacks import McpSamplingAnswer as McpSamplingAnswer
from ._callbacks import McpSamplingRequest as McpSamplingRequest
from ._calls import McpStartedCall as McpStartedCall
from ._content import AUDIO_URI_PREFIX as AUDIO_URI_PREFIX
from ._errors import McpBridgeError as McpBridgeError
from ._permission import create_mcp_permission_policy as create_mcp_permission_policy
from ._session import McpServerInfo as McpServerInfo
from ._stdio import DEFAULT_ENV_PASSTHROUGH as DEFAULT_ENV_PASSTHROUGH
from ._transports import McpTransport as McpTransport
from ._transports import StdioTransport as StdioTransport
from ._transports import StreamableHttpTransport as StreamableHttpTransport

__all__ = [
    "AUDIO_URI_PREFIX",
    "DEFAULT_ENV_PASSTHROUGH",
    "McpApprovalCallback",
    "McpBridgeError",
    "McpElicitCallback",
    "McpElicitation",
    "McpElicitationAnswer",
    "McpElicitationComplete",
    "McpElicitationCompleteCallback",
    "McpLogCallback",
    "McpLogMessage",
    "McpRootsCallback",
    "McpRootsRequest",
    "McpSampleCallback",
    "McpSamplingAnswer",
    "McpSamplingRequest",
    "McpServerInfo",
    "McpStartedCall",
    "McpToolAnnotations",
    "McpToolBridge",
    "McpToolInfo",
    "McpTransport",
    "StdioTransport",
    "StreamableHttpTransport",
    "create_mcp_permission_policy",
    "mcp_message_refusal",
    "open_mcp_tools",
]
