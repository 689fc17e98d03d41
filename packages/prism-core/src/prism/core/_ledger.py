"""The run ledger: one record per dispatched call, redacted, exportable as JSONL."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, TypeAlias, get_args

import attrs
import cattrs

from ._errors import PrismError
from ._events import BlockedReason
from ._json import JsonValue

if TYPE_CHECKING:
    from ._content import ToolResult

__all__ = [
    "LEDGER_SCHEMA_VERSION",
    "LedgerFormatError",
    "Redactor",
    "RunLedger",
    "ToolCallRecord",
    "ToolCallStatus",
    "default_redactor",
    "json_safe",
]

LEDGER_SCHEMA_VERSION = 1
_RECORD_TAG = "tool_call"
_REDACTED = "[REDACTED]"
_MAX_STRING = 1000
_MAX_PREVIEW = 500
_MAX_ITEMS = 200
_MAX_DEPTH = 32

ToolCallStatus: TypeAlias = Literal["ok", "error", "blocked", "cancelled"]
Redactor: TypeAlias = Callable[[JsonValue], JsonValue]
"""Returns a copy of a JSON value with secrets replaced; must not mutate its input."""


class LedgerFormatError(PrismError, ValueError):
    """A JSONL ledger could not be read: bad JSON, an unknown version or tag, or a bad field."""


@attrs.frozen(kw_only=True)
class ToolCallRecord:
    """What happened to one call. Arguments and preview are redacted and bounded.

    Attributes:
        status: ``ok`` (executed, not an error), ``error`` (executed or raised, error
            result), ``blocked`` (a gate refused it), ``cancelled`` (aborted).
        blocked_reason: which gate refused it, for ``blocked``.
        started_at: wall-clock seconds when dispatch began.
        finished_at: wall-clock seconds when the result was final.
        duration_s: monotonic duration of the whole dispatch.
        result_preview: the start of the result's text.
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


_SECRET_KEY = re.compile(
    r"(?i)(pass(word|wd|phrase)?|secret|token|api[_-]?key|apikey|access[_-]?key|"
    r"private[_-]?key|authori[sz]ation|auth|cookie|credential|session[_-]?id|bearer)"
)
_SECRET_VALUE = re.compile(
    r"(?i)(\bbearer\s+[a-z0-9._~+/=-]{8,}"
    r"|\bbasic\s+[a-z0-9+/=]{8,}"
    r"|\bsk-[a-z0-9_-]{16,}"
    r"|\b(?:ghp|gho|ghs|ghu|github_pat)_[a-z0-9_]{16,}"
    r"|\bxox[abposr]-[a-z0-9-]{10,}"
    r"|\bAKIA[0-9A-Z]{16}\b"
    r"|\beyJ[a-z0-9_-]{8,}\.[a-z0-9_-]{8,}\.[a-z0-9_-]{8,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"
    r"|\b(?:password|passwd|pwd|token|secret|api[_-]?key)\s*[=:]\s*\S+)"
)


def _redact_text(text: str) -> str:
    return _SECRET_VALUE.sub(_REDACTED, text)


def default_redactor() -> Redactor:
    """A redactor for secret-looking keys and values.

    Keys: passwords, tokens, API keys, authorization headers, cookies, credentials.
    Values: bearer tokens, ``sk-`` keys, GitHub and Slack tokens, AWS key ids, JWTs,
    private keys, ``password=...``.
    """

    def redact(value: JsonValue) -> JsonValue:
        return _redact(value, 0)

    return redact


def _redact(value: JsonValue, depth: int) -> JsonValue:
    if isinstance(value, str):
        return _redact_text(value)
    if depth >= _MAX_DEPTH:
        return value
    if isinstance(value, dict):
        return {
            key: _REDACTED
            if _SECRET_KEY.search(key) and item is not None
            else _redact(item, depth + 1)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_redact(item, depth + 1) for item in value]
    return value


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}...[{len(text) - limit} more chars]"


