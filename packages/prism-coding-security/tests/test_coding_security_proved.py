"""Run what was proved: a proved line is rebuilt from its judged words, and git is forced safe.

Everything here runs for real: bash, git, and stand-in programs (shell scripts
outside the root) that record the argv they were given or leave a marker.
"""

from __future__ import annotations

import itertools
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


# -- drivers a hostile repository configuration names --------------------------------------

_EVIL = """#!/bin/sh
touch "$MARK"
cat
"""
_DRIVERS = (
    "[diff]\n\texternal = {evil}\n"
    '[diff "x"]\n\ttextconv = {evil}\n\tcommand = {evil}\n'
    '[filter "x"]\n\tclean = {evil}\n\tsmudge = {evil}\n\trequired = true\n'
    '[filter "y"]\n\tprocess = {evil}\n'
)


def _twin(directory: Path, env: Mapping[str, str]) -> None:
    """The same repository each time: a modified file, and files git will hash again."""
    directory.mkdir()
    (directory / "a.txt").write_text("one\n")
    (directory / "b.txt").write_text("bee\n")
    (directory / "c.y").write_text("sea\n")
    (directory / ".gitattributes").write_text("*.txt diff=x filter=x\n*.y filter=y\n")
    subprocess.run(["git", "init", "-q", "-b", "main", str(directory)], check=True, env=env)
    subprocess.run(["git", "-C", str(directory), "add", "."], check=True, env=env)
    subprocess.run(["git", "-C", str(directory), "commit", "-qm", "x"], check=True, env=env)
    (directory / "a.txt").write_text("two\n")


@pytest.fixture(scope="module")
def hostile_twins(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, Path, Path, dict[str, str]]:
    """A clean repository and its twin whose .git/config names a program for every driver."""
    base = tmp_path_factory.mktemp("drivers")
    env = {**_git_env(base), "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z", "MARK": str(base / "MARK")}  # fmt: skip
    clean, hostile = base / "clean", base / "hostile"
    _twin(clean, env)
    _twin(hostile, env)
    evil = base / "evil.sh"
    evil.write_text(_EVIL)
    evil.chmod(0o755)
    with (hostile / ".git" / "config").open("a") as handle:
        handle.write(_DRIVERS.format(evil=evil))
    return clean, hostile, base / "MARK", env


_RESTATS = itertools.count(1_700_000_000)


def _restat(*roots: Path) -> None:
    # a time no index has recorded yet, the same in both: git must read (and filter)
    # the files again to compare them
    when = next(_RESTATS)
    for root in roots:
        for name in ("b.txt", "c.y"):
            os.utime(root / name, (when, when))


@needs_git
@pytest.mark.parametrize(
    "command",
    ["git status --short", "git diff", "git diff HEAD", "git diff --stat", "git log -p -1",
     "git log -1 -S one --oneline", "git show HEAD", "git whatchanged -p -1", "git blame -s a.txt",
     "git blame -s HEAD a.txt", "git ls-files -m", "git reflog -p -1",
     "git diff --no-index a.txt b.txt", "timeout 20 git diff", "git -C . log --stat -p"],
)  # fmt: skip
def test_a_proved_git_command_runs_no_driver_the_repository_names(
    hostile_twins: tuple[Path, Path, Path, dict[str, str]], command: str
) -> None:
    """Every driver .git/config names (diff.external, textconv, a diff command, clean,
    smudge and process filters): the proved text runs none, and prints what git prints
    in the same repository without them (also what the unsandboxed shell runs).
    """
    clean, hostile, mark, env = hostile_twins
    _restat(clean, hostile)
    bash(command, hostile, env)
    assert mark.exists(), "the planted drivers run when the text runs as written"
    mark.unlink()
    explanation = explain_command(command, roots=[str(hostile)], cwd=str(hostile))
    assert explanation.execute is not None, explanation.reason
    _restat(clean, hostile)
    expected = bash(command, clean, env)
    got = bash(explanation.execute, hostile, env)
    assert not mark.exists(), got
    assert (got.returncode, got.stdout) == (expected.returncode, expected.stdout), got.stderr
    # a repository that defines no driver runs the proved text with the same output
    clean_explanation = explain_command(command, roots=[str(clean)], cwd=str(clean))
    assert clean_explanation.execute is not None
    _restat(clean)
    assert bash(clean_explanation.execute, clean, env).stdout == expected.stdout


@needs_git
def test_a_diff_the_driver_flags_cannot_reach_fails_rather_than_run_it(
    hostile_twins: tuple[Path, Path, Path, dict[str, str]],
) -> None:
    # `git status -vv` takes no --no-textconv: the emptied textconv is a command git cannot start
    _, hostile, mark, env = hostile_twins
    explanation = explain_command("git status -vv", roots=[str(hostile)], cwd=str(hostile))
    assert explanation.execute is not None
    bash(explanation.execute, hostile, env)
    assert not mark.exists()


@needs_git
@pytest.mark.parametrize("key", ["include.path", 'includeIf "gitdir:/".path'])
def test_a_repository_config_that_includes_a_file_is_not_proved(tmp_path: Path, key: str) -> None:
    # the line could write the included file (a root file) before git reads it
    root = tmp_path / "project"
    root.mkdir()
    _repository(root, _git_env(tmp_path))
    section, _, name = key.rpartition(".")
    with (root / ".git" / "config").open("a") as handle:
        handle.write(f"[{section}]\n\t{name} = ../notes.txt\n")
    explanation = explain_command("git status", roots=[str(root)], cwd=str(root))
    assert explanation.outcome == "ask"
    assert "includes another file" in explanation.reason
    assert explain_command("ls", roots=[str(root)], cwd=str(root)).outcome == "allow"


