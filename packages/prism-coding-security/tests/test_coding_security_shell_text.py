"""Shell text of a root read as sh and bash read it, checked against the real shells.

A hook, a script it runs, a list file a loop reads: each is run here by dash
and by bash, every script that ran says so, and each one must be among what
the policy protects. The shells drop NUL bytes and end a line at a newline
only (a carriage return, a form feed or a line separator is part of its word),
where Python's ``splitlines`` and ``shlex`` would cut. A makefile's recipe is run by
the real make.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import TYPE_CHECKING

import pytest

from prism.coding.security import _callees, _implied
from prism.coding.security._protected import ProtectedPaths

if TYPE_CHECKING:
    from pathlib import Path

# each shape: the hook's line, and the file (as the shell names it) that it runs
_SHAPES = [
    (b"sh scripts/ch\0eck.sh", "scripts/check.sh"),
    (b"sh scripts/cr.sh\r", "scripts/cr.sh\r"),
    (b"sh scripts/vt.sh\x0bx", "scripts/vt.sh\x0bx"),
    (b"sh scripts/ff.sh\x0cx", "scripts/ff.sh\x0cx"),
    (b"sh scripts/fs.sh\x1cx", "scripts/fs.sh\x1cx"),
    (b"sh scripts/nel.sh\xc2\x85x", "scripts/nel.sh\x85x"),
    (b"sh scripts/ls.sh\xe2\x80\xa8x", "scripts/ls.sh\u2028x"),
    # a loop over a list file's lines (a carriage return and a NUL in them)
    (b'for f in $(cat scripts/list); do sh "$f"; done', "scripts/l1.sh\r"),
    (b"", "scripts/l2.sh"),
    # a NUL inside a quoted word, and a carriage return inside a single-quoted one
    (b'sh "scripts/q\0q.sh"', "scripts/qq.sh"),
    (b"sh 'scripts/sq.sh\r'", "scripts/sq.sh\r"),
    # a loop's list word, a script on standard input, an assignment's value
    (b'for f in scripts/fl.sh\r; do sh "$f"; done', "scripts/fl.sh\r"),
    (b"sh < scripts/in.sh\r", "scripts/in.sh\r"),
    (b"BASH_ENV=scripts/be.sh\r bash -c :", "scripts/be.sh\r"),
]
_LIST = b"scripts/l1.sh\r\nscripts/l\0" + b"2.sh\n"


def _tree(top: Path) -> None:
    hooks = top / ".git" / "hooks"
    hooks.mkdir(parents=True)
    (top / "scripts").mkdir()
    (top / "scripts" / "list").write_bytes(_LIST)
    # (bash refuses a script with a NUL in its first lines as a binary file)
    body = b"#!/bin/sh\n: lint\n" + b"\n".join(line for line, _ in _SHAPES if line) + b"\n"
    (hooks / "pre-commit").write_bytes(body)
    for index, (_, name) in enumerate(_SHAPES):
        path = os.path.join(os.fsencode(top), os.fsencode(name))
        with open(path, "wb") as handle:
            handle.write(b'echo %d >> "$LOG"\n' % index)
        # and what Python's reading would have named instead: never run by a shell
        for cut in ("\r", "\x0b", "\x0c", "\x1c", "\x85", "\u2028"):
            if cut in name:
                decoy = os.path.join(os.fsencode(top), os.fsencode(name.split(cut)[0]))
                with open(decoy, "wb") as handle:
                    handle.write(b'echo decoy >> "$LOG"\n')


@pytest.mark.parametrize("shell", ["dash", "bash"])
def test_each_script_a_hook_runs_is_protected_as_the_shell_names_it(
    tmp_path: Path, shell: str
) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    top = str(tmp_path)
    _tree(tmp_path)
    log = tmp_path / "log"
    subprocess.run(
        [shell, ".git/hooks/pre-commit"],
        cwd=top,
        env={"PATH": os.environ["PATH"], "LOG": str(log)},
        check=True,
        capture_output=True,
    )
    ran = log.read_text().split()
    # every shape ran the file it names (a decoy would mean the shapes are wrong)
    assert sorted(ran, key=int) == [str(i) for i in range(len(_SHAPES))]
    found = set(_callees.hook_callees(top, [str(tmp_path / ".git" / "hooks")], top, []))
    missing = [name for _, name in _SHAPES if name not in found]
    assert missing == []


def test_each_script_an_envrc_runs_is_protected_as_bash_names_it(tmp_path: Path) -> None:
    """direnv evaluates ``.envrc`` with bash: the same reading as a hook's."""
    (tmp_path / "scripts").mkdir()
    names = ["scripts/env.sh", "scripts/dot.sh\r", "scripts/src.sh\x0cx", "scripts/be.sh\r"]
    for index, name in enumerate(names):
        decoy = tmp_path / name.split("\r")[0].split("\x0c")[0]
        decoy.write_text('echo decoy >> "$LOG"\n')
        (tmp_path / name).write_text(f'echo {index} >> "$LOG"\n')
    lines = b"sh scripts/e\0nv.sh\n. scripts/dot.sh\r\nsource scripts/src.sh\x0cx\n"
    lines += b"export BASH_ENV=scripts/be.sh\r\n"
    (tmp_path / ".envrc").write_bytes(b": env\n" + lines)
    log = tmp_path / "log"
    subprocess.run(
        ["bash", "-c", "source .envrc; bash -c :"],  # (a later bash sources BASH_ENV)
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"], "LOG": str(log)},
        check=True,
        capture_output=True,
    )
    assert log.read_text().split() == ["0", "1", "2", "3"]
    found = set(_implied._direnv_entries(str(tmp_path), ("",)))
    assert [name for name in names if name not in found] == []


