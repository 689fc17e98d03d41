"""What the host's tooling runs from a work tree after a call: the callees of its hooks.

One rule: a file of the tree that the host's tooling will execute on its own
(the user's next ``git commit``, ``yarn``) is protected, and so is what such a
file runs in turn, as far as it can be read. The tooling, and what it executes:

* each hook script of the hooks directories git and husky run (``.git/hooks``
  or ``core.hooksPath``, ``.husky``);
* each command a hook manager's configuration at the work tree's top names
  (``.pre-commit-config.yaml``'s ``entry`` with its ``args``, lefthook's ``run``, lint-staged's and
  simple-git-hooks' commands in their JSON or YAML files and in ``package.json``);
* the program and plugins yarn runs on every command (``.yarnrc.yml``'s
  ``yarnPath`` and plugin ``path``; ``.yarnrc``'s ``yarn-path``), and what other
  tools' configurations load on every command of theirs (``.npmrc``'s
  ``node-options`` modules and ``script-shell``, ``bunfig.toml``'s ``preload``,
  cargo's wrappers, linker and runner, a JVM agent of ``gradle.properties`` or
  ``.mvn/jvm.config``: :func:`_tool_programs`);
* what lefthook merges in (``extends``) and runs scripts from (``source_dir``),
  and the named scripts ``hatch run``, ``pdm`` and ``rye run`` take from
  ``pyproject.toml``.

From each command the programs it runs are taken (every simple command the
shell policy's parser finds, its first word, and through a wrapper's grammar or
an interpreter's options its program or script, ``make``'s makefiles:
:func:`programs_run`); each one named by a path
(a ``/`` in it, no ``$``) is protected, and when it is a file of the tree it is
read in turn (``sh scripts/lint.sh`` running ``./scripts/check.sh``). A command
whose program is a package runner (``npx``, ``npm``, ``yarn``, ``pnpm``, ``bun``,
``bunx``) runs what ``package.json`` and ``node_modules`` hold: both are
protected, and the ``package.json`` scripts it may name (every word after the
runner, with npm's ``pre``/``post`` scripts) are read as commands too. So are
both for any command node's tooling runs (a husky hook, a ``package.json``
script, lint-staged's and simple-git-hooks' commands): it puts
``node_modules/.bin`` first on the command's ``PATH``.

A text that runs code made of data (``cat x | sh``, ``sh -c "$(cat x)"``,
``python3 - < x``) names its callees in any word: every existing file of the
tree that any of its commands names or reads is kept (:func:`script_arguments`).

A loop's variable takes every word its list or its input may hold
(:func:`loop_bound`): a pattern as a pattern, the names a listed directory
holds with the pattern of its entries (a name added there is listed too), a
list file with its lines; ``find``'s finds as its actions get them
(:func:`_find_found`); anything (the whole tree) when a command not read here
makes the list.

Limits: at most :data:`MAX_READ` files are read, each up to :data:`MAX_BYTES`; a
program hidden in a variable (``$DIR/x.sh``), a script that changes directory
before it runs another, a package runner's workspace below the top, and what an
interpreter imports beyond the first directory it searches (a Python script's
modules elsewhere on ``PYTHONPATH``, a Node program's) are not followed. In that
first directory (the script's own; the working directory for ``python -m``),
what Python would import before an installed module is protected: its modules in
any form, its packages' ``__init__``, its caches, and for ``-m`` the whole package.
"""

from __future__ import annotations

import glob
import itertools
import json
import os
import re
import shlex
import tomllib
from typing import TYPE_CHECKING, Any

from ._commands import MAX_COMMAND_CHARS, parse_script
from ._files import read_regular_file, shell_text
from ._grammars import SIMPLE_WRAPPERS
from ._programs import describe
from ._variables import variable_named

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = [
    "EXPANDED_MAX",
    "MAX_BYTES",
    "MAX_READ",
    "assigned_values",
    "assignments",
    "expand_assignments",
    "glob_matches",
    "hook_callees",
    "library_modules",
    "loop_bound",
    "own_directory",
    "programs_run",
    "python_imports",
    "script_arguments",
    "working_directory",
]

MAX_READ = 64
"""Command files read for one work tree, at most (hook scripts, configurations, scripts)."""

MAX_BYTES = 65536
"""Bytes read of each, at most."""

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
# the same tools' JavaScript configurations: not evaluated; every string literal in
# them is taken for a command (a computed one is missed)
_JS_COMMANDS = (
    "lint-staged.config.js", "lint-staged.config.mjs", "lint-staged.config.cjs",
    "lint-staged.config.ts", ".lintstagedrc.js", ".lintstagedrc.mjs", ".lintstagedrc.cjs",
    ".simple-git-hooks.js", ".simple-git-hooks.cjs", "simple-git-hooks.js",
    "simple-git-hooks.cjs",
)  # fmt: skip
_JS_STRING = re.compile(r"""'((?:[^'\\\n]|\\.)*)'|"((?:[^"\\\n]|\\.)*)"|`((?:[^`\\]|\\.)*)`""")
# a hook's usual spellings of the work tree's top, of its own directory, and of make
_TOP = re.compile(
    r"\$\(\s*git\s+rev-parse\s+--show-toplevel\b[^)]*\)|`\s*git\s+rev-parse\s+--show-toplevel\b[^`]*`"
)
_OWN_DIRECTORY = re.compile(
    r"""\$\(\s*dirname\s+(?:"?\$(?:0|\{0\}|\{BASH_SOURCE(?:\[0\])?\}|BASH_SOURCE)"?)\s*\)"""
    r"""|`\s*dirname\s+"?\$0"?\s*`"""
)
_MAKE_VARIABLE = re.compile(r"\$[({]MAKE[)}]")
# any other expansion followed by a path: the top spelled another way (`"$(realpath
# .)/x.sh"`, `"${PWD%/}/x.sh"`, `"$(git rev-parse --git-common-dir)/../x.sh"`); what
# follows is taken from the top when it names a file there (a wrong guess only asks)
_AFTER_EXPANSION = re.compile(r"""[)}`]["']?(?:/\.\.)*/([\w.@+-][^\s'"`;&|()<>$]*)""")
# tox's own spellings of the top
_TOX_TOP = re.compile(r"\{(?:toxinidir|tox_root)\}")
# the directory the command runs in, as a hook or a recipe asks for it
_WORKING_DIRECTORY = re.compile(
    r"\$\{PWD\}|\$PWD\b|\$\(\s*pwd(?:\s+-[LP])?\s*\)|`\s*pwd(?:\s+-[LP])?\s*`"
    r"|\$[({]CURDIR[)}]|\$[({]shell\s+pwd[)}]"
)
# a makefile's variables (`NAME = value`, `:=`, `::=`, `?=`, `+=`; not a recipe's line)
# and a reference to one
_MAKE_ASSIGNED = re.compile(
    r"^(?:(?:export|override)[ \t]+)?([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*(::=|:=|\?=|\+=|=)[ \t]*(.*)$",
    re.M,
)
_MAKE_REFERENCE = re.compile(r"\$[({]([A-Za-z_][A-Za-z0-9_.-]*)[)}]")
_MAKE_WILDCARD = re.compile(r"\$[({](?:wildcard|sort|strip)[ \t]+([^$(){}]*)[)}]")


def own_directory(text: str, directory: str) -> str:
    """Shell ``text`` with ``$(dirname "$0")`` and its kin (its own directory) as ``directory``."""
    return _OWN_DIRECTORY.sub(directory.replace("\\", "\\\\"), text)


def working_directory(text: str, directory: str) -> str:
    """Shell ``text`` with ``$PWD``, ``$(pwd)`` and their kin as ``directory``."""
    return _WORKING_DIRECTORY.sub(directory.replace("\\", "\\\\"), text)


def _make_expanded(text: str) -> str:
    """A makefile's ``text`` with its plainly assigned variables expanded where referenced."""
    known: dict[str, str] = {}
    for name, operator, value in _MAKE_ASSIGNED.findall(text):
        value = value.split(" #", 1)[0].strip()
        if operator == "?=" and name in known:
            continue
        known[name] = f"{known[name]} {value}" if operator == "+=" and name in known else value
    for _ in range(3):  # (a value naming another variable)
        text = _bounded_sub(_MAKE_REFERENCE, lambda m: known.get(m.group(1), m.group(0)), text)
    # `include $(wildcard mk/*.mk)`, `$(sort $(wildcard ...))`: the patterns themselves
    # (what they match, now or later)
    for _ in range(2):
        text = _MAKE_WILDCARD.sub(lambda m: m.group(1), text)
    return text


# a make reference left in a recipe's program once the makefile is expanded: a function
# or variable not evaluated here (`$(addprefix d/,x.sh)`, `$(call F,x)`, `$(V)` appending
# to itself), an automatic variable (`$^`); make's own defaults for its built-in
# variables name programs found on PATH
_MAKE_DYNAMIC = re.compile(r"\$(?:[({]|[@<^+?*|%])")
_MAX_RECIPES = 256  # recipe lines holding a reference read in one makefile, at most
_MAKE_DEFAULTS = re.compile(r"\$[({](?:CC|CXX|CPP|FC|AR|AS|LD|RM|LEX|YACC|M2C|PC|MAKE)[)}]")
# one leading reference, its parentheses balanced to two levels (`$(shell go env GOPATH)`)
_MAKE_LEADING = re.compile(r"^\$(?:\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)|\{[^{}]*\})")
_MAKE_RULE_RECIPE = re.compile(r"^[^\t#=:]+::?[^=;]*;(.*)$")


