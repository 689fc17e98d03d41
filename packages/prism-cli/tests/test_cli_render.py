"""The CLI's rendering: live and plain event views, tables, and hostile text."""

import io

from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from prism.cli._render import CallRow, EventView, safe_text, summary_table, untrusted
from prism.core import (
    ToolExecutionBlocked,
    ToolExecutionError,
    ToolExecutionFinished,
    ToolExecutionProgress,
    ToolExecutionStarted,
    ToolResult,
    TurnFinished,
    TurnStarted,
)


def _console(*, terminal: bool) -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=terminal, width=120, color_system=None), buffer


def _feed(view: EventView) -> None:
    view(TurnStarted(turn=1))
    view(ToolExecutionStarted(call_id="a", tool_name="read", arguments={"path": "x"}))
    view(ToolExecutionStarted(call_id="b", tool_name="slow", arguments={}))
    view(ToolExecutionProgress(call_id="b", tool_name="slow", message="half", progress=1, total=2))
    view(
        ToolExecutionFinished(
            call_id="a",
            tool_name="read",
            result=ToolResult.error("denied", execution_denied=True),
            duration_s=0.01,
        )
    )
    view(
        ToolExecutionError(
            call_id="b", tool_name="slow", error="stop", duration_s=1, cancelled=True
        )
    )
    view(
        ToolExecutionBlocked(
            call_id="c", tool_name="nope", reason="unknown_tool", message="unknown tool: nope"
        )
    )


def test_plain_view_prints_one_line_per_event_and_counts_in_flight() -> None:
    console, buffer = _console(terminal=False)
    with EventView(console) as view:
        _feed(view)
    lines = buffer.getvalue().splitlines()
    assert lines[0] == "turn 1"
    assert any(line.strip().startswith("progress b") and "1/2 half" in line for line in lines)
    assert any(line.strip().startswith("cancelled") for line in lines)
    assert any("unknown_tool: unknown tool: nope" in line for line in lines)
    assert view.max_in_flight == 2
    assert view.refusals == {"a": "execution_denied"}


def test_live_view_draws_on_a_terminal_and_leaves_the_finished_lines() -> None:
    console, buffer = _console(terminal=True)
    with EventView(console, live=True) as view:
        _feed(view)
    out = buffer.getvalue()
    assert "turn 1" in out
    assert "cancelled" in out
    assert "blocked" in out


def test_quiet_view_draws_nothing_but_still_counts() -> None:
    console, buffer = _console(terminal=False)
    with EventView(console, quiet=True) as view:
        _feed(view)
    assert buffer.getvalue() == ""
    assert view.max_in_flight == 2


def test_summary_table_shows_refusals_beside_blocked_reasons() -> None:
    console, buffer = _console(terminal=False)
    rows = [
        CallRow(
            index=1,
            turn=1,
            call_id="a",
            tool_name="read",
            status="error",
            blocked_reason=None,
            duration_s=0.001,
            detail="x",
            refused_by="path_escape",
        ),
        CallRow(
            index=2,
            turn=1,
            call_id="b",
            tool_name="t",
            status="blocked",
            blocked_reason="validation_failed",
            duration_s=0.0,
            detail="y",
        ),
    ]
    console.print(summary_table(rows))
    out = buffer.getvalue()
    assert "path_escape" in out
    assert "validation_failed" in out


@given(st.text())
def test_safe_text_never_lets_a_control_character_through(text: str) -> None:
    cleaned = safe_text(text)
    for char in cleaned:
        code = ord(char)
        assert char in "\n\t" or not (code < 0x20 or 0x7F <= code <= 0x9F)
        assert char not in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def test_untrusted_text_cannot_smuggle_markup() -> None:
    console, buffer = _console(terminal=True)
    console.print(untrusted("[red]x[/red] \x1b]0;title\x07 \u202eevil"))
    out = buffer.getvalue()
    assert "[red]x[/red]" in out
    assert "\x1b]0;" not in out
    assert "\u202e" not in out


def test_a_turn_without_calls_prints_no_header() -> None:
    console, buffer = _console(terminal=False)
    with EventView(console) as view:
        view(TurnStarted(turn=1))
        view(ToolExecutionStarted(call_id="a", tool_name="read", arguments={}))
        view(TurnStarted(turn=2))
        view(TurnFinished(turn=2, tool_calls=0))
    assert "turn 1" in buffer.getvalue()
    assert "turn 2" not in buffer.getvalue()
