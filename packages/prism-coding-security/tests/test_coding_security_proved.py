"""Run what was proved: a proved line is rebuilt from its judged words, and git is forced safe.

Everything here runs for real: bash, git, and stand-in programs (shell scripts
outside the root) that record the argv they were given or leave a marker.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import TYPE_CHECKING

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prism.coding.security import (
    BubblewrapSandbox,
    create_coding_approval_policy,
    explain_command,
    open_secure_coding_tools,
)
from prism.coding.security._commands import parse_script
from prism.coding.security._proved import (
    GIT_FORCED_CONFIG,
    ProvedCommand,
    ProvedRedirect,
    emit,
    quote,
)
from prism.core import ExecutionAction, ExecutionDecision, ToolCall, ToolExecutionContext

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from prism.core import JsonObject, ToolDefinition, ToolResult

BASH = shutil.which("bash") or "/bin/bash"
GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="git is not installed")


# -- stand-in programs -------------------------------------------------------------------

_RECORDER = """#!/bin/sh
# records its own argv, NUL-separated, one file per run
printf '%s\\0' "${0##*/}" "$@" > "$ARGV_LOG/run.$$"
"""


def recorders(directory: Path, names: list[str]) -> Path:
    """A directory of stand-ins, one per name, that record their argv in $ARGV_LOG."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = directory / name
        path.write_text(_RECORDER)
        path.chmod(0o755)
    return directory


def recorded(log: Path) -> list[tuple[str, ...]]:
    runs = []
    for entry in sorted(log.iterdir()):
        fields = entry.read_bytes().split(b"\0")[:-1]
        runs.append(tuple(f.decode() for f in fields))
    return runs


def bash(text: str, cwd: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BASH, "-c", text], cwd=cwd, env=dict(env), capture_output=True, text=True,
        timeout=30, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


# -- the canonical form is read back by bash as exactly the proved words --------------------

_WORD = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"),
    max_size=12,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    argvs=st.lists(st.lists(_WORD, max_size=5), min_size=1, max_size=4),
    ops=st.lists(st.sampled_from([";", "&&", "|"]), min_size=3, max_size=3),
)
def test_bash_reads_the_canonical_form_back_as_the_proved_argvs(
    tmp_path: Path, argvs: list[list[str]], ops: list[str]
) -> None:
    bin_dir = recorders(tmp_path / "bin", ["rec"])
    log = tmp_path / f"log{len(list(tmp_path.iterdir()))}"
    log.mkdir()
    commands = [ProvedCommand(argv=("rec", *args)) for args in argvs]
    text = commands[0].text()
    for op, command in zip(ops, commands[1:], strict=False):
        text += f"; {command.text()}" if op == ";" else f" {op} {command.text()}"
    result = bash(text, tmp_path, {"PATH": str(bin_dir), "ARGV_LOG": str(log)})
    assert result.returncode == 0, result.stderr
    assert sorted(recorded(log)) == sorted(c.argv for c in commands)


def test_the_canonical_form_quotes_every_word() -> None:
    assert quote("it's") == "'it'\\''s'"
    command = ProvedCommand(
        argv=("grep", "-e", "$(x)", "*"),
        assignments=(("LANG", "C"),),
        redirects=(ProvedRedirect(op=">", target="/dev/null", fd=2),
                   ProvedRedirect(op=">&", target="1", fd=2, kind="dup"),
                   ProvedRedirect(op="<<<", target="`y`", kind="string")),
    )  # fmt: skip
    assert command.text() == "LANG='C' 'grep' '-e' '$(x)' '*' 2>'/dev/null' 2>&1 <<< '`y`'"


def test_emit_refuses_a_leaf_that_was_not_proved() -> None:
    tree = parse_script("ls | cat").tree
    assert tree is not None
    with pytest.raises(ValueError, match="not proved"):
        emit(tree, [ProvedCommand(argv=("ls",)), None])
    group = parse_script("{ ls; } > /dev/null").tree
    assert group is not None
    with pytest.raises(ValueError, match="not proved"):
        emit(group, [ProvedCommand(argv=("ls",)), None])