def _make_unknown(expanded: str) -> list[str]:
    """What the programs of the expanded makefile's recipes may be, where not known here.

    A program (or an interpreter's script) of a recipe line still holding a make
    reference: make evaluates about forty functions and any user-defined one
    (``$(call F,x)``); what such a word becomes is not guessed. A reference
    followed by a path (``$(shell go env GOPATH)/bin/lint``) may be that path
    in any directory (``**/bin/lint``); any other, anything (``**``).
    """
    recipes: list[str] = []
    for line in expanded.split("\n"):
        rule = None if line.startswith("\t") else _MAKE_RULE_RECIPE.match(line)
        if rule is not None or line.startswith("\t"):
            recipes.append(line if rule is None else rule.group(1))
    out: list[str] = []
    # (a recipe's `$$` is the shell's `$`, not make's)
    lines = [_MAKE_DEFAULTS.sub("make", line.replace("$$", "")) for line in recipes]
    lines = [line for line in lines if _MAKE_DYNAMIC.search(line)]
    for line in lines if len(lines) <= _MAX_RECIPES else ():
        script = parse_script(line) if len(line) <= MAX_COMMAND_CHARS else None
        if script is None or script.uncertain or not script.commands:
            return ["**"]  # (a line the shell policy's parser cannot read)
        # (a bare `$` is a piece of the rough split of a parsed line)
        for word in (w for w in programs_run(line) if w != "$"):
            if not _MAKE_DYNAMIC.search(word):
                continue
            rest = _MAKE_LEADING.sub("", word, count=1)
            known = rest.startswith("/") and "$" not in rest and ".." not in rest.split("/")
            if not known or rest == word:
                return ["**"]
            out.append(f"**{rest}")
    return list(dict.fromkeys(out)) if len(lines) <= _MAX_RECIPES else ["**"]


