"""Parse a shell command line into every simple command it would run, with bashlex.

Each simple command keeps its words *as written* (their source text), so the
policy can expand them exactly as bash would (:mod:`._words`) and judge the
real argv. Commands inside pipelines, lists, ``{ }``, ``( )``, ``if``/``for``/
``while``/``until``, function bodies, ``$( )``, backticks and ``<( )`` are all
collected. Anything the parser cannot represent faithfully is reported as
*uncertain*; the policy never proves an uncertain command safe.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import attrs
import bashlex  # type: ignore[import-untyped]

__all__ = [
    "MAX_COMMAND_CHARS",
    "Redirect",
    "Script",
    "SimpleCommand",
    "Word",
    "parse_script",
    "rough_segments",
]

MAX_COMMAND_CHARS = 65_536
MAX_NESTING = 16


@attrs.frozen
class Word:
    """A word as written, and whether it is computed at run time."""

    raw: str
    dynamic: bool = False


@attrs.frozen
class Redirect:
    """One redirection.

    Attributes:
        op: bash's operator (``>``, ``>>``, ``>|``, ``&>``, ``&>>``, ``<``, ``<>``,
            ``>&``, ``<&``, ``<<``, ``<<-``, ``<<<``).
        target: the file word, or None for a duplication/close (``2>&1``, ``>&-``)
            and for here-documents and here-strings (their text is data).
    """

    op: str
    target: Word | None


@attrs.frozen
class SimpleCommand:
    """One command the shell would run, before expansion."""

    words: tuple[Word, ...]
    assignments: tuple[Word, ...] = ()
    redirects: tuple[Redirect, ...] = ()


@attrs.frozen
class Script:
    """What a command line would run, as far as the parser can tell.

    Attributes:
        source: the command line.
        commands: every simple command, in source order.
        uncertain: why parts of it cannot be trusted (empty when all can).
        hazards: structural dangers (a fork bomb, a download piped into a shell).
        functions: names of functions the line defines.
        background: whether something runs in the background (``&``).
    """

    source: str
    commands: tuple[SimpleCommand, ...] = ()
    uncertain: tuple[str, ...] = ()
    hazards: tuple[str, ...] = ()
    functions: tuple[str, ...] = ()
    background: bool = False


_SHELL_NAMES = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "rbash", "fish"})
_DOWNLOADERS = frozenset({"curl", "wget", "fetch", "aria2c", "http", "https", "lwp-request"})
_INTERPRETERS = re.compile(
    r"^(?:python[0-9.]*|pypy[0-9.]*|perl|ruby|node|nodejs|php|lua|deno|bun)$"
)


@attrs.define
class _Walker:
    source: str
    commands: list[SimpleCommand] = attrs.field(factory=list)
    uncertain: list[str] = attrs.field(factory=list)
    hazards: list[str] = attrs.field(factory=list)
    functions: list[str] = attrs.field(factory=list)
    background: bool = False

    def flag(self, reason: str) -> None:
        if reason not in self.uncertain:
            self.uncertain.append(reason)

    def raw(self, node: Any) -> str:
        start, end = node.pos
        return str(self.source[start:end])

    def visit(self, node: Any) -> None:
        kind = getattr(node, "kind", None)
        if kind == "command":
            self.command(node)
        elif kind == "list":
            for part in node.parts:
                if getattr(part, "kind", None) == "operator":
                    if part.op == "&":
                        self.background = True
                else:
                    self.visit(part)
        elif kind == "pipeline":
            start = len(self.commands)
            for part in node.parts:
                if getattr(part, "kind", None) not in ("pipe", "reservedword"):
                    self.visit(part)
            self.check_pipeline(self.commands[start:])
        elif kind == "compound":
            for part in node.list:
                self.visit(part)
            for redirect in getattr(node, "redirects", ()) or ():
                # a redirect on a compound command applies to every command inside it
                made = self.redirect(redirect)
                self.commands.append(SimpleCommand(words=(), redirects=(made,)))
        elif kind in ("if", "for", "while", "until"):
            for part in node.parts:
                if getattr(part, "kind", None) == "word":
                    self.nested(part)
                else:
                    self.visit(part)
        elif kind == "function":
            name = node.name.word if getattr(node, "name", None) is not None else ""
            self.functions.append(name)
            start = len(self.commands)
            self.visit(node.body)
            if name and any(
                c.words and c.words[0].raw.strip("\\'\"") == name for c in self.commands[start:]
            ):
                self.hazards.append(f"the function {name!r} calls itself (a fork bomb)")
        elif kind in ("reservedword", "operator", "pipe"):
            return
        elif kind == "word":
            self.nested(node)
        else:
            self.flag(f"unexpected shell construct {kind!r}")

    def nested(self, word: Any) -> bool:
        """Collect commands inside a word's substitutions; return whether it is dynamic."""
        dynamic = False
        for part in getattr(word, "parts", ()) or ():
            part_kind = getattr(part, "kind", None)
            if part_kind in ("commandsubstitution", "processsubstitution"):
                self.visit(part.command)
                dynamic = True
            elif part_kind == "parameter":
                dynamic = True
            elif part_kind == "tilde":
                continue
            else:
                self.flag(f"unexpected word part {part_kind!r}")
                dynamic = True
        return dynamic

    def word(self, node: Any) -> Word:
        # an expansion bashlex does not model ($'..', $"..", $[..]) fails expand_word later
        return Word(raw=self.raw(node), dynamic=self.nested(node))

    def redirect(self, node: Any) -> Redirect:
        op = str(node.type)
        output: Any = getattr(node, "output", None)
        heredoc = getattr(node, "heredoc", None)
        if heredoc is not None:
            body = str(getattr(heredoc, "value", "") or "")
            delimiter = output.word if getattr(output, "kind", None) == "word" else ""
            quoted = getattr(output, "kind", None) == "word" and any(
                q in self.raw(output) for q in "'\"\\"
            )
            if not quoted and ("$" in body or "`" in body):
                # any expansion: ${X@P} runs text as a prompt, "$SECRET" reveals the environment
                self.flag(f"the here-document {delimiter!r} expands its body at run time")
                for tokens in rough_segments(body):
                    self.commands.append(
                        SimpleCommand(words=tuple(Word(raw=t, dynamic=True) for t in tokens))
                    )
            return Redirect(op=op, target=None)
        if op == "<<<":
            if getattr(output, "kind", None) == "word":
                # judged as a word: an expansion in it makes the command ask
                return Redirect(op=op, target=self.word(output))
            return Redirect(op=op, target=None)
        if getattr(output, "kind", None) == "word":
            return Redirect(op=op, target=self.word(output))
        return Redirect(op=op, target=None)

    def command(self, node: Any) -> None:
        words: list[Word] = []
        assignments: list[Word] = []
        redirects: list[Redirect] = []
        for part in node.parts:
            part_kind = getattr(part, "kind", None)
            if part_kind == "word":
                words.append(self.word(part))
            elif part_kind == "assignment":
                assignments.append(self.word(part))
            elif part_kind == "redirect":
                redirects.append(self.redirect(part))
            else:
                self.flag(f"unexpected command part {part_kind!r}")
        self.commands.append(
            SimpleCommand(
                words=tuple(words), assignments=tuple(assignments), redirects=tuple(redirects)
            )
        )

    def check_pipeline(self, commands: list[SimpleCommand]) -> None:
        seen_download = False
        for command in commands:
            if not command.words:
                continue
            name = command.words[0].raw.rsplit("/", 1)[-1].strip("\\'\"")
            if name in _DOWNLOADERS:
                seen_download = True
            elif seen_download and (name in _SHELL_NAMES or _INTERPRETERS.match(name)):
                self.hazards.append(f"a download is piped into {name!r}")
                return


