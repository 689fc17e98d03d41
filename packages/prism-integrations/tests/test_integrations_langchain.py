"""LangGraph's create_react_agent with Prism's gates, driven by a scripted tool-calling chat model.

The chat model is LangChain's own fake chat model taught ``bind_tools`` (what
``create_react_agent`` asks of a model); it answers with scripted tool calls,
then with every tool message it saw. Calls are allowed, denied by permission,
refused by validation and asked through approval; each refusal is an error
``ToolMessage`` and the run goes on; the ledger holds the run id and the call ids.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Annotated, Any

import attrs
import pytest
from integrations_kit import Approvals, gates
from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig  # noqa: TC002 (@tool reads it at run time)
from langchain_core.tools import BaseTool, InjectedToolCallId, ToolException, tool
from langgraph.prebuilt import create_react_agent
from pydantic import Field

from prism.core import (
    MiddlewareRegistry,
    ToolResult,
    create_rule_permission_policy,
    open_asyncio_host,
)
from prism.core.ledger import RunLedger, ToolCallRecord
from prism.integrations import PrismGate
from prism.integrations.langchain import (
    PrismGatedTool,
    gate_langchain_tool,
    prism_langchain_tools,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from langchain_core.callbacks import CallbackManagerForLLMRun
    from langchain_core.runnables import Runnable

# create_react_agent moved to the langchain package in LangGraph 1.0 and says so
# when called; it is still what LangGraph ships, and what these tests drive.
pytestmark = pytest.mark.filterwarnings(
    "ignore:create_react_agent has been moved:DeprecationWarning"
)


class ScriptedChatModel(BaseChatModel):
    """A tool-calling chat model that plays a script, then reports the tool messages it saw."""

    turns: list[list[dict[str, Any]]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-tool-calling"

    def bind_tools(
        self, tools: Sequence[Any], **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        asked = sum(1 for m in messages if isinstance(m, AIMessage))
        if asked < len(self.turns):
            message = AIMessage(content="", tool_calls=self.turns[asked])
        else:
            seen = {
                m.tool_call_id: [m.status, str(m.content)]
                for m in messages
                if isinstance(m, ToolMessage)
            }
            message = AIMessage(content=json.dumps(seen, sort_keys=True))
        return ChatResult(generations=[ChatGeneration(message=message)])


def call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def run_agent(
    model: ScriptedChatModel,
    make_tools: Callable[[PrismGate], list[BaseTool]],
    approvals: Approvals,
    ledger: RunLedger,
    **overrides: Any,
) -> tuple[dict[str, list[str]], list[ToolCallRecord]]:
    async def main() -> tuple[dict[str, list[str]], list[ToolCallRecord]]:
        answering = asyncio.create_task(approvals.answer_forever())
        try:
            async with open_asyncio_host() as host:
                gate = PrismGate(host, attrs.evolve(gates(approvals, ledger), **overrides))
                agent = create_react_agent(model, make_tools(gate))
                state = await agent.ainvoke(
                    {"messages": [("user", "do the things")]},
                    config={"configurable": {"thread_id": "thread-7"}},
                )
                return json.loads(state["messages"][-1].content), gate.records("thread-7")
        finally:
            answering.cancel()
            with pytest.raises(asyncio.CancelledError):
                await answering

    return asyncio.run(main())


def test_prism_tools_in_create_react_agent() -> None:
    ledger = RunLedger()
    approvals = Approvals(answers={"deploy staging": True, "deploy prod": False})
    model = ScriptedChatModel(
        turns=[
            [call("add", {"a": 2, "b": 3}, "c-add"), call("secret", {}, "c-secret")],
            [
                call("add", {"a": -1, "b": 3}, "c-invalid"),
                call("deploy", {"target": "staging"}, "c-yes"),
            ],
            [call("deploy", {"target": "prod"}, "c-no")],
        ]
    )
    told, kept = run_agent(model, prism_langchain_tools, approvals, ledger)
    assert told["c-add"] == ["success", "5"]
    assert told["c-yes"] == ["success", "deployed staging"]
    assert told["c-secret"][0] == "error"
    assert "permission denied for tool:secret:execute" in told["c-secret"][1]
    assert told["c-invalid"][0] == "error"
    assert "add: a must not be negative" in told["c-invalid"][1]
    assert told["c-no"][0] == "error"
    assert "the operator said no" in told["c-no"][1]
    assert approvals.asked == ["deploy staging", "deploy prod"]
    assert {r.call_id: r.status for r in kept} == {
        "c-add": "ok",
        "c-secret": "blocked",
        "c-invalid": "blocked",
        "c-yes": "ok",
        "c-no": "error",
    }
    assert {r.run_id for r in kept} == {"thread-7"}


def test_gated_existing_langchain_tools_in_create_react_agent() -> None:
    ran: list[str] = []

    @tool
    async def weather(city: str) -> str:
        """The weather in a city."""
        await asyncio.sleep(0)
        ran.append(city)
        return f"sunny in {city}"

    @tool
    def shutdown() -> str:
        """Never allowed."""
        raise AssertionError("denied")

    @tool
    def broken(n: int) -> str:
        """Fails with LangChain's tool error."""
        raise ToolException("broken on purpose")

    model = ScriptedChatModel(
        turns=[
            [
                call("weather", {"city": "Oslo"}, "w-weather"),
                call("shutdown", {}, "w-shutdown"),
                call("broken", {"n": 1}, "w-broken"),
                call("broken", {"n": -1}, "w-invalid"),
            ]
        ]
    )

    def wrap(gate: PrismGate) -> list[BaseTool]:
        return [gate_langchain_tool(t, gate) for t in (weather, shutdown, broken)]

    told, kept = run_agent(
        model,
        wrap,
        Approvals(answers={}),
        RunLedger(),
        permission=create_rule_permission_policy(
            allow=["tool:*:execute"], deny=["tool:shutdown:execute"]
        ),
    )
    assert told["w-weather"] == ["success", "sunny in Oslo"]
    assert ran == ["Oslo"]
    assert told["w-shutdown"][0] == "error"
    assert "permission denied for tool:shutdown:execute" in told["w-shutdown"][1]
    assert told["w-broken"] == ["error", "broken on purpose"]
    assert told["w-invalid"][0] == "error"
    assert "broken: n must not be negative" in told["w-invalid"][1]
    assert {r.call_id: r.status for r in kept} == {
        "w-weather": "ok",
        "w-shutdown": "blocked",
        "w-broken": "error",
        "w-invalid": "blocked",
    }


