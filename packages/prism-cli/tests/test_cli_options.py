"""Every public options class and factory of prism.cli refuses a wrong value the same way:
a ConfigurationError naming the option and carrying the value (issue 18 item 3)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from prism.cli import (
    AgentConfig,
    CommandRulesConfig,
    McpServerConfig,
    PermissionsConfig,
    PrismConfig,
    ServeAuthConfig,
    ServeConfig,
    ValidationConfig,
    WorkspaceConfig,
    load_config,
    parse_config,
)
from prism.core import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Callable

CASES: list[tuple[str, Callable[[], object], str, object]] = [
    ("agent model", lambda: AgentConfig(model=3), "AgentConfig.model", 3),  # type: ignore[arg-type]
    (
        "agent concurrency",
        lambda: AgentConfig(concurrency=0),
        "AgentConfig.concurrency",
        0,
    ),
    (
        "agent rounds",
        lambda: AgentConfig(max_tool_rounds=True),
        "AgentConfig.max_tool_rounds",
        True,
    ),
    ("roots", lambda: WorkspaceConfig(roots="src"), "WorkspaceConfig.roots", "src"),  # type: ignore[arg-type]
    ("root item", lambda: WorkspaceConfig(roots=("a", "")), "WorkspaceConfig.roots[1]", ""),
    ("sandbox", lambda: WorkspaceConfig(sandbox="docker"), "WorkspaceConfig.sandbox", "docker"),  # type: ignore[arg-type]
    ("read only", lambda: WorkspaceConfig(read_only=1), "WorkspaceConfig.read_only", 1),  # type: ignore[arg-type]
    ("command rule", lambda: CommandRulesConfig(allow=(1,)), "CommandRulesConfig.allow[0]", 1),  # type: ignore[arg-type]
    ("default", lambda: PermissionsConfig(default="maybe"), "PermissionsConfig.default", "maybe"),  # type: ignore[arg-type]
    ("validation", lambda: ValidationConfig(enabled="yes"), "ValidationConfig.enabled", "yes"),  # type: ignore[arg-type]
    (
        "server timeout",
        lambda: McpServerConfig(server_id="d", command="x", call_timeout_s=-1),
        "McpServerConfig.call_timeout_s",
        -1,
    ),
    (
        "server url",
        lambda: McpServerConfig(server_id="d", url="file:///etc/passwd"),
        "McpServerConfig.url",
        "file:///etc/passwd",
    ),
    ("server id", lambda: McpServerConfig(server_id="a b", command="x"), "McpServerConfig", "a b"),
    ("auth type", lambda: ServeAuthConfig(type="magic"), "ServeAuthConfig.type", "magic"),  # type: ignore[arg-type]
    (
        "auth verifier",
        lambda: ServeAuthConfig(type="oauth", verifier="not an import path"),
        "ServeAuthConfig.verifier",
        "not an import path",
    ),
    ("bearer without tokens", lambda: ServeAuthConfig(type="bearer"), "ServeAuthConfig", None),
    (
        "oauth field on bearer",
        lambda: ServeAuthConfig(type="bearer", token_env="T", issuer_url="https://a.example"),
        "ServeAuthConfig.issuer_url",
        "https://a.example",
    ),
    (
        "oauth without verifier",
        lambda: ServeAuthConfig(
            type="oauth", issuer_url="https://a.example", resource_server_url="https://g/mcp"
        ),
        "ServeAuthConfig.verifier",
        None,
    ),
    (
        "bearer field on oauth",
        lambda: ServeAuthConfig(
            type="oauth",
            issuer_url="https://a.example",
            resource_server_url="https://g/mcp",
            verifier="m:v",
            token_env="T",
        ),
        "ServeAuthConfig.token_env",
        "T",
    ),
    ("approver", lambda: ServeConfig(approver="ask"), "ServeConfig.approver", "ask"),  # type: ignore[arg-type]
    (
        "approve command",
        lambda: ServeConfig(approver="command"),
        "ServeConfig.approve_command",
        (),
    ),
    ("config part", lambda: PrismConfig(source="s", base_dir="/", agent=3), "PrismConfig.agent", 3),  # type: ignore[arg-type]
    (
        "config rotation",
        lambda: PrismConfig(source="s", base_dir="/", ledger_max_bytes=0),
        "PrismConfig.ledger_max_bytes",
        0,
    ),
    ("load path", lambda: load_config(3), "load_config.path", 3),  # type: ignore[arg-type]
    ("parse base", lambda: parse_config({}, base_dir=None), "parse_config.base_dir", None),  # type: ignore[arg-type]
    ("parse key", lambda: parse_config({"agent": {"model": ""}}), "agent.model", ""),
]


@pytest.mark.parametrize(
    ("build", "option", "value"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_wrong_option_names_the_option_and_the_value(
    build: Callable[[], object], option: str, value: object
) -> None:
    with pytest.raises(ConfigurationError) as info:
        build()
    assert info.value.option == option
    assert info.value.value == value
    assert str(info.value).startswith(option) or f" {option}: " in str(info.value)
