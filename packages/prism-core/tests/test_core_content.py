"""Contracts: content blocks, calls, results and messages are frozen values."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import pytest

import prism.core
from prism.core import (
    AssistantMessage,
    ImageContent,
    ReasoningContent,
    ResourceContent,
    ResourceLink,
    ScriptedProvider,
    TextContent,
    ToolCall,
    ToolDefinition,
    ToolResult,
    ToolResultMessage,
    UserMessage,
    create_agent,
    create_rule_permission_policy,
)

if TYPE_CHECKING:
    from prism.core import JsonObject, ToolExecutionContext


def test_text_result_holds_one_block() -> None:
    result = ToolResult.text("hello")
    assert result.content == (TextContent(text="hello"),)
    assert not result.is_error
    assert result.joined_text == "hello"


def test_error_result_keeps_details_for_hosts() -> None:
    result = ToolResult.error("went wrong", code="E1", retry=False)
    assert result.is_error
    assert result.joined_text == "went wrong"
    assert result.details == {"code": "E1", "retry": False}


def test_joined_text_skips_non_text_blocks() -> None:
    result = ToolResult(
        content=(
            TextContent(text="a"),
            ImageContent(data="AAAA", mime_type="image/png"),
            ResourceLink(uri="file:///x"),
            TextContent(text="b"),
        )
    )
    assert result.joined_text == "a\nb"


def test_content_sequences_become_tuples() -> None:
    result = ToolResult(content=[TextContent(text="a")])
    assert result.content == (TextContent(text="a"),)
    message = AssistantMessage(tool_calls=[ToolCall(id="1", name="t", arguments={})])
    assert isinstance(message.tool_calls, tuple)


@pytest.mark.parametrize("bad", ["text", b"bytes", 5])
def test_content_must_be_a_sequence_of_blocks(bad: object) -> None:
    with pytest.raises(TypeError, match="sequence"):
        ToolResult(content=bad)
    with pytest.raises(TypeError, match="sequence"):
        UserMessage(content=bad)


def test_values_are_frozen() -> None:
    call = ToolCall(id="1", name="t", arguments={})
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        call.name = "other"  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        ToolResult.text("x").is_error = True  # type: ignore[misc]


def test_values_compare_by_value() -> None:
    assert ToolResult.text("x") == ToolResult.text("x")
    assert ToolCall(id="1", name="t", arguments={"a": 1}) == ToolCall(
        id="1", name="t", arguments={"a": 1}
    )
    assert ResourceContent(uri="u", text="t") != ResourceContent(uri="u", blob="t")


def test_calls_and_results_are_hashable_even_with_dict_payloads() -> None:
    call = ToolCall(id="1", name="t", arguments={"a": [1]})
    result = ToolResult.error("x", code="E")
    assert hash(call) == hash(ToolCall(id="1", name="t", arguments={"a": [1]}))
    assert hash(result) == hash(ToolResult.error("x", code="E"))
    assert len({result, ToolResult.error("x", code="E")}) == 1


def test_messages_hold_their_parts() -> None:
    result = ToolResult.text("r")
    message = ToolResultMessage(call_id="1", tool_name="t", result=result)
    assert (message.call_id, message.tool_name, message.result) == ("1", "t", result)
    assert AssistantMessage().content == ()


def test_keyword_only_construction() -> None:
    with pytest.raises(TypeError):
        ToolCall("1", "t", {})  # type: ignore[call-arg]


def _examples(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


def test_package_docstring_example_runs() -> None:
    doc = prism.core.__doc__
    assert doc is not None
    example = doc.split("Example::", 1)[1]
    code = "\n".join(line[4:] for line in example.splitlines())
    exec(compile(code, "prism.core docstring", "exec"), {})


def test_readme_examples_run() -> None:
    readme = Path(__file__).resolve().parents[1] / "README.md"
    examples = _examples(readme.read_text(encoding="utf-8"))
    assert examples
    for index, code in enumerate(examples):
        exec(compile(code, f"README example {index}", "exec"), {"__name__": "readme_example"})


THINKING = ReasoningContent(
    text="The user wants the sum.",
    provider="anthropic",
    replay={
        "type": "thinking",
        "thinking": "The user wants the sum.",
        "signature": "c2lnbmVk" * 40,
    },
)


def test_reasoning_repr_shows_the_opaque_replay_only_as_a_size() -> None:
    shown = repr(THINKING)
    assert "c2lnbmVk" not in shown
    assert "The user wants the sum." in shown
    assert re.search(r"replay=<\d+ chars>", shown)
    assert "replay=None" in repr(ReasoningContent(text="shown only"))


def test_reasoning_is_a_frozen_hashable_content_block() -> None:
    message = AssistantMessage(content=[THINKING, TextContent(text="4")])
    assert message.content == (THINKING, TextContent(text="4"))
    assert hash(THINKING) == hash(attrs.evolve(THINKING, replay={"other": 1}))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        THINKING.text = "changed"  # type: ignore[misc]


async def test_the_agent_runtime_sends_reasoning_back_unchanged() -> None:
    call = ToolCall(id="c1", name="add", arguments={})
    provider = ScriptedProvider(
        [
            AssistantMessage(content=(THINKING,), tool_calls=(call,)),
            AssistantMessage(content=(TextContent(text="done"),)),
        ]
    )

    async def add(_args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        return ToolResult.text("4")

    agent = create_agent(
        model="m",
        provider=provider,
        tools=[ToolDefinition(name="add", execute=add)],
        permission=create_rule_permission_policy(allow=["tool:add:execute"]),
    )
    result = await agent.session().run("add")
    second = provider.requests[1].messages[1]
    assert isinstance(second, AssistantMessage)
    assert second.content[0] is THINKING
    assert [r.status for r in result.records] == ["ok"]
