"""Screening an untrusted schema before anything compiles it.

One bounded walk checks size, depth, member count, ``$ref`` count and shape;
refuses pollution keys, cycles, non-finite numbers, non-JSON values, remote or
relative references and relative ``$id``s. Only then is the schema serialised
(the canonical JSON is the cache key) and re-parsed into a private copy, which
``_graph`` then checks for references outside schema locations, ignored
keywords and the cost of the expanded graph.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

import attrs

from ._errors import SchemaRejectedError, pointer, quoted

if TYPE_CHECKING:
    from ._limits import SchemaLimits

__all__ = [
    "INTEGER_RANGE",
    "POLLUTION_KEYS",
    "SAFE_INTEGER",
    "Screened",
    "canonical_key",
    "integer_too_long",
    "prepare",
    "screen",
]

POLLUTION_KEYS = frozenset({"__proto__", "constructor", "prototype"})

# The integers Prism validates, in a schema or an instance: those that fit in
# 64 bits (signed or unsigned), as jsonschema-rs keeps them. Past that range the
# engine compares integers through a slow path (``uniqueItems`` over 1,000 of
# them took 0.4 s, growing with the square of the count and with their length)
# and, past Python's ``sys.int_max_str_digits``, cannot read them at all and
# would apply no numeric bound. JSON numbers that large are ids or hashes in
# practice; a tool takes them as strings.
MIN_INTEGER = -(2**63)
MAX_INTEGER = 2**64 - 1
INTEGER_RANGE = "the 64-bit range (-2**63 to 2**64-1)"
# Integers strictly inside (-SAFE_INTEGER, SAFE_INTEGER) skip the exact check.
SAFE_INTEGER = 2**63


def integer_too_long(value: int) -> bool:
    """True if ``value`` is outside the integers Prism validates (64 bits)."""
    return not MIN_INTEGER <= value <= MAX_INTEGER


_DRAFTS = {
    "json-schema.org/draft-04/schema": "draft4",
    "json-schema.org/draft-06/schema": "draft6",
    "json-schema.org/draft-07/schema": "draft7",
    "json-schema.org/draft/2019-09/schema": "draft2019",
    "json-schema.org/draft/2020-12/schema": "draft2020",
}

_SCALARS = (type(None), bool, int, str)
_REF_KEYS = frozenset({"$ref", "$dynamicRef", "$recursiveRef"})


@attrs.frozen
class Screened:
    """A schema that passed screening: its cache key and draft."""

    key: str
    draft: str


class _Walk:
    """One recursive pass over the schema; the path is kept as a list, made a pointer on failure.

    The size and member counts are checked where they grow, so a DAG (one object
    reached many times) stops as soon as its expansion passes a limit. Scalars
    are handled in their container's loop (no call per scalar), and a path is
    built only for a refusal: screening is the first cost of every admission.
    """

    def __init__(self, limits: SchemaLimits, *, draft4: bool) -> None:
        self.limits = limits
        self.draft4 = draft4
        self.max_bytes = limits.max_schema_bytes
        self.max_members = limits.max_keywords
        self.max_depth = limits.max_depth
        self.members = 0
        self.refs = 0
        self.size = 0  # a lower bound of the serialised size, to stop DAG blow-ups early
        self.active: set[int] = set()
        self.path: list[str | int] = []

    def fail(self, reason: str, *extra: str | int) -> SchemaRejectedError:
        return SchemaRejectedError(reason, pointer((*self.path, *extra)))

    def too_large(self) -> SchemaRejectedError:
        return self.fail(f"schema is larger than max_schema_bytes={self.max_bytes}")

    def too_many(self) -> SchemaRejectedError:
        return self.fail(
            f"schema has more than max_keywords={self.max_members} members "
            "(object members, objects and arrays)"
        )

    def visit(self, node: object, depth: int) -> None:
        """Screen ``node`` (at ``self.path``, ``depth`` levels down) and everything in it."""
        kind = type(node)
        if kind is dict or kind is list:
            self.container(node, kind is dict, depth)
        else:
            self.scalar(node, kind)

    def scalar(self, node: object, kind: type) -> None:
        if kind is str:
            self.size += len(node) + 2  # type: ignore[arg-type]
        elif kind is float:
            if not math.isfinite(node):  # type: ignore[arg-type]
                raise self.fail(f"schema contains a non-finite number ({node!r})")
            self.size += 1
        elif kind is int:
            if integer_too_long(node):  # type: ignore[arg-type]
                raise self.fail(f"schema contains an integer outside {INTEGER_RANGE}")
            self.size += 1
        elif kind in _SCALARS:
            self.size += 1
        else:
            raise self.fail(f"schema contains a {kind.__name__}, which is not a JSON value")
        if self.size > self.max_bytes:
            raise self.too_large()

    def empty(self) -> None:
        """An empty object or array (the cheapest members to send: the walk's commonest node)."""
        self.members += 1
        if self.members > self.max_members:
            raise self.too_many()
        self.size += 2
        if self.size > self.max_bytes:
            raise self.too_large()

    def container(self, node: Any, is_dict: bool, depth: int) -> None:
        if depth > self.max_depth:
            raise self.fail(f"schema nests deeper than max_depth={self.max_depth}")
        ident = id(node)
        active = self.active
        if ident in active:
            raise self.fail("schema contains a cycle")
        # Every object and array counts too: each is work for the analysis
        # and the engine's compile (80,000 empty prefixItems, 240 kB, held
        # admission for 1-2 s although they have no members).
        self.members += 1 + len(node) if is_dict else 1
        if self.members > self.max_members:
            raise self.too_many()
        self.size += 2
        if self.size > self.max_bytes:
            raise self.too_large()
        active.add(ident)
        path = self.path
        below = depth + 1
        max_bytes = self.max_bytes
        if is_dict:
            for key, value in node.items():
                if type(key) is not str:
                    raise self.fail(_non_string_key(key))
                if key in POLLUTION_KEYS:
                    raise self.fail(f"schema has the forbidden key {key!r}", key)
                self.size += len(key) + 3
                if self.size > max_bytes:
                    raise self.too_large()
                kind = type(value)
                if kind is str:
                    if key in _REF_KEYS:
                        self.check_ref(value, key)
                    elif key == "$id" or (key == "id" and self.draft4):
                        self.check_id(value, key)
                    self.size += len(value) + 2
                    if self.size > max_bytes:
                        path.append(key)
                        raise self.too_large()
                    continue
                path.append(key)
                if (kind is dict or kind is list) and not value and below <= self.max_depth:
                    self.empty()
                elif kind is dict or kind is list:
                    self.container(value, kind is dict, below)
                else:
                    self.scalar(value, kind)
                path.pop()
        else:
            for index, item in enumerate(node):
                self.size += 1
                if self.size > max_bytes:
                    raise self.too_large()
                kind = type(item)
                if kind is str:  # enum, required...: no call per string
                    self.size += len(item) + 2
                    if self.size > max_bytes:
                        path.append(index)
                        raise self.too_large()
                    continue
                path.append(index)
                if (kind is dict or kind is list) and not item and below <= self.max_depth:
                    self.empty()
                elif kind is dict or kind is list:
                    self.container(item, kind is dict, below)
                else:
                    self.scalar(item, kind)
                path.pop()
        active.discard(ident)

    def check_ref(self, ref: str, key: str) -> None:
        self.refs += 1
        if self.refs > self.limits.max_refs:
            raise self.fail(f"schema has more than max_refs={self.limits.max_refs} $refs", key)
        if not ref.startswith("#"):
            raise self.fail(
                f"$ref {quoted(ref)} is not fragment-local; only '#...' references are "
                "allowed and nothing is ever fetched",
                key,
            )

    def check_id(self, value: str, key: str) -> None:
        if value == "" or value.startswith("#"):
            return
        try:
            parts = urlsplit(value)
        except ValueError as exc:
            raise self.fail(f"$id {quoted(value)} is not a valid URI", key) from exc
        if not parts.scheme:
            raise self.fail(
                f"$id {quoted(value)} is relative; relative identifiers would resolve "
                "references against a location Prism never reads",
                key,
            )


def _non_string_key(key: object) -> str:
    # The key's type only: a str subclass's repr, hash or eq is the caller's code.
    return f"schema has a non-string key (of type {type(key).__name__})"


def _draft_of(schema: object, unsupported: Literal["reject", "ignore"]) -> str:
    if type(schema) is not dict:
        return "draft2020"
    for key in schema:
        # Before the lookup below: it would hash the keys, and a str subclass's
        # __hash__ or __eq__ runs its own code.
        if type(key) is not str:
            raise SchemaRejectedError(_non_string_key(key), "#")
    declared = schema.get("$schema")
    if declared is None:
        return "draft2020"  # MCP's default dialect
    if type(declared) is not str:
        raise SchemaRejectedError("$schema must be a string", "#/$schema")
    stem = declared.split("://", 1)[-1].rstrip("#")
    draft = _DRAFTS.get(stem)
    if draft is None:
        if unsupported == "reject":
            raise SchemaRejectedError(
                f"$schema {quoted(declared)} is not a draft this adapter supports "
                "(draft-04, -06, -07, 2019-09, 2020-12)",
                "#/$schema",
            )
        return "draft2020"
    return draft


def screen(
    schema: object, limits: SchemaLimits, unsupported: Literal["reject", "ignore"]
) -> Screened:
    """Check ``schema`` against every static rule and return its cache key.

    Raises:
        SchemaRejectedError: the schema breaks a rule; the message says which.
    """
    if type(schema) is not dict and type(schema) is not bool:
        raise SchemaRejectedError(
            f"a schema must be a JSON object or a boolean, got {type(schema).__name__}"
        )
    draft = _draft_of(schema, unsupported)
    _Walk(limits, draft4=draft == "draft4").visit(schema, 1)
    try:
        key = canonical_key(schema)
    except (ValueError, TypeError, RecursionError) as exc:  # pragma: no cover - screened above
        raise SchemaRejectedError(f"schema cannot be serialised ({type(exc).__name__})") from exc
    if len(key) > limits.max_schema_bytes or len(key.encode("utf-8", "surrogatepass")) > (
        limits.max_schema_bytes
    ):
        raise SchemaRejectedError(
            f"schema is larger than max_schema_bytes={limits.max_schema_bytes}"
        )
    return Screened(key=key, draft=draft)


def canonical_key(schema: object) -> str:
    """Canonical JSON of a screened schema: equal schemas give equal keys."""
    return json.dumps(
        schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def prepare(screened: Screened) -> Any:
    """A private copy of the schema (parsed back from its canonical JSON)."""
    return json.loads(screened.key)
