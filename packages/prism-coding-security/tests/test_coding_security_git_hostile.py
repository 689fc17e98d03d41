"""A hostile repository against Prism's own git and the git commands it proves.

Every file of a root is hostile, ``.git`` included: what git runs or reads
because the repository's configuration, index or ``.gitmodules`` says so is
forced off from the command line (or the line asks), and each test below
first shows that real git does run or read it without that.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import TYPE_CHECKING

import pytest

from prism.coding.security._gitnames import git_entries
from prism.coding.security._overlay import gitlinks

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

GIT = shutil.which("git")
pytestmark = pytest.mark.skipif(GIT is None, reason="git is not installed")


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "HOME": str(tmp_path),
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    }


def _git(root: Path, env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, env=env, check=False
    )


def _bash(text: str, cwd: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", text], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


def _repository(root: Path, env: Mapping[str, str]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "a.txt").write_text("one\n")
    _git(root, env, "init", "-q", "-b", "main")
    _git(root, env, "add", ".")
    assert _git(root, env, "commit", "-qm", "x").returncode == 0


def _config(root: Path, text: str) -> None:
    with (root / ".git" / "config").open("a") as handle:
        handle.write(text)


# -- Prism's own git on the host ---------------------------------------------------------------


def test_prisms_own_git_on_a_root_runs_no_fsmonitor_the_repository_names(tmp_path: Path) -> None:
    """Asking git which paths it names (before a confined command) and which gitlinks
    an index holds (copy-back) reads the index: the repository's fsmonitor stays off."""
    env = _env(tmp_path)
    root = tmp_path / "project"
    _repository(root, env)
    mark = tmp_path / "MARK"
    _config(root, f'[core]\n\tfsmonitor = "touch {mark}; false"\n')
    _git(root, env, "ls-files", "--stage")
    assert mark.exists(), "reading the index runs the planted fsmonitor"
    mark.unlink()
    git_entries(str(root))
    git_dir = str(root / ".git")
    assert gitlinks(git_dir, str(root), os.path.join(git_dir, "index")) == frozenset()
    assert not mark.exists()
