"""Every example in the docs runs, so the docs cannot rot.

- On README.md and docs/*.md every fenced ``python`` block runs, verbatim, in a fresh
  interpreter (this one: ``python`` and ``prism`` on PATH are this environment's), cwd
  a temporary folder, and must exit 0. Examples create the paths they use.
- Every ``console`` block there runs too: each ``$ `` line, verbatim, through bash
  (``set -o pipefail``), in a temporary folder holding docs/cli.md's ``prism.toml``
  and ``session.json``, a ``notes.md`` and a ledger that ``prism run`` and ``prism
  demo`` wrote, with this environment's ``prism`` and ``prism-demo-server`` first on
  PATH (what ``uv run prism`` runs). A command must exit 0, or, when the block shows
  the lines it prints (the lines after it that are not ``$ `` lines), print them.
- A block that cannot run (a fragment, a signature listing, a command that needs a
  model, the network, a long-running server or the repository itself) sits right
  after ``<!-- docs-test: skip: REASON -->``; there, a skip without its reason fails.
- On packages/*/README.md (their owners' pages) a python block runs when it is a
  complete program (it parses and names nothing it does not define or import).
- docs/cli.md's ``toml`` and ``json`` blocks are a real ``prism.toml`` and session:
  they must validate, and ``prism run`` must replay them end to end.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import attrs
import pytest

from prism.cli import parse_config, parse_session

ROOT = Path(__file__).resolve().parent.parent
SKIP = re.compile(r"^<!-- docs-test: skip(?P<colon>:?)\s*(?P<reason>.*?)\s*-->$")
FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```\s*$", re.M | re.S)
CONSOLE = {"console", "shell", "bash", "sh"}

# Complete programs on packages/*/README.md that act on the world outside a
# temporary folder (a named checkout): correct as documentation, not runnable here.
NEEDS_THE_OUTSIDE_WORLD = {
    ("packages/prism-coding-tools/README.md", 'shell_options={"timeout_s": 60'),
}


@attrs.frozen
class Block:
    """One fenced block: where it is, its language and text, and its skip reason."""

    where: str
    page: str
    language: str
    code: str
    skip: str | None  # None: not marked; "" : marked without a reason


def _strict_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _doc_files() -> list[Path]:
    files = _strict_pages() + sorted((ROOT / "packages").glob("*/README.md"))
    return [f for f in files if f.is_file()]


def _all_blocks(files: list[Path] | None = None) -> list[Block]:
    found: list[Block] = []
    for path in files or _doc_files():
        text = path.read_text(encoding="utf-8")
        page = str(path.relative_to(ROOT))
        for match in FENCE.finditer(text):
            before = text[: match.start()].rstrip().splitlines()[-1:] or [""]
            marker = SKIP.match(before[0].strip())
            skip = None if marker is None else marker.group("reason")
            line = text.count("\n", 0, match.start()) + 1
            found.append(Block(f"{page}:{line}", page, match.group(1), match.group(2), skip))
    return found


def _blocks(language: str, files: list[Path] | None = None) -> list[tuple[str, str]]:
    return [
        (b.where, b.code) for b in _all_blocks(files) if b.language == language and b.skip is None
    ]


def _env() -> dict[str, str]:
    hidden = {"FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"}
    env = {k: v for k, v in os.environ.items() if k not in hidden}
    # `python`, `prism` and `prism-demo-server` are this environment's (as `uv run`).
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["NO_COLOR"] = "1"
    env["COLUMNS"] = "120"
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


STRICT = {str(p.relative_to(ROOT)) for p in _strict_pages()}
ALL_BLOCKS = _all_blocks()


def _python_blocks() -> tuple[list[tuple[str, str]], list[str]]:
    runnable: list[tuple[str, str]] = []
    not_run: list[str] = []
    for block in ALL_BLOCKS:
        if block.language != "python":
            continue
        outside = any(
            block.page == p and marker in block.code for p, marker in NEEDS_THE_OUTSIDE_WORLD
        )
        fragment = block.page not in STRICT and _is_fragment(block.code)
        if block.skip is not None or outside or fragment:
            not_run.append(block.where)
        else:
            runnable.append((block.where, block.code))
    return runnable, not_run


PYTHON_BLOCKS, NOT_RUN = _python_blocks()


def test_the_docs_have_runnable_python_examples() -> None:
    assert len(PYTHON_BLOCKS) >= 3
    assert any(where.startswith("README.md") for where, _ in PYTHON_BLOCKS)


def _run(
    argv: list[str], folder: Path, *, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in ``folder`` with the docs' environment, no stdin, output captured."""
    return subprocess.run(
        argv,
        cwd=folder,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(("where", "code"), PYTHON_BLOCKS, ids=[w for w, _ in PYTHON_BLOCKS])
def test_python_example_runs(where: str, code: str, tmp_path: Path) -> None:
    proc = _run([sys.executable, "-c", code], tmp_path)
    assert proc.returncode == 0, f"{where} failed:\n{proc.stdout}\n{proc.stderr}"


def test_every_skipped_block_says_why() -> None:
    unexplained = [b.where for b in ALL_BLOCKS if b.page in STRICT and b.skip == ""]
    assert unexplained == [], (
        f"write the reason into the marker, <!-- docs-test: skip: REASON -->: {unexplained}"
    )


CONSOLE_BLOCKS = [
    (b.where, b.code)
    for b in ALL_BLOCKS
    if b.page in STRICT and b.language in CONSOLE and b.skip is None
]
# Programs a console block may pipe into that are not part of Prism.
OPTIONAL_TOOLS = ("jq",)


def test_the_docs_have_runnable_console_examples() -> None:
    assert len(CONSOLE_BLOCKS) >= 3
    assert all("$ " in code for _, code in CONSOLE_BLOCKS)


CLI_DOC = ROOT / "docs" / "cli.md"


def _cli_example(language: str) -> str:
    blocks = _blocks(language, [CLI_DOC])
    assert len(blocks) == 1, f"docs/cli.md should hold exactly one {language} example"
    return blocks[0][1]


def _run_prism(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _run([sys.executable, "-m", "prism.cli", *args], folder)


@pytest.fixture(scope="module")
def cli_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """docs/cli.md's prism.toml and session.json, a notes.md, and a ledger (a run, a demo)."""
    folder = tmp_path_factory.mktemp("cli-doc")
    (folder / "prism.toml").write_text(_cli_example("toml"), encoding="utf-8")
    (folder / "session.json").write_text(_cli_example("json"), encoding="utf-8")
    (folder / "notes.md").write_text("todo\n", encoding="utf-8")
    proc = _run_prism(folder, "run", "session.json")
    assert proc.returncode == 0, proc.stderr
    # A demo run in the same ledger, so its examples find blocked and refused calls.
    demo = ("demo", "--workspace", "demo", "--ledger", "prism-ledger.jsonl", "--step-seconds", "0")
    proc = _run_prism(folder, *demo)
    assert proc.returncode == 0, proc.stderr
    shutil.rmtree(folder / "demo")
    (folder / "notes.md").write_text("todo\n", encoding="utf-8")
    return folder


def _steps(code: str) -> list[tuple[str, list[str]]]:
    """Each ``$ `` command of a console block with the output lines the block shows for it."""
    steps: list[tuple[str, list[str]]] = []
    for line in code.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps and line.strip() and line.strip() != "...":
            steps[-1][1].append(" ".join(line.split()))
    return steps


@pytest.mark.slow
@pytest.mark.parametrize(("where", "code"), CONSOLE_BLOCKS, ids=[w for w, _ in CONSOLE_BLOCKS])
def test_console_example_runs(where: str, code: str, cli_folder: Path, tmp_path: Path) -> None:
    """Each command runs; it exits 0, or prints every output line the block shows for it."""
    steps = _steps(code)
    for tool in OPTIONAL_TOOLS:
        if any(f"| {tool} " in command for command, _ in steps) and shutil.which(tool) is None:
            pytest.skip(f"{where} pipes into {tool}, which is not installed here")
    folder = tmp_path / "work"
    shutil.copytree(cli_folder, folder)
    for command, shown in steps:
        proc = _run(["bash", "-c", f"set -o pipefail\n{command}"], folder, timeout=300)
        said = " ".join(f"{proc.stdout}\n{proc.stderr}".split())
        context = f"{where}: $ {command}\n{proc.stdout}\n{proc.stderr}"
        if shown:
            missing = [line for line in shown if line not in said]
            assert missing == [], f"{context}\nnot printed: {missing}"
        else:
            assert proc.returncode == 0, f"{context}\nexit code {proc.returncode}"


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
    proc = _run_prism(tmp_path, "run", "session.json", "--json")
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
