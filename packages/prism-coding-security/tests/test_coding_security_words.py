"""The argv the policy judges is the argv bash runs: quotes, escapes, braces, tilde, globs.

Checked through the public explanation (``CommandCheck.argv``: the words as
they would run) against bash itself.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import TYPE_CHECKING

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prism.coding.security import explain_command

if TYPE_CHECKING:
    from pathlib import Path

BASH = shutil.which("bash")
needs_bash = pytest.mark.skipif(BASH is None, reason="bash is not installed")


def _our_words(word: str, cwd: Path) -> list[str] | None:
    """The words after ``echo`` as the policy expands them; None when it refuses to."""
    explanation = explain_command(f"echo {word}", roots=[str(cwd)])
    first = next((c for c in explanation.commands if c.program == "echo"), None)
    if first is None or first.verdict != "allow":
        return None
    return list(first.argv[1:])


def _bash_words(word: str, cwd: Path) -> list[str]:
    assert BASH is not None
    done = subprocess.run(
        [BASH, "--norc", "--noprofile", "-c", f"printf '%s\\0' {word}"],
        cwd=cwd,
        capture_output=True,
        check=True,
        env={"HOME": str(cwd / "home"), "PATH": "/usr/bin:/bin"},
    )
    return done.stdout.decode().split("\0")[:-1]


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("a.py", "b.py", "c.txt", ".hidden", "sub/d.py", "sub/e.txt", "home/f"):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path


WORDS = [
    "plain", "'single quoted'", '"double quoted"', "a\\ b", "\\*", "'*'", "*.py", "sub/*",
    "*", "*.none", "{a,b}.py", "{1..3}", "{a..c}", "x{,y}z", "{a,{b,c}}", "'{a,b}'", "~",
    "~/f", "'~'", "~root", "a=~/x", "--opt=~/x", "[ab].py", "?.py", "s\\ub/*",
    "a'b'\"c\"", "{}", "{a}", "sub/{d,e}.*", "\\~", "''", '""', "x\\\ny",
    "{a,}", "x{,}", "{,b}c", "a{,}", "{01..03}", "{1..010}", "{-01..1}", "{08..11..2}",
    "{00..2}", "{10..08}", "a{001..2}b",
]  # fmt: skip


@needs_bash
@pytest.mark.parametrize("word", WORDS)
def test_expansion_matches_bash(tree: Path, word: str) -> None:
    ours = _our_words(word, tree)
    assert ours is not None, f"{word!r} should be expandable"
    theirs = _bash_words(word, tree)
    if "{" in word:
        # bash drops a word that brace expansion made empty; we keep it (a stricter check)
        ours = [w for w in ours if w]
    assert ours == theirs


@pytest.mark.parametrize(
    "word", ["$HOME", "${x}", "$(id)", "`id`", "\"$x\"", "$'\\x41'", "~+", "'unterminated",
             "{1..100000}", "/*/*/*/*",
             # nested or chained past 64 levels (1,000 deep raised RecursionError)
             "{a," * 1000 + "b" + "}" * 1000, "{a," * 65 + "b" + "}" * 65, "{x}" * 500],
)  # fmt: skip
def test_words_bash_would_compute_at_run_time_are_refused(tree: Path, word: str) -> None:
    assert _our_words(word, tree) is None


def test_braces_nested_at_the_limit_still_expand(tree: Path) -> None:
    assert _our_words("{a," * 64 + "b" + "}" * 64, tree) == ["a"] * 64 + ["b"]


_PIECES = st.sampled_from(
    ["a", "b", ".py", "*", "?", "[ab]", "{a,b}", "{1..2}", "'x y'", '"q"', "\\*", "\\ ", "sub/",
     "~", "=", ",", "-", "'*'", '"{a,b}"']
)  # fmt: skip


@needs_bash
@settings(deadline=None, max_examples=150)
@given(pieces=st.lists(_PIECES, min_size=1, max_size=5))
def test_random_words_expand_as_bash_does(tmp_path_factory: pytest.TempPathFactory,
                                          pieces: list[str]) -> None:  # fmt: skip
    tree = tmp_path_factory.mktemp("words")
    for name in ("a.py", "b.py", "ab", "sub/a.py", "home/x"):
        path = tree / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    word = "".join(pieces)
    ours = _our_words(word, tree)
    if ours is None:
        return  # refusing is always allowed: the command then asks
    if "~" in word:
        return  # HOME differs between this process and the bash child (fixed cases cover it)
    if "{" in word:
        ours = [w for w in ours if w]
    assert ours == _bash_words(word, tree), word


def test_a_line_of_repeated_globs_stops_expanding_past_its_word_budget(tmp_path: Path) -> None:
    """An attacker's 802-character `ls * * ...` over 1,000 files made the judge build and
    check 400,000 words on the event loop (14 s). A line's expansions now stop at 8,192
    words in all: the rest count as computed, so the line is not proved."""
    for index in range(100):
        (tmp_path / f"f{index:03d}.py").write_text("")
    one = explain_command("ls *", roots=[str(tmp_path)])
    assert one.outcome == "allow"
    assert len(one.argvs[0]) == 101
    many = explain_command("ls" + " *" * 100, roots=[str(tmp_path)])
    assert many.outcome == "ask"
    assert "more than 8192 words" in many.reason


def test_the_line_glob_matches_what_pythons_glob_matches(tmp_path: Path) -> None:
    """The bounded glob (each directory listed once per line) against ``glob.glob``."""
    import glob
    import os

    from prism.coding.security._words import Listings

    for name in ("a.py", ".h.py", "d/x.py", "d/.y", "d/e/z.py", "d/e/.w/q", "f/g/h", "[ab]"):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    os.symlink("d", tmp_path / "ld")
    os.symlink("a.py", tmp_path / "la")
    os.symlink("missing", tmp_path / "broken")
    os.symlink(".", tmp_path / "d" / "loop")
    patterns = [
        "*", ".*", "*.py", "*/*", "*/*.py", "*/*/*", "*/.*", "d/*", "d/*/*", "*/e/*", "l*/*",
        "*/", "*/*/", "d/e/", "d/", "a.py", "nope", "*/nope", "?.py", "[ab]*", "[!a]*", "d/*/z*",
        "*/loop/*", "ld/*/*", "broken", "b*", "d/.*/*", "*/e/.w/*", "[[]ab]", f"{tmp_path}/*/*.py",
        f"{tmp_path}/d/*", "*//*", "d//x.py",
    ]  # fmt: skip
    for pattern in patterns:
        expected = sorted(glob.glob(pattern, root_dir=None if pattern[0] == "/" else tmp_path))
        found = sorted(Listings().glob(pattern, "" if pattern[0] == "/" else str(tmp_path)))
        assert found == expected, pattern


def test_a_line_of_globs_matching_nothing_stops_at_its_listing_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ls */*/*/q0 */*/*/q1 ...` matches nothing, so no word budget stops it: each glob
    listed every directory three levels down (14 s on the event loop for 20 globs over
    10,000 directories). A line lists each directory once, within a budget of entries."""
    from prism.coding.security import _words

    for index in range(30):
        (tmp_path / f"a{index}" / "b" / "c").mkdir(parents=True)
    line = "ls " + " ".join(f"*/*/*/q{index}" for index in range(20))
    listings = _words.Listings()
    for index in range(20):
        word = _words.expand_word(f"*/*/*/q{index}", cwd=str(tmp_path), listings=listings)
        assert word.values == (f"*/*/*/q{index}",)  # bash keeps it as written
    # the top (30 entries), each a{i} (1), each a{i}/b (1): listed once for all twenty
    assert listings.limit - listings.left == 30 + 30 + 30 + 20 * 30
    assert explain_command(line, roots=[str(tmp_path)]).outcome == "allow"
    monkeypatch.setattr(_words, "MAX_LISTED_ENTRIES", 100)
    refused = explain_command(line, roots=[str(tmp_path)])
    assert refused.outcome == "ask"
    assert "the line's globs read more than 100 directory entries" in refused.reason
