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
    (("xox",), re.compile(r"(?i)\bxox[abposre][.-][a-z0-9.-]{10,}")),
    (("xapp-",), re.compile(r"\bxapp-[0-9]-[0-9A-Za-z-]{10,}")),
    (("ya29.",), re.compile(r"\bya29\.[0-9A-Za-z_-]{20,}")),
    (("gocspx-",), re.compile(r"\bGOCSPX-[0-9A-Za-z_-]{20,}")),
    (("1//",), re.compile(r"(?<![\w/:.])1//[0-9A-Za-z_-]{20,}")),
    (("whsec_",), re.compile(r"\bwhsec_[0-9A-Za-z+/=]{20,}")),
    (("akia", "asia"), re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    (("eyj",), re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    (
        ("private key",),
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
            r"(?:-----END [A-Z ]*PRIVATE KEY(?: BLOCK)?-----|$)"
        ),
    ),
    # The userinfo of scheme://[user]:password@host (an empty user too), up to
    # the authority's last "@" (a password may hold one).
    (("://",), re.compile(r"(?<=://)(?=[^\s/?#@]*:)[^\s/?#]*(?=@[^\s/?#@]*)")),
    (("aiza",), re.compile(r"\bAIza[0-9A-Za-z_-]{30,}")),
    (("sk_", "rk_"), re.compile(r"\b[sr]k_(?:live|test)_[0-9A-Za-z]{16,}")),
    (
        ("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "glft-", "glimt-", "glsoat-"),
        re.compile(r"\bgl(?:pat|dt|rt|ptt|cbt|ft|imt|soat)-[0-9A-Za-z_-]{16,}"),
    ),
    (("gr1348941",), re.compile(r"\bGR1348941[0-9A-Za-z_-]{16,}")),
    (("npm_",), re.compile(r"\bnpm_[0-9A-Za-z]{30,}")),
    (("hf_",), re.compile(r"\bhf_[0-9A-Za-z]{30,}")),
    (("sg.",), re.compile(r"\bSG\.[0-9A-Za-z_-]{16,}\.[0-9A-Za-z_-]{16,}")),
    (("pypi-",), re.compile(r"\bpypi-[0-9A-Za-z_-]{40,}")),
    (("dop_v1_", "doo_v1_", "dor_v1_"), re.compile(r"\bdo[opr]_v1_[0-9a-f]{40,}")),
    (("hooks.slack.com",), re.compile(r"hooks\.slack\.com/services/[0-9A-Za-z/_-]+")),
    # An Authorization or Proxy-Authorization header in any scheme, to the end of the line.
    (
        ("authori",),
        re.compile(r"(?i)(?<=authorization)(?:[\"']?\s*[:=]\s*)[^\r\n\"']+"),
    ),
)
# ``name = value`` / ``"name": "value"`` assignments; the name is kept.
_ASSIGN_TRIGGERS = (
    "pass", "pw", "token", "secret", "key", "auth", "credential", "cookie", "sig", "bearer",
    "session", "private", "access",
)  # fmt: skip
# Command lines that pass a password in a flag: ``curl -u user:pass``, ``mysql -pPASS``.
_COMMAND_TRIGGERS = ("-u", "--user", "mysql", "mariadb", "sshpass")
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
    sorted(
        {t for triggers, _ in _SECRET_RULES for t in triggers}
        | set(_ASSIGN_TRIGGERS)
        | set(_COMMAND_TRIGGERS)
    )
)
_ANY_TRIGGER = re.compile(_trie_pattern(_TRIGGERS))
# ``name = value`` and ``"name": value``: the name (one or two words: ``the
# password: x``) is judged whole by :func:`_is_secret_key`, then its value is
# found by _ASSIGNED_VALUE. Quotes may be escaped (JSON inside a JSON string).
_ASSIGNED_NAME = re.compile(
    r"(?<![\w.])(?P<name>[A-Za-z_][\w.-]*(?: [A-Za-z_][\w.-]*)?)"
    r"(?:\\?[\"'])?(?P<space>[ \t]*)[=:](?P<after>[ \t]*)(?![=:/])"
)
_ASSIGNED_VALUE = re.compile(
    r"\\(?P<escaped>[\"'])(?:(?!\\(?P=escaped))[^\r\n])*(?:\\(?P=escaped))?"
    r"|(?P<quote>[\"'])(?:\\[^\r\n]|(?!(?P=quote))[^\r\n\\])*(?P=quote)?"
)
_BARE_VALUE = re.compile(r"[^\s\"'&,;<>\\]+")
# After ``name = `` or ``name: `` (a config line) an unquoted value runs to the end
# of the line (a passphrase has spaces), or to a JSON comma or bracket, or a comma
# before the next ``name:`` (``def f(password: str, retries: int)``).
_LINE_VALUE = re.compile(
    r"[^\r\n]+?(?=\s*(?:,\s*\\?[\"']|,\s*[A-Za-z_][\w.-]*\s*[=:]|[}\]]|\\[rn]|$))", re.MULTILINE
)


