"""Regular expressions: what ``format: regex`` and admitting a pattern may cost, and the dialect.

Findings of a security review: RE2 compiled each ``format: regex`` argument (up
to 150 ms for 15 characters) and Python's ``re`` parsed what RE2 refused (about
1 s); every pattern of a schema was compiled with 8 MB of RE2 memory before any
limit could refuse the schema; and 2019-09/2020-12 admitted non-ECMA syntax that
draft-07 refused. Timing lives in the benchmark's ``stall:`` rows; these tests
hold the decisions (what is a regex, what is refused, how many compiles run).
"""

from __future__ import annotations

from typing import Any

import pytest

from prism.core import (
    DispatchOptions,
    ToolCall,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.core.testing import RecordingTool
from prism.validation.jsonschema import (
    JsonSchemaArgumentValidator,
    SchemaRejectedError,
    create_json_schema_tool_validator,
)
from prism.validation.jsonschema._regex import (
    MAX_NAMED_GROUPS,
    MAX_REGEX_CHARS,
    MAX_SCHEMA_PATTERN_COST,
    _measure,
    _PatternError,
    is_regex,
    pattern_cost,
    to_re2,
)

D4 = "http://json-schema.org/draft-04/schema#"
D6 = "http://json-schema.org/draft-06/schema#"
D7 = "http://json-schema.org/draft-07/schema#"
D2019 = "https://json-schema.org/draft/2019-09/schema"
D2020 = "https://json-schema.org/draft/2020-12/schema"
ALL = [D4, D6, D7, D2019, D2020]


def _refusal(result: Any) -> str:
    assert not result.ok
    message: str = result.errors[0].message
    assert message.startswith("schema rejected"), message
    return message


# F2: format: regex is the engine's ECMA-262 parser, bounded.


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (r"\p{L}{0,200}N", True),  # RE2 spent 100-150 ms compiling this
        ("(?i)(?=q)" + "[\x00-\U0010ffff]" * 158, False),  # Python's re took ~1 s; not ECMA
        ("(?<=a)b", True),  # valid ECMA-262 that RE2 cannot run
        (r"\1(a)", True),
        ("(?i)abc", False),
        (r"\A", False),
        ("(unclosed", False),
        ("\ud800", False),
    ],
)
def test_format_regex_asks_the_engines_ecma_parser(value: str, *, expected: bool) -> None:
    assert is_regex(value) is expected


def test_format_regex_bounds_length_and_named_groups() -> None:
    assert is_regex("a" * MAX_REGEX_CHARS)
    assert not is_regex("a" * (MAX_REGEX_CHARS + 1))
    names = "".join(f"(?<n{i}>x)" for i in range(MAX_NAMED_GROUPS))
    assert is_regex(names)
    assert not is_regex(names + "(?<last>x)")  # naming them is quadratic in the engine


@pytest.mark.parametrize("dialect", [D4, D7])
async def test_many_costly_regex_strings_through_dispatch_are_answered(dialect: str) -> None:
    # The report's 53 strings: 5.5 s of RE2 compiles through dispatch before.
    tool = RecordingTool(
        name="t",
        parameters={
            "$schema": dialect,
            "type": "object",
            "properties": {"r": {"type": "array", "items": {"type": "string", "format": "regex"}}},
        },
    )
    options = DispatchOptions(
        registry=create_tool_registry([tool.definition]),
        validator=create_json_schema_tool_validator(),
    )
    good = [rf"\p{{L}}{{0,200}}{i}" for i in range(100, 153)]
    result = await dispatch_tool_call(ToolCall(id="1", name="t", arguments={"r": good}), options)
    assert not result.is_error
    bad = [*good, "(?i)(?=q)" + "[\x00-\U0010ffff]" * 20]
    result = await dispatch_tool_call(ToolCall(id="2", name="t", arguments={"r": bad}), options)
    assert result.is_error
    assert "regex" in result.joined_text
    assert len(tool.calls) == 1


def test_every_format_regex_string_counts_towards_the_work_budget() -> None:
    # Even an empty string is a call into the check: 40,000 of them are over
    # max_validation_work at the default limits, 20,000 are not.
    validator = JsonSchemaArgumentValidator()
    schema = {"$schema": D7, "type": "array", "items": {"type": "string", "format": "regex"}}
    assert validator.validate(schema, [""] * 20_000).ok
    refused = validator.validate(schema, [""] * 40_000)
    assert not refused.ok
    assert "max_validation_work" in refused.errors[0].message


