"""The ``prism.toml`` model: what ``prism run`` wires, validated key by key.

Every problem is reported as a :class:`ConfigError` naming the file and the
dotted key (``mcp.servers.docs.call_timeout_s``), so a user can go straight to
the line. Unknown keys are errors too: a typo must not silently turn a limit
off. Relative paths are resolved against the folder that holds the file.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal, cast

import attrs

from ._errors import ConfigError

__all__ = [
    "AgentConfig",
    "CommandRulesConfig",
    "McpServerConfig",
    "PermissionsConfig",
    "PrismConfig",
    "ValidationConfig",
    "WorkspaceConfig",
    "load_config",
    "parse_config",
]

_SERVER_ID = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
_MAX_CONFIG_BYTES = 1_000_000


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
    """

    server_id: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = attrs.field(factory=dict)
    call_timeout_s: float = 60.0
    connect_timeout_s: float = 30.0
    max_call_s: float | None = None
    max_result_bytes: int = 1_000_000
    list_cache_ttl_s: float = 60.0


@attrs.frozen(kw_only=True)
class AgentConfig:
    """``[agent]``: how the scripted session is run.

    Attributes:
        model: the model name handed to the provider (informational for scripted runs).
        tool_concurrency: at most this many calls of one turn run at once.
        max_tool_rounds: after this many tool rounds the provider must answer.
    """

    model: str = "scripted"
    tool_concurrency: int = 4
    max_tool_rounds: int = 16


@attrs.frozen(kw_only=True)
class WorkspaceConfig:
    """``[workspace]``: the coding tools and the folders they may touch.

    Attributes:
        roots: absolute folders the coding tools are contained in; the first is the cwd.
        coding_tools: whether ``shell``, ``read``, ``write`` and ``edit`` are offered.
        read_only: refuse every write, edit and non-read-only command.
        sandbox: where shell commands run: ``"none"`` (the host, contained only by
            the policy), ``"bubblewrap"`` (OS isolation; refuses to start when
            bubblewrap cannot work here) or ``"auto"`` (bubblewrap when it works,
            else the host, and the run says which).
        readable: absolute folders outside the roots that shell commands may read.
        protected_paths: more paths (relative, any depth) whose writes always ask.
    """

    roots: tuple[str, ...] = ()
    coding_tools: bool = True
    read_only: bool = False
    sandbox: Literal["none", "bubblewrap", "auto"] = "auto"
    readable: tuple[str, ...] = ()
    protected_paths: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class CommandRulesConfig:
    """``[commands]``: glob rules for the shell tool (deny wins, then ask, then allow)."""

    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()
    use_default_deny: bool = True


@attrs.frozen(kw_only=True)
class PermissionsConfig:
    """``[permissions]``: name rules over ``tool:<name>:execute`` keys (deny wins)."""

    allow: tuple[str, ...] = ("tool:*:execute",)
    deny: tuple[str, ...] = ()
    default: Literal["allow", "deny"] = "deny"


