"""Escalation: the exact extra access an approved command needs beyond its sandbox.

The policy judges the command; the access it names exactly is what an approval
can grant, for that one command:

* a write to a protected path inside the roots (``.envrc``,
  ``.vscode/tasks.json``): the real path a redirect or a modelled program
  writes (rule ``protected``);
* a write outside the roots: the real path (rule ``path:write``);
* a connection to a host the sandbox's network does not reach: the
  ``host:port`` of each ``http(s)://`` URL given to ``curl`` or ``wget``
  (rule ``network``).

The backend says whether it can grant each one (``grant_refusal``); what it
cannot grant is not asked. The grant travels as an
:class:`~prism.coding.tools.AccessGrant` in the approved action's metadata.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

import attrs

from prism.coding.tools import AccessGrant

from ._protected import in_git_directory
from ._proxy import HostAllowlist

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._judge import CommandCheck
    from ._paths import Roots

__all__ = ["Need", "access_words", "grant_of", "needs_of", "network_checks", "ungrantable"]

NeedKind = Literal["protected", "outside", "network"]
_URL_PROGRAMS = frozenset({"curl", "wget"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


@attrs.frozen
class Need:
    """One access the sandbox would refuse: what, and in the user's words."""

    kind: NeedKind
    target: str
    words: str


def _host_port(word: str) -> str | None:
    """``host:port`` of an ``http(s)://`` URL, or None."""
    if "://" not in word:
        return None
    try:
        parts = urlsplit(word)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = parts.hostname
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    port = port or _DEFAULT_PORTS[scheme]
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(host).version == 6:
            return f"[{host}]:{port}"
    host = host.rstrip(".")
    if not _plain_host(host):
        return None
    return f"{host}:{port}"


_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")


def _plain_host(host: str) -> bool:
    """A DNS name or a dotted-quad IPv4 address, spelled so that it names one host.

    The grant goes into the proxy's allowlist as written, and what it means there
    is what the question said: no ``*`` (a wildcard there), no character outside
    a host name (``%``-escapes, non-ASCII), and no IPv4 address in another form
    (``2130706433``, ``127.1``, ``0x7f.0.0.1`` are 127.0.0.1 to a resolver).
    """
    if not host or len(host) > 253:
        return False
    labels = host.split(".")
    if not all(_LABEL.fullmatch(label) for label in labels):
        return False
    if _NUMERIC_LABEL.fullmatch(labels[-1]):  # a resolver reads it as an IPv4 address
        try:
            return str(ipaddress.IPv4Address(host)) == host
        except ValueError:
            return False
    return True


def _reaches(sandbox: object, host_port: str) -> bool | None:
    """Whether the sandbox's own network reaches ``host_port`` (None: unknown backend)."""
    network = getattr(sandbox, "network", None)
    if network is True or network == "host":
        return True
    if network is False or network == "none":
        return False
    if network == "allowlist":
        host, _, port = host_port.rpartition(":")
        hosts = tuple(getattr(sandbox, "allowed_hosts", ()))
        return HostAllowlist(hosts).allows(host.strip("[]"), int(port))
    return None


def network_checks(commands: Sequence[CommandCheck], sandbox: object) -> list[CommandCheck]:
    """An ask check for each host a ``curl``/``wget`` part names that the sandbox does not reach.

    Only parts that ask already (not proved, no allow rule) are looked at: the
    host they name is what approving them would open.
    """
    out: list[CommandCheck] = []
    seen: set[str] = set()
    for check in commands:
        if check.verdict != "ask" or check.program not in _URL_PROGRAMS:
            continue
        for word in check.argv[1:]:
            target = _host_port(word)
            if target is None or target in seen or _reaches(sandbox, target) is not False:
                continue
            seen.add(target)
            out.append(
                attrs.evolve(
                    check,
                    reason=f"connects to {target}, which the sandbox's network does not reach",
                    rule="network",
                    target=target,
                )
            )
    return out


def _relative(real: str, roots: Roots) -> str:
    for root in roots.paths:
        if real.startswith(root.rstrip("/") + "/"):
            return real[len(root.rstrip("/")) + 1 :]
    return real


def needs_of(commands: Sequence[CommandCheck], roots: Roots, *, confines: bool) -> list[Need]:
    """The access the asking parts name exactly, in order, each once.

    ``confines``: the backend keeps protected paths (bubblewrap); under one that
    does not (Landlock), a protected write inside a root is no escalation.
    """
    out: list[Need] = []
    for check in commands:
        if check.verdict != "ask" or check.target is None:
            continue
        need: Need | None = None
        if check.rule == "protected" and confines:
            # the copy-back lets back whatever is at that path (a file, a directory or
            # its removal), so the words name all three, not the kind the command makes
            shown = _relative(check.target, roots)
            words = f"write or remove the protected path {shown} (as a file or a directory)"
            need = Need("protected", check.target, words)
        elif check.rule == "path:write":
            need = Need("outside", check.target, f"write {check.target} outside the roots")
        elif check.rule == "network":
            need = Need("network", check.target, f"connect to {check.target}")
        if need is not None and need not in out:
            out.append(need)
    return out


def ungrantable(needs: Sequence[Need], sandbox: object, roots: Roots) -> tuple[Need, str] | None:
    """The first need the backend cannot grant, with why; None when it can grant them all."""
    refusal = getattr(sandbox, "grant_refusal", None)
    name = type(sandbox).__name__
    for need in needs:
        if refusal is None:
            what = {"protected": "a protected path", "outside": "a path outside the roots",
                    "network": "a host its network does not reach"}[need.kind]  # fmt: skip
            return need, f"{name} cannot open {what} to one command"
        if need.kind == "protected":
            relative = _relative(need.target, roots)
            if in_git_directory(relative.split("/")):
                return need, "changes inside .git never come back from the sandbox"
        why = refusal(need.kind, need.target)
        if why is not None:
            return need, why
    return None


def grant_of(needs: Sequence[Need]) -> AccessGrant:
    """The grant that gives exactly ``needs``."""
    return AccessGrant(
        protected_writes=tuple(n.target for n in needs if n.kind == "protected"),
        outside_writes=tuple(n.target for n in needs if n.kind == "outside"),
        hosts=tuple(n.target for n in needs if n.kind == "network"),
    )


def access_words(needs: Sequence[Need]) -> str:
    """``write or remove the protected path .envrc (...) and connect to a.example:443``."""
    words = [n.words for n in needs]
    if len(words) <= 2:
        return " and ".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]
