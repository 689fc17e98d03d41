"""Run what was proved: a command line rebuilt from the structure the policy judged.

A line the policy proves safe is not handed to bash as the model wrote it.
It is re-emitted from what the policy checked: every word is the expanded
value it judged (globs, braces, tilde and quotes already applied), written in
single quotes, so bash reads back exactly those words and nothing else
(inside single quotes no character is special). Pipelines, lists, ``( )``,
``{ }`` and redirections are written in one fixed form; ``cd`` becomes
``cd -P -- DIR`` (physical resolution, no ``CDPATH``), which is how the policy
resolved it. A proved ``git`` command gets its configuration forced through
``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n``, which outrank
every configuration file (and reach the git processes it starts): the fixed
:data:`GIT_FORCED_CONFIG`, plus every filter and diff driver the repository's
own configuration defines, emptied (:mod:`._gitdrivers`); a diffing subcommand
also gets ``--no-ext-diff --no-textconv`` (:func:`._programs.git_without_drivers`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from ._commands import Group, Leaf, List, Node, Pipeline

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "GIT_ENVIRONMENT",
    "GIT_FORCED_CONFIG",
    "HOST_GIT_ENVIRONMENT",
    "ProvedCommand",
    "ProvedRedirect",
    "emit",
    "quote",
]

GIT_FORCED_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),  # a repository's fsmonitor command
    ("core.hooksPath", "/dev/null"),  # no hook can be found under a file
    ("safe.bareRepository", "explicit"),  # no bare repository found by discovery
    ("core.pager", "cat"),
    ("pager.log", "false"),
    ("pager.show", "false"),
    ("pager.diff", "false"),
    ("log.showSignature", "false"),  # gpg
    ("gpg.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.x509.program", "false"),
    ("core.sshCommand", "false"),
    ("core.askPass", "false"),
    ("credential.helper", ""),
    ("protocol.allow", "never"),  # no transport: a partial clone cannot fetch
    # protocol.<name>.allow outranks protocol.allow, whatever file holds it: the
    # transports git knows, each forced (any other name the configuration allows is
    # listed and forced with the drivers)
    ("protocol.ext.allow", "never"),
    ("protocol.file.allow", "never"),
    ("protocol.git.allow", "never"),
    ("protocol.ssh.allow", "never"),
    ("protocol.http.allow", "never"),
    ("protocol.https.allow", "never"),
    ("protocol.ftp.allow", "never"),
    ("protocol.ftps.allow", "never"),
    ("core.alternateRefsCommand", "false"),
    ("core.editor", "false"),
    ("sequence.editor", "false"),
    ("grep.fallbackToNoIndex", "false"),
    # a submodule's git runs under that repository's configuration, whose drivers are
    # not listed: never run git in a submodule (its commit is still compared)
    ("diff.ignoreSubmodules", "dirty"),
    ("status.submoduleSummary", "false"),
    ("diff.submodule", "short"),
    # `git grep` (and the commands that check out) recurse by this key: a submodule's
    # `.git` file may name a repository anywhere, which git would then read
    ("submodule.recurse", "false"),
)
"""Configuration every proved ``git`` command runs with (it outranks every file).

``diff.external`` and the diff and filter drivers a ``.gitattributes`` names
cannot be switched off by a fixed key (git 2.39 runs an empty ``diff.external``
as a command, and driver names are open-ended). Every file of a root is
hostile, ``.git/config`` included, so they are switched off otherwise: the
diffing subcommands get ``--no-ext-diff --no-textconv`` in their argv, and the
drivers the repository's configuration defines are listed by git and forced
empty beside these keys (:func:`._gitdrivers.repository_drivers`). A
submodule's repository is never entered (``diff.ignoreSubmodules=dirty``), so
its own drivers need no listing.
"""


def _git_environment(
    extra: tuple[tuple[str, str], ...] = (),
    base: tuple[tuple[str, str], ...] = GIT_FORCED_CONFIG,
) -> tuple[tuple[str, str], ...]:
    forced = base + extra
    pairs: list[tuple[str, str]] = [("GIT_CONFIG_COUNT", str(len(forced)))]
    for index, (key, value) in enumerate(forced):
        pairs.append((f"GIT_CONFIG_KEY_{index}", key))
        pairs.append((f"GIT_CONFIG_VALUE_{index}", value))
    return tuple(pairs)


GIT_ENVIRONMENT: tuple[tuple[str, str], ...] = _git_environment()
"""``GIT_CONFIG_COUNT`` and the key/value pairs that force :data:`GIT_FORCED_CONFIG`."""

HOST_GIT_ENVIRONMENT: tuple[tuple[str, str], ...] = (
    *_git_environment((), base=tuple(kv for kv in GIT_FORCED_CONFIG if kv[0] != "core.hooksPath")),
    ("GIT_OPTIONAL_LOCKS", "0"),  # reading an index never writes it back
    ("GIT_TERMINAL_PROMPT", "0"),
)
"""The environment of every git Prism itself runs on a root's repository, on the host.