# a hook's `make lint` whose recipe names its program through make's functions
_RECIPES = [
    "\t$(foreach f,$(wildcard d/*.sh),sh $(f);)",
    "\tsh $(firstword $(wildcard d/*.sh))",
    "\tsh $(addprefix d/,x.sh)",
    "\tsh $(patsubst %,d/%.sh,x)",
    "\tsh $(subst Y,x,d/Y.sh)",
    "\tsh $^\nlint: $(wildcard d/*.sh)",
    "\tsh $<\nlint: d/x",
    "\t@sh $(lastword $(MAKEFILE_LIST:Makefile=d/x.sh))",
    "\tsh $(call F,x)\nF = d/$(1).sh",
    "\tsh $(V)\nV = d/x\nV := $(V).sh",
    "\tsh $(V)\nV = $(subst Y,/,dYx.sh)",
    "\tsh $(shell echo d)/x.sh",
]
# ordinary recipes: their programs are known, nothing more is kept
_PLAIN_RECIPES = [
    "\t$(CC) $(CFLAGS) -o out/a $^\nlint: src/a.c",
    "\tpython3 -m pytest $(TESTS)\nTESTS = tests",
    "\tfor f in $$(git ls-files '*.sh'); do echo $$f; done",
    # (a path after a computed directory: that path in any directory)
    "\t$(shell go env GOPATH)/bin/golangci-lint run",
]


def test_a_recipe_whose_program_make_computes_keeps_the_makefiles_directory(
    tmp_path: Path,
) -> None:
    """Real make runs each recipe (each ran ``d/x.sh``): a program or script word still
    holding a make reference the reader does not evaluate makes what runs unknown, and
    everything below the makefile's directory is kept."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    for index, recipe in enumerate(_RECIPES + _PLAIN_RECIPES):
        top = tmp_path / str(index)
        (top / ".git" / "hooks").mkdir(parents=True)
        (top / "d").mkdir()
        (top / "src").mkdir()
        (top / "src" / "a.c").write_text("int main(void) { return 0; }\n")
        (top / "d" / "x.sh").write_text(f'echo {index} >> "$LOG"\n')
        (top / "d" / "x").write_text(f'echo {index} >> "$LOG"\n')
        (top / "Makefile").write_text(f"lint:\n{recipe}\n")
        (top / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\nmake lint\n")
        found = _callees.hook_callees(str(top), [str(top / ".git" / "hooks")], str(top), [])
        covered = ProtectedPaths(found).covers(["d", "x.sh"])
        if index >= len(_RECIPES):
            assert "**" not in found, recipe
            continue
        log = top / "log"
        env = {"PATH": os.environ["PATH"], "LOG": str(log)}
        subprocess.run(["make", "-s", "lint"], cwd=top, env=env, check=True, capture_output=True)
        assert log.read_text() == f"{index}\n", recipe
        assert covered is not None, recipe
