"""End to end: ``prism run --model PROVIDER:MODEL "task"`` against loopback model servers.

The test serves the provider's wire format (Chat Completions SSE, Anthropic
Messages SSE) on 127.0.0.1 from its own trio loop and runs the real ``prism``
command in a subprocess pointed at it with ``--base-url``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pty
import signal
import subprocess
import sys
from functools import partial
from typing import TYPE_CHECKING

import attrs
import cli_prewarmed as prewarmed
import pytest
import trio
from anthropic.types import (
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
)
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import Response, ResponseCompletedEvent, ResponseTextDeltaEvent

from prism.core.ledger import read_ledger

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from pydantic import BaseModel

pytestmark = pytest.mark.usefixtures("plain_output")

Events = list[tuple[str | None, str]]
HOLD = "__hold__"

CONFIG = """
[agent]
max_tool_rounds = 6

[workspace]
roots = ["repo"]
# On the host (no sandbox) only proved-safe commands run; the rest would need approval.
sandbox = "none"

[ledger]
path = "ledger.jsonl"
"""


@attrs.define(eq=False)
class ModelServer:
    """Answers each POST with the next queued event stream; keeps the request bodies."""

    streams: list[Events]
    bodies: list[dict[str, object]] = attrs.Factory(list)
    holding: trio.Event = attrs.Factory(trio.Event)

    async def handle(self, stream: trio.SocketStream) -> None:
        buffer = b""
        while b"\r\n\r\n" not in buffer:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            buffer += chunk
        head, _, body = buffer.partition(b"\r\n\r\n")
        length = 0
        for line in head.decode("latin-1").split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        while len(body) < length:
            body += await stream.receive_some(65536)
        self.bodies.append(json.loads(body))
        events = self.streams.pop(0)
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
        )
        for event, data in events:
            if event == HOLD:
                # Keep the stream open until the client goes away.
                self.holding.set()
                with contextlib.suppress(trio.BrokenResourceError):
                    while await stream.receive_some(65536):
                        pass
                break
            frame = f"event: {event}\n" if event else ""
            await stream.send_all(f"{frame}data: {data}\n\n".encode())
        await stream.aclose()


async def run_prism(
    tmp_path: Path, server: ModelServer, *args: str, command: str = "run", stdin: str = ""
) -> subprocess.CompletedProcess[bytes]:
    """``prism COMMAND ARGS`` through ``prism.cli.main`` in a worker thread of this process.

    The model server answers from this test's loop; ``PORT`` in ARGS is its port.
    stdin reads ``stdin``; stdout and stderr are captured, as in a pipe.
    """
    from prism.cli import main

    out, err = io.StringIO(), io.StringIO()

    def call(argv: list[str]) -> int:
        with (
            contextlib.chdir(tmp_path),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
            contextlib.ExitStack() as stack,
        ):
            stack.enter_context(_swapped_stdin(stdin))
            return main(argv)

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1"))
        port = str(listeners[0].socket.getsockname()[1])
        argv = [command, *(a.replace("PORT", port) for a in args)]
        with trio.fail_after(60):
            code = await trio.to_thread.run_sync(call, argv)
        nursery.cancel_scope.cancel()
    return subprocess.CompletedProcess(argv, code, out.getvalue().encode(), err.getvalue().encode())


@contextlib.contextmanager
def _swapped_stdin(text: str) -> Iterator[None]:
    saved = sys.stdin
    sys.stdin = io.StringIO(text)
    try:
        yield
    finally:
        sys.stdin = saved


def setup_workspace(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    (tmp_path / "prism.toml").write_text(CONFIG, encoding="utf-8")


def chunk(delta: dict[str, object], finish: str | None = None) -> tuple[str | None, str]:
    value = ChatCompletionChunk.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "test-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )
    return None, value.model_dump_json(exclude_none=True)


def usage_chunk(prompt: int, completion: int) -> tuple[str | None, str]:
    """The last chunk of a stream asked for usage (``stream_options.include_usage``)."""
    value = ChatCompletionChunk.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "test-model",
            "choices": [],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }
    )
    return None, value.model_dump_json(exclude_none=True)


def one_call(call_id: str, name: str, args: dict[str, object]) -> Events:
    """A Chat Completions stream whose turn is one tool call."""
    return [
        chunk(openai_call(0, call_id, name, args)),
        chunk({}, "tool_calls"),
        (None, "[DONE]"),
    ]


def openai_call(index: int, call_id: str, name: str, args: dict[str, object]) -> dict[str, object]:
    function = {"name": name, "arguments": json.dumps(args)}
    return {
        "tool_calls": [{"index": index, "id": call_id, "type": "function", "function": function}]
    }


async def test_run_with_an_openai_model_reads_edits_and_is_refused_a_risky_command(
    tmp_path: Path,
) -> None:
    setup_workspace(tmp_path)
    server = ModelServer(
        [
            [
                chunk(openai_call(0, "r1", "read", {"path": "notes.txt"})),
                chunk(
                    openai_call(
                        1,
                        "e1",
                        "edit",
                        {"path": "notes.txt", "edits": [{"old_text": "beta", "new_text": "gamma"}]},
                    )
                ),
                chunk(openai_call(2, "s1", "shell", {"command": "rm -rf /tmp/x"})),
                chunk({}, "tool_calls"),
                (None, "[DONE]"),
            ],
            [chunk({"content": "Edited notes.txt; the rm was refused."}, "stop"), (None, "[DONE]")],
        ]
    )
    process = await run_prism(
        tmp_path,
        server,
        "--model",
        "openai:test-model",
        "--base-url",
        "http://127.0.0.1:PORT/v1",
        "--no-live",
        "replace beta with gamma, then clean /tmp/x",
    )
    out = process.stdout.decode()
    assert process.returncode == 0, process.stderr.decode()
    assert "Edited notes.txt; the rm was refused." in out
    assert (tmp_path / "repo" / "notes.txt").read_text(encoding="utf-8") == "alpha\ngamma\n"
    # The ledger holds every call: read and edit ran, the shell command was refused.
    contents = read_ledger(tmp_path / "ledger.jsonl")
    statuses = {r.call_id: r.status for r in contents.records}
    assert statuses == {"r1": "ok", "e1": "ok", "s1": "error"}
    # The model saw each result, in call order, under the names it used.
    second = server.bodies[1]
    messages = second["messages"]
    assert isinstance(messages, list)
    assert [m.get("tool_call_id") for m in messages if m["role"] == "tool"] == ["r1", "e1", "s1"]
    assert "alpha" in messages[-3]["content"]
    assert second["model"] == "test-model"


def ev(model: BaseModel) -> tuple[str | None, str]:
    data = model.model_dump(mode="json", exclude_none=True)
    return str(data["type"]), json.dumps(data)


def anthropic_turn(blocks: list[dict[str, object]], stop: str) -> Events:
    events: Events = [
        ev(
            RawMessageStartEvent.model_validate(
                {
                    "type": "message_start",
                    "message": {
                        "id": "msg_1",
                        "type": "message",
                        "role": "assistant",
                        "model": "test-model",
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {"input_tokens": 10, "output_tokens": 1},
                    },
                }
            )
        )
    ]
    for index, block in enumerate(blocks):
        start: dict[str, object]
        delta: dict[str, object]
        if block["type"] == "text":
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events.append(
            ev(
                RawContentBlockStartEvent.model_validate(
                    {"type": "content_block_start", "index": index, "content_block": start}
                )
            )
        )
        events.append(
            ev(
                RawContentBlockDeltaEvent.model_validate(
                    {"type": "content_block_delta", "index": index, "delta": delta}
                )
            )
        )
        events.append(ev(RawContentBlockStopEvent(type="content_block_stop", index=index)))
    events.append(
        ev(
            RawMessageDeltaEvent.model_validate(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                }
            )
        )
    )
    events.append(ev(RawMessageStopEvent(type="message_stop")))
    return events


async def test_run_with_an_anthropic_model_writes_a_file(tmp_path: Path) -> None:
    setup_workspace(tmp_path)
    write = {"path": "hello.txt", "content": "hi\n"}
    server = ModelServer(
        [
            anthropic_turn(
                [{"type": "tool_use", "id": "w1", "name": "write", "input": write}], "tool_use"
            ),
            anthropic_turn([{"type": "text", "text": "Wrote hello.txt."}], "end_turn"),
        ]
    )
    process = await run_prism(
        tmp_path,
        server,
        "--model",
        "anthropic:test-model",
        "--base-url",
        "http://127.0.0.1:PORT",
        "--json",
        "write hello.txt",
    )
    assert process.returncode == 0, process.stderr.decode()
    report = json.loads(process.stdout)
    assert report["final"] == "Wrote hello.txt."
    assert [(c["call_id"], c["status"]) for c in report["calls"]] == [("w1", "ok")]
    # Two requests of 10 prompt tokens and 5 answer tokens each, as the API counted them.
    assert report["usage"] == {"input_tokens": 20, "output_tokens": 10}
    assert (report["stop_reason"], report["truncated"]) == ("end_turn", False)
    assert (tmp_path / "repo" / "hello.txt").read_text(encoding="utf-8") == "hi\n"
    messages = server.bodies[1]["messages"]
    assert isinstance(messages, list)
    assert messages[2]["content"][0]["tool_use_id"] == "w1"


async def test_an_answer_cut_by_the_length_limit_is_said_in_the_table_and_in_json(
    tmp_path: Path,
) -> None:
    setup_workspace(tmp_path)

    def cut() -> Events:
        return [chunk({"content": "The first half of an ans"}, "length"), (None, "[DONE]")]

    args = ("--model", "openai:test-model", "--base-url", "http://127.0.0.1:PORT/v1")
    shown = await run_prism(tmp_path, ModelServer([cut()]), *args, "--no-live", "explain")
    out = shown.stdout.decode()
    assert shown.returncode == 0, shown.stderr.decode()
    assert "the answer was cut by the model's length limit (stop reason length)" in out
    assert "stop reason: length" in out
    as_json = await run_prism(tmp_path, ModelServer([cut()]), *args, "--json", "explain")
    report = json.loads(as_json.stdout)
    assert (report["stop_reason"], report["truncated"]) == ("length", True)


async def test_run_with_no_key_and_no_base_url_says_which_variable(tmp_path: Path) -> None:
    setup_workspace(tmp_path)
    process = await run_prism(
        tmp_path, ModelServer([]), "--model", "openai:gpt-x", "--no-live", "anything"
    )
    assert process.returncode != 0
    assert "OPENAI_API_KEY" in process.stderr.decode() + process.stdout.decode()


PROMPT = b"[a]lways for this session: "


async def run_prism_on_a_terminal(
    tmp_path: Path, server: ModelServer, answers: list[bytes], *args: str
) -> tuple[int, str]:
    """``prism run ARGS`` on a pseudo-terminal, answering each approval question in turn.

    ``prism.cli.main`` runs in a worker thread of this process with the
    terminal as its stdin, stdout and stderr; the model server and the terminal
    driver run on this test's loop.
    """
    from prism.cli import main

    master, slave = pty.openpty()
    output = b""
    finished = trio.Event()

    def call(argv: list[str]) -> int:
        saved = sys.stdin, sys.stdout, sys.stderr
        # The terminal's only files: closing them lets the driver read to the end.
        with (
            open(slave, encoding="utf-8") as terminal_in,
            open(os.dup(slave), "w", encoding="utf-8") as terminal_out,
        ):
            sys.stdin, sys.stdout, sys.stderr = terminal_in, terminal_out, terminal_out
            try:
                with contextlib.chdir(tmp_path):
                    return main(argv)
            finally:
                sys.stdin, sys.stdout, sys.stderr = saved

    async def command(argv: list[str], result: list[int]) -> None:
        result.append(await trio.to_thread.run_sync(call, argv))
        finished.set()

    result: list[int] = []
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1"))
        port = str(listeners[0].socket.getsockname()[1])
        nursery.start_soon(command, ["run", *(a.replace("PORT", port) for a in args)], result)
        terminal = trio.lowlevel.FdStream(master)
        pending = list(answers)
        with trio.fail_after(60):
            while True:
                try:
                    chunk = await terminal.receive_some(4096)
                except (OSError, trio.BrokenResourceError):
                    break  # EIO: the command ended and closed the terminal
                if not chunk:
                    break
                output += chunk
                if pending and output.count(PROMPT) > len(answers) - len(pending):
                    await terminal.send_all(pending.pop(0))
            await finished.wait()
        await terminal.aclose()
        nursery.cancel_scope.cancel()
    return result[0], output.decode(errors="replace")


async def test_on_a_terminal_approval_is_asked_and_answered(tmp_path: Path) -> None:
    """The issue's proof: a read, an MCP tool, an edit, and shell commands asked about."""
    setup_workspace(tmp_path)
    with (tmp_path / "prism.toml").open("a", encoding="utf-8") as config:
        config.write(
            f"""
[mcp.servers.docs]
{prewarmed.toml_command("-m", "prism.cli.demo_server")}"""
        )
    edit: dict[str, object] = {
        "path": "notes.txt",
        "edits": [{"old_text": "beta", "new_text": "gamma"}],
    }
    server = ModelServer(
        [
            [
                chunk(openai_call(0, "r1", "read", {"path": "notes.txt"})),
                chunk(openai_call(1, "m1", "mcp__docs__search_docs", {"query": "ledger"})),
                chunk({}, "tool_calls"),
                (None, "[DONE]"),
            ],
            [
                chunk(openai_call(0, "e1", "edit", edit)),
                chunk({}, "tool_calls"),
                (None, "[DONE]"),
            ],
            one_call("s1", "shell", {"command": "touch yes.txt"}),
            one_call("s2", "shell", {"command": "touch no.txt"}),
            [chunk({"content": "One file made."}, "stop"), (None, "[DONE]")],
        ]
    )
    returncode, output = await run_prism_on_a_terminal(
        tmp_path,
        server,
        [b"y\n", b"n\n"],
        "--model",
        "openai:test-model",
        "--base-url",
        "http://127.0.0.1:PORT/v1",
        "make two files",
    )
    assert returncode == 0, output
    assert "approval needed: shell: run `touch yes.txt`" in output
    assert "approval needed: shell: run `touch no.txt`" in output
    assert (tmp_path / "repo" / "yes.txt").exists()
    assert not (tmp_path / "repo" / "no.txt").exists()
    assert (tmp_path / "repo" / "notes.txt").read_text(encoding="utf-8") == "alpha\ngamma\n"
    records = read_ledger(tmp_path / "ledger.jsonl").records
    statuses = {r.call_id: r.status for r in records}
    assert statuses == {"r1": "ok", "m1": "ok", "e1": "ok", "s1": "ok", "s2": "error"}
    assert {r.call_id: r.tool_name for r in records}["m1"] == "mcp:docs:search_docs"
    # The transcript the model saw: every call answered, in order, turn after turn.
    last = server.bodies[-1]["messages"]
    assert isinstance(last, list)
    answered = [m["tool_call_id"] for m in last if m["role"] == "tool"]
    assert answered == ["r1", "m1", "e1", "s1", "s2"]


