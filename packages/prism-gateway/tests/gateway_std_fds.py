"""This process's fd 0 and fd 1 on pipes, for tests of a gateway served on stdio in process."""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator


@contextmanager
def std_fds_on_pipes() -> Iterator[tuple[int, int]]:
    """fd 0 and fd 1 replaced by pipes; the ends to write to fd 0 and read fd 1 from."""
    to_stdin, stdin = os.pipe()
    stdout, from_stdout = os.pipe()
    saved = [os.dup(0), os.dup(1)]
    os.dup2(to_stdin, 0)
    os.dup2(from_stdout, 1)
    os.close(to_stdin)
    os.close(from_stdout)
    try:
        yield stdin, stdout
    finally:
        for fd, original in enumerate(saved):
            os.dup2(original, fd)
            os.close(original)
