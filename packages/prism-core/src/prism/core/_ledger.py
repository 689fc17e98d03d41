"""The run ledger: one record per dispatched call, redacted, exportable as JSONL.

Serialization lives here at the edge, in one cattrs converter that is built on
first use (so ``import prism.core`` does not pay for cattrs). Each JSONL line
is an object tagged with a stable ``type`` name and the ``schema_version``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, get_args

import attrs

from ._content import TextContent, ToolResult
from ._errors import PrismError
from ._events import BlockedReason
from ._json import JsonValue

if TYPE_CHECKING:
    import cattrs

__all__ = [
    "LEDGER_SCHEMA_VERSION",
    "LedgerFormatError",
    "Redactor",
    "RunLedger",
    "ToolCallRecord",
    "ToolCallStatus",
    "default_redactor",
    "json_safe",
    "snapshot_json",
]

LEDGER_SCHEMA_VERSION = 1
"""The version written into every JSONL line; readers refuse other versions."""

_REDACTED = "[REDACTED]"
_MAX_STRING = 1000
_MAX_PREVIEW = 500
_MAX_NAME = 256
# Text past a clip point is still scanned this far, so a secret that straddles
# the cut is redacted whole instead of leaking its first characters.
_SCAN_WINDOW = 256
_MAX_ITEMS = 200
_MAX_DEPTH = 32

ToolCallStatus: TypeAlias = Literal["ok", "error", "blocked", "cancelled"]
Redactor: TypeAlias = Callable[[JsonValue], JsonValue]
"""Returns a copy of a JSON value with secrets replaced; must not mutate its input."""


class LedgerFormatError(PrismError, ValueError):
    """A JSONL ledger could not be read or written: bad JSON, unknown version or tag, bad field."""


@attrs.frozen(kw_only=True)
class ToolCallRecord:
    """What happened to one call. Arguments and preview are redacted and bounded.

    Attributes:
        call_id: the provider's call id.
        tool_name: the registry name (after any middleware rewrite).
        arguments: the call's arguments, bounded in size and redacted.
        status: ``ok`` (executed, not an error), ``error`` (executed or raised, error
            result), ``blocked`` (a gate refused it), ``cancelled`` (aborted).
        blocked_reason: which gate refused it, for ``blocked``.
        started_at: wall-clock seconds when dispatch began.
        finished_at: wall-clock seconds when the result was final.
        duration_s: monotonic duration of the whole dispatch.
        result_preview: the start of the result's text, redacted.
    """

    call_id: str
    tool_name: str
    arguments: JsonValue
    status: ToolCallStatus
    blocked_reason: BlockedReason | None
    started_at: float
    finished_at: float
    duration_s: float
    result_preview: str | None = None


# --- redaction -------------------------------------------------------------------------

_SECRET_KEY = re.compile(
    r"(?i)(pass(?:word|wd|phrase)|\bpwd\b|secret|token|api[_-]?key|apikey|access[_-]?key"
    r"|private[_-]?key|signing[_-]?key|authori[sz]ation|(?:^|[^a-z])auth(?:[^a-z]|$)"
    r"|cookie|credential|session[_-]?id|bearer)"
)
# Keys that contain "token" but count tokens instead of holding one.
_COUNT_KEY = re.compile(
    r"(?i)^(?:(?:max|min|num|n|total|prompt|completion|input|output|cached|reasoning)"
    r"[_-]?tokens?|tokens(?:[_-]?(?:count|limit|used|budget))?"
    r"|token[_-]?(?:count|limit|used|budget)|max[_-]?new[_-]?tokens)$"
)
# Secret-looking text. Each rule runs only when one of its cheap substring
# triggers occurs in the lowercased text: a single combined case-insensitive
# regex costs ~16 µs per 100 characters, far too much for every argument.
_SECRET_RULES: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = (
    (("bearer",), re.compile(r"(?i)\bbearer\s+[a-z0-9._~+/=-]{8,}")),
    (("basic",), re.compile(r"(?i)\bbasic\s+[a-z0-9+/=]{8,}")),
    (("sk-",), re.compile(r"(?i)\bsk-[a-z0-9_-]{16,}")),
    (
        ("ghp_", "gho_", "ghs_", "ghu_", "ghr_", "github_pat_"),
        re.compile(r"(?i)\b(?:ghp|gho|ghs|ghu|ghr|github_pat)_[a-z0-9_]{16,}"),
    ),
    (("xox",), re.compile(r"(?i)\bxox[abposr]-[a-z0-9-]{10,}")),
    (("akia", "asia"), re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    (("eyj",), re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    (
        ("private key",),
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"
        ),
    ),
    (("://",), re.compile(r"(?<=://)[^\s/:@]+:[^\s/@]+(?=@)")),
)
# ``name = value`` / ``"name": "value"`` assignments; the name is kept.
_ASSIGN_TRIGGERS = ("pass", "pwd", "token", "secret", "key", "auth")
_SECRET_ASSIGNMENT = re.compile(
    r"(?i)(?P<name>(?:password|passwd|pwd|token|secret|api[_-]?key|access[_-]?key|auth)"
    r"[\"']?\s*[=:]\s*[\"']?)[^\s\"'&,;]+"
)
_key_cache: dict[str, bool] = {}


def _is_secret_key(key: str) -> bool:
    secret = _key_cache.get(key)
    if secret is None:
        secret = bool(_SECRET_KEY.search(key)) and not _COUNT_KEY.match(key)
        if len(_key_cache) >= 4096:
            _key_cache.clear()
        _key_cache[key] = secret
    return secret


def _keep_name(match: re.Match[str]) -> str:
    return match.group("name") + _REDACTED


def _redact_text(text: str) -> str:
    if len(text) < 5:  # shorter than anything the rules match ("pwd=x")
        return text
    if len(text) < 20 and text.isalnum():
        # Every rule needs punctuation, whitespace or (AWS key ids) 20 characters.
        return text
    low = text.lower()
    for triggers, pattern in _SECRET_RULES:
        for trigger in triggers:
            if trigger in low:
                text = pattern.sub(_REDACTED, text)
                break
    if "=" in text or ":" in text:
        for trigger in _ASSIGN_TRIGGERS:
            if trigger in low:
                return _SECRET_ASSIGNMENT.sub(_keep_name, text)
    return text


class _DefaultRedactor:
    """The default :data:`Redactor` (see :func:`default_redactor`)."""

    __slots__ = ()

    def __call__(self, value: JsonValue) -> JsonValue:
        return _bounded(value, 0, True)

    def __repr__(self) -> str:
        return "default_redactor()"


_DEFAULT = _DefaultRedactor()


def default_redactor() -> Redactor:
    """The redactor :class:`RunLedger` uses unless told otherwise.

    It replaces with ``[REDACTED]``:

    - the value under any key that looks secret: passwords, tokens (not token
      counts such as ``max_tokens``), API and access keys, private keys,
      ``Authorization`` / ``auth`` headers, cookies, credentials, session ids;
    - secret-looking text anywhere: ``Bearer``/``Basic`` credentials, ``sk-``
      keys, GitHub and Slack tokens, AWS key ids, JWTs, PEM private keys, the
      password in ``scheme://user:password@host``, and ``password=...``,
      ``"api_key": "..."`` style assignments.

    It never mutates its input, and also bounds sizes like the ledger does.
    """
    return _DEFAULT


def _clip(text: str, limit: int, total: int | None = None) -> str:
    total = len(text) if total is None else total
    if total <= limit:
        return text
    return f"{text[:limit]}...[{total - limit} more chars]"


def _bounded_str(text: str, limit: int, redact: bool) -> str:
    if len(text) <= limit:
        return _redact_text(text) if redact else text
    head = text[: limit + _SCAN_WINDOW]
    if redact:
        head = _redact_text(head)
    return f"{head[:limit]}...[{len(text) - limit} more chars]"


def _bounded(value: object, depth: int, redact: bool) -> JsonValue:
    kind = type(value)
    if kind is str:
        if len(value) <= _MAX_STRING:  # type: ignore[arg-type]
            return _redact_text(value) if redact else value  # type: ignore[arg-type,return-value]
        return _bounded_str(value, _MAX_STRING, redact)  # type: ignore[arg-type]
    if value is None or kind is bool or kind is int:
        return value  # type: ignore[return-value]
    if kind is float:
        return value if math.isfinite(value) else repr(value)  # type: ignore[arg-type,return-value]
    if depth >= _MAX_DEPTH:
        return "[too deep]"
    if isinstance(value, dict):
        out: dict[str, JsonValue] = {}
        pairs: Iterable[tuple[object, object]] = value.items()
        out_note: str | None = None
        if len(value) > _MAX_ITEMS:
            pairs = list(pairs)[:_MAX_ITEMS]
            out_note = f"[{len(value) - _MAX_ITEMS} more keys]"
        for key, item in pairs:
            name = key if type(key) is str else str(key)
            if len(name) > _MAX_STRING:
                name = _clip(name, _MAX_STRING)
            if redact and item is not None and _is_secret_key(name):
                out[name] = _REDACTED
            else:
                out[name] = _bounded(item, depth + 1, redact)
        if out_note is not None:
            out["..."] = out_note
        return out
    if isinstance(value, (list, tuple)):
        items: list[JsonValue] = [_bounded(item, depth + 1, redact) for item in value[:_MAX_ITEMS]]
        if len(value) > _MAX_ITEMS:
            items.append(f"[{len(value) - _MAX_ITEMS} more items]")
        return items
    if isinstance(value, str):
        return _bounded_str(str(value), _MAX_STRING, redact)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return _bounded(float(value), depth, redact)
    return f"<{type(value).__name__}>"


def json_safe(value: object, depth: int = 0) -> JsonValue:
    """A bounded JSON copy of ``value`` (no redaction).

    Long strings are clipped, big containers cut, non-JSON objects shown by type
    and non-finite floats written as strings.
    """
    return _bounded(value, depth, False)


def snapshot_json(value: object, depth: int = 0) -> object:
    """A copy of ``value`` as far as a ledger record will read it.

    Containers are copied (strings are immutable and shared), so mutating the
    original afterwards cannot change the record; strings are not clipped, so
    the record's redaction still sees whole secrets.
    """
    kind = type(value)
    if depth >= _MAX_DEPTH or (kind is not dict and kind is not list):
        return value
    depth += 1
    if kind is dict:
        mapping: dict[object, object] = value  # type: ignore[assignment]
        if len(mapping) <= _MAX_ITEMS:
            return {
                k: snapshot_json(v, depth) if type(v) in _CONTAINERS else v
                for k, v in mapping.items()
            }
        pairs = list(mapping.items())
        copied = {k: snapshot_json(v, depth) for k, v in pairs[:_MAX_ITEMS]}
        copied.update(pairs[_MAX_ITEMS:])
        return copied
    sequence: list[object] = value  # type: ignore[assignment]
    head = [snapshot_json(v, depth) if type(v) in _CONTAINERS else v for v in sequence[:_MAX_ITEMS]]
    return head + sequence[_MAX_ITEMS:] if len(sequence) > _MAX_ITEMS else head


_CONTAINERS = frozenset({dict, list})


def preview_text(result: ToolResult) -> str | None:
    """The start of a result's text (or a note of its other blocks), not yet clipped."""
    parts: list[str] = []
    size = 0
    others: list[str] = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
            size += len(block.text) + 1
            if size > _MAX_PREVIEW + _SCAN_WINDOW:
                break
        else:
            others.append(f"<{type(block).__name__}>")
    if parts:
        return "\n".join(parts)
    if others:
        return ", ".join(others)
    return None


