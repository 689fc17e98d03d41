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
_PARTS = frozenset({"KEY", "KEYS", "AUTH", "PAT", "PW", "JWT", "DSN"})
_SPLIT = re.compile(r"[^A-Z0-9]+")
# a URL carrying credentials: scheme://user:password@host, scheme://token@host
_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#\s@]+@")


def secret_name(name: str) -> bool:
    """Whether an environment variable's ``name`` says it holds a secret."""
    upper = name.upper()
    if any(word in upper for word in _WITHIN):
        return True
    return not _PARTS.isdisjoint(_SPLIT.split(upper))


def secret_value(value: str) -> bool:
    """Whether an environment variable's ``value`` carries credentials (a URL's user part)."""
    return "@" in value and _USERINFO.search(value) is not None


def without_secrets() -> dict[str, str]:
    """This process's environment without the variables that hold a secret, by name or value."""
    return {
        name: value
        for name, value in os.environ.items()
        if not secret_name(name) and not secret_value(value)
    }
