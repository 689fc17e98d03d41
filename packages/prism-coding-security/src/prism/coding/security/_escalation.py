"""Escalation: the exact extra access an approved command needs beyond its sandbox.

The policy judges the command; the access it names exactly is what an approval
can grant, for that one command:

* a write to a protected path inside the roots (``.envrc``,
  ``.vscode/tasks.json``): the real path a redirect or a modelled program
  writes (rule ``protected``), and each link with a protected name the path as
  named goes through (``svc/.envrc -> ../envrc.shared``: the program may write
  the target or replace the link; both are named and granted, nothing else);
* a write outside the roots: the real path (rule ``path:write``);
* a connection to a host the sandbox's network does not reach: each
  ``host:port`` the command's own argv names (``curl``/``wget`` URLs, a git
  repository URL, pip's index, npm's registry: :mod:`._hosts`; rule
  ``network``). A host reached directly, not through the sandbox's proxy
  (``ssh``, git over ssh), is named too but never granted (rule
  ``network:direct``); a network command whose argv names no host exactly
  gets a note saying why nothing can be granted (rule ``network:unnamed``).

The backend says whether it can grant each one (``grant_refusal``); what it
cannot grant is not asked. The grant travels as an
:class:`~prism.coding.tools.AccessGrant` in the approved action's metadata.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Literal

import attrs

from prism.coding.tools import AccessGrant

from ._hosts import named_hosts
from ._protected import in_git_directory
from ._proxy import HostAllowlist

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._judge import CommandCheck
    from ._paths import Roots

__all__ = [
    "DIRECT",
    "UNNAMED",
    "Need",
    "access_words",
    "grant_of",
    "needs_of",
    "network_checks",
    "ungrantable",
]

NeedKind = Literal["protected", "outside", "network", "direct"]
# a connection that does not go through the sandbox's proxy (ssh): never granted
DIRECT = "network:direct"
# a network command whose argv names no host exactly: nothing to grant, said why
UNNAMED = "network:unnamed"


@attrs.frozen
class Need:
    """One access the sandbox would refuse: what, and in the user's words."""

    kind: NeedKind
    target: str
    words: str
    via: tuple[str, ...] = ()


def _reaches(sandbox: object, host_port: str, *, direct: bool = False) -> bool | None:
    """Whether the sandbox's own network reaches ``host_port`` (None: unknown backend).

    ``direct``: the program does not use the proxy, so only the host's network does.
    """
    network = getattr(sandbox, "network", None)
    if network is True or network == "host":
        return True
    if network is False or network == "none" or (direct and network == "allowlist"):
        return False
    if network == "allowlist":
        host, _, port = host_port.rpartition(":")
        hosts = tuple(getattr(sandbox, "allowed_hosts", ()))
        return HostAllowlist(hosts).allows(host.strip("[]"), int(port))
    return None


def network_checks(commands: Sequence[CommandCheck], sandbox: object) -> list[CommandCheck]:
    """A check for each host a network command names that the sandbox does not reach.

    Only parts that ask already (not proved, no allow rule) are looked at: the
    host they name is what approving them would open. A host named through the
    proxy asks (rule ``network``); one reached directly (``ssh``) is refused
    without asking (``network:direct``); a network command that names no host
    exactly gets a confinable note with why (``network:unnamed``).
    """
    out: list[CommandCheck] = []
    seen: set[str] = set()
    for check in commands:
        if check.verdict != "ask":
            continue
        named = named_hosts(check.program, check.argv)
        if named is None:
            continue
        before = len(out)
        for rule, targets in (("network", named.proxied), (DIRECT, named.direct)):
            for target in targets:
                key = f"{rule} {target}"
                reached = _reaches(sandbox, target, direct=rule == DIRECT)
                if key in seen or reached is not False:
                    continue
                seen.add(key)
                how = " directly (not through the sandbox's proxy)" if rule == DIRECT else ""
                out.append(
                    attrs.evolve(
                        check,
                        reason=f"connects to {target}{how}, which the sandbox's network does "
                        "not reach",
                        rule=rule,
                        target=target,
                    )
                )
        key = f"{check.argv} {named.unnamed}"
        if (
            named.unnamed
            and len(out) == before
            and key not in seen
            and _reaches(sandbox, "", direct=True) is False
        ):
            seen.add(key)
            out.append(
                attrs.evolve(
                    check,
                    reason=f"no network access can be granted to it: {named.unnamed}",
                    rule=UNNAMED,
                    target=None,
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
            links = [_relative(link, roots) for link in check.via]
            if links:
                words += ", which " + " and ".join(links) + (" leads" if len(links) == 1 else
                         " lead") + " to, or replace " + ("that link" if len(links) == 1 else
                         "those links")  # fmt: skip
            need = Need("protected", check.target, words, check.via)
        elif check.rule == "path:write":
            need = Need("outside", check.target, f"write {check.target} outside the roots")
        elif check.rule == "network":
            need = Need("network", check.target, f"connect to {check.target}")
        elif check.rule == DIRECT:
            need = Need("direct", check.target, f"connect to {check.target} directly")
        if need is not None and need not in out:
            out.append(need)
    return out


def ungrantable(needs: Sequence[Need], sandbox: object, roots: Roots) -> tuple[Need, str] | None:
    """The first need the backend cannot grant, with why; None when it can grant them all."""
    refusal = getattr(sandbox, "grant_refusal", None)
    name = type(sandbox).__name__
    for need in needs:
        if need.kind == "direct":
            return need, (
                "a host is granted only through the sandbox's HTTPS proxy, and this program "
                "(ssh, git over ssh or git://) does not use it"
            )
        if refusal is None:
            what = {"protected": "a protected path", "outside": "a path outside the roots",
                    "network": "a host its network does not reach"}[need.kind]  # fmt: skip
            return need, f"{name} cannot open {what} to one command"
        if need.kind == "protected":
            for path in (need.target, *need.via):
                relative = _relative(path, roots)
                if in_git_directory(relative.split("/")):
                    return need, "changes inside .git never come back from the sandbox"
                repository = _git_directory_around(path, roots)
                if repository is not None:
                    return need, (
                        f"{relative} lies in the git directory {_relative(repository, roots)}, "
                        "whose changes never come back from the sandbox"
                    )
        for path in (need.target, *need.via):
            why = refusal(need.kind, path)
            if why is not None:
                return need, why
    return None


def _git_directory_around(path: str, roots: Roots) -> str | None:
    """The directory between ``path`` and its root that holds a ``HEAD``, or None.

    A git directory however it is named: a bare repository, ``repo``'s ``x.git``.
    """
    for root in roots.paths:
        top = root.rstrip("/")
        if not path.startswith(top + "/"):
            continue
        current = os.path.dirname(path)
        while current.startswith(top + "/"):
            if os.path.lexists(os.path.join(current, "HEAD")):
                return current
            current = os.path.dirname(current)
    return None


def grant_of(needs: Sequence[Need]) -> AccessGrant:
    """The grant that gives exactly ``needs``."""
    return AccessGrant(
        protected_writes=tuple(
            dict.fromkeys(p for n in needs if n.kind == "protected" for p in (n.target, *n.via))
        ),
        outside_writes=tuple(n.target for n in needs if n.kind == "outside"),
        hosts=tuple(n.target for n in needs if n.kind == "network"),
    )


def access_words(needs: Sequence[Need]) -> str:
    """``write or remove the protected path .envrc (...) and connect to a.example:443``."""
    words = [n.words for n in needs]
    if len(words) <= 2:
        return " and ".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]
