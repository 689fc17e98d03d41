"""Hostile and broken servers: each fault is bounded, nothing hangs, nothing outlives the block."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing

from prism.core import (
    ConfigurationError,
    ToolCall,
    ToolExecutionContext,
    ToolExecutionProgress,
    ToolResult,
)
from prism.mcp import (
    McpBridgeError,
    StdioTransport,
    StreamableHttpTransport,
    _session,
    open_mcp_tools,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    import mcp_prewarmed as prewarmed

    from prism.mcp import McpToolBridge

TESTS = Path(__file__).resolve().parent


def py(code: str) -> StdioTransport:
    return StdioTransport(sys.executable, ["-c", code])


async def run_tool(bridge: McpToolBridge, name: str, arguments: dict[str, object]) -> ToolResult:
    tool = next(tool for tool in bridge.tools if tool.name == f"mcp:fx:{name}")
    ctx = ToolExecutionContext(ToolCall(id="f", name=tool.name, arguments=arguments))
    return await tool.execute(arguments, ctx)  # type: ignore[arg-type]


async def test_server_that_exits_at_start_fails_open_with_its_status_and_stderr() -> None:
    with trio.fail_after(10), pytest.raises(McpBridgeError) as info:
        async with open_mcp_tools(
            server_id="fx",
            transport=py("import sys; sys.stderr.write('cannot start: no config'); sys.exit(3)"),
        ):
            pass
    assert "exit status 3" in str(info.value)
    assert "cannot start: no config" in str(info.value)
    assert info.value.server_id == "fx"
    assert info.value.__cause__ is not None


class _CancelAsTheConnectFails(trio.abc.Instrument):
    """Once armed: cancels ``scope`` right after the step that hands the session's
    connecting task its next result (the server's failure, once it exited), before that
    task runs again: the host cancelling in the very instant the connect fails, every
    time instead of by chance."""

    def __init__(self, scope: trio.CancelScope) -> None:
        self.scope = scope
        self.armed = False
        self.woken = False
        self.fired = False

    def task_scheduled(self, task: trio.lowlevel.Task) -> None:
        if self.armed and task.name.endswith("._session.Sessions._run"):
            self.woken = True

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if self.woken and not self.fired:
            self.fired = True
            self.scope.cancel()


async def test_cancelling_open_as_the_connect_fails_raises_only_the_cancellation(
    tmp_path: Path,
) -> None:
    """The server's failure and the host's cancellation arrive together, as one group
    that is no Exception: the block is cancelled quietly, no MCP error escapes it."""
    # The server waits for a line on a FIFO, then exits: the test decides when it fails.
    code = "import sys; open(sys.argv[1]).readline(); sys.exit(3)"
    for attempt in range(5):
        fifo = tmp_path / f"gate{attempt}"
        os.mkfifo(fifo)

        def release(path: Path = fifo) -> None:
            with open(path, "w", encoding="utf-8") as writer:
                writer.write("go\n")

        with trio.fail_after(60), trio.CancelScope() as scope:
            race = _CancelAsTheConnectFails(scope)
            trio.lowlevel.add_instrument(race)
            try:
                async with trio.open_nursery() as nursery:

                    async def arm_and_release(race: _CancelAsTheConnectFails = race) -> None:
                        # (the write returns once the server opened the FIFO: it runs)
                        await trio.to_thread.run_sync(release, abandon_on_cancel=True)
                        race.armed = True

                    nursery.start_soon(arm_and_release)
                    async with open_mcp_tools(
                        server_id="fx",
                        transport=StdioTransport(sys.executable, ["-c", code, str(fifo)]),
                        connect_timeout_s=60,
                    ):
                        raise AssertionError("a server that exited at start was opened")
            finally:
                trio.lowlevel.remove_instrument(race)
        if race.fired and scope.cancelled_caught:
            return
    raise AssertionError("the host never cancelled as the connect failed")


async def test_missing_command_fails_open() -> None:
    with trio.fail_after(10), pytest.raises(McpBridgeError, match="could not connect"):
        async with open_mcp_tools(
            server_id="fx", transport=StdioTransport("/nonexistent/prism-no-such-server")
        ):
            pass


async def test_garbage_before_the_handshake_fails_open() -> None:
    code = "import sys; print('Welcome to my server!', flush=True); sys.stdin.read()"
    with trio.fail_after(10), pytest.raises(McpBridgeError, match="not JSON-RPC"):
        async with open_mcp_tools(server_id="fx", transport=py(code), connect_timeout_s=5):
            pass


async def test_server_that_never_answers_initialize_times_out_and_is_killed(
    tmp_path: Path, process_alive: Callable[[int], bool]
) -> None:
    pid_file = tmp_path / "pid"
    # Ignores SIGTERM and stdin EOF too: only SIGKILL of its group ends it.
    code = (
        "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
        "[time.sleep(1) for _ in range(600)]"
    )
    with trio.fail_after(15), pytest.raises(McpBridgeError, match=r"connect_timeout_s=1s"):
        async with open_mcp_tools(server_id="fx", transport=py(code), connect_timeout_s=1):
            pass
    assert not process_alive(int(pid_file.read_text()))


async def test_nothing_listening_on_the_http_url_fails_open() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    transport = StreamableHttpTransport(f"http://127.0.0.1:{port}/mcp")
    with trio.fail_after(10), pytest.raises(McpBridgeError) as info:
        async with open_mcp_tools(server_id="fx", transport=transport, connect_timeout_s=3):
            pass
    assert "connect" in str(info.value).lower()


async def test_http_server_that_accepts_but_never_answers_times_out() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        transport = StreamableHttpTransport(f"http://127.0.0.1:{port}/mcp")
        with trio.fail_after(10), pytest.raises(McpBridgeError, match=r"connect_timeout_s=1s"):
            async with open_mcp_tools(server_id="fx", transport=transport, connect_timeout_s=1):
                pass


async def test_crash_mid_call_is_an_error_result_and_the_next_call_reconnects(
    fixture_stdio_process: StdioTransport, process_alive: Callable[[int], bool]
) -> None:
    with trio.fail_after(20):
        async with open_mcp_tools(server_id="fx", transport=fixture_stdio_process) as bridge:
            first_pid = bridge.server_pid
            assert first_pid is not None
            crashed = await run_tool(bridge, "crash", {})
            assert crashed.is_error
            assert crashed.details["mcp_error"] == "connection_lost"
            assert "reconnects" in crashed.joined_text
            assert bridge.server_info is not None
            assert bridge.protocol_version == "2026-07-28"
            again = await run_tool(bridge, "echo", {"text": "back"})
            assert again.joined_text == "back"
            assert bridge.server_pid not in (None, first_pid)
            second_pid = bridge.server_pid
        assert second_pid is not None
        assert not process_alive(first_pid)
        assert not process_alive(second_pid)


async def test_server_that_died_while_idle_is_replaced_before_the_next_call(
    fixture_stdio: StdioTransport,
) -> None:
    with trio.fail_after(20):
        async with open_mcp_tools(server_id="fx", transport=fixture_stdio) as bridge:
            first_pid = bridge.server_pid
            assert first_pid is not None
            pidfd = os.pidfd_open(first_pid)
            try:
                bye = await run_tool(bridge, "exit_soon", {})
                await trio.lowlevel.wait_readable(pidfd)
            finally:
                os.close(pidfd)
            await trio.testing.wait_all_tasks_blocked()
            result = await run_tool(bridge, "echo", {"text": "new server"})
            assert bridge.server_pid not in (None, first_pid)
    assert bye.joined_text == "bye"
    assert not result.is_error
    assert result.joined_text == "new server"


async def test_garbage_mid_call_is_an_error_result_not_a_hang(
    fixture_stdio: StdioTransport,
) -> None:
    with trio.fail_after(20):
        async with open_mcp_tools(
            server_id="fx", transport=fixture_stdio, call_timeout_s=3600
        ) as bridge:
            result = await run_tool(bridge, "raw_garbage", {})
            # The garbage itself ended the call (no timeout could have: it is an hour).
            assert result.is_error
            assert "not JSON-RPC" in result.joined_text
            assert result.details.get("limit") is None
            again = await run_tool(bridge, "echo", {"text": "fresh session"})
            assert again.joined_text == "fresh session"


@pytest.mark.parametrize("direct", [True, False])
async def test_a_lone_surrogate_in_an_answer_is_refused_and_the_session_goes_on(
    fixture_stdio: StdioTransport, monkeypatch: pytest.MonkeyPatch, direct: bool
) -> None:
    # A "\ud800" escape is valid JSON but no UTF-8 holds it: passed on, the host's
    # answer (a gateway's) failed to serialise and the ledger lost the call.
    if not direct:  # the SDK's own call path instead of the direct one
        monkeypatch.setattr(_session, "install_fast_call_tool", lambda *_args: None)
    answers = [
        ("result", r'{"content":[{"type":"text","text":"a\ud800"}]}'),
        ("result", r'{"content":[],"structuredContent":{"k":"\udfff"}}'),
        ("result", r'{"content":[],"structuredContent":{"\udfff":1}}'),
        ("result", r'{"content":[{"type":"text","text":"a"}],"_meta":{"k":"\ud800"}}'),
        (
            "result",
            r'{"content":[{"type":"resource","resource":{"uri":"f:///x","text":"\ud800"}}]}',
        ),
        ("error", r'{"code":-1,"message":"no \ud800"}'),
        ("error", r'{"code":-1,"message":"no","data":["\udbff"]}'),
    ]
    with trio.fail_after(30):
        async with open_mcp_tools(server_id="fx", transport=fixture_stdio) as bridge:
            for member, value in answers:
                result = await run_tool(bridge, "raw_answer", {"member": member, "value": value})
                assert result.is_error, value
                assert "result refused: a string with a lone surrogate" in result.joined_text
                result.joined_text.encode()  # what reaches the host is UTF-8 text
            again = await run_tool(bridge, "echo", {"text": "same session"})
            assert again.joined_text == "same session"


async def test_a_server_request_whose_id_has_a_lone_surrogate_is_refused_unanswerable(
    fixture_stdio: StdioTransport, caplog: pytest.LogCaptureFixture
) -> None:
    # Answered by the SDK, the answer could not be written: a traceback, and the
    # session to the server torn down (through a gateway, after asking the user).
    ping = r'{"jsonrpc":"2.0","id":"\ud800","method":"ping"}'
    with trio.fail_after(30):
        async with open_mcp_tools(server_id="fx", transport=fixture_stdio) as bridge:
            result = await run_tool(bridge, "raw_first", {"line": ping, "text": "answered"})
            again = await run_tool(bridge, "echo", {"text": "same session"})
            refused = bridge.refused_server_requests
    assert result.joined_text == "answered"
    assert again.joined_text == "same session"
    assert refused == 1
    assert not [r for r in caplog.records if r.exc_info]


async def test_a_non_finite_number_in_structured_content_is_refused(
    fixture_stdio: StdioTransport,
) -> None:
    # NaN, Infinity and 1e400 parse, but no JSON holds them: the structured part was
    # dropped and the result passed on (and recorded) as a success.
    with trio.fail_after(30):
        async with open_mcp_tools(
            server_id="fx", transport=fixture_stdio, protocol="legacy"
        ) as bridge:
            for number in ("NaN", "Infinity", "-Infinity", "1e400"):
                value = f'{{"content":[],"structuredContent":{{"x":[{number}]}}}}'
                result = await run_tool(bridge, "raw_answer", {"member": "result", "value": value})
                assert result.is_error, number
                assert result.details["mcp_error"] == "server_error"
                assert "structuredContent holds a non-finite number" in result.joined_text


async def test_server_that_sleeps_forever_gets_a_timeout_result(
    fixture_stdio: StdioTransport,
) -> None:
    with trio.fail_after(20):
        async with open_mcp_tools(
            server_id="fx", transport=fixture_stdio, call_timeout_s=0.5
        ) as bridge:
            result = await run_tool(bridge, "sleep", {"seconds": 3600})
    assert result.is_error
    assert result.details["limit"] == "call_timeout_s"


async def test_no_server_process_or_child_outlives_the_block(
    fixture_stdio_process: StdioTransport, process_alive: Callable[[int], bool]
) -> None:
    with trio.fail_after(20):
        async with open_mcp_tools(server_id="fx", transport=fixture_stdio_process) as bridge:
            server_pid = bridge.server_pid
            child = await run_tool(bridge, "spawn_child", {})
            child_pid = int(child.joined_text)
            assert server_pid is not None
            assert process_alive(server_pid)
            assert process_alive(child_pid)
    assert not process_alive(server_pid)
    assert not process_alive(child_pid)


async def test_cancelling_the_host_mid_call_still_stops_the_server(
    fixture_stdio_process: StdioTransport, process_alive: Callable[[int], bool]
) -> None:
    pids: list[int] = []
    with trio.fail_after(30):
        with trio.CancelScope() as scope:
            async with open_mcp_tools(
                server_id="fx", transport=fixture_stdio_process, call_timeout_s=60
            ) as bridge:
                assert bridge.server_pid is not None
                pids.append(bridge.server_pid)
                tool = next(t for t in bridge.tools if t.name == "mcp:fx:progress")

                def on_event(event: object) -> None:
                    # The first progress notification proves the call is running on the
                    # server: cancel the host's whole block right then.
                    if isinstance(event, ToolExecutionProgress):
                        scope.cancel()

                call = ToolCall(id="p", name=tool.name, arguments={})
                ctx = ToolExecutionContext(call, on_event=on_event)
                await tool.execute({"steps": 10_000, "interval": 0.05}, ctx)
        assert scope.cancelled_caught
    assert pids
    assert not process_alive(pids[0])


async def test_server_env_holds_only_safe_defaults_and_the_given_env(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PRISM_TEST_SECRET_TOKEN", "hunter2")
    transport = StdioTransport(
        sys.executable, [str(TESTS / "mcp_fixture_server.py"), "stdio"], env={"GIVEN": "yes"}
    )
    with trio.fail_after(20):
        async with open_mcp_tools(server_id="fx", transport=transport) as bridge:
            secret = await run_tool(bridge, "env", {"name": "PRISM_TEST_SECRET_TOKEN"})
            given = await run_tool(bridge, "env", {"name": "GIVEN"})
    assert secret.joined_text == "<unset>"
    assert given.joined_text == "yes"


async def test_tls_variables_and_env_passthrough_reach_the_server_and_nothing_else(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    monkeypatch.setenv("PRISM_TEST_PASS_ONE", "one")
    monkeypatch.setenv("PRISM_TEST_EXACT", "exact")
    monkeypatch.setenv("PRISM_TEST_SECRET_TOKEN", "hunter2")
    transport = StdioTransport(
        sys.executable,
        [str(TESTS / "mcp_fixture_server.py"), "stdio"],
        env={"PRISM_TEST_EXACT": "given wins"},
        env_passthrough=("PRISM_TEST_PASS_*", "PRISM_TEST_EXACT"),
    )
    with trio.fail_after(20):
        async with open_mcp_tools(server_id="fx", transport=transport) as bridge:
            cert = await run_tool(bridge, "env", {"name": "SSL_CERT_FILE"})
            passed = await run_tool(bridge, "env", {"name": "PRISM_TEST_PASS_ONE"})
            exact = await run_tool(bridge, "env", {"name": "PRISM_TEST_EXACT"})
            secret = await run_tool(bridge, "env", {"name": "PRISM_TEST_SECRET_TOKEN"})
    assert cert.joined_text == str(tmp_path / "ca.pem")
    assert passed.joined_text == "one"
    assert exact.joined_text == "given wins"
    assert secret.joined_text == "<unset>"


def test_env_passthrough_rejects_a_bare_string_and_bad_names() -> None:
    with pytest.raises(ConfigurationError, match="env_passthrough"):
        StdioTransport("x", env_passthrough="AWS_*")
    with pytest.raises(ConfigurationError, match="env_passthrough"):
        StdioTransport("x", env_passthrough=("A=B",))


async def test_hostile_tool_names_duplicates_and_huge_descriptions_are_contained(
    tmp_path: Path,
) -> None:
    # A hand-rolled server listing names that would confuse permission globs, a duplicate
    # name and a 100 kB description.
    script = tmp_path / "names_server.py"
    script.write_text(
        "import json, sys\n"
        "tools = [\n"
        "  {'name': 'ok_tool', 'description': 'd' * 100000, 'inputSchema': {'type': 'object'}},\n"
        "  {'name': 'ok_tool', 'description': 'shadow', 'inputSchema': {'type': 'object'}},\n"
        "  {'name': 'x:*:execute', 'inputSchema': {'type': 'object'}},\n"
        "  {'name': 'a' * 500, 'inputSchema': {'type': 'object'}},\n"
        "  {'name': 'new\\nline', 'inputSchema': {'type': 'object'}},\n"
        "]\n"
        "for line in sys.stdin:\n"
        "    msg = json.loads(line)\n"
        "    if 'id' not in msg: continue\n"
        "    if msg['method'] == 'initialize':\n"
        "        result = {'protocolVersion': '2025-11-25', 'capabilities': {'tools': {}},\n"
        "                  'serverInfo': {'name': 'names', 'version': '1'}}\n"
        "    elif msg['method'] == 'tools/list':\n"
        "        result = {'tools': tools}\n"
        "    else:\n"
        "        out = {'jsonrpc': '2.0', 'id': msg['id'],\n"
        "               'error': {'code': -32601, 'message': 'no'}}\n"
        "        print(json.dumps(out), flush=True); continue\n"
        "    print(json.dumps({'jsonrpc': '2.0', 'id': msg['id'], 'result': result}), flush=True)\n"
    )
    transport = StdioTransport(sys.executable, [str(script)])
    with trio.fail_after(20):
        async with open_mcp_tools(server_id="fx", transport=transport) as bridge:
            names = [tool.name for tool in bridge.tools]
            description = bridge.tools[0].description
            assert bridge.protocol_version == "2025-11-25"
    assert names == ["mcp:fx:ok_tool"]
    assert description is not None
    assert description.startswith("ddd")
    assert len(description) <= 8192


@pytest.mark.slow
async def test_a_50_mb_flood_does_not_raise_host_peak_memory(
    tmp_path: Path, probe_parent: prewarmed.WarmParent
) -> None:
    limit = 1_000_000
    probe = TESTS / "mcp_memory_probe.py"
    with trio.fail_after(60):
        done = await trio.run_process(
            probe_parent.argv(probe, str(limit), str(50_000_000)),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    report = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert report["refused"] is True
    assert report["recovered"] is True
    # The flood is 50x the limit; the host's peak grows by at most a few times the limit.
    assert report["peak_growth_bytes"] < 4 * limit, report


async def test_concurrent_calls_after_a_crash_share_one_reconnect(
    fixture_stdio: StdioTransport,
) -> None:
    pids: list[str] = []
    with trio.fail_after(30):
        async with open_mcp_tools(server_id="fx", transport=fixture_stdio) as bridge:
            crashed = await run_tool(bridge, "crash", {})
            assert crashed.is_error

            async def ask_pid() -> None:
                result = await run_tool(bridge, "pid", {})
                assert not result.is_error, result.joined_text
                pids.append(result.joined_text)

            async with trio.open_nursery() as nursery:
                for _ in range(6):
                    nursery.start_soon(ask_pid)
    assert len(pids) == 6
    assert len(set(pids)) == 1
