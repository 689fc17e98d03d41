"""Program models at their edges: what each allows, asks or denies, and why (explain_command)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from prism.coding.security import explain_command

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize(
    ("command", "outcome", "reason"),
    [
        ("pwd extra", "ask", "with operands changes something"),
        # a command that leaves the session and is not waited for outlives the call
        # (`env -i` also drops what marks a process as the call's)
        ("env -i setsid -f sleep 600", "ask", "may leave its command running after the call"),
        ("setsid --fork sleep 600", "ask", "may leave its command running"),
        ("setsid sleep 600", "ask", "may leave its command running"),
        ("setsid -fw sleep 600", "ask", "may leave its command running"),
        ("exec setsid sleep 600", "ask", "may leave its command running"),
        ("env -i setsid -w sleep 1", "allow", ""),
        ("setsid --wait sleep 1", "allow", ""),
        ("date 010100002030", "ask", "sets the clock"),
        ("date +%Y", "allow", ""),
        ("uniq a b c", "ask", "at most an input and an output"),
        ("jq --args . x", "ask", "--args/--jsonargs"),
        ("jq", "ask", "jq without a filter"),
        ("jq '$ENV.HOME' f.json", "ask", "reads the environment"),
        ("cp only-one", "ask", "needs a source and a destination"),
        ("sed s", "ask", "an unusual 's' delimiter"),
        ("sed 's\\a\\b\\'", "ask", "an unusual 's' delimiter"),
        ("sed 's/a/b/e' f", "ask", "can run commands or write files"),
        ("sed 's/a/b/w out' f", "ask", "can run commands or write files"),
        ("sed 'a text' f", "ask", "the sed command 'a'"),
        ("sed 'r /etc/passwd' f", "ask", "can run commands, read or write files"),
        ("sed '/x/I p' f", "allow", ""),
        ("sed ':top; b top' f", "allow", ""),
        ("sed", "ask", "sed without a script"),
        ("rg --files", "allow", ""),
        ("grep -e x f", "allow", ""),
        ("find . -exec cat {} ;", "ask", "runs a command for every file"),
        ("find . -name", "ask", "without a fixed value"),
        ("find . -name $X", "ask", "computed at run time"),
        ("git", "ask", "git without a subcommand"),
        ("git --version", "allow", ""),
        # a version manager's proxy runs what the checkout's files name
        # (rust-toolchain.toml's `path`, .yarnrc.yml's `yarnPath`, mise's `path:`)
        ("cargo --version", "ask", "version manager's proxy"),
        ("rustc --version", "ask", "the project's own files"),
        ("yarn --version", "ask", "version manager's proxy"),
        ("python3 -V", "ask", "version manager's proxy"),
        ("pytest --version", "ask", "version manager's proxy"),
        ("cargo --version --verbose", "ask", "not in the safe set"),
        ("git $SUB", "ask", "computed at run time"),
        ("env -S", "ask", "env"),
        ("env -S 'a $B'", "ask", "variables in its string"),
        ("env -S 'a \"b'", "ask", "cannot be split"),
        ("env - ls", "allow", ""),
        ("sh -c", "ask", "runs text computed at run time or missing"),
        ("sg staff ls", "ask", "another group"),
        ("sg staff -c ls", "ask", "another group"),
        ("sudo ls", "deny", ""),
        ("env time -o out ls", "ask", "time -o writes a file"),
        ("timeout", "ask", "without a command"),
        ("nice", "allow", "without a command"),
        ("su -c ls root", "deny", ""),
        ("cd -", "ask", "previous directory"),
        ("printf '%n' x", "ask", "printf %n"),
        ("printf %s $X", "ask", "computed at run time"),
    ],
)
def test_program_models_say_why_they_ask(
    root: Path, command: str, outcome: str, reason: str
) -> None:
    (root / "f").write_text("x\n")
    (root / "f.json").write_text("{}\n")
    explanation = explain_command(command, roots=[str(root)])
    assert explanation.outcome == outcome, explanation
    assert reason in explanation.reason


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("echo {1..9}{1..9}{1..9}{1..9}", "too many words"),
        ("ls many/f{1,2,3,4,5,6,7,8,9}*{,}", "more than 1024 words"),
        ("ls many/*", "matches more than 1024 paths"),
        ("ls */*/*/*", "wildcard levels"),
        ("ls a\x00b", "NUL byte"),
        ("x" * 70_000, "longer than 65536 characters"),
    ],
)
def test_word_expansion_limits_ask(root: Path, command: str, reason: str) -> None:
    many = root / "many"
    many.mkdir()
    for index in range(1030):
        (many / f"f{index}").touch()
    explanation = explain_command(command, roots=[str(root)])
    assert explanation.outcome != "allow"
    assert reason in str(explanation), explanation


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        # GNU sed: a backup name with '*' is the file's name put anywhere
        ("sed '-i.git/hooks/*' s/x/x/ pre-commit", "a backup name with '*' or '/'"),
        ("sed --in-place='bk/*' s/x/x/ f", "a backup name with '*' or '/'"),
        ("sed -irc s/x/x/ .bash", "writes '.bashrc', a protected path"),
        ("sed -i.bak -irc s/x/x/ .bash", "writes '.bashrc', a protected path"),  # the last
        ("cp -b -S rc f .bash", "-b is never proved safe"),
        ("cp -S ks/pre-commit f .git/hoo", "--suffix is never proved safe"),
        ("mv --backup=simple f g", "--backup is never proved safe"),
    ],
)
def test_backup_names_are_judged_as_writes(root: Path, command: str, reason: str) -> None:
    """The attack: a backup suffix writes a file the judge never saw (``.bashrc``,
    ``.git/hooks/pre-commit``). Each asks, naming why, also under a sandbox."""
    from prism.coding.security import LandlockSandbox

    (root / "f").write_text("x\n")
    explanation = explain_command(command, roots=[str(root)], sandbox=LandlockSandbox([str(root)]))
    assert explanation.outcome == "ask", explanation
    assert reason in explanation.reason
    assert explanation.write_dirs is None


def test_a_plain_sed_backup_suffix_is_in_the_write_set(root: Path) -> None:
    from prism.coding.security import LandlockSandbox

    (root / "f").write_text("x\n")
    explanation = explain_command("sed -i.bak s/x/y/ f", roots=[str(root)],
                                  sandbox=LandlockSandbox([str(root)]))  # fmt: skip
    writes = {c.reason for c in explanation.commands}
    assert any("writes 'f.bak'" in r for r in writes), writes
