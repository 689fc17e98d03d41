"""Protected (persistence) paths: files that later run outside any gate.

One definition serves the command policy (a write to one of these always
asks, even inside a root) and the sandbox (they are bound read-only over the
writable roots, and those that do not exist cannot be created).
"""

from __future__ import annotations

import fnmatch
from typing import TYPE_CHECKING

from prism.core import ConfigurationError
from prism.core.options import sequence_of, string

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

__all__ = [
    "PROTECTED_PATHS",
    "ProtectedPaths",
    "normalize_protected_paths",
]

PROTECTED_PATHS: tuple[str, ...] = (
    # git runs these (hooks, and config keys such as core.fsmonitor, core.pager,
    # core.sshCommand, alias.*, diff/filter drivers) on the host's next git command
    ".git/config",
    # read as repository config when extensions.worktreeConfig is set
    ".git/config.worktree",
    ".git/hooks",
    ".git/info/attributes",
    # git reads the repository config from the directory named in commondir, and a
    # linked worktree's gitdir (and its commondir) lives under .git/worktrees
    ".git/commondir",
    ".git/worktrees",
    # alternates make git read objects from another repository, outside the roots
    ".git/objects/info/alternates",
    ".git/objects/info/http-alternates",
    ".git/modules/*/config",
    ".git/modules/*/hooks",
    ".git/modules/*/commondir",
    ".gitmodules",
    # hook managers: the host's next git commit runs what these name
    ".husky",
    ".pre-commit-config.yaml",
    ".pre-commit-hooks.yaml",
    "lefthook.yml",
    "lefthook.yaml",
    "lefthook-local.yml",
    "lefthook-local.yaml",
    ".lefthook.yml",
    ".lefthook.yaml",
    ".lefthook-local.yml",
    ".lefthook-local.yaml",
    ".lefthookrc",
    # shell and tool start-up files
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".kshrc",
    ".cshrc",
    ".tcshrc",
    ".inputrc",
    ".config/fish",
    ".envrc",
    ".gitconfig",
    ".config/git",
    ".ssh",
    ".npmrc",
    ".pypirc",
    ".config/pip",
    ".pip",
    # package managers that run code named in the project on any command
    ".yarnrc",
    ".yarnrc.yml",
    ".pnpmfile.cjs",
    # tool managers that run hooks or load environments on entering the directory
    "mise.toml",
    ".mise.toml",
    ".config/mise",
    ".mise",
    # agents' and editors' configuration that starts programs
    ".mcp.json",
    "prism.toml",
    # (tasks, launch configurations, terminal environments, language servers)
    ".vscode",
    ".idea",
    ".zed",
    ".helix",
    ".devcontainer",
    ".devcontainer.json",
    ".nvim.lua",
    ".nvimrc",
    ".exrc",
    ".claude",
    ".codex",
    ".cursor",
    ".gemini",
    ".windsurf",
)
"""Paths (relative, glob per component) that a write always asks about.

Each entry matches at any depth: ``.git/config`` protects ``<root>/.git/config``
and ``<root>/vendor/lib/.git/config``. An entry names a file or a directory;
everything below a protected directory is protected, and so is every ancestor
that ends in the entry's leading components (replacing ``.git`` whole would
replace ``.git/config``). Extend it with ``protected_paths=`` on the policy and
the sandbox.
"""


def normalize_protected_paths(
    value: Iterable[str] | None, *, option: str = "protected_paths"
) -> tuple[str, ...]:
    """The default list plus ``value``, each entry checked.

    ``option`` is the dotted name the error reports (``"BubblewrapSandbox.protected_paths"``).

    Raises:
        ConfigurationError: ``value`` is not a sequence of strings, or an entry is
            empty, absolute, holds a NUL byte or a ``..`` component.
    """
    if value is None:
        return PROTECTED_PATHS
    owner, _, name = option.rpartition(".")
    sequence_of(string()).check(owner or "protected paths", name, value)
    out = list(PROTECTED_PATHS)
    for item in value:
        parts = [p for p in item.split("/") if p and p != "."]
        if not parts or "\x00" in item or item.startswith("/") or ".." in parts:
            raise ConfigurationError(
                f"{option} entries are relative paths without '..' or NUL (they match at any "
                f"depth), got {item!r}",
                option=option,
                value=value,
            )
        text = "/".join(parts)
        if text not in out:
            out.append(text)
    return tuple(out)


class ProtectedPaths:
    """Matches real paths against protected-path entries."""

    __slots__ = ("_split", "entries")

    def __init__(self, entries: Sequence[str]) -> None:
        """Compile ``entries`` (already normalised)."""
        self.entries = tuple(entries)
        self._split = tuple((entry, tuple(entry.split("/"))) for entry in self.entries)

    def match(self, path: str) -> str | None:
        """The entry that protects ``path`` (an absolute, normalised path), else None."""
        parts = [p for p in path.split("/") if p]
        for entry, pattern in self._split:
            n = len(pattern)
            for start in range(len(parts)):
                window = parts[start : start + n]
                # the path is the entry, lies below it, or is an ancestor that ends
                # inside the entry (``.git`` for ``.git/config``)
                if all(fnmatch.fnmatchcase(p, q) for p, q in zip(window, pattern, strict=False)):
                    return entry
        return None

    def covers(self, parts: Sequence[str]) -> str | None:
        """The entry that ``parts`` (a path relative to a root) is, or lies below; else None.

        Unlike :meth:`match`, an ancestor of an entry is not covered: ``.git``
        is not covered by ``.git/config``, the file is.
        """
        for entry, pattern in self._split:
            n = len(pattern)
            for start in range(len(parts) - n + 1):
                window = parts[start : start + n]
                if all(fnmatch.fnmatchcase(p, q) for p, q in zip(window, pattern, strict=True)):
                    return entry
        return None
