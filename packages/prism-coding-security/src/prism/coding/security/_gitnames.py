"""Paths git itself names for a root: its hooks directory, included configs, submodules.

The sandbox protects these on top of the fixed list (they are named by the
root's git configuration and index, not by a fixed name). Asking git costs
three processes, so the answer is cached per root and asked again only when
one of the files it depends on changed.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import threading

from ._callees import hook_callees
from ._errors import SandboxUnavailableError
from ._executables import host_environment, host_program
from ._files import read_regular_file
from ._gitdrivers import unsafe_to_start
from ._proved import HOST_GIT_ENVIRONMENT
from ._unanswered import _Unknown, config_names, named_inside

__all__ = [
    "EMBEDDED_GIT",
    "cached_configured",
    "cached_git_entries",
    "git_entries",
    "gitfile_target",
]

EMBEDDED_GIT = (
    "config", "config.worktree", "hooks", "commondir", "info", "modules", "worktrees",
)  # fmt: skip
"""What of a git directory decides what git runs (protected wherever that directory lies)."""


def _git(root: str, *args: str, clean: tuple[int, ...] = (0,)) -> bytes:
    """What ``git -C root ARGS`` prints, asked as the repository's owner would be answered.

    ``safe.directory=*`` is forced for this one process (it only reads, and runs no
    program the repository names: :data:`HOST_GIT_ENVIRONMENT`), so a checkout of
    another user (Prism as root in a container over the user's files, or under
    sudo) is answered rather than refused as of "dubious ownership".

    Raises:
        SandboxUnavailableError: no git, git failed (its exit status not in
            ``clean``), or it did not answer within 10 seconds: what it would
            have named is unknown.
    """
    git = host_program("git")
    if git is None:
        raise SandboxUnavailableError(
            f"git is not on PATH: what the configuration of the repository of {root} "
            "names (its hooks directory, included files) cannot be asked"
        )
    try:
        result = subprocess.run(
            [git, "-c", "safe.directory=*", "-C", root, *args],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            # the repository's own configuration runs nothing here (its fsmonitor would
            # run on the host when ls-files reads the index)
            env={**host_environment(), **dict(HOST_GIT_ENVIRONMENT)},
            check=False,
            timeout=10,
        )
    except subprocess.TimeoutExpired as exc:  # pragma: no cover - a git that hangs
        raise SandboxUnavailableError(
            f"git did not answer about {root} within 10s ({' '.join(args[:2])}); refusing to run"
        ) from exc
    except OSError as exc:  # pragma: no cover - a git that cannot start
        raise SandboxUnavailableError(f"git could not be started about {root}: {exc}") from exc
    if result.returncode not in clean:
        error = result.stderr.decode("utf-8", "replace").strip().splitlines()
        raise SandboxUnavailableError(
            f"git could not be asked about {root} ({' '.join(args[:2])}"
            + (f": {error[0]}" if error else f": exit status {result.returncode}")
            + "): what its configuration names is unknown"
        )
    return result.stdout


def _repository_around(root: str) -> bool:
    """Whether git could find a repository for ``root``: a ``.git`` there or above.

    Looked for as git looks (up the tree, not across a file system's boundary);
    the environment naming a git directory counts too. Anything at a ``.git``
    name counts, whatever git would make of it.
    """
    if any(name in os.environ for name in _ELSEWHERE):
        return True
    current = os.path.realpath(root)
    try:
        device = os.stat(current).st_dev
    except OSError:
        return False
    while True:
        if os.path.lexists(os.path.join(current, ".git")) or _looks_bare(current):
            return True
        parent = os.path.dirname(current)
        try:
            if parent == current or os.stat(parent).st_dev != device:
                return False
        except OSError:
            return False
        current = parent


def _looks_bare(directory: str) -> bool:
    """Whether ``directory`` has what git looks for in a bare repository (any ``HEAD``)."""
    return (
        os.path.lexists(os.path.join(directory, "HEAD"))
        and os.path.isdir(os.path.join(directory, "objects"))
        and os.path.isdir(os.path.join(directory, "refs"))
    )


def git_entries(root: str, includes: list[str] | None = None) -> list[str]:
    """Paths (relative to ``root``) git itself names: hooks directory, includes, submodules.

    * ``core.hooksPath`` may name a directory in the work tree (``.githooks``,
      ``.husky/_``): the next ``git commit`` on the host runs what is there.
      Git is asked (all config scopes, includes followed); it counts when it
      lies inside ``root``.
    * every file the configuration includes (``include.path``,
      ``includeIf.*.path``); ``includes``, when given, receives them all,
      inside the root or not;
    * for each submodule in the index (a gitlink) whose ``.git`` is a file,
      the git directory it names, when that lies in the root and is not a
      ``.git`` directory (those are covered by name).

    No repository (no ``.git`` at ``root`` or above): no entries, git or not.

    Raises:
        SandboxUnavailableError: a repository is there but git gives no clean
            answer (git is not on PATH, refuses the repository, fails, or does not
            answer within 10 seconds): what it names is unknown, so every caller
            treats the root's writes as protected. Or a file git reads as it starts
            (one an include names too) is not a regular file.
    """
    return _configured(root, includes) + _submodule_entries(root)


def _configured(
    root: str, includes: list[str] | None = None, *, within: str | None = None
) -> list[str]:
    """The hooks directory and the included files of :func:`git_entries` (its configuration).

    ``within``: the paths are relative to this directory, and only those inside
    it count (a repository nested in a root: the root); default ``root``.
    """
    problem = _dot_git_problem(root) or unsafe_to_start(root)
    if problem is not None:
        # any git started there would wait on it (git reads it as it starts)
        raise SandboxUnavailableError(f"git cannot be asked about {root}: {problem}")
    top = within or root
    inside = top.rstrip("/") + "/"
    if not _repository_around(root):
        # outside a repository git reads the user's and the system's configuration:
        # their template directory is copied into every repository the user makes,
        # and what they include, their hooks directory and the commands they name
        # run in every repository of the user's (the home a root: ~/.gitconfig.local,
        # ~/.githooks); no git, or one that cannot read them: none of them runs either
        found = b""
        try:
            if host_program("git") is not None:
                found = _git(root, "config", "--show-origin", "-z", "--get-regexp", _GLOBAL,
                             clean=(0, 1))  # fmt: skip
        except SandboxUnavailableError:
            found = b""
        named = _template_entries(root, found, top)
        named += [path for path in _command_entries(root, found, top) if path not in named]
        for path in [*_include_targets(root, found), *_given(root, found, hooks=True)]:
            if includes is not None:
                includes.append(path)
            relative = os.path.relpath(path, top)
            if path.startswith(inside) and relative not in named:
                named.append(relative)
        return named
    out: list[str] = []
    hooks_out = _git(root, "rev-parse", "--path-format=absolute", "--git-path", "hooks")
    hooks = os.path.realpath(hooks_out.decode("utf-8", "surrogateescape").strip())
    _not_the_top(hooks, top, root)
    if hooks.startswith(inside):
        out.append(os.path.relpath(hooks, top))
    # every key (exit status 1: none): the commands, the files and the includes it names
    found = _git(root, "config", "--show-origin", "-z", "--get-regexp", ".", clean=(0, 1))
    # (each configured command is read as a hook's line is: what it runs in turn)
    commands = _command_values(found)
    hooked = [hooks, os.path.join(root, ".husky")]
    for path in _hook_callees(root, hooked, top, includes, commands):
        if path not in out:
            out.append(path)
    out += [path for path in _template_entries(root, found, top) if path not in out]
    out += [path for path in _command_entries(root, found, top) if path not in out]
    targets = _include_targets(root, found)
    for path in targets:
        if includes is not None:
            includes.append(path)
        if path.startswith(inside):
            out.append(os.path.relpath(path, top))
    # what the included files name themselves, read as git reads them: git reads
    # no file of an include whose condition does not hold now (`onbranch:` a branch
    # the command can switch to), and its hooksPath or includes count once it does
    git_dir = _git_directory(root)
    try:
        more, hooked_values, bases = config_names(targets, [root, git_dir], git_dir, depth=1)
    except _Unknown as exc:
        raise SandboxUnavailableError(
            f"what the configuration of {root} includes cannot be read ({exc})"
        ) from None
    if includes is not None:
        includes += more
    hooked = [os.path.normpath(os.path.join(base, os.path.expanduser(value)))
              for value in hooked_values for base in bases]  # fmt: skip
    for path in hooked:
        _not_the_top(os.path.realpath(path), top, root)
    for path in named_inside([*more, *hooked], top):
        if path not in out:
            out.append(path)
    # the names git is given, as well as where they lead: a link among them (the
    # configured `.githooks -> tools/hooks`, `project.gitconfig -> shared/team.cfg`)
    # replaced by a file or another link would change what git reads
    for path in _named_paths(root, found, top):
        if includes is not None:
            includes.append(path)  # a link retargeted on the host changes its identity
        if path.startswith(inside) and os.path.relpath(path, top) not in out:
            out.append(os.path.relpath(path, top))
    return out


_TEMPLATE = r"^init\.templatedir$"
# what of a template directory git copies into every repository it makes (git init,
# git clone): its hooks (clone runs post-checkout at once), its info and its config
_TEMPLATE_PARTS = ("hooks", "info", "config")


def _template_entries(root: str, listing: bytes, top: str) -> list[str]:
    """What of each template directory lies inside ``top``, relative to it.

    The template directories: ``init.templateDir`` and ``GIT_TEMPLATE_DIR``.
    ``listing``: ``git config --show-origin -z --get-regexp`` output (other keys
    are skipped). A relative directory is taken relative to ``root``.
    """
    named: list[str] = []
    fields = listing.split(b"\0")
    for pair in fields[1::2]:
        key, _, value = pair.decode("utf-8", "surrogateescape").partition("\n")
        if key.lower() == "init.templatedir" and value:
            named.append(value)
    if os.environ.get("GIT_TEMPLATE_DIR"):
        named.append(os.environ["GIT_TEMPLATE_DIR"])
    inside = top.rstrip("/") + "/"
    out: list[str] = []
    for value in named:
        directory = os.path.realpath(os.path.join(root, os.path.expanduser(value)))
        if directory == os.path.realpath(top):
            out += list(_TEMPLATE_PARTS)
        elif directory.startswith(inside):
            relative = os.path.relpath(directory, top)
            out += [f"{relative}/{part}" for part in _TEMPLATE_PARTS]
    return list(dict.fromkeys(out))


# configuration whose value is a command git runs (through the shell, at the work
# tree's top): a filter or diff driver, a pager, an editor, a credential helper, ...
_COMMAND_KEYS = (
    r"filter\..*\.(clean|smudge|process)|diff\..*\.(textconv|command)|diff\.external|"
    r"merge\..*\.driver|(diff|merge)tool\..*\.(cmd|path)|"
    r"core\.(sshcommand|editor|pager|fsmonitor|alternaterefscommand|askpass|gitproxy)|"
    r"sequence\.editor|credential(\..*)?\.helper|gpg(\..*)?\.program|pager\..*|alias\..*|"
    r"gpg\.ssh\.defaultkeycommand|interactive\.difffilter|uploadpack\.packobjectshook|"
    r"remote\..*\.(receivepack|uploadpack)|submodule\..*\.update|(man|browser)\..*\.(cmd|path)|"
    r"sendemail\.(.*\.)?smtpserver|lfs\.customtransfer\..*\.path|"
    # (and any key named as one: sendemail.tocmd, trailer.<t>.cmd, trailer.<t>.command)
    r"(.*\.)?[a-z0-9]*cmd|(.*\.)?command"
)
_COMMAND_KEY = re.compile(_COMMAND_KEYS)
# configuration naming a file git reads to decide what it shows or runs: an ignore file
# (a `*` there hides every untracked file from `git status`), an attributes file (which
# files a configured filter or diff driver runs on), the signers a signature is checked
# against
_FILE_KEY = re.compile(r"core\.(excludesfile|attributesfile)|gpg\.ssh\.allowedsignersfile")
# what the user's and the system's configuration name, read outside a repository
_GLOBAL = (
    r"^(include(if\..*)?\.path|core\.hookspath|init\.templatedir|core\.(excludesfile|"
    r"attributesfile)|gpg\.ssh\.allowedsignersfile|" + _COMMAND_KEYS + r")$"
)
_SHELL_SPLIT = re.compile(r"[\s;&|()<>`'\"]+")


def _command_values(listing: bytes) -> list[str]:
    """The command each command key of ``listing`` names (an alias's without its ``!``).

    Only the files' values (the command line's are the ones this process forces).
    """
    out: list[str] = []
    fields = listing.split(b"\0")
    for origin, pair in zip(fields[::2], fields[1::2], strict=False):
        key, _, value = pair.decode("utf-8", "surrogateescape").partition("\n")
        if value and origin.startswith(b"file:") and _COMMAND_KEY.fullmatch(key.lower()):
            out.append(value.removeprefix("!"))
    return list(dict.fromkeys(out))[:_MAX_COMMANDS]


_MAX_COMMANDS = 64  # configured commands read as a hook's lines, at most


def _command_entries(root: str, listing: bytes, top: str) -> list[str]:
    """The files inside ``top`` that the configuration names, relative to it.

    Each word of each command value (``listing``: ``git config --show-origin -z
    --get-regexp`` output) that names a path with a ``/`` in it, or an existing
    file, relative to the work tree's top ``root`` where git runs it
    (``filter.strip.clean = ./tools/clean.sh``, ``diff.nb.textconv = python3
    scripts/nb.py``, ``alias.x = !sh tools/x.sh``): a command could change what
    the host's next ``git add``, ``diff`` or ``status`` runs. The file an ignore,
    attributes or allowed-signers key names, whether or not it exists yet. And
    in the value of any other key, a word naming an existing executable file
    (a program some tool reads the configuration for). A word that names
    ``top`` itself, or a directory above it, is not taken.
    """
    out: list[str] = []
    fields = listing.split(b"\0")
    inside = top.rstrip("/") + "/"
    for origin, pair in zip(fields[::2], fields[1::2], strict=False):
        key, _, value = pair.decode("utf-8", "surrogateescape").partition("\n")
        # (the command line's are the values this process forces: nothing of the root)
        if not value or not origin.startswith(b"file:"):
            continue
        lower = key.lower()
        command = _COMMAND_KEY.fullmatch(lower) is not None
        if _FILE_KEY.fullmatch(lower):
            path = os.path.normpath(os.path.join(root, os.path.expanduser(value)))
            if path.startswith(inside) and os.path.relpath(path, top) not in out:
                out.append(os.path.relpath(path, top))
            continue
        for word in _SHELL_SPLIT.split(value.lstrip("!") if command else value)[:_MAX_WORDS]:
            word = word.partition("=")[2] if word.startswith("-") else word
            if not word or word.startswith("-") or "$" in word:
                continue
            path = os.path.normpath(os.path.join(root, os.path.expanduser(word)))
            if not command and not _executable_file(path):
                continue  # (another key's value: only a program it names)
            if "/" not in word and not (os.path.lexists(path) and not os.path.isdir(path)):
                continue  # a program found on PATH, an argument
            if path.startswith(inside):
                relative = os.path.relpath(path, top)
                if relative not in out:
                    out.append(relative)
    return out


_MAX_WORDS = 256  # words of one configured value looked at, at most


def _executable_file(path: str) -> bool:
    try:
        info = os.stat(path, follow_symlinks=False)
    except (OSError, ValueError):
        return False
    return stat.S_ISREG(info.st_mode) and bool(info.st_mode & 0o111)


def _hook_callees(
    root: str,
    directories: list[str],
    top: str,
    includes: list[str] | None,
    commands: list[str] | None = None,
) -> list[str]:
    """The files inside ``top`` the host's tooling runs from the work tree ``root``.

    See :func:`._callees.hook_callees` (the hook scripts of ``directories``, the
    hook managers' commands, yarn's program, the configured ``commands``, and what
    each of those runs in turn). The files read go to ``includes`` (what the
    answer depends on).
    """
    reads: list[str] = []
    out = hook_callees(root, directories, top, reads, commands or [])
    if includes is not None:
        includes += reads
    return out


def _not_the_top(hooks: str, top: str, root: str) -> None:
    """Refuse a hooks directory that is the root itself: any file at its top could be a hook.

    Raises:
        SandboxUnavailableError: ``hooks`` is ``top``.
    """
    if hooks == os.path.realpath(top):
        raise SandboxUnavailableError(
            f"the configuration of {root} makes {hooks}, the root itself, its hooks "
            "directory: any file written at the root's top could be a hook"
        )


def _dot_git_problem(root: str) -> str | None:
    """Why git may not be pointed at ``root``: its ``.git`` is neither a directory nor a file.

    Git opens a ``.git`` that is not a directory and reads it as a gitfile (a FIFO
    there, or a link to one or to ``/dev/stdin``, would make it wait or read Prism's
    own input); a missing ``.git`` (or a dangling link) is no problem.
    """
    dot_git = os.path.join(root, ".git")
    try:
        mode = os.stat(dot_git).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{dot_git!r} cannot be looked at ({exc.strerror})"
    if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
        return None
    return f"{dot_git!r} is neither a directory nor a regular file"


def _submodule_entries(root: str) -> list[str]:
    """The submodules' git directories of :func:`git_entries` (its index).

    Asked only after :func:`_configured` found every file git reads as it starts
    regular (the caller keeps them unchanged since).
    """
    if not _repository_around(root):
        return []
    listing = _git(root, "ls-files", "--stage", "-z")
    names = []
    for record in listing.split(b"\0"):
        meta, _, name = record.partition(b"\t")
        if meta.startswith(b"160000 "):
            names.append(name)
    return _gitlink_entries(root, names)


def _gitlink_entries(root: str, names: list[bytes]) -> list[str]:
    """For the gitlinks ``names`` (in the index's order), what :func:`git_entries` names."""
    out: list[str] = []
    for name in names:
        text = name.decode("utf-8", "surrogateescape")
        path = text
        dot_git = os.path.join(root, text, ".git")
        if os.path.isdir(dot_git) and not os.path.islink(dot_git):
            continue
        out.append(f"{path}/.git")
        target = gitfile_target(dot_git)
        if target is not None and target.startswith(root.rstrip("/") + "/"):
            # the git directory a .git file names, when it lies in the root
            relative = os.path.relpath(target, root)
            out += [f"{relative}/{part}" for part in EMBEDDED_GIT]
    return out


def _include_targets(root: str, listing: bytes) -> list[str]:
    """Files named by ``include.path`` / ``includeIf.*.path`` (``--show-origin -z`` output).

    Every include counts, whatever its condition (a command can switch the
    branch an ``onbranch:`` condition names). Relative paths are relative to
    the file that holds them (an origin is relative to ``root``); ``~/`` is
    the home directory.
    """
    return [os.path.realpath(path) for path in _given(root, listing, hooks=False)]


def _given(root: str, listing: bytes, *, hooks: bool) -> list[str]:
    """The paths the includes (``hooks``: the ``core.hooksPath`` values) name, as written.

    Absolute and normalised, links not followed. An include is relative to the
    file that holds it (an origin is relative to ``root``), a hooks directory
    to the work tree's top; ``~/`` is the home directory.
    """
    out: list[str] = []
    fields = listing.split(b"\0")
    for origin, pair in zip(fields[::2], fields[1::2], strict=False):
        source = origin.decode("utf-8", "surrogateescape")
        key, _, value = pair.decode("utf-8", "surrogateescape").partition("\n")
        lower = key.lower()
        if not value or (lower != "core.hookspath" if hooks else not lower.startswith("include")):
            continue
        if not hooks and not source.startswith("file:"):
            continue
        value = os.path.expanduser(value)
        base = root if hooks else os.path.dirname(os.path.join(root, source[5:]))
        out.append(os.path.normpath(os.path.join(base, value)))
    return out


def _named_paths(root: str, listing: bytes, top: str | None = None) -> list[str]:
    """Each configured name of :func:`_given`, and every symbolic link on the way to it.

    Links are looked for up to ``top`` (default ``root``).
    """
    out: list[str] = []
    for path in [*_given(root, listing, hooks=False), *_given(root, listing, hooks=True)]:
        out.append(path)
        current = path
        while current.startswith((top or root).rstrip("/") + "/"):
            if os.path.islink(current):
                out.append(current)
            current = os.path.dirname(current)
    return out


def gitfile_target(path: str) -> str | None:
    """The real git directory a ``.git`` file names, or None (not a readable gitfile).

    Read as a regular file only: a link is not followed (``sub/.git ->
    /dev/stdin``) and a FIFO is never waited on.
    Read as git reads it (``read_gitfile_gently``): the line feeds and
    carriage returns at the end go, the text must start ``gitdir: ``, and the
    path is what follows up to a NUL (git holds it as a C string), spaces kept.
    """
    head = read_regular_file(path, 4097)
    if head is None:
        return None
    data = head.rstrip(b"\r\n")
    if not data.startswith(b"gitdir: "):
        return None
    named = data[len(b"gitdir: ") :].split(b"\0", 1)[0]
    if not named:
        return None
    target = os.path.join(os.path.dirname(path), named.decode("utf-8", "surrogateescape"))
    real = os.path.realpath(target)
    return real if os.path.isdir(real) else None


# what git reads in the .git directory for the hooks directory and the includes
_READ_FROM_GIT_DIR = ("config", "config.worktree", "HEAD", "commondir")


def _stat(path: str) -> tuple[object, ...] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (path, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_mode)


def _git_directory(root: str) -> str:
    """``root``'s ``.git``, or the directory it names when it is a ``.git`` file."""
    dot_git = os.path.join(root, ".git")
    if os.path.isdir(dot_git):
        return dot_git
    return gitfile_target(dot_git) or dot_git


def _key(root: str, includes: list[str]) -> tuple[object, ...]:
    """What the configured part depends on: every file git reads for it, by identity.

    The configuration files (the repository's, its common directory's, the
    user's, the system's, every included one), ``HEAD`` (an ``onbranch:``
    include), ``commondir`` and ``.git`` itself: a ``.git`` file whole, a ``.git``
    directory by what it is (the files git reads in it are listed; its own
    times change whenever git writes its index or ``COMMIT_EDITMSG``).
    """
    home = os.path.expanduser("~")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    dot_git = os.path.join(root, ".git")
    # the git directory git really uses: a `.git` file (a linked worktree, a submodule)
    # names it, and its common directory holds the shared config
    git_dir = _git_directory(root)
    files = [
        *(os.path.join(git_dir, name) for name in _READ_FROM_GIT_DIR),
        os.path.join(home, ".gitconfig"),
        os.path.join(xdg, "git", "config"),
        "/etc/gitconfig",
        *includes,
    ]
    common = read_regular_file(os.path.join(git_dir, "commondir"), 4097)
    if common is not None:
        text = common.decode("utf-8", "surrogateescape").strip()
        files.append(os.path.join(git_dir, text, "config"))
    out: list[object] = [os.environ.get("GIT_CONFIG_GLOBAL"), os.environ.get("GIT_DIR"),
                         os.environ.get("GIT_TEMPLATE_DIR")]  # fmt: skip
    try:
        info = os.stat(dot_git)
    except OSError:
        out.append(None)
    else:
        if stat.S_ISDIR(info.st_mode):
            out.append((info.st_ino, info.st_mode))
        else:
            out.append(_stat(dot_git))
    out += [_stat(path) for path in files]
    return tuple(out)


# per root: the configured part's key, entries and includes; that key with the index's
# identity, and the whole answer it gave
_cache: dict[str, tuple[tuple[object, ...], list[str], list[str]]] = {}
_submodules: dict[str, tuple[tuple[object, ...], list[str]]] = {}
_cache_lock = threading.Lock()


def remember_index(root: str, gitlinks: list[bytes], placed: os.stat_result) -> None:
    """Prism just placed ``root``'s index, or listed the host's: keep what its gitlinks name.

    ``gitlinks``: the index's gitlinks as the host's git listed them (in its
    order); ``placed``: the index file as placed, or as it was before the host's
    was listed (found by its inode, size and times, so a host's git that wrote
    another index since is not mistaken for it). The next
    :func:`cached_git_entries` then asks no ``ls-files`` for it.
    Nothing is kept unless the configured part is still valid, ``.git`` is a
    directory and git is not pointed elsewhere by the environment.
    """
    if any(name in os.environ for name in _ELSEWHERE):
        return
    with _cache_lock:
        hit = _cache.get(root)
    if hit is None or not os.path.isdir(os.path.join(root, ".git")):
        return
    key, configured, includes = hit
    if _key(root, includes) != key:
        return
    index = os.path.join(root, ".git", "index")
    identity = (index, placed.st_ino, placed.st_size, placed.st_mtime_ns, placed.st_ctime_ns,
                placed.st_mode)  # fmt: skip
    if _stat(index) != identity:
        return  # changed since it was placed
    entries = configured + _gitlink_entries(root, gitlinks)
    with _cache_lock:
        _submodules[root] = ((key, identity), entries)


def index_restamped(root: str, before: os.stat_result, after: os.stat_result) -> None:
    """``root``'s index was rewritten with only its entries' stat data changed.

    ``before``, ``after``: the index file's stat before and after. The gitlinks
    :func:`cached_git_entries` keeps for the index as it was before are kept for
    the new file (the same paths, modes and objects), so no ``ls-files`` is asked.
    """
    index = os.path.join(root, ".git", "index")
    with _cache_lock:
        below = _submodules.get(root)
        if below is None or len(below[0]) != 2:
            return
        key, identity = below[0]
        if identity != (index, *_identity(before)):
            return
        _submodules[root] = ((key, (index, *_identity(after))), below[1])


def _identity(info: os.stat_result) -> tuple[int, ...]:
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_mode)


# what makes `git -C root` read another repository or index than root/.git's
_ELSEWHERE = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY",
)  # fmt: skip


