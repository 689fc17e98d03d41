"""prism.cli: the ``prism`` command (coming with the CLI issue)."""

import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``prism`` command."""
    del argv
    sys.stdout.write("prism: the CLI is coming; see the README.\n")
    return 0