def test_the_langchain_tools_are_async_only_and_refuse_what_is_not_theirs() -> None:
    async def main() -> None:
        async with open_asyncio_host() as host:
            gate = PrismGate(host, gates(Approvals(answers={}), RunLedger()))
            (add, *_) = prism_langchain_tools(gate)
            with pytest.raises(NotImplementedError, match="asynchronously"):
                add.invoke({"a": 1, "b": 2})
            assert await add.ainvoke({"a": 1, "b": 2}) == "3"
            with pytest.raises(TypeError, match="BaseTool"):
                gate_langchain_tool("weather", gate)  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="PrismGate"):
                prism_langchain_tools(host)  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="PrismGate"):
                gate_langchain_tool(add, host)  # type: ignore[arg-type]
            gated = gate_langchain_tool(add, gate)
            assert isinstance(gated, PrismGatedTool)
            assert await gated.ainvoke({"a": 2, "b": 2}) == "4"

    asyncio.run(main())


def test_run_ids_from_metadata_and_a_result_rewritten_by_middleware() -> None:
    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    middleware = MiddlewareRegistry()

    @middleware.on_tool_result
    def shout(_call: object, result: ToolResult, _ctx: object) -> ToolResult:
        return ToolResult.text(result.joined_text.upper())

    ledger = RunLedger()

    async def main() -> tuple[object, object, list[ToolCallRecord]]:
        async with open_asyncio_host() as host:
            options = attrs.evolve(gates(Approvals(answers={}), ledger), middleware=middleware)
            gate = PrismGate(host, options)
            gated = gate_langchain_tool(echo, gate)
            named = await gated.ainvoke(
                call("echo", {"text": "hi"}, "m-1"), config={"metadata": {"prism_run_id": "run-9"}}
            )
            # Called outside any graph or configured run: the gate's own ledger records it.
            bare = await gated.ainvoke({"text": "plain"})
            return named, bare, gate.records("run-9")

    named, bare, kept = asyncio.run(main())
    assert isinstance(named, ToolMessage)
    assert named.content == "HI"
    assert bare == "PLAIN"
    assert [(r.call_id, r.run_id) for r in kept] == [("m-1", "run-9")]
    (record,) = ledger.records
    assert record.call_id.startswith("langchain-")


class ToolRuns(AsyncCallbackHandler):
    """Counts LangChain's tool runs (a gated call is one run, as the wrapped tool alone)."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.ended = 0

    async def on_tool_start(
        self, serialized: dict[str, Any], input_str: str, **kwargs: Any
    ) -> None:
        self.started.append(serialized["name"])

    async def on_tool_end(self, output: Any, **kwargs: Any) -> None:
        self.ended += 1


def test_a_gated_call_is_one_langchain_run_with_the_wrapped_tools_own_parsing() -> None:
    # The wrapped tool is run inside the gated tool's run, with its own argument
    # parsing: the model's call id injected, the run's config handed over, and
    # its content-and-artifact answer kept whole for LangChain.
    seen: dict[str, object] = {}

    @tool(response_format="content_and_artifact")
    async def lookup(
        city: str, call_id: Annotated[str, InjectedToolCallId], config: RunnableConfig
    ) -> tuple[str, dict[str, str]]:
        """Look a city up."""
        seen["call_id"] = call_id
        seen["run_id"] = (config.get("metadata") or {}).get("prism_run_id")
        return f"found {city}", {"city": city}

    ledger = RunLedger()
    runs = ToolRuns()

    async def main() -> tuple[object, list[ToolCallRecord]]:
        async with open_asyncio_host() as host:
            gate = PrismGate(host, gates(Approvals(answers={}), ledger))
            gated = gate_langchain_tool(lookup, gate)
            answer = await gated.ainvoke(
                call("lookup", {"city": "Oslo"}, "m-7"),
                config={"callbacks": [runs], "metadata": {"prism_run_id": "run-3"}},
            )
            return answer, gate.records("run-3")

    message, kept = asyncio.run(main())
    assert isinstance(message, ToolMessage)
    assert (message.content, message.artifact, message.status) == (
        "found Oslo",
        {"city": "Oslo"},
        "success",
    )
    assert seen == {"call_id": "m-7", "run_id": "run-3"}
    assert (runs.started, runs.ended) == (["lookup"], 1)
    # Prism records what the model was shown: the content.
    assert [(r.call_id, r.status, r.result_preview) for r in kept] == [("m-7", "ok", "found Oslo")]
