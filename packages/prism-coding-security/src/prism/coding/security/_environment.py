"""The environment the secure shell gives commands: the host's, its secrets left out.

A confined command runs unasked, and the model reads what it prints: the API
keys and tokens an agent's own process holds in its environment would be one
``printenv`` away. :func:`open_secure_coding_tools` therefore gives commands,
unless told otherwise (``shell_options={"env": ...}``), this process's
environment as it is when the tools are opened, without the variables whose
names say they hold a secret and those whose values carry credentials (a URL
with a user part: ``postgres://u:pw@db``; a private key; a token in a form its
issuer made recognisable). It is a heuristic: a secret under another name in
another form passes; pass ``env`` for an exact set.
"""

from __future__ import annotations

import base64
import os
import re

__all__ = ["secret_name", "without_secrets"]

# anywhere in the name (case does not matter)
_WITHIN = ("SECRET", "TOKEN", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "PRIVATE",
           "APIKEY", "COOKIE", "WEBHOOK")  # fmt: skip
# a whole part of the name between underscores (GIT_AUTHOR_NAME keeps, SSH_AUTH_SOCK goes)
_PARTS = frozenset({"KEY", "KEYS", "KEYFILE", "AUTH", "PAT", "PW", "PWD", "PASS", "JWT", "DSN",
                    "SESSION", "CREDS"})  # fmt: skip
# whole names that hold no secret though a part says so (the working directories)
_NOT_SECRET = frozenset({"PWD", "OLDPWD"})
_SPLIT = re.compile(r"[^A-Z0-9]+")
# a URL carrying credentials: scheme://user:password@host, scheme://token@host
_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#\s@]+@")


def secret_name(name: str) -> bool:
    """Whether an environment variable's ``name`` says it holds a secret."""
    upper = name.upper()
    if upper in _NOT_SECRET:
        return False
    if any(word in upper for word in _WITHIN) or upper.endswith("PASS"):
        return True
    return not _PARTS.isdisjoint(_SPLIT.split(upper))


# a connection string's or a header's credential: password=..., AccountKey=..., Bearer ...
_CREDENTIAL = re.compile(
    r"(?i)(?:\b(?:password|passwd|pwd|accountkey|sharedaccesssignature|secret)\s*=|"
    r"\bauthorization\s*:|\bbearer\s+\S)"
)


# Key material and tokens whose issuers give them a fixed, recognisable form (so
# that scanners find them), whatever the variable is called: a PEM private key,
# a service account's JSON, an npmrc's credentials, a JSON Web Token, and the
# prefixed tokens of well-known services, each with the length of its random part
# so that ordinary words with the same start do not match.
_KEY_MATERIAL = re.compile(
    r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY( BLOCK)?-----"
    r'|"private_key(_id)?"\s*:'
    r'|"kty"\s*:[^}]{0,2000}"d"\s*:|"d"\s*:[^}]{0,2000}"kty"\s*:'  # a private JWK
    r"|AGE-SECRET-KEY-1|PuTTY-User-Key-File-"
    r"|(?<![A-Za-z0-9])_(authToken|auth|password)\s*="
    r"|\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\."  # a JWT: header.payload.
    r"|\bBasic\s+[A-Za-z0-9+/]{8,}={0,2}"  # an HTTP basic credential
    # a URL whose query or path is the credential: signed, tokened, a webhook
    r"|[?&](?i:sig|signature|x-amz-signature|x-goog-signature|token|access_token|api_key"
    r"|apikey)=[^&\s]"
    r"|hooks\.slack\.com/services/|discord(app)?\.com/api/webhooks/"
    r"|webhook\.office\.com/|outlook\.office\.com/webhook"
    r"|\b("
    r"gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"  # GitHub
    r"|glpat-[A-Za-z0-9_-]{20,}"  # GitLab
    r"|sk-(ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"  # Anthropic, OpenAI
    r"|xox[abposre]-[A-Za-z0-9-]{10,}"  # Slack
    r"|npm_[A-Za-z0-9]{30,}"  # npm
    r"|pypi-[A-Za-z0-9_-]{16,}"  # PyPI
    r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
    r"|(AKIA|ASIA)[A-Z0-9]{16}"  # AWS access key ids
    r"|AIza[A-Za-z0-9_-]{35}"  # Google API keys
    r"|sq[upa]_[a-f0-9]{40}"  # SonarQube
    r"|dckr_pat_[A-Za-z0-9_-]{20,}"  # Docker Hub
    r"|[sr]k_(live|test)_[A-Za-z0-9]{20,}"  # Stripe
    r"|SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"  # SendGrid
    r"|ya29\.[A-Za-z0-9_-]{20,}"  # Google OAuth access tokens
    r"|hv[sb]\.[A-Za-z0-9_-]{20,}"  # Vault
    r"|dop_v1_[a-f0-9]{40,}"  # DigitalOcean
    r"|shp(at|ca|pa|ss)_[a-fA-F0-9]{32}"  # Shopify
    r"|tskey-[A-Za-z0-9_-]{20,}"  # Tailscale
    r"|glsa_[A-Za-z0-9_]{20,}"  # Grafana
    r"|ATATT[A-Za-z0-9_=-]{20,}"  # Atlassian
    r"|lin_api_[A-Za-z0-9]{30,}"  # Linear
    r"|[0-9]{8,10}:AA[A-Za-z0-9_-]{30,}"  # Telegram bots
    r")"
)