async def test_with_yes_never_nothing_is_asked_even_on_a_terminal(tmp_path: Path) -> None:
    setup_workspace(tmp_path)
    server = ModelServer(
        [
            one_call("s1", "shell", {"command": "touch yes.txt"}),
            [chunk({"content": "Refused."}, "stop"), (None, "[DONE]")],
        ]
    )
    returncode, output = await run_prism_on_a_terminal(
        tmp_path,
        server,
        [],
        "--model",
        "openai:test-model",
        "--base-url",
        "http://127.0.0.1:PORT/v1",
        "--yes",
        "never",
        "make a file",
    )
    assert returncode == 0, output
    assert "approval needed" not in output
    assert not (tmp_path / "repo" / "yes.txt").exists()


async def test_chat_keeps_the_conversation_and_ctrl_c_aborts_only_the_turn(
    tmp_path: Path,
) -> None:
    setup_workspace(tmp_path)
    server = ModelServer(
        [
            [chunk({"content": "Hi there."}, "stop"), (None, "[DONE]")],
            [chunk({"content": "Let me"}), (HOLD, "")],
            [chunk({"content": "Back."}, "stop"), (None, "[DONE]")],
        ]
    )
    env = {**os.environ, "PYTHONUTF8": "1"}
    master, slave = pty.openpty()
    output = b""
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        argv = [sys.executable, "-m", "prism.cli", "chat", "--model", "openai:test-model"]
        argv += ["--base-url", f"http://127.0.0.1:{port}/v1"]
        process = await trio.lowlevel.open_process(
            argv, cwd=tmp_path, env=env, stdin=slave, stdout=slave, stderr=slave
        )
        os.close(slave)
        terminal = trio.lowlevel.FdStream(master)
        lines = [b"hello\n", b"think\n", b"again\n", b"/exit\n"]
        sent = 0

        async def interrupt_when_held() -> None:
            await server.holding.wait()
            process.send_signal(signal.SIGINT)

        nursery.start_soon(interrupt_when_held)
        with trio.fail_after(60):
            while True:
                try:
                    chunk_ = await terminal.receive_some(4096)
                except (OSError, trio.BrokenResourceError):
                    break
                if not chunk_:
                    break
                output += chunk_
                if sent < len(lines) and output.count(b"you> ") > sent:
                    await terminal.send_all(lines[sent])
                    sent += 1
            returncode = await process.wait()
        await terminal.aclose()
        nursery.cancel_scope.cancel()
    text = output.decode(errors="replace")
    assert returncode == 0, text
    assert "Hi there." in text
    assert "(turn aborted; the conversation goes on)" in text
    assert "Back." in text
    # Ctrl-C aborted a turn, not the chat, which the user left with /exit.
    assert [run.outcome for run in read_ledger(tmp_path / "ledger.jsonl").runs] == ["finished"]
    # The last request carried the whole conversation; the aborted turn left its
    # user message and nothing half-said.
    messages = server.bodies[-1]["messages"]
    assert isinstance(messages, list)
    assert [(m["role"], m["content"]) for m in messages[1:]] == [
        ("user", "hello"),
        ("assistant", "Hi there."),
        ("user", "think"),
        ("user", "again"),
    ]


