"""The official JSON Schema Test Suite through the adapter.

Each case ends in one of:

- ``pass``: the verdict matches the suite;
- ``policy``: refused by a documented rule the harness checks independently:
  the schema needs a reference outside the document fragment (a non-``#``
  ``$ref`` or a relative ``$id``; Prism never fetches), or the schema or
  instance holds a pollution key (``__proto__``, ``constructor``, ``prototype``);
- ``rejected``: the schema was refused for another reason (for example a
  custom meta-schema); it counts as not passed;
- ``false_accept`` / ``false_reject``: a wrong verdict.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from typing import TYPE_CHECKING, Any

import pytest

from prism.core import ToolCall, ToolDefinition, ToolExecutionContext, ToolResult
from prism.validation.jsonschema import (
    JsonSchemaArgumentValidator,
    create_json_schema_tool_validator,
)

if TYPE_CHECKING:
    from pathlib import Path

_DIALECTS = {
    "draft4": "http://json-schema.org/draft-04/schema#",
    "draft6": "http://json-schema.org/draft-06/schema#",
    "draft7": "http://json-schema.org/draft-07/schema#",
    "draft2019-09": "https://json-schema.org/draft/2019-09/schema",
    "draft2020-12": "https://json-schema.org/draft/2020-12/schema",
}
_POLLUTION = {"__proto__", "constructor", "prototype"}


def _walk(value: Any) -> Any:
    yield value
    if isinstance(value, dict):
        for item in value.values():
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def _needs_outside_reference(schema: Any) -> bool:
    for node in _walk(schema):
        if not isinstance(node, dict):
            continue
        ref = node.get("$ref")
        if isinstance(ref, str) and not ref.startswith("#"):
            return True
        ident = node.get("$id")
        if isinstance(ident, str) and ident and not ident.startswith("#") and ":" not in ident:
            return True
    return False


def _has_pollution(value: Any) -> bool:
    return any(isinstance(node, dict) and _POLLUTION & node.keys() for node in _walk(value))


def _run_draft(suite: Path, draft: str, folder: str = "") -> tuple[Counter[str], list[str]]:
    validator = JsonSchemaArgumentValidator(cache_size=1024)
    counts: Counter[str] = Counter()
    wrong: list[str] = []
    for path in sorted((suite / draft / folder).glob("*.json")):
        for group in json.loads(path.read_text(encoding="utf-8")):
            schema = group["schema"]
            if isinstance(schema, dict) and "$schema" not in schema:
                # The suite leaves the dialect implicit; each folder is its draft.
                schema = {"$schema": _DIALECTS[draft], **schema}
            schema_before = copy.deepcopy(schema)
            outside = _needs_outside_reference(schema)
            for case in group["tests"]:
                data = case["data"]
                data_before = copy.deepcopy(data)
                result = validator.validate(schema, data)
                assert data == data_before, f"{path.name}: the instance was mutated"
                refused_schema = not result.ok and result.errors[0].message.startswith(
                    "schema rejected"
                )
                policy = outside or _has_pollution(schema) or _has_pollution(data)
                where = f"{draft}/{path.name}: {group['description']} / {case['description']}"
                if policy:
                    assert not result.ok, f"{where}: a policy case was validated"
                    counts["policy"] += 1
                elif refused_schema:
                    counts["rejected"] += 1
                elif result.ok == case["valid"]:
                    counts["pass"] += 1
                else:
                    kind = "false_accept" if result.ok else "false_reject"
                    counts[kind] += 1
                    wrong.append(f"{kind}: {where}: {result.errors}")
            assert schema == schema_before, f"{path.name}: the schema was mutated"
    return counts, wrong


def _line(draft: str, counts: Counter[str]) -> str:
    total = sum(counts.values())
    decided = total - counts["policy"]
    rate = 100 * counts["pass"] / decided if decided else 0.0
    return (
        f"{draft}: {total} cases: pass={counts['pass']} policy={counts['policy']} "
        f"rejected={counts['rejected']} false_accept={counts['false_accept']} "
        f"false_reject={counts['false_reject']}; pass rate {rate:.1f}% of non-policy cases, "
        f"{100 * counts['pass'] / total:.1f}% of all"
    )


@pytest.mark.parametrize(
    ("draft", "least"),
    [("draft7", 800), ("draft2020-12", 1_100), ("draft2019-09", 1_080)],
)
def test_suite_passes_at_least_98_percent_with_no_wrong_verdict(
    json_schema_test_suite: Path, conformance_summary: list[str], draft: str, least: int
) -> None:
    counts, wrong = _run_draft(json_schema_test_suite, draft)
    line = _line(draft, counts)
    conformance_summary.append(line)
    decided = sum(counts.values()) - counts["policy"]
    assert not wrong, line + "\n" + "\n".join(wrong[:20])
    assert counts["pass"] >= 0.98 * decided, line
    assert counts["pass"] > least, line  # the suite was really there


@pytest.mark.parametrize("draft", ["draft4", "draft6"])
def test_older_drafts_never_give_a_wrong_verdict(
    json_schema_test_suite: Path, conformance_summary: list[str], draft: str
) -> None:
    counts, wrong = _run_draft(json_schema_test_suite, draft)
    line = _line(draft, counts)
    conformance_summary.append(line)
    assert not wrong, line + "\n" + "\n".join(wrong[:20])
    assert counts["pass"] > 500, line


@pytest.mark.parametrize(("draft", "least"), [("draft4", 150), ("draft6", 210), ("draft7", 430)])
def test_older_drafts_assert_their_formats_as_the_suite_does(
    json_schema_test_suite: Path, conformance_summary: list[str], draft: str, least: int
) -> None:
    # Draft-04/06/07 always assert format: the suite's optional format tests
    # must then pass too, with no wrong verdict.
    counts, wrong = _run_draft(json_schema_test_suite, draft, "optional/format")
    line = _line(f"{draft} optional/format", counts)
    conformance_summary.append(line)
    assert not wrong, line + "\n" + "\n".join(wrong[:20])
    assert counts["pass"] > least, line


async def _noop(_args: Any, _ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text("ok")  # pragma: no cover - never executed


def test_calls_from_json_text_get_the_verdicts_of_calls_built_by_hand(
    json_schema_test_suite: Path,
) -> None:
    """Every suite instance, as a call parsed from JSON text and as one built from a dict.

    The text path (``ToolCall.from_json``, judged by the engine without a walk
    when the text proves the limits) must give the same answer, word for word,
    as the walked path, whose verdicts the tests above hold to the suite.
    """
    bounded = 0
    cases = 0
    for draft, dialect in _DIALECTS.items():
        check = create_json_schema_tool_validator(cache_size=1024)
        for path in sorted((json_schema_test_suite / draft).glob("*.json")):
            for group in json.loads(path.read_text(encoding="utf-8")):
                schema = group["schema"]
                if not isinstance(schema, dict):
                    continue
                schema = {"$schema": dialect, **schema}
                tool = ToolDefinition(name="t", execute=_noop, parameters=schema)
                for case in group["tests"]:
                    text = json.dumps(case["data"])
                    call = ToolCall.from_json(id="1", name="t", arguments=text)
                    by_hand = json.loads(text)
                    built = ToolCall(id="1", name="t", arguments=by_hand)
                    from_text = check(tool, call.arguments, ToolExecutionContext(call))  # type: ignore[arg-type]
                    from_dict = check(tool, by_hand, ToolExecutionContext(built))
                    assert from_text == from_dict, (draft, path.name, case["description"])
                    cases += 1
                    bounded += call._text_bound[0] <= len(text)
    assert cases > 4_000
    assert bounded > 0.9 * cases  # the text path was really taken
