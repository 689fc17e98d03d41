"""Protected (persistence) paths: files that later run outside any gate.

One definition serves the command policy (a write to one of these always
asks, even inside a root) and the sandbox (they are bound read-only over the
writable roots, and those that do not exist cannot be created).
"""

from __future__ import annotations

import fnmatch
import functools
import re
import threading
import unicodedata
from typing import TYPE_CHECKING

from prism.core import ConfigurationError
from prism.core.options import sequence_of, string

from ._pymodules import MODULE_SHADOWS, module_shadow_names

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

__all__ = [
    "GIT_DIRECTORY",
    "PROTECTED_PATHS",
    "AnchoredPaths",
    "ProtectedPaths",
    "fold_name",
    "fold_parts",
    "git_takes_head",
    "in_git_directory",
    "normalize_protected_paths",
    "valid_git_head",
]

GIT_DIRECTORY = ".git"
"""The name git looks for in each directory: a git directory, or a file naming one."""

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
    # git takes any directory with a valid HEAD (plus objects/ and refs/) for a bare
    # repository while it looks for one, before the parent's .git: a HEAD planted next
    # to a config makes the host's next git command in that directory run what the
    # config names. Files so named are rare in source trees; at any depth, outside
    # .git too. commondir points such a directory at another repository's config.
    "HEAD",
    "commondir",
    # other version control systems run hooks and programs named in their
    # repository configuration on the host's next command (hg's [hooks], jj's
    # ui.pager, Sapling's hooks); hg also reads the hgrc of the repository its
    # .hg/sharedpath names. Their whole state directories: a repository made or
    # changed inside the sandbox does not come back
    ".hg",
    ".jj",
    ".sl",
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
    # lefthook's script directories (its `script:` commands run files kept there)
    ".lefthook",
    ".lefthook-local",
    # what the host's existing hook runs from the project on the next git commit
    # (husky's lint-staged and commitlint, simple-git-hooks, overcommit)
    ".lintstagedrc*",
    "lint-staged.config.*",
    ".huskyrc*",
    "husky.config.*",
    "commitlint.config.*",
    ".commitlintrc*",
    ".simple-git-hooks*",
    "simple-git-hooks.*",
    ".overcommit.yml",
    # git runs the filter and diff drivers these name (the user's configuration
    # defines them) on the next git add, diff or checkout; git-lfs reads its
    # configuration (remote URLs) from .lfsconfig
    ".gitattributes",
    ".lfsconfig",
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
    ".bash_aliases",
    ".bash_functions",
    # bash-completion sources these in every interactive shell; zsh loads a compiled
    # X.zwc in place of a start-up file X, and compinit sources its dump
    ".bash_completion",
    # (Fedora's and others' .bashrc source every file of these)
    ".bashrc.d",
    ".zshrc.d",
    ".bash_completion.d",
    ".local/share/bash-completion",
    ".z*.zwc",
    ".zcompdump*",
    # less reads its key file at every start (its #env section sets LESSOPEN, a
    # command run on every file shown: git's pager runs it), and Debian's lesspipe
    # runs ~/.lessfilter
    ".lesskey",
    ".less",
    ".config/lesskey",
    ".lessfilter",
    # what tool installers add a `. FILE` line for in the user's start-up files, and
    # the toolchains their PATH shims run (rustup, nvm, sdkman, fzf, ghcup, deno;
    # rustup's .cargo/env is with cargo's entries below)
    ".rustup",
    ".nvm",
    ".sdkman",
    ".fzf.bash",
    # editors, IDEs and tools that load code or name programs from the home at start:
    # Emacs's XDG init, VS Code Remote's (and its forks') server extensions,
    # JetBrains' and Sublime's plugins, gitk's Tcl file, terraform's provider
    # overrides, podman's runtime paths, mpv's scripts
    ".config/emacs",
    ".vscode-server",
    ".vscode-oss",
    ".cursor-server",
    ".local/share/JetBrains",
    ".config/JetBrains",
    ".config/sublime-text",
    ".gitk",
    ".terraformrc",
    ".config/containers",
    ".config/mpv",
    # file managers, git front ends and tools whose configuration runs commands or
    # names programs, registries and credential helpers
    ".config/htop",
    ".config/ranger",
    ".config/lf",
    ".tigrc",
    ".config/tig",
    ".config/gcloud",
    ".config/helm",
    ".config/nix",
    ".gemrc",
    ".bundle",
    ".fzf.zsh",
    ".ghcup",
    ".deno",
    # a desktop session and the user's service manager start these at login
    ".pam_environment",
    ".xprofile",
    ".xsessionrc",
    ".config/systemd",
    ".config/autostart",
    ".config/environment.d",
    # first on PATH in a usual login profile
    ".local/bin",
    # the user's own packages: every python of the user imports them at start
    ".local/lib/python*/site-packages",
    # editors, the terminal multiplexer, debuggers and REPLs run what these name
    # when they start (pdb reads ./.pdbrc at every breakpoint())
    ".vim",
    ".vimrc",
    ".config/nvim",
    ".emacs",
    ".emacs.d",
    ".tmux.conf",
    ".pdbrc",
    ".ipython",
    ".Renviron",
    # jq loads ~/.jq into every program it runs (its definitions replace the builtins)
    ".jq",
    # the same class at home: zsh frameworks and prompts sourced at every start, direnv's
    # library sourced before every .envrc, terminals and multiplexers that run their
    # configured shell or commands, debuggers' and database shells' start-up files, the
    # desktop session, and tool homes whose bin directories are first on PATH
    ".oh-my-zsh",
    ".p10k.zsh",
    ".direnvrc",
    ".config/direnv",
    ".config/tmux",
    ".screenrc",
    ".config/zellij",
    ".config/starship.toml",
    ".config/kitty",
    ".config/alacritty",
    ".wezterm.lua",
    ".config/wezterm",
    ".config/nushell",
    ".config/powershell",
    ".xonshrc",
    ".config/Code/User",
    ".gdbinit",
    ".config/gdb",
    ".lldbinit",
    ".psqlrc",
    ".sqliterc",
    ".irbrc",
    ".pryrc",
    ".xinitrc",
    ".xsession",
    ".config/plasma-workspace",
    ".config/hypr",
    ".config/i3",
    ".config/sway",
    ".local/share/applications",
    ".gnupg",
    ".config/gh",
    ".pyenv",
    ".npm-global",
    # more start-up code and programs named in the home: Jupyter's *_config.py,
    # Julia's startup.jl, Mercurial's hooks, sbt's global plugins and settings, Zed's
    # and Helix's language servers, GHCi's, Octave's, Perl's debugger's, Guile's and
    # SBCL's start-up files, Debian's chosen editor, mail tools' filters and viewers,
    # bat's pager, matplotlib's backend module, Maven's, uv's and opam's settings,
    # PulseAudio's modules, xbindkeys' commands
    ".jupyter",
    ".julia/config",
    ".hgrc",
    ".config/hg",
    ".sbt/*/plugins",
    ".sbt/*/*.sbt",
    ".config/zed",
    ".config/helix",
    ".ghci",
    ".octaverc",
    ".perldb",
    ".guile",
    ".sbclrc",
    ".mkshrc",
    ".selected_editor",
    ".mailcap",
    ".muttrc",
    ".procmailrc",
    ".forward",
    ".config/bat",
    ".config/matplotlib",
    ".m2/settings.xml",
    ".config/uv",
    ".opam/config",
    ".config/pulse",
    ".xbindkeysrc",
    # hook code run at commits in every repository (husky 9's init.sh, sourced before
    # each hook; pre-commit's cached hook checkouts), Neovim's and lazy.nvim's
    # plugins loaded at each start, terraform's plugins, tmux's plugins (TPM)
    ".config/husky",
    ".cache/pre-commit",
    ".local/share/nvim/site",
    ".local/share/nvim/lazy",
    ".terraform.d/plugins",
    ".tmux/plugins",
    # zinit's plugins, sourced at every zsh start
    ".local/share/zinit",
    # clients that run credential helpers or read options (proxies, uploads) from these
    ".kube",
    ".aws",
    ".docker",
    ".curlrc",
    ".wgetrc",
    ".netrc",
    ".condarc",
    ".config/fish",
    ".envrc",
    ".gitconfig",
    ".config/git",
    ".ssh",
    ".npmrc",
    ".pypirc",
    ".config/pip",
    ".pip",
    # variables that tools load into the environment of what they run
    # (LD_PRELOAD, BASH_ENV, NODE_OPTIONS)
    ".env",
    # the variants frameworks and direnv's usual includes load the same way
    # (.env.example and other documentation of the variables stay writable)
    ".env.local",
    ".env.*.local",
    ".env.development",
    ".env.production",
    ".env.test",
    ".envrc.local",
    ".envrc.private",
    ".direnv",
    # zsh-autoenv and autoenv source these on entering and leaving a directory
    ".autoenv*.zsh",
    ".env.leave",
    # a virtual environment's python runs these at every start (uv run, pytest, the
    # editor's interpreter discovery), and pyvenv.cfg names the python it runs;
    # activate scripts run in the host's shell
    "pyvenv.cfg",
    "site-packages/*.pth",
    # (python imports these modules from every entry of sys.path, PYTHONPATH's
    # included, in any form: a package, a sourceless .pyc, an extension module,
    # and a cached .pyc beside the source under __pycache__)
    "sitecustomize*",
    "usercustomize*",
    "dist-packages/*.pth",
    "bin/activate*",
    # package managers and build tools that run code named in the project on any command
    ".yarnrc",
    ".yarnrc.yml",
    ".pnpmfile.cjs",
    "bunfig.toml",
    ".bunfig.toml",
    ".cargo/config.toml",
    ".cargo/config",
    # (cargo install's directory, first on PATH for a rustup user)
    ".cargo/bin",
    ".cargo/env",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    # Maven loads .mvn/jvm.config (-agentpath) and .mvn/extensions.xml on every
    # command; the Gradle wrapper downloads and runs the distribution its
    # properties name, and Gradle runs .gradle/init.d scripts
    ".mvn",
    # (org.gradle.jvmargs=-javaagent:..., systemProp: every Gradle start, the IDE's import)
    "gradle.properties",
    "gradle/wrapper",
    ".gradle",
    # a toolchain by path: rustup runs its cargo and rustc; uv runs the interpreter
    # a version file names by path (to ask it what it is) at every `uv run`, `uv sync`
    "rust-toolchain.toml",
    "rust-toolchain",
    ".python-version",
    ".python-versions",
    # (PDM runs the interpreter the project records by path at every pdm command)
    ".pdm-python",
    ".Rprofile",
    # tool managers that run hooks or load environments on entering the directory
    # (mise also reads mise.local.toml and mise.<env>.toml, and a path: version
    # in .tool-versions puts a directory of the project on PATH)
    "mise.toml",
    ".mise.toml",
    "mise.*.toml",
    ".mise.*.toml",
    "mise/config.toml",
    ".config/mise.toml",
    ".config/mise",
    ".mise",
    ".tool-versions",
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
    # (VS Code's folderOpen tasks live in a workspace file too)
    "*.code-workspace",
    ".theia",
    ".fleet",
    ".aider.conf.yml",
    "opencode.json",
    ".opencode",
    ".kiro",
    ".continue",
    ".roo",
    ".qwen",
    ".amazonq",
    "crush.json",
    ".crush.json",
    ".goose",
    ".kilocode",
    ".junie",
    ".trae",
    ".augment",
    # linters', formatters' and test runners' configurations that are code: editors'
    # extensions load them on opening or saving a file (ESLint, Prettier, pylint's
    # init-hook, Jest, Vitest), and lint-staged's linters at every commit
    ".pylintrc",
    "pylintrc",
    "eslint.config.*",
    ".eslintrc.js",
    ".eslintrc.cjs",
    ".eslintrc.mjs",
    "prettier.config.*",
    ".prettierrc.js",
    ".prettierrc.cjs",
    ".prettierrc.mjs",
    ".prettierrc.ts",
    "stylelint.config.*",
    ".stylelintrc.js",
    ".stylelintrc.cjs",
    ".stylelintrc.mjs",
    "jest.config.*",
    "vitest.config.*",
    "vitest.workspace.*",
    "lint-staged.config.*",
    ".lintstagedrc.js",
    ".lintstagedrc.cjs",
    ".lintstagedrc.mjs",
    # what those load in turn (babel-jest loads babel's configuration in every jest
    # run; vitest reads vite's when it has none of its own) and what other editors'
    # extensions load on opening the project (markdownlint, Tailwind CSS, Playwright,
    # mocha; mypy's and flake8's plugins)
    "babel.config.*",
    ".babelrc.js",
    ".babelrc.cjs",
    ".babelrc.mjs",
    "vite.config.*",
    ".markdownlint-cli2.cjs",
    ".markdownlint-cli2.mjs",
    ".markdownlint.cjs",
    "tailwind.config.*",
    "playwright.config.*",
    ".mocharc.js",
    ".mocharc.cjs",
    "mypy.ini",
    ".mypy.ini",
    ".flake8",
    # an sbt build, which Metals imports on opening the folder (its JVM options and
    # plugins: the sbt kin of .mvn/jvm.config), and bazel's options
    ".jvmopts",
    ".sbtopts",
    "project/*.sbt",
    "project/*.scala",
    ".bazelrc",
)
"""Paths (relative, glob per component) that a write always asks about.

Each entry matches at any depth: ``.git/config`` protects ``<root>/.git/config``
and ``<root>/vendor/lib/.git/config``. An entry names a file or a directory;
everything below a protected directory is protected, and so is every ancestor
that ends in the entry's leading components (replacing ``.git`` whole would
replace ``.git/config``). Extend it with ``protected_paths=`` on the policy and
the sandbox.
"""


