"""The ``prism.toml`` model: what ``prism run`` and ``prism serve`` wire, validated key by key.

The document is read by one cattrs converter (:mod:`._convert`) into the
classes here; each class checks its own values with :mod:`prism.core.options`.
Every problem is reported as a :class:`CliConfigurationError` naming the file and the
dotted key (``mcp.servers.docs.call_timeout_s``), so a user can go straight to
the line. Unknown keys are errors too: a typo must not silently turn a limit
off. Relative paths are resolved against the folder that holds the file.
Every key is optional; with no file at all the defaults apply.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs

from prism.core import ConfigurationError
from prism.core.options import (
    OptionCheck,
    boolean,
    instance_of,
    integer,
    number,
    one_of,
    optional,
    sequence_of,
    string,
)

__all__ = [
    "AgentConfig",
    "CommandRulesConfig",
    "McpServerConfig",
    "PermissionsConfig",
    "PrismConfig",
    "ServeAuthConfig",
    "ServeConfig",
    "ValidationConfig",
    "WorkspaceConfig",
    "http_url_problem",
]


def http_url_problem(url: str) -> str | None:
    """Why ``url`` is not an http(s) URL with a host and a usable port (None: it is)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be an http:// or https:// URL with a host"
    try:
        parts.port  # noqa: B018 - reading it is the check: a bad port raises
    except ValueError:
        return "has a port that is not a number from 0 to 65535"
    if any(c.isspace() for c in url):
        return "must not contain spaces"
    return None


