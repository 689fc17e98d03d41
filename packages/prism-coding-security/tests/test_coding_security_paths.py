"""Path escape corpus: every kind of escape is denied, contained paths are allowed."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prism.coding.security import create_coding_approval_policy
from prism.core import ExecutionAction, ExecutionDecision, ExecutionPolicy

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "src").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (root / "src" / "main.py").write_text("print(1)")
    os.symlink(outside, root / "link_dir_out")
    os.symlink(outside / "secret.txt", root / "link_file_out")
    os.symlink(outside / "does-not-exist", root / "dangling_out")
    os.symlink(root / "src", root / "link_dir_in")
    os.symlink("src/main.py", root / "link_file_in")
    os.symlink(root / "nothing-yet", root / "dangling_in")
    return root, outside


def _check(policy: ExecutionPolicy, kind: str, path: str) -> ExecutionDecision:
    decision = policy.check(ExecutionAction(kind=kind, operation=kind, paths=(path,)))
    assert isinstance(decision, ExecutionDecision), "path decisions are synchronous"
    return decision


ESCAPES = {
    "dotdot": "../outside/secret.txt",
    "dotdot_deep": "src/../../outside/secret.txt",
    "dotdot_through_missing_dir": "missing/../../outside/new.txt",
    "absolute_outside": "/etc/passwd",
    "absolute_via_root_prefix": "{root}/../outside/secret.txt",
    "sibling_with_common_prefix": "{root}2/file",
    "symlink_dir_out": "link_dir_out/secret.txt",
    "symlink_file_out": "link_file_out",
    "symlink_dir_out_new_file": "link_dir_out/new.txt",
    "dangling_symlink_out": "dangling_out",
    "nul_byte": "src/main.py\x00.txt",
    "over_long_path": "a/" * 2100,
    "over_long_component": "a" * 300,
    "empty": "",
}


@pytest.mark.parametrize("kind", ["read", "write", "edit"])
@pytest.mark.parametrize("attack", sorted(ESCAPES))
def test_path_escape_is_denied_and_named(layout: tuple[Path, Path], attack: str, kind: str) -> None:
    root, _ = layout
    path = ESCAPES[attack].format(root=root)
    policy = create_coding_approval_policy(roots=[str(root)])
    decision = _check(policy, kind, path)
    assert not decision.allowed
    assert decision.reason is not None
    assert repr(path)[:60].strip("'")[:20] in decision.reason
    assert decision.details["check"] == "path"
    assert decision.details["path"] == path


ALLOWED = {
    "relative_file": "src/main.py",
    "absolute_inside": "{root}/src/main.py",
    "new_file": "src/new.py",
    "new_nested": "a/b/c.txt",
    "dotdot_inside": "src/../src/main.py",
    "symlink_dir_in": "link_dir_in/main.py",
    "symlink_file_in": "link_file_in",
    "dangling_symlink_in": "dangling_in",
    "root_itself": "{root}",
}


@pytest.mark.parametrize("attack", sorted(ALLOWED))
def test_contained_paths_are_allowed(layout: tuple[Path, Path], attack: str) -> None:
    root, _ = layout
    policy = create_coding_approval_policy(roots=[str(root)])
    assert _check(policy, "write", ALLOWED[attack].format(root=root)).allowed


def test_relative_paths_resolve_against_action_cwd(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    policy = create_coding_approval_policy(roots=[str(root)])
    inside = ExecutionAction(
        kind="read", operation="read", paths=("main.py",), metadata={"cwd": str(root / "src")}
    )
    outside = ExecutionAction(
        kind="read", operation="read", paths=("../../outside/secret.txt",),
        metadata={"cwd": str(root / "src")},
    )  # fmt: skip
    assert _decide(policy, inside).allowed
    assert not _decide(policy, outside).allowed


def _decide(policy: ExecutionPolicy, action: ExecutionAction) -> ExecutionDecision:
    decision = policy.check(action)
    assert isinstance(decision, ExecutionDecision)
    return decision


def test_every_path_of_an_action_must_be_inside(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    policy = create_coding_approval_policy(roots=[str(root)])
    action = ExecutionAction(kind="edit", operation="edit", paths=("src/main.py", "/etc/hosts"))
    decision = _decide(policy, action)
    assert not decision.allowed
    assert "/etc/hosts" in (decision.reason or "")


def test_shell_working_directory_outside_roots_is_denied(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    policy = create_coding_approval_policy(roots=[str(root)])
    action = ExecutionAction(kind="shell", operation="shell", command="ls", paths=(str(outside),))
    decision = _decide(policy, action)
    assert not decision.allowed
    assert str(outside) in (decision.reason or "")


def test_several_roots_each_contain(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    policy = create_coding_approval_policy(roots=[str(first), str(second)])
    assert _check(policy, "read", str(second / "x")).allowed
    assert not _check(policy, "read", str(tmp_path / "c" / "x")).allowed


@pytest.mark.parametrize(
    ("option", "value"),
    [("roots", []), ("roots", "/tmp"), ("roots", ["/definitely/not/here"])],
)
def test_bad_roots_raise_at_construction(option: str, value: object) -> None:
    from prism.core import ConfigurationError

    with pytest.raises(ConfigurationError, match=option):
        create_coding_approval_policy(roots=value)  # type: ignore[arg-type]


_PARTS = st.sampled_from(
    ["..", ".", "src", "main.py", "link_dir_out", "link_dir_in", "link_file_out", "dangling_out",
     "new", "", "outside", "secret.txt", "etc", "/"]
)  # fmt: skip


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(_PARTS, min_size=1, max_size=8), absolute=st.booleans())
def test_policy_never_allows_a_path_whose_realpath_is_outside(
    layout: tuple[Path, Path], parts: list[str], absolute: bool
) -> None:
    root, _ = layout
    path = "/".join(parts)
    if absolute:
        path = f"{root}/{path}"
    policy = create_coding_approval_policy(roots=[str(root)])
    decision = _check(policy, "read", path)
    real = os.path.realpath(os.path.join(root, path))
    inside = real == str(root) or real.startswith(f"{root}/")
    if decision.allowed:
        assert inside, (path, real)
    elif path and "\x00" not in path:
        assert not inside, (path, real, decision.reason)
