import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from prism.core import (
    DispatchOptions,
    JsonObject,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    create_rule_permission_policy,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.core.ledger import RunLedger

CliRunner = Callable[..., subprocess.CompletedProcess[str]]


async def _echo(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text(f"echo {args.get('text')}")


def _real_ledger(path: Path) -> None:
    ledger = RunLedger()
    options = DispatchOptions(
        registry=create_tool_registry([ToolDefinition(name="echo", execute=_echo)]),
        permission=create_rule_permission_policy(allow=["tool:echo:execute"]),
        ledger=ledger,
    )

    async def go() -> None:
        await dispatch_tool_call(ToolCall(id="c1", name="echo", arguments={"text": "hi"}), options)
        await dispatch_tool_call(ToolCall(id="c2", name="nope", arguments={}), options)
        await dispatch_tool_call(
            ToolCall(id="c3", name="echo", arguments={"password": "hunter2"}), options
        )

    trio.run(go)
    path.write_text(ledger.to_jsonl(), encoding="utf-8")


def test_ledger_show_prints_each_call_with_status_and_blocked_reason(
    run_cli: CliRunner, tmp_path: Path
) -> None:
    path = tmp_path / "ledger.jsonl"
    _real_ledger(path)
    proc = run_cli("ledger", "show", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "echo hi" in proc.stdout
    assert "unknown_tool" in proc.stdout
    assert "3 calls: 1 blocked, 2 ok" in proc.stdout
    assert "hunter2" not in proc.stdout  # the ledger was redacted when written


def test_ledger_show_json_is_one_document_with_counts(run_cli: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    _real_ledger(path)
    proc = run_cli("ledger", "show", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["counts"] == {"ok": 2, "blocked": 1}
    assert [r["call_id"] for r in data["records"]] == ["c1", "c2", "c3"]
    assert data["records"][1]["blocked_reason"] == "unknown_tool"


def test_ledger_show_refuses_a_file_that_is_not_a_ledger(
    run_cli: CliRunner, tmp_path: Path
) -> None:
    path = tmp_path / "ledger.jsonl"
    path.write_text('{"type": "something_else"}\n', encoding="utf-8")
    proc = run_cli("ledger", "show", str(path))
    assert proc.returncode == 2
    assert "unknown record type" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        (
            "ledger.db",
            b"hello\n",
            "ledger.db: not an SQLite database: a .db ledger is an SQLite file, "
            "and this one does not start with SQLite's header",
        ),
        (
            "ledger.sqlite",
            b'{"type": "record"}\n',
            "ledger.sqlite: not an SQLite database",
        ),
        (
            "other.jsonl",
            b'{"a": 1}\n',
            'other.jsonl: not a Prism ledger (line 1: not a ledger record (it has no "type"))',
        ),
        (
            "binary.jsonl",
            b"\x00\x01garbage",
            "binary.jsonl: not a Prism ledger (its first line is not a JSON object)",
        ),
        (
            "notes.jsonl",
            b"just some text\nmore\n",
            "notes.jsonl: not a Prism ledger (line 1: not JSON",
        ),
    ],
)
def test_ledger_show_says_what_a_file_is_not(
    run_cli: CliRunner, tmp_path: Path, name: str, content: bytes, said: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    proc = run_cli("ledger", "show", str(path))
    assert proc.returncode == 2, proc.stdout
    assert proc.stderr.startswith(f"prism: error: {tmp_path}/")
    assert said in proc.stderr
    assert proc.stderr.count("\n") == 1
    assert "None" not in proc.stderr


def test_an_empty_ledger_file_is_an_empty_ledger(run_cli: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    proc = run_cli("ledger", "show", str(path))
    assert proc.returncode == 0, proc.stderr


def test_ledger_show_on_a_missing_file_fails_cleanly(run_cli: CliRunner, tmp_path: Path) -> None:
    proc = run_cli("ledger", "show", str(tmp_path / "absent.jsonl"))
    assert proc.returncode == 2
    assert "cannot read it" in proc.stderr


def test_ledger_show_escapes_markup_from_hostile_records(
    run_cli: CliRunner, tmp_path: Path
) -> None:
    record = {
        "type": "tool_call",
        "schema_version": 1,
        "call_id": "[red]x[/red]",
        "tool_name": "[bold]evil",
        "arguments": {},
        "status": "ok",
        "blocked_reason": None,
        "started_at": 0.0,
        "finished_at": 1.0,
        "duration_s": 1.0,
        "result_preview": "\x1b[2J[link=file:///etc]click[/link]",
    }
    path = tmp_path / "ledger.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    proc = run_cli("ledger", "show", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "[bold]evil" in proc.stdout
    assert "[red]x[/red]" in proc.stdout
    assert "\x1b[2J" not in proc.stdout


def test_several_ledgers_read_as_one_in_start_order(run_cli: CliRunner, tmp_path: Path) -> None:
    """Gateways behind a load balancer write a ledger each: show and query read them together."""
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _real_ledger(first)
    _real_ledger(second)
    shown = run_cli("ledger", "show", str(first), str(second), "--json")
    queried = run_cli("ledger", "query", str(first), str(second), "--status", "ok")
    assert shown.returncode == 0, shown.stderr
    document = json.loads(shown.stdout)
    assert document["counts"] == {"ok": 4, "blocked": 2}
    assert document["file"] == f"{first} + {second}"
    starts = [record["started_at"] for record in document["records"]]
    assert starts == sorted(starts)
    assert len(document["runs"]) == 2
    assert queried.returncode == 0
    assert len(queried.stdout.splitlines()) == 4
    plain = run_cli("ledger", "show", str(first), str(second))
    assert "6 calls: 2 blocked, 4 ok" in plain.stdout


ESCAPES = "\x1b]0;ledger OK\x07\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2J\x1b[H"


@pytest.mark.parametrize("command", ["show", "query"])
def test_a_forged_record_never_sends_escape_sequences_to_the_terminal(
    run_cli: CliRunner, tmp_path: Path, command: str
) -> None:
    # A ledger line whose bad field (a blocked_reason on a wrong status) holds
    # a clipboard write and a screen clear: the warning quoting it shows them.
    forged = {
        "type": "tool_call",
        "schema_version": 2,
        "call_id": "c1",
        "tool_name": "shell",
        "arguments": {},
        "status": "blocked",
        "blocked_reason": ESCAPES,
        "started_at": 1.0,
        "finished_at": 2.0,
        "duration_s": 1.0,
        "result_preview": None,
        "decision": {"gate": ESCAPES},
        "run_id": "r",
    }
    ledger = tmp_path / "forged.jsonl"
    ledger.write_text(json.dumps(forged) + "\n", encoding="utf-8")
    proc = run_cli("ledger", command, str(ledger))
    assert "\x1b" not in proc.stdout + proc.stderr
    assert "\x07" not in proc.stdout + proc.stderr
    assert "\\x1b" in proc.stderr  # shown, as a visible escape
