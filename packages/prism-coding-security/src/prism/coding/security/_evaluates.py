"""Whether a line can run a program that is not written in it (for deny rules in confined mode).

Deny rules match the commands written in a line. Bash can also run code held
in text: command substitutions nested inside parameter expansions (which the
parser does not open), array subscripts and arithmetic (which evaluate
variables' values, and ``a[$(cmd)]`` in them, as code), prompt expansion
(``${x@P}``, ``PS4`` with ``set -x``), and builtins that take a command string
or evaluate names and assignments given as text (``trap``, ``mapfile -C``,
``alias``, ``hash -p``, ``let``, ``read 'a[..]'``, ``declare -a``...).

:func:`evaluates_code` says why a line may do that, or None. It does not try
to list the dangerous builtins: every builtin asks except a closed list of
those known never to evaluate their arguments (:data:`INERT_BUILTINS`), and
a few more when their arguments are plain names. The policy makes a line
that may do this ask (instead of running confined) whenever deny rules exist.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ._languages import printf_assigns
from ._words import _WordError, expand_word

if TYPE_CHECKING:
    from ._commands import Script, SimpleCommand, Word

__all__ = ["BASH_BUILTINS", "INERT_BUILTINS", "evaluates_code"]

BASH_BUILTINS = frozenset({
    ".", ":", "[", "alias", "bg", "bind", "break", "builtin", "caller", "cd", "command",
    "compgen", "complete", "compopt", "continue", "declare", "dirs", "disown", "echo",
    "enable", "eval", "exec", "exit", "export", "false", "fc", "fg", "getopts", "hash", "help",
    "history", "jobs", "kill", "let", "local", "logout", "mapfile", "popd", "printf", "pushd",
    "pwd", "read", "readarray", "readonly", "return", "set", "shift", "shopt", "source",
    "suspend", "test", "times", "trap", "true", "type", "typeset", "ulimit", "umask",
    "unalias", "unset", "wait",
    # reserved words a parser may hand over as words
    "[[", "]]", "((", "time", "coproc", "select", "function",
})  # fmt: skip
"""Bash 5's builtins (``compgen -b``) and the reserved words that start a command."""

INERT_BUILTINS = frozenset({
    ":", "true", "false", "echo", "pwd", "cd", "pushd", "popd", "dirs", "exit", "return",
    "break", "continue", "shift", "umask", "times", "type", "help", "ulimit", "kill", "shopt",
})  # fmt: skip
"""Builtins that never evaluate an argument as code, a subscript or an arithmetic expression.

Checked against bash 5.2: their numeric arguments are read as numbers, not
evaluated (``shift 'a[$(cmd)]'`` is an error, nothing runs). ``eval`` is not
here but is allowed with static text: that text is parsed and judged like the
line itself. ``test``/``[``, ``printf``, ``set``, ``wait``, ``read``,
``unset``, ``command``, ``exec`` and the declaration builtins are allowed in
the forms :func:`_builtin` lists.
"""

