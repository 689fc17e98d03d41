"""The environment the secure shell gives commands: the host's, its secrets left out.

A confined command runs unasked, and the model reads what it prints: the API
keys and tokens an agent's own process holds in its environment would be one
``printenv`` away. :func:`open_secure_coding_tools` therefore gives commands,
unless told otherwise (``shell_options={"env": ...}``), this process's
environment as it is when the tools are opened, without the variables whose
names say they hold a secret and those whose values carry credentials (a URL
with a user part: ``postgres://u:pw@db``). It is a heuristic: a secret under
another name in another form passes; pass ``env`` for an exact set.
"""

from __future__ import annotations

import os
import re

__all__ = ["secret_name", "without_secrets"]

# anywhere in the name (case does not matter)
_WITHIN = ("SECRET", "TOKEN", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "PRIVATE",
           "APIKEY", "COOKIE", "WEBHOOK")  # fmt: skip
# a whole part of the name between underscores (GIT_AUTHOR_NAME keeps, SSH_AUTH_SOCK goes)
_PARTS = frozenset({"KEY", "KEYS", "AUTH", "PAT", "PW", "PWD", "PASS", "JWT", "DSN", "SESSION"})
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


def secret_value(value: str) -> bool:
    """Whether an environment variable's ``value`` carries credentials.

    A URL's user part (``postgres://u:pw@db``), a connection string's password
    or account key, an authorization header or bearer token.
    """
    return ("@" in value and _USERINFO.search(value) is not None) or bool(_CREDENTIAL.search(value))


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
