"""Command rules: glob patterns over simple commands, default denies, read-only commands."""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterable, Sequence
from fnmatch import translate
from typing import TYPE_CHECKING, Literal

import attrs

from prism.core import ConfigurationError

from ._commands import (
    SHELLS,
    TRANSPARENT_WRAPPERS,
    ParsedCommand,
    SimpleCommand,
    rough_segments,
)

if TYPE_CHECKING:
    from ._paths import Roots

__all__ = [
    "DEFAULT_DENY_PATTERNS",
    "READ_ONLY_COMMANDS",
    "CommandRules",
    "CommandVerdict",
    "evaluate_command",
]

_RM_RECURSIVE = "rm -*[rR]*"
DEFAULT_DENY_PATTERNS: tuple[str, ...] = (
    # privilege escalation
    "sudo *",
    "su *",
    "doas *",
    "pkexec *",
    "run0 *",
    # recursive removal of / or the home directory
    f"{_RM_RECURSIVE} /",
    f"{_RM_RECURSIVE} / *",
    f"{_RM_RECURSIVE} /[*]",
    f"{_RM_RECURSIVE} ~",
    f"{_RM_RECURSIVE} ~/",
    f"{_RM_RECURSIVE} ~ *",
    f"{_RM_RECURSIVE} ~/ *",
    f"{_RM_RECURSIVE} ~/[*]",
    f"{_RM_RECURSIVE} $HOME*",
    f"{_RM_RECURSIVE} ${{HOME}}*",
    # file systems and raw devices
    "mkfs *",
    "mkfs.* *",
    "mke2fs *",
    "mkswap *",
    "wipefs *",
    "dd *of=/dev/*",
    # permissions of the whole system
    "chmod *-R* 777 /",
    "chmod *-R* 777 / *",
    "chmod *--recursive* 777 /",
    "chown *-R* /",
    # power
    "shutdown *",
    "reboot *",
    "halt *",
    "poweroff *",
    "init 0",
    "init 6",
    "telinit 0",
    "telinit 6",
    "systemctl poweroff *",
    "systemctl reboot *",
    "systemctl halt *",
    "systemctl kexec *",
)
"""Glob patterns every simple command is checked against unless ``use_default_deny=False``.

A pattern matches the whole command text (words joined by single spaces, the
command name without its directory); ``*`` matches any characters, spaces
included, and a trailing `` *`` also matches the bare command (``"sudo *"``
denies ``sudo`` too). Beside these patterns the default checks deny, by
structure rather than text: recursive ``rm`` of ``/``, ``~``, ``$HOME``, a root
or a parent of a root (also ``<one of those>/*``); writes to block devices
(redirections, ``dd``, ``tee``, ``cp`` and friends); fork bombs (a function
that calls itself); and a download piped into a shell or interpreter.
"""

READ_ONLY_COMMANDS: frozenset[str] = frozenset(
    {"ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "rg", "ag", "pwd", "echo",
     "printf", "stat", "file", "du", "df", "tree", "diff", "cmp", "which", "whereis", "type",
     "whoami", "id", "date", "uname", "hostname", "true", "false", "test", "[", "basename",
     "dirname", "realpath", "readlink", "uniq", "cut", "tr", "nl", "od", "hexdump", "xxd",
     "md5sum", "sha1sum", "sha256sum", "sha512sum", "cksum", "b2sum", "column", "comm", "join",
     "paste", "fold", "rev", "tac", "seq", "printenv", "jq", "ps", "free", "uptime", "sleep",
     "find", "sort", "git"}
)  # fmt: skip
"""Commands ``read_only=True`` lets run without approval (``find``, ``sort`` and ``git``
only in their non-writing forms: no ``-exec``/``-delete``, no ``-o``, read-only git subcommands)."""

_GIT_READ_ONLY = frozenset(
    {"status", "log", "diff", "show", "ls-files", "rev-parse", "blame", "grep", "describe",
     "shortlog", "cat-file", "ls-tree", "rev-list", "whatchanged"}
)  # fmt: skip
_FIND_WRITES = ("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fls")
_FIND_WRITES_PREFIX = "-fprint"
_BLOCK_DEVICE = re.compile(
    r"^(?:of=)?/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|loop|md|dm-|sr|nbd|mapper/|disk/|block/)"
)
_DEVICE_WRITERS = frozenset(
    {"dd", "tee", "cp", "mv", "install", "shred", "truncate", "cat", "pv", "sfdisk", "fdisk",
     "parted", "blkdiscard", "badblocks", "hdparm", "mkfs", "wipefs", "ln"}
)  # fmt: skip