def _redact_assignments(text: str) -> str:
    out: list[str] = []
    pos = 0
    for match in _ASSIGNED_NAME.finditer(text):
        start = match.end()
        if start <= pos or not _is_secret_key(match.group("name")):
            continue
        value = _ASSIGNED_VALUE.match(text, start)
        if value is None and not match.group("after") and text[start : start + 1] in "\r\n":
            # ``"password":`` then the quoted value on the next line
            ahead = text[start : start + 200]
            value = _ASSIGNED_VALUE.match(text, start + len(ahead) - len(ahead.lstrip()))
        if value is not None:
            quote = (
                "\\" + value.group("escaped") if value.group("escaped") else value.group("quote")
            )
            out += [text[pos : value.start()], quote, _REDACTED, quote]
        else:
            spaced = match.group("space") or match.group("after")
            value = (_LINE_VALUE if spaced else _BARE_VALUE).match(text, start)
            if value is None:
                continue
            out += [text[pos:start], _REDACTED]
        pos = value.end()
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


# ``--password hunter2`` in one string (``--password=...`` is an assignment).
_SECRET_FLAG = re.compile(
    r"(?<!\S)--(?P<flag>[A-Za-z][\w-]*)[ \t]+(?P<value>\"[^\"\r\n]*\"?|'[^'\r\n]*'?|[^\s-]\S*)"
)
# ``<password>...</password>``
_XML_ELEMENT = re.compile(r"<(?P<tag>[A-Za-z_][\w:.-]*)(?:\s[^<>]*)?>(?P<value>[^<]+)</(?P=tag)>")
# .netrc: ``machine host login name password secret`` (on one line or several)
_NETRC = re.compile(r"(?<![\w-])login\s+\S+\s+password\s+(?P<value>\S+)")
# ``curl -u user:password`` / ``--user user:password``
_USER_FLAG = re.compile(
    r"(?<!\S)(?:-u|--user)[ \t]*[\"']?(?P<user>[^\s:\"']*):(?P<value>[^\s\"']+)"
)
# ``mysql -pPASS`` (also ``-p PASS`` after sshpass): only after the commands
# that take a password there (``find -print``, ``mkdir -pv`` keep theirs).
_PASSWORD_P_COMMAND = re.compile(r"\b(?:mysql\w*|mariadb\w*|sshpass)\b[^\r\n|;&]*?(?<!\S)-p")
_P_VALUE = re.compile(r"(?:[ \t]+(?=[^\s-]))?(?P<value>\S+)")


def _sub_value(pattern: re.Pattern[str], text: str, keep: Callable[[re.Match[str]], bool]) -> str:
    """``text`` with each match's ``value`` group redacted, unless ``keep(match)``."""
    out: list[str] = []
    pos = 0
    for match in pattern.finditer(text):
        if keep(match):
            continue
        out += [text[pos : match.start("value")], _REDACTED]
        pos = match.end("value")
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


