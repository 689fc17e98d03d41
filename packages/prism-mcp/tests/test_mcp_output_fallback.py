"""The output check without prism-validation-jsonschema: the ``jsonschema`` package, bounded.

Each hostile schema class is one the package alone would spend seconds (or
forever) on per result; the fallback leaves its results unchecked, with one
warning. Each value is chosen so that the package, had it run, would have
reported a mismatch at once: a ``None`` answer proves the schema was not used,
and a regression fails without hanging. Schemas the fallback prices are checked;
values whose price is past ``FALLBACK_WORK`` are refused as uncheckable.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from prism.mcp._output import Mismatch, OutputChecker
from prism.mcp._priced import (
    FALLBACK_WORK,
    MAX_DEPTH,
    MAX_ENUM_VALUES,
    MAX_NESTING,
    MAX_SCHEMA_MEMBERS,
    Unpriced,
    price_schema,
    price_value,
)

UNCHECKED = "its structuredContent is not checked"


def check(schema: Any, value: Any) -> Mismatch | None:
    return OutputChecker(hardened=False).check(schema, value, tool="t")


def unchecked(schema: Any, value: Any, caplog: pytest.LogCaptureFixture, why: str) -> None:
    """``schema`` is left unused: ``value`` (which breaks it) passes, with the one warning."""
    caplog.clear()
    caplog.set_level(logging.WARNING, logger="prism.mcp")
    checker = OutputChecker(hardened=False)
    assert checker.check(schema, value, tool="t") is None
    assert checker.check(schema, value, tool="t") is None
    warnings = [m for m in caplog.messages if UNCHECKED in m]
    assert len(warnings) == 1, caplog.messages
    assert "only schemas whose checking cost" in warnings[0]
    assert why in warnings[0], warnings[0]


def fan_out(levels: int) -> dict[str, Any]:
    """Each level's allOf references the level below twice: 2**levels evaluations."""
    defs: dict[str, Any] = {"l0": {"type": "string"}}
    for level in range(1, levels):
        below = {"$ref": f"#/$defs/l{level - 1}"}
        defs[f"l{level}"] = {"allOf": [below, below]}
    return {"$defs": defs, "$ref": f"#/$defs/l{levels - 1}"}


