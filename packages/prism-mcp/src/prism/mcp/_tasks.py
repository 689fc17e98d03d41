"""Tool calls that run as tasks: polled under the call's deadlines, cancelled when left.

Two forms:

* 2025-11-25 task-augmented calls: the client asks for a task (``task`` in the
  call's params) for a tool whose ``execution.taskSupport`` is ``"required"``,
  polls ``tasks/get`` and fetches the result with ``tasks/result``.
* The 2026-07-28 tasks extension (``io.modelcontextprotocol/tasks``): the client
  declares the extension, and the server may answer any ``tools/call`` with
  ``resultType: "task"``; ``tasks/get`` carries the status and, once
  terminal, the result or the error. The SDK hands such a result to the
  extension's claim (:class:`TasksExtension`).

Both run inside the call's cancel scope: each answered poll counts as progress
(it restarts ``call_timeout_s``, never past ``max_call_s``), the interval the
server asks for is kept within 50 ms and 5 s, and leaving before the task ended
(timeout, ceiling, abort, a status the bridge cannot follow) sends
``tasks/cancel``, shielded and bounded.
"""

from __future__ import annotations

import logging
import math
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal

import mcp_types
import trio

from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from prism.core.text import clip

from ._content import task_of

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mcp.client.session import ClientSession
    from mcp.shared.dispatcher import ProgressFnT
    from prism.core import JsonObject

__all__ = [
    "TASKS_EXTENSION",
    "TasksExtension",
    "_TaskProtocolError",
    "call_progress",
    "poll_seconds",
    "run_legacy_task",
]

_log = logging.getLogger("prism.mcp")

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
_MIN_POLL_S = 0.05
_MAX_POLL_S = 5.0
_DEFAULT_POLL_S = 0.5
_CANCEL_GRACE_S = 5.0
_MAX_TASK_ID = 512
_RUNNING = ("working", "input_required")

call_progress: ContextVar[ProgressFnT | None] = ContextVar("prism_mcp_call_progress", default=None)
"""The running call's progress callback, read by the task claim (it runs in the call's task)."""


class _TaskState(mcp_types.Result):
    """Whatever ``tasks/get`` (or ``tasks/cancel``) answered, read field by field."""

    model_config = mcp_types.Result.model_config | {"extra": "allow"}


class _TaskProtocolError(Exception):
    """A task the bridge cannot follow (an unknown status, input it cannot give)."""


def poll_seconds(interval_ms: object, default: float = _DEFAULT_POLL_S) -> float:
    """A server's poll interval in seconds, kept within 50 ms and 5 s (``default`` if unusable)."""
    if (
        isinstance(interval_ms, (int, float))
        and not isinstance(interval_ms, bool)
        and math.isfinite(interval_ms)
    ):
        return min(max(interval_ms / 1000.0, _MIN_POLL_S), _MAX_POLL_S)
    return default


async def _cancel(session: ClientSession, task_id: str) -> None:
    with trio.CancelScope(shield=True), trio.move_on_after(_CANCEL_GRACE_S):
        try:
            await session.send_request(
                mcp_types.CancelTaskRequest(
                    params=mcp_types.CancelTaskRequestParams(task_id=task_id)
                ),
                _TaskState,
            )
        except Exception:
            _log.debug("tasks/cancel failed", exc_info=True)


