"""Terminal output: live call progress, summary tables, ledgers.

Everything that draws goes through one :class:`rich.console.Console`. On a
terminal, running calls get a spinner (and a bar once they report a total);
anywhere else (pipes, CI logs, tests) each event is one plain line, so output
stays greppable.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import attrs
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from prism.core import (
    ToolExecutionBlocked,
    ToolExecutionError,
    ToolExecutionFinished,
    ToolExecutionProgress,
    ToolExecutionStarted,
    TurnStarted,
)
from prism.core.ledger import ToolCallRecord, default_redactor
from prism.core.text import clip

from ._safe import safe_text

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from prism.core import AgentEvent, Content, JsonValue
    from prism.core.ledger import LedgerRun

__all__ = [
    "CallRow",
    "EventView",
    "content_lines",
    "content_to_json",
    "decision_text",
    "ledger_table",
    "ledger_text",
    "record_to_json",
    "refusal_of",
    "run_lines",
    "safe_text",
    "summary_table",
    "untrusted",
]

_STATUS_STYLE = {
    "ok": "green",
    "error": "red",
    "blocked": "yellow",
    "cancelled": "magenta",
}


def untrusted(text: str) -> str:
    """``text`` made safe to print through rich: no control characters, no markup."""
    return escape(safe_text(text))


def _clip(text: str, limit: int) -> str:
    # One line for a table cell: control characters shown, whitespace folded.
    return clip(" ".join(safe_text(text).split()), limit)


_AUDIO_URI_PREFIX = "mcp-audio:"


def _b64_size(data: str) -> int:
    """Decoded size of base64 ``data`` (without decoding it)."""
    data = data.strip()
    return max(len(data) * 3 // 4 - data[-2:].count("="), 0)


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} bytes"
    if count < 1024 * 1024:
        return f"{count / 1024:.1f} KiB"
    return f"{count / (1024 * 1024):.1f} MiB"


def content_lines(content: Sequence[Content]) -> list[str]:
    """Every block of a result as text lines, safe to print (control characters escaped).

    Text blocks are printed as they are; images, audio, embedded resources and
    resource links get one bracketed line each naming their kind, MIME type,
    size or URI (an embedded text resource is followed by its text).
    """
    from prism.core import ImageContent, ResourceContent, ResourceLink, TextContent

    lines: list[str] = []
    for block in content:
        if isinstance(block, TextContent):
            lines.append(safe_text(block.text))
        elif isinstance(block, ImageContent):
            lines.append(f"[image {_clip(block.mime_type, 80)}, {_size(_b64_size(block.data))}]")
        elif isinstance(block, ResourceLink):
            parts = [f"[resource link] {_clip(block.uri, 400)}"]
            if block.name:
                parts.append(f"name: {_clip(block.name, 120)}")
            if block.mime_type:
                parts.append(_clip(block.mime_type, 80))
            if block.description:
                parts.append(_clip(block.description, 200))
            lines.append(" | ".join(parts))
        elif isinstance(block, ResourceContent):
            mime = _clip(block.mime_type, 80) if block.mime_type else "unknown type"
            if block.uri.startswith(_AUDIO_URI_PREFIX):
                size = _size(_b64_size(block.blob or ""))
                lines.append(f"[audio {mime}, {size}]")
            elif block.text is not None:
                lines.append(f"[resource {_clip(block.uri, 400)} ({mime})]")
                lines.append(safe_text(block.text))
            else:
                size = _size(_b64_size(block.blob or ""))
                lines.append(f"[resource {_clip(block.uri, 400)} ({mime}), {size}]")
    return lines


def content_to_json(content: Sequence[Content]) -> list[dict[str, object]]:
    """Every block of a result as JSON (with its data, and ``bytes`` for base64 payloads)."""
    from prism.core import ImageContent, ResourceContent, ResourceLink, TextContent

    out: list[dict[str, object]] = []
    for block in content:
        if isinstance(block, TextContent):
            out.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageContent):
            out.append(
                {
                    "type": "image",
                    "mime_type": block.mime_type,
                    "bytes": _b64_size(block.data),
                    "data": block.data,
                }
            )
        elif isinstance(block, ResourceLink):
            out.append(
                {
                    "type": "resource_link",
                    "uri": block.uri,
                    "name": block.name,
                    "mime_type": block.mime_type,
                    "description": block.description,
                }
            )
        elif isinstance(block, ResourceContent):
            kind = "audio" if block.uri.startswith(_AUDIO_URI_PREFIX) else "resource"
            item: dict[str, object] = {"type": kind, "uri": block.uri, "mime_type": block.mime_type}
            if block.text is not None:
                item["text"] = block.text
            if block.blob is not None:
                item["bytes"] = _b64_size(block.blob)
                item["blob"] = block.blob
            out.append(item)
    return out


def _args_preview(arguments: object, limit: int = 48) -> str:
    try:
        text = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(arguments)
    return _clip(text, limit)


def _redacted(value: JsonValue) -> JsonValue:
    """``value`` as the ledger would store it (secret-looking values replaced)."""
    return default_redactor()(value)


def _duration(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    return f"{seconds * 1000:.1f} ms"


def refusal_of(details: Mapping[str, object]) -> str | None:
    """Which policy refused a call that reached ``execute``, from its result's details."""
    if details.get("execution_denied"):
        return "execution_denied"
    if details.get("error") == "PathEscapeError":
        return "path_escape"
    return None


