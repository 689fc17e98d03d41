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

from ._app import main as main
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
