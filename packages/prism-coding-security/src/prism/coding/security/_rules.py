"""Command rules over normalised argv, the default denies, and their structural checks."""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import os
import posixpath
import pwd
import re
import shlex
import stat
from typing import TYPE_CHECKING, Literal

import attrs

from prism.core import ConfigurationError
from prism.core.options import OptionCheck, boolean, sequence_of, string

from ._examples import example_argvs
from ._programs import model_args

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

__all__ = [
    "DEFAULT_DENY_PATTERNS",
    "CommandRule",
    "CommandRules",
    "CompiledRule",
    "CompiledRules",
    "NormalizedArgv",
    "block_device",
    "destructive_target",
    "normalize_argv",
]

DEFAULT_DENY_PATTERNS: tuple[str, ...] = (
    # privilege escalation
    "sudo *",
    "su *",
    "doas *",
    "pkexec *",
    "run0 *",
    # file systems and raw devices
    "mkfs *",
    "mkfs.* *",
    "mke2fs *",
    "mkswap *",
    "wipefs *",
    "fdisk *",
    "sfdisk *",
    "parted *",
    "blkdiscard *",
    # power
    "shutdown *",
    "reboot *",
    "halt *",
    "poweroff *",
    "init 0",
    "init 6",
    "telinit *",
    "systemctl poweroff *",
    "systemctl reboot *",
    "systemctl halt *",
    "systemctl kexec *",
)
"""Rules every command (and every command it wraps) is checked against unless
``use_default_deny=False``; see :class:`CommandRules` for the syntax.

Beside these rules, the default checks deny by structure rather than text: a
recursive ``rm``, ``chmod``, ``chown`` or ``chgrp`` of ``/``, a top-level
directory, a home directory, a root or a parent of a root (also ``<one of
those>/*``), however the options and paths are spelled; a write to a block
device (redirect, ``dd of=``, ``tee``, ``cp``...); a fork bomb (a function that
calls itself); and a download piped into a shell or interpreter.
"""


@attrs.frozen
class NormalizedArgv:
    """A command as rules see it: program basename, option set, operands in order."""

    program: str
    options: frozenset[tuple[str, str | None]]
    operands: tuple[str | None, ...]
    written: str = ""  # the program as written (``/tmp/x/ls``)


def normalize_argv(argv: Sequence[str | None]) -> NormalizedArgv:
    """Normalise ``argv``: ``/bin/rm -fr x`` and ``rm --recursive --force x`` are the same.

    Options are mapped to their canonical names through the program's grammar
    when Prism has one (``-r``, ``-R``, ``--recur`` → ``--recursive``), else
    split naively (``-fr`` → ``-f``, ``-r``).
    """
    written = str(argv[0]) if argv and argv[0] is not None else ""
    program = posixpath.basename(written)
    args = tuple(argv[1:])
    parsed = model_args(program, args)
    if parsed is not None:
        options = frozenset((opt.canonical, value) for opt, value, _ in parsed.options)
        return NormalizedArgv(
            program=program, options=options, operands=parsed.operands, written=written
        )
    found: set[tuple[str, str | None]] = set()
    operands: list[str | None] = []
    ended = False
    for arg in args:
        if arg is None or ended or arg == "-" or not arg.startswith("-"):
            operands.append(arg)
        elif arg == "--":
            ended = True
        elif arg.startswith("--"):
            name, eq, value = arg.partition("=")
            found.add((name, value if eq else None))
        else:
            found.update((f"-{ch}", None) for ch in arg[1:])
    return NormalizedArgv(
        program=program, options=frozenset(found), operands=tuple(operands), written=written
    )


def _operands_match(patterns: tuple[str, ...], operands: tuple[str | None, ...]) -> bool:
    if not patterns:
        return not operands
    head, rest = patterns[0], patterns[1:]
    if head == "*":
        return any(_operands_match(rest, operands[i:]) for i in range(len(operands) + 1))
    if not operands or operands[0] is None:
        return False
    return fnmatch.fnmatchcase(operands[0], head) and _operands_match(rest, operands[1:])


def _examples(name: str, value: Iterable[str]) -> tuple[str, ...]:
    return tuple(sequence_of(string(non_empty=False)).check("CommandRule", name, value))


def _match(value: Iterable[str]) -> tuple[str, ...]:
    return _examples("match", value)


def _not_match(value: Iterable[str]) -> tuple[str, ...]:
    return _examples("not_match", value)


@attrs.frozen(kw_only=True)
class CommandRule:
    """A rule with examples that are checked when the rules are built.

    Attributes:
        pattern: the rule (see :class:`CommandRules`).
        match: command lines the rule must match.
        not_match: command lines the rule must not match.
    """

    pattern: str = attrs.field(validator=string())
    match: tuple[str, ...] = attrs.field(default=(), converter=_match)
    not_match: tuple[str, ...] = attrs.field(default=(), converter=_not_match)


