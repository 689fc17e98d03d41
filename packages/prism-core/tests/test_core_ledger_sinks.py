"""The JSONL file sink: written as a run goes, markers, torn lines, rotation, faults."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from prism.core import (
    ConfigurationError,
    DispatchOptions,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.core.ledger import (
    FinishedCall,
    JsonlLedgerSink,
    LedgerEntry,
    LedgerFormatError,
    LedgerQuery,
    LedgerWriteFailed,
    RunLedger,
    ToolCallRecord,
    read_ledger,
    read_ledger_text,
)

CHILD = Path(__file__).with_name("ledger_fault_child.py")


async def _ok(args: object, ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text("fine")


def _options(ledger: RunLedger) -> DispatchOptions:
    return DispatchOptions(
        registry=create_tool_registry([ToolDefinition(name="ok", execute=_ok)]), ledger=ledger
    )


def _record(ledger: RunLedger, call_id: str, **extra: object) -> ToolCallRecord:
    return ledger.record_call(
        FinishedCall(
            call_id=call_id,
            tool_name=str(extra.get("tool_name", "t")),
            arguments={"pad": "x" * int(extra.get("pad", 0))},  # type: ignore[call-overload]
            status="ok",
            blocked_reason=None,
            started_at=float(extra.get("started_at", 1.0)),  # type: ignore[arg-type]
            finished_at=2.0,
            duration_s=1.0,
            result=None,
        )
    ).record()


async def test_each_record_is_in_the_file_when_its_call_ends(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = RunLedger(sinks=[JsonlLedgerSink(path)])
    ledger.start_run(label="test")
    await dispatch_tool_call(ToolCall(id="a", name="ok", arguments={}), _options(ledger))
    # Not closed, not ended: the record is already there.
    contents = read_ledger(path)
    assert [r.call_id for r in contents.records] == ["a"]
    (run,) = contents.runs
    assert run.interrupted
    assert (run.label, run.calls, run.pid) == ("test", 1, os.getpid())


def test_run_markers_tell_a_finished_run(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = RunLedger(sinks=[JsonlLedgerSink(path)])
    with ledger.run(label="one"):
        _record(ledger, "a")
        _record(ledger, "b")
    (run,) = read_ledger(path).runs
    assert not run.interrupted
    assert (run.outcome, run.calls, run.run_id) == ("finished", 2, ledger.run_id)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["type"] for line in lines] == ["run_start", "tool_call", "tool_call", "run_end"]
    assert lines[-1]["calls"] == 2


@pytest.mark.parametrize(
    ("error", "outcome"), [(KeyboardInterrupt, "aborted"), (RuntimeError, "failed")]
)
def test_a_run_that_raises_ends_aborted_or_failed(
    tmp_path: Path, error: type[BaseException], outcome: str
) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = RunLedger(sinks=[JsonlLedgerSink(path)])
    with pytest.raises(error), ledger.run():
        raise error()
    (run,) = read_ledger(path).runs
    assert run.outcome == outcome


def test_a_torn_last_line_is_reported_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = RunLedger(sinks=[JsonlLedgerSink(path)])
    ledger.start_run()
    _record(ledger, "a")
    whole = path.read_text()
    path.write_text(whole + '{"type": "tool_call", "schema_versi')
    contents = read_ledger(path)
    assert [r.call_id for r in contents.records] == ["a"]
    assert contents.torn_line == 3
    assert contents.runs[0].interrupted


def test_a_bad_line_in_the_middle_is_an_error_unless_not_strict(tmp_path: Path) -> None:
    ledger = RunLedger()
    _record(ledger, "a")
    _record(ledger, "b")
    first, second = ledger.to_jsonl().splitlines()
    text = f"{first}\n{{garbage\n{second}\n"
    with pytest.raises(LedgerFormatError, match="line 2"):
        read_ledger_text(text)
    contents = read_ledger_text(text, strict=False)
    assert [r.call_id for r in contents.records] == ["a", "b"]
    assert len(contents.problems) == 1
    assert "line 2" in contents.problems[0]


def test_a_failing_sink_is_reported_and_never_reaches_the_run(tmp_path: Path) -> None:
    class Broken:
        def write(self, entry: LedgerEntry) -> None:
            raise OSError(28, "No space left on device")

        def close(self) -> None:
            pass

    failures: list[LedgerWriteFailed] = []
    path = tmp_path / "ledger.jsonl"
    ledger = RunLedger(sinks=[Broken(), JsonlLedgerSink(path)], on_error=failures.append)
    _record(ledger, "a")
    assert len(ledger) == 1
    assert [(f.entry_type, f.call_id) for f in failures] == [("tool_call", "a")]
    assert "No space left" in failures[0].error
    assert [r.call_id for r in read_ledger(path).records] == ["a"]


def test_a_failing_sink_without_on_error_is_logged(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    sink = JsonlLedgerSink(tmp_path / "ledger.jsonl")
    sink.close()
    ledger = RunLedger(sinks=[sink])
    _record(ledger, "a")
    assert "failed to store a tool_call entry" in caplog.text


def test_a_sink_without_write_and_close_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"RunLedger\.sinks .*write"):
        RunLedger(sinks=[object()])  # type: ignore[list-item]


@pytest.mark.parametrize(
    "changes",
    [{"fsync": "sometimes"}, {"max_bytes": 0}, {"backups": -1}],
)
def test_bad_sink_options_are_refused(tmp_path: Path, changes: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=next(iter(changes))):
        JsonlLedgerSink(tmp_path / "l.jsonl", **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize("fsync", ["never", "run", "always"])
def test_every_fsync_policy_writes_the_same_lines(tmp_path: Path, fsync: str) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = RunLedger(sinks=[JsonlLedgerSink(path, fsync=fsync)])  # type: ignore[arg-type]
    with ledger.run():
        _record(ledger, "a")
    assert [r.call_id for r in read_ledger(path).records] == ["a"]


def test_the_file_is_private_to_its_owner(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    JsonlLedgerSink(path).close()
    assert path.stat().st_mode & 0o777 == 0o600


def test_rotation_caps_the_size_and_every_file_names_its_run(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = RunLedger(sinks=[JsonlLedgerSink(path, max_bytes=4000, backups=2)])
    with ledger.run(label="rotating"):
        for i in range(60):
            _record(ledger, f"c{i}", pad=300)
    files = [path, Path(f"{path}.1"), Path(f"{path}.2")]
    assert all(f.exists() for f in files)
    assert not Path(f"{path}.3").exists()
    for file in files:
        assert file.stat().st_size <= 4000
        first = json.loads(file.read_text().splitlines()[0])
        assert (first["type"], first["run_id"]) == ("run_start", ledger.run_id)
    ids = [r.call_id for f in reversed(files) for r in read_ledger(f).records]
    assert ids == [f"c{i}" for i in range(60 - len(ids), 60)]
    assert read_ledger(path).runs[0].outcome == "finished"


def test_a_writer_follows_a_rotation_done_by_another(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    first = RunLedger(sinks=[JsonlLedgerSink(path, max_bytes=2000)])
    second = RunLedger(sinks=[JsonlLedgerSink(path, max_bytes=2000)])
    first.start_run()
    second.start_run()
    for i in range(20):
        _record(first, f"a{i}", pad=100)
        _record(second, f"b{i}", pad=100)
    current = read_ledger(path)
    rotated = read_ledger(f"{path}.1")
    # The newest records of both writers are in the current file, not the rotated one.
    assert {"a19", "b19"} <= {r.call_id for r in current.records}
    assert path.stat().st_size <= 2000
    assert rotated.records


def test_a_query_filters_records_from_a_jsonl_file(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = RunLedger(sinks=[JsonlLedgerSink(path)])
    _record(ledger, "a", tool_name="read", started_at=10.0)
    _record(ledger, "b", tool_name="shell", started_at=20.0)
    found = read_ledger(path, query=LedgerQuery(tool=["sh*"], since=15.0))
    assert [r.call_id for r in found.records] == ["b"]
    assert read_ledger(path, query=LedgerQuery(run="nope")).records == ()
    assert len(read_ledger(path, query=LedgerQuery(run=ledger.run_id[:4])).records) == 2


# --- several processes, and faults in real subprocesses --------------------------------


_WRITER = """
import sys
from prism.core.ledger import FinishedCall, JsonlLedgerSink, RunLedger
ledger = RunLedger(sinks=[JsonlLedgerSink(sys.argv[1])])
with ledger.run(label=sys.argv[2]):
    for i in range(int(sys.argv[3])):
        ledger.record_call(FinishedCall(call_id=f"{sys.argv[2]}-{i}", tool_name="t",
            arguments={"pad": sys.argv[2] * 3000}, status="ok", blocked_reason=None,
            started_at=1.0, finished_at=2.0, duration_s=1.0, result=None)).record()
