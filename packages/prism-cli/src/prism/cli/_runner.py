"""Session runs: a scripted session replayed, or a task for a model, through a :class:`Toolset`.

The tools, gates and ledger come from :mod:`._toolset`; the runs are driven by
``prism.core``'s agent runtime.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Literal

import attrs

from prism.core import (
    AbortController,
    AbortSignal,
    AssistantMessage,
    Limits,
    ModelRequest,
    RunOptions,
    ScriptedProvider,
    ScriptedTurn,
    SingleShotLoop,
    TextContent,
    create_agent,
)

from ._errors import CliError
from ._model_run import run_model_task, terminal_approver
from ._render import EventView
from ._report import RunReport, rows_from_ledger
from ._toolset import Toolset, open_toolset
from ._trio import run_trio, watch_interrupts

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from rich.console import Console

    from prism.core.ledger import RunLedger

    from ._config import PrismConfig
    from ._ledgerfile import LedgerFailures
    from ._session import ScriptedSession

__all__ = ["run_command_session", "run_scripted_session"]


def _script(turns: Sequence[AssistantMessage], registry_names: Sequence[str]) -> list[ScriptedTurn]:
    """Scripted turns whose calls may name tools by registry name or by provider alias.

    A real model only sees provider-safe aliases (``mcp__docs__search``); a
    session written by hand naturally uses registry names (``mcp:docs:search``).
    Each turn is replayed as the model would send it: under the alias offered
    in that request, when the written name is a registry name.
    """
    from prism.core import provider_safe_name

    aliases = {name: provider_safe_name(name) for name in registry_names}

    def replay(turn: AssistantMessage) -> ScriptedTurn:
        def answer(request: ModelRequest) -> AssistantMessage:
            offered = {spec.name for spec in request.tools}
            calls = tuple(
                attrs.evolve(call, name=aliases[call.name])
                if call.name not in offered and aliases.get(call.name) in offered
                else call
                for call in turn.tool_calls
            )
            return attrs.evolve(turn, tool_calls=calls)

        return answer

    return [replay(turn) if turn.tool_calls else turn for turn in turns]


async def run_scripted_session(
    session: ScriptedSession,
    toolset: Toolset,
    *,
    config: PrismConfig,
    ledger: RunLedger,
    view: EventView | None = None,
    signal: AbortSignal | None = None,
) -> RunReport:
    """Replay ``session`` through the agent runtime with every gate on.

    ``view`` receives every event (and counts calls in flight and policy refusals
    for the report). Cancellation: cancelling the caller cancels the run (the
    ledger keeps what finished); aborting ``signal`` ends the run with a valid
    transcript.

    Raises:
        CliError: the agent runtime refused the session (for example, it ran out of turns).
    """
    from prism.core import PrismError

    names = [tool.name for tool in toolset.tools]
    provider = ScriptedProvider(_script(session.turns, names))
    agent = create_agent(
        model=config.agent.model,
        provider=provider,
        tools=toolset.tools,
        validator=toolset.validator,
        permission=toolset.permission,
        filters=toolset.filters,
        loop=SingleShotLoop(concurrency=config.agent.concurrency),
        limits=Limits(max_tool_rounds=config.agent.max_tool_rounds),
        ledger=ledger,
    )
    options = RunOptions(on_event=view, signal=signal)
    try:
        result = await agent.session().run(session.prompt, options)
    except PrismError as exc:
        raise CliError(f"the session could not run: {exc}") from exc
    final = "\n".join(b.text for b in result.final.content if isinstance(b, TextContent))
    return RunReport(
        rows=rows_from_ledger(session.turns, ledger.records, view.refusals if view else None),
        rounds=result.rounds,
        aborted=result.aborted,
        final_text=final,
        max_in_flight=view.max_in_flight if view else 0,
        sandbox=toolset.sandbox,
    )


def run_command_session(
    loaded: PrismConfig,
    *,
    session: ScriptedSession | None,
    task: str,
    model: str | None,
    base_url: str | None,
    yes_mode: Literal["ask", "never"],
    target: Path,
    failures: LedgerFailures,
    out: Console,
    quiet: bool,
    live: bool | None,
) -> tuple[RunReport, str]:
    """What ``prism run`` runs: ``session`` replayed, or ``task`` for ``model``; and the run id.

    The ledger file is opened once the tools are up (a run that never started
    leaves none). With a model, Ctrl-C or SIGTERM ends the run after the calls
    in flight answer, a second one at once; a scripted run stops at once. An
    interrupted run's end marker says ``aborted``.
    """
    from ._elicit import terminal_elicitor
    from ._ledgerfile import recording_ledger, writable_roots

    approver = None
    if model is not None:
        approver = terminal_approver(yes_mode)
        if approver is not None:
            live = False  # a live display would draw over the questions
    elicit = terminal_elicitor()
    run_id = ""
    controller = AbortController()

    def on_interrupt(signum: int) -> bool:
        # A model's run: the first Ctrl-C (or SIGTERM) ends it once the calls in
        # flight answer, the second stops at once. A scripted run stops at once.
        if model is None or controller.signal.aborted:
            return False
        sys.stderr.write("\nprism: interrupted: ending the run (Ctrl-C again to stop at once)\n")
        controller.abort("interrupted by the user (Ctrl-C)")
        return True

    async def go() -> RunReport:
        nonlocal run_id
        async with (
            watch_interrupts(on_interrupt) as interrupts,
            open_toolset(loaded, approve=approver, elicit=elicit) as toolset,
        ):
            label = f"prism run {task}" if model is None else f"prism run --model {model}"
            with recording_ledger(
                target,
                label=label,
                failures=failures,
                fsync=loaded.ledger_fsync,
                max_bytes=loaded.ledger_max_bytes,
                roots=writable_roots(loaded),
                inside_roots=loaded.ledger_inside_roots,
                interrupted=lambda: bool(interrupts.received),
            ) as run_ledger:
                run_id = run_ledger.run_id
                with EventView(out, quiet=quiet, live=live) as view:
                    if session is None:
                        return await run_model_task(
                            task,
                            toolset,
                            model=str(model),
                            base_url=base_url,
                            config=loaded,
                            ledger=run_ledger,
                            view=view,
                            signal=controller.signal,
                        )
                    return await run_scripted_session(
                        session, toolset, config=loaded, ledger=run_ledger, view=view
                    )

    report = run_trio(go, sigterm_as_interrupt=True)
    return report, run_id
