"""The README's promise, as a new user meets it: clone the repository, run ``scripts/demo``.

The clone is of the committed ``HEAD`` (what a user would get), into a temporary
folder, and uv starts from an empty cache folder, so the demo's packages are
installed from the package index exactly as on a user's first run. That is
installation, not test traffic, so this test is marked ``clone_demo`` and left out
of the default run (root ``pyproject.toml``); ``scripts/test`` runs it as its own
step when ``CI=true`` or ``PRISM_CLONE_DEMO=1``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# What the demo promises to show, each as a piece of its output.
GATES = (
    "registry: unknown tool",
    "filter: tool hidden by the host",
    "arguments are an object",
    "permission policy",
    "JSON Schema validator",
    "path containment",
    "execution policy",
    "approval (scripted approver)",
    "ledger redaction",
)


def _clean_environ(cache: Path) -> dict[str, str]:
    """The caller's environment without this test run's virtualenv (uv's index settings stay)."""
    dropped = {
        "VIRTUAL_ENV",
        "PYTHONPATH",
        "PYTHONHOME",
        "FORCE_COLOR",
        "LINES",
        "UV",
        "UV_PROJECT_ENVIRONMENT",
        "UV_NO_SYNC",
        "UV_FROZEN",
        "UV_OFFLINE",
    }
    env = {key: value for key, value in os.environ.items() if key not in dropped}
    env["UV_CACHE_DIR"] = str(cache)
    env["NO_COLOR"] = "1"
    env["COLUMNS"] = "200"
    return env


@pytest.mark.clone_demo
def test_a_fresh_clone_runs_the_demo_from_an_empty_uv_cache(tmp_path: Path) -> None:
    if shutil.which("git") is None or shutil.which("uv") is None:
        pytest.fail("this proof needs git and uv on PATH")
    clone = tmp_path / "prism"
    cache = tmp_path / "uv-cache"
    cache.mkdir()
    subprocess.run(
        ["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)],
        check=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    # HEAD itself, also when it is on no branch (a CI checkout of a pull request).
    for step in (["fetch", "--quiet", str(ROOT), "HEAD"], ["checkout", "--quiet", "FETCH_HEAD"]):
        subprocess.run(
            ["git", "-C", str(clone), *step], check=True, timeout=300, stdin=subprocess.DEVNULL
        )
    heads = [
        subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for repo in (ROOT, clone)
    ]
    assert heads[0] == heads[1]
    demo_dir = tmp_path / "demo"
    proc = subprocess.run(
        [str(clone / "scripts" / "demo"), "--workspace", str(demo_dir)],
        cwd=clone,
        env=_clean_environ(cache),
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    out = proc.stdout
    assert proc.returncode == 0, f"{out}\n{proc.stderr}"
    # Installed only the demo's runtime packages, into the empty cache.
    assert "installing the demo's packages" in proc.stderr
    assert any(cache.iterdir())
    assert not (clone / ".venv").exists()
    installed = " ".join(p.name for p in cache.rglob("*.dist-info"))
    for dev_tool in ("pytest", "mypy", "ruff", "hypothesis"):
        assert f"{dev_tool}-" not in installed, dev_tool
    # Every gate it promises, in its closing table.
    table = out.split("every gate, and the call that met it:", 1)[1]
    for gate in GATES:
        assert any(line.strip().startswith(gate) for line in table.splitlines()), gate
    # The approval, asked and answered on screen.
    assert "approval asked for shell: rm src/inventory.py.orig" in out
    assert "answer: yes" in out
    # What the sandbox stopped, or one line saying none runs here.
    assert "sandbox (bubblewrap)" in table or "no sandbox runs here" in table
    if "sandbox (bubblewrap)" in table:
        assert "stopped: " in table
    # The redacted key, on screen and in the ledger.
    assert "OPENAI_API_KEY=[REDACTED]" in out
    assert "sk-demo-" not in out
    ledger = demo_dir / "prism-demo-ledger.jsonl"
    assert "sk-demo-" not in ledger.read_text(encoding="utf-8")
    hint = f"{clone / 'scripts' / 'prism'} ledger show {ledger}"
    assert out.rstrip().splitlines()[-1] == f"show it again with: {hint}"
    # The hint, verbatim, from another folder: the ledger again, no dev tools installed.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shown = subprocess.run(
        ["bash", "-c", hint],
        cwd=elsewhere,
        env=_clean_environ(cache),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert shown.returncode == 0, shown.stderr
    assert "redact-1" in shown.stdout
    installed = " ".join(p.name for p in cache.rglob("*.dist-info"))
    for dev_tool in ("pytest", "mypy", "ruff", "hypothesis"):
        assert f"{dev_tool}-" not in installed, dev_tool
