"""What each known program does with its arguments: the safe set and the wrappers.

For every program the policy knows, a model turns an argv into a :class:`Use`:
which operands and option values are paths it reads or writes, whether it
changes directory, which commands it runs (wrappers, ``sh -c``), and whether it
is proved safe or must ask (unknown option, code from an argument, a write the
model cannot bound). A program with no model is never proved safe.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from typing import TYPE_CHECKING, Literal

import attrs

from ._argv import Grammar, ParsedArgs, parse_args
from ._grammars import (
    BASH_LIKE,
    BUILTIN_TEXT,
    DISPATCHED_VERSION_QUERY,
    ENV_GRAMMAR,
    FIND_EXEC,
    FIND_FLAGS,
    FIND_READ_VALUES,
    FIND_TESTS_WITH_VALUE,
    GIT_CONFIG_READ,
    GIT_GLOBAL,
    GIT_SUBCOMMANDS,
    HARMLESS_VARIABLES,
    NO_OPERANDS,
    OPAQUE_WRAPPERS,
    PROGRAM_GRAMMARS,
    READ_OPERANDS,
    RULE_GRAMMARS,
    SHELLS,
    SIMPLE_WRAPPERS,
    TEXT_OPERANDS,
    TRANSPARENT,
    VERSION_QUERY,
    WRAPPERS,
)
from ._languages import (
    awk_program_unsafe,
    builtin_test_unsafe,
    jq_filter_unsafe,
    printf_assigns,
    printf_format_unsafe,
    sed_script_unsafe,
)

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "CANNOT_RUN_PROGRAMS",
    "GIT_NO_DRIVERS",
    "GIT_NO_SUBMODULES",
    "SAFE_PROGRAMS",
    "SHELLS",
    "WRAPPERS",
    "Inner",
    "Use",
    "describe",
    "git_without_drivers",
    "model_args",
]

Argv = tuple["str | None", ...]


@attrs.frozen
class Inner:
    """A command another command runs: an argv, or a script in some shell's syntax."""

    argv: Argv | None = None
    script: str | None = None
    bash_syntax: bool = True
    transparent: bool = True  # the outer layer adds nothing unsafe


@attrs.frozen
class Use:
    """What an invocation does, as far as its model can tell."""

    verdict: Literal["allow", "ask"]
    reason: str
    rule: str
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    cwd: str | None = None
    inner: tuple[Inner, ...] = ()
    writer: bool = False  # the program writes (asks in read-only mode)
    files_only: tuple[str, ...] = ()  # operands that must not be directories (cp, mv)


def _ask(name: str, reason: str, *, inner: tuple[Inner, ...] = (), rule: str = "") -> Use:
    return Use(verdict="ask", reason=reason, rule=rule or f"model:{name}", inner=inner)


def _allow(name: str, reason: str = "", *, reads: tuple[str, ...] = ()) -> Use:
    return Use(
        verdict="allow",
        reason=reason or f"{name} is in the safe set",
        rule=f"model:{name}",
        reads=reads,
    )


def model_args(name: str, args: tuple[str | None, ...]) -> ParsedArgs | None:
    """Parse ``args`` with ``name``'s grammar, for rule normalisation (None: no grammar)."""
    found = PROGRAM_GRAMMARS.get(name) or SIMPLE_WRAPPERS.get(name) or RULE_GRAMMARS.get(name)
    if found is None:
        return None
    parsed = parse_args(found, args)
    return None if parsed.error else parsed


def _options_use(
    name: str, parsed: ParsedArgs
) -> tuple[Use | None, list[str], list[str], str | None]:
    reads: list[str] = []
    writes: list[str] = []
    cwd: str | None = None
    for opt, value, spelling in parsed.options:
        if opt.role == "unsafe":
            return _ask(name, f"{name} {spelling}: {opt.why}"), reads, writes, cwd
        if opt.role == "read" and value is not None:
            reads.append(value)
        elif opt.role == "write" and value is not None:
            writes.append(value)
        elif opt.role == "cwd" and value is not None:
            cwd = value
    return None, reads, writes, cwd


def _static(operands: tuple[str | None, ...]) -> list[str] | None:
    if any(o is None for o in operands):
        return None
    return [o for o in operands if o is not None]


_HEAD_OBSOLETE = re.compile(r"-[0-9]+[bcklmqvz]*")
_TAIL_OBSOLETE = re.compile(r"[-+][0-9]*[bcl]?f?")


def _obsolete_count(name: str, args: Argv) -> Argv | None:
    """``args`` past head's or tail's obsolete first word (``-99c``, ``+5``), read whole.

    coreutils reads such a first word as one option that takes no value (so
    ``head -99c FILE`` reads FILE): head when it is ``-`` and a digit, tail when
    it has at most one file after it. None: head would refuse the word.
    """
    first = args[0] if args else None
    if first is None:
        return args
    if name == "head":
        if not re.match(r"-[0-9]", first):
            return args
        return args[1:] if _HEAD_OBSOLETE.fullmatch(first) else None
    rest = args[1:]
    one_file = len(rest) == 0 or (
        len(rest) == 1 and not (rest[0] is not None and rest[0].startswith("-") and rest[0] != "-")
    )
    if not (one_file or (len(rest) in (1, 2) and rest[0] == "--")):
        return args
    if first in ("-", "+") or first.startswith("-c") or not _TAIL_OBSOLETE.fullmatch(first):
        return args
    return rest