_RULE = OptionCheck(
    "a non-empty rule or a CommandRule",
    lambda item: isinstance(item, CommandRule) or (isinstance(item, str) and bool(item.strip())),
)


def _rules(name: str, value: object) -> tuple[str | CommandRule, ...]:
    return tuple(sequence_of(_RULE).check("CommandRules", name, value))  # type: ignore[arg-type]


def _conv_allow(value: object) -> tuple[str | CommandRule, ...]:
    return _rules("allow", value)


def _conv_deny(value: object) -> tuple[str | CommandRule, ...]:
    return _rules("deny", value)


def _conv_ask(value: object) -> tuple[str | CommandRule, ...]:
    return _rules("ask", value)


@attrs.frozen(kw_only=True)
class CommandRules:
    r"""Rules applied to every simple command, and to every command it wraps.

    Deny wins over everything (an approver's yes included), then ask, then
    allow. A rule is written like a command: ``"rm -rf /"``, ``"git push *"``.
    Its first word is a glob over the program's name (the basename: ``/bin/rm``,
    ``\\rm`` and ``command rm`` are all ``rm``). Its options are a set that the
    command's options must include, compared after normalisation (``-fr`` =
    ``-r -f`` = ``--recursive --force`` = ``--recur --force`` for programs Prism
    models); an option with a value (``--signal=KILL``) must have that value
    (a glob). The remaining words are globs matched in order against the
    command's operands, where a lone ``*`` matches any number of words, options
    included (``"git status *"`` matches ``git status`` and ``git status -s``).

    Each rule may be a :class:`CommandRule` with ``match`` and ``not_match``
    example commands, checked when the policy is built.

    Attributes:
        allow: commands that run without approval, in chains, pipelines and
            wrappers too (a redirect or write to a file still asks).
        deny: commands that never run, even when approved.
        ask: commands that always need approval.
        use_default_deny: also apply :data:`DEFAULT_DENY_PATTERNS` and the structural checks.
    """

    allow: tuple[str | CommandRule, ...] = attrs.field(default=(), converter=_conv_allow)
    deny: tuple[str | CommandRule, ...] = attrs.field(default=(), converter=_conv_deny)
    ask: tuple[str | CommandRule, ...] = attrs.field(default=(), converter=_conv_ask)
    use_default_deny: bool = attrs.field(default=True, validator=boolean())


@attrs.frozen
class CompiledRule:
    """One rule, parsed once."""

    text: str
    program: str
    options: frozenset[tuple[str, str | None]]
    operands: tuple[str, ...]
    greedy: bool  # the operand list is exactly "*": options are not constrained beyond the set
    written: str  # the program as the rule writes it
    exact: bool  # an allow rule: the program must be written as in the rule

    @classmethod
    def build(cls, text: str, where: str, *, exact: bool = False) -> CompiledRule:
        """Parse ``text``.

        Raises:
            ConfigurationError: the rule cannot be split into words.
        """
        try:
            words = shlex.split(text)
        except ValueError as exc:
            raise ConfigurationError(f"{where} rule {text!r} cannot be split ({exc})") from exc
        if not words:
            raise ConfigurationError(f"{where} rule {text!r} is empty")
        program = posixpath.basename(words[0])
        args = words[1:]
        # words from the first lone "*" on are operand globs, never options
        cut = args.index("*") if "*" in args else len(args)
        normalized = normalize_argv([program, *args[:cut]])
        operands = tuple(o or "" for o in normalized.operands) + tuple(args[cut:])
        return cls(
            text=text,
            program=program,
            options=normalized.options,
            operands=operands,
            greedy=operands == ("*",),
            written=words[0],
            exact=exact,
        )

    def matches(self, argv: NormalizedArgv) -> bool:
        """Whether the normalised command is covered by this rule."""
        if self.exact:
            # an allow rule for "ls" does not allow /tmp/x/ls; one for "/usr/bin/ls" does
            if "/" in self.written:
                if not fnmatch.fnmatchcase(argv.written, self.written):
                    return False
            elif "/" in argv.written or not fnmatch.fnmatchcase(argv.program, self.program):
                return False
        elif not fnmatch.fnmatchcase(argv.program, self.program):
            return False
        for name, value in self.options:
            if value is None:
                if not any(n == name for n, _ in argv.options):
                    return False
            elif not any(
                n == name and v is not None and fnmatch.fnmatchcase(v, value)
                for n, v in argv.options
            ):
                return False
        if self.greedy:
            return True
        if "*" in self.operands:
            # options after a "*" are matched as words: rebuild the tail as written
            return _operands_match(self.operands, _as_words(argv))
        return _operands_match(self.operands, argv.operands)


def _as_words(argv: NormalizedArgv) -> tuple[str | None, ...]:
    flags = tuple(
        sorted(name if value is None else f"{name}={value}" for name, value in argv.options)
    )
    return argv.operands + flags


