"""The environment the secure shell gives commands: the host's, its secrets left out.

A confined command runs unasked, and the model reads what it prints: the API
keys and tokens an agent's own process holds in its environment would be one
``printenv`` away. :func:`open_secure_coding_tools` therefore gives commands,
unless told otherwise (``shell_options={"env": ...}``), this process's
environment as it is when the tools are opened, without the variables whose names say they hold a
secret. The rule is by name, and so a guess: a secret kept under another name
(a database URL with a password in it) passes; pass ``env`` for an exact set.
"""

from __future__ import annotations

import os
import re

__all__ = ["secret_name", "without_secrets"]

# anywhere in the name (case does not matter)
_WITHIN = ("SECRET", "TOKEN", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "PRIVATE",
           "APIKEY", "COOKIE")  # fmt: skip
# a whole part of the name between underscores (GIT_AUTHOR_NAME keeps, SSH_AUTH_SOCK goes)
_PARTS = frozenset({"KEY", "KEYS", "AUTH", "PAT", "PW"})
_SPLIT = re.compile(r"[^A-Z0-9]+")


def secret_name(name: str) -> bool:
    """Whether an environment variable's ``name`` says it holds a secret."""
    upper = name.upper()
    if any(word in upper for word in _WITHIN):
        return True
    return not _PARTS.isdisjoint(_SPLIT.split(upper))


def without_secrets() -> dict[str, str]:
    """This process's environment without the names :func:`secret_name` takes."""
    return {name: value for name, value in os.environ.items() if not secret_name(name)}
