"""Wiring: a :class:`PrismConfig` becomes gated tools (MCP bridges, the coding tools, the gates).

Everything the CLI runs goes through the same public pieces a library user
would wire by hand: MCP bridges from ``prism.mcp``, the coding tools from
``prism.coding.tools`` under ``create_coding_approval_policy`` and the
contained file operations, the JSON Schema validator and a rule permission
policy.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import attrs

from prism.core import (
    PermissionPolicy,
    ToolDefinition,
    ToolFilter,
    ToolValidator,
    create_rule_permission_policy,
)

from ._errors import CliError
from ._preflight import check_roots, check_servers
from ._trio import only_leaf

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from prism.coding.security import ApprovalCallback, CommandRules, SandboxBackend
    from prism.core import ExecutionPolicy

    # Toolset's annotations are never evaluated (nothing resolves or structures its
    # types): the bridge's class is not imported, nor the MCP SDK behind it, at run time.
    from prism.mcp import (
        McpElicitCallback,
        McpToolBridge,  # noqa: TC004
        StdioTransport,
        StreamableHttpTransport,
    )

    from ._config import McpServerConfig, PrismConfig

__all__ = [
    "Toolset",
    "choose_sandbox",
    "open_mcp_server",
    "open_toolset",
    "transport_for",
]


@attrs.define(eq=False)
class Toolset:
    """The tools and gates a configuration produced (alive while its block is open).

    ``sandbox`` says where shell commands run: ``"bubblewrap"``, ``"landlock (...)"``
    or ``"none"``, with why when ``"auto"`` fell back.
    ``filters`` hide tools from the model and refuse calls to them (``tool_denied``).
    """

    tools: list[ToolDefinition]
    permission: PermissionPolicy
    validator: ToolValidator | None
    bridges: list[McpToolBridge] = attrs.field(factory=list)
    sandbox: str = "none"
    filters: tuple[ToolFilter, ...] = ()


def transport_for(server: McpServerConfig) -> StdioTransport | StreamableHttpTransport:
    """The ``prism.mcp`` transport for one configured server."""
    # prism.mcp imports the MCP SDK (about a CPU-second): only commands that reach a
    # server pay for it, not `prism policy check` or `prism config check`.
    from prism.mcp import StdioTransport, StreamableHttpTransport

    if server.url is not None:
        return StreamableHttpTransport(url=server.url, headers=dict(server.headers))
    assert server.command is not None
    return StdioTransport(
        command=server.command, args=tuple(server.args), env=server.env, cwd=server.cwd
    )


@contextlib.asynccontextmanager
async def open_mcp_server(
    server: McpServerConfig, *, elicit: McpElicitCallback | None = None
) -> AsyncIterator[McpToolBridge]:
    """Connect one configured MCP server (closed when the block exits).

    ``elicit`` answers the server's elicitation requests (``None``: the
    capability is not declared).

    Cancellation: the server is shut down on the way out, whatever happened.

    Raises:
        CliError: the server could not be started or did not complete the handshake.
    """
    from prism.core import PrismError
    from prism.mcp import McpBridgeError, open_mcp_tools

    async with contextlib.AsyncExitStack() as stack:
        try:
            bridge = await stack.enter_async_context(
                open_mcp_tools(
                    server_id=server.server_id,
                    transport=transport_for(server),
                    list_cache_ttl_s=server.list_cache_ttl_s,
                    call_timeout_s=server.call_timeout_s,
                    connect_timeout_s=server.connect_timeout_s,
                    max_call_s=server.max_call_s,
                    max_result_bytes=server.max_result_bytes,
                    protocol=server.protocol,
                    elicit=elicit,
                )
            )
        except Exception as exc:
            # A nursery inside the bridge may wrap the failure in a group: judge its leaf.
            leaf = only_leaf(exc) if isinstance(exc, ExceptionGroup) else exc
            if not isinstance(leaf, (PrismError, OSError, ValueError, TypeError)):
                raise
            # The bridge's error already names the server: say it once.
            reason = leaf.reason if isinstance(leaf, McpBridgeError) else str(leaf)
            raise CliError(f"MCP server {server.server_id!r} did not start: {reason}") from exc
        yield bridge


async def choose_sandbox(config: PrismConfig) -> tuple[SandboxBackend | None, str]:
    """The sandbox the configuration asks for (None: run on the host), and a word saying which.

    ``"auto"`` means what it means in ``open_secure_coding_tools``: bubblewrap
    (confined mode) when it works here, else Landlock (proved-safe mode), else
    the host (proved-safe mode); the word says which and why.
    """
    from prism.coding.security import BubblewrapSandbox, LandlockSandbox, SandboxUnavailableError

    mode = config.workspace.sandbox
    if mode == "none":
        return None, "none"
    roots = list(config.workspace.roots)
    candidates: list[tuple[str, SandboxBackend]] = []
    if mode in ("auto", "bubblewrap"):
        # the same protected list as the policy's: the copy-back leaves them out too
        protected = config.workspace.protected_paths
        candidates.append(
            ("bubblewrap", BubblewrapSandbox(writable_roots=roots, protected_paths=protected))
        )
    if mode in ("auto", "landlock"):
        candidates.append(("landlock", LandlockSandbox(writable_roots=roots)))
    failed: list[str] = []
    for name, sandbox in candidates:
        try:
            await sandbox.ensure_available()
        except SandboxUnavailableError as exc:
            if mode != "auto":
                raise CliError(
                    f"{config.source}: workspace.sandbox: {name} cannot isolate commands "
                    f'here ({exc}); set sandbox = "none" to run them on the host'
                ) from exc
            failed.append(name)
            continue
        if name == "landlock":
            unavailable = "; bubblewrap unavailable" if failed else ""
            return sandbox, f"landlock (proved-safe only{unavailable})"
        return sandbox, name
    return None, f"none ({' and '.join(failed)} unavailable)"


def command_rules(config: PrismConfig) -> CommandRules:
    """The ``[commands]`` table as the command policy's rules."""
    from prism.coding.security import CommandRules

    return CommandRules(
        allow=config.commands.allow,
        deny=config.commands.deny,
        ask=config.commands.ask,
        use_default_deny=config.commands.use_default_deny,
    )