"""


def test_concurrent_runs_appending_to_one_file_interleave_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "shared.jsonl"
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), name, "300"])
        for name in ("p", "q", "r", "s")
    ]
    assert [w.wait(timeout=60) for w in writers] == [0, 0, 0, 0]
    contents = read_ledger(path)  # strict: every line parses
    assert contents.torn_line is None
    assert len(contents.records) == 1200
    assert sorted(run.calls for run in contents.runs) == [300] * 4
    assert all(run.outcome == "finished" for run in contents.runs)


def _reported(lines: list[str]) -> set[str]:
    return {line.split()[1] for line in lines if line.startswith("rec ")}


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_sigkill_mid_run_keeps_every_finished_call(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "ledger.jsonl"
    kill_after = random.Random(seed).randrange(1, 200)
    with subprocess.Popen(
        [sys.executable, str(CHILD), str(path), "200", "8"],
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdout is not None
        seen: list[str] = []
        while len(_reported(seen)) < kill_after:
            line = child.stdout.readline()
            assert line, "the child ended early"
            seen.append(line)
        child.send_signal(signal.SIGKILL)
        seen.extend(child.stdout.readlines())
    assert child.returncode in (-signal.SIGKILL, 0)
    contents = read_ledger(path)  # strict: every complete line parses
    ids = [r.call_id for r in contents.records]
    assert len(ids) == len(set(ids))
    assert _reported(seen) <= set(ids)
    (run,) = contents.runs
    assert run.interrupted == ("done\n" not in seen)


def test_a_full_disk_fails_writes_with_events_and_never_crashes_the_run(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    proc = subprocess.run(
        [sys.executable, str(CHILD), str(path), "100", "4", "20000"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1] == "done"
    assert any(line.startswith("failed ") and "File too large" in line for line in lines)
    assert path.stat().st_size <= 20000
    contents = read_ledger(path)  # a line cut at the limit is the torn last line
    assert 0 < len(contents.records) < 100
    lost = {line.split()[2] for line in lines if line.startswith("failed ")}
    assert _reported(lines) - lost == {r.call_id for r in contents.records}
    assert contents.runs[0].started_at is not None


def test_the_recording_sink_sees_markers_and_records_in_order() -> None:
    from prism.core.testing import RecordingLedgerSink

    sink = RecordingLedgerSink()
    ledger = RunLedger(sinks=[sink])
    with ledger.run(label="double"):
        _record(ledger, "a")
    assert [type(e).__name__ for e in sink.entries] == [
        "RunStartRecord",
        "ToolCallRecord",
        "RunEndRecord",
    ]
    assert [r.call_id for r in sink.records] == ["a"]
    assert sink.closed


def test_a_sink_that_fails_every_write_never_stops_the_calls() -> None:
    from prism.core.testing import RecordingLedgerSink

    failures: list[LedgerWriteFailed] = []
    ledger = RunLedger(
        sinks=[RecordingLedgerSink(fail_with=OSError(28, "No space left on device"))],
        on_error=failures.append,
    )
    with ledger.run():
        _record(ledger, "a")
        _record(ledger, "b")
    assert len(ledger) == 2
    assert [f.entry_type for f in failures] == ["run_start", "tool_call", "tool_call", "run_end"]


def test_max_records_bounds_memory_while_the_file_keeps_everything(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = RunLedger(sinks=[JsonlLedgerSink(path)], max_records=3)
    for i in range(10):
        _record(ledger, f"c{i}")
    assert [r.call_id for r in ledger.records] == ["c7", "c8", "c9"]
    assert len(ledger) == 3
    assert len(RunLedger.from_jsonl(ledger.to_jsonl())) == 3
    assert len(read_ledger(path).records) == 10


@pytest.mark.parametrize("bad", [0, -1, 1.5])
def test_max_records_must_be_positive(bad: object) -> None:
    with pytest.raises(ValueError, match="max_records"):
        RunLedger(max_records=bad)  # type: ignore[arg-type]


def test_rotation_without_backups_starts_the_file_afresh(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = RunLedger(sinks=[JsonlLedgerSink(path, max_bytes=2000, backups=0)])
    for i in range(20):
        _record(ledger, f"c{i}", pad=300)
    ledger.close()
    assert not Path(f"{path}.1").exists()
    assert path.stat().st_size <= 2000
    assert read_ledger(path).records[-1].call_id == "c19"


def test_a_ledger_file_removed_mid_run_is_made_again_with_its_run_marker(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = RunLedger(sinks=[JsonlLedgerSink(path, max_bytes=100_000)])
    ledger.start_run(label="kept")
    _record(ledger, "before")
    path.unlink()
    _record(ledger, "after")
    ledger.close()
    contents = read_ledger(path)
    assert [r.call_id for r in contents.records] == ["after"]
    assert [run.label for run in contents.runs] == ["kept"]


def test_a_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(b'{"type": "tool_call"}\xff\n')
    with pytest.raises(LedgerFormatError, match="not a UTF-8 JSONL ledger"):
        read_ledger(path)
