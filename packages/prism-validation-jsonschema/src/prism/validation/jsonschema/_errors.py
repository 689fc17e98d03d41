"""The error tree of ``prism.validation.jsonschema``.

::

    PrismError                       (prism.core)
    └── SchemaRejectedError (ValueError)   a schema the adapter refuses to compile

``validate`` never raises for a bad schema or a bad value: it answers with
``ok=False``. :class:`SchemaRejectedError` is raised only by the explicit
helper :meth:`~prism.validation.jsonschema.JsonSchemaArgumentValidator.check_schema`.
Bad options raise :class:`prism.core.ConfigurationError` (a ``ValueError``).
"""

from __future__ import annotations

from prism.core import PrismError

__all__ = ["SchemaRejectedError"]


class SchemaRejectedError(PrismError, ValueError):
    """A schema was refused: it breaks a limit, is unsafe, or cannot be compiled.

    Attributes:
        reason: why, in words a model or an operator can act on.
        path: a JSON Pointer (``#/properties/a/pattern``) to the offending part, if known.
    """

    def __init__(self, reason: str, path: str | None = None) -> None:
        super().__init__(
            f"schema rejected at {path}: {reason}" if path else f"schema rejected: {reason}"
        )
        self.reason = reason
        self.path = path
