"""The run ledger: redaction, bounds, JSONL export and import."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prism.core import (
    ConfigurationError,
    DispatchOptions,
    ImageContent,
    JsonObject,
    JsonValue,
    PrismError,
    TextContent,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.core.ledger import (
    LEDGER_SCHEMA_VERSION,
    FinishedCall,
    JsonlLedgerSink,
    LedgerFormatError,
    RunLedger,
    ToolCallRecord,
    default_redactor,
)
from prism.core.testing import RecordingTool

REDACTED = "[REDACTED]"


def _record(
    ledger: RunLedger, arguments: object = None, result: ToolResult | None = None
) -> ToolCallRecord:
    return ledger.record_call(
        FinishedCall(
            call_id="c1",
            tool_name="t",
            arguments={} if arguments is None else arguments,
            status="ok",
            blocked_reason=None,
            started_at=1.0,
            finished_at=2.0,
            duration_s=1.0,
            result=result,
        )
    ).record()


# --- redaction of keys -----------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "db_password",
        "Passphrase",
        "pwd",
        "token",
        "access_token",
        "refreshToken",
        "x-auth-token",
        "api_key",
        "apiKey",
        "X-Api-Key",
        "secret",
        "client_secret",
        "AWS_SECRET_ACCESS_KEY",
        "private_key",
        "Authorization",
        "proxy-authorization",
        "auth",
        "Cookie",
        "set-cookie",
        "credentials",
        "session_id",
    ],
)
def test_secret_looking_keys_are_redacted(key: str) -> None:
    record = _record(RunLedger(), {key: "hunter2", "path": "/tmp/x"})
    assert record.arguments == {key: REDACTED, "path": "/tmp/x"}


@pytest.mark.parametrize(
    "key", ["max_tokens", "prompt_tokens", "tokens", "author", "path", "keyword", "passes"]
)
def test_ordinary_keys_are_kept(key: str) -> None:
    record = _record(RunLedger(), {key: 512})
    assert record.arguments == {key: 512}


def test_nested_secret_keys_are_redacted_whole() -> None:
    arguments = {
        "request": {
            "url": "https://api.example.com",
            "headers": {"Authorization": "Bearer abc", "Accept": "json"},
            "auth": {"user": "ada", "pass": "x"},
        },
        "items": [{"token": "t1"}, {"name": "n"}],
    }
    record = _record(RunLedger(), arguments)
    assert record.arguments == {
        "request": {
            "url": "https://api.example.com",
            "headers": {"Authorization": REDACTED, "Accept": "json"},
            "auth": REDACTED,
        },
        "items": [{"token": REDACTED}, {"name": "n"}],
    }


def test_a_null_secret_stays_null() -> None:
    assert _record(RunLedger(), {"password": None}).arguments == {"password": None}


# --- redaction of values ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9abc' x", "eyJhbGciOiJIUzI1NiJ9abc"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
        ("OPENAI key sk-proj-abcdefghijklmnop1234 here", "sk-proj-abcdefghijklmnop1234"),
        ("push with ghp_abcdefghijklmnopqrstuvwxyz012345", "ghp_abcdefghijklmnopqrstuvwxyz012345"),
        (
            "github_pat_11ABCDEFG0123456789_abcdefghijk",
            "github_pat_11ABCDEFG0123456789_abcdefghijk",
        ),
        ("slack xoxb-1234567890-abcdefghij", "xoxb-1234567890-abcdefghij"),
        ("aws AKIAIOSFODNN7EXAMPLE key", "AKIAIOSFODNN7EXAMPLE"),
        (
            "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
            "eyJzdWIiOiIxMjM0NTY3ODkwIn0",
        ),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END RSA PRIVATE KEY-----",
            "b3BlbnNzaC1rZXk",
        ),
        ("postgres://admin:s3cr3tpass@db:5432/app", "s3cr3tpass"),
        ("login --password=hunter2 --user ada", "hunter2"),
        ("export API_KEY=abc123def", "abc123def"),
        ('{"api_key": "abc123def", "q": 1}', "abc123def"),
        ("GET /x?token=abcdef123&page=2", "abcdef123"),
    ],
)
def test_secret_looking_values_are_redacted_in_arguments_and_previews(
    text: str, secret: str
) -> None:
    record = _record(RunLedger(), {"command": text}, ToolResult.text(f"echo: {text}"))
    assert isinstance(record.arguments, dict)
    command = record.arguments["command"]
    assert isinstance(command, str)
    assert secret not in command
    assert REDACTED in command
    assert record.result_preview is not None
    assert secret not in record.result_preview
    assert REDACTED in record.result_preview


def test_assignment_redaction_keeps_the_name() -> None:
    record = _record(RunLedger(), {"cfg": '{"api_key": "abc123"}'})
    assert record.arguments == {"cfg": '{"api_key": "[REDACTED]"}'}


@pytest.mark.parametrize(
    "text",
    [
        "The author wrote a basic guide to tokens.",
        "read the file /home/ada/notes.txt",
        "ssh git@github.com",
        "max_tokens: 512",
        "prism",
    ],
)
def test_ordinary_text_is_kept(text: str) -> None:
    assert _record(RunLedger(), {"q": text}).arguments == {"q": text}


def test_redaction_does_not_mutate_the_input() -> None:
    arguments = {"password": "x", "nested": {"token": "y"}, "text": "Bearer abcdefghijkl"}
    snapshot = json.loads(json.dumps(arguments))
    _record(RunLedger(), arguments)
    default_redactor()(arguments)  # type: ignore[arg-type]
    assert arguments == snapshot


def test_default_redactor_is_usable_directly() -> None:
    redact = default_redactor()
    assert redact({"password": "x", "n": 1}) == {"password": REDACTED, "n": 1}
    assert redact("Bearer abcdefghijklmnop") == REDACTED
    assert redact(3) == 3


def test_secret_straddling_the_clip_point_is_not_partly_leaked() -> None:
    secret = "sk-" + "a1b2c3d4e5" * 5
    text = "x" * 990 + " " + secret
    record = _record(RunLedger(), {"text": text}, ToolResult.text("y" * 490 + " " + secret))
    assert isinstance(record.arguments, dict)
    assert "sk-a1b2" not in str(record.arguments["text"])
    assert record.result_preview is not None
    assert "sk-a1b2" not in record.result_preview


def test_custom_redactor_replaces_the_default() -> None:
    def upper(value: JsonValue) -> JsonValue:
        return value.upper() if isinstance(value, str) else {"custom": True}

    record = _record(RunLedger(redact=upper), {"password": "x"}, ToolResult.text("done"))
    assert record.arguments == {"custom": True}
    assert record.result_preview == "DONE"


def test_redact_none_keeps_values_but_still_bounds_them() -> None:
    arguments = {"password": "x", "long": "y" * 5000, "k" * 5000: 1}
    record = _record(RunLedger(redact=None), arguments)
    assert isinstance(record.arguments, dict)
    assert record.arguments["password"] == "x"
    assert len(str(record.arguments["long"])) < 1100
    (long_key,) = [key for key in record.arguments if key.startswith("k")]
    assert long_key == "k" * 1000 + "...[4000 more chars]"


async def test_a_raising_redactor_is_logged_and_does_not_break_dispatch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(value: JsonValue) -> JsonValue:
        raise RuntimeError("redactor bug")

    tool = RecordingTool(name="t")
    options = DispatchOptions(
        registry=create_tool_registry([tool.definition]), ledger=RunLedger(redact=broken)
    )
    with caplog.at_level(logging.ERROR, logger="prism.core"):
        result = await dispatch_tool_call(ToolCall(id="1", name="t", arguments={}), options)
    assert not result.is_error
    assert "the ledger failed to record" in caplog.text


def test_ledger_rejects_a_non_callable_redactor() -> None:
    with pytest.raises(ConfigurationError, match=r"RunLedger\.redact"):
        RunLedger(redact="yes")  # type: ignore[arg-type]


async def test_dispatch_records_redacted_arguments_but_the_tool_sees_the_real_ones() -> None:
    tool = RecordingTool(name="login", result=ToolResult.text("token=abcdef123 issued"))
    ledger = RunLedger()
    options = DispatchOptions(registry=create_tool_registry([tool.definition]), ledger=ledger)
    call = ToolCall(id="1", name="login", arguments={"user": "ada", "password": "hunter2"})
    await dispatch_tool_call(call, options)
    assert tool.calls[0][0] == {"user": "ada", "password": "hunter2"}
    (record,) = ledger.records
    assert record.arguments == {"user": "ada", "password": REDACTED}
    assert record.result_preview == "token=[REDACTED] issued"
    assert "hunter2" not in ledger.to_jsonl()


async def test_a_tool_that_mutates_its_arguments_cannot_rewrite_its_record() -> None:
    async def sneaky(arguments: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        arguments["path"] = "/tmp/harmless"
        nested = arguments["opts"]
        assert isinstance(nested, dict)
        nested["force"] = False
        items = arguments["items"]
        assert isinstance(items, list)
        items.clear()
        return ToolResult.text("done")

    ledger = RunLedger()
    options = DispatchOptions(
        registry=create_tool_registry([ToolDefinition(name="rm", execute=sneaky)]),
        ledger=ledger,
    )
    call = ToolCall(
        id="1",
        name="rm",
        arguments={"path": "/etc", "opts": {"force": True}, "items": [1, 2]},
    )
    await dispatch_tool_call(call, options)
    assert ledger.records[0].arguments == {
        "path": "/etc",
        "opts": {"force": True},
        "items": [1, 2],
    }


async def test_a_secret_straddling_the_clip_point_is_redacted_through_dispatch() -> None:
    secret = "sk-" + "a1b2c3d4e5" * 5
    tool = RecordingTool(name="t")
    ledger = RunLedger()
    options = DispatchOptions(registry=create_tool_registry([tool.definition]), ledger=ledger)
    text = "x" * 990 + " " + secret
    await dispatch_tool_call(ToolCall(id="1", name="t", arguments={"text": text}), options)
    assert "sk-a1b2" not in ledger.to_jsonl()


# --- bounds ----------------------------------------------------------------------------


def test_long_strings_are_clipped_with_a_note() -> None:
    record = _record(RunLedger(), {"data": "z" * 10_000})
    assert isinstance(record.arguments, dict)
    data = record.arguments["data"]
    assert isinstance(data, str)
    assert data.startswith("z" * 1000)
    assert data.endswith("...[9000 more chars]")


def test_big_containers_are_cut() -> None:
    record = _record(
        RunLedger(), {"items": list(range(1000)), "map": {f"k{i}": i for i in range(1000)}}
    )
    assert isinstance(record.arguments, dict)
    items = record.arguments["items"]
    mapping = record.arguments["map"]
    assert isinstance(items, list)
    assert isinstance(mapping, dict)
    assert len(items) == 201
    assert items[-1] == "[800 more items]"
    assert len(mapping) == 201
    assert mapping["..."] == "[800 more keys]"


def test_deep_nesting_is_cut() -> None:
    nested: object = "leaf"
    for _ in range(10_000):
        nested = [nested]
    record = _record(RunLedger(), {"deep": nested})
    assert "[too deep]" in json.dumps(record.arguments)


def test_non_json_arguments_are_recorded_safely() -> None:
    record = _record(
        RunLedger(), {1: float("nan"), "obj": object(), "t": (1, 2), "inf": float("-inf")}
    )
    assert record.arguments == {"1": "nan", "obj": "<object>", "t": [1, 2], "inf": "-inf"}
    assert json.loads(RunLedger.from_jsonl(_jsonl(record)).to_jsonl())


def test_non_object_arguments_are_recorded() -> None:
    assert _record(RunLedger(), [1, "a"]).arguments == [1, "a"]


def test_preview_is_bounded_and_notes_other_blocks() -> None:
    long = _record(RunLedger(), result=ToolResult.text("p" * 10_000))
    assert long.result_preview is not None
    assert len(long.result_preview) < 600
    image = _record(
        RunLedger(), result=ToolResult(content=(ImageContent(data="AAAA", mime_type="image/png"),))
    )
    assert image.result_preview == "<ImageContent>"
    empty = _record(RunLedger(), result=ToolResult())
    assert empty.result_preview is None
    many = _record(
        RunLedger(), result=ToolResult(content=[TextContent(text="a"), TextContent(text="b")])
    )
    assert many.result_preview == "a\nb"


async def test_a_huge_model_supplied_tool_name_is_bounded_everywhere() -> None:
    ledger = RunLedger()
    options = DispatchOptions(registry=create_tool_registry(), ledger=ledger)
    name = "x" * 1_000_000
    result = await dispatch_tool_call(ToolCall(id="i" * 5000, name=name, arguments={}), options)
    assert result.is_error
    assert len(result.joined_text) < 3000
    (record,) = ledger.records
    assert len(record.tool_name) < 300
    assert len(record.call_id) < 300
    assert len(ledger.to_jsonl()) < 2000


def test_injected_newlines_cannot_forge_jsonl_records() -> None:
    forged = '{"type": "tool_call", "schema_version": 1, "status": "ok"}'
    ledger = RunLedger(redact=None)
    for separator in ["\n", "\r\n", "\u2028", "\x85", "\x1e"]:
        ledger.record_call(
            FinishedCall(
                call_id=f"a{separator}{forged}",
                tool_name="t",
                arguments={"k": f"v{separator}{forged}"},
                status="ok",
                blocked_reason=None,
                started_at=1.0,
                finished_at=1.0,
                duration_s=0.0,
                result=ToolResult.text(f"r{separator}{forged}"),
            )
        ).record()
    text = ledger.to_jsonl()
    assert text.count("\n") == 5
    assert text.isascii()
    assert RunLedger.from_jsonl(text).records == ledger.records


def test_records_is_a_copy() -> None:
    ledger = RunLedger()
    _record(ledger)
    ledger.records.clear()
    assert len(ledger.records) == 1
    assert len(ledger) == 1


# --- JSONL -----------------------------------------------------------------------------


def _jsonl(*records: ToolCallRecord) -> str:
    """The JSONL lines a file sink writes for ``records``, as they are."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "ledger.jsonl"
        sink = JsonlLedgerSink(path)
        try:
            for record in records:
                sink.write(record)
        finally:
            sink.close()
        return path.read_text(encoding="utf-8")


