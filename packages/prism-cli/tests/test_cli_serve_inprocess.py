"""``prism serve``'s runner in this process: HTTP on a loopback port, the SDK's client, cancel.

test_cli_serve.py runs the real command as a subprocess, where coverage cannot follow;
here the same runner serves under this test's trio run and is cancelled when done.
"""

from __future__ import annotations

import inspect
import io
import json
import sys
from typing import TYPE_CHECKING

import attrs
import mcp_types as types
import pytest
import trio
from mcp import Client

from prism.cli import ServeConfig as ServeTable
from prism.cli._cmd_run import read_config
from prism.cli._convert import parse_config
from prism.cli._serve import ServeRequest, _serve, gateway_limits, http_options
from prism.core import ConfigurationError
from prism.gateway import HttpOptions, open_gateway

if TYPE_CHECKING:
    from pathlib import Path

    from conftest import CliRunner, ServeConfig


class _Stderr(io.StringIO):
    """Stands in for stderr and sets ``announced`` once the endpoint line is written."""

    def __init__(self) -> None:
        super().__init__()
        self.announced = trio.Event()

    def write(self, text: str) -> int:
        written = super().write(text)
        if "MCP endpoint " in self.getvalue() and self.getvalue().endswith("\n"):
            self.announced.set()
        return written

    def url(self) -> str:
        line = next(x for x in self.getvalue().splitlines() if "MCP endpoint " in x)
        return line.split("MCP endpoint ", 1)[1].strip()


def _text(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


@pytest.mark.parametrize("coding_tools", [True, False])
async def test_serve_runner_answers_over_http_until_cancelled(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    coding_tools: bool,
    serve_config: ServeConfig,
) -> None:
    monkeypatch.delenv("PRISM_GATEWAY_TOKEN", raising=False)
    # [serve] path is where the endpoint is served (and said on stderr).
    loaded = read_config(
        serve_config(
            readme="served in process", coding_tools=coding_tools, extra='[serve]\npath = "/gw"\n'
        )
    )
    options = http_options(loaded, ServeRequest(address=("127.0.0.1", 0)))
    assert options is not None
    stderr = _Stderr()
    monkeypatch.setattr(sys, "stderr", stderr)
    ledger = tmp_path / "calls.jsonl" if coding_tools else None
    # The approver command is never run: every call here is a read or is refused by name.
    command = (sys.executable, "-c", "raise SystemExit(1)") if coding_tools else ()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_serve, loaded, options, ledger, command)
            await stderr.announced.wait()
            url = stderr.url()
            changed = trio.Event()

            async def on_message(message: object) -> None:
                if isinstance(message, types.ToolListChangedNotification):
                    changed.set()

            async with Client(url, message_handler=on_message, mode="legacy") as client:
                # The docs server starts in the background; the gateway says when it is up.
                while "mcp__docs__search_docs" not in (
                    names := {tool.name for tool in (await client.list_tools()).tools}
                ):
                    await changed.wait()
                    changed = trio.Event()
                search = await client.call_tool("mcp__docs__search_docs", {"query": "gates"})
                refused = await client.call_tool("mcp__docs__delete_index", {})
                read = (
                    await client.call_tool("read", {"path": "readme.txt"}) if coding_tools else None
                )
            nursery.cancel_scope.cancel()
    assert url.startswith("http://127.0.0.1:")
    assert url.endswith("/gw")
    assert "mcp__docs__search_docs" in names
    assert ({"read", "write", "edit", "shell"} <= names) is coding_tools
    assert not search.is_error
    assert "dispatch" in _text(search)
    assert refused.is_error
    assert "permission" in _text(refused).lower()
    if coding_tools:
        assert read is not None
        assert "served in process" in _text(read)
        lines = (tmp_path / "calls.jsonl").read_text(encoding="utf-8").splitlines()
        records = [json.loads(x) for x in lines if '"call_id"' in x]
        tools = [r["tool_name"] for r in records if r["tool_name"] != "prism:session"]
        assert sorted(tools) == sorted(["mcp:docs:search_docs", "mcp:docs:delete_index", "read"]), (
            tools
        )
        # The HTTP session: opened by the client (anonymous on loopback), closed by it.
        sessions = [r["arguments"] for r in records if r["tool_name"] == "prism:session"]
        assert [s["event"] for s in sessions] == ["opened", "closed"]
        assert {s["principal"] for s in sessions} == {"anonymous"}
    else:
        assert not (tmp_path / "calls.jsonl").exists()


def _missing_root_config(tmp_path: Path, extra: str) -> Path:
    config = tmp_path / "prism.toml"
    config.write_text(f'[workspace]\nroots = ["missing"]\nsandbox = "none"\n{extra}', "utf-8")
    return config


