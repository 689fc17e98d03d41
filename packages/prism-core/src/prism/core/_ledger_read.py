"""Reading a ledger file back, JSONL or SQLite, told apart by the SQLite header."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from ._ledger_files import SQLITE_MAGIC, LedgerContents
from ._ledger_jsonl import read_ledger_text
from ._ledger_records import LedgerFormatError
from ._ledger_sqlite import read_sqlite_ledger

if TYPE_CHECKING:
    import os

    from ._ledger_query import LedgerQuery

__all__ = ["read_ledger"]


def read_ledger(
    path: str | os.PathLike[str], *, strict: bool = True, query: LedgerQuery | None = None
) -> LedgerContents:
    """Read a ledger file, JSONL or SQLite (told apart by the SQLite header).

    Blocks on file I/O: from trio, call it through ``trio.to_thread.run_sync``.

    Args:
        path: the file.
        strict: see :func:`read_ledger_text` (JSONL only).
        query: keep only the records it matches (run in SQL for SQLite).

    Raises:
        OSError: the file cannot be read.
        LedgerFormatError: it is not a ledger this version can read (see
            :func:`read_ledger_text` for ``strict``).
    """
    with open(path, "rb") as file:
        head = file.read(len(SQLITE_MAGIC))
        if head == SQLITE_MAGIC:
            return read_sqlite_ledger(path, query)
        data = head + file.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LedgerFormatError(f"not a UTF-8 JSONL ledger ({exc})") from exc
    contents = read_ledger_text(text, strict=strict)
    if query is not None:
        contents = attrs.evolve(contents, records=query.apply(contents.records))
    return contents