def test_format_regex_characters_count_towards_the_regex_budget() -> None:
    validator = JsonSchemaArgumentValidator()
    schema = {"$schema": D7, "type": "array", "items": {"type": "string", "format": "regex"}}
    assert validator.validate(schema, ["a" * 7_000]).ok
    refused = validator.validate(schema, ["a" * 4_500] * 2)
    assert not refused.ok
    assert "max_regex_work" in refused.errors[0].message


# F3: admitting a schema compiles a bounded amount.


@pytest.mark.parametrize(
    "pattern",
    [
        r"^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$",
        r"^\d{4}-\d{2}-\d{2}$",
        r"^[a-z_][a-z0-9_]{0,63}$",
        r"^\p{L}+$",
        r"\p{L}{1,64}",
        r"^[\p{L}\p{N}_-]+$",
        r"[\p{L}\p{N}]{0,60}",
        r"\p{Lu}{1,64}",
        r".{0,1000}",
    ],
)
def test_ordinary_patterns_are_admitted(pattern: str) -> None:
    JsonSchemaArgumentValidator().check_schema({"type": "string", "pattern": pattern})


@pytest.mark.parametrize("pattern", [r"\p{L}{0,200}", r"[\p{L}\p{N}]{0,200}", r"\p{L}{0,200}N"])
def test_a_pattern_too_large_to_compile_cheaply_is_refused(pattern: str) -> None:
    with pytest.raises(SchemaRejectedError, match="compiles to more than 2 MiB"):
        JsonSchemaArgumentValidator().check_schema({"pattern": pattern})


def test_a_pattern_longer_than_the_cap_is_refused() -> None:
    with pytest.raises(SchemaRejectedError, match="longer than 16,384"):
        JsonSchemaArgumentValidator().check_schema({"pattern": "a" * (MAX_REGEX_CHARS + 1)})


def test_the_report_schema_is_refused_after_one_compile() -> None:
    # 20 patternProperties of \p{L}{0,200}: 1.84 s on first dispatch before.
    schema = {
        "type": "object",
        "patternProperties": {rf"\p{{L}}{{0,200}}{i}": {} for i in range(20)},
    }
    before = _measure.cache_info().misses
    with pytest.raises(SchemaRejectedError, match="2 MiB"):
        JsonSchemaArgumentValidator().check_schema(schema)
    assert _measure.cache_info().misses - before == 1


def test_the_patterns_of_one_schema_share_a_compile_budget() -> None:
    # Each is 80,584 instructions and admitted alone; a schema with 40 of them
    # (4.8 s before) is refused once their sum passes the budget, after a few compiles.
    per = pattern_cost(r"[\p{L}\p{N}]{0,60}")
    patterns: dict[str, Any] = {rf"[\p{{L}}\p{{N}}]{{0,60}}z{i}": {} for i in range(40)}
    before = _measure.cache_info().misses
    with pytest.raises(SchemaRejectedError, match="together compile to more than"):
        JsonSchemaArgumentValidator().check_schema(
            {"type": "object", "patternProperties": patterns}
        )
    assert _measure.cache_info().misses - before <= MAX_SCHEMA_PATTERN_COST // per + 1


# F8: the same ECMA-262 dialect in every draft.


@pytest.mark.parametrize("dialect", ALL)
@pytest.mark.parametrize("pattern", ["(?i)abc", r"^\Aabc", r"abc\z", r"\x{41}", "(?s).", r"\Qa\E"])
def test_non_ecma_syntax_is_refused_in_every_draft(dialect: str, pattern: str) -> None:
    result = JsonSchemaArgumentValidator().validate(
        {"$schema": dialect, "type": "string", "pattern": pattern}, "ABC"
    )
    assert "not an ECMA-262 regular expression" in _refusal(result)


@pytest.mark.parametrize("dialect", ALL)
@pytest.mark.parametrize(
    ("pattern", "good", "bad"),
    [
        (r"^\u0041$", "A", "B"),
        (r"^\u{41}$", "A", "B"),
        (r"^\cJ$", "\n", "J"),
        (r"^[\u0041-\u005A]+$", "ABC", "abc"),
        (r"^\\u0041$", "\\u0041", "A"),  # an escaped backslash is not an escape
    ],
)
def test_ecma_escapes_are_admitted_and_mean_what_ecma_says(
    dialect: str, pattern: str, good: str, bad: str
) -> None:
    validator = JsonSchemaArgumentValidator()
    schema = {"$schema": dialect, "type": "string", "pattern": pattern}
    assert validator.validate(schema, good).ok
    assert not validator.validate(schema, bad).ok


