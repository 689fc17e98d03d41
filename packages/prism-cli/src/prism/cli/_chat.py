"""``prism chat --model PROVIDER:MODEL``: an interactive session with a real model.

Each line typed is one run of one :class:`~prism.core.AgentSession` (so the
model remembers the conversation), through the tools, gates and ledger of
``prism.toml``. The model's text streams as it arrives. Ctrl-C during a turn
aborts that turn (the transcript stays valid and the next line continues it);
Ctrl-C at the prompt, end of input, ``/exit`` or ``/quit`` leave.
"""

from __future__ import annotations

import signal
import sys
from typing import TYPE_CHECKING, Literal

import attrs
import trio

from prism.core import (
    AbortController,
    AssistantMessage,
    Limits,
    ModelProviderError,
    RunOptions,
    SingleShotLoop,
    TextContent,
    create_agent,
)

from ._model_run import open_model
from ._report import LENGTH_STOPS, usage_of
from ._safe import safe_text

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from rich.console import Console

    from prism.core.ledger import RunLedger
    from prism.providers import StreamEvent

    from ._config import PrismConfig
    from ._ledgerfile import LedgerFailures
    from ._render import EventView
    from ._toolset import Toolset

__all__ = ["ChatInterrupts", "ChatReport", "chat_session", "run_chat", "usage_line"]

_EXIT = frozenset({"/exit", "/quit"})


@attrs.define(eq=False)
class ChatInterrupts:
    """What a stop signal does during a chat.

    Ctrl-C (SIGINT) during a turn aborts that turn (the chat goes on); at the
    prompt, or again while a turn aborts, it leaves the chat. SIGTERM ends
    the chat at once: the watcher cancels it and the run's end marker says
    ``aborted``.
    """

    current: list[AbortController] = attrs.Factory(list)
    leaving: trio.CancelScope = attrs.Factory(trio.CancelScope)

    def __call__(self, signum: int) -> bool:
        """Handle ``signum``; false asks the watcher to cancel the chat."""
        if signum != signal.SIGINT:
            return False
        current = self.current
        if current and not current[0].signal.aborted:
            current[0].abort("interrupted by the user (Ctrl-C)")
        else:
            self.leaving.cancel()
        return True


@attrs.frozen(kw_only=True)
class ChatReport:
    """What a chat did: turns run, turns aborted, tool calls made, tokens used.

    ``input_tokens``/``output_tokens`` add up every model request of the chat
    (``None`` when the model never reported them); ``truncated`` counts the
    answers a length limit cut.
    """

    turns: int
    aborted: int
    calls: int
    input_tokens: int | None = None
    output_tokens: int | None = None
    truncated: int = 0


def usage_line(input_tokens: int | None, output_tokens: int | None, stop_reason: str | None) -> str:
    """``tokens: 120 in, 30 out; stop reason: stop`` (``?`` for what was not reported)."""
    tokens = (
        f"tokens: {'?' if input_tokens is None else input_tokens} in, "
        f"{'?' if output_tokens is None else output_tokens} out"
    )
    return f"{tokens}; stop reason: {safe_text(stop_reason or 'not reported')}"


def _add(total: int | None, more: int | None) -> int | None:
    return total if more is None else (total or 0) + more


