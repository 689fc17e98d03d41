"""The one cattrs converter that reads ``prism.toml`` and session files.

Values pass through unchanged (lists become tuples) and each model class checks
its own fields with :mod:`prism.core.options`; the converter shapes tables into
classes, refuses unknown keys, and turns every failure into one
:class:`CliConfigurationError` or :class:`SessionFormatError` naming the file and the
dotted key of the first problem (``prism.toml: mcp.servers.docs.url: must be ...``).
"""

from __future__ import annotations

import os
import re
import tomllib
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

import attrs
import cattrs
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn

from prism.core import ConfigurationError
from prism.core.options import boolean, instance_of, integer, one_of, optional, string

from ._config import (
    AgentConfig,
    CommandRulesConfig,
    McpServerConfig,
    PermissionsConfig,
    PrismConfig,
    ServeConfig,
    ValidationConfig,
    WorkspaceConfig,
)
from ._errors import CliConfigurationError

__all__ = [
    "Key",
    "converter",
    "first_problem",
    "load_config",
    "parse_config",
    "read_document",
    "read_file",
    "read_toml",
    "structure",
    "table_hook",
]

_T = TypeVar("_T")
_MAX_CONFIG_BYTES = 1_000_000
_OWNER_OPTION = re.compile(r"^[A-Za-z_]\w*\.?")

Key = tuple[str | int, ...]
"""Where in a document: table keys and list indexes, outermost first."""


@attrs.frozen(kw_only=True)
class _McpTable:
    servers: dict[str, McpServerConfig] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class _LedgerTable:
    path: str | None = attrs.field(default=None, validator=optional(string()))
    fsync: Literal["never", "run", "always"] = attrs.field(
        default="never", validator=one_of("never", "run", "always")
    )
    max_bytes: int = attrs.field(default=0, validator=integer(minimum=0, maximum=1 << 50))
    inside_roots: bool = attrs.field(default=False, validator=boolean())


@attrs.frozen(kw_only=True)
class _Document:
    """``prism.toml`` as written: one attribute per top-level table."""

    agent: AgentConfig = attrs.field(factory=AgentConfig)
    workspace: WorkspaceConfig = attrs.field(factory=WorkspaceConfig)
    commands: CommandRulesConfig = attrs.field(factory=CommandRulesConfig)
    permissions: PermissionsConfig = attrs.field(factory=PermissionsConfig)
    validation: ValidationConfig = attrs.field(factory=ValidationConfig)
    mcp: _McpTable = attrs.field(factory=_McpTable)
    ledger: _LedgerTable = attrs.field(factory=_LedgerTable)
    serve: ServeConfig = attrs.field(factory=ServeConfig)


class _TableError(ValueError):
    """A value that should be a table (or a list of them) is something else."""

    def __init__(self, value: object, what: str = "a table") -> None:
        super().__init__(f"must be {what}, got {_kind(value)}")
        self.value = value


def _kind(value: object) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a table"
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string"}
    return names.get(type(value), type(value).__name__)


def table_hook(cl: type[Any]) -> Callable[[object, Any], Any]:
    """The structure function of the attrs class ``cl``: a table, no unknown keys."""
    inner = make_dict_structure_fn(
        cl, converter, _cattrs_forbid_extra_keys=True, _cattrs_detailed_validation=True
    )

    def structure(value: object, _type: Any) -> Any:
        if not isinstance(value, Mapping):
            raise _TableError(value)
        return inner(value, cl)

    return structure


def _each(
    items: Iterable[tuple[str | int, object]],
    build: Callable[[str | int, object], _T],
    cl: type[Any],
) -> list[_T]:
    """``build(key, value)`` for each item; every failure is kept under its key."""
    out: list[_T] = []
    errors: list[Exception] = []
    for key, value in items:
        try:
            out.append(build(key, value))
        except Exception as exc:
            exc.__notes__ = [IterableValidationNote(f"item {key!r}", key, cl)]
            errors.append(exc)
    if errors:
        raise IterableValidationError(f"While structuring {cl.__name__} items", errors, cl)
    return out


def _server(server_id: str | int, table: object) -> McpServerConfig:
    if not isinstance(table, Mapping):
        raise _TableError(table)
    if "server_id" in table:  # the table's name is its id
        raise ForbiddenExtraKeysError("", McpServerConfig, {"server_id"})
    return converter.structure({**table, "server_id": server_id}, McpServerConfig)


def _servers(value: object, _type: Any) -> dict[str, McpServerConfig]:
    """``[mcp.servers.<id>]`` tables; the table name becomes ``server_id``."""
    if not isinstance(value, Mapping):
        raise _TableError(value)
    return {s.server_id: s for s in _each(value.items(), _server, McpServerConfig)}