def nested_unevaluated(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"allOf": [schema], "unevaluatedProperties": False}
    return schema


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        # Each level multiplies the package's work (re-evaluation beside unevaluated*).
        (nested_unevaluated(12), "'unevaluatedProperties'"),
        ({"unevaluatedItems": False, "type": "string"}, "'unevaluatedItems'"),
        # Python's re backtracks: "a" * 30 + "!" took the package minutes.
        ({"type": "string", "pattern": "^(a+)+$"}, "'pattern'"),
        ({"patternProperties": {"^(a+)+$": {}}, "type": "string"}, "'patternProperties'"),
        # Pairwise comparisons of unhashable items: 30,000 objects, seconds.
        ({"uniqueItems": True, "type": "string"}, "'uniqueItems' compares items pairwise"),
        # 2**16 evaluations of one value node, each reference counted where reached.
        (fan_out(16), "one value node alone could cost more"),
        ({"$dynamicRef": "#a", "type": "string"}, "'$dynamicRef'"),
        ({"$recursiveRef": "#", "type": "string"}, "'$recursiveRef'"),
    ],
)
def test_a_schema_the_fallback_cannot_price_is_left_unchecked(
    schema: dict[str, Any], why: str, caplog: pytest.LogCaptureFixture
) -> None:
    unchecked(schema, 5, caplog, why)


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        # References: only '#/$defs/NAME' or '#/definitions/NAME' into the root's own.
        ({"$defs": {"a": {"type": "string"}}, "$ref": "#/$defs/missing"}, "names no entry"),
        ({"$defs": [], "$ref": "#/$defs/a"}, "names no entry"),
        ({"type": "string", "$ref": "#"}, "is not '#/$defs/NAME'"),
        ({"properties": {"a": {}}, "$ref": "#/properties/a"}, "is not '#/$defs/NAME'"),
        ({"$defs": {"a b": {"type": "string"}}, "$ref": "#/$defs/a%20b"}, "is not '#/$defs"),
        ({"$ref": "https://example.com/s.json#/$defs/a"}, "is not '#/$defs/NAME'"),
        ({"$ref": 5}, "is not '#/$defs/NAME'"),
        # A recursive schema: its price grows with the value's depth.
        ({"$defs": {"n": {"items": {"$ref": "#/$defs/n"}}}, "$ref": "#/$defs/n"}, "a cycle"),
        # An $id below the root moves the base that references resolve against.
        ({"properties": {"a": {"$id": "https://example.com/a", "type": "string"}}}, "an $id"),
        (
            {
                "$schema": "http://json-schema.org/draft-04/schema#",
                "properties": {"a": {"id": "https://example.com/a"}},
            },
            "an $id",
        ),
        # Dialects: draft-03 keywords mean other things; unknown dialects are not guessed.
        ({"$schema": "http://json-schema.org/draft-03/schema#"}, "its $schema"),
        ({"$schema": 7}, "its $schema"),
        # Keyword values the package would misread or fail on.
        ({"type": "strin"}, "'type' names"),
        ({"type": []}, "'type' names"),
        ({"enum": "abc"}, "'enum' is not an array"),
        ({"maxLength": -1}, "'maxLength' is not a non-negative integer"),
        ({"minItems": 1.5}, "'minItems' is not a non-negative integer"),
        ({"minimum": "0"}, "'minimum' is not a number"),
        ({"maximum": True}, "'maximum' is not a number"),
        ({"multipleOf": 0}, "'multipleOf' is not positive"),
        ({"required": ["a", 1]}, "'required' is not an array of strings"),
        ({"dependentRequired": ["a"]}, "'dependentRequired' is not an object"),
        ({"dependentRequired": {"a": "b"}}, "'dependentRequired' is not an array of strings"),
        ({"allOf": []}, "'allOf' is not a non-empty array"),
        ({"oneOf": {}}, "'oneOf' is not a non-empty array"),
        ({"dependentSchemas": []}, "'dependentSchemas' is not an object"),
        ({"properties": []}, "'properties' is not an object"),
        ({"prefixItems": {}}, "'prefixItems' is not an array"),
        ({"not": 5}, "not an object or a boolean"),
        ({"properties": {"a": {1: "x"}}}, "a key that is not a string"),
    ],
)
def test_a_schema_outside_the_priced_subset_is_left_unchecked(
    schema: dict[str, Any], why: str, caplog: pytest.LogCaptureFixture
) -> None:
    unchecked(schema, {"a": 5}, caplog, why)