# NAME=value (export, local, typeset, declare before it), its value quoted or bare
_ASSIGNED = re.compile(
    r"^[ \t]*(?:(?:export|local|typeset|readonly|declare(?:[ \t]+-\w+)*)[ \t]+)?"
    r"([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"\n]*\"|'[^'\n]*'|[^ \t\n;&|]*)",
    re.MULTILINE,
)
# $NAME, ${NAME}, and ${NAME:-word} / ${NAME-word} / ${NAME:=word} / ${NAME=word}
_VARIABLE = re.compile(
    r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?[-=]([^{}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)"
)


EXPANDED_MAX = 1 << 16
"""Characters a text (or one variable's value) may grow to by expansion, at most: past it
the rest of its references stay as written (values that name other variables, each many
times, would otherwise multiply it without bound)."""


def _bounded_sub(
    pattern: re.Pattern[str], value_of: Callable[[re.Match[str]], str], text: str
) -> str:
    """``pattern.sub(value_of, text)``, each reference kept once the text would grow too much.

    Past :data:`EXPANDED_MAX` characters the rest stay as written.
    """
    room = EXPANDED_MAX - len(text)

    def replace(match: re.Match[str]) -> str:
        nonlocal room
        value = value_of(match)
        grows = len(value) - (match.end() - match.start())
        if grows > room:
            return match.group(0)
        room -= grows
        return value

    return pattern.sub(replace, text)


def assignments(text: str) -> list[tuple[str, str]]:
    """Each plain ``NAME=value`` of shell ``text`` (``export`` and its kin before it), unquoted."""
    return [(name, value.strip("\"'")) for name, value in _ASSIGNED.findall(text)]


def assigned_values(text: str) -> list[str]:
    """The value of each plain ``NAME=value`` of shell ``text``, its quotes removed."""
    return [value.strip("\"'") for _, value in _ASSIGNED.findall(text)]


def expand_assignments(text: str, known: dict[str, str]) -> str:
    """``text`` with the variables in ``known`` and those it assigns plainly expanded.

    Each ``NAME=value`` (its quotes removed; the last one wins, ``PATH`` left
    as written); ``${NAME:-word}`` and its kin take ``NAME``'s value when known,
    else ``word``. A variable with no value known is left as written.
    """
    known = dict(known)

    def value_of(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(3)
        if name in known:
            return known[name]
        default = match.group(2)
        return default if default is not None else match.group(0)

    for _ in range(3):  # (a value naming another variable, assigned before or after it)
        for name, value in _ASSIGNED.findall(text):
            if name not in ("PATH", "path"):
                known[name] = _bounded_sub(_VARIABLE, value_of, value.strip("\"'"))
    for _ in range(3):
        text = _bounded_sub(_VARIABLE, value_of, text)
    return text


_YAML_VALUE = re.compile(r"^\s*(?:-\s+|[^:#]+:\s+|-$)(.+)$")
# yarn's own program and plugins, run on every yarn command
_YARN_KEY = re.compile(r"^\s*(?:-\s+)?(yarnPath|path)\s*:\s*(.*)$")
_YARN_V1 = re.compile(r"^\s*yarn-path\s+(.*)$", re.MULTILINE)


# `for f in hooks.d/*.sh; do sh "$f"; done`: a loop's variable and the words of its list
_FOR = re.compile(r"\bfor[ \t]+([A-Za-z_][A-Za-z0-9_]*)[ \t]+in[ \t]+([^;\n]*)")
# `for f; do`, `for f do`: a loop over the positional parameters, and `set -- ...`
_FOR_BARE = re.compile(r"\bfor[ \t]+([A-Za-z_][A-Za-z0-9_]*)[ \t]*(?:;|\n|(?<=[ \t])do\b)")
_SET_POSITIONAL = re.compile(r"\bset[ \t]+(?:-[a-zA-Z]*[ \t]+)*--[ \t]+([^;\n&|]*)")
_POSITIONAL = re.compile(r"\$(?:@|\*|\{[@*]\})")
# `while read -r f; do . "$f"; done < list`: the words after `read` (its options and names)
_WHILE_READ = re.compile(r"\b(?:while|until)[ \t]+(?:[A-Za-z_]\w*=\S*[ \t]+)*read\b([^;\n]*)")
_LOOP_WORD = re.compile(r"\b(for|while|until|select|done)\b")
# what feeds a loop's `done`: a file (`done < list`), a command (`done < <(ls d)`), a string
_FED = re.compile(
    r"""[ \t]*(?:[0-9]*<<<[ \t]*(?P<string>"[^"\n]*"|'[^'\n]*'|[^ \t\n;&|]+)"""
    r"""|[0-9]*<[ \t]*<\((?P<command>[^\n]*)\)"""
    r"""|[0-9]*<[ \t]*(?P<file>"[^"\n]*"|'[^'\n]*'|[^ \t\n;&|()]+))"""
)
# a command substitution
_SUBSTITUTION = re.compile(r"\$\((?:[^()]|\([^()]*\))*\)|`[^`\n]*`")
# one word of a loop's list: a command substitution (quoted or not), a quoted word, a word
# (ended by sh's blanks only: a carriage return is part of it)
_LIST_WORD = re.compile(
    r""""?(?:\$\((?:[^()]|\([^()]*\))*\)|`[^`]*`)"?|"[^"]*"|'[^']*'|[^ \t\n"']+"""
)
_READ_OPTIONS = frozenset({"-d", "-u", "-n", "-N", "-p", "-t", "-a", "-i"})  # (they take a value)
# commands a list's lines pass through, some of them left out (`ls d | grep .sh | sort`)
_FILTERS = frozenset({"grep", "egrep", "fgrep", "sort", "uniq", "head", "tail", "tac", "cat"})
_UNKNOWN = "./**"  # (a word whatever the tree holds may be: everything below the directory)
_MAX_BOUND = 256  # (line, word) pairs bound for one text, at most
_MAX_LOOPS = 32  # loops read in one text, at most (each is a pass over its lines)
_MAX_LISTED = 64  # names a listed directory or a list file gives, at most


def loop_bound(text: str, cwd: str | None = None, reads: list[str] | None = None) -> str:
    """The commands of shell ``text`` using a loop's variable, once per word it may take.

    Each as a line of its own, its words quoted (``for f in hooks.d/*.sh; do sh
    "$f"; done`` gives ``sh 'hooks.d/*.sh'``), to be read after ``text``: a
    pattern among the words stays one (whatever it matches, now or later, is what
    runs). A ``for`` loop's list and what feeds a ``while read`` loop (a file after
    its ``done``, a command piped into it or substituted) give the words; a
    command's are what it prints (:func:`_printed`): ``$(ls d)`` gives ``d/*`` and
    the names ``d`` holds, ``$(find d -name '*.sh')`` gives ``d/**/*.sh``, a list
    file itself and its lines. What may be any name (a variable, a command not
    known here, a ``read`` with nothing known to feed it) gives ``./**``: whatever
    the directory holds. A command's word made by a substitution whose output is
    known the same way (``sh $(cat d/list)``) takes each word it may print.
    ``cwd``: where ``text`` runs (the directories listed and
    the files read now are taken from there and appended to ``reads``; None:
    nothing is read).
    """
    listed = reads if reads is not None else []
    # the positional parameters: what `set -- ...` gives them, else the caller's (anything)
    given = [_list_words(words, cwd, listed) for words in _SET_POSITIONAL.findall(text)]
    positional = [word for words in given for word in words] if given else [_UNKNOWN]
    bindings: list[tuple[str, list[str]]] = []
    for name, words in itertools.islice(_FOR.findall(text), _MAX_LOOPS):
        bound = _list_words(words, cwd, listed, positional)
        if bound:
            bindings.append((name, bound))
    for name in itertools.islice(_FOR_BARE.findall(text), _MAX_LOOPS):
        bindings.append((name, positional))  # (`for f; do`: over "$@")
    for match in itertools.islice(_WHILE_READ.finditer(text), _MAX_LOOPS):
        names = _read_names(match.group(1))
        if names:
            bound = _fed_words(text, match, cwd, listed, several=len(names) > 1)
            bindings += [(name, bound) for name in names]
    references = [
        (re.compile(rf"\$(?:\{{{name}\}}|{name}(?![A-Za-z0-9_]))"), words)
        for name, words in bindings[:_MAX_LOOPS]
    ]
    # a command's word made by a substitution whose output is known (`sh $(cat d/list)`):
    # each word it may print, as a loop's variable takes them
    for match in itertools.islice(_SUBSTITUTION.finditer(text), _MAX_LOOPS):
        made = match.group()
        inner = made[2:-1] if made.startswith("$(") else made[1:-1]
        printed = _printed(inner, cwd, listed)
        if printed and printed != [_UNKNOWN] and len(references) < _MAX_LOOPS:
            references.append((re.compile(re.escape(made)), printed))
    out: dict[str, None] = {}
    pairs = 0
    size = 0
    for reference, words in references:
        for line in text.split("\n"):  # (sh ends a line there only)
            if not reference.search(line):
                continue
            for word in words:
                pairs += 1
                if pairs > _MAX_BOUND:
                    return "\n".join(out)
                for command in _commands(reference.sub(word.replace("\\", "\\\\"), line)):
                    joined = shlex.join(command)
                    size += len(joined) + 1
                    if command[0] not in ("for", "while", "until") and size <= EXPANDED_MAX:
                        out[joined] = None
    return "\n".join(out)


def _list_words(
    listed: str, cwd: str | None, reads: list[str], positional: list[str] | None = None
) -> list[str]:
    """The words a ``for`` loop's list gives its variable (see :func:`loop_bound`).

    ``positional``: what ``"$@"`` stands for (None: anything).
    """
    out: list[str] = []
    for token in _LIST_WORD.findall(listed):
        word = token[1:-1] if token[:1] == token[-1:] and token[:1] in ("'", '"') else token
        if _POSITIONAL.fullmatch(word):
            out += positional if positional is not None else [_UNKNOWN]
        elif word.startswith("$(") and word.endswith(")"):
            out += _printed(word[2:-1], cwd, reads)
        elif word.startswith("`") and word.endswith("`"):
            out += _printed(word[1:-1], cwd, reads)
        elif any(c in word for c in "$`()"):
            out.append(_UNKNOWN)  # (a variable's words: anything)
        elif word and word != "do":
            out.append(word)
    return list(dict.fromkeys(out))


def _read_names(words: str) -> list[str]:
    """The variables ``read`` assigns, from the words after it (its options skipped)."""
    names: list[str] = []
    split = words.split()
    index = 0
    while index < len(split):
        word = split[index]
        if word.startswith("-"):
            index += 2 if word in _READ_OPTIONS else 1
            continue
        if word in ("do", "<", "<<<") or not re.fullmatch(r"[A-Za-z_]\w*", word):
            break
        names.append(word)
        index += 1
    return names


def _fed_words(
    text: str, match: re.Match[str], cwd: str | None, reads: list[str], *, several: bool
) -> list[str]:
    """The words a ``while read`` loop's variables may take: what its input may hold."""
    start = text.rfind("\n", 0, match.start()) + 1
    before = text[start : match.start()].rstrip()
    if before.endswith("|") and not before.endswith("||"):
        # `ls d | while read f`: what the pipeline before it prints
        source = re.split(r"&&|\|\||;", before[:-1])[-1]
        return _printed(source, cwd, reads)
    depth = 1
    for loop in _LOOP_WORD.finditer(text, match.end()):
        depth += -1 if loop.group(1) == "done" else 1
        if depth == 0:
            fed = _FED.match(text, loop.end())
            if fed is None:
                break
            if fed.group("command") is not None:
                return _printed(fed.group("command"), cwd, reads)
            value = (fed.group("string") or fed.group("file") or "").strip("\"'")
            if fed.group("string") is not None:
                return _list_words(value, cwd, reads)
            return _file_lines(value, cwd, reads, several=several)
    return [_UNKNOWN]  # (its standard input: anything)


def _file_lines(path: str, cwd: str | None, reads: list[str], *, several: bool = True) -> list[str]:
    """A list file's words: the file itself (what it lists is what runs) and its lines.

    Each line from ``cwd``, and with ``several`` each word of it too (``read a b``).
    """
    if not path or any(c in path for c in "$`"):
        return [_UNKNOWN]
    out = [path if "/" in path else f"./{path}"]
    if cwd is None:
        return out
    full = os.path.join(cwd, path)
    reads.append(full)
    data = read_regular_file(full, MAX_BYTES)
    if data is None:
        return out
    text = shell_text(data) or ""
    lines = [line.strip(" \t") for line in text.split("\n")]  # (as `read` splits them)
    lines = [line for line in lines if line]
    if len(lines) > _MAX_LISTED:
        return [_UNKNOWN]
    for line in lines:
        for word in [line, *(re.split(r"[ \t]+", line) if several else ())]:
            if not any(c in word for c in "$`'\"\\;&|<>(){}"):
                out.append(word if "/" in word else f"./{word}")
    return list(dict.fromkeys(out))


def _printed(command: str, cwd: str | None, reads: list[str]) -> list[str]:
    """What shell ``command`` may print, line by line: the words a loop over it takes.

    Its first command prints: ``ls`` (a directory's entries by name, each from
    ``cwd``, and the pattern of them, ``d/*``; a file or pattern as given),
    ``find`` (what it finds, as its ``-exec`` would get them), ``cat`` or ``<`` of
    a list file (the file and its lines), ``echo`` (its words); then only the
    filters that leave lines out (``grep``, ``sort``, ``head``...). Anything
    else: ``./**``.
    """
    commands = _commands(command)
    redirected = _INPUT.findall(command)
    if not commands and len(redirected) == 1:  # (`$(< list)`)
        return _file_lines(redirected[0], cwd, reads)
    if not commands or any(os.path.basename(w[0]) not in _FILTERS for w in commands[1:]):
        return [_UNKNOWN]
    words = commands[0]
    name = os.path.basename(words[0])
    operands = [w for w in words[1:] if not w.startswith("-")]
    if name == "ls":
        return _ls_printed(words, cwd, reads)
    if name == "find":
        if any(w in _FIND_RUNS or w in _FIND_OTHER_OUTPUT for w in words):
            return [_UNKNOWN]  # (what it runs, or prints its own way, may print anything)
        return [path for _, path in _find_found(words)]
    if name == "cat" and operands:
        return [w for path in operands[:_MAX_DIRS] for w in _file_lines(path, cwd, reads)]
    if name == "cat" and len(redirected) == 1:
        return _file_lines(redirected[0], cwd, reads)
    if name == "echo":
        return _list_words(" ".join(shlex.quote(w) for w in operands), cwd, reads)
    return [_UNKNOWN]


def _ls_printed(words: list[str], cwd: str | None, reads: list[str]) -> list[str]:
    """What ``ls`` prints: a directory's entries by name (and ``DIR/*``), else the path given."""
    flags = "".join(w[1:] for w in words[1:] if w.startswith("-") and not w.startswith("--"))
    operands = [w for w in words[1:] if not w.startswith("-")] or ["."]
    out: list[str] = []
    for operand in operands[:_MAX_DIRS]:
        if "d" in flags:
            out.append(operand)
            continue
        pattern = glob.has_magic(operand)
        full = os.path.join(cwd, operand) if cwd is not None else None
        if pattern or full is None or not os.path.isdir(full):
            # (a file, or none yet: as given; a pattern's directories are listed too)
            out.append(operand)
        matched = [operand] if not pattern else []
        if pattern and cwd is not None:
            directory, found = glob_matches(os.path.join(cwd, operand), _MAX_LISTED)
            reads.append(directory)
            matched = [os.path.relpath(path, cwd) for path in found if os.path.isdir(path)]
        for directory in matched[:_MAX_DIRS]:
            out.append(f"{directory.rstrip('/')}/*")  # (a name added there is printed)
            if cwd is None:
                continue
            listed = os.path.join(cwd, directory)
            reads.append(listed)
            try:
                names = sorted(os.listdir(listed))
            except OSError:
                continue
            if len(names) > _MAX_LISTED:
                return [_UNKNOWN]
            out += [f"./{entry}" for entry in names if "a" in flags or not entry.startswith(".")]
    return list(dict.fromkeys(out))


def programs_run(text: str) -> list[str]:
    """The words of shell ``text`` that name a program it runs.

    Each simple command, whatever keywords surround it (``if !``, ``then``,
    ``do``, ``time``), as the shell policy's parser reads it (and, for what it
    cannot parse, as a rough split): its first word and, through a wrapper's own
    grammar (``env CI=1``, ``nice -n 10``, ``timeout 60``, ``exec -a NAME``) or
    an interpreter's options (``sh -e``, ``python3 -X opt``), the program or
    script it runs in turn; ``make`` runs its makefile. Not the arguments, which
    name files the command reads or writes (``echo x > out``). After ``cd DIR``
    (``pushd DIR``, ``env -C DIR``, also inside ``sh -c '...'``) a relative
    program is also taken below ``DIR``.
    """
    out: list[str] = []
    dirs: list[str] = []
    for words in _commands(text):
        for invocation in _invocations(words):
            where = _changed_directory(invocation)
            if where is not None and where not in dirs and len(dirs) < _MAX_DIRS:
                dirs.append(where)
            if invocation[0] in _DIRECTORY_CHANGERS:
                continue
            program = invocation[0]
            out.append(program)
            if "/" in program and not program.startswith(("/", "~")):
                out += [os.path.join(d, program) for d in dirs]
    return out


_MAX_DIRS = 8
_DIRECTORY_CHANGERS = frozenset({"cd", "pushd"})


def _changed_directory(words: list[str]) -> str | None:
    """The directory ``words`` moves to (``cd DIR``, ``pushd DIR``, ``env -C DIR``), if any."""
    if words[0] in _DIRECTORY_CHANGERS:
        operands = [w for w in words[1:] if not w.startswith(("-", "+"))]
        where = operands[-1] if len(operands) == 1 else None
    elif os.path.basename(words[0]) == "env":
        where = None
        for index, word in enumerate(words[1:], 1):
            if word in ("-C", "--chdir") and index + 1 < len(words):
                where = words[index + 1]
            elif word.startswith("--chdir="):
                where = word.split("=", 1)[1]
            elif word.startswith("-C") and len(word) > 2:
                where = word[2:]
    else:
        return None
    return where if where and "$" not in where else None


_MAX_DEPTH = 16  # wrappers and interpreters within one another
# words before a command's program that are the shell's own (reserved words, `!`, `time -p`)
_KEYWORDS = frozenset({"if", "then", "else", "elif", "fi", "while", "until", "do", "done", "!",
                       "time", "{", "}", "case", "esac", "in", "function"})  # fmt: skip
_REDIRECTION = re.compile(r"[0-9]*(?:&>>?|[<>][<>&|]?)(.*)")
# interpreters' options that take the next word (`python3 -X opt x.py`, `node -r m x.js`)
_VALUE_OPTIONS = {
    "python": ("-X", "-W", "-Q"), "node": ("-r", "--require", "--import", "--loader"),
    "ruby": ("-I", "-r"), "perl": ("-I", "-M", "-m"),
    "sh": ("-o", "-O", "+o", "+O"),
}  # fmt: skip
_SHELL_RUNNERS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "source", "."})
_CODE_OPTIONS = ("-c", "-e", "-E", "--eval", "-p", "--print")  # code in the argument itself
_EXECUTORS = frozenset({"npx", "pnpx", "bunx"})  # run a package's program, or a path
_MAKES = frozenset({"make", "gmake"})
_MAKEFILES = ("GNUmakefile", "makefile", "Makefile")