def _generic(name: str, args: Argv) -> Use:
    """A program of the safe set with a plain grammar and operand roles."""
    if name in ("head", "tail"):
        past = _obsolete_count(name, args)
        if past is None:
            return _ask(name, f"{name}: the obsolete count {args[0]!r} is not one head reads")
        args = past
    if name == "jq":
        for word in args:
            if word == "--":
                break
            if word is not None and re.match(r"-[^A-Za-z-]", word):
                # jq 1.6 takes `-0` for its filter (a word is an option only as `-`
                # and a letter), 1.7.0 for --nul-output: which word is a file depends
                return _ask(name, f"jq reads {word!r} as its filter or an option, by version")
    parsed = parse_args(PROGRAM_GRAMMARS[name], args)
    if parsed.error:
        return _ask(name, f"{name}: {parsed.error}")
    refused, reads, writes, _ = _options_use(name, parsed)
    if refused is not None:
        return refused
    operands = _static(parsed.operands)
    if operands is None:
        return _ask(name, f"{name}: an operand is computed at run time")
    writer = bool(writes)
    if name in READ_OPERANDS:
        reads += [o for o in operands if o != "-"]
        if name in ("diff", "cmp"):
            # a directory operand makes diff read (and follow links in) every file in it
            return Use(verdict="allow", reason=f"{name} is in the safe set", rule=f"model:{name}",
                       reads=tuple(reads), files_only=tuple(reads))  # fmt: skip
    elif name in NO_OPERANDS and operands:
        return _ask(name, f"{name} with operands changes something")
    elif name == "date" and any(not o.startswith("+") for o in operands):
        return _ask(name, "date with an operand that is not +FORMAT sets the clock")
    elif name == "date" and any("TZ=" in str(v) for v in parsed.values("--date")):
        # `-d 'TZ="/path" now'` makes the C library read that file as a zone file
        return _ask(name, "date -d with TZ= in its string reads a zone file it names")
    elif name in ("grep", "egrep", "fgrep"):
        if not parsed.has("--regexp", "--file"):
            operands = operands[1:]
        reads += [o for o in operands if o != "-"]
    elif name == "rg":
        if not parsed.has("--regexp", "--file", "--files", "--type-list"):
            operands = operands[1:]
        reads += operands
    elif name == "uniq":
        if len(operands) > 2:
            return _ask(name, f"{name} takes at most an input and an output")
        reads += [o for o in operands[:1] if o != "-"]
        if len(operands) == 2:
            writes.append(operands[1])
            writer = True
    elif name == "tr":
        pass
    elif name == "jq":
        if parsed.has("--args", "--jsonargs"):
            return _ask(name, "jq --args/--jsonargs: which words are files depends on their order")
        if not operands:
            return _ask(name, "jq without a filter")
        why = jq_filter_unsafe(operands[0])
        if why is not None:
            return _ask(name, f"jq filter {operands[0]!r}: {why}")
        reads += operands[1:]
    elif name in ("mkdir", "touch", "tee"):
        writes += operands
        writer = True
    elif name in ("cp", "mv"):
        if len(operands) < 2:
            return _ask(name, f"{name} needs a source and a destination")
        sources, dest = operands[:-1], operands[-1]
        (writes if name == "mv" else reads).extend(sources)
        writes.append(dest)
        writer = True
        return Use(
            verdict="allow",
            reason=f"{name} of files inside the roots",
            rule=f"model:{name}",
            reads=tuple(reads),
            writes=tuple(writes),
            writer=True,
            files_only=tuple(sources),
        )
    elif name not in TEXT_OPERANDS:
        reads += operands
    return Use(
        verdict="allow",
        reason=f"{name} is in the safe set",
        rule=f"model:{name}",
        reads=tuple(reads),
        writes=tuple(writes),
        writer=writer,
    )


# xxd reads each option word whole, by its first two characters, after one dash or
# two (`-ps` and `--ps` are -p, never -p then -s); a value option takes the rest of
# its word unless that starts its long name (`-cols 8`, `-c8`); the first operand
# ends the options (`xxd IN -p` writes the file `-p`). Only the exact spellings
# below are proved; anything else asks.
_XXD_FLAGS = frozenset(
    {"-a", "-autoskip", "-b", "-bits", "-e", "-u", "-p", "-ps", "-postscript", "-plain", "-i",
     "-include", "-C", "-capitalize", "-d", "-r", "-revert", "-E", "-EBCDIC"}
)  # fmt: skip
# each value option's long names (xxd's -s reads both -seek and -skip whole)
_XXD_VALUES = {"-c": ("-cols",), "-g": ("-groupsize",), "-o": ("-offset",),
               "-s": ("-seek", "-skip"), "-l": ("-len",), "-n": ("-name",)}  # fmt: skip


def _xxd(args: Argv) -> Use:
    index = 0
    while index < len(args):
        word = args[index]
        if word is None:
            return _ask("xxd", "xxd: an argument is computed at run time")
        if word == "--":
            index += 1
            break
        if not word.startswith("-") or word == "-":
            break
        spelling = word[1:] if word.startswith("--") else word
        index += 1
        if spelling in _XXD_FLAGS:
            continue
        short, longs = spelling[:2], _XXD_VALUES.get(spelling[:2])
        if longs is not None and (spelling == short or spelling in longs):
            if index >= len(args) or args[index] is None:
                return _ask("xxd", f"xxd: the value of {word!r} is missing or computed")
            index += 1
            continue
        if longs is not None and all(spelling[2:3] != long[2:3] for long in longs):
            continue  # the value is attached (`-c8`), and cannot be read as a long name
        return _ask("xxd", f"xxd: the option {word!r} is not modelled")
    operands = args[index:]
    if any(o is None for o in operands):
        return _ask("xxd", "xxd: an operand is computed at run time")
    if len(operands) > 2:
        return _ask("xxd", "xxd takes at most an input and an output")
    reads = tuple(str(o) for o in operands[:1] if o != "-")
    writes = tuple(str(o) for o in operands[1:] if o != "-")
    return Use(verdict="allow", reason="xxd is in the safe set", rule="model:xxd",
               reads=reads, writes=writes, writer=bool(writes))  # fmt: skip


