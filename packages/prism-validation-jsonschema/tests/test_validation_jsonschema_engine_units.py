"""The price of a schema against the work the engine really does, counted in evaluations.

A leaf ``{"format": "counted"}`` handed to jsonschema-rs with a Python check
that counts its calls measures how often the engine evaluates that leaf for an
instance: an exact count, free of the machine's load. Prism's price for the
same schema and instance (the admitted work vector times the instance's nodes
per depth) must be at least that count; a shape whose count grows
exponentially with nesting while its price grows linearly is found at a small
depth, long before it costs any time.
"""

from __future__ import annotations

import time
from typing import Any

import jsonschema_rs
import pytest

from prism.validation.jsonschema import (
    JsonSchemaArgumentValidator,
    SchemaLimits,
    SchemaRejectedError,
)
from prism.validation.jsonschema._graph import analyse
from prism.validation.jsonschema._instance import instance_cost
from prism.validation.jsonschema._rs import compile_rs

_LEAF: dict[str, Any] = {"format": "counted"}


def _engine_evaluations(schema: dict[str, Any], instance: object) -> int:
    calls = 0

    def counted(_value: str) -> bool:
        nonlocal calls
        calls += 1
        return True

    engine = jsonschema_rs.Draft202012Validator(
        schema, validate_formats=True, formats={"counted": counted}
    )
    engine.is_valid(instance)
    return calls


def _price(schema: object, instance: object) -> int:
    analysis = analyse(schema, "draft2020", SchemaLimits(max_schema_work=1_000_000))
    return instance_cost(instance, analysis.work, analysis.regex)[0]


def _array_chain(depth: int) -> object:
    value: object = "s"
    for _ in range(depth):
        value = [value]
    return value


def _nest(levels: int, wrap: Any) -> dict[str, Any]:
    schema: dict[str, Any] = _LEAF
    for _ in range(levels):
        schema = wrap(schema)
    return schema


_SHAPES = {
    # unevaluatedItems finds what contains evaluated by running contains again.
    "contains beside unevaluatedItems": lambda s: {"contains": s, "unevaluatedItems": False},
    "contains and items beside unevaluatedItems": lambda s: {
        "items": s,
        "contains": s,
        "unevaluatedItems": False,
    },
    "contains in allOf beside unevaluatedItems": lambda s: {
        "allOf": [{"contains": s}],
        "unevaluatedItems": False,
    },
    "contains and items": lambda s: {"items": s, "contains": s},
    "items beside unevaluatedItems": lambda s: {"items": s, "unevaluatedItems": False},
}


@pytest.mark.parametrize("shape", sorted(_SHAPES))
def test_the_price_covers_the_engines_evaluations(shape: str) -> None:
    # Depth 7: 2**7 evaluations of the leaf where the old price was 3 per level.
    levels = 7
    schema = _nest(levels, _SHAPES[shape])
    instance = _array_chain(levels)
    evaluations = _engine_evaluations(schema, instance)
    assert evaluations >= 1
    assert _price(schema, instance) >= evaluations, (shape, evaluations)


def test_the_price_covers_the_engines_evaluations_through_references() -> None:
    # Inline, this shape is refused past 4 levels (its compile); chained through
    # references it compiles once per level and is priced by its evaluations.
    levels = 7
    table: dict[str, Any] = {
        f"l{i}": {
            "contains": {"$ref": f"#/$defs/l{i + 1}"},
            "minContains": 1,
            "unevaluatedItems": False,
        }
        for i in range(levels)
    }
    table[f"l{levels}"] = _LEAF
    schema = {"$defs": table, "$ref": "#/$defs/l0"}
    instance = _array_chain(levels)
    evaluations = _engine_evaluations(schema, instance)
    assert evaluations == 2**levels
    assert _price(schema, instance) >= evaluations


def test_deep_contains_beside_unevaluated_items_is_refused_at_admission() -> None:
    # The attack: 40 levels (1.6 kB) admitted, then 24 levels of [[...[1]...]]
    # (49 bytes of arguments) held the event loop for seconds.
    schema: dict[str, Any] = {}
    for _ in range(40):
        schema = {"contains": schema, "unevaluatedItems": False}
    with pytest.raises(SchemaRejectedError, match="max_schema_work"):
        JsonSchemaArgumentValidator().check_schema(schema)


