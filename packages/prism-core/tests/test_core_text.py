import pytest

from prism.core import DispatchOptions, ToolCall, ToolDefinition, ToolResult, create_tool_registry
from prism.core import dispatch_tool_call as dispatch
from prism.core._text import clip_counted
from prism.core.testing import AllowAllPermissionPolicy
from prism.core.text import (
    MESSAGE_LIMIT,
    NAME_LIMIT,
    REASON_LIMIT,
    clip,
    describe_exception,
    escape_controls,
    has_lone_surrogate,
)


def test_short_text_is_kept_whole() -> None:
    assert clip("abc", 3) == "abc"


def test_long_text_is_cut_to_the_limit_and_marked() -> None:
    clipped = clip("x" * 5_000)
    assert len(clipped) == MESSAGE_LIMIT
    assert clipped.endswith("...")


@pytest.mark.parametrize("limit", [NAME_LIMIT, REASON_LIMIT, 1, 3, 4])
def test_clipped_text_never_exceeds_the_limit(limit: int) -> None:
    assert len(clip("y" * 10_000, limit)) == limit


def test_a_zero_limit_leaves_nothing() -> None:
    assert clip("abc", 0) == ""


def test_a_counted_clip_says_how_much_of_the_whole_was_left_out() -> None:
    assert clip_counted("abc", 3) == "abc"
    assert clip_counted("a" * 10, 4) == "aaaa...[6 more chars]"
    # The caller already cut the value: the count is of the whole it came from.
    assert clip_counted("a" * 8, 4, total=1_000) == "aaaa...[996 more chars]"


def test_an_exception_is_named_with_its_message() -> None:
    assert describe_exception(ValueError("bad value")) == "ValueError: bad value"


def test_an_exception_without_a_message_is_named_alone() -> None:
    assert describe_exception(KeyError()) == "KeyError"


def test_a_long_message_is_clipped() -> None:
    assert len(describe_exception(RuntimeError("z" * 10_000), limit=50)) == 50


def test_a_group_is_described_by_its_preferred_leaf() -> None:
    group = ExceptionGroup(
        "outer", [ValueError("first"), ExceptionGroup("inner", [OSError("disk")])]
    )
    assert describe_exception(group, prefer=(KeyError, OSError)) == "OSError: disk"


def test_a_group_without_a_preferred_leaf_is_described_by_its_first() -> None:
    group = ExceptionGroup("outer", [ValueError("first"), OSError("disk")])
    assert describe_exception(group) == "ValueError: first"


class _HostileStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def test_an_exception_whose_str_fails_is_named_alone() -> None:
    assert describe_exception(_HostileStr()) == "_HostileStr"


async def test_a_tool_raising_an_exception_whose_str_fails_is_a_result() -> None:
    async def execute(_arguments: object, _context: object) -> ToolResult:
        raise _HostileStr

    tool = ToolDefinition(name="hostile", execute=execute)
    options = DispatchOptions(
        registry=create_tool_registry([tool]), permission=AllowAllPermissionPolicy()
    )
    result = await dispatch(ToolCall(id="1", name="hostile", arguments={}), options)
    assert result.is_error
    assert "_HostileStr" in result.joined_text


@pytest.mark.parametrize(
    ("text", "lone"),
    [
        ("", False),
        ("plain", False),
        ("caf\u00e9 \U0001f600", False),  # a pair is one code point: UTF-8 holds it
        ("\ud800", True),
        ("x" * 10_000 + "\udfff", True),
        ("\u00e9\ud83d", True),  # a high surrogate with no low one after it
        ("\ude00\ud83d", True),  # a pair in the wrong order is two lone ones
    ],
)
def test_a_lone_surrogate_is_found_wherever_it_is(text: str, lone: bool) -> None:
    assert has_lone_surrogate(text) is lone
    # the same answer as writing the text as UTF-8
    assert lone is (text.encode("utf-8", "surrogatepass") != text.encode("utf-8", "replace"))


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("ls\tx\ny", "ls\tx\ny"),  # tabs and newlines stay
        ("ok # \r\x1b[3A\x1b[J?", "ok # \\x0d\\x1b[3A\\x1b[J?"),
        ("a\x08\x7f\x9bb", "a\\x08\\x7f\\x9bb"),
        ("evil\u202egnp.exe", "evil\\u202egnp.exe"),
        ("\u2066x\u2069\u200b\u2028\ufeff", "\\u2066x\\u2069\\u200b\\u2028\\ufeff"),
        ("café ✓", "café ✓"),
    ],
)
def test_escape_controls_shows_what_would_move_or_hide_text(text: str, shown: str) -> None:
    assert escape_controls(text) == shown
