"""The error tree of ``prism.coding.security``.

::

    PrismError (prism.core)
    ├── ConfigurationError (ValueError)        bad options, raised at construction (prism.core)
    ├── PathEscapeError (ValueError)           a path resolves outside every root
    └── SandboxUnavailableError (RuntimeError) the sandbox cannot isolate here; nothing ran

Tool failures (a denied action, an escaping path inside a tool call) reach the
model as error results; these exceptions are what the tools see and translate.
"""

from __future__ import annotations

from prism.core import PrismError

__all__ = ["PathEscapeError", "SandboxUnavailableError"]


class PathEscapeError(PrismError, ValueError):
    """A path would lead outside the allowed roots (``..``, absolute, or through a symlink).

    Attributes:
        path: the path as it was given.
        reason: why it was refused.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path!r} is outside the allowed roots: {reason}")
        self.path = path
        self.reason = reason


class SandboxUnavailableError(PrismError, RuntimeError):
    """The sandbox backend cannot provide isolation on this machine, so nothing was run.

    A sandbox never falls back to running a command unsandboxed; it raises this.
    """