@pytest.mark.parametrize(
    ("command", "execute"),
    [
        ("ls -la | grep 'a b'", "'ls' '-la' | 'grep' 'a b'"),
        ("cat f 2>/dev/null; ls", "'cat' 'f' 2>'/dev/null'; 'ls'"),
        ("test -f f || echo missing", "'test' '-f' 'f' || 'echo' 'missing'"),
        ("(cd sub && ls) && pwd", "( 'cd' '-P' '--' './sub' && 'ls' ) && 'pwd'"),
        ("{ ls; cat f; } > /dev/null", "{ 'ls'; 'cat' 'f'; } >'/dev/null'"),
        ("ls >&2 2>&1 |& cat", "'ls' >&2 2>&1 |& 'cat'"),
        ("ls > /dev/null 2>&1 && ! cat f", "'ls' >'/dev/null' 2>&1 && ! 'cat' 'f'"),
        ("LANG=C cat <<< 'x y' f", "LANG='C' 'cat' 'f' <<< 'x y'"),
        ("cat *.txt", "'cat' 'a.txt' 'b.txt'"),
        ("cat {f,a.txt}", "'cat' 'f' 'a.txt'"),
        ("cd sub && cat *", "'cd' '-P' '--' './sub' && 'cat' 'g'"),
        ("ls\ncat f", "'ls'; 'cat' 'f'"),
        ("cat f{,} {a,b}{.txt,}", "'cat' 'f' 'f' 'a.txt' 'a' 'b.txt' 'b'"),
        ("ls f{01..02}", "'ls' 'f01' 'f02'"),
        ("ls >&/dev/null", "'ls' &>'/dev/null'"),
    ],
)
def test_a_proved_line_runs_as_rebuilt_from_its_judged_words(
    root: Path, command: str, execute: str
) -> None:
    for name in ("f", "a.txt", "b.txt"):
        (root / name).write_text("x\n")
    (root / "sub").mkdir()
    (root / "sub" / "g").write_text("y\n")
    explanation = explain_command(command, roots=[str(root)])
    assert explanation.outcome == "allow", explanation
    assert explanation.execute == execute
    policy = create_coding_approval_policy(roots=[str(root)])
    decision = policy.check(
        ExecutionAction(kind="shell", operation="shell", command=command, paths=(str(root),))
    )
    assert isinstance(decision, ExecutionDecision)
    assert decision.allowed
    assert decision.modified == {"command": execute}
    assert decision.details["proved"] is True


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("cat <<EOF\nx\nEOF", "here-document"),
        ("cat <<'EOF'\nx\nEOF", "here-document"),
        ("if true; then ls; fi", "compound command"),
        ("for f in a; do ls; done", "compound command"),
        ("f() { ls; }; f", "function"),
        ("echo $((1+2))", "arithmetic"),
        ("ls; echo `pwd`", "substitution"),
        ("cat <(ls)", "substitution"),
        ("ls &", "background"),
        ("cd sub; cat *", "depends on which directory"),
        ("command cd sub", "cd through a wrapper"),
        ("ls 2>&/dev/null", "not a plain redirection"),
        ("ls <&f", "not a plain redirection"),
        ("cd sub sub", "unusual operand"),
        ("{,}; ls", "expands to no words"),
    ],
)
def test_lines_outside_the_proved_grammar_ask(root: Path, command: str, why: str) -> None:
    (root / "f").write_text("x\n")
    (root / "sub").mkdir()
    (root / "sub" / "g").write_text("y\n")
    explanation = explain_command(command, roots=[str(root)])
    assert explanation.outcome == "ask", explanation
    assert explanation.execute is None
    assert why in " ".join(c.reason for c in explanation.commands), explanation


def test_cd_is_resolved_physically_as_the_policy_resolved_it(root: Path, tmp_path: Path) -> None:
    # bash resolves `..` logically (link/../.. is the root's parent); the policy and
    # the rebuilt `cd -P` physically (link/../.. is the root)
    (root / "sub" / "a").mkdir(parents=True)
    (root / "link").symlink_to(root / "sub" / "a")
    (tmp_path / "secret.txt").write_text("TOPSECRET\n")
    command = "cd link/../.. && cat secret.txt"
    logical = bash(command, root, os.environ)
    assert "TOPSECRET" in logical.stdout  # what the text alone would do
    explanation = explain_command(command, roots=[str(root)])
    assert explanation.execute is not None
    proved = bash(explanation.execute, root, os.environ)
    assert "TOPSECRET" not in proved.stdout + proved.stderr


