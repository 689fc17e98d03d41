"""Untrusted text made safe to write to a terminal (no rich: error paths use it too)."""

from __future__ import annotations

from prism.core.text import escape_controls

__all__ = ["safe_text"]


def safe_text(text: str) -> str:
    """``text`` with terminal control characters shown as visible escapes, never sent.

    Tool results, ledger records, MCP descriptions and the error messages built
    from them are untrusted: an escape sequence in them must not be able to
    clear the screen, move the cursor, set the clipboard, retitle the terminal or
    reorder text (bidi controls). Newlines and tabs stay.
    """
    return escape_controls(text)
