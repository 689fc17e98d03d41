"""Every example in the docs runs, verbatim, so the docs cannot rot.

The pages: README.md, docs/*.md and packages/*/README.md. Every fenced block has a
language. A ``python`` or ``console`` (``shell``, ``bash``, ``sh``) block is
*runnable*, and each runnable block is either run or sits right after
``<!-- docs-test: skip: REASON -->`` (a fragment, a signature listing, a command
that needs a model, the network or a repository checkout); a skip needs its reason.
The test counts the blocks of each page and fails on one that is neither.

How a page's blocks run, as a reader would run them:

- **Its own environment.** Each page gets a fresh virtual environment, and the
  page's install lines (``$ pip install ...``) run in it, verbatim, first (pages
  whose install lines are the same commands, comments aside, share one): ``pip``
  there is uv's pip, installing our distributions from the wheels built from this
  checkout (they are not taken from any index) and the rest at the versions in
  uv.lock. So an example that needs a package its page does not name fails. A page
  with a runnable block must have an install line.
- **A fresh temporary folder** as the working directory, never the repository (and
  the repository's files are checked unchanged afterwards).
- **Ports the test picks.** The port the docs use, ``8765``, is replaced in the code
  by a port that was free a moment before.
- ``python`` blocks run in the page's interpreter and must exit 0. ``console``
  blocks run each ``$ `` line through bash (``set -o pipefail``) with the page's
  environment first on PATH, in a folder holding docs/cli.md's ``prism.toml`` and
  ``session.json``, a ``notes.md`` and a ledger that ``prism run`` and ``prism
  demo`` wrote. A command must exit 0, or print the lines the block shows after it.
  ``<!-- docs-test: with-server: CMD -->`` before a console block starts CMD (its
  port replaced too) in the background first, waits until it accepts connections,
  and stops it afterwards.
- docs/cli.md's ``toml`` and ``json`` blocks are a real ``prism.toml`` and session:
  they must validate, and ``prism run`` must replay them end to end.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tomllib
from collections import Counter
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio

from prism.cli import parse_config, parse_session

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^<!-- docs-test: (?P<kind>[a-z-]+)(?P<colon>:?)\s*(?P<text>.*?)\s*-->$")
OPEN = re.compile(r"^```(?P<language>\S*)\s*$")
CONSOLE = {"console", "shell", "bash", "sh"}
RUNNABLE = CONSOLE | {"python"}
# Blocks that show text, data or configuration: read, never run.
SHOWN = {"text", "json", "toml", "yaml", "ini", "diff", "http", "nginx", "jsonl"}
DOCS_PORT = "8765"
# Programs a console block may pipe into that are not part of Prism.
OPTIONAL_TOOLS = ("jq",)


@attrs.frozen
class Block:
    """One fenced block: where it is, its language and text, and its marker."""

    where: str
    page: str
    language: str
    code: str
    skip: str | None  # None: not marked skip; "": marked without a reason
    server: str | None  # docs-test: with-server: CMD


def _pages() -> list[Path]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return pages + sorted((ROOT / "packages").glob("*/README.md"))


def _page_name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _parse(path: Path) -> tuple[list[Block], int]:
    """The page's fenced blocks, and how many fence lines it has (to count them twice)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    page = _page_name(path)
    blocks: list[Block] = []
    fences = sum(1 for line in lines if line.startswith("```"))
    i = 0
    while i < len(lines):
        opened = OPEN.match(lines[i])
        if opened is None:
            i += 1
            continue
        start = i
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i].rstrip() != "```":
            body.append(lines[i])
            i += 1
        i += 1
        previous = next((ln.strip() for ln in reversed(lines[:start]) if ln.strip()), "")
        marker = MARKER.match(previous)
        skip = server = None
        if marker is not None and marker.group("kind") == "skip":
            skip = marker.group("text") if marker.group("colon") else ""
        elif marker is not None and marker.group("kind") == "with-server":
            server = marker.group("text")
        blocks.append(
            Block(
                f"{page}:{start + 1}",
                page,
                opened.group("language"),
                "\n".join(body) + "\n",
                skip,
                server,
            )
        )
    return blocks, fences


PAGES = {_page_name(p): _parse(p) for p in _pages() if p.is_file()}
ALL_BLOCKS = [b for blocks, _ in PAGES.values() for b in blocks]


def _commands(code: str) -> list[str]:
    return [line[2:] for line in code.splitlines() if line.startswith("$ ")]


def _is_install(block: Block) -> bool:
    commands = _commands(block.code)
    return bool(commands) and all(c.startswith("pip install ") for c in commands)


RUN = [b for b in ALL_BLOCKS if b.language in RUNNABLE and b.skip is None]
INSTALLS = [b for b in RUN if b.language in CONSOLE and _is_install(b)]
PYTHON_BLOCKS = [b for b in RUN if b.language == "python"]
CONSOLE_BLOCKS = [b for b in RUN if b.language in CONSOLE and not _is_install(b)]