def test_cd_never_goes_through_cdpath(root: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere" / "sub"
    elsewhere.mkdir(parents=True)
    (elsewhere / "secret.txt").write_text("TOPSECRET\n")
    (root / "sub").mkdir()
    explanation = explain_command("cd sub && ls", roots=[str(root)])
    assert explanation.execute is not None
    env = {**os.environ, "CDPATH": str(tmp_path / "elsewhere")}
    assert "secret.txt" in bash("cd sub && ls", root, env).stdout
    assert "secret.txt" not in bash(explanation.execute, root, env).stdout


# -- git runs with its configuration forced ---------------------------------------------------


def _git_env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "HOME": str(tmp_path),
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }


def _repository(root: Path, env: Mapping[str, str]) -> None:
    (root / "a.txt").write_text("one\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=env)
    subprocess.run(["git", "-C", str(root), "add", "."], check=True, env=env)
    subprocess.run(["git", "-C", str(root), "commit", "-qm", "x"], check=True, env=env)
    (root / "a.txt").write_text("two\n")


async def _shell(tools: Sequence[ToolDefinition], command: str) -> ToolResult:
    shell = next(t for t in tools if t.name == "shell")
    ctx = ToolExecutionContext(call=ToolCall(id="1", name="shell", arguments={"command": command}))
    with trio.fail_after(60):
        return await shell.execute({"command": command}, ctx)


@needs_git
@pytest.mark.parametrize(
    ("config", "command"),
    [
        ('[core]\n\tfsmonitor = "touch {mark}; false"\n', "git status --short"),
        ('[core]\n\tfsmonitor = "touch {mark}; false"\n', "git diff --stat"),
    ],
)
async def test_a_planted_repository_config_runs_nothing_through_a_proved_git_command(
    tmp_path: Path, config: str, command: str
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    env = _git_env(tmp_path)
    _repository(root, env)
    mark = tmp_path / "MARK"
    with (root / ".git" / "config").open("a") as handle:
        handle.write(config.format(mark=mark))
    bash(command, root, env)
    assert mark.exists(), "the planted config runs a program when the text runs as written"
    mark.unlink()
    async with open_secure_coding_tools([str(root)], sandbox="none", approve=None,
                                        shell_options={"env": env}) as secure:  # fmt: skip
        result = await _shell(secure.tools, command)
    assert result.details.get("exit_code") is not None
    assert not mark.exists(), result


_NESTED_BARE = {
    "sub/.git/README": "not a repository\n",
    "sub/HEAD": "ref: refs/heads/main\n",
    "sub/objects/.keep": "",
    "sub/refs/heads/.keep": "",
    "sub/x": "a\n",
    "sub/y": "b\n",
}


@needs_git
async def test_a_nested_bare_repository_behind_an_invalid_git_dir_runs_nothing(
    tmp_path: Path,
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    env = _git_env(tmp_path)
    _repository(root, env)
    mark = tmp_path / "MARK"
    config = f'[diff]\n\texternal = "touch {mark}; true"\n[core]\n\tfsmonitor = "touch {mark}"\n'
    # the write tool no longer writes a HEAD, a config next to it or into a .git (see
    # test_coding_security_git_discovery); the files may still arrive another way (a clone)
    for path, content in {**_NESTED_BARE, "sub/config": config}.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(content)
    async with open_secure_coding_tools([str(root)], sandbox="none", approve=None,
                                        shell_options={"env": env}) as secure:  # fmt: skip
        write = next(t for t in secure.tools if t.name == "write")
        for path in ("sub/HEAD", "sub/.git/README"):
            args: JsonObject = {"path": path, "content": "ref: refs/heads/main\n"}
            ctx = ToolExecutionContext(call=ToolCall(id="w", name="write", arguments=args))
            assert (await write.execute(args, ctx)).is_error
        for command in ("git -C sub diff --no-index x y", "cd sub && git diff --no-index x y",
                        "git -C sub status", "cd sub && git log"):  # fmt: skip
            await _shell(secure.tools, command)
            assert not mark.exists(), command
    bash("git -C sub diff --no-index x y", root, env)
    assert mark.exists(), "git alone uses the nested repository and runs its diff.external"


@needs_git
def test_git_refuses_a_nested_bare_repository_even_where_the_policy_misses_it(
    tmp_path: Path,
) -> None:
    # enforcement does not depend on the prediction: the text proved in a clean tree
    # runs in a tree holding a nested bare repository, and git still does not use it
    root = tmp_path / "project"
    root.mkdir()
    env = _git_env(tmp_path)
    _repository(root, env)
    (root / "sub").mkdir()
    (root / "sub" / "x").write_text("a\n")
    (root / "sub" / "y").write_text("b\n")
    explanation = explain_command("cd sub && git diff --no-index x y", roots=[str(root)])
    assert explanation.execute is not None
    mark = tmp_path / "MARK"
    for path, content in _NESTED_BARE.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(content)
    (root / "sub" / "config").write_text(f'[diff]\n\texternal = "touch {mark}; true"\n')
    assert explain_command("cd sub && git diff --no-index x y", roots=[str(root)]).outcome == "ask"
    result = bash(explanation.execute, root, env)
    assert "-a\n+b" in result.stdout, result
    assert not mark.exists()


@needs_git
def test_the_forced_configuration_outranks_the_repository(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    env = _git_env(tmp_path)
    _repository(root, env)
    with (root / ".git" / "config").open("a") as handle:
        handle.write("[core]\n\tfsmonitor = evil\n\thooksPath = evil\n")
    explanation = explain_command("git status", roots=[str(root)])
    assert explanation.execute is not None
    for key, value in GIT_FORCED_CONFIG:
        probe = explanation.execute.replace("'git' 'status'", f"'git' 'config' '--get' '{key}'")
        result = bash(probe, root, env)
        assert result.stdout.rstrip("\n") == value, (key, result)


# -- the PATH check uses the PATH the command will get -------------------------------------------


async def test_a_program_shadowed_through_the_shell_tools_path_asks(tmp_path: Path) -> None:
    root = tmp_path / "project"
    (root / "bin").mkdir(parents=True)
    (root / "f").write_text("data\n")
    mark = tmp_path / "MARK"
    fake = root / "bin" / "cat"
    fake.write_text(f"#!/bin/sh\ntouch {mark}\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{root / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    async with open_secure_coding_tools([str(root)], sandbox="none", approve=None,
                                        shell_options={"env": env}) as secure:  # fmt: skip
        result = await _shell(secure.tools, "cat f")
    assert result.is_error
    assert "PATH" in str(result.content[0].text)  # type: ignore[union-attr]
    assert not mark.exists()
    policy = create_coding_approval_policy(roots=[str(root)])
    action = ExecutionAction(
        kind="shell",
        operation="shell",
        command="cat f",
        paths=(str(root),),
        metadata={"env_path": "/usr/bin:/bin"},
    )
    assert policy.check(action).allowed  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "command",
    [
        "env -i git status",
        "env -u GIT_CONFIG_COUNT git status",
        "exec -c git log",
        "env - git diff",
    ],
)
def test_git_under_a_wrapper_that_drops_the_environment_asks(root: Path, command: str) -> None:
    # the forced configuration travels in the environment
    explanation = explain_command(command, roots=[str(root)])
    assert explanation.outcome == "ask"
    assert "environment" in explanation.reason


@pytest.mark.parametrize(
    "command", ["nice -n 5 git status", "timeout 5 git log", "command git diff"]
)
def test_git_under_a_wrapper_that_keeps_the_environment_is_proved(root: Path, command: str) -> None:
    explanation = explain_command(command, roots=[str(root)])
    assert explanation.outcome == "allow"
    assert explanation.execute is not None
    assert explanation.execute.startswith("GIT_CONFIG_COUNT=")


def test_an_explanation_carries_what_would_run(root: Path) -> None:
    (root / "f").write_text("x\n")
    proved = explain_command("cat f | wc -l", roots=[str(root)]).to_json()
    assert proved["execute"] == "'cat' 'f' | 'wc' '-l'"
    assert proved["argvs"] == [["cat", "f"], ["wc", "-l"]]
    assert "confined" not in proved
    sandbox = BubblewrapSandbox([str(root)])
    confined = explain_command("make test", roots=[str(root)], sandbox=sandbox)
    assert confined.outcome == "allow"
    assert confined.confined
    assert confined.to_json()["confined"] is True
    assert "execute" not in confined.to_json()
    asked = explain_command("c=sudo; $c id", roots=[str(root)], sandbox=sandbox)
    assert asked.outcome == "ask"
    assert asked.rule == "dynamic-deny"
    plain = explain_command("make test", roots=[str(root)])
    assert plain.outcome == "ask"
    assert not plain.confined