def _not_secret_flag(match: re.Match[str]) -> bool:
    return not _is_secret_key(match.group("flag"))


def _not_secret_tag(match: re.Match[str]) -> bool:
    return match.group("value").startswith(_REDACTED) or not _is_secret_key(match.group("tag"))


def _never(match: re.Match[str]) -> bool:
    return False


def _uid_gid(match: re.Match[str]) -> bool:
    """``docker run -u 1000:1000``: a user and group id, not a password."""
    return match.group("user").isdigit() and match.group("value").isdigit()


def _redact_p_flags(text: str) -> str:
    out: list[str] = []
    pos = 0
    for command in _PASSWORD_P_COMMAND.finditer(text):
        # (a command's match ends past the value before it: it holds " -p")
        value = _P_VALUE.match(text, command.end())
        if value is None or _PORT.fullmatch(value.group("value")):
            continue
        out += [text[pos : value.start("value")], _REDACTED]
        pos = value.end()
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


# A port, a port mapping or a process id: what ``-p`` takes in ssh, docker, ps.
_PORT = re.compile(r"[0-9.:\[\]]+(?:/(?:tcp|udp|sctp))?")


# The words of an identifier: ``DB_PASS``, ``dbPass``, ``X-Amz-Signature``.
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# A last word that makes a name secret on its own (``signature_count`` is not).
_SECRET_LAST_WORDS = frozenset({"pass", "pw", "pwd", "passwd", "sig", "signature"})
# ``<word> key`` names that hold a secret (``sort_key``, ``primary key`` do not).
_SECRET_KEY_OWNERS = frozenset({"master", "app", "account", "subscription", "functions"})


@functools.lru_cache(maxsize=4096)
def _is_secret_key(key: str) -> bool:
    if _COUNT_KEY.match(key):
        return False
    if _SECRET_KEY.search(key):
        return True
    words = _WORD.findall(key)
    if not words:
        return False
    last = words[-1].lower()
    if last in _SECRET_LAST_WORDS:
        return True
    return last == "key" and len(words) > 1 and words[-2].lower() in _SECRET_KEY_OWNERS