def _compile(pattern: str) -> re.Pattern[str]:
    source = translate(pattern)
    if pattern.endswith(" *"):
        source = f"(?:{source})|(?:{translate(pattern[:-2])})"
    return re.compile(source)


def _patterns(name: str, value: object) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)):
        raise ConfigurationError(f"CommandRules.{name} takes a sequence of patterns, got {value!r}")
    if not isinstance(value, Iterable):
        raise ConfigurationError(f"CommandRules.{name} takes a sequence of patterns, got {value!r}")
    items = tuple(value)
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise ConfigurationError(f"CommandRules.{name} patterns must be non-empty strings, "
                                     f"got {item!r}")  # fmt: skip
    return items


def _conv_allow(value: object) -> tuple[str, ...]:
    return _patterns("allow", value)


def _conv_deny(value: object) -> tuple[str, ...]:
    return _patterns("deny", value)


def _conv_ask(value: object) -> tuple[str, ...]:
    return _patterns("ask", value)


def _check_bool(instance: object, attribute: attrs.Attribute[bool], value: object) -> None:
    if not isinstance(value, bool):
        raise ConfigurationError(f"CommandRules.{attribute.name} must be a bool, got {value!r}")


@attrs.frozen(kw_only=True)
class CommandRules:
    """Glob rules applied to every simple command of a shell command line.

    Deny wins, then ask, then allow. A pattern matches the whole simple command
    (``"git status *"`` matches ``git status`` and ``git status --short``); see
    :data:`DEFAULT_DENY_PATTERNS` for the syntax. Allow patterns are matched
    against the command as written, so ``"ls *"`` does not allow ``/tmp/x/ls``;
    deny and ask patterns also match with the directory stripped, so
    ``"sudo *"`` denies ``/usr/bin/sudo``.

    Attributes:
        allow: commands that run without approval, even inside pipelines and chains.
        deny: commands that never run, even when approved.
        ask: commands that always need approval.
        use_default_deny: also apply :data:`DEFAULT_DENY_PATTERNS` and the structural checks.
    """

    allow: tuple[str, ...] = attrs.field(default=(), converter=_conv_allow)
    deny: tuple[str, ...] = attrs.field(default=(), converter=_conv_deny)
    ask: tuple[str, ...] = attrs.field(default=(), converter=_conv_ask)
    use_default_deny: bool = attrs.field(default=True, validator=_check_bool)


@attrs.frozen(kw_only=True)
class CommandVerdict:
    """The rules' answer for one command line."""

    outcome: Literal["allow", "ask", "deny"]
    reason: str
    details: dict[str, object] = attrs.field(factory=dict)


@attrs.define(eq=False)
class CompiledRules:
    """:class:`CommandRules` with patterns compiled once."""

    allow: tuple[tuple[str, re.Pattern[str]], ...]
    deny: tuple[tuple[str, re.Pattern[str]], ...]
    ask: tuple[tuple[str, re.Pattern[str]], ...]
    defaults: bool

    @classmethod
    def build(cls, rules: CommandRules) -> CompiledRules:
        """Compile ``rules``."""
        deny = rules.deny + (DEFAULT_DENY_PATTERNS if rules.use_default_deny else ())
        return cls(
            allow=tuple((p, _compile(p)) for p in rules.allow),
            deny=tuple((p, _compile(p)) for p in deny),
            ask=tuple((p, _compile(p)) for p in rules.ask),
            defaults=rules.use_default_deny,
        )


def _first_match(
    patterns: Sequence[tuple[str, re.Pattern[str]]], texts: Sequence[str]
) -> str | None:
    for pattern, compiled in patterns:
        for text in texts:
            if compiled.match(text):
                return pattern
    return None


def _deny_texts(command: SimpleCommand) -> tuple[str, ...]:
    if command.normalized_text == command.text:
        return (command.text,)
    return (command.normalized_text, command.text)


