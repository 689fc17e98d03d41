"""Tool listing: bounded ``tools/list`` paging, each tool's definition, and its pin."""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

import attrs
import mcp_types
import trio

from prism.core.files import open_private_file
from prism.core.text import NAME_LIMIT, clip, has_lone_surrogate

from ._annotations import (
    McpToolAnnotations,
    McpToolInfo,
    SharedParts,
    ToolBody,
    changed_parts,
    definition_hash,
    definition_parts,
)
from ._content import plain_json
from ._errors import McpBridgeError
from ._gate import CHECKPOINT_TOOLS, LONE_SURROGATE, carried_tools
from ._options import BridgeOptions

if TYPE_CHECKING:
    from mcp import Client
    from prism.core import JsonObject, JsonValue

    from ._session import Connection

__all__ = [
    "ListedTool",
    "Listing",
    "Pins",
    "PreparedTool",
    "list_tools",
    "listed_size",
    "prepare_tool",
]

_log = logging.getLogger("prism.mcp")

_TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_MAX_TOOLS = 4096
_MAX_DESCRIPTION_CHARS = 8192
_MAX_INFO_CHARS = 256


def _write(tool: Any) -> str:
    """``tool.model_dump_json(by_alias=True, exclude_none=True)`` of an SDK model."""
    data = tool.__pydantic_serializer__.to_json(tool, by_alias=True, exclude_none=True)
    return data.decode()  # type: ignore[no-any-return]


ListedTool = tuple[bytes, str, str | None, str | None] | str
"""What a listing said of one tool: the gate's :func:`written_tool` of it with its
name, title and description, or (when the gate wrote none) its model's JSON."""
Listing = tuple[ListedTool, ...]
"""What a listing said: each kept tool's :data:`ListedTool` (equal when nothing changed)."""


def listed_size(entry: ListedTool) -> int:
    """About how many characters of JSON ``entry`` stands for."""
    if isinstance(entry, str):
        return len(entry)
    written, name, title, description = entry
    return len(written) + len(name) + len(title or "") + len(description or "")


def _said(tool: Any, written: bytes | None) -> ListedTool:
    """What the listing says of ``tool``: see :data:`ListedTool`.

    Raises:
        ValueError: no JSON holds the tool (a lone surrogate).
    """
    if written is not None:
        name, title, description = tool.name, tool.title, tool.description
        # (an ASCII text holds no lone surrogate: asked here, without a call per text)
        if not (
            (not name.isascii() and has_lone_surrogate(name))
            or (title is not None and not title.isascii() and has_lone_surrogate(title))
            or (
                description is not None
                and not description.isascii()
                and has_lone_surrogate(description)
            )
        ):
            return written, name, title, description
    # What model_dump_json writes, without its wrapper's own steps (raises for a
    # lone surrogate).
    return _write(tool)


def _bound_sdk_tool_state(client: Client, listed: set[str] | None) -> None:
    """Bound what the SDK's session keeps per listed tool.

    The session adds each page's output schemas, and on 2026-07-28 each tool's
    ``x-mcp-header`` map, to dicts that only a complete single-page listing prunes,
    so repeated paged listings with fresh names would grow them without bound. The
    bridge checks output itself and never uses the schemas: they go. The header maps
    put a call's arguments in ``Mcp-Param-*`` headers: after a listing that finished
    (``listed``, the names on the pages it fetched) only its tools keep theirs, as
    after the SDK's own complete listing.
    """
    try:
        session = client.session
    except RuntimeError:
        return
    for attribute in ("_tool_output_schemas", "_tool_output_validators"):
        kept: dict[str, object] = getattr(session, attribute, {})
        kept.clear()
    if listed is not None:
        maps: dict[str, object] = getattr(session, "_x_mcp_header_maps", {})
        for name in [name for name in maps if name not in listed]:
            del maps[name]


