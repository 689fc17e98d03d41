"""What is checked before anything starts: by ``run``, ``chat``, ``serve`` and ``config check``.

``prism config check`` applies every check here, so a configuration it passes
does not fail ``prism run`` or ``prism serve`` on something they check first.
Messages name the user's words: the flag or the ``prism.toml`` key.
"""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

from ._config import http_url_problem
from ._errors import CliConfigurationError, CliError

if TYPE_CHECKING:
    from ._config import McpServerConfig, PrismConfig

__all__ = [
    "check_before_run",
    "check_model_flags",
    "check_roots",
    "check_servers",
]

# Where each model provider's key comes from (as prism.providers reads it).
_KEY_VARIABLES = {
    "openai": "OPENAI_API_KEY",
    "openai-responses": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
}


def check_model_flags(model: str | None, base_url: str | None) -> None:
    """``--model PROVIDER:MODEL`` and ``--base-url URL``, before anything is started.

    Raises:
        CliError: naming the flag: a spec that is not ``PROVIDER:MODEL`` with a
            known provider, a URL that is not http(s) with a host, a
            ``--base-url`` without ``--model``, or no key for the provider.
    """
    if model is None:
        if base_url is not None:
            raise CliError("--base-url applies only with --model")
        return
    provider, sep, name = model.partition(":")
    if not sep or not name.strip() or provider not in _KEY_VARIABLES:
        raise CliError(
            f"--model must be PROVIDER:MODEL with PROVIDER one of "
            f"{', '.join(_KEY_VARIABLES)} (for example openai:gpt-4.1), got {model!r}"
        )
    if base_url is not None:
        problem = http_url_problem(base_url)
        if problem is not None:
            raise CliError(
                f"--base-url {problem} (for example http://127.0.0.1:8000/v1), got {base_url!r}"
            )
        return  # a local server usually takes no key
    variable = _KEY_VARIABLES[provider]
    if not os.environ.get(variable):
        raise CliError(
            f"--model {model}: no API key: set {variable} in the environment "
            "(or give --base-url for a server that needs none)"
        )


def _server_command_problem(server: McpServerConfig) -> str | None:
    """Why ``server.command`` cannot be started as the bridge would start it (None: it can)."""
    command = server.command
    assert command is not None
    env = server.env or {}
    if os.sep in command:
        path = os.path.join(server.cwd or os.getcwd(), command)
        if not os.path.isfile(path) or not os.access(path, os.X_OK):
            return f"{command!r} is not an executable file"
        return None
    if shutil.which(command, path=env.get("PATH", os.environ.get("PATH", os.defpath))) is None:
        return f"{command!r} is not found on PATH"
    return None


def check_servers(config: PrismConfig) -> None:
    """Every ``[mcp.servers.<id>]`` can be started: its folder exists, its command is found.

    Raises:
        CliConfigurationError: naming the file and ``mcp.servers.<id>.<key>``.
    """
    for server in config.mcp_servers:
        key = f"mcp.servers.{server.server_id}"
        if server.command is None:
            continue
        if server.cwd is not None and not os.path.isdir(server.cwd):
            raise CliConfigurationError(
                config.source,
                f"{key}.cwd",
                f"must be an existing folder, got {server.cwd!r}",
                value=server.cwd,
            )
        problem = _server_command_problem(server)
        if problem is not None:
            raise CliConfigurationError(
                config.source, f"{key}.command", problem, value=server.command
            )


def check_before_run(config: PrismConfig) -> None:
    """What ``prism run`` checks before it starts anything: roots and servers."""
    if config.workspace.coding_tools:
        check_roots(config)
    check_servers(config)


def check_roots(config: PrismConfig) -> None:
    """Every workspace root must be a folder.

    Raises:
        CliConfigurationError: naming the file, ``workspace.roots[i]`` and the folder.
    """
    import os

    for index, root in enumerate(config.workspace.roots):
        if not os.path.isdir(root):
            raise CliConfigurationError(
                config.source,
                f"workspace.roots[{index}]",
                f"must be an existing folder, got {root!r}",
                value=root,
            )
