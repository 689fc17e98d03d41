"""Every module of the packages compiles under every Python the packages support.

Python 3.13 strips a docstring's indentation as it compiles it, encoding it as
UTF-8 on the way: a docstring holding a lone surrogate (``"\\ud800"`` written in a
plain string) makes the module fail to import there, though 3.11 and 3.12 take it.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCES = sorted(ROOT.glob("packages/*/src/**/*.py"))


def _docstrings(tree: ast.Module) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            text = ast.get_docstring(node, clean=False)
            if text is not None:
                out.append((getattr(node, "lineno", 1), text))
    return out


def test_no_docstring_holds_a_lone_surrogate() -> None:
    assert SOURCES
    bad = []
    for path in SOURCES:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for line, text in _docstrings(tree):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                bad.append(f"{path.relative_to(ROOT)}:{line}")
    assert bad == [], "docstrings no UTF-8 holds (write them raw: r'''...'''): " + ", ".join(bad)


def test_a_lone_surrogate_in_a_docstring_is_found() -> None:
    tree = ast.parse('def f():\n    "a \\ud800 b"\n')
    ((line, text),) = _docstrings(tree)
    assert line == 1
    assert "\ud800" in text