# --- JSONL through one cattrs converter, built on first use ----------------------------

# Stable tag names: the class an on-disk "type" stands for never changes meaning.
_TAGS: dict[type, str] = {ToolCallRecord: "tool_call"}
_CLASSES: dict[str, type] = {tag: cls for cls, tag in _TAGS.items()}
_STATUSES = frozenset(get_args(ToolCallStatus))
_converter: cattrs.Converter | None = None


def _strict_str(value: object, _type: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _strict_float(value: object, _type: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number, got {type(value).__name__}")
    return float(value)


def _json_passthrough(value: Any, _type: object = None) -> Any:
    return value


def _get_converter() -> cattrs.Converter:
    global _converter
    if _converter is None:
        import cattrs

        converter = cattrs.Converter(forbid_extra_keys=True)
        converter.register_structure_hook(str, _strict_str)
        converter.register_structure_hook(float, _strict_float)
        # Arguments are already bounded JSON: pass them through both ways.
        json_type = attrs.fields(attrs.resolve_types(ToolCallRecord)).arguments.type
        converter.register_structure_hook_func(lambda t: t == json_type, _json_passthrough)
        converter.register_unstructure_hook_func(lambda t: t == json_type, _json_passthrough)
        _converter = converter
    return _converter


@attrs.define(eq=False)
class RunLedger:
    """Collects a :class:`ToolCallRecord` for every dispatched call.

    Args:
        redact: applied to arguments and result previews before they are stored;
            ``None`` stores them as they are (still bounded in size). Defaults to
            :func:`default_redactor`.

    Raises:
        TypeError: ``redact`` is neither callable nor ``None``.
    """

    redact: Redactor | None = attrs.field(factory=default_redactor)
    _records: list[ToolCallRecord] = attrs.field(factory=list, init=False)

    @redact.validator
    def _check_redact(self, _attribute: object, value: object) -> None:
        if value is not None and not callable(value):
            raise TypeError(f"RunLedger redact must be callable or None, got {value!r}")

    @property
    def records(self) -> list[ToolCallRecord]:
        """The records so far, in the order calls finished (a copy)."""
        return list(self._records)

    def __len__(self) -> int:
        return len(self._records)

    def record(
        self,
        *,
        call_id: str,
        tool_name: str,
        arguments: object,
        status: ToolCallStatus,
        blocked_reason: BlockedReason | None,
        started_at: float,
        finished_at: float,
        duration_s: float,
        result: ToolResult | None,
    ) -> ToolCallRecord:
        """Bound, redact and append one record; returns it.

        The dispatcher calls this (subclasses may override it to forward
        records); hosts that run calls some other way may call it too.
        """
        redact = self.redact
        preview = preview_text(result) if result is not None else None
        if redact is _DEFAULT:
            safe_args = _bounded(arguments, 0, True)
            if preview is not None:
                preview = _bounded_str(preview, _MAX_PREVIEW, True)
        else:
            safe_args = _bounded(arguments, 0, False)
            if preview is not None:
                preview = _clip(preview[: _MAX_PREVIEW + _SCAN_WINDOW], _MAX_PREVIEW, len(preview))
            if redact is not None:
                safe_args = redact(safe_args)
                if preview is not None:
                    redacted = redact(preview)
                    preview = redacted if isinstance(redacted, str) else _REDACTED
        # Both may come straight from the model (an unknown tool's name): bound them.
        if len(call_id) > _MAX_NAME:
            call_id = _clip(call_id, _MAX_NAME)
        if len(tool_name) > _MAX_NAME:
            tool_name = _clip(tool_name, _MAX_NAME)
        entry = ToolCallRecord(
            call_id=call_id,
            tool_name=tool_name,
            arguments=safe_args,
            status=status,
            blocked_reason=blocked_reason,
            started_at=started_at,
            finished_at=finished_at,
            duration_s=duration_s,
            result_preview=preview,
        )
        self._records.append(entry)
        return entry

    def to_jsonl(self) -> str:
        """One JSON object per line, each tagged ``"type": "tool_call"`` with ``schema_version``.

        Raises:
            LedgerFormatError: a record holds a value JSON cannot carry (a
                non-finite float, say; records made by :meth:`record` never do).
        """
        converter = _get_converter()
        lines = []
        for entry in self._records:
            data = converter.unstructure(entry)
            line = {"type": _TAGS[type(entry)], "schema_version": LEDGER_SCHEMA_VERSION, **data}
            try:
                # ASCII only: no reader can split a line on U+2028 or NEL.
                lines.append(json.dumps(line, allow_nan=False))
            except (TypeError, ValueError) as exc:
                raise LedgerFormatError(f"record {entry.call_id!r}: {exc}") from exc
        return "".join(f"{line}\n" for line in lines)

    @classmethod
    def from_jsonl(cls, text: str) -> RunLedger:
        """Read records written by :meth:`to_jsonl` (no redaction is applied again).

        Blank lines are skipped.

        Raises:
            LedgerFormatError: a line is not a record this version can read; the
                message gives the line number.
        """
        converter = _get_converter()
        ledger = cls(redact=None)
        # Only "\n" ends a record; str.splitlines() would also split inside
        # strings on U+2028, NEL and friends.
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except ValueError as exc:
                raise LedgerFormatError(f"line {number}: not JSON ({exc})") from exc
            if not isinstance(data, dict):
                raise LedgerFormatError(f"line {number}: expected an object")
            tag = data.pop("type", None)
            version = data.pop("schema_version", None)
            record_type = _CLASSES.get(tag) if isinstance(tag, str) else None
            if record_type is None:
                raise LedgerFormatError(f"line {number}: unknown record type {tag!r}")
            if type(version) is not int or version != LEDGER_SCHEMA_VERSION:
                raise LedgerFormatError(
                    f"line {number}: schema_version {version!r} is not {LEDGER_SCHEMA_VERSION}"
                )
            status = data.get("status")
            if not isinstance(status, str) or status not in _STATUSES:
                raise LedgerFormatError(f"line {number}: unknown status {status!r}")
            try:
                entry: ToolCallRecord = converter.structure(data, record_type)
            except Exception as exc:
                raise LedgerFormatError(f"line {number}: {_describe_cattrs(exc)}") from exc
            ledger._records.append(entry)
        return ledger


def _describe_cattrs(exc: Exception) -> str:
    """A one-line account of a cattrs failure (its errors come grouped)."""
    leaves: list[str] = []
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop()
        nested = getattr(current, "exceptions", None)
        if isinstance(nested, (list, tuple)) and nested:
            pending.extend(nested)
            continue
        notes = getattr(current, "__notes__", None) or []
        where = f" ({'; '.join(str(n) for n in notes)})" if notes else ""
        leaves.append(f"{current}{where}")
    return "; ".join(leaves) or str(exc)
