"""Split a shell command into the simple commands it would run, with a real parser.

The parser is bashlex. Everything it cannot represent faithfully (ANSI-C
quoting, arithmetic, ``case``, ``time``, heredoc bodies with expansions, a
command name computed at run time, inline interpreter code) is reported as
*uncertain*, and the policy asks a human about uncertain commands.
"""

from __future__ import annotations

import posixpath
import re
from typing import TYPE_CHECKING, Any

import attrs
import bashlex  # type: ignore[import-untyped]

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

__all__ = [
    "DOWNLOADERS",
    "MAX_COMMAND_CHARS",
    "SHELLS",
    "ParsedCommand",
    "Redirect",
    "SimpleCommand",
    "parse_command",
]

MAX_COMMAND_CHARS = 65_536
_MAX_NESTING = 16

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh"})
_INTERPRETER_CODE_FLAGS: dict[str, frozenset[str]] = {
    "perl": frozenset({"-e", "-E"}),
    "ruby": frozenset({"-e"}),
    "node": frozenset({"-e", "-p", "--eval", "--print"}),
    "nodejs": frozenset({"-e", "-p", "--eval", "--print"}),
    "php": frozenset({"-r"}),
    "lua": frozenset({"-e"}),
    "Rscript": frozenset({"-e"}),
    "osascript": frozenset({"-e"}),
}
_PYTHON = re.compile(r"^(?:python|pypy)[0-9.]*$")
_AWKS = frozenset({"awk", "gawk", "mawk", "nawk"})
DOWNLOADERS = frozenset({"curl", "wget", "fetch", "aria2c", "http", "https", "lwp-request"})

# Wrappers whose inner command runs with the wrapper adding nothing dangerous.
TRANSPARENT_WRAPPERS = frozenset(
    {"env", "nice", "timeout", "nohup", "command", "builtin", "exec", "stdbuf", "ionice", "time"}
)
_PRIVILEGE_WRAPPERS = frozenset({"sudo", "doas", "pkexec", "run0", "su"})
_OTHER_WRAPPERS = frozenset(
    {"xargs", "setsid", "chroot", "watch", "flock", "strace", "ltrace", "unbuffer", "chrt",
     "taskset", "busybox", "unshare", "nsenter", "script", "firejail", "bwrap", "proot",
     "fakeroot", "faketime", "caffeinate", "systemd-run", "numactl", "cgexec", "sg", "newgrp"}
)  # fmt: skip
WRAPPERS = TRANSPARENT_WRAPPERS | _PRIVILEGE_WRAPPERS | _OTHER_WRAPPERS

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.+/@%:,=-]+$")
_OUTPUT_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})


@attrs.frozen(kw_only=True)
class Redirect:
    """One redirection of a simple command (``op`` is bash's operator)."""

    op: str
    target: str | None  # a file word, or None for a descriptor duplication like ``2>&1``

    @property
    def writes_file(self) -> bool:
        """Whether this redirection opens a file for writing."""
        return self.op in _OUTPUT_REDIRECTS and self.target is not None


@attrs.frozen(kw_only=True)
class SimpleCommand:
    """One command the shell would run.

    Attributes:
        words: argv after quote removal; the command name as written.
        wrapper: whether this layer only wraps another command (``env``, ``timeout``, ...).
        redirects: its redirections.
        dynamic: whether an argument is computed at run time (``$X``, ``$(...)``).
    """

    words: tuple[str, ...]
    wrapper: bool = False
    redirects: tuple[Redirect, ...] = ()
    dynamic: bool = False

    @property
    def name(self) -> str:
        """The command name with any directory stripped (``/usr/bin/sudo`` → ``sudo``)."""
        return posixpath.basename(self.words[0]) if self.words else ""

    @property
    def text(self) -> str:
        """The words as written, joined by single spaces."""
        return " ".join(self.words)

    @property
    def normalized_text(self) -> str:
        """The words with the command name's directory stripped."""
        return " ".join((self.name, *self.words[1:]))


