"""Red-team findings: commands the policy allows that run programs or reveal secrets.

Each test is a bypass verified for real with ``bash -c`` in a scratch root; the
policy must not allow these commands without approval.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from prism.coding.security import explain_command

if TYPE_CHECKING:
    from pathlib import Path


def _outcome(command: str, root: Path) -> str:
    return explain_command(command, roots=[str(root)]).outcome


@pytest.mark.parametrize(
    "command",
    [
        "jq '$ ENV' d.json",  # jq 1.6 accepts whitespace between '$' and the name
        "jq -n '$  ENV|keys'",
        "jq -n '\"\\($ ENV.HOME)\"'",
    ],
)
def test_jq_env_with_whitespace_reveals_the_environment(root: Path, command: str) -> None:
    # verified: MYSECRET=topsecret bash -c "jq '\$ ENV.MYSECRET' d.json" prints "topsecret";
    # the _JQ_DANGER pattern only matches the spelling "$ENV"
    (root / "d.json").write_text('{"a": 1}\n')
    assert _outcome(command, root) != "allow"


def _bare_layout(root: Path) -> None:
    """A work tree whose top level also holds a bare repository's files.

    The `.git` directory makes the bare-repository check stop; `git --bare` then
    takes the working directory itself as GIT_DIR and reads the unprotected
    ./config and ./info/attributes, which name a textconv program.
    """
    (root / ".git").mkdir()
    (root / "HEAD").write_text("ref: refs/heads/master\n")
    (root / "objects").mkdir()
    (root / "refs" / "heads").mkdir(parents=True)
    (root / "info").mkdir()
    (root / "info" / "attributes").write_text("* diff=evil\n")
    (root / "evil.sh").write_text('#!/bin/sh\ntouch "$HOME/pwned"\ncat "$1"\n')
    (root / "config").write_text(
        "[core]\n\trepositoryformatversion = 0\n\tbare = true\n"
        '[diff "evil"]\n\ttextconv = sh evil.sh\n'
    )


@pytest.mark.parametrize(
    "command",
    ["git --bare show HEAD", "git --bare log -p", "git --bare diff HEAD~1 HEAD"],
)
def test_git_bare_uses_unprotected_config_in_the_work_tree(root: Path, command: str) -> None:
    # verified: with the objects of two commits copied in, `git --bare show HEAD` ran
    # the textconv program named in ./config (a marker file appeared)
    _bare_layout(root)
    assert _outcome(command, root) != "allow"


@pytest.mark.parametrize(
    "command",
    [
        "git log --show-signature",
        "git show --show-signature HEAD",
        "git log -1 --format='%G?'",
        "git log --pretty=%GG",
        "git show --format=%GS -s",
    ],
)
def test_git_signature_checks_run_gpg(root: Path, command: str) -> None:
    # verified: on a commit with a gpgsig header, `git log --show-signature` and
    # `git log --format=%G?` exec `gpg` from PATH (a stand-in gpg wrote a marker);
    # gpg is another program, and it reads ~/.gnupg outside the roots
    (root / ".git").mkdir()
    assert _outcome(command, root) != "allow"


@pytest.mark.parametrize(
    "command",
    [
        # ${X:=...} builds the text "$(touch ...)" without ever writing "$(", and ${X@P}
        # prompt-expands it, which runs the command substitution
        "cat <<END\n${X:=${D:-$}${P:-(}touch pwned)}${X@P}\nEND",
        'cat <<< "${X:=${D:-$}${P:-(}touch pwned)}${X@P}"',
        "cat <<-END\n\t${X:=${D:-$}${P:-(}touch pwned)}${X@P}\n\tEND",
    ],
)
def test_heredoc_and_herestring_prompt_expansion_runs_commands(root: Path, command: str) -> None:
    # verified with bash -c: a marker file appeared; the here-document check looks only
    # for "$(", "`" and "$[", and a here-string's word is never judged at all
    assert _outcome(command, root) != "allow"


@pytest.mark.parametrize(
    "command",
    [
        "cat <<END\n$AWS_SECRET_ACCESS_KEY\nEND",
        'cat <<< "$AWS_SECRET_ACCESS_KEY"',
        "cat <<< $HOME",
        "cat <<END\n${!AWS*}\nEND",
    ],
)
def test_heredoc_and_herestring_reveal_environment_variables(root: Path, command: str) -> None:
    # verified: MYSECRET=topsecret bash -c 'cat <<< "$MYSECRET"' prints topsecret,
    # while `echo "$MYSECRET"` asks (a parameter expansion is computed at run time)
    assert _outcome(command, root) != "allow"


@pytest.mark.parametrize(
    "command",
    [
        "git config --global --list",
        "git config --system --list",
        "git config --list --show-origin",
        "git config --get-regexp http",
    ],
)
def test_git_config_reads_config_files_outside_the_roots(root: Path, command: str) -> None:
    # verified: with HOME=<outside>, `git config --global --list` printed
    # http.extraheader=Authorization: Bearer SECRET-TOKEN from <outside>/.gitconfig
    (root / ".git").mkdir()
    assert _outcome(command, root) != "allow"


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(
            "git status",
            marks=pytest.mark.xfail(
                strict=True,
                reason="accepted: git status refreshes the index's stat cache (no content "
                "changes); docs/security.md says so",
            ),
        ),
        "git describe --dirty --always",
    ],
)
def test_git_commands_that_refresh_and_rewrite_the_index(root: Path, command: str) -> None:
    # verified: after `touch a.txt`, `git status` and `git describe --dirty` rewrote
    # .git/index (its mtime changed). A fix may instead run git with
    # GIT_OPTIONAL_LOCKS=0 / --no-optional-locks (describe --dirty still writes then).
    (root / ".git").mkdir()
    assert _outcome(command, root) != "allow"


@pytest.mark.parametrize(
    "command",
    [
        "printf 'x%n' HOME; git status",
        "printf 'x%n' HOME && git log",
        "printf 'abc%n' PATH; ls",
        "printf 'abcd%n' PATH; ls -c 'exec /usr/bin/touch pwned'",
        "printf '%n' PATH",
    ],
)
def test_printf_percent_n_assigns_shell_variables(root: Path, command: str) -> None:
    # bash's printf %n stores the count of bytes printed so far in the named variable,
    # like -v. Verified with bash -c:
    # - HOME=1 makes git read ./1/.gitconfig (a plain file in the root) as the global
    #   config; its core.fsmonitor ran on `git status` (a marker file appeared);
    # - PATH=3 / PATH=4 makes bash run ./3/ls (a stand-in wrote a marker) or ./4/ls, a
    #   symlink to /bin/sh, which ran `ls -c '...'` as a shell command.
    (root / "1").mkdir()
    (root / "1" / ".gitconfig").write_text("[core]\n\tfsmonitor = touch pwned\n")
    (root / ".git").mkdir()
    assert _outcome(command, root) != "allow"


def _outside_secret(root: Path) -> Path:
    outside = root.parent / "outside"
    outside.mkdir()
    secret = outside / "secret"
    secret.write_text("SECRET-XYZ\n")
    return secret


@pytest.mark.parametrize("command", ["diff dA dB", "diff -q dA dB", "diff dB/s dA", "diff dA dB/s"])
def test_diff_of_directories_follows_symlinks_inside_them(root: Path, command: str) -> None:
    # verified: `diff dA dB` printed "< SECRET-XYZ": diff compares dA/s with dB/s and
    # follows the symlink dA/s -> ../../outside/secret; only the operands are checked
    secret = _outside_secret(root)
    (root / "dA").mkdir()
    (root / "dB").mkdir()
    (root / "dA" / "s").symlink_to(secret)
    (root / "dB" / "s").write_text("x\n")
    assert _outcome(command, root) != "allow"


@pytest.mark.parametrize(
    "command",
    ["cat l[^a]nk", "cat li[^x]k", "cat ?[^x]nk", "cat l[[:alpha:]]nk", "cat *[^a]"],
)
def test_globs_that_python_expands_differently_from_bash(root: Path, command: str) -> None:
    # bash takes [^...] as a negated bracket and knows [[:alpha:]]; Python's glob reads
    # '^' as a literal and has no character classes, finds no match and keeps the word
    # as a harmless literal. Verified: `bash -c 'cat l[^a]nk'` printed SECRET-XYZ.
    secret = _outside_secret(root)
    (root / "link").symlink_to(secret)
    assert _outcome(command, root) != "allow"


@pytest.mark.parametrize(
    "command",
    [
        "git config --includes --file=cfg --list",
        "git config --includes -f cfg --get http.extraheader",
    ],
)
def test_git_config_file_includes_read_outside_the_roots(root: Path, command: str) -> None:
    # verified: cfg (a file in the root) includes ../outside/.gitconfig, and
    # `git config --includes --file=cfg --list` printed its http.extraheader token;
    # only the --file path itself is checked
    outside = root.parent / "outside"
    outside.mkdir()
    (outside / ".gitconfig").write_text("[http]\n\textraheader = Bearer SECRET-TOKEN\n")
    (root / "cfg").write_text("[include]\n\tpath = ../outside/.gitconfig\n")
    (root / ".git").mkdir()
    assert _outcome(command, root) != "allow"
