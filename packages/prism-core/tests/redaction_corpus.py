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
        "digitalocean_refresh": "dor_v1_" + _body("dor", 64, _HEX),
        "slack_refresh": "xoxe-1-" + _body("xoxe", 140, _ALNUM),
        "slack_app": "xapp-1-A"
        + _body("xapp1", 10, _UPPER)
        + "-"
        + _body("xapp2", 13, "0123456789")
        + "-"
        + _body("xapp3", 64, _HEX),
        "google_access": "ya29.a0" + _body("ya29", 150, _URLSAFE),
        "google_client_secret": "GOCSPX-" + _body("gocspx", 28, _URLSAFE),
        "google_refresh": "1//0g" + _body("g1", 98, _URLSAFE),
        "stripe_webhook": "whsec_" + _body("whsec", 32, _ALNUM),
        "gitlab_deploy": "gldt-" + _body("gldt", 20, _URLSAFE),
        "gitlab_runner": "glrt-" + _body("glrt", 20, _URLSAFE),
        "gitlab_trigger": "glptt-" + _body("glptt", 40, _HEX),
        "gitlab_registration": "GR1348941" + _body("gr13", 20, _URLSAFE),
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
    out += _shapes_in_text()
    return out


def _shapes_in_text() -> list[Placement]:
    """Secrets in the shapes files, configs and command lines give them."""
    out: list[Placement] = []
    rows: list[tuple[str, dict[str, object], str | None, str]] = [
        # name = value, the name matched whole by the rule that finds secret keys
        ("env_secret_key", {"cmd": "SECRET_KEY={s}"}, None, "ok"),
        ("json_text_secret_key", {"body": '{{"secret_key": "{s}"}}'}, None, "ok"),
        ("yaml_camel", {"cfg": "secretKey: {s}"}, None, "ok"),
        ("env_jwt_secret_key", {"cmd": "export JWT_SECRET_KEY={s}"}, None, "ok"),
        ("env_signing_key", {"cmd": "SIGNING_KEY={s}"}, None, "ok"),
        ("env_encryption_key", {"cmd": "ENCRYPTION_KEY={s}"}, None, "ok"),
        ("env_app_key", {"cmd": "APP_KEY=base64:{s}="}, None, "ok"),
        ("rails_secret_key_base", {"cfg": "production:\n  secret_key_base: {s}\n"}, None, "ok"),
        ("env_db_pass", {"cmd": "DB_PASS={s}"}, None, "ok"),
        (
            "django_settings",
            {"content": "DEBUG = False\nSECRET_KEY = 'django-insecure-{s}'\n"},
            None,
            "ok",
        ),
        ("flask_attribute", {"code": "app.secret_key = '{s}'"}, None, "ok"),
        ("dotenv_result", {"path": ".env"}, None, "DEBUG=1\nSECRET_KEY={s}\nALLOWED_HOSTS=*\n"),
        (
            "passphrase_unquoted",
            {"cfg": "password = correct {s} battery staple\nuser = ada"},
            None,
            "ok",
        ),
        ("yaml_passphrase", {"cfg": "password: tr0ub4dor {s} and three"}, None, "ok"),
        ("escaped_json_in_json", {"body": '{{\\"password\\": \\"{s} x\\"}}'}, None, "ok"),
        ("escaped_quote_in_value", {"cmd": 'login password="ab\\"{s} cd"'}, None, "ok"),
        ("json_string_in_error", {}, '{{"request": "{{\\"token\\": \\"{s}\\"}}"}}', ""),
        # command lines
        ("curl_user", {"command": "curl -u admin:{s} https://api.test/x"}, None, "ok"),
        (
            "curl_user_list",
            {"argv": ["curl", "--user", "admin:{s}", "https://api.test/x"]},
            None,
            "ok",
        ),
        ("mysql_attached", {"command": "mysql -uroot -p{s} appdb"}, None, "ok"),
        ("sshpass", {"command": "sshpass -p {s} ssh deploy@host"}, None, "ok"),
        ("password_flag_in_string", {"command": "deploy --password {s} --host db"}, None, "ok"),
        ("dash_p_list", {"argv": ["mysql", "-u", "root", "-p", "{s}"]}, None, "ok"),
        ("dash_p_no_program", {"argv": [7, "-p", "{s}"]}, None, "ok"),
        ("json_value_next_line", {"body": '{{\n  "password":\n    "{s}"\n}}'}, None, "ok"),
        ("netrc_inline", {}, None, "machine api.test login bob password {s}\n"),
        ("netrc_lines", {"content": "machine api.test\n  login bob\n  password {s}\n"}, None, "ok"),
        ("xml_element", {"xml": "<db><user>bob</user><password>{s}</password></db>"}, None, "ok"),
        (
            "pgp_private_block",
            {
                "key": "x",
                "text": "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF{s}\n=Ab12\n"
                "-----END PGP PRIVATE KEY BLOCK-----",
            },
            None,
            "ok",
        ),
        # URL query credentials
        (
            "aws_presigned",
            {
                "url": "https://b.s3.amazonaws.test/k?X-Amz-Algorithm=AWS4-HMAC-SHA256"
                "&X-Amz-Date=20260101T000000Z&X-Amz-Signature={s}"
            },
            None,
            "ok",
        ),
        (
            "azure_sas",
            {"url": "https://acct.blob.core.windows.test/c/b?sv=2021-06-08&sp=r&sig={s}%3D"},
            None,
            "ok",
        ),
        (
            "azure_account_key",
            {
                "conn": "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={s}==;"
                "EndpointSuffix=core.windows.net"
            },
            None,
            "ok",
        ),
        # key names
        ("key_pass", {"auth_method": "basic", "pass": "{s}"}, None, "ok"),
        ("key_pw", {"pw": "{s}"}, None, "ok"),
        ("key_signature", {"signature": "{s}"}, None, "ok"),
        ("key_master_key", {"master_key": "{s}"}, None, "ok"),
        ("key_subscription", {"headers": {"Ocp-Apim-Subscription-Key": "{s}"}}, None, "ok"),
        ("key_db_pass_camel", {"dbPass": "{s}"}, None, "ok"),
    ]
    for name, arguments, error, result in rows:
        secret = _body(name, 24, _ALNUM)
        out.append(
            Placement(
                f"text:{name}",
                _fill(arguments, secret),  # type: ignore[arg-type]
                None if error is None else error.format(s=secret),
                result.format(s=secret),
                (secret,),
            )
        )
    # The words of an unquoted passphrase after the first one are the secret too.
    for index, placement in enumerate(out):
        if placement.name == "text:passphrase_unquoted":
            out[index] = placement._replace(needles=(*placement.needles, "battery staple"))
        elif placement.name == "text:yaml_passphrase":
            out[index] = placement._replace(needles=(*placement.needles, "and three"))
    # base64 of text holding a non-ASCII character
    secret = _body("b64utf8", 24, _ALNUM)
    blob = base64.b64encode(f"# réglages\nOPENAI_API_KEY=sk-proj-{secret}\n".encode()).decode()
    out.append(Placement("text:base64_utf8", {"blob": blob}, None, "ok", (secret, blob)))
    # A dict key longer than the clip limit with a key straddling the cut
    secret = _body("straddle", 40, _ALNUM)
    key = "k" * 994 + " sk-" + secret
    out.append(
        Placement("text:long_key_straddle", {"h": {key: 1}}, None, "ok", ("sk-" + secret[:2],))
    )
    return out


