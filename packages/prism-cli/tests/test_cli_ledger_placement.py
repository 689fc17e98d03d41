"""Where the CLI writes its ledger: outside the agent's roots, never through a planted link."""

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from prism.core.ledger import read_ledger

CliRunner = Callable[..., subprocess.CompletedProcess[str]]

SESSION = [
    {"tool_calls": [{"id": "r", "name": "read", "arguments": {"path": "notes.txt"}}]},
    {"text": "done"},
]


def _setup(tmp_path: Path, ledger_table: str = "") -> None:
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "notes.txt").write_text("alpha\n", encoding="utf-8")
    config = '[workspace]\nroots = ["repo"]\n' + ledger_table
    (tmp_path / "prism.toml").write_text(config, encoding="utf-8")
    (tmp_path / "session.json").write_text(json.dumps(SESSION), encoding="utf-8")


def test_the_default_ledger_goes_to_the_state_folder_and_its_path_is_printed(
    run_cli: CliRunner, tmp_path: Path, state_home: Path
) -> None:
    _setup(tmp_path)
    proc = run_cli("run", "session.json")
    assert proc.returncode == 0, proc.stderr
    ledger = state_home / "prism" / "prism-ledger.jsonl"
    assert f"ledger: {ledger}" in proc.stdout
    assert [r.call_id for r in read_ledger(ledger).records] == ["r"]
    assert oct(os.stat(ledger).st_mode & 0o777) == "0o600"


def test_a_ledger_inside_a_writable_root_is_refused(run_cli: CliRunner, tmp_path: Path) -> None:
    _setup(tmp_path)
    proc = run_cli("run", "session.json", "--ledger", "repo/prism-ledger.jsonl")
    assert proc.returncode != 0
    assert "inside the agent's writable root" in proc.stderr
    assert "inside_roots = true" in proc.stderr
    assert not (tmp_path / "repo" / "prism-ledger.jsonl").exists()


def test_a_ledger_reached_through_a_link_into_a_root_is_refused(
    run_cli: CliRunner, tmp_path: Path
) -> None:
    _setup(tmp_path)
    (tmp_path / "logs").symlink_to(tmp_path / "repo", target_is_directory=True)
    proc = run_cli("run", "session.json", "--ledger", "logs/prism-ledger.jsonl")
    assert proc.returncode != 0
    assert "inside the agent's writable root" in proc.stderr


def test_inside_roots_allows_it_but_a_planted_link_is_still_refused(
    run_cli: CliRunner, tmp_path: Path
) -> None:
    _setup(tmp_path, '[ledger]\npath = "repo/prism-ledger.jsonl"\ninside_roots = true\n')
    proc = run_cli("run", "session.json")
    assert proc.returncode == 0, proc.stderr
    assert [r.call_id for r in read_ledger(tmp_path / "repo" / "prism-ledger.jsonl").records] == [
        "r"
    ]
    # The agent then runs `ln -sf ~/.bashrc prism-ledger.jsonl` in its root.
    home = tmp_path / "home"
    home.mkdir()
    bashrc = home / ".bashrc"
    bashrc.write_text("export PS1='$ '\n", encoding="utf-8")
    os.unlink(tmp_path / "repo" / "prism-ledger.jsonl")
    (tmp_path / "repo" / "prism-ledger.jsonl").symlink_to(bashrc)
    proc = run_cli("run", "session.json")
    assert proc.returncode != 0
    assert "symbolic link" in proc.stderr
    assert bashrc.read_text(encoding="utf-8") == "export PS1='$ '\n"


def test_a_folder_link_planted_below_a_root_is_refused_even_when_allowed(
    run_cli: CliRunner, tmp_path: Path
) -> None:
    _setup(tmp_path, '[ledger]\npath = "repo/logs/prism-ledger.jsonl"\ninside_roots = true\n')
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "repo" / "logs").symlink_to(home, target_is_directory=True)
    proc = run_cli("run", "session.json")
    assert proc.returncode != 0
    assert "'logs' inside" in proc.stderr
    assert os.listdir(home) == []


def test_an_sqlite_ledger_planted_as_a_link_is_refused(run_cli: CliRunner, tmp_path: Path) -> None:
    _setup(tmp_path)
    victim = tmp_path / "victim.db"
    victim.write_bytes(b"not a database\n")
    (tmp_path / "ledger.db").symlink_to(victim)
    proc = run_cli("run", "session.json", "--ledger", "ledger.db")
    assert proc.returncode != 0
    assert "symbolic link" in proc.stderr
    assert victim.read_bytes() == b"not a database\n"


def test_a_spill_folder_inside_a_writable_root_is_refused(
    run_cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The state folder inside the root, the ledger elsewhere: the agent could
    # `rmdir .state/prism/spill && ln -s /outside .state/prism/spill` between two
    # spills and have the shell tool write its long output outside the roots.
    _setup(tmp_path, '[ledger]\npath = "prism-ledger.jsonl"\n')
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "repo" / ".state"))
    proc = run_cli("run", "session.json")
    assert proc.returncode != 0
    assert "the spill folder" in proc.stderr
    assert "inside the agent's writable root" in proc.stderr
    assert not (tmp_path / "repo" / ".state").exists()


def test_a_spill_folder_reached_through_a_link_into_a_root_is_refused(
    run_cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _setup(tmp_path, '[ledger]\npath = "prism-ledger.jsonl"\n')
    (tmp_path / "state").symlink_to(tmp_path / "repo", target_is_directory=True)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    proc = run_cli("run", "session.json")
    assert proc.returncode != 0
    assert "the spill folder" in proc.stderr


def test_inside_roots_allows_a_spill_folder_in_a_root(
    run_cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _setup(tmp_path, '[ledger]\npath = "prism-ledger.jsonl"\ninside_roots = true\n')
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "repo" / ".state"))
    proc = run_cli("run", "session.json")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "repo" / ".state" / "prism" / "spill").is_dir()
