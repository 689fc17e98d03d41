"""What a server says about its tools: untrusted hints, and the pins that notice a change."""

from __future__ import annotations

import functools
import hashlib
import json
import operator
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any

import attrs
import pydantic_core

from prism.core import (
    JsonObject,
    JsonValue,
)

__all__ = [
    "McpApprovalCallback",
    "McpToolAnnotations",
    "McpToolInfo",
]

_MAX_TITLE_CHARS = 256
_HINT_FIELDS = ("title", "read_only_hint", "destructive_hint", "idempotent_hint", "open_world_hint")
_HINTS_OF = operator.attrgetter(*_HINT_FIELDS)


def _hint(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


@attrs.frozen(kw_only=True)
class McpToolAnnotations:
    """A tool's annotations as the server sent them (``None``: not given).

    They are hints from an untrusted server: a policy may relax its defaults
    on them only for a server the host trusts. When a hint is missing the
    spec's defaults apply, which :attr:`destructive` and :attr:`open_world`
    report.

    Attributes:
        title: a display title.
        read_only_hint: the tool does not change its environment.
        destructive_hint: it may destroy or overwrite (spec default: true).
        idempotent_hint: calling it twice with the same arguments does no more.
        open_world_hint: it reaches beyond a closed world (spec default: true).
    """

    title: str | None = None
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    idempotent_hint: bool | None = None
    open_world_hint: bool | None = None

    @property
    def read_only(self) -> bool:
        """``read_only_hint`` with its default (false)."""
        return self.read_only_hint is True

    @property
    def destructive(self) -> bool:
        """``destructive_hint`` with its default (true); a read-only tool is not destructive."""
        if self.read_only:
            return False
        return self.destructive_hint is not False

    @property
    def open_world(self) -> bool:
        """``open_world_hint`` with its default (true)."""
        return self.open_world_hint is not False

    @classmethod
    def from_mcp(cls, annotations: Any) -> McpToolAnnotations:
        """Read an SDK ``ToolAnnotations`` (or ``None``) leniently."""
        if annotations is None:
            return cls()
        title = getattr(annotations, "title", None)
        return cls(
            title=title[:_MAX_TITLE_CHARS] if isinstance(title, str) else None,
            read_only_hint=_hint(getattr(annotations, "read_only_hint", None)),
            destructive_hint=_hint(getattr(annotations, "destructive_hint", None)),
            idempotent_hint=_hint(getattr(annotations, "idempotent_hint", None)),
            open_world_hint=_hint(getattr(annotations, "open_world_hint", None)),
        )

    def to_json(self) -> JsonObject:
        """The hints that were given, under their wire names."""
        out: JsonObject = {}
        for key, value in (
            ("title", self.title),
            ("readOnlyHint", self.read_only_hint),
            ("destructiveHint", self.destructive_hint),
            ("idempotentHint", self.idempotent_hint),
            ("openWorldHint", self.open_world_hint),
        ):
            if value is not None:
                out[key] = value
        return out


@attrs.frozen(kw_only=True)
class McpToolInfo:
    """What the bridge knows about one bridged tool, beyond its ``ToolDefinition``.

    Attributes:
        server_id: the bridge's ``server_id``.
        name: the tool's name on the server.
        tool_name: its Prism name (``mcp:<server_id>:<name>``).
        title: the tool's ``title`` (or its annotations' title), clipped.
        annotations: the server's hints.
        output_schema: the tool's ``outputSchema``, if any.
        task_support: ``"forbidden"``, ``"optional"`` or ``"required"`` (2025-11-25 tasks).
        definition_hash: SHA-256 of the definition (description, input and
            output schema, annotations, title) the call runs against.
        definition_parts: the SHA-256 of each of those parts, by wire name
            (``description``, ``inputSchema``, ``outputSchema``, ``annotations``,
            ``title``); what a pin holds.
        changed: the parts that differ from the tool's pin. Non-empty means the
            server changed the tool after it was pinned: calls are refused
            until the host accepts the new definition.
    """

    server_id: str
    name: str
    tool_name: str
    title: str | None = None
    annotations: McpToolAnnotations = attrs.field(factory=McpToolAnnotations)
    output_schema: JsonObject | None = attrs.field(default=None, eq=False)
    task_support: str = "forbidden"
    definition_hash: str = ""
    definition_parts: Mapping[str, str] = attrs.field(factory=dict, eq=False)
    changed: tuple[str, ...] = ()


_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str)
"""What ``json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)``
uses, made once (a listing hashes each of its tools' parts)."""


