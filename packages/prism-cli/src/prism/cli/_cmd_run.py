"""``prism run``, ``prism chat`` and ``prism demo``: agent runs through the gates.

Each command checks its local files first (the session, ``prism.toml``) and
imports the agent runtime, the MCP SDK and the model SDKs only after that, so a
typo costs a fraction of a second.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

import click

from ._output import CONTEXT, config_option, console, emit_json, ledger_option

if TYPE_CHECKING:
    from rich.console import Console

    from ._chat import ChatReport
    from ._config import PrismConfig
    from ._report import RunReport

__all__ = ["chat_command", "demo_command", "run_command"]

_DEFAULT_CONFIG = "prism.toml"

_config_option = config_option("Tools, roots, rules and limits")
_model_options = [
    click.option(
        "--base-url",
        metavar="URL",
        help="The model API's base URL (an OpenAI-compatible server such as vLLM or Ollama).",
    ),
    click.option(
        "--yes",
        "yes_mode",
        type=click.Choice(["ask", "never"]),
        default="ask",
        show_default=True,
        help="Ask on the terminal before an action the policy will not allow by itself "
        "(never in a pipe), or never approve anything.",
    ),
]
_MODEL_HELP = (
    "openai:MODEL (Chat Completions, or any OpenAI-compatible server), openai-responses:MODEL "
    "(the Responses API), anthropic:MODEL. Keys from OPENAI_API_KEY / ANTHROPIC_API_KEY."
)


def read_config(config_file: Path | None) -> PrismConfig:
    """``--config FILE``, else ``./prism.toml`` when it exists, else the defaults."""
    from ._convert import load_config

    if config_file is None:
        return load_config(_DEFAULT_CONFIG, missing_ok=True)
    return load_config(config_file)


def _ledger_target(ledger_file: Path | None, loaded: PrismConfig) -> Path:
    from ._ledgerfile import default_ledger_path

    if ledger_file is not None:
        return ledger_file
    return Path(loaded.ledger) if loaded.ledger else default_ledger_path()


def _config_hint(loaded: PrismConfig, report: RunReport) -> None:
    """Say on stderr why tools were missing when no prism.toml was read (and only then)."""
    if loaded.found or not any(row.blocked_reason == "unknown_tool" for row in report.rows):
        return
    console(json_mode=True).print(
        f"hint: no {_DEFAULT_CONFIG} here, so only the coding tools were offered; "
        "pass --config FILE to add MCP servers",
        soft_wrap=True,
    )


def _render_run(
    report: RunReport,
    *,
    loaded: PrismConfig,
    target: Path,
    run_id: str,
    ledger_errors: int,
    json_mode: bool,
    out: Console,
) -> None:
    from ._render import summary_table, untrusted

    if json_mode:
        emit_json(
            {
                **report.to_json(),
                "ledger": str(target),
                "run_id": run_id,
                "ledger_errors": ledger_errors,
            }
        )
    else:
        out.print(summary_table(report.rows, title="calls"))
        if report.final_text:
            out.print(f"final answer: {untrusted(report.final_text)}", soft_wrap=True)
        if report.truncated:
            out.print(
                f"the answer was cut by the model's length limit (stop reason "
                f"{untrusted(report.stop_reason or '')})",
                soft_wrap=True,
            )
        if report.stop_reason is not None or report.input_tokens is not None:
            tokens = (
                f"tokens: {report.input_tokens if report.input_tokens is not None else '?'} in, "
                f"{report.output_tokens if report.output_tokens is not None else '?'} out"
            )
            stop = untrusted(report.stop_reason or "not reported")
            out.print(f"{tokens}; stop reason: {stop}", soft_wrap=True)
        if report.aborted:
            out.print("the run was aborted (Ctrl-C); the ledger holds every call", soft_wrap=True)
        out.print(f"ledger: {target} (run {run_id})", soft_wrap=True)
    _config_hint(loaded, report)


@click.command("run", context_settings=CONTEXT)
@click.argument("session_file", metavar="SESSION_FILE_OR_TASK")
@_config_option
@ledger_option(
    "Append the ledger here as calls end (default: [ledger] path, else "
    "$XDG_STATE_HOME/prism/prism-ledger.jsonl; a .db/.sqlite path gets an SQLite ledger)."
)
@click.option("--json", "json_mode", is_flag=True, help="Print one JSON report instead of tables.")
@click.option("--live/--no-live", default=None, help="Force the live display on or off.")
@click.option(
    "--model",
    "model_spec",
    metavar="PROVIDER:MODEL",
    help="Drive a real model; the argument is then the task. " + _MODEL_HELP,
)
@_model_options[0]
@_model_options[1]
def run_command(
    session_file: str,
    config_file: Path | None,
    ledger_file: Path | None,
    json_mode: bool,
    live: bool | None,
    model_spec: str | None,
    base_url: str | None,
    yes_mode: Literal["ask", "never"],
) -> int:
    """Replay SESSION_FILE (scripted assistant turns, JSON) against the tools in prism.toml.

    With --model PROVIDER:MODEL, the argument is a task for that model instead:
    prism run --model openai:gpt-4.1-mini "add a test for foo". On a terminal,
    an action the coding policy will not allow by itself is asked about (yes /
    no / always); in a pipe or with --yes never, it is refused and the model is
    told why. Ctrl-C ends a model's run after the calls in flight answer (the
    transcript and the ledger stay valid).

    Every call goes through the full gates: permission rules, JSON Schema
    validation, the coding execution policy, bounded parallelism per turn.
    """
    from ._preflight import check_model_flags
    from ._session import load_session

    # Flags and local files first: a typo is reported before anything heavy is imported.
    check_model_flags(model_spec, base_url)
    session = None if model_spec is not None else load_session(session_file)
    loaded = read_config(config_file)
    target = _ledger_target(ledger_file, loaded)
    out = console(json_mode=json_mode)

    from ._ledgerfile import LedgerFailures
    from ._runner import run_command_session

    failures = LedgerFailures()
    try:
        report, run_id = run_command_session(
            loaded,
            session=session,
            task=session_file,
            model=model_spec,
            base_url=base_url,
            yes_mode=yes_mode,
            target=target,
            failures=failures,
            out=out,
            quiet=json_mode,
            live=live,
        )
    finally:
        failures.report()
    _render_run(
        report,
        loaded=loaded,
        target=target,
        run_id=run_id,
        ledger_errors=failures.count,
        json_mode=json_mode,
        out=out,
    )
    return 1 if report.aborted else 0


def _render_chat(report: ChatReport, target: Path) -> None:
    tokens = ""
    if report.input_tokens is not None or report.output_tokens is not None:
        tokens = (
            f"tokens: {'?' if report.input_tokens is None else report.input_tokens} in, "
            f"{'?' if report.output_tokens is None else report.output_tokens} out; "
        )
    cut = f"{report.truncated} answer(s) cut by the length limit; " if report.truncated else ""
    console().print(
        f"{report.turns} turn(s), {report.aborted} aborted, {report.calls} call(s); "
        f"{tokens}{cut}ledger: {target}",
        soft_wrap=True,
    )


@click.command("chat", context_settings=CONTEXT)
@click.option(
    "--model",
    "model_spec",
    required=True,
    metavar="PROVIDER:MODEL",
    help="The model: " + _MODEL_HELP,
)
@_model_options[0]
@_config_option
@ledger_option(
    "Append the ledger here as calls end (default: [ledger] path, else "
    "$XDG_STATE_HOME/prism/prism-ledger.jsonl)."
)
@_model_options[1]
def chat_command(
    model_spec: str,
    base_url: str | None,
    config_file: Path | None,
    ledger_file: Path | None,
    yes_mode: Literal["ask", "never"],
) -> int:
    """Talk with a real model that works through the tools of prism.toml.

    Each line is one turn of one conversation. Ctrl-C aborts the turn in
    progress (the conversation goes on); Ctrl-C at the prompt, Ctrl-D or /exit
    leave. Approval questions are asked on the terminal (yes / no / always).
    """
    from ._preflight import check_model_flags

    check_model_flags(model_spec, base_url)
    loaded = read_config(config_file)
    target = _ledger_target(ledger_file, loaded)

    from ._chat import chat_session
    from ._ledgerfile import LedgerFailures

    failures = LedgerFailures()
    try:
        report = chat_session(
            loaded,
            model=model_spec,
            base_url=base_url,
            yes_mode=yes_mode,
            target=target,
            failures=failures,
            out=console(),
        )
    finally:
        failures.report()
    _render_chat(report, target)
    return 0


@click.command("demo", context_settings=CONTEXT)
@click.option(
    "--workspace",
    type=click.Path(file_okay=False, path_type=Path),
    help="Demo folder to use instead of a fresh temporary one (the agent's root is its "
    "workspace/ subfolder; nothing is written outside it).",
)
@ledger_option("Write the JSONL ledger here.")
@click.option(
    "--concurrency",
    type=click.IntRange(1, 16),
    default=3,
    show_default=True,
    help="Calls of one turn allowed in flight at once.",
)
@click.option(
    "--step-seconds",
    type=click.FloatRange(0, 2),
    default=0.15,
    show_default=True,
    help="Pause per step of the demo server's slow tool.",
)
@click.option("--json", "json_mode", is_flag=True, help="Print one JSON report instead of tables.")
@click.option("--live/--no-live", default=None, help="Force the live display on or off.")
def demo_command(
    workspace: Path | None,
    ledger_file: Path | None,
    concurrency: int,
    step_seconds: float,
    json_mode: bool,
    live: bool | None,
) -> int:
    """Run a scripted agent session through every Prism gate: no model, no network.

    It seeds a scratch workspace, starts the MCP server that ships with
    prism-cli over stdio, and replays turns that show parallel calls under a
    bound, a serialised shell turn, an edit, every gate refusing something
    (unknown tool, filtered tool, arguments not an object, permission,
    validation, path containment, execution policy), a scripted approver
    asked on screen, what the sandbox stops (when one runs here), a secret
    redacted in the ledger and a slow call with progress. Ends with a summary
    table, each gate with the call that met it, and the ledger path.
    """
    from ._demo import DemoOptions, run_demo

    options = DemoOptions(
        workspace=workspace,
        ledger=ledger_file,
        concurrency=concurrency,
        step_seconds=step_seconds,
        json_mode=json_mode,
        live=live,
    )
    return run_demo(options, console(json_mode=json_mode))
