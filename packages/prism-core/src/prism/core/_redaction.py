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
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, TypeAlias

import attrs

from ._content import TextContent, ToolResult
from ._json import JsonValue
from ._text import clip_counted

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

# A separator between the words of a key: none, "_", "-", ".", a space (any casing).
_SEP = r"[_.\s-]?"
_SECRET_KEY = re.compile(
    rf"(?i)(pass(?:word|wd|phrase)|(?:^|[^a-z])pwd(?:[^a-z]|$)|secret|token|api{_SEP}key"
    rf"|access{_SEP}key|private{_SEP}key|signing{_SEP}key|encryption{_SEP}key|client{_SEP}key"
    rf"|authori[sz]ation|(?:^|[^a-z])auth(?:[^a-z]|$)|cookie|credential|session{_SEP}id"
    rf"|bearer|(?:^|[^a-z])pat(?:[^a-z]|$)|passcode)"
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
    # The userinfo of scheme://[user]:password@host (an empty user too), up to
    # the authority's last "@" (a password may hold one).
    (("://",), re.compile(r"(?<=://)(?=[^\s/?#@]*:)[^\s/?#]*(?=@[^\s/?#@]*)")),
    (("aiza",), re.compile(r"\bAIza[0-9A-Za-z_-]{30,}")),
    (("sk_", "rk_"), re.compile(r"\b[sr]k_(?:live|test)_[0-9A-Za-z]{16,}")),
    (("glpat-",), re.compile(r"\bglpat-[0-9A-Za-z_-]{16,}")),
    (("npm_",), re.compile(r"\bnpm_[0-9A-Za-z]{30,}")),
    (("hf_",), re.compile(r"\bhf_[0-9A-Za-z]{30,}")),
    (("sg.",), re.compile(r"\bSG\.[0-9A-Za-z_-]{16,}\.[0-9A-Za-z_-]{16,}")),
    (("pypi-",), re.compile(r"\bpypi-[0-9A-Za-z_-]{40,}")),
    (("dop_v1_", "doo_v1_"), re.compile(r"\bdo[op]_v1_[0-9a-f]{40,}")),
    (("hooks.slack.com",), re.compile(r"hooks\.slack\.com/services/[0-9A-Za-z/_-]+")),
    # An Authorization or Proxy-Authorization header in any scheme, to the end of the line.
    (
        ("authori",),
        re.compile(r"(?i)(?<=authorization)(?:[\"']?\s*[:=]\s*)[^\r\n\"']+"),
    ),
)
# ``name = value`` / ``"name": "value"`` assignments; the name is kept.
_ASSIGN_TRIGGERS = ("pass", "pwd", "token", "secret", "key", "auth", "credential", "cookie")
# A quoted value is redacted whole, spaces and all ("correct horse battery staple").


def _trie_pattern(words: Iterable[str]) -> str:
    """A regex matching any of ``words``, factored by prefix (one branch per first letter).

    A flat alternation of forty words is tried word by word at every position;
    factored, each position costs one character test.
    """
    groups: dict[str, list[str]] = {}
    ends = False
    for word in words:
        if word:
            groups.setdefault(word[0], []).append(word[1:])
        else:
            ends = True
    if ends:
        return ""  # a shorter word already matched: its longer forms need not
    branches = [re.escape(first) + _trie_pattern(rest) for first, rest in sorted(groups.items())]
    return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"


# Any trigger at all decides whether a rule may apply.
_TRIGGERS = tuple(
    sorted({t for triggers, _ in _SECRET_RULES for t in triggers} | set(_ASSIGN_TRIGGERS))
)
_ANY_TRIGGER = re.compile(_trie_pattern(_TRIGGERS))
_SECRET_ASSIGNMENT = re.compile(
    rf"(?i)(?P<name>(?:password|passwd|passphrase|pwd|token|secret|api{_SEP}key"
    rf"|access{_SEP}key|private{_SEP}key|auth|credentials?|cookie)"
    r"[\"']?\s*[=:]\s*)(?:(?P<quote>[\"'])(?:(?!(?P=quote))[^\r\n])*(?P=quote)?|[^\s\"'&,;]+)"
)


@functools.lru_cache(maxsize=4096)
def _is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(key)) and not _COUNT_KEY.match(key)


def _keep_name(match: re.Match[str]) -> str:
    quote = match.group("quote") or ""
    return f"{match.group('name')}{quote}{_REDACTED}{quote}"


# A run of base64 (standard or URL-safe) long enough to hold a key, and a
# percent-encoded text: decoded, they are checked for the same shapes.
# (The look-behind starts a run only at its first character: no rescans inside a word.)
_B64_RUN = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{24,}={0,2}")
_PRINTABLE = re.compile(r"[\x20-\x7e\t\r\n]+")


def _decoded_secret(run: str) -> bool:
    """Whether ``run``, decoded from base64, is printable text holding a secret."""
    import base64
    import binascii

    body = run.rstrip("=")
    padded = body + "=" * (-len(body) % 4)
    try:
        if "-" in body or "_" in body:
            raw = base64.urlsafe_b64decode(padded)
        else:
            raw = base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        return False
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        return False
    if not _PRINTABLE.fullmatch(text):
        return False
    return _redact_plain(text) != text


def _redact_encoded(text: str) -> str:
    """Redact base64 runs and percent-encoded text that decode to a secret."""
    if "%" in text:
        from urllib.parse import unquote

        plain = unquote(text)
        if plain != text and _redact_plain(plain) != plain:
            return _redact_plain(plain)
    if len(text) >= 24:
        # Only whitespace-free words can hold a run: skip the scan for the rest.
        for word in text.split():
            if len(word) < 24:
                continue
            for match in _B64_RUN.finditer(word):
                run = match.group()
                if not run.isalpha() and _decoded_secret(run):
                    text = text.replace(run, _REDACTED)
    return text


