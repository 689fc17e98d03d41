"""The command approver: a program the user configures answers when the client cannot."""

from __future__ import annotations

import sys

from prism.core import ExecutionAction
from prism.gateway import create_command_approver

# Approves commands that only touch files named ok*, says why either way.
JUDGE = (
    "import json, sys\n"
    "action = json.load(sys.stdin)\n"
    "ok = action['command'].startswith('touch ok')\n"
    "print('fine by the judge' if ok else 'not this one')\n"
    "sys.exit(0 if ok else 3)\n"
)


def _action(command: str) -> ExecutionAction:
    return ExecutionAction(kind="shell", operation="shell", command=command, paths=("/w",))


async def test_exit_zero_approves_and_is_not_remembered() -> None:
    approve = create_command_approver([sys.executable, "-c", JUDGE])
    decision = await approve(_action("touch ok.txt"))
    assert decision.approved
    assert not decision.remember
    assert decision.reason == "fine by the judge"


async def test_other_exit_denies_with_the_programs_words() -> None:
    approve = create_command_approver([sys.executable, "-c", JUDGE])
    decision = await approve(_action("touch nope.txt"))
    assert not decision.approved
    assert decision.reason == "not this one"


async def test_a_missing_program_denies() -> None:
    approve = create_command_approver(["/nonexistent/approver"])
    decision = await approve(_action("touch ok.txt"))
    assert not decision.approved
    assert "could not run" in (decision.reason or "")


async def test_the_program_is_told_the_access_an_escalation_grants() -> None:
    # it judges the access, not only the command text
    judge = (
        "import json, sys\n"
        "action = json.load(sys.stdin)\n"
        "print(action['escalation'], action['escalation_grant'])\n"
        "sys.exit(0 if action['escalation'] is None else 3)\n"
    )
    approve = create_command_approver([sys.executable, "-c", judge])
    grant = {"protected_writes": ["/w/.envrc"], "outside_writes": [], "hosts": []}
    escalation = "write or remove the protected path .envrc (as a file or a directory)"
    action = ExecutionAction(
        kind="shell",
        operation="shell",
        command="echo x > .envrc",
        paths=("/w",),
        metadata={"escalation": escalation, "escalation_grant": grant},
    )
    decision = await approve(action)
    assert not decision.approved
    assert decision.reason == f"{escalation} {grant}"
    plain = await approve(_action("touch ok.txt"))
    assert plain.approved
    assert plain.reason == "None None"
