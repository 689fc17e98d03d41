"""Whether a ``git add`` or ``git commit`` writes only inside its repository's ``.git``.

Such a command writes git's index, objects, refs, logs and work state files
(``COMMIT_EDITMSG``, ``index.lock``, ``ORIG_HEAD``), and an automatic
``git gc``/``git maintenance`` after it writes there too; nothing in the work
tree. That holds only while git runs no program that could write elsewhere,
so the answer is no (None) when:

* the argv has a global option (``-C``, ``-c``, ``--git-dir``...), a word
  computed at run time, or an option not known here to run nothing
  (``--patch``, ``--edit``, ``--gpg-sign``, ``--trailer``, ...), or a commit
  has no message of its own (``-m``, ``-F``, ``-C``, ``--no-edit``: no editor);
* the repository is not a ``.git`` directory of a root (a ``.git`` file or
  link, a linked worktree's directory, a bare repository, one outside the
  roots);
* its hooks directory (``core.hooksPath`` from any configuration, else
  ``.git/hooks``) holds anything but ``*.sample`` files: a ``pre-commit``
  hook may run a formatter over the tree;
* any configuration names a filter's ``clean``/``process`` program (``git
  add`` runs it), sets ``core.fsmonitor`` (a program, or a daemon) or
  ``commit.gpgSign``.

Git lists the configuration (one process that runs nothing; the answer is kept
per repository and asked again when a configuration file git reads for it
changed); the hooks directory is looked at every time.
"""

from __future__ import annotations

import os
import subprocess
import threading
from typing import TYPE_CHECKING

from ._executables import host_environment, host_program
from ._gitdrivers import unsafe_to_start
from ._proved import GIT_ENVIRONMENT

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._paths import Roots

__all__ = ["git_directory_writes"]

_PATTERN = (
    r"^(core\.hookspath|core\.fsmonitor|core\.worktree|filter\..*\.(clean|process)|commit\.gpgsign"
    r"|include\.path|includeif\..*\.path)$"
)
# options that run nothing and open no editor; value: whether it takes one
_ADD_LONG = {
    "--all": False, "--update": False, "--no-all": False, "--ignore-removal": False,
    "--no-ignore-removal": False, "--verbose": False, "--dry-run": False, "--force": False,
    "--intent-to-add": False, "--refresh": False, "--ignore-errors": False,
    "--ignore-missing": False, "--sparse": False, "--renormalize": False,
    "--pathspec-file-nul": False, "--no-warn-embedded-repo": False,
    "--pathspec-from-file": True, "--chmod": True,
}  # fmt: skip
_ADD_SHORT = {"A": False, "u": False, "v": False, "n": False, "f": False, "N": False}
_COMMIT_LONG = {
    "--all": False, "--quiet": False, "--allow-empty": False, "--allow-empty-message": False,
    "--no-edit": False, "--signoff": False, "--no-signoff": False, "--no-verify": False,
    "--verify": False, "--amend": False, "--reset-author": False, "--only": False,
    "--include": False, "--dry-run": False, "--short": False, "--branch": False,
    "--porcelain": False, "--long": False, "--null": False, "--status": False,
    "--no-status": False, "--no-post-rewrite": False, "--no-gpg-sign": False,
    "--pathspec-file-nul": False, "--message": True, "--file": True,
    "--reuse-message": True, "--author": True, "--date": True, "--cleanup": True,
    "--pathspec-from-file": True, "--untracked-files": False,
}  # fmt: skip
_COMMIT_SHORT = {"a": False, "q": False, "s": False, "n": False, "o": False, "i": False,
                 "z": False, "m": True, "F": True, "C": True, "u": False}  # fmt: skip
_MESSAGES = frozenset({"--message", "--file", "--reuse-message", "--no-edit", "m", "F", "C"})
_OPTIONAL_VALUE = frozenset({"--untracked-files", "u"})


def _options(
    words: Sequence[str], long: dict[str, bool], short: dict[str, bool]
) -> set[str] | None:
    """The options ``words`` uses (long names, short letters), or None: one not known here."""
    used: set[str] = set()
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if word == "--":
            break
        if word.startswith("--"):
            name, eq, _ = word.partition("=")
            if name not in long or (eq and not long[name] and name not in _OPTIONAL_VALUE):
                return None
            if long[name] and not eq:
                if index >= len(words):
                    return None  # its value is missing: git refuses the command
                index += 1  # its value is the next word
            used.add(name)
        elif word.startswith("-") and len(word) > 1:
            for position, letter in enumerate(word[1:], start=1):
                if letter not in short:
                    return None
                used.add(letter)
                if letter in _OPTIONAL_VALUE:
                    break  # the rest of the word is its value
                if short[letter]:
                    if position == len(word) - 1:
                        if index >= len(words):
                            return None
                        index += 1  # its value is the next word
                    break
    return used


def _arguments_run_nothing(argv: Sequence[str | None]) -> bool:
    if len(argv) < 2 or any(word is None for word in argv):
        return False
    words = [str(word) for word in argv]
    sub, rest = words[1], words[2:]
    if sub == "add":
        return _options(rest, _ADD_LONG, _ADD_SHORT) is not None
    if sub == "commit":
        used = _options(rest, _COMMIT_LONG, _COMMIT_SHORT)
        return used is not None and bool(used & _MESSAGES)
    return False