def _parse(source: str) -> Script:
    walker = _Walker(source=source)
    if len(source) > MAX_COMMAND_CHARS:
        walker.flag(f"the command is longer than {MAX_COMMAND_CHARS} characters")
    elif "\x00" in source:
        walker.flag("the command contains a NUL byte")
    elif not source.strip():
        walker.flag("the command is empty")
    else:
        try:
            trees = bashlex.parse(source)
        except NotImplementedError as exc:
            walker.flag(f"the parser does not support this construct ({exc})")
        except Exception as exc:  # bashlex raises many types on odd input
            walker.flag(f"the command could not be parsed ({type(exc).__name__}: {exc})")
        else:
            for tree in trees:
                walker.visit(tree)
    return Script(
        source=source,
        commands=tuple(walker.commands),
        uncertain=tuple(walker.uncertain),
        hazards=tuple(walker.hazards),
        functions=tuple(walker.functions),
        background=walker.background,
    )


_CACHE_MAX_CHARS = 4096
_parse_cached = functools.lru_cache(maxsize=2048)(_parse)


def parse_script(source: str) -> Script:
    """Parse ``source``; results for short commands are memoised (parsing is pure)."""
    if len(source) > _CACHE_MAX_CHARS:
        return _parse(source)
    return _parse_cached(source)


_SPLIT = re.compile(r"[;&|()<>\n`{}]|\$\(")
_QUOTES = re.compile(r"[\"'\\]")


def rough_segments(source: str) -> list[tuple[str, ...]]:
    """A crude word split, used only to apply deny rules to text the parser rejected.

    Every suffix of every metacharacter-separated segment is returned, quotes
    removed, so a denied command behind an unparseable construct still matches.
    """
    out: list[tuple[str, ...]] = []
    for segment in _SPLIT.split(source[:MAX_COMMAND_CHARS]):
        tokens = [_QUOTES.sub("", token) for token in segment.split()]
        tokens = [t for t in tokens if t]
        for index in range(len(tokens)):
            out.append(tuple(tokens[index : index + 64]))
            if len(out) > 4096:
                return out
    return out
