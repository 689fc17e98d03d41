"""The tool registry, tool definitions and exact-name filters."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prism.core import (
    ConfigurationError,
    DuplicateToolError,
    PrismError,
    ToolDefinition,
    ToolFilter,
    ToolRegistry,
    create_tool_registry,
    filter_tools,
    is_tool_allowed,
)
from prism.core.testing import RecordingTool, echo_tool


def _tool(name: str, description: str | None = None) -> ToolDefinition:
    return ToolDefinition(
        name=name, execute=RecordingTool(name=name).execute, description=description
    )


# --- ToolDefinition --------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", None, 3])
def test_tool_definition_rejects_bad_names(name: object) -> None:
    with pytest.raises(ConfigurationError, match="name"):
        ToolDefinition(name=name, execute=RecordingTool().execute)  # type: ignore[arg-type]


def test_tool_definition_rejects_a_non_callable_execute() -> None:
    with pytest.raises(ConfigurationError, match="execute"):
        ToolDefinition(name="x", execute="not callable")  # type: ignore[arg-type]


def test_tool_definition_defaults() -> None:
    tool = _tool("x")
    assert (tool.description, tool.parameters, tool.exclusive) == (None, None, False)


# --- registry --------------------------------------------------------------------------


def test_registry_keeps_insertion_order() -> None:
    registry = create_tool_registry([_tool("b"), _tool("a"), _tool("c")])
    assert [t.name for t in registry.list()] == ["b", "a", "c"]
    assert [t.name for t in registry] == ["b", "a", "c"]
    assert len(registry) == 3
    assert "a" in registry
    assert "z" not in registry


def test_duplicate_error_is_the_default() -> None:
    with pytest.raises(DuplicateToolError, match="'a'") as info:
        create_tool_registry([_tool("a"), _tool("a")])
    assert info.value.name == "a"
    assert isinstance(info.value, PrismError)


def test_register_duplicate_raises_and_keeps_the_first() -> None:
    first = _tool("a", "first")
    registry = create_tool_registry([first])
    with pytest.raises(DuplicateToolError):
        registry.register(_tool("a", "second"))
    assert registry.get("a") is first


def test_duplicate_replace_replaces_in_place() -> None:
    registry = create_tool_registry(
        [_tool("a", "old"), _tool("b"), _tool("a", "new")], duplicate="replace"
    )
    assert [(t.name, t.description) for t in registry.list()] == [("a", "new"), ("b", None)]
    registry.register(_tool("b", "newer"))
    assert [(t.name, t.description) for t in registry.list()] == [("a", "new"), ("b", "newer")]


def test_unregister_removes_and_returns() -> None:
    tool = _tool("a")
    registry = create_tool_registry([tool, _tool("b")])
    assert registry.unregister("a") is tool
    assert registry.unregister("a") is None
    assert registry.get("a") is None
    assert [t.name for t in registry.list()] == ["b"]


def test_reregistering_after_unregister_goes_to_the_end() -> None:
    registry = create_tool_registry([_tool("a"), _tool("b")])
    registry.unregister("a")
    registry.register(_tool("a"))
    assert [t.name for t in registry.list()] == ["b", "a"]


def test_list_and_iteration_are_snapshots() -> None:
    registry = create_tool_registry([_tool("a"), _tool("b")])
    listed = registry.list()
    for tool in registry:
        registry.unregister(tool.name)
    assert len(registry) == 0
    assert [t.name for t in listed] == ["a", "b"]


def test_register_rejects_non_definitions() -> None:
    registry = create_tool_registry()
    with pytest.raises(TypeError, match="ToolDefinition"):
        registry.register({"name": "x"})  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["ignore", "", None])
def test_bad_duplicate_option_raises_naming_it(value: object) -> None:
    with pytest.raises(ConfigurationError, match="duplicate"):
        create_tool_registry(duplicate=value)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="duplicate"):
        ToolRegistry(duplicate=value)  # type: ignore[arg-type]


# --- filters ---------------------------------------------------------------------------


def test_no_filters_allow_everything() -> None:
    assert is_tool_allowed("anything")


def test_empty_filter_allows_everything() -> None:
    assert is_tool_allowed("anything", ToolFilter())


def test_allow_is_exact_names() -> None:
    only = ToolFilter(allow=frozenset({"read"}))
    assert is_tool_allowed("read", only)
    assert not is_tool_allowed("reader", only)
    assert not is_tool_allowed("rea", only)
    assert not is_tool_allowed("READ", only)
    assert not is_tool_allowed("*", only)


def test_deny_wins_over_allow_in_the_same_filter() -> None:
    both = ToolFilter(allow=frozenset({"read"}), deny=frozenset({"read"}))
    assert not is_tool_allowed("read", both)


def test_every_non_empty_allow_must_allow() -> None:
    first = ToolFilter(allow=frozenset({"read", "write"}))
    second = ToolFilter(allow=frozenset({"read", "shell"}))
    assert is_tool_allowed("read", first, second)
    assert not is_tool_allowed("write", first, second)
    assert not is_tool_allowed("shell", first, second)


def test_a_deny_in_any_filter_wins() -> None:
    allow = ToolFilter(allow=frozenset({"read"}))
    deny = ToolFilter(deny=frozenset({"read"}))
    assert not is_tool_allowed("read", allow, deny)


def test_filter_tools_keeps_the_original_order() -> None:
    tools = [_tool(n) for n in ["d", "a", "c", "b"]]
    kept = filter_tools(tools, ToolFilter(deny=frozenset({"c"})))
    assert [t.name for t in kept] == ["d", "a", "b"]


def test_filter_accepts_any_iterable_of_names() -> None:
    f = ToolFilter(allow=["a", "b"], deny=("c",))
    assert f.allow == frozenset({"a", "b"})
    assert f.deny == frozenset({"c"})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"allow": "read"}, "ToolFilter.allow"), ({"deny": [1]}, "ToolFilter.deny")],
)
def test_filter_rejects_bad_names(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        ToolFilter(**kwargs)  # type: ignore[arg-type]


_names = st.text(alphabet="abcd", min_size=1, max_size=2)
_name_sets = st.frozensets(_names, max_size=4)


@given(
    name=_names,
    filters=st.lists(st.builds(ToolFilter, allow=_name_sets, deny=_name_sets), max_size=4),
)
def test_is_tool_allowed_matches_its_definition(name: str, filters: list[ToolFilter]) -> None:
    expected = all(name not in f.deny for f in filters) and all(
        not f.allow or name in f.allow for f in filters
    )
    assert is_tool_allowed(name, *filters) == expected
    tools = [echo_tool(name)]
    assert (filter_tools(tools, *filters) == tools) == expected
