import json
import subprocess
from collections.abc import Callable
from pathlib import Path

CliRunner = Callable[..., subprocess.CompletedProcess[str]]


def test_config_check_accepts_a_good_file(run_cli: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "prism.toml").write_text(
        '[agent]\nconcurrency = 2\n[mcp.servers.docs]\ncommand = "python"\n',
        encoding="utf-8",
    )
    proc = run_cli("config", "check")
    assert proc.returncode == 0, proc.stderr
    assert "ok" in proc.stdout
    assert "mcp servers: docs" in proc.stdout


def test_config_check_json_shows_resolved_roots(run_cli: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    (tmp_path / "prism.toml").write_text('[workspace]\nroots = ["repo"]\n', encoding="utf-8")
    proc = run_cli("config", "check", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["workspace"]["roots"] == [str(tmp_path / "repo")]


def test_config_check_points_at_the_bad_key(run_cli: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "prism.toml").write_text(
        '[mcp.servers.docs]\ncommand = "python"\ncall_timeout_s = "soon"\n', encoding="utf-8"
    )
    proc = run_cli("config", "check")
    assert proc.returncode == 2
    assert "prism.toml: mcp.servers.docs.call_timeout_s: must be a finite number > 0" in (
        proc.stderr
    )
    assert "got 'soon'" in proc.stderr
    assert "Traceback" not in proc.stderr
