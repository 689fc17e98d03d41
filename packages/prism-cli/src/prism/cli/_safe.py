"""Untrusted text made safe to write to a terminal (no rich: error paths use it too)."""

from __future__ import annotations

import re

__all__ = ["safe_text"]

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def safe_text(text: str) -> str:
    """``text`` with terminal control characters shown as visible escapes, never sent.

    Tool results, ledger records, MCP descriptions and the error messages built
    from them are untrusted: an escape sequence in them must not be able to
    clear the screen, move the cursor, set the clipboard, retitle the terminal or
    reorder text (bidi controls). Newlines and tabs stay.
    """
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
