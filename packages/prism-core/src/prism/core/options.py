"""prism.core.options: one way to check options, shared by every Prism package.

Each check is an attrs validator and also checks a plain argument; a value it
refuses raises :class:`~prism.core.ConfigurationError` naming the option and the
value, with ``option`` and ``value`` attributes::

    import attrs
    from prism.core.options import integer, optional, string

    @attrs.frozen(kw_only=True)
    class RetryOptions:
        attempts: int = attrs.field(default=3, validator=integer(minimum=1))
        label: str | None = attrs.field(default=None, validator=optional(string()))

    def create_thing(*, name: str) -> None:
        string().check("create_thing", "name", name)

``RetryOptions(attempts=0)`` raises ``ConfigurationError("RetryOptions.attempts
must be an integer >= 1, got 0")``.
"""

from ._options import OptionCheck as OptionCheck
from ._options import boolean as boolean
from ._options import callable_value as callable_value
from ._options import has_method as has_method
from ._options import instance_of as instance_of
from ._options import integer as integer
from ._options import number as number
from ._options import one_of as one_of
from ._options import optional as optional
from ._options import sequence_of as sequence_of
from ._options import string as string

__all__ = [
    "OptionCheck",
    "boolean",
    "callable_value",
    "has_method",
    "instance_of",
    "integer",
    "number",
    "one_of",
    "optional",
    "sequence_of",
    "string",
]