@pytest.mark.parametrize("page", sorted(PAGES))
def test_every_runnable_block_is_run_or_marked(page: str) -> None:
    blocks, fences = PAGES[page]
    assert fences == 2 * len(blocks), f"{page}: a fence that does not open or close a block"
    no_language = [b.where for b in blocks if not b.language]
    assert no_language == [], f"give these blocks a language (```text, ```console): {no_language}"
    unknown = [(b.where, b.language) for b in blocks if b.language not in RUNNABLE | SHOWN]
    assert unknown == [], f"blocks in a language the docs test does not know: {unknown}"
    unexplained = [b.where for b in blocks if b.skip == ""]
    assert unexplained == [], f"write the reason: <!-- docs-test: skip: REASON -->: {unexplained}"
    runnable = [b for b in blocks if b.language in RUNNABLE]
    run = [b for b in runnable if b.skip is None]
    marked = [b for b in runnable if b.skip is not None]
    collected = {b.where for b in INSTALLS + PYTHON_BLOCKS + CONSOLE_BLOCKS}
    assert {b.where for b in run} <= collected
    assert len(runnable) == len(run) + len(marked)
    if any(not _is_install(b) or b.language == "python" for b in run):
        assert any(b.page == page for b in INSTALLS), (
            f"{page} has examples that run but no `$ pip install ...` line saying what they need"
        )


def test_the_docs_have_runnable_examples() -> None:
    counts = Counter(b.language for b in RUN)
    assert counts["python"] >= 10
    assert sum(counts[c] for c in CONSOLE) >= 10
    assert any(b.page.startswith("packages/") for b in PYTHON_BLOCKS)


# The pages' environments: fresh virtual environments built from this checkout's wheels.


def _uv() -> str:
    uv = shutil.which("uv")
    if uv is None:
        pytest.fail("the docs test builds the pages' environments with uv: put uv on PATH")
    return uv