def _fill(value: object, secret: str) -> object:
    if isinstance(value, str):
        return value.format(s=secret)
    if isinstance(value, dict):
        return {_fill(k, secret): _fill(v, secret) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(item, secret) for item in value]
    return value


def ordinary_texts() -> list[object]:
    """Arguments with nothing secret in them: the default redactor returns them unchanged."""
    return [
        "passage=3",
        "signature_count: 12",
        "docker run -p 8080:80 nginx",
        "ssh -p 2222 deploy@host",
        "mkdir -pv build/out && find . -print -path ./x -prune",
        "the password field is required",
        "passwords need 12 characters",
        "compass: north",
        "keyboard=us",
        "author: Ada",
        "max_tokens: 512",
        "sort_key=name",
        "primary key: id",
        "bypass=1",
        "signal=TERM design=flat",
        "see https://example.com/docs?page=2&sort=asc",
        "curl -s https://example.com -o out.html",
        "pip install -U prism",
        "monkey: 3",
        "key: value",
        "key_count=4 public_key: ssh-ed25519",
        "git push -u origin main",
        "mysql --port 3306 -h db",
        "mysql -u root -p",
        "cd /srv/1//releases_2026_current_build_x",
        "docker run -u 1000:1000 img",
        "docker run --name db mysql -p 3306:3306",
        "<user>bob</user><path>/tmp/x</path>",
        "login page: see the docs",
        "café=1; naïve: true",
        "password:\n  - first\npassword = ",
        "a\tb: c",
        {"signature_count": 3, "passage": "x", "bypass": True, "compass": "n", "pk": 1},
        {"argv": ["mkdir", "-p", "build"]},
        {"argv": ["docker", "run", "-p", "8080:80", "img"]},
        {"argv": ["ssh", "-p", "22", "host"]},
        {"argv": ["ps", "-p", "1234"]},
        {"argv": ["git", "push", "-u", "origin", "main"]},
        {"argv": ["docker", "run", "-u", "1000:1000", "img"]},
        {"argv": ["tar", "-p", "-xf", "a.tar"]},
    ]
