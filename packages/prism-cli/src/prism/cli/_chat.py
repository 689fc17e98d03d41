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
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import attrs
import click
import trio

from prism.core import (
    AbortController,
    ConfigurationError,
    Limits,
    ModelProviderError,
    RunLedger,
    RunOptions,
    SingleShotLoop,
    TextContent,
    create_agent,
)

from ._errors import CliError
from ._model_run import INSTRUCTIONS

if TYPE_CHECKING:
    from collections.abc import Callable

    from prism.providers import StreamEvent

    from ._config import PrismConfig
    from ._render import EventView
    from ._runner import Toolset

__all__ = ["ChatReport", "chat_command", "run_chat"]

_EXIT = frozenset({"/exit", "/quit"})


@attrs.frozen(kw_only=True)
class ChatReport:
    """What a chat did: turns run, turns aborted, tool calls made."""

    turns: int
    aborted: int
    calls: int


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
) -> ChatReport:
    """Read lines, run each as a turn of one session, until the user leaves.

    Cancellation: cancelling the caller ends the chat (a turn in flight is
    cancelled; the ledger keeps what finished). SIGINT is taken over while the
    chat runs: it aborts the turn in progress, or ends the chat at the prompt.

    Raises:
        CliError: a bad model spec, no key, or a missing SDK.
    """
    from prism.providers import ModelSpec, ModelTextDelta, open_provider

    streamed = False

    def show(event: StreamEvent) -> None:
        nonlocal streamed
        if isinstance(event, ModelTextDelta):
            streamed = True
            write(event.text)

    turns = aborted = 0
    try:
        spec = ModelSpec.parse(model)
        async with (
            open_provider(
                spec, base_url=base_url, instructions=INSTRUCTIONS, on_event=show
            ) as provider,
            trio.open_nursery() as nursery,
        ):
            agent = create_agent(
                model=spec.model,
                provider=provider,
                tools=toolset.tools,
                validator=toolset.validator,
                permission=toolset.permission,
                loop=SingleShotLoop(tool_concurrency=config.agent.tool_concurrency),
                limits=Limits(max_tool_rounds=config.agent.max_tool_rounds),
                ledger=ledger,
            )
            session = agent.session()
            current: list[AbortController] = []

            async def on_interrupt() -> None:
                with trio.open_signal_receiver(signal.SIGINT) as signals:
                    async for _ in signals:
                        if current:
                            current[0].abort("interrupted by the user (Ctrl-C)")
                        else:
                            nursery.cancel_scope.cancel()

            nursery.start_soon(on_interrupt)
            write(f"prism chat with {spec.provider}:{spec.model}; /exit or Ctrl-D to leave\n")
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
                    write(f"\nmodel error: {exc}\n")
                    continue
                finally:
                    current.clear()
                turns += 1
                if result.aborted:
                    aborted += 1
                    write("\n(turn aborted; the conversation goes on)\n")
                    continue
                if not streamed:
                    answer = "\n".join(
                        b.text for b in result.final.content if isinstance(b, TextContent)
                    )
                    write(answer)
                write("\n")
            nursery.cancel_scope.cancel()
    except ConfigurationError as exc:
        raise CliError(f"--model {model}: {exc}") from exc
    return ChatReport(turns=turns, aborted=aborted, calls=len(ledger.records))


@click.command("chat", context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--model",
    "model_spec",
    required=True,
    metavar="PROVIDER:MODEL",
    help="The model (openai:MODEL, anthropic:MODEL). Keys from OPENAI_API_KEY / ANTHROPIC_API_KEY.",
)
@click.option(
    "--base-url",
    metavar="URL",
    help="The model API's base URL (an OpenAI-compatible server such as vLLM or Ollama).",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default="prism.toml",
    show_default=True,
    help="Tools, roots, rules and limits.",
)
@click.option(
    "--ledger",
    "ledger_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Append the ledger here as calls end (default: [ledger] path, else prism-ledger.jsonl).",
)
@click.option(
    "--yes",
    "yes_mode",
    type=click.Choice(["ask", "never"]),
    default="ask",
    show_default=True,
    help="Ask on the terminal before an action the policy will not allow by itself (never "
    "in a pipe), or never approve anything.",
)
def chat_command(
    model_spec: str,
    base_url: str | None,
    config_file: Path,
    ledger_file: Path | None,
    yes_mode: Literal["ask", "never"],
) -> int:
    """Talk with a real model that works through the tools of prism.toml.

    Each line is one turn of one conversation. Ctrl-C aborts the turn in
    progress (the conversation goes on); Ctrl-C at the prompt, Ctrl-D or /exit
    leave. Approval questions are asked on the terminal (yes / no / always).
    """
    from ._app import _console
    from ._config import load_config
    from ._ledgerfile import LedgerFailures, recording_ledger
    from ._model_run import terminal_approver
    from ._render import EventView
    from ._runner import open_toolset
    from ._trio import run_trio

    loaded = load_config(config_file)
    target = ledger_file or Path(loaded.ledger or Path.cwd() / "prism-ledger.jsonl")
    console = _console()
    failures = LedgerFailures()
    approver = terminal_approver(yes_mode)

    def write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    async def go() -> ChatReport:
        async with open_toolset(loaded, approve=approver) as toolset:
            with (
                recording_ledger(
                    target,
                    label=f"prism chat --model {model_spec}",
                    failures=failures,
                    fsync=loaded.ledger_fsync,
                    max_bytes=loaded.ledger_max_bytes,
                ) as run_ledger,
                EventView(console, live=False) as view,
            ):
                return await run_chat(
                    toolset,
                    model=model_spec,
                    base_url=base_url,
                    config=loaded,
                    ledger=run_ledger,
                    write=write,
                    read_line=sys.stdin.readline,
                    view=view,
                )

    try:
        report = run_trio(go)
    finally:
        failures.report()
    console.print(
        f"{report.turns} turn(s), {report.aborted} aborted, {report.calls} call(s); "
        f"ledger: {target}",
        soft_wrap=True,
    )
    return 0
