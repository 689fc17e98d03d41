"""The ledger's JSON codec: one tagged, versioned JSON object per entry.

Each entry is an object tagged with a stable ``type`` name and the
``schema_version``: ``tool_call`` for a call, ``run_start`` and ``run_end``
for the run markers. The per-call path is written by hand; everything else
goes through one cattrs converter, built on first use (so ``import
prism.core`` does not pay for cattrs).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, get_args

import attrs

from ._ledger_decision import ToolCallDecision
from ._ledger_records import (
    LEDGER_SCHEMA_VERSION,
    READABLE_VERSIONS,
    LedgerEntry,
    LedgerFormatError,
    RunEndRecord,
    RunStartRecord,
    ToolCallRecord,
    ToolCallStatus,
)

if TYPE_CHECKING:
    import cattrs

__all__ = ["TAGS", "decode_entry", "decode_object", "encode_entry"]

# --- JSONL through one cattrs converter, built on first use ----------------------------

# Stable tag names: the class an on-disk "type" stands for never changes meaning.
TAGS: dict[type, str] = {
    ToolCallRecord: "tool_call",
    RunStartRecord: "run_start",
    RunEndRecord: "run_end",
}
_CLASSES: dict[str, type] = {tag: cls for cls, tag in TAGS.items()}
_STATUSES = frozenset(get_args(ToolCallStatus))
_converter: cattrs.Converter | None = None


def _strict_str(value: object, _type: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _strict_float(value: object, _type: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number, got {type(value).__name__}")
    return float(value)


def _strict_int(value: object, _type: object) -> int:
    if type(value) is not int:
        raise TypeError(f"expected an integer, got {type(value).__name__}")
    return value


def _strict_bool(value: object, _type: object) -> bool:
    if type(value) is not bool:
        raise TypeError(f"expected true or false, got {type(value).__name__}")
    return value


def _json_passthrough(value: Any, _type: object = None) -> Any:
    return value


def _get_converter() -> cattrs.Converter:
    global _converter
    if _converter is None:
        import cattrs
        from cattrs.gen import make_dict_unstructure_fn, override

        converter = cattrs.Converter(forbid_extra_keys=True)
        converter.register_structure_hook(str, _strict_str)
        converter.register_structure_hook(float, _strict_float)
        converter.register_structure_hook(int, _strict_int)
        converter.register_structure_hook(bool, _strict_bool)
        # Arguments are already bounded JSON: pass them through both ways.
        json_type = attrs.fields(attrs.resolve_types(ToolCallRecord)).arguments.type
        attrs.resolve_types(ToolCallDecision)
        attrs.resolve_types(RunStartRecord)
        attrs.resolve_types(RunEndRecord)
        converter.register_structure_hook_func(lambda t: t == json_type, _json_passthrough)
        converter.register_unstructure_hook_func(lambda t: t == json_type, _json_passthrough)
        # Decisions are written compactly: fields at their defaults are left out.
        converter.register_unstructure_hook(
            ToolCallDecision,
            make_dict_unstructure_fn(ToolCallDecision, converter, _cattrs_omit_if_default=True),
        )
        # A call record leaves out a definition hash it does not have, so lines
        # of local tools read as they did before the field existed.
        converter.register_unstructure_hook(
            ToolCallRecord,
            make_dict_unstructure_fn(
                ToolCallRecord, converter, definition_hash=override(omit_if_default=True)
            ),
        )
        _converter = converter
    return _converter


# One encoder, built once: json.dumps(allow_nan=False) would build a new one per call.
# ASCII only: no reader can split a line on U+2028 or NEL.
_ENCODER = json.JSONEncoder(allow_nan=False)
_DECISION_DEFAULTS: tuple[tuple[str, object], ...] = ()


def _decision_json(decision: ToolCallDecision) -> dict[str, object]:
    """The decision as the converter writes it (fields at their defaults left out)."""
    global _DECISION_DEFAULTS
    if not _DECISION_DEFAULTS:
        _DECISION_DEFAULTS = tuple(
            (field.name, field.default)
            for field in attrs.fields(ToolCallDecision)
            if field.default is not attrs.NOTHING
        )
    out: dict[str, object] = {"gate": decision.gate, "allowed": decision.allowed}
    for name, default in _DECISION_DEFAULTS:
        value = getattr(decision, name)
        if value != default:
            out[name] = value
    return out


def _entry_json(entry: LedgerEntry) -> dict[str, object]:
    if type(entry) is ToolCallRecord:
        # The per-call path, by hand: the same object the converter would build.
        decision = entry.decision
        line: dict[str, object] = {
            "type": "tool_call",
            "schema_version": LEDGER_SCHEMA_VERSION,
            "call_id": entry.call_id,
            "tool_name": entry.tool_name,
            "arguments": entry.arguments,
            "status": entry.status,
            "blocked_reason": entry.blocked_reason,
            "started_at": entry.started_at,
            "finished_at": entry.finished_at,
            "duration_s": entry.duration_s,
            "result_preview": entry.result_preview,
            "decision": None if decision is None else _decision_json(decision),
            "run_id": entry.run_id,
        }
        if entry.definition_hash is not None:
            # Written only when set, so lines of local tools read as they always did.
            line["definition_hash"] = entry.definition_hash
        return line
    data = _get_converter().unstructure(entry)
    return {"type": TAGS[type(entry)], "schema_version": LEDGER_SCHEMA_VERSION, **data}


def encode_entry(entry: LedgerEntry) -> str:
    """One JSONL line (with its newline) for ``entry``.

    Raises:
        LedgerFormatError: the entry holds a value JSON cannot carry.
    """
    try:
        return _ENCODER.encode(_entry_json(entry)) + "\n"
    except (TypeError, ValueError) as exc:
        name = getattr(entry, "call_id", None) or getattr(entry, "run_id", "")
        raise LedgerFormatError(f"record {name!r}: {exc}") from exc


def decode_entry(line: str, number: int) -> LedgerEntry:
    """Read one JSONL line written by any readable schema version.

    Raises:
        LedgerFormatError: the line is not an entry this version can read; the
            message gives the line number.
    """
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise LedgerFormatError(f"line {number}: not JSON ({exc})") from exc
    return decode_object(data, f"line {number}")


def decode_object(data: object, where: str) -> LedgerEntry:
    """Structure one tagged, versioned JSON object (from a line or a database row).

    Raises:
        LedgerFormatError: it is not an entry this version can read; the
            message starts with ``where``.
    """
    number = where  # messages read "line 3: ..." or "row 3: ..."
    if not isinstance(data, dict):
        raise LedgerFormatError(f"{number}: expected an object")
    tag = data.pop("type", None)
    version = data.pop("schema_version", None)
    entry_type = _CLASSES.get(tag) if isinstance(tag, str) else None
    if tag is None:
        raise LedgerFormatError(f'{number}: not a ledger record (it has no "type")')
    if entry_type is None:
        raise LedgerFormatError(f"{number}: unknown record type {tag!r}")
    if type(version) is not int or version not in READABLE_VERSIONS:
        raise LedgerFormatError(
            f"{number}: schema_version {version!r} is not one of {sorted(READABLE_VERSIONS)}"
        )
    if version == 1:
        if entry_type is not ToolCallRecord:
            raise LedgerFormatError(f"{number}: {tag!r} records need schema_version 2")
        if "decision" in data or "run_id" in data or "definition_hash" in data:
            raise LedgerFormatError(
                f"{number}: schema_version 1 has no decision, run_id or definition_hash"
            )
    if entry_type is ToolCallRecord:
        status = data.get("status")
        if not isinstance(status, str) or status not in _STATUSES:
            raise LedgerFormatError(f"{number}: unknown status {status!r}")
    try:
        entry: LedgerEntry = _get_converter().structure(data, entry_type)
    except Exception as exc:
        raise LedgerFormatError(f"{number}: {_describe_cattrs(exc)}") from exc
    return entry


def _describe_cattrs(exc: Exception) -> str:
    """A one-line account of a cattrs failure (its errors come grouped)."""
    leaves: list[str] = []
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop()
        nested = getattr(current, "exceptions", None)
        if isinstance(nested, (list, tuple)) and nested:
            pending.extend(nested)
            continue
        notes = getattr(current, "__notes__", None) or []
        where = f" ({'; '.join(str(n) for n in notes)})" if notes else ""
        leaves.append(f"{current}{where}")
    return "; ".join(leaves) or str(exc)
