"""The argvs an example command line would run, for checking a rule's examples."""

from __future__ import annotations

from ._commands import MAX_NESTING, parse_script
from ._programs import describe
from ._words import _WordError, expand_word

__all__ = ["example_argvs"]


def example_argvs(example: str) -> list[tuple[str | None, ...]]:
    """Every argv (wrapper layers included) an example command line would run."""
    out: list[tuple[str | None, ...]] = []

    def walk(argv: tuple[str | None, ...], depth: int) -> None:
        if not argv or argv[0] is None or depth > MAX_NESTING:
            return
        out.append(argv)
        for inner in describe(argv).inner:
            if inner.argv:
                walk(inner.argv, depth + 1)
            elif inner.script is not None:
                scripts(inner.script, depth + 1)

    def scripts(source: str, depth: int) -> None:
        for command in parse_script(source).commands:
            argv: list[str | None] = []
            for word in command.words:
                try:
                    argv.extend(expand_word(word.raw, cwd="/nonexistent").values)
                except _WordError:
                    argv.append(None)
            walk(tuple(argv), depth)

    scripts(example, 0)
    return out