async def test_chat_stopped_by_sigterm_mid_turn_exits_and_its_run_says_aborted(
    tmp_path: Path,
) -> None:
    setup_workspace(tmp_path)
    server = ModelServer(
        [
            [chunk({"content": "Hi there."}, "stop"), (None, "[DONE]")],
            [chunk({"content": "Let me"}), (HOLD, "")],
        ]
    )
    env = {**os.environ, "PYTHONUTF8": "1"}
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        argv = [sys.executable, "-m", "prism.cli", "chat", "--model", "openai:test-model"]
        argv += ["--base-url", f"http://127.0.0.1:{port}/v1"]
        with (tmp_path / "err.txt").open("wb") as err:
            process = await trio.lowlevel.open_process(
                argv,
                cwd=tmp_path,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
            assert process.stdin is not None
            with trio.fail_after(60):
                await process.stdin.send_all(b"hello\nthink\n")
                await server.holding.wait()  # the second turn is streaming
                process.send_signal(signal.SIGTERM)
                returncode = await process.wait()
            await process.stdin.aclose()
        nursery.cancel_scope.cancel()
    stderr = (tmp_path / "err.txt").read_text(encoding="utf-8")
    assert returncode == 130, stderr  # SIGTERM ends the chat, not just the turn
    assert "Traceback" not in stderr
    [run] = read_ledger(tmp_path / "ledger.jsonl").runs
    assert run.outcome == "aborted"


def responses_text(answer: str) -> Events:
    """A Responses API stream answering ``answer`` (built from the SDK's own types)."""
    done = Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1,
            "model": "test-model",
            "status": "completed",
            "output": [
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": answer, "annotations": []}],
                }
            ],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }
    )
    delta = ResponseTextDeltaEvent.model_validate(
        {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "sequence_number": 1,
            "delta": answer,
            "logprobs": [],
        }
    )
    completed = ResponseCompletedEvent(type="response.completed", sequence_number=2, response=done)
    return [ev(delta), ev(completed)]


