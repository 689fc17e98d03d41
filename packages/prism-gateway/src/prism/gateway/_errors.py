"""The errors ``prism.gateway`` raises.

::

    PrismError (prism.core)
     ├── ConfigurationError (prism.core; also a ValueError)   a bad option: names it and the value
     │    └── GatewayConfigurationError                       one the gateway's own rules refuse
     └── GatewayError                                         the gateway could not start or serve
          └── GatewayConfigurationError
"""

from __future__ import annotations

from prism.core import ConfigurationError, PrismError

__all__ = ["GatewayConfigurationError", "GatewayError"]


class GatewayError(PrismError):
    """The gateway could not start or keep serving (for example, the port is taken)."""


class GatewayConfigurationError(GatewayError, ConfigurationError):
    """An option the gateway's own rules refuse (a non-loopback bind without auth...).

    ``option`` and ``value`` name the option and what was given.

    A value of the wrong type or out of range raises the shared
    :class:`~prism.core.ConfigurationError` (this class's base), as in every
    Prism package.
    """
