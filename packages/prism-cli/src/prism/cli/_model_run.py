"""``prism run --model PROVIDER:MODEL "task"``: a real model through the configured gates.

The model is reached through ``prism.providers`` (OpenAI Chat Completions or any
OpenAI-compatible server, Anthropic Messages); the tools, gates and ledger are
exactly those of a scripted run. Nobody is asked to approve anything: a call that
would need approval is refused and the model is told why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prism.core import (
    AbortSignal,
    AssistantMessage,
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
from ._runner import RunReport, Toolset, rows_from_ledger

if TYPE_CHECKING:
    from ._config import PrismConfig
    from ._render import EventView

__all__ = ["INSTRUCTIONS", "run_model_task"]

INSTRUCTIONS = (
    "You are a coding agent working through Prism's gated tools. Use the tools to do the "
    "user's task in the workspace; a tool may refuse a call and say why: adapt, do not "
    "retry the same call. Finish with a short summary of what you did."
)


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
    with a valid transcript.

    Raises:
        CliError: a bad model spec, no key, a missing SDK, or the model API failed
            (the message says which and why, never the key).
    """
    try:
        from prism.providers import ModelSpec, open_provider
    except ImportError as exc:  # pragma: no cover - prism-cli depends on prism-providers
        raise CliError(f"--model needs prism-providers: {exc}") from exc
    try:
        spec = ModelSpec.parse(model)
        async with open_provider(spec, base_url=base_url, instructions=INSTRUCTIONS) as provider:
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
            result = await agent.session().run(task, RunOptions(on_event=view, signal=signal))
    except ConfigurationError as exc:
        raise CliError(f"--model {model}: {exc}") from exc
    except ModelProviderError as exc:
        raise CliError(f"the model could not answer: {exc}") from exc
    turns = [m for m in result.messages if isinstance(m, AssistantMessage)]
    final = "\n".join(b.text for b in result.final.content if isinstance(b, TextContent))
    return RunReport(
        rows=rows_from_ledger(turns, ledger.records, view.refusals if view else None),
        rounds=result.rounds,
        aborted=result.aborted,
        final_text=final,
        max_in_flight=view.max_in_flight if view else 0,
        sandbox=toolset.sandbox,
    )
