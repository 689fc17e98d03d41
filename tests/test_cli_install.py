"""The README's ways to the ``prism`` command, run as a user runs them.

- ``uv tool install ./packages/prism-cli`` (the README's block, verbatim) in a copy
  of this checkout, with uv's tool folders in a temporary folder: ``prism`` lands on
  PATH, answers ``--version``, and its environment holds no development tool.
- ``scripts/demo``'s closing hint, verbatim, from another folder than the one the
  demo ran in, with nothing of this test run's environment on PATH.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEV_TOOLS = ("pytest", "mypy", "ruff", "hypothesis", "coverage")


def _user_env(**extra: str) -> dict[str, str]:
    """The caller's environment without this test run's virtualenv on PATH or in uv's view."""
    dropped = {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "FORCE_COLOR", "UV"}
    dropped |= {"UV_PROJECT_ENVIRONMENT", "UV_NO_SYNC", "UV_FROZEN", "PRISM_DEMO_COMMAND"}
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    ours = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != ours)
    env["NO_COLOR"] = "1"
    env["COLUMNS"] = "200"
    env.update(extra)
    return env


def _bash(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f"set -o pipefail\n{command}"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def _readme_install_block() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```console\n(.*?)^```", readme, re.M | re.S)
    (block,) = [b for b in blocks if "uv tool install ./packages/prism-cli" in b]
    return [line[2:] for line in block.splitlines() if line.startswith("$ ")]


def _copy_of_the_checkout(target: Path) -> Path:
    """The tracked files of this checkout as they are now (a clone with the edits in it)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


@pytest.mark.slow
def test_the_readme_puts_prism_on_path_with_only_its_runtime(tmp_path: Path) -> None:
    if shutil.which("uv") is None:
        pytest.fail("this needs uv on PATH")
    checkout = _copy_of_the_checkout(tmp_path / "prism")
    bin_dir, tools = tmp_path / "bin", tmp_path / "tools"
    env = _user_env(UV_TOOL_BIN_DIR=str(bin_dir), UV_TOOL_DIR=str(tools))
    env["PATH"] = os.pathsep.join([str(bin_dir), env["PATH"]])
    commands = _readme_install_block()
    assert commands[0] == "uv tool install ./packages/prism-cli"
    outputs = []
    for command in commands:
        proc = _bash(command, checkout, env)
        assert proc.returncode == 0, f"$ {command}\n{proc.stdout}\n{proc.stderr}"
        outputs.append(proc.stdout)
    version = tomllib.loads((checkout / "packages/prism-cli/pyproject.toml").read_text())
    assert outputs[-1] == f"prism {version['project']['version']}\n"
    assert (bin_dir / "prism").exists()
    assert (bin_dir / "prism-demo-server").exists()
    installed = " ".join(p.name for p in tools.rglob("*.dist-info"))
    assert "prismgate_cli-" in installed
    assert "prismgate_gateway-" in installed
    for tool in DEV_TOOLS:
        assert f"{tool}-" not in installed, tool
    # It works from any folder, without the checkout.
    shutil.rmtree(checkout)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = _bash("prism config check --help", elsewhere, env)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_the_demos_hint_runs_verbatim_from_another_folder(tmp_path: Path) -> None:
    if shutil.which("uv") is None:
        pytest.fail("this needs uv on PATH")
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    env = _user_env()
    demo = subprocess.run(
        [str(ROOT / "scripts" / "demo"), "--workspace", "ws", "--step-seconds", "0"],
        cwd=here,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert demo.returncode == 0, f"{demo.stdout}\n{demo.stderr}"
    last = demo.stdout.rstrip().splitlines()[-1]
    prefix = "show it again with: "
    assert last.startswith(prefix), last
    hint = last.removeprefix(prefix)
    ledger = (here / "ws" / "prism-demo-ledger.jsonl").resolve()
    assert hint == f"{ROOT / 'scripts' / 'prism'} ledger show {ledger}"
    proc = _bash(hint, elsewhere, env)
    assert proc.returncode == 0, f"$ {hint}\n{proc.stdout}\n{proc.stderr}"
    assert f"ledger {ledger}" in proc.stdout
    assert "read-1" in proc.stdout
    assert sorted(p.name for p in elsewhere.iterdir()) == []  # it wrote nothing there