def _counted_contains(levels: int, bound: str) -> dict[str, Any]:
    schema: dict[str, Any] = {}
    for _ in range(levels):
        schema = {"contains": schema, bound: 1, "unevaluatedItems": False}
    return schema


@pytest.mark.parametrize("bound", ["minContains", "maxContains"])
def test_nested_counted_contains_beside_unevaluated_items_is_refused_before_compiling(
    bound: str,
) -> None:
    # The attack: the engine's compile grows ~4x per level of this shape (13 levels,
    # 810 bytes: 6 s at admission, where the analysis priced it at 5). Refused from
    # 5 levels on, by the analysis, before the engine compiles anything.
    validator = JsonSchemaArgumentValidator()
    with pytest.raises(SchemaRejectedError, match="nested more than 4 levels"):
        validator.check_schema({"type": "object", "properties": {"v": _counted_contains(5, bound)}})
    validator.check_schema(_counted_contains(4, bound))
    # Inside allOf it is the same nesting.
    wrapped: dict[str, Any] = {}
    for _ in range(5):
        wrapped = {
            "allOf": [{"contains": wrapped, bound: 1}],
            "unevaluatedItems": False,
            "contains": {},
            bound: 1,
        }
    with pytest.raises(SchemaRejectedError, match="nested more than 4 levels"):
        validator.check_schema(wrapped)


def test_counted_contains_chained_through_references_is_admitted() -> None:
    # The engine compiles a referenced schema once: a chain of references does
    # not grow the compile, and its validation is priced level by level.
    table: dict[str, Any] = {
        f"l{i}": {
            "contains": {"$ref": f"#/$defs/l{i + 1}"},
            "minContains": 1,
            "unevaluatedItems": False,
        }
        for i in range(8)
    }
    table["l8"] = {}
    validator = JsonSchemaArgumentValidator()
    result = validator.validate({"$defs": table, "$ref": "#/$defs/l0"}, _array_chain(8))
    assert result.ok


@pytest.mark.parametrize("base", [2**63, -(2**63), 2**62])
def test_unique_items_over_large_integers_is_linear(base: int) -> None:
    # The attack: jsonschema-rs compares integers of 2**62 and more pairwise
    # (9,000 items from 2**63: 13 s of one call). Prism checks uniqueItems itself
    # with a set; 3,000 items (about 1.5 s in the engine) take milliseconds. The
    # bound is the thread's CPU time, twenty times what the check takes traced.
    schema = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
    validator = JsonSchemaArgumentValidator()
    validator.check_schema(schema)
    items = [base + i for i in range(3_000)]
    start = time.thread_time()
    assert validator.validate(schema, items).ok
    assert not validator.validate(schema, [*items, base]).ok
    assert time.thread_time() - start < 0.5


@pytest.mark.parametrize(
    ("keyword", "items"),
    [
        # The attacks: 16 floats over 100,000 items took 8.4 s; const 0.5 and
        # multipleOf 0.5 hundreds of ms (const 0.5 against 1e-300: 10 us a
        # check, against 0.25 under 1 us); multipleOf 5e-324 on 1.797e308 12 s.
        ({"enum": [i + 0.5 for i in range(16)]}, [0.25] * 20_000),
        ({"enum": [2**63 + i for i in range(16)]}, [2**64 - 1] * 20_000),
        ({"const": 0.5}, [1e-300] * 5_000),
        ({"const": 2**63}, [2**64 - 1] * 5_000),
        ({"multipleOf": 0.5}, [1.797e308] * 500),
        ({"multipleOf": 5e-324}, [1.797e308] * 500),
        ({"multipleOf": 2**64 - 1}, [1.797e308] * 500),
    ],
    ids=[
        "enum of floats",
        "enum past 2**63",
        "const float",
        "const 2**63",
        "multipleOf 0.5",
        "multipleOf 5e-324",
        "multipleOf past 2**63",
    ],
)
def test_numbers_the_engine_compares_slowly_are_priced_by_kind(
    keyword: dict[str, Any], items: list[object]
) -> None:
    # Priced at what the engine's slow path was measured to cost (a unit is
    # 28 ns): these calls are refused before the engine runs.
    schema = {"type": "array", "items": keyword}
    result = JsonSchemaArgumentValidator().validate(schema, items)
    assert not result.ok
    assert "max_validation_work" in result.errors[0].message


