"""Options of every public factory and options class, refused or honoured at construction."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from prism.core import (
    ConfigurationError,
    JsonObject,
    ToolDefinition,
    ToolExecutionContext,
    ToolFilter,
    ToolResult,
)
from prism.gateway import (
    BearerAuth,
    Gateway,
    GatewayConfigurationError,
    HttpOptions,
    OAuthResourceServer,
    ToolHints,
    build_http_app,
    create_command_approver,
    create_gateway_approver,
    open_gateway,
    serve_http,
    serve_stdio,
)

TOKEN = "test-token-0123456789abcdef"
URL = "https://gw.example/mcp"


async def _ok(_args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text("ok")


def _tool(name: str) -> ToolDefinition:
    return ToolDefinition(name=name, execute=_ok)


class _Verifier:
    async def verify_token(self, token: str) -> None:
        return None


def _oauth(**options: Any) -> OAuthResourceServer:
    given = {"verifier": _Verifier(), "issuer_url": URL, "resource_server_url": URL}
    return OAuthResourceServer(**{**given, **options})


async def _open(**options: Any) -> None:
    async with open_gateway(**options):
        pass


async def _run(outcome: object) -> None:
    if isinstance(outcome, Awaitable):
        await outcome


# (the option's dotted name, how to pass the bad value, the bad value)
Attempt = Callable[[Gateway, Any], Awaitable[object] | object]
CASES: list[tuple[str, Attempt, Any]] = [
    ("open_gateway.tools", lambda _g, v: _open(tools=v), (object(),)),
    ("open_gateway.tools", lambda _g, v: _open(tools=v), "read"),
    ("open_gateway.bridges", lambda _g, v: _open(bridges=v), (object(),)),
    ("open_gateway.permission", lambda _g, v: _open(permission=v), "allow"),
    ("open_gateway.validator", lambda _g, v: _open(validator=v), 5),
    ("open_gateway.question_ttl_s", lambda _g, v: _open(question_ttl_s=v), 0.5),
    ("open_gateway.question_ttl_s", lambda _g, v: _open(question_ttl_s=v), "600"),
    ("open_gateway.filters", lambda _g, v: _open(filters=v), ("shell",)),
    ("open_gateway.middleware", lambda _g, v: _open(middleware=v), object()),
    ("open_gateway.on_event", lambda _g, v: _open(on_event=v), "print"),
    ("open_gateway.ledger", lambda _g, v: _open(ledger=v), "ledger.jsonl"),
    ("open_gateway.hints", lambda _g, v: _open(hints=v), {"read": {"readOnlyHint": True}}),
    ("open_gateway.max_concurrent_calls", lambda _g, v: _open(max_concurrent_calls=v), 0),
    ("open_gateway.max_concurrent_calls", lambda _g, v: _open(max_concurrent_calls=v), True),
    ("open_gateway.max_calls_per_client", lambda _g, v: _open(max_calls_per_client=v), "8"),
    ("open_gateway.roots", lambda _g, v: _open(roots=v), ("relative/path",)),
    ("open_gateway.roots", lambda _g, v: _open(roots=v), "/srv"),
    ("ToolHints.title", lambda _g, v: ToolHints(title=v), 5),
    ("ToolHints.read_only", lambda _g, v: ToolHints(read_only=v), "yes"),
    ("ToolHints.destructive", lambda _g, v: ToolHints(destructive=v), 1),
    ("ToolHints.idempotent", lambda _g, v: ToolHints(idempotent=v), "no"),
    ("ToolHints.open_world", lambda _g, v: ToolHints(open_world=v), 0),
    ("ToolHints.output_schema", lambda _g, v: ToolHints(output_schema=v), '{"type": "object"}'),
    ("OAuthResourceServer.verifier", lambda _g, v: _oauth(verifier=v), object()),
    ("OAuthResourceServer.issuer_url", lambda _g, v: _oauth(issuer_url=v), "ftp://auth"),
    ("OAuthResourceServer.resource_server_url", lambda _g, v: _oauth(resource_server_url=v), 5),
    ("OAuthResourceServer.required_scopes", lambda _g, v: _oauth(required_scopes=v), ("",)),
    ("HttpOptions.host", lambda _g, v: HttpOptions(host=v), 5),
    ("HttpOptions.host", lambda _g, v: HttpOptions(host=v), "0.0.0.0"),  # no auth
    ("HttpOptions.port", lambda _g, v: HttpOptions(port=v), 70000),
    ("HttpOptions.port", lambda _g, v: HttpOptions(port=v), "8765"),
    ("HttpOptions.path", lambda _g, v: HttpOptions(path=v), "mcp"),
    ("HttpOptions.auth", lambda _g, v: HttpOptions(auth=v), TOKEN),
    ("HttpOptions.allowed_origins", lambda _g, v: HttpOptions(allowed_origins=v), ("evil",)),
    ("HttpOptions.allowed_origins", lambda _g, v: HttpOptions(allowed_origins=v), 5),
    ("HttpOptions.max_request_bytes", lambda _g, v: HttpOptions(max_request_bytes=v), 100),
    (
        "HttpOptions.max_sessions_per_principal",
        lambda _g, v: HttpOptions(max_sessions_per_principal=v),
        0,
    ),
    ("HttpOptions.max_request_bytes", lambda _g, v: HttpOptions(max_request_bytes=v), 2**40),
    ("HttpOptions.stateless", lambda _g, v: HttpOptions(stateless=v), "yes"),
    ("create_gateway_approver.fallback", lambda _g, v: create_gateway_approver(fallback=v), 5),
    ("create_gateway_approver.elicit", lambda _g, v: create_gateway_approver(elicit=v), "no"),
    ("create_command_approver.command", lambda _g, v: create_command_approver(v), "ok.sh --y"),
    ("create_command_approver.command", lambda _g, v: create_command_approver(v), ()),
    ("create_command_approver.command", lambda _g, v: create_command_approver(v), ("",)),
    ("serve_http.gateway", lambda _g, v: serve_http(v), object()),
    ("serve_http.options", lambda g, v: serve_http(g, v), {"port": 0}),
    ("build_http_app.gateway", lambda _g, v: build_http_app(v, HttpOptions()), None),
    ("build_http_app.options", lambda g, v: build_http_app(g, v), "http"),
    ("serve_stdio.gateway", lambda _g, v: serve_stdio(v), "gateway"),
    ("serve_stdio.max_message_bytes", lambda g, v: serve_stdio(g, max_message_bytes=v), 10),
]


@pytest.mark.parametrize(
    ("option", "attempt", "value"),
    CASES,
    ids=[f"{option}={value!r}"[:60] for option, _attempt, value in CASES],
)
async def test_a_bad_option_is_refused_naming_the_option_and_the_value(
    option: str, attempt: Attempt, value: Any
) -> None:
    async with open_gateway() as gateway:
        with pytest.raises(ConfigurationError) as caught:
            await _run(attempt(gateway, value))
    assert caught.value.option == option
    assert caught.value.value == value
    assert option in str(caught.value)
    assert repr(value) in str(caught.value)


@pytest.mark.parametrize("tokens", [("short",), (), 5, ("ok-length-but-has\nnewline",)])
def test_bad_bearer_tokens_are_refused_without_showing_them(tokens: Any) -> None:
    with pytest.raises(GatewayConfigurationError) as caught:
        BearerAuth(tokens=tokens)
    assert caught.value.option == "BearerAuth.tokens"
    message = str(caught.value)
    assert "at least 16 characters" in message
    for token in tokens if isinstance(tokens, tuple) else ():
        assert token not in message
        assert token not in repr(caught.value.value)


def test_one_token_or_origin_may_be_given_as_a_string() -> None:
    assert BearerAuth(tokens=TOKEN).tokens == (TOKEN,)
    options = HttpOptions(allowed_origins="https://app.example", auth=_oauth())
    assert options.allowed_origins == ("https://app.example",)


async def test_two_tools_with_one_name_are_refused() -> None:
    with pytest.raises(GatewayConfigurationError) as caught:
        await _open(tools=[_tool("a"), _tool("a")])
    assert caught.value.option == "open_gateway.tools"


async def test_two_names_with_one_alias_are_refused() -> None:
    with pytest.raises(GatewayConfigurationError, match="mcp__x__y"):
        await _open(tools=[_tool("mcp:x:y"), _tool("mcp__x__y")])


async def test_tools_are_offered_under_provider_safe_names() -> None:
    async with open_gateway(tools=[_tool("mcp:docs:search"), _tool("read")]) as gateway:
        assert gateway.offered_names == {"mcp:docs:search": "mcp__docs__search", "read": "read"}


async def test_filtered_tools_are_not_offered() -> None:
    tools = [_tool("read"), _tool("shell")]
    async with open_gateway(tools=tools, filters=[ToolFilter(deny=frozenset({"shell"}))]) as gw:
        assert [tool.name for tool in gw.tools] == ["read"]


def test_hints_state_only_what_was_given() -> None:
    hints = ToolHints(read_only=True, open_world=False)
    assert hints.annotations_json() == {"readOnlyHint": True, "openWorldHint": False}
