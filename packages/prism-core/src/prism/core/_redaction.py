"""Redaction and JSON bounding: what a ledger record may hold.

Everything a record stores passes through here first: arguments and result
previews are bounded in size (long strings clipped, big containers cut, deep
nesting stopped) and, with the default redactor, cleared of secrets (values
under secret-looking keys, secret-looking text anywhere). A copy is made;
nothing given is mutated.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeAlias

import attrs

from ._content import TextContent, ToolResult
from ._json import JsonValue

if TYPE_CHECKING:
    from ._ledger_decision import ToolCallDecision

__all__ = [
    "PreviewSource",
    "Redactor",
    "default_redactor",
    "is_pure_redactor",
    "json_safe",
    "preview_source",
    "preview_text",
    "safe_arguments",
    "safe_decision",
    "safe_name",
    "safe_preview",
    "safe_preview_source",
    "safe_text",
    "snapshot_json",
]

_REDACTED = "[REDACTED]"
_MAX_STRING = 1000
_MAX_PREVIEW = 500
_MAX_NAME = 256
_MAX_REASON = 300
# Text past a clip point is still scanned this far, so a secret that straddles
# the cut is redacted whole instead of leaking its first characters.
_SCAN_WINDOW = 256
_MAX_ITEMS = 200
_MAX_DEPTH = 32

Redactor: TypeAlias = Callable[[JsonValue], JsonValue]
"""Returns a copy of a JSON value with secrets replaced; must not mutate its input."""


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


@functools.lru_cache(maxsize=4096)
def _is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(key)) and not _COUNT_KEY.match(key)


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


def is_pure_redactor(redact: Redactor | None) -> bool:
    """Whether ``redact`` is none or the default: pure, so it may run later with the same result."""
    return redact is None or redact is _DEFAULT


def _clip(text: str, limit: int, total: int | None = None) -> str:
    total = len(text) if total is None else total
    if total <= limit:
        return text
    return f"{text[:limit]}...[{total - limit} more chars]"


def _bounded_str(text: str, limit: int, redact: bool) -> str:
    return _bounded_head(text[: limit + _SCAN_WINDOW], len(text), limit, redact)


def _bounded_head(head: str, total: int, limit: int, redact: bool) -> str:
    """A text of ``total`` characters that starts with ``head``, clipped to ``limit`` and redacted.

    ``head`` holds at least ``limit + _SCAN_WINDOW`` characters when the text is longer.
    """
    if total <= limit:
        return _redact_text(head) if redact else head
    if redact:
        head = _redact_text(head[: limit + _SCAN_WINDOW])
    return f"{head[:limit]}...[{total - limit} more chars]"


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
    if isinstance(value, int):  # an IntEnum, say (bool cannot be subclassed)
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
    the record's redaction still sees whole secrets. Past the first
    ``_MAX_ITEMS`` entries of a container, which no record shows, nested
    containers are shared rather than copied.
    """
    kind = type(value)
    if depth >= _MAX_DEPTH or (kind is not dict and kind is not list):
        return value
    depth += 1
    if kind is dict:
        mapping: dict[object, object] = dict(value)  # type: ignore[call-overload]
        items: Iterable[tuple[object, object]] = mapping.items()
        if len(mapping) > _MAX_ITEMS:
            items = itertools.islice(items, _MAX_ITEMS)
        for key in [key for key, item in items if type(item) in _CONTAINERS]:
            mapping[key] = snapshot_json(mapping[key], depth)
        return mapping
    sequence: list[object] = list(value)  # type: ignore[call-overload]
    for index, item in enumerate(sequence[:_MAX_ITEMS]):
        if type(item) in _CONTAINERS:
            sequence[index] = snapshot_json(item, depth)
    return sequence


_CONTAINERS = frozenset({dict, list})


def preview_text(result: ToolResult) -> str | None:
    """The start of a result's text (or a note of its other blocks), not yet clipped."""
    content = result.content
    if len(content) == 1 and type(content[0]) is TextContent:
        return content[0].text  # the usual result: one text block
    parts: list[str] = []
    size = 0
    others: list[str] = []
    for block in content:
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


PreviewSource: TypeAlias = tuple[str, int]
"""The part of a result's text a record's preview is made from, and the text's full length."""


def preview_source(result: ToolResult) -> PreviewSource | None:
    """What :func:`safe_preview` reads of ``result``, kept small enough to hold on to."""
    text = preview_text(result)
    if text is None:
        return None
    return text[: _MAX_PREVIEW + _SCAN_WINDOW], len(text)


def safe_name(text: str) -> str:
    """A call id, tool name or hash as a record stores it (bounded, not redacted)."""
    return text if len(text) <= _MAX_NAME else _clip(text, _MAX_NAME)


def safe_arguments(arguments: object, redact: Redactor | None) -> JsonValue:
    """Arguments as a record stores them: bounded, then redacted by ``redact``."""
    if redact is _DEFAULT:
        return _bounded(arguments, 0, True)
    bounded = _bounded(arguments, 0, False)
    return bounded if redact is None else redact(bounded)


def safe_preview(result: ToolResult, redact: Redactor | None) -> str | None:
    """The start of a result's text as a record stores it: bounded and redacted."""
    source = preview_source(result)
    return None if source is None else safe_preview_source(source, redact)


def safe_preview_source(source: PreviewSource, redact: Redactor | None) -> str:
    """A preview from its :func:`preview_source`: bounded, then redacted by ``redact``."""
    head, total = source
    if redact is _DEFAULT:
        return _bounded_head(head, total, _MAX_PREVIEW, True)
    clipped = _clip(head[:_MAX_PREVIEW], _MAX_PREVIEW, total)
    if redact is None:
        return clipped
    redacted = redact(clipped)
    return redacted if isinstance(redacted, str) else _REDACTED


def safe_text(text: str, redact: Redactor | None) -> str:
    """A preview or run label: clipped to the preview size, then redacted by ``redact``."""
    return safe_preview_source((text[: _MAX_PREVIEW + _SCAN_WINDOW], len(text)), redact)


def safe_decision(decision: ToolCallDecision, redact: Redactor | None) -> ToolCallDecision:
    """The decision with its text fields bounded and redacted."""
    if redact is _DEFAULT or redact is None:
        return _purely_safe_decision(decision, redact is not None)
    texts = _decision_texts(decision)
    if not texts:
        return decision
    bounded: dict[str, JsonValue] = {
        name: _bounded_str(value, _MAX_REASON, False) for name, value in texts.items()
    }
    redacted = redact(bounded)
    changed: dict[str, str] = {}
    for name in texts:
        value = redacted.get(name) if isinstance(redacted, dict) else None
        changed[name] = value if isinstance(value, str) else _REDACTED
    return attrs.evolve(decision, **changed)  # type: ignore[arg-type]


# A policy gives the same few decisions again and again, and a decision is a
# frozen value: with a pure redactor, each distinct one is redacted once.
@functools.lru_cache(maxsize=1024)
def _purely_safe_decision(decision: ToolCallDecision, redact: bool) -> ToolCallDecision:
    texts = _decision_texts(decision)
    if not texts:
        return decision
    changed = {name: _bounded_str(value, _MAX_REASON, redact) for name, value in texts.items()}
    return attrs.evolve(decision, **changed)  # type: ignore[arg-type]


def _decision_texts(decision: ToolCallDecision) -> dict[str, str]:
    return {
        name: value
        for name in ("policy", "rule", "model", "reason", "sandbox")
        if (value := getattr(decision, name)) is not None
    }
