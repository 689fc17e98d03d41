"""What the host's tooling runs from a work tree after a call: the callees of its hooks.

One rule: a file of the tree that the host's tooling will execute on its own
(the user's next ``git commit``, ``yarn``) is protected, and so is what such a
file runs in turn, as far as it can be read. The tooling, and what it executes:

* each hook script of the hooks directories git and husky run (``.git/hooks``
  or ``core.hooksPath``, ``.husky``);
* each command a hook manager's configuration at the work tree's top names
  (``.pre-commit-config.yaml``'s ``entry``, lefthook's ``run``, lint-staged's and
  simple-git-hooks' commands in their JSON or YAML files and in ``package.json``);
* the program and plugins yarn runs on every command (``.yarnrc.yml``'s
  ``yarnPath`` and plugin ``path``; ``.yarnrc``'s ``yarn-path``).

From each command the programs it runs are taken (its first word, and after an
interpreter or wrapper its script: :func:`programs_run`); each one named by a path
(a ``/`` in it, no ``$``) is protected, and when it is a file of the tree it is
read in turn (``sh scripts/lint.sh`` running ``./scripts/check.sh``). A command
whose program is a package runner (``npx``, ``npm``, ``yarn``, ``pnpm``, ``bun``,
``bunx``) runs what ``package.json`` and ``node_modules`` hold: both are
protected, and the ``package.json`` scripts it may name (every word after the
runner, with npm's ``pre``/``post`` scripts) are read as commands too. So are
both for any command node's tooling runs (a husky hook, a ``package.json``
script, lint-staged's and simple-git-hooks' commands): it puts
``node_modules/.bin`` first on the command's ``PATH``.

Limits: at most :data:`MAX_READ` files are read, each up to :data:`MAX_BYTES`; a
program hidden in a variable (``$DIR/x.sh``), a script that changes directory
before it runs another, a package runner's workspace below the top, and what an
interpreter imports (a Python script's modules) are not followed.
"""

from __future__ import annotations

import json
import os
import re

from ._files import read_regular_file

__all__ = ["MAX_BYTES", "MAX_READ", "hook_callees", "programs_run"]

MAX_READ = 64
"""Command files read for one work tree, at most (hook scripts, configurations, scripts)."""

MAX_BYTES = 65536
"""Bytes read of each, at most."""