def _rm_target_denied(command: SimpleCommand, roots: Roots, cwd: str) -> tuple[str, str] | None:
    """(target, why) when a recursive rm would remove /, home, a root or a root's parent."""
    if command.name != "rm":
        return None
    args = command.words[1:]
    recursive = False
    targets: list[str] = []
    options_done = False
    for arg in args:
        if not options_done and arg == "--":
            options_done = True
        elif not options_done and arg.startswith("--"):
            recursive = recursive or arg == "--recursive"
        elif not options_done and arg.startswith("-") and len(arg) > 1:
            recursive = recursive or "r" in arg or "R" in arg
        else:
            targets.append(arg)
    if not recursive:
        return None
    home = os.path.expanduser("~")
    protected = {"/": "the file system root", home: "the home directory"}
    for root in roots.paths:
        protected.setdefault(root, "a root")
    for target in targets:
        text = target
        for prefix in ("$HOME", "${HOME}", "~"):
            if text == prefix or text.startswith(prefix + "/"):
                text = home + text[len(prefix) :]
                break
        glob_all = text.endswith("/*") or text == "*"
        if glob_all:
            text = text[:-1] or "."
        path = posixpath.normpath(posixpath.join(cwd, text))
        try:
            real = os.path.realpath(path)
        except (OSError, ValueError):
            real = path
        for candidate in {path, real}:
            for protected_path, what in protected.items():
                if candidate == protected_path:
                    return target, what
                if protected_path != "/" and protected_path.startswith(candidate.rstrip("/") + "/"):
                    return target, f"a parent of {what}"
    return None


def _device_write(command: SimpleCommand) -> str | None:
    for redirect in command.redirects:
        if redirect.writes_file and redirect.target and _BLOCK_DEVICE.match(redirect.target):
            return redirect.target
    if command.name in _DEVICE_WRITERS or command.name.startswith("mkfs"):
        for word in command.words[1:]:
            if _BLOCK_DEVICE.match(word):
                return word
    return None


def _is_read_only(command: SimpleCommand) -> bool:
    name = command.name
    if name not in READ_ONLY_COMMANDS or "/" in command.words[0]:
        return False
    args = command.words[1:]
    if name == "find":
        return not any(a in _FIND_WRITES or a.startswith(_FIND_WRITES_PREFIX) for a in args)
    if name == "sort":
        return not any(a == "-o" or a.startswith(("--output", "-o")) for a in args)
    if name == "git":
        if any(a.startswith(("--output", "-c", "--exec-path", "--config-env")) for a in args):
            return False
        sub = next((a for a in args if not a.startswith("-")), None)
        return sub in _GIT_READ_ONLY
    return True


def _writes_outside(
    command: SimpleCommand, roots: Roots, cwd: str
) -> tuple[str, str | None] | None:
    for redirect in command.redirects:
        if not redirect.writes_file or redirect.target is None:
            continue
        if redirect.target in ("/dev/null", "/dev/stdout", "/dev/stderr"):
            continue
        verdict = roots.resolve(redirect.target, base=cwd)
        if not verdict.inside:
            return redirect.target, verdict.reason
    return None


def _writes_any_file(command: SimpleCommand) -> str | None:
    for redirect in command.redirects:
        if redirect.writes_file and redirect.target not in ("/dev/null",):
            return redirect.target
    return None


_ALLOW_TRANSPARENT = TRANSPARENT_WRAPPERS | SHELLS | {"eval", "find", "xargs"}


