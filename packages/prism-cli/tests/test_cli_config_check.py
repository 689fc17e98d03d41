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


SECRET = "Zq7vT2mXk9LpW4sR8nB3cY6dF1gH5jK0"


def test_config_check_json_shows_no_secret_a_server_is_given(
    run_cli: CliRunner, tmp_path: Path
) -> None:
    (tmp_path / "prism.toml").write_text(
        "[mcp.servers.remote]\n"
        'url = "http://127.0.0.1:9/mcp"\n'
        f'headers = {{ Authorization = "Bearer ghp_{SECRET}", "X-Custom-Auth" = "{SECRET}" }}\n'
        "[mcp.servers.local]\n"
        'command = "python"\n'
        f'args = ["--token={SECRET}", "https://u:{SECRET}@h/", "plain"]\n'
        f'env = {{ DB_PASS = "{SECRET}", PLAIN = "{SECRET}" }}\n',
        encoding="utf-8",
    )
    proc = run_cli("config", "check", "--json")
    assert proc.returncode == 0, proc.stderr
    assert SECRET not in proc.stdout
    servers = {s["server_id"]: s for s in json.loads(proc.stdout)["mcp_servers"]}
    # The names stay, so the output still says what is configured.
    assert servers["remote"]["headers"] == {
        "Authorization": "[hidden]",
        "X-Custom-Auth": "[hidden]",
    }
    assert servers["local"]["env"] == {"DB_PASS": "[hidden]", "PLAIN": "[hidden]"}
    assert servers["local"]["args"][2] == "plain"


def test_config_check_refuses_a_bad_gateway_limit(run_cli: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "prism.toml").write_text("[serve]\nquestion_ttl_s = -5\n", encoding="utf-8")
    proc = run_cli("config", "check")
    assert proc.returncode == 2
    assert (
        "prism.toml: serve.question_ttl_s: must be a finite number >= 1 and <= 604800, got -5"
        in proc.stderr
    )
    assert "Traceback" not in proc.stderr