_HEAD = re.compile(rb"(?:ref: refs/[\x21-\x7e]+|[0-9a-f]{40}|[0-9a-f]{64})\n?")


def valid_git_head(content: bytes) -> bool:
    """Whether ``content`` is a ``HEAD`` git accepts: a symbolic ref or a full object id.

    A ``.git/HEAD`` that is not one makes git skip that ``.git`` and take the
    directory itself, or a parent, for the repository.
    """
    match = _HEAD.fullmatch(content)
    return match is not None and b".." not in content  # no ref name holds ".."


# git reads at most this much of a HEAD, and stops at a NUL (a C string)
_HEAD_READ = 255
_GIT_BLANKS = b" \t\n\r"  # git's isspace()
_HEX_DIGITS = frozenset(b"0123456789abcdefABCDEF")


def git_takes_head(content: bytes) -> bool:
    """Whether git, looking for a repository, takes a ``HEAD`` file holding ``content``.

    Exactly git's own reading (its ``validate_headref``): the first 255 bytes, up
    to a NUL; ``ref:``, any blanks, then ``refs/`` and anything; or 40 hex digits
    (either case) and anything after them. Wider than :func:`valid_git_head`,
    which says what may come back: this one says where git finds a repository.
    (A ``HEAD`` that is a symbolic link counts when its text starts with ``refs/``.)
    """
    buffer = content[:_HEAD_READ].split(b"\0", 1)[0]
    if buffer.startswith(b"ref:") and buffer[4:].lstrip(_GIT_BLANKS).startswith(b"refs/"):
        return True
    return len(buffer) >= 40 and all(byte in _HEX_DIGITS for byte in buffer[:40])


