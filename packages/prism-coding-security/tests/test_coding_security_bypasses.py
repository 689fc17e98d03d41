"""Where Prism's model of a grammar disagreed with the program: each bypass, run for real.

Every command goes through the documented secure setup
(``open_secure_coding_tools([root], sandbox="none", approve=None)``) and really
runs when the policy lets it: stand-in programs (``sudo``, ``evil``) on the
shell tool's ``PATH`` leave a marker, ``touch`` leaves one outside the root,
and a secret lives outside the root and in the environment. Nothing may run,
nothing may be written or read outside the root.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest
import trio

from prism.coding.security import (
    BubblewrapSandbox,
    CommandRules,
    create_coding_approval_policy,
    explain_command,
    open_secure_coding_tools,
)
from prism.core import ExecutionAction, ExecutionDecision, ToolCall, ToolExecutionContext

if TYPE_CHECKING:
    from pathlib import Path

    from prism.core import JsonObject

SECRET = "TOPSECRET-7f3a"


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "project"
    (root / "sub" / "a").mkdir(parents=True)
    (root / "link").symlink_to(root / "sub" / "a")
    (root / "f").write_text("line\nx\n")
    (root / "ls").write_text(f"touch {tmp_path / 'MARK'}\n")  # a file the write tool wrote
    (tmp_path / "secret.txt").write_text(SECRET + "\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("sudo", "evil"):
        stand_in = bin_dir / name
        stand_in.write_text(f"#!/bin/sh\ntouch {tmp_path / 'MARK'}\n")
        stand_in.chmod(0o755)
    return {"root": root, "tmp": tmp_path, "bin": bin_dir, "mark": tmp_path / "MARK"}


async def _run(world: dict[str, Path], command: str) -> str:
    env = {
        "PATH": f"{world['bin']}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(world["tmp"]),
        "SECRET": SECRET,
    }
    async with open_secure_coding_tools(
        [str(world["root"])], sandbox="none", approve=None, shell_options={"env": env}
    ) as secure:
        shell = next(t for t in secure.tools if t.name == "shell")
        args: JsonObject = {"command": command}
        ctx = ToolExecutionContext(call=ToolCall(id="1", name="shell", arguments=args))
        with trio.fail_after(60):
            result = await shell.execute(args, ctx)
    return "".join(getattr(part, "text", "") for part in result.content)


def _clean(world: dict[str, Path], text: str) -> None:
    assert not world["mark"].exists(), text
    assert not (world["tmp"] / "out").exists(), text
    assert SECRET not in text


BYPASSES = [
    # here-documents whose delimiter is quoted: bash ends them at the line EOF
    'cat <<"E"OF\nEOF\ntouch {mark}\nE"OF"\n',
    "cat <<E\\OF\nEOF\ntouch {mark}\nE\\OF\n",
    "cat <<$'EOF'\nEOF\ntouch {mark}\n$'EOF'\n",
    "cat <<'E'OF\nEOF\ntouch {mark}\n'E'OF\n",
    'cat <<E""OF\nEOF\nsudo id\nE""OF\n',
    'cat <<-"E"OF\n\tEOF\nevil\nE"OF"\n',
    "cat <<EOF\nx\nEOF\ntouch {mark}\n",
    # test -v evaluates an array subscript, through $_ too
    ": 'a[$(touch {mark})]'; test -v 'b[_]'",
    ": 'a[$(touch {mark})]'; [ -v 'b[_]' ]",
    ": 'a[$(touch {mark})]'; test -v b[_]",
    ": 'a[$(evil)]'; test ! -v 'b[_]'",
    "test -v 'a[$(touch {mark})]'",
    ": 'a[$(touch {mark})]'; test -R 'b[_]'",
    # GNU sed ends a label at whitespace
    "sed -n ':a w {out}' f",
    "sed ':a e touch {mark}' f",
    "sed -n ':a\tw {out}' f",
    "sed -n '/x/ba w {out}' f",
    "sed -n 'b a w {out}' f",
    "sed -e ':a' -e 'w {out}' f",
    "sed -n 's/[/]/x/w {out}' f",
    "sed 's/x/y/e' f",
    "sed -n -e 's/x/y\\' -e '/w {out}' f",
    "sed '1e touch {mark}' f",
    # bash takes long options after one dash
    "bash -rcfile ls -i -c ls",
    "bash -init-file ls -i -c true",
    "bash --rcfile ls -ic :",
    "bash -i -rcfile ls -c :",
    "bash -c 'touch {mark}'",
    "sh -c 'evil'",
    # jq comments and spellings of the environment
    "jq -n '$#c\nENV.SECRET'",
    "jq -n '$ #x\n ENV.SECRET'",
    "jq -n 'env #\n.SECRET'",
    "jq -n '\"\\(env.SECRET)\"'",
    "jq -n '$ENV.SECRET'",
    "jq -n '$__loc__ as $x | $ENV | .SECRET'",
    # a cd that may fail leaves the line in either directory: both are checked
    "cd link; cd ../..; cat secret.txt",
    # env -S has its own splitting rules
    "env -S 'sudo id'",
    "env -S'evil'",
]


@pytest.mark.parametrize("template", BYPASSES)
async def test_a_grammar_disagreement_runs_nothing_and_reads_nothing(
    world: dict[str, Path], template: str
) -> None:
    command = template.format(mark=world["mark"], out=world["tmp"] / "out")
    text = await _run(world, command)
    _clean(world, text)
    assert explain_command(command, roots=[str(world["root"])]).outcome != "allow"


@pytest.mark.parametrize(
    "command",
    [
        "cd link/../.. && cat secret.txt",
        "cd link/.. && cat ../secret.txt",
        "cd -L link/../.. && cat secret.txt",
        "cd ./link/../../ && cat secret.txt",
        "(cd link/../.. && cat secret.txt)",
    ],
)
async def test_cd_runs_as_the_policy_resolved_it(world: dict[str, Path], command: str) -> None:
    # allowed: the policy resolves `..` physically and the line runs `cd -P` on that
    text = await _run(world, command)
    _clean(world, text)
    explanation = explain_command(command, roots=[str(world["root"])])
    assert explanation.outcome == "allow"
    assert explanation.execute is not None
    assert "'cd' '-P' '--'" in explanation.execute


async def test_the_logical_cd_bypass_is_real_without_the_policy(world: dict[str, Path]) -> None:
    # the control: bash alone reads the secret (the rebuilt `cd -P` does not)
    command = "cd link/../.. && cat secret.txt"
    process = await trio.run_process(
        ["bash", "-c", command], cwd=world["root"], capture_stdout=True, check=False
    )
    assert SECRET.encode() in process.stdout


def _confined(rules: CommandRules, root: Path, command: str) -> ExecutionDecision:
    policy = create_coding_approval_policy(
        roots=[str(root)], command_rules=rules, sandbox=BubblewrapSandbox([str(root)])
    )
    decision = policy.check(
        ExecutionAction(kind="shell", operation="shell", command=command, paths=(str(root),))
    )
    assert isinstance(decision, ExecutionDecision)
    return decision


@pytest.mark.parametrize(
    "command",
    [
        "c=sudo; $c id",
        "$(echo sudo) id",
        "`echo sudo` id",
        "x='sudo id'; eval \"$x\"",
        "${c:-sudo} id",
        '"$c" id',
        "env $c id",
        "timeout 5 $c id",
        "nice $(echo sudo) id",
        "find . -exec $c id \\;",
        'bash -c "$x"',
        "xargs $c < f",
        'test -v "$x"',
        '[ -v "$x" ]',
        'printf -v "$x" y',
        "test -v 'a[$(sudo id)]'",
        "[ -v 'a[$(sudo id)]' ]",
        "printf -v 'a[$(sudo id)]' y",
        "printf '%n' 'a[$(sudo id)]'",
    ],
)
def test_confined_mode_asks_when_a_computed_word_could_be_denied(root: Path, command: str) -> None:
    decision = _confined(CommandRules(), root, command)
    assert not decision.allowed, decision
    assert decision.details.get("escalation") is True


@pytest.mark.parametrize(
    "command", ["c=commit; git $c -m x", "git $(echo commit) -m x", "git -C . $c -m x"]
)
def test_confined_mode_keeps_a_deny_rule_on_computed_arguments(root: Path, command: str) -> None:
    rules = CommandRules(deny=["git commit *"])
    assert not _confined(rules, root, command).allowed
    # a program no deny rule names, which cannot run another one, still runs confined
    assert _confined(rules, root, "cat $(echo f)").allowed


def test_without_deny_rules_computed_words_run_confined(root: Path) -> None:
    rules = CommandRules(use_default_deny=False)
    assert _confined(rules, root, "c=make; $c test").allowed