# variables whose value bash runs or expands as code later (prompts with `set -x`,
# start-up files of child shells, the command hash and alias tables, shell options)
_EVALUATED_VARIABLES = frozenset({
    "PS0", "PS1", "PS2", "PS3", "PS4", "PROMPT_COMMAND", "BASH_ENV", "ENV", "BASH_CMDS",
    "BASH_ALIASES", "SHELLOPTS", "BASHOPTS", "BASH_LOADABLES_PATH", "EXECIGNORE",
})  # fmt: skip
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EVALUATED_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_])(?:" + "|".join(sorted(_EVALUATED_VARIABLES)) + r")\+?="
)
_ELEMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\[")
_ASSIGNED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\+?=")
_PLAIN_ARITHMETIC = re.compile(r"[0-9\s+\-*/%()<>=!&|^~?:]*")
# ${ body }: a name (or special parameter) and what follows it
_PARAMETER = re.compile(r"#?([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])(.*)", re.DOTALL)
_OFFSET = re.compile(r":[\s0-9:()-]*")
_DECLARATION_OPTIONS = frozenset("xrgp")
_HEREDOC = re.compile(r"<<(?!<)")


def _name(word: Word) -> str | None:
    if word.dynamic:
        return None
    try:
        values = expand_word(word.raw, cwd="/nonexistent").values
    except _WordError:
        return None
    return values[0] if len(values) == 1 else None


def _static(words: tuple[Word, ...]) -> list[str] | None:
    out = []
    for word in words:
        value = _name(word)
        if value is None:
            return None
        out.append(value)
    return out


def _plain_names(operands: list[str]) -> bool:
    return all(_NAME.fullmatch(o) is not None and o not in _EVALUATED_VARIABLES for o in operands)


def _declaration(words: tuple[Word, ...]) -> bool:
    """``export``/``local``/``declare``... of plain names and ``NAME=value`` words only."""
    for word in words:
        raw = word.raw
        if raw.startswith("-"):
            if word.dynamic or not set(raw[1:]) <= _DECLARATION_OPTIONS:
                return False
            continue
        match = _ASSIGNED.match(raw)
        name = match.group(1) if match else raw
        if _NAME.fullmatch(name) is None or name in _EVALUATED_VARIABLES:
            return False
        # the value is text (no -a/-A/-i/-n), unless it is compound: NAME=(...)
        if match is None and word.dynamic:
            return False
        if match is not None and raw[match.end() :].lstrip("\"'").startswith("("):
            return False
    return True


def _builtin(name: str, words: tuple[Word, ...]) -> str | None:
    """Why the builtin ``name`` with argument ``words`` may evaluate text, or None."""
    if name in INERT_BUILTINS:
        return None
    args = _static(words)
    if name == "eval" and args is not None:
        return None  # its text is parsed and judged as a script
    if name in ("test", "[") and args is not None and not {"-v", "-R"} & set(args):
        return None
    if (
        name == "printf"
        and args is not None
        and not any(a.startswith("-v") or printf_assigns(a) for a in args)
    ):
        return None  # %n (also %hn) assigns the variable its argument names, subscript too
    if name == "set" and args is not None:
        options = [a for a in args if a.startswith(("-", "+")) and a not in ("-", "--")]
        if not any("x" in a for a in options) and "xtrace" not in args:
            return None  # xtrace expands PS4
    if name in ("wait", "read", "unset") and args is not None:
        operands = [a for a in args if not a.startswith("-")]
        if name == "read":
            # option values (a prompt, a delimiter) are text; only names can hold subscripts
            operands = [a for a in args if _NAME.fullmatch(a) or "[" in a]
        if ("-p" not in args or name == "read") and _plain_names(operands):
            return None
    if name == "command" and args is not None and args[:1] in (["-v"], ["-V"]):
        return None
    if name == "exec" and not words:
        return None  # only redirections
    if name in ("export", "local", "readonly", "declare", "typeset") and _declaration(words):
        return None
    return f"the builtin {name!r} can run or evaluate text given to it"


def _command(command: SimpleCommand) -> str | None:
    for assignment in command.assignments:
        match = _ASSIGNED.match(assignment.raw)
        if match is None or match.group(1) in _EVALUATED_VARIABLES:
            return f"the assignment {assignment.raw!r} sets what bash evaluates as code"
    if not command.words:
        return None
    if _ELEMENT.match(command.words[0].raw):
        return f"the assignment {command.words[0].raw!r} evaluates a subscript"
    name = _name(command.words[0])
    if name is None:
        return "the command name is not plain text (it could name a builtin)"
    if name not in BASH_BUILTINS:
        return None  # a program cannot run bash text in this shell
    return _builtin(name, command.words[1:])


def _quoted_end(source: str, index: int) -> int:
    """The index after the quoted string that starts at ``index`` (-1: unterminated)."""
    quote = source[index]
    ansi = quote == "'" and index > 0 and source[index - 1] == "$"
    at = index + 1
    while at < len(source):
        char = source[at]
        if char == "\\" and (quote == '"' or ansi):
            at += 2
            continue
        if char == quote:
            return at + 1
        at += 1
    return -1


def _closing(source: str, start: int) -> int:
    """The index after the ``}`` that closes the ``${`` before ``start`` (-1: none)."""
    depth = 1
    index = start
    while index < len(source):
        char = source[index]
        if char == "\\":
            index += 2
            continue
        if char in "'\"":
            index = _quoted_end(source, index)
            if index < 0:
                return -1
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    return -1


def _parameter(body: str) -> str | None:
    """Why the parameter expansion ``${body}`` may evaluate code, or None."""
    if "$(" in body or "`" in body:
        return "a command substitution inside a parameter expansion"
    if "[" in body:
        return "an array subscript or pattern (subscripts are evaluated as arithmetic)"
    if body.startswith("!"):
        return "an indirect expansion (it evaluates the name it finds)"
    match = _PARAMETER.fullmatch(body)
    if match is None:
        return "a parameter expansion that is not plain"
    name, rest = match.groups()
    if rest.startswith("@"):
        return "a parameter transformation (${x@P} expands a prompt)"
    if rest[:1] in ("=", ":") and rest[1:2] != "-" and name in _EVALUATED_VARIABLES:
        return f"a parameter expansion that assigns {name}"
    offset = rest.startswith(":") and rest[1:2] not in ("-", "=", "?", "+")
    if offset and _OFFSET.fullmatch(rest) is None:
        return "a substring offset (evaluated as arithmetic)"
    return None


_ARITHMETIC = "an arithmetic expansion (it evaluates variables' values as code)"


def _source(source: str) -> str | None:
    """Why the text of a line may evaluate code outside its written commands, or None.

    Where this scan and bash could disagree about quoting (an unterminated
    quote, a here-document holding quotes), it gives a reason: it never passes
    over text it cannot place.
    """
    if _HEREDOC.search(source) and any(q in source for q in "'\"\\"):
        return "a here-document and quotes (where its text ends is bash's to decide)"
    if "BASH_FUNC_" in source:
        return "a function exported through the environment"
    if _EVALUATED_ASSIGNMENT.search(source):
        return "a variable that bash expands as code later, given to a program (env, a shell)"
    index = 0
    double = False
    while index < len(source):
        char = source[index]
        if char == "\\":
            index += 2
            continue
        if char == "'" and not double:
            index = _quoted_end(source, index)
            if index < 0:
                return "an unterminated quote"
            continue
        if char == "#" and not double and (index == 0 or source[index - 1] in " \t\n;&|()"):
            end = source.find("\n", index)
            index = len(source) if end < 0 else end
            continue
        if char == '"':
            double = not double
        elif source.startswith("$((", index):
            end = source.find("))", index)
            if end < 0 or _PLAIN_ARITHMETIC.fullmatch(source[index + 3 : end]) is None:
                return _ARITHMETIC
            index = end + 2
            continue
        elif source.startswith("$[", index):
            return _ARITHMETIC
        elif source.startswith("${", index):
            end = _closing(source, index + 2)
            if end < 0:
                return "an unterminated parameter expansion"
            why = _parameter(source[index + 2 : end - 1])
            if why is not None:
                return why
        elif not double and source.startswith(("((", "[["), index):
            return f"the {source[index : index + 2]} command evaluates its operands' values"
        index += 1
    if double:
        return "an unterminated quote"
    return None


def evaluates_code(script: Script) -> str | None:
    """Why ``script`` may run a program that is not written in it, or None (see the module)."""
    why = _source(script.source)
    if why is not None:
        return why
    for command in script.commands:
        why = _command(command)
        if why is not None:
            return why
    return None