async def run_chat(
    toolset: Toolset,
    *,
    model: str,
    base_url: str | None,
    config: PrismConfig,
    ledger: RunLedger,
    write: Callable[[str], None],
    read_line: Callable[[], str],
    view: EventView | None = None,
    interrupts: ChatInterrupts | None = None,
) -> ChatReport:
    """Read lines, run each as a turn of one session, until the user leaves.

    Cancellation: cancelling the caller ends the chat (a turn in flight is
    cancelled; the ledger keeps what finished). ``interrupts`` (given to the
    caller's :func:`watch_interrupts`) is told each turn's controller, so
    Ctrl-C aborts the turn in progress, or ends the chat at the prompt.

    Raises:
        CliError: a bad model spec, no key, or a missing SDK.
    """
    from prism.providers import ModelTextDelta

    streamed = False

    def show(event: StreamEvent) -> None:
        nonlocal streamed
        if isinstance(event, ModelTextDelta):
            streamed = True
            # the model's text is a prompt injection's to steer: control characters shown
            write(safe_text(event.text))

    turns = aborted = truncated = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    seen = 0  # messages of the session before this turn
    control = interrupts or ChatInterrupts()
    current = control.current

    with control.leaving:
        async with open_model(model, base_url=base_url, on_event=show) as (name, provider):
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
            session = agent.session()
            write(f"prism chat with {model}; /exit or Ctrl-D to leave\n")
            while True:
                write("you> ")
                line = await trio.to_thread.run_sync(read_line, abandon_on_cancel=True)
                if not line:
                    write("\n")
                    break
                text = line.strip()
                if not text:
                    continue
                if text in _EXIT:
                    break
                controller = AbortController()
                current.append(controller)
                streamed = False
                try:
                    result = await session.run(
                        text, RunOptions(signal=controller.signal, on_event=view)
                    )
                except ModelProviderError as exc:
                    write(f"\nmodel error: {safe_text(str(exc))}\n")
                    continue
                finally:
                    current.clear()
                turns += 1
                # This turn's model requests: the assistant messages it added.
                replies = [m for m in result.messages[seen:] if isinstance(m, AssistantMessage)]
                seen = len(result.messages)
                turn_in, turn_out = usage_of(replies)
                input_tokens = _add(input_tokens, turn_in)
                output_tokens = _add(output_tokens, turn_out)
                if result.aborted:
                    aborted += 1
                    write("\n(turn aborted; the conversation goes on)\n")
                    continue
                if not streamed:
                    answer = "\n".join(
                        b.text for b in result.final.content if isinstance(b, TextContent)
                    )
                    write(safe_text(answer))
                write("\n")
                stop = result.final.finish_reason
                if stop in LENGTH_STOPS:
                    truncated += 1
                    write("(the answer was cut by the model's length limit)\n")
                write(f"[{usage_line(turn_in, turn_out, stop)}]\n")
    return ChatReport(
        turns=turns,
        aborted=aborted,
        calls=len(ledger.records),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        truncated=truncated,
    )


def chat_session(
    loaded: PrismConfig,
    *,
    model: str,
    base_url: str | None,
    yes_mode: Literal["ask", "never"],
    target: Path,
    failures: LedgerFailures,
    out: Console,
) -> ChatReport:
    """What ``prism chat`` runs: the tools of ``loaded``, a ledger at ``target``, the chat."""
    from ._elicit import terminal_elicitor
    from ._ledgerfile import recording_ledger, writable_roots
    from ._model_run import terminal_approver
    from ._output import write_stdout
    from ._render import EventView
    from ._toolset import open_toolset
    from ._trio import run_trio, watch_interrupts

    approver = terminal_approver(yes_mode)
    interrupts = ChatInterrupts()

    async def go() -> ChatReport:
        async with (
            watch_interrupts(interrupts),
            open_toolset(loaded, approve=approver, elicit=terminal_elicitor()) as toolset,
        ):
            with (
                recording_ledger(
                    target,
                    label=f"prism chat --model {model}",
                    failures=failures,
                    fsync=loaded.ledger_fsync,
                    max_bytes=loaded.ledger_max_bytes,
                    roots=writable_roots(loaded),
                    inside_roots=loaded.ledger_inside_roots,
                ) as run_ledger,
                EventView(out, live=False) as view,
            ):
                return await run_chat(
                    toolset,
                    model=model,
                    base_url=base_url,
                    config=loaded,
                    ledger=run_ledger,
                    write=write_stdout,
                    read_line=sys.stdin.readline,
                    view=view,
                    interrupts=interrupts,
                )

    return run_trio(go, sigterm_as_interrupt=True)
