"""`prism policy check`: the coding policy's decision on a command, explained."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import TYPE_CHECKING

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
    proc = run_cli("policy", "check", "ls && timeout 5 bash -c 'make test'")
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
        '[workspace]\nroots = ["repo"]\n[commands]\nallow = ["make *"]\n', encoding="utf-8"
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
