"""Strict sub-grammars of the languages safe-set programs interpret: sed, jq, awk, test.

Each checker reads its program's text with that program's own lexical rules
and accepts only a small, documented subset; anything else (or anything it
cannot read with certainty) returns the reason it is not proved, and the
command asks.
"""

from __future__ import annotations

import re

__all__ = [
    "awk_program_unsafe",
    "builtin_test_unsafe",
    "jq_filter_unsafe",
    "printf_assigns",
    "printf_format_unsafe",
    "sed_script_unsafe",
]

# -- sed ------------------------------------------------------------------------------------

_SED_PLAIN = frozenset("pdDnNgGhHxlzP=F")
_SED_LABEL = re.compile(r"[A-Za-z0-9_]+")
_SED_ENDS = frozenset(";\n")


def _sed_regex(script: str, i: int, delim: str) -> int:
    """The index after a regex (or ``y`` part) ended by ``delim``; -1 when not certain.

    GNU sed skips a bracket expression as a whole: ``s/[/]/x/`` has the regex
    ``[/]``. A bracket holding the delimiter, a backslash or a newline is refused.
    """
    n = len(script)
    while i < n:
        ch = script[i]
        if ch == "\\":
            if i + 1 >= n or script[i + 1] == "\n":
                return -1
            i += 2
            continue
        if ch == "\n":
            return -1
        if ch == "[":
            end = i + 1
            if end < n and script[end] == "^":
                end += 1
            if end < n and script[end] == "]":
                end += 1
            while end < n and script[end] != "]":
                if script[end] in (delim, "\\", "\n"):
                    return -1
                if script[end] == "[" and end + 1 < n and script[end + 1] in ":.=":
                    # [:alpha:], [.x.], [=e=]: skipped whole, and as strict
                    close = script.find(script[end + 1] + "]", end + 2)
                    inner = script[end + 2 : close]
                    if close < 0 or any(c in inner for c in (delim, "\\", "\n", "[")):
                        return -1
                    end = close + 2
                    continue
                end += 1
            if end >= n:
                return -1
            i = end + 1
            continue
        if ch == delim:
            return i + 1
        i += 1
    return -1


def _sed_replacement(script: str, i: int, delim: str) -> int:
    n = len(script)
    while i < n:
        ch = script[i]
        if ch == "\\":
            if i + 1 >= n or script[i + 1] == "\n":
                return -1
            i += 2
            continue
        if ch == "\n":
            return -1
        if ch == delim:
            return i + 1
        i += 1
    return -1


def _sed_address(script: str, i: int) -> int:
    """The index after an address (or -1); ``i`` is where one may start."""
    n = len(script)
    if i < n and script[i] in "/\\":
        delim = "/"
        if script[i] == "\\":
            if i + 1 >= n or script[i + 1] in "\\\n":
                return -1
            delim = script[i + 1]
            i += 1
        i = _sed_regex(script, i + 1, delim)
        if i < 0:
            return -1
        while i < n and script[i] in "IM":
            i += 1
        return i
    start = i
    while i < n and (script[i].isdigit() or script[i] in "$~+"):
        i += 1
    return i if i > start else start


def sed_script_unsafe(script: str, *, refused: str = "") -> str | None:
    r"""None when ``script`` (all ``-e`` parts joined by newlines) stays in the subset.

    The subset: addresses (numbers, ``$``, ``first~step``, ``/re/`` and ``\cREc``
    with ``I``/``M``, ranges, ``!``), blocks ``{ }``, the commands
    ``p d D n N g G h H x l z P = F q Q``, ``s`` with the flags ``g p i I m M``
    and a number, ``y``, and labels ``:name`` / ``b`` ``t`` ``T`` with a name of
    letters, digits and ``_`` ended by ``;`` or a newline (GNU sed ends a label
    at whitespace, so ``:a w FILE`` would write). No ``e``, ``w``, ``r``,
    ``R``, ``W``, ``a``, ``i``, ``c``, ``v``, comments or ``s///e``/``w``.

    ``refused``: commands also left out (``sed -i`` read as a filter of each
    file alone: see :mod:`._sedfilter`).
    """
    i = 0
    n = len(script)
    while i < n:
        ch = script[i]
        if ch in " \t;\n}":
            i += 1
            continue
        start = i
        i = _sed_address(script, i)
        if i < 0:
            return "an address that is not read with certainty"
        if i > start and i < n and script[i] == ",":
            i = _sed_address(script, i + 1)
            if i < 0:
                return "an address that is not read with certainty"
        while i < n and script[i] in " \t!":
            i += 1
        if i >= n:
            return "an address without a command"
        ch = script[i]
        i += 1
        if ch in refused:
            return f"the sed command {ch!r} does not edit each file alone"
        if ch == "{" or ch in _SED_PLAIN:
            continue
        if ch in "qQ":
            while i < n and script[i].isdigit():
                i += 1
            continue
        if ch in ":btT":
            if ch != ":":
                while i < n and script[i] in " \t":
                    i += 1
            label = _SED_LABEL.match(script, i)
            if label is not None:
                i = label.end()
            elif ch == ":":
                return "a label that is not letters, digits and '_'"
            while ch != ":" and i < n and script[i] in " \t":
                i += 1
            if i < n and script[i] not in _SED_ENDS and not (ch != ":" and script[i] == "}"):
                return f"the label after {ch!r} is not ended by ';' or a newline"
            continue
        if ch in "sy":
            if i >= n or script[i] in "\\\n":
                return f"an unusual {ch!r} delimiter"
            delim = script[i]
            i = (
                _sed_regex(script, i + 1, delim)
                if ch == "s"
                else _sed_replacement(script, i + 1, delim)
            )
            if i >= 0:
                i = _sed_replacement(script, i, delim)
            if i < 0:
                return f"an {ch!r} command that is not read with certainty"
            if ch == "s":
                start = i
                while i < n and script[i] in "gpiImM0123456789":
                    i += 1
                if i < n and script[i] not in " \t;\n}":
                    return f"the s flag {script[i]!r} can run commands or write files"
            continue
        return f"the sed command {ch!r} can run commands, read or write files"
    return None