@attrs.frozen(kw_only=True)
class ParsedCommand:
    """What a command line would run, as far as a parser can tell.

    Attributes:
        source: the command line.
        commands: every simple command, wrapper layers and nested shells included.
        features: shell constructs seen (``chaining``, ``pipeline``, ``substitution``, ...).
        uncertain: why the parse cannot be trusted (empty when it can).
        hazards: structural dangers found (fork bomb, download piped into a shell).
    """

    source: str
    commands: tuple[SimpleCommand, ...] = ()
    features: frozenset[str] = frozenset()
    uncertain: tuple[str, ...] = ()
    hazards: tuple[str, ...] = ()


@attrs.define
class _Walker:
    commands: list[SimpleCommand] = attrs.field(factory=list)
    features: set[str] = attrs.field(factory=set)
    uncertain: list[str] = attrs.field(factory=list)
    hazards: list[str] = attrs.field(factory=list)
    functions: list[tuple[str, Any]] = attrs.field(factory=list)

    def flag(self, reason: str) -> None:
        if reason not in self.uncertain:
            self.uncertain.append(reason)

    # -- parse entry ---------------------------------------------------------------

    def parse_source(self, source: str, depth: int) -> None:
        if depth > _MAX_NESTING:
            self.flag("commands are nested too deeply to inspect")
            return
        if "$'" in source or '$"' in source:
            self.flag("ANSI-C or locale quoting ($'...' / $\"...\") is not parsed reliably")
        if not source.strip():
            self.flag("the command is empty")
            return
        try:
            trees = bashlex.parse(source)
        except NotImplementedError as exc:
            self.flag(f"the parser does not support this construct ({exc})")
            return
        except Exception as exc:  # bashlex raises many types on odd input
            self.flag(f"the command could not be parsed ({type(exc).__name__}: {exc})")
            return
        if len(trees) > 1:
            self.features.add("newline")
        for tree in trees:
            self.visit(tree, depth)

    # -- AST walk --------------------------------------------------------------------

    def visit(self, node: Any, depth: int) -> None:
        kind = getattr(node, "kind", None)
        if kind == "command":
            self.command(node, depth)
        elif kind == "list":
            for part in node.parts:
                if getattr(part, "kind", None) == "operator":
                    self.features.add("background" if part.op == "&" else "chaining")
                else:
                    self.visit(part, depth)
        elif kind == "pipeline":
            commands = [p for p in node.parts if getattr(p, "kind", None) not in ("pipe",)]
            self.features.add("pipeline")
            start = len(self.commands)
            for part in commands:
                if getattr(part, "kind", None) == "reservedword":
                    continue
                self.visit(part, depth)
            self.check_pipeline(self.commands[start:])
        elif kind == "compound":
            self.features.add("compound")
            for part in node.list:
                self.visit(part, depth)
            for redirect in getattr(node, "redirects", ()) or ():
                self.redirect(redirect, depth)
        elif kind in ("if", "for", "while", "until"):
            self.features.add("compound")
            for part in node.parts:
                if getattr(part, "kind", None) == "word":
                    self.word_nested(part, depth)
                else:
                    self.visit(part, depth)
        elif kind == "function":
            self.features.add("function")
            name = node.name.word if getattr(node, "name", None) is not None else ""
            self.functions.append((name, node.body))
            start = len(self.commands)
            self.visit(node.body, depth)
            if name and any(c.name == name for c in self.commands[start:]):
                self.hazards.append(f"the function {name!r} calls itself (a fork bomb)")
        elif kind in ("reservedword", "operator", "pipe"):
            return
        elif kind == "word":
            self.word_nested(node, depth)
        else:
            self.flag(f"unexpected shell construct {kind!r}")

    def word_nested(self, word: Any, depth: int) -> bool:
        """Visit substitutions inside a word; return whether the word is dynamic."""
        dynamic = False
        for part in getattr(word, "parts", ()) or ():
            part_kind = getattr(part, "kind", None)
            if part_kind == "commandsubstitution":
                self.features.add("substitution")
                self.visit(part.command, depth)
                dynamic = True
            elif part_kind == "processsubstitution":
                self.features.add("process_substitution")
                self.visit(part.command, depth)
                dynamic = True
            elif part_kind == "parameter":
                self.features.add("expansion")
                value = getattr(part, "value", "") or ""
                if "$(" in value or "`" in value:
                    self.flag("a command substitution inside a parameter expansion")
                dynamic = True
            elif part_kind == "tilde":
                continue
            else:
                self.flag(f"unexpected word part {part_kind!r}")
                dynamic = True
        return dynamic

    def redirect(self, node: Any, depth: int) -> Redirect:
        self.features.add("redirection")
        target: str | None = None
        output: Any = getattr(node, "output", None)
        if getattr(output, "kind", None) == "word":
            target = output.word
            if self.word_nested(output, depth):
                self.flag(f"the redirection target {output.word!r} is computed at run time")
        heredoc = getattr(node, "heredoc", None)
        if heredoc is not None:
            self.features.add("heredoc")
            body = getattr(heredoc, "value", "") or ""
            if "$" in body or "`" in body:
                self.flag("a heredoc body may contain expansions the parser does not inspect")
            target = None
        op = str(node.type)
        return Redirect(op=op, target=target if op not in ("<<", "<<-") else None)

    def command(self, node: Any, depth: int) -> None:
        words: list[str] = []
        dynamic_positions: list[int] = []
        redirects: list[Redirect] = []
        assignments = False
        for part in node.parts:
            part_kind = getattr(part, "kind", None)
            if part_kind == "word":
                if self.word_nested(part, depth):
                    dynamic_positions.append(len(words))
                words.append(part.word)
            elif part_kind == "assignment":
                assignments = True
                self.word_nested(part, depth)
            elif part_kind == "redirect":
                redirects.append(self.redirect(part, depth))
            else:
                self.flag(f"unexpected command part {part_kind!r}")
        if assignments:
            self.features.add("assignment")
        if not words:
            return
        self.layers(words, set(dynamic_positions), tuple(redirects), depth)

    # -- wrappers, nested shells, eval ---------------------------------------------

    def layers(
        self, words: Sequence[str], dynamic: set[int], redirects: tuple[Redirect, ...], depth: int
    ) -> None:
        """Record ``words`` as a command and peel wrappers off it, layer by layer."""
        is_dynamic = bool(dynamic)
        if 0 in dynamic or not _SAFE_NAME.match(words[0]):
            self.flag(f"the command name {words[0]!r} is computed at run time or unusual")
        name = posixpath.basename(words[0])
        inner_start = _inner_command_index(name, words)
        if name in SHELLS:
            self.shell(words, dynamic, redirects, depth)
            return
        if name == "eval" or name == "source" or name == ".":
            self.commands.append(
                SimpleCommand(words=tuple(words), wrapper=True, redirects=redirects,
                              dynamic=is_dynamic)
            )  # fmt: skip
            if name == "eval":
                self.features.add("eval")
                if dynamic:
                    self.flag("eval of text computed at run time")
                self.parse_source(" ".join(words[1:]), depth + 1)
            else:
                self.features.add("source")
                self.flag(f"{name!r} runs a script file the policy cannot see")
            return
        self.interpreter_check(name, words)
        if name == "find":
            self.find(words, dynamic, redirects, depth)
            return
        if inner_start is None:
            self.commands.append(
                SimpleCommand(words=tuple(words), redirects=redirects, dynamic=is_dynamic)
            )
            return
        self.commands.append(
            SimpleCommand(words=tuple(words), wrapper=True, redirects=redirects, dynamic=is_dynamic)
        )
        if name == "xargs":
            self.features.add("xargs")
        if inner_start >= len(words):
            if name == "xargs":
                self.commands.append(SimpleCommand(words=("echo",), dynamic=True))
            return
        inner_dynamic = {i - inner_start for i in dynamic if i >= inner_start}
        if name == "xargs":
            # xargs appends arguments read from stdin: the inner command is dynamic.
            inner_dynamic.add(len(words) - inner_start)
        self.layers(words[inner_start:], inner_dynamic, (), depth)

    def shell(
        self, words: Sequence[str], dynamic: set[int], redirects: tuple[Redirect, ...], depth: int
    ) -> None:
        script_index: int | None = None
        command_string: int | None = None
        wants_c = False
        reads_stdin = False
        index = 1
        while index < len(words):
            word = words[index]
            if word == "--":
                index += 1
                break
            if word.startswith("--"):
                if word in ("--rcfile", "--init-file"):
                    index += 1
                index += 1
                continue
            if word.startswith(("-", "+")) and len(word) > 1:
                cluster = word[1:]
                if "c" in cluster:
                    wants_c = True
                if "s" in cluster:
                    reads_stdin = True
                if "o" in cluster or "O" in cluster:
                    index += 1
                index += 1
                continue
            break
        if index < len(words):
            if wants_c:
                command_string = index
            else:
                script_index = index
        self.commands.append(
            SimpleCommand(words=tuple(words), wrapper=True, redirects=redirects,
                          dynamic=bool(dynamic))
        )  # fmt: skip
        if wants_c:
            self.features.add("nested_shell")
            if command_string is None:
                self.flag(f"{words[0]!r} -c without a command string")
                return
            if command_string in dynamic:
                self.flag(f"{words[0]!r} -c runs text computed at run time")
            self.parse_source(words[command_string], depth + 1)
            return
        if script_index is None or reads_stdin:
            self.features.add("shell_stdin")
            self.flag(f"{words[0]!r} reads commands from its standard input")
            return
        # `bash script.sh`: runs a file; the layer itself is the command rules judge.
        self.commands[-1] = attrs.evolve(self.commands[-1], wrapper=False)

    def find(
        self, words: Sequence[str], dynamic: set[int], redirects: tuple[Redirect, ...], depth: int
    ) -> None:
        execs: list[tuple[int, int]] = []
        index = 1
        while index < len(words):
            if words[index] in ("-exec", "-execdir", "-ok", "-okdir"):
                start = index + 1
                end = start
                while end < len(words) and words[end] not in (";", "+"):
                    end += 1
                execs.append((start, end))
                index = end + 1
                continue
            index += 1
        self.commands.append(
            SimpleCommand(words=tuple(words), wrapper=bool(execs), redirects=redirects,
                          dynamic=bool(dynamic))
        )  # fmt: skip
        for start, end in execs:
            self.features.add("find_exec")
            inner = list(words[start:end])
            if not inner:
                self.flag("find -exec without a command")
                continue
            inner_dynamic = {i - start for i in dynamic if start <= i < end}
            self.layers(inner, inner_dynamic | {i for i, w in enumerate(inner) if "{}" in w},
                        (), depth)  # fmt: skip

    def interpreter_check(self, name: str, words: Sequence[str]) -> None:
        flags = _INTERPRETER_CODE_FLAGS.get(name)
        if _PYTHON.match(name):
            flags = frozenset({"-c"})
        if flags is not None:
            for word in words[1:]:
                if word in flags or (
                    len(word) > 2 and word[0] == "-" and word[1] != "-" and word[-1:] in
                    {f[-1] for f in flags if len(f) == 2}
                ):  # fmt: skip
                    self.features.add("inline_code")
                    self.flag(f"{name!r} runs inline code the policy cannot inspect")
                    return
        if name in _AWKS:
            program = " ".join(words[1:])
            if any(token in program for token in ("system", "|", ">", "getline")):
                self.features.add("inline_code")
                self.flag(f"{name!r} program may run commands or write files")

    def check_pipeline(self, commands: Sequence[SimpleCommand]) -> None:
        seen_download = False
        for command in commands:
            name = command.name
            if name in DOWNLOADERS:
                seen_download = True
            elif seen_download and (name in SHELLS or _PYTHON.match(name) or name in
                                    _INTERPRETER_CODE_FLAGS):  # fmt: skip
                self.hazards.append(f"a download is piped into {name!r}")
                return