def _sha(value: object) -> str:
    text = _ENCODER.encode(value)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@functools.lru_cache(maxsize=256)
def _annotations_sha(annotations: McpToolAnnotations) -> str:
    # The tools of a listing share a few sets of hints: each is hashed once.
    return _sha(annotations.to_json())


ToolBody = tuple[JsonValue, JsonValue, McpToolAnnotations, str]
"""A tool's definition but its free text: its ``inputSchema`` and ``outputSchema``
made plain, its hints and its task support."""


@attrs.define(eq=False)
class SharedParts:
    """The parts of one listing's tools, each distinct value made plain, hashed and kept once.

    The tools of a listing repeat their parts (one output schema for all, a
    few descriptions, many schemas of one shape). A value is keyed by the JSON
    text pydantic-core writes of it, which differs between any two plain JSON
    values whose canonical texts differ (``1``, ``1.0`` and ``true``; every
    string escaped; non-finite numbers as bare tokens, never ``null``); key
    order only makes more keys. A text (a description, a title) is keyed by
    itself, a tool's hints by their values, and its parts and definition hash
    by the identities of the shared parts, so tools of one definition share
    those too. Lives for one listing: its keys are at most the listing's own
    text.
    """

    _seen: dict[bytes, tuple[object, str]] = attrs.field(factory=dict)
    # The values plain() gave out, by identity (each held in _seen): their hash
    # without writing them again.
    _given: dict[int, tuple[object, str]] = attrs.field(factory=dict)
    # Texts (a description, a title) and None by themselves: equal texts are equal JSON.
    _texts: dict[str | None, str] = attrs.field(factory=dict)
    # Hints by the SDK's values and their types (True and 1 are equal keys otherwise).
    _hints: dict[tuple[object, ...], McpToolAnnotations] = attrs.field(factory=dict)
    # Parts and definition hash by the identities of the parts (each object kept in
    # the entry, so no identity is reused while it is here).
    _definitions: dict[
        tuple[object, ...], tuple[object, object, object, Mapping[str, str], str]
    ] = attrs.field(factory=dict)
    # Each body by the text of the tool it was made from (see body()).
    _bodies: dict[bytes, ToolBody] = attrs.field(factory=dict)

    def body(self, written: bytes) -> ToolBody | None:
        """The parts made before for a tool written as ``written``, if any.

        ``written`` is a tool's JSON text but its free text (its name, title and
        description), after their kinds (the gate's ``written_tool``): tools
        written the same have equal schemas, hints and task support, and share
        one of each (and the hashes of the schemas) without a pass over them.
        """
        return self._bodies.get(written)

    def keep_body(self, written: bytes, body: ToolBody) -> None:
        """Keep ``body``, made from a tool written as ``written`` (see :meth:`body`)."""
        self._bodies[written] = body

    def _key(self, value: object) -> bytes | None:
        try:
            return pydantic_core.to_json(value, inf_nan_mode="constants")
        except ValueError:
            # A lone surrogate (no UTF-8 holds it): made plain and hashed alone.
            return None

    def sha(self, value: object) -> str:
        """``_sha(value)`` of a plain JSON ``value``."""
        if value is None or type(value) is str:
            text = self._texts.get(value)
            if text is None:
                text = self._texts[value] = _sha(value)
            return text
        given = self._given.get(id(value))
        if given is not None and given[0] is value:
            return given[1]
        key = self._key(value)
        if key is None:
            return _sha(value)
        known = self._seen.get(key)
        if known is None:
            known = self._seen[key] = (value, _sha(value))
        return known[1]

    def hints(self, annotations: Any) -> McpToolAnnotations:
        """``McpToolAnnotations.from_mcp(annotations)``, one object for equal hints."""
        if annotations is None:
            key: tuple[object, ...] = ()
        else:
            try:
                raw = _HINTS_OF(annotations)
            except AttributeError:
                raw = tuple(getattr(annotations, name, None) for name in _HINT_FIELDS)
            key = (*raw, *map(type, raw))
        try:
            known = self._hints.get(key)
        except TypeError:  # a value no dict can key (not what the SDK's model holds)
            return McpToolAnnotations.from_mcp(annotations)
        if known is None:
            known = self._hints[key] = McpToolAnnotations.from_mcp(annotations)
        return known

    def definition(
        self,
        description: str | None,
        input_schema: object,
        output_schema: object,
        annotations: McpToolAnnotations,
        title: str | None,
        task_support: str = "forbidden",
    ) -> tuple[Mapping[str, str], str]:
        """:func:`definition_parts` (read-only) and their :func:`definition_hash`.

        Tools whose parts are the same objects (the schemas and hints this
        listing shares) and equal texts share one of each.
        """
        key = (
            description,
            id(input_schema),
            id(output_schema),
            id(annotations),
            title,
            task_support,
        )
        known = self._definitions.get(key)
        if (
            known is not None
            and known[0] is input_schema
            and known[1] is output_schema
            and known[2] is annotations
        ):
            return known[3], known[4]
        parts = definition_parts(
            description, input_schema, output_schema, annotations, title, task_support, self
        )
        view = MappingProxyType(parts)
        digest = definition_hash(parts)
        self._definitions[key] = (input_schema, output_schema, annotations, view, digest)
        return view, digest

    def plain(self, value: object, make_plain: Callable[[object], JsonValue]) -> JsonValue:
        """``make_plain(value)``, or the plain value made before from an equal one.

        For values parsed from JSON (a ``tools/list`` page): two that write the
        same JSON text are equal, so the tools share one object and its hash.
        ``make_plain``'s ``ValueError`` (a non-finite number) is raised as it is.
        """
        key = self._key(value)
        if key is None:
            return make_plain(value)
        known = self._seen.get(key)
        if known is None:
            plain = make_plain(value)
            known = self._seen[key] = self._given[id(plain)] = (plain, _sha(plain))
        return known[0]  # type: ignore[return-value]


