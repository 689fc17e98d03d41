"""A corpus of secret placements for the redaction tests (every key here is fake).

Each shaped key follows the public format of a provider's keys (prefix, length,
alphabet) with a body no provider issued: ``FAKE`` markers and a counter make
each one unique and easy to search for. A placement is the arguments (or the
error text) of one tool call, and the fragments that must never be stored.
"""

from __future__ import annotations

import base64
import hashlib
from typing import NamedTuple
from urllib.parse import quote


class Placement(NamedTuple):
    """One secret put somewhere a tool call can carry it."""

    name: str
    arguments: dict[str, object]
    error: str | None  # the tool raises this (None: it answers ``result``)
    result: str
    needles: tuple[str, ...]  # none of these may appear in anything stored


def _body(seed: str, length: int, alphabet: str) -> str:
    out = ""
    counter = 0
    while len(out) < length:
        digest = hashlib.sha256(f"{seed}:{counter}".encode()).digest()
        out += "".join(alphabet[b % len(alphabet)] for b in digest)
        counter += 1
    return out[:length]


_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_HEX = "0123456789abcdef"
_URLSAFE = _ALNUM + "-_"


def shaped_keys() -> dict[str, str]:
    """One fake key in each provider's published shape."""
    return {
        "anthropic": "sk-ant-api03-" + _body("anthropic", 93, _URLSAFE) + "-AA",
        "openai": "sk-proj-" + _body("openai", 56, _URLSAFE),
        "github_classic": "ghp_" + _body("ghp", 36, _ALNUM),
        "github_fine": "github_pat_" + _body("ghpat", 82, _ALNUM + "_"),
        "slack": "xoxb-" + _body("slack1", 12, "0123456789") + "-" + _body("slack2", 24, _ALNUM),
        "aws_key_id": "AKIA" + _body("aws", 16, _UPPER),
        "google": "AIza" + _body("google", 35, _URLSAFE),
        "stripe": "sk_live_" + _body("stripe", 24, _ALNUM),
        "gitlab": "glpat-" + _body("gitlab", 20, _URLSAFE),
        "npm": "npm_" + _body("npm", 36, _ALNUM),
        "huggingface": "hf_" + _body("hf", 34, _ALNUM),
        "sendgrid": "SG." + _body("sg1", 22, _URLSAFE) + "." + _body("sg2", 43, _URLSAFE),
        "jwt": "eyJhbGciOiJIUzI1NiJ9."
        + _body("jwt1", 40, _URLSAFE)
        + "."
        + _body("jwt2", 43, _URLSAFE),
        "digitalocean": "dop_v1_" + _body("do", 64, _HEX),
    }


def _middle(secret: str) -> str:
    """A fragment from the middle of a secret: a partial redaction leaves it."""
    start = max(len(secret) // 3, 4)
    return secret[start : start + 12]


def _nest(value: object, depth: int) -> object:
    for _ in range(depth):
        value = {"a": value}
    return value


def placements() -> list[Placement]:
    """Every placement: shaped keys in eleven places, passwords in sixteen."""
    out: list[Placement] = []
    for kind, key in shaped_keys().items():
        needles = (key, _middle(key))
        b64 = base64.b64encode(key.encode()).decode()
        url64 = base64.urlsafe_b64encode(f"token={key}".encode()).decode()
        out += [
            Placement(f"{kind}:value", {"q": key}, None, "ok", needles),
            Placement(f"{kind}:text", {"note": f"use {key} for the deploy"}, None, "ok", needles),
            Placement(f"{kind}:key", {"headers": {key: "present"}}, None, "ok", needles),
            Placement(f"{kind}:base64", {"blob": b64}, None, "ok", (*needles, b64)),
            Placement(f"{kind}:base64url", {"state": f"v1.{url64}"}, None, "ok", (*needles, url64)),
            Placement(
                f"{kind}:urlencoded",
                {"url": "https://api.test/cb?auth=" + quote(f"Bearer {key}", safe="")},
                None,
                "ok",
                needles,
            ),
            Placement(
                f"{kind}:header_list",
                {"headers": [{"name": "X-Api-Key", "value": key}]},
                None,
                "ok",
                needles,
            ),
            Placement(f"{kind}:argv", {"argv": ["deploy", "--token", key]}, None, "ok", needles),
            Placement(f"{kind}:deep", {"cfg": _nest({"v": key}, 20)}, None, "ok", needles),
            Placement(f"{kind}:error", {}, f"request refused for key {key}", "", needles),
            Placement(f"{kind}:result", {}, None, f"found: {key}\n", needles),
        ]
    passwords = [
        "correct horse S3cr3tA1 staple",
        "tr0ub4dor S3cr3tB2 and 3",
        "S3cr3tC3 with spaces inside",
        "pa ss S3cr3tD4 word",
        "S3cr3tE5",
    ]
    for number, password in enumerate(passwords):
        marker = next(word for word in password.split() if word.startswith("S3cr3t"))
        compact = password.replace(" ", "-")
        markers: tuple[str, ...] = (marker,)
        basic = base64.b64encode(f"admin:{compact}".encode()).decode()
        rows: list[tuple[str, dict[str, object], str | None]] = [
            ("password_key", {"password": password}, None),
            ("camel_key", {"clientSecret": password}, None),
            ("dashed_key", {"X-API-KEY": password}, None),
            ("dotted_key", {"db.Password": password}, None),
            ("quoted_assignment", {"cmd": f'login --x password="{password}" now'}, None),
            ("single_quoted", {"cmd": f"export TOKEN='{password}'"}, None),
            ("json_text", {"body": f'{{"api_key": "{password}", "n": 1}}'}, None),
            ("empty_user_url", {"dsn": f"redis://:{compact}@cache:6379/0"}, None),
            ("user_url", {"dsn": f"postgres://app:{compact}@db.internal/x"}, None),
            ("at_in_password", {"dsn": f"amqp://u:{compact}@x@mq:5672/"}, None),
            ("authorization_token", {"h": f"Authorization: Token {compact}"}, None),
            ("proxy_authorization", {"h": f"Proxy-Authorization: Digest {compact}"}, None),
            ("header_pairs", {"headers": [{"name": "Authorization", "value": password}]}, None),
            ("split_argv", {"argv": ["curl", "-u", "x", "--password", password]}, None),
            ("error_text", {}, f'connect failed: password="{password}" rejected'),
            ("basic_auth", {"h": f"Authorization: Basic {basic}"}, None),
        ]
        for name, arguments, error in rows:
            extra = (basic,) if name == "basic_auth" else ()
            out.append(
                Placement(f"password{number}:{name}", arguments, error, "ok", (*markers, *extra))
            )
    return out
