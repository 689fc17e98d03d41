"""``prism ledger show|query``: the decision column, runs, filters, both file formats."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import pytest
import trio

from prism.core import (
    DispatchOptions,
    ExecutionAction,
    ExecutionDecision,
    JsonObject,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    assert_execution_allowed,
    create_rule_permission_policy,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.core.ledger import FinishedCall, JsonlLedgerSink, LedgerSink, RunLedger, SqliteLedgerSink

if TYPE_CHECKING:
    from pathlib import Path

CliRunner = Callable[..., subprocess.CompletedProcess[str]]


class _Policy:
    def __init__(self, allowed: bool, details: Mapping[str, object]) -> None:
        self.decision = ExecutionDecision(
            allowed=allowed, reason="the policy said so", details=dict(details)
        )

    def check(self, action: ExecutionAction) -> ExecutionDecision:
        return self.decision


def _shell(name: str, policy: _Policy) -> ToolDefinition:
    async def execute(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        await assert_execution_allowed(policy, ExecutionAction(kind="shell", operation=name))
        return ToolResult.text("ran")

    return ToolDefinition(name=name, execute=execute)


async def _echo(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text("echo")


def _sink(path: Path) -> LedgerSink:
    return SqliteLedgerSink(path) if path.suffix == ".db" else JsonlLedgerSink(path)


def _write_two_runs(path: Path) -> tuple[str, str]:
    """Run one: an ok call, a permission denial, a policy denial, an approval. Run two: one call."""
    tools = [
        ToolDefinition(name="echo", execute=_echo),
        _shell(
            "rm",
            _Policy(False, {"policy": "coding_approval", "rule": "rm *", "approval": "timed_out"}),
        ),
        _shell(
            "push",
            _Policy(
                True, {"policy": "coding_approval", "approval": "approved", "sandbox": "bwrap"}
            ),
        ),
    ]
    permission = create_rule_permission_policy(allow=["tool:*:execute"], deny=["tool:secret:*"])
    first = RunLedger(sinks=[_sink(path)])
    second = RunLedger(sinks=[_sink(path)])

    async def go() -> None:
        options = DispatchOptions(
            registry=create_tool_registry([*tools, ToolDefinition(name="secret", execute=_echo)]),
            permission=permission,
            ledger=first,
        )
        with first.run(label="first"):
            for call_id, name in [("a", "echo"), ("b", "secret"), ("c", "rm"), ("d", "push")]:
                await dispatch_tool_call(ToolCall(id=call_id, name=name, arguments={}), options)
        with second.run(label="second"):
            await dispatch_tool_call(
                ToolCall(id="e", name="echo", arguments={}), attrs_evolve(options, second)
            )

    trio.run(go)
    return first.run_id, second.run_id


def attrs_evolve(options: DispatchOptions, ledger: RunLedger) -> DispatchOptions:
    import attrs

    return attrs.evolve(options, ledger=ledger)


@pytest.fixture(params=["ledger.jsonl", "ledger.db"])
def ledger_file(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return tmp_path / str(request.param)


def _ok_call(call_id: str, tool_name: str, arguments: dict[str, object]) -> FinishedCall:
    """A finished call that succeeded in one second, without a result."""
    return FinishedCall(
        call_id=call_id,
        tool_name=tool_name,
        arguments=arguments,
        status="ok",
        blocked_reason=None,
        started_at=1.0,
        finished_at=2.0,
        duration_s=1.0,
        result=None,
    )


def _query(run_cli: CliRunner, path: Path, *args: str) -> list[dict[str, object]]:
    proc = run_cli("ledger", "query", str(path), *args)
    assert proc.returncode in (0, 1), proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_show_has_a_decision_column_and_says_how_each_run_ended(
    run_cli: CliRunner, ledger_file: Path
) -> None:
    first, second = _write_two_runs(ledger_file)
    proc = run_cli("ledger", "show", str(ledger_file))
    assert proc.returncode == 0, proc.stderr
    assert "decision" in proc.stdout
    assert "coding_approval:denied rule=rm * approval=timed_out" in proc.stdout
    assert "coding_approval:approved approval=approved sandbox=bwrap" in proc.stdout
    assert "permission:denied" in proc.stdout
    assert f"run {first} first: 4 calls, finished" in proc.stdout
    assert f"run {second} second: 1 calls, finished" in proc.stdout


def test_query_blocked_finds_gate_refusals_and_policy_denials(
    run_cli: CliRunner, ledger_file: Path
) -> None:
    _write_two_runs(ledger_file)
    found = _query(run_cli, ledger_file, "--blocked")
    assert [r["call_id"] for r in found] == ["b", "c"]
    denial = found[1]["decision"]
    assert isinstance(denial, dict)
    assert (denial["gate"], denial["timed_out"]) == ("execution_policy", True)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--status", "ok"), ["a", "d", "e"]),
        (("--status", "blocked", "--status", "error"), ["b", "c"]),
        (("--tool", "echo"), ["a", "e"]),
        (("--tool", "p*"), ["d"]),
        (("--since", "0"), ["a", "b", "c", "d", "e"]),
        (("--since", "1d"), ["a", "b", "c", "d", "e"]),
        (("--since", "2999-01-01T00:00:00"), []),
    ],
)
def test_query_filters(
    run_cli: CliRunner, ledger_file: Path, args: tuple[str, ...], expected: list[str]
) -> None:
    _write_two_runs(ledger_file)
    assert [r["call_id"] for r in _query(run_cli, ledger_file, *args)] == expected


def test_query_by_run_id_prefix(run_cli: CliRunner, ledger_file: Path) -> None:
    _, second = _write_two_runs(ledger_file)
    assert [r["call_id"] for r in _query(run_cli, ledger_file, "--run", second[:6])] == ["e"]


def test_query_exits_1_when_nothing_matches(run_cli: CliRunner, ledger_file: Path) -> None:
    _write_two_runs(ledger_file)
    proc = run_cli("ledger", "query", str(ledger_file), "--tool", "nothing-like-this")
    assert (proc.returncode, proc.stdout) == (1, "")


def test_show_filters_too(run_cli: CliRunner, ledger_file: Path) -> None:
    _write_two_runs(ledger_file)
    proc = run_cli("ledger", "show", str(ledger_file), "--status", "blocked", "--json")
    data = json.loads(proc.stdout)
    assert [r["call_id"] for r in data["records"]] == ["b"]
    assert data["counts"] == {"blocked": 1}
    assert [run["outcome"] for run in data["runs"]] == ["finished", "finished"]


def test_a_bad_since_is_a_usage_error(run_cli: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    _write_two_runs(path)
    proc = run_cli("ledger", "query", str(path), "--since", "last tuesday")
    assert proc.returncode == 2
    assert "--since" in proc.stderr


def test_show_warns_about_a_torn_line_and_an_interrupted_run(
    run_cli: CliRunner, tmp_path: Path
) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = RunLedger(sinks=[JsonlLedgerSink(path)])
    ledger.start_run(label="killed")
    ledger.record_call(_ok_call("x", "t", {})).record()
    ledger.close()
    with path.open("a", encoding="utf-8") as file:
        file.write('{"type": "tool_call", "sche')
    proc = run_cli("ledger", "show", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "line 3 is torn" in proc.stderr
    assert "killed: 1 calls, interrupted (no end marker)" in proc.stdout


def test_a_lone_surrogate_a_model_sent_is_printed_as_its_escape(
    run_cli_process: CliRunner, tmp_path: Path
) -> None:
    """A hostile model's lone surrogate (a tool name, an argument) kept in the ledger:
    show and query print it as JSON's escape for it, and every other record too."""
    path = tmp_path / "ledger.jsonl"
    ledger = RunLedger(sinks=[JsonlLedgerSink(path)])
    for name in ("\ud800", "after"):
        ledger.record_call(_ok_call(name, name, {"x": "\udfff"})).record()
    ledger.close()
    shown = run_cli_process("ledger", "show", str(path))
    assert shown.returncode == 0, shown.stderr
    assert "\\ud800" in shown.stdout
    assert "after" in shown.stdout
    queried = run_cli_process("ledger", "query", str(path))
    assert queried.returncode == 0, queried.stderr
    lines = [json.loads(line) for line in queried.stdout.splitlines()]
    assert [(r["tool_name"], r["arguments"]) for r in lines] == [
        ("\ud800", {"x": "\udfff"}),
        ("after", {"x": "\udfff"}),
    ]


def test_a_garbage_line_in_the_middle_is_skipped_with_a_warning(
    run_cli: CliRunner, tmp_path: Path
) -> None:
    path = tmp_path / "ledger.jsonl"
    _write_two_runs(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    lines.insert(2, "{garbage")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = run_cli("ledger", "query", str(path))
    assert proc.returncode == 0
    assert "skipped line 3" in proc.stderr
    assert len(proc.stdout.splitlines()) == 5