def json_safe(value: object, depth: int = 0) -> JsonValue:
    """A bounded JSON copy of ``value``.

    Long strings are clipped, big containers cut, non-JSON objects shown by type
    and non-finite floats written as strings.
    """
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, str):
        return _clip(value, _MAX_STRING)
    if depth >= _MAX_DEPTH:
        return "[too deep]"
    if isinstance(value, dict):
        out: dict[str, JsonValue] = {}
        for index, (key, item) in enumerate(value.items()):
            if index >= _MAX_ITEMS:
                out["..."] = f"[{len(value) - _MAX_ITEMS} more keys]"
                break
            out[_clip(str(key), _MAX_STRING)] = json_safe(item, depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        items: list[JsonValue] = [json_safe(item, depth + 1) for item in value[:_MAX_ITEMS]]
        if len(value) > _MAX_ITEMS:
            items.append(f"[{len(value) - _MAX_ITEMS} more items]")
        return items
    return f"<{type(value).__name__}>"


def preview_result(result: ToolResult) -> str | None:
    """The start of a result's text (or a note of its other blocks), bounded."""
    text = result.joined_text
    if not text and result.content:
        text = ", ".join(f"<{type(block).__name__}>" for block in result.content)
    if not text:
        return None
    return _clip(text, _MAX_PREVIEW)


def _make_converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True)
    # Arguments are already JSON (bounded by json_safe): pass them through both ways.
    json_type = attrs.fields(attrs.resolve_types(ToolCallRecord)).arguments.type
    converter.register_structure_hook_func(lambda t: t == json_type, lambda v, _t: v)
    converter.register_unstructure_hook_func(lambda t: t == json_type, lambda v: v)
    return converter


_CONVERTER = _make_converter()
_STATUSES = frozenset(get_args(ToolCallStatus))


@attrs.define(eq=False)
class RunLedger:
    """Collects a :class:`ToolCallRecord` for every dispatched call.

    Args:
        redact: applied to arguments and result previews before they are stored;
            ``None`` stores them as they are (still bounded in size).
    """

    redact: Redactor | None = attrs.field(factory=default_redactor)
    _records: list[ToolCallRecord] = attrs.field(factory=list, init=False)

    @property
    def records(self) -> list[ToolCallRecord]:
        """The records so far, in the order calls finished (a copy)."""
        return list(self._records)

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
        """Bound, redact and append one record; returns it."""
        safe_args = json_safe(arguments)
        preview = preview_result(result) if result is not None else None
        if self.redact is not None:
            safe_args = self.redact(safe_args)
            if preview is not None:
                redacted = self.redact(preview)
                preview = redacted if isinstance(redacted, str) else _REDACTED
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
        """One JSON object per line, each tagged ``"type": "tool_call"`` with ``schema_version``."""
        lines = []
        for entry in self._records:
            data = _CONVERTER.unstructure(entry)
            line = {"type": _RECORD_TAG, "schema_version": LEDGER_SCHEMA_VERSION, **data}
            lines.append(json.dumps(line, ensure_ascii=False, allow_nan=False))
        return "".join(f"{line}\n" for line in lines)

    @classmethod
    def from_jsonl(cls, text: str) -> RunLedger:
        """Read records written by :meth:`to_jsonl` (no redaction is applied again).

        Raises:
            LedgerFormatError: a line is not a record this version can read.
        """
        ledger = cls(redact=None)
        for number, line in enumerate(text.splitlines(), start=1):
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
            if tag != _RECORD_TAG:
                raise LedgerFormatError(f"line {number}: unknown record type {tag!r}")
            if version != LEDGER_SCHEMA_VERSION:
                raise LedgerFormatError(
                    f"line {number}: schema_version {version!r} is not {LEDGER_SCHEMA_VERSION}"
                )
            if data.get("status") not in _STATUSES:
                raise LedgerFormatError(f"line {number}: unknown status {data.get('status')!r}")
            try:
                entry = _CONVERTER.structure(data, ToolCallRecord)
            except Exception as exc:
                raise LedgerFormatError(f"line {number}: {exc}") from exc
            ledger._records.append(entry)
        return ledger
