"""Resource limits for sandboxed commands, applied by ``prlimit`` (util-linux).

``prlimit`` runs inside the sandbox as the first program: it sets the limits
on itself and ``exec``s the command, so they hold for the command and are
inherited by everything it starts. (A ``preexec_fn`` would do the same from
Python, but is unsafe in a process with threads.)
"""

from __future__ import annotations

from prism.core.options import integer, optional

from ._errors import SandboxUnavailableError
from ._executables import host_program

__all__ = ["CPU_TIME", "MEMORY", "PROCESSES", "prlimit_args"]

CPU_TIME = optional(integer(minimum=1))
"""``cpu_time_s``: None, or CPU seconds >= 1."""
MEMORY = optional(integer(minimum=1 << 20))
"""``memory_bytes``: None, or at least 1 MiB."""
PROCESSES = optional(integer(minimum=1))
"""``max_processes``: None, or at least 1."""


def prlimit_args(
    *, cpu_time_s: int | None, memory_bytes: int | None, max_processes: int | None
) -> list[str]:
    """``prlimit --cpu=.. --as=.. --nproc=.. --`` for the limits set, or ``[]`` for none.

    Each limit is set as both the soft and the hard limit, so the command
    cannot raise it again.

    Raises:
        SandboxUnavailableError: a limit is set but ``prlimit`` is not installed.
    """
    options = [
        f"--{flag}={value}"
        for flag, value in (("cpu", cpu_time_s), ("as", memory_bytes), ("nproc", max_processes))
        if value is not None
    ]
    if not options:
        return []
    path = host_program("prlimit")
    if path is None:
        raise SandboxUnavailableError(
            "resource limits were asked for but prlimit (util-linux) is not installed; "
            "refusing to run without them"
        )
    return [path, *options, "--"]
