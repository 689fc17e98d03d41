"""The positional constructors of the values every call builds make what attrs makes."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import attrs
import pytest

from prism.core import (
    AbortController,
    TextContent,
    ToolCall,
    ToolExecutionContext,
    ToolExecutionFinished,
    ToolExecutionStarted,
    ToolResult,
)
from prism.core._events import build_finished, build_started
from prism.core._fast import frozen_builder
from prism.core._tools import NO_SIGNAL, build_context

if TYPE_CHECKING:
    from prism.core import JsonObject


def test_built_values_are_the_values_attrs_builds() -> None:
    arguments: JsonObject = {"q": [1, {"a": None}]}
    now = time.time()
    started = build_started("c1", "search", arguments, now)
    assert type(started) is ToolExecutionStarted
    assert started == ToolExecutionStarted(
        call_id="c1", tool_name="search", arguments=arguments, timestamp=now
    )
    assert started.arguments is arguments
    result = ToolResult.text("found", is_error=True)
    assert type(result) is ToolResult
    assert result == ToolResult(content=(TextContent(text="found"),), is_error=True)
    assert hash(result) == hash(ToolResult(content=[TextContent(text="found")], is_error=True))
    assert result.details == {}
    assert result.structured is None
    finished = build_finished("c1", "search", result, 0.5, now)
    assert finished == ToolExecutionFinished(
        call_id="c1", tool_name="search", result=result, duration_s=0.5, timestamp=now
    )
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        finished.duration_s = 1.0  # type: ignore[misc]
    # Two results never share their details.
    assert ToolResult.text("a").details is not ToolResult.text("a").details


def test_a_subclass_of_tool_result_is_built_by_its_own_init() -> None:
    @attrs.frozen(kw_only=True)
    class Tagged(ToolResult):
        tag: str = "t"

    made = Tagged.text("x")
    assert type(made) is Tagged
    assert made.tag == "t"


def test_a_class_the_builder_would_not_build_faithfully_is_refused() -> None:
    @attrs.frozen
    class Checked:
        n: int = attrs.field(validator=attrs.validators.instance_of(int))

    @attrs.frozen
    class Converted:
        n: int = attrs.field(converter=int)

    @attrs.frozen
    class AfterInit:
        n: int

        def __attrs_post_init__(self) -> None: ...

    @attrs.frozen
    class Hidden:
        n: int = attrs.field(init=False, default=0)

    @attrs.frozen(slots=False)
    class Unslotted:
        n: int

    class Plain:
        __slots__ = ("n",)

    @attrs.frozen
    class Base:
        n: int

    @attrs.frozen
    class Child(Base):  # n's slot is Base's
        m: int = 0

    for cls in (Checked, Converted, AfterInit, Hidden, Unslotted, Plain, Child):
        with pytest.raises(TypeError):
            frozen_builder(cls)
    assert frozen_builder(Converted, converted=frozenset({"n"}))(3) == Converted(3)


def test_a_built_context_is_the_context_attrs_builds() -> None:
    call = ToolCall(id="1", name="t", arguments={})
    events: list[object] = []
    signal = AbortController().signal
    built = build_context(call, signal, {"k": 1}, events.append)
    made = ToolExecutionContext(call, signal=signal, metadata={"k": 1}, on_event=events.append)
    assert type(built) is ToolExecutionContext
    assert attrs.asdict(built, recurse=False) == attrs.asdict(made, recurse=False)
    assert build_context(call, NO_SIGNAL, {}, None).signal is ToolExecutionContext(call).signal
    built.report_progress("half", progress=1, total=2)  # the sink it was given
    assert [type(e).__name__ for e in events] == ["ToolExecutionProgress"]
    other = ToolCall(id="1", name="u", arguments={})
    built.call = other  # still a plain mutable context (middleware rewrites it)
    assert built.call is other