def evaluate_command(
    parsed: ParsedCommand,
    rules: CompiledRules,
    *,
    roots: Roots,
    cwd: str,
    read_only: bool,
) -> CommandVerdict:
    """Judge a parsed command line: deny wins, then ask, then allow."""
    source = parsed.source
    base: dict[str, object] = {"command": source}
    # 1. deny
    if rules.defaults and parsed.hazards:
        return CommandVerdict(
            outcome="deny",
            reason=f"command {source!r} denied: {parsed.hazards[0]}",
            details={**base, "rule": "default:structure", "hazards": list(parsed.hazards)},
        )
    for command in parsed.commands:
        pattern = _first_match(rules.deny, _deny_texts(command))
        if pattern is not None:
            return CommandVerdict(
                outcome="deny",
                reason=f"command {command.text!r} matches the deny rule {pattern!r}",
                details={**base, "simple_command": command.text, "rule": pattern},
            )
        if rules.defaults:
            rm_hit = _rm_target_denied(command, roots, cwd)
            if rm_hit is not None:
                return CommandVerdict(
                    outcome="deny",
                    reason=f"command {command.text!r} would recursively remove {rm_hit[0]!r} "
                    f"({rm_hit[1]})",
                    details={**base, "simple_command": command.text, "rule": "default:rm",
                             "path": rm_hit[0]},
                )  # fmt: skip
            device = _device_write(command)
            if device is not None:
                return CommandVerdict(
                    outcome="deny",
                    reason=f"command {command.text!r} writes to the block device {device!r}",
                    details={**base, "simple_command": command.text,
                             "rule": "default:block_device", "path": device},
                )  # fmt: skip
    if parsed.uncertain:
        for tokens in rough_segments(source):
            text = " ".join(tokens)
            normalized = " ".join((posixpath.basename(tokens[0]), *tokens[1:]))
            pattern = _first_match(rules.deny, (normalized, text))
            if pattern is not None:
                return CommandVerdict(
                    outcome="deny",
                    reason=f"command {source!r} could not be parsed with confidence and "
                    f"contains {text!r}, which matches the deny rule {pattern!r}",
                    details={**base, "simple_command": text, "rule": pattern,
                             "uncertain": list(parsed.uncertain)},
                )  # fmt: skip
    # 2. ask
    for command in parsed.commands:
        pattern = _first_match(rules.ask, _deny_texts(command))
        if pattern is not None:
            return CommandVerdict(
                outcome="ask",
                reason=f"command {command.text!r} matches the ask rule {pattern!r}",
                details={**base, "simple_command": command.text, "rule": pattern},
            )
    if parsed.uncertain:
        return CommandVerdict(
            outcome="ask",
            reason=f"command {source!r} cannot be parsed with confidence: {parsed.uncertain[0]}",
            details={**base, "uncertain": list(parsed.uncertain)},
        )
    for command in parsed.commands:
        outside = _writes_outside(command, roots, cwd)
        if outside is not None:
            return CommandVerdict(
                outcome="ask",
                reason=f"command {command.text!r} redirects output to {outside[0]!r}: {outside[1]}",
                details={**base, "simple_command": command.text, "path": outside[0]},
            )
    # 3. allow
    unallowed: list[SimpleCommand] = []
    allowed_by: list[str] = []
    for command in parsed.commands:
        pattern = _first_match(rules.allow, (command.text,))
        if pattern is not None:
            allowed_by.append(pattern)
        elif not (command.wrapper and command.name in _ALLOW_TRANSPARENT):
            unallowed.append(command)
    if not unallowed:
        return CommandVerdict(
            outcome="allow",
            reason=f"every command of {source!r} matches an allow rule",
            details={**base, "rule": sorted(set(allowed_by))},
        )
    if read_only:
        for command in parsed.commands:
            if command in unallowed and not (command.wrapper or _is_read_only(command)):
                return CommandVerdict(
                    outcome="ask",
                    reason=f"read-only mode: {command.text!r} is not a known read-only command",
                    details={**base, "simple_command": command.text, "read_only": True},
                )
            written = _writes_any_file(command)
            if written is not None and _first_match(rules.allow, (command.text,)) is None:
                return CommandVerdict(
                    outcome="ask",
                    reason=f"read-only mode: {command.text!r} writes to {written!r}",
                    details={**base, "simple_command": command.text, "path": written,
                             "read_only": True},
                )  # fmt: skip
            if command.wrapper and command in unallowed:
                return CommandVerdict(
                    outcome="ask",
                    reason=f"read-only mode: {command.text!r} wraps another command",
                    details={**base, "simple_command": command.text, "read_only": True},
                )
        return CommandVerdict(
            outcome="allow",
            reason=f"read-only mode: every command of {source!r} is a known read-only one",
            details={**base, "rule": "read_only", "read_only": True},
        )
    if parsed.features:
        features = sorted(parsed.features)
        return CommandVerdict(
            outcome="ask",
            reason=f"command {source!r} uses shell features ({', '.join(features)}) and "
            f"{unallowed[0].text!r} matches no allow rule",
            details={**base, "features": features, "simple_command": unallowed[0].text},
        )
    return CommandVerdict(
        outcome="allow",
        reason=f"plain command {source!r} matches no deny or ask rule",
        details={**base, "rule": "plain"},
    )