def definition_parts(
    description: str | None,
    input_schema: object,
    output_schema: object,
    annotations: McpToolAnnotations,
    title: str | None,
    task_support: str = "forbidden",
    hashes: SharedParts | None = None,
) -> dict[str, str]:
    """The SHA-256 of each part of what a tool says it is.

    ``taskSupport`` is a part only when it is not ``"forbidden"`` (the default),
    so pins written before it was one still hold for tools that never ran as tasks.
    With ``hashes`` (the schemas plain JSON), a value seen before in it is not
    hashed again.
    """
    sha = _sha if hashes is None else hashes.sha
    parts = {
        "description": sha(description),
        "inputSchema": sha(input_schema),
        "outputSchema": sha(output_schema),
        "annotations": _annotations_sha(annotations),
        "title": sha(title),
    }
    if task_support != "forbidden":
        parts["taskSupport"] = _sha(task_support)
    return parts


_PARTS_TEXT = (
    '{"annotations":"%s","description":"%s","inputSchema":"%s","outputSchema":"%s",%s"title":"%s"}'
)
_STR = {str}


def definition_hash(parts: Mapping[str, str]) -> str:
    """One hash over a tool's :func:`definition_parts`."""
    task = parts.get("taskSupport") if type(parts) is dict else None
    if type(parts) is dict and len(parts) == (5 if task is None else 6):
        # What definition_parts writes (its five or six parts, each ASCII letters
        # and digits, which JSON writes as they are), written as _sha writes it
        # (sorted keys) in one step.
        try:
            values = [parts[name] for name in ("annotations", "description", "inputSchema")]
            values += [parts["outputSchema"], "" if task is None else task, parts["title"]]
        except KeyError:
            values = []
        joined = "".join(values) if set(map(type, values)) == _STR else ""
        if joined.isascii() and joined.isalnum() and (task is None or task):
            values[4] = "" if task is None else f'"taskSupport":"{task}",'
            return hashlib.sha256((_PARTS_TEXT % tuple(values)).encode()).hexdigest()
    # Every key and value a non-empty str of ASCII letters and digits (JSON
    # writes it as it is), checked on them all joined.
    plain = {*map(type, parts), *map(type, parts.values())} == {str}
    joined = "".join(parts) + "".join(parts.values()) if plain else ""
    if joined.isascii() and joined.isalnum() and all(parts) and all(parts.values()):
        # What _sha writes for such a dict (letters and digits need no escape), by hand.
        text = ",".join(f'"{key}":"{parts[key]}"' for key in sorted(parts))
        return hashlib.sha256(f"{{{text}}}".encode()).hexdigest()
    return _sha(dict(parts))


def changed_parts(pinned: Mapping[str, str], parts: Mapping[str, str]) -> tuple[str, ...]:
    """The parts whose hash differs from the pin, in a stable order."""
    return tuple(sorted(key for key in {*pinned, *parts} if pinned.get(key) != parts.get(key)))


McpApprovalCallback = Callable[[McpToolInfo], "bool | Awaitable[bool]"]
"""``approve(info) -> bool``, sync or async: asked for a tool the policy will not allow alone."""