# a word that runs the next one: an interpreter, a shell builtin, a wrapper
_RUNNERS = frozenset({
    "sh", "bash", "dash", "zsh", "ksh", "python", "python3", "node", "ruby", "perl", "exec",
    "source", ".", "command", "env", "nice", "timeout", "xargs",
})  # fmt: skip
# programs that run what package.json's scripts and node_modules hold
_PACKAGE_RUNNERS = frozenset({"npx", "npm", "yarn", "pnpm", "pnpx", "bun", "bunx", "corepack"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_SEGMENTS = re.compile(r"[;&|()\n`{}]+")
_WORDS = re.compile(r"[\s'\"]+")

# hook managers' configurations at the work tree's top, and their keys whose value
# is a command (pre-commit's entry; lefthook's run)
_MANAGERS = (
    ".pre-commit-config.yaml", "lefthook.yml", "lefthook.yaml", "lefthook-local.yml",
    "lefthook-local.yaml", ".lefthook.yml", ".lefthook.yaml", ".lefthook-local.yml",
    ".lefthook-local.yaml",
)  # fmt: skip
_COMMAND_KEY = re.compile(r"^(\s*)(?:-\s+)?(entry|run)\s*:\s*(.*)$")
# configurations every value of which is a command (lint-staged: glob -> commands;
# simple-git-hooks: hook -> command), as JSON or YAML, and their package.json keys
_ALL_COMMANDS = (
    ".lintstagedrc", ".lintstagedrc.json", ".lintstagedrc.yaml", ".lintstagedrc.yml",
    ".simple-git-hooks.json", "simple-git-hooks.json",
)  # fmt: skip
_PACKAGE_KEYS = ("lint-staged", "simple-git-hooks")
_YAML_VALUE = re.compile(r"^\s*(?:-\s+|[^:#]+:\s+|-$)(.+)$")
# yarn's own program and plugins, run on every yarn command
_YARN_KEY = re.compile(r"^\s*(?:-\s+)?(yarnPath|path)\s*:\s*(.*)$")
_YARN_V1 = re.compile(r"^\s*yarn-path\s+(.*)$", re.MULTILINE)


def programs_run(text: str) -> list[str]:
    """The words of shell ``text`` that name a program it runs.

    Each command's first word (after assignments) and, after an interpreter or a
    wrapper (``sh``, ``python3``, ``exec``, ``.``), its first operand: not the
    arguments, which name files the command reads or writes (``echo x > out``).
    """
    out: list[str] = []
    for words in _commands(text):
        while words:
            out.append(words[0])
            if os.path.basename(words[0]) not in _RUNNERS:
                break
            words = [w for w in words[1:] if not w.startswith("-")]
    return out


def _commands(text: str) -> list[list[str]]:
    """Each command of shell ``text`` as its words, assignments before it dropped."""
    out: list[list[str]] = []
    for segment in _SEGMENTS.split(text):
        words = [w for w in _WORDS.split(segment) if w]
        while words and _ASSIGNMENT.match(words[0]):
            words.pop(0)
        if words:
            out.append(words)
    return out


def _unquote(value: str) -> str:
    value = value.strip()
    if value[:1] in ("'", '"'):
        end = value.find(value[0], 1)
        return value[1:end] if end > 0 else value[1:]
    return value.split(" #", 1)[0].strip()


def _yaml_commands(text: str) -> list[str]:
    """The values of the command keys of a hook manager's YAML (block scalars included)."""
    out: list[str] = []
    lines = text.splitlines()
    for number, line in enumerate(lines):
        match = _COMMAND_KEY.match(line)
        if match is None:
            continue
        indent, value = len(match.group(1)), match.group(3).strip()
        if value[:1] in ("|", ">"):
            block: list[str] = []
            for more in lines[number + 1 :]:
                if more.strip() and len(more) - len(more.lstrip()) <= indent:
                    break
                block.append(more)
            out.append("\n".join(block))
        elif value:
            out.append(_unquote(value))
    return out


def _strings(value: object) -> list[str]:
    """Every string a JSON value holds (not its keys)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    return []


def _all_commands(text: str) -> list[str]:
    """Every value of a configuration made of commands, as JSON or else as YAML."""
    try:
        return _strings(json.loads(text))
    except ValueError:
        pass
    out: list[str] = []
    for line in text.splitlines():
        match = _YAML_VALUE.match(line)
        if match is not None and match.group(1).strip() not in ("|", ">", "[", "{"):
            out.append(_unquote(match.group(1)))
    return out


def _yarn_programs(top: str) -> tuple[list[str], list[str]]:
    """The paths yarn runs on every command, and the files read to find them."""
    out: list[str] = []
    berry, classic = os.path.join(top, ".yarnrc.yml"), os.path.join(top, ".yarnrc")
    content = read_regular_file(berry, MAX_BYTES)
    if content is not None:
        for line in content.decode("utf-8", "surrogateescape").splitlines():
            match = _YARN_KEY.match(line)
            if match is not None:
                out.append(_unquote(match.group(2)))
    content = read_regular_file(classic, MAX_BYTES)
    if content is not None:
        out += [_unquote(v) for v in _YARN_V1.findall(content.decode("utf-8", "surrogateescape"))]
    return out, [berry, classic]


def _script_names(words: list[str]) -> list[str]:
    """The package.json scripts a package runner's words may run (npm's pre/post too)."""
    names = [w for w in words[1:] if not w.startswith("-")]
    aliases = {"t": "test", "tst": "test", "test": "test", "start": "start", "stop": "stop"}
    names += [aliases[n] for n in names if n in aliases]
    return [f"{p}{n}" for n in names for p in ("", "pre", "post")]


def _package(top: str) -> tuple[dict[str, str], list[str]]:
    """``package.json``'s scripts, and the commands its hook managers' keys name."""
    content = read_regular_file(os.path.join(top, "package.json"), MAX_BYTES)
    if content is None:
        return {}, []
    try:
        data = json.loads(content)
    except ValueError:
        return {}, []
    if not isinstance(data, dict):
        return {}, []
    scripts = data.get("scripts")
    named = [s for key in _PACKAGE_KEYS for s in _strings(data.get(key))]
    if not isinstance(scripts, dict):
        return {}, named
    return {k: v for k, v in scripts.items() if isinstance(v, str)}, named


def hook_callees(top: str, directories: list[str], within: str, reads: list[str]) -> list[str]:
    """The paths inside ``within`` that the host's tooling runs from the work tree ``top``.

    ``directories``: the hooks directories whose scripts run (see the module's
    docstring). Every file read, or looked for, is appended to ``reads`` (what
    the answer depends on). Paths relative to ``within``.
    """
    inside = within.rstrip("/") + "/"
    out: list[str] = []
    # command texts still to read; whether node's tooling runs them (husky's hooks,
    # package.json's scripts, lint-staged: node_modules/.bin is on their PATH)
    pending: list[tuple[str, bool]] = []
    seen: set[str] = set()

    def protect(path: str) -> None:
        if path.startswith(inside):
            relative = os.path.relpath(path, within)
            if relative not in out:
                out.append(relative)

    def read(path: str) -> str | None:
        if path in seen:
            return None
        seen.add(path)
        reads.append(path)
        content = read_regular_file(path, MAX_BYTES)
        if content is None or b"\0" in content:
            return None  # (a program that is not a script: nothing in it is read)
        return content.decode("utf-8", "surrogateescape")

    read_files = 0
    for directory in directories:
        reads.append(directory)  # a hook added there changes the directory
        husky = os.path.basename(directory.rstrip("/")) in (".husky", "_")
        try:
            names = sorted(os.listdir(directory))[:MAX_READ]
        except OSError:
            continue
        for name in names:
            if name.endswith(".sample") or read_files >= MAX_READ:
                continue
            text = read(os.path.join(directory, name))
            if text is not None:
                read_files += 1
                pending.append((text, husky))
    for name in _MANAGERS:
        text = read(os.path.join(top, name))
        if text is not None:
            pending += [(command, False) for command in _yaml_commands(text)]
    for name in _ALL_COMMANDS:
        text = read(os.path.join(top, name))
        if text is not None:
            pending += [(command, True) for command in _all_commands(text)]
    reads.append(os.path.join(top, "package.json"))
    scripts, configured = _package(top)
    pending += [(command, True) for command in configured]
    programs, looked = _yarn_programs(top)
    reads += looked
    for program in programs:
        if program and "$" not in program:
            protect(os.path.normpath(os.path.join(top, os.path.expanduser(program))))
    taken: set[str] = set()
    while pending:
        text, node = pending.pop()
        for words in _commands(text):
            runner = os.path.basename(words[0]) in _PACKAGE_RUNNERS
            if runner or (node and not words[0].startswith("#")):
                protect(os.path.join(top, "package.json"))
                protect(os.path.join(top, "node_modules"))
            if runner:
                for name in _script_names(words):
                    if name in scripts and name not in taken:
                        taken.add(name)
                        pending.append((scripts[name], True))
        for word in programs_run(text):
            if "/" not in word or word.startswith(("-", "#")) or "$" in word:
                continue  # (found on PATH, an option, a #! line or comment, a variable)
            path = os.path.normpath(os.path.join(top, os.path.expanduser(word)))
            protect(path)
            if path.startswith(inside) and read_files < MAX_READ:
                more = read(path)
                if more is not None:
                    read_files += 1
                    pending.append((more, node))
    return out
