"""Provider-safe tool names: what a model sees instead of ``mcp:docs:search``.

Model providers accept tool names matching ``^[A-Za-z0-9_-]{1,64}$``. Registry
names are freer (MCP tools are namespaced with colons), so the agent offers each
tool under a safe alias and maps calls back to the registry name before
dispatch. Rules:

* a name that is already safe is offered unchanged;
* each ``:`` becomes ``__`` (``mcp:docs:search`` -> ``mcp__docs__search``);
* any other character outside ``[A-Za-z0-9_-]`` becomes ``_`` and, because that
  loses information, a stable hash of the full name is appended;
* a result longer than 64 characters is cut and given the same hash suffix.

The hash is the first 16 hex digits of the SHA-256 of the registry name, so an
alias never changes between runs or processes, and a hostile MCP server cannot
search out a name of its own whose alias is another tool's (64 bits: the 8
digits this once used fell to a birthday search of about 100,000 names).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping

import attrs

from ._errors import ConfigurationError
from ._options import string

__all__ = ["ToolNameMap", "create_tool_name_map", "provider_safe_name"]

_SAFE = re.compile(r"[A-Za-z0-9_-]{1,64}")
_UNSAFE_CHAR = re.compile(r"[^A-Za-z0-9_-]")
_MAX_LEN = 64
_HASH_LEN = 16
_NAME = string()


def _suffix(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_LEN]


def provider_safe_name(name: str) -> str:
    """The alias a model provider is offered for the registry name ``name``.

    The result always matches ``^[A-Za-z0-9_-]{1,64}$`` and depends only on
    ``name``. Names that already match are returned unchanged.

    Raises:
        ConfigurationError: ``name`` is not a non-empty string.
    """
    _NAME.check("provider_safe_name", "name", name)
    if _SAFE.fullmatch(name):
        return name
    alias = name.replace(":", "__")
    lossy = False
    if _UNSAFE_CHAR.search(alias):
        alias = _UNSAFE_CHAR.sub("_", alias)
        lossy = True
    if lossy or len(alias) > _MAX_LEN:
        alias = f"{alias[: _MAX_LEN - _HASH_LEN - 1]}_{_suffix(name)}"
    return alias


@attrs.frozen
class ToolNameMap:
    """A two-way, collision-free mapping between registry names and provider aliases.

    Build one with :func:`create_tool_name_map`.
    """

    _to_alias: Mapping[str, str] = attrs.field(alias="to_alias")
    _to_name: Mapping[str, str] = attrs.field(alias="to_name")

    def alias(self, name: str) -> str:
        """The provider alias of a registry name (computed if the map never saw it)."""
        alias = self._to_alias.get(name)
        return alias if alias is not None else provider_safe_name(name)

    def registry_name(self, alias: str) -> str | None:
        """The registry name offered as ``alias``, or ``None`` if no tool was."""
        return self._to_name.get(alias)

    def __len__(self) -> int:
        return len(self._to_alias)


def first_come_name_map(names: Iterable[str]) -> tuple[ToolNameMap, list[tuple[str, str, str]]]:
    """Like :func:`create_tool_name_map`, but a name whose alias an earlier name has is left out.

    Returns the map and, for each name left out, ``(name, alias, earlier name)``.
    """
    to_alias: dict[str, str] = {}
    to_name: dict[str, str] = {}
    left_out: list[tuple[str, str, str]] = []
    for name in names:
        if name in to_alias:
            continue
        alias = provider_safe_name(name)
        other = to_name.get(alias)
        if other is not None:
            left_out.append((name, alias, other))
            continue
        to_alias[name] = alias
        to_name[alias] = name
    return ToolNameMap(to_alias=to_alias, to_name=to_name), left_out


def create_tool_name_map(names: Iterable[str]) -> ToolNameMap:
    """Map every registry name to its provider alias, refusing collisions.

    Raises:
        ConfigurationError: two names share an alias (the message names both), or a
            name is not a non-empty string.
    """
    to_alias: dict[str, str] = {}
    to_name: dict[str, str] = {}
    for name in names:
        if name in to_alias:
            continue
        alias = provider_safe_name(name)
        other = to_name.get(alias)
        if other is not None:
            raise ConfigurationError(
                f"create_tool_name_map.names: tools {other!r} and {name!r} would both be "
                f"offered to the model as {alias!r}; rename one of them",
                option="create_tool_name_map.names",
                value=name,
            )
        to_alias[name] = alias
        to_name[alias] = name
    return ToolNameMap(to_alias=to_alias, to_name=to_name)
