"""The error tree of ``prism.cli``.

::

    PrismError
    └── CliError                        the command could not do what was asked
        ├── CliConfigurationError       prism.toml is wrong; names the file and the key
        │   (ConfigurationError)
        └── SessionFormatError          a session file is wrong; names the JSON path
            (ValueError)

The ``prism`` command turns these into a one-line message on stderr and exit
code 2; library users catch them like any other :class:`~prism.core.PrismError`.
"""

from __future__ import annotations

from prism.core import ConfigurationError, PrismError

__all__ = ["CliConfigurationError", "CliError", "SessionFormatError"]


class CliError(PrismError):
    """The ``prism`` command could not do what was asked (bad input, unreachable server)."""


class CliConfigurationError(CliError, ConfigurationError):
    """A ``prism.toml`` value is missing, unknown or of the wrong kind.

    Attributes:
        source: the file (or label) the configuration came from.
        key: the dotted key that is wrong, for example ``mcp.servers.docs.call_timeout_s``;
            empty when the whole file is wrong (for example, not TOML at all).
        problem: what is wrong with it.
        option: the dotted key too (as every :class:`ConfigurationError` names its option).
        value: the value found there, when there is one.
    """

    def __init__(self, source: str, key: str, problem: str, *, value: object = None) -> None:
        where = f"{source}: {key}" if key else source
        ConfigurationError.__init__(self, f"{where}: {problem}", option=key, value=value)
        self.source = source
        self.key = key
        self.problem = problem


class SessionFormatError(CliError, ValueError):
    """A session file is not the JSON shape ``prism run`` reads.

    Attributes:
        source: the file (or label) the session came from.
        path: where in the document, for example ``turns[2].tool_calls[0].name``.
        problem: what is wrong there.
        value: the value found there, when there is one.
    """

    def __init__(self, source: str, path: str, problem: str, *, value: object = None) -> None:
        where = f"{source}: {path}" if path else source
        super().__init__(f"{where}: {problem}")
        self.source = source
        self.path = path
        self.problem = problem
        self.value = value
