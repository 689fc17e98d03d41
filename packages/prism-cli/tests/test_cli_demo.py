"""End to end: ``prism demo`` in a real subprocess, with its real MCP server and tools."""

import io
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from prism.core.ledger import RunLedger, ToolCallRecord

CliRunner = Callable[..., subprocess.CompletedProcess[str]]
DemoRun = tuple[subprocess.CompletedProcess[str], Path]


def _demo(tmp: Path, cli_env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "prism.cli", "demo", "--step-seconds", "0.05", *extra]
    return subprocess.run(
        argv,
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
        env={**cli_env, "COLUMNS": "200"},
    )


@pytest.fixture(scope="module")
def demo_run(
    tmp_path_factory: pytest.TempPathFactory, cli_env: dict[str, str]
) -> tuple[subprocess.CompletedProcess[str], Path]:
    tmp = tmp_path_factory.mktemp("demo")
    workspace = tmp / "ws"
    proc = _demo(tmp, cli_env, "--workspace", str(workspace), "--ledger", str(tmp / "ledger.jsonl"))
    return proc, tmp


def _records(tmp: Path) -> dict[str, ToolCallRecord]:
    ledger = RunLedger.from_jsonl((tmp / "ledger.jsonl").read_text(encoding="utf-8"))
    return {record.call_id: record for record in ledger.records}


def test_demo_exits_zero_and_ends_with_a_summary_and_the_ledger_path(
    demo_run: DemoRun,
) -> None:
    proc, tmp = demo_run
    assert proc.returncode == 0, proc.stderr
    assert "summary" in proc.stdout
    assert f"ledger: {tmp / 'ledger.jsonl'}" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_demo_ledger_records_every_scripted_call_with_the_right_outcome(
    demo_run: DemoRun,
) -> None:
    _, tmp = demo_run
    records = _records(tmp)
    assert len(records) == 19
    assert records["bad-args"].blocked_reason == "validation_failed"
    assert records["denied-1"].blocked_reason == "permission_denied"
    assert records["ghost-1"].blocked_reason == "unknown_tool"
    assert records["notobj-1"].blocked_reason == "invalid_arguments"
    assert records["hidden-1"].blocked_reason == "tool_denied"
    for call in ("escape-1", "escape-2", "danger-1"):
        assert records[call].status == "error", call
    # confined in a sandbox, the build runs and its hook is left out; without one, refused
    build = records["sandbox-1"]
    assert build.decision is not None
    if build.decision.sandbox:
        assert build.status == "ok"
        assert "[prism sandbox] not applied" in (build.result_preview or "")
    else:
        assert build.status == "error"
    ok = ("read-1", "read-2", "docs-1", "docs-2", "sh-1", "sh-2", "edit-1", "approve-1", "slow-1")
    for call in (*ok, "redact-1"):
        assert records[call].status == "ok", call


def test_demo_shows_every_gate_in_the_live_lines_and_the_gate_summary(
    demo_run: DemoRun,
) -> None:
    proc, _ = demo_run
    live = proc.stdout.split("summary", 1)[0].splitlines()
    blocked = {line.split()[3].rstrip(":") for line in live if line.startswith("  blocked ")}
    assert blocked == {
        "unknown_tool",
        "tool_denied",
        "invalid_arguments",
        "permission_denied",
        "validation_failed",
    }
    refused = " ".join(line for line in live if line.startswith("  error "))
    assert "outside the allowed roots" in refused  # path containment
    assert "denied by the execution policy" in refused
    gates = proc.stdout.split("every gate, and the call that met it:", 1)[1]
    for gate, call in (
        ("registry: unknown tool", "ghost-1"),
        ("filter: tool hidden by the host", "hidden-1"),
        ("arguments are an object", "notobj-1"),
        ("permission policy", "denied-1"),
        ("JSON Schema validator", "bad-args"),
        ("path containment", "escape-1, escape-2"),
        ("execution policy", "danger-1"),
        ("approval (scripted approver)", "approve-1"),
        ("ledger redaction", "redact-1"),
    ):
        line = next(line for line in gates.splitlines() if line.strip().startswith(gate))
        assert call in line, line


def test_demo_asks_the_scripted_approver_on_screen_and_the_cleanup_runs(
    demo_run: DemoRun,
) -> None:
    proc, tmp = demo_run
    asked = proc.stdout.index("approval asked for shell: rm src/inventory.py.orig")
    why, answer = proc.stdout[asked:].splitlines()[1:3]
    assert why.strip().startswith("why: command 'rm src/inventory.py.orig'")
    assert answer.strip().startswith("answer: yes")
    assert not (tmp / "ws" / "workspace" / "src" / "inventory.py.orig").exists()
    decision = _records(tmp)["approve-1"].decision
    assert decision is not None
    assert decision.approval == "approved"
    assert decision.approval_asked