def _family(name: str) -> str:
    if re.fullmatch(r"python[0-9.]*|pypy[0-9.]*", name):
        return "python"
    if name in _SHELL_RUNNERS:
        return "sh"
    return name if name in ("node", "nodejs", "ruby", "perl") else ""


def _invocations(words: list[str], depth: int = 0) -> list[list[str]]:
    """``words`` and what it runs in turn: through wrappers and interpreters, a makefile."""
    out = [words]
    name = os.path.basename(words[0])
    family = _family(name)
    inner: list[list[str]] = []
    if name in _MAKES:
        inner = [[f"./{m}"] for m in _MAKEFILES]
        for index, word in enumerate(words[1:-1], 1):
            if word in ("-f", "--file", "--makefile"):
                inner.append([words[index + 1]])
            elif word in ("-C", "--directory"):
                inner += [[os.path.join(words[index + 1], m)] for m in _MAKEFILES]
        inner += [[w.split("=", 1)[1]] for w in words if w.startswith(("--file=", "--makefile="))]
    elif family:
        values = _VALUE_OPTIONS.get("node" if family == "node" else family, ())
        index = 1
        while index < len(words) and words[index].startswith(("-", "+")):
            word = words[index]
            if word == "--":
                index += 1
                break
            if family == "sh" and word[:1] == "-" and "c" in word:
                # the shell's script is its next operand: its commands run in turn
                code = [w for w in words[index + 1 :] if not w.startswith(("-", "+"))]
                inner += _commands(code[0]) if code else []
                index = len(words)
            elif family == "sh" and word[:2] != "--" and "s" in word:
                index = len(words)  # (its commands from standard input; operands are arguments)
            elif family != "sh" and word in _CODE_OPTIONS:
                index = len(words)  # code in an argument: no script file
            elif family == "python" and word == "-m" and index + 1 < len(words):
                module = words[index + 1].replace(".", "/")
                inner += [[f"./{module}.py"], [f"./{module}/__main__.py"]]
                index = len(words)
            index += 2 if word in values else 1
        index = _past_redirections(words, index)
        if index < len(words):
            script = words[index]
            # a script named without a slash is opened where the command runs (`sh lint`)
            if "/" not in script and script not in _STDIN_SCRIPTS and "$" not in script:
                script = f"./{script}"
            inner.append([script, *words[index + 1 :]])
            if family in ("node", "nodejs") and script not in _STDIN_SCRIPTS and "$" not in script:
                # node runs `X.js`, `X.mjs`, `X.cjs`, `X.json` or `X.node` for a missing
                # `X`, and a directory `X` by its package.json or index (the entry above)
                inner.append([f"{script}.*"])
    elif name in _EXECUTORS:
        rest = [w for w in words[1:] if not w.startswith("-")]
        inner = [rest] if rest else []
    elif name in _TASK_FILES:
        inner = [[f"./{f}"] for f in _TASK_FILES[name]]
    elif name in _RUNS and len(words) > 2 and words[1] in _RUNS[name]:
        rest = [w for w in words[2:] if not w.startswith("-")]
        inner = [rest[:1] if name == "go" else rest] if rest else []
    elif name == "eval":
        inner = _commands(" ".join(words[1:]))  # its operands are a command line
    elif name in ("find", "gfind"):
        inner = _find_commands(words)
    elif name == "run-parts":
        # every file of its directory (what is there now or later)
        operands = [w for i, w in enumerate(words[1:], 1)
                    if not w.startswith("-") and words[i - 1] not in ("-u", "-a")]  # fmt: skip
        inner = [[f"{operands[-1].rstrip('/') or '/'}/*"]] if operands else []
    elif words[0] in _MAKE_INCLUDES:
        # (a makefile read in turn) what it includes is a makefile too
        inner = [[w if "/" in w else f"./{w}"] for w in words[1:] if "$" not in w]
    elif name == "git":
        # `git -c alias.z='!sh d/x.sh' z`, `git -c diff.external=d/x.sh diff`: a command
        # configured on the command line runs as the configuration's does
        for index, word in enumerate(words[1:-1], 1):
            setting = words[index + 1] if word == "-c" else ""
            key, _, value = setting.partition("=")
            if value.startswith("!") or _GIT_COMMAND_KEY.fullmatch(key.lower()):
                inner += _commands(value.removeprefix("!"))
            elif _GIT_FILE_KEY.fullmatch(key.lower()) and value:
                inner.append([value if "/" in value else f"./{value}"])  # (kept as a callee)
        # a configuration file or git directory it is pointed at (--git-dir=d/repo)
        inner += [[w.split("=", 1)[1]] for w in words[1:] if w.startswith("--git-dir=")]
    elif name == "env":
        # GNU env's grammar: options (-C DIR, -u NAME take a value; -S a command line),
        # assignments, then the command
        index = 1
        while index < len(words):
            word = words[index]
            if word == "--":
                index += 1
                break
            if word in ("-S", "--split-string") or word.startswith(("-S", "--split-string=")):
                if word in ("-S", "--split-string"):
                    line = words[index + 1] if index + 1 < len(words) else ""
                else:
                    line = word.split("=", 1)[1] if word.startswith("--") else word[2:]
                inner += _commands(line) if line else []
                index = len(words)
                break
            if word in ("-u", "--unset", "-C", "--chdir", "-P"):
                index += 2
            elif word.startswith("-") or _ASSIGNMENT.match(word):
                index += 1
            else:
                break
        if index < len(words):
            inner.append(words[index:])
    elif name in SIMPLE_WRAPPERS:
        try:
            use = describe(tuple(words))
        except (ValueError, IndexError):  # pragma: no cover - the models take any argv
            use = None
        found = [list(i.argv) for i in (use.inner if use else ()) if i.argv and i.argv[0]]
        inner = [[w for w in argv if w is not None] for argv in found]
        if not inner:
            # a spelling the model asks about: its first word that is no option or value
            rest = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
            inner = [rest[-1:]] if rest else []
    if depth >= _MAX_DEPTH:
        return out + [[word] for word in words[1:]]  # (too deep to read: every word counts)
    for argv in inner:
        if argv and argv[0]:
            out += _invocations(argv, depth + 1)
    return out


# What Python's import system finds in the first directory it searches (the script's
# own, or the working directory for `-m`, `-c` and a script on standard input) before
# the installed modules a program imports: a module, its compiled form, an extension
# module (`json.cpython-311-x86_64-linux-gnu.so`), a package's `__init__` in any form,
# and the top-level modules' caches.
_FIRST_FOUND = ("*.py", "*.pyc", "*.so", "*/__init__.*", "__pycache__")


# perl's and ruby's options that load a library before the program, and their
# directories searched first (-I), with the options that take a value
_LOADS = {"perl": ("-M", "-m"), "ruby": ("-r",)}
_LIBRARY_VALUES = {"perl": ("-e", "-E", "-x", "-i"), "ruby": ("-e", "-E", "-C", "-x", "-F")}


def library_modules(text: str) -> list[str]:
    """Paths of the libraries ``perl -Id -Mlint`` and ``ruby -I d -r lint`` in shell ``text`` load.

    Each library an option loads (perl's ``-M``/``-m``, ``Lint::Mod`` as
    ``Lint/Mod.pm``; ruby's ``-r``, ``lint`` as ``lint.rb``) in each directory
    its ``-I`` searches first, and a ruby library given by a path (``-r ./d/x``)
    as that path. Relative to where the command runs.
    """
    out: list[str] = []
    for words in _commands(text):
        for invocation in _invocations(words):
            family = _family(os.path.basename(invocation[0]))
            if family not in _LOADS:
                continue
            dirs: list[str] = []
            loads: list[str] = []
            index = 1
            while index < len(invocation) and invocation[index].startswith("-"):
                word = invocation[index]
                if word == "--":
                    break
                option, value = word[:2], word[2:]
                if option in ("-I", *_LOADS[family]) and not value and index + 1 < len(invocation):
                    index += 1
                    value = invocation[index]
                elif word in _LIBRARY_VALUES[family]:
                    index += 1
                if option == "-I" and value:
                    dirs.append(value)
                elif option in _LOADS[family] and value:
                    loads.append(value)
                index += 1
            for load in loads:
                if "$" in load:
                    continue
                if family == "perl":
                    name = re.split(r"[= ]", load.lstrip("-"), maxsplit=1)[0]
                    file = name.replace("::", "/").replace("'", "/") + ".pm"
                elif load.startswith(("./", "../", "/", "~")):
                    out += [load, f"{load}.rb"]
                    continue
                else:
                    file = load if load.endswith((".rb", ".so")) else f"{load}.rb"
                out += [os.path.join(d, file) for d in dirs if "$" not in d]
    return list(dict.fromkeys(out))