def test_serve_over_stdio_with_a_missing_root_fails_before_serving(
    tmp_path: Path, run_cli: CliRunner
) -> None:
    # [serve] names an approver command: serve takes it, then finds the root missing.
    config = _missing_root_config(
        tmp_path, '[serve]\napprover = "command"\napprove_command = ["judge"]\n'
    )
    proc = run_cli("serve", "--config", str(config))
    assert proc.returncode == 2, proc.stderr
    assert "workspace.roots[0]" in proc.stderr
    assert "must be an existing folder" in proc.stderr
    assert proc.stdout == ""


_FACTORY = """
from mcp.server.auth.provider import AccessToken


class _Verifier:
    async def verify_token(self, token):
        return AccessToken(token=token, client_id="ide-1", scopes=["mcp"])


def make_verifier():
    return _Verifier()
"""


def test_an_oauth_verifier_factory_is_called_and_serving_goes_on_to_the_roots(
    tmp_path: Path, run_cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "factory_verifier.py").write_text(_FACTORY, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = _missing_root_config(
        tmp_path,
        """
[serve.auth]
type = "oauth"
issuer_url = "https://auth.example"
resource_server_url = "http://127.0.0.1:8765/mcp"
verifier = "factory_verifier:make_verifier"
""",
    )
    proc = run_cli("serve", "--config", str(config), "--http", "127.0.0.1:0")
    # The verifier was built (an unusable one is reported as serve.auth before this).
    assert proc.returncode == 2, proc.stderr
    assert "workspace.roots[0]" in proc.stderr
    assert "serve.auth" not in proc.stderr


_MIB = 1024 * 1024
# Each gateway knob of [serve]: values at and past its bounds, and of the wrong type.
_PROBES: dict[str, list[object]] = {
    "question_ttl_s": [0.999, 1, 604800.0, 604800.5, float("nan"), "60", True],
    "unanswered_call_s": [0.5, 1.0, 604800, 604801, float("inf"), "120"],
    "max_concurrent_calls": [0, 1, 10**6, 2.0, False],
    "max_calls_per_client": [0, 1, 10**6, 2.0, True],
    "max_waiting_calls_per_client": [0, 1, 10**6, 2.0, True],
    "max_waiting_calls": [0, 1, 10**6, 2.0, True],
    "path": ["/", "/a/b", "mcp", "", 7],
    "max_request_bytes": [1023, 1024, 64 * _MIB, 64 * _MIB + 1, 2048.0],
    "body_timeout_s": [0.09, 0.1, 3600, 3600.01, "30"],
}
_IN_OPEN_GATEWAY = (
    "question_ttl_s",
    "unanswered_call_s",
    "max_concurrent_calls",
    "max_calls_per_client",
    "max_waiting_calls_per_client",
    "max_waiting_calls",
)


def _config_takes(key: str, value: object) -> bool:
    try:
        ServeTable(**{key: value})  # type: ignore[arg-type]
    except ConfigurationError:
        return False
    return True


async def _gateway_takes(key: str, value: object) -> bool:
    try:
        if key in _IN_OPEN_GATEWAY:
            async with open_gateway(**{key: value}):  # type: ignore[arg-type]
                pass
        else:
            HttpOptions(**{key: value})  # type: ignore[arg-type]
    except ConfigurationError:
        return False
    return True


async def test_serve_takes_each_gateway_limit_exactly_as_the_gateway_does() -> None:
    """[serve]'s gateway knobs have the gateway's defaults and refuse what it refuses, so
    prism config check passes no value prism serve would then refuse, and refuses none
    it would take."""
    table = ServeTable()
    opened = inspect.signature(open_gateway).parameters
    for key, values in _PROBES.items():
        default = (
            opened[key].default
            if key in _IN_OPEN_GATEWAY
            else attrs.fields_dict(HttpOptions)[key].default
        )
        assert getattr(table, key) == default, key
        taken = [(value, _config_takes(key, value)) for value in values]
        assert taken == [(value, await _gateway_takes(key, value)) for value in values], key
        assert {ok for _value, ok in taken} == {True, False}, key  # the probes reach both sides


async def test_the_gateway_limits_of_serve_reach_the_gateway() -> None:
    loaded = parse_config(
        {
            "serve": {
                "question_ttl_s": 90,
                "unanswered_call_s": 30,
                "max_concurrent_calls": 5,
                "max_calls_per_client": 2,
                "max_waiting_calls": 7,
                "max_request_bytes": 2048,
                "body_timeout_s": 3,
            }
        }
    )
    options = http_options(loaded, ServeRequest(address=("127.0.0.1", 0)))
    assert options is not None
    assert (options.max_request_bytes, options.body_timeout_s) == (2048, 3)
    async with open_gateway(**gateway_limits(loaded)) as gateway:
        assert gateway._parked.ttl_s == 90
        assert gateway._forward.unanswered_call_s == 30
        assert gateway._limiter.total_tokens == 5
        assert gateway._max_waiting_all == 7
        assert gateway._per_client_limit == 2