@attrs.frozen(kw_only=True)
class CallRow:
    """One line of a summary table: what happened to one call of a run.

    ``blocked_reason`` is the dispatcher gate that refused the call; ``refused_by``
    names the policy that refused it inside ``execute`` (status ``error``), if any.
    """

    index: int
    turn: int
    call_id: str
    tool_name: str
    status: str
    blocked_reason: str | None
    duration_s: float
    detail: str
    refused_by: str | None = None

    def to_json(self) -> dict[str, object]:
        """The row as a JSON object (for ``--json`` output)."""
        return attrs.asdict(self)


def summary_table(rows: Sequence[CallRow], *, title: str | None = None) -> Table:
    """The end-of-run table: call, tool, status, blocked reason, duration, detail."""
    table = Table(title=title, title_justify="left", expand=False)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("turn", justify="right", no_wrap=True)
    table.add_column("call", no_wrap=True)
    table.add_column("tool", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("blocked reason", no_wrap=True)
    table.add_column("duration", justify="right", no_wrap=True)
    table.add_column("detail", max_width=50)
    for row in rows:
        style = _STATUS_STYLE.get(row.status, "")
        table.add_row(
            str(row.index),
            str(row.turn),
            untrusted(row.call_id),
            untrusted(row.tool_name),
            f"[{style}]{row.status}[/]" if style else row.status,
            row.blocked_reason or (f"[dim]{row.refused_by}[/]" if row.refused_by else ""),
            _duration(row.duration_s),
            escape(_clip(row.detail, 48)),
        )
    return table


def record_to_json(record: ToolCallRecord) -> dict[str, object]:
    """A ledger record as a JSON object."""
    return attrs.asdict(record)


def decision_text(record: ToolCallRecord) -> str:
    """The record's decision in a few words (``execution_policy:denied rule=...``), or ``""``."""
    decision = record.decision
    return "" if decision is None else decision.label


def _ledger_cells(number: int, record: ToolCallRecord) -> list[str]:
    return [
        str(number),
        _clip(record.call_id, 24),
        _clip(record.tool_name, 40),
        record.status,
        record.blocked_reason or "",
        _clip(decision_text(record), 60),
        _duration(record.duration_s),
        _args_preview(record.arguments, 40),
        _clip(record.result_preview or "", 50),
    ]


_LEDGER_HEADER = [
    "#",
    "call",
    "tool",
    "status",
    "blocked reason",
    "decision",
    "duration",
    "arguments",
    "result",
]


def run_lines(runs: Iterable[LedgerRun]) -> list[str]:
    """One line per run: its id, label, call count and how it ended (escaped for rich)."""
    lines = []
    for run in runs:
        ended = "interrupted (no end marker)" if run.outcome is None else run.outcome
        label = f" {untrusted(run.label)}" if run.label else ""
        lines.append(f"run {untrusted(run.run_id)}{label}: {run.calls} calls, {ended}")
    return lines


def ledger_text(records: Sequence[ToolCallRecord]) -> str:
    """A ledger as a plain aligned text table (fast for big ledgers, and for pipes)."""
    rows = [_LEDGER_HEADER] + [_ledger_cells(n, r) for n, r in enumerate(records, start=1)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_LEDGER_HEADER))]
    right = {0, 6}
    lines = []
    for index, row in enumerate(rows):
        cells = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append("  ".join(cells).rstrip())
        if index == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def ledger_table(records: Iterable[ToolCallRecord], *, title: str | None = None) -> Table:
    """A ledger as a table, one row per record in file order."""
    table = Table(title=title, title_justify="left")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("call", no_wrap=True)
    table.add_column("tool", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("blocked reason", no_wrap=True)
    table.add_column("decision", max_width=40)
    table.add_column("duration", justify="right", no_wrap=True)
    table.add_column("arguments", max_width=40)
    table.add_column("result", max_width=50)
    for number, record in enumerate(records, start=1):
        style = _STATUS_STYLE.get(record.status, "")
        table.add_row(
            str(number),
            untrusted(record.call_id),
            untrusted(record.tool_name),
            f"[{style}]{record.status}[/]" if style else record.status,
            record.blocked_reason or "",
            escape(decision_text(record)),
            _duration(record.duration_s),
            escape(_args_preview(record.arguments, 40)),
            escape(_clip(record.result_preview or "", 50)),
        )
    return table


@attrs.define(eq=False)
class EventView:
    """An event sink that draws calls as they run.

    On a terminal each running call gets a spinner line (a bar once it reports a
    total); otherwise each event prints one plain line. ``quiet`` draws nothing
    (``--json`` mode). Also counts how many calls were in flight at once.

    Use it as a context manager around the run so the live display is torn down.
    """

    console: Console
    quiet: bool = False
    live: bool | None = None
    max_in_flight: int = attrs.field(default=0, init=False)
    refusals: dict[str, str] = attrs.field(factory=dict, init=False)
    _pending_turn: int | None = attrs.field(default=None, init=False)
    _in_flight: int = attrs.field(default=0, init=False)
    _progress: Progress | None = attrs.field(default=None, init=False)
    _tasks: dict[str, TaskID] = attrs.field(factory=dict, init=False)

    def __enter__(self) -> EventView:
        use_live = self.console.is_terminal if self.live is None else self.live
        if use_live and not self.quiet:
            self._progress = Progress(
                SpinnerColumn(finished_text=" "),
                TextColumn("{task.description}"),
                BarColumn(bar_width=20),
                TimeElapsedColumn(),
                console=self.console,
                transient=False,
            )
            self._progress.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def _line(self, text: str) -> None:
        if self.quiet:
            return
        if self._progress is not None:
            self._progress.console.print(text, highlight=False)
        else:
            self.console.print(text, highlight=False, soft_wrap=True)

    def __call__(self, event: AgentEvent) -> None:
        """Receive one event (the agent's ``on_event``)."""
        if isinstance(event, TurnStarted):
            # Shown with the turn's first call: a turn that only answers prints nothing.
            self._pending_turn = event.turn
            return
        tool_event = (
            ToolExecutionStarted,
            ToolExecutionProgress,
            ToolExecutionFinished,
            ToolExecutionError,
            ToolExecutionBlocked,
        )
        if self._pending_turn is not None and isinstance(event, tool_event):
            self._line(f"[bold]turn {self._pending_turn}[/]")
            self._pending_turn = None
        if isinstance(event, ToolExecutionStarted):
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            self._start(event)
        elif isinstance(event, ToolExecutionProgress):
            self._on_progress(event)
        elif isinstance(event, ToolExecutionFinished):
            self._in_flight = max(0, self._in_flight - 1)
            status = "error" if event.result.is_error else "ok"
            refusal = refusal_of(event.result.details) if event.result.is_error else None
            if refusal is not None:
                self.refusals[event.call_id] = refusal
            detail = _clip(str(_redacted(event.result.joined_text)), 70)
            self._done(event.call_id, event.tool_name, status, event.duration_s, detail)
        elif isinstance(event, ToolExecutionError):
            self._in_flight = max(0, self._in_flight - 1)
            status = "cancelled" if event.cancelled else "error"
            self._done(
                event.call_id, event.tool_name, status, event.duration_s, _clip(event.error, 70)
            )
        elif isinstance(event, ToolExecutionBlocked):
            self._done(
                event.call_id,
                event.tool_name,
                "blocked",
                None,
                f"{event.reason}: {_clip(event.message, 70)}",
            )

    def _label(self, call_id: str, tool_name: str) -> str:
        return f"{untrusted(call_id):<6} {untrusted(tool_name)}"

    def _start(self, event: ToolExecutionStarted) -> None:
        # Redacted as the ledger redacts them: a live log must not show a secret either.
        args = escape(_args_preview(_redacted(event.arguments)))
        label = f"{self._label(event.call_id, event.tool_name)} {args}"
        if self._progress is not None:
            self._tasks[event.call_id] = self._progress.add_task(label, total=None)
        else:
            self._line(f"  start    {label}")

    def _on_progress(self, event: ToolExecutionProgress) -> None:
        message = untrusted(_clip(event.message or "", 70))
        if self._progress is not None:
            task = self._tasks.get(event.call_id)
            if task is not None:
                label = f"{self._label(event.call_id, event.tool_name)} {message}"
                self._progress.update(
                    task, description=label, completed=event.progress or 0, total=event.total
                )
            return
        amount = ""
        if event.progress is not None:
            amount = f"{event.progress:g}" + (f"/{event.total:g}" if event.total else "")
        self._line(f"  progress {self._label(event.call_id, event.tool_name)} {amount} {message}")

    def _done(
        self, call_id: str, tool_name: str, status: str, duration_s: float | None, detail: str
    ) -> None:
        style = _STATUS_STYLE.get(status, "")
        took = f" ({_duration(duration_s)})" if duration_s is not None else ""
        text = f"  [{style}]{status:<8}[/] {self._label(call_id, tool_name)}{took} {escape(detail)}"
        task = self._tasks.pop(call_id, None)
        if self._progress is not None and task is not None:
            self._progress.remove_task(task)
        self._line(text)
