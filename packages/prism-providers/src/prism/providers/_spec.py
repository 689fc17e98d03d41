"""``PROVIDER:MODEL`` strings, as the CLI takes them, and opening the named provider."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Literal, cast

import attrs

from prism.core import ConfigurationError
from prism.core.options import instance_of, one_of, string

from ._anthropic import open_anthropic_provider
from ._openai import open_openai_provider

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from prism.core import ModelProvider

    from ._events import StreamSink

__all__ = ["PROVIDERS", "ModelSpec", "open_provider"]

PROVIDERS: tuple[str, ...] = ("openai", "openai-responses", "anthropic")
"""The provider names a :class:`ModelSpec` accepts.

``openai`` is Chat Completions (OpenAI and any OpenAI-compatible server),
``openai-responses`` OpenAI's Responses API, ``anthropic`` the Messages API.
"""

ProviderName = Literal["openai", "openai-responses", "anthropic"]


@attrs.frozen(kw_only=True)
class ModelSpec:
    """A provider and a model, written ``PROVIDER:MODEL`` (``openai:gpt-4.1``).

    Attributes:
        provider: ``"openai"`` (Chat Completions; also any OpenAI-compatible
            server), ``"openai-responses"`` (OpenAI's Responses API) or
            ``"anthropic"`` (the Messages API).
        model: the model name sent to the API (may itself hold colons: ``openai:llama3:8b``).
    """

    provider: ProviderName = attrs.field(validator=one_of(*PROVIDERS))
    model: str = attrs.field(validator=string())

    @classmethod
    def parse(cls, spec: str) -> ModelSpec:
        """Read ``PROVIDER:MODEL``.

        Raises:
            ConfigurationError: no colon, an unknown provider or an empty model.
        """
        string(non_empty=False).check("ModelSpec", "spec", spec)
        provider, sep, model = spec.partition(":")
        if not sep or not model.strip():
            raise ConfigurationError(
                f"ModelSpec.spec must be PROVIDER:MODEL with PROVIDER one of "
                f"{', '.join(PROVIDERS)} (for example openai:gpt-4.1), got {spec!r}",
                option="ModelSpec.spec",
                value=spec,
            )
        if provider not in PROVIDERS:
            raise ConfigurationError(
                f"ModelSpec.spec names an unknown provider {provider!r} in {spec!r}: "
                f"use one of {', '.join(PROVIDERS)}",
                option="ModelSpec.spec",
                value=spec,
            )
        return cls(provider=cast("ProviderName", provider), model=model)


@contextlib.asynccontextmanager
async def open_provider(
    spec: ModelSpec | str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    instructions: str | None = None,
    on_event: StreamSink | None = None,
) -> AsyncIterator[ModelProvider]:
    """The provider a :class:`ModelSpec` names, on its own SDK client.

    Use ``spec.model`` as the agent's model. Keys come from the argument or
    the provider's usual variable (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``);
    the base URL from the argument (or the SDK's own ``OPENAI_BASE_URL`` /
    ``ANTHROPIC_BASE_URL``).

    Cancellation: as :func:`open_openai_provider` / :func:`open_anthropic_provider`.

    Raises:
        ConfigurationError: a bad spec, or no key where one is needed.
        ProviderNotInstalledError: the provider's extra is not installed.
    """
    (instance_of(ModelSpec, str, description="a ModelSpec or a PROVIDER:MODEL string")).check(
        "open_provider", "spec", spec
    )
    parsed = spec if isinstance(spec, ModelSpec) else ModelSpec.parse(spec)
    if parsed.provider in ("openai", "openai-responses"):
        async with open_openai_provider(
            api="responses" if parsed.provider == "openai-responses" else "chat",
            api_key=api_key,
            base_url=base_url,
            instructions=instructions,
            on_event=on_event,
        ) as openai_provider:
            yield openai_provider
    else:
        async with open_anthropic_provider(
            api_key=api_key, base_url=base_url, instructions=instructions, on_event=on_event
        ) as anthropic_provider:
            yield anthropic_provider
