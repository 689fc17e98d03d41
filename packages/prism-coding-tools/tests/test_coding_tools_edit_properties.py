"""edit against a plain model: unique matches replace, anything else leaves the file alone."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prism.coding.tools import create_edit_tool
from prism.core import JsonValue, ToolCall, ToolExecutionContext, ToolResult

if TYPE_CHECKING:
    from pathlib import Path

_text = st.text(alphabet="ab\n é", max_size=40)


def _model(text: str, edits: list[tuple[str, str]]) -> str | None:
    """The expected LF text after the edits, or None when one must fail."""
    for old, new in edits:
        first = text.find(old)
        if first < 0 or text.find(old, first + 1) >= 0:
            return None
        text = text[:first] + new + text[first + len(old) :]
    return text


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    text=_text,
    edits=st.lists(st.tuples(_text.filter(bool), _text), min_size=1, max_size=3),
    crlf=st.booleans(),
    bom=st.booleans(),
)
def test_edit_matches_the_model_and_keeps_crlf_and_bom(
    tmp_path: Path, text: str, edits: list[tuple[str, str]], crlf: bool, bom: bool
) -> None:
    crlf = crlf and "\n" in text
    encoded = (text.replace("\n", "\r\n") if crlf else text).encode()
    original = (b"\xef\xbb\xbf" if bom else b"") + encoded
    target = tmp_path / "f.txt"
    target.write_bytes(original)
    tool = create_edit_tool(str(tmp_path))
    edit_list: list[JsonValue] = [{"old_text": old, "new_text": new} for old, new in edits]

    async def call() -> ToolResult:
        ctx = ToolExecutionContext(call=ToolCall(id="e", name="edit", arguments={}))
        return await tool.execute({"path": "f.txt", "edits": edit_list}, ctx)

    result = trio.run(call)
    expected = _model(text, edits)
    after = target.read_bytes()
    if expected is None:
        assert result.is_error, result.joined_text
        assert after == original
        return
    assert not result.is_error, result.joined_text
    body = expected.replace("\n", "\r\n") if crlf else expected
    assert after == (b"\xef\xbb\xbf" if bom else b"") + body.encode()
