import math
import sys
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from prism.core import ConfigurationError, TrioRequiredError
from prism.mcp import (
    StdioTransport,
    StreamableHttpTransport,
    create_mcp_permission_policy,
    open_mcp_tools,
)

SERVER = StdioTransport(sys.executable, ["-c", "pass"])


BAD_OPEN_OPTIONS: list[tuple[str, object]] = [
    ("server_id", ""),
    ("server_id", 7),
    ("transport", "python -m server"),
    ("name_prefix", "bad prefix "),
    ("list_cache_ttl_s", True),
    ("call_timeout_s", 0),
    ("call_timeout_s", -1.0),
    ("call_timeout_s", float("nan")),
    ("connect_timeout_s", float("inf")),
    ("connect_timeout_s", "5"),
    ("max_call_s", 0.0),
    ("max_call_s", -math.inf),
    ("max_result_bytes", 10),
    ("max_result_bytes", 1.5e6),
    ("max_result_bytes", 2**40),
    ("protocol", "2099-01-01"),
    ("max_list_bytes", 0),
    ("max_list_pages", True),
    ("max_server_requests", 5000),
    ("elicit", "yes"),
    ("sample", 1),
    ("on_log", object()),
    ("on_elicitation_complete", "no"),
    ("accept_change", True),
    ("pins_file", 3),
    ("roots", "/srv"),
    ("roots", ["relative/path"]),
    ("roots", ["/srv"] * 300),
    ("roots", 7),
]


@pytest.mark.parametrize(("option", "value"), BAD_OPEN_OPTIONS)
async def test_open_mcp_tools_names_the_bad_option_and_its_value(option: str, value: Any) -> None:
    kwargs: dict[str, Any] = {"server_id": "s", "transport": SERVER, option: value}
    with pytest.raises(ConfigurationError) as info:
        async with open_mcp_tools(**kwargs):
            pass
    assert info.value.option == f"open_mcp_tools.{option}"
    assert info.value.value is value
    assert f"open_mcp_tools.{option}" in str(info.value)


def _policy(**kwargs: Any) -> object:
    return create_mcp_permission_policy(kwargs.pop("bridges", ()), **kwargs)


BAD_FACTORY_OPTIONS: list[tuple[Callable[..., object], str, str, object]] = [
    (StdioTransport, "StdioTransport.command", "command", ""),
    (StdioTransport, "StdioTransport.command", "command", "py\x00thon"),
    (StdioTransport, "StdioTransport.args", "args", "not-a-list"),
    (StdioTransport, "StdioTransport.args", "args", ["ok", 3]),
    (StdioTransport, "StdioTransport.args", "args", 3),
    (StdioTransport, "StdioTransport.env", "env", {"A": 1}),
    (StdioTransport, "StdioTransport.env", "env", "A=1"),
    (StdioTransport, "StdioTransport.env", "env", {"A\n": "1"}),
    (StdioTransport, "StdioTransport.env", "env", {"": "1"}),
    (StdioTransport, "StdioTransport.cwd", "cwd", ""),
    (StdioTransport, "StdioTransport.env_passthrough", "env_passthrough", "AWS_*"),
    (StdioTransport, "StdioTransport.env_passthrough", "env_passthrough", ["A=B"]),
    (StreamableHttpTransport, "StreamableHttpTransport.url", "url", "file:///etc/passwd"),
    (StreamableHttpTransport, "StreamableHttpTransport.url", "url", "ftp://127.0.0.1/mcp"),
    (StreamableHttpTransport, "StreamableHttpTransport.url", "url", "http://[::1/mcp"),
    (StreamableHttpTransport, "StreamableHttpTransport.url", "url", b"http://127.0.0.1/"),
    (StreamableHttpTransport, "StreamableHttpTransport.headers", "headers", {"X": None}),
    (StreamableHttpTransport, "StreamableHttpTransport.auth", "auth", "Bearer x"),
    (_policy, "create_mcp_permission_policy.bridges", "bridges", [object()]),
    (_policy, "create_mcp_permission_policy.bridges", "bridges", 3),
    (_policy, "create_mcp_permission_policy.trusted_servers", "trusted_servers", "srv"),
    (_policy, "create_mcp_permission_policy.trusted_servers", "trusted_servers", [""]),
    (_policy, "create_mcp_permission_policy.approve", "approve", "always"),
]