@attrs.define(eq=False)
class CompiledRules:
    """:class:`CommandRules` parsed once, with their examples checked."""

    allow: tuple[CompiledRule, ...]
    deny: tuple[CompiledRule, ...]
    ask: tuple[CompiledRule, ...]
    defaults: bool
    # rules by literal program name; "" holds the rules whose program is a glob
    _index: dict[str, dict[str, tuple[int, ...]]] = attrs.field(factory=dict, init=False)

    @classmethod
    def build(cls, rules: CommandRules) -> CompiledRules:
        """Compile ``rules`` and check every rule's examples.

        Raises:
            ConfigurationError: a rule cannot be parsed, or an example contradicts it.
        """
        compiled: dict[str, list[CompiledRule]] = {"allow": [], "deny": [], "ask": []}
        for kind in ("allow", "deny", "ask"):
            items: tuple[str | CommandRule, ...] = getattr(rules, kind)
            if kind == "deny" and rules.use_default_deny:
                items = items + DEFAULT_DENY_PATTERNS
            for item in items:
                text = item.pattern if isinstance(item, CommandRule) else item
                rule = CompiledRule.build(text, f"CommandRules.{kind}", exact=kind == "allow")
                compiled[kind].append(rule)
                if isinstance(item, CommandRule):
                    for example in item.match:
                        if not any(rule.matches(normalize_argv(a)) for a in example_argvs(example)):
                            raise ConfigurationError(
                                f"CommandRules.{kind} rule {text!r}: its example {example!r} "
                                "should match but does not"
                            )
                    for example in item.not_match:
                        if any(rule.matches(normalize_argv(a)) for a in example_argvs(example)):
                            raise ConfigurationError(
                                f"CommandRules.{kind} rule {text!r}: its example {example!r} "
                                "should not match but does"
                            )
        return cls(
            allow=tuple(compiled["allow"]),
            deny=tuple(compiled["deny"]),
            ask=tuple(compiled["ask"]),
            defaults=rules.use_default_deny,
        )

    def first(
        self, kind: Literal["allow", "deny", "ask"], argv: NormalizedArgv
    ) -> CompiledRule | None:
        """The first ``kind`` rule that covers ``argv``."""
        rules: tuple[CompiledRule, ...] = getattr(self, kind)
        index = self._index[kind]
        candidates = index.get(argv.program, ()) + index.get("", ())
        for position in sorted(candidates):
            if rules[position].matches(argv):
                return rules[position]
        return None

    def names(self, kind: Literal["allow", "deny", "ask"], program: str) -> bool:
        """Whether a ``kind`` rule's program glob matches ``program``."""
        rules: tuple[CompiledRule, ...] = getattr(self, kind)
        return any(fnmatch.fnmatchcase(program, rule.program) for rule in rules)

    def __attrs_post_init__(self) -> None:
        for kind in ("allow", "deny", "ask"):
            grouped: dict[str, list[int]] = {}
            for position, rule in enumerate(getattr(self, kind)):
                literal = not any(ch in rule.program for ch in "*?[")
                grouped.setdefault(rule.program if literal else "", []).append(position)
            self._index[kind] = {name: tuple(found) for name, found in grouped.items()}


# -- structural defaults ----------------------------------------------------------------------

_DISK = re.compile(r"^/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|loop|md|dm-|sr|nbd|mapper/|disk/|block/)")
_HARMLESS_DEVICES = frozenset(
    {
        "/dev/null",
        "/dev/zero",
        "/dev/full",
        "/dev/tty",
        "/dev/stdout",
        "/dev/stderr",
        "/dev/stdin",
        "/dev/fd/0",
        "/dev/fd/1",
        "/dev/fd/2",
        "/dev/random",
        "/dev/urandom",
    }
)


def block_device(real: str) -> bool:
    """Whether ``real`` (a resolved path) is a disk-like device."""
    if not real.startswith("/dev/") or real in _HARMLESS_DEVICES:
        return False
    if _DISK.match(real):
        return True
    try:
        return stat.S_ISBLK(os.stat(real).st_mode)
    except OSError:
        return False


@functools.cache
def _homes() -> frozenset[str]:
    found = {os.path.realpath(os.path.expanduser("~"))}
    with contextlib.suppress(OSError):
        found.update(os.path.realpath(p.pw_dir) for p in pwd.getpwall() if p.pw_dir)
    return frozenset(found)


def destructive_target(real: str, roots: Sequence[str]) -> str | None:
    """Why a recursive delete/chmod of ``real`` is denied, or None."""
    parts = [p for p in real.split("/") if p]
    if len(parts) <= 1:
        return "the file system root" if not parts else "a top-level system directory"
    if real in _homes():
        return "a home directory"
    for root in roots:
        if real == root:
            return "a root"
        if root.startswith(real.rstrip("/") + "/"):
            return "a parent of a root"
    return None