def test_demo_shows_what_the_sandbox_stops_or_says_none_runs(demo_run: DemoRun) -> None:
    proc, tmp = demo_run
    workspace = tmp / "ws" / "workspace"
    # The build script's start-up hook never lands, sandbox or not.
    assert not (workspace / ".envrc").exists()
    record = _records(tmp)["sandbox-1"]
    assert record.decision is not None
    if record.decision.sandbox:
        line = next(line for line in proc.stdout.splitlines() if "sandbox (bubblewrap)" in line)
        assert "stopped: " in line
        assert ".envrc" in line
        assert (workspace / "build-stamp.txt").is_file()  # the confined part ran
    else:
        assert "no sandbox runs here" in proc.stdout
        assert "approval asked for shell: sh tools/build.sh" in proc.stdout


def test_demo_redacts_the_key_on_screen_and_in_the_ledger(demo_run: DemoRun) -> None:
    proc, tmp = demo_run
    assert "sk-demo-" not in proc.stdout
    assert "sk-demo-" not in (tmp / "ledger.jsonl").read_text(encoding="utf-8")
    shown = proc.stdout.split("the ledger's line for redact-1", 1)[1]
    assert '{"query": "OPENAI_API_KEY=[REDACTED]"}' in shown
    assert _records(tmp)["redact-1"].arguments == {"query": "OPENAI_API_KEY=[REDACTED]"}


def test_demo_writes_nothing_outside_its_folder(demo_run: DemoRun) -> None:
    _, tmp = demo_run
    assert sorted(p.name for p in tmp.iterdir()) == ["ledger.jsonl", "ws"]
    assert (tmp / "ws" / "outside-secret.txt").is_file()


def test_demo_never_leaks_the_secret_outside_the_workspace(
    demo_run: DemoRun,
) -> None:
    proc, tmp = demo_run
    assert "a secret the agent must never read" not in proc.stdout
    assert "a secret the agent must never read" not in (tmp / "ledger.jsonl").read_text(
        encoding="utf-8"
    )


def test_demo_edit_really_changed_the_file_and_shows_the_diff(
    demo_run: DemoRun,
) -> None:
    proc, tmp = demo_run
    source = (tmp / "ws" / "workspace" / "src" / "inventory.py").read_text(encoding="utf-8")
    assert "return stock + count" in source
    assert "+    return stock + count" in proc.stdout


def test_demo_runs_the_first_turn_in_parallel_under_the_bound(
    demo_run: DemoRun,
) -> None:
    proc, _ = demo_run
    assert "most calls in flight at once: 3 (bound 3)" in proc.stdout


def test_demo_serialises_the_shell_turn(
    demo_run: DemoRun,
) -> None:
    _, tmp = demo_run
    records = _records(tmp)
    assert records["sh-1"].finished_at <= records["sh-2"].started_at


def test_demo_shows_progress_of_the_slow_call_as_plain_lines(
    demo_run: DemoRun,
) -> None:
    proc, _ = demo_run
    progress = [line for line in proc.stdout.splitlines() if line.strip().startswith("progress")]
    assert len(progress) == 5
    assert "5/5" in progress[-1]


def test_demo_json_is_one_document(tmp_path: Path, cli_env: dict[str, str]) -> None:
    proc = _demo(tmp_path, cli_env, "--json", "--concurrency", "2")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["concurrency"] == 2
    assert data["max_in_flight"] == 2
    assert Path(data["ledger"]).is_file()
    assert [c["call_id"] for c in data["calls"]][:2] == ["read-1", "read-2"]
    refused = {c["call_id"]: c["refused_by"] for c in data["calls"] if c["refused_by"]}
    assert {k: v for k, v in refused.items() if k != "sandbox-1"} == {
        "escape-1": "path_escape",
        "escape-2": "path_escape",
        "danger-1": "execution_denied",
    }
    assert data["diff"].startswith("--- a/src/inventory.py")
    assert [a["approved"] for a in data["approvals"]][:1] == [True]
    assert {g["gate"] for g in data["gates"]} >= {"ledger redaction", "permission policy"}


def test_demo_without_a_sandbox_says_so_and_the_approver_refuses_the_script(
    tmp_path: Path,
) -> None:
    from rich.console import Console

    from prism.cli._demo import DemoOptions, run_demo

    out = io.StringIO()
    options = DemoOptions(workspace=tmp_path / "ws", step_seconds=0.0, sandbox="none", live=False)
    assert run_demo(options, Console(file=out, width=200, no_color=True)) == 0
    text = out.getvalue()
    assert "sandbox    none: shell commands run on this host" in text
    assert "no sandbox runs here: the policy asked instead" in text
    asked = text.index("approval asked for shell: sh tools/build.sh")
    assert "answer: no" in text[asked:]
    assert not (tmp_path / "ws" / "workspace" / ".envrc").exists()
    assert not (tmp_path / "ws" / "workspace" / "build-stamp.txt").exists()