def python_imports(text: str) -> list[str]:
    """Paths of what the Python programs shell ``text`` runs import from the work tree.

    For each Python interpreter it runs (through wrappers and other
    interpreters, as :func:`programs_run` finds them, and ``-m`` given to a
    runner: ``uv run -m``, ``uv run python -m``): the names in each directory
    its imports search before the installed modules (:data:`_FIRST_FOUND`: a
    ``json.py`` there is imported instead of the installed one): the script's
    own directory, or the working directory for ``-m``, ``-c`` and a script on
    standard input, and each relative ``PYTHONPATH`` entry the text assigns;
    for ``-m PACKAGE.MODULE``, in each of them, the whole top-level package with
    the names that take its place (``PACKAGE.py``, an extension module, a
    compiled one in ``__pycache__``). After ``cd DIR`` the same is also taken
    below ``DIR``. Patterns and paths as :func:`programs_run` gives programs
    (relative to where the command runs).
    """
    # (assigned anywhere in the text: before the command, exported, through env)
    searched = [
        entry.rstrip("/") or "/"
        for name, value in assignments(text)
        if name == "PYTHONPATH"
        for entry in value.split(":")
        if entry and "$" not in entry
    ]
    out: list[str] = []
    dirs: list[str] = []
    for words in _commands(text):
        if words[0] == "cd" and len(words) == 2 and "$" not in words[1]:
            if words[1] not in dirs and len(dirs) < _MAX_DIRS:
                dirs.append(words[1])
            continue
        found: list[tuple[str, str | None]] = []  # (a directory searched first, a -m package)
        name = os.path.basename(words[0])
        if name in _RUNS and len(words) > 2 and words[1] in _RUNS[name]:
            # a runner's own `-m` (`uv run -m x`), or its python's (`uv run python -m x`)
            for index, word in enumerate(words[2:-1], 2):
                if word in ("-m", "--module"):
                    found.append((".", words[index + 1]))
        for invocation in _invocations(words):
            if _family(os.path.basename(invocation[0])) == "python":
                found.append(_python_searched(invocation))
        for first, module in found:
            package = module.split(".", 1)[0] if module else ""
            places = [first, *searched]
            entries = [os.path.join(place, n) for place in places for n in _FIRST_FOUND]
            if package and "$" not in package and "/" not in package:
                entries += [
                    os.path.join(place, n)
                    for place in (".", *searched)
                    for n in (package, f"{package}.*", f"__pycache__/{package}.*")
                ]
            out += entries
            out += [os.path.join(d, e) for d in dirs for e in entries if not e.startswith("/")]
    return list(dict.fromkeys(out))


def _python_searched(invocation: list[str]) -> tuple[str, str | None]:
    """Where a Python interpreter's imports search first, and the module ``-m`` names."""
    index = 1
    while index < len(invocation) and invocation[index].startswith("-"):
        word = invocation[index]
        if word == "-m" and index + 1 < len(invocation):
            return ".", invocation[index + 1]
        if word in _CODE_OPTIONS or word == "-":
            return ".", None
        index += 2 if word in _VALUE_OPTIONS["python"] else 1
    index = _past_redirections(invocation, index)
    if index < len(invocation) and invocation[index] not in _STDIN_SCRIPTS:
        script = invocation[index]
        if "$" not in script:
            return os.path.dirname(script) or ".", None
    return ".", None


def _past_redirections(words: list[str], index: int) -> int:
    """The index of the first word from ``index`` on that is no redirection or its target."""
    while index < len(words):
        redirect = _REDIRECTION.fullmatch(words[index])
        if redirect is None:
            break
        index += 1 if redirect.group(1) else 2
    return index


# a script an interpreter reads from its standard input; what makes code of data
_STDIN_SCRIPTS = frozenset({"-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"})
_MADE = ("$(", "`", "<(")
_INPUT = re.compile(r"(?<![<0-9])[0-9]*<[ \t]*([^ \t\n<>;&|()'\"`$]+)")


def _runs_data(words: list[str]) -> bool:
    """Whether ``words`` runs code that another command reads or prints.

    An interpreter with no script operand, or ``-``, or a process substitution
    (``cat x | sh``, ``sh -s < x``, ``python3 - < x``, ``bash <(cat x)``), and code
    made by a substitution (``sh -c "$(cat x)"``, ``eval "$(cat x)"``): the files
    such a line reads are code, whichever program reads them.
    """
    if words[0].startswith("#"):
        return False  # (a comment or a #! line, as the rough split of a text finds it)
    name = os.path.basename(words[0])
    if name == "eval":
        return any(made in word for word in words[1:] for made in _MADE)
    family = _family(name)
    if not family:
        return False
    values = _VALUE_OPTIONS.get(family, ())
    index = 1
    while index < len(words):
        word = words[index]
        if _REDIRECTION.fullmatch(word):
            index = _past_redirections(words, index)
            continue
        if word == "--":
            index += 1
            break
        if word in ("-", "+") or not word.startswith(("-", "+")):
            break
        short = word[:1] == "-" and word[1:2] != "-"
        if family == "sh" and short and "c" in word:
            code = [w for w in words[index + 1 :] if not w.startswith(("-", "+"))]
            return bool(code) and any(made in code[0] for made in _MADE)
        if family == "sh" and short and "s" in word:
            return True  # (its commands from standard input)
        if family != "sh" and word in _CODE_OPTIONS:
            return index + 1 < len(words) and any(made in words[index + 1] for made in _MADE)
        if family == "python" and word == "-m":
            return False
        index += 2 if word in values else 1
    index = _past_redirections(words, index)
    if index >= len(words):
        return True
    return words[index] in _STDIN_SCRIPTS or words[index].startswith("<(")


_MAKE_INCLUDES = frozenset({"include", "-include", "sinclude"})
# task runners and the files whose commands they run
_TASK_FILES = {
    "just": ("justfile", "Justfile", ".justfile"),
    "task": ("Taskfile.yml", "Taskfile.yaml", "taskfile.yml", "taskfile.yaml"),
    "tox": ("tox.ini",), "nox": ("noxfile.py",), "invoke": ("tasks.py",), "inv": ("tasks.py",),
    "rake": ("Rakefile", "rakefile", "Rakefile.rb"),
}  # fmt: skip
# runners whose subcommand runs the rest of the line (`uv run tox`, `go run ./cmd/lint`)
_RUNS = {
    "uv": ("run",), "poetry": ("run",), "pipenv": ("run",), "pdm": ("run",), "hatch": ("run",),
    "rye": ("run",), "bundle": ("exec",), "go": ("run",),
}  # fmt: skip
_FIND_RUNS = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
# configuration keys naming a file (or directory) git reads for what it runs or hides
_GIT_FILE_KEY = re.compile(
    r"include(if\..*)?\.path|core\.(hookspath|excludesfile|attributesfile|worktree)"
)
# the environment's ways to point git at another configuration or repository
_GIT_ELSEWHERE = re.compile(
    r"\b(?:GIT_CONFIG_GLOBAL|GIT_CONFIG_SYSTEM|GIT_CONFIG|GIT_DIR|GIT_COMMON_DIR|GIT_INDEX_FILE)"
    r"""=["']?([^ \t\n"';&|()]+)"""
)
# configuration keys whose value git runs as a command (see ._gitnames: given with -c)
_GIT_COMMAND_KEY = re.compile(
    r"(.*\.)?[a-z0-9]*(cmd|command|textconv|clean|smudge|process|driver|editor|pager|program"
    r"|helper|external|gitproxy|fsmonitor|askpass|path|update)|alias\..*|pager\..*"
)


# find's primaries that take no value (every other one takes one; -fprintf two)
_FIND_BARE = frozenset({
    "-print", "-print0", "-ls", "-prune", "-quit", "-delete", "-true", "-false", "-empty",
    "-executable", "-readable", "-writable", "-nouser", "-nogroup", "-depth", "-follow",
    "-mount", "-xdev", "-noleaf", "-daystart", "-ignore_readdir_race",
    "-noignore_readdir_race", "-warn", "-nowarn", "-a", "-and", "-o", "-or", "-not", "!",
    "(", ")", ",",
})  # fmt: skip
_FIND_PRINTS = frozenset({"-print", "-print0"})
_FIND_OTHER_OUTPUT = frozenset({"-printf", "-fprintf", "-fprint", "-fprint0", "-ls", "-fls"})
# a parsed find expression: ("and" | "or" | "list" | "not", children), ("name", pattern),
# ("action", index of its first word), ("test",)
_FindNode = tuple[Any, ...]


def _find_parsed(words: list[str], at: int) -> _FindNode | None:
    """``find``'s expression from ``words[at:]`` as a tree (None: not read here).

    Precedence as find's: ``!`` binds closest, then juxtaposition and ``-a``, then
    ``-o``, then ``,``; parentheses group.
    """
    tokens: list[tuple[str, int]] = []  # (word, index); values and commands skipped
    index = at
    while index < len(words):
        word = words[index]
        tokens.append((word, index))
        if word in _FIND_RUNS:
            index += 1
            while index < len(words) and words[index] not in (";", "\\;", "+"):
                index += 1
        elif word in ("-name", "-iname"):
            tokens[-1] = (f"{word} {words[index + 1]}" if index + 1 < len(words) else word, index)
            index += 1
        elif word == "-fprintf":
            index += 2
        elif word.startswith("-") and word not in _FIND_BARE:
            index += 1
        index += 1
    position = 0

    def parse(level: int, depth: int) -> _FindNode | None:
        nonlocal position
        if depth > 32:
            return None
        if level == 3:  # a primary, `!` or parentheses
            if position >= len(tokens):
                return None
            word, index = tokens[position]
            position += 1
            if word in ("!", "-not"):
                inner = parse(3, depth + 1)
                return None if inner is None else ("not", [inner])
            if word == "(":
                inner = parse(0, depth + 1)
                if inner is None or position >= len(tokens) or tokens[position][0] != ")":
                    return None
                position += 1
                return inner
            if word in (")", ",", "-o", "-or", "-a", "-and"):
                return None
            if word.startswith(("-name ", "-iname ")):
                return ("name", word.split(" ", 1)[1])
            if word in _FIND_RUNS or word in _FIND_PRINTS or word in _FIND_OTHER_OUTPUT:
                return ("action", index, word)
            return ("test",)
        operators = {0: (",",), 1: ("-o", "-or"), 2: ("-a", "-and")}[level]
        kind = {0: "list", 1: "or", 2: "and"}[level]
        first = parse(level + 1, depth + 1)
        if first is None:
            return None
        children = [first]
        while position < len(tokens):
            word = tokens[position][0]
            if word in operators:
                position += 1
            elif level != 2 or word in (")", ",", "-o", "-or"):
                break  # (juxtaposition is -a)
            child = parse(level + 1, depth + 1)
            if child is None:
                return None
            children.append(child)
        return first if len(children) == 1 else (kind, children)

    tree = parse(0, 0)
    return tree if tree is not None and position == len(tokens) else None


def _names_when_true(node: _FindNode) -> list[str] | None:
    """Names one of which a file has when ``node`` is true for it (None: any name)."""
    kind = node[0]
    if kind == "name":
        return [node[1]]
    if kind == "and":
        held = [n for n in map(_names_when_true, node[1]) if n is not None]
        return min(held, key=len) if held else None
    if kind == "or":
        alternatives = [_names_when_true(child) for child in node[1]]
        if any(n is None for n in alternatives):
            return None
        return [name for n in alternatives if n is not None for name in n]
    if kind == "list":
        return _names_when_true(node[1][-1])
    return None  # (a negation, another test, an action)


