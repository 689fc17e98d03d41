"""What the variables a root's shell text sets make later programs load or run.

direnv exports every variable an ``.envrc`` sets into the user's shell: one naming
git's configuration, git's programs, a configuration tree, or holding a command git
or the shell runs, makes the file it names run on the host (a planted
``core.fsmonitor`` in the ``GIT_CONFIG_GLOBAL`` file ran at the user's next ``git
status``; ``PROMPT_COMMAND`` at every prompt). So does a hook's line of its own
(``BASH_ENV=d/env.sh bash x.sh``), and perl's ``-I``/``-M`` and ruby's ``-I``/``-r``
load a library before the program. The policy's answer proves it: the file is
protected.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import TYPE_CHECKING

import pytest

from prism.coding.security import PROTECTED_PATHS, _callees
from prism.coding.security._implied import implied_protected
from prism.coding.security._protected import ProtectedPaths

if TYPE_CHECKING:
    from pathlib import Path

_EXPORTS = [
    ('export GIT_CONFIG_GLOBAL="$PWD/d/gitconfig"', "d/gitconfig"),
    ("export GIT_CONFIG_SYSTEM=d/system", "d/system"),
    ('export GIT_EXEC_PATH="$PWD/gx"', "gx"),
    ('export GIT_TEMPLATE_DIR="$PWD/d/tmpl"', "d/tmpl"),
    ('export GIT_DIR="$PWD/d/repo"', "d/repo"),
    ('export XDG_CONFIG_HOME="$PWD/cfg"', "cfg"),
    ('export GIT_SSH_COMMAND="$PWD/d/ssh.sh -o x=y"', "d/ssh.sh"),
    ('export EDITOR="$PWD/d/ed.sh"', "d/ed.sh"),
    ("export VISUAL='python3 d/vis.py'", "d/vis.py"),
    ('export PAGER="$PWD/d/pager.sh"', "d/pager.sh"),
    ("export PROMPT_COMMAND='sh d/p.sh'", "d/p.sh"),
    ('export LESSOPEN="|$PWD/d/lo.sh %s"', "d/lo.sh"),
    ('export KUBECONFIG="$PWD/d/kube:$PWD/d/kube2"', "d/kube2"),
]


def test_what_an_envrcs_exports_make_git_and_the_shell_run_is_protected(root: Path) -> None:
    (root / "d").mkdir()
    lines = [line for line, _ in _EXPORTS]
    (root / ".envrc").write_text("\n".join([*lines, "export DATA_DIR=$PWD/data"]) + "\n")
    found = set(implied_protected(str(root), ProtectedPaths(PROTECTED_PATHS)))
    assert [target for _, target in _EXPORTS if target not in found] == []
    # a variable no program loads or runs from leaves what it names writable
    assert "data" not in found


# a hook's line, and the file of the tree it makes a program load or run first
_HOOK_LINES = [
    ("BASH_ENV=d/env.sh bash d/main.sh", "d/env.sh"),
    ("export BASH_ENV=d/env2.sh; bash d/main.sh; unset BASH_ENV", "d/env2.sh"),
    ("ENV=d/env3.sh sh -i -c true </dev/null 2>/dev/null", "d/env3.sh"),
    ("GIT_EDITOR='sh d/ed.sh' sh -c '$GIT_EDITOR'", "d/ed.sh"),
    ("perl -Id -Mlintmod -e 1", "d/lintmod.pm"),
    ("perl -I d -mLint::Mod=x -e 1", "d/Lint/Mod.pm"),
    ("sh $(cat d/list)", "d/listed.sh"),
    ("bash $(< d/list2)", "d/listed2.sh"),
]


def test_what_a_hooks_own_variables_and_module_options_load_is_protected(tmp_path: Path) -> None:
    """Each line run by real bash (the hook's shell), each file it loads says so, and
    each one is among what the policy protects (each ran at the user's next commit)."""
    if shutil.which("perl") is None:
        pytest.skip("perl is not installed")
    top = str(tmp_path)
    (tmp_path / "d" / "Lint").mkdir(parents=True)
    (tmp_path / "d" / "main.sh").write_text("true\n")
    (tmp_path / "d" / "list").write_text("d/listed.sh\n")
    (tmp_path / "d" / "list2").write_text("d/listed2.sh\n")
    for index, (_, target) in enumerate(_HOOK_LINES):
        perl = target.endswith(".pm")
        say = f'open(my $f, ">>", $ENV{{LOG}}); print $f "{index}\\n"; 1;' if perl else ""
        (tmp_path / target).write_text(say or f'echo {index} >> "$LOG"\n')
    hooks = tmp_path / ".git" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "pre-commit").write_text("\n".join(line for line, _ in _HOOK_LINES) + "\n")
    log = tmp_path / "log"
    env = {"PATH": os.environ["PATH"], "LOG": str(log), "HOME": str(tmp_path / "none")}
    subprocess.run(["bash", str(hooks / "pre-commit")], cwd=top, env=env, check=True)
    assert sorted(log.read_text().split(), key=int) == [str(i) for i in range(len(_HOOK_LINES))]
    found = set(_callees.hook_callees(top, [str(hooks)], top, []))
    assert [target for _, target in _HOOK_LINES if target not in found] == []
