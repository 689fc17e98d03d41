"""``sed -i`` read as a filter: the same ``sed`` without ``-i``, and the files it edits.

GNU ``sed -i`` edits each file alone (``-i`` implies ``-s``: line numbers, ``$``
and ranges start again with each file) and writes what it prints to a new file
that then takes the file's name. When its script stays in the subset of
:func:`._languages.sed_script_unsafe` (no ``w``, ``r``, ``e`` or
``s///e``/``w``) without ``q``, ``Q`` or ``F`` (which treat the files otherwise
than one by one) and, for more than one file, without ``x g G h H`` (GNU sed
carries something of the hold space from one file to the next: a line kept
there without its newline prints without one in the next file), running the
same ``sed`` without ``-i`` on each file's content as standard input prints
exactly what ``sed -i`` writes. The options kept are those that do not name a
file: ``-n -E -r -z -u -l -b --posix --sandbox`` and the ``-e`` scripts; ``-s``
and ``--follow-symlinks`` are dropped (each file is already alone, and no link
is edited this way); ``--debug`` (its listing would go into the file) and
``-f`` are not read.
"""

from __future__ import annotations

import attrs

from ._argv import parse_args
from ._grammars import PROGRAM_GRAMMARS
from ._languages import sed_script_unsafe

__all__ = ["MAX_EDITED_FILES", "SedFilter", "sed_filter"]

MAX_EDITED_FILES = 8  # more: one sandbox a file costs more than one private layer
_FLAGS = {
    "--quiet": "-n",
    "--regexp-extended": "-E",
    "--null-data": "-z",
    "--unbuffered": "-u",
    "--binary": "-b",
    "--posix": "--posix",
    "--sandbox": "--sandbox",
}
_DROPPED = frozenset({"--separate", "--follow-symlinks"})
# `q` and `Q` leave every later file unread, `F` prints the file's name
_NOT_ALONE = "qQF"
# GNU sed -i carries something of the hold space from one file to the next (a line kept
# there without its newline prints without one in the next file): with several files,
# no command that touches it
_HOLD = "xgGhH"


@attrs.frozen
class SedFilter:
    """The filter's argv (no ``-i``, no file), the files as written, the backup suffix."""

    argv: tuple[str, ...]
    files: tuple[str, ...]
    suffix: str


def sed_filter(argv: tuple[str, ...]) -> SedFilter | None:
    """``argv`` (a ``sed -i`` command) as a filter, or None when it is not one."""
    if not argv:
        return None
    parsed = parse_args(PROGRAM_GRAMMARS["sed"], argv[1:])
    if parsed.error or any(o is None for o in parsed.operands):
        return None
    out = [argv[0]]
    scripts: list[str] = []
    suffix: str | None = None
    for opt, value, _spelling in parsed.options:
        name = opt.canonical
        if name == "--in-place":
            suffix = value or ""  # the last -i counts; a bare one keeps no backup
        elif name == "--expression" and value is not None:
            out += ["-e", value]
            scripts.append(value)
        elif name == "--line-length" and value is not None:
            out += ["-l", value]
        elif name in _FLAGS:
            out.append(_FLAGS[name])
        elif name not in _DROPPED:
            return None  # --debug, --file, and anything not listed here
    operands = [str(o) for o in parsed.operands]
    if not scripts:
        if not operands:
            return None
        scripts = [operands.pop(0)]
        out += ["-e", scripts[0]]
    if suffix is None or "/" in suffix or "*" in suffix:
        return None
    if not operands or len(operands) > MAX_EDITED_FILES or "-" in operands:
        return None
    # GNU sed joins the -e parts with newlines before it reads them
    refused = _NOT_ALONE + (_HOLD if len(operands) > 1 else "")
    if sed_script_unsafe("\n".join(scripts), refused=refused) is not None:
        return None
    return SedFilter(tuple(out), tuple(operands), suffix)
