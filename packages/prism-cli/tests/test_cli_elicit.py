"""MCP elicitation from the CLI: asked on a terminal (typed form fields, URLs never opened),
declined in a pipe. The server is a real MCP server whose tools elicit."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import shlex
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cli_prewarmed as prewarmed
import pytest

if TYPE_CHECKING:
    from conftest import CliRunner

pytestmark = pytest.mark.usefixtures("plain_output")

SERVER = Path(__file__).with_name("eliciting_mcp_server.py")


def _server() -> str:
    """The eliciting server's command line (from the warm parent, cli_prewarmed.py)."""
    command, args = prewarmed.command(SERVER)
    return shlex.join([command, *args])


def on_a_terminal(args: list[str], answers: list[tuple[bytes, bytes]], cwd: Path) -> str:
    """``prism ARGS`` (``prism.cli.main``, in a thread of this process) on a pseudo-terminal.

    Each prompt (a marker) is answered in turn; returns what the terminal showed.
    """
    from prism.cli import main

    master, slave = pty.openpty()
    terminal_in = open(slave, encoding="utf-8", closefd=False)  # noqa: SIM115 - closed below
    terminal_out = open(os.dup(slave), "w", encoding="utf-8")  # noqa: SIM115 - closed below
    done = threading.Event()

    def call() -> None:
        saved = sys.stdin, sys.stdout, sys.stderr
        sys.stdin, sys.stdout, sys.stderr = terminal_in, terminal_out, terminal_out
        try:
            with contextlib.chdir(cwd):
                main(args)
        finally:
            sys.stdin, sys.stdout, sys.stderr = saved
            terminal_out.flush()
            done.set()

    output = b""
    looked = 0
    pending = list(answers)
    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.05)
            if not ready:
                if done.is_set():
                    break
                continue
            output += os.read(master, 4096)
            while pending and (found := output.find(pending[0][0], looked)) >= 0:
                looked = found + len(pending[0][0])
                os.write(master, pending.pop(0)[1])
        thread.join(timeout=30)
    finally:
        terminal_in.close()
        terminal_out.close()
        os.close(slave)
        os.close(master)
    assert not pending, output.decode(errors="replace")
    return output.decode(errors="replace")


def _call(tool: str) -> list[str]:
    return ["mcp", "call", "--stdio", _server(), tool]


def test_a_form_is_asked_field_by_field_on_a_terminal(tmp_path: Path) -> None:
    answers = [
        (b"[c]ancel: ", b"y\n"),
        (b"name (string)", b"Ada\n"),
        (b"seats (integer)", b"two\n"),
        (b"seats (integer)", b"2\n"),
        (b"window? (boolean", b"maybe\n"),
        (b"window? (boolean", b"yes\n"),
        (b"cabin? (one of economy, business", b"first\n"),
        (b"cabin? (one of economy, business", b"business\n"),
        (b"budget (number)", b"lots\n"),
        (b"budget (number)", b"nan\n"),
        (b"budget (number)", b"1500.5\n"),
        (b"note? (string", b"\n"),
    ]
    out = on_a_terminal(_call("book"), answers, tmp_path)
    assert "MCP server 'server' asks: Who is travelling?" in out
    assert "\x1b[31m" not in out  # the server's control characters are shown, never sent
    for complaint in ("a whole number", "yes or no", "one of economy, business", "a number"):
        assert f"expected {complaint}" in out
    assert "expected a finite number" in out
    assert "booked Ada x2 window=True cabin=business budget=1500.5 note=None" in out


def test_declining_a_form_on_a_terminal_tells_the_server(tmp_path: Path) -> None:
    out = on_a_terminal(_call("book"), [(b"[c]ancel: ", b"n\n")], tmp_path)
    assert "not booked: decline" in out


def test_a_url_is_shown_and_never_opened(tmp_path: Path) -> None:
    out = on_a_terminal(_call("sign_in"), [(b"done? ", b"y\n")], tmp_path)
    assert "https://example.invalid/login" in out
    assert "prism does not open it" in out
    assert "sign-in: accept" in out


def test_in_a_pipe_elicitation_is_declined(run_cli: CliRunner) -> None:
    proc = run_cli("mcp", "call", "--stdio", _server(), "book")
    assert proc.returncode == 0, proc.stderr
    assert "not booked: decline" in proc.stdout
    assert "asks" not in proc.stdout


@pytest.mark.parametrize(
    ("answers", "why"),
    [
        ([(b"[c]ancel: ", b"c\n")], "the user cancels"),
        ([(b"[c]ancel: ", b"y\n"), (b"name (string)", b"\x04")], "end of input mid-form"),
        (
            [
                (b"[c]ancel: ", b"y\n"),
                (b"name (string)", b"Ada\n"),
                (b"seats (integer)", b"one\n"),
                (b"seats (integer)", b"two\n"),
                (b"seats (integer)", b"three\n"),
            ],
            "three answers that do not fit",
        ),
        ([(b"[c]ancel: ", b"y\n"), (b"name (string)", b"\n"), (b"required", b"\x04")], "required"),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_a_form_left_unfinished_is_cancelled(
    tmp_path: Path, answers: list[tuple[bytes, bytes]], why: str
) -> None:
    out = on_a_terminal(_call("book"), answers, tmp_path)
    assert "not booked: cancel" in out, why


async def test_every_server_chosen_word_of_a_form_is_shown_escaped() -> None:
    """A field's default and its choices (in the prompt, and in "expected ..." after a wrong
    answer) are the server's too: a carriage return and an erase in a default redrew the
    prompt as "[prism] all checks passed", and Enter sent the server's default."""
    from prism.cli._elicit import TerminalElicitor
    from prism.mcp import McpElicitation

    erase = "\r\x1b[2K\x1b[1A\x1b[2K\r"
    shown: list[str] = []
    answers = iter(["y\n", "\n", "maybe\n", "b\n"])
    elicitor = TerminalElicitor(write=shown.append, read_line=lambda: next(answers))
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "ok": {"type": "string", "default": "no" + erase + "[prism] all checks passed"},
            "pick": {"type": "string", "enum": ["a" + erase, "b"]},
        },
    }
    request = McpElicitation(server_id="s", message="Deploy?", mode="form", requested_schema=schema)
    answer = await elicitor(request)
    assert answer.action == "accept"
    text = "".join(shown)
    assert "\r" not in text
    assert "\x1b" not in text
    assert "default no\\x0d\\x1b[2K" in text
