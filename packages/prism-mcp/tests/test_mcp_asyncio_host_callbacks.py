"""An asyncio application's MCP callbacks under the asyncio host run on its loop.

server-everything asks for an elicitation and a sample; the application answers
with asyncio code (an ``asyncio.Queue`` that another task, its "UI", feeds).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from prism.core import (
    AbortController,
    DispatchOptions,
    ToolCall,
    ToolResult,
    create_tool_registry,
    open_asyncio_host,
)
from prism.mcp import (
    McpElicitation,
    McpElicitationAnswer,
    McpSamplingAnswer,
    McpSamplingRequest,
    open_mcp_tools,
)

if TYPE_CHECKING:
    from prism.mcp import StdioTransport


def test_asyncio_elicitation_and_sampling_callbacks_answer_server_everything(
    everything_stdio: StdioTransport,
) -> None:
    asked: list[str] = []

    async def main() -> dict[str, ToolResult]:
        questions: asyncio.Queue[tuple[McpElicitation, asyncio.Future[McpElicitationAnswer]]]
        questions = asyncio.Queue()

        async def ui() -> None:
            # The application's UI task answers each question put to it.
            while True:
                request, reply = await questions.get()
                asked.append(request.message)
                reply.set_result(McpElicitationAnswer(action="accept", content={"name": "Ada"}))

        async def elicit(request: McpElicitation) -> McpElicitationAnswer:
            assert asyncio.current_task() is not None
            reply: asyncio.Future[McpElicitationAnswer] = asyncio.get_running_loop().create_future()
            await questions.put((request, reply))
            return await asyncio.wait_for(reply, timeout=30)

        async def sample(request: McpSamplingRequest) -> McpSamplingAnswer:
            await asyncio.sleep(0)
            return McpSamplingAnswer(text="hello from asyncio", model="asyncio-model")

        answering = asyncio.create_task(ui())
        try:
            async with (
                open_asyncio_host() as host,
                host.enter(
                    open_mcp_tools(
                        server_id="everything",
                        transport=everything_stdio,
                        elicit=elicit,
                        sample=sample,
                        call_timeout_s=20,
                    )
                ) as bridge,
            ):
                options = DispatchOptions(registry=create_tool_registry(bridge.tools))
                results = {}
                for name, arguments in [
                    ("trigger-elicitation-request", {}),
                    ("trigger-sampling-request", {"prompt": "say hi"}),
                ]:
                    call = ToolCall(id=name, name=f"mcp:everything:{name}", arguments=arguments)
                    results[name] = await host.dispatch_tool_call(call, options)
                return results
        finally:
            answering.cancel()
            with pytest.raises(asyncio.CancelledError):
                await answering

    results = asyncio.run(main())
    assert not results["trigger-elicitation-request"].is_error
    assert "Ada" in results["trigger-elicitation-request"].joined_text
    assert asked
    assert "hello from asyncio" in results["trigger-sampling-request"].joined_text


def test_aborting_a_call_cancels_its_pending_asyncio_elicitation(
    everything_stdio: StdioTransport,
) -> None:
    cancelled: list[str] = []

    async def main() -> ToolResult:
        asked = asyncio.Event()

        async def elicit(request: McpElicitation) -> McpElicitationAnswer:
            asked.set()
            try:
                await asyncio.Event().wait()  # the user never answers
            except asyncio.CancelledError:
                cancelled.append(request.message)
                raise
            raise AssertionError("unreachable")

        async with (
            open_asyncio_host() as host,
            host.enter(
                open_mcp_tools(
                    server_id="everything",
                    transport=everything_stdio,
                    elicit=elicit,
                    call_timeout_s=20,
                )
            ) as bridge,
        ):
            controller = AbortController()
            options = DispatchOptions(
                registry=create_tool_registry(bridge.tools), signal=controller.signal
            )
            call = ToolCall(id="1", name="mcp:everything:trigger-elicitation-request", arguments={})
            task = asyncio.create_task(host.dispatch_tool_call(call, options))
            await asyncio.wait_for(asked.wait(), timeout=30)
            controller.abort("the user closed the dialog")
            return await task

    result = asyncio.run(main())
    assert result.is_error
    assert "closed the dialog" in result.joined_text
    assert cancelled, "the pending elicitation was not cancelled"