def _clean_env(**extra: str) -> dict[str, str]:
    hidden = {"FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "VIRTUAL_ENV", "PYTHONPATH"}
    hidden |= {"UV_PROJECT_ENVIRONMENT", "UV_NO_SYNC", "UV_FROZEN", "UV"}
    env = {k: v for k, v in os.environ.items() if k not in hidden}
    env["NO_COLOR"] = "1"
    env["COLUMNS"] = "120"
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def wheels_and_constraints(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("docs-wheels")
    uv = _uv()
    for argv in (
        [uv, "build", "--all-packages", "--wheel", "--quiet", "--out-dir", str(folder / "wheels")],
        # uv.lock's versions of everything else (ours are not in it: --no-emit-workspace)
        [
            *(uv, "export", "--frozen", "--all-packages", "--all-groups", "--all-extras"),
            *("--no-emit-workspace", "--no-hashes", "--no-header", "--no-annotate"),
            *("--format", "requirements-txt", "--output-file", str(folder / "constraints.txt")),
        ],
    ):
        proc = subprocess.run(
            argv,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            env=_clean_env(),
            stdin=subprocess.DEVNULL,
        )
        assert proc.returncode == 0, proc.stderr
    return folder / "wheels", folder / "constraints.txt"


PIP_SHIM = """#!/bin/sh
# The docs test's `pip`: uv's pip into this environment; our distributions from this
# checkout's wheels, everything else at uv.lock's versions.
if [ "$1" != install ]; then echo "docs test: only 'pip install' is supported" >&2; exit 2; fi
shift
exec {uv} pip install --quiet --python {python} \\
    --find-links {wheels} --constraint {constraints} "$@"
"""


@pytest.fixture(scope="session")
def page_environments(
    tmp_path_factory: pytest.TempPathFactory, wheels_and_constraints: tuple[Path, Path]
) -> dict[str, Path]:
    """page -> the bin folder of a fresh environment where the page's install lines ran."""
    made: dict[tuple[tuple[str, ...], ...], Path] = {}
    wheels, constraints = wheels_and_constraints
    uv = _uv()

    class Environments(dict[str, Path]):
        def __missing__(self, page: str) -> Path:
            installs = tuple(c for b in INSTALLS if b.page == page for c in _commands(b.code))
            # The same commands (shell comments aside) make the same environment.
            key = tuple(tuple(shlex.split(c, comments=True)) for c in installs)
            if key not in made:
                venv = tmp_path_factory.mktemp("docs-env") / "venv"
                subprocess.run(
                    [uv, "venv", "--quiet", "--python", sys.executable, str(venv)],
                    check=True,
                    timeout=120,
                    env=_clean_env(),
                    stdin=subprocess.DEVNULL,
                )
                pip = venv / "bin" / "pip"
                pip.write_text(
                    PIP_SHIM.format(
                        uv=uv,
                        python=venv / "bin" / "python",
                        wheels=wheels,
                        constraints=constraints,
                    ),
                    encoding="utf-8",
                )
                pip.chmod(0o755)
                folder = tmp_path_factory.mktemp("docs-install")
                for command in installs:
                    proc = _bash(command, folder, venv / "bin", timeout=600)
                    assert proc.returncode == 0, (
                        f"{page}: $ {command}\n{proc.stdout}\n{proc.stderr}"
                    )
                made[key] = venv / "bin"
            self[page] = made[key]
            return made[key]

    return Environments()


def _share_bytecode_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "_share_bytecode", ROOT / "scripts" / "_share_bytecode.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def shared_bytecode(
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[Path], AbstractContextManager[None]]:
    """``with shared_bytecode(bin_dir):`` around an example run in a page's environment.

    The pages' environments are hard links to the same files in uv's cache, and Python
    compiled the modules every page imports (the MCP SDK, pydantic, Prism's own) again
    in each: before a page's first example, the bytecode other pages' examples compiled
    for those very files is linked in (scripts/_share_bytecode.py: only the same file
    gets it, and Python checks it against the source as always); after each example,
    what it compiled is kept for the next pages.
    """
    share = _share_bytecode_module()
    store = tmp_path_factory.mktemp("docs-bytecode")
    linked: set[Path] = set()

    @contextmanager
    def around(bin_dir: Path) -> Iterator[None]:
        sites = sorted((bin_dir.parent / "lib").glob("python*/site-packages"))
        if bin_dir not in linked:
            linked.add(bin_dir)
            share.link_from(store, sites)
        try:
            yield
        finally:
            share.keep_in(store, sites)

    return around


def _bash(
    command: str, folder: Path, bin_dir: Path, *, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")])
    return subprocess.run(
        ["bash", "-c", f"set -o pipefail\n{command}"],
        cwd=folder,
        env=_clean_env(PATH=path, VIRTUAL_ENV=str(bin_dir.parent)),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def _free_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


def _on_free_port(code: str) -> tuple[str, str]:
    port = _free_port()
    return code.replace(DOCS_PORT, port), port


@pytest.fixture(autouse=True, scope="module")
def _the_repository_is_left_alone() -> Iterator[None]:
    def status() -> str:
        return subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout

    before = status()
    yield
    assert status() == before, "a docs example changed the repository"


@pytest.mark.slow
@pytest.mark.parametrize("page", sorted({b.page for b in INSTALLS}))
def test_install_lines_run(page: str, page_environments: dict[str, Path]) -> None:
    """Every page's `$ pip install ...` lines install (also on pages with nothing else to run)."""
    python = page_environments[page] / "python"
    proc = subprocess.run(
        [str(python), "-c", "import prism, sys; print(list(prism.__path__))"],
        capture_output=True, text=True, timeout=60, check=False, env=_clean_env(),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert str(ROOT) not in proc.stdout  # the wheels were installed, not this checkout


@pytest.mark.slow
@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=[b.where for b in PYTHON_BLOCKS])
def test_python_example_runs(
    block: Block,
    page_environments: dict[str, Path],
    shared_bytecode: Callable[[Path], AbstractContextManager[None]],
    tmp_path: Path,
) -> None:
    python = page_environments[block.page] / "python"
    code, _ = _on_free_port(block.code)
    with shared_bytecode(python.parent):
        proc = subprocess.run(
            [str(python), "-c", code],
            cwd=tmp_path,
            env=_clean_env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    assert proc.returncode == 0, f"{block.where} failed:\n{proc.stdout}\n{proc.stderr}"


CLI_DOC = ROOT / "docs" / "cli.md"


def _cli_example(language: str) -> str:
    blocks = [b for b in PAGES["docs/cli.md"][0] if b.language == language and b.skip is None]
    assert len(blocks) == 1, f"docs/cli.md should hold exactly one {language} example"
    return blocks[0].code


def _run_prism(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "prism.cli", *args],
        cwd=folder,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )


@attrs.frozen
class CliRun:
    """What ``prism run session.json --json`` did in a folder holding docs/cli.md's files."""

    report: dict[str, Any]
    notes: str  # notes.md afterwards
    ledger: bool  # whether it wrote prism-ledger.jsonl


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CliRun]:
    """docs/cli.md's prism.toml and session.json and a notes.md, replayed by ``prism run``."""
    folder = tmp_path_factory.mktemp("cli-doc")
    (folder / "prism.toml").write_text(_cli_example("toml"), encoding="utf-8")
    (folder / "session.json").write_text(_cli_example("json"), encoding="utf-8")
    (folder / "notes.md").write_text("todo\n", encoding="utf-8")
    proc = _run_prism(folder, "run", "session.json", "--json")
    assert proc.returncode == 0, proc.stderr
    run = CliRun(
        json.loads(proc.stdout),
        (folder / "notes.md").read_text(encoding="utf-8"),
        (folder / "prism-ledger.jsonl").is_file(),
    )
    return folder, run


@pytest.fixture(scope="module")
def cli_folder(cli_run: tuple[Path, CliRun]) -> Path:
    """docs/cli.md's prism.toml and session.json, a notes.md, and a ledger (a run, a demo)."""
    folder, _ = cli_run
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


def _wait_for_port(port: str, server: subprocess.Popen[bytes]) -> None:
    async def wait() -> None:
        with trio.fail_after(60):
            while True:
                if server.poll() is not None:
                    raise AssertionError(f"the example's server exited ({server.returncode})")
                try:
                    stream = await trio.open_tcp_stream("127.0.0.1", int(port))
                except OSError:
                    await trio.sleep(0.05)  # polling a port that is not open yet
                else:
                    await stream.aclose()
                    return

    trio.run(wait)


@pytest.mark.slow
@pytest.mark.parametrize("block", CONSOLE_BLOCKS, ids=[b.where for b in CONSOLE_BLOCKS])
def test_console_example_runs(
    block: Block,
    page_environments: dict[str, Path],
    shared_bytecode: Callable[[Path], AbstractContextManager[None]],
    cli_folder: Path,
    tmp_path: Path,
) -> None:
    """Each command runs; it exits 0, or prints every output line the block shows for it."""
    code, port = _on_free_port(block.code)
    steps = _steps(code)
    for tool in OPTIONAL_TOOLS:
        if any(f"| {tool} " in command for command, _ in steps) and shutil.which(tool) is None:
            pytest.skip(f"{block.where} pipes into {tool}, which is not installed here")
    bin_dir = page_environments[block.page]
    with shared_bytecode(bin_dir):
        _run_console_block(block, bin_dir, port, steps, cli_folder, tmp_path)


def _run_console_block(
    block: Block,
    bin_dir: Path,
    port: str,
    steps: list[tuple[str, list[str]]],
    cli_folder: Path,
    tmp_path: Path,
) -> None:
    folder = tmp_path / "work"
    shutil.copytree(cli_folder, folder)
    server = None
    if block.server:
        path = os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")])
        server = subprocess.Popen(
            ["bash", "-c", f"exec {block.server.replace(DOCS_PORT, port)}"],
            cwd=folder,
            env=_clean_env(PATH=path),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        _wait_for_port(port, server)
    try:
        for command, shown in steps:
            proc = _bash(command, folder, bin_dir)
            said = " ".join(f"{proc.stdout}\n{proc.stderr}".split())
            context = f"{block.where}: $ {command}\n{proc.stdout}\n{proc.stderr}"
            if shown:
                missing = [line for line in shown if line not in said]
                assert missing == [], f"{context}\nnot printed: {missing}"
            else:
                assert proc.returncode == 0, f"{context}\nexit code {proc.returncode}"
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)


def test_cli_doc_prism_toml_example_is_valid(tmp_path: Path) -> None:
    config = parse_config(tomllib.loads(_cli_example("toml")), base_dir=str(tmp_path))
    assert [s.server_id for s in config.mcp_servers] == ["docs"]
    assert config.permissions.deny == ("tool:mcp:docs:delete_*:execute",)


def test_cli_doc_session_example_is_valid() -> None:
    session = parse_session(json.loads(_cli_example("json")))
    assert session.call_count == 3


@pytest.mark.slow
def test_cli_doc_example_runs_end_to_end_with_prism_run(cli_run: tuple[Path, CliRun]) -> None:
    # The run the console examples' folder starts from (one `prism run` for both).
    _, run = cli_run
    assert [c["status"] for c in run.report["calls"]] == ["ok", "ok", "ok"]
    assert run.report["final"] == "Noted."
    assert run.ledger
    assert "ledger" in run.notes


LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", sorted(PAGES))
def test_relative_links_in_the_docs_resolve(page: str) -> None:
    path = ROOT / page
    text = path.read_text(encoding="utf-8")
    broken = [
        target
        for target in LINK.findall(text)
        if not target.startswith(("http://", "https://", "mailto:"))
        and not (path.parent / target).exists()
    ]
    assert broken == [], f"{page} links to missing files: {broken}"


ISSUE_WORDS = re.compile(r"\b(issue|goal)\s+#?\d+\b", re.IGNORECASE)


@pytest.mark.parametrize("page", sorted(PAGES))
def test_the_docs_speak_to_users_not_to_our_tracker(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    found = [m.group(0) for m in ISSUE_WORDS.finditer(text)]
    assert found == [], f"{page} names our issues or goals: {found}"