def coding_tools(
    config: PrismConfig, policy: ExecutionPolicy, sandbox: SandboxBackend | None
) -> list[ToolDefinition]:
    """The coding tools over the workspace roots, gated by ``policy``, commands in ``sandbox``.

    Raises:
        CliError: the shell tool's spill folder lies inside a writable root.
    """
    from prism.coding.security import (
        create_contained_file_operations,
        create_sandbox_shell_operations,
    )
    from prism.coding.tools import create_coding_tools

    from ._ledgerfile import spill_directory, writable_roots

    roots = list(config.workspace.roots)
    spill = spill_directory(writable_roots(config), allowed=config.ledger_inside_roots)
    return list(
        create_coding_tools(
            roots[0],
            execution_policy=policy,
            file_operations=create_contained_file_operations(roots),
            shell_operations=None if sandbox is None else create_sandbox_shell_operations(sandbox),
            shell_options={"spill_dir": spill},
        )
    )


async def _coding_tools(
    config: PrismConfig, approve: ApprovalCallback | None = None
) -> tuple[list[ToolDefinition], str]:
    from prism.coding.security import create_coding_approval_policy

    sandbox, label = await choose_sandbox(config)
    # Without an approval callback (a scripted run, a pipe) nobody is asked, so
    # anything that would need approval is refused (and the model is told why).
    # With a working sandbox the policy runs in confined mode: what the sandbox
    # confines runs.
    policy = create_coding_approval_policy(
        roots=list(config.workspace.roots),
        approve=approve,
        read_only=config.workspace.read_only,
        command_rules=command_rules(config),
        sandbox=sandbox,
        readable=config.workspace.readable,
        protected_paths=config.workspace.protected_paths,
    )
    return coding_tools(config, policy, sandbox), label


@contextlib.asynccontextmanager
async def open_toolset(
    config: PrismConfig,
    *,
    approve: ApprovalCallback | None = None,
    elicit: McpElicitCallback | None = None,
) -> AsyncIterator[Toolset]:
    """Start every configured MCP server and build the tools and gates.

    ``approve`` answers the coding policy's approval questions (``None``: every
    action that needs approval is refused); ``elicit`` answers the servers'
    elicitation requests.

    Cancellation: servers are closed on the way out, whatever happened.

    Raises:
        CliError: a server did not start, or the coding tools could not be built.
    """
    from prism.validation.jsonschema import create_json_schema_tool_validator

    permission = create_rule_permission_policy(
        allow=config.permissions.allow,
        deny=config.permissions.deny,
        default=config.permissions.default,
    )
    validator = (
        create_json_schema_tool_validator(missing_schema=config.validation.missing_schema)
        if config.validation.enabled
        else None
    )
    async with contextlib.AsyncExitStack() as stack:
        tools: list[ToolDefinition] = []
        bridges: list[McpToolBridge] = []
        sandbox = "none"
        if config.workspace.coding_tools:
            check_roots(config)
            try:
                coding, sandbox = await _coding_tools(config, approve)
            except (ValueError, TypeError, OSError) as exc:
                raise CliError(f"cannot build the coding tools: {exc}") from exc
            tools.extend(coding)
        check_servers(config)  # every server's command, before the first one starts
        for server in config.mcp_servers:
            bridge = await stack.enter_async_context(open_mcp_server(server, elicit=elicit))
            bridges.append(bridge)
            tools.extend(bridge.tools)
        yield Toolset(
            tools=tools,
            permission=permission,
            validator=validator,
            bridges=bridges,
            sandbox=sandbox,
        )
