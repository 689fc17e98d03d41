import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prism.cli import SessionFormatError, load_session, parse_session
from prism.core import TextContent


def test_turns_become_assistant_messages_with_calls_in_order() -> None:
    session = parse_session(
        {
            "prompt": "go",
            "turns": [
                {
                    "text": "looking",
                    "tool_calls": [
                        {"id": "a", "name": "read", "arguments": {"path": "x"}},
                        {"name": "read", "arguments": {"path": "y"}},
                    ],
                },
                {"text": "done"},
            ],
        }
    )
    assert session.prompt == "go"
    first, last = session.turns
    assert [c.id for c in first.tool_calls] == ["a", "t1c2"]
    assert first.tool_calls[1].arguments == {"path": "y"}
    assert last.content == (TextContent(text="done"),)
    assert session.call_count == 2


def test_a_closing_turn_is_added_when_the_script_ends_on_tool_calls() -> None:
    session = parse_session([{"tool_calls": [{"name": "read", "arguments": {}}]}])
    assert len(session.turns) == 2
    assert not session.turns[-1].tool_calls


def test_non_object_arguments_are_kept_for_the_dispatcher_to_refuse() -> None:
    session = parse_session([{"tool_calls": [{"name": "read", "arguments": [1, 2]}]}])
    assert session.turns[0].tool_calls[0].arguments == [1, 2]


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"turns": []}, "turns"),
        ({"turns": [{"text": 3}]}, "turns[0].text"),
        ({"turns": [{"tool_calls": {}}]}, "turns[0].tool_calls"),
        ({"turns": [{"tool_calls": [{"arguments": {}}]}]}, "turns[0].tool_calls[0].name"),
        ({"turns": [{"tool_calls": [{"name": "x", "id": 5}]}]}, "turns[0].tool_calls[0].id"),
        ({"turns": [{"tool_calls": [{"name": "x", "argz": {}}]}]}, "turns[0].tool_calls[0].argz"),
        ({"turns": ["ok"], "promt": "x"}, "promt"),
        ({"turns": ["ok"], "prompt": 1}, "prompt"),
        (
            {"turns": [{"tool_calls": [{"id": "a", "name": "x"}, {"id": "a", "name": "y"}]}]},
            "turns[0].tool_calls[1].id",
        ),
        (42, ""),
    ],
)
def test_bad_sessions_name_the_json_path(data: object, path: str) -> None:
    with pytest.raises(SessionFormatError) as info:
        parse_session(data, source="s.json")
    assert info.value.path == path


def test_load_session_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"turns": ["hello"]}), encoding="utf-8")
    assert load_session(path).turns[0].content == (TextContent(text="hello"),)


def test_load_session_reports_bad_json_with_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text("{nope", encoding="utf-8")
    with pytest.raises(SessionFormatError, match="not valid JSON") as info:
        load_session(path)
    assert info.value.source == str(path)


def test_deeply_nested_json_is_a_format_error_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(SessionFormatError):
        load_session(path)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(_json)
def test_any_json_document_parses_or_raises_a_session_format_error(data: object) -> None:
    try:
        session = parse_session(data)
    except SessionFormatError:
        return
    assert session.turns