# -- jq -------------------------------------------------------------------------------------

_JQ_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_JQ_REFUSED = frozenset(
    {
        "env",
        "ENV",
        "import",
        "include",
        "modulemeta",
        "get_search_list",
        "get_prog_origin",
        "get_jq_origin",
        "input_filename",
        "__prog_args",
        "splits_env",
    }
)


def jq_filter_unsafe(text: str) -> str | None:
    r"""None when a jq filter names nothing that reads the environment or loads code.

    jq has comments (``#`` to the end of the line, which a backslash can continue
    in newer versions): a filter with ``#`` anywhere is refused, so nothing can
    hide between ``$`` and a name. Every identifier in the text (inside strings
    too, where ``\(...)`` runs code) is checked; ``env``, ``$ENV``, ``import``,
    ``include``, ``modulemeta`` and the like are refused unless written as an
    object key after a single ``.`` (``.env``).
    """
    if "#" in text:
        return "a '#' (jq comments can hide what follows)"
    for match in _JQ_IDENT.finditer(text):
        if match.group() not in _JQ_REFUSED:
            continue
        before = text[: match.start()].rstrip(" \t\r\n")
        if before.endswith(".") and not before.endswith(".."):
            continue  # a key: .env
        return f"it names {match.group()!r}, which reads the environment or loads modules"
    return None


# -- awk ------------------------------------------------------------------------------------

_AWK_DANGER = re.compile(
    r"system|getline|[|>]|@|close|fflush|ENVIRON|PROCINFO|ARGV|ARGC|SYMTAB|FUNCTAB"
    r"|bindtextdomain|dcn?gettext|TEXTDOMAIN|\bsubsep|\\\r?\n"
)


def awk_program_unsafe(program: str) -> str | None:
    """None when an awk program cannot run commands, read the environment or write files.

    Refused anywhere in the text (comments and strings included): ``system``,
    ``getline``, ``|``, ``>`` (so also comparisons), ``@`` (indirect calls,
    ``@include``), ``close``, ``fflush``, ``ENVIRON``, ``PROCINFO``, ``ARGV``,
    ``ARGC``, gawk's ``SYMTAB`` and ``FUNCTAB`` (they reach those arrays and
    functions by a computed name: ``SYMTAB["ENV" "IRON"]``), its message-catalog
    functions and ``TEXTDOMAIN`` (they read a directory the program names), and a
    backslash-newline (a continuation could join a name).
    """
    found = _AWK_DANGER.search(program)
    if found is None:
        return None
    return f"it holds {found.group()!r}, which may run commands, read the environment or write"


# -- printf ------------------------------------------------------------------------------

# One conversion of bash's printf, as bash reads it: flags, width, precision, any of
# the length modifiers bash skips (so `%hn` is `%n`), then a conversion of the closed
# set below; `%n` (assigns a shell variable) and anything else is not in it.
_PRINTF_SPEC = r"%[#'+ 0-]*(?:\*|[0-9]+)?(?:\.(?:\*|[0-9]*))?[hjlLtz]*"
_PRINTF_CONVERSION = re.compile(rf"%%|{_PRINTF_SPEC}(?:[csbqQdiouxXeEfFgGaA]|\([^)]*\)T)")
_PRINTF_ASSIGNS = re.compile(rf"{_PRINTF_SPEC}n")


def printf_format_unsafe(text: str) -> str | None:
    """Why bash's printf format ``text`` is not proved: every ``%`` must start a known conversion.

    A backslash escape never takes a ``%`` (bash prints a backslash, then reads the
    conversion), so every ``%`` of the text is where bash reads a conversion.
    """
    position = text.find("%")
    while position >= 0:
        match = _PRINTF_CONVERSION.match(text, position)
        if match is None:
            return f"the conversion at {text[position : position + 8]!r} is not a proved one"
        position = text.find("%", match.end())
    return None


def printf_assigns(text: str) -> bool:
    """Whether a ``%`` of ``text`` may be bash's ``%n`` (it assigns the variable named next)."""
    return _PRINTF_ASSIGNS.search(text) is not None


# -- test / [ -------------------------------------------------------------------------------


def builtin_test_unsafe(args: tuple[str, ...]) -> str | None:
    """None when ``test``/``[`` cannot evaluate code in its operands.

    bash evaluates a name's array subscript for ``-v`` and ``-R``
    (``test -v 'a[$(cmd)]'``, and ``test -v 'b[_]'`` through ``$_``): both are
    refused, and so is any ``$`` or backquote.
    """
    for arg in args:
        if arg in ("-v", "-R"):
            return f"{arg} makes bash evaluate an array subscript"
        if "$" in arg or "`" in arg:
            return "an operand holds '$' or '`', which bash may evaluate"
    return None
