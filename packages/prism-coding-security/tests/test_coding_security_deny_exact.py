"""Deny rules stay exact in confined mode: a line that can run a program not written in it asks.

Real bubblewrap: each attack line is given to the shell tool of
``open_secure_coding_tools`` (confined mode, no approver) with ``ROOT/bin/sudo``
a stand-in that leaves a marker. The marker must never appear.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from prism.coding.security import (
    BubblewrapSandbox,
    CommandRules,
    SecureCodingTools,
    create_coding_approval_policy,
    open_secure_coding_tools,
)
from prism.coding.security._commands import parse_script
from prism.coding.security._evaluates import evaluates_code
from prism.core import (
    DispatchOptions,
    ExecutionAction,
    ExecutionDecision,
    ToolCall,
    create_tool_registry,
    dispatch_tool_call,
)

if TYPE_CHECKING:
    from pathlib import Path

    from prism.core import ToolResult

_RULES = CommandRules(deny=["sudo *", "git commit *", "touch *"])

# (line, the marker it would leave in the root); bin/sudo writes its argument as a file
_ATTACKS = [
    ("echo ${x:-$(bin/sudo s1)}", "s1"),
    ("echo ${x:-`bin/sudo s1b`}", "s1b"),
    ('echo "${x:-$(bin/sudo s1c)}"', "s1c"),
    ('trap "bin/sudo s2" EXIT', "s2"),
    ("jobs -x bin/sudo s4", "s4"),
    ('mapfile -C "bin/sudo s5" -c 1 <<< x', "s5"),
    (": ${x[$(bin/sudo s7)]}", "s7"),
    ("declare -a 'y=($(bin/sudo s8))'", "s8"),
    ("read 'a[$(bin/sudo s12)]' <<< x", "s12"),
    ('let "a[\\$(touch M14)]=1"', "M14"),
    ("shopt -s expand_aliases; alias ll='bin/sudo s15'\nll", "s15"),
    ("hash -p /usr/bin/touch ls; ls M16", "M16"),
    # the same family: values evaluated as code by arithmetic, prompts, indirection
    ("x='a[$(bin/sudo s20)]'; echo $((x))", "s20"),
    ("x='a[$(bin/sudo s21)]'; (( x ))", "s21"),
    ("x='$(bin/sudo s22)'; echo ${x@P}", "s22"),
    ("x='a[$(bin/sudo s23)]'; echo ${!x}", "s23"),
    ("PS4='$(bin/sudo s24)'; set -x; :", "s24"),
    ("x='a[$(bin/sudo s25)]'; printf -v \"$x\" 1", "s25"),
    ("unset 'a[$(bin/sudo s26)]'", "s26"),
    ("complete -C 'bin/sudo s27' x; compgen -C 'bin/sudo s28' x", "s28"),
    ("x='a[$(bin/sudo s29)]'; test -v \"$x\"", "s29"),
    ("command eval 'bin/sudo s30'", "s30"),
    ("builtin trap 'bin/sudo s31' EXIT", "s31"),
    ("echo $'\\'' ${x:-$(bin/sudo s32)} ''", "s32"),
    ('echo ${x:-"}"$(bin/sudo s33)}', "s33"),
    # (bash does not import PS4 when it runs as root; as another user this runs s34)
    ("env PS4='$(bin/sudo s34)' SHELLOPTS=xtrace bash -c :", "s34"),
]


async def _call(tools: SecureCodingTools, command: str) -> ToolResult:
    options = DispatchOptions(registry=create_tool_registry(tools.tools))
    call = ToolCall(id="1", name="shell", arguments={"command": command})
    return await dispatch_tool_call(call, options)


def _stand_in(root: Path) -> None:
    (root / "bin").mkdir()
    sudo = root / "bin" / "sudo"
    sudo.write_text('#!/bin/sh\n: > "$(dirname "$0")/../$1"\n')
    sudo.chmod(0o755)


@pytest.mark.bwrap
async def test_lines_that_run_a_program_not_written_in_them_ask(root: Path) -> None:
    _stand_in(root)
    async with open_secure_coding_tools([str(root)], approve=None, command_rules=_RULES) as s:
        assert s.mode == "confined"
        results = [(line, await _call(s, line)) for line, _ in _ATTACKS]
    made = sorted(set(os.listdir(root)) - {"bin"})
    assert made == []
    for line, result in results:
        assert result.is_error, line
        assert "deny rule could match" in result.joined_text or "denied" in result.joined_text, (
            line,
            result.joined_text,
        )


@pytest.mark.bwrap
async def test_the_stand_in_really_runs_where_the_policy_lets_it(root: Path) -> None:
    # the marker is real: without deny rules the same constructs run confined
    _stand_in(root)
    rules = CommandRules(use_default_deny=False)
    async with open_secure_coding_tools([str(root)], approve=None, command_rules=rules) as secure:
        result = await _call(secure, "echo ${x:-$(bin/sudo s1)}; trap 'bin/sudo s2' EXIT")
    assert not result.is_error, result.joined_text
    assert {"s1", "s2"} <= set(os.listdir(root))


def _decide(root: Path, command: str) -> ExecutionDecision:
    policy = create_coding_approval_policy(
        roots=[str(root)], sandbox=BubblewrapSandbox([str(root)]), command_rules=_RULES
    )
    decision = policy.check(
        ExecutionAction(kind="shell", operation="shell", command=command, paths=(str(root),))
    )
    assert isinstance(decision, ExecutionDecision)
    return decision


@pytest.mark.parametrize(
    "command",
    [
        "make test",
        "echo ${HOME:-/tmp} > where.txt",
        'echo "$(git rev-parse HEAD)" > head.txt',
        "cat $(ls) > all.txt",
        "export PYTHONPATH=src && python3 -c 'print(1)' > out.txt",
        "set -euo pipefail; make",
        'read -r first < notes.txt; echo "$first" > first.txt',
        'for f in *.txt; do wc -l "$f"; done > counts.txt',
        "command -v make && make",
        "grep -n '$(' script.sh > hits.txt",
        "printf '%s\\n' a b > ab.txt",
        "test -f x.txt || echo ${#HOME} > n.txt",
        "exec 2>&1; make  # don't worry",
        "local_var=1 make",
    ],
)
def test_everyday_lines_still_run_confined(root: Path, command: str) -> None:
    decision = _decide(root, command)
    assert decision.allowed, decision.reason
    assert decision.details.get("confined") is True


@pytest.mark.parametrize(
    ("line", "evaluates"),
    [
        ("echo ${x}", False),
        ("echo ${x:2:3} ${x: -1}", False),
        ("echo ${x:y}", True),
        ("echo ${x[0]}", True),
        ("echo ${x:=1}", False),
        ("echo ${PS4:=1}", True),
        ("echo ${x", True),
        ("echo 'unterminated", True),
        ('echo "unterminated', True),
        ("cat <<EOF\ndon't\nEOF", True),
        ("echo $[1]", True),
        ("echo $((1", True),
        ("[[ -f x ]]", True),
        ("env BASH_FUNC_ls%%='() { :; }' bash -c ls", True),
        ("echo a # ${x[$(y)]}", False),
        ("PS1=x true", True),
        ("a[1]=x true", True),
        ("x=1 true", False),
        ("'trap' x EXIT", True),
        ("exec make", True),
        ("read -p 'name: ' -r n", False),
        ("read -a PS4", True),
        ("wait -p x", True),
        ("export 'A=(1 2)'", True),
        ("export A='(1 2)'", True),
        ("export -n A", True),
        ('declare A="$B"', False),
        ('declare "$B"', True),
        ("printf '%d' 3", False),
        ("set -x", True),
        ("set -o pipefail", False),
        ("set -o xtrace", True),
        ("eval 'echo hi'", False),
        ("$'trap' 'x' EXIT", True),
        ("$c x", True),
        ("export -x A=1 B", False),
        ("export 1A=2", True),
        ("echo ${x:-\\}$(y)}", True),
        ("echo ${x:-'a}", True),
        ("echo ${x:-${y}} ${x:-{a}}", False),
        ("echo ${%x}", True),
        ("echo $((1 + 2)) ${x}", False),
        ("PS4=x", True),
        ("env 'PS4=x' bash -c :", True),
        ("NODE_ENV=production make", False),
        ('eval "$x"', True),
    ],
)
def test_what_evaluates_code(line: str, evaluates: bool) -> None:
    assert (evaluates_code(parse_script(line)) is not None) is evaluates
