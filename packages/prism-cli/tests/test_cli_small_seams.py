"""Small pure pieces of the CLI: the server-prefix hint, the pipe console, many bad lines."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prism.cli._mcp_runner import prefix_hint
from prism.cli._output import console
from prism.core.ledger import FinishedCall, RunLedger

if TYPE_CHECKING:
    from pathlib import Path

    import pytest
    from conftest import CliRunner


def test_prefix_hint_names_the_other_server_only_for_another_prefix() -> None:
    assert prefix_hint("search_docs", "docs", ["mcp:docs:search_docs"]) is None
    assert prefix_hint("mcp:docs:search_docs", "docs", ["mcp:docs:search_docs"]) is None
    offered = ["mcp:docs:search_docs"]
    assert prefix_hint("mcp:web:search_docs", "docs", offered) == (
        "'mcp:web:search_docs' names server 'web': pass --server-id web, or call 'search_docs'"
    )
    assert prefix_hint("mcp:web:fetch", "docs", offered) == (
        "'mcp:web:fetch' names server 'web': pass --server-id web"
    )


def test_a_pipe_console_without_columns_is_140_wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    out = console(json_mode=True)
    assert not out.is_terminal
    assert out.width == 140


def test_ledger_show_names_five_bad_lines_then_counts_them_all(
    tmp_path: Path, run_cli: CliRunner
) -> None:
    ledger = RunLedger()
    ledger.record_call(
        FinishedCall(
            call_id="c1",
            tool_name="read",
            arguments={},
            status="ok",
            blocked_reason=None,
            started_at=1.0,
            finished_at=2.0,
            duration_s=1.0,
            result=None,
        )
    ).record()
    bad = [f"not a ledger line {n}" for n in range(7)]
    file = tmp_path / "calls.jsonl"
    file.write_text(ledger.to_jsonl() + "\n".join(bad) + "\n", encoding="utf-8")
    proc = run_cli("ledger", "show", str(file))
    assert proc.returncode == 0, proc.stderr
    warnings = proc.stderr.splitlines()
    assert sum(w.startswith(f"prism: warning: {file}: skipped line ") for w in warnings) == 5
    assert f"prism: warning: {file}: 7 lines skipped" in warnings
    assert "c1" in proc.stdout