def test_integers_in_enum_and_multiple_of_stay_cheap() -> None:
    validator = JsonSchemaArgumentValidator()
    assert validator.validate({"items": {"multipleOf": 3}}, [3] * 100_000).ok
    assert validator.validate({"items": {"enum": ["a", "b", "c"]}}, ["a"] * 100_000).ok
    assert validator.validate({"items": {"const": "a"}}, ["a"] * 100_000).ok


def _dynamic_candidates(anchors: int, refs: int, *, recursive: bool) -> dict[str, Any]:
    # Every reference may land on every anchor; a $ref cycle through properties
    # keeps the per-level measure from settling early.
    if recursive:
        defs: dict[str, Any] = {f"r{i}": {"$recursiveAnchor": True} for i in range(anchors)}
        defs |= {f"q{j}": {"$recursiveRef": "#"} for j in range(refs)}
    else:
        defs = {f"r{i}": {"$id": f"urn:r:{i}", "$dynamicAnchor": "n"} for i in range(anchors)}
        defs |= {f"q{j}": {"$dynamicRef": "#n"} for j in range(refs)}
    for i in range(5):
        defs[f"c{i}"] = {"properties": {"a": {"$ref": f"#/$defs/c{(i + 1) % 5}"}}} | {
            f"x{w}": 1 for w in range(i)
        }
    schema: dict[str, Any] = {"$defs": defs, "$ref": "#/$defs/c0"}
    if recursive:
        schema |= {
            "$schema": "https://json-schema.org/draft/2019-09/schema",
            "$recursiveAnchor": True,
        }
    else:
        schema["$dynamicAnchor"] = "n"
    return schema


@pytest.mark.parametrize("recursive", [False, True], ids=["$dynamicRef", "$recursiveRef"])
def test_dynamic_reference_candidates_are_bounded_at_admission(recursive: bool) -> None:
    # The attack: 2,300 anchors x 120 references (128 kB) took 4.3 s to admit,
    # 3,000 x 120 in 2019-09 22 s: every level took the largest candidate of
    # every reference. Past 10,000 candidate edges in all, refused by name;
    # below it, one largest candidate per shared group per level.
    validator = JsonSchemaArgumentValidator()
    with pytest.raises(SchemaRejectedError, match="more than 10,000 candidate targets"):
        validator.check_schema(_dynamic_candidates(101, 100, recursive=recursive))
    within = _dynamic_candidates(80, 120, recursive=recursive)
    validator.check_schema(within)
    assert validator.validate(within, {"a": {"a": {"a": 1}}}).ok


@pytest.mark.parametrize("schema", [{"not": {}}, {"type": "array"}, {"maxProperties": 0}])
def test_the_engine_never_writes_the_refused_value_into_its_message(schema: dict[str, Any]) -> None:
    # The attack: refusing a big value at its root cost 5-10x accepting it, the
    # engine writing the whole value into a message Prism never reads (8 MB:
    # 60 ms, 0.5 ms masked). Prism's words come from the rule and the path.
    value = {f"k{i}": "secret-" + "x" * 10_000 for i in range(8)}
    engine = compile_rs(schema, "draft2020", assert_formats=False)
    with pytest.raises(jsonschema_rs.ValidationError) as caught:
        engine.validate(value)
    assert "secret-" not in str(caught.value)
    assert len(str(caught.value)) < 1_000
    result = JsonSchemaArgumentValidator().validate(schema, value)
    assert not result.ok
    assert "secret-" not in result.errors[0].message


def test_naming_the_first_problem_keeps_no_object_per_member() -> None:
    # A 25,000-record output refused past max_instance_properties: the walk that
    # names the path kept a tuple per member alive (tens of thousands at once),
    # which made the interpreter run its collections, one of them over the whole
    # heap (120-160 ms holding the interpreter's lock, from a worker thread).
    import gc

    from prism.validation.jsonschema._instance import first_problem
    from prism.validation.jsonschema._limits import SchemaLimits

    value = {"items": [{"a": n, "b": "xx"} for n in range(25_000)]}
    started: list[int] = []

    def collected(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(info["generation"])

    gc.collect()
    gc.callbacks.append(collected)
    try:
        problem = first_problem(value, SchemaLimits())
    finally:
        gc.callbacks.remove(collected)
    assert problem == (
        "data.items[20000]",
        "has more object members than max_instance_properties=10000",
    )
    assert len(started) <= 2, started
