""":func:`main`, the ``prism`` command's entry point, before the command line is loaded.

``prism serve`` over stdio starts answering the host's ``initialize`` here
(see ``_front``), while the rest (click, the commands, Prism's packages, the
MCP SDK) is imported.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``prism`` command with ``argv`` (default: ``sys.argv[1:]``); return the exit code.

    Usage errors and the command's own errors (bad config, bad session file, a
    server that will not start) print one line to stderr and return 2.
    """
    from . import _front

    args = list(sys.argv[1:] if argv is None else argv)
    _front.start(args)
    try:
        from ._app import main as run

        return run(args)
    finally:
        _front.take()  # (when serving did not take it: the command failed first)