def _skip_options(
    words: Sequence[str], start: int, with_value: frozenset[str], *, stop_at_assign: bool = False
) -> int:
    """Index of the first non-option word after ``start`` (``--`` ends options)."""
    index = start
    while index < len(words):
        word = words[index]
        if word == "--":
            return index + 1
        if stop_at_assign and "=" in word and not word.startswith("-"):
            index += 1
            continue
        if word.startswith("-") and len(word) > 1:
            if word in with_value:
                index += 2
                continue
            index += 1
            continue
        return index
    return index


_WRAPPER_VALUE_OPTIONS: dict[str, frozenset[str]] = {
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "ionice": frozenset({"-c", "-n", "-p", "-P", "-u"}),
    "sudo": frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T"}),
    "doas": frozenset({"-u", "-C"}),
    "su": frozenset({"-c", "-s", "-g", "-G", "--command", "--shell"}),
    "xargs": frozenset({"-I", "-i", "-L", "-l", "-n", "-P", "-d", "-E", "-e", "-s", "-a"}),
    "flock": frozenset({"-w", "-E", "--timeout", "--conflict-exit-code"}),
    "watch": frozenset({"-n", "--interval", "-d"}),
    "chrt": frozenset(),
    "taskset": frozenset(),
    "strace": frozenset({"-e", "-o", "-p", "-s", "-u"}),
    "ltrace": frozenset({"-e", "-o", "-p", "-s", "-u"}),
    "systemd-run": frozenset({"-p", "--property", "-u", "--unit"}),
    "unshare": frozenset(),
    "nsenter": frozenset({"-t", "--target"}),
    "script": frozenset(),
}


