import inspect

import pytest

import prism.providers as api
from prism.core import ConfigurationError, ModelProvider, ModelProviderError, PrismError

DOCUMENTED = {
    "PROVIDERS",
    "AnthropicProvider",
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
}


def test_all_matches_documented_names() -> None:
    assert set(api.__all__) == DOCUMENTED
    assert api.__all__ == sorted(api.__all__, key=lambda n: (not n.isupper(), n))


def test_every_export_exists_and_is_documented() -> None:
    for name in api.__all__:
        obj = getattr(api, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"{name} has no docstring"
    assert inspect.getdoc(api)


def test_namespace_package_has_no_init() -> None:
    import prism

    assert getattr(prism, "__file__", None) is None


def test_errors_are_prism_errors_the_agent_lets_through() -> None:
    for error in (api.ProviderAPIError, api.ProviderConnectionError, api.ProviderResponseError):
        assert issubclass(error, ModelProviderError)
    assert issubclass(api.ProviderNotInstalledError, ConfigurationError)
    assert issubclass(api.ProviderNotInstalledError, ImportError)
    assert issubclass(api.ProviderAPIError, PrismError)


async def test_both_providers_satisfy_the_core_protocol() -> None:
    async with api.open_openai_provider(api_key="k") as openai_provider:
        assert isinstance(openai_provider, ModelProvider)
    async with api.open_openai_provider(api="responses", api_key="k") as responses_provider:
        assert isinstance(responses_provider, api.OpenAIResponsesProvider)
        assert isinstance(responses_provider, ModelProvider)
    async with api.open_anthropic_provider(api_key="k") as anthropic_provider:
        assert isinstance(anthropic_provider, ModelProvider)


def test_model_spec_reads_provider_and_model() -> None:
    assert api.ModelSpec.parse("openai:llama3:8b") == api.ModelSpec(
        provider="openai", model="llama3:8b"
    )
    assert api.ModelSpec.parse("anthropic:claude-x").provider == "anthropic"


@pytest.mark.parametrize("spec", ["gpt-4", "openai:", "mistral:large", ""])
def test_model_spec_rejects_bad_specs_with_the_shape(spec: str) -> None:
    with pytest.raises(ConfigurationError, match=r"PROVIDER:MODEL|unknown provider"):
        api.ModelSpec.parse(spec)


async def test_open_provider_opens_the_named_provider() -> None:
    async with api.open_provider("anthropic:m", api_key="k") as provider:
        assert isinstance(provider, api.AnthropicProvider)
    async with api.open_provider(
        api.ModelSpec.parse("openai:m"), base_url="http://127.0.0.1:9/v1"
    ) as provider:
        assert isinstance(provider, api.OpenAIChatProvider)