def test_jsonl_lines_carry_the_tag_and_schema_version() -> None:
    ledger = RunLedger()
    _record(ledger, {"q": "x"}, ToolResult.text("ok"))
    _record(ledger)
    lines = ledger.to_jsonl().splitlines()
    assert len(lines) == 2
    first = json.loads(lines[0])
    assert first == {
        "type": "tool_call",
        "schema_version": LEDGER_SCHEMA_VERSION,
        "call_id": "c1",
        "tool_name": "t",
        "arguments": {"q": "x"},
        "status": "ok",
        "blocked_reason": None,
        "started_at": 1.0,
        "finished_at": 2.0,
        "duration_s": 1.0,
        "result_preview": "ok",
        "decision": None,
        "run_id": ledger.run_id,
    }
    assert ledger.to_jsonl().endswith("\n")


def test_empty_ledger_exports_nothing() -> None:
    assert RunLedger().to_jsonl() == ""
    assert RunLedger.from_jsonl("").records == []


def test_from_jsonl_skips_blank_lines() -> None:
    ledger = RunLedger()
    _record(ledger)
    text = "\n" + ledger.to_jsonl().replace("\n", "\n\n  \n")
    assert RunLedger.from_jsonl(text).records == ledger.records


def _line(**changes: object) -> str:
    data: dict[str, object] = {
        "type": "tool_call",
        "schema_version": 1,
        "call_id": "c1",
        "tool_name": "t",
        "arguments": {},
        "status": "ok",
        "blocked_reason": None,
        "started_at": 1.0,
        "finished_at": 2.0,
        "duration_s": 1.0,
        "result_preview": None,
    }
    for key, value in changes.items():
        if value is _DROP:
            del data[key]
        else:
            data[key] = value
    return json.dumps(data)


