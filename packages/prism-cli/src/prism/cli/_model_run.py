"""``prism run --model PROVIDER:MODEL "task"``: a real model through the configured gates.

The model is reached through ``prism.providers`` (OpenAI Chat Completions or any
OpenAI-compatible server, Anthropic Messages); the tools, gates and ledger are
exactly those of a scripted run. On a terminal, an action the coding policy will
not allow by itself is asked about (yes / no / always for this session); in a
pipe, or with ``--yes never``, nothing is approved and the model is told why.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

import attrs
import trio

from prism.core import (
    AbortSignal,
    AssistantMessage,
    ConfigurationError,
    Limits,
    ModelProviderError,
    RunOptions,
    SingleShotLoop,
    TextContent,
    create_agent,
    trio_native,
)

from ._errors import CliError
from ._report import LENGTH_STOPS, RunReport, rows_from_ledger, usage_of

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from prism.coding.security import ApprovalDecision
    from prism.core import ExecutionAction, ModelProvider
    from prism.core.ledger import RunLedger
    from prism.providers import StreamSink

    from ._config import PrismConfig
    from ._render import EventView
    from ._toolset import Toolset

__all__ = [
    "INSTRUCTIONS",
    "TerminalApprover",
    "open_model",
    "run_model_task",
    "terminal_approver",
]

YesMode = Literal["ask", "never"]

INSTRUCTIONS = (
    "You are a coding agent working through Prism's gated tools. Use the tools to do the "
    "user's task in the workspace; a tool may refuse a call and say why: adapt, do not "
    "retry the same call. Finish with a short summary of what you did."
)


def describe_action(action: ExecutionAction) -> str:
    """What an approval question is about, in one line: the command or the paths."""
    if action.command:
        what = f"run `{action.command}`"
    else:
        what = f"{action.operation or action.kind} {', '.join(action.paths) or '(no path)'}"
    risk = f", risk {action.risk}" if action.risk else ""
    return f"{action.kind}: {what}{risk}"


@trio_native  # Prism's own trio code: stays on trio under an asyncio host
@attrs.define(eq=False)
class TerminalApprover:
    """Asks on the terminal: yes (this once), no, or always (this exact action, this session).

    Questions are asked one at a time; the answer is read in a worker thread so
    the run's other tasks go on. Anything but y/yes/a/always is a no.
    """

    write: Callable[[str], None]
    read_line: Callable[[], str]
    _lock: trio.Lock = attrs.field(factory=trio.Lock, init=False)

    async def __call__(self, action: ExecutionAction) -> ApprovalDecision:
        """Ask about ``action``; cancellation abandons the question (denied)."""
        from prism.coding.security import ApprovalDecision

        from ._render import safe_text

        reason = action.metadata.get("approval_reason")
        why = (
            safe_text(reason)
            if isinstance(reason, str)
            else "the coding policy does not allow this by itself"
        )
        async with self._lock:
            # model-chosen text goes to the terminal: control characters shown, never sent
            self.write(
                f"\napproval needed: {safe_text(describe_action(action))}\n"
                f"  why: {why}\n  allow? [y]es / [n]o / [a]lways for this session: "
            )
            line = await trio.to_thread.run_sync(self.read_line, abandon_on_cancel=True)
        answer = line.strip().lower()
        if answer in ("y", "yes"):
            return ApprovalDecision(approved=True, remember=False)
        if answer in ("a", "always"):
            return ApprovalDecision(approved=True, remember=True)
        return ApprovalDecision(approved=False, remember=False, reason="the user said no")


def terminal_approver(yes: YesMode) -> TerminalApprover | None:
    """The approver for this process: on a terminal unless ``yes`` is ``"never"``."""
    if yes == "never" or not (sys.stdin.isatty() and sys.stdout.isatty()):
        return None

    from ._output import write_stdout

    return TerminalApprover(write=write_stdout, read_line=sys.stdin.readline)


@contextlib.asynccontextmanager
async def open_model(
    model: str, *, base_url: str | None, on_event: StreamSink | None = None
) -> AsyncIterator[tuple[str, ModelProvider]]:
    """The model name and the provider ``model`` (``PROVIDER:MODEL``) names.

    The provider names are :class:`prism.providers.ModelSpec`'s (``openai``,
    ``openai-responses``, ``anthropic``).

    Raises:
        CliError: a bad spec, no key, or a missing SDK (the message names the flag).
    """
    from prism.providers import ModelSpec, open_provider

    try:
        spec = ModelSpec.parse(model)
        async with open_provider(
            spec, base_url=base_url, instructions=INSTRUCTIONS, on_event=on_event
        ) as provider:
            yield spec.model, provider
    except ConfigurationError as exc:
        raise CliError(f"--model {model}: {exc}") from exc


async def run_model_task(
    task: str,
    toolset: Toolset,
    *,
    model: str,
    base_url: str | None,
    config: PrismConfig,
    ledger: RunLedger,
    view: EventView | None = None,
    signal: AbortSignal | None = None,
) -> RunReport:
    """Run ``task`` with the model ``model`` names (``PROVIDER:MODEL``), every gate on.

    The API key comes from the provider's environment variable
    (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``); ``base_url`` points at another
    server (a local OpenAI-compatible one needs no key).

    Cancellation: cancelling the caller cancels the model request (the HTTP
    request is closed) and the calls in flight; aborting ``signal`` ends the run
    with a valid transcript (its report says ``aborted``).

    Raises:
        CliError: a bad model spec, no key, a missing SDK, or the model API failed
            (the message says which and why, never the key).
    """
    try:
        async with open_model(model, base_url=base_url) as (name, provider):
            agent = create_agent(
                model=name,
                provider=provider,
                tools=toolset.tools,
                validator=toolset.validator,
                permission=toolset.permission,
                loop=SingleShotLoop(concurrency=config.agent.concurrency),
                limits=Limits(max_tool_rounds=config.agent.max_tool_rounds),
                ledger=ledger,
            )
            options = RunOptions(on_event=view, signal=signal)
            result = await agent.session().run(task, options)
    except ModelProviderError as exc:
        raise CliError(f"the model could not answer: {exc}") from exc
    turns = [m for m in result.messages if isinstance(m, AssistantMessage)]
    final = "\n".join(b.text for b in result.final.content if isinstance(b, TextContent))
    # This run's turns only (the session is new, so every assistant turn is this run's).
    input_tokens, output_tokens = usage_of(turns)
    stop = result.final.finish_reason
    return RunReport(
        rows=rows_from_ledger(turns, ledger.records, view.refusals if view else None),
        rounds=result.rounds,
        aborted=result.aborted,
        final_text=final,
        max_in_flight=view.max_in_flight if view else 0,
        sandbox=toolset.sandbox,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        stop_reason=stop,
        truncated=stop in LENGTH_STOPS,
    )
