"""prism.core.text: clipping untrusted text and describing exceptions, with the shared limits.

Every package builds its messages for models and hosts through these, so a
message is bounded the same way wherever it is made::

    from prism.core.text import NAME_LIMIT, clip, describe_exception

    clip(repr(tool_name), NAME_LIMIT)
    describe_exception(exc)  # "ValueError: the message", clipped
"""

from ._text import MESSAGE_LIMIT as MESSAGE_LIMIT
from ._text import NAME_LIMIT as NAME_LIMIT
from ._text import REASON_LIMIT as REASON_LIMIT
from ._text import clip as clip
from ._text import describe_exception as describe_exception

__all__ = ["MESSAGE_LIMIT", "NAME_LIMIT", "REASON_LIMIT", "clip", "describe_exception"]