@attrs.frozen(kw_only=True)
class ValidationConfig:
    """``[validation]``: JSON Schema checks of every call's arguments.

    Attributes:
        enabled: validate arguments against each tool's ``parameters``.
        missing_schema: what to do with a tool that declares no schema.
    """

    enabled: bool = True
    missing_schema: Literal["allow", "reject"] = "allow"


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
    """

    source: str
    base_dir: str
    agent: AgentConfig = AgentConfig()
    workspace: WorkspaceConfig = WorkspaceConfig()
    commands: CommandRulesConfig = CommandRulesConfig()
    permissions: PermissionsConfig = PermissionsConfig()
    validation: ValidationConfig = ValidationConfig()
    mcp_servers: tuple[McpServerConfig, ...] = ()
    ledger: str | None = None
    ledger_fsync: Literal["never", "run", "always"] = "never"
    ledger_max_bytes: int | None = None


class _Table:
    """A TOML table being read: remembers its dotted key and which keys were used."""

    def __init__(self, source: str, key: str, data: object) -> None:
        if not isinstance(data, Mapping):
            raise ConfigError(source, key, f"expected a table, got {_kind(data)}")
        self.source = source
        self.key = key
        self.data: Mapping[str, object] = data
        self.used: set[str] = set()

    def path(self, name: str) -> str:
        return f"{self.key}.{name}" if self.key else name

    def fail(self, name: str, problem: str) -> ConfigError:
        return ConfigError(self.source, self.path(name), problem)

    def get(self, name: str) -> object:
        self.used.add(name)
        return self.data.get(name)

    def has(self, name: str) -> bool:
        return name in self.data

    def table(self, name: str) -> _Table:
        self.used.add(name)
        return _Table(self.source, self.path(name), self.data.get(name, {}))

    def string(self, name: str, default: str | None) -> str | None:
        value = self.get(name)
        if value is None:
            return default
        if not isinstance(value, str) or not value:
            raise self.fail(name, f"expected a non-empty string, got {_show(value)}")
        return value

    def boolean(self, name: str, default: bool) -> bool:
        value = self.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(name, f"expected true or false, got {_show(value)}")
        return value

    def integer(self, name: str, default: int, *, low: int, high: int) -> int:
        value = self.get(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(name, f"expected a whole number, got {_show(value)}")
        if not low <= value <= high:
            raise self.fail(name, f"expected a number from {low} to {high}, got {value}")
        return value

    def seconds(self, name: str, default: float | None, *, high: float = 86_400.0) -> float | None:
        value = self.get(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(name, f"expected a number of seconds, got {_show(value)}")
        number = float(value)
        if not math.isfinite(number) or number <= 0 or number > high:
            raise self.fail(name, f"expected seconds above 0 and at most {high:g}, got {value}")
        return number

    def strings(self, name: str, default: tuple[str, ...]) -> tuple[str, ...]:
        value = self.get(name)
        if value is None:
            return default
        if not isinstance(value, list):
            raise self.fail(name, f"expected a list of strings, got {_show(value)}")
        for index, item in enumerate(value):
            if not isinstance(item, str) or not item:
                raise ConfigError(
                    self.source,
                    f"{self.path(name)}[{index}]",
                    f"expected a non-empty string, got {_show(item)}",
                )
        return tuple(cast("list[str]", value))

    def string_map(self, name: str) -> dict[str, str] | None:
        value = self.get(name)
        if value is None:
            return None
        inner = _Table(self.source, self.path(name), value)
        out: dict[str, str] = {}
        for key, item in inner.data.items():
            if not isinstance(item, str):
                raise inner.fail(key, f"expected a string, got {_show(item)}")
            out[key] = item
        return out

    def choice(self, name: str, default: str, options: Sequence[str]) -> str:
        value = self.get(name)
        if value is None:
            return default
        if value not in options:
            expected = " or ".join(repr(o) for o in options)
            raise self.fail(name, f"expected {expected}, got {_show(value)}")
        return cast("str", value)

    def finish(self) -> None:
        """Reject keys nobody read: they are typos or options this version lacks."""
        for name in self.data:
            if name not in self.used:
                known = ", ".join(sorted(self.used)) or "none"
                raise self.fail(name, f"unknown key (known keys here: {known})")


def _kind(value: object) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string"}
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a table"
    return names.get(type(value), type(value).__name__)


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _resolve(base_dir: str, path: str) -> str:
    expanded = os.path.expanduser(path)
    return os.path.abspath(os.path.join(base_dir, expanded))


def _server(table: _Table, server_id: str, base_dir: str) -> McpServerConfig:
    if not _SERVER_ID.match(server_id):
        raise ConfigError(
            table.source,
            table.key,
            "server ids are 1-32 letters, digits, '_' or '-' (they become part of tool names)",
        )
    command = table.string("command", None)
    url = table.string("url", None)
    if (command is None) == (url is None):
        raise ConfigError(table.source, table.key, "set exactly one of 'command' or 'url'")
    if url is not None and not url.startswith(("http://", "https://")):
        raise table.fail("url", f"expected an http:// or https:// URL, got {_show(url)}")
    args = table.strings("args", ())
    env = table.string_map("env")
    cwd = table.string("cwd", None)
    headers = table.string_map("headers") or {}
    if command is not None and table.has("headers"):
        raise table.fail("headers", "only an HTTP server ('url') takes headers")
    if url is not None:
        for name in ("args", "env", "cwd"):
            if table.has(name):
                raise table.fail(name, "only a stdio server ('command') takes this")
    call_timeout = table.seconds("call_timeout_s", 60.0)
    connect_timeout = table.seconds("connect_timeout_s", 30.0)
    max_call = table.seconds("max_call_s", None)
    max_bytes = table.integer("max_result_bytes", 1_000_000, low=1_024, high=100_000_000)
    ttl = table.seconds("list_cache_ttl_s", 60.0)
    table.finish()
    assert call_timeout is not None
    assert connect_timeout is not None
    assert ttl is not None
    return McpServerConfig(
        server_id=server_id,
        command=command,
        args=args,
        env=env,
        cwd=_resolve(base_dir, cwd) if cwd is not None else None,
        url=url,
        headers=headers,
        call_timeout_s=call_timeout,
        connect_timeout_s=connect_timeout,
        max_call_s=max_call,
        max_result_bytes=max_bytes,
        list_cache_ttl_s=ttl,
    )


def parse_config(
    data: Mapping[str, object], *, source: str = "prism.toml", base_dir: str = "."
) -> PrismConfig:
    """Validate parsed TOML data into a :class:`PrismConfig`.

    Args:
        data: the document, as :mod:`tomllib` returns it.
        source: a label for messages (usually the file name).
        base_dir: relative paths (roots, cwd, ledger) are resolved against it.

    Raises:
        ConfigError: naming the first bad key and what is wrong with it.
    """
    base = os.path.abspath(base_dir)
    root = _Table(source, "", data)

    agent_t = root.table("agent")
    agent = AgentConfig(
        model=agent_t.string("model", "scripted") or "scripted",
        tool_concurrency=agent_t.integer("tool_concurrency", 4, low=1, high=64),
        max_tool_rounds=agent_t.integer("max_tool_rounds", 16, low=1, high=1_000),
    )
    agent_t.finish()

    ws_t = root.table("workspace")
    roots = tuple(_resolve(base, r) for r in ws_t.strings("roots", (".",)))
    if not roots:
        raise ws_t.fail("roots", "expected at least one folder")
    workspace = WorkspaceConfig(
        roots=roots,
        coding_tools=ws_t.boolean("coding_tools", True),
        read_only=ws_t.boolean("read_only", False),
        sandbox=cast(
            "Literal['none', 'bubblewrap', 'auto']",
            ws_t.choice("sandbox", "auto", ("none", "bubblewrap", "auto")),
        ),
        readable=tuple(_resolve(base, r) for r in ws_t.strings("readable", ())),
        protected_paths=ws_t.strings("protected_paths", ()),
    )
    ws_t.finish()

    cmd_t = root.table("commands")
    commands = CommandRulesConfig(
        allow=cmd_t.strings("allow", ()),
        deny=cmd_t.strings("deny", ()),
        ask=cmd_t.strings("ask", ()),
        use_default_deny=cmd_t.boolean("use_default_deny", True),
    )
    cmd_t.finish()

    perm_t = root.table("permissions")
    permissions = PermissionsConfig(
        allow=perm_t.strings("allow", ("tool:*:execute",)),
        deny=perm_t.strings("deny", ()),
        default=cast(
            "Literal['allow', 'deny']", perm_t.choice("default", "deny", ("allow", "deny"))
        ),
    )
    perm_t.finish()

    val_t = root.table("validation")
    validation = ValidationConfig(
        enabled=val_t.boolean("enabled", True),
        missing_schema=cast(
            "Literal['allow', 'reject']",
            val_t.choice("missing_schema", "allow", ("allow", "reject")),
        ),
    )
    val_t.finish()

    mcp_t = root.table("mcp")
    servers_t = mcp_t.table("servers")
    servers = tuple(
        _server(servers_t.table(server_id), server_id, base) for server_id in servers_t.data
    )
    servers_t.finish()
    mcp_t.finish()

    ledger_t = root.table("ledger")
    ledger_path = ledger_t.string("path", None)
    ledger_fsync = cast(
        "Literal['never', 'run', 'always']",
        ledger_t.choice("fsync", "never", ("never", "run", "always")),
    )
    ledger_max_bytes = ledger_t.integer("max_bytes", 0, low=0, high=1 << 50) or None
    ledger_t.finish()

    root.finish()
    return PrismConfig(
        source=source,
        base_dir=base,
        agent=agent,
        workspace=workspace,
        commands=commands,
        permissions=permissions,
        validation=validation,
        mcp_servers=servers,
        ledger=_resolve(base, ledger_path) if ledger_path is not None else None,
        ledger_fsync=ledger_fsync,
        ledger_max_bytes=ledger_max_bytes,
    )


def load_config(path: str | os.PathLike[str]) -> PrismConfig:
    """Read and validate a ``prism.toml`` file.

    Relative paths inside it are resolved against the file's folder. Blocking
    file I/O: call it before starting trio, or through ``trio.to_thread``.

    Raises:
        ConfigError: the file cannot be read, is not TOML, or has a bad key.
    """
    file = Path(path)
    source = str(path)
    try:
        with file.open("rb") as handle:
            raw = handle.read(_MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(source, "", f"cannot read it ({exc.strerror or exc})") from exc
    if len(raw) > _MAX_CONFIG_BYTES:
        raise ConfigError(source, "", f"larger than {_MAX_CONFIG_BYTES} bytes")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(source, "", "not UTF-8 text") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(source, "", f"not valid TOML ({exc})") from exc
    return parse_config(data, source=source, base_dir=str(file.resolve().parent))