def _find_found(words: list[str]) -> list[tuple[int, str]]:
    """What ``find`` (``words``) finds, as patterns: where each action stands, and each.

    For each action (``-exec``, ``-ok``, ``-print``... and, when it has none, the
    expression's end: what it prints) the index of its first word and the paths
    it may get, now or later: under each starting point, at any depth, one of the
    names the tests it is reached through require (``tools/**/*.sh``: a ``-name``
    or ``-iname`` that must have held, or alternatives each of which holds one),
    else anything (``tools/**``). An expression not read here: anything, for each
    action found.
    """
    index = 1
    while index < len(words) and re.fullmatch(r"-[HLP]|-D|-O[0-9]*", words[index]):
        index += 2 if words[index] == "-D" else 1
    starts: list[str] = []
    while index < len(words) and not words[index].startswith(("-", "(", "!", ")", ",")):
        starts.append(words[index])
        index += 1
    bases = [f"{start.rstrip('/') or '/'}/**" for start in (starts or ["."])[:_MAX_DIRS]]
    reached: list[tuple[int, list[str] | None]] = []

    def visit(node: _FindNode, required: list[str] | None) -> None:
        if node[0] == "action":
            reached.append((node[1], required))
        elif node[0] == "and":
            for child in node[1]:
                visit(child, required)
                names = _names_when_true(child)  # (it held for the children after it)
                if names is not None and (required is None or len(names) < len(required)):
                    required = names
        elif node[0] in ("or", "list", "not"):
            for child in node[1]:
                visit(child, required)

    tree = _find_parsed(words, index) if index < len(words) else ("test",)
    if tree is None:
        actions = [i for i in range(index, len(words)) if words[i] in _FIND_RUNS]
        reached = [(i, None) for i in actions or [len(words)]]
    else:
        visit(tree, None)
        if not reached:
            reached = [(len(words), _names_when_true(tree))]  # (it prints what is true)
    out: list[tuple[int, str]] = []
    for at, names in reached:
        for base in bases:
            if names is None:
                out.append((at, base))
            else:
                out += [(at, f"{base}/{name}") for name in names if "/" not in name]
    return out


def _find_commands(words: list[str]) -> list[list[str]]:
    """The commands ``find``'s ``-exec`` and ``-ok`` actions run (up to ``;`` or ``+``).

    Their ``{}`` is each file found, now or later (:func:`_find_found`).
    """
    found: dict[int, list[str]] = {}
    for at, path in _find_found(words):
        found.setdefault(at, []).append(path)
    out: list[list[str]] = []
    for at, paths in found.items():
        if at >= len(words):
            continue
        end = at + 1
        while end < len(words) and words[end] not in (";", "\\;", "+"):
            end += 1
        if end > at + 1:
            argv = words[at + 1 : end]
            if any("{}" in word for word in argv):
                out += [[word.replace("{}", path) for word in argv] for path in paths]
            else:
                out.append(argv)
    return out


# what a script's name ends with: given to a runner as an argument (`uv run x.py`,
# `npx tsx x.ts`, `php x.php`, `java -jar x.jar`), it is what runs
_SCRIPT_ENDINGS = (
    ".py", ".pyw", ".sh", ".bash", ".zsh", ".ksh", ".fish", ".js", ".mjs", ".cjs", ".ts",
    ".mts", ".cts", ".tsx", ".jsx", ".rb", ".pl", ".pm", ".php", ".r", ".R", ".jar", ".lua",
    ".tcl", ".ps1", ".mk", ".make", ".awk", ".sed", ".groovy", ".kts", ".exs", ".swift",
)  # fmt: skip


# programs whose arguments are files they read, write or name, never run
_INERT = frozenset({
    "git", "echo", "printf", "cat", "cp", "mv", "rm", "mkdir", "rmdir", "touch", "ls", "ln",
    "chmod", "chown", "grep", "egrep", "fgrep", "rg", "head", "tail", "wc", "diff", "cmp",
    "stat", "file", "tee", "test", "[", "[[", "basename", "dirname", "realpath", "readlink",
    "sort", "uniq", "cut", "tr", "true", "false", "exit", "return", "cd", "pushd", "popd",
    "export", "unset", "local", "readonly", "shift", "set", "sha256sum", "md5sum",
})  # fmt: skip


def script_arguments(text: str) -> list[str]:
    """The arguments of shell ``text``'s commands that may name a script they run.

    Past each command's program (and each command it runs in turn), every word
    that is no option, variable, pattern or address and either holds a ``/`` or
    ends like a script (:data:`_SCRIPT_ENDINGS`): a runner this module does not
    know by name (``uv run``, ``poetry run python``, ``npx tsx``, ``deno run``,
    ``php``, ``Rscript``, ``java -jar``) runs its script from an argument. Not the
    target of a redirection (what the command writes), nor an argument of a program
    that never runs one (:data:`_INERT`: ``git add``, ``cp``, ``grep``).

    When a command of ``text`` runs code made of data (:func:`_runs_data`:
    ``cat x | sh``, ``sh -c "$(cat x)"``), every word of every command and every
    file read by a redirection counts, whatever program reads it and whether or
    not it holds a ``/``: the caller keeps the files that exist.
    """
    out: list[str] = []
    invocations = [i for words in _commands(text) for i in _invocations(words)]
    # (code made of data: every file the text names may be what runs, whoever reads it)
    data = any(_runs_data(invocation) for invocation in invocations)
    if data:  # (and what a redirection alone reads: `"$(< x)"`)
        out += _INPUT.findall(text)
    for invocation in invocations:
        if os.path.basename(invocation[0]) in _INERT and not data:
            continue
        skip_next = take_next = False
        for word in invocation if data else invocation[1:]:
            if skip_next:
                skip_next = False
                continue
            if take_next:
                take_next = False
            elif (redirect := _REDIRECTION.fullmatch(word)) is not None:
                target = redirect.group(1)
                # (what a line made of data reads may be code; what a command writes is not)
                read = data and "<" in word[: len(word) - len(target)]
                if not target:
                    take_next, skip_next = read, not read
                    continue
                if not read:
                    continue
                word = target
            # (a pattern below a directory named counts where code is made of data:
            # `ls hooks.d/*.sh | xargs -n1 sh`)
            pattern = (
                data
                and glob.has_magic(word)
                and "/" in word.strip("/")
                and not glob.has_magic(os.path.normpath(word).split("/", 1)[0])
            )
            if (
                word.startswith(("-", "+", "#"))
                or any(c in word for c in "$=")
                or (glob.has_magic(word) and not pattern)
                or "://" in word
                or word.endswith("/")
            ):
                continue
            if data or "/" in word or word.endswith(_SCRIPT_ENDINGS):
                out.append(word)
    return list(dict.fromkeys(out))


def _commands(text: str) -> list[list[str]]:
    """Each simple command of shell ``text`` as its words (quotes removed), in order.

    What the shell policy's parser finds (every command inside ``if``, loops,
    functions, substitutions), then a rough split of the text for what it cannot
    parse (``case``, ``time -p``, a template's ``{files}``): reserved words,
    leading redirections and assignments dropped.
    """
    out: list[list[str]] = []
    # (the parser's cost grows with each substitution of a word: past a few hundred,
    # a hostile makefile's thousands held the event loop for seconds; the rough split
    # alone then)
    parsed = len(text) <= MAX_COMMAND_CHARS and text.count("$(") + text.count("`") <= 256
    script = parse_script(text) if parsed else None
    for command in script.commands if script is not None else ():
        words = [_unquoted(w.raw) for w in command.words]
        if words and words[0]:
            out.append(words)
    seen = {tuple(words) for words in out}  # (a membership test per segment, not a scan)
    for segment in _SEGMENTS.split(text):
        words = [w for w in _WORDS.split(segment) if w]
        while words:
            redirect = _REDIRECTION.fullmatch(words[0])
            if redirect is not None:
                del words[: 1 if redirect.group(1) else 2]
            elif words[0] in _KEYWORDS or _ASSIGNMENT.match(words[0]) or words[0] == "-p":
                words.pop(0)
            else:
                break
        if words and tuple(words) not in seen:
            seen.add(tuple(words))
            out.append(words)
    for words in out:
        # a make recipe's line: make strips its @, - and + before the shell runs it
        if words[0][:1] in ("@", "+", "-") and words[0] not in _MAKE_INCLUDES:
            stripped = words[0].lstrip("@+-")
            if stripped:
                words[0] = stripped
    return out


_QUOTING = re.compile(r"[\"'\\]")
_DECLARES = frozenset({"export", "declare", "typeset", "readonly", "local"})


def _assigned(text: str) -> list[tuple[str, str]]:
    """Every ``NAME=value`` shell ``text`` gives, its quotes removed.

    A command's own (``BASH_ENV=d/env.sh bash x.sh``), ``export``'s and its
    kin's, a line's plain one.
    """
    out = list(assignments(text))
    parsed = len(text) <= MAX_COMMAND_CHARS and text.count("$(") + text.count("`") <= 256
    for command in parse_script(text).commands if parsed else ():
        out += [
            (name, _unquoted(value))
            for name, _, value in (w.raw.partition("=") for w in command.assignments)
        ]
    for words in _commands(text):
        if words[0] in _DECLARES:
            out += [
                (name, value)
                for name, _, value in (w.partition("=") for w in words[1:])
                if _ASSIGNMENT.match(f"{name}=")
            ]
    return list(dict.fromkeys(out))


def _unquoted(raw: str) -> str:
    """A word with its quotes removed as the shell would (the word as written if it cannot)."""
    if not _QUOTING.search(raw):
        return raw  # (nothing to remove: the parser's words hold no unquoted blank)
    lexer = shlex.shlex(raw, posix=True)
    lexer.whitespace, lexer.whitespace_split = " \t\n", True  # (sh's blanks, not `\r`)
    lexer.commenters = ""
    try:
        split = list(lexer)
    except ValueError:  # pragma: no cover - the parser's words have balanced quotes
        return raw
    return split[0] if len(split) == 1 else raw


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