def fold_name(name: str) -> str:
    """``name`` as a case-insensitive file system compares it: composed (NFC), case-folded.

    A root may lie on such a file system (a macOS or Windows checkout mounted into a
    Linux container, exFAT media), or hold such a directory (ext4's per-directory
    casefold), where ``.ENVRC`` is ``.envrc`` and ``.Git/config`` is
    ``.git/config``; protected names are compared folded everywhere, so a case or
    normalisation twin of one is protected too.
    """
    if name.isascii():
        return name.lower()
    return unicodedata.normalize("NFC", name).casefold()


def fold_parts(parts: Iterable[str]) -> tuple[str, ...]:
    """Each of ``parts`` folded (:func:`fold_name`)."""
    parts = tuple(parts)
    joined = "\0".join(parts)  # (no name holds a NUL) one pass for the usual ASCII path
    if joined.isascii():
        lowered = joined.lower()
        return parts if lowered == joined else tuple(lowered.split("\0"))
    return tuple(map(fold_name, parts))


def in_git_directory(parts: Sequence[str]) -> bool:
    """Whether a path (its components, relative to a root) is a ``.git`` or lies in one.

    The write and edit tools never write there: a ``.git`` file names the
    repository git uses, and a ``.git`` directory's files decide what it runs
    and whether it is a repository at all. Any case of the name counts
    (:func:`fold_name`; git itself refuses ``.GIT`` in a tree).
    """
    return GIT_DIRECTORY in parts or any(fold_name(part) == GIT_DIRECTORY for part in parts)


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