def test_schemas_past_the_fallbacks_size_limits_are_left_unchecked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    members = {"properties": {f"p{i}": {"type": "string"} for i in range(MAX_SCHEMA_MEMBERS)}}
    unchecked(members, {"p0": 5}, caplog, f"more than {MAX_SCHEMA_MEMBERS} members")
    # Sub-schemas count even when empty (each is a step of pricing), and a
    # reference each time it is met.
    empty: dict[str, Any] = {"allOf": [{}] * MAX_SCHEMA_MEMBERS + [{"type": "string"}]}
    unchecked(empty, 5, caplog, f"more than {MAX_SCHEMA_MEMBERS} members")
    # 700 references: 1,400 members of their own, 2,100 with their target's each time.
    refs = [{"$ref": "#/$defs/s"} for _ in range(700)]
    shared = {"$defs": {"s": {"type": "string"}}, "anyOf": refs}
    unchecked(shared, 5, caplog, f"more than {MAX_SCHEMA_MEMBERS} members")
    values = {"enum": [[i] for i in range(MAX_ENUM_VALUES // 2 + 1)]}
    unchecked(values, 5, caplog, f"more than {MAX_ENUM_VALUES} values")
    deep = json.loads('{"items":' * (MAX_DEPTH + 1) + '{"type": "string"}' + "}" * (MAX_DEPTH + 1))
    unchecked(deep, 5, caplog, f"more than {MAX_DEPTH} levels")
    nested = json.loads('{"not":' * (MAX_NESTING + 1) + "{}" + "}" * (MAX_NESTING + 1))
    unchecked(nested, 5, caplog, f"nest more than {MAX_NESTING} deep")


def test_priced_schemas_are_checked_with_the_path_of_the_mismatch() -> None:
    item = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 0}, "s": {"type": "string"}},
        "required": ["n"],
        "additionalProperties": False,
    }
    # A pydantic model's output schema: its nested models in $defs, referenced.
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://example.com/out",
        "$defs": {"Item": item},
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}, "maxItems": 100},
            "kind": {"enum": ["a", "b", {"c": [1, "x" * 100]}], "format": "kind"},
            "size": {"const": 3, "multipleOf": 1.5},
            "pair": {"prefixItems": [{"type": "integer"}, {"type": "string"}]},
            "any": {"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 3}]},
            "one": {"oneOf": [{"type": "integer"}, {"type": "boolean"}], "not": {"const": 0}},
            "when": {"if": {"type": "integer"}, "then": {"maximum": 9}, "else": True},
            "deps": {
                "dependentRequired": {"a": ["b"]},
                "dependentSchemas": {"b": {"required": ["c"]}},
                "propertyNames": {"maxLength": 1},
                "uniqueItems": False,
            },
            "many": {"contains": {"type": "integer"}, "minContains": 1},
            "never": False,
        },
    }
    good = {
        "items": [{"n": 1, "s": "x"}, {"n": 2}],
        "kind": {"c": [1, "x" * 100]},
        "size": 3,
        "pair": [1, "one"],
        "any": None,
        "one": True,
        "when": 9,
        "deps": {"a": 1, "b": 2, "c": 3},
        "many": ["x", 1],
    }
    assert check(schema, good) is None
    for path, value in [
        ("$.items[1].n", {"items": [{"n": 1}, {"n": -1}]}),
        ("$.items[0]", {"items": [{"n": 1, "t": 2}]}),
        ("$.kind", {"kind": "z"}),
        ("$.size", {"size": 4}),
        ("$.pair[1]", {"pair": [1, 2]}),
        ("$.one", {"one": 0}),
        ("$.when", {"when": 10}),
        ("$.deps", {"deps": {"a": 1}}),
        ("$.deps", {"deps": {"b": 1}}),
        ("$.many", {"many": ["x"]}),
    ]:
        mismatch = check(schema, value)
        assert mismatch is not None, value
        assert mismatch.path == path, (value, mismatch)
    # (The package gives a false sub-schema's error no path.)
    assert check(schema, {"never": 1}) == Mismatch(
        path="$", message="False schema does not allow 1"
    )
    # Older drafts' spellings: definitions, array-form items, dependencies.
    draft7 = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": {"n": {"type": "integer"}},
        "items": [{"$ref": "#/definitions/n"}],
        "additionalItems": {"type": "string"},
        "dependencies": {"a": ["b"], "b": {"required": ["c"]}},
    }
    assert check(draft7, [1, "x"]) is None
    assert check(draft7, [1, 2]) == Mismatch(path="$[1]", message="2 is not of type 'string'")
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", "id": "urn:x"}
    assert check({**draft4, "maximum": 3, "exclusiveMaximum": True}, 3) is not None
    assert check(True, 5) is None
    assert check({"not": True}, "x") is not None


def test_a_value_past_the_bound_is_refused_as_uncheckable() -> None:
    # 2,000 items, each failing 20 anyOf branches: about 0.4 s of the package's time.
    schema = {"type": "array", "items": {"anyOf": [{"type": "string", "minLength": 3}] * 20}}
    mismatch = check(schema, [1] * 2_000)
    assert mismatch is not None
    assert mismatch.path == ""
    assert mismatch.message.startswith("could not be checked")
    assert f"{FALLBACK_WORK:,}" in mismatch.message
    # The same schema on a small value is checked.
    assert check(schema, ["abcd"] * 10) is None
    assert check(schema, [1]) is not None


