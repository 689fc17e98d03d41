"""What to protect for a repository nested in a root that git gives no clean answer about.

Git refuses a repository whose configuration it cannot parse (a syntax error at
any line, an include of a file that is not one), whose gitfile names no git
directory, or whose format it does not know; asked there, it names nothing. The
repository is not written off with the whole root: what the host's git would
read to decide what to run there, once the repository works again (the user
repairs the line, git learns the extension), is protected, and the rest of the
root stays writable. That set is:

* the whole git directory the ``.git`` names (a directory, a link's target or
  a gitfile's ``gitdir:`` line, read leniently: a path that does not exist yet
  too) and the whole common directory its ``commondir`` names;
* every path a configuration file of it names under a key that makes git read a
  file or find its hooks: ``path`` (``include.path``, ``includeIf.*.path``) and
  ``hooksPath``, in any section (a section header may be what is broken), each
  taken relative to every base git could use (the file holding it, the work
  tree, every ``worktree`` value); each included file is read the same way;
* each such name as written and where it leads, with every link on the way.

The configuration is read by the rules git reads it with (sections, quoted
values, escapes, continued lines, comments). A line git would refuse is skipped
when it cannot name a path (it does not hold ``path`` or ``worktree`` in any
case: no repair that keeps its words makes it one of those keys); when it does,
what it names is unknown and no part of the root is trusted
(:class:`SandboxUnavailableError`, the answer before this module).
"""

from __future__ import annotations

import os
import re

from ._errors import SandboxUnavailableError
from ._files import read_regular_file

__all__ = ["MAX_CONFIG_BYTES", "config_names", "named_inside", "read_config", "unanswered_entries"]

MAX_CONFIG_BYTES = 1 << 20
"""A configuration file larger than this is not read: what it names is unknown."""

_MAX_DEPTH = 10  # git follows includes this deep
_KEY = re.compile(r"[A-Za-z][A-Za-z0-9-]*")
_ESCAPES = {"n": "\n", "t": "\t", "b": "\b", "\\": "\\", '"': '"'}
_MENTIONS = re.compile(r"path|worktree", re.IGNORECASE)


class _Unknown(Exception):
    """What a broken repository names cannot be known."""


def read_config(text: str) -> list[tuple[str, str | None]]:
    """The ``(key, value)`` pairs of a git configuration file's text, as git reads them.

    ``key`` is the variable's name lowercased, without its section (a header
    may be the broken part); ``value`` None for a key without ``=``. A line git
    would refuse is skipped when it holds neither ``path`` nor ``worktree``.

    Raises:
        _Unknown: a line git would refuse holds one of those words.
    """
    out: list[tuple[str, str | None]] = []
    # git reads a CR before a LF as nothing, any other CR as itself (whitespace
    # outside quotes)
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    size = len(text)
    i = 0
    while i < size:
        start = i
        try:
            i = _line(text, i, out)
        except _Bad as bad:
            end = text.find("\n", bad.at)
            end = size if end < 0 else end + 1
            if _MENTIONS.search(text, start, end):
                raise _Unknown(text[start:end].strip()[:80]) from None
            i = end
    return out


class _Bad(Exception):
    def __init__(self, at: int) -> None:
        super().__init__(at)
        self.at = at


def _line(text: str, i: int, out: list[tuple[str, str | None]]) -> int:
    """Parse one line (a header may precede a key on it) from ``i``; the next line's start."""
    size = len(text)
    while True:
        while i < size and text[i] in " \t\r":
            i += 1
        if i >= size:
            return i
        ch = text[i]
        if ch == "\n":
            return i + 1
        if ch in "#;":
            end = text.find("\n", i)
            return size if end < 0 else end + 1
        if ch == "[":
            i = _header(text, i + 1)
            continue  # a key may follow on the same line
        match = _KEY.match(text, i)
        if match is None:
            raise _Bad(i)
        key = match.group().lower()
        i = match.end()
        while i < size and text[i] in " \t":
            i += 1
        if i >= size or text[i] in "\n#;\r":
            out.append((key, None))
            continue
        if text[i] != "=":
            raise _Bad(i)
        value, i = _value(text, i + 1)
        out.append((key, value))
        return i