async def run_legacy_task(
    session: ClientSession,
    remote: str,
    arguments: JsonObject,
    max_call_s: float | None,
    on_progress: ProgressFnT,
) -> mcp_types.CallToolResult:
    """Run a 2025-11-25 task-augmented call: create, poll ``tasks/get``, fetch the result."""
    ttl_ms = int(min(max_call_s or 3600.0, 86400.0) * 1000)
    created = await session.send_request(
        mcp_types.CallToolRequest(
            params=mcp_types.CallToolRequestParams(
                name=remote, arguments=arguments, task=mcp_types.TaskMetadata(ttl=ttl_ms)
            )
        ),
        mcp_types.CallToolResult,
        progress_callback=on_progress,
    )
    task = task_of(created)
    if task is None:
        # The server ran it as an ordinary call after all.
        return created
    task_id = task.task_id
    status = task.status
    poll_s = poll_seconds(task.poll_interval)
    finished = False
    try:
        while status in _RUNNING:
            await trio.sleep(poll_s)
            got = await session.send_request(
                mcp_types.GetTaskRequest(params=mcp_types.GetTaskRequestParams(task_id=task_id)),
                mcp_types.GetTaskResult,
            )
            status = got.status
            poll_s = poll_seconds(got.poll_interval, poll_s)
            await on_progress(0.0, None, got.status_message or f"task {status}")
        payload = await session.send_request(
            mcp_types.GetTaskPayloadRequest(
                params=mcp_types.GetTaskPayloadRequestParams(task_id=task_id)
            ),
            mcp_types.CallToolResult,
        )
        finished = True
        return payload
    finally:
        if not finished and status in _RUNNING:
            await _cancel(session, task_id)


class TaskHandle(mcp_types.Result):
    """A 2026-07-28 ``CreateTaskResult``: the task a ``tools/call`` answered with."""

    model_config = mcp_types.Result.model_config | {"extra": "allow"}

    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    poll_interval_ms: Any = None


def _error_result(text: str) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=clip(text))], is_error=True
    )


def _settled(task_id: str, state: dict[str, Any]) -> mcp_types.CallToolResult | None:
    """The call's result once the task is terminal; ``None`` while it runs.

    Raises:
        _TaskProtocolError: a status the bridge cannot follow.
    """
    status = state.get("status")
    if status == "completed" and "result" in state:
        return mcp_types.CallToolResult.model_validate(state["result"], by_name=False)
    if status == "failed":
        error = state.get("error")
        message = error.get("message") if isinstance(error, dict) else None
        code = error.get("code") if isinstance(error, dict) else None
        return _error_result(
            f"task {task_id} failed: {message if isinstance(message, str) else 'no message'}"
            + (f" (code {code})" if isinstance(code, int) else "")
        )
    if status == "cancelled":
        message = state.get("statusMessage")
        return _error_result(
            f"task {task_id} was cancelled by the server"
            + (f": {message}" if isinstance(message, str) and message else "")
        )
    if status == "input_required":
        raise _TaskProtocolError(
            f"task {task_id} asks for input (inputRequests), which the bridge does not give; "
            "it was cancelled"
        )
    if status not in ("working", "completed"):
        raise _TaskProtocolError(
            f"task {task_id} has an unknown status {clip(repr(status), 100)}; it was cancelled"
        )
    return None


async def _resolve(handle: TaskHandle, ctx: ClaimContext) -> mcp_types.CallToolResult:
    session = ctx.session
    task_id = handle.task_id
    if not task_id or len(task_id) > _MAX_TASK_ID:
        raise _TaskProtocolError(f"the server answered with an unusable task id {task_id[:64]!r}")
    on_progress = call_progress.get()
    state = handle.model_dump(by_alias=True)
    poll_s = poll_seconds(handle.poll_interval_ms)
    finished = False
    try:
        while (settled := _settled(task_id, state)) is None:
            await trio.sleep(poll_s)
            answer = await session.send_request(
                mcp_types.GetTaskRequest(params=mcp_types.GetTaskRequestParams(task_id=task_id)),
                _TaskState,
            )
            state = answer.model_dump(by_alias=True)
            poll_s = poll_seconds(state.get("pollIntervalMs"), poll_s)
            if on_progress is not None:
                message = state.get("statusMessage")
                text = message if isinstance(message, str) and message else None
                await on_progress(0.0, None, text or f"task {clip(str(state.get('status')), 64)}")
        finished = True
        return settled
    finally:
        if not finished:
            await _cancel(session, task_id)


class TasksExtension(ClientExtension):
    """Declares ``io.modelcontextprotocol/tasks`` and follows the tasks servers answer with."""

    identifier = TASKS_EXTENSION

    def claims(self) -> Sequence[ResultClaim[Any]]:
        """The one result shape the extension adds: ``resultType: "task"`` on ``tools/call``."""
        return (ResultClaim(result_type="task", model=TaskHandle, resolve=_resolve),)