@pytest.mark.parametrize("dialect", [D7, D2020])
@pytest.mark.parametrize(
    ("pattern", "advice"),
    [(r"^\uD83D\uDE00$", r"\u{...}"), ("^[^]$", r"[\s\S]"), (r"^\0$", r"\x00")],
)
def test_ecma_syntax_the_engine_cannot_run_is_refused_with_advice(
    dialect: str, pattern: str, advice: str
) -> None:
    result = JsonSchemaArgumentValidator().validate(
        {"$schema": dialect, "type": "string", "pattern": pattern}, "x"
    )
    message = _refusal(result)
    assert "not supported by the engine" in message
    assert advice in message


@pytest.mark.parametrize(
    ("pattern", "translated"),
    [
        (r"\u0041", r"\x{0041}"),
        (r"\u{1F600}", r"\x{1F600}"),
        (r"\cj\cJ", r"\x{0a}\x{0a}"),
        (r"[\u0061-\u007A]", r"[\x{0061}-\x{007A}]"),
        (r"\\u0041", r"\\u0041"),
        (r"\u{zz}\u00", r"\u{zz}\u00"),
        ("[]^]", "[]^]"),
    ],
)
def test_ecma_escapes_are_translated_for_re2(pattern: str, translated: str) -> None:
    assert to_re2(pattern) == translated


def test_surrogate_escapes_do_not_reach_re2() -> None:
    with pytest.raises(_PatternError, match="surrogate"):
        to_re2(r"\uDE00")


# F9: draft-06 has no content keywords (they came with draft-07).


def test_draft6_leaves_content_keywords_unasserted_and_draft7_asserts_them() -> None:
    validator = JsonSchemaArgumentValidator()
    content = {"contentMediaType": "application/json", "contentEncoding": "base64"}
    assert validator.validate({"$schema": D6, **content}, "{").ok
    assert validator.validate({"$schema": D6, "type": "string", **content}, "!!").ok
    refused = validator.validate({"$schema": D7, **content}, "{")
    assert not refused.ok
    # Data that looks like the keyword is still data.
    assert not validator.validate(
        {"$schema": D6, "enum": [{"contentMediaType": "x"}]}, {"contentMediaType": "y"}
    ).ok


def test_a_pattern_asking_for_too_many_repeated_copies_is_refused_before_re2() -> None:
    # RE2 writes x{n,m} out as m copies before compiling, in time that grows
    # faster than the copies: seventy a{1,1000} in one pattern took 6 s to price.
    validator = JsonSchemaArgumentValidator()
    for pattern in ("a{1,1000}" * 70, "a{1,1000}" * 3, "(a{1,100}){1,100}"):
        schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": pattern}}}
        with pytest.raises(SchemaRejectedError, match="copies"):
            validator.check_schema(schema)
    for pattern in ("^.{1,1000}$", "a{1,1000}[a-z]{1,1000}", "(a{1,30}){1,30}", "\\p{L}{1,64}"):
        validator.check_schema({"type": "string", "pattern": pattern})


@pytest.mark.parametrize(
    ("pattern", "named"),
    [
        (r"\p{Script=Greek}", r"the Unicode property escape \p{Script=Greek}"),
        (r"[\P{sc=Greek}]", r"the Unicode property escape \P{sc=Greek}"),
        (r"\p{General_Category=Letter}", r"the Unicode property escape \p{General_Category"),
        (r"(a)\1", "a backreference"),
        (r"(?<n>a)\k<n>", "a named backreference"),
        (r"(?=a)b", "a lookahead"),
        (r"(?!a)b", "a lookahead"),
        (r"(?<=a)b", "a lookbehind"),
        (r"(?<!a)b", "a lookbehind"),
    ],
)
def test_valid_ecma_the_linear_engine_cannot_run_is_refused_naming_the_construct(
    pattern: str, named: str
) -> None:
    # \p{Script=Greek} used to read "no backreferences or lookaround".
    assert is_regex(pattern)
    with pytest.raises(SchemaRejectedError) as caught:
        JsonSchemaArgumentValidator().check_schema({"type": "string", "pattern": pattern})
    assert named in caught.value.reason
    assert "valid ECMA-262 that the linear-time engine cannot run" in caught.value.reason
    assert JsonSchemaArgumentValidator().validate({"pattern": r"^\p{Greek}+$"}, "αβγ").ok
