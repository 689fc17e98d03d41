"""Scripted sessions: the JSON file ``prism run`` replays as the model's turns.

::

    {
      "prompt": "Tidy the README",                 (optional)
      "turns": [
        {"text": "Looking first.",
         "tool_calls": [{"id": "c1", "name": "read", "arguments": {"path": "README.md"}}]},
        {"text": "Done."}
      ]
    }

A bare list of turns is accepted too. Call ids are optional (``t<turn>c<index>``
is used). If the last turn still asks for tools, a closing text turn is added
so the run ends with an answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from prism.core import AssistantMessage, TextContent, ToolCall

from ._errors import SessionFormatError

if TYPE_CHECKING:
    import os

__all__ = ["ScriptedSession", "load_session", "parse_session"]

_MAX_SESSION_BYTES = 10_000_000
_MAX_TURNS = 1_000
_MAX_CALLS_PER_TURN = 256
_DEFAULT_PROMPT = "Run the scripted session."
_CLOSING_TEXT = "The scripted session is over."


@attrs.frozen(kw_only=True)
class ScriptedSession:
    """A session to replay.

    Attributes:
        prompt: the user's opening message.
        turns: the assistant turns, in order.
    """

    prompt: str
    turns: tuple[AssistantMessage, ...]

    @property
    def call_count(self) -> int:
        """How many tool calls the script asks for."""
        return sum(len(turn.tool_calls) for turn in self.turns)


def _call(source: str, where: str, data: object, default_id: str) -> ToolCall:
    if not isinstance(data, Mapping):
        raise SessionFormatError(source, where, "expected an object with 'name' and 'arguments'")
    unknown = sorted(set(data) - {"id", "name", "arguments"})
    if unknown:
        raise SessionFormatError(source, f"{where}.{unknown[0]}", "unknown key")
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise SessionFormatError(source, f"{where}.name", "expected a non-empty string")
    call_id = data.get("id", default_id)
    if not isinstance(call_id, str) or not call_id:
        raise SessionFormatError(source, f"{where}.id", "expected a non-empty string")
    # Arguments stay as written, even when they are not an object: the dispatcher's
    # invalid_arguments gate is what a model would meet, so the CLI does not pre-empt it.
    return ToolCall(id=call_id, name=name, arguments=data.get("arguments", {}))


def _turn(source: str, where: str, data: object, number: int) -> AssistantMessage:
    if isinstance(data, str):
        return AssistantMessage(content=(TextContent(text=data),))
    if not isinstance(data, Mapping):
        raise SessionFormatError(source, where, "expected an object or a string")
    unknown = sorted(set(data) - {"text", "tool_calls"})
    if unknown:
        raise SessionFormatError(source, f"{where}.{unknown[0]}", "unknown key")
    text = data.get("text", "")
    if not isinstance(text, str):
        raise SessionFormatError(source, f"{where}.text", "expected a string")
    raw_calls = data.get("tool_calls", [])
    if not isinstance(raw_calls, list):
        raise SessionFormatError(source, f"{where}.tool_calls", "expected a list")
    if len(raw_calls) > _MAX_CALLS_PER_TURN:
        raise SessionFormatError(
            source, f"{where}.tool_calls", f"more than {_MAX_CALLS_PER_TURN} calls in one turn"
        )
    calls = tuple(
        _call(source, f"{where}.tool_calls[{index}]", item, f"t{number}c{index + 1}")
        for index, item in enumerate(raw_calls)
    )
    content = (TextContent(text=text),) if text else ()
    return AssistantMessage(content=content, tool_calls=calls)


def parse_session(data: object, *, source: str = "session") -> ScriptedSession:
    """Validate a parsed session document.

    Raises:
        SessionFormatError: naming the JSON path that is wrong.
    """
    prompt: object = _DEFAULT_PROMPT
    turns_data: object
    if isinstance(data, list):
        turns_data = data
    elif isinstance(data, Mapping):
        unknown = sorted(set(data) - {"prompt", "turns"})
        if unknown:
            raise SessionFormatError(source, unknown[0], "unknown key (expected prompt, turns)")
        prompt = data.get("prompt", _DEFAULT_PROMPT)
        turns_data = data.get("turns")
    else:
        raise SessionFormatError(source, "", "expected an object with 'turns', or a list of turns")
    if not isinstance(prompt, str):
        raise SessionFormatError(source, "prompt", "expected a string")
    if not isinstance(turns_data, list) or not turns_data:
        raise SessionFormatError(source, "turns", "expected a non-empty list of turns")
    if len(turns_data) > _MAX_TURNS:
        raise SessionFormatError(source, "turns", f"more than {_MAX_TURNS} turns")
    turns = [
        _turn(source, f"turns[{index}]", item, index + 1) for index, item in enumerate(turns_data)
    ]
    seen: set[str] = set()
    for index, turn in enumerate(turns):
        for position, call in enumerate(turn.tool_calls):
            if call.id in seen:
                raise SessionFormatError(
                    source, f"turns[{index}].tool_calls[{position}].id", f"{call.id!r} repeats"
                )
            seen.add(call.id)
    if turns[-1].tool_calls:
        turns.append(AssistantMessage(content=(TextContent(text=_CLOSING_TEXT),)))
    return ScriptedSession(prompt=prompt, turns=tuple(turns))


def load_session(path: str | os.PathLike[str]) -> ScriptedSession:
    """Read and validate a session file (blocking I/O: call it outside trio or in a thread).

    Raises:
        SessionFormatError: the file cannot be read, is not JSON, or has a bad field.
    """
    source = str(path)
    try:
        with Path(path).open("rb") as handle:
            raw = handle.read(_MAX_SESSION_BYTES + 1)
    except OSError as exc:
        raise SessionFormatError(source, "", f"cannot read it ({exc.strerror or exc})") from exc
    if len(raw) > _MAX_SESSION_BYTES:
        raise SessionFormatError(source, "", f"larger than {_MAX_SESSION_BYTES} bytes")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise SessionFormatError(source, "", f"not valid JSON ({exc})") from exc
    return parse_session(data, source=source)
