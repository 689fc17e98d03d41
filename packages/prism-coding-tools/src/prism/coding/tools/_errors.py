"""The error tree of ``prism.coding.tools``.

::

    PrismError (prism.core)
    └── CodingToolsError                         base of this package's errors
        └── CodingToolsConfigurationError (ValueError)  a bad option, raised at construction

Tool failures (a missing file, a denied action, a non-zero exit, a timeout)
are not exceptions: they come back as error :class:`~prism.core.ToolResult`
values.
"""

from __future__ import annotations

from prism.core import ConfigurationError, PrismError

__all__ = ["CodingToolsConfigurationError", "CodingToolsError"]


class CodingToolsError(PrismError):
    """Base of every error ``prism.coding.tools`` raises on purpose."""


class CodingToolsConfigurationError(CodingToolsError, ConfigurationError):
    """A tool option was given a value the tool cannot use; the message names both."""
