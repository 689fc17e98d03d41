"""Every example in the docs runs, so the docs cannot rot.

- Each fenced ``python`` block of README.md, docs/*.md and packages/*/README.md that
  is a complete program (it parses, and names nothing it does not define or import)
  runs in a fresh interpreter, cwd a temporary folder, and must exit 0.
- Fragments (signature listings, snippets that continue an earlier block) are
  allowed on the package pages, but not on the pages of this test's owner
  (README.md, docs/index, architecture, cli, performance, the prism-cli README):
  there every block must run.
- A block right after a ``<!-- docs-test: skip -->`` line is left out (say why next
  to it), and so are the few complete programs listed in ``NEEDS_THE_OUTSIDE_WORLD``.
- docs/cli.md's ``toml`` and ``json`` blocks are a real ``prism.toml`` and session:
  they must validate, and ``prism run`` must replay them end to end.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from prism.cli import parse_config, parse_session

ROOT = Path(__file__).resolve().parent.parent
SKIP = "<!-- docs-test: skip -->"
FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```\s*$", re.M | re.S)


STRICT = {
    "README.md",
    "docs/index.md",
    "docs/architecture.md",
    "docs/cli.md",
    "docs/performance.md",
    "packages/prism-cli/README.md",
}

# Complete programs that act on the world outside a temporary folder (a named
# checkout, a test suite): correct as documentation, not runnable here. Matched by
# a distinctive piece of the block, so edits elsewhere in the page do not matter.
NEEDS_THE_OUTSIDE_WORLD = {
    ("packages/prism-coding-tools/README.md", 'shell_options={"timeout_s": 60'),
    ("docs/coding-tools.md", 'shell_options={"timeout_s": 60'),
}


def _doc_files() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    files += sorted((ROOT / "packages").glob("*/README.md"))
    return [f for f in files if f.is_file()]


def _blocks(language: str, files: list[Path] | None = None) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for path in files or _doc_files():
        text = path.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            if match.group(1) != language:
                continue
            before = text[: match.start()].rstrip().splitlines()[-1:] or [""]
            if before[0].strip() == SKIP:
                continue
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{path.relative_to(ROOT)}:{line}", match.group(2)))
    return found


def _env() -> dict[str, str]:
    hidden = {"FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"}
    env = {k: v for k, v in os.environ.items() if k not in hidden}
    # The docs say `python` and `prism`: make them this interpreter's.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["NO_COLOR"] = "1"
    return env


def _is_fragment(code: str) -> bool:
    """Whether a block is not a program of its own: it does not parse, or uses undefined names."""
    try:
        compile(code, "<docs>", "exec", flags=0x2000)  # PyCF_ALLOW_TOP_LEVEL_AWAIT
    except SyntaxError:
        return True
    if re.search(r"^await |^async with |^async for ", code, re.M):
        return True  # top-level await: a snippet from inside a coroutine
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--isolated",
            "--select",
            "F821",
            "--no-cache",
            "--output-format",
            "concise",
            "--stdin-filename",
            "example.py",
            "-",
        ],
        input=code,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return proc.returncode != 0


def _python_blocks() -> tuple[list[tuple[str, str]], list[str]]:
    runnable: list[tuple[str, str]] = []
    not_run: list[str] = []
    for where, code in _blocks("python"):
        page = where.rsplit(":", 1)[0]
        if any(page == p and marker in code for p, marker in NEEDS_THE_OUTSIDE_WORLD) or (
            page not in STRICT and _is_fragment(code)
        ):
            not_run.append(where)
        else:
            runnable.append((where, code))
    return runnable, not_run


PYTHON_BLOCKS, NOT_RUN = _python_blocks()


def test_the_docs_have_runnable_python_examples() -> None:
    assert len(PYTHON_BLOCKS) >= 3
    assert any(where.startswith("README.md") for where, _ in PYTHON_BLOCKS)


@pytest.mark.parametrize(("where", "code"), PYTHON_BLOCKS, ids=[w for w, _ in PYTHON_BLOCKS])
def test_python_example_runs(where: str, code: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, f"{where} failed:\n{proc.stdout}\n{proc.stderr}"


CLI_DOC = ROOT / "docs" / "cli.md"


def _cli_example(language: str) -> str:
    blocks = _blocks(language, [CLI_DOC])
    assert len(blocks) == 1, f"docs/cli.md should hold exactly one {language} example"
    return blocks[0][1]


def test_cli_doc_prism_toml_example_is_valid(tmp_path: Path) -> None:
    config = parse_config(tomllib.loads(_cli_example("toml")), base_dir=str(tmp_path))
    assert [s.server_id for s in config.mcp_servers] == ["docs"]
    assert config.permissions.deny == ("tool:mcp:docs:delete_*:execute",)


def test_cli_doc_session_example_is_valid() -> None:
    session = parse_session(json.loads(_cli_example("json")))
    assert session.call_count == 3


@pytest.mark.slow
def test_cli_doc_example_runs_end_to_end_with_prism_run(tmp_path: Path) -> None:
    (tmp_path / "prism.toml").write_text(_cli_example("toml"), encoding="utf-8")
    (tmp_path / "session.json").write_text(_cli_example("json"), encoding="utf-8")
    (tmp_path / "notes.md").write_text("todo\n", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "prism.cli", "run", "session.json", "--json"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [c["status"] for c in report["calls"]] == ["ok", "ok", "ok"]
    assert report["final"] == "Noted."
    assert (tmp_path / "prism-ledger.jsonl").is_file()
    assert "ledger" in (tmp_path / "notes.md").read_text(encoding="utf-8")


LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", _doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_in_the_docs_resolve(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    broken = [
        target
        for target in LINK.findall(text)
        if not target.startswith(("http://", "https://", "mailto:"))
        and not (page.parent / target).exists()
    ]
    assert broken == [], f"{page.relative_to(ROOT)} links to missing files: {broken}"