def _inner_command_index(name: str, words: Sequence[str]) -> int | None:
    """Where the wrapped command starts when ``name`` is a wrapper, else None."""
    if name not in WRAPPERS:
        return None
    options = _WRAPPER_VALUE_OPTIONS.get(name, frozenset())
    if name == "env":
        return _skip_options(words, 1, options, stop_at_assign=True)
    if name == "timeout":
        return _skip_options(words, 1, options) + 1  # skip DURATION
    if name in ("chroot", "sg", "newgrp"):
        return _skip_options(words, 1, options) + 1  # skip NEWROOT / GROUP
    if name == "flock":
        return _skip_options(words, 1, options) + 1  # skip the lock file
    if name == "taskset":
        return _skip_options(words, 1, options) + 1  # skip the mask
    if name == "chrt":
        return _skip_options(words, 1, options) + 1  # skip the priority
    if name == "busybox":
        return 1
    if name == "su":
        # `su -c CMD` runs CMD through a shell: treat it like `sh -c CMD`.
        for index, word in enumerate(words):
            if word in ("-c", "--command") and index + 1 < len(words):
                return None
        return None
    if name == "nice" and len(words) > 1 and re.match(r"^-[0-9]+$", words[1]):
        return _skip_options(words, 2, options)
    return _skip_options(words, 1, options)