def _repository(cwd: str, roots: Roots) -> str | None:
    """The ``.git`` directory git finds from ``cwd``, when it is a plain one of a root."""
    current = cwd
    while roots.contains_real(current):
        dot_git = os.path.join(current, ".git")
        if os.path.lexists(dot_git):
            if os.path.islink(dot_git) or not os.path.isdir(dot_git):
                return None  # a .git file or link: the repository is elsewhere
            if not os.path.isfile(os.path.join(dot_git, "HEAD")) or os.path.lexists(
                os.path.join(dot_git, "commondir")
            ):
                return None
            return dot_git
        if os.path.isfile(os.path.join(current, "HEAD")) and os.path.isdir(
            os.path.join(current, "objects")
        ):
            return None  # a bare repository
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return None


def _stat(path: str) -> tuple[int, int, int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _config_files(git_dir: str) -> list[str]:
    home = os.environ.get("HOME") or os.path.expanduser("~")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    return [
        os.path.join(git_dir, "config"),
        os.path.join(git_dir, "config.worktree"),
        os.path.join(home, ".gitconfig"),
        os.path.join(xdg, "git", "config"),
        "/etc/gitconfig",
    ]


def _configuration(work_tree: str, git_dir: str) -> tuple[list[tuple[str, str]], bool] | None:
    """Every matching key and value, and whether an include was met; None: unreadable."""
    git = host_program("git")
    if git is None or unsafe_to_start(work_tree) is not None:
        return None  # (a git started there could wait on a FIFO)
    env = {**host_environment(), **dict(GIT_ENVIRONMENT)}
    try:
        result = subprocess.run(
            [git, "-C", work_tree, "config", "-z", "--show-scope", "--get-regexp", _PATTERN],
            capture_output=True, stdin=subprocess.DEVNULL, env=env, check=False, timeout=10,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode not in (0, 1):  # 1: nothing matched
        return None
    pairs: list[tuple[str, str]] = []
    fields = result.stdout.decode("utf-8", "surrogateescape").split("\0")
    for scope, record in zip(fields[::2], fields[1::2], strict=False):
        if scope != "command":  # Prism's own forced configuration, not the command's
            key, _, value = record.partition("\n")
            pairs.append((key.lower(), value))
    includes = any(k.startswith(("include.", "includeif.")) for k, _ in pairs)
    return pairs, includes


_cache: dict[str, tuple[tuple[object, ...], str | None]] = {}
_cache_lock = threading.Lock()


def _hooks_directory(git_dir: str) -> str | None:
    """The hooks directory git would use, when no configuration names a program; or None."""
    work_tree = os.path.dirname(git_dir)
    pointed = any(name.startswith("GIT_CONFIG") for name in os.environ)
    key = tuple(_stat(path) for path in _config_files(git_dir))
    if not pointed:
        with _cache_lock:
            cached = _cache.get(git_dir)
        if cached is not None and cached[0] == key:
            return cached[1]
    found = _configuration(work_tree, git_dir)
    answer: str | None = os.path.join(git_dir, "hooks")
    if found is None:
        answer = None
    else:
        pairs, includes = found
        for name, value in pairs:
            if name == "core.hookspath":
                path = os.path.expanduser(value)
                answer = os.path.join(work_tree, path) if value else os.path.join(git_dir, "hooks")
            elif name == "core.fsmonitor":
                if value.strip().lower() not in ("", "false", "no", "off", "0"):
                    answer = None
                    break
            elif name == "commit.gpgsign":
                if value.strip().lower() not in ("false", "no", "off", "0"):
                    answer = None
                    break
            elif name.startswith("filter.") or name == "core.worktree":
                # a filter runs a program; another work tree has hooks and files of its own
                answer = None
                break
        if includes:
            pointed = True  # the included files are not in the key: ask every time
    if not pointed:
        with _cache_lock:
            _cache[git_dir] = (key, answer)
    return answer


def _hooks_run(directory: str) -> bool:
    """Whether ``directory`` may hold a hook git runs (anything but ``*.sample``)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return any(not name.endswith(".sample") for name in names)


def git_directory_writes(
    argv: Sequence[str | None], cwds: Sequence[str], roots: Roots
) -> list[str] | None:
    """The ``.git`` directories ``argv`` (``git add ...``/``git commit ...``) writes in.

    One per directory the line may be in; None when the command may write
    elsewhere or run a program (see the module docstring).
    """
    if not _arguments_run_nothing(argv):
        return None
    out: list[str] = []
    for cwd in cwds:
        git_dir = _repository(cwd, roots)
        if git_dir is None:
            return None
        hooks = _hooks_directory(git_dir)
        if hooks is None or _hooks_run(hooks):
            return None
        if any(
            os.path.lexists(p)
            for p in (os.path.join(os.path.dirname(git_dir), ".gitmodules"),
                      os.path.join(git_dir, "modules"))
        ):  # fmt: skip
            return None  # submodules: git runs under each one's own configuration
        if git_dir not in out:
            out.append(git_dir)
    return out
