"""Reading the small files of a root that Prism itself looks at (every one is hostile)."""

from __future__ import annotations

import os
import stat

__all__ = ["open_regular_file", "read_regular_file", "shell_text"]


def open_regular_file(path: str) -> int | None:
    """A descriptor of the regular file at ``path`` (the caller closes it); None for anything else.

    Opened without following a link and without blocking, so a link cannot
    redirect the read and a FIFO planted in a root is never waited on.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except BaseException:
        os.close(fd)
        raise
    if not regular:
        os.close(fd)
        return None
    return fd


def read_regular_file(path: str, limit: int) -> bytes | None:
    """At most ``limit`` bytes of a regular file; None for anything else.

    Opened as :func:`open_regular_file` opens it.
    """
    fd = open_regular_file(path)
    if fd is None:
        return None
    try:
        chunks: list[bytes] = []
        size = 0
        while size < limit:
            chunk = os.read(fd, min(1 << 20, limit - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def shell_text(data: bytes) -> str | None:
    r"""A file's bytes as the text sh and bash read from it; None for a native program.

    Both shells drop each NUL byte of a script (``ch\0eck.sh`` is ``check.sh``)
    and end a line at a newline only: a carriage return, a form feed or a line
    separator is a character of the word it is in, so the text is split with
    ``split("\n")``, never ``splitlines``. A name that is not UTF-8 keeps its
    bytes (``surrogateescape``)::

        >>> shell_text(b"sh scripts/ch\0eck.sh\r\n")
        'sh scripts/check.sh\r\n'
    """
    if data.startswith(b"\x7fELF"):
        return None  # (the kernel runs it; no shell reads it)
    return data.replace(b"\0", b"").decode("utf-8", "surrogateescape")
