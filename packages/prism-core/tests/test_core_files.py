"""No file Prism writes follows a link: each ledger file kind, a link planted before and during."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from typing import TYPE_CHECKING

import pytest

from prism.core.files import UnsafeFileError, inside_any, open_private_file
from prism.core.ledger import (
    FinishedCall,
    JsonlLedgerSink,
    LedgerRun,
    LedgerWriteFailed,
    RunLedger,
    SqliteLedgerSink,
    read_ledger,
)

if TYPE_CHECKING:
    from pathlib import Path

VICTIM_TEXT = "export PS1='$ '\n"


def _victim(tmp_path: Path) -> Path:
    """A file outside the agent's root that a planted link points at (a shell rc file)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    victim = home / ".bashrc"
    victim.write_text(VICTIM_TEXT)
    return victim


def _call(ledger: RunLedger, call_id: str, pad: int = 0) -> None:
    ledger.record_call(
        FinishedCall(
            call_id=call_id,
            tool_name="t",
            arguments={"pad": "x" * pad, "cmd": "$(touch CANARY)"},
            status="ok",
            blocked_reason=None,
            started_at=1.0,
            finished_at=2.0,
            duration_s=1.0,
        )
    )


def _ledger(sink: object, failures: list[LedgerWriteFailed]) -> RunLedger:
    return RunLedger(sinks=[sink], on_error=failures.append)  # type: ignore[list-item]


# --- the helper ---------------------------------------------------------------------------


def test_a_symlink_at_the_name_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    (tmp_path / "f.log").symlink_to(victim)
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        open_private_file(tmp_path / "f.log")
    assert victim.read_text() == VICTIM_TEXT


def test_a_dangling_symlink_is_refused_and_its_target_is_not_created(tmp_path: Path) -> None:
    target = tmp_path / "home" / "created-by-prism"
    (tmp_path / "home").mkdir()
    (tmp_path / "f.log").symlink_to(target)
    with pytest.raises(UnsafeFileError):
        open_private_file(tmp_path / "f.log")
    assert not target.exists()