_ITEM_KEY = re.compile(r"(entry|args)\s*:\s*(.*)")
_FLOW_KEY = re.compile(r"[{,]\s*(entry|args)\s*:\s*(\[[^\]]*\]|[^,}]*)")


def _flow_list(value: str) -> list[str]:
    """The items of a YAML flow list (``[a, 'b']``), or the value itself."""
    return [_unquote(v) for v in value.strip().strip("[]").split(",") if v.strip()]


def _precommit_commands(text: str) -> list[str]:
    """pre-commit's commands: each hook's ``entry`` followed by its ``args``.

    A hook is one item of a list (block style, or a flow mapping on one line);
    its ``args`` are a flow list or a block list below the key.
    """
    out: list[str] = []
    item: dict[str, list[str]] = {}
    args_indent: int | None = None
    lines = text.splitlines()

    def flush() -> None:
        if item.get("entry"):
            out.append(" ".join(item["entry"] + item.get("args", [])))
        item.clear()

    for number, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        if args_indent is not None and indent >= args_indent and stripped.startswith("- "):
            item.setdefault("args", []).append(_unquote(stripped[2:]))
            continue
        args_indent = None
        content = stripped
        if stripped.startswith("- "):
            flush()
            content = stripped[2:].strip()
            indent += 2
        if content.startswith("{"):
            for key, value in _FLOW_KEY.findall(content):
                item[key] = _flow_list(value) if key == "args" else [_unquote(value)]
            continue
        match = _ITEM_KEY.fullmatch(content)
        if match is None:
            continue
        key, value = match.group(1), match.group(2).strip()
        if key == "args" and not value:
            args_indent = indent
        elif key == "args":
            item["args"] = _flow_list(value)
        elif value[:1] in ("|", ">"):
            block = []
            for more in lines[number + 1 :]:
                if more.strip() and len(more) - len(more.lstrip()) <= indent:
                    break
                block.append(more.strip())
            item["entry"] = [" ".join(block)]
        else:
            item["entry"] = [_unquote(value)]
    flush()
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


# programs and modules tools' protected configurations name, run by every command of
# theirs: .npmrc's node-options (--require X) and script-shell, bunfig.toml's preload,
# cargo's wrappers, linker and runner, a JVM agent of Gradle's or Maven's options
_NPM_KEY = re.compile(r"^\s*(node-options|script-shell)\s*=\s*(.*)$", re.M)
_NODE_MODULE_OPTIONS = ("-r", "--require", "--import", "--loader", "--experimental-loader")
_BUN_KEY = re.compile(r"^\s*preload\s*=\s*(.*)$", re.M)
_CARGO_KEY = re.compile(
    r"^\s*(?:rustc-wrapper|rustc-workspace-wrapper|rustc|rustdoc|linker|runner)\s*=\s*(.*)$",
    re.M,
)
_TOML_STRING = re.compile(r"\"((?:[^\"\\\n]|\\.)*)\"|'([^'\n]*)'")
_JVM_AGENT = re.compile(r"-(?:javaagent|agentpath):([^=\s\"']+)")
_TOOL_CONFIGURATIONS = (
    ".npmrc", "bunfig.toml", ".bunfig.toml", ".cargo/config.toml", ".cargo/config",
    "gradle.properties", ".mvn/jvm.config",
)  # fmt: skip


def _tool_programs(top: str, reads: list[str]) -> list[str]:
    """The files the tools' configurations at ``top`` run or load on every command."""
    out: list[str] = []
    for name in _TOOL_CONFIGURATIONS:
        path = os.path.join(top, name)
        reads.append(path)
        content = read_regular_file(path, MAX_BYTES)
        if content is None:
            continue
        text = content.decode("utf-8", "surrogateescape")
        if name == ".npmrc":
            for key, value in _NPM_KEY.findall(text):
                words = value.strip().strip("\"'").split()
                if key == "script-shell":
                    out += words[:1]
                    continue
                for index, word in enumerate(words):
                    if word in _NODE_MODULE_OPTIONS and index + 1 < len(words):
                        out.append(words[index + 1])
                    elif word.startswith(tuple(f"{o}=" for o in _NODE_MODULE_OPTIONS)):
                        out.append(word.split("=", 1)[1])
        elif "bunfig" in name or "cargo" in name:
            for value in (_BUN_KEY if "bunfig" in name else _CARGO_KEY).findall(text):
                strings = [a or b for a, b in _TOML_STRING.findall(value)]
                out += [w.split()[0] for w in strings if w.split()]
        else:
            out += _JVM_AGENT.findall(text)
    # (a module or program found by name, not by a path, is not the tree's)
    return [w for w in out if "/" in w and "$" not in w]


# the runners that run pyproject.toml's named scripts (`hatch run test`, `pdm run check`,
# `pdm check`, `rye run fmt`)
_PYPROJECT_RUNNERS = frozenset({"hatch", "pdm", "rye"})


def _pyproject_scripts(top: str) -> dict[str, list[str]]:
    """pyproject.toml's scripts for hatch (every environment's), pdm and rye: their commands.

    A script that runs others (pdm's ``composite``, rye's ``chain``) gives each as
    ``pdm run NAME``; one that calls a function (``call = "pkg.mod:fn"``) gives
    ``python -m pkg.mod``.
    """
    content = read_regular_file(os.path.join(top, "pyproject.toml"), MAX_BYTES)
    if content is None:
        return {}
    try:
        data = tomllib.loads(content.decode("utf-8", "surrogateescape"))
    except (tomllib.TOMLDecodeError, UnicodeError):
        return {}
    tool = data.get("tool")
    if not isinstance(tool, dict):
        return {}
    tables: list[object] = []
    hatch = tool.get("hatch")
    envs = hatch.get("envs") if isinstance(hatch, dict) else None
    if isinstance(envs, dict):
        tables += [env.get("scripts") for env in envs.values() if isinstance(env, dict)]
    for name in ("pdm", "rye"):
        section = tool.get(name)
        tables.append(section.get("scripts") if isinstance(section, dict) else None)
    out: dict[str, list[str]] = {}
    for table in tables:
        if not isinstance(table, dict):
            continue
        for key, value in table.items():
            out.setdefault(str(key), []).extend(_script_commands(value))
    return out


def _script_commands(value: object) -> list[str]:
    """The commands one named script of hatch, pdm or rye runs."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        if all(isinstance(v, str) for v in value) and value and not any(" " in v for v in value):
            return [shlex.join(value)]  # (an argv: pdm's and rye's cmd = [...])
        return [c for v in value for c in _script_commands(v)]
    if not isinstance(value, dict):
        return []
    out: list[str] = []
    for key in ("cmd", "shell"):
        out += _script_commands(value.get(key))
    for key in ("composite", "chain"):
        steps = value.get(key)
        if isinstance(steps, list):
            out += [f"pdm run {s}" for s in steps if isinstance(s, str)]
    call = value.get("call")
    if isinstance(call, str):
        out.append(f"python -m {call.split(':', 1)[0].strip()}")
    return out


# lefthook's configurations merged into its own (`extends:`, globs too) and the
# directory its `scripts:` run from (`source_dir:`, `source_dir_local:`)
_LEFTHOOK_KEY = re.compile(r"^(extends|source_dir|source_dir_local)\s*:\s*(.*)$")
_MAX_EXTENDS = 16


def _lefthook_paths(text: str) -> tuple[list[str], list[str]]:
    """A lefthook configuration's ``extends`` patterns and its source directories."""
    extends: list[str] = []
    sources: list[str] = []
    lines = text.splitlines()
    for number, line in enumerate(lines):
        match = _LEFTHOOK_KEY.match(line)
        if match is None:
            continue
        key, value = match.group(1), match.group(2).split(" #", 1)[0].strip()
        if key != "extends":
            if value:
                sources.append(_unquote(value))
        elif value:
            extends += _flow_list(value)
        else:
            for more in lines[number + 1 :]:
                item = more.strip()
                if item and not item.startswith("- ") and not item.startswith("#"):
                    break
                if item.startswith("- "):
                    extends.append(_unquote(item[2:]))
    return extends, sources


# a lint-staged JavaScript configuration's own directory: in a template literal
# (`${__dirname}`, `${process.cwd()}`), and joined with literals (path.join(__dirname, ...))
_JS_DIRECTORY = re.compile(r"\$\{\s*(?:__dirname|process\.cwd\(\s*\)|import\.meta\.dirname)\s*\}")
_JS_JOINED = re.compile(
    r"\b(?:join|resolve)\(\s*(?:__dirname|process\.cwd\(\s*\)|import\.meta\.dirname)"
    r"""((?:\s*,\s*(?:'[^'\n]*'|"[^"\n]*"))*)\s*\)"""
)


def _js_paths(text: str, top: str) -> list[str]:
    """The paths a JavaScript configuration at ``top`` builds from its own directory."""
    out: list[str] = []
    for match in _JS_JOINED.finditer(text):
        parts = [a or b for a, b in re.findall(r"'([^'\n]*)'|\"([^\"\n]*)\"", match.group(1))]
        if parts:
            out.append(os.path.join(top, *parts))
    return out


def glob_matches(path: str, limit: int) -> tuple[str, list[str]]:
    """Where a pattern (``path`` holding ``*``, ``?`` or ``[``) is looked up, and its matches.

    The directory: the path's components before the first pattern (a file added
    there changes what it matches). The matches: at most ``limit``, sorted, as a
    non-recursive glob finds them (``**`` as ``*``).
    """
    parts = path.split("/")
    fixed = next(i for i, part in enumerate(parts) if glob.has_magic(part))
    directory = "/".join(parts[:fixed]) or "/"
    pattern = os.path.join(glob.escape(directory), *parts[fixed:])
    return directory, sorted(itertools.islice(glob.iglob(pattern), limit))


def _with_matches(named: list[str], inside: str, reads: list[str]) -> list[str]:
    """``named`` and, after each pattern among them (``mk/*.mk``), the files it matches now.

    A pattern stays in the answer as written: protected, it covers every path it
    matches, the files a command makes later included. The files it matches now are
    read in turn (at most :data:`MAX_READ` of each), and the directory they are found
    in counts among ``reads`` (a file added there changes the answer).
    """
    out: list[str] = []
    for path in named:
        out.append(path)
        if glob.has_magic(path) and path.startswith(inside):
            directory, matches = glob_matches(path, MAX_READ)
            reads.append(directory)
            out += matches
    return out