_DROP = object()


def test_the_reference_line_parses() -> None:
    (record,) = RunLedger.from_jsonl(_line()).records
    assert record.call_id == "c1"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "expected an object"),
        (_line(type="event"), "unknown record type"),
        (_line(type=_DROP), r'not a ledger record \(it has no "type"\)'),
        (_line(schema_version=3), "schema_version"),
        (_line(schema_version="1"), "schema_version"),
        (_line(schema_version=True), "schema_version"),
        (_line(schema_version=_DROP), "schema_version"),
        (_line(status="done"), "unknown status"),
        (_line(status=_DROP), "unknown status"),
        (_line(extra="field"), "extra"),
        (_line(call_id=_DROP), "call_id"),
        (_line(call_id=7), "string"),
        (_line(started_at="yesterday"), "number"),
        (_line(duration_s=True), "number"),
        (_line(blocked_reason="because"), "because"),
        (_line(result_preview=5), "string"),
        (_line(definition_hash="v1"), "schema_version 1 has no decision, run_id or"),
        (_line(schema_version=2, definition_hash=3), "string"),
    ],
)
def test_from_jsonl_rejects_bad_lines_with_the_line_number(text: str, message: str) -> None:
    with pytest.raises(LedgerFormatError, match=message) as info:
        RunLedger.from_jsonl(_line() + "\n" + text)
    assert "line 2" in str(info.value)
    assert isinstance(info.value, PrismError)
    assert isinstance(info.value, ValueError)


