"""What ``prism serve`` runs: the gateway over the configured tools, with ``[serve]`` applied."""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from prism.core import ConfigurationError

from ._errors import CliConfigurationError, CliError
from ._trio import run_trio

if TYPE_CHECKING:
    from prism.gateway import BearerAuth, DownstreamServer, HttpOptions, OAuthResourceServer

    from ._config import McpServerConfig, PrismConfig, ServeAuthConfig

__all__ = ["ServeRequest", "check_serve", "http_auth", "serve"]

_TOKEN_ENV = "PRISM_GATEWAY_TOKEN"


@attrs.frozen(kw_only=True)
class ServeRequest:
    """The command line's part: where to listen, and what overrides ``[serve]``."""

    address: tuple[str, int] | None = None
    token_file: Path | None = None
    origins: tuple[str, ...] = ()
    stateless: bool = False
    approve_command: tuple[str, ...] | None = None
    ledger: Path | None = None


def _read_tokens(file: Path, source: str) -> list[str]:
    try:
        return file.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CliError(f"{source}: {file}: {exc.strerror or exc}") from exc


def _verifier(config: PrismConfig, auth: ServeAuthConfig) -> object:
    """The verifier ``verifier = "module:name"`` names (a class or a factory is called)."""
    assert auth.verifier is not None
    module_name, _, attribute = auth.verifier.partition(":")
    key = "serve.auth.verifier"
    try:
        found: object = importlib.import_module(module_name)
        for part in attribute.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        raise CliConfigurationError(
            config.source, key, f"cannot import {auth.verifier!r} ({exc})", value=auth.verifier
        ) from exc
    if isinstance(found, type) or (
        callable(found) and not callable(getattr(found, "verify_token", None))
    ):
        found = found()  # a class or a factory: the verifier is what it makes
    return found


def http_auth(
    config: PrismConfig, request: ServeRequest
) -> BearerAuth | OAuthResourceServer | None:
    """The HTTP auth: ``--token-file``, else ``[serve.auth]``, else ``$PRISM_GATEWAY_TOKEN``."""
    from prism.gateway import BearerAuth, OAuthResourceServer

    auth = config.serve.auth
    lines: list[str] = []
    if request.token_file is not None:
        lines = _read_tokens(request.token_file, "--token-file")
    elif auth is None:
        lines = [os.environ.get(_TOKEN_ENV, "")]
    elif auth.type == "bearer":
        if auth.token_env is not None:
            lines.append(os.environ.get(auth.token_env, ""))
        if auth.token_file is not None:
            lines += _read_tokens(Path(auth.token_file), f"{config.source}: serve.auth.token_file")
    else:
        verifier = _verifier(config, auth)  # a CliConfigurationError naming serve.auth.verifier
        try:
            return OAuthResourceServer(
                verifier=verifier,
                issuer_url=str(auth.issuer_url),
                resource_server_url=str(auth.resource_server_url),
                required_scopes=auth.required_scopes,
            )
        except ConfigurationError as exc:  # the gateway's own checks
            raise CliConfigurationError(
                config.source, "serve.auth", str(exc), value=exc.value
            ) from exc
    tokens = tuple(line.strip() for line in lines if line.strip())
    if not tokens:
        if auth is not None and request.token_file is None:
            raise CliConfigurationError(
                config.source, "serve.auth", "no token found in token_env or token_file"
            )
        return None
    try:
        return BearerAuth(tokens=tokens)
    except ConfigurationError as exc:
        raise CliError(f"bearer tokens: {exc}") from exc


