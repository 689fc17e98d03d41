"""MCP elicitation from the CLI: asked on a terminal (typed form fields, URLs never opened),
declined in a pipe. The server is a real MCP server whose tools elicit."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import CliRunner

SERVER = f"{sys.executable} {Path(__file__).with_name('eliciting_mcp_server.py')}"


def on_a_terminal(argv: list[str], answers: list[tuple[bytes, bytes]], cwd: Path) -> str:
    """Run ``argv`` on a pseudo-terminal; answer each prompt (a marker) in turn; the output."""
    env = {k: v for k, v in os.environ.items() if k not in {"FORCE_COLOR", "COLUMNS"}}
    env |= {"NO_COLOR": "1", "COLUMNS": "160", "PYTHONUTF8": "1"}
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    output = b""
    looked = 0
    pending = list(answers)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                continue
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break  # EIO: the command ended and closed the terminal
            if not chunk:
                break
            output += chunk
            while pending and (found := output.find(pending[0][0], looked)) >= 0:
                looked = found + len(pending[0][0])
                os.write(master, pending.pop(0)[1])
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert not pending, output.decode(errors="replace")
    return output.decode(errors="replace")


def _call(tool: str) -> list[str]:
    return [sys.executable, "-m", "prism.cli", "mcp", "call", "--stdio", SERVER, tool]


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
    proc = run_cli("mcp", "call", "--stdio", SERVER, "book")
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
