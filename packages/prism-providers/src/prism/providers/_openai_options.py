"""The options both OpenAI providers take (Chat Completions and Responses)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from prism.core.options import has_method

from ._common import CHECK_EFFORT, CHECK_MAX_TOKENS, SharedOptions

if TYPE_CHECKING:
    import openai

__all__ = ["CHECK_OPENAI_CLIENT", "OpenAIOptions"]

CHECK_OPENAI_CLIENT = has_method("close", description="an openai.AsyncOpenAI")


@attrs.define(eq=False, kw_only=True)
class OpenAIOptions(SharedOptions):
    """The options both OpenAI providers take (see :class:`OpenAIChatProvider`)."""

    client: "openai.AsyncOpenAI" = attrs.field(repr=False, validator=CHECK_OPENAI_CLIENT)
    max_tokens: int | None = attrs.field(default=None, validator=CHECK_MAX_TOKENS)
    reasoning_effort: str | None = attrs.field(default=None, validator=CHECK_EFFORT)