def http_options(config: PrismConfig, request: ServeRequest) -> HttpOptions | None:
    """How to listen over HTTP (``None``: stdio)."""
    if request.address is None:
        return None  # (before the gateway is imported: see _serve)
    from prism.gateway import HttpOptions

    host, port = request.address
    auth = http_auth(config, request)  # its errors name serve.auth or --token-file themselves
    try:
        return HttpOptions(
            host=host,
            port=port,
            auth=auth,
            allowed_origins=(*config.serve.allowed_origins, *request.origins),
            stateless=request.stateless or config.serve.stateless,
            session_idle_s=config.serve.session_idle_s,
            max_sessions=config.serve.max_sessions,
            max_sessions_per_principal=config.serve.max_sessions_per_principal,
            path=config.serve.path,
            max_request_bytes=config.serve.max_request_bytes,
            body_timeout_s=config.serve.body_timeout_s,
        )
    except ConfigurationError as exc:
        raise CliError(f"--http {host}:{port}: {exc}") from exc


def gateway_limits(config: PrismConfig) -> dict[str, Any]:
    """``open_gateway``'s limits from ``[serve]`` (over stdio and HTTP alike)."""
    serve = config.serve
    return {
        "max_concurrent_calls": serve.max_concurrent_calls,
        "max_calls_per_client": serve.max_calls_per_client,
        "max_waiting_calls_per_client": serve.max_waiting_calls_per_client,
        "max_waiting_calls": serve.max_waiting_calls,
        "question_ttl_s": serve.question_ttl_s,
        "unanswered_call_s": serve.unanswered_call_s,
    }


def downstream(server: McpServerConfig) -> DownstreamServer:
    """The gateway's view of one ``[mcp.servers.<id>]``: started in the background."""
    from prism.gateway import DownstreamServer

    from ._toolset import transport_for

    return DownstreamServer(
        server_id=server.server_id,
        transport=transport_for(server),
        required=server.required,
        options={
            "list_cache_ttl_s": server.list_cache_ttl_s,
            "call_timeout_s": server.call_timeout_s,
            "connect_timeout_s": server.connect_timeout_s,
            "max_call_s": server.max_call_s,
            "max_result_bytes": server.max_result_bytes,
            "protocol": server.protocol,
        },
    )


