"""A fake git directory in a root must never make the host's next git command run code.

Git's discovery looks at each directory, from the working directory up: its
``.git`` (a directory, or a file naming one with ``gitdir:``), then the
directory itself as a bare repository (a valid ``HEAD``, ``objects/``,
``refs/``). A ``config`` next to a planted ``HEAD`` then names programs the
host's ``git status`` runs (``core.fsmonitor``). Real git, real bubblewrap,
and a marker the planted command would leave.
"""

from __future__ import annotations

import os
import subprocess
from typing import TYPE_CHECKING

import pytest

from prism.coding.security import (
    BubblewrapSandbox,
    CommandRules,
    SecureCodingTools,
    create_sandbox_shell_operations,
    open_secure_coding_tools,
)
from prism.coding.security._protected import valid_git_head
from prism.core import DispatchOptions, ToolCall, create_tool_registry
from prism.core import dispatch_tool_call as dispatch

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from prism.coding.tools import ShellExit
    from prism.core import ToolResult

    RunShell = Callable[..., Awaitable[tuple[ShellExit, str]]]

pytestmark = pytest.mark.git


def _config(marker: Path) -> str:
    return (
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = .\n"
        f"\tfsmonitor = touch {marker}\n"
    )


def _host_env(home: Path) -> dict[str, str]:
    # the host's git with its defaults (safe.bareRepository=all), no user or system config
    return {
        **os.environ,
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }


def _host_git(where: Path, home: Path) -> None:
    env = _host_env(home)
    for argv in (["git", "status", "--short"], ["git", "commit", "-q", "--allow-empty", "-m", "x"]):
        subprocess.run(argv, cwd=where, env=env, capture_output=True, check=False, timeout=60)


def _repo(path: Path, home: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    env = _host_env(home)
    subprocess.run(["git", "init", "-q", str(path)], check=True, env=env)
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "init"], cwd=path, check=True,
                   env=env)  # fmt: skip


async def _call(tools: SecureCodingTools, name: str, **arguments: object) -> ToolResult:
    options = DispatchOptions(registry=create_tool_registry(tools.tools))
    return await dispatch(ToolCall(id="1", name=name, arguments=arguments), options)


async def _plant_with_the_write_tool(root: Path, marker: Path, *, break_dot_git: bool) -> None:
    async with open_secure_coding_tools([str(root)], sandbox="none", approve=None) as secure:
        if break_dot_git:
            await _call(secure, "write", path=".git/HEAD", content="garbage\n")
        await _call(secure, "write", path="HEAD", content="ref: refs/heads/main\n")
        await _call(secure, "write", path="objects/x", content="")
        await _call(secure, "write", path="refs/heads/x", content="")
        await _call(secure, "write", path="config", content=_config(marker))


async def test_variant_a_a_bare_repository_below_a_repository(tmp_path: Path) -> None:
    home, marker = tmp_path / "home", tmp_path / "MARKER"
    home.mkdir()
    _repo(tmp_path / "P", home)
    root = tmp_path / "P" / "sub"
    root.mkdir()
    await _plant_with_the_write_tool(root, marker, break_dot_git=False)
    _host_git(root, home)
    assert not marker.exists()
    assert not (root / "HEAD").exists()


async def test_variant_b_a_root_repository_made_invalid(tmp_path: Path) -> None:
    home, marker = tmp_path / "home", tmp_path / "MARKER"
    home.mkdir()
    root = tmp_path / "repo"
    _repo(root, home)
    head = (root / ".git" / "HEAD").read_bytes()
    await _plant_with_the_write_tool(root, marker, break_dot_git=True)
    _host_git(root, home)
    assert not marker.exists()
    assert (root / ".git" / "HEAD").read_bytes() == head