async def test_run_with_the_openai_responses_api(tmp_path: Path) -> None:
    setup_workspace(tmp_path)
    server = ModelServer([responses_text("Answered through the Responses API.")])
    process = await run_prism(
        tmp_path,
        server,
        "--model",
        "openai-responses:test-model",
        "--base-url",
        "http://127.0.0.1:PORT/v1",
        "--json",
        "say something",
    )
    assert process.returncode == 0, process.stderr.decode()
    assert json.loads(process.stdout)["final"] == "Answered through the Responses API."
    body = server.bodies[0]
    assert body["model"] == "test-model"
    assert "input" in body  # the Responses API's request shape, not Chat Completions'


@pytest.mark.parametrize("spec", ["nope:x", "openai-responses:", "openai-responses"])
async def test_a_bad_model_spec_is_a_clean_error_naming_every_provider(
    tmp_path: Path, spec: str
) -> None:
    setup_workspace(tmp_path)
    process = await run_prism(tmp_path, ModelServer([]), "--model", spec, "task")
    assert process.returncode == 2
    stderr = process.stderr.decode()
    assert (
        "--model must be PROVIDER:MODEL with PROVIDER one of openai, openai-responses, "
        f"anthropic (for example openai:gpt-4.1), got {spec!r}"
    ) in (stderr)
    assert "Traceback" not in stderr


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
async def test_ctrl_c_ends_a_model_run_cleanly_and_the_ledger_stays_valid(
    tmp_path: Path, signum: signal.Signals
) -> None:
    setup_workspace(tmp_path)
    server = ModelServer(
        [
            one_call("r1", "read", {"path": "notes.txt"}),
            [chunk({"content": "Let me think"}), (HOLD, "")],
        ]
    )
    env = {**os.environ, "PYTHONUTF8": "1"}
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        argv = [sys.executable, "-m", "prism.cli", "run", "--model", "openai:test-model"]
        argv += ["--base-url", f"http://127.0.0.1:{port}/v1", "--json", "read the notes"]
        with (tmp_path / "out.json").open("wb") as out, (tmp_path / "err.txt").open("wb") as err:
            process = await trio.lowlevel.open_process(
                argv, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err
            )
            with trio.fail_after(60):
                await server.holding.wait()
                process.send_signal(signum)
                returncode = await process.wait()
        nursery.cancel_scope.cancel()
    stderr = (tmp_path / "err.txt").read_text(encoding="utf-8")
    assert returncode == 1, stderr  # the run was aborted, and says so
    assert "Traceback" not in stderr
    assert "interrupted" in stderr
    report = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    assert report["aborted"] is True
    assert [(c["call_id"], c["status"]) for c in report["calls"]] == [("r1", "ok")]
    contents = read_ledger(tmp_path / "ledger.jsonl")
    assert [(r.call_id, r.status) for r in contents.records] == [("r1", "ok")]
    assert contents.torn_line is None
    # Ended cleanly, not killed, and said to be interrupted: the marker says aborted.
    assert [run.outcome for run in contents.runs] == ["aborted"]


