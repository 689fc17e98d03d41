"""prism.gateway: Prism as a gated MCP server (what ``prism serve`` runs).

Any MCP host (a coding assistant, an IDE agent, an agent framework) connects
to the gateway and sees Prism's tools: every ``tools/call`` passes the whole
dispatch lifecycle (filters, permission, JSON Schema validation, the
execution policy with approval, the sandbox, bounded output, the ledger)
before anything runs, and a refusal comes back as an error result the model
can read. Approval is asked of the connected client by elicitation when it
can answer, else of the configured approver (deny by default).

Example::

    import tempfile

    import trio
    from prism.coding.security import (
        create_coding_approval_policy,
        create_contained_file_operations,
    )
    from prism.coding.tools import create_coding_tools
    from prism.gateway import (
        CODING_TOOL_HINTS,
        HttpOptions,
        create_gateway_approver,
        open_gateway,
        serve_http,
    )

    async def main() -> None:
        root = tempfile.mkdtemp()
        policy = create_coding_approval_policy(
            roots=[root], approve=create_gateway_approver()
        )
        tools = create_coding_tools(
            root,
            execution_policy=policy,
            file_operations=create_contained_file_operations([root]),
        )
        async with open_gateway(tools=tools, hints=CODING_TOOL_HINTS) as gateway:
            async with trio.open_nursery() as nursery:
                url = await nursery.start(serve_http, gateway, HttpOptions(port=0))
                print("MCP endpoint:", url)  # http://127.0.0.1:PORT/mcp
                nursery.cancel_scope.cancel()

    trio.run(main)
"""

from ._approval import GatewayApprover as GatewayApprover
from ._approval import create_command_approver as create_command_approver
from ._approval import create_gateway_approver as create_gateway_approver
from ._errors import GatewayConfigurationError as GatewayConfigurationError
from ._errors import GatewayError as GatewayError
from ._gateway import Gateway as Gateway
from ._gateway import open_gateway as open_gateway
from ._hints import CODING_TOOL_HINTS as CODING_TOOL_HINTS
from ._hints import ToolHints as ToolHints
from ._serve import BearerAuth as BearerAuth
from ._serve import HttpOptions as HttpOptions
from ._serve import OAuthResourceServer as OAuthResourceServer
from ._serve import build_http_app as build_http_app
from ._serve import serve_http as serve_http
from ._serve import serve_stdio as serve_stdio
from ._servers import DownstreamServer as DownstreamServer

__all__ = [
    "CODING_TOOL_HINTS",
    "BearerAuth",
    "DownstreamServer",
    "Gateway",
    "GatewayApprover",
    "GatewayConfigurationError",
    "GatewayError",
    "HttpOptions",
    "OAuthResourceServer",
    "ToolHints",
    "build_http_app",
    "create_command_approver",
    "create_gateway_approver",
    "open_gateway",
    "serve_http",
    "serve_stdio",
]