# a value that may be base64 (or base64url) of another: a PEM key or a service
# account's JSON as Kubernetes secrets and CI variables hold them
_BASE64 = re.compile(r"[A-Za-z0-9+/_=\s-]{24,}")


def _decoded(value: str) -> str | None:
    """``value`` decoded from base64 or base64url when it is that and decodes to text."""
    if len(value) > 1 << 20 or _BASE64.fullmatch(value) is None:
        return None
    compact = "".join(value.split())
    for alphabet in (None, b"-_"):
        try:
            raw = base64.b64decode(compact + "=" * (-len(compact) % 4), altchars=alphabet)
            text = raw.decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            continue
        if text.isprintable() or all(c.isprintable() or c in "\n\r\t" for c in text):
            return text
    return None


def secret_value(value: str) -> bool:
    """Whether an environment variable's ``value`` carries credentials.

    A URL's user part (``postgres://u:pw@db``), a connection string's password
    or account key, an authorization header or bearer token, a private key (PEM,
    or a service account's JSON, a private JWK, age and PuTTY keys), an npmrc's
    ``_authToken=``, a JSON Web Token, an HTTP basic credential, a URL whose
    query signs or carries a token or that is a webhook's, a token in the fixed
    form of a well-known issuer (GitHub, GitLab, OpenAI, Anthropic, Slack, npm,
    PyPI, Hugging Face, AWS, Google, SonarQube, Docker Hub, Stripe, SendGrid,
    Vault, DigitalOcean, Shopify, Tailscale, Grafana, Atlassian, Linear,
    Telegram); and any of these base64-encoded.
    """
    if (
        ("@" in value and _USERINFO.search(value) is not None)
        or _CREDENTIAL.search(value) is not None
        or _KEY_MATERIAL.search(value) is not None
    ):
        return True
    decoded = _decoded(value)
    return decoded is not None and decoded != value and secret_value(decoded)


def without_secrets() -> dict[str, str]:
    """This process's environment without the variables that hold a secret, by name or value.

    When a ``GIT_CONFIG_KEY_<n>`` is a credential helper's or an extra header's
    (``http.extraheader``: an authorization), every ``GIT_CONFIG_*`` variable
    goes: git refuses a count whose keys or values are missing, so none of
    the configuration they carry is given rather than a part of it.
    """
    environ = dict(os.environ)
    out = {n: v for n, v in environ.items() if not secret_name(n) and not secret_value(v)}
    if any(
        name.startswith("GIT_CONFIG_KEY_")
        and (key.lower().startswith("credential") or "extraheader" in key.lower())
        for name, key in environ.items()
    ):
        for name in list(out):
            if name == "GIT_CONFIG_COUNT" or name.startswith(
                ("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_")
            ):
                del out[name]
    return out