async def test_chat_in_a_pipe_runs_each_line_as_a_turn_and_reports_model_errors(
    tmp_path: Path,
) -> None:
    setup_workspace(tmp_path)
    failing = {"error": {"message": "the model is overloaded", "type": "server_error"}}
    server = ModelServer(
        [
            [*one_call("r1", "read", {"path": "notes.txt"})[:-1], usage_chunk(100, 20)],
            # (a model steered by what it read prints escapes: the clipboard, the title)
            [
                chunk({"content": "It says \x1b]52;c;eA==\x07alpha."}, "stop"),
                usage_chunk(150, 5),
                (None, "[DONE]"),
            ],
            [(None, json.dumps(failing))],
            [chunk({"content": "Still here."}, "stop"), usage_chunk(160, 3), (None, "[DONE]")],
            [chunk({"content": "A long story that"}, "length"), usage_chunk(200, 64)],
        ]
    )
    lines = "what is in notes.txt?\n\nfail now\nstill there?\ntell a story\n/exit\n"
    process = await run_prism(
        tmp_path,
        server,
        "--model",
        "openai:test-model",
        "--base-url",
        "http://127.0.0.1:PORT/v1",
        command="chat",
        stdin=lines,
    )
    out = process.stdout.decode()
    assert process.returncode == 0, process.stderr.decode()
    assert "It says \\x1b]52;c;eA==\\x07alpha." in out
    assert "\x1b" not in out
    assert "model error:" in out
    assert "Still here." in out
    # Each answer says what it cost and why the model stopped; the totals add up
    # every request's (the failed one reported nothing).
    assert "[tokens: 250 in, 25 out; stop reason: stop]" in out  # two requests
    assert "[tokens: 160 in, 3 out; stop reason: stop]" in out
    assert "(the answer was cut by the model's length limit)\n" in out
    assert "[tokens: 200 in, 64 out; stop reason: length]" in out
    assert (
        "3 turn(s), 0 aborted, 1 call(s); tokens: 610 in, 92 out; "
        "1 answer(s) cut by the length limit; ledger:"
    ) in out  # the failed turn is not one
    assert [r.call_id for r in read_ledger(tmp_path / "ledger.jsonl").records] == ["r1"]


def test_a_usage_line_says_what_the_model_did_not_report_and_shows_no_control_text() -> None:
    from prism.cli._chat import usage_line

    assert usage_line(None, None, None) == "tokens: ? in, ? out; stop reason: not reported"
    assert usage_line(3, None, "stop\x1b[2J") == "tokens: 3 in, ? out; stop reason: stop\\x1b[2J"
