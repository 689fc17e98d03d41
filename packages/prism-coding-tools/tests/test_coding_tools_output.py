"""The bounded output collector: streaming gives the same view as computing it at once."""

from __future__ import annotations

import itertools
import os

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from prism.coding.tools._output import (
    CLIP_MARKER,
    OutputCollector,
    _decode,
    clip_lines,
    has_long_line,
    tail_window,
)

_lines = st.lists(
    st.one_of(st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")), st.just(b"x" * 40)),
    max_size=80,
)


def _reference_clip(data: bytes, limit: int) -> bytes:
    return b"\n".join(
        line[:limit] + CLIP_MARKER if len(line) > limit else line for line in data.split(b"\n")
    )


def _collect(
    chunks: list[bytes], *, max_lines: int, max_bytes: int, max_line_bytes: int
) -> tuple[bytes, str | None, bool, bool]:
    collector = OutputCollector(
        max_lines=max_lines,
        max_bytes=max_bytes,
        max_line_bytes=max_line_bytes,
        max_spill_bytes=1 << 20,
        spill_prefix="prism-test-",
    )

    async def main() -> tuple[bytes, str | None, bool, bool]:
        try:
            for chunk in chunks:
                await collector.feed(chunk)
            out = await collector.finish()
        finally:
            await collector.aclose()
        return out.text.encode(), out.spill_path, out.truncated, out.clipped

    return trio.run(main)


@settings(max_examples=200, deadline=None)
@given(
    lines=_lines,
    trailing_newline=st.booleans(),
    cuts=st.lists(st.integers(0, 2000), max_size=12),
    max_lines=st.integers(1, 12),
    max_bytes=st.integers(8, 120),
    max_line_bytes=st.integers(4, 30),
)
def test_streaming_view_equals_the_view_of_the_whole(
    lines: list[bytes],
    trailing_newline: bool,
    cuts: list[int],
    max_lines: int,
    max_bytes: int,
    max_line_bytes: int,
) -> None:
    full = b"\n".join(lines) + (b"\n" if trailing_newline and lines else b"")
    points = sorted({min(c, len(full)) for c in cuts} | {0, len(full)})
    chunks = [full[a:b] for a, b in itertools.pairwise(points)]
    text, spill, truncated, clipped = _collect(
        chunks,
        max_lines=max_lines,
        max_bytes=max_bytes,
        max_line_bytes=max_line_bytes,
    )
    display = _reference_clip(full, max_line_bytes)
    lines_in_full = full.count(b"\n") + (0 if full.endswith(b"\n") or not full else 1)
    within = len(full) <= max_bytes and lines_in_full <= max_lines and display == full
    if within:
        assert spill is None
        assert text == full.decode("utf-8", "replace").encode()
        assert not truncated
        assert not clipped
        return
    assert spill is not None
    try:
        with open(spill, "rb") as f:
            assert f.read() == full
    finally:
        os.unlink(spill)
    expected = tail_window(display, max_bytes=max_bytes, max_lines=max_lines)
    start = len(display) - len(expected)
    mid_line = start > 0 and display[start - 1 : start] != b"\n"
    assert text == _decode(expected, mid_line=mid_line).encode()


@given(data=st.binary(max_size=300), limit=st.integers(1, 40))
def test_has_long_line_matches_a_plain_scan(data: bytes, limit: int) -> None:
    assert has_long_line(data, limit) == any(len(x) > limit for x in data.split(b"\n"))


@given(data=st.binary(max_size=300), limit=st.integers(1, 40))
def test_clip_lines_matches_a_plain_clip(data: bytes, limit: int) -> None:
    clipped, any_clipped = clip_lines(data, limit)
    assert clipped == _reference_clip(data, limit)
    assert any_clipped == any(len(x) > limit for x in data.split(b"\n"))


@given(
    data=st.binary(max_size=400),
    max_bytes=st.integers(1, 100),
    max_lines=st.integers(1, 20),
)
def test_tail_window_is_a_bounded_suffix_starting_at_a_line(
    data: bytes, max_bytes: int, max_lines: int
) -> None:
    window = tail_window(data, max_bytes=max_bytes, max_lines=max_lines)
    assert data.endswith(window)
    assert len(window) <= max_bytes
    body = window[:-1] if window.endswith(b"\n") else window
    assert body.count(b"\n") + 1 <= max_lines or not window
    start = len(data) - len(window)
    starts_line = start == 0 or data[start - 1 : start] == b"\n"
    # Only a last line longer than max_bytes on its own may start mid-line.
    assert starts_line or b"\n" not in body
    if data:
        assert window