@needs_git
def test_git_in_a_submodule_runs_under_no_configuration_of_its_own(tmp_path: Path) -> None:
    """A submodule's repository names its own drivers and fsmonitor: the superproject's
    proved ``git status`` and ``git diff`` never start git in it."""
    env = {**_git_env(tmp_path), "MARK": str(tmp_path / "MARK")}
    root = tmp_path / "project"
    _twin(root, env)
    sub = root / "sub"
    _twin(sub, env)
    subprocess.run(["git", "-C", str(root), "add", "sub"], check=True, env=env,
                   capture_output=True)  # fmt: skip
    subprocess.run(["git", "-C", str(root), "commit", "-qm", "sub"], check=True, env=env)
    evil = tmp_path / "evil.sh"
    evil.write_text(_EVIL)
    evil.chmod(0o755)
    with (sub / ".git" / "config").open("a") as handle:
        handle.write(_DRIVERS.format(evil=evil) + f"[core]\n\tfsmonitor = {evil}\n")
    for command in ("git status --short", "git diff --stat", "git diff"):
        _restat(sub)
        bash(command, root, env)
        assert (tmp_path / "MARK").exists(), command
        (tmp_path / "MARK").unlink()
        explanation = explain_command(command, roots=[str(root)], cwd=str(root))
        assert explanation.execute is not None, explanation.reason
        _restat(sub)
        result = bash(explanation.execute, root, env)
        assert result.returncode == 0, result
        assert not (tmp_path / "MARK").exists(), (command, result)
    for command in ("git status --ignore-submodules=none", "git diff --submodule=diff"):
        assert explain_command(command, roots=[str(root)], cwd=str(root)).outcome == "ask"


@needs_git
def test_drivers_are_found_from_a_linked_worktree_and_listed_again_after_a_change(
    tmp_path: Path,
) -> None:
    """A linked worktree (a ``.git`` file, a common directory) reads the main config;
    a driver added later is seen by the next check, and a config git cannot read asks."""
    env = _git_env(tmp_path)
    root = tmp_path / "project"
    root.mkdir()
    _repository(root, env)
    subprocess.run(["git", "-C", str(root), "worktree", "add", "-q", "wt"], check=True, env=env,
                   capture_output=True)  # fmt: skip
    assert "filter" not in str(
        explain_command("git status", roots=[str(root)], cwd=str(root / "wt")).execute
    )
    with (root / ".git" / "config").open("a") as handle:
        handle.write('[filter "lfsx"]\n\tclean = cat\n')
    execute = explain_command("git status", roots=[str(root)], cwd=str(root / "wt")).execute
    assert "'filter.lfsx.clean' GIT_CONFIG_VALUE_" in str(execute)
    with (root / ".git" / "config").open("a") as handle:
        handle.write("[broken\n")
    explanation = explain_command("git status", roots=[str(root)], cwd=str(root / "wt"))
    assert explanation.outcome == "ask"
    assert "could not list the repository's configuration" in explanation.reason


@pytest.mark.parametrize(
    "command",
    ["git diff --textconv", "git log -p --textc", "git grep --textconv x", "git log --ext-diff -p"],
)
def test_asking_git_for_its_drivers_is_not_proved(root: Path, command: str) -> None:
    assert explain_command(command, roots=[str(root)]).outcome == "ask"


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
        probe = explanation.execute.replace(
            "'git' 'status' '--ignore-submodules=dirty'", f"'git' 'config' '--get' '{key}'"
        )
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


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")
def test_a_proved_jq_runs_with_no_home_definitions(root: Path) -> None:
    """jq loads $HOME/.jq into every program: with HOME in the root and a planted
    definition of length, the proved line ran that definition (printing the
    environment's secret); the rebuilt line runs jq with a HOME holding none."""
    (root / ".jq").write_text("def length: $ENV.F1SECRET;\n")
    (root / "a.json").write_text("[1,2]\n")
    explanation = explain_command("jq length a.json", roots=[str(root)])
    assert explanation.outcome == "allow", explanation
    assert explanation.execute is not None
    env = {**os.environ, "HOME": str(root), "F1SECRET": "sk-live-1234"}
    planted = bash("jq length a.json", root, env)
    assert planted.stdout == '"sk-live-1234"\n'  # the attack, as the model wrote it
    ran = bash(explanation.execute, root, env)
    assert ran.stdout == "2\n", ran
    assert explain_command("env -i jq length a.json", roots=[str(root)]).outcome == "ask"


@needs_git
def test_a_configuration_git_parses_long_asks_without_starting_git(tmp_path: Path) -> None:
    """A repository configuration past MAX_CONFIG_BYTES asks, no git started to list
    it (git parses it whole as it starts: the policy would wait on it); the answer for
    each repository is shared by every directory a line names in it."""
    from prism.coding.security import _gitdrivers

    root = tmp_path / "project"
    root.mkdir()
    _repository(root, _git_env(tmp_path))
    for name in ("e1", "e2", "e3"):
        (root / name).mkdir()
    line = "git -C e1 log; git -C e2 log; git -C e3 log"
    assert explain_command(line, roots=[str(root)], cwd=str(root)).outcome == "allow"
    answers = {id(_gitdrivers._cache[str(root / name)][1]) for name in ("e1", "e2", "e3")}
    assert len(answers) == 1  # listed once, by the first directory's git
    keys = _gitdrivers.MAX_CONFIG_BYTES // 16  # (29 bytes a line)
    with (root / ".git" / "config").open("a") as handle:
        handle.write("[x]\n" + "".join(f"\tk{i:07d} = {'v' * 16}\n" for i in range(keys)))
    explanation = explain_command(line, roots=[str(root)], cwd=str(root))
    assert explanation.outcome == "ask"
    assert "bytes (more than 262,144)" in explanation.reason
