"""A session's tools/call sent as JSON, its plain answers checked once: against the SDK's checks."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

import mcp_types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client, StdioServerParameters
from mcp.client import session as sdk_session
from mcp_types import methods
from pydantic import ValidationError

from prism.core import (
    DispatchOptions,
    ToolCall,
    ToolResult,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.mcp import StdioTransport, _fastcall, _session, open_mcp_tools
from prism.mcp._content import map_call_result
from prism.mcp._fastcall import call_params, install_fast_call_tool, sdk_result, simple_call_result

VERSIONS = ("2025-11-25", "2026-07-28")
FIXTURE_SERVER = Path(__file__).resolve().parent / "mcp_fixture_server.py"


def _sdk_result(raw: dict[str, Any], version: str) -> Any:
    """What ClientSession.send_request makes of a tools/call answer (raises as it does)."""
    with contextlib.suppress(KeyError):
        methods.validate_server_result("tools/call", version, raw)
    foreign = sdk_session._later_revision_fields("tools/call", version)
    raw = {key: value for key, value in raw.items() if key not in foreign}
    return sdk_session._CallToolResultAdapter.validate_python(raw, by_name=False)


def _same_as_sdk(raw: dict[str, Any], version: str) -> bool:
    """Whether the plain answer's model is the SDK's; ``False`` when it is not plain."""
    made = simple_call_result(raw, version)
    if made is None:
        return False
    checked = _sdk_result(raw, version)  # a plain answer passes the SDK's checks
    assert sdk_result(raw, version, sdk_session._CallToolResultAdapter) == checked
    assert type(checked) is mcp_types.CallToolResult
    assert made.model_dump() == checked.model_dump()
    assert made.model_fields_set == checked.model_fields_set
    details = {"mcp_server": "s"}
    assert map_call_result(made, details) == map_call_result(checked, details)
    return True


TEXT: dict[str, Any] = {"type": "text", "text": "hi"}
PLAIN: list[dict[str, Any]] = [
    {"content": [TEXT], "resultType": "complete"},
    {"content": [], "isError": True, "resultType": "complete"},
    {"content": [TEXT, TEXT], "structuredContent": {"a": [1, 2.5, None]}, "resultType": "complete"},
    {"content": [TEXT], "isError": False, "resultType": "complete",
     "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "x", "version": "1"}}},
]  # fmt: skip
NOT_PLAIN: list[dict[str, Any]] = [
    {"content": [TEXT], "resultType": "input_required"},
    {"content": [{"type": "image", "data": "aGk=", "mimeType": "image/png"}],
     "resultType": "complete"},
    {"content": [{**TEXT, "annotations": {"priority": 1}}], "resultType": "complete"},
    {"content": [{"type": "text", "text": 5}], "resultType": "complete"},
    {"content": TEXT, "resultType": "complete"},
    {"content": [TEXT], "isError": "true", "resultType": "complete"},
    {"content": [TEXT], "isError": None, "resultType": "complete"},
    {"content": [TEXT], "structuredContent": [1], "resultType": "complete"},
    {"content": [TEXT], "_meta": [], "resultType": "complete"},
    {"content": [TEXT], "ttlMs": 5, "resultType": "complete"},
    {"resultType": "complete"},
    {"content": [], "resultType": "input_required", "isError": True},
]  # fmt: skip


@pytest.mark.parametrize("version", VERSIONS)
def test_plain_answers_build_the_sdks_model(version: str) -> None:
    for raw in PLAIN:
        assert _same_as_sdk(raw, version), raw
    for raw in NOT_PLAIN:
        assert simple_call_result(raw, version) is None, raw
        # The bridge's other answers meet the SDK's checks as the SDK makes them.
        try:
            expected = _sdk_result(raw, version)
        except ValidationError:
            with pytest.raises(ValidationError):
                sdk_result(raw, version, sdk_session._CallToolResultAdapter)
        else:
            assert sdk_result(raw, version, sdk_session._CallToolResultAdapter) == expected
    # Without resultType: plain at 2025-11-25, refused by the SDK at 2026-07-28 (required).
    bare = {"content": [TEXT]}
    assert _same_as_sdk(bare, "2025-11-25")
    assert simple_call_result(bare, "2026-07-28") is None
    with pytest.raises(ValidationError):
        _sdk_result(bare, "2026-07-28")


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
_BLOCK = st.one_of(
    st.just(TEXT),
    st.fixed_dictionaries({"type": st.sampled_from(["text", "image"]), "text": _JSON}),
    _JSON,
)
_ANSWER = st.fixed_dictionaries(
    {},
    optional={
        "content": st.lists(_BLOCK, max_size=3) | _JSON,
        "isError": st.booleans() | _JSON,
        "structuredContent": st.dictionaries(st.text(max_size=3), _JSON, max_size=2) | _JSON,
        "resultType": st.sampled_from(["complete", "input_required"]) | _JSON,
        "_meta": st.dictionaries(st.text(max_size=3), _JSON, max_size=2) | _JSON,
        "other": _JSON,
    },
)


@settings(max_examples=150, deadline=None)
@given(raw=_ANSWER, version=st.sampled_from(VERSIONS))
def test_any_answer_is_either_not_plain_or_the_sdks_model(
    raw: dict[str, Any], version: str
) -> None:
    _same_as_sdk(raw, version)


def test_the_params_are_the_sdks_dump() -> None:
    for name, arguments in (("t", {"a": [1, {"b": None}], "c": 2.5}), ("t", None), ("t", {})):
        request = mcp_types.CallToolRequest(
            params=mcp_types.CallToolRequestParams(name=name, arguments=arguments)
        )
        dumped = request.model_dump(by_alias=True, mode="json", exclude_none=True)["params"]
        made = call_params(name, arguments)
        assert list(made.items()) == list(dumped.items())


async def _results(transport: StdioTransport) -> list[ToolResult]:
    calls = [
        ("echo", {"text": "hi"}),
        ("add", {"a": 2, "b": 3}),
        ("fail", {"message": "no"}),
        ("rich", {}),
        ("progress", {"steps": 2, "interval": 0}),
        ("nope", {}),
    ]
    async with open_mcp_tools(server_id="fx", transport=transport) as bridge:
        options = DispatchOptions(registry=create_tool_registry(bridge.tools))
        return [
            await dispatch_tool_call(
                ToolCall(id=str(n), name=f"mcp:fx:{name}", arguments=arguments), options
            )
            for n, (name, arguments) in enumerate(calls)
        ]


async def test_a_real_server_gives_the_same_results_both_ways(
    fixture_stdio: StdioTransport, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain: list[bool] = []
    simple = _fastcall.simple_call_result

    def counted(raw: dict[str, Any], version: str) -> mcp_types.CallToolResult | None:
        made = simple(raw, version)
        plain.append(made is not None)
        return made

    monkeypatch.setattr(_fastcall, "simple_call_result", counted)
    fast = await _results(fixture_stdio)
    monkeypatch.setattr(_session, "install_fast_call_tool", lambda _session: None)
    sdk = await _results(fixture_stdio)
    assert fast == sdk
    # echo, add, fail's error result and progress were plain; rich (every kind of block)
    # took the SDK's checks; the unknown tool never reached the server.
    assert plain == [True, True, True, False, True]
    assert [result.is_error for result in fast] == [False, False, True, False, False, True]


async def test_the_sdks_call_options_on_the_json_path() -> None:
    # A read timeout, arguments with lists and objects, a progress callback; arguments
    # only the SDK can dump (a tuple) and a request _meta take the SDK's own call_tool.
    server = FIXTURE_SERVER
    params = StdioServerParameters(command=sys.executable, args=[str(server), "stdio"])
    async with Client(params) as client:
        install_fast_call_tool(client.session)
        seen: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(progress)

        timed = await client.call_tool("echo", {"text": "hi"}, read_timeout_seconds=30)
        listed = await client.call_tool("echo", {"text": "x", "more": [1, {"k": [2.5]}]})
        steps = await client.call_tool(
            "progress", {"steps": 2, "interval": 0}, progress_callback=on_progress
        )
        tupled = await client.call_tool("echo", {"text": ("a",)})
        traced = await client.call_tool(
            "echo", {"text": "m"}, meta=mcp_types.RequestParamsMeta(progress_token="t")
        )
    assert timed.content[0].text == "hi"  # type: ignore[union-attr]
    assert listed.is_error is not None
    assert steps.is_error is False
    assert seen == [1.0, 2.0]
    assert tupled.is_error  # not a string: the server refuses it
    assert traced.content[0].text == "m"  # type: ignore[union-attr]
