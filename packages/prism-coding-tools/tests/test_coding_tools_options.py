"""Construction: bad options raise at once, naming the option and the value."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pytest

from prism.coding.tools import (
    CodingToolsConfigurationError,
    LocalShellOperations,
    ShellSpawnRequest,
    create_coding_tools,
    create_edit_tool,
    create_read_tool,
    create_shell_tool,
    create_write_tool,
)
from prism.core import ConfigurationError, PrismError

if TYPE_CHECKING:
    from pathlib import Path


def test_create_coding_tools_builds_the_four_named_tools(tmp_path: Path) -> None:
    tools = create_coding_tools(
        str(tmp_path),
        shell_options={"timeout_s": 5, "max_lines": 10},
        read_options={"max_lines": 7},
        edit_options={"max_file_bytes": 1000},
    )
    assert [tool.name for tool in tools] == ["read", "write", "edit", "shell"]
    assert [tool.exclusive for tool in tools] == [False, False, False, True]
    assert all(tool.parameters and tool.description for tool in tools)


@pytest.mark.parametrize(
    ("factory", "options", "named"),
    [
        (create_shell_tool, {"max_lines": 0}, "max_lines"),
        (create_shell_tool, {"max_bytes": -5}, "max_bytes"),
        (create_shell_tool, {"max_bytes": True}, "max_bytes"),
        (create_shell_tool, {"timeout_s": 0}, "timeout_s"),
        (create_shell_tool, {"timeout_s": math.nan}, "timeout_s"),
        (create_shell_tool, {"max_timeout_s": math.inf * 0}, "max_timeout_s"),
        (create_shell_tool, {"shell_path": ""}, "shell_path"),
        (create_shell_tool, {"operations": object()}, "operations"),
        (create_shell_tool, {"spawn_hook": "not callable"}, "spawn_hook"),
        (create_shell_tool, {"max_spill_bytes": 0}, "max_spill_bytes"),
        (create_read_tool, {"max_image_bytes": 0}, "max_image_bytes"),
        (create_read_tool, {"max_line_bytes": 2.5}, "max_line_bytes"),
        (create_read_tool, {"file_operations": "plain"}, "file_operations"),
        (create_read_tool, {"transform_image": 3}, "transform_image"),
        (create_write_tool, {"file_operations": 42}, "file_operations"),
        (create_edit_tool, {"max_file_bytes": 0}, "max_file_bytes"),
        (create_edit_tool, {"file_operations": []}, "file_operations"),
        (create_shell_tool, {"command_prefix": 3}, "command_prefix"),
        (create_shell_tool, {"spill_dir": ""}, "spill_dir"),
        (create_shell_tool, {"env": ["A=1"]}, "env"),
        (create_shell_tool, {"max_line_bytes": "9"}, "max_line_bytes"),
        (create_read_tool, {"max_bytes": 1 << 40}, "max_bytes"),
        (create_read_tool, {"max_lines": None}, "max_lines"),
    ],
)
def test_bad_option_raises_naming_the_option(
    tmp_path: Path, factory: Any, options: dict[str, Any], named: str
) -> None:
    # one check for every factory (prism.core.options): "<factory>.<option> must be ..., got ..."
    with pytest.raises(
        CodingToolsConfigurationError, match=f"{factory.__name__}.{named} must be"
    ) as caught:
        factory(str(tmp_path), **options)
    assert caught.value.option == f"{factory.__name__}.{named}"
    assert caught.value.value is options[named]
    assert isinstance(caught.value, ConfigurationError)
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, PrismError)


@pytest.mark.parametrize("cwd", ["", "a\0b", 17])
@pytest.mark.parametrize(
    "factory", [create_read_tool, create_write_tool, create_edit_tool, create_shell_tool]
)
def test_bad_cwd_raises(cwd: Any, factory: Any) -> None:
    with pytest.raises(CodingToolsConfigurationError, match="cwd") as caught:
        factory(cwd)
    assert (caught.value.option, caught.value.value) == (f"{factory.__name__}.cwd", cwd)


@pytest.mark.parametrize(
    ("group", "options", "option"),
    [
        ("shell_options", {"max_lines": 0}, "create_shell_tool.max_lines"),
        ("read_options", {"max_image_bytes": -1}, "create_read_tool.max_image_bytes"),
        ("edit_options", {"max_file_bytes": 0.5}, "create_edit_tool.max_file_bytes"),
    ],
)
def test_create_coding_tools_names_the_tool_option(
    tmp_path: Path, group: str, options: dict[str, Any], option: str
) -> None:
    build: Any = create_coding_tools
    with pytest.raises(CodingToolsConfigurationError) as caught:
        build(str(tmp_path), **{group: options})
    assert caught.value.option == option


def test_relative_cwd_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    tool = create_shell_tool(".")
    assert str(tmp_path) in (tool.description or "")


def test_unknown_keyword_raises_type_error(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="colour"):
        create_read_tool(str(tmp_path), colour="blue")  # type: ignore[call-arg]


def test_kill_grace_is_validated() -> None:
    with pytest.raises(CodingToolsConfigurationError, match="kill_grace_s"):
        LocalShellOperations(kill_grace_s=-1)
    with pytest.raises(CodingToolsConfigurationError, match="kill_grace_s"):
        LocalShellOperations(kill_grace_s=600)


def test_spawn_request_env_must_be_strings() -> None:
    with pytest.raises(TypeError, match="env must map str to str"):
        ShellSpawnRequest(command="true", shell_path="sh", cwd="/", env={"A": 1})  # type: ignore[dict-item]


def test_spawn_request_argv_is_shell_dash_c_command() -> None:
    request = ShellSpawnRequest(command="echo hi", shell_path="/bin/sh", cwd="/", env={})
    assert request.argv == ("/bin/sh", "-c", "echo hi")
