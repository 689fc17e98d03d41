"""The errors ``prism.gateway`` raises.

::

    PrismError (prism.core)
     └── GatewayError             the gateway could not start or serve
          └── GatewayConfigurationError (also a ValueError)   a bad option, caught at construction
"""

from __future__ import annotations

from prism.core import PrismError

__all__ = ["GatewayConfigurationError", "GatewayError"]


class GatewayError(PrismError):
    """The gateway could not start or keep serving (for example, the port is taken)."""


class GatewayConfigurationError(GatewayError, ValueError):
    """An option of the gateway is unusable; the message names it and the value received."""