async def _absorbed(client: Client, tools: list[Any]) -> list[Any]:
    """``tools`` after the SDK's session took them in, as it does a page it checked.

    The gate built a page's tools itself (see ``listed_tools``), so the SDK saw
    none of them: its session learns them here, a few at a time. On 2026-07-28 it
    keeps each tool's ``x-mcp-header`` map (to mirror a call's arguments into
    ``Mcp-Param-*`` headers) and drops, with its own warning, a tool whose
    annotations are invalid.
    """
    try:
        absorb = client.session._absorb_tool_listing
    except RuntimeError:
        return tools
    kept: list[Any] = []
    for start in range(0, len(tools), CHECKPOINT_TOOLS):
        if start:
            await trio.lowlevel.checkpoint()
        chunk = mcp_types.ListToolsResult.model_construct(
            tools=tools[start : start + CHECKPOINT_TOOLS]
        )
        kept.extend(absorb(chunk, complete=False).tools)
    return kept


def _log_dropped(options: BridgeOptions, conn: Connection) -> None:
    """Warn about the tools the transport dropped from a page the SDK would have refused."""
    dropped = conn.state.dropped_tools
    for name, reason in dropped:
        _log.warning(
            "MCP server %s: skipping tool %s: the MCP SDK would refuse its definition (%s); "
            "the other tools stay usable",
            options.server_id,
            name,
            reason,
        )
    dropped.clear()


def _skip_unwritable(options: BridgeOptions, tool: Any, exc: ValueError) -> None:
    reason = LONE_SURROGATE if "surrogates not allowed" in str(exc) else str(exc)[:200]
    _log.warning(
        "MCP server %s: skipping tool %s: its definition holds %s; the other tools stay usable",
        options.server_id,
        clip(repr(tool.name), NAME_LIMIT),
        reason,
    )


async def list_tools(
    options: BridgeOptions, conn: Connection, client: Client, limit_s: float
) -> tuple[list[Any], Listing]:
    """Every page of ``tools/list`` within ``limit_s``, bounded in pages, bytes and tools.

    Returns the tools, and the :data:`Listing` they make.

    Raises:
        McpBridgeError: the listing failed or took longer than ``limit_s``.
    """
    tools: list[Any] = []
    said: list[ListedTool] = []
    seen: set[str] = set()
    listed: set[str] | None = None
    cursor: str | None = None
    total = 0
    try:
        with trio.fail_after(limit_s):
            pages = 0
            while True:
                if pages == options.max_list_pages:
                    _log.warning(
                        "MCP server %s: tools/list has more than max_list_pages=%d pages; "
                        "the rest is ignored",
                        options.server_id,
                        options.max_list_pages,
                    )
                    break
                pages += 1
                page = await client.list_tools(cursor=cursor)
                _log_dropped(options, conn)
                carried, written = carried_tools(page)
                listed_page = await _absorbed(client, carried)
                del carried
                seen.update(tool.name for tool in listed_page)
                for index, tool in enumerate(listed_page):
                    if index % CHECKPOINT_TOOLS == CHECKPOINT_TOOLS - 1:
                        await trio.lowlevel.checkpoint()
                    # Count what is kept, not what was sent: a listing of many pages
                    # (each within max_result_bytes) must not add up without bound.
                    try:
                        entry = _said(tool, written.get(id(tool)))
                    except ValueError as exc:
                        # No JSON holds it (a lone surrogate): no client could be sent
                        # it, so it goes alone, not the whole listing.
                        _skip_unwritable(options, tool, exc)
                        continue
                    total += listed_size(entry)
                    if total > options.max_list_bytes:
                        break
                    tools.append(tool)
                    said.append(entry)
                if total > options.max_list_bytes:
                    _log.warning(
                        "MCP server %s: tools/list is larger than max_list_bytes=%d; "
                        "the rest is ignored",
                        options.server_id,
                        options.max_list_bytes,
                    )
                    break
                cursor = page.next_cursor
                if cursor is None or len(tools) >= _MAX_TOOLS:
                    break
                if has_lone_surrogate(cursor):
                    # The next request could not be written: the listing ends here.
                    _log.warning(
                        "MCP server %s: tools/list gave a nextCursor holding %s; "
                        "the listing ends with the tools listed so far",
                        options.server_id,
                        LONE_SURROGATE,
                    )
                    break
        listed = seen
    except trio.TooSlowError as exc:
        raise McpBridgeError(
            options.server_id, f"tools/list took longer than {limit_s:g}s"
        ) from exc
    except Exception as exc:
        if conn.state.fault is not None:
            conn.stop.set()
        raise McpBridgeError(
            options.server_id, f"tools/list failed: {conn.fault_reason(exc)}"
        ) from exc
    finally:
        _bound_sdk_tool_state(client, listed)
    return tools[:_MAX_TOOLS], tuple(said[:_MAX_TOOLS])


