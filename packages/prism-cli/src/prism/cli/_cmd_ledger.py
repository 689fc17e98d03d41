"""``prism ledger show`` and ``prism ledger query``: read a run ledger."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ._errors import CliError
from ._output import CONTEXT, console, emit_json
from ._safe import safe_text

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from prism.core.ledger import LedgerContents

__all__ = ["ledger"]

_T = TypeVar("_T")
_RICH_TABLE_ROWS = 200


@click.group(context_settings=CONTEXT)
def ledger() -> None:
    """Read run ledgers (the JSONL or SQLite files `prism run` and `prism demo` write)."""
    # A ledger holds what models and clients sent: a lone surrogate (which JSON's
    # "\\ud800" escape can carry) is printed as that escape, never a crash.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def _filters(fn: Callable[..., _T]) -> Callable[..., _T]:
    fn = click.option(
        "--blocked", is_flag=True, help="Only refused calls: blocked ones and policy denials."
    )(fn)
    fn = click.option(
        "--since",
        metavar="WHEN",
        help="Only calls started since WHEN: an ISO time, epoch seconds, or an age (30m, 2h, 1d).",
    )(fn)
    fn = click.option("--run", "run_id", metavar="ID", help="Only the run whose id starts so.")(fn)
    fn = click.option(
        "--tool", "tools", multiple=True, metavar="GLOB", help="Only these tools (repeatable)."
    )(fn)
    fn = click.option(
        "--status",
        "statuses",
        multiple=True,
        type=click.Choice(["ok", "error", "blocked", "cancelled"]),
        help="Only calls with this status (repeatable).",
    )(fn)
    fn = click.argument(
        "files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path)
    )(fn)
    return fn


SQLITE_HEADER = b"SQLite format 3\x00"


def read_ledger_file(file: Path, filters: Mapping[str, Any]) -> LedgerContents:
    """The records of ``file`` that ``filters`` (the filter options) keep.

    Warnings for skipped lines go to stderr.
    """
    import sqlite3

    from prism.core.ledger import LedgerFormatError, LedgerQuery, read_ledger

    from ._ledgerfile import is_sqlite_path, parse_since

    since = filters["since"]
    try:
        when = None if since is None else parse_since(since)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--since") from exc
    query = LedgerQuery(
        status=filters["statuses"],
        tool=filters["tools"],
        run=filters["run_id"],
        since=when,
        blocked=filters["blocked"],
    )
    try:
        with open(file, "rb") as opened:
            head = opened.read(len(SQLITE_HEADER))
        if is_sqlite_path(file) and head and head != SQLITE_HEADER:
            raise CliError(
                f"{file}: not an SQLite database: a {file.suffix} ledger is an SQLite file, "
                "and this one does not start with SQLite's header"
            )
        contents = read_ledger(file, strict=False, query=query)
    except OSError as exc:
        raise CliError(f"{file}: cannot read it ({exc.strerror or exc})") from exc
    except sqlite3.Error as exc:
        raise CliError(f"{file}: not a Prism ledger database ({exc})") from exc
    except LedgerFormatError as exc:
        raise CliError(f"{file}: not a Prism ledger ({exc})") from exc
    if not contents.records and not contents.runs:
        # Nothing in it reads as a ledger.
        if contents.problems:
            raise CliError(f"{file}: not a Prism ledger ({contents.problems[0]})")
        if contents.torn_line == 1 and not head.lstrip().startswith(b"{"):
            raise CliError(f"{file}: not a Prism ledger (its first line is not a JSON object)")
    for problem in contents.problems[:5]:
        sys.stderr.write(f"prism: warning: {file}: skipped {safe_text(problem)}\n")
    if len(contents.problems) > 5:
        sys.stderr.write(f"prism: warning: {file}: {len(contents.problems)} lines skipped\n")
    if contents.torn_line is not None:
        sys.stderr.write(
            f"prism: warning: {file}: line {contents.torn_line} is torn (a write cut short, "
            "probably by a killed run); it is skipped\n"
        )
    return contents


def read_ledger_files(files: tuple[Path, ...], filters: Mapping[str, Any]) -> LedgerContents:
    """The records of every file in ``files`` as one ledger, in the order calls started.

    (Several gateways behind a load balancer each write their own ledger.)
    """
    import attrs

    if len(files) == 1:
        return read_ledger_file(files[0], filters)
    parts = [read_ledger_file(file, filters) for file in files]
    records = sorted(
        (record for part in parts for record in part.records), key=lambda r: r.started_at
    )
    return attrs.evolve(
        parts[0],
        records=tuple(records),
        runs=tuple(run for part in parts for run in part.runs),
        torn_line=None,
        problems=tuple(problem for part in parts for problem in part.problems),
    )


def _render_show(file: str, contents: LedgerContents, *, json_mode: bool) -> None:
    import attrs

    from ._render import ledger_table, ledger_text, record_to_json, run_lines, untrusted

    records = contents.records
    counts: dict[str, int] = {}
    for record in records:
        counts[record.status] = counts.get(record.status, 0) + 1
    if json_mode:
        emit_json(
            {
                "file": file,
                "counts": counts,
                "records": [record_to_json(r) for r in records],
                "runs": [attrs.asdict(run) for run in contents.runs],
                "torn_line": contents.torn_line,
            }
        )
        return
    out = console()
    if out.is_terminal and len(records) <= _RICH_TABLE_ROWS:
        out.print(ledger_table(records, title=f"ledger {file}"))
    else:
        # Drawing a rich table costs about 2 ms a row; big ledgers and pipes get plain text.
        out.print(f"ledger {untrusted(file)}", soft_wrap=True)
        out.file.write(ledger_text(records) + "\n")
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no records"
    out.print(f"{len(records)} calls: {summary}")
    for line in run_lines(contents.runs):
        out.print(line, soft_wrap=True)


@ledger.command("show", context_settings=CONTEXT)
@_filters
@click.option("--json", "json_mode", is_flag=True, help="Print the records as a JSON document.")
def ledger_show(files: tuple[Path, ...], json_mode: bool, **filters: Any) -> None:
    """Pretty-print the ledger FILE (JSONL or SQLite): one row per call, with its decision.

    Shows status, blocked reason and the decision (which gate or policy
    decided, the rule, the approval, the sandbox), then each run and whether
    it finished or was interrupted. Several FILEs are read as one ledger, in
    the order calls started (the ledgers of gateways behind a load balancer).
    """
    contents = read_ledger_files(files, filters)
    _render_show(" + ".join(map(str, files)), contents, json_mode=json_mode)


@ledger.command("query", context_settings=CONTEXT)
@_filters
def ledger_query(files: tuple[Path, ...], **filters: Any) -> int:
    """Print the records of the ledger FILE that match the filters, one JSON object a line.

    Reads JSONL or SQLite (filters run in SQL there); several FILEs are read as
    one ledger. Exit code 1 when nothing matches, so scripts can test for "any
    denials since 1h".
    """
    from ._render import record_to_json

    contents = read_ledger_files(files, filters)
    for record in contents.records:
        sys.stdout.write(json.dumps(record_to_json(record), ensure_ascii=False) + "\n")
    return 0 if contents.records else 1
