"""The PyPI reference server mcp-server-git (a test-only dependency), over stdio."""

from __future__ import annotations

from typing import TYPE_CHECKING

import mcp_prewarmed as prewarmed
import pytest
import trio

from prism.core import (
    DispatchOptions,
    PermissionRequest,
    ToolCall,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.mcp import StdioTransport, create_mcp_permission_policy, open_mcp_tools

if TYPE_CHECKING:
    from pathlib import Path

GIT = ("git", "-c", "user.name=Prism Test", "-c", "user.email=prism@example.invalid")


async def make_repo(path: Path) -> None:
    await trio.run_process([*GIT, "init", "-q", "-b", "main", str(path)])
    (path / "notes.txt").write_text("first line\n")
    await trio.run_process([*GIT, "-C", str(path), "add", "notes.txt"])
    await trio.run_process([*GIT, "-C", str(path), "commit", "-q", "-m", "the first commit"])
    (path / "notes.txt").write_text("first line\nsecond line\n")


@pytest.mark.parametrize(("protocol", "era"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_git_server_tools_run_on_both_eras(tmp_path: Path, protocol: str, era: str) -> None:
    repo = tmp_path / "repo"
    await make_repo(repo)
    transport = StdioTransport(*prewarmed.command("-m", "mcp_server_git", "-r", str(repo)))
    with trio.fail_after(60):
        async with open_mcp_tools(
            server_id="git",
            transport=transport,
            protocol=protocol,  # type: ignore[arg-type]
        ) as bridge:
            assert bridge.protocol_version == era
            assert not bridge.stale
            options = DispatchOptions(registry=create_tool_registry(bridge.tools))

            async def call(name: str, **arguments: object) -> str:
                result = await dispatch_tool_call(
                    ToolCall(id=name, name=f"mcp:git:{name}", arguments=arguments), options
                )
                assert not result.is_error, result.joined_text
                return result.joined_text

            status = await call("git_status", repo_path=str(repo))
            log = await call("git_log", repo_path=str(repo))
            diff = await call("git_diff_unstaged", repo_path=str(repo))
            names = {tool.name for tool in bridge.tools}
            info = dict(bridge.tool_info)
    assert "mcp:git:git_commit" in names
    assert "notes.txt" in status
    assert "the first commit" in log
    assert "+second line" in diff
    assert all(i.definition_hash for i in info.values())


async def test_an_untrusted_git_server_commit_asks(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    await make_repo(repo)
    transport = StdioTransport(*prewarmed.command("-m", "mcp_server_git", "-r", str(repo)))
    with trio.fail_after(60):
        async with open_mcp_tools(server_id="git", transport=transport) as bridge:
            policy = create_mcp_permission_policy([bridge])
            request = PermissionRequest(kind="tool", target="mcp:git:git_commit", action="execute")
            decision = await policy.check(request)  # type: ignore[misc]
    assert not decision.allowed
