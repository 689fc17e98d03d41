"""Annotations kept and usable by policies; structuredContent checked against outputSchema."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import trio

from prism.core import (
    DispatchOptions,
    ImageContent,
    PermissionRequest,
    TextContent,
    ToolCall,
    ToolExecutionContext,
    ToolResult,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.core.ledger import RunLedger
from prism.mcp import (
    McpElicitation,
    McpElicitationAnswer,
    McpToolAnnotations,
    McpToolInfo,
    StdioTransport,
    create_mcp_permission_policy,
    open_mcp_tools,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from prism.mcp import McpToolBridge

TESTS = Path(__file__).resolve().parent
SHAPES = StdioTransport(sys.executable, [str(TESTS / "mcp_flood_server.py"), "shapes", "0"])


@pytest.fixture
async def shapes() -> AsyncIterator[McpToolBridge]:
    with trio.fail_after(20):
        async with open_mcp_tools(server_id="sh", transport=SHAPES, protocol="legacy") as bridge:
            yield bridge


async def run(bridge: McpToolBridge, name: str) -> ToolResult:
    tool = next(tool for tool in bridge.tools if tool.name == f"mcp:sh:{name}")
    ctx = ToolExecutionContext(ToolCall(id="s", name=tool.name, arguments={}))
    with trio.fail_after(20):
        return await tool.execute({}, ctx)


async def test_tool_annotations_and_title_are_kept(shapes: McpToolBridge) -> None:
    info = shapes.tool_info["mcp:sh:good"]
    assert info.title == "Good tool"
    assert info.annotations == McpToolAnnotations(
        title="Good tool", read_only_hint=True, open_world_hint=False
    )
    assert info.annotations.read_only
    assert not info.annotations.destructive
    assert info.output_schema is not None
    assert len(info.definition_hash) == 64


def test_missing_hints_take_the_spec_defaults() -> None:
    hints = McpToolAnnotations()
    assert hints.destructive
    assert hints.open_world
    assert not hints.read_only


async def test_results_carry_the_hash_of_the_definition_they_ran_against(
    shapes: McpToolBridge,
) -> None:
    result = await run(shapes, "good")
    assert not result.is_error, result.joined_text
    assert result.details["mcp_definition_hash"] == shapes.tool_info["mcp:sh:good"].definition_hash


async def test_the_ledger_records_the_hash_of_the_definition_a_call_ran_against(
    shapes: McpToolBridge,
) -> None:
    tool = next(t for t in shapes.tools if t.name == "mcp:sh:good")
    expected = shapes.tool_info["mcp:sh:good"].definition_hash
    assert tool.definition_hash == expected
    ledger = RunLedger()
    options = DispatchOptions(registry=create_tool_registry([tool]), ledger=ledger)
    result = await dispatch_tool_call(ToolCall(id="c1", name=tool.name, arguments={}), options)
    assert not result.is_error, result.joined_text
    assert [record.definition_hash for record in ledger.records] == [expected]


async def test_structured_content_that_breaks_the_output_schema_is_an_error_naming_the_path(
    shapes: McpToolBridge,
) -> None:
    result = await run(shapes, "bad_output")
    assert result.is_error
    assert result.details["mcp_error"] == "output_invalid"
    assert "tags" in str(result.details["path"])
    assert "outputSchema" in result.joined_text


async def test_a_declared_output_schema_without_structured_content_is_an_error(
    shapes: McpToolBridge,
) -> None:
    result = await run(shapes, "missing_output")
    assert result.is_error
    assert result.details["mcp_error"] == "output_invalid"


async def test_a_result_with_only_structured_content_is_accepted(shapes: McpToolBridge) -> None:
    result = await run(shapes, "only_structured")
    assert not result.is_error, result.joined_text
    assert result.structured == {"x": 5}
    assert result.content == ()


async def test_structured_content_carried_past_the_sdk_cannot_be_forged(
    shapes: McpToolBridge,
) -> None:
    # The gate hands the SDK each structuredContent object in a carrier no parse
    # makes; the same key and text sent by the server are the server's own data.
    result = await run(shapes, "forged_detached")
    assert not result.is_error, result.joined_text
    assert result.structured == {"io.prism/detached": "io.prism/detached"}
    assert type(result.structured["io.prism/detached"]) is str
    # A marker of the kind the transports put in place of a value they parsed apart,
    # standing for none of them: the result is refused, never taken as the server's.
    result = await run(shapes, "forged_token")
    assert result.is_error
    assert "result refused: its structuredContent was not kept" in result.joined_text


async def test_structured_content_that_is_not_an_object_is_still_refused_by_the_sdk(
    shapes: McpToolBridge,
) -> None:
    # Only objects are carried past the SDK's check of the result; an array meets it.
    result = await run(shapes, "array_structured")
    assert result.is_error
    assert result.details["mcp_error"] == "server_error"
    assert "structuredContent" in result.joined_text


async def test_an_error_result_is_not_checked_against_the_output_schema(
    shapes: McpToolBridge,
) -> None:
    result = await run(shapes, "error_output")
    assert result.is_error
    assert "mcp_error" not in result.details


async def test_image_blocks_carry_the_type_their_bytes_have(shapes: McpToolBridge) -> None:
    # A server's mimeType is free text providers send on as a media type, and its
    # data went on unchecked; ImageContent promises base64 and a detected type.
    result = await run(shapes, "images")
    png, html, broken = result.content
    assert isinstance(png, ImageContent)
    assert png.mime_type == "image/png"
    assert png.data.startswith("iVBORw0KGgo")
    for left_out in (html, broken):
        assert isinstance(left_out, TextContent)
        assert "an image the server sent was left out" in left_out.text
    assert "text/html" not in result.joined_text
    assert "<script>" not in result.joined_text


async def test_content_annotations_are_kept_in_details(shapes: McpToolBridge) -> None:
    result = await run(shapes, "annotated")
    assert result.details["mcp_content_annotations"] == [
        {"index": 0, "audience": ["user"], "lastModified": "2026-12-03T00:00:00Z"},
        {"index": 1, "audience": ["assistant"], "priority": 0.9},
    ]


async def test_an_output_schema_whose_ref_resolves_nowhere_leaves_results_unchecked(
    shapes: McpToolBridge, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="prism.mcp")
    result = await run(shapes, "dangling_ref")
    # Refused when first used, by the hardened validator and by the fallback alike
    # (which checks only references it can resolve and price): logged, and the
    # tool's output goes unchecked, as with no outputSchema.
    assert not result.is_error, result.joined_text
    assert result.structured == {"x": 1}
    assert any("outputSchema cannot be used" in message for message in caplog.messages)


async def test_a_task_required_tool_answered_without_a_task_gives_that_answer(
    shapes: McpToolBridge,
) -> None:
    assert shapes.tool_info["mcp:sh:plain_task"].task_support == "required"
    result = await run(shapes, "plain_task")
    assert not result.is_error, result.joined_text
    assert result.joined_text == "no task after all"


async def test_a_form_whose_schema_is_not_json_reaches_the_host_without_its_schema() -> None:
    asked: list[McpElicitation] = []

    async def elicit(request: McpElicitation) -> McpElicitationAnswer:
        asked.append(request)
        return McpElicitationAnswer(action="decline")

    with trio.fail_after(20):
        async with open_mcp_tools(
            server_id="sh", transport=SHAPES, protocol="legacy", elicit=elicit
        ) as bridge:
            result = await run(bridge, "ask_nan")
    assert json.loads(result.joined_text) == {"action": "decline"}
    (request,) = asked
    assert (request.mode, request.message) == ("form", "how many?")
    assert request.requested_schema is None


def request(name: str) -> PermissionRequest:
    return PermissionRequest(kind="tool", target=f"mcp:sh:{name}", action="execute")


async def test_an_untrusted_server_asks_even_for_a_read_only_tool(shapes: McpToolBridge) -> None:
    policy = create_mcp_permission_policy([shapes])
    decision = await policy.check(request("good"))  # type: ignore[misc]
    assert not decision.allowed
    assert decision.reason is not None
    assert "not trusted" in decision.reason


async def test_a_trusted_server_read_only_tool_runs_and_a_destructive_one_asks(
    shapes: McpToolBridge,
) -> None:
    asked: list[McpToolInfo] = []

    def approve(info: McpToolInfo) -> bool:
        asked.append(info)
        return True

    policy = create_mcp_permission_policy([shapes], trusted_servers=["sh"], approve=approve)
    good = await policy.check(request("good"))  # type: ignore[misc]
    bad = await policy.check(request("bad_output"))  # type: ignore[misc]
    other = await policy.check(PermissionRequest(kind="tool", target="read", action="execute"))  # type: ignore[misc]
    assert good.allowed
    assert bad.allowed
    assert [info.name for info in asked] == ["bad_output"]
    assert other.allowed


async def test_requests_other_than_executing_a_tool_are_left_to_other_policies(
    shapes: McpToolBridge,
) -> None:
    # Even naming a destructive MCP tool: only its execution is this policy's to refuse.
    policy = create_mcp_permission_policy([shapes])
    target = "mcp:sh:bad_output"
    for kind, action in (("extension", "setup"), ("tool", "describe")):
        decision = await policy.check(PermissionRequest(kind=kind, target=target, action=action))  # type: ignore[misc]
        assert decision.allowed
    assert not (await policy.check(request("bad_output"))).allowed  # type: ignore[misc]


async def test_the_policy_blocks_a_dispatch_when_the_approver_says_no(
    shapes: McpToolBridge,
) -> None:
    async def approve(info: McpToolInfo) -> bool:
        await trio.lowlevel.checkpoint()
        return False

    options = DispatchOptions(
        registry=create_tool_registry(shapes.tools),
        permission=create_mcp_permission_policy([shapes], approve=approve),
    )
    call = ToolCall(id="p", name="mcp:sh:good", arguments={})
    with trio.fail_after(20):
        result = await dispatch_tool_call(call, options)
    assert result.is_error
    assert "not approved" in result.joined_text


async def test_a_change_announced_right_after_initialize_does_not_leave_the_bridge_stale(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The shapes server announces a list change on notifications/initialized; the
    # listing that follows already holds it.
    caplog.set_level(logging.DEBUG, logger="prism.mcp")
    with trio.fail_after(20):
        async with open_mcp_tools(server_id="sh", transport=SHAPES, protocol="legacy") as bridge:
            assert not bridge.stale
    assert "MCP server sh announced a tool list change" in caplog.messages
    assert "MCP server sh: the announced change is already in the listing" in caplog.messages


async def test_a_tool_the_sdk_would_refuse_is_dropped_and_the_listing_survives(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Through 2025-11-25 an outputSchema (and an inputSchema) must say
    # "type": "object"; the SDK refused the whole tools/list for one such tool,
    # so no tool of the server could be used.
    with trio.fail_after(20):
        async with open_mcp_tools(server_id="sh", transport=SHAPES, protocol="legacy") as bridge:
            names = {tool.name.removeprefix("mcp:sh:") for tool in bridge.tools}
            good = await run(bridge, "good")
    assert "string_output" not in names
    assert "untyped_output" not in names
    assert {"good", "bad_output", "annotated", "mutate"} <= names
    assert not good.is_error
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    for name in ("string_output", "untyped_output"):
        assert any(
            f"MCP server sh: skipping tool '{name}'" in text and "Schema" in text
            for text in warnings
        ), warnings


def test_definition_hashes_stay_what_pins_files_hold() -> None:
    # Pins files written by earlier versions hold these: the hashing may get
    # faster, never different (escapes, sorted keys, a float past range, a lone
    # surrogate, an absent schema, a part only some tools have).
    from prism.mcp._annotations import _sha, definition_hash, definition_parts

    hints = McpToolAnnotations(title="T", read_only_hint=True)
    number = {"type": "number", "maximum": 1e400}
    schema = {"type": "object", "properties": {"b": number, "a": [1.5, None, True]}}
    parts = definition_parts("d\u00e9scription \ud83d", schema, None, hints, "Title", "optional")
    assert parts == {
        "description": "879f7bde0424f147c16274ef5ee1334b7c7f90aae29f7f7b79d1490809881b3f",
        "inputSchema": "529e5452f374455227f6c61f432e7d7e210ce3e368bfb73f1daee16514677f22",
        "outputSchema": "74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b",
        "annotations": "f9b1cdcbf184a2c048179f495cf1b04e36f7d6b60c2b71e2ed773b0652ee9414",
        "title": "4be9d4f1daabdb03afb07253382b19d77501261a6106d734746734605436aa77",
        "taskSupport": "47d1d0b33374b93a697dddf5b4b1947f2247dccef58b3eab195e7678da749d52",
    }
    expected = "957a2cba9d44bb7cecd7ead04628b8d9360675ddf61df0f50d9a99333b020858"
    assert definition_hash(parts) == expected
    # Parts not written by definition_parts take the general encoding.
    odd = {"b": "x", 'a"': "0" * 64}
    assert definition_hash(odd) == _sha(odd)
    five = {key: value for key, value in parts.items() if key != "taskSupport"}
    for written in (
        five,
        {**five, "taskSupport": ""},
        {**five, "title": "A" * 64},
        {**five, "description": ""},
        {**five, "title": "a-b"},
        {**five, "x": ""},
    ):
        assert definition_hash(written) == _sha(written)


def test_a_listings_tools_share_only_equal_parts() -> None:
    # Within one listing, a part equal to an earlier tool's (by its JSON text) is
    # that tool's object and hash; anything that tells two parts apart keeps
    # them apart. Each tool is held against its preparation alone (no sharing):
    # the same parts, hashes and schemas, to the type of every number.
    import mcp_types

    from prism.mcp._annotations import SharedParts
    from prism.mcp._listing import PreparedTool, prepare_tool
    from prism.mcp._options import bridge_options

    options = bridge_options(
        server_id="sh",
        transport=StdioTransport("x"),
        name_prefix=None,
        list_cache_ttl_s=60,
        call_timeout_s=60,
        connect_timeout_s=30,
        max_call_s=600,
        max_result_bytes=1_000_000,
        protocol="auto",
        max_list_bytes=4_000_000,
        max_list_pages=32,
        max_server_requests=16,
    )

    def schema(maximum: object, *, reverse: bool = False) -> dict[str, object]:
        inner = {"type": "integer", "maximum": maximum}
        if reverse:
            inner = dict(reversed(inner.items()))
        return {"type": "object", "properties": {"a": inner}}

    out = {"type": "object"}
    wire: list[dict[str, object]] = [
        {"name": "t0", "inputSchema": schema(1), "outputSchema": out, "description": "d"},
        # Equal schemas, another description, title, hints and output schema.
        {"name": "t1", "inputSchema": schema(1), "description": "e", "title": "T"},
        {"name": "t2", "inputSchema": schema(1), "annotations": {"readOnlyHint": True}},
        {"name": "t3", "inputSchema": schema(1), "outputSchema": {"type": "object", "a": 1}},
        # One number told apart from another only by its type.
        {"name": "t4", "inputSchema": schema(1.0)},
        {"name": "t5", "inputSchema": schema(True)},
        {"name": "t6", "inputSchema": schema(10**30)},
        # The same members in another order: its own object, the same hash.
        {"name": "t7", "inputSchema": schema(1, reverse=True)},
        # A lone surrogate (no UTF-8 holds it), and a float past range (skipped).
        {"name": "t8", "inputSchema": schema("\ud800"), "description": "\udfff"},
        {"name": "t9", "inputSchema": schema(1e400)},
        {"name": "t10", "inputSchema": schema(1), "outputSchema": out, "description": "d"},
    ]
    hashes = SharedParts()
    shared: list[PreparedTool | None] = []
    for entry in wire:
        tool = mcp_types.Tool.model_validate(json.loads(json.dumps(entry)), by_name=False)
        alone = prepare_tool(options, mcp_types.Tool.model_validate(entry, by_name=False))
        prepared = prepare_tool(options, tool, hashes)
        if alone is None:
            assert prepared is None
            shared.append(None)
            continue
        assert prepared is not None
        assert prepared.info.definition_parts == alone.info.definition_parts
        assert prepared.info.definition_hash == alone.info.definition_hash
        assert prepared.info == alone.info
        assert json.dumps(prepared.schema) == json.dumps(alone.schema)
        assert json.dumps(prepared.checked) == json.dumps(alone.checked)
        shared.append(prepared)
    first, *_ = shared
    assert first is not None
    same = [p for p in shared if p is not None and p.schema is first.schema]
    # t0, t1, t2, t3 and t10: only the equal schemas are one object.
    assert [p.info.name for p in same] == ["t0", "t1", "t2", "t3", "t10"]
    parts = {p.info.name: p.info.definition_parts for p in shared if p is not None}
    assert (
        len({part["inputSchema"] for part in parts.values()}) == 5
    )  # 1, 1.0, true, 10**30, "\ud800"
    assert parts["t7"]["inputSchema"] == parts["t0"]["inputSchema"]
    assert len({p.info.definition_hash for p in shared if p is not None}) == 9
    assert shared[10] is not None
    assert shared[10].checked is first.checked

    # With the gate's text of each tool but its free text, tools written the
    # same share the parts made from it (schemas, hints), nothing else: each
    # held against its preparation alone as above.
    from prism.mcp._gate import written_tool

    wire.append({**wire[0], "name": "t11", "description": "x", "title": "Y"})
    wire.append({**wire[0], "name": "t12", "annotations": {"readOnlyHint": False}})
    hashes = SharedParts()
    by_text: list[PreparedTool | None] = []
    for entry in wire:
        parsed = json.loads(json.dumps(entry))
        written = written_tool(parsed)
        tool = mcp_types.Tool.model_validate(parsed, by_name=False)
        alone = prepare_tool(options, mcp_types.Tool.model_validate(entry, by_name=False))
        prepared = prepare_tool(options, tool, hashes, written)
        by_text.append(prepared)
        if alone is None:
            assert prepared is None
            continue
        assert prepared is not None
        assert prepared.info == alone.info
        assert prepared.info.definition_parts == alone.info.definition_parts
        assert json.dumps(prepared.schema) == json.dumps(alone.schema)
        assert json.dumps(prepared.checked) == json.dumps(alone.checked)
    t0, t10, t11, t12 = by_text[0], by_text[10], by_text[11], by_text[12]
    assert t0 is not None
    assert t10 is not None
    assert t11 is not None
    assert t12 is not None
    assert t10.schema is t0.schema
    assert t11.schema is t0.schema
    assert t11.checked is t0.checked
    assert t11.info.annotations is t0.info.annotations
    assert t11.info.definition_hash != t0.info.definition_hash
    assert t12.info.annotations != t0.info.annotations


def test_a_listings_equal_hints_and_definitions_are_one_object_each() -> None:
    # Tools of one listing with equal hints share one McpToolAnnotations, and
    # tools whose parts are the same objects share one read-only parts mapping
    # and hash; a hint told apart only by its type (1 is no bool) stays apart.
    from types import SimpleNamespace

    import mcp_types

    from prism.mcp._annotations import SharedParts, definition_hash, definition_parts

    hashes = SharedParts()
    read_only = hashes.hints(mcp_types.ToolAnnotations(read_only_hint=True))
    assert hashes.hints(mcp_types.ToolAnnotations(read_only_hint=True)) is read_only
    assert read_only == McpToolAnnotations.from_mcp(mcp_types.ToolAnnotations(read_only_hint=True))
    odd = SimpleNamespace(read_only_hint=1)  # only some of the fields, one not a bool
    assert hashes.hints(odd) == McpToolAnnotations()
    assert hashes.hints(SimpleNamespace(read_only_hint=True)).read_only_hint is True
    assert hashes.hints(None) == McpToolAnnotations()

    schema = {"type": "object"}
    parts, digest = hashes.definition("d", schema, None, read_only, "T")
    again, same = hashes.definition("d", schema, None, read_only, "T")
    assert again is parts
    assert same == digest
    assert dict(parts) == definition_parts("d", schema, None, read_only, "T")
    assert digest == definition_hash(definition_parts("d", schema, None, read_only, "T"))
    with pytest.raises(TypeError):
        parts["title"] = "x"  # type: ignore[index]
    # An equal schema that is another object: its own entry, the same parts.
    other, _ = hashes.definition("d", {"type": "object"}, None, read_only, "T")
    assert other is not parts
    assert other == parts
    assert hashes.definition("e", schema, None, read_only, "T")[1] != digest
