"""The differential test against real bash: every argv that really ran was proved.

Every program on the shell tool's ``PATH`` is a stand-in that records the argv
it got and the directory it ran in. Each command (the attack corpus, the
issue's bypasses, the everyday corpus, and hypothesis compositions of quoting,
escapes, here-documents, sed labels, shell options, ``cd`` and redirects) goes
through the policy (proved-safe mode, no approver) and the shell tool, and
really runs when it is allowed: bash is real, so its builtins, its parser, its
redirections and its ``cd`` are real. What the stand-ins recorded must be argvs
the policy proved, run inside the root; a command the policy did not allow
must leave no record at all.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prism.coding.security import create_coding_approval_policy
from prism.coding.security._grammars import PROGRAM_GRAMMARS
from prism.coding.tools import create_shell_tool
from prism.core import (
    ExecutionAction,
    ExecutionDecision,
    ExecutionPolicy,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
)

if TYPE_CHECKING:
    from prism.core import JsonObject

_HERE = Path(__file__).resolve().parent
BASH = shutil.which("bash") or "/bin/bash"

# records the directory it ran in, then its argv, NUL-separated, one file per run
_RECORDER = """#!/bin/sh
printf '%s\\0' "$(pwd -P)" "${0##*/}" "$@" > "$ARGV_LOG/run.$$"
"""

_EXTRA = (
    "find", "git", "sed", "awk", "jq", "bash", "sh", "dash", "touch", "sudo", "su", "rm",
    "python3", "perl", "make", "curl", "wget", "nc", "tee", "cp", "mv", "chmod", "id",
    "xargs", "env", "timeout", "nice", "nohup", "stdbuf", "setsid", "ionice", "flock",
    "script", "watch", "dd", "ln", "mkdir", "install", "vim", "less", "ssh", "docker",
)  # fmt: skip


def _load_attack_corpus() -> dict[str, tuple[str, ...]]:
    spec = importlib.util.spec_from_file_location(
        "attack_corpus", _HERE / "test_coding_security_attack_corpus.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    corpus: dict[str, tuple[str, ...]] = module.PLAIN_POLICY_CORPUS
    return corpus


@attrs.frozen
class World:
    root: Path
    outside: Path
    bin: Path
    log: Path
    policy: ExecutionPolicy
    shell: ToolDefinition


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    base = tmp_path_factory.mktemp("differential")
    root = base / "project"
    (root / "sub" / "a").mkdir(parents=True)
    (root / "d i r").mkdir()
    (root / "link").symlink_to(root / "sub" / "a")
    for name, text in {"f": "x\n", "a.txt": "1\n", "b.txt": "2\n", "notes.txt": "n\n",
                       "sub/g": "y\n", "d i r/h": "z\n", "-n": "o\n"}.items():  # fmt: skip
        (root / name).write_text(text)
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOPSECRET\n")
    bin_dir = base / "bin"
    bin_dir.mkdir()
    for name in {*PROGRAM_GRAMMARS, *_EXTRA}:
        path = bin_dir / name
        path.write_text(_RECORDER)
        path.chmod(0o755)
    log = base / "log"
    log.mkdir()
    env = {"PATH": str(bin_dir), "ARGV_LOG": str(log), "HOME": str(base)}
    policy = create_coding_approval_policy(roots=[str(root)])
    shell = create_shell_tool(
        str(root), execution_policy=policy, env=env, shell_path=BASH, timeout_s=20
    )
    return World(root=root, outside=outside, bin=bin_dir, log=log, policy=policy, shell=shell)


def _recorded(log: Path) -> list[tuple[str, tuple[str, ...]]]:
    runs = []
    for entry in log.iterdir():
        fields = entry.read_bytes().split(b"\0")[:-1]
        entry.unlink()
        runs.append((fields[0].decode(), tuple(f.decode() for f in fields[1:])))
    return runs


def check(world: World, command: str) -> bool:
    """Run ``command`` through the policy and the shell tool; True when it was allowed."""
    decision = world.policy.check(
        ExecutionAction(kind="shell", operation="shell", command=command,
                        paths=(str(world.root),), metadata={"env_path": str(world.bin)})
    )  # fmt: skip
    assert isinstance(decision, ExecutionDecision)
    args: JsonObject = {"command": command}
    ctx = ToolExecutionContext(call=ToolCall(id="d", name="shell", arguments=args))

    async def run() -> None:
        with trio.fail_after(30):
            await world.shell.execute(args, ctx)

    trio.run(run)
    runs = _recorded(world.log)
    if not decision.allowed:
        assert runs == [], f"{command!r} was not allowed, yet {runs} ran"
        return False
    argvs = decision.details["argvs"]
    assert isinstance(argvs, list)
    proved = {tuple(a) for a in argvs}
    for cwd, argv in runs:
        assert argv in proved, f"{command!r}: {argv} ran; proved: {sorted(proved)}"
        real = os.path.realpath(cwd)
        assert real == str(world.root) or real.startswith(f"{world.root}/"), (command, cwd)
    return True


ISSUE_BYPASSES = (
    'cat <<"E"OF\nEOF\ntouch MARK\nE"OF"\n',
    "cat <<E\\OF\nEOF\nsudo id\nE\\OF\n",
    "cat <<$'EOF'\nEOF\ntouch MARK\n$'EOF'\n",
    ": 'a[$(touch MARK)]'; test -v 'b[_]'",
    "sed -n ':a w ../outside/out' f",
    "sed ':a e touch MARK' f",
    "bash -rcfile f -i -c ls",
    "cd link/../.. && cat ../outside/secret.txt",
    "jq -n '$#c\nENV.SECRET'",
    "c=sudo; $c id",
    "$(echo sudo) id",
    "x='sudo id'; eval \"$x\"",
    "c=commit; git $c -m x",
)


def test_the_issues_bypasses_run_nothing_unproved(world: World) -> None:
    for command in ISSUE_BYPASSES:
        check(world, command)


def test_the_attack_corpus_runs_nothing_unproved(world: World) -> None:
    corpus = _load_attack_corpus()
    outside = str(world.outside / "out")
    commands = [c.replace("@OUT@", outside) for entries in corpus.values() for c in entries]
    # every seventh (bounded time): the few this tree allows (its links stay inside the
    # root) run through the executor, and only what was proved runs
    allowed = [c for c in commands[::7] if check(world, c)]
    assert len(allowed) < len(commands[::7]) // 10


EVERYDAY = (
    "ls -la | grep f",
    "cat f a.txt | sort | uniq -c",
    "cd sub && ls && cat g",
    "(cd sub/a && pwd) && ls",
    "cat 'd i r/h' \"d i r\"/h d\\ i\\ r/h",
    "grep -n x *.txt",
    "cat -- -n",
    "ls {a,b}.txt",
    "git status --short; git log --oneline -3",
    "find . -name '*.txt' -type f",
    "sed -n '1,2p' f",
    "awk '{print $1}' notes.txt",
    "jq '.x' f",
    "head -n 1 f 2>/dev/null || echo missing",
    "test -f f && cat f",
    "{ ls; cat f; } > /dev/null 2>&1",
    "ls nosuch 2>&1 | head -5",
    "cat < f",
    "LANG=C sort notes.txt",
    "cd link/.. && ls",
)


def test_everyday_commands_run_exactly_what_was_proved(world: World) -> None:
    allowed = [command for command in EVERYDAY if check(world, command)]
    assert allowed == list(EVERYDAY)


_PARTS = st.sampled_from(
    [
        "ls", "cat f", "cat 'a.txt'", 'cat "b.txt"', "cat d\\ i\\ r/h", "grep -e x f",
        "ls *.txt", "ls {a,b}.txt", "cat -- -n", "sed -n 1p f", "sed -n ':a;p' f",
        "sed ':a w ../outside/w' f", "sed -n 'ba w ../outside/w' f", "jq . f", "jq -n '$#c\nENV'",
        "awk 'NR==1' f", "test -f f", "test -v 'b[_]'", ": 'a[$(touch M)]'", "[ -d sub ]",
        "cd sub", "cd link/../..", "cd ..", "cd 'd i r'", "pwd", "echo 'x y'", "echo $HOME",
        "printf '%s\\n' a", "bash -rcfile f -c ls", "bash -c 'ls'", "sh -c ls",
        "cat <<'E'OF\nEOF\nls\nE'OF'", "cat <<EOF\nx\nEOF", "cat <<< 'x y'",
        "env -S 'ls -l'", "git status", "git -C sub log", "find . -name f",
        "ls > /dev/null", "ls 2>&1", "cat < f", "cat < ../outside/secret.txt",
        "LANG=C ls", "X=1 ls", "ls `pwd`", "c=ls; $c", "nice ls", "timeout 5 cat f",
        "cat ../outside/secret.txt", "touch new", "ls >&2",
    ]
)  # fmt: skip
_JOINS = st.sampled_from([" ; ", " && ", " || ", " | ", "\n", " |& "])


@st.composite
def _lines(draw: st.DrawFn) -> str:
    parts = draw(st.lists(_PARTS, min_size=1, max_size=4))
    line = parts[0]
    for part in parts[1:]:
        wrap = draw(st.sampled_from(["", "()", "{}"]))
        if wrap == "()":
            part = f"( {part} )"
        elif wrap == "{}":
            part = f"{{ {part}; }}"
        line += draw(_JOINS) + part
    return line


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(line=_lines())
def test_compositions_run_only_what_was_proved(world: World, line: str) -> None:
    check(world, line)