def _sed(args: Argv) -> Use:
    parsed = parse_args(PROGRAM_GRAMMARS["sed"], args)
    if parsed.error:
        return _ask("sed", f"sed: {parsed.error}")
    refused, _, _, _ = _options_use("sed", parsed)
    if refused is not None:
        return refused
    operands = _static(parsed.operands)
    if operands is None:
        return _ask("sed", "sed: an operand is computed at run time")
    scripts = [v for v in parsed.values("--expression") if v is not None]
    if not scripts:
        if not operands:
            return _ask("sed", "sed without a script")
        scripts, operands = [operands[0]], operands[1:]
    # GNU sed joins the -e parts with newlines before it reads them
    joined = "\n".join(scripts)
    why = sed_script_unsafe(joined)
    if why is not None:
        return _ask("sed", f"sed script {joined!r}: {why}")
    in_place = parsed.has("--in-place")
    files = [o for o in operands if o != "-"]
    if in_place:
        # GNU sed keeps a backup under the last -i's suffix: FILE+SUFFIX, or the suffix
        # with each '*' replaced by the file's name, a path anywhere ('.git/hooks/*')
        suffix = ([v for v in parsed.values("--in-place") if v is not None] or [""])[-1]
        if "*" in suffix or "/" in suffix:
            return _ask(
                "sed",
                f"sed -i{suffix}: a backup name with '*' or '/' is not modelled; the backup "
                "may be written anywhere, a protected path such as .git/hooks included",
            )
        return Use(
            verdict="allow",
            reason="sed -i edits files inside the roots",
            rule="model:sed",
            reads=tuple(files),
            writes=(*files, *(f + suffix for f in files if suffix)),
            writer=True,
        )
    return _allow("sed", reads=tuple(files))


