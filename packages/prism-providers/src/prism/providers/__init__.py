"""prism.providers: model providers for Prism agents on the official SDKs.

:class:`OpenAIChatProvider` speaks OpenAI Chat Completions (OpenAI itself, or
any OpenAI-compatible server through ``base_url``), :class:`OpenAIResponsesProvider`
OpenAI's Responses API; :class:`AnthropicProvider`
speaks the Anthropic Messages API. Both implement
:class:`prism.core.ModelProvider`: streaming, parallel tool calls, usage and
stop reasons kept, an abort closes the HTTP request, API errors become
:class:`prism.core.ModelProviderError` values with a clear message. Install the
SDK you need: ``pip install 'prismgate-providers[openai]'`` (or ``[anthropic]``).
The SDKs run on trio through anyio.

Example::

    import trio
    from prism.core import create_agent
    from prism.providers import open_openai_provider

    async def main() -> None:
        # OPENAI_API_KEY from the environment; or base_url="http://127.0.0.1:8000/v1"
        async with open_openai_provider() as provider:
            agent = create_agent(model="gpt-4.1-mini", provider=provider)
            result = await agent.session().run("Say hi")
            print(result.final, provider.usage)

    trio.run(main)
"""

from ._anthropic import AnthropicProvider as AnthropicProvider
from ._anthropic import open_anthropic_provider as open_anthropic_provider
from ._errors import ProviderAPIError as ProviderAPIError
from ._errors import ProviderConnectionError as ProviderConnectionError
from ._errors import ProviderNotInstalledError as ProviderNotInstalledError
from ._errors import ProviderResponseError as ProviderResponseError
from ._events import ModelReasoningDelta as ModelReasoningDelta
from ._events import ModelResponseFinished as ModelResponseFinished
from ._events import ModelResponseInfo as ModelResponseInfo
from ._events import ModelTextDelta as ModelTextDelta
from ._events import ModelToolCallDelta as ModelToolCallDelta
from ._events import ModelUsage as ModelUsage
from ._events import StreamEvent as StreamEvent
from ._events import StreamSink as StreamSink
from ._openai import OpenAIChatProvider as OpenAIChatProvider
from ._openai import open_openai_provider as open_openai_provider
from ._openai_responses import OpenAIResponsesProvider as OpenAIResponsesProvider
from ._spec import PROVIDERS as PROVIDERS
from ._spec import ModelSpec as ModelSpec
from ._spec import open_provider as open_provider

__all__ = [
    "PROVIDERS",
    "AnthropicProvider",
    "ModelReasoningDelta",
    "ModelResponseFinished",
    "ModelResponseInfo",
    "ModelSpec",
    "ModelTextDelta",
    "ModelToolCallDelta",
    "ModelUsage",
    "OpenAIChatProvider",
    "OpenAIResponsesProvider",
    "ProviderAPIError",
    "ProviderConnectionError",
    "ProviderNotInstalledError",
    "ProviderResponseError",
    "StreamEvent",
    "StreamSink",
    "open_anthropic_provider",
    "open_openai_provider",
    "open_provider",
]
