"""Wiring: a :class:`PrismConfig` becomes gated tools; a scripted session runs through them.

Everything the CLI runs goes through the same public pieces a library user
would wire by hand: MCP bridges from ``prism.mcp``, the coding tools from
``prism.coding.tools`` under ``create_coding_approval_policy`` and the
contained file operations, the JSON Schema validator and a rule permission
policy, all driven by ``prism.core``'s agent runtime.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Literal

import attrs

from prism.core import (
    AbortSignal,
    AssistantMessage,
    Limits,
    ModelRequest,
    PermissionPolicy,
    RunOptions,
    ScriptedProvider,
    ScriptedTurn,
    SingleShotLoop,
    TextContent,
    ToolDefinition,
    ToolFilter,
    ToolValidator,
    create_agent,
    create_rule_permission_policy,
)
from prism.mcp import McpToolBridge, StdioTransport, StreamableHttpTransport

from ._errors import CliError, CliConfigurationError
from ._preflight import check_servers
from ._render import CallRow, EventView
from ._trio import only_leaf, run_trio

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping, Sequence
    from pathlib import Path

    from rich.console import Console

    from prism.coding.security import ApprovalCallback, SandboxBackend
    from prism.core.ledger import RunLedger, ToolCallRecord
    from prism.mcp import McpElicitCallback

    from ._config import McpServerConfig, PrismConfig
    from ._ledgerfile import LedgerFailures
    from ._session import ScriptedSession

__all__ = [
    "RunReport",
    "Toolset",
    "open_mcp_server",
    "open_toolset",
    "rows_from_ledger",
    "run_command_session",
    "run_scripted_session",
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


@attrs.frozen(kw_only=True)
class RunReport:
    """What a scripted run did.

    Attributes:
        rows: one row per scripted call, in script order.
        rounds: tool rounds the agent executed.
        aborted: whether the run was aborted.
        final_text: the last assistant message's text.
        max_in_flight: the most calls that ran at once.
        sandbox: where shell commands ran (``"bubblewrap"``, ``"landlock (...)"`` or
            ``"none"``, with why when ``"auto"`` fell back).
    """

    rows: tuple[CallRow, ...]
    rounds: int
    aborted: bool
    final_text: str
    max_in_flight: int
    sandbox: str = "none"

    def to_json(self) -> dict[str, object]:
        """The report as a JSON object."""
        return {
            "rounds": self.rounds,
            "aborted": self.aborted,
            "final": self.final_text,
            "max_in_flight": self.max_in_flight,
            "sandbox": self.sandbox,
            "calls": [row.to_json() for row in self.rows],
        }


def transport_for(server: McpServerConfig) -> StdioTransport | StreamableHttpTransport:
    """The ``prism.mcp`` transport for one configured server."""
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


async def _sandbox(config: PrismConfig) -> tuple[SandboxBackend | None, str]:
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
        candidates.append(("bubblewrap", BubblewrapSandbox(writable_roots=roots)))
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


async def _coding_tools(
    config: PrismConfig, approve: ApprovalCallback | None = None
) -> tuple[list[ToolDefinition], str]:
    from prism.coding.security import (
        CommandRules,
        create_coding_approval_policy,
        create_contained_file_operations,
        create_sandbox_shell_operations,
    )
    from prism.coding.tools import create_coding_tools

    from ._ledgerfile import spill_directory

    roots = list(config.workspace.roots)
    rules = CommandRules(
        allow=config.commands.allow,
        deny=config.commands.deny,
        ask=config.commands.ask,
        use_default_deny=config.commands.use_default_deny,
    )
    sandbox, label = await _sandbox(config)
    # Without an approval callback (a scripted run, a pipe) nobody is asked, so
    # anything that would need approval is refused (and the model is told why).
    # With a working sandbox the policy runs in confined mode: what the sandbox
    # confines runs.
    policy = create_coding_approval_policy(
        roots=roots,
        approve=approve,
        read_only=config.workspace.read_only,
        command_rules=rules,
        sandbox=sandbox,
        readable=config.workspace.readable,
        protected_paths=config.workspace.protected_paths,
    )
    tools = create_coding_tools(
        roots[0],
        execution_policy=policy,
        file_operations=create_contained_file_operations(roots),
        shell_operations=None if sandbox is None else create_sandbox_shell_operations(sandbox),
        shell_options={"spill_dir": spill_directory()},
    )
    return list(tools), label


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


def _script(turns: Sequence[AssistantMessage], registry_names: Sequence[str]) -> list[ScriptedTurn]:
    """Scripted turns whose calls may name tools by registry name or by provider alias.

    A real model only sees provider-safe aliases (``mcp__docs__search``); a
    session written by hand naturally uses registry names (``mcp:docs:search``).
    Each turn is replayed as the model would send it: under the alias offered
    in that request, when the written name is a registry name.
    """
    from prism.core import provider_safe_name

    aliases = {name: provider_safe_name(name) for name in registry_names}

    def replay(turn: AssistantMessage) -> ScriptedTurn:
        def answer(request: ModelRequest) -> AssistantMessage:
            offered = {spec.name for spec in request.tools}
            calls = tuple(
                attrs.evolve(call, name=aliases[call.name])
                if call.name not in offered and aliases.get(call.name) in offered
                else call
                for call in turn.tool_calls
            )
            return attrs.evolve(turn, tool_calls=calls)

        return answer

    return [replay(turn) if turn.tool_calls else turn for turn in turns]


def rows_from_ledger(
    turns: Sequence[AssistantMessage],
    records: Sequence[ToolCallRecord],
    refusals: Mapping[str, str] | None = None,
) -> tuple[CallRow, ...]:
    """One summary row per scripted call, in script order, from the ledger's records.

    ``refusals`` maps call ids to the policy that refused them inside ``execute``.
    """
    refusals = refusals or {}
    by_id = {record.call_id: record for record in records}
    rows: list[CallRow] = []
    index = 0
    for turn_number, turn in enumerate(turns, start=1):
        for call in turn.tool_calls:
            index += 1
            record = by_id.get(call.id)
            if record is None:
                rows.append(
                    CallRow(
                        index=index,
                        turn=turn_number,
                        call_id=call.id,
                        tool_name=call.name,
                        status="cancelled",
                        blocked_reason=None,
                        duration_s=0.0,
                        detail="never started",
                    )
                )
                continue
            rows.append(
                CallRow(
                    index=index,
                    turn=turn_number,
                    call_id=call.id,
                    tool_name=record.tool_name,
                    status=record.status,
                    blocked_reason=record.blocked_reason,
                    duration_s=record.duration_s,
                    detail=record.result_preview or "",
                    refused_by=refusals.get(call.id),
                )
            )
    return tuple(rows)


async def run_scripted_session(
    session: ScriptedSession,
    toolset: Toolset,
    *,
    config: PrismConfig,
    ledger: RunLedger,
    view: EventView | None = None,
    signal: AbortSignal | None = None,
) -> RunReport:
    """Replay ``session`` through the agent runtime with every gate on.

    ``view`` receives every event (and counts calls in flight and policy refusals
    for the report). Cancellation: cancelling the caller cancels the run (the
    ledger keeps what finished); aborting ``signal`` ends the run with a valid
    transcript.

    Raises:
        CliError: the agent runtime refused the session (for example, it ran out of turns).
    """
    from prism.core import PrismError

    names = [tool.name for tool in toolset.tools]
    provider = ScriptedProvider(_script(session.turns, names))
    agent = create_agent(
        model=config.agent.model,
        provider=provider,
        tools=toolset.tools,
        validator=toolset.validator,
        permission=toolset.permission,
        filters=toolset.filters,
        loop=SingleShotLoop(concurrency=config.agent.concurrency),
        limits=Limits(max_tool_rounds=config.agent.max_tool_rounds),
        ledger=ledger,
    )
    options = RunOptions(on_event=view, signal=signal)
    try:
        result = await agent.session().run(session.prompt, options)
    except PrismError as exc:
        raise CliError(f"the session could not run: {exc}") from exc
    final = "\n".join(b.text for b in result.final.content if isinstance(b, TextContent))
    return RunReport(
        rows=rows_from_ledger(session.turns, ledger.records, view.refusals if view else None),
        rounds=result.rounds,
        aborted=result.aborted,
        final_text=final,
        max_in_flight=view.max_in_flight if view else 0,
        sandbox=toolset.sandbox,
    )


def run_command_session(
    loaded: PrismConfig,
    *,
    session: ScriptedSession | None,
    task: str,
    model: str | None,
    base_url: str | None,
    yes_mode: Literal["ask", "never"],
    target: Path,
    failures: LedgerFailures,
    out: Console,
    quiet: bool,
    live: bool | None,
) -> tuple[RunReport, str]:
    """What ``prism run`` runs: ``session`` replayed, or ``task`` for ``model``; and the run id.

    The ledger file is opened once the tools are up (a run that never started
    leaves none). With a model, Ctrl-C ends the run after the calls in flight
    answer (see :func:`run_model_task`).
    """
    from ._elicit import terminal_elicitor
    from ._ledgerfile import recording_ledger, writable_roots

    approver = None
    if model is not None:
        from ._model_run import terminal_approver

        approver = terminal_approver(yes_mode)
        if approver is not None:
            live = False  # a live display would draw over the questions
    elicit = terminal_elicitor()
    run_id = ""

    async def go() -> RunReport:
        nonlocal run_id
        async with open_toolset(loaded, approve=approver, elicit=elicit) as toolset:
            label = f"prism run {task}" if model is None else f"prism run --model {model}"
            with recording_ledger(
                target,
                label=label,
                failures=failures,
                fsync=loaded.ledger_fsync,
                max_bytes=loaded.ledger_max_bytes,
                roots=writable_roots(loaded),
                inside_roots=loaded.ledger_inside_roots,
            ) as run_ledger:
                run_id = run_ledger.run_id
                with EventView(out, quiet=quiet, live=live) as view:
                    if session is None:
                        from ._model_run import run_model_task

                        return await run_model_task(
                            task,
                            toolset,
                            model=str(model),
                            base_url=base_url,
                            config=loaded,
                            ledger=run_ledger,
                            view=view,
                            interruptible=True,
                        )
                    return await run_scripted_session(
                        session, toolset, config=loaded, ledger=run_ledger, view=view
                    )

    report = run_trio(go)
    return report, run_id