def _header(text: str, i: int) -> int:
    """Past a section header's ``]`` (``i`` just after its ``[``)."""
    size = len(text)
    quoted = False
    while i < size:
        ch = text[i]
        if ch == "\n":
            raise _Bad(i)
        if quoted:
            if ch == "\\" and i + 1 < size and text[i + 1] != "\n":
                i += 2
                continue
            if ch == '"':
                quoted = False
        elif ch == '"':
            quoted = True
        elif ch == "]":
            return i + 1
        i += 1
    raise _Bad(i)


def _value(text: str, i: int) -> tuple[str, int]:
    """A value as git reads it from ``i`` (after ``=``); where the line after it starts."""
    size = len(text)
    out: list[str] = []
    quoted = False
    space = 0  # whitespace seen outside quotes, kept only if more follows
    comment = False
    while i < size:
        ch = text[i]
        i += 1
        if ch == "\n":
            if quoted:
                raise _Bad(i - 1)
            break
        if comment:
            continue
        if not quoted and ch in " \t\r":
            if out:
                space += 1
            continue
        if not quoted and ch in "#;":
            comment = True
            continue
        if space:
            out.append(" " * space)
            space = 0
        if ch == "\\":
            if i >= size:
                raise _Bad(i - 1)
            nxt = text[i]
            i += 1
            if nxt == "\n":
                continue  # a continued line
            if nxt not in _ESCAPES:
                raise _Bad(i - 1)
            out.append(_ESCAPES[nxt])
        elif ch == '"':
            quoted = not quoted
        else:
            out.append(ch)
    if quoted:
        raise _Bad(i)
    return "".join(out), i


def _inside(path: str, root: str) -> str | None:
    top = root.rstrip("/") + "/"
    return path[len(top) :] if path.startswith(top) else None


def _with_links(path: str, root: str) -> list[str]:
    """``path`` as written, where it leads, and every link on the way (inside the root)."""
    out = [path, os.path.realpath(path)]
    current = path
    while _inside(current, root) is not None:
        if os.path.islink(current):
            out.append(current)
            out.append(os.path.realpath(current))
        current = os.path.dirname(current)
    return out


def _read_text(path: str) -> str | None:
    """A configuration file's text; None when there is none; unknown when it is unreadable."""
    if not os.path.lexists(path):
        return None
    data = read_regular_file(os.path.realpath(path), MAX_CONFIG_BYTES + 1)
    if data is None:
        if not os.path.exists(path):
            return None  # a dangling link: git reads nothing there
        raise _Unknown(f"{path!r} is not a regular file git could read")
    if len(data) > MAX_CONFIG_BYTES:
        raise _Unknown(f"{path!r} is larger than {MAX_CONFIG_BYTES} bytes")
    return data.decode("utf-8", "surrogateescape")


def _git_directory(repository: str) -> str:
    """The git directory ``repository/.git`` names (it may not exist)."""
    dot_git = os.path.join(repository, ".git")
    if os.path.islink(dot_git) or os.path.isdir(dot_git):
        return os.path.realpath(dot_git)
    data = read_regular_file(dot_git, 4097)
    if data is None or len(data) > 4096:
        raise _Unknown(f"{dot_git!r} is neither a git directory nor a gitfile")
    first = data.decode("utf-8", "surrogateescape").strip().split("\n", 1)[0]
    named = first.removeprefix("gitdir:").strip()
    if not first.startswith("gitdir:") or not named:
        raise _Unknown(f"{dot_git!r} names no git directory")
    return os.path.realpath(os.path.join(repository, named))


