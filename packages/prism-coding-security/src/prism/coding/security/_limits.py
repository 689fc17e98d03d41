"""Resource limits for sandboxed commands, applied by ``prlimit`` (util-linux).

``prlimit`` runs inside the sandbox as the first program: it sets the limits
on itself and ``exec``s the command, so they hold for the command and are
inherited by everything it starts. (A ``preexec_fn`` would do the same from
Python, but is unsafe in a process with threads.)
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from prism.core import ConfigurationError

from ._errors import SandboxUnavailableError

if TYPE_CHECKING:
    import attrs

__all__ = ["check_limit", "prlimit_args"]

_MINIMUM = {"cpu_time_s": 1, "memory_bytes": 1 << 20, "max_processes": 1}


def check_limit(instance: object, attribute: attrs.Attribute[int | None], value: object) -> None:
    """Check a limit option (attrs validator): None, or an int >= its minimum.

    Raises:
        ConfigurationError: naming the option and the value received.
    """
    if value is None:
        return
    minimum = _MINIMUM[attribute.name]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(
            f"{attribute.name} must be None or an int >= {minimum}, got {value!r}"
        )


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
    path = shutil.which("prlimit")
    if path is None:
        raise SandboxUnavailableError(
            "resource limits were asked for but prlimit (util-linux) is not installed; "
            "refusing to run without them"
        )
    return [path, *options, "--"]