def _log_to_stderr() -> None:
    """The gateway's reports (a server up, failed or gone) as ``prism serve:`` lines on stderr."""
    import logging

    class ToStderr(logging.Handler):
        """Writes to the ``sys.stderr`` of the moment (tests swap it)."""

        prism_serve = True

        def emit(self, record: logging.LogRecord) -> None:
            try:
                sys.stderr.write(self.format(record) + "\n")
                sys.stderr.flush()
            except Exception:
                self.handleError(record)

    logger = logging.getLogger("prism.gateway")
    if any(getattr(h, "prism_serve", False) for h in logger.handlers):
        return
    handler = ToStderr()
    handler.setFormatter(logging.Formatter("prism serve: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logging.getLogger("prism.gateway.http").setLevel(logging.WARNING)  # not "Running on ..."


def serve(config: PrismConfig, request: ServeRequest) -> None:
    """Serve until the host disconnects (stdio), or SIGINT or SIGTERM; blocking: runs trio.

    A signal cancels the serving (the calls in flight are cancelled and
    recorded), the ledger's end marker says ``aborted``, and
    :class:`KeyboardInterrupt` is raised (exit 130). A second signal while
    it shuts down acts as it would without Prism (SIGTERM ends the process).
    """
    options = http_options(config, request)
    command = request.approve_command
    if command is None and config.serve.approver == "command":
        command = config.serve.approve_command
    ledger = request.ledger if request.ledger is not None else config.ledger
    _log_to_stderr()
    run_trio(lambda: _serve(config, options, ledger, command or ()))


async def _serve(
    loaded: PrismConfig,
    options: HttpOptions | None,
    ledger: Path | str | None,
    approve_command: tuple[str, ...] = (),
) -> None:
    if options is None:
        from ._front import offer
        from ._listing import early_listing

        # The host's tools/list, answered while the gateway loads (see _listing).
        offer(lambda: early_listing(loaded))
    import trio

    from prism.coding.security import create_coding_approval_policy
    from prism.core import ToolDefinition
    from prism.core.ledger import RunLedger
    from prism.gateway import (
        CODING_TOOL_HINTS,
        GatewayError,
        create_command_approver,
        create_gateway_approver,
        open_gateway,
        serve_http,
        serve_stdio,
    )

    from ._ledgerfile import LedgerFailures, recording_ledger, writable_roots
    from ._preflight import check_roots
    from ._toolset import choose_sandbox, coding_tools, command_rules, open_toolset
    from ._trio import watch_interrupts

    # The permission and validator come from the usual wiring; the coding tools
    # are built here so their approver can ask the MCP client, and the MCP
    # servers are started by the gateway, in the background.
    gates = attrs.evolve(
        loaded,
        workspace=attrs.evolve(loaded.workspace, coding_tools=False),
        mcp_servers=(),
    )
    tools: list[ToolDefinition] = []
    if loaded.workspace.coding_tools:
        check_roots(loaded)
        sandbox, _label = await choose_sandbox(loaded)
        policy = create_coding_approval_policy(
            roots=list(loaded.workspace.roots),
            approve=create_gateway_approver(
                fallback=create_command_approver(approve_command) if approve_command else None
            ),
            read_only=loaded.workspace.read_only,
            command_rules=command_rules(loaded),
            sandbox=sandbox,
            readable=loaded.workspace.readable,
            protected_paths=loaded.workspace.protected_paths,
            cache_approvals=False,
        )
        tools = coding_tools(loaded, policy, sandbox)
    async with contextlib.AsyncExitStack() as stack:
        # Outermost: a signal cancels everything below, the ledger included.
        await stack.enter_async_context(watch_interrupts(lambda signum: False))
        failures = LedgerFailures()
        stack.callback(failures.report)
        if ledger is None:
            run_ledger = RunLedger()
        else:
            run_ledger = stack.enter_context(
                recording_ledger(
                    Path(ledger),
                    label="prism serve",
                    failures=failures,
                    fsync=loaded.ledger_fsync,
                    max_bytes=loaded.ledger_max_bytes,
                    roots=writable_roots(loaded),
                    inside_roots=loaded.ledger_inside_roots,
                )
            )
        toolset = await stack.enter_async_context(open_toolset(gates))
        try:
            gateway = await stack.enter_async_context(
                open_gateway(
                    tools=tools,
                    servers=[downstream(server) for server in loaded.mcp_servers],
                    permission=toolset.permission,
                    validator=toolset.validator,
                    hints=CODING_TOOL_HINTS,
                    ledger=run_ledger,
                    # The roots an MCP server gets when its calling client cannot say.
                    roots=[str(root) for root in loaded.workspace.roots],
                    **gateway_limits(loaded),
                )
            )
        except GatewayError as exc:  # a required server did not start
            raise CliError(str(exc)) from exc
        if options is None:
            from ._front import take

            # What a host sent while this process started, and the initialize answer
            # written then, if any (see _front).
            read_ahead, answered = take()
            await serve_stdio(gateway, read_ahead=read_ahead, answered=answered)
            return
        async with trio.open_nursery() as nursery:
            url = await nursery.start(serve_http, gateway, options)
            sys.stderr.write(f"prism serve: MCP endpoint {url}\n")
            sys.stderr.flush()


def check_serve(config: PrismConfig) -> None:
    """``[serve]`` as ``prism serve`` reads it: the approver found, the HTTP auth complete.

    Raises:
        CliConfigurationError: naming the file and the ``serve`` key.
        CliError: a token file that cannot be read, tokens the gateway refuses.
    """
    serve = config.serve
    if serve.approver == "command" and serve.approve_command:
        program = serve.approve_command[0]
        found = (
            os.path.isfile(program) and os.access(program, os.X_OK)
            if os.sep in program
            else shutil.which(program) is not None
        )
        if not found:
            raise CliConfigurationError(
                config.source,
                "serve.approve_command",
                f"{program!r} is not found (an executable file, or a program on PATH)",
                value=program,
            )
    if serve.auth is not None:
        http_auth(config, ServeRequest(address=("127.0.0.1", 0)))
