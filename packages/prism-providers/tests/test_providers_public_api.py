import inspect
from typing import TYPE_CHECKING

import anthropic
import openai
import pytest

import prism.providers as api
from prism.core import ConfigurationError, ModelProvider, ModelProviderError, PrismError

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager

DOCUMENTED = {
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
}


def test_all_matches_documented_names() -> None:
    assert set(api.__all__) == DOCUMENTED
    assert api.__all__ == sorted(api.__all__, key=lambda n: (not n.isupper(), n))


def test_each_name_is_exported_once_from_the_module_that_defines_it() -> None:
    assert len(api.__all__) == len(set(api.__all__))
    public = {name for name in vars(api) if not name.startswith("_")}
    assert public - {"annotations"} == set(api.__all__)
    for name in api.__all__:
        obj = getattr(api, name)
        module = getattr(obj, "__module__", None)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert module is not None
            assert module.startswith("prism.providers._"), name


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
    assert api.ModelSpec.parse("openai-responses:gpt-x") == api.ModelSpec(
        provider="openai-responses", model="gpt-x"
    )
    assert api.PROVIDERS == ("openai", "openai-responses", "anthropic")


@pytest.mark.parametrize(
    "spec", ["gpt-4", "openai:", "mistral:large", "", "openai-responses", "openai-responses: "]
)
def test_model_spec_rejects_bad_specs_naming_every_provider(spec: str) -> None:
    with pytest.raises(ConfigurationError, match=r"PROVIDER:MODEL|unknown provider") as caught:
        api.ModelSpec.parse(spec)
    assert "openai, openai-responses, anthropic" in str(caught.value)


async def test_open_provider_opens_the_named_provider() -> None:
    async with api.open_provider("anthropic:m", api_key="k") as provider:
        assert isinstance(provider, api.AnthropicProvider)
    async with api.open_provider(
        api.ModelSpec.parse("openai:m"), base_url="http://127.0.0.1:9/v1"
    ) as provider:
        assert isinstance(provider, api.OpenAIChatProvider)
    async with api.open_provider("openai-responses:m", api_key="k") as provider:
        assert isinstance(provider, api.OpenAIResponsesProvider)


LOCAL = "http://127.0.0.1:9/v1"

# (factory or options class, its keyword arguments, the option, a bad value)
BAD_OPTIONS: list[tuple[str, str, object]] = [
    ("open_openai_provider", "api", "completions"),
    ("open_openai_provider", "max_retries", -1),
    ("open_openai_provider", "max_retries", True),
    ("open_openai_provider", "timeout_s", 0),
    ("open_openai_provider", "timeout_s", float("inf")),
    ("open_openai_provider", "base_url", ""),
    ("open_openai_provider", "organization", 3),
    ("open_openai_provider", "default_headers", ["x"]),
    ("open_openai_provider", "max_tokens", 0),
    ("open_openai_provider", "temperature", -0.5),
    ("open_openai_provider", "reasoning_effort", ""),
    ("open_openai_provider", "stream", "yes"),
    ("open_openai_provider", "include_usage", 1),
    ("open_openai_provider", "on_event", "print"),
    ("open_openai_provider", "extra_body", [("a", 1)]),
    ("open_openai_provider", "instructions", 7),
    ("open_anthropic_provider", "max_retries", 2.5),
    ("open_anthropic_provider", "timeout_s", -1),
    ("open_anthropic_provider", "max_tokens", 0),
    ("open_anthropic_provider", "thinking_budget", 0),
    ("open_anthropic_provider", "temperature", "hot"),
    ("open_anthropic_provider", "stream", None),
    ("open_anthropic_provider", "on_event", 3),
    ("open_anthropic_provider", "extra_body", "{}"),
    ("open_anthropic_provider", "default_headers", 1),
    ("open_provider", "spec", 42),
    ("open_provider", "spec", "mistral:large"),
    ("open_provider", "spec", "gpt-4"),
    ("OpenAIChatProvider", "client", None),
    ("OpenAIChatProvider", "max_tokens", "many"),
    ("OpenAIResponsesProvider", "client", "a client"),
    ("OpenAIResponsesProvider", "store", "no"),
    ("OpenAIResponsesProvider", "reasoning_effort", 1),
    ("AnthropicProvider", "client", object()),
    ("AnthropicProvider", "max_tokens", -3),
    ("ModelSpec", "provider", "mistral"),
    ("ModelSpec", "model", ""),
]


def _arguments(owner: str, option: str, value: object) -> dict[str, object]:
    base: dict[str, object] = {"api_key": "k"}
    if owner == "open_provider":
        return {"spec": value, "api_key": "k"}
    if owner == "open_openai_provider" and option in ("max_tokens", "temperature"):
        base["api"] = "responses"  # reaches the Responses provider's checks too
    if owner == "ModelSpec":
        base = {"provider": "openai", "model": "m"}
    elif owner.endswith("Provider") and not owner.startswith("open_"):
        base = {}
    return {**base, option: value}


async def _use(owner: str, arguments: dict[str, object], client: object) -> None:
    target: object = getattr(api, owner)
    if owner == "ModelSpec":
        api.ModelSpec(**arguments)  # type: ignore[arg-type]
    elif inspect.isclass(target):
        target(**{"client": client, **arguments})
    else:
        factory: Callable[..., AbstractAsyncContextManager[object]] = target  # type: ignore[assignment]
        async with factory(**arguments):
            pass  # pragma: no cover


@pytest.mark.parametrize(("owner", "option", "value"), BAD_OPTIONS)
async def test_a_bad_option_raises_configuration_error_naming_option_and_value(
    owner: str, option: str, value: object
) -> None:
    arguments = _arguments(owner, option, value)
    openai_client = openai.AsyncOpenAI(api_key="k", base_url=LOCAL)
    anthropic_client = anthropic.AsyncAnthropic(api_key="k", base_url=LOCAL)
    client = anthropic_client if owner.startswith("Anthropic") else openai_client
    try:
        with pytest.raises(ConfigurationError) as caught:
            await _use(owner, arguments, client)
    finally:
        await openai_client.close()
        await anthropic_client.close()
    error = caught.value
    assert error.option is not None
    assert error.option.split(".")[-1] == option
    assert error.value is value
    assert error.option in str(error)
    assert repr(value) in str(error)


def test_a_bad_api_key_names_the_option_but_never_the_value() -> None:
    async def enter() -> None:
        async with api.open_openai_provider(api_key=""):
            pass  # pragma: no cover

    import trio

    with pytest.raises(ConfigurationError) as caught:
        trio.run(enter)
    assert caught.value.option == "open_openai_provider.api_key"
    assert not caught.value.has_value