_SERVER_ID = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
_IMPORT_SPEC = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def _string_list(
    *, non_empty: bool = False
) -> Callable[[object, attrs.Attribute[Any], object], None]:
    """A list of non-empty strings; a bad item is named by its index (``roots[1]``)."""
    whole = sequence_of(string(), non_empty=non_empty)
    item = string()

    def validate(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if isinstance(value, (list, tuple)):
            for index, entry in enumerate(value):
                item.check(type(instance).__name__, f"{attribute.name}[{index}]", entry)
        whole(instance, attribute, value)

    return validate


_strings = _string_list()
_seconds = number(minimum=0, above=True, maximum=86_400)
_string_table = OptionCheck(
    "a table of strings",
    lambda value: (
        isinstance(value, Mapping)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
    ),
)
_http_url = OptionCheck(
    "an http:// or https:// URL with a host (and a port from 0 to 65535)",
    lambda value: isinstance(value, str) and http_url_problem(value) is None,
)

_endpoint_path = OptionCheck(
    "a path starting with '/'", lambda value: isinstance(value, str) and value.startswith("/")
)


def _problem(owner: object, option: str, message: str, value: object) -> ConfigurationError:
    """A domain check's failure, shaped like an option check's (option and value named)."""
    name = f"{type(owner).__name__}.{option}" if option else type(owner).__name__
    return ConfigurationError(f"{name} {message}", option=name, value=value)


@attrs.frozen(kw_only=True)
class McpServerConfig:
    """One MCP server under ``[mcp.servers.<id>]``: exactly one of ``command`` or ``url``.

    Attributes:
        server_id: the table name; tools are named ``mcp:<server_id>:<tool>``.
        command: program to launch over stdio (never through a shell).
        args: its arguments.
        env: extra environment variables for it.
        cwd: its working directory (absolute).
        url: a Streamable HTTP endpoint instead of a command.
        headers: HTTP headers for ``url``.
        call_timeout_s: idle timeout of one call (restarts on progress).
        connect_timeout_s: deadline for the handshake.
        max_call_s: hard ceiling of one call, progress or not.
        max_result_bytes: larger results are refused at the transport.
        list_cache_ttl_s: how long a tool list is trusted.
        required: ``prism serve`` waits for this server and exits when it does
            not start (by default it serves at once and starts servers in the
            background; ``prism run`` always waits for every server).
        protocol: ``"auto"`` (2026-07-28 when the server speaks it) or
            ``"legacy"`` (the 2025-11-25 handshake, where a server may send
            requests such as elicitation in the middle of a call).
    """

    server_id: str = attrs.field(validator=string())
    command: str | None = attrs.field(default=None, validator=optional(string()))
    args: tuple[str, ...] = attrs.field(default=(), validator=_strings)
    env: Mapping[str, str] | None = attrs.field(default=None, validator=optional(_string_table))
    cwd: str | None = attrs.field(default=None, validator=optional(string()))
    url: str | None = attrs.field(default=None, validator=optional(_http_url))
    headers: Mapping[str, str] = attrs.field(factory=dict, validator=_string_table)
    call_timeout_s: float = attrs.field(default=60.0, validator=_seconds)
    connect_timeout_s: float = attrs.field(default=30.0, validator=_seconds)
    max_call_s: float | None = attrs.field(default=None, validator=optional(_seconds))
    max_result_bytes: int = attrs.field(
        default=1_000_000, validator=integer(minimum=1_024, maximum=100_000_000)
    )
    list_cache_ttl_s: float = attrs.field(default=60.0, validator=_seconds)
    required: bool = attrs.field(default=False, validator=boolean())
    protocol: Literal["auto", "legacy"] = attrs.field(
        default="auto", validator=one_of("auto", "legacy")
    )

    def __attrs_post_init__(self) -> None:
        if not _SERVER_ID.match(self.server_id):
            raise _problem(
                self,
                "",
                "server ids must be 1-32 letters, digits, '_' or '-' (they become part of "
                f"tool names), got {self.server_id!r}",
                self.server_id,
            )
        if (self.command is None) == (self.url is None):
            raise _problem(self, "", "must set exactly one of 'command' or 'url'", None)
        if self.command is not None and self.headers:
            raise _problem(
                self, "headers", "is only for an HTTP server ('url')", dict(self.headers)
            )
        if self.url is not None:
            for name in ("args", "env", "cwd"):
                if getattr(self, name):
                    raise _problem(
                        self, name, "is only for a stdio server ('command')", getattr(self, name)
                    )


@attrs.frozen(kw_only=True)
class AgentConfig:
    """``[agent]``: how the scripted session is run.

    Attributes:
        model: the model name handed to the provider (informational for scripted runs).
        concurrency: at most this many calls of one turn run at once.
        max_tool_rounds: after this many tool rounds the provider must answer.
    """

    model: str = attrs.field(default="scripted", validator=string())
    concurrency: int = attrs.field(default=4, validator=integer(minimum=1, maximum=64))
    max_tool_rounds: int = attrs.field(default=16, validator=integer(minimum=1, maximum=1_000))


@attrs.frozen(kw_only=True)
class WorkspaceConfig:
    """``[workspace]``: the coding tools and the folders they may touch.

    Attributes:
        roots: folders the coding tools are contained in; the first is the cwd
            (absolute once read from a file: relative ones are resolved against it).
        coding_tools: whether ``shell``, ``read``, ``write`` and ``edit`` are offered.
        read_only: refuse every write, edit and non-read-only command.
        sandbox: where shell commands run: ``"none"`` (the host, contained only by
            the policy), ``"bubblewrap"`` (OS isolation, confined mode; refuses to
            start when bubblewrap cannot work here), ``"landlock"`` (Landlock, the
            policy proved-safe only; refuses to start without it) or ``"auto"``
            (bubblewrap when it works, else Landlock, else the host; the run
            says which).
        readable: folders outside the roots that shell commands may read.
        protected_paths: more paths (relative, any depth) whose writes always ask.
    """

    roots: tuple[str, ...] = attrs.field(default=(".",), validator=_string_list(non_empty=True))
    coding_tools: bool = attrs.field(default=True, validator=boolean())
    read_only: bool = attrs.field(default=False, validator=boolean())
    sandbox: Literal["none", "bubblewrap", "landlock", "auto"] = attrs.field(
        default="auto", validator=one_of("none", "bubblewrap", "landlock", "auto")
    )
    readable: tuple[str, ...] = attrs.field(default=(), validator=_strings)
    protected_paths: tuple[str, ...] = attrs.field(default=(), validator=_strings)


@attrs.frozen(kw_only=True)
class CommandRulesConfig:
    """``[commands]``: glob rules for the shell tool (deny wins, then ask, then allow)."""

    allow: tuple[str, ...] = attrs.field(default=(), validator=_strings)
    deny: tuple[str, ...] = attrs.field(default=(), validator=_strings)
    ask: tuple[str, ...] = attrs.field(default=(), validator=_strings)
    use_default_deny: bool = attrs.field(default=True, validator=boolean())


@attrs.frozen(kw_only=True)
class PermissionsConfig:
    """``[permissions]``: name rules over ``tool:<name>:execute`` keys (deny wins)."""

    allow: tuple[str, ...] = attrs.field(default=("tool:*:execute",), validator=_strings)
    deny: tuple[str, ...] = attrs.field(default=(), validator=_strings)
    default: Literal["allow", "deny"] = attrs.field(
        default="deny", validator=one_of("allow", "deny")
    )


@attrs.frozen(kw_only=True)
class ValidationConfig:
    """``[validation]``: JSON Schema checks of every call's arguments.

    Attributes:
        enabled: validate arguments against each tool's ``parameters``.
        missing_schema: what to do with a tool that declares no schema.
    """

    enabled: bool = attrs.field(default=True, validator=boolean())
    missing_schema: Literal["allow", "reject"] = attrs.field(
        default="allow", validator=one_of("allow", "reject")
    )


@attrs.frozen(kw_only=True)
class ServeAuthConfig:
    """``[serve.auth]``: who may use ``prism serve --http``.

    ``type = "bearer"``: tokens from the environment variable ``token_env``
    and/or the file ``token_file`` (one a line). ``type = "oauth"``: an OAuth
    resource server; ``verifier`` (``"package.module:name"``) names an object
    with ``async verify_token(token)`` (the MCP SDK's ``TokenVerifier``), or a
    callable that returns one, and only tokens issued for ``resource_server_url``
    with every ``required_scopes`` are let in.

    Attributes:
        type: ``"bearer"`` or ``"oauth"``.
        token_env: bearer: the variable holding a token.
        token_file: bearer: a file of tokens (absolute once read from a file).
        issuer_url: oauth: the authorization server.
        resource_server_url: oauth: this gateway's MCP endpoint URL, as clients reach it.
        required_scopes: oauth: scopes every token must carry.
        verifier: oauth: the token verifier to import.
    """

    type: Literal["bearer", "oauth"] = attrs.field(validator=one_of("bearer", "oauth"))
    token_env: str | None = attrs.field(default=None, validator=optional(string()))
    token_file: str | None = attrs.field(default=None, validator=optional(string()))
    issuer_url: str | None = attrs.field(default=None, validator=optional(_http_url))
    resource_server_url: str | None = attrs.field(default=None, validator=optional(_http_url))
    required_scopes: tuple[str, ...] = attrs.field(default=(), validator=_strings)
    verifier: str | None = attrs.field(
        default=None,
        validator=optional(
            OptionCheck(
                "an import path 'package.module:name'",
                lambda value: isinstance(value, str) and bool(_IMPORT_SPEC.match(value)),
            )
        ),
    )

    def __attrs_post_init__(self) -> None:
        bearer = ("token_env", "token_file")
        oauth = ("issuer_url", "resource_server_url", "verifier")
        if self.type == "bearer":
            if self.token_env is None and self.token_file is None:
                raise _problem(self, "", "of type 'bearer' needs token_env or token_file", None)
            foreign: tuple[str, ...] = (*oauth, "required_scopes")
        else:
            for name in oauth:
                if getattr(self, name) is None:
                    raise _problem(self, name, "is needed when type = 'oauth'", None)
            foreign = bearer
        for name in foreign:
            if getattr(self, name):
                value = getattr(self, name)
                raise _problem(self, name, f"does not apply when type = {self.type!r}", value)


@attrs.frozen(kw_only=True)
class ServeConfig:
    """``[serve]``: how ``prism serve`` lets clients in and answers approvals.

    Attributes:
        auth: HTTP authentication (``None``: loopback clients only, no token).
        approver: who answers an approval the MCP client cannot: ``"deny"`` or
            ``"command"`` (run ``approve_command`` with the action as JSON on
            stdin; exit 0 approves).
        approve_command: the program and its arguments (no shell).
        allowed_origins: HTTP ``Origin`` values accepted besides loopback ones.
        stateless: serve HTTP without sessions (for load balancing).
        session_idle_s: an HTTP session idle this long is closed.
        max_sessions: at most this many HTTP sessions are open (the one idle
            the longest is closed to make room).
        max_sessions_per_principal: at most this many of them belong to one
            principal (the one's own session idle the longest makes room).
        question_ttl_s: how long a call waits in the gateway for the retry
            that answers its question (a 2026-07-28 client's approval, or
            its server's question); past it the call ends.
        unanswered_call_s: how long at most a call that ended before its
            MCP server answered it (cancelled, timed out) still counts as its
            client's there, when the server neither answers it late nor exits.
        max_concurrent_calls: at most this many calls run at once.
        max_calls_per_client: at most this many of them for one client (its
            principal and session over HTTP, its connection over stdio; never
            the name it declares); the rest wait their turn.
        max_waiting_calls_per_client: at most this many of one client's calls
            wait their turn; one more is refused at once (a JSON-RPC error).
        max_waiting_calls: at most this many calls of all clients wait their
            turn; one more is refused at once (the same error).
        path: the HTTP endpoint's path.
        max_request_bytes: a larger HTTP request body is refused with 413.
        body_timeout_s: an HTTP request body not complete this long after its
            headers is refused with 408.
    """

    auth: ServeAuthConfig | None = attrs.field(
        default=None, validator=optional(instance_of(ServeAuthConfig))
    )
    approver: Literal["deny", "command"] = attrs.field(
        default="deny", validator=one_of("deny", "command")
    )
    approve_command: tuple[str, ...] = attrs.field(default=(), validator=_strings)
    allowed_origins: tuple[str, ...] = attrs.field(default=(), validator=_strings)
    stateless: bool = attrs.field(default=False, validator=boolean())
    session_idle_s: float = attrs.field(
        default=1800.0, validator=number(minimum=1.0, maximum=7 * 24 * 3600.0)
    )
    max_sessions: int = attrs.field(default=1000, validator=integer(minimum=1, maximum=100_000))
    max_sessions_per_principal: int = attrs.field(
        default=100, validator=integer(minimum=1, maximum=100_000)
    )
    # The gateway's own defaults and bounds (a test holds them to open_gateway's and
    # HttpOptions', so prism config check refuses exactly what prism serve would).
    question_ttl_s: float = attrs.field(
        default=600.0, validator=number(minimum=1.0, maximum=7 * 24 * 3600.0)
    )
    unanswered_call_s: float = attrs.field(
        default=120.0, validator=number(minimum=1.0, maximum=7 * 24 * 3600.0)
    )
    max_concurrent_calls: int = attrs.field(default=32, validator=integer(minimum=1))
    max_calls_per_client: int = attrs.field(default=8, validator=integer(minimum=1))
    max_waiting_calls_per_client: int = attrs.field(default=64, validator=integer(minimum=1))
    max_waiting_calls: int = attrs.field(default=1024, validator=integer(minimum=1))
    path: str = attrs.field(default="/mcp", validator=_endpoint_path)
    max_request_bytes: int = attrs.field(
        default=1_000_000, validator=integer(minimum=1024, maximum=64 * 1024 * 1024)
    )
    body_timeout_s: float = attrs.field(default=30.0, validator=number(minimum=0.1, maximum=3600.0))

    def __attrs_post_init__(self) -> None:
        if (self.approver == "command") != bool(self.approve_command):
            raise _problem(
                self,
                "approve_command",
                "is needed exactly when approver = 'command'",
                self.approve_command,
            )


@attrs.frozen(kw_only=True)
class PrismConfig:
    """A validated ``prism.toml``.

    Attributes:
        source: where it was read from (for messages).
        base_dir: the folder relative paths were resolved against.
        agent: ``[agent]``.
        workspace: ``[workspace]``.
        commands: ``[commands]``.
        permissions: ``[permissions]``.
        validation: ``[validation]``.
        mcp_servers: ``[mcp.servers.<id>]`` tables, in file order.
        ledger: where ``prism run`` writes the JSONL ledger (``[ledger] path``), if set.
        ledger_fsync: when the ledger file is fsynced (``[ledger] fsync``:
            ``never``, ``run`` or ``always``).
        ledger_max_bytes: rotate the JSONL ledger before it grows past this
            (``[ledger] max_bytes``); ``None`` never rotates.
        ledger_inside_roots: allow a ledger inside a writable root
            (``[ledger] inside_roots``); refused by default, since the agent
            could replace it there.
        serve: ``[serve]``, for ``prism serve``.
        found: whether a file was read (``False``: no file, every default applies).
    """

    source: str = attrs.field(validator=string())
    base_dir: str = attrs.field(validator=string())
    agent: AgentConfig = attrs.field(factory=AgentConfig, validator=instance_of(AgentConfig))
    workspace: WorkspaceConfig = attrs.field(
        factory=WorkspaceConfig, validator=instance_of(WorkspaceConfig)
    )
    commands: CommandRulesConfig = attrs.field(
        factory=CommandRulesConfig, validator=instance_of(CommandRulesConfig)
    )
    permissions: PermissionsConfig = attrs.field(
        factory=PermissionsConfig, validator=instance_of(PermissionsConfig)
    )
    validation: ValidationConfig = attrs.field(
        factory=ValidationConfig, validator=instance_of(ValidationConfig)
    )
    mcp_servers: tuple[McpServerConfig, ...] = attrs.field(
        default=(), validator=sequence_of(instance_of(McpServerConfig))
    )
    ledger: str | None = attrs.field(default=None, validator=optional(string()))
    ledger_fsync: Literal["never", "run", "always"] = attrs.field(
        default="never", validator=one_of("never", "run", "always")
    )
    ledger_max_bytes: int | None = attrs.field(default=None, validator=optional(integer(minimum=1)))
    ledger_inside_roots: bool = attrs.field(default=False, validator=boolean())
    serve: ServeConfig = attrs.field(factory=ServeConfig, validator=instance_of(ServeConfig))
    found: bool = attrs.field(default=True, validator=boolean())
