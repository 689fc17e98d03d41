"""What a run did, in rows: one per scripted call, read from the ledger's records."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from ._render import CallRow

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from prism.core import (
        AssistantMessage,
    )
    from prism.core.ledger import ToolCallRecord


__all__ = ["RunReport", "rows_from_ledger"]


@attrs.frozen(kw_only=True)
class RunReport:
    """What a scripted run did.

    Attributes:
        rows: one row per scripted call, in script order.
        rounds: tool rounds the agent executed.
        aborted: whether the run was aborted.
        final_text: the last assistant message's text.
        max_in_flight: the most calls that ran at once.
        sandbox: where shell commands ran (``"bubblewrap"``, ``"landlock (...)"`` or
            ``"none"``, with why when ``"auto"`` fell back).
    """

    rows: tuple[CallRow, ...]
    rounds: int
    aborted: bool
    final_text: str
    max_in_flight: int
    sandbox: str = "none"

    def to_json(self) -> dict[str, object]:
        """The report as a JSON object."""
        return {
            "rounds": self.rounds,
            "aborted": self.aborted,
            "final": self.final_text,
            "max_in_flight": self.max_in_flight,
            "sandbox": self.sandbox,
            "calls": [row.to_json() for row in self.rows],
        }


def rows_from_ledger(
    turns: Sequence[AssistantMessage],
    records: Sequence[ToolCallRecord],
    refusals: Mapping[str, str] | None = None,
) -> tuple[CallRow, ...]:
    """One summary row per scripted call, in script order, from the ledger's records.

    ``refusals`` maps call ids to the policy that refused them inside ``execute``.
    """
    refusals = refusals or {}
    by_id = {record.call_id: record for record in records}
    rows: list[CallRow] = []
    index = 0
    for turn_number, turn in enumerate(turns, start=1):
        for call in turn.tool_calls:
            index += 1
            record = by_id.get(call.id)
            if record is None:
                rows.append(
                    CallRow(
                        index=index,
                        turn=turn_number,
                        call_id=call.id,
                        tool_name=call.name,
                        status="cancelled",
                        blocked_reason=None,
                        duration_s=0.0,
                        detail="never started",
                    )
                )
                continue
            rows.append(
                CallRow(
                    index=index,
                    turn=turn_number,
                    call_id=call.id,
                    tool_name=record.tool_name,
                    status=record.status,
                    blocked_reason=record.blocked_reason,
                    duration_s=record.duration_s,
                    detail=record.result_preview or "",
                    refused_by=refusals.get(call.id),
                )
            )
    return tuple(rows)
