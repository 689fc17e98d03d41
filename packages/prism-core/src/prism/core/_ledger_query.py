"""Filters over ledger records, for readers of either format."""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, cast

import attrs

from ._ledger_records import ToolCallStatus
from ._options import boolean, number, optional, sequence_of, string

if TYPE_CHECKING:
    from ._ledger_records import ToolCallRecord

__all__ = ["LedgerQuery"]


_STRINGS = sequence_of(string(non_empty=False))


def _strings(option: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Iterable) and not isinstance(value, bytes):
        value = tuple(value)
    return cast("tuple[str, ...]", _STRINGS.check("LedgerQuery", option, value))


def _statuses(value: str | Iterable[str]) -> tuple[str, ...]:
    return _strings("status", value)


def _tools(value: str | Iterable[str]) -> tuple[str, ...]:
    return _strings("tool", value)


@attrs.frozen(kw_only=True)
class LedgerQuery:
    """Which records to read; every given filter must match (empty ones match all).

    Attributes:
        status: keep records with one of these statuses.
        tool: keep records whose tool name matches one of these glob patterns.
        run: keep records of runs whose id starts with this.
        since: keep records of calls that started at or after this (epoch seconds).
        blocked: keep only refused calls: ``blocked`` ones, and calls an
            execution policy denied.
    """

    status: tuple[ToolCallStatus, ...] = attrs.field(default=(), converter=_statuses)
    tool: tuple[str, ...] = attrs.field(default=(), converter=_tools)
    run: str | None = attrs.field(default=None, validator=optional(string(non_empty=False)))
    since: float | None = attrs.field(default=None, validator=optional(number()))
    blocked: bool = attrs.field(default=False, validator=boolean())

    def matches(self, record: ToolCallRecord) -> bool:
        """Whether ``record`` passes every filter."""
        if self.status and record.status not in self.status:
            return False
        if self.tool and not any(fnmatchcase(record.tool_name, p) for p in self.tool):
            return False
        if self.run is not None and (
            record.run_id is None or not record.run_id.startswith(self.run)
        ):
            return False
        if self.since is not None and record.started_at < self.since:
            return False
        if self.blocked:
            decision = record.decision
            if record.status != "blocked" and (decision is None or decision.allowed):
                return False
        return True

    def sql(self) -> tuple[str, list[object]]:
        """The ``WHERE`` clause (with a leading space, or empty) and its parameters.

        It may let through more than :meth:`matches` (a tool pattern with a
        ``[...]`` class is left to :meth:`matches`, whose glob dialect SQLite's
        ``GLOB`` does not share), never less: apply :meth:`matches` after it.
        """
        clauses: list[str] = []
        params: list[object] = []
        if self.status:
            clauses.append(f"status IN ({', '.join('?' * len(self.status))})")
            params.extend(self.status)
        if self.tool and not any("[" in pattern for pattern in self.tool):
            clauses.append("(" + " OR ".join("tool_name GLOB ?" for _ in self.tool) + ")")
            params.extend(self.tool)
        if self.run is not None:
            clauses.append("substr(run_id, 1, ?) = ?")
            params.extend((len(self.run), self.run))
        if self.since is not None:
            clauses.append("started_at >= ?")
            params.append(self.since)
        if self.blocked:
            clauses.append("(status = 'blocked' OR decision_allowed = 0)")
        return (" WHERE " + " AND ".join(clauses) if clauses else ""), params

    def apply(self, records: tuple[ToolCallRecord, ...]) -> tuple[ToolCallRecord, ...]:
        """The records that match, in order."""
        return tuple(r for r in records if self.matches(r))