A query as plain as ``git ls-files`` reads the index, and reading the index
runs the repository's ``core.fsmonitor``: without the forced configuration
the root's ``.git/config`` would run its program on the host, outside any
sandbox. Only ``core.hooksPath`` is left as configured: these queries
(``rev-parse``, ``config``, ``ls-files``) run no hook, and one of them asks
where the hooks directory is.
"""


def quote(word: str) -> str:
    """``word`` in single quotes: bash reads it back as exactly ``word``."""
    return "'" + word.replace("'", "'\\''") + "'"


@attrs.frozen
class ProvedRedirect:
    """A redirection as proved: ``file`` (a path), ``dup`` (a descriptor or ``-``) or ``string``.

    ``open``: a write to a file inside the roots that the sandbox's host side may
    open itself (``real``: its real path), then written as a duplication of the
    descriptor ``via`` it is handed on (see :class:`~prism.coding.tools.RedirectedWrites`).
    """

    op: str
    target: str
    fd: int | None = None
    kind: str = "file"
    real: str = ""
    via: int | None = None

    def text(self) -> str:
        """The redirection in canonical form.

        Raises:
            ValueError: an ``open`` redirection with no descriptor assigned.
        """
        fd = "" if self.fd is None else str(self.fd)
        if self.kind == "dup":
            return f"{fd}{self.op}{self.target}"
        if self.kind == "open":
            if self.via is None:
                raise ValueError(f"the write to {self.target!r} has no descriptor")
            if self.op in ("&>", "&>>"):
                return f">&{self.via} 2>&1"  # bash's `&>f` is `>f 2>&1`
            return f"{fd}>&{self.via}"
        if self.kind == "string":
            return f"{fd}<<< {quote(self.target)}"
        return f"{fd}{self.op}{quote(self.target)}"


@attrs.frozen
class ProvedCommand:
    """A simple command as proved: its argv, its environment prefix, its redirections."""

    argv: tuple[str, ...]
    assignments: tuple[tuple[str, str], ...] = ()
    redirects: tuple[ProvedRedirect, ...] = ()
    forced_git: bool = False  # prefix :data:`GIT_ENVIRONMENT`
    # more configuration forced with it: the repository's own drivers, emptied
    git_config: tuple[tuple[str, str], ...] = ()

    def text(self) -> str:
        """The command in canonical form."""
        parts = [_git_prefix(self.git_config)] if self.forced_git else []
        parts += [f"{name}={quote(value)}" for name, value in self.assignments]
        parts += [quote(word) for word in self.argv]
        parts += [redirect.text() for redirect in self.redirects]
        return " ".join(parts)


def _git_prefix(extra: tuple[tuple[str, str], ...]) -> str:
    return " ".join(f"{name}={quote(value)}" for name, value in _git_environment(extra))


def emit(node: Node, commands: Sequence[ProvedCommand | None]) -> str:
    """The canonical text of ``node``; ``commands`` holds each leaf's proved form.

    Raises:
        ValueError: a leaf has no proved form.
    """
    if isinstance(node, Leaf):
        command = commands[node.index]
        if command is None:
            raise ValueError(f"command {node.index} was not proved")
        return command.text()
    if isinstance(node, Pipeline):
        text = emit(node.parts[0], commands)
        for pipe, part in zip(node.pipes, node.parts[1:], strict=True):
            text += f" {pipe} {emit(part, commands)}"
        return f"! {text}" if node.negated else text
    if isinstance(node, List):
        text = emit(node.parts[0], commands)
        for op, part in zip(node.ops, node.parts[1:], strict=True):
            text += f"; {emit(part, commands)}" if op == ";" else f" {op} {emit(part, commands)}"
        return text
    assert isinstance(node, Group)
    body = emit(node.body, commands)
    text = f"( {body} )" if node.subshell else f"{{ {body}; }}"
    if node.redirects is not None:
        held = commands[node.redirects]
        if held is None:
            raise ValueError(f"command {node.redirects} was not proved")
        text += " " + " ".join(redirect.text() for redirect in held.redirects)
    return text