def _optional_table(cl: Any) -> type[Any] | None:
    """The attrs class ``cl`` is ``X | None`` of, else ``None``."""
    args = [a for a in typing.get_args(cl) if a is not type(None)]
    if len(args) == 1 and len(typing.get_args(cl)) == 2 and attrs.has(args[0]):
        return args[0]
    return None


def args_of(cl: Any) -> type[Any]:
    """The attrs class of ``X | None`` or ``tuple[X, ...]``."""
    found = _optional_table(cl) or _tuple_of_tables(cl)
    assert found is not None
    return found


def _plain(value: object, cl: Any) -> object:
    # The model's own option checks judge the value; arrays become the tuples declared.
    return tuple(value) if isinstance(value, list) and typing.get_origin(cl) is tuple else value


def _tuple_of_tables(cl: Any) -> type[Any] | None:
    """The attrs class of a ``tuple[X, ...]``, else ``None``."""
    args = typing.get_args(cl)
    if typing.get_origin(cl) is tuple and len(args) == 2 and args[1] is ... and attrs.has(args[0]):
        return args[0]
    return None


def _list_of_tables(value: object, cl: Any) -> tuple[object, ...]:
    item = args_of(cl)
    if not isinstance(value, list):
        raise _TableError(value, "a list")
    return tuple(_each(enumerate(value), lambda _, entry: converter.structure(entry, item), item))


_SERVERS = dict[str, McpServerConfig]
converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
"""The converter: model classes are registered on it where they are defined."""
converter.register_structure_hook_func(
    lambda t: not attrs.has(t) and t != _SERVERS and _tuple_of_tables(t) is None, _plain
)
for _primitive in (str, int, float, bool):
    # cattrs would coerce (str(3), int("3")); the options checks refuse instead.
    converter.register_structure_hook(_primitive, _plain)
converter.register_structure_hook_func(lambda t: _tuple_of_tables(t) is not None, _list_of_tables)
converter.register_structure_hook_func(
    lambda t: _optional_table(t) is not None,
    lambda value, t: None if value is None else converter.structure(value, args_of(t)),
)
converter.register_structure_hook_factory(attrs.has, table_hook)
converter.register_structure_hook_func(lambda t: t == _SERVERS, _servers)


def _leaves(exc: BaseException, key: Key) -> Iterator[tuple[Key, BaseException]]:
    """Each leaf failure under ``exc`` with the key it happened at."""
    if isinstance(exc, (ClassValidationError, IterableValidationError)):
        for sub in exc.exceptions:
            where = key
            for note in getattr(sub, "__notes__", ()):
                if isinstance(note, AttributeValidationNote):
                    where = (*key, note.name)
                elif isinstance(note, IterableValidationNote):
                    where = (*key, note.index)
            yield from _leaves(sub, where)
    else:
        yield key, exc


def _dotted(key: Key) -> str:
    out = ""
    for part in key:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def _option_key(option: str) -> Key:
    """``"WorkspaceConfig.roots[1]"`` -> ``("roots", 1)``; the owner is dropped."""
    rest = _OWNER_OPTION.sub("", option, count=1)
    key: list[str | int] = []
    for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", rest):
        key.append(int(index) if index else name)
    return tuple(key)


def first_problem(exc: BaseException) -> tuple[str, str, object]:
    """The dotted key, the problem and the bad value of the first failure in ``exc``."""
    key, leaf = next(_leaves(exc, ()))
    value: object = None
    if isinstance(leaf, ForbiddenExtraKeysError):
        name = sorted(leaf.extra_fields)[0]
        known = ", ".join(a.name for a in attrs.fields(leaf.cl) if a.name != "server_id")
        return _dotted((*key, name)), f"unknown key (known keys here: {known})", name
    if isinstance(leaf, ConfigurationError):
        option = leaf.option or ""
        key = (*key, *_option_key(option))
        message = str(leaf)
        problem = message[len(option) :].strip() if message.startswith(option) else message
        # A key left out is what None means in Python: TOML has no None to write.
        problem = problem.replace(" or None, got ", ", got ")
        return _dotted(key), problem, leaf.value
    if isinstance(leaf, KeyError) and leaf.args:
        name = str(leaf.args[0])
        return _dotted(key if key[-1:] == (name,) else (*key, name)), "is required", None
    if isinstance(leaf, _TableError):
        return _dotted(key), str(leaf), leaf.value
    return _dotted(key), str(leaf) or type(leaf).__name__, value


