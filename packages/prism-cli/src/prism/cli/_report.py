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


__all__ = ["LENGTH_STOPS", "RunReport", "rows_from_ledger", "usage_of"]


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
        input_tokens: prompt tokens of every model request, if the model reported them.
        output_tokens: answer tokens of every model request, if reported.
        stop_reason: why the model stopped its last answer, in the API's words.
        truncated: the last answer was cut by a length limit.
    """

    rows: tuple[CallRow, ...]
    rounds: int
    aborted: bool
    final_text: str
    max_in_flight: int
    sandbox: str = "none"
    input_tokens: int | None = None
    output_tokens: int | None = None
    stop_reason: str | None = None
    truncated: bool = False

    def to_json(self) -> dict[str, object]:
        """The report as a JSON object."""
        return {
            "rounds": self.rounds,
            "aborted": self.aborted,
            "final": self.final_text,
            "max_in_flight": self.max_in_flight,
            "sandbox": self.sandbox,
            "usage": {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens},
            "stop_reason": self.stop_reason,
            "truncated": self.truncated,
            "calls": [row.to_json() for row in self.rows],
        }


# Finish reasons that mean the answer was cut by a length limit (OpenAI Chat
# Completions, Anthropic, the Responses API).
LENGTH_STOPS = frozenset({"length", "max_tokens", "max_output_tokens"})


def usage_of(turns: Sequence[AssistantMessage]) -> tuple[int | None, int | None]:
    """Input and output tokens over ``turns`` (``None`` when no turn reported them)."""
    inputs = [t.input_tokens for t in turns if t.input_tokens is not None]
    outputs = [t.output_tokens for t in turns if t.output_tokens is not None]
    return (sum(inputs) if inputs else None, sum(outputs) if outputs else None)


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
