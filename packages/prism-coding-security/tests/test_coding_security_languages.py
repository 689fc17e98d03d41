"""The strict sub-grammars of sed, jq, awk and test, checked against the real programs.

Oracles: GNU ``sed --sandbox`` refuses every ``e``, ``r`` and ``w`` command as
*sed* reads the script, so a script the subset accepts must pass it; real ``jq``
run with a secret in its environment must not print the secret for a filter
the subset accepts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from prism.coding.security._languages import (
    awk_program_unsafe,
    builtin_test_unsafe,
    jq_filter_unsafe,
    sed_script_unsafe,
)

if TYPE_CHECKING:
    from pathlib import Path

SED = shutil.which("sed")
JQ = shutil.which("jq")
SECRET = "zz-secret-zz"

SED_ACCEPTED = [
    "p", "1,20p", "s/a/b/g", "s/[[:space:]]*$//", "/start/,/end/{p}", ":a;N;$!ba;s/\\n/ /g",
    "$!N", "1~2p", "y/abc/xyz/", "s|a|b|", "b end\n:end", "/x/I,+3d", "q5", "0,/x/d",
    "\\%x%p", "s/a/b/2p", "{p;p}", "/a/!d", "s/[]x]/y/", "ba;", "s/[[.a.]]/b/",
    "t;p", "T x\n:x", "=", "l", "s/a\\/b/c/", "$p",
]  # fmt: skip
SED_REFUSED = [
    ":a w /x", ":a e touch M", "s/a/b/w f", "s/a/b/e", "#n", "s/a/b/ w f", "l 5", "s/[/]/x/",
    "s/[[:sp/ace:]]//", "ba w x", "1e id", "r /etc/passwd", "R f", "W f", "a text", "i\\",
    "c x", "v", "s", "y/a", "s/a/b", "/x", "\\", "\\\nx", "s/[abc/x/", "/[/", ":", ":a b",
    ": a", "s/[^/]*//", "s/a/b/x", "s\\a\\b\\", "s/a\\\n/b/", "/a\n/p", "s/[[:alpha/x/",
]  # fmt: skip


@pytest.mark.parametrize("script", SED_ACCEPTED)
def test_sed_subset_accepts(script: str) -> None:
    assert sed_script_unsafe(script) is None


@pytest.mark.parametrize("script", SED_REFUSED)
def test_sed_subset_refuses(script: str) -> None:
    assert sed_script_unsafe(script) is not None


def _sed_sandbox_accepts(script: str, tmp: Path) -> bool:
    assert SED is not None
    # sed refuses e/r/w while it compiles the script, so an empty input is enough, and a
    # generated script that loops (":a;b a") never runs
    target = tmp / "input"
    target.write_text("")
    result = subprocess.run(
        [SED, "--sandbox", "-n", "-e", script, str(target)], capture_output=True, text=True,
        timeout=10, check=False, stdin=subprocess.DEVNULL, cwd=tmp,
    )  # fmt: skip
    return "sandbox" not in result.stderr


_SED_PARTS = st.sampled_from(
    [":a", ":a ", "w out", "e id", "r f", "b a", "ba", "t", "p", "s/x/y/", "s/[/]/x/",
     "s/x/y/w out", "s/x/y/e", ";", "\n", " ", "\t", "}", "{", "1", "$", "!", "/x/",
     "\\%x%", "y/a/b/", "#", "q", "l", "N", "a x", "s|[|]|y|", "\\", "'", "w", "e"]
)  # fmt: skip


@pytest.mark.skipif(SED is None, reason="sed is not installed")
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(parts=st.lists(_SED_PARTS, min_size=1, max_size=6))
@example(parts=[":a", ";", "b a"])  # loops forever on any input line
def test_a_sed_script_the_subset_accepts_has_no_e_r_w_for_sed_itself(
    tmp_path: Path, parts: list[str]
) -> None:
    script = "".join(parts)
    if sed_script_unsafe(script) is None:
        assert _sed_sandbox_accepts(script, tmp_path), script


@pytest.mark.skipif(SED is None, reason="sed is not installed")
@pytest.mark.parametrize("script", [":a w out", ":a e id", "ba w out", "s/[/]/x/w out"])
def test_sed_itself_reads_the_hidden_commands(tmp_path: Path, script: str) -> None:
    # the disagreements the subset refuses are real: sed sees an e or w command
    assert not _sed_sandbox_accepts(script, tmp_path)


JQ_ACCEPTED = [".name", ".a|keys", ".env", ". | length", "[.[] | .x]", '"x"', ".a.env.b"]
JQ_REFUSED = [
    "$#c\nENV.X", "$ ENV", "env", "..env", '"\\(env)"', "{env}", "$ENV.SECRET", "# x",
    'import "a" as a; .', 'include "x"; .', "modulemeta", "get_search_list", "$__prog_args",
    "input_filename", "env #\n.SECRET",
]  # fmt: skip


@pytest.mark.parametrize("text", JQ_ACCEPTED)
def test_jq_subset_accepts(text: str) -> None:
    assert jq_filter_unsafe(text) is None


@pytest.mark.parametrize("text", JQ_REFUSED)
def test_jq_subset_refuses(text: str) -> None:
    assert jq_filter_unsafe(text) is not None


_JQ_PARTS = st.sampled_from(
    ["$", "#", "\n", " ", "ENV", "env", ".SECRET", ".", "|", "\\", '"', "\\(", ")", "$__loc__",
     "keys", "{", "}", "[", "]", "as $x", "$x", "c", "getpath([\"SECRET\"])", "..", "?"]
)  # fmt: skip


@pytest.mark.skipif(JQ is None, reason="jq is not installed")
@settings(max_examples=150, deadline=None)
@given(parts=st.lists(_JQ_PARTS, min_size=1, max_size=6))
def test_a_jq_filter_the_subset_accepts_never_prints_the_environment(parts: list[str]) -> None:
    assert JQ is not None
    text = "".join(parts)
    if jq_filter_unsafe(text) is not None:
        return
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SECRET": SECRET}
    result = subprocess.run(
        [JQ, "-n", text], capture_output=True, text=True, timeout=10, check=False, env=env,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert SECRET not in result.stdout + result.stderr, text


@pytest.mark.skipif(JQ is None, reason="jq is not installed")
def test_jq_itself_reads_env_behind_a_comment() -> None:
    assert JQ is not None
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SECRET": SECRET}
    result = subprocess.run(
        [JQ, "-n", "$#c\nENV.SECRET"], capture_output=True, text=True, timeout=10, check=False,
        env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert SECRET in result.stdout


@pytest.mark.parametrize(
    ("program", "safe"),
    [
        ("{print $1}", True),
        ("NR==5", True),
        ('BEGIN { system("id") }', False),
        ('{ print > "f" }', False),
        ("{ sys\\\ntem(1) }", False),
        ("{ f = ENVIRON[1] }", False),
        ('@include "x"', False),
        ('"id" | getline', False),
        # gawk's symbol table reaches ENVIRON and ARGV by a computed name
        ('BEGIN { for (k in SYMTAB["ENV" "IRON"]) print k }', False),
        ('BEGIN { SYMTAB["ARG" "V"][1] = "/etc/shadow"; SYMTAB["ARG" "C"] = 2 } { print }', False),
        ('BEGIN { f = "sys" "tem"; for (k in FUNCTAB) print k }', False),
        # gawk's message catalogs: a directory of the program's choosing is read
        ('BEGIN { bindtextdomain("/outside"); print dcgettext("x") }', False),
        ('BEGIN { TEXTDOMAIN = "x"; print _"hello" }', False),
    ],
)
def test_awk_subset(program: str, safe: bool) -> None:
    assert (awk_program_unsafe(program) is None) is safe


@pytest.mark.parametrize(
    ("args", "safe"),
    [
        (("-f", "x"), True),
        (("a", "=", "b"), True),
        (("-v", "b[_]"), False),
        (("!", "-v", "x"), False),
        (("-R", "x"), False),
        (("-n", "$x"), False),
        (("`x`",), False),
    ],
)
def test_the_test_builtin_subset(args: tuple[str, ...], safe: bool) -> None:
    assert (builtin_test_unsafe(args) is None) is safe
