"""The ledger as a terminal table, and summary rows for calls the ledger never saw."""

from __future__ import annotations

import io

from rich.console import Console

from prism.cli._render import ledger_table
from prism.cli._report import rows_from_ledger
from prism.core import AssistantMessage, ToolCall
from prism.core.ledger import ToolCallRecord


def _record(call_id: str, tool: str, status: str, **extra: object) -> ToolCallRecord:
    return ToolCallRecord(
        call_id=call_id,
        tool_name=tool,
        arguments={"path": "README.md"},
        status=status,  # type: ignore[arg-type]
        blocked_reason=extra.pop("blocked_reason", None),  # type: ignore[arg-type]
        started_at=1.0,
        finished_at=1.5,
        duration_s=0.5,
        **extra,  # type: ignore[arg-type]
    )


def test_ledger_table_has_one_row_per_record_in_order() -> None:
    records = [
        _record("c1", "read", "ok", result_preview="# inventory"),
        _record("c2", "mcp:docs:delete_index", "blocked", blocked_reason="permission"),
        _record("c3", "shell", "cancelled"),
    ]
    out = io.StringIO()
    Console(file=out, width=240, no_color=True).print(ledger_table(records, title="ledger x"))
    text = out.getvalue()
    lines = text.splitlines()
    assert lines[0].strip() == "ledger x"
    rows = [line for line in lines if "c1" in line or "c2" in line or "c3" in line]
    assert len(rows) == 3
    assert "read" in rows[0]
    assert " ok " in rows[0]
    assert "# inventory" in rows[0]
    assert "blocked" in rows[1]
    assert "permission" in rows[1]
    assert "cancelled" in rows[2]


def test_a_scripted_call_with_no_record_is_a_never_started_row() -> None:
    turns = [
        AssistantMessage(
            tool_calls=(
                ToolCall(id="a", name="read", arguments={"path": "x"}),
                ToolCall(id="b", name="shell", arguments={"command": "ls"}),
            )
        ),
        AssistantMessage(tool_calls=(ToolCall(id="c", name="read", arguments={}),)),
    ]
    rows = rows_from_ledger(turns, [_record("a", "read", "ok")], {"a": "policy x"})
    assert [(r.index, r.turn, r.call_id, r.status) for r in rows] == [
        (1, 1, "a", "ok"),
        (2, 1, "b", "cancelled"),
        (3, 2, "c", "cancelled"),
    ]
    assert rows[0].refused_by == "policy x"
    assert rows[1].detail == "never started"
    assert rows[1].tool_name == "shell"
