"""The CLI's recording ledger: SQLite by suffix, an unopenable path, and failed writes."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import pytest

from prism.cli import CliError
from prism.cli._ledgerfile import LedgerFailures, recording_ledger
from prism.core.ledger import FinishedCall, LedgerWriteFailed, read_ledger

if TYPE_CHECKING:
    from pathlib import Path


def test_a_db_path_gets_an_sqlite_ledger_with_the_run_and_its_record(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "calls.db"
    failures = LedgerFailures()
    with recording_ledger(path, label="test run", failures=failures) as ledger:
        ledger.record_call(
            FinishedCall(
                call_id="c1",
                tool_name="read",
                arguments={"path": "README.md"},
                status="ok",
                blocked_reason=None,
                started_at=1.0,
                finished_at=2.0,
                duration_s=1.0,
                result=None,
            )
        ).record()
    assert path.read_bytes().startswith(b"SQLite format 3\x00")
    contents = read_ledger(path)
    assert [(r.call_id, r.tool_name, r.status) for r in contents.records] == [("c1", "read", "ok")]
    assert failures.count == 0


def test_a_ledger_path_that_cannot_be_made_is_a_cli_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    with (
        pytest.raises(CliError, match="cannot write the ledger to"),
        recording_ledger(blocker / "calls.jsonl", label="x", failures=LedgerFailures()),
    ):
        pass


def test_failed_writes_warn_once_then_are_counted(capsys: pytest.CaptureFixture[str]) -> None:
    failures = LedgerFailures()
    failures.report()
    assert capsys.readouterr().err == ""  # nothing failed: nothing said
    for call_id in ("c1", "c2"):
        failures(
            LedgerWriteFailed(
                sink="JsonlLedgerSink(calls.jsonl)",
                error="OSError: [Errno 28] No space left on device",
                entry_type="tool_call",
                call_id=call_id,
            )
        )
    assert failures.count == 2
    assert failures.first == "OSError: [Errno 28] No space left on device"
    failures.report()
    assert capsys.readouterr().err == (
        "prism: warning: the ledger could not be written: "
        "OSError: [Errno 28] No space left on device\n"
        "prism: warning: 2 ledger write(s) failed; the ledger is incomplete\n"
    )


@pytest.mark.parametrize(
    ("interrupted", "fails", "outcome"),
    [(False, False, "finished"), (True, False, "aborted"), (False, True, "failed")],
    ids=["finished", "ended early by a signal", "an error"],
)
def test_the_end_marker_says_how_the_run_ended(
    tmp_path: Path, interrupted: bool, fails: bool, outcome: str
) -> None:
    path = tmp_path / "calls.jsonl"
    with (
        pytest.raises(RuntimeError) if fails else contextlib.nullcontext(),
        recording_ledger(
            path, label="x", failures=LedgerFailures(), interrupted=lambda: interrupted
        ),
    ):
        if fails:
            raise RuntimeError("the run failed")
    assert [run.outcome for run in read_ledger(path).runs] == [outcome]


async def test_chat_interrupts_abort_the_turn_then_leave_and_sigterm_ends_the_chat() -> None:
    import signal

    from prism.cli._chat import ChatInterrupts
    from prism.core import AbortController

    interrupts = ChatInterrupts()
    turn = AbortController()
    interrupts.current.append(turn)
    assert interrupts(signal.SIGINT)  # during a turn: the turn is aborted
    assert turn.signal.aborted
    assert not interrupts.leaving.cancel_called
    assert interrupts(signal.SIGINT)  # again while it aborts: leave
    assert interrupts.leaving.cancel_called
    assert not ChatInterrupts()(signal.SIGTERM)  # the watcher cancels the whole chat