def _redact_text(text: str) -> str:
    if len(text) < 5:  # shorter than anything the rules match ("pwd=x")
        return text
    if len(text) < 20 and text.isalnum():
        # Every rule needs punctuation, whitespace or (AWS key ids) 20 characters.
        return text
    return _redact_encoded(_redact_plain(text))


def _redact_plain(text: str) -> str:
    low = text.lower()
    if _ANY_TRIGGER.search(low) is None:
        # One factored scan instead of a substring search per trigger (forty of them).
        return text
    return _apply_rules(text, low)


def _apply_rules(text: str, low: str) -> str:
    if len(text) < 5:  # shorter than anything the rules match ("pwd=x")
        return text
    if len(text) < 20 and text.isalnum():
        # Every rule needs punctuation, whitespace or (AWS key ids) 20 characters.
        return text
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

    - the value under any key that looks secret, in any casing and with any
      separator (``password``, ``clientSecret``, ``X-API-KEY``, ``db.Password``):
      passwords, tokens (not token counts such as ``max_tokens``), API, access
      and private keys, ``Authorization`` / ``auth`` headers, cookies,
      credentials, session ids;
    - the ``value`` of a ``{"name": "Authorization", "value": ...}`` pair, and
      the list item after one that names a secret or an auth scheme
      (``["--password", "hunter2"]``, ``["Bearer", "..."]``);
    - secret-looking text anywhere, keys included: ``Bearer``/``Basic``
      credentials, ``Authorization``/``Proxy-Authorization`` headers in any
      scheme, provider keys (``sk-``, GitHub, Slack, AWS key ids, Google,
      Stripe, GitLab, npm, Hugging Face, SendGrid, PyPI, DigitalOcean), JWTs,
      PEM private keys, the userinfo of ``scheme://[user]:password@host``
      (an empty user too), and ``password=...`` / ``"api_key": "..."`` style
      assignments, a quoted value whole;
    - the same shapes after base64 or percent decoding.

    It never mutates its input, and also bounds sizes like the ledger does.
    """
    return _DEFAULT


def is_pure_redactor(redact: Redactor | None) -> bool:
    """Whether ``redact`` is none or the default: pure, so it may run later with the same result."""
    return redact is None or redact is _DEFAULT


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
        secret_value = redact and _names_a_secret_header(value)
        for key, item in pairs:
            name = key if type(key) is str else str(key)
            if len(name) > _MAX_STRING:
                name = clip_counted(name, _MAX_STRING)
            if redact:
                # A key is redacted like a value (a key may be a secret itself).
                name = _redacted_key(name, out)
                if item is not None and (
                    _is_secret_key(name) or (secret_value and name in _HEADER_VALUE_KEYS)
                ):
                    out[name] = _REDACTED
                    continue
            out[name] = _bounded(item, depth + 1, redact)
        if out_note is not None:
            out["..."] = out_note
        return out
    if isinstance(value, (list, tuple)):
        head = value[:_MAX_ITEMS]
        items: list[JsonValue] = [_bounded(item, depth + 1, redact) for item in head]
        if redact:
            _redact_split(head, items)
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


@functools.lru_cache(maxsize=4096)
def _redact_key(name: str) -> str:
    return _redact_text(name)


def _redacted_key(name: str, taken: dict[str, JsonValue]) -> str:
    """``name`` redacted like a value; a second redacted key gets a number, not the first's slot."""
    redacted = _redact_key(name)
    if redacted == name or redacted not in taken:
        return redacted
    number = 2
    while f"{redacted}#{number}" in taken:
        number += 1
    return f"{redacted}#{number}"


# {"name": "Authorization", "value": "..."}: header, cookie and variable lists.
_HEADER_NAME_KEYS = ("name", "key", "header", "Name", "Key", "Header")
_HEADER_VALUE_KEYS = frozenset({"value", "values", "Value", "Values"})


def _names_a_secret_header(mapping: dict[object, object]) -> bool:
    """Whether ``mapping`` is a ``{name, value}`` pair whose name is a secret's."""
    if len(mapping) > 8:
        return False
    for key in _HEADER_NAME_KEYS:
        named = mapping.get(key)
        if type(named) is str and len(named) <= 200 and _is_secret_key(named):
            return True
    return False


# Words after which the next list item is a credential: ["Bearer", "abc..."].
_SCHEME_WORDS = frozenset({"bearer", "basic", "token", "digest", "apikey"})


def _redact_split(original: Sequence[object], items: list[JsonValue]) -> None:
    """Redact, in place, list items that a secret was split across.

    ``["--password", "hunter2"]``, ``["Authorization", "Bearer abc"]``,
    ``["Authorization:", "Bearer", "abc"]``, ``["-H", "X-Api-Key: ..."]`` (the
    last is a whole item and already redacted): an item that names a secret, or
    an auth scheme word, makes the item after it a secret.
    """
    for index in range(len(original) - 1):
        item = original[index]
        if type(item) is not str or len(item) > 100:
            continue
        word = item.strip().rstrip(":=").lstrip("-").strip()
        if not word:
            continue
        if (_is_secret_key(word) or word.lower() in _SCHEME_WORDS) and type(
            original[index + 1]
        ) is str:
            items[index + 1] = _REDACTED


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
    return text if len(text) <= _MAX_NAME else clip_counted(text, _MAX_NAME)


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
    clipped = clip_counted(head[:_MAX_PREVIEW], _MAX_PREVIEW, total)
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
        for name in ("policy", "rule", "model", "reason", "sandbox", "access", "approver")
        if (value := getattr(decision, name)) is not None
    }
