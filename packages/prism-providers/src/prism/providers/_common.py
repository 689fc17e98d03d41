"""What the providers share: the request scaffolding, error mapping, options, rendering helpers.

Each provider module knows its wire format (how a transcript becomes request
parameters, how a response or a stream becomes an assistant message); the
rest is here, once: importing the SDK, checking the factory options, the key,
making the request (streamed or not) and closing it, turning SDK exceptions
into Prism errors, and recording each response.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

from prism.core import (
    AssistantMessage,
    ConfigurationError,
    ImageContent,
    ResourceContent,
    ResourceLink,
    TextContent,
    trio_native,
)
from prism.core.options import (
    boolean,
    callable_value,
    instance_of,
    integer,
    number,
    optional,
    string,
)

from ._errors import (
    ProviderAPIError,
    ProviderConnectionError,
    ProviderNotInstalledError,
    ProviderResponseError,
)
from ._events import ModelResponseFinished, ModelResponseInfo, ModelUsage, StreamSink, emit

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from types import ModuleType

    from prism.core import Content, ToolCall

__all__ = [
    "CLOSE_GRACE_S",
    "EMPTY_SCHEMA",
    "ResponseLog",
    "SharedOptions",
    "api_key_from",
    "arguments_json",
    "ask",
    "close_quietly",
    "content_text",
    "import_sdk",
    "open_client",
]

# How long closing an HTTP stream or client may take once the caller is gone.
CLOSE_GRACE_S = 5.0

# The schema sent for a tool that declares none.
EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}

# Option checks the provider classes share (attrs validators).
CHECK_INSTRUCTIONS = optional(string(non_empty=False))
CHECK_MAX_TOKENS = optional(integer(minimum=1))
CHECK_TEMPERATURE = optional(number(minimum=0))
CHECK_EFFORT = optional(string())
CHECK_FLAG = boolean()
CHECK_SINK = optional(callable_value())
CHECK_MAPPING = optional(instance_of(Mapping, description="a mapping"))


def import_sdk(extra: str) -> ModuleType:
    """The SDK module named ``extra`` (``"openai"``, ``"anthropic"``).

    Raises:
        ProviderNotInstalledError: the extra is not installed.
    """
    import importlib

    try:
        return importlib.import_module(extra)
    except ImportError as exc:
        raise ProviderNotInstalledError(
            f"the {extra} provider needs the {extra} SDK: "
            f"pip install 'prismgate-providers[{extra}]' ({exc})"
        ) from exc


# Each SDK's async client class, and the environment variable of its key.
_CLIENTS = {
    "openai": ("AsyncOpenAI", "OPENAI_API_KEY"),
    "anthropic": ("AsyncAnthropic", "ANTHROPIC_API_KEY"),
}


@contextlib.asynccontextmanager
async def open_client(
    owner: str,
    provider: str,
    *,
    api_key: str | None,
    base_url: str | None,
    max_retries: int,
    timeout_s: float,
    default_headers: Mapping[str, str] | None,
    **more: object,
) -> AsyncIterator[Any]:
    """The SDK's async client for ``provider``, closed (shielded, bounded) when the block ends.

    The options every factory passes to its client are checked here, naming
    ``owner`` (the factory) in the error; ``more`` goes to the client as it is.

    Raises:
        ConfigurationError: a bad option, or no key (see :func:`api_key_from`).
        ProviderNotInstalledError: the SDK is not installed.
    """
    sdk = import_sdk(provider)
    if api_key is not None and (not isinstance(api_key, str) or not api_key):
        # The value may be a secret: the error names the option only.
        raise ConfigurationError(
            f"{owner}.api_key must be a non-empty string", option=f"{owner}.api_key"
        )
    optional(string()).check(owner, "base_url", base_url)
    integer(minimum=0).check(owner, "max_retries", max_retries)
    number(minimum=0, above=True).check(owner, "timeout_s", timeout_s)
    CHECK_MAPPING.check(owner, "default_headers", default_headers)
    class_name, env_var = _CLIENTS[provider]
    client = getattr(sdk, class_name)(
        api_key=api_key_from(api_key, env_var, base_url=base_url, provider=provider),
        base_url=base_url,
        max_retries=max_retries,
        timeout=timeout_s,
        default_headers=dict(default_headers) if default_headers else None,
        **more,
    )
    try:
        yield client
    finally:
        await close_quietly(client.close)


def api_key_from(explicit: str | None, env_var: str, *, base_url: str | None, provider: str) -> str:
    """The key to use: the explicit one, else the environment's.

    A server reached through ``base_url`` (a local vLLM, llama.cpp or Ollama)
    usually takes no key, so a placeholder is used when none is set.

    Raises:
        ConfigurationError: no key was given or set, and no ``base_url`` either
            (the message names the variable, never a value).
    """
    if explicit is not None:
        return explicit
    found = os.environ.get(env_var)
    if found:
        return found
    if base_url is not None:
        return "no-key"
    raise ConfigurationError(
        f"no {provider} API key: set {env_var} in the environment or pass api_key=",
        option="api_key",
    )


def content_text(block: Content) -> str:
    """A content block as text, for APIs that take only text in that place.

    Reasoning is never text: each provider sends back its own reasoning, in
    its own form, and nothing else.
    """
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


def arguments_json(arguments: object) -> str:
    """A tool call's arguments as the JSON text the APIs take back.

    Arguments are what ``ToolCall.from_json`` made of the model's text: JSON
    values, or the text itself when it was not JSON (sent back as it came).
    """
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments)


async def close_quietly(close: Callable[[], Awaitable[object]]) -> None:
    """Close an HTTP stream or client, even from a cancelled scope, within a bound.

    Errors while closing are dropped: the response is already over.
    """
    with trio.move_on_after(CLOSE_GRACE_S, shield=True):
        # Closing a stream that already failed may fail too; it is over either way.
        with contextlib.suppress(Exception):
            await close()


def sdk_error(exc: Exception, sdk: ModuleType, provider: str) -> Exception:
    """An SDK exception as the Prism error that says what happened.

    Both SDKs are generated alike: the same exception classes, and error
    bodies ``{"error": {"message", "type", "code"?}}``.
    """
    if isinstance(exc, sdk.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        error = body.get("error", body)
        if not isinstance(error, dict):
            error = {}
        message = error.get("message")
        code = error.get("code") or error.get("type")
        return ProviderAPIError(
            f"{provider} API error {exc.status_code}"
            f"{f' ({code})' if code else ''}: {message or exc.message}",
            provider=provider,
            status_code=exc.status_code,
            error_type=str(code) if code else None,
            request_id=exc.request_id,
        )
    if isinstance(exc, sdk.APITimeoutError):
        return ProviderConnectionError(f"{provider} API timed out: {exc}")
    if isinstance(exc, sdk.APIConnectionError):
        return ProviderConnectionError(f"{provider} API unreachable: {exc}")
    if isinstance(exc, sdk.APIResponseValidationError):
        return ProviderResponseError(f"{provider} API answered with something unexpected: {exc}")
    message = getattr(exc, "message", None) or str(exc)
    return ProviderAPIError(f"{provider} API error: {message}", provider=provider)


# The root of each SDK's exceptions.
_BASE_ERROR = {"openai": "OpenAIError", "anthropic": "AnthropicError"}


async def ask(
    *,
    provider: str,
    create: Callable[..., Awaitable[Any]],
    params: dict[str, Any],
    stream: bool,
    consume: Callable[[Any], Awaitable[AssistantMessage]],
    finish: Callable[[Any], Awaitable[AssistantMessage]],
) -> AssistantMessage:
    """Make one request and read the answer, streamed or not; SDK errors become Prism errors.

    ``create`` is the SDK's ``create`` method; ``consume`` reads a stream,
    ``finish`` a whole response. A stream is closed however the reading ends
    (an abort included: the server sees the connection end).
    """
    sdk = import_sdk(provider)
    base_error: type[Exception] = getattr(sdk, _BASE_ERROR[provider])
    try:
        if stream:
            answer = await _create(create, params, stream=True)
            try:
                return await consume(answer)
            finally:
                await close_quietly(answer.close)
        return await finish(await _create(create, params))
    except base_error as exc:
        raise sdk_error(exc, sdk, provider) from exc


async def _create(
    create: Callable[..., Awaitable[Any]], params: dict[str, Any], **more: Any
) -> Any:
    """``create(**more, **params)``; a text no UTF-8 can hold is sent with U+FFFD in its place.

    A lone surrogate (a tool result's ``ud800`` JSON escape, which ``json.loads``
    accepts) makes the SDK's request encoding raise before anything is sent,
    and it would again on every later turn of the transcript that holds it.
    """
    try:
        return await create(**more, **params)
    except UnicodeEncodeError:
        return await create(**more, **without_lone_surrogates(params))


def without_lone_surrogates(value: Any) -> Any:
    """``value`` with each string's lone surrogates replaced by U+FFFD (JSON containers rebuilt)."""
    if isinstance(value, str):
        if value.isascii():
            return value
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, dict):
        return {
            without_lone_surrogates(key): without_lone_surrogates(item)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [without_lone_surrogates(item) for item in value]
    return value


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

    async def answer(
        self,
        sink: StreamSink | None,
        info: ModelResponseInfo,
        content: list[Content],
        calls: tuple[ToolCall, ...],
    ) -> AssistantMessage:
        """Remember one response, report it to ``sink``, and return it as an assistant turn."""
        info = attrs.evolve(info, tool_calls=len(calls))
        self.add(info)
        await emit(sink, ModelResponseFinished(info=info))
        usage = info.usage
        return AssistantMessage(
            content=tuple(content),
            tool_calls=calls,
            # As the GenAI conventions count input: the whole prompt, cached parts too.
            input_tokens=usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens,
            output_tokens=usage.output_tokens,
            finish_reason=info.stop_reason,
            response_model=info.model or None,
        )


@trio_native  # Prism's own trio code: stays on trio under an asyncio host
@attrs.define(eq=False, kw_only=True)
class SharedOptions(ResponseLog):
    """The options every provider class takes (each adds its own ``client`` and more).

    Attributes:
        instructions: the system prompt, in the API's own place for it.
        temperature: sampling temperature (``None``: the API's default).
        stream: stream answers (deltas go to ``on_event``).
        on_event: receives the :data:`StreamEvent` values, synchronously.
        extra_body: more JSON fields for each request (server-specific options).
    """

    instructions: str | None = attrs.field(default=None, validator=CHECK_INSTRUCTIONS)
    temperature: float | None = attrs.field(default=None, validator=CHECK_TEMPERATURE)
    stream: bool = attrs.field(default=True, validator=CHECK_FLAG)
    on_event: StreamSink | None = attrs.field(default=None, repr=False, validator=CHECK_SINK)
    extra_body: Mapping[str, object] | None = attrs.field(
        default=None, repr=False, validator=CHECK_MAPPING
    )
