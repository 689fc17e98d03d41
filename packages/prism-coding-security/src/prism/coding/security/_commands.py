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

__all__ = [
    "MAX_COMMAND_CHARS",
    "MAX_SEPARATORS",
    "Group",
    "Leaf",
    "List",
    "Node",
    "Pipeline",
    "Redirect",
    "Script",
    "SimpleCommand",
    "Word",
    "parse_script",
    "rough_segments",
]

MAX_COMMAND_CHARS = 65_536
MAX_SEPARATORS = 2048
# Text outside single quotes holding none of these (nor a `$` before a quote) is read
# by bash with every `'` opening or closing a quote: `|` in `echo 'a|b'` separates
# nothing. Anything else (double quotes, escapes, substitutions, arithmetic, comments,
# here-documents, `$'...'`) has every separator counted, quoted or not.
_ROUGH_QUOTING = ('"', "\\", "`", "$(", "$[", "((", "<<", "#")
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
    fd: int | None = None  # the descriptor written before the operator (``2>``)
    dup: str | None = None  # the descriptor a duplication copies (``2>&1``: ``"1"``)


@attrs.frozen
class SimpleCommand:
    """One command the shell would run, before expansion."""

    words: tuple[Word, ...]
    assignments: tuple[Word, ...] = ()
    redirects: tuple[Redirect, ...] = ()


# -- the proved grammar: what a line is made of when it is only simple commands ------------


@attrs.frozen
class Leaf:
    """A simple command, by its index in :attr:`Script.commands`."""

    index: int


@attrs.frozen
class Pipeline:
    """Commands joined by ``|`` or ``|&`` (``pipes[i]`` joins ``parts[i]`` and the next)."""

    parts: tuple[Node, ...]
    pipes: tuple[str, ...]
    negated: bool = False


@attrs.frozen
class List:
    """Commands joined by ``;``, ``&&`` or ``||`` (``ops[i]`` joins ``parts[i]`` and the next)."""

    parts: tuple[Node, ...]
    ops: tuple[str, ...]


@attrs.frozen
class Group:
    """``( body )`` (a subshell) or ``{ body; }``, with redirects that apply to all of it.

    ``redirects`` is the index of the simple command (no words) that holds them, if any.
    """

    body: Node
    subshell: bool
    redirects: int | None = None


