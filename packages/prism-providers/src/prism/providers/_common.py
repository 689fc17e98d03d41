"""What the providers share: transcript rendering, argument parsing, keys, stream closing."""

from __future__ import annotations

import contextlib
import json
import os
from typing import TYPE_CHECKING

import attrs
import trio

from prism.core import (
    ConfigurationError,
    ImageContent,
    ResourceContent,
    ResourceLink,
    TextContent,
)

from ._errors import ProviderNotInstalledError
from ._events import ModelResponseInfo, ModelUsage

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from prism.core import Content

__all__ = [
    "CLOSE_GRACE_S",
    "ResponseLog",
    "api_key_from",
    "close_quietly",
    "content_text",
    "missing_extra",
    "parse_arguments",
]

# How long closing an HTTP stream or client may take once the caller is gone.
CLOSE_GRACE_S = 5.0


def missing_extra(extra: str, exc: ImportError) -> ProviderNotInstalledError:
    """The error for a provider whose SDK is not installed."""
    return ProviderNotInstalledError(
        f"the {extra} provider needs the {extra} SDK: pip install 'prism-providers[{extra}]' "
        f"({exc})"
    )


def api_key_from(explicit: str | None, env_var: str, *, base_url: str | None, provider: str) -> str:
    """The key to use: the explicit one, else the environment's.

    A server reached through ``base_url`` (a local vLLM, llama.cpp or Ollama)
    usually takes no key, so a placeholder is used when none is set.

    Raises:
        ConfigurationError: no key was given or set, and no ``base_url`` either
            (the message names the variable, never a value).
    """
    if explicit is not None:
        if not isinstance(explicit, str) or not explicit:
            raise ConfigurationError(f"{provider} api_key must be a non-empty string")
        return explicit
    found = os.environ.get(env_var)
    if found:
        return found
    if base_url is not None:
        return "no-key"
    raise ConfigurationError(
        f"no {provider} API key: set {env_var} in the environment or pass api_key="
    )


def content_text(block: Content) -> str:
    """A content block as text, for APIs that take only text in that place."""
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent):
        return f"[{block.mime_type} image omitted]"
    if isinstance(block, ResourceContent):
        if block.text is not None:
            return f"[resource {block.uri}]\n{block.text}"
        return f"[resource {block.uri} ({block.mime_type or 'binary'}) omitted]"
    if isinstance(block, ResourceLink):
        return f"[resource link {block.uri}{f' ({block.name})' if block.name else ''}]"
    return ""


def parse_arguments(raw: str) -> object:
    """A tool call's arguments as the model sent them.

    Empty means no arguments (``{}``). Text that is not JSON is kept as the
    string, so the dispatcher blocks the call as ``invalid_arguments`` and the
    model reads why.
    """
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        return raw


async def close_quietly(close: Callable[[], Awaitable[object]]) -> None:
    """Close an HTTP stream or client, even from a cancelled scope, within a bound.

    Errors while closing are dropped: the response is already over.
    """
    with trio.move_on_after(CLOSE_GRACE_S, shield=True):
        # Closing a stream that already failed may fail too; it is over either way.
        with contextlib.suppress(Exception):
            await close()


@attrs.define(eq=False)
class ResponseLog:
    """What a provider remembers about the responses it received (never keys)."""

    _responses: list[ModelResponseInfo] = attrs.field(factory=list, init=False)

    @property
    def responses(self) -> list[ModelResponseInfo]:
        """One entry per response received, oldest first (a copy)."""
        return list(self._responses)

    @property
    def usage(self) -> ModelUsage:
        """The tokens used by every response so far."""
        total = ModelUsage()
        for info in self._responses:
            total = total + info.usage
        return total

    def add(self, info: ModelResponseInfo) -> None:
        """Remember one response."""
        self._responses.append(info)