def cached_git_entries(root: str) -> list[str]:
    """:func:`git_entries`, each part asked again only when a file it depends on changed.

    The configured part (hooks, includes) when a file of its :func:`_key` changed;
    the submodules when the index (or that key) changed too.
    """
    with _cache_lock:
        hit = _cache.get(root)
        below = _submodules.get(root)
    if hit is not None and _key(root, hit[2]) == hit[0]:
        key, configured, includes = hit
    else:
        includes = []
        configured = _configured(root, includes)
        key = _key(root, includes)
        with _cache_lock:
            _cache[root] = (key, configured, includes)
    index = (key, _stat(os.path.join(_git_directory(root), "index")))
    if below is not None and below[0] == index:
        return below[1]
    entries = configured + _submodule_entries(root)
    with _cache_lock:
        _submodules[root] = (index, entries)
    return entries


# per (repository, root it lies in): the configured part's key, entries and includes
_nested: dict[tuple[str, str], tuple[tuple[object, ...], list[str], list[str]]] = {}


def cached_configured(repository: str, within: str) -> list[str]:
    """The configured part of :func:`git_entries` for a repository nested in the root ``within``.

    Relative to ``within`` (its hooks directory and includes may lie anywhere
    in the root); asked again only when a file of its key changed, as
    :func:`cached_git_entries` asks.

    Raises:
        SandboxUnavailableError: as :func:`git_entries`.
    """
    with _cache_lock:
        hit = _nested.get((repository, within))
    if hit is not None and _key(repository, hit[2]) == hit[0]:
        return hit[1]
    includes: list[str] = []
    configured = _configured(repository, includes, within=within)
    key = _key(repository, includes)
    with _cache_lock:
        if len(_nested) >= 4096:
            _nested.clear()
        _nested[repository, within] = (key, configured, includes)
    return configured