Node = Leaf | Pipeline | List | Group


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
        tree: the line's structure when it lies inside the proved grammar (simple
            commands, pipelines, lists, ``( )`` and ``{ }``), else None.
        outside: why the line lies outside the proved grammar (empty when it does not).
    """

    source: str
    commands: tuple[SimpleCommand, ...] = ()
    uncertain: tuple[str, ...] = ()
    hazards: tuple[str, ...] = ()
    functions: tuple[str, ...] = ()
    background: bool = False
    tree: Node | None = None
    outside: str = ""


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
    outside: str = ""

    def flag(self, reason: str) -> None:
        if reason not in self.uncertain:
            self.uncertain.append(reason)

    def leave(self, reason: str) -> None:
        """Note that the line lies outside the proved grammar (the first reason is kept)."""
        if not self.outside:
            self.outside = reason

    def raw(self, node: Any) -> str:
        start, end = node.pos
        return str(self.source[start:end])

    def visit(self, node: Any) -> Node | None:
        """Collect the commands under ``node``; its structure, or None outside the grammar."""
        kind = getattr(node, "kind", None)
        if kind == "command":
            return self.command(node)
        if kind == "list":
            parts: list[Node | None] = []
            ops: list[str] = []
            for part in node.parts:
                if getattr(part, "kind", None) == "operator":
                    if part.op == "&":
                        self.background = True
                        self.leave("a command runs in the background")
                    ops.append(";" if part.op in (";", "\n", "&") else str(part.op))
                else:
                    parts.append(self.visit(part))
            return _joined(parts, ops)
        if kind == "pipeline":
            start = len(self.commands)
            members: list[Node | None] = []
            pipes: list[str] = []
            negated = False
            for part in node.parts:
                part_kind = getattr(part, "kind", None)
                if part_kind == "pipe":
                    pipes.append(str(part.pipe))
                elif part_kind == "reservedword":
                    if part.word == "!":
                        negated = not negated
                    else:
                        self.leave(f"the reserved word {part.word!r}")
                else:
                    members.append(self.visit(part))
            self.check_pipeline(self.commands[start:])
            if any(m is None for m in members) or len(pipes) != len(members) - 1:
                return None
            return Pipeline(parts=tuple(m for m in members if m is not None),
                            pipes=tuple(pipes), negated=negated)  # fmt: skip
        if kind == "compound":
            opening: Any = node.list[0] if node.list else None
            group = getattr(opening, "kind", None) == "reservedword" and opening.word in "({"
            body: list[Node | None] = []
            for part in node.list:
                if getattr(part, "kind", None) == "reservedword":
                    continue
                body.append(self.visit(part))
            held: int | None = None
            for redirect in getattr(node, "redirects", ()) or ():
                # a redirect on a compound command applies to every command inside it
                made = self.redirect(redirect)
                if held is None:
                    held = len(self.commands)
                    self.commands.append(SimpleCommand(words=(), redirects=(made,)))
                else:
                    old = self.commands[held]
                    self.commands[held] = attrs.evolve(old, redirects=(*old.redirects, made))
            if not group:
                self.leave("a compound command (if, for, while, until, case)")
                return None
            inner = _joined(body, [";"] * (len(body) - 1))
            if inner is None:
                return None
            return Group(body=inner, subshell=opening.word == "(", redirects=held)
        if kind in ("if", "for", "while", "until"):
            self.leave(f"a compound command ({kind})")
            for part in node.parts:
                if getattr(part, "kind", None) == "word":
                    self.nested(part)
                else:
                    self.visit(part)
            return None
        if kind == "function":
            name = node.name.word if getattr(node, "name", None) is not None else ""
            self.functions.append(name)
            self.leave(f"a function definition ({name})")
            start = len(self.commands)
            self.visit(node.body)
            if name and any(
                c.words and c.words[0].raw.strip("\\'\"") == name for c in self.commands[start:]
            ):
                self.hazards.append(f"the function {name!r} calls itself (a fork bomb)")
            return None
        if kind in ("reservedword", "operator", "pipe"):
            return None
        if kind == "word":
            self.nested(node)
            return None
        self.flag(f"unexpected shell construct {kind!r}")
        self.leave(f"the construct {kind!r}")
        return None

    def nested(self, word: Any) -> bool:
        """Collect commands inside a word's substitutions; return whether it is dynamic."""
        dynamic = False
        for part in getattr(word, "parts", ()) or ():
            part_kind = getattr(part, "kind", None)
            if part_kind in ("commandsubstitution", "processsubstitution"):
                self.leave("a command or process substitution")
                self.visit(part.command)
                dynamic = True
            elif part_kind == "parameter":
                self.leave("a parameter expansion")
                dynamic = True
            elif part_kind == "tilde":
                continue
            else:
                self.flag(f"unexpected word part {part_kind!r}")
                self.leave(f"the word part {part_kind!r}")
                dynamic = True
        return dynamic

    def word(self, node: Any) -> Word:
        # an expansion bashlex does not model ($'..', $"..", $[..]) fails expand_word later
        return Word(raw=self.raw(node), dynamic=self.nested(node))

    def redirect(self, node: Any) -> Redirect:
        op = str(node.type)
        output: Any = getattr(node, "output", None)
        heredoc = getattr(node, "heredoc", None)
        fd = getattr(node, "input", None)
        fd = fd if isinstance(fd, int) else None
        if heredoc is not None:
            # the document's end, quoting and expansions are bash's to decide: never proved
            self.leave("a here-document")
            body = str(getattr(heredoc, "value", "") or "")
            delimiter = output.word if getattr(output, "kind", None) == "word" else ""
            quoted = getattr(output, "kind", None) == "word" and any(
                q in self.raw(output) for q in "'\"\\$"
            )
            if quoted:
                # where bash ends a document whose delimiter is quoted (<<"E"OF, <<E\OF,
                # <<$'EOF') is not what the parser says: judge the text after it too
                self.flag(f"the here-document delimiter {self.raw(output)!r} is quoted")
            if quoted or "$" in body or "`" in body:
                if not quoted:
                    # ${X@P} runs text as a prompt, "$SECRET" reveals the environment
                    self.flag(f"the here-document {delimiter!r} expands its body at run time")
                for tokens in rough_segments(body):
                    self.commands.append(
                        SimpleCommand(words=tuple(Word(raw=t, dynamic=True) for t in tokens))
                    )
            return Redirect(op=op, target=None, fd=fd)
        if isinstance(output, int):
            return Redirect(op=op, target=None, fd=fd, dup=str(output))
        if getattr(output, "kind", None) == "word":
            # a here-string is judged as a word: an expansion in it makes the command ask
            return Redirect(op=op, target=self.word(output), fd=fd)
        self.leave(f"the redirection {op!r}")
        return Redirect(op=op, target=None, fd=fd)

    def command(self, node: Any) -> Leaf:
        words: list[Word] = []
        assignments: list[Word] = []
        redirects: list[Redirect] = []
        parts = list(node.parts)
        for index, part in enumerate(parts):
            part_kind = getattr(part, "kind", None)
            if part_kind == "word" and _descriptor_variable(part, parts[index + 1 : index + 2]):
                # `{fd}>FILE`: bash opens FILE on a new descriptor it stores in $fd,
                # where the parser sees the word `{fd}` and a plain redirection
                self.flag(f"{self.raw(part)} names a descriptor variable")
                self.leave("a redirection to a descriptor variable")
            if part_kind == "word":
                words.append(self.word(part))
            elif part_kind == "assignment":
                assignments.append(self.word(part))
            elif part_kind == "redirect":
                redirects.append(self.redirect(part))
            else:
                self.flag(f"unexpected command part {part_kind!r}")
                self.leave(f"the command part {part_kind!r}")
        self.commands.append(
            SimpleCommand(
                words=tuple(words), assignments=tuple(assignments), redirects=tuple(redirects)
            )
        )
        return Leaf(len(self.commands) - 1)

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


