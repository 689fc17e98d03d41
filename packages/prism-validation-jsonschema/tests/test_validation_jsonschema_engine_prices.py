"""Each construct is priced by what jsonschema-rs does with it, and applied as the dialect says.

The price of a sub-schema is what one instance node meeting it can cost the
engine: an ``enum`` entry or ``const`` that is an object or array is compared
value by value, draft-07's ``contentMediaType: application/json`` parses every
string it checks, and numbers go through the engine's arbitrary-precision
comparison. A call whose price is over a budget is refused before the engine
runs, so these tests are cheap: they ask for the refusal, not for the stall.
"""

from __future__ import annotations

from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs; only is_valid is used
import pytest

from prism.validation.jsonschema import JsonSchemaArgumentValidator, SchemaRejectedError

D7 = "http://json-schema.org/draft-07/schema#"
D2019 = "https://json-schema.org/draft/2019-09/schema"
D2020 = "https://json-schema.org/draft/2020-12/schema"


def _over_budget(schema: dict[str, Any], value: object, budget: str) -> None:
    result = JsonSchemaArgumentValidator().validate(schema, value)
    assert not result.ok
    assert f"{budget}=" in result.errors[0].message, result


# -- enum entries and const values that are objects or arrays ---------------------


def test_an_enum_of_objects_is_priced_per_value_compared() -> None:
    # 4,990 one-member objects (70 kB) against 3,170 copies of the last: 15.8 M
    # structural comparisons, 0.5-0.8 s of CPU on the event loop, admitted before.
    schema = {
        "type": "object",
        "properties": {
            "x": {"type": "array", "items": {"enum": [{"k": f"v{i}"} for i in range(4990)]}}
        },
    }
    _over_budget(schema, {"x": [{"k": "v4989"}] * 3170}, "max_validation_work")
    # A few items still pass.
    assert JsonSchemaArgumentValidator().validate(schema, {"x": [{"k": "v4989"}] * 3}).ok


def test_an_enum_of_arrays_of_strings_counts_the_strings() -> None:
    # 2,000 entries of 16 strings: 4.15 s of CPU against 5,882 matching items.
    entries = [["x"] * 15 + [f"v{i}"] for i in range(2000)]
    schema = {"type": "object", "properties": {"x": {"type": "array", "items": {"enum": entries}}}}
    with pytest.raises(SchemaRejectedError, match="max_schema_work"):
        JsonSchemaArgumentValidator().check_schema(schema)
    small = {"type": "array", "items": {"enum": entries[:200]}}
    _over_budget(small, [entries[199]] * 5882, "max_validation_work")
    assert JsonSchemaArgumentValidator().validate(small, [entries[199]] * 10).ok


def test_a_const_object_is_priced_by_its_size() -> None:
    # Each item may be compared with every value of the const (1,201 of them).
    const = {f"k{i}": [f"v{i}"] * 5 for i in range(200)}
    schema = {"type": "array", "items": {"const": const}}
    _over_budget(schema, [{"k0": ["v0"]}] * 1_000, "max_validation_work")
    assert JsonSchemaArgumentValidator().validate(schema, [const] * 2).ok


# -- draft-07 content keywords parse every string --------------------------------


def test_draft7_content_media_type_is_priced_per_character() -> None:
    # 8 strings of 1 MB of JSON were parsed unpriced: 0.6-0.7 s of CPU per call.
    schema = {
        "$schema": D7,
        "type": "object",
        "properties": {
            "docs": {
                "type": "array",
                "maxItems": 8,
                "items": {"type": "string", "contentMediaType": "application/json"},
            }
        },
    }
    doc = "[" + ",".join(['{"a":0}'] * 124_000) + "]"
    _over_budget(schema, {"docs": [doc] * 8}, "max_regex_work")
    validator = JsonSchemaArgumentValidator()
    # Still asserted, on strings the budget covers.
    assert validator.validate(schema, {"docs": ['{"a": [0]}']}).ok
    assert not validator.validate(schema, {"docs": ['{"a": [0]']}).ok


# -- 2019-09 and 2020-12: "dependencies" is not a keyword -------------------------


@pytest.mark.parametrize("dialect", [D2019, D2020])
def test_dependencies_is_refused_where_it_is_no_keyword(dialect: str) -> None:
    schema = {"$schema": dialect, "type": "object", "not": {"dependencies": {"a": ["b"]}}}
    with pytest.raises(SchemaRejectedError, match="'dependencies' is ignored in this dialect"):
        JsonSchemaArgumentValidator().check_schema(schema)


@pytest.mark.parametrize("dialect", [D2019, D2020])
@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "not": {"dependencies": {"a": ["b"]}}},
        {"type": "object", "oneOf": [{"dependencies": {"a": {"required": ["b"]}}}, {}]},
        {"dependencies": {"a": ["b"]}},
    ],
)
@pytest.mark.parametrize("value", [{"a": 1}, {"c": 1}, {"a": 1, "b": 2}])
def test_ignored_dependencies_never_decide_a_verdict(
    dialect: str, schema: dict[str, Any], value: dict[str, Any]
) -> None:
    # The engine applied it: {"a": 1} was accepted under "not", against the dialect.
    schema = {"$schema": dialect, **schema}
    validator = JsonSchemaArgumentValidator(unsupported_keywords="ignore")
    reference = jsonschema.validators.validator_for(schema)(schema).is_valid(value)
    assert validator.validate(schema, value).ok is reference


