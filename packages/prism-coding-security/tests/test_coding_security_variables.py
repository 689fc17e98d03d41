"""What the variables a root's shell text sets make later programs load or run.

direnv exports every variable an ``.envrc`` sets into the user's shell: one naming
git's configuration, git's programs, a configuration tree, or holding a command git
or the shell runs, makes the file it names run on the host (a planted
``core.fsmonitor`` in the ``GIT_CONFIG_GLOBAL`` file ran at the user's next ``git
status``; ``PROMPT_COMMAND`` at every prompt). The policy's answer proves it: the
file is protected.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prism.coding.security import PROTECTED_PATHS
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
