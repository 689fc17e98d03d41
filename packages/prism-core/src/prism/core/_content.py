"""Content blocks, tool calls, tool results and transcript messages."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import TypeAlias, final

import attrs

from ._call_text import parse_call_arguments, parse_json_text
from ._fast import frozen_builder
from ._json import JsonValue

__all__ = [
    "AssistantMessage",
    "Content",
    "ImageContent",
    "Message",
    "ParsedJson",
    "ReasoningContent",
    "ResourceContent",
    "ResourceLink",
    "TextContent",
    "ToolCall",
    "ToolResult",
    "ToolResultMessage",
    "UserMessage",
]


def _tuple(value: object) -> tuple[object, ...]:
    if isinstance(value, tuple):
        return value
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(f"expected a sequence of content blocks, got {type(value).__name__}")
    return tuple(value)


@attrs.frozen(kw_only=True)
class TextContent:
    """A block of text."""

    text: str


@attrs.frozen(kw_only=True)
class ImageContent:
    """An image; ``data`` is base64 and ``mime_type`` was detected, not guessed from a name."""

    data: str
    mime_type: str


@attrs.frozen(kw_only=True)
class ResourceContent:
    """An embedded resource: a URI with its text or base64 ``blob``."""

    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: str | None = None


@attrs.frozen(kw_only=True)
class ResourceLink:
    """A link to a resource the model may ask for later."""

    uri: str
    name: str | None = None
    mime_type: str | None = None
    description: str | None = None


def _opaque_repr(value: Mapping[str, JsonValue] | None) -> str:
    # Signatures and encrypted reasoning are opaque: shown as a size, never as data.
    if value is None:
        return "None"
    return f"<{len(json.dumps(value, ensure_ascii=False))} chars>"


@attrs.frozen(kw_only=True)
class ReasoningContent:
    """The model's reasoning in an assistant turn, kept to be sent back unchanged.

    Reasoning models answer with reasoning before their text and tool calls
    (Anthropic's extended-thinking blocks, the reasoning items of OpenAI's
    Responses API). The API that produced it needs it back, unchanged, in the
    next request of a tool-use loop, so a provider puts it in
    :attr:`AssistantMessage.content`, in the order received, and renders it
    again from ``replay``; the agent runtime carries assistant content through
    the transcript as it is. Tool results never hold reasoning.

    Attributes:
        text: the readable reasoning (thinking text or summary); ``""`` when the
            API sent it redacted or encrypted only. For display: it is never
            sent back by itself.
        provider: the API whose wire format ``replay`` is (``"anthropic"``,
            ``"openai"``), or ``None`` for reasoning shown but never sent back
            (``reasoning_content`` from an OpenAI-compatible server).
        redacted: the API withheld the reasoning text (Anthropic's
            ``redacted_thinking``).
        replay: the provider's own block or item as JSON, signatures and
            encrypted reasoning included, sent back to that provider exactly
            as received and never to another. Opaque: reprs show only its size.
    """

    text: str = ""
    provider: str | None = None
    redacted: bool = False
    replay: Mapping[str, JsonValue] | None = attrs.field(
        default=None, hash=False, repr=_opaque_repr
    )


Content: TypeAlias = TextContent | ImageContent | ResourceContent | ResourceLink | ReasoningContent


# What a call built any other way than from_json carries: no bound at all.
NO_TEXT_BOUND = (sys.maxsize, sys.maxsize)


@final
class ParsedJson:
    """A JSON text Prism parsed itself, and what that text proves about its value.

    Made only by :meth:`parse` (or :meth:`member` of one so made): the value is
    what ``json.loads`` makes of the text, and beside it Prism keeps the proof
    :meth:`ToolCall.from_json` keeps (at most as many values and characters as
    the text has, nested at most as deep as its brackets, only plain JSON
    types, numbers within 64 bits and finite, no lone surrogate or pollution
    key). A part of the value is within its whole's proof, so :meth:`member`
    keeps it. :meth:`ToolCall.from_parsed` builds a call from one; nothing else
    can pair a proof with a value.

    For a host that parses a whole message (an MCP ``tools/call`` request, say)
    and takes a call's arguments out of it: build the call from the message's
    ``ParsedJson``, never from the value, and do not change the value in place.
    """

    __slots__ = ("_bound", "_value")

    _value: object
    _bound: tuple[int, int]

    def __init__(self) -> None:
        raise TypeError("a ParsedJson is made by ParsedJson.parse(text)")

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ParsedJson is read-only (cannot set {name!r})")

    def __reduce__(self) -> str | tuple[object, ...]:
        raise TypeError("a ParsedJson cannot be copied or pickled: parse the text again")

    def __repr__(self) -> str:
        return f"<ParsedJson {type(self._value).__name__}>"

    @classmethod
    def _made(cls, value: object, bound: tuple[int, int]) -> ParsedJson:
        made = object.__new__(cls)
        object.__setattr__(made, "_value", value)
        object.__setattr__(made, "_bound", bound)
        return made

    @classmethod
    def parse(cls, text: str | bytes | bytearray) -> ParsedJson:
        """The JSON text ``text`` parsed as ``json.loads`` parses it (bytes decoded alike).

        Raises:
            ValueError: ``text`` is not JSON.
            RecursionError: ``text`` nests deeper than the parser can follow.
        """
        value, bound = parse_json_text(text)
        return cls._made(value, NO_TEXT_BOUND if bound is None else bound)

    @property
    def value(self) -> object:
        """The parsed value (plain JSON types only: dict, list, str, int, float, bool, None)."""
        return self._value

    @property
    def proved(self) -> bool:
        """Whether the text proved its bound (see the class docstring).

        False for a text ``json.loads`` reads but the proof does not cover: a
        lone surrogate, a number past 64 bits or not finite, more than 65,536
        characters. Its value is still what ``json.loads`` made of it.
        """
        return self._bound is not NO_TEXT_BOUND

    def member(self, key: str | int) -> ParsedJson | None:
        """A member of the value, with the same proof; ``None`` if there is none.

        ``key`` is a name for an object value, an index (from 0) for an array.
        """
        value = self._value
        if type(value) is dict:
            if type(key) is not str or key not in value:
                return None
            return ParsedJson._made(value[key], self._bound)
        if type(value) is list and type(key) is int and 0 <= key < len(value):
            return ParsedJson._made(value[key], self._bound)
        return None


@attrs.frozen(kw_only=True)
class ToolCall:
    """A call the model asked for.

    ``arguments`` is whatever the provider parsed; the dispatcher checks that it
    is a JSON object before anything else looks at it. A call built from the
    model's JSON text with :meth:`from_json` also carries what that text proves
    about its arguments, which lets a validator skip walking them.
    """

    id: str
    name: str
    # Compared, but left out of the hash: parsed arguments are usually a dict.
    arguments: object = attrs.field(hash=False)
    # Set only by from_json, next to the arguments it parsed: the text's length
    # and bracket count (see _call_text). Not an __init__ argument, so neither a
    # caller nor attrs.evolve can pair a bound with other arguments.
    _text_bound: tuple[int, int] = attrs.field(
        init=False, default=NO_TEXT_BOUND, eq=False, hash=False, repr=False
    )

    @classmethod
    def from_json(cls, *, id: str, name: str, arguments: str) -> ToolCall:
        """The call whose arguments are the JSON text ``arguments``, as a model sent it.

        Blank text means no arguments (``{}``); text that is not JSON is kept as
        the string, and the dispatcher refuses it, saying why. Prism parses the
        text itself and keeps what the text proves about the value it parsed
        (at most as many values and characters as the text has, nested at most
        as deep as its brackets, only plain JSON types, numbers within 64 bits
        and finite, no lone surrogate or pollution key): a validator whose
        limits that proof already meets checks the call without walking its
        arguments. The proof belongs to this call's own ``arguments`` object; a
        call rebuilt with other arguments (or with ``attrs.evolve``) has none.
        Do not change the parsed arguments in place: build a new call instead.
        """
        value, bound = parse_call_arguments(arguments)
        call = cls(id=id, name=name, arguments=value)
        if bound is not None:
            object.__setattr__(call, "_text_bound", bound)
        return call

    @classmethod
    def from_parsed(cls, *, id: str, name: str, arguments: ParsedJson) -> ToolCall:
        """The call whose arguments are ``arguments.value``, keeping what its text proves.

        For a host that parsed the model's text (or a whole message holding it)
        with :meth:`ParsedJson.parse`: the call carries the same proof as one
        :meth:`from_json` builds, so a validator may check it without a walk.

        Raises:
            TypeError: ``arguments`` is not a :class:`ParsedJson`.
        """
        if type(arguments) is not ParsedJson:
            raise TypeError(
                f"ToolCall.from_parsed takes a ParsedJson, got {type(arguments).__name__}"
            )
        call = cls(id=id, name=name, arguments=arguments._value)
        if arguments._bound != NO_TEXT_BOUND:
            object.__setattr__(call, "_text_bound", arguments._bound)
        return call


def renamed_call(call: ToolCall, name: str) -> ToolCall:
    """``call`` under the registry name ``name``, keeping its text bound (same arguments)."""
    renamed = ToolCall(id=call.id, name=name, arguments=call.arguments)
    if call._text_bound != NO_TEXT_BOUND:
        object.__setattr__(renamed, "_text_bound", call._text_bound)
    return renamed


@attrs.frozen(kw_only=True)
class ToolResult:
    """What a tool call produced; ``is_error`` results are answers too.

    Attributes:
        content: the blocks shown to the model.
        is_error: whether the call failed (blocked, raised, timed out, ...).
        structured: optional machine-readable result.
        details: facts for hosts, events and the ledger (not shown to the model).
    """

    content: tuple[Content, ...] = attrs.field(default=(), converter=_tuple)
    is_error: bool = False
    # Compared, but left out of the hash (JSON objects are dicts).
    structured: JsonValue = attrs.field(default=None, hash=False)
    details: Mapping[str, JsonValue] = attrs.field(factory=dict, hash=False)

    @classmethod
    def text(cls, text: str, *, is_error: bool = False) -> ToolResult:
        """A result holding one text block."""
        if cls is ToolResult:  # the usual result, built as attrs would, for less
            return _build_result((_build_text(text),), is_error, None, {})
        return cls(content=(TextContent(text=text),), is_error=is_error)

    @classmethod
    def error(cls, message: str, **details: JsonValue) -> ToolResult:
        """An error result whose text is ``message``; ``details`` go to hosts, not the model."""
        return cls(content=(TextContent(text=message),), is_error=True, details=details)

    @property
    def joined_text(self) -> str:
        """The text blocks joined with newlines (other blocks are left out)."""
        return "\n".join(block.text for block in self.content if isinstance(block, TextContent))


@attrs.frozen(kw_only=True)
class UserMessage:
    """A user turn."""

    content: tuple[Content, ...] = attrs.field(converter=_tuple)


@attrs.frozen(kw_only=True)
class AssistantMessage:
    """A model turn: text (and any :class:`ReasoningContent`) and the tool calls it asked for.

    A provider may also say how the answer came about; these facts are not part
    of the turn's value (two turns with the same content are equal) and are
    never sent back to a model.

    Attributes:
        content: the text and reasoning blocks.
        tool_calls: the calls the model asked for.
        input_tokens: prompt tokens the request used, if the provider reported them.
        output_tokens: tokens of the answer, if reported.
        finish_reason: why the model stopped, in the API's own words (``stop``,
            ``length``, ``tool_calls``; ``end_turn``, ``max_tokens``, ...).
        response_model: the model that answered, as the API named it.
    """

    content: tuple[Content, ...] = attrs.field(default=(), converter=_tuple)
    tool_calls: tuple[ToolCall, ...] = attrs.field(default=(), converter=_tuple)
    input_tokens: int | None = attrs.field(default=None, eq=False)
    output_tokens: int | None = attrs.field(default=None, eq=False)
    finish_reason: str | None = attrs.field(default=None, eq=False)
    response_model: str | None = attrs.field(default=None, eq=False)


@attrs.frozen(kw_only=True)
class ToolResultMessage:
    """The answer to one tool call, in the transcript."""

    call_id: str
    tool_name: str
    result: ToolResult


Message: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage


# Every tool call ends in a result, most of them one text block (ToolResult.text).
_build_text = frozen_builder(TextContent)
_build_result = frozen_builder(ToolResult, converted=frozenset({"content"}))