_WILDCARD = re.compile(r"[*?\[]")


class ProtectedPaths:
    """Matches real paths against protected-path entries.

    Case-insensitively (both sides folded by :func:`fold_name`): on a
    case-insensitive file system a case twin of an entry is that entry.
    """

    __slots__ = (
        "_by_first", "_first_names", "_longest", "_split", "_wild_first", "_wild_start", "entries",
    )  # fmt: skip

    def __init__(self, entries: Sequence[str]) -> None:
        """Compile ``entries`` (already normalised)."""
        self.entries = tuple(entries)
        self._split = tuple((entry, fold_parts(entry.split("/"))) for entry in self.entries)
        # For covers(): the entries a window can start with, found by its first
        # name (a literal) or tried at every position (a pattern), each with its
        # place in ``entries`` so the first entry in that order is the one named.
        by_first: dict[str, list[tuple[int, str, tuple[str, ...]]]] = {}
        wild: list[tuple[int, str, tuple[str, ...]]] = []
        for index, (entry, pattern) in enumerate(self._split):
            if _WILDCARD.search(pattern[0]):
                wild.append((index, entry, pattern))
            else:
                by_first.setdefault(pattern[0], []).append((index, entry, pattern))
        self._by_first = by_first
        self._wild_first = tuple(wild)
        # what a window can start with at all: a path holding none of these names, and
        # none matching a pattern's first name, is covered by no entry (checked first:
        # most paths are not protected, and the copy-back asks for every index entry)
        self._first_names = frozenset(by_first)
        self._longest = max((len(pattern) for _, pattern in self._split), default=0)
        starts = "|".join(f"(?:{fnmatch.translate(p[0])})" for _, _, p in wild)
        self._wild_start = re.compile(starts).match if starts else None

    def match(self, path: str) -> str | None:
        """The entry that protects ``path`` (an absolute, normalised path), else None.

        The path is the entry, lies below it, or is an ancestor that ends inside the
        entry (``.git`` for ``.git/config``).
        """
        return self._earliest(fold_parts(p for p in path.split("/") if p), ancestors=True)

    def leads_to(self, parts: Sequence[str]) -> str | None:
        """The entry ``parts`` is a proper ancestor of, at its end; else None.

        A symbolic link at ``.cargo`` (of ``.cargo/config.toml``), at any depth,
        makes whatever it points at that entry.
        """
        parts = fold_parts(parts)
        size = len(parts)
        tail = parts[max(0, size - self._longest + 1) :]
        wild = self._wild_start
        if self._first_names.isdisjoint(tail) and (
            wild is None or not any(wild(part) for part in tail)
        ):
            return None  # no entry can start in the last names (asked for every new link)
        for entry, pattern in self._split:
            for start in range(max(0, size - len(pattern) + 1), size):
                window = parts[start:]
                if all(fnmatch.fnmatchcase(p, q) for p, q in zip(window, pattern, strict=False)):
                    return entry
        return None

    def covers(self, parts: Sequence[str]) -> str | None:
        """The entry that ``parts`` (a path relative to a root) is, or lies below; else None.

        Unlike :meth:`match`, an ancestor of an entry is not covered: ``.git``
        is not covered by ``.git/config``, the file is.
        """
        return self._earliest(fold_parts(parts), ancestors=False)

    def _earliest(self, parts: tuple[str, ...], *, ancestors: bool) -> str | None:
        """The first entry (in ``entries`` order) matching ``parts`` at any position.

        Linear in the depth (a hostile command can make a tree thousands of
        directories deep, and the copy-back asks at every level): each position
        tries only the entries that can start there, after a quick refusal of
        parts no entry can start in (most paths). With ``ancestors``, a window
        shorter than its entry matches (the parts end inside the entry).
        """
        wild = self._wild_start
        if self._first_names.isdisjoint(parts) and (
            wild is None or not any(wild(part) for part in parts)
        ):
            return None
        best: tuple[int, str] | None = None
        size = len(parts)
        for start, part in enumerate(parts):
            for index, entry, pattern in (*self._by_first.get(part, ()), *self._wild_first):
                n = len(pattern)
                if (best is not None and index >= best[0]) or (not ancestors and start + n > size):
                    continue
                window = parts[start : start + n]
                if all(fnmatch.fnmatchcase(p, q) for p, q in zip(window, pattern, strict=False)):
                    best = (index, entry)
        return None if best is None else best[1]