def test_a_hard_link_to_another_file_is_refused(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    os.link(victim, tmp_path / "f.log")
    with pytest.raises(UnsafeFileError, match="hard links"):
        open_private_file(tmp_path / "f.log")
    assert victim.read_text() == VICTIM_TEXT


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file of another user needs root")
def test_a_file_another_user_planted_in_a_shared_folder_is_refused(tmp_path: Path) -> None:
    # `nobody` pre-creates the ledger 0666 in /tmp to read and rewrite what Prism records.
    planted = tmp_path / "f.log"
    planted.write_text("")
    os.chown(planted, 65534, 65534)
    planted.chmod(0o666)
    with pytest.raises(UnsafeFileError, match="belongs to another user"):
        open_private_file(planted)
    assert planted.read_text() == ""


def test_a_file_every_user_may_write_is_refused(tmp_path: Path) -> None:
    planted = tmp_path / "f.log"
    planted.write_text("")
    planted.chmod(0o666)
    with pytest.raises(UnsafeFileError, match="writable by every user"):
        open_private_file(planted)
    planted.chmod(0o644)
    opened = open_private_file(planted)
    os.close(opened.fd)
    os.close(opened.directory_fd)


def test_a_fifo_or_a_directory_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.log")
    with pytest.raises(UnsafeFileError, match="not a regular file"):
        open_private_file(tmp_path / "fifo.log")
    (tmp_path / "dir.log").mkdir()
    with pytest.raises(IsADirectoryError):
        open_private_file(tmp_path / "dir.log")


def test_a_directory_link_inside_a_root_is_refused_but_outside_roots_is_followed(
    tmp_path: Path,
) -> None:
    victim = _victim(tmp_path)
    root = tmp_path / "root"
    root.mkdir()
    (root / "logs").symlink_to(victim.parent, target_is_directory=True)
    with pytest.raises(UnsafeFileError, match="'logs' inside"):
        open_private_file(root / "logs" / ".bashrc", roots=[str(root)])
    with pytest.raises(UnsafeFileError):
        open_private_file(root / "logs" / "new.log", roots=[str(root)])
    assert not (victim.parent / "new.log").exists()
    # Outside every root the operator's own links are followed.
    opened = open_private_file(root / "logs" / "new.log")
    os.close(opened.fd)
    os.close(opened.directory_fd)
    assert opened.created
    assert (victim.parent / "new.log").is_file()


def test_a_new_file_is_created_private_and_reported_as_created(tmp_path: Path) -> None:
    opened = open_private_file(tmp_path / "new.log", roots=[str(tmp_path)])
    try:
        assert opened.created
        assert os.stat(tmp_path / "new.log").st_mode & 0o777 == 0o600
    finally:
        os.close(opened.fd)
        os.close(opened.directory_fd)
    again = open_private_file(tmp_path / "new.log")
    os.close(again.fd)
    os.close(again.directory_fd)
    assert not again.created
    assert again.identity == opened.identity


def test_inside_any_compares_whole_components(tmp_path: Path) -> None:
    assert inside_any("/a/b/c", ["/a/b"]) == "/a/b"
    assert inside_any("/a/b", ["/a/b"]) == "/a/b"
    assert inside_any("/a/bc", ["/a/b"]) is None


# --- JSONL: before the run ----------------------------------------------------------------


@pytest.mark.parametrize("max_bytes", [None, 200])
def test_a_jsonl_ledger_planted_as_a_symlink_is_refused(
    tmp_path: Path, max_bytes: int | None
) -> None:
    victim = _victim(tmp_path)
    (tmp_path / "prism-ledger.jsonl").symlink_to(victim)
    with pytest.raises(UnsafeFileError):
        JsonlLedgerSink(tmp_path / "prism-ledger.jsonl", max_bytes=max_bytes)
    assert victim.read_text() == VICTIM_TEXT


def test_a_symlinked_lock_file_is_refused_and_its_target_never_created(tmp_path: Path) -> None:
    target = tmp_path / "home" / "lock-target"
    (tmp_path / "home").mkdir()
    path = tmp_path / "ledger.jsonl"
    (tmp_path / "ledger.jsonl.lock").symlink_to(target)
    with pytest.raises(UnsafeFileError):
        JsonlLedgerSink(path, max_bytes=200)  # a new file records itself in the lock
    assert not target.exists()
    path.write_text("")  # an existing file: the lock is first needed at rotation
    failures: list[LedgerWriteFailed] = []
    ledger = _ledger(JsonlLedgerSink(path, max_bytes=200), failures)
    for i in range(5):
        _call(ledger, f"c{i}", pad=100)
    ledger.close()
    assert not target.exists()
    # The rotation cannot lock, so the records stay in the file, past max_bytes.
    assert not failures
    assert [r.call_id for r in read_ledger(path).records] == [f"c{i}" for i in range(5)]


def test_a_folder_planted_at_a_rotated_name_loses_no_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "ledger.jsonl"
    failures: list[LedgerWriteFailed] = []
    ledger = _ledger(JsonlLedgerSink(path, max_bytes=600, backups=3), failures)
    # The agent puts a non-empty folder where the oldest backup goes.
    (tmp_path / "ledger.jsonl.3").mkdir()
    (tmp_path / "ledger.jsonl.3" / "x").write_text("x")
    with ledger.run(label="attacked"):
        for i in range(40):
            _call(ledger, f"c{i}", pad=150)
    assert not failures
    seen: list[str] = []
    runs: list[LedgerRun] = []
    for name in ("ledger.jsonl.2", "ledger.jsonl.1", "ledger.jsonl"):
        contents = read_ledger(tmp_path / name)
        seen += [r.call_id for r in contents.records]
        runs += contents.runs
    assert seen == [f"c{i}" for i in range(40)]
    assert any(run.outcome == "finished" for run in runs)  # the end marker too
    assert sum("could not rotate" in r.getMessage() for r in caplog.records) == 1


# --- JSONL: during the run ----------------------------------------------------------------


def test_a_symlink_swapped_in_mid_run_never_receives_a_record(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    path = tmp_path / "prism-ledger.jsonl"
    failures: list[LedgerWriteFailed] = []
    ledger = _ledger(JsonlLedgerSink(path), failures)
    with ledger.run(label="attacked"):
        _call(ledger, "before")
        # The agent runs `ln -sf ~/.bashrc prism-ledger.jsonl` between two calls.
        os.unlink(path)
        path.symlink_to(victim)
        _call(ledger, "after")
    assert victim.read_text() == VICTIM_TEXT
    assert not failures  # the sink writes on to its own descriptor


def test_a_symlink_swapped_in_mid_run_is_refused_at_rotation(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    path = tmp_path / "prism-ledger.jsonl"
    failures: list[LedgerWriteFailed] = []
    ledger = _ledger(JsonlLedgerSink(path, max_bytes=400), failures)
    with ledger.run(label="attacked"):
        _call(ledger, "before")
        os.replace(_planted_link(tmp_path, victim), path)
        for i in range(4):
            _call(ledger, f"after-{i}", pad=150)
    assert victim.read_text() == VICTIM_TEXT
    assert failures
    assert "no ledger writer created" in failures[0].error
    assert path.is_symlink()  # left as it was, never written through


def _planted_link(tmp_path: Path, target: Path) -> Path:
    link = tmp_path / "planted"
    link.symlink_to(target)
    return link


def test_a_regular_file_swapped_in_mid_run_is_not_adopted_at_rotation(tmp_path: Path) -> None:
    path = tmp_path / "prism-ledger.jsonl"
    failures: list[LedgerWriteFailed] = []
    ledger = _ledger(JsonlLedgerSink(path, max_bytes=400), failures)
    _call(ledger, "before")
    (tmp_path / "forged").write_text("")
    os.replace(tmp_path / "forged", path)
    _call(ledger, "after", pad=10)
    ledger.close()
    assert path.read_text() == ""
    assert failures
    assert "no ledger writer created" in failures[0].error


def test_a_hard_link_swapped_in_mid_run_is_refused_at_rotation(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    path = tmp_path / "prism-ledger.jsonl"
    failures: list[LedgerWriteFailed] = []
    ledger = _ledger(JsonlLedgerSink(path, max_bytes=400), failures)
    _call(ledger, "before")
    os.unlink(path)
    os.link(victim, path)
    for i in range(3):
        _call(ledger, f"after-{i}", pad=150)
    ledger.close()
    assert victim.read_text() == VICTIM_TEXT
    assert failures


def test_links_planted_at_the_rotated_names_are_moved_never_written(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    path = tmp_path / "l.jsonl"
    (tmp_path / "l.jsonl.1").symlink_to(victim)
    (tmp_path / "l.jsonl.2").symlink_to(victim)
    failures: list[LedgerWriteFailed] = []
    ledger = _ledger(JsonlLedgerSink(path, max_bytes=1000, backups=3), failures)
    with ledger.run(label="rotating"):
        for i in range(12):
            _call(ledger, f"c{i}", pad=100)
    assert not failures
    assert victim.read_text() == VICTIM_TEXT
    kept = [tmp_path / f"l.jsonl{suffix}" for suffix in ("", ".1", ".2", ".3")]
    assert not any(name.is_symlink() for name in kept)
    ids = {r.call_id for name in kept for r in read_ledger(name).records}
    assert "c11" in ids


def test_a_parent_folder_swapped_for_a_link_mid_run_is_not_followed(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    logs = tmp_path / "logs"
    logs.mkdir()
    failures: list[LedgerWriteFailed] = []
    ledger = _ledger(JsonlLedgerSink(logs / "l.jsonl", max_bytes=300), failures)
    with ledger.run(label="moved"):
        _call(ledger, "before")
        os.rename(logs, tmp_path / "moved")
        logs.symlink_to(victim.parent, target_is_directory=True)
        for i in range(6):
            _call(ledger, f"after-{i}", pad=100)
    assert not failures
    assert sorted(os.listdir(victim.parent)) == [".bashrc"]
    assert victim.read_text() == VICTIM_TEXT
    # Rotation happened inside the folder the sink opened, wherever it now is.
    assert (tmp_path / "moved" / "l.jsonl.1").is_file()


def test_a_writer_follows_another_writers_rotation(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    failures: list[LedgerWriteFailed] = []
    first = _ledger(JsonlLedgerSink(path, max_bytes=300), failures)
    second = _ledger(JsonlLedgerSink(path, max_bytes=300), failures)
    for i in range(8):
        _call(first if i % 2 else second, f"c{i}", pad=80)
    first.close()
    second.close()
    assert not failures
    seen = set()
    for name in sorted(os.listdir(tmp_path)):
        if name.startswith("l.jsonl") and not name.endswith(".lock"):
            seen |= {r.call_id for r in read_ledger(tmp_path / name).records}
    assert {f"c{i}" for i in range(4, 8)} <= seen


# --- SQLite --------------------------------------------------------------------------------


def test_an_sqlite_ledger_planted_as_a_symlink_is_refused(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    (tmp_path / "ledger.db").symlink_to(victim)
    with pytest.raises(UnsafeFileError):
        SqliteLedgerSink(tmp_path / "ledger.db")
    assert victim.read_text() == VICTIM_TEXT


def test_an_sqlite_ledger_hard_linked_to_another_file_is_refused(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    os.link(victim, tmp_path / "ledger.db")
    with pytest.raises(UnsafeFileError):
        SqliteLedgerSink(tmp_path / "ledger.db")
    assert victim.read_text() == VICTIM_TEXT


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
def test_a_planted_sqlite_companion_link_is_refused(tmp_path: Path, suffix: str) -> None:
    victim = _victim(tmp_path)
    (tmp_path / f"ledger.db{suffix}").symlink_to(victim)
    with pytest.raises(UnsafeFileError, match=suffix):
        SqliteLedgerSink(tmp_path / "ledger.db")
    assert victim.read_text() == VICTIM_TEXT


def test_an_sqlite_ledger_behind_a_folder_link_in_a_root_is_refused(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    root = tmp_path / "root"
    root.mkdir()
    (root / "db").symlink_to(victim.parent, target_is_directory=True)
    with pytest.raises(UnsafeFileError):
        SqliteLedgerSink(root / "db" / "ledger.db", roots=[str(root)])
    assert sorted(os.listdir(victim.parent)) == [".bashrc"]


def test_links_planted_mid_run_beside_an_sqlite_ledger_are_never_written(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    path = tmp_path / "ledger.db"
    failures: list[LedgerWriteFailed] = []
    ledger = _ledger(SqliteLedgerSink(path), failures)
    with ledger.run(label="attacked"):
        _call(ledger, "before")
        os.rename(path, tmp_path / "moved.db")
        path.symlink_to(victim)
        _call(ledger, "after")
    assert not failures
    assert victim.read_text() == VICTIM_TEXT
    # SQLite wrote on through its own descriptors; put the database back beside
    # its WAL and every record is there.
    path.unlink()
    os.rename(tmp_path / "moved.db", path)
    ids = [r.call_id for r in read_ledger(path).records]
    assert ids == ["before", "after"]
    with contextlib.closing(sqlite3.connect(victim)) as db, pytest.raises(sqlite3.DatabaseError):
        db.execute("SELECT 1 FROM tool_call").fetchall()


@pytest.mark.parametrize("target_exists", [True, False], ids=["empty-file", "dangling"])
def test_a_link_swapped_in_between_the_check_and_sqlites_open_is_never_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target_exists: bool
) -> None:
    # The agent wins the race: right after Prism checked and created the file, the
    # name becomes a link to a file outside the root (or to a name not there yet).
    from prism.core import _files, _ledger_sqlite

    outside = tmp_path / "home"
    outside.mkdir()
    target = outside / "victim.db"
    if target_exists:
        target.write_bytes(b"")
    path = tmp_path / "ledger.db"
    checked = _files.open_private_file

    def check_then_swap(*args: object, **kwargs: object) -> object:
        opened = checked(*args, **kwargs)  # type: ignore[arg-type]
        os.unlink(path)
        path.symlink_to(target)
        return opened

    monkeypatch.setattr(_ledger_sqlite, "open_private_file", check_then_swap)
    with pytest.raises((UnsafeFileError, sqlite3.Error)):
        SqliteLedgerSink(path)
    if target_exists:
        assert target.read_bytes() == b""  # not turned into a WAL database
    else:
        assert not target.exists()  # not created through the link
    assert sorted(os.listdir(outside)) == (["victim.db"] if target_exists else [])


def test_reading_an_sqlite_ledger_never_writes_a_hard_linked_companion(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    ledger = RunLedger(sinks=[SqliteLedgerSink(path)])
    with ledger.run(label="r"):
        _call(ledger, "one")
    ledger.close()
    victim = _victim(tmp_path)
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{path}{suffix}")
    os.link(victim, f"{path}-shm")
    with pytest.raises(UnsafeFileError, match="-shm"):
        read_ledger(path)
    assert victim.read_text() == VICTIM_TEXT
