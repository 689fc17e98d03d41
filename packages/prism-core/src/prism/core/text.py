r"""prism.core.text: clipping, escaping and checking untrusted text; describing exceptions.

Every package builds its messages for models and hosts through these, so a
message is bounded the same way wherever it is made::

    from prism.core.text import NAME_LIMIT, clip, describe_exception, escape_controls

    clip(repr(tool_name), NAME_LIMIT)
    describe_exception(exc)  # "ValueError: the message", clipped
    has_lone_surrogate(text)  # True for "\ud800": no UTF-8 holds it
    escape_controls(text)  # carriage returns, escapes, bidi overrides shown as escapes
"""

from ._text import MESSAGE_LIMIT as MESSAGE_LIMIT
from ._text import NAME_LIMIT as NAME_LIMIT
from ._text import REASON_LIMIT as REASON_LIMIT
from ._text import clip as clip
from ._text import describe_exception as describe_exception
from ._text import escape_controls as escape_controls
from ._text import has_lone_surrogate as has_lone_surrogate

__all__ = [
    "MESSAGE_LIMIT",
    "NAME_LIMIT",
    "REASON_LIMIT",
    "clip",
    "describe_exception",
    "escape_controls",
    "has_lone_surrogate",
]