def structure(
    data: object,
    cl: type[_T],
    *,
    source: str,
    error: Callable[..., Exception] = CliConfigurationError,
) -> _T:
    """``data`` as a ``cl`` through the converter.

    Raises:
        CliConfigurationError: (or what ``error(source, key, problem, value=...)`` builds)
            naming ``source``, the dotted key and the problem.
    """
    try:
        return converter.structure(data, cl)
    except (cattrs.BaseValidationError, ConfigurationError, _TableError) as exc:
        key, problem, value = first_problem(exc)
        raise error(source, key, problem, value=value) from exc


def _resolve(base_dir: str, path: str) -> str:
    import os

    return os.path.abspath(os.path.join(base_dir, os.path.expanduser(path)))


def read_document(data: Mapping[str, object], *, source: str, base_dir: str) -> PrismConfig:
    """A parsed ``prism.toml`` as a :class:`PrismConfig`, paths resolved against ``base_dir``."""
    document = structure(data, _Document, source=source)
    workspace = document.workspace
    workspace = attrs.evolve(
        workspace,
        roots=tuple(_resolve(base_dir, r) for r in workspace.roots),
        readable=tuple(_resolve(base_dir, r) for r in workspace.readable),
    )
    servers = tuple(
        attrs.evolve(s, cwd=_resolve(base_dir, s.cwd)) if s.cwd is not None else s
        for s in document.mcp.servers.values()
    )
    serve = document.serve
    if serve.auth is not None and serve.auth.token_file is not None:
        auth = attrs.evolve(serve.auth, token_file=_resolve(base_dir, serve.auth.token_file))
        serve = attrs.evolve(serve, auth=auth)
    ledger = document.ledger
    return PrismConfig(
        source=source,
        base_dir=base_dir,
        agent=document.agent,
        workspace=workspace,
        commands=document.commands,
        permissions=document.permissions,
        validation=document.validation,
        mcp_servers=servers,
        ledger=_resolve(base_dir, ledger.path) if ledger.path is not None else None,
        ledger_fsync=ledger.fsync,
        ledger_max_bytes=ledger.max_bytes or None,
        ledger_inside_roots=ledger.inside_roots,
        serve=serve,
    )


def read_file(path: Path, limit: int, error: Callable[[str], Exception]) -> bytes:
    """The bytes of ``path`` (at most ``limit``); ``error(problem)`` is raised otherwise."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(limit + 1)
    except OSError as exc:
        raise error(f"cannot read it ({exc.strerror or exc})") from exc
    if len(raw) > limit:
        raise error(f"larger than {limit} bytes")
    return raw


def read_toml(path: Path) -> PrismConfig:
    """Read and validate a ``prism.toml`` file (see :func:`prism.cli.load_config`)."""
    source = str(path)

    def whole(problem: str) -> CliConfigurationError:
        return CliConfigurationError(source, "", problem)

    raw = read_file(path, _MAX_CONFIG_BYTES, whole)
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise whole("not UTF-8 text") from exc
    except tomllib.TOMLDecodeError as exc:
        raise whole(f"not valid TOML ({exc})") from exc
    return read_document(data, source=source, base_dir=str(path.resolve().parent))


def parse_config(
    data: Mapping[str, object], *, source: str = "prism.toml", base_dir: str = "."
) -> PrismConfig:
    """Validate parsed TOML data into a :class:`PrismConfig`.

    Args:
        data: the document, as :mod:`tomllib` returns it.
        source: a label for messages (usually the file name).
        base_dir: relative paths (roots, cwd, ledger) are resolved against it.

    Raises:
        CliConfigurationError: naming the first bad key and what is wrong with it.
    """
    string().check("parse_config", "source", source)
    string().check("parse_config", "base_dir", base_dir)
    return read_document(data, source=source, base_dir=os.path.abspath(base_dir))


def load_config(path: str | os.PathLike[str], *, missing_ok: bool = False) -> PrismConfig:
    """Read and validate a ``prism.toml`` file.

    Relative paths inside it are resolved against the file's folder. With
    ``missing_ok``, a file that does not exist gives the defaults (relative to
    the current folder) and ``found=False``. Blocking file I/O: call it before
    starting trio, or through ``trio.to_thread``.

    Raises:
        CliConfigurationError: the file cannot be read, is not TOML, or has a bad key.
    """
    instance_of(str, os.PathLike, description="a path").check("load_config", "path", path)
    boolean().check("load_config", "missing_ok", missing_ok)
    if missing_ok and not os.path.lexists(path):
        return attrs.evolve(parse_config({}, source=str(path), base_dir="."), found=False)
    return read_toml(Path(path))