# A run of base64 (standard or URL-safe) long enough to hold a key, and a
# percent-encoded text: decoded, they are checked for the same shapes.
# (The look-behind starts a run only at its first character: no rescans inside a word.)
_B64_RUN = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{24,}={0,2}")


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
    # UTF-8 text (a comment in another language, say) may hold a secret as
    # well as ASCII; undecodable bytes become U+FFFD, so a binary blob around
    # a secret still shows it.
    text = raw.decode("utf-8", "replace")
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
    if "-u" in low or "--user" in low:
        text = _sub_value(_USER_FLAG, text, _uid_gid)
    if "-p" in text and ("mysql" in low or "mariadb" in low or "sshpass" in low):
        text = _redact_p_flags(text)
    for trigger in _ASSIGN_TRIGGERS:
        if trigger in low:
            break
    else:
        return text
    if "=" in text or ":" in text:
        text = _redact_assignments(text)
    if "--" in text:
        text = _sub_value(_SECRET_FLAG, text, _not_secret_flag)
    if "</" in text:
        text = _sub_value(_XML_ELEMENT, text, _not_secret_tag)
    if "login" in low and "password" in low:
        text = _sub_value(_NETRC, text, _never)
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
      separator (``password``, ``clientSecret``, ``X-API-KEY``, ``db.Password``,
      ``DB_PASS``, ``X-Amz-Signature``, ``master_key``,
      ``Ocp-Apim-Subscription-Key``): passwords, tokens (not token counts such
      as ``max_tokens``), API, access, private, signing and encryption keys,
      signatures, ``Authorization`` / ``auth`` headers, cookies, credentials,
      session ids (not ``passage``, ``signature_count``, ``sort_key``);
    - the ``value`` of a ``{"name": "Authorization", "value": ...}`` pair, and
      the list item after one that names a secret or an auth scheme
      (``["--password", "hunter2"]``, ``["Bearer", "..."]``), after ``-p``
      unless it is a port or process id or the program's ``-p`` is no password
      (``mkdir``, ``ssh``, ...), and the password of ``["-u", "user:pass"]``;
    - the value assigned to such a name in text, the name judged whole and kept
      (``SECRET_KEY=...``, ``"secret_key": "..."``, ``secretKey: ...``, a
      query's ``&sig=...``, escaped JSON inside a JSON string): a quoted value
      whole, an unquoted one after ``name = `` / ``name: `` to the end of the
      line (a passphrase has spaces);
    - command lines: ``--password X``, ``curl -u user:X``, ``mysql -pX``,
      ``sshpass -p X``; ``.netrc``'s ``login NAME password X``;
      ``<password>X</password>``;
    - secret-looking text anywhere, keys included: ``Bearer``/``Basic``
      credentials, ``Authorization``/``Proxy-Authorization`` headers in any
      scheme, provider keys (``sk-``, GitHub, Slack ``xox*-``/``xapp-``, AWS key
      ids, Google ``AIza``/``ya29.``/``GOCSPX-``/``1//``, Stripe ``sk_live_``/
      ``whsec_``, GitLab ``glpat-``/``gldt-``/``glrt-``/``glptt-``/
      ``GR1348941``, npm, Hugging Face, SendGrid, PyPI, DigitalOcean
      ``dop_v1_``/``dor_v1_``), JWTs, PEM private keys, PGP private key blocks,
      the userinfo of ``scheme://[user]:password@host`` (an empty user too);
    - the same shapes after base64 (of any UTF-8 text) or percent decoding.

    A key longer than the clip limit is redacted before it is clipped.
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
            if redact:
                # A key is redacted like a value (a key may be a secret itself),
                # before it is clipped: a secret across the cut goes whole.
                name = _redacted_key(name, out)
            elif len(name) > _MAX_STRING:
                name = clip_counted(name, _MAX_STRING)
            if (
                redact
                and item is not None
                and (_is_secret_key(name) or (secret_value and name in _HEADER_VALUE_KEYS))
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
    if len(name) > _MAX_STRING:
        redacted = _bounded_str(name, _MAX_STRING, True)  # not cached: keys this long are rare
    else:
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
        following = original[index + 1]
        if type(following) is not str:
            continue
        if item == "-p":
            if not _PORT.fullmatch(following) and not _p_is_not_a_password(original):
                items[index + 1] = _REDACTED
            continue
        if item in ("-u", "--user"):
            user, colon, password = following.partition(":")
            if colon and password and not (user.isdigit() and password.isdigit()):
                items[index + 1] = f"{user}:{_REDACTED}"
            continue
        word = item.strip().rstrip(":=").lstrip("-").strip()
        if not word:
            continue
        if _is_secret_key(word) or word.lower() in _SCHEME_WORDS:
            items[index + 1] = _REDACTED


# Programs whose ``-p`` takes no password (``mkdir -p build``, ``tar -p``); after
# any other, ``["-p", X]`` redacts X unless X is a port or a process id.
_P_NOT_A_PASSWORD = frozenset(
    {
        "mkdir", "install", "cp", "mv", "ln", "read", "tar", "xargs", "patch", "rsync",
        "git", "ls", "ps", "pgrep", "pkill", "docker", "podman", "kubectl", "ssh", "scp",
        "nc", "ncat", "python", "python3", "pytest", "uv", "pip", "npm", "npx", "cargo",
    }
)  # fmt: skip


def _p_is_not_a_password(argv: Sequence[object]) -> bool:
    program = argv[0]
    if type(program) is not str:
        return False
    return program.rpartition("/")[2] in _P_NOT_A_PASSWORD


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
