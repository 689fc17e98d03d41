"""Everyday read-only commands a coding agent runs in its repository: allowed unasked.

A policy that denies everything is safe and useless. Each everyday entry
below only reads inside the root (a small real git repository); the default
policy must allow every one without asking, and so must read-only mode. A
shell write inside the root (``echo x > out.txt``) is not a read: it asks
(the write and edit tools write files unasked), and runs unasked only in
confined mode, inside a sandbox.

The pure reads are also run for real in a fresh copy of the repository, to
show that they are what they claim: nothing in the tree changes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import partial
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from prism.coding.security import BubblewrapSandbox, create_coding_approval_policy
from prism.coding.tools import (
    LocalShellOperations,
    OutputSink,
    ShellExit,
    ShellSpawnRequest,
    create_shell_tool,
    default_shell_path,
)
from prism.core import (
    ExecutionAction,
    ExecutionDecision,
    ExecutionPolicy,
    JsonObject,
    ToolCall,
    ToolExecutionContext,
)

# Only reads inside the root: allowed by the default policy and in read-only mode.
PURE_READS: tuple[str, ...] = (
    "ls",
    "ls -la",
    "ls -l src",
    "ls -1 tests",
    "ls -R src",
    "cat README.md",
    "cat -n src/app.py",
    "head README.md",
    "head -n 5 src/app.py",
    "head -c 100 README.md",
    "tail -n 3 src/app.py",
    "tail -n +2 README.md",
    "wc -l src/app.py",
    "wc -c README.md src/app.py",
    "wc -l src/*.py",
    "grep -n def src/app.py",
    "grep -rn TODO src",
    "grep -c import src/app.py",
    "grep -rl def src tests",
    "grep -E '^def ' src/app.py",
    "grep -v '^#' src/app.py",
    "grep -A2 -B1 def src/app.py",
    "grep -rn --include='*.py' greet .",
    "egrep 'def|class' src/app.py",
    "fgrep TODO src/app.py",
    "rg TODO",
    "rg -n def src",
    "rg --files",
    "rg -t py greet",
    "find . -name '*.py'",
    "find src -type f",
    "find . -maxdepth 1 -type d",
    "find . -newer README.md -type f",
    "find . -size -10k -name '*.md'",
    "find . -path ./.git -prune -o -type f -print",
    "find . -name '*.py' -print0",
    "find src -ls",
    "find . -type f -printf '%p %s\\n'",
    "git status",
    "git status --short",
    "git diff",
    "git diff --stat",
    "git diff HEAD",
    "git diff --name-only HEAD",
    "git log --oneline",
    "git log -n 3 --stat",
    "git log -p -1 -- src/app.py",
    "git show HEAD",
    "git show --stat HEAD",
    "git show HEAD:README.md",
    "git branch",
    "git branch --list",
    "git rev-parse HEAD",
    "git rev-parse --show-toplevel",
    "git ls-files",
    "git blame src/app.py",
    "git describe --always",
    "git shortlog -sn HEAD",
    "git tag",
    "git tag -l",
    "git remote -v",
    "git grep greet",
    "git grep -n def -- '*.py'",
    "git stash list",
    "git config --local --get core.bare",
    "git config --local --list",
    "echo hello",
    "printf '%s\\n' a b",
    "pwd",
    "stat README.md",
    "stat -c %s README.md",
    "file src/app.py",
    "du -sh src",
    "du -a src",
    "df -h .",
    "diff src/app.py tests/test_app.py",
    "diff -u a.txt b.txt",
    "cmp README.md README.md",
    "sort README.md",
    "sort -u notes.txt",
    "sort -t: -k2 notes.txt",
    "uniq notes.txt",
    "uniq -c notes.txt",
    "cut -d: -f1 notes.txt",
    "nl src/app.py",
    "od -c README.md",
    "xxd src/app.py",
    "md5sum README.md",
    "sha256sum src/app.py",
    "basename src/app.py",
    "dirname src/app.py",
    "realpath src/app.py",
    "readlink -f src/app.py",
    "true",
    "false",
    "test -f README.md",
    "[ -d src ]",
    "which git",
    "command -v python3",
    "type ls",
    "date",
    "date -u +%F",
    "uname -a",
    "whoami",
    "id",
    "hostname",
    "nproc",
    "tree",
    "tree -L 2 src",
    "column -t notes.txt",
    "comm -12 a.txt b.txt",
    "join a.txt b.txt",
    "paste a.txt b.txt",
    "fold -w 20 README.md",
    "rev README.md",
    "tac README.md",
    "seq 1 5",
    "sleep 0",
    "jq . data.json",
    "jq -r .name data.json",
    "sed -n '1,20p' src/app.py",
    "sed 's/a/b/g' README.md",
    "awk '{print $1}' notes.txt",
    "awk -F: '{print $2}' notes.txt",
    "cd src && ls",
    "grep -rn TODO src | head -20",
    "git log --oneline | wc -l",
    "cat notes.txt | sort | uniq -c | sort -rn | head",
    "cat README.md | tr a-z A-Z",
    "cat src/app.py | grep def",
    "ls -la | grep app",
    "od -c README.md | head",
    "ls src && cat README.md",
    "test -f setup.py || echo missing",
    "git status; git log --oneline -3",
    "ls nosuch 2>/dev/null",
    "grep -rn TODO src 2>&1",
    "git diff > /dev/null",
    "git log --oneline 2>&1 | head -5",
    "gcc --version",
    "make --version",
    "git --version",
    "git log -1",
    "git log -4 --stat",
    "git log -5",
    "git log --oneline -5",
    "git log -7 --format=%s",
    "git log -9 --oneline",
    "git log -10 --oneline",
    "git log --format='%an %s' -5",
    "git log --oneline --graph --all",
    "grep -rn 'def ' --include='*.py' .",
    "find . -name '*.py' -not -path './.git/*'",
    "head -20 src/app.py",
    "ls -lah",
    "git diff --cached",
    "du -sh * | sort -h",
    "awk 'NR==5' src/app.py",
    "sed -n '5,10p' src/app.py",
    "find . -type f | wc -l",
    "git status --porcelain",
    "jq '.name' data.json",
    "git log --stat -3",
    "git diff --name-status HEAD",
    "git rev-parse --abbrev-ref HEAD",
    "git log -1 --format=%H",
    "git ls-files | grep py",
    "git show --name-only HEAD",
    "git grep -n greet -- src",
    "head -n 3 src/app.py tests/test_app.py",
    "md5sum src/*.py",
    "realpath .",
    "pwd -P",
    "which python3 git",
    "type -a ls",
    "uname -sr",
    "date +%s",
    "id -u",
    "seq 3 | paste -sd+",
    "comm -23 a.txt b.txt",
    "grep -v '^$' README.md",
    "ls -t | head -5",
    "git shortlog -sne HEAD",
    "git blame -L 1,5 src/app.py",
    "head -5 README.md",
    "tail -5 README.md",
    "grep -C 3 def src/app.py",
    "git diff -U0",
    "git log -S greet --oneline",
    "rg -l greet",
    "rg --files -g '*.py'",
    "find . -mtime -1 -type f",
    "uniq -d notes.txt",
    "jq -c . data.json",
    "git status -sb",
    "git log --date=short --format='%ad %s'",
)

# A write inside the root by redirect: the brief says allowed unasked when not read-only.
WRITES_INSIDE: tuple[str, ...] = ("echo x > out.txt", "printf 'x\\n' > out.txt")

APP = '''"""A tiny app."""

import inspect
import os


def greet(name):
    # TODO: localise
    return "hello " + name


class App:
    pass
'''


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _git_env() -> dict[str, str]:
    return {
        **os.environ,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }


def _make_repository(root: Path) -> Path:
    root.mkdir()
    _write(root / "README.md", "# Demo\n\nA demo repository for the agent.\n")
    _write(root / "src" / "app.py", APP)
    _write(root / "src" / "util.py", "def add(a, b):\n    return a + b\n")
    _write(
        root / "tests" / "test_app.py",
        "from app import greet\n\n\ndef test_greet():\n    assert greet('x') == 'hello x'\n",
    )
    _write(root / "notes.txt", "b:2\na:1\nb:2\nc:3\n")
    _write(root / "a.txt", "1 apple\n2 pear\n")
    _write(root / "b.txt", "1 apple\n3 plum\n")
    _write(root / "data.json", '{"name": "demo", "version": 1}\n')
    env = _git_env()
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=env)
    subprocess.run(["git", "-C", str(root), "add", "."], check=True, env=env)
    subprocess.run(["git", "-C", str(root), "commit", "-q", "-m", "initial"], check=True, env=env)
    subprocess.run(["git", "-C", str(root), "tag", "v0.1"], check=True, env=env)
    return root


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Only policy checks use it (nothing runs), so one per module is enough.
    return _make_repository(tmp_path_factory.mktemp("usability") / "project")


def _decide(policy: ExecutionPolicy, cwd: Path, command: str) -> ExecutionDecision:
    decision = policy.check(
        ExecutionAction(kind="shell", operation="shell", command=command, paths=(str(cwd),))
    )
    # outside an event loop every line is judged at once, long and costly ones too
    assert isinstance(decision, ExecutionDecision), "approve=None answers synchronously"
    return decision


def _allowed_rate(policy: ExecutionPolicy, cwd: Path, commands: tuple[str, ...]) -> list[str]:
    return [c for c in commands if not _decide(policy, cwd, c).allowed]


def test_corpus_is_large_and_without_duplicates() -> None:
    everyday = PURE_READS + WRITES_INSIDE
    assert len(PURE_READS) >= 90
    assert len(set(everyday)) == len(everyday)


@pytest.mark.parametrize("command", PURE_READS)
def test_everyday_command_is_allowed_unasked(repository: Path, command: str) -> None:
    policy = create_coding_approval_policy(roots=[str(repository)])
    decision = _decide(policy, repository, command)
    assert decision.allowed, f"needs approval: {command!r} ({decision.reason})"


@pytest.mark.parametrize("command", PURE_READS)
def test_pure_read_is_allowed_unasked_in_read_only_mode(repository: Path, command: str) -> None:
    policy = create_coding_approval_policy(roots=[str(repository)], read_only=True)
    decision = _decide(policy, repository, command)
    assert decision.allowed, f"needs approval in read-only mode: {command!r} ({decision.reason})"


@pytest.mark.parametrize("command", WRITES_INSIDE)
def test_shell_write_inside_the_root_asks_unless_confined(repository: Path, command: str) -> None:
    policy = create_coding_approval_policy(roots=[str(repository)])
    decision = _decide(policy, repository, command)
    assert not decision.allowed
    assert decision.details["rule"] == "write"
    confined = create_coding_approval_policy(
        roots=[str(repository)], sandbox=BubblewrapSandbox([str(repository)])
    )
    decision = _decide(confined, repository, command)
    assert decision.allowed, f"needs approval: {command!r} ({decision.reason})"
    assert decision.details["confined"] is True


def test_everyday_commands_allowed_rate_is_all_of_them(repository: Path) -> None:
    everyday = PURE_READS
    policy = create_coding_approval_policy(roots=[str(repository)])
    refused = _allowed_rate(policy, repository, everyday)
    print(f"{len(everyday) - len(refused)} of {len(everyday)} everyday commands allowed")
    assert refused == []


def test_pure_reads_allowed_rate_in_read_only_mode_is_all_of_them(repository: Path) -> None:
    policy = create_coding_approval_policy(roots=[str(repository)], read_only=True)
    refused = _allowed_rate(policy, repository, PURE_READS)
    print(f"{len(PURE_READS) - len(refused)} of {len(PURE_READS)} pure reads allowed (read-only)")
    assert refused == []


@pytest.mark.parametrize(
    "command", ["cat @OUT@/f", "head -n 1 @OUT@/f", "grep x @OUT@/f", "ls @OUT@", "wc -l @OUT@/f"]
)
def test_reads_of_a_readable_path_outside_the_roots_are_allowed(
    tmp_path: Path, command: str
) -> None:
    root = _make_repository(tmp_path / "project")
    outside = tmp_path / "docs"
    _write(outside / "f", "x\n")
    policy = create_coding_approval_policy(roots=[str(root)], readable=[str(outside)])
    decision = _decide(policy, root, command.replace("@OUT@", str(outside)))
    assert decision.allowed, decision.reason


# a line that changes directory makes every later relative word depend on whether the cd
# ran (`cd src && ls ; md5sum src/*.py` rightly asks), so no joined part changes it
_JOINABLE = tuple(c for c in PURE_READS if not c.startswith("cd "))


@settings(deadline=None, max_examples=100)
@given(
    parts=st.lists(st.sampled_from(_JOINABLE), min_size=2, max_size=5),
    joins=st.lists(st.sampled_from([" ; ", " && ", " || ", " | "]), min_size=4, max_size=4),
)
def test_everyday_commands_joined_by_pipes_and_lists_are_allowed(
    repository: Path, parts: list[str], joins: list[str]
) -> None:
    command = parts[0]
    for join, part in zip(joins, parts[1:], strict=False):
        command += join + part
    policy = create_coding_approval_policy(roots=[str(repository)])
    decision = _decide(policy, repository, command)
    assert decision.allowed, f"needs approval: {command!r} ({decision.reason})"


def _snapshot(directory: Path) -> dict[str, tuple[int, int, bytes]]:
    found: dict[str, tuple[int, int, bytes]] = {}
    for dirpath, dirnames, filenames in os.walk(directory):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath, name)
            if path.relative_to(directory).as_posix() in _GIT_BOOKKEEPING:
                continue
            info = path.lstat()
            content = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
            found[str(path.relative_to(directory))] = (info.st_mode, info.st_mtime_ns, content)
    return found


# git refreshes its stat cache in the index while reading; that is not a change of the work.
_GIT_BOOKKEEPING = frozenset({".git", ".git/index"})


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Made once (git init, add, commit and tag: four git processes), copied for each read.
    return _make_repository(tmp_path_factory.mktemp("pristine") / "project")


@pytest.mark.parametrize("command", PURE_READS)
async def test_pure_read_really_changes_nothing(
    pristine: Path, tmp_path: Path, command: str
) -> None:
    root = tmp_path / "project"
    await trio.to_thread.run_sync(partial(shutil.copytree, pristine, root, symlinks=True))
    env = {**_git_env(), "HOME": str(tmp_path), "PAGER": "cat", "GIT_PAGER": "cat"}
    before = await trio.to_thread.run_sync(_snapshot, root)
    await trio.run_process(
        ["bash", "-c", command], cwd=root, env=env, check=False, capture_stdout=True,
        capture_stderr=True, stdin=b"",
    )  # fmt: skip
    assert await trio.to_thread.run_sync(_snapshot, root) == before


class _Capture:
    """The plain shell operations, keeping what ran and what it printed."""

    def __init__(self) -> None:
        self.ops = LocalShellOperations()
        self.ran: list[str] = []
        self.output = bytearray()

    async def run(self, request: ShellSpawnRequest, on_output: OutputSink) -> ShellExit:
        self.ran.append(request.command)

        async def sink(chunk: bytes) -> None:
            self.output += chunk
            await on_output(chunk)

        return await self.ops.run(request, sink)


async def test_everyday_commands_run_rebuilt_with_the_output_bash_gives(tmp_path: Path) -> None:
    # the executor runs each line rebuilt from what the policy proved: its output and
    # exit code are bash's for the line as written (dates excepted: they move)
    root = await trio.to_thread.run_sync(_make_repository, tmp_path / "project")
    env = {**_git_env(), "HOME": str(tmp_path), "PAGER": "cat", "GIT_PAGER": "cat"}
    policy = create_coding_approval_policy(roots=[str(root)])
    capture = _Capture()
    shell = create_shell_tool(str(root), execution_policy=policy, operations=capture, env=env)
    commands = [c for c in PURE_READS if not c.startswith("date")]
    assert len(commands) >= 80
    for command in commands:
        expected = await trio.run_process(
            [default_shell_path(), "-c", command], cwd=root, env=env, check=False,
            capture_stdout=True, stderr=subprocess.STDOUT, stdin=b"",
        )  # fmt: skip
        capture.output.clear()
        args: JsonObject = {"command": command}
        ctx = ToolExecutionContext(call=ToolCall(id="u", name="shell", arguments=args))
        result = await shell.execute(args, ctx)
        assert capture.ran[-1] != command, f"{command!r} ran as written"
        assert capture.ran[-1].startswith(("'", "GIT_CONFIG_COUNT=", "LANG=", "HOME=")), (
            capture.ran[-1]
        )
        assert bytes(capture.output) == expected.stdout, (command, bytes(capture.output))
        assert result.details["exit_code"] == expected.returncode, command
