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
from prism.core.options import OptionCheck, optional, string

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


@attrs.frozen(kw_only=True)
class _CallDoc:
    """One scripted call as written.

    ``arguments`` stay as written, even when not an object: the dispatcher's
    invalid_arguments gate is what a model would meet.
    """

    name: str = attrs.field(validator=string())
    id: str | None = attrs.field(default=None, validator=optional(string()))
    arguments: object = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class _TurnDoc:
    text: str = attrs.field(default="", validator=string(non_empty=False))
    tool_calls: tuple[_CallDoc, ...] = attrs.field(
        default=(),
        validator=OptionCheck(
            f"at most {_MAX_CALLS_PER_TURN} calls",
            lambda v: isinstance(v, tuple) and len(v) <= _MAX_CALLS_PER_TURN,
        ),
    )


@attrs.frozen(kw_only=True)
class _SessionDoc:
    prompt: str = attrs.field(default=_DEFAULT_PROMPT, validator=string(non_empty=False))
    turns: tuple[_TurnDoc, ...] = attrs.field(
        validator=OptionCheck(
            f"a non-empty list of at most {_MAX_TURNS} turns",
            lambda v: isinstance(v, tuple) and 0 < len(v) <= _MAX_TURNS,
        )
    )


def _register() -> None:
    from ._convert import converter, table_hook

    tables = table_hook(_TurnDoc)

    def turn(value: object, cl: object) -> _TurnDoc:
        # A bare string is a text-only turn.
        return _TurnDoc(text=value) if isinstance(value, str) else tables(value, cl)

    converter.register_structure_hook(_TurnDoc, turn)


def parse_session(data: object, *, source: str = "session") -> ScriptedSession:
    """Validate a parsed session document.

    Raises:
        SessionFormatError: naming the JSON path that is wrong.
    """
    from ._convert import structure

    if isinstance(data, list):
        data = {"turns": data}
    elif not isinstance(data, Mapping):
        raise SessionFormatError(
            source, "", "expected an object with 'turns', or a list of turns", value=data
        )
    document = structure(data, _SessionDoc, source=source, error=SessionFormatError)
    turns: list[AssistantMessage] = []
    seen: set[str] = set()
    for index, doc in enumerate(document.turns):
        calls: list[ToolCall] = []
        for position, call in enumerate(doc.tool_calls):
            call_id = call.id or f"t{index + 1}c{position + 1}"
            if call_id in seen:
                where = f"turns[{index}].tool_calls[{position}].id"
                raise SessionFormatError(source, where, f"{call_id!r} repeats", value=call_id)
            seen.add(call_id)
            calls.append(ToolCall(id=call_id, name=call.name, arguments=call.arguments))
        content = (TextContent(text=doc.text),) if doc.text else ()
        turns.append(AssistantMessage(content=content, tool_calls=tuple(calls)))
    if turns[-1].tool_calls:
        turns.append(AssistantMessage(content=(TextContent(text=_CLOSING_TEXT),)))
    return ScriptedSession(prompt=document.prompt, turns=tuple(turns))


def load_session(path: str | os.PathLike[str]) -> ScriptedSession:
    """Read and validate a session file (blocking I/O: call it outside trio or in a thread).

    Raises:
        SessionFormatError: the file cannot be read, is not JSON, or has a bad field.
    """
    from ._convert import read_file

    source = str(path)
    raw = read_file(
        Path(path), _MAX_SESSION_BYTES, lambda problem: SessionFormatError(source, "", problem)
    )
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise SessionFormatError(source, "", f"not valid JSON ({exc})") from exc
    return parse_session(data, source=source)


_register()
