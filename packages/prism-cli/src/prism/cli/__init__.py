"""prism.cli: the ``prism`` command, and the ``prism.toml`` and session models it reads.

The command runs scripted agent sessions and single MCP calls through the same
gates a library user wires by hand (permission rules, JSON Schema validation,
the coding execution policy, bounded parallelism) and writes a JSONL ledger::

    prism demo                         # no model, no network, no setup
    prism run session.json --config prism.toml
    prism mcp tools --stdio "python -m prism.cli.demo_server"
    prism ledger show prism-ledger.jsonl

The configuration model is usable from Python too; errors name the bad key::

    from prism.cli import CliConfigurationError, parse_config

    config = parse_config({"agent": {"concurrency": 4}}, base_dir="/srv/repo")
    assert config.workspace.roots == ("/srv/repo",)
    try:
        parse_config({"agent": {"tool_concurency": 4}})
    except CliConfigurationError as exc:
        assert exc.key == "agent.tool_concurency"
"""

from typing import TYPE_CHECKING

from ._main import main as main

if TYPE_CHECKING:
    from ._config import AgentConfig as AgentConfig
    from ._config import CommandRulesConfig as CommandRulesConfig
    from ._config import McpServerConfig as McpServerConfig
    from ._config import PermissionsConfig as PermissionsConfig
    from ._config import PrismConfig as PrismConfig
    from ._config import ServeAuthConfig as ServeAuthConfig
    from ._config import ServeConfig as ServeConfig
    from ._config import ValidationConfig as ValidationConfig
    from ._config import WorkspaceConfig as WorkspaceConfig
    from ._convert import load_config as load_config
    from ._convert import parse_config as parse_config
    from ._errors import CliConfigurationError as CliConfigurationError
    from ._errors import CliError as CliError
    from ._errors import SessionFormatError as SessionFormatError
    from ._session import ScriptedSession as ScriptedSession
    from ._session import load_session as load_session
    from ._session import parse_session as parse_session

# Loaded when first used: `prism serve` must not pay for them before it answers a host.
_LAZY = {
    "AgentConfig": "._config",
    "CommandRulesConfig": "._config",
    "McpServerConfig": "._config",
    "PermissionsConfig": "._config",
    "PrismConfig": "._config",
    "ServeAuthConfig": "._config",
    "ServeConfig": "._config",
    "ValidationConfig": "._config",
    "WorkspaceConfig": "._config",
    "load_config": "._convert",
    "parse_config": "._convert",
    "CliConfigurationError": "._errors",
    "CliError": "._errors",
    "SessionFormatError": "._errors",
    "ScriptedSession": "._session",
    "load_session": "._session",
    "parse_session": "._session",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'prism.cli' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "AgentConfig",
    "CliConfigurationError",
    "CliError",
    "CommandRulesConfig",
    "McpServerConfig",
    "PermissionsConfig",
    "PrismConfig",
    "ScriptedSession",
    "ServeAuthConfig",
    "ServeConfig",
    "SessionFormatError",
    "ValidationConfig",
    "WorkspaceConfig",
    "load_config",
    "load_session",
    "main",
    "parse_config",
    "parse_session",
]