@pytest.mark.parametrize(("factory", "name", "option", "value"), BAD_FACTORY_OPTIONS)
def test_every_factory_names_the_bad_option_and_its_value(
    factory: Callable[..., object], name: str, option: str, value: object
) -> None:
    kwargs: dict[str, Any] = {}
    if factory is StdioTransport and option != "command":
        kwargs["command"] = "python"
    if factory is StreamableHttpTransport and option != "url":
        kwargs["url"] = "http://127.0.0.1:1/mcp"
    kwargs[option] = value
    with pytest.raises(ConfigurationError) as info:
        factory(**kwargs)
    assert info.value.option == name
    # A list is checked as the tuple it becomes.
    assert info.value.value == (tuple(value) if isinstance(value, list) else value)
    assert name in str(info.value)


def test_a_bad_env_or_header_is_named_by_its_key_never_its_value() -> None:
    with pytest.raises(ConfigurationError) as env:
        StdioTransport("python", env={"TOKEN": "sk-secret\x00"})
    with pytest.raises(ConfigurationError) as headers:
        StreamableHttpTransport("http://127.0.0.1:1/mcp", {"Authorization\n": "Bearer sk-secret"})
    for raised in (env.value, headers.value):
        assert "sk-secret" not in str(raised)
    assert "'TOKEN'" in str(env.value)


@pytest.mark.parametrize("server_id", ["", "a:b", "a*", "x" * 65, "sp ace", "ü"])
async def test_unsafe_server_id_is_refused(server_id: str) -> None:
    with pytest.raises(ConfigurationError, match="server_id"):
        async with open_mcp_tools(server_id=server_id, transport=SERVER):
            pass


async def _refused_option(server_id: str) -> str | None:
    # A bad protocol is refused too, after server_id: which option is named
    # says whether server_id passed, and nothing starts either way.
    try:
        async with open_mcp_tools(server_id=server_id, transport=SERVER, protocol="bad"):  # type: ignore[arg-type]
            pass
    except ConfigurationError as exc:
        return exc.option
    return None


@given(st.text(max_size=80))
def test_server_id_accepts_only_the_safe_alphabet(server_id: str) -> None:
    import re

    safe = re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", server_id) is not None
    refused = trio.run(_refused_option, server_id)
    assert refused == ("open_mcp_tools.protocol" if safe else "open_mcp_tools.server_id")


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


@pytest.mark.parametrize("max_call_s", [None, 600.0])
async def test_max_call_s_none_gets_the_default_ceiling(
    fixture_stdio: StdioTransport, mock_clock: trio.testing.MockClock, max_call_s: float | None
) -> None:
    from prism.core import ToolCall, ToolExecutionContext

    async with open_mcp_tools(
        server_id="fx", transport=fixture_stdio, call_timeout_s=1e6, max_call_s=max_call_s
    ) as bridge:
        tool = next(t for t in bridge.tools if t.name == "mcp:fx:sleep")
        ctx = ToolExecutionContext(ToolCall(id="c", name=tool.name, arguments={}))
        results = []

        async def run() -> None:
            results.append(await tool.execute({"seconds": 3600}, ctx))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            # The call's deadline is set before it first waits on the server.
            await trio.testing.wait_all_tasks_blocked()
            mock_clock.jump(599)
            await trio.testing.wait_all_tasks_blocked()
            assert not results
            mock_clock.jump(2)
    (result,) = results
    assert result.details["limit"] == "max_call_s"
    assert "max_call_s=600s" in result.joined_text
