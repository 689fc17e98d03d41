"""Program models read an argv the way the real program parses it.

Each attack is a word the real program reads differently from a plain getopt
reading (an option cluster, a single-dash long option, an obsolete form, a
format conversion): the model must see what the program will do, or ask. Each
model is checked against the real program on this machine.
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import pytest

from prism.coding.security import explain_command

if TYPE_CHECKING:
    from pathlib import Path


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, check=False, timeout=30)


@pytest.mark.parametrize(
    ("command", "outcome", "reason"),
    [
        # GNU env reads every option of a cluster: -v, then -S with the rest of the word
        ("env '-vSsudo id' true", "deny", "sudo *"),
        ("env '-vSsh -c id' true", "ask", "env -S splits its string"),
        ("env -vC/etc head -3 shadow", "ask", "env -C runs the command in another directory"),
        ("env -iC.. cat f", "ask", "env -C runs the command in another directory"),
        # a cluster whose last option takes the next word: that word is no command
        ("timeout -fs KILL 5 sudo id", "deny", "sudo *"),
        ("env -iu X ls", "allow", ""),
        ("env -uX -i ls", "allow", ""),
    ],
)
def test_every_option_of_a_wrapper_cluster_is_read(
    root: Path, command: str, outcome: str, reason: str
) -> None:
    (root / "f").write_text("x\n")
    explanation = explain_command(command, roots=[str(root)])
    assert explanation.outcome == outcome, explanation
    assert reason in explanation.reason


def test_real_env_runs_the_split_string_and_the_directory_of_a_cluster(root: Path) -> None:
    """What the model must see: GNU env honours -S and -C after another option."""
    split = _run(["env", "-vSecho split", "word"], root)
    assert split.stdout == b"split word\n"
    chdir = _run(["env", "-iC/", "pwd"], root)
    assert chdir.stdout == b"/\n"