def hook_callees(
    top: str,
    directories: list[str],
    within: str,
    reads: list[str],
    commands: Sequence[str] = (),
) -> list[str]:
    """The paths inside ``within`` that the host's tooling runs from the work tree ``top``.

    ``directories``: the hooks directories whose scripts run (see the module's
    docstring); ``commands``: more command lines run at the top (git's configured
    filters, drivers, aliases...), read as a hook's lines are. Every file read, or
    looked for, is appended to ``reads`` (what the answer depends on). Paths
    relative to ``within``.
    """
    inside = within.rstrip("/") + "/"
    real_within = os.path.realpath(within)
    out: list[str] = []
    # command texts still to read; whether node's tooling runs them (husky's hooks,
    # package.json's scripts, lint-staged: node_modules/.bin is on their PATH)
    # command texts still to read: whether node's tooling runs them, the file they are in
    pending: list[tuple[str, bool, str]] = []
    seen: set[str] = set()

    def protect(path: str) -> None:
        # as spelled, and where its links lead (`scripts -> tools`, `bin/lint -> ../x.py`)
        real = os.path.realpath(path)
        for candidate, base in ((path, within), (real, real_within)):
            if candidate.startswith(base.rstrip("/") + "/"):
                relative = os.path.relpath(candidate, base)
                if relative not in out:
                    out.append(relative)

    def read(path: str) -> str | None:
        if path in seen:
            return None
        seen.add(path)
        reads.append(path)
        content = read_regular_file(path, MAX_BYTES)
        # (a native program: nothing in it is read)
        return None if content is None else shell_text(content)

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
                pending.append((text, husky, os.path.join(directory, name)))
    git_config = os.path.join(top, ".git", "config")
    pending += [(command, False, git_config) for command in commands]
    managers = [os.path.join(top, name) for name in _MANAGERS]
    extended = 0
    while managers:
        manager = managers.pop(0)
        text = read(manager)
        if text is None:
            continue
        pending += [(command, False, manager) for command in _yaml_commands(text)]
        if manager.endswith(".pre-commit-config.yaml"):
            pending += [(command, False, manager) for command in _precommit_commands(text)]
            continue
        # lefthook: the configurations it merges in (their commands run too), and the
        # directory its scripts run from
        extends, sources = _lefthook_paths(text)
        for directory in sources:
            if "$" not in directory:
                protect(os.path.normpath(os.path.join(top, directory)))
        for pattern in extends:
            matched = glob.glob(os.path.join(top, pattern)) if "$" not in pattern else []
            for path in [os.path.join(top, pattern), *sorted(matched)]:
                path = os.path.normpath(path)
                if extended < _MAX_EXTENDS and not glob.has_magic(path):
                    extended += 1
                    protect(path)
                    managers.append(path)
    for name in _ALL_COMMANDS:
        text = read(os.path.join(top, name))
        if text is not None:
            pending += [(command, True, os.path.join(top, name)) for command in _all_commands(text)]
    for name in _JS_COMMANDS:
        text = read(os.path.join(top, name))
        if text is not None:
            # (its own directory is the top: `${__dirname}/x.js`, path.join(__dirname, ...))
            text = _JS_DIRECTORY.sub(top.replace("\\", "\\\\"), text)
            strings = [next(g for g in m if g) for m in _JS_STRING.findall(text) if any(m)]
            strings += [shlex.quote(path) for path in _js_paths(text, top)]
            # a literal naming a file of the tree (`"node " + "./scripts/c.js"`)
            files = [os.path.normpath(os.path.join(top, string)) for string in strings]
            strings += [shlex.quote(p) for p in files if p.startswith(inside) and os.path.isfile(p)]
            pending += [(command, True, os.path.join(top, name)) for command in strings]
    reads.append(os.path.join(top, "package.json"))
    scripts, configured = _package(top)
    package = os.path.join(top, "package.json")
    pending += [(command, True, package) for command in configured]
    programs, looked = _yarn_programs(top)
    reads += looked
    for program in programs:
        if program and "$" not in program:
            protect(os.path.normpath(os.path.join(top, os.path.expanduser(program))))
    pending += [
        (shlex.quote(os.path.normpath(os.path.join(top, os.path.expanduser(program)))), False, top)
        for program in _tool_programs(top, reads)
    ]
    pyproject = os.path.join(top, "pyproject.toml")
    named_scripts: dict[str, list[str]] | None = None
    taken: set[str] = set()
    assigned_commands: set[tuple[str, str]] = set()
    while pending:
        text, node, origin = pending.pop()
        text = _TOP.sub(lambda _: top, text)
        text = _TOX_TOP.sub(lambda _: top, text)
        text = own_directory(text, os.path.dirname(origin))
        # (hooks run at the top; a makefile's recipes where make was pointed, its own directory)
        makefile = os.path.basename(origin) in _MAKEFILES or origin.endswith((".mk", ".make"))
        cwd = os.path.dirname(origin) if makefile else top
        text = working_directory(text, cwd)
        if makefile:
            expanded = _make_expanded(text)
            for pattern in _make_unknown(expanded):
                # what its recipe runs is not known: anything below the makefile's
                # directory, or the path after a reference in any directory of the tree
                protect(os.path.join(cwd if pattern == "**" else within, pattern))
            # (a recipe's `$$` is the shell's `$`: `for f in $$(ls d); do sh "$$f"; done`)
            text = expanded.replace("$$", "$")
        text = expand_assignments(_MAKE_VARIABLE.sub("make", text), {})
        bound = loop_bound(text, cwd, reads)
        text = f"{text}\n{bound}" if bound else text
        for words in _commands(text):
            runner = os.path.basename(words[0]) in _PACKAGE_RUNNERS
            if runner or (node and not words[0].startswith("#")):
                protect(os.path.join(top, "package.json"))
                protect(os.path.join(top, "node_modules"))
            if runner:
                for name in _script_names(words):
                    if name in scripts and name not in taken:
                        taken.add(name)
                        pending.append((scripts[name], True, package))
            # (a hatch script's command may name another script: `test = ["lint", "pytest"]`)
            chained = origin == pyproject and named_scripts and words[0] in named_scripts
            if os.path.basename(words[0]) in _PYPROJECT_RUNNERS or chained:
                protect(pyproject)
                if named_scripts is None:
                    reads.append(pyproject)
                    named_scripts = _pyproject_scripts(top)
                for word in words[1:] if not chained else words[:1]:
                    name = word.rsplit(":", 1)[-1]  # (hatch's `env:script`)
                    if name in named_scripts and f"pyproject:{name}" not in taken:
                        taken.add(f"pyproject:{name}")
                        pending += [(c, False, pyproject) for c in named_scripts[name]]
        # a relative program from the top (where hooks run) and from the directory
        # of the file that names it (a makefile make runs with -C)
        # (a makefile's recipes run where make was pointed, -C DIR: its own directory)
        here = os.path.dirname(origin)
        bases = (top, here) if os.path.basename(origin) in _MAKEFILES and here != top else (top,)
        run = programs_run(text)
        named = [
            os.path.normpath(os.path.join(base, os.path.expanduser(word)))
            for word in run
            # (not one found on PATH, an option, a #! line or comment, a variable)
            if "/" in word and not word.startswith(("-", "#")) and "$" not in word
            for base in bases
        ]
        # a program below a directory, its name made at run time (`sh "hooks.d/$f"` in a
        # loop over `$(ls hooks.d)`): anything in that directory (not the top's every file)
        named += [
            os.path.normpath(os.path.join(base, made, "*"))
            for word in run
            if "$" in word and not word.startswith(("$", "-", "#"))
            and (made := os.path.dirname(word.split("$", 1)[0])) not in ("", ".")
            and "`" not in made
            for base in bases
        ]  # fmt: skip
        # what its own assignments make a program load (BASH_ENV=d/env.sh bash x.sh,
        # export GIT_CONFIG_GLOBAL=...), and what a command they hold runs (EDITOR=...)
        for name, value in _assigned(text):
            loaded, command = variable_named(name, value)
            named += [
                os.path.normpath(os.path.join(base, os.path.expanduser(entry)))
                for entry in loaded
                if "$" not in entry
                for base in bases
            ]
            if command is not None and (command, origin) not in assigned_commands:
                assigned_commands.add((command, origin))
                pending.append((command, node, origin))
        # what perl's -M and ruby's -r load from their -I directories
        named += [
            os.path.normpath(os.path.join(b, w)) for w in library_modules(text) for b in bases
        ]
        # what the Python programs it runs import from the tree (never read as commands)
        for word in python_imports(text):
            for base in bases:
                protect(os.path.normpath(os.path.join(base, word)))
        # a configuration or git directory a line points git at (GIT_CONFIG_GLOBAL=d/cfg,
        # export GIT_DIR=d/repo): what it holds decides what the line's git runs
        named += [
            os.path.normpath(os.path.join(top, os.path.expanduser(value)))
            for value in _GIT_ELSEWHERE.findall(text) if "$" not in value
        ]  # fmt: skip
        for tail in _AFTER_EXPANSION.findall(text):
            path = os.path.normpath(os.path.join(top, tail))
            if path not in named and path.startswith(inside):
                reads.append(path)  # (one made later changes the answer)
                if os.path.isfile(path):
                    named.append(path)
        for word in script_arguments(text):
            path = os.path.normpath(os.path.join(top, os.path.expanduser(word)))
            if path not in named and path.startswith(inside):
                reads.append(path)  # (one made later changes the answer)
                if word.endswith(_SCRIPT_ENDINGS) or glob.has_magic(word) or os.path.isfile(path):
                    named.append(path)
        for path in _with_matches(named, inside, reads):
            protect(path)
            real = os.path.realpath(path)
            inside_real = real.startswith(real_within.rstrip("/") + "/")
            if path.startswith(inside) and inside_real and read_files < MAX_READ:
                if real != path:
                    reads.append(path)  # (the link: where it leads changes the answer)
                more = read(real)
                if more is not None:
                    read_files += 1
                    pending.append((more, node, path))
    return out
