"""A hostile HTTP client: every malformed request is a 4xx or a JSON-RPC error, never a 500.

The gateway runs in a thread of its own (its own trio run) so hypothesis can
drive it from a plain synchronous test, one real HTTP request per example.
"""

from __future__ import annotations

import json
import ssl
import string
import threading
from typing import TYPE_CHECKING, Any

import httpx2
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prism.coding.security import create_coding_approval_policy, create_contained_file_operations
from prism.coding.tools import create_coding_tools
from prism.core import create_rule_permission_policy
from prism.core.ledger import RunLedger
from prism.gateway import (
    CODING_TOOL_HINTS,
    BearerAuth,
    HttpOptions,
    create_gateway_approver,
    open_gateway,
    serve_http,
)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

TOKEN = "fuzz-token-0123456789abcdef"
ACCEPT = "application/json, text/event-stream"
# Every request is a fresh client and connection; they share one TLS context (never used:
# the gateway is plain HTTP on 127.0.0.1), which httpx2 would otherwise build for each
# client by loading the CA bundle: 36 ms of CPU, most of an example's cost.
TLS = ssl.create_default_context()


class LiveGateway:
    """A gateway serving HTTP from a thread, and one session opened on it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.url = ""
        self.session = ""
        self._ready = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> LiveGateway:
        self._thread.start()
        assert self._ready.wait(120), "the gateway did not start"
        if self._failure is not None:
            raise self._failure
        opened = post(self.url, initialize(), session=None)
        assert opened.status_code == 200, opened.text
        self.session = opened.headers["mcp-session-id"]
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert post(self.url, note, session=self.session).status_code == 202
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._token is not None and self._stop is not None:
            trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join(60)

    def _run(self) -> None:
        try:
            trio.run(self._serve)
        except BaseException as exc:  # reported to the test thread
            self._failure = exc
            self._ready.set()

    async def _serve(self) -> None:
        root = str(self.root)
        policy = create_coding_approval_policy(
            roots=[root], approve=create_gateway_approver(), cache_approvals=False
        )
        tools = create_coding_tools(
            root, execution_policy=policy, file_operations=create_contained_file_operations([root])
        )
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with (
            open_gateway(
                tools=tools,
                permission=create_rule_permission_policy(allow=["tool:*:execute"]),
                hints=CODING_TOOL_HINTS,
                ledger=RunLedger(max_records=100),
            ) as gateway,
            trio.open_nursery() as nursery,
        ):
            options = HttpOptions(port=0, auth=BearerAuth(tokens=(TOKEN,)))
            self.url = await nursery.start(serve_http, gateway, options)
            self._ready.set()
            await self._stop.wait()
            nursery.cancel_scope.cancel()


def initialize() -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "fuzz", "version": "0"},
        },
    }


def post(
    url: str, body: object, *, session: str | None, headers: dict[str, str] | None = None
) -> httpx2.Response:
    sent = {
        "authorization": f"Bearer {TOKEN}",
        "accept": ACCEPT,
        "content-type": "application/json",
    }
    if session is not None:
        sent["mcp-session-id"] = session
    sent.update(headers or {})
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx2.post(url, content=data, headers=sent, timeout=60, verify=TLS)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveGateway]:
    root = tmp_path_factory.mktemp("fuzz-ws")
    (root / "notes.txt").write_text("hello\n", encoding="utf-8")
    with LiveGateway(root) as gateway:
        yield gateway


def nested(depth: int, leaf: object = 1) -> str:
    return "[" * depth + json.dumps(leaf) + "]" * depth


def deep_object(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


@pytest.mark.parametrize("with_session", [True, False])
@pytest.mark.parametrize("where", ["params", "arguments", "id"])
def test_a_tools_call_nested_1000_deep_is_refused_without_a_500(
    live: LiveGateway, with_session: bool, where: str
) -> None:
    if where == "params":
        body = '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":' + nested(1000) + "}"
    elif where == "arguments":
        body = (
            '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read",'
            '"arguments":' + deep_object(1000) + "}}"
        )
    else:
        body = '{"jsonrpc":"2.0","id":' + nested(1000) + ',"method":"tools/call","params":{}}'
    response = post(live.url, body.encode(), session=live.session if with_session else None)
    assert 400 <= response.status_code < 500 or response.status_code == 200, response.status_code
    if response.status_code == 200:  # answered on the stream: a JSON-RPC error
        assert '"error"' in response.text, response.text
    else:
        assert response.json()["error"]["message"]
    # The session still serves.
    assert (
        post(
            live.url, {"jsonrpc": "2.0", "id": 8, "method": "tools/list"}, session=live.session
        ).status_code
        == 200
    )


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
_METHODS = st.sampled_from(
    [
        "initialize",
        "notifications/initialized",
        "notifications/cancelled",
        "tools/list",
        "tools/call",
        "ping",
        "resources/list",
        "prompts/get",
        "logging/setLevel",
        "server/discover",
        "subscriptions/listen",
        "completion/complete",
    ]
) | st.text(max_size=30)
_MESSAGE = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2]) | _JSON,
        "id": st.none() | st.integers() | st.text(max_size=10) | _JSON,
        "method": _METHODS | _JSON,
        "params": st.fixed_dictionaries(
            {},
            optional={
                "name": st.sampled_from(["read", "shell", "write", "nope"]) | _JSON,
                "arguments": _JSON,
                "_meta": _JSON,
                "protocolVersion": st.sampled_from(["2025-11-25", "2026-07-28", "1999"]) | _JSON,
                "capabilities": _JSON,
                "clientInfo": _JSON,
            },
        )
        | _JSON,
        "result": _JSON,
        "error": _JSON,
    },
)
_BODY = (
    _MESSAGE.map(lambda m: json.dumps(m).encode())
    | st.lists(_MESSAGE, max_size=3).map(lambda m: json.dumps(m).encode())
    | _JSON.map(lambda v: json.dumps(v).encode())
    | st.binary(max_size=300)
    | st.integers(min_value=1, max_value=3000).map(lambda d: nested(d).encode())
)
# (h11, the client, refuses control characters and surrounding blanks in header values.)
_HEADER_TEXT = st.text(alphabet=string.printable.strip("\r\n\x0b\x0c"), max_size=40).map(str.strip)
_HEADERS = st.fixed_dictionaries(
    {},
    optional={
        "content-type": st.sampled_from(
            ["application/json", "text/plain", "application/json; charset=utf-8", ""]
        )
        | _HEADER_TEXT,
        "accept": st.sampled_from(["application/json", "text/event-stream", "*/*", ""])
        | _HEADER_TEXT,
        "mcp-protocol-version": st.sampled_from(["2025-11-25", "2026-07-28", "x"]) | _HEADER_TEXT,
        "mcp-method": _HEADER_TEXT,
        "mcp-name": _HEADER_TEXT,
        "last-event-id": _HEADER_TEXT,
        "authorization": st.sampled_from([f"Bearer {TOKEN}", "Bearer nope", "Basic x"])
        | _HEADER_TEXT,
    },
)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    verb=st.sampled_from(["POST", "POST", "POST", "GET", "DELETE", "PUT"]),
    body=_BODY,
    headers=_HEADERS,
    session=st.sampled_from(["live", "none", "bogus"]) | _HEADER_TEXT,
)
def test_fuzzed_requests_never_get_a_500(
    live: LiveGateway, verb: str, body: bytes, headers: dict[str, str], session: str
) -> None:
    sent = {
        "authorization": f"Bearer {TOKEN}",
        "accept": ACCEPT,
        "content-type": "application/json",
    }
    sent.update(headers)
    if session == "live":
        sent["mcp-session-id"] = live.session
    elif session == "bogus":
        sent["mcp-session-id"] = "0" * 32
    elif session != "none" and session.strip():
        sent["mcp-session-id"] = session.strip()
    content = body if verb in ("POST", "PUT") else None
    with httpx2.stream(
        verb, live.url, content=content, headers=sent, timeout=60, verify=TLS
    ) as response:
        status = response.status_code
        if status >= 400:
            response.read()
    assert status < 500 or status == 503, (status, verb, body[:200], sent)
    # A GET with a live session opens the event stream: closing it must not end the session.
    if session == "live" and verb == "DELETE" and status < 400:
        reopen(live)


def reopen(live: LiveGateway) -> None:
    """Open another live session (a fuzzed DELETE ended the last one, say)."""
    opened = post(live.url, initialize(), session=None)
    assert opened.status_code == 200, opened.text
    live.session = opened.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    post(live.url, note, session=live.session)


def test_a_resuming_get_opens_a_fresh_stream_not_a_500(live: LiveGateway) -> None:
    """Found by the fuzzer: with no event store the SDK answered a resuming GET with nothing."""
    reopen(live)  # a session of its own (the fuzzer may have ended the last one)
    sent = {
        "authorization": f"Bearer {TOKEN}",
        "accept": "text/event-stream",
        "mcp-session-id": live.session,
        "last-event-id": "0",
    }
    with httpx2.stream("GET", live.url, headers=sent, timeout=60, verify=TLS) as response:
        status = response.status_code
        kind = response.headers.get("content-type", "")
    assert status == 200
    assert kind.startswith("text/event-stream")