class AnchoredPaths:
    """Paths a root's own files make protected (relative to the root), as a matcher.

    Each entry protects itself and everything below it. A component holding a
    pattern (``mk/*.mk``, ``hooks.d/*``: what a hook's glob or ``run-parts DIR``
    will run, new files included) matches the names it matches as well as itself
    (a literal name holding a ``*`` or ``[`` is never less protected); the first
    ``**`` of an entry matches any number of components (``tools/**/*.sh``: what
    ``find tools -name '*.sh' -exec sh {} ;`` runs), a later one as ``*``. Compared
    folded (:func:`fold_name`), as :class:`ProtectedPaths` compares. Cheap for the
    usual all-literal entries: a path is tried only against the entries starting
    with its first name, and against those starting with a pattern.
    """

    __slots__ = ("_by_first", "_shadows", "_wild", "entries", "folded")

    def __init__(self, entries: Iterable[str]) -> None:
        """Compile ``entries`` (relative paths, ``/``-separated; patterns per component).

        An entry whose last component is :data:`._pymodules.MODULE_SHADOWS`
        covers what replaces a standard module in its directory (``re.py``,
        ``argparse/__init__.py``: :func:`._pymodules.module_shadow_names`).
        """
        self.entries: tuple[str, ...] = tuple(entries)
        folded: list[tuple[str, ...]] = []
        # the directories (folded) of MODULE_SHADOWS entries
        self._shadows: dict[tuple[str, ...], int] = {}
        for index, entry in enumerate(self.entries):
            names = entry.split("/")
            if names[-1] == MODULE_SHADOWS:
                top = fold_parts(names[:-1]) if len(names) > 1 else ()
                self._shadows.setdefault(top, index)
                folded.append((*top, MODULE_SHADOWS))
            else:
                folded.append(fold_parts(names))
        self.folded = tuple(folded)
        # each entry as (its place, its parts, None when literal else its compiled form)
        by_first: dict[str, list[_Entry]] = {}
        wild: list[_Entry] = []
        for index, parts in enumerate(self.folded):
            if not parts or parts[-1] == MODULE_SHADOWS:
                continue
            magic = any(_WILDCARD.search(part) for part in parts)
            item = (index, parts, _Compiled(parts) if magic else None)
            if _WILDCARD.search(parts[0]):
                wild.append(item)
            else:
                by_first.setdefault(parts[0], []).append(item)
        self._by_first: dict[str, list[_Entry]] = by_first
        self._wild: tuple[_Entry, ...] = tuple(wild)

    @classmethod
    def of(cls, entries: Iterable[str]) -> AnchoredPaths:
        """The matcher of ``entries``, made once for the same entries.

        A root's answer is the same from call to call until its files change: the
        copy-back, the host-opened redirect and the write tool each asked for a new
        matcher of it on every call (a root with many hooks' patterns compiled them
        every time).
        """
        key = tuple(entries)
        with _ANCHORED_LOCK:
            made = _ANCHORED.pop(key, None)
            if made is not None:
                _ANCHORED[key] = made  # (the most recently used goes last)
                return made
        made = cls(key)
        with _ANCHORED_LOCK:
            _ANCHORED[key] = made
            while len(_ANCHORED) > _ANCHORED_KEPT:
                _ANCHORED.pop(next(iter(_ANCHORED)))
        return made

    def __bool__(self) -> bool:
        return bool(self.entries)

    def covers(self, parts: Sequence[str]) -> str | None:
        """The entry ``parts`` (folded, relative to the root) is or lies below; else None."""
        if not parts:
            return None
        parts = tuple(parts)
        for candidates in (self._by_first.get(parts[0], ()), self._wild):
            for index, entry, compiled in candidates:
                if compiled is None:
                    if parts[: len(entry)] == entry:
                        return self.entries[index]
                elif compiled.covers(parts):
                    return self.entries[index]
        return self._shadowing(parts) if self._shadows else None

    def _shadowing(self, parts: tuple[str, ...]) -> str | None:
        """The path of what replaces a standard module that ``parts`` is or lies below."""
        files, packages = module_shadow_names()
        for at in range(len(parts)):
            if parts[:at] in self._shadows:
                name = parts[at]
                if name in files:
                    return "/".join(parts[: at + 1])
                if name in packages and at + 1 < len(parts) and parts[at + 1][:9] == "__init__.":
                    return "/".join(parts[: at + 2])
        return None

    def leads_to(self, parts: Sequence[str]) -> bool:
        """Whether ``parts`` (folded) is an entry or an ancestor of one (a link there leads in)."""
        if not parts:
            return bool(self.entries)
        parts = tuple(parts)
        size = len(parts)
        for candidates in (self._by_first.get(parts[0], ()), self._wild):
            for _, entry, compiled in candidates:
                if compiled is None:
                    if entry[:size] == parts:
                        return True
                elif compiled.leads_to(parts):
                    return True
        if self._shadows:
            files, packages = module_shadow_names()
            if parts[:-1] in self._shadows and (parts[-1] in files or parts[-1] in packages):
                return True  # (a module, or a package directory holding its __init__)
            return any(top[:size] == parts for top in self._shadows if len(top) >= size)
        return False