def _awk(name: str, args: Argv) -> Use:
    parsed = parse_args(PROGRAM_GRAMMARS["awk"], args)
    if parsed.error:
        return _ask(name, f"{name}: {parsed.error}")
    refused, _, _, _ = _options_use(name, parsed)
    if refused is not None:
        return refused
    operands = _static(parsed.operands)
    if operands is None:
        return _ask(name, f"{name}: an operand is computed at run time")
    programs = [v for v in parsed.values("--source") if v is not None]
    if not programs:
        if not operands:
            return _ask(name, f"{name} without a program")
        programs, operands = [operands[0]], operands[1:]
    for program in programs:
        why = awk_program_unsafe(program)
        if why is not None:
            return _ask(name, f"{name} program {program!r}: {why}")
    files = [o for o in operands if o != "-" and not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", o)]
    return _allow(name, reads=tuple(files))


def _find(args: Argv) -> Use:
    index = 0
    while index < len(args) and args[index] in ("-H", "-P", "-O0", "-O1", "-O2", "-O3"):
        index += 1
    if index < len(args) and args[index] in ("-L", "-follow"):
        return _ask("find", "find -L follows symlinks out of the roots")
    paths: list[str] = []
    while index < len(args):
        arg = args[index]
        if arg is None:
            return _ask("find", "find: an argument is computed at run time")
        if arg.startswith("-") or arg in ("(", "!", ")", ","):
            break
        paths.append(arg)
        index += 1
    reads = list(paths) or ["."]
    inner: list[Inner] = []
    refused: str | None = None
    while index < len(args):
        arg = args[index]
        if arg is None:
            return _ask("find", "find: an argument is computed at run time", inner=tuple(inner))
        if arg in FIND_EXEC:
            end = index + 1
            while end < len(args) and args[end] not in (";", "+"):
                end += 1
            command = tuple(None if (a is None or "{}" in a) else a for a in args[index + 1 : end])
            if command:
                inner.append(Inner(argv=command, transparent=False))
            refused = refused or f"find {arg} runs a command for every file"
            index = end + 1
            continue
        if arg in FIND_TESTS_WITH_VALUE:
            if index + 1 >= len(args) or args[index + 1] is None:
                return _ask("find", f"find {arg} without a fixed value")
            if arg in FIND_READ_VALUES:
                reads.append(str(args[index + 1]))
            index += 2
            continue
        if arg.startswith("-newer") and arg not in FIND_FLAGS:
            # -newerXY: a time string when Y is t, else the file whose time it reads
            if index + 1 >= len(args) or args[index + 1] is None:
                return _ask("find", f"find {arg} without a fixed value")
            if not arg.endswith("t"):
                reads.append(str(args[index + 1]))
            index += 2
            continue
        if arg in FIND_FLAGS:
            index += 1
            continue
        if arg in ("-delete", "-fprint", "-fprint0", "-fprintf", "-fls"):
            refused = refused or f"find {arg} deletes or writes files"
            index += 1
            continue
        refused = refused or f"find: {arg!r} is not a modelled expression"
        index += 1
    if refused is not None:
        return _ask("find", refused, inner=tuple(inner))
    return _allow("find", reads=tuple(reads))


# subcommands (and their own subcommands) that take diff options: a proved one never
# runs an external diff or a textconv filter, whatever the repository's files name
_GIT_DIFFING = {"diff": (), "log": (), "show": (), "whatchanged": (), "blame": (), "status": (),
                "stash": ("show", "list"), "reflog": ("show", None)}  # fmt: skip
GIT_NO_DRIVERS = ("--no-ext-diff", "--no-textconv")
# on the command line, not as configuration: a submodule's own `ignore` (.gitmodules, or
# submodule.<name>.ignore) outranks diff.ignoreSubmodules, and `none` would start git in
# the submodule, under that repository's configuration; only the option overrides it
GIT_NO_SUBMODULES = ("--ignore-submodules=dirty",)
# blame.ignoreRevsFile accumulates (an empty value does not clear it in git 2.39): the
# option clears what the configuration named, a file wherever it is
_GIT_FORCED_ARGV = {"blame": (*GIT_NO_DRIVERS, "--no-ignore-revs-file"),
                    "status": GIT_NO_SUBMODULES}  # fmt: skip


def git_without_drivers(argv: tuple[str, ...]) -> tuple[str, ...]:
    """``argv`` (a proved ``git`` command) with its forced options after its subcommand.

    Only subcommands that take them get them: :data:`GIT_NO_DRIVERS` and
    :data:`GIT_NO_SUBMODULES` for ``diff``, ``log``, ``show``, ``whatchanged``,
    ``stash show``/``list``, ``reflog [show]``; :data:`GIT_NO_DRIVERS` for
    ``blame``; :data:`GIT_NO_SUBMODULES` for ``status``; any other argv comes
    back unchanged. The model refuses ``--ext-diff``, ``--textconv`` and every
    ``--ignore-submodules`` that would enter a submodule, so nothing later on
    the line turns them back on.
    """
    start = 1
    while start <= len(argv):
        if parse_args(GIT_GLOBAL, argv[1:start]).operands:
            break
        start += 1
    index = start - 1  # the subcommand
    if index >= len(argv) or argv[index] not in _GIT_DIFFING:
        return argv
    forced = _GIT_FORCED_ARGV.get(argv[index], GIT_NO_DRIVERS + GIT_NO_SUBMODULES)
    inner = _GIT_DIFFING[argv[index]]
    if inner:
        following = argv[index + 1] if index + 1 < len(argv) else None
        if following in inner:
            index += 1
        elif not (None in inner and (following is None or following.startswith("-"))):
            return argv
    return argv[: index + 1] + forced + argv[index + 1 :]


def _git(args: Argv) -> Use:
    parsed = parse_args(GIT_GLOBAL, args)
    if parsed.error:
        return _ask("git", f"git: {parsed.error}")
    refused, reads, _, cwd = _options_use("git", parsed)
    if refused is not None:
        return refused
    operands = parsed.operands
    if not operands:
        if parsed.has("--version"):
            return _allow("git", "git --version")
        return _ask("git", "git without a subcommand")
    sub, rest = operands[0], operands[1:]
    if sub is None:
        return _ask("git", "git: the subcommand is computed at run time")
    rule = f"model:git {sub}"
    if cwd is not None:
        reads.append(cwd)
    if sub == "config":
        sub_parsed = parse_args(GIT_CONFIG_READ, rest)
        words = _static(sub_parsed.operands) if not sub_parsed.error else None
        reading = sub_parsed.has("--get", "--get-all", "--get-regexp", "--list", "--get-urlmatch")
        if words and words[0] in ("get", "list"):
            reading = True
        if not sub_parsed.error:
            refused, config_reads, _, _ = _options_use("git config", sub_parsed)
            if refused is not None:
                return attrs.evolve(refused, rule=rule)
            if cwd is not None and config_reads:
                return Use(verdict="ask", reason="git -C with file arguments", rule=rule)
            reads += config_reads
        scoped = sub_parsed.has("--local", "--worktree", "--file", "--blob")
        if not sub_parsed.error and reading and not scoped:
            # without a scope git also reads the user's and the system's config (tokens live
            # there) and follows their includes
            return Use(verdict="ask", reason="git config without --local reads config outside "
                       "the roots", rule=rule)  # fmt: skip
        if sub_parsed.error or words is None or not reading:
            return Use(
                verdict="ask",
                reason="git config that is not a plain read changes "
                "configuration that can run programs",
                rule=rule,
                writer=True,
            )
        return Use(
            verdict="allow", reason="git config read", rule=rule, reads=tuple(reads), cwd=cwd
        )
    if sub == "stash":
        if not rest or rest[0] not in ("list", "show"):
            return Use(
                verdict="ask", reason="git stash changes the work tree", rule=rule, writer=True
            )
        sub_parsed = parse_args(GIT_SUBCOMMANDS["log"], rest[1:])
    elif sub == "remote":
        words = _static(rest)
        if words in ([], ["-v"], ["--verbose"]) or (
            words is not None and len(words) == 2 and words[0] == "get-url"
        ):
            return Use(
                verdict="allow", reason="git remote listing", rule=rule, cwd=cwd, reads=tuple(reads)
            )
        return Use(
            verdict="ask", reason="git remote with arguments changes or contacts remotes", rule=rule
        )
    elif sub == "reflog":
        if rest and rest[0] not in ("show",) and not str(rest[0]).startswith("-"):
            return Use(
                verdict="ask", reason="git reflog that is not a listing", rule=rule, writer=True
            )
        sub_parsed = parse_args(
            GIT_SUBCOMMANDS["log"], rest[1:] if rest and rest[0] == "show" else rest
        )
    elif sub in GIT_SUBCOMMANDS:
        sub_parsed = parse_args(GIT_SUBCOMMANDS[sub], rest)
    else:
        return Use(
            verdict="ask", reason=f"git {sub} is not in the safe set", rule=rule, writer=True
        )
    if sub_parsed.error:
        return Use(verdict="ask", reason=f"git {sub}: {sub_parsed.error}", rule=rule)
    refused, sub_reads, sub_writes, _ = _options_use(f"git {sub}", sub_parsed)
    if refused is not None:
        return attrs.evolve(refused, rule=rule)
    sub_operands = _static(sub_parsed.operands)
    if sub_operands is None:
        return Use(
            verdict="ask", reason=f"git {sub}: an operand is computed at run time", rule=rule
        )
    if sub in ("branch", "tag") and sub_operands and not sub_parsed.has("--list"):
        return Use(
            verdict="ask",
            reason=f"git {sub} with a name creates or changes refs",
            rule=rule,
            writer=True,
        )
    for opt, value, _ in sub_parsed.options:
        if opt.canonical in ("--format", "--pretty") and value is not None and "%G" in value:
            return Use(verdict="ask", reason="a %G format checks signatures with gpg", rule=rule)
        if (opt.canonical == "--ignore-submodules" and value not in (None, "all", "dirty")) or (
            opt.canonical == "--submodule" and value == "diff"
        ):
            # git would run git in each submodule, under that repository's own configuration
            why = f"git {sub} {opt.canonical}={value} runs git in each submodule"
            return Use(verdict="ask", reason=f"{why}, whose configuration can name programs",
                       rule=rule)  # fmt: skip
        if opt.canonical == "--submodule" and value != "short":
            # `log` (also the bare option) opens each submodule's repository, wherever its
            # .git file points, and prints its commits' subjects
            return Use(verdict="ask", rule=rule, reason=f"git {sub} --submodule="
                       f"{value or 'log'} reads each submodule's repository, wherever its "
                       ".git file points")  # fmt: skip
    if sub_parsed.has("--no-index") or sub == "diff":
        # git diff is --no-index without the option outside a work tree, or when one of
        # its two paths is outside the repository (git diff /etc/x /dev/null): every
        # operand may be a path it reads
        sub_reads += sub_operands
    if cwd is not None and (sub_reads or len(reads) > 1):
        # paths given to git -C DIR are relative to DIR, not to where the line runs
        return Use(verdict="ask", reason="git -C with file arguments", rule=rule)
    return Use(
        verdict="allow",
        reason=f"git {sub} only reads the repository",
        rule=rule,
        reads=tuple(reads + sub_reads),
        writes=tuple(sub_writes),
        cwd=cwd,
    )


# -- wrappers --------------------------------------------------------------------------------


def _env(args: Argv) -> Use:
    words = list(args)
    cwd: str | None = None
    index = 0
    while index < len(words):
        word = words[index]
        if word is None:
            return _ask("env", "env: an argument is computed at run time")
        if word == "--":
            index += 1
            break
        if not word.startswith("-") or word == "-":
            if word == "-":
                index += 1
                continue
            break
        parsed, consumed = _option_word(ENV_GRAMMAR, word, tuple(words[index + 1 : index + 2]))
        if parsed.error or not parsed.options:
            return _ask("env", f"env: {parsed.error or 'unparsed option'}")
        # every option of a cluster counts: `-vS'sh -c x'` is -v then -S with its string
        for opt, value, _ in parsed.options:
            if opt.canonical == "--split-string":
                if value is None:
                    return _ask("env", "env -S without a string")
                if "$" in value or "\\c" in value:
                    return _ask("env", "env -S with variables in its string")
                try:
                    split = shlex.split(value)
                except ValueError as exc:
                    return _ask("env", f"env -S string cannot be split ({exc})")
                # env's own -S rules (\_, ${VAR}, \c, quotes) are not shlex's: the split is
                # only a guess, good enough for deny rules, never proved
                rest = tuple(split) + tuple(words[index + consumed :])
                return _ask(
                    "env",
                    "env -S splits its string by its own rules, which are not proved",
                    inner=(Inner(argv=_after_env_options(rest), transparent=False),),
                )
            if opt.canonical == "--chdir":
                # the command's relative paths would be judged against the wrong directory
                return _ask("env", "env -C runs the command in another directory")
        index += consumed
    assignments = []
    while (
        index < len(words)
        and words[index] is not None
        and "=" in str(words[index])
        and not str(words[index]).startswith("=")
    ):
        assignments.append(str(words[index]))
        index += 1
    rest = tuple(words[index:])
    if not rest:
        return _ask("env", "env without a command prints the environment, which may hold secrets")
    inner = Inner(argv=rest, transparent=True)
    if assignments:
        unsafe = [a.split("=", 1)[0] for a in assignments if not harmless_assignment(a)]
        if unsafe:
            return _ask(
                "env",
                f"env sets {', '.join(unsafe)}, which can change what a program runs",
                inner=(attrs.evolve(inner, transparent=False),),
            )
    return Use(
        verdict="allow",
        reason="env runs the command",
        rule="model:env",
        cwd=cwd,
        reads=(cwd,) if cwd else (),
        inner=(inner,),
    )


def _after_env_options(words: Argv) -> Argv:
    """The command in what follows ``env -S``: past options and assignments (a guess)."""
    index = 0
    while index < len(words):
        word = words[index]
        if word is None or not (word.startswith("-") or "=" in word):
            break
        index += 1
    return words[index:]


def _option_word(gram: Grammar, word: str, after: Argv) -> tuple[ParsedArgs, int]:
    """One option word of a wrapper, parsed as getopt does, and how many words it takes.

    The word alone when its options need nothing more (``-vu``, ``-uNAME``,
    ``--unset=NAME``); with the next word when its last option takes a value
    and the word ends there (``-iu NAME``, ``-fs KILL``).
    """
    alone = parse_args(gram, (word,))
    if alone.error is None or not after or "needs a value" not in alone.error:
        return alone, 1
    return parse_args(gram, (word, *after)), 2


def _harmless_variable(name: str) -> bool:
    return HARMLESS_VARIABLES.match(name) is not None


# A locale name as glibc and gettext look one up below their own directories: no
# '/' and no '..', so ``LANGUAGE=../../root/i18n`` cannot make a proved program take
# its messages (printf formats: %n writes memory) from a file of the root.
_LOCALE = (
    r"(?:C|POSIX|[A-Za-z]{2,8}(?:_[A-Za-z0-9]{2,8})?)"
    r"(?:\.[A-Za-z0-9_-]{1,32})?(?:@[A-Za-z0-9_-]{1,32})?"
)
_LOCALE_VALUE = re.compile(rf"(?:{_LOCALE})?")
_LANGUAGE_VALUE = re.compile(rf"(?:{_LOCALE}(?::{_LOCALE})*)?")
# A zone name or a POSIX TZ rule; a path (a leading '/' or ':/', or a '..') would
# make the C library read a file of the command's choosing as a zone file.
_TZ_VALUE = re.compile(r"(?!:?/)(?!.*\.\.)[A-Za-z0-9_+<>,.:/-]*")


def harmless_assignment(text: str) -> bool:
    """Whether ``NAME=value`` cannot change which program runs or what it loads.

    Locale variables need a locale name, ``TZ`` a zone name or rule, and
    ``GIT_PAGER``/``PAGER`` ``cat`` or nothing.
    """
    name, _, value = text.partition("=")
    if name in ("GIT_PAGER", "PAGER"):
        return value in ("cat", "")
    if not _harmless_variable(name):
        return False
    if name == "LANGUAGE":
        return _LANGUAGE_VALUE.fullmatch(value) is not None
    if name == "LANG" or name.startswith("LC_"):
        return _LOCALE_VALUE.fullmatch(value) is not None
    if name == "TZ":
        return _TZ_VALUE.fullmatch(value) is not None
    return True


# bash's long options, which it also takes after a single dash (`bash -rcfile FILE`)
_BASH_LONG = frozenset(
    {"debug", "debugger", "dump-po-strings", "dump-strings", "help", "init-file", "login",
     "noediting", "noprofile", "norc", "posix", "pretty-print", "protected", "rcfile",
     "restricted", "verbose", "version", "wordexp"}
)  # fmt: skip
_BASH_LONG_VALUE = frozenset({"rcfile", "init-file"})


def _shell(name: str, args: Argv) -> Use:
    """A shell: never proved (its script is text bash reads again); scripts it runs are judged.

    Options are read the way bash reads them: ``-rcfile``/``--rcfile FILE`` and the
    other long options after one dash or two, clusters (``-ec``), ``-o``/``-O``
    taking the next word, ``--`` or ``-`` ending them.
    """
    index = 0
    wants_c = False
    reads_stdin = False
    startup: str | None = None
    while index < len(args):
        word = args[index]
        if word is None:
            return _ask(name, f"{name}: an option is computed at run time")
        if word in ("--", "-"):
            index += 1
            break
        long = word[2:] if word.startswith("--") else word[1:] if word.startswith("-") else None
        if name in ("bash", "rbash") and long in _BASH_LONG:
            if long in _BASH_LONG_VALUE:
                value = args[index + 1] if index + 1 < len(args) else None
                startup = f"the start-up file {value!r}"
                index += 2
                continue
            if long == "login":
                startup = "the login start-up files"
            index += 1
            continue
        if word.startswith("--"):
            return _ask(name, f"{name}: the option {word!r} is not modelled")
        if word[:1] in "-+" and len(word) > 1:
            cluster = word[1:]
            wants_c = wants_c or "c" in cluster
            reads_stdin = reads_stdin or "s" in cluster
            if "i" in cluster or "l" in cluster:
                startup = startup or "its start-up files (interactive or login)"
            index += 1 + cluster.count("o") + cluster.count("O")
            continue
        break
    bash = name in BASH_LIKE
    runs = f"; it also runs {startup}" if startup else ""
    if wants_c:
        if index >= len(args) or args[index] is None:
            return _ask(name, f"{name} -c runs text computed at run time or missing{runs}")
        inner = Inner(script=str(args[index]), bash_syntax=bash, transparent=False)
        if not bash:
            return _ask(name, f"{name} -c: {name} syntax is not bash's, so it is not "
                        f"proved{runs}", inner=(inner,))  # fmt: skip
        return _ask(name, f"{name} -c reads its script as text again, so it is not proved "
                    f"(run the commands directly){runs}", inner=(inner,))  # fmt: skip
    if index >= len(args) or reads_stdin:
        return _ask(name, f"{name} reads commands from its standard input{runs}")
    return _ask(
        name, f"{name} runs the script file {args[index]!r}, which the policy cannot see{runs}"
    )


def _simple_wrapper(name: str, args: Argv) -> Use:
    parsed_options: list[str] = []
    gram = SIMPLE_WRAPPERS[name]
    index = 0
    script_value: str | None = None
    while index < len(args):
        word = args[index]
        if word is None:
            return _ask(name, f"{name}: an argument is computed at run time")
        if word == "--":
            index += 1
            break
        if not word.startswith("-") or word == "-":
            break
        if name == "nice" and re.fullmatch(r"-[0-9]+", word):
            index += 1
            continue
        parsed, consumed = _option_word(gram, word, args[index + 1 : index + 2])
        if parsed.error or not parsed.options:
            return _ask(name, f"{name}: {parsed.error or 'unparsed option'}")
        for opt, value, _ in parsed.options:
            if opt.role == "unsafe":
                return _ask(name, f"{name} {word}: {opt.why}")
            parsed_options.append(opt.canonical)
            if opt.canonical in ("--command", "-c") and value is not None:
                script_value = value
        index += consumed
    rest = args[index:]
    if name == "timeout":
        rest = rest[1:]  # the duration
    elif name in ("chroot", "sg"):
        if name == "chroot" and rest:
            return _ask(
                name,
                "chroot changes the root directory",
                inner=(Inner(argv=rest[1:], transparent=False),) if len(rest) > 1 else (),
            )
        if name == "sg" and len(rest) > 1:
            if rest[1] == "-c" and len(rest) > 2 and rest[2] is not None:
                return _ask(
                    name,
                    "sg runs a command as another group",
                    inner=(Inner(script=rest[2], transparent=False),),
                )
            return _ask(
                name,
                "sg runs a command as another group",
                inner=(Inner(argv=rest[1:], transparent=False),),
            )
        return _ask(name, f"{name} changes privileges")
    elif name == "flock":
        if script_value is not None:
            return _ask(
                name,
                "flock -c runs a shell command and creates a lock file",
                inner=(Inner(script=script_value, transparent=False),),
            )
        if len(rest) >= 1:
            return _ask(
                name,
                "flock creates a lock file and runs a command",
                inner=(Inner(argv=rest[1:], transparent=False),) if len(rest) > 1 else (),
            )
    elif name == "script":
        inner_s = (Inner(script=script_value, transparent=False),) if script_value else ()
        return _ask(name, "script runs a shell and writes a typescript file", inner=inner_s)
    elif name == "watch":
        if "--exec" in parsed_options:
            return _ask(
                name,
                "watch runs a command repeatedly",
                inner=(Inner(argv=rest, transparent=False),),
            )
        text = " ".join(str(r) for r in rest if r is not None)
        return _ask(
            name, "watch runs a command repeatedly", inner=(Inner(script=text, transparent=False),)
        )
    elif name == "time":
        if "--output" in parsed_options or "--append" in parsed_options:
            return _ask(name, "time -o writes a file", inner=(Inner(argv=rest, transparent=False),))
    elif (
        name == "setsid"
        and (rest or "--fork" in parsed_options)
        and ("--fork" in parsed_options or "--wait" not in parsed_options)
    ):
        # its command leaves the call's session; forked (with --fork, or when setsid
        # leads its process group, as when bash runs it last) and not waited for, it
        # outlives the call, and under `env -i` nothing marks it as the call's
        return _ask(
            name,
            "setsid without --wait (or with --fork) may leave its command running after the call",
            inner=(Inner(argv=rest, transparent=False),) if rest else (),
        )
    elif name == "command" and ("-v" in parsed_options or "-V" in parsed_options):
        return _allow(name, "command -v only looks a name up")
    elif name == "xargs":
        if not rest:
            rest = ("echo",)
        inner_argv = (*(None if (a is not None and "{}" in a) else a for a in rest), None)
        return _ask(
            name,
            "xargs runs a command with arguments read from its input",
            inner=(Inner(argv=inner_argv, transparent=False),),
        )
    if not rest:
        if name in ("exec", "nice", "command", "builtin"):
            return _allow(name, f"{name} without a command")
        return _ask(name, f"{name} without a command")
    transparent = name in TRANSPARENT
    inner = Inner(argv=rest, transparent=transparent)
    if not transparent:
        return _ask(name, f"{name} is not a transparent wrapper", inner=(inner,))
    return Use(
        verdict="allow", reason=f"{name} runs the command", rule=f"model:{name}", inner=(inner,)
    )


def _opaque(name: str, args: Argv) -> Use:
    """A wrapper whose grammar is not modelled: every later word may start a command."""
    candidates: list[Inner] = []
    if name == "busybox" and args and args[0] is not None:
        return _ask(name, "busybox runs an applet", inner=(Inner(argv=args, transparent=False),))
    if name in ("su", "runuser") and args:
        for i, word in enumerate(args[:-1]):
            if word in ("-c", "--command") and args[i + 1] is not None:
                candidates.append(Inner(script=args[i + 1], transparent=False))
    for start in range(len(args)):
        word = args[start]
        if word is not None and not word.startswith("-"):
            candidates.append(Inner(argv=args[start:], transparent=False))
        if len(candidates) > 32:
            break
    return _ask(
        name,
        f"{name} runs another command in a way that is not proved safe",
        inner=tuple(candidates),
    )


def _version(name: str, args: Argv) -> Use | None:
    if name in DISPATCHED_VERSION_QUERY and args in (("--version",), ("-V",)):
        return _ask(
            name,
            f"{name} {args[0]}: {name} is often a version manager's proxy that runs"
            " the program the project's own files name",
        )
    if name not in VERSION_QUERY:
        return None
    if args == ("--version",):
        return _allow(name, f"{name} {args[0]} only prints a version")
    return None


def _cd(args: Argv) -> Use:
    parsed = parse_args(PROGRAM_GRAMMARS["cd"], args)
    operands = _static(parsed.operands) if not parsed.error else None
    if operands is None or len(operands) > 1:
        return _ask("cd", f"cd: {parsed.error or 'an unusual operand'}")
    target = operands[0] if operands else (os.environ.get("HOME") or os.path.expanduser("~"))
    if target == "-":
        return _ask("cd", "cd - depends on the shell's previous directory")
    return Use(
        verdict="allow", reason="cd changes directory", rule="model:cd", cwd=target, reads=(target,)
    )


def _echo(args: Argv) -> Use:
    # bash's echo takes only leading words made of n, e and E as options; the rest is text
    if any(a is None for a in args):
        return _ask("echo", "echo: an argument is computed at run time")
    return _allow("echo")


def _printf(args: Argv) -> Use:
    if args and args[0] is not None and args[0].startswith("-v"):
        # the name may be `a[$(cmd)]`: bash runs cmd, which no deny rule sees
        return _ask("printf", "printf -v assigns a shell variable", rule="subscript")
    if any(a is None for a in args):
        return _ask("printf", "printf: an argument is computed at run time")
    words = [str(a) for a in args]
    if words and words[0] == "--":
        words = words[1:]
    elif words and words[0].startswith("-") and words[0] != "-":
        return _ask("printf", f"printf: the option {words[0]!r} is not modelled")
    why = printf_format_unsafe(words[0]) if words else None
    if why is None:
        return _allow("printf")
    if printf_assigns(words[0]):
        # %n (also %hn, %ln: bash skips length modifiers) assigns the variable its
        # argument names: PATH, IFS, CDPATH... for the rest of the line
        return _ask("printf", "printf %n assigns a shell variable", rule="subscript")
    return _ask("printf", f"printf format: {why}")


def _eval(name: str, args: Argv) -> Use:
    if name != "eval":
        return _ask(name, f"{name} runs a script file the policy cannot see")
    if any(a is None for a in args):
        return _ask(name, "eval of text computed at run time")
    return _ask(
        name,
        "eval runs text as a command line; it is never proved safe",
        inner=(Inner(script=" ".join(str(a) for a in args), transparent=False),),
    )


def _builtin_text(name: str, args: Argv) -> Use:
    if any(a is None for a in args):
        return _ask(name, f"{name}: an argument is computed at run time")
    if name in ("test", "["):
        words = tuple(a for a in args if a is not None)
        why = builtin_test_unsafe(words)
        if why is not None:
            # what bash evaluates there is never seen by a deny rule: never confined either
            return _ask(name, f"{name}: {why}", rule="subscript")
        # a file test reads (stats) its file: it must be inside the roots, as stat's
        return _allow(name, reads=_test_files(words[:-1] if name == "[" else words))
    return _allow(name)


# test's unary operators that look at a file (-t takes a descriptor), and its binary ones
_TEST_FILE_UNARY = frozenset(f"-{letter}" for letter in "abcdefghkprsuwxGLNOS")
_TEST_FILE_BINARY = frozenset({"-nt", "-ot", "-ef"})


def _test_files(words: tuple[str, ...]) -> tuple[str, ...]:
    """The operands ``test`` may look up as files (a superset: ``-a`` may be "and")."""
    files: list[str] = []
    for index, word in enumerate(words):
        if word in _TEST_FILE_UNARY and index + 1 < len(words):
            files.append(words[index + 1])
        elif word in _TEST_FILE_BINARY and 0 < index < len(words) - 1:
            files += [words[index - 1], words[index + 1]]
    return tuple(files)


_DISPATCH: dict[str, Callable[[str, Argv], Use]] = {
    "sed": lambda _n, a: _sed(a),
    "find": lambda _n, a: _find(a),
    "git": lambda _n, a: _git(a),
    "env": lambda _n, a: _env(a),
    "cd": lambda _n, a: _cd(a),
    "printf": lambda _n, a: _printf(a),
    "xxd": lambda _n, a: _xxd(a),
    "echo": lambda _n, a: _echo(a),
    "eval": _eval,
    "source": _eval,
    ".": _eval,
    **dict.fromkeys(("awk", "gawk", "mawk", "nawk"), _awk),
    **dict.fromkeys(BUILTIN_TEXT, _builtin_text),
    **dict.fromkeys(SHELLS, _shell),
    **dict.fromkeys(SIMPLE_WRAPPERS, _simple_wrapper),
    **dict.fromkeys(OPAQUE_WRAPPERS, _opaque),
}
SAFE_PROGRAMS: frozenset[str] = frozenset(
    (set(PROGRAM_GRAMMARS) - {"mkdir", "touch", "tee", "cp", "mv"})
    | {"sed", "find", "git", "cd", "printf"}
    | BUILTIN_TEXT
)
"""Programs with a model that can prove a call read-only (given its options and paths)."""
CANNOT_RUN_PROGRAMS: frozenset[str] = SAFE_PROGRAMS - {
    "find", "git", "sed", "awk", "gawk", "mawk", "nawk", "rg", "sort", "xargs", "env",
    # bash evaluates an array subscript given to `test -v` or `printf -v`
    "test", "[", "printf",
}  # fmt: skip
"""Safe-set programs that start no other program, whatever their arguments."""


def describe(argv: Argv) -> Use:
    """What ``argv`` does, by its program's model (``argv[0]`` must be static)."""
    name = posixpath.basename(str(argv[0]))
    args = argv[1:]
    if "/" in str(argv[0]):
        use = describe((name, *args)) if name in WRAPPERS else None
        inner = use.inner if use is not None else ()
        return _ask(
            name,
            f"{argv[0]!r} names a program by path, not from the safe set",
            inner=inner,
            rule="path-qualified",
        )
    version = _version(name, args)
    if version is not None:
        return version
    handler = _DISPATCH.get(name)
    if handler is not None:
        return handler(name, args)
    if name in PROGRAM_GRAMMARS:
        return _generic(name, args)
    return Use(verdict="ask", reason=f"{name!r} is not in the safe set", rule="unknown-program")
