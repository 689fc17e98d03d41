"""Hostile arguments: whatever the model sends, a tool answers with a result and stays contained."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prism.coding.tools import create_coding_tools
from prism.core import (
    ExecutionAction,
    ExecutionDecision,
    JsonObject,
    JsonValue,
    ToolCall,
    ToolExecutionContext,
    ToolResult,
)

if TYPE_CHECKING:
    from pathlib import Path

_json: st.SearchStrategy[JsonValue] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
_paths = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        ["../../etc/passwd", "/etc/shadow", "~/.ssh/id_rsa", "a\0b", "\ud800", ".", "/", "x" * 5000]
    ),
)
_arguments = st.fixed_dictionaries(
    {},
    optional={
        "path": st.one_of(_paths, _json),
        "content": st.one_of(st.text(max_size=50), _json),
        "offset": st.one_of(st.integers(-5, 10**12), _json),
        "limit": st.one_of(st.integers(-5, 10**12), _json),
        "edits": st.one_of(
            st.lists(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "old_text": st.one_of(st.text(max_size=10), _json),
                        "new_text": st.one_of(st.text(max_size=10), _json),
                    },
                ),
                max_size=3,
            ),
            _json,
        ),
        "command": st.one_of(st.text(max_size=30), _json),
        "timeout": _json,
    },
).map(lambda d: dict(d))


class ContainedOnly:
    """Allows file actions under ``root`` only and refuses every shell command."""

    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self.allowed: list[ExecutionAction] = []

    def check(self, action: ExecutionAction) -> ExecutionDecision:
        if action.kind == "shell":
            return ExecutionDecision(allowed=False, reason="no shell in this test")
        inside = all(p == self.root or p.startswith(self.root + os.sep) for p in action.paths)
        if inside:
            self.allowed.append(action)
        return ExecutionDecision(allowed=inside, reason=None if inside else "outside root")


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(tool_index=st.integers(0, 3), arguments=_arguments)
def test_any_arguments_give_a_result_and_nothing_escapes_the_root(
    tmp_path: Path, tool_index: int, arguments: JsonObject
) -> None:
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    policy = ContainedOnly(root)
    tool = create_coding_tools(str(root), execution_policy=policy)[tool_index]

    async def call() -> ToolResult:
        ctx = ToolExecutionContext(call=ToolCall(id="f", name=tool.name, arguments=arguments))
        with trio.fail_after(10):
            return await tool.execute(arguments, ctx)

    result = trio.run(call)
    assert isinstance(result, ToolResult)
    assert result.content
    for action in policy.allowed:
        assert all(p.startswith(str(root)) for p in action.paths)
    assert sorted(os.listdir(tmp_path)) == ["root"]
