"""`prism policy check`: the coding policy's decision on a command, explained."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pathlib import Path

CliRunner = Callable[..., subprocess.CompletedProcess[str]]


def test_a_proved_safe_pipeline_is_allowed_with_exit_0(run_cli: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    proc = run_cli("policy", "check", "ls -la | grep py")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("allow:")
    assert "model:ls" in proc.stdout
    assert "model:grep" in proc.stdout


def test_an_unknown_program_asks_with_exit_1_and_names_it(
    run_cli: CliRunner, tmp_path: Path
) -> None:
    proc = run_cli("policy", "check", "--sandbox", "none", "ls && timeout 5 bash -c 'make test'")
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("ask:")
    assert "'make' is not in the safe set" in proc.stdout
    # the wrapped command is listed, indented under its wrappers
    lines = proc.stdout.splitlines()
    make = next(line for line in lines if "unknown-program" in line)
    bash = next(line for line in lines if "model:bash" in line)
    assert len(make) - len(make.lstrip()) > len(bash) - len(bash.lstrip())


def test_json_output_carries_every_part_and_the_deny_rule(
    run_cli: CliRunner, tmp_path: Path
) -> None:
    proc = run_cli("policy", "check", "--json", "ls; rm --recur --force ~root")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["outcome"] == "deny"
    assert report["rule"] == "default:rm"
    verdicts = [(c["argv"][0], c["verdict"]) for c in report["commands"]]
    assert verdicts == [("ls", "allow"), ("rm", "deny")]


def test_read_only_and_rules_from_options(run_cli: CliRunner, tmp_path: Path) -> None:
    allowed = run_cli("policy", "check", "--allow", "make *", "make test")
    assert allowed.returncode == 0, allowed.stdout
    denied = run_cli("policy", "check", "--deny", "git push *", "git push origin main")
    assert json.loads(run_cli("policy", "check", "--json", "--deny", "git push *",
                              "git push -f origin").stdout)["outcome"] == "deny"  # fmt: skip
    assert denied.returncode == 1
    read_only = run_cli("policy", "check", "--read-only", "--json", "echo x > out.txt")
    assert json.loads(read_only.stdout)["rule"] == "read_only"


def test_roots_and_rules_come_from_a_config_file(run_cli: CliRunner, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (tmp_path / "prism.toml").write_text(
        '[workspace]\nroots = ["repo"]\nsandbox = "none"\n[commands]\nallow = ["make *"]\n',
        encoding="utf-8",
    )
    proc = run_cli("policy", "check", "--config", "prism.toml", "--json", "make && cat ../x")
    report = json.loads(proc.stdout)
    assert report["outcome"] == "ask"
    assert "outside the roots" in report["reason"]
    assert report["commands"][0]["rule"] == "allow:make *"


def test_hostile_text_in_a_command_cannot_drive_the_terminal(
    run_cli: CliRunner, tmp_path: Path
) -> None:
    proc = run_cli("policy", "check", "echo '\x1b[2J\x1b]0;pwned\x07' [bold]x[/bold]")
    assert "\x1b" not in proc.stdout
    assert "\\x1b" in proc.stdout


def test_a_cwd_outside_the_roots_is_a_usage_error(run_cli: CliRunner, tmp_path: Path) -> None:
    inside = tmp_path / "repo"
    inside.mkdir()
    proc = run_cli("policy", "check", "--root", "repo", "--cwd", str(tmp_path), "ls")
    assert proc.returncode == 2
    assert "inside a root" in proc.stderr


def test_an_allowed_line_shows_the_mode_and_the_argvs_that_would_run(
    run_cli: CliRunner, tmp_path: Path
) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    proc = run_cli("policy", "check", "--sandbox", "none", "cd . && ls *.py | grep 'a b'")
    assert proc.returncode == 0, proc.stdout
    assert "mode: proved-safe" in proc.stdout
    assert '["cd", "-P", "--", "./."]' in proc.stdout
    assert '["ls", "a.py"]' in proc.stdout
    assert '["grep", "a b"]' in proc.stdout
    report = json.loads(run_cli("policy", "check", "--sandbox", "none", "--json", "ls *.py").stdout)
    assert report["mode"] == "proved-safe"
    assert report["argvs"] == [["ls", "a.py"]]
    assert report["execute"] == "'ls' 'a.py'"


def test_policy_check_reads_prism_toml_here_as_run_does(run_cli: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "prism.toml").write_text(
        '[workspace]\nsandbox = "none"\n[commands]\ndeny = ["cat *"]\n', encoding="utf-8"
    )
    report = json.loads(run_cli("policy", "check", "--json", "cat x").stdout)
    assert report["outcome"] == "deny"
    assert report["mode"] == "proved-safe"


def test_a_missing_root_is_refused(run_cli: CliRunner, tmp_path: Path) -> None:
    proc = run_cli("policy", "check", "--root", "nosuch", "ls")
    assert proc.returncode == 2
    assert "does not exist" in proc.stderr


def _bubblewrap_works(tmp_path: Path) -> bool:
    import trio

    from prism.coding.security import BubblewrapSandbox, SandboxUnavailableError

    try:
        trio.run(BubblewrapSandbox([str(tmp_path)]).ensure_available)
    except SandboxUnavailableError:
        return False
    return True


def test_the_sandbox_setting_puts_the_policy_in_confined_mode(
    run_cli: CliRunner, tmp_path: Path
) -> None:
    if not _bubblewrap_works(tmp_path):
        pytest.skip("bubblewrap cannot isolate commands here")
    proc = run_cli("policy", "check", "--sandbox", "bubblewrap", "make test")
    assert proc.returncode == 0, proc.stdout
    assert "mode: confined (bubblewrap)" in proc.stdout
    assert "runs as written, inside the sandbox" in proc.stdout
    asked = run_cli("policy", "check", "--sandbox", "bubblewrap", "--json", "c=sudo; $c id")
    assert json.loads(asked.stdout)["outcome"] == "ask"


@pytest.mark.parametrize("flag", ["--allow", "--deny", "--ask"])
def test_an_empty_rule_is_refused_in_the_flags_words(run_cli: CliRunner, flag: str) -> None:
    proc = run_cli("policy", "check", flag, "  ", "ls")
    assert proc.returncode == 2
    assert f"Invalid value for '{flag}': a rule must not be empty" in proc.stderr
    assert "CommandRules" not in proc.stderr


def test_landlock_is_a_sandbox_policy_check_takes_and_names(run_cli: CliRunner) -> None:
    """prism.toml takes sandbox = "landlock"; so does --sandbox, and the mode names it."""
    proc = run_cli("policy", "check", "--sandbox", "landlock", "--json", "ls")
    if proc.returncode == 2 and "cannot isolate" in proc.stderr:
        pytest.skip("Landlock cannot isolate here")
    assert json.loads(proc.stdout)["mode"] == "proved-safe (under landlock)", proc.stderr