async def test_the_write_tool_never_writes_in_a_git_directory_or_a_git_file(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    root = tmp_path / "repo"
    _repo(root, home)
    (root / "sub").mkdir()
    async with open_secure_coding_tools([str(root)], sandbox="none", approve=None) as secure:
        results = [
            await _call(secure, "write", path=".git/refs/heads/x", content="0" * 40 + "\n"),
            await _call(secure, "write", path="sub/.git", content=f"gitdir: {tmp_path}\n"),
            await _call(secure, "write", path="sub/.git/HEAD", content="ref: refs/heads/m\n"),
            await _call(secure, "write", path="sub/HEAD", content="ref: refs/heads/m\n"),
            await _call(secure, "write", path="sub/commondir", content=f"{tmp_path}\n"),
        ]
        fine = await _call(secure, "write", path="sub/HEADER.md", content="ok\n")
    assert all(r.is_error for r in results), [r.joined_text for r in results]
    assert not (root / ".git" / "refs" / "heads" / "x").exists()
    assert sorted(os.listdir(root / "sub")) == ["HEADER.md"]
    assert not fine.is_error


_VARIANT_C = (
    'echo garbage > .git/HEAD && echo "ref: refs/heads/main" > HEAD && mkdir -p objects refs '
    '&& printf "[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n\\tworktree = .\\n'
    '\\tfsmonitor = touch {marker}\\n" > config; echo attempted'
)


@pytest.mark.bwrap
async def test_variant_c_the_confined_policy_asks(tmp_path: Path) -> None:
    home, marker = tmp_path / "home", tmp_path / "MARKER"
    home.mkdir()
    root = tmp_path / "repo"
    _repo(root, home)
    rules = CommandRules(deny=["sudo *", "git commit *", "touch *"])
    async with open_secure_coding_tools([str(root)], approve=None, command_rules=rules) as secure:
        assert secure.mode == "confined"
        result = await _call(secure, "shell", command=_VARIANT_C.format(marker=marker))
    _host_git(root, home)
    assert not marker.exists()
    assert result.is_error
    assert not (root / "HEAD").exists()


@pytest.mark.bwrap
@pytest.mark.parametrize("where", ["root", "below"])
async def test_variant_c_the_copy_back_leaves_the_fake_repository_out(
    tmp_path: Path, run_shell: RunShell, where: str
) -> None:
    # as if approved (or written by a program the policy cannot see into): the sandbox alone
    home, marker = tmp_path / "home", tmp_path / "MARKER"
    home.mkdir()
    if where == "root":
        root = tmp_path / "repo"
        _repo(root, home)
        command = _VARIANT_C.format(marker=marker)
    else:
        _repo(tmp_path / "P", home)
        root = tmp_path / "P" / "sub"
        root.mkdir()
        command = _VARIANT_C.format(marker=marker).replace("echo garbage > .git/HEAD && ", "")
    head = (root / ".git" / "HEAD").read_bytes() if where == "root" else None
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    _, output = await run_shell(ops, command, root)
    assert "attempted" in output
    _host_git(root, home)
    assert not marker.exists()
    assert "HEAD" in output  # reported as left out
    assert not (root / "HEAD").exists()
    if head is not None:
        assert (root / ".git" / "HEAD").read_bytes() == head


@pytest.mark.bwrap
async def test_the_copy_back_keeps_a_valid_head_and_git_work(
    tmp_path: Path, run_shell: RunShell
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    root = tmp_path / "repo"
    _repo(root, home)
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    env = {k: v for k, v in _host_env(home).items() if k.startswith("GIT_")}
    exported = " ".join(f"{k}={v}" for k, v in env.items())
    await run_shell(ops, f"export {exported}; git switch -q -c topic && git commit -q "
                    "--allow-empty -m two", root)  # fmt: skip
    assert (root / ".git" / "HEAD").read_text() == "ref: refs/heads/topic\n"
    await run_shell(ops, "git checkout -q --detach", root)
    assert valid_git_head((root / ".git" / "HEAD").read_bytes())


@pytest.mark.parametrize(
    ("content", "valid"),
    [
        (b"ref: refs/heads/main\n", True),
        (b"ref: refs/heads/main", True),
        (b"0123456789abcdef0123456789abcdef01234567\n", True),
        (b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n", True),
        (b"garbage\n", False),
        (b"", False),
        (b"ref: HEAD\n", False),
        (b"ref: refs/heads/../../x\n", False),
        (b"0123456789ABCDEF0123456789ABCDEF01234567\n", False),
        (b"ref: refs/heads/main\nmore\n", False),
    ],
)
def test_what_counts_as_a_valid_head(content: bytes, valid: bool) -> None:
    assert valid_git_head(content) is valid


@pytest.mark.bwrap
@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("rm .git/HEAD", "keeps its HEAD"),
        ("printf 'ref: refs/heads/%05000d\\n' 0 > .git/HEAD", "not a valid ref"),
        ("echo garbage > .git/HEAD", "not a valid ref"),
    ],
)
async def test_the_copy_back_never_makes_a_git_directory_invalid(
    tmp_path: Path, run_shell: RunShell, command: str, reason: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    root = tmp_path / "repo"
    _repo(root, home)
    head = (root / ".git" / "HEAD").read_bytes()
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    _, output = await run_shell(ops, command, root)
    assert reason in output
    assert (root / ".git" / "HEAD").read_bytes() == head