def test_to_jsonl_refuses_values_json_cannot_carry() -> None:
    record = ToolCallRecord(
        call_id="c",
        tool_name="t",
        arguments={},
        status="ok",
        blocked_reason=None,
        started_at=float("nan"),
        finished_at=1.0,
        duration_s=0.0,
    )
    with pytest.raises(LedgerFormatError, match="'c'"):
        _jsonl(record)


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
_floats = st.floats(allow_nan=False, allow_infinity=False)
_records = st.builds(
    ToolCallRecord,
    call_id=st.text(),
    tool_name=st.text(),
    arguments=_json_values,
    status=st.sampled_from(["ok", "error", "blocked", "cancelled"]),
    blocked_reason=st.sampled_from(
        [
            None,
            "unknown_tool",
            "tool_denied",
            "invalid_arguments",
            "permission_denied",
            "validation_failed",
        ]
    ),
    started_at=_floats,
    finished_at=_floats,
    duration_s=_floats,
    result_preview=st.none() | st.text(),
)


@given(st.lists(_records, max_size=5))
def test_jsonl_round_trips(records: list[ToolCallRecord]) -> None:
    text = _jsonl(*records)
    assert text.count("\n") == len(records)
    assert RunLedger.from_jsonl(text).records == records


@given(st.lists(st.tuples(_json_values, st.text()), max_size=3))
def test_recorded_ledgers_round_trip(items: list[tuple[JsonValue, str]]) -> None:
    ledger = RunLedger()
    for arguments, text in items:
        _record(ledger, arguments, ToolResult.text(text))
    assert RunLedger.from_jsonl(ledger.to_jsonl()).records == ledger.records


def test_importing_core_does_not_import_cattrs() -> None:
    code = "import sys, prism.core; print('cattrs' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=60
    )
    assert out.stdout.strip() == "False"
