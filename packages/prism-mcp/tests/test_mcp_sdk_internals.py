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
* The SDK's tool models type only ``type``, ``$schema``, ``required`` and the kind
  of each ``properties`` entry of a tool's schemas: the flood gate checks a
  ``tools/list`` page through skeletons of them (a differential test below).
* The gate builds a page's tools with the SDK's tool model one at a time and
  carries them past the SDK's page check in the page's ``_meta`` (a ``Listed``,
  a ``str``); the bridge hands them to ``ClientSession._absorb_tool_listing``
  a few at a time, as the SDK does with a page it checked itself (the
  2026-07-28 ``x-mcp-header`` maps and drops).
* The SDK's check of a ``tools/call`` result (``validate_server_result``) and its
  result model keep the value of a ``structuredContent`` member as it is: the gate
  carries the object past them in a ``Detached`` (a ``str``), and the bridge takes
  it back from the ``CallToolResult`` the session returns.
"""

from __future__ import annotations

import inspect
import json
from typing import TYPE_CHECKING, Any

import mcp_types
import pytest
import trio
from mcp import Client, StdioServerParameters
from mcp.client import session as client_session
from mcp_types import methods

from prism.mcp._content import plain_json
from prism.mcp._gate import (
    FREE_TEXT,
    LISTED_KEY,
    LONE_SURROGATE,
    MAX_MESSAGE_DEPTH,
    MAX_MESSAGE_NODES,
    MAX_TOOL_ICONS,
    _Gate,
    _nodes,
    listed_tools,
    shape_key,
    skeleton,
    tool_model,
)
from prism.mcp._wire import WireState

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
            absorb = getattr(type(session), "_absorb_tool_listing", None)
            assert callable(absorb), (
                "mcp's ClientSession._absorb_tool_listing is gone: prism.mcp hands it the "
                "tools the gate built; find where the SDK takes in a listed page now"
            )
            assert list(inspect.signature(absorb).parameters) == ["self", "result", "complete"]
            assert isinstance(getattr(session, "_x_mcp_header_maps", None), dict), (
                "mcp's ClientSession._x_mcp_header_maps is gone: prism.mcp prunes it after "
                "each listing; find where the SDK keeps x-mcp-header maps now"
            )


# -- the listing check: a page of skeletons passes the SDK exactly when the page does --

_SHAPES: list[object] = [
    {"type": "object"},
    {"type": "string"},
    {"properties": {"x": {}}},
    {"type": "object", "properties": {"x": {"type": "integer"}, "y": True}},
    {"type": "object", "properties": {"x": 3}},
    {"type": "object", "properties": []},
    {"type": "object", "required": ["a", 1]},
    {"type": "object", "required": "a"},
    {"type": "object", "$schema": 7},
    {"type": "object", "prefixItems": [{}] * 50, "$defs": {"a": {"type": "string"}}},
    {"type": ["object", "null"]},
    [],
    "object",
    None,
]


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
@pytest.mark.parametrize("field", ["inputSchema", "outputSchema"])
@pytest.mark.parametrize("shape", _SHAPES, ids=repr)
def test_a_skeleton_page_gets_the_sdks_own_verdict(version: str, field: str, shape: object) -> None:
    tool: dict[str, object] = {"name": "t", "inputSchema": {"type": "object"}, field: shape}
    if shape is None:
        del tool[field]
    extra: dict[str, object] = (
        {"cacheScope": "private", "resultType": "complete", "ttlMs": 0}
        if version == "2026-07-28"
        else {}
    )
    page = {"tools": [tool], **extra}

    def verdict(candidate: dict[str, object]) -> bool:
        try:
            methods.validate_server_result("tools/list", version, candidate)
            mcp_types.ListToolsResult.model_validate(candidate, by_name=False)
        except ValueError:
            return False
        return True

    assert verdict({"tools": [skeleton(tool)], **extra}) == verdict(page)
    # The gate checks and builds each tool alone, past the SDK's page check:
    # the same verdict, and the same tool the SDK's page model builds.
    built = tool_model(extra, tool, version)
    assert (type(built) is not str) == verdict(page)
    if type(built) is not str:
        sdk = mcp_types.ListToolsResult.model_validate(page, by_name=False).tools[0]
        assert built == sdk


def test_one_shape_key_is_one_skeleton() -> None:
    # The gate checks one skeleton per shape key: two tools with one key must have
    # one skeleton (free text blanked), whichever way the key was written.
    import itertools

    texts: list[object] = ["x", "", "y\u00e9", None, 5, ["x"]]
    properties: list[object] = [
        {"a": {"type": "string"}},
        {"a": {"type": "integer", "description": "d"}},
        {"a": {}},
        {"a": True},
        {"a": False},
        {"a": 1},
        {"a": 1.0},
        {"a": "x"},
        {"a": None},
        {"a": []},
        {"a": [{}]},
        {"a": [{"x": 1}]},
        {"a": {"type": "string"}, "b": True},
        {"b": True, "a": {"type": "string"}},
        {"__all__": {"type": "string"}},
        [],
        [{"a": 1}],
        [{"b": 2}],
        "x",
        None,
    ]
    schemas: list[object] = [
        *({"type": "object", "properties": entry} for entry in properties),
        {"type": "object"},
        {"type": "object", "required": ["a"]},
        {"type": "object", "required": "a"},
        {"type": "string", "properties": {"a": {}}},
        {"type": "object", "$schema": 7, "properties": {"a": {}}},
        {"type": "object", "other": {"a": 1}},
        [{"properties": {"a": 1}}],
        [{"properties": {"b": 2}}],
        "object",
        None,
    ]
    absent = object()
    tools: list[dict[str, object]] = []
    for name, title in itertools.product(texts, [*texts, absent]):
        for description in ("d", None, absent):
            tool = {"name": name, "title": title, "description": description}
            tools.append({k: v for k, v in tool.items() if v is not absent})
    for field, schema in itertools.product(("inputSchema", "outputSchema"), schemas):
        base: dict[str, object] = {"name": "t", "inputSchema": {"type": "object"}}
        tools.append({**base, field: schema})
        tools.append({**base, field: schema, "annotations": {"readOnlyHint": True}})
    tools.append({"name": "t", "inputSchema": {"type": "object"}, "annotations": {"x": 1}})
    tools.append({"name": "t", "inputSchema": {"type": "object"}, "annotations": {"x": 1.0}})
    tools.append({"name": "t", "inputSchema": {"type": "object"}, "annotations": {"x": True}})
    tools.append({"name": "t", "inputSchema": {"type": "object"}, "_meta": {"title": "a"}})
    skeletons: dict[bytes, str] = {}
    written = 0
    for tool in tools:
        key = shape_key(tool, "2025-11-25")
        assert key is not None, tool
        written += not key.startswith(b"{")
        text = json.dumps(skeleton(tool, blank=True))
        assert skeletons.setdefault(key, text) == text, (tool, key)
    # Most tools get the key written without the skeleton.
    assert written > len(tools) // 2


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
def test_a_tools_free_text_is_only_typed(version: str) -> None:
    # The gate checks one skeleton of each shape per page (the free-text fields
    # of a tool, when strings, written as ""): that holds only while the page
    # model and every model under it have no validator, and those fields are
    # plain strings with no constraint.
    import typing

    surface = methods.SERVER_RESULTS[("tools/list", version)]
    assert isinstance(surface, type)
    seen: set[type] = set()
    todo: list[object] = [surface]
    while todo:
        kind = todo.pop()
        if isinstance(kind, type) and hasattr(kind, "__pydantic_decorators__"):
            if kind in seen:
                continue
            seen.add(kind)
            model: Any = kind
            decorators = model.__pydantic_decorators__
            assert not decorators.validators, kind
            assert not decorators.field_validators, kind
            assert not decorators.root_validators, kind
            assert not decorators.model_validators, kind
            for field in model.model_fields.values():
                todo.append(field.annotation)
        else:
            todo.extend(typing.get_args(kind))
    tool = typing.get_args(surface.model_fields["tools"].annotation)[0]
    for name in FREE_TEXT:
        field = tool.model_fields[name]
        assert field.annotation in (str, str | None), name
        assert field.metadata == [], name
    assert len(seen) > 5


def test_plain_json_walks_without_copying_and_copies_what_is_not_plain() -> None:
    value = {"items": ["a" * 30] * 1_000, "n": [1, 2.5, None, True, {"k": []}]}
    assert plain_json(value) is value
    odd: dict[str, object] = {"t": (1, 2)}
    copied: object = plain_json(odd)
    assert copied == {"t": [1, 2]}
    assert copied is not odd
    with pytest.raises(ValueError, match="non-finite"):
        plain_json({"a": [float("nan")]})
    looped: list[object] = []
    looped.append([looped])
    with pytest.raises(ValueError, match="Circular reference"):
        plain_json(looped)


def test_plain_json_sorts_many_members_by_type_and_still_finds_what_is_not_plain() -> None:
    many = 40  # past the count whose members are sorted by type at C speed
    flat: dict[str, object] = {"i": [7] * many, "s": ["ab"] * many, "f": [1.5] * many}
    assert plain_json(flat) is flat
    # Finite floats whose sum passes a float's range, and an int no float holds.
    huge: list[object] = [*[1e308] * many, 10**400]
    assert plain_json(huge) is huge
    for bad in (float("nan"), float("inf"), float("-inf")):
        for around in ([1.5] * many, [1] * many, ["x", None, True] * many, [1e308] * many):
            with pytest.raises(ValueError, match="non-finite"):
                plain_json({"a": [*around, bad]})
    with pytest.raises(ValueError, match="non-finite"):
        plain_json([float("inf"), float("-inf"), *[0.5] * many])  # the sum is no number
    # The objects and arrays among many members are walked in turn.
    nested: list[object] = [*[{"b": [1.5] * many}] * many, [], {}]
    assert plain_json(nested) is nested
    with pytest.raises(ValueError, match="non-finite"):
        plain_json([*[{"b": 1}] * many, {"b": [float("nan")]}])
    with pytest.raises(ValueError, match="non-finite"):
        plain_json({f"k{n}": 1.0 if n else float("nan") for n in range(many)})
    # Not plain: copied (a tuple becomes a list, a str subclass a str, an int key text).
    copied: object = plain_json([*[1] * many, (2, 3)])
    assert copied == [*[1] * many, [2, 3]]
    keyed: dict[object, int] = {n: n for n in range(many)}
    assert plain_json(keyed) == {str(n): n for n in range(many)}

    class Text(str):
        pass

    odd: list[object] = [*["a"] * many, Text("b")]
    again = plain_json(odd)
    assert again == odd
    assert isinstance(again, list)
    assert again is not odd
    assert type(again[-1]) is str


def test_the_gate_counts_many_members_by_type_and_still_refuses_each_problem() -> None:
    many = 40  # past the count whose members are sorted by type at C speed
    assert _nodes({"a": [7] * 5_000, "b": ["ab"] * 5_000, "c": [1.5, None, True] * many}) == 4
    assert _nodes({"a": [[], {}, [1]] * many}) == 2 + 3 * many
    assert _nodes({n: [] for n in range(many)}) == 1 + many  # keys no parse makes
    # A lone surrogate anywhere among many strings, in any joined slice, keys too.
    for strings in (
        ["ab"] * 5_000 + ["\ud800"],
        ["ab"] * 4_097 + ["x\udfff"] + ["ab"] * 10,
        ["\ud800", "\udc00"] + ["x"] * many,  # a high and a low: two lone ones
        [1, None, *["ab"] * many, "\ud800"],
        [*[1] * many, ["\ud800"]],
    ):
        assert _nodes({"a": strings}) == LONE_SURROGATE
    assert _nodes({**{f"k{n}": 1 for n in range(many)}, "\ud800": 1}) == LONE_SURROGATE
    assert _nodes({**{f"k{n}": 1 for n in range(many)}, "v": "\udc00"}) == LONE_SURROGATE
    assert _nodes({**{f"k{n}": "ab" for n in range(many)}, "v": "\udc00"}) == LONE_SURROGATE
    # The caps on objects and on depth, counted in arrays of many members.
    too_many = _nodes([*[7] * many, *[[]] * MAX_MESSAGE_NODES])
    assert too_many == f"more than {MAX_MESSAGE_NODES} objects and arrays"
    deep: list[object] = [7] * many
    for _ in range(MAX_MESSAGE_DEPTH):
        deep = [*[7] * many, deep]
    assert _nodes(deep) == f"objects and arrays nested more than {MAX_MESSAGE_DEPTH} deep"


async def test_the_gate_drops_only_the_tools_the_sdk_would_refuse() -> None:
    async def answer(page: dict[str, object]) -> tuple[list[object], list[tuple[str, str]]]:
        gate = _Gate(limit=4, state=WireState(), write=None)
        gate.version = "2025-11-25"
        gate.track(1, "tools/list")
        sent = json.loads(json.dumps(page))
        message = mcp_types.JSONRPCResponse(jsonrpc="2.0", id=1, result=page)
        await gate.answered(message)
        if page.get("nextCursor") == 5:
            # left as it came but for its tools: the SDK never builds one the gate did not
            assert message.result == {**sent, "tools": []}
            return [], gate.state.dropped_tools
        # What the SDK gets (mended as its session mends it), then what the bridge
        # takes from the page the SDK built.
        raw = dict(message.result)
        client_session._clamp_inbound_ttl(raw)
        for name in client_session._later_revision_fields("tools/list", "2025-11-25"):
            raw.pop(name, None)
        methods.validate_server_result("tools/list", "2025-11-25", raw)
        built = mcp_types.ListToolsResult.model_validate(raw, by_name=False)
        tools: list[object] = [
            tool.model_dump(by_alias=True, exclude_none=True) for tool in listed_tools(built)
        ]
        return tools, gate.state.dropped_tools

    good = {"name": "a", "inputSchema": {"type": "object"}}
    bad = {"name": "b", "inputSchema": {"type": "object"}, "outputSchema": {"type": "string"}}
    kept, dropped = await answer({"tools": [good, bad], "nextCursor": "x"})
    assert kept == [good]
    assert [name for name, _ in dropped] == ["'b'"]
    assert "outputSchema" in dropped[0][1]
    # One shape checked once per page: a tool of a shape that passed, but whose
    # free text is not a string, is still refused (by the page model, and the
    # SDK's tool model types those fields alike); its own text (another name,
    # title or description) never changes a verdict; another shape is checked.
    texts = {"title": "T", "description": "\ud800" * 3}
    odd: list[object] = [{**good, "name": 5}, {**good, "title": 7}, {**good, "description": ["d"]}]
    kept, dropped = await answer({"tools": [good, *odd, {**good, "name": "z", **texts}, bad]})
    assert kept == [good, {**good, "name": "z", **texts}]
    assert [name for name, _ in dropped] == ["5", "'a'", "'a'", "'b'"]
    # A server's own _meta stays; one naming the gate's carrier cannot stand for it.
    forged = {LISTED_KEY: "io.prism/listed"}
    kept, dropped = await answer({"tools": [bad], "_meta": forged})
    assert kept == []
    kept, dropped = await answer({"tools": [good], "_meta": {"k": 1}})
    assert kept == [good]
    # Fields the SDK's session mends or leaves out before its models see the page (a
    # negative ttlMs is floored, a later revision's fields are dropped on 2025-11-25)
    # do not turn the gate off: each tool is still checked and built alone.
    for mended in ({"ttlMs": -1}, {"cacheScope": "x"}):
        kept, dropped = await answer({"tools": [good, bad, 7], **mended})
        assert kept == [good]
        assert [name for name, _ in dropped] == ["'b'", "7"]
    # Icons past MAX_TOOL_ICONS are never used: left out before the check (the SDK's
    # models build an object per icon, in one step); the ones kept are checked as ever.
    icon = {"src": "https://a.example/i.png", "sizes": ["16x16"]}
    icons: list[object] = [icon] * 5000
    icons[MAX_TOOL_ICONS] = {"src": 7}  # (the SDK would refuse the tool for it)
    many = {"name": "m", "inputSchema": {"type": "object"}, "icons": icons}
    kept, dropped = await answer({"tools": [many]})
    assert kept == [{**many, "icons": [icon] * MAX_TOOL_ICONS}]
    assert dropped == []
    early = {**many, "name": "e", "icons": [icon, {"src": 7}, *[icon] * 100]}
    kept, dropped = await answer({"tools": [early]})
    assert kept == []
    assert [name for name, _ in dropped] == ["'e'"]
    assert dropped[0][1].startswith("tools.0.icons.1.src:")
    # A page wrong in itself (a cursor that is not a string) is refused by the SDK:
    # no tool is blamed for it, and none reaches the SDK unchecked.
    wrong = {"tools": [good, bad], "nextCursor": 5}
    kept, dropped = await answer(wrong)
    assert dropped == [("(page)", "the page around the tools is refused")]
    with pytest.raises(ValueError, match="nextCursor"):
        mcp_types.ListToolsResult.model_validate(wrong, by_name=False)


class _Steps(trio.abc.Instrument):
    """Counts the steps one task takes (each is one run between two checkpoints)."""

    def __init__(self) -> None:
        self.task: trio.lowlevel.Task | None = None
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self.steps += 1


async def test_the_gate_lets_other_tasks_run_by_the_size_of_the_tools_checked() -> None:
    """Five tools of 3,000 objects each are three steps, not one (checkpoints are
    placed by the objects and arrays checked, not only every 64 tools; a tool of
    more than 4,096 is checked on a worker thread)."""
    gate = _Gate(limit=4, state=WireState(), write=None)
    gate.version = "2025-11-25"
    gate.track(1, "tools/list")
    tools = [
        {"name": f"t{n}", "inputSchema": {"type": "object"}, "_meta": {"x": [{}] * 3000}}
        for n in range(5)
    ]
    message = mcp_types.JSONRPCResponse(jsonrpc="2.0", id=1, result={"tools": tools})
    steps = _Steps()
    trio.lowlevel.add_instrument(steps)
    try:
        steps.task = trio.lowlevel.current_task()
        await gate.answered(message)
    finally:
        trio.lowlevel.remove_instrument(steps)
    assert steps.steps == 2
    carried = message.result["_meta"][LISTED_KEY]
    assert [tool.name for tool in carried.tools] == ["t0", "t1", "t2", "t3", "t4"]


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25", "2026-07-28"])
def test_the_sdk_keeps_a_carried_structured_content_as_it_is(version: str) -> None:
    from mcp.client.session import _build_call_tool_adapter

    from prism.mcp._gate import DETACHED_KEY, Detached, attach

    value: dict[str, object] = {"items": [{"id": 1}]}
    raw: dict[str, object] = {
        "content": [],
        "structuredContent": {DETACHED_KEY: Detached(value)},
    }
    if version == "2026-07-28":
        raw["resultType"] = "complete"
    methods.validate_server_result("tools/call", version, raw)
    result = _build_call_tool_adapter({}).validate_python(raw, by_name=False)
    assert isinstance(result, mcp_types.CallToolResult)
    attach(result)
    assert result.structured_content is value