class PreparedTool(NamedTuple):
    """A listed tool the bridge can offer (a tuple: one made per listed tool).

    Attributes:
        info: what the server said about it.
        schema: its ``inputSchema``.
        description: its description, clipped.
        checked: its ``outputSchema``, which results are checked against (compiled
            on the first call; one that cannot be used leaves them unchecked).
    """

    info: McpToolInfo
    schema: JsonObject
    description: str | None
    checked: JsonObject | None


def prepare_tool(
    options: BridgeOptions,
    tool: Any,
    hashes: SharedParts | None = None,
    written: bytes | None = None,
) -> PreparedTool | None:
    """``tool`` as the bridge offers it, or ``None`` (logged) when it is unusable.

    ``hashes``, shared by the tools of one listing, makes each distinct part
    plain and hashes it once: tools whose schemas (or hints) are equal share
    one object. With ``written`` (the gate's ``written_tool`` of it: its JSON
    but its free text), the parts read from the rest of the definition (its
    schemas, hints and task support) are made once for every tool written
    the same (``SharedParts.body``).

    Its ``outputSchema`` is not compiled here: that happens on the tool's first
    call (see ``OutputChecker.check``), so opening a listing never pays for
    schemas nobody calls.
    """
    name = tool.name
    if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
        _log.warning(
            "skipping MCP tool with an unusable name from %s: %r",
            options.server_id,
            clip(repr(name), NAME_LIMIT),
        )
        return None
    body = None if hashes is None or written is None else hashes.body(written)
    if body is None:
        body = _body(tool, hashes)
        if hashes is not None and written is not None:
            hashes.keep_body(written, body)
    schema, output_schema, annotations, task_support = body
    if not isinstance(schema, dict):
        _log.warning("skipping MCP tool %s: inputSchema is not a JSON object", name)
        return None
    description = tool.description if isinstance(tool.description, str) else None
    if description is not None and len(description) > _MAX_DESCRIPTION_CHARS:
        description = clip(description, _MAX_DESCRIPTION_CHARS)
    full_name = f"{options.name_prefix}{name}"
    title = tool.title if isinstance(tool.title, str) else annotations.title
    if title is not None and len(title) > _MAX_INFO_CHARS:
        title = clip(title, _MAX_INFO_CHARS)
    checked = output_schema if isinstance(output_schema, dict) else None
    # A switch to task-augmented runs after approval is drift like any other.
    if hashes is None:
        parts: Mapping[str, str] = definition_parts(
            description, schema, output_schema, annotations, title, task_support
        )
        digest = definition_hash(parts)
    else:
        parts, digest = hashes.definition(
            description, schema, output_schema, annotations, title, task_support
        )
    info = McpToolInfo(
        server_id=options.server_id,
        name=name,
        tool_name=full_name,
        title=title,
        annotations=annotations,
        output_schema=checked,
        task_support=task_support,
        definition_hash=digest,
        definition_parts=parts,
    )
    return PreparedTool(info, schema, description, checked)


def _plain_schema(schema: Any, hashes: SharedParts | None) -> JsonValue:
    """``schema`` as plain JSON (one copy for equal schemas when ``hashes``); None if it is not."""
    try:
        return plain_json(schema) if hashes is None else hashes.plain(schema, plain_json)
    except ValueError:
        return None


def _body(tool: Any, hashes: SharedParts | None) -> ToolBody:
    """The parts of ``tool``'s definition but its free text (see ``SharedParts.body``)."""
    schema = _plain_schema(tool.input_schema, hashes)
    if hashes is None:
        annotations = McpToolAnnotations.from_mcp(tool.annotations)
    else:
        annotations = hashes.hints(tool.annotations)
    output_schema: JsonValue = None
    if tool.output_schema is not None:
        output_schema = _plain_schema(tool.output_schema, hashes)
    execution = getattr(tool, "execution", None)
    task_support = getattr(execution, "task_support", None)
    task_support = task_support if isinstance(task_support, str) else "forbidden"
    return schema, output_schema, annotations, task_support


