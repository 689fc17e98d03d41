"""The error tree of ``prism.providers``.

::

    PrismError
    ├── ConfigurationError (ValueError)            (prism.core) bad options, a missing key
    │   └── ProviderNotInstalledError (ImportError)   the SDK's extra is not installed
    └── ModelProviderError (RuntimeError)          (prism.core) the agent run raises these
        ├── ProviderAPIError                       the API answered with an error status
        │                                          (rate limits included) or an error event
        ├── ProviderConnectionError                the API could not be reached, or timed out
        └── ProviderResponseError                  the answer could not be understood

An agent run that meets one of these raises it (a :class:`ModelProviderError`,
so the transcript stays as it was before the request); the message says which
provider, what status and what the API said, and never holds a key.
"""

from __future__ import annotations

from prism.core import ConfigurationError, ModelProviderError

__all__ = [
    "ProviderAPIError",
    "ProviderConnectionError",
    "ProviderNotInstalledError",
    "ProviderResponseError",
]


class ProviderNotInstalledError(ConfigurationError, ImportError):
    """The SDK a provider needs is missing (install the ``openai`` or ``anthropic`` extra)."""


class ProviderAPIError(ModelProviderError):
    """The model API answered with an error.

    Attributes:
        provider: ``"openai"`` or ``"anthropic"``.
        status_code: the HTTP status (``None`` for an error event inside a stream).
        error_type: the API's error type or code, when it gave one
            (``"rate_limit_exceeded"``, ``"overloaded_error"``, ...).
        request_id: the API's request id, when it gave one.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status_code: int | None = None,
        error_type: str | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.status_code = status_code
        self.error_type = error_type
        self.request_id = request_id

    @property
    def rate_limited(self) -> bool:
        """Whether the API refused the request for rate or capacity (429, 529)."""
        return self.status_code in (429, 529)


class ProviderConnectionError(ModelProviderError):
    """The model API could not be reached, or did not answer in time."""


class ProviderResponseError(ModelProviderError):
    """The model API's answer could not be understood (for example a stream cut short)."""
