"""The recommended wiring, end to end through the coding tools and the dispatcher."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from prism.coding.security import (
    BubblewrapSandbox,
    create_coding_approval_policy,
    create_contained_file_operations,
    create_sandbox_shell_operations,
)
from prism.coding.tools import create_coding_tools
from prism.core import (
    DispatchOptions,
    ToolCall,
    ToolResult,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.core.ledger import RunLedger

if TYPE_CHECKING:
    from pathlib import Path

    from prism.core import JsonObject


async def _call(root: Path, name: str, arguments: JsonObject) -> tuple[ToolResult, RunLedger]:
    policy = create_coding_approval_policy(roots=[str(root)])
    tools = create_coding_tools(
        str(root),
        execution_policy=policy,
        file_operations=create_contained_file_operations([str(root)]),
        shell_operations=create_sandbox_shell_operations(BubblewrapSandbox([str(root)])),
    )
    ledger = RunLedger()
    options = DispatchOptions(registry=create_tool_registry(tools), ledger=ledger)
    result = await dispatch_tool_call(ToolCall(id="1", name=name, arguments=arguments), options)
    return result, ledger


async def test_read_inside_works(root: Path) -> None:
    (root / "a.txt").write_text("hello")
    result, _ = await _call(root, "read", {"path": "a.txt"})
    assert not result.is_error
    assert "hello" in result.joined_text


async def test_symlink_escape_is_an_error_result_naming_the_path(root: Path) -> None:
    os.symlink("/etc/passwd", root / "pw")
    result, ledger = await _call(root, "read", {"path": "pw"})
    assert result.is_error
    assert "outside the roots" in result.joined_text
    assert "root:" not in result.joined_text
    assert ledger.records[0].status == "error"


async def test_sudo_is_denied_before_anything_runs(root: Path) -> None:
    result, _ = await _call(root, "shell", {"command": "touch made; sudo id"})
    assert result.is_error
    assert "sudo" in result.joined_text
    assert not (root / "made").exists()