def test_dependencies_still_applies_in_draft7() -> None:
    schema = {"$schema": D7, "dependencies": {"a": ["b"]}}
    validator = JsonSchemaArgumentValidator()
    assert not validator.validate(schema, {"a": 1}).ok
    assert validator.validate(schema, {"a": 1, "b": 1}).ok


# -- numbers: the engine's arbitrary-precision comparisons -----------------------

_TINY = [1e-300 * (i + 1) for i in range(2000)]
_HONEST_LEVELS = {
    "type": "object",
    "properties": {
        "levels": {
            "type": "array",
            "items": {"anyOf": [{"enum": list(range(100))}, {"type": "number"}]},
        }
    },
}
_WEIGHTS = {
    "type": "object",
    "properties": {
        "weights": {"type": "array", "items": {"type": "number", "minimum": 0, "maximum": 1.5}}
    },
    "required": ["weights"],
}


def test_floats_against_an_enum_of_integers_are_priced() -> None:
    # 2,400 copies of 1e-300 against 100 integers: 3.1 s of CPU before.
    _over_budget(_HONEST_LEVELS, {"levels": [1e-300] * 2400}, "max_validation_work")
    validator = JsonSchemaArgumentValidator()
    # Integers below 2**63 compare quickly: no price, and so no refusal.
    assert validator.validate(_HONEST_LEVELS, {"levels": [7] * 2400}).ok
    assert validator.validate(_HONEST_LEVELS, {"levels": [0.5, 1e-300, 99]}).ok


def test_an_enum_of_tiny_floats_is_refused_at_admission() -> None:
    # Each entry costs 12-33 us against any number: 120 items took 6.9 s.
    schema = {"type": "array", "items": {"enum": _TINY}}
    with pytest.raises(SchemaRejectedError, match="max_schema_work"):
        JsonSchemaArgumentValidator().check_schema(schema)
    JsonSchemaArgumentValidator().check_schema({"type": "array", "items": {"enum": _TINY[:20]}})


def test_a_const_number_is_priced_by_the_instance_number() -> None:
    # 3,954 items at the old budget's edge cost 2x its ~50 ms.
    schema = {"type": "array", "items": {"const": 2.2250738585072014e-308}}
    _over_budget(schema, [2.2250738585072014e-308] * 3954, "max_validation_work")
    assert JsonSchemaArgumentValidator().validate(schema, [2.2250738585072014e-308] * 20).ok


@pytest.mark.parametrize(
    ("items", "number", "many", "few"),
    [
        # A float bound against tiny floats: 11-23 us an item.
        ({"type": "number", "minimum": 0, "maximum": 1.5}, 5e-324, 99_000, 80),
        ({"exclusiveMaximum": 0.5}, 2.2250738585072014e-308, 20_000, 80),
        # An integer bound or multipleOf against huge floats or integers past 2**63.
        ({"minimum": 0}, 1.7976931348623157e308, 99_000, 800),
        ({"multipleOf": 1}, 1e300, 20_000, 500),
        ({"minimum": 0.5}, 2**64 - 1, 20_000, 80),
    ],
)
def test_number_bounds_are_priced_by_the_instance_number(
    items: dict[str, Any], number: float, many: int, few: int
) -> None:
    schema = {"type": "array", "items": items}
    _over_budget(schema, [number] * many, "max_validation_work")
    assert JsonSchemaArgumentValidator().validate(schema, [number] * few).ok


def test_integers_against_integer_bounds_stay_unpriced() -> None:
    schema = {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 100}}
    assert JsonSchemaArgumentValidator().validate(schema, [7] * 99_000).ok


def test_an_output_schema_of_tiny_floats_cannot_hold_the_event_loop() -> None:
    # A hostile MCP server's outputSchema and result: 32-39 s on the bridge's
    # event loop. Its enum is refused at admission (the bridge then leaves the
    # result unchecked, as with no outputSchema); the honest-looking variant's
    # 100,000 tiny floats are refused by the budget before the engine runs.
    validator = JsonSchemaArgumentValidator()
    hostile = {"type": "object", "properties": {"v": {"type": "array", "items": {"enum": _TINY}}}}
    with pytest.raises(SchemaRejectedError, match="max_schema_work"):
        validator.compile(hostile)
    result = validator.validate_output(_WEIGHTS, {"weights": [5e-324] * 100_000})
    assert not result.ok
    assert "max_validation_work=" in result.errors[0].message


def test_a_long_float_costs_like_a_tiny_one() -> None:
    # The engine reads a number's decimal text: 17 digits cost about 4 us a
    # comparison, against 1 us for a short float such as 0.25.
    validator = JsonSchemaArgumentValidator()
    assert validator.validate(_HONEST_LEVELS, {"levels": [0.25] * 100}).ok
    _over_budget(_HONEST_LEVELS, {"levels": [1.2345678901234567e-19] * 100}, "max_validation_work")
    # In the schema, against plain integers: 32,257 items took 125 ms.
    schema = {"type": "array", "items": {"anyOf": [{"const": 1.2345678901234567e-19}, {}]}}
    _over_budget(schema, [7] * 32_257, "max_validation_work")
    assert validator.validate(schema, [7] * 1_000).ok