_CACHE_MAX_ENTRIES = 1024
_CACHE_MAX_CHARS = 4096
_cache: dict[str, ParsedCommand] = {}


def parse_command(source: str) -> ParsedCommand:
    """Split ``source`` into simple commands and report what could not be trusted.

    Results for short commands are memoised (parsing is pure), because agents
    repeat the same commands and bashlex is the expensive part of a decision.
    """
    if isinstance(source, str) and len(source) <= _CACHE_MAX_CHARS:
        cached = _cache.get(source)
        if cached is None:
            cached = _parse(source)
            if len(_cache) >= _CACHE_MAX_ENTRIES:
                del _cache[next(iter(_cache))]
            _cache[source] = cached
        return cached
    return _parse(source)


def _parse(source: str) -> ParsedCommand:
    walker = _Walker()
    if not isinstance(source, str):
        walker.flag("the command is not a string")
    elif len(source) > MAX_COMMAND_CHARS:
        walker.flag(f"the command is longer than {MAX_COMMAND_CHARS} characters")
    elif "\x00" in source:
        walker.flag("the command contains a NUL byte")
    else:
        walker.parse_source(source, 0)
    return ParsedCommand(
        source=source if isinstance(source, str) else repr(source),
        commands=tuple(walker.commands),
        features=frozenset(walker.features),
        uncertain=tuple(walker.uncertain),
        hazards=tuple(walker.hazards),
    )


_SPLIT = re.compile(r"[;&|()<>\n`{}]|\$\(")
_QUOTES = re.compile(r"[\"'\\]")


def rough_segments(source: str) -> Iterator[tuple[str, ...]]:
    """A crude word split used only to apply deny rules to commands the parser rejected.

    Every suffix of every metacharacter-separated segment is yielded, quotes
    removed, so a denied command hidden behind an unparseable construct still matches.
    """
    for segment in _SPLIT.split(source[:MAX_COMMAND_CHARS]):
        tokens = [_QUOTES.sub("", token) for token in segment.split()]
        tokens = [t for t in tokens if t]
        for index in range(len(tokens)):
            yield tuple(tokens[index : index + 64])
