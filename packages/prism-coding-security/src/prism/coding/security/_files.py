"""Reading the small files of a root that Prism itself looks at (every one is hostile)."""

from __future__ import annotations

import os
import stat

__all__ = ["open_regular_file", "read_regular_file"]


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