_DESCRIPTOR_VARIABLE = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")


def _descriptor_variable(word: Any, following: list[Any]) -> bool:
    """Whether ``word`` is bash's ``{name}`` written right before a redirection."""
    if not following or getattr(following[0], "kind", None) != "redirect":
        return False
    return (
        _DESCRIPTOR_VARIABLE.fullmatch(str(getattr(word, "word", ""))) is not None
        and word.pos[1] == following[0].pos[0]
    )


def _separators(source: str) -> int:
    """How many ``|``, ``;``, ``&`` and line breaks of ``source`` may end a command.

    Those outside single quotes when the text outside them is plain (see
    :data:`_ROUGH_QUOTING`), otherwise all of them.
    """
    # a here-document's lines are text, not commands (a line holding one counts no breaks)
    marks = "|;&" if "<<" in source else "|;&\n"
    pieces = source.split("'")
    outside = pieces[::2]
    if len(pieces) % 2 and not any(
        part.endswith("$") or any(mark in part for mark in _ROUGH_QUOTING) for part in outside
    ):
        return sum(part.count(c) for part in outside for c in marks)
    return sum(source.count(c) for c in marks)


def _parse(source: str) -> Script:
    walker = _Walker(source=source)
    tree: Node | None = None
    if len(source) > MAX_COMMAND_CHARS:
        walker.flag(f"the command is longer than {MAX_COMMAND_CHARS} characters")
    elif "\x00" in source:
        walker.flag("the command contains a NUL byte")
    elif _separators(source) > MAX_SEPARATORS:
        # the parse and the walk cost ~0.3 ms a command: `ls|ls|...` in 64 KB is seconds
        walker.flag(
            f"the command holds more than {MAX_SEPARATORS} of '|', ';', '&' and line breaks"
        )
    elif not source.strip():
        walker.flag("the command is empty")
    else:
        # Imported at the first command judged, not with the policy: its parser tables
        # cost 0.15-0.2 s of CPU that `prism serve` would spend before answering a host.
        import bashlex  # type: ignore[import-untyped]

        try:
            trees = bashlex.parse(source)
        except NotImplementedError as exc:
            walker.flag(f"the parser does not support this construct ({exc})")
        except Exception as exc:  # bashlex raises many types on odd input
            walker.flag(f"the command could not be parsed ({type(exc).__name__}: {exc})")
        else:
            nodes = [walker.visit(tree) for tree in trees]
            tree = _joined(nodes, [";"] * (len(nodes) - 1))
    if walker.uncertain:
        walker.leave(walker.uncertain[0])
    return Script(
        source=source,
        commands=tuple(walker.commands),
        uncertain=tuple(walker.uncertain),
        hazards=tuple(walker.hazards),
        functions=tuple(walker.functions),
        background=walker.background,
        tree=None if walker.outside else tree,
        outside=walker.outside,
    )


def _joined(parts: list[Node | None], ops: list[str]) -> Node | None:
    """``parts`` joined by ``ops`` (a trailing ``;`` dropped); None when a part is None."""
    ops = ops[: max(len(parts) - 1, 0)]
    if not parts or any(p is None for p in parts) or len(ops) != len(parts) - 1:
        return None
    nodes = tuple(p for p in parts if p is not None)
    return nodes[0] if len(nodes) == 1 else List(parts=nodes, ops=tuple(ops))


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
