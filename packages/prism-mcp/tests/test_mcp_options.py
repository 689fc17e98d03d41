import sys
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from prism.core import ConfigurationError, TrioRequiredError
from prism.mcp import StdioTransport, StreamableHttpTransport, open_mcp_tools

SERVER = StdioTransport(sys.executable, ["-c", "pass"])


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("call_timeout_s", 0),
        ("call_timeout_s", -1.0),
        ("call_timeout_s", float("nan")),
        ("connect_timeout_s", float("inf")),
        ("connect_timeout_s", "5"),
        ("list_cache_ttl_s", True),
        ("max_call_s", 0.0),
        ("max_result_bytes", 10),
        ("max_result_bytes", 1.5e6),
        ("max_result_bytes", 2**40),
        ("name_prefix", "bad prefix "),
        ("protocol", "2099-01-01"),
    ],
)
async def test_bad_option_raises_naming_option_and_value(option: str, value: Any) -> None:
    kwargs: dict[str, Any] = {"server_id": "s", "transport": SERVER, option: value}
    with pytest.raises(ConfigurationError, match=option) as info:
        async with open_mcp_tools(**kwargs):
            pass
    assert repr(value) in str(info.value)


@pytest.mark.parametrize("server_id", ["", "a:b", "a*", "x" * 65, "sp ace", "ü"])
async def test_unsafe_server_id_is_refused(server_id: str) -> None:
    with pytest.raises(ConfigurationError, match="server_id"):
        async with open_mcp_tools(server_id=server_id, transport=SERVER):
            pass


@given(st.text(max_size=80))
def test_server_id_accepts_only_the_safe_alphabet(server_id: str) -> None:
    import re

    safe = re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", server_id) is not None
    try:
        from prism.mcp._bridge import _options

        _options(
            server_id=server_id,
            transport=SERVER,
            name_prefix=None,
            list_cache_ttl_s=1,
            call_timeout_s=1,
            connect_timeout_s=1,
            max_call_s=None,
            max_result_bytes=4096,
            protocol="auto",
            max_list_bytes=4096,
            max_list_pages=1,
            max_server_requests=1,
        )
    except ConfigurationError:
        assert not safe
    else:
        assert safe


def test_transport_rejects_bad_values_at_construction() -> None:
    with pytest.raises(ConfigurationError, match="command"):
        StdioTransport("")
    with pytest.raises(ConfigurationError, match="args"):
        StdioTransport("x", "not-a-list")
    with pytest.raises(ConfigurationError, match="env"):
        StdioTransport("x", env={"A": 1})  # type: ignore[dict-item]
    with pytest.raises(ConfigurationError, match="url"):
        StreamableHttpTransport("file:///etc/passwd")
    with pytest.raises(ConfigurationError, match="url"):
        StreamableHttpTransport("ftp://127.0.0.1/mcp")
    with pytest.raises(ConfigurationError, match="headers"):
        StreamableHttpTransport("http://127.0.0.1/mcp", {"X": None})  # type: ignore[dict-item]


def test_transports_are_plain_values() -> None:
    stdio = StdioTransport("python", ["-m", "x"], {"A": "1"}, "/tmp")
    assert stdio.args == ("-m", "x")
    assert stdio == StdioTransport("python", ("-m", "x"), {"A": "1"}, "/tmp")
    http = StreamableHttpTransport("http://127.0.0.1:1/mcp", {"Authorization": "secret"})
    assert "secret" not in repr(http)


async def test_nothing_launches_until_entered(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    transport = StdioTransport(sys.executable, ["-c", f"open({str(marker)!r}, 'w')"])
    manager = open_mcp_tools(server_id="lazy", transport=transport)
    assert not marker.exists()
    del manager
    assert not marker.exists()


def test_http_auth_must_be_an_httpx2_auth() -> None:
    with pytest.raises(ConfigurationError, match="auth"):
        StreamableHttpTransport("http://127.0.0.1:1/mcp", auth="Bearer x")  # type: ignore[arg-type]


async def test_http_auth_signs_every_request(fixture_http_url: str) -> None:
    import httpx2

    from prism.core import ToolCall, ToolExecutionContext

    seen: list[str] = []

    class Recording(httpx2.Auth):
        def auth_flow(
            self, request: httpx2.Request
        ) -> Generator[httpx2.Request, httpx2.Response, None]:
            request.headers["Authorization"] = "Bearer test-token"
            seen.append(request.method)
            yield request

    transport = StreamableHttpTransport(fixture_http_url, auth=Recording())
    assert "test-token" not in repr(transport)
    with trio.fail_after(20):
        async with open_mcp_tools(server_id="fx", transport=transport) as bridge:
            tool = next(t for t in bridge.tools if t.name == "mcp:fx:echo")
            ctx = ToolExecutionContext(ToolCall(id="a", name=tool.name, arguments={}))
            result = await tool.execute({"text": "signed"}, ctx)
    assert result.joined_text == "signed"
    assert "POST" in seen


def test_entering_outside_trio_says_to_use_the_asyncio_host() -> None:
    entering = open_mcp_tools(server_id="s", transport=StdioTransport(command="true")).__aenter__()
    with pytest.raises(TrioRequiredError, match="open_asyncio_host"):
        entering.send(None)
    entering.close()


def test_max_call_s_none_still_gets_the_default_ceiling_and_only_inf_removes_it() -> None:
    import math

    from prism.mcp._bridge import _max_call

    assert _max_call(None) == 600.0
    assert _max_call(5) == 5.0
    assert _max_call(math.inf) is None
    with pytest.raises(ConfigurationError, match="max_call_s"):
        _max_call(-1)
    with pytest.raises(ConfigurationError, match="max_call_s"):
        _max_call(math.nan)