@attrs.define(eq=False)
class Pins:
    """Each tool's definition pinned by hash when first listed (optionally in a file)."""

    options: BridgeOptions
    # Each pin's parts, never changed in place: a tool's first pin is its info's own
    # read-only parts (shared by the tools of one definition), not a copy per tool.
    _pins: dict[str, Mapping[str, str]] = attrs.field(factory=dict)

    async def load(self) -> None:
        """Read the pins file, if any; its pins win over the ones held.

        Raises:
            McpBridgeError: the file cannot be read or is not a pins file.
        """
        path = self.options.pins_file
        if path is None:
            return
        try:
            text = await trio.Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        except OSError as exc:
            raise McpBridgeError(self.options.server_id, f"cannot read pins_file: {exc}") from exc
        try:
            data = json.loads(text)
            tools = data["tools"]
            pins = {
                str(name): {str(k): str(v) for k, v in parts.items()}
                for name, parts in tools.items()
            }
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise McpBridgeError(
                self.options.server_id,
                f'pins_file {path} is not {{"tools": {{name: {{part: sha256}}}}}}',
            ) from exc
        # The file wins: a host accepts a changed tool by writing its new pin there.
        self._pins.update(pins)

    async def save(self) -> None:
        """Write the pins file atomically, if any (a failure is logged, not raised)."""
        path = self.options.pins_file
        if path is None:
            return
        pins = {name: dict(parts) for name, parts in self._pins.items()}
        data = {"version": 1, "server_id": self.options.server_id, "tools": pins}
        text = json.dumps(data, indent=2, sort_keys=True) + "\n"

        def write() -> None:
            # A fresh temporary name (O_EXCL, no link followed), renamed over
            # the pins file: a link planted at either name is never written through.
            target = os.path.abspath(path)
            temporary = f".{os.path.basename(target)}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
            opened = open_private_file(
                os.path.join(os.path.dirname(target), temporary),
                os.O_WRONLY | os.O_CREAT | os.O_EXCL,
            )
            try:
                try:
                    data = memoryview(text.encode("utf-8"))
                    while data:
                        data = data[os.write(opened.fd, data) :]
                finally:
                    os.close(opened.fd)
                os.replace(
                    temporary,
                    os.path.basename(target),
                    src_dir_fd=opened.directory_fd,
                    dst_dir_fd=opened.directory_fd,
                )
            finally:
                os.close(opened.directory_fd)

        try:
            await trio.to_thread.run_sync(write)
        except OSError:
            _log.warning("could not write pins_file %s", path, exc_info=True)

    def pinned(self, name: str) -> Mapping[str, str] | None:
        """The parts pinned for the server's tool ``name``, if any."""
        return self._pins.get(name)

    def settled(self, info: McpToolInfo) -> tuple[McpToolInfo, bool] | None:
        """What :meth:`check` returns when no host is asked (first use, or unchanged)."""
        pinned = self._pins.get(info.name)
        if pinned is None:
            # Trust on first use: the definition seen first is the one approved.
            parts = info.definition_parts
            self._pins[info.name] = parts if type(parts) is MappingProxyType else dict(parts)
            return info, True
        if not changed_parts(pinned, info.definition_parts):
            return info, False
        return None

    async def check(self, info: McpToolInfo) -> tuple[McpToolInfo, bool]:
        """``info`` marked with what changed since its pin; whether a pin was (re)set."""
        settled = self.settled(info)
        if settled is not None:
            return settled
        parts = dict(info.definition_parts)
        changed = changed_parts(self._pins[info.name], parts)
        info = attrs.evolve(info, changed=changed)
        accept = self.options.accept_change
        if accept is not None:
            try:
                answer = accept(info)
                if not isinstance(answer, bool):
                    answer = await answer
            except Exception:
                _log.warning("accept_change raised; the change is not accepted", exc_info=True)
                answer = False
            if answer is True:
                self._pins[info.name] = parts
                return attrs.evolve(info, changed=()), True
        _log.warning(
            "MCP tool %s changed since it was pinned (%s); its calls are refused",
            info.tool_name,
            ", ".join(changed),
        )
        return info, False
