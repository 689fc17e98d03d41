"""An asyncio application drives a real-provider agent through the asyncio host.

The loopback server, the OpenAI SDK (anyio on trio) and the agent all run in the
host's trio guest run on the asyncio loop; the test itself is plain asyncio.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import TYPE_CHECKING

import pytest
from openai.types.chat import ChatCompletionChunk

from prism.core import (
    TextContent,
    ToolDefinition,
    ToolResult,
    create_agent,
    create_rule_permission_policy,
    open_asyncio_host,
)
from prism.core.ledger import RunLedger
from prism.providers import (
    ModelResponseFinished,
    ModelTextDelta,
    ProviderAPIError,
    StreamEvent,
    open_openai_provider,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager

    from conftest import WireServer

    from prism.core import JsonObject, RunResult, ToolExecutionContext


def chunk(delta: dict[str, object], finish: str | None = None) -> tuple[None, str]:
    value = ChatCompletionChunk.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "test-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )
    return None, value.model_dump_json(exclude_none=True)


def call(index: int, call_id: str, q: str) -> dict[str, object]:
    function = {"name": "search", "arguments": f'{{"q": "{q}"}}'}
    return {
        "tool_calls": [{"index": index, "id": call_id, "type": "function", "function": function}]
    }


async def search(args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    # The application's own tool: asyncio code, run on the host's loop.
    await asyncio.sleep(0)
    return ToolResult.text(f"results for {args['q']}")


def test_asyncio_app_runs_a_real_provider_agent_through_the_host(
    open_wire_server: Callable[[], AbstractAsyncContextManager[WireServer]],
) -> None:
    ledger = RunLedger()

    async def main() -> RunResult:
        async with (
            open_asyncio_host() as host,
            host.enter(open_wire_server()) as server,
            host.enter(
                open_openai_provider(api_key="k", base_url=f"{server.url}/v1", max_retries=0)
            ) as provider,
        ):
            server.queue_sse(
                [
                    chunk(call(0, "c1", "trio")),
                    chunk(call(1, "c2", "asyncio")),
                    chunk({}, "tool_calls"),
                    (None, "[DONE]"),
                ]
            )
            server.queue_sse([chunk({"content": "Both found."}, "stop"), (None, "[DONE]")])
            agent = create_agent(
                model="test-model",
                provider=provider,
                tools=[ToolDefinition(name="search", execute=search)],
                permission=create_rule_permission_policy(allow=["tool:search:execute"]),
                ledger=ledger,
            )
            return await host.run_agent(agent.session(), "search both")

    result = asyncio.run(main())
    assert result.final.content == (TextContent(text="Both found."),)
    assert sorted((r.call_id, r.status) for r in ledger.records) == [("c1", "ok"), ("c2", "ok")]


def test_cancelling_the_asyncio_task_closes_the_model_request(
    open_wire_server: Callable[[], AbstractAsyncContextManager[WireServer]],
) -> None:
    async def main() -> None:
        async with (
            open_asyncio_host() as host,
            host.enter(open_wire_server()) as server,
            host.enter(open_openai_provider(api_key="k", base_url=f"{server.url}/v1")) as provider,
        ):
            server.queue_sse([chunk({"content": "Thinking"})], hold_open=True)
            session = create_agent(model="test-model", provider=provider).session()
            task = asyncio.create_task(host.run_agent(session, "think"))
            await host.run(server.streaming.wait)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # The HTTP request was closed before the task ended.
            assert server.client_left.is_set()

    asyncio.run(main())


def test_provider_error_surfaces_in_asyncio_as_itself(
    open_wire_server: Callable[[], AbstractAsyncContextManager[WireServer]],
) -> None:
    async def main() -> None:
        async with (
            open_asyncio_host() as host,
            host.enter(open_wire_server()) as server,
            host.enter(
                open_openai_provider(api_key="k", base_url=f"{server.url}/v1", max_retries=0)
            ) as provider,
        ):
            server.queue_json(
                {"error": {"message": "bad key", "code": "invalid_api_key"}}, status=401
            )
            session = create_agent(model="test-model", provider=provider).session()
            with pytest.raises(ProviderAPIError, match="401 \\(invalid_api_key\\): bad key"):
                await host.run_agent(session, "hi")

    asyncio.run(main())


REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


def test_an_async_stream_sink_is_asyncio_code_under_the_host(
    open_wire_server: Callable[[], AbstractAsyncContextManager[WireServer]],
) -> None:
    # The application's sink puts each event on a bounded asyncio.Queue that
    # another asyncio task drains (a websocket writer, say): asyncio code, run
    # on the host's loop with the caller's context, awaited event by event.
    async def main() -> tuple[list[str], list[str], RunResult]:
        queue: asyncio.Queue[StreamEvent | None] = asyncio.Queue(maxsize=1)
        seen: list[str] = []
        texts: list[str] = []

        async def sink(event: StreamEvent) -> None:
            assert asyncio.current_task() is not None
            seen.append(REQUEST_ID.get())
            await queue.put(event)

        async def drain() -> None:
            while (event := await queue.get()) is not None:
                if isinstance(event, ModelTextDelta):
                    texts.append(event.text)
                elif isinstance(event, ModelResponseFinished):
                    texts.append("<end>")

        async with (
            open_asyncio_host() as host,
            host.enter(open_wire_server()) as server,
            host.enter(
                open_openai_provider(
                    api_key="k", base_url=f"{server.url}/v1", max_retries=0, on_event=sink
                )
            ) as provider,
        ):
            server.queue_sse(
                [chunk({"content": "Hel"}), chunk({"content": "lo"}, "stop"), (None, "[DONE]")]
            )
            drainer = asyncio.create_task(drain())
            REQUEST_ID.set("req-7")
            session = create_agent(model="test-model", provider=provider).session()
            result = await host.run_agent(session, "hi")
            await queue.put(None)
            await drainer
        return texts, seen, result

    texts, seen, result = asyncio.run(main())
    assert texts == ["Hel", "lo", "<end>"]
    assert seen == ["req-7"] * 3
    assert result.final.content == (TextContent(text="Hello"),)


def test_cancelling_the_caller_cancels_a_waiting_async_sink_and_the_request(
    open_wire_server: Callable[[], AbstractAsyncContextManager[WireServer]],
) -> None:
    async def main() -> list[str]:
        entered = asyncio.Event()
        ended: list[str] = []

        async def sink(event: StreamEvent) -> None:
            entered.set()
            try:
                await asyncio.Event().wait()  # a consumer that never takes it
            except asyncio.CancelledError:
                ended.append("cancelled")
                raise

        async with (
            open_asyncio_host() as host,
            host.enter(open_wire_server()) as server,
            host.enter(
                open_openai_provider(api_key="k", base_url=f"{server.url}/v1", on_event=sink)
            ) as provider,
        ):
            server.queue_sse([chunk({"content": "Thinking"})], hold_open=True)
            session = create_agent(model="test-model", provider=provider).session()
            task = asyncio.create_task(host.run_agent(session, "think"))
            await entered.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert ended == ["cancelled"]
            assert server.client_left.is_set()
        return ended

    assert asyncio.run(main()) == ["cancelled"]