_Entry = tuple[int, tuple[str, ...], "_Compiled | None"]
# AnchoredPaths.of: the matchers last made, by their entries (a few roots' answers)
_ANCHORED: dict[tuple[str, ...], AnchoredPaths] = {}
_ANCHORED_KEPT = 8
_ANCHORED_LOCK = threading.Lock()


@functools.lru_cache(maxsize=4096)
def _part_matcher(part: str) -> Callable[[str], re.Match[str] | None]:
    """One component's pattern, compiled (the same patterns recur in every root's answer)."""
    return re.compile(fnmatch.translate(part)).match


class _Compiled:
    """One anchored entry holding a pattern, split at its first ``**`` if any."""

    __slots__ = ("deep", "entry", "matchers")

    def __init__(self, entry: tuple[str, ...]) -> None:
        self.entry = entry
        # the position of the first `**` (-1: none)
        self.deep = entry.index("**") if "**" in entry else -1
        # each component's pattern, compiled (None: a literal name)
        self.matchers = tuple(
            _part_matcher(part) if _WILDCARD.search(part) else None for part in entry
        )

    def _match(self, parts: Sequence[str], start: int, end: int, at: int) -> bool:
        """Whether ``parts[at:]`` starts with what the entry's ``[start:end]`` match."""
        for offset in range(end - start):
            part, name, matcher = parts[at + offset], self.entry[start + offset], \
                self.matchers[start + offset]  # fmt: skip
            if part != name and (matcher is None or matcher(part) is None):
                return False
        return True

    def covers(self, parts: Sequence[str]) -> bool:
        size = len(self.entry)
        deep = self.deep
        if deep < 0:
            return len(parts) >= size and self._match(parts, 0, size, 0)
        if len(parts) < deep or not self._match(parts, 0, deep, 0):
            return False
        tail = size - deep - 1
        if not tail:
            return True  # (`DIR/**`: DIR and everything below it)
        # (linear in the depth: a tail is tried from each component its first one matches)
        name, matcher = self.entry[deep + 1], self.matchers[deep + 1]
        return any(
            (part == name or (matcher is not None and matcher(part) is not None))
            and self._match(parts, deep + 1, size, at)
            for at, part in enumerate(parts[deep : len(parts) - tail + 1], deep)
        )

    def leads_to(self, parts: Sequence[str]) -> bool:
        size = len(parts)
        if self.deep >= 0 and size > self.deep:
            return self._match(parts, 0, self.deep, 0)  # (`**` goes on from any of them)
        return len(self.entry) >= size and self._match(parts, 0, size, 0)
