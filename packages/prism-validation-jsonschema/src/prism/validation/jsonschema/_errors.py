"""The error tree of ``prism.validation.jsonschema``.

::

    PrismError                       (prism.core)
    └── ToolSchemaRejectedError (ValueError)   (prism.core)
        └── SchemaRejectedError            a schema the adapter refuses to compile

``validate`` never raises for a bad schema or a bad value: it answers with
``ok=False``. :class:`SchemaRejectedError` is raised only by the explicit
helpers :meth:`~prism.validation.jsonschema.JsonSchemaArgumentValidator.check_schema`
and :meth:`~prism.validation.jsonschema.JsonSchemaArgumentValidator.compile`.
Bad options raise :class:`prism.core.ConfigurationError` (a ``ValueError``).
"""

from __future__ import annotations

from prism.core import ToolSchemaRejectedError
from prism.core.text import NAME_LIMIT, clip

__all__ = ["SchemaRejectedError", "pointer", "quoted"]


class SchemaRejectedError(ToolSchemaRejectedError):
    """A schema was refused: it breaks a limit, is unsafe, or cannot be compiled.

    Attributes:
        reason: why, in words a model or an operator can act on.
        path: a JSON Pointer (``#/properties/a/pattern``) to the offending part, if known.
    """


def pointer(path: tuple[str | int, ...]) -> str:
    """The JSON Pointer (``#/a/0``) to ``path`` in a schema, clipped for a message."""
    parts = (str(p).replace("~", "~0").replace("/", "~1") for p in path)
    return clip("#/" + "/".join(parts) if path else "#", NAME_LIMIT)


def quoted(value: str, limit: int = 80) -> str:
    """``value`` (a schema's string: a pattern, a reference, an id) quoted for a message."""
    return repr(clip(value, limit))