def test_a_large_value_that_every_message_would_quote_is_refused() -> None:
    # One node, but each of 100 anyOf branches would write the whole value into
    # its message: 100 reprs of 3,000 members.
    schema = {"anyOf": [{"type": "string"}] * 100}
    big = {f"key-{i}": ["x" * 40, i] for i in range(3_000)}
    price = price_schema(schema)
    assert price.work[0] <= FALLBACK_WORK  # the evaluations alone fit
    assert price_value(price, big) > FALLBACK_WORK
    mismatch = check(schema, big)
    assert mismatch is not None
    assert mismatch.message.startswith("could not be checked")
    assert check(schema, {"a": 1}) is not None  # small: checked, and refused


def test_no_message_quotes_a_sub_schema() -> None:
    """The package's ``not`` and ``oneOf`` messages wrote the ``repr`` of their sub-schemas,
    annotations and all, for each node failing them: a 1 MB ``description`` under
    ``items.not`` held the event loop 10 s for one value the price let through. The
    fallback's messages quote the node alone; what passes and fails, and the message
    when no ``oneOf`` branch matches, are the package's."""
    from jsonschema import exceptions, validators  # type: ignore[import-untyped]

    note = "n" * 1_000
    never = {"type": "integer", "description": note}
    schema = {
        "properties": {
            "r": {"items": {"not": never}},
            "o": {"oneOf": [never, {"minimum": 0, "title": note}]},
        }
    }
    stock = validators.validator_for(schema)(schema)
    for value, path, message in [
        ({"r": ["a", 0]}, "$.r[1]", "0 is valid under the schema it must not match"),
        ({"o": 1}, "$.o", "1 is valid under 2 of the given schemas, not one"),
        ({"o": -1.5}, "$.o", None),  # no branch: the package's own message
        ({"r": ["a"], "o": 0.5}, "", None),
    ]:
        mismatch = check(schema, value)
        expected = exceptions.best_match(stock.iter_errors(value))
        assert (mismatch is None) == (expected is None), value
        if mismatch is None:
            continue
        assert note not in mismatch.message, value
        assert mismatch.path == path, (value, mismatch)
        assert mismatch.message == (message or expected.message), (value, mismatch)


def test_a_value_is_priced_by_the_nodes_each_depth_meets() -> None:
    schema = {"type": "array", "items": {"type": "integer"}}
    price = price_schema(schema)
    assert price.work == [3, 2]  # the node and its keywords: root, then each item
    assert price_value(price, 5) == 3
    assert price_value(price, [1, 2, 3]) == 3 + 2 * 3
    # Deeper nodes meet no sub-schema: only their size counts, where a message could quote it.
    assert price_value(price, [[[1, 2, 3]]]) == 3 + 2 * 1 + (1 + 1 + 1 + 3) // 16
    long = "x" * 6_400
    assert price_value(price_schema({"type": "string"}), long) == 2 + (1 + 100) // 16
    assert price_value(price_schema({"type": "object"}), {long: 1}) == 2 + (1 + 100 + 1) // 16
    # A flat array past the bound stops the count at its container.
    assert price_value(price, list(range(FALLBACK_WORK))) > FALLBACK_WORK


def test_a_value_the_package_fails_on_is_refused_as_uncheckable() -> None:
    # Dividing by a float bound: the package cannot turn 10**400 into a float.
    mismatch = check({"multipleOf": 0.5}, 10**400)
    assert mismatch == Mismatch(
        path="", message="could not be checked: int too large to convert to float"
    )


def test_pricing_rejects_what_the_checker_does() -> None:
    with pytest.raises(Unpriced, match="'pattern'"):
        price_schema({"pattern": "a"})
    assert price_schema(False).work == [1]