def config_names(
    configs: list[str], bases: list[str], git_dir: str, depth: int = 0
) -> tuple[list[str], list[str], list[str]]:
    """What the configuration files ``configs`` and the files they include name.

    The included files (absolute, as named, relative to the file holding each),
    the ``hooksPath`` values (as written) and the bases a relative one is taken
    from (``bases`` and each ``worktree`` value, relative to ``git_dir``). Every
    include is followed whatever its condition (the condition may hold later).

    Raises:
        _Unknown: a line that could name a path cannot be read, a file is not a
            regular file or is too large, or includes go past 10 deep.
    """
    pending = [(path, depth) for path in configs]
    included: list[str] = []
    hooks: list[str] = []
    bases = list(bases)
    seen: set[str] = set()
    while pending:
        path, level = pending.pop()
        if path in seen:
            continue
        seen.add(path)
        text = _read_text(path)
        if text is None:
            continue
        if level > _MAX_DEPTH:
            raise _Unknown(f"{path!r} is included more than {_MAX_DEPTH} deep")
        for key, value in read_config(text):
            if not value:
                continue
            value = os.path.expanduser(value)
            if key == "path":
                # relative to the file holding it, as named and as it leads
                for holder in dict.fromkeys((path, os.path.realpath(path))):
                    target = os.path.normpath(os.path.join(os.path.dirname(holder), value))
                    included.append(target)
                    pending.append((target, level + 1))
            elif key == "hookspath":
                hooks.append(value)
            elif key == "worktree":
                bases.append(os.path.normpath(os.path.join(git_dir, value)))
    return included, hooks, bases


def named_inside(paths: list[str], root: str) -> list[str]:
    """Those of ``paths`` inside ``root`` (relative to it), with where each leads.

    Each as named, where it leads and every link on the way (``paths`` absolute).
    """
    out: list[str] = []
    for path in paths:
        for found in _with_links(path, root):
            relative = _inside(found, root)
            if relative is not None:
                out.append(relative)
    return out


def unanswered_entries(
    repository: str, root: str, why: str, *, bare: bool = False
) -> tuple[list[str], list[str]]:
    """What to protect (relative to ``root``) for ``repository`` git could not answer about.

    ``why``: git's refusal, said again when no part of the root can be trusted;
    ``bare``: ``repository`` is itself the git directory.
    Returns the entries and every configuration file read for them (their
    identity decides when to ask again).

    Raises:
        SandboxUnavailableError: what the repository would name once repaired
            cannot be known (a line naming a path git cannot parse, a gitfile
            naming nothing, a configuration file that is not a regular file).
    """
    try:
        git_dir = repository if bare else _git_directory(repository)
        common = git_dir
        text = _read_text(os.path.join(git_dir, "commondir"))
        if text is not None:
            common = os.path.realpath(os.path.join(git_dir, text.strip()))
        configs = [os.path.join(d, n) for d in (git_dir, common)
                   for n in ("config", "config.worktree")]  # fmt: skip
        included, hooks, bases = config_names(configs, [repository, git_dir], git_dir)
    except _Unknown as exc:
        raise SandboxUnavailableError(
            f"{why}; and what it would name once repaired cannot be known ({exc})"
        ) from None
    named: list[str] = [git_dir, common, *included]
    for value in hooks:
        named += [os.path.normpath(os.path.join(base, value)) for base in bases]
    out: list[str] = []
    top = root.rstrip("/")
    for path in named:
        for found in _with_links(path, root):
            relative = _inside(found, root)
            if relative is not None:
                out.append(relative)
            elif found == top or top.startswith(found.rstrip("/") + "/"):
                # protecting it protects the whole root
                raise SandboxUnavailableError(f"{why}; and it names {found!r}, the root or above")
    reads = [os.path.join(d, n) for d in (git_dir, common)
             for n in ("config", "config.worktree", "commondir")]  # fmt: skip
    return list(dict.fromkeys(out)), [*reads, *included]
