"""Prism's verdicts against the reference implementation, python-jsonschema.

Where Prism's analysis predicts what jsonschema-rs will do (which schema an
anchor names, what a keyword means in a draft), a wrong prediction shows up as
a verdict the reference does not give. For every case here Prism either refuses
the schema (with a reason) or answers every instance as the reference does.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from fractions import Fraction
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs; only is_valid is used
import pytest

from prism.validation.jsonschema import JsonSchemaArgumentValidator, SchemaRejectedError

D4 = "http://json-schema.org/draft-04/schema#"
D6 = "http://json-schema.org/draft-06/schema#"
D7 = "http://json-schema.org/draft-07/schema#"
D2019 = "https://json-schema.org/draft/2019-09/schema"
D2020 = "https://json-schema.org/draft/2020-12/schema"

_NOT: dict[str, Any] = {"not": {}}


def _reference(schema: dict[str, Any], instance: object) -> bool:
    cls = jsonschema.validators.validator_for(schema)
    return bool(cls(schema).is_valid(instance))


def _id(draft: str) -> str:
    return "id" if draft == D4 else "$id"


def _beside_ref(draft: str, order: str) -> dict[str, Any]:
    # "#foo" names definitions.a; the other "#foo" sits beside $ref, where the
    # draft ignores it (jsonschema-rs indexed it, and the last one won).
    key = _id(draft)
    ignored = {key: "#foo", "$ref": "#/definitions/c"}
    if order == "ref first":
        ignored = {"$ref": "#/definitions/c", key: "#foo"}
    definitions = {"a": {key: "#foo"}, "b": ignored, "c": _NOT}
    if order == "ignored first":
        definitions = {"b": ignored, "a": {key: "#foo"}, "c": _NOT}
    return {"$schema": draft, "definitions": definitions, "allOf": [{"$ref": "#foo"}]}


_CASES: dict[str, dict[str, Any]] = {
    **{
        f"{draft.split('/')[-2]} plain-name id beside $ref ({order})": _beside_ref(draft, order)
        for draft in (D4, D6, D7)
        for order in ("ignored last", "ignored first", "ref first")
    },
    "draft-07 absolute id with a fragment beside $ref": {
        "$schema": D7,
        "definitions": {
            "a": {"$id": "#foo"},
            "b": {"$id": "json-schema:///#foo", "$ref": "#/definitions/c"},
            "c": _NOT,
        },
        "allOf": [{"$ref": "#foo"}],
    },
    "draft-07 items through an anchor": {
        "$schema": D7,
        "items": {"$ref": "#foo"},
        "definitions": {
            "cheap": {"$id": "#foo"},
            "costly": {"$id": "#foo", "$ref": "#/definitions/l"},
            "l": {"type": "integer"},
        },
    },
    "draft-07 uri id beside $ref keeps the outer base": {
        "$schema": D7,
        "definitions": {"a": {"type": "integer"}},
        "allOf": [
            {
                "$id": "http://x.test/s",
                "$ref": "#/definitions/a",
                "definitions": {"a": {"type": "string"}},
            }
        ],
    },
    "draft-04 uri id beside $ref keeps the outer base": {
        "$schema": D4,
        "definitions": {"a": {"type": "integer"}},
        "allOf": [
            {
                "id": "http://x.test/s",
                "$ref": "#/definitions/a",
                "definitions": {"a": {"type": "string"}},
            }
        ],
    },
    "draft-07 one plain-name id": {
        "$schema": D7,
        "definitions": {"a": {"$id": "#foo", "type": "integer"}},
        "allOf": [{"$ref": "#foo"}],
    },
    "draft-07 the same name in two resources": {
        "$schema": D7,
        "definitions": {
            "a": {"$id": "#foo", "type": "integer"},
            "r": {
                "$id": "http://x.test/r",
                "definitions": {"b": {"$id": "#foo", "type": "string"}},
            },
        },
        "allOf": [{"$ref": "#foo"}],
    },
    "2020-12 anchor": {
        "$schema": D2020,
        "$defs": {"a": {"$anchor": "foo", "type": "integer"}},
        "$ref": "#foo",
    },
    "2019-09 anchor beside $ref applies both": {
        "$schema": D2019,
        "$defs": {
            "a": {"$anchor": "foo", "$ref": "#/$defs/b", "minimum": 2},
            "b": {"type": "integer"},
        },
        "$ref": "#foo",
    },
}
_INSTANCES: list[object] = [1, 5, "x", ["x"], [1, 2], {}, None]


@pytest.mark.parametrize("name", sorted(_CASES))
def test_every_verdict_is_the_reference_verdict_or_a_refusal(name: str) -> None:
    schema = _CASES[name]
    validator = JsonSchemaArgumentValidator()
    try:
        validator.check_schema(schema)
    except SchemaRejectedError:
        return
    for instance in _INSTANCES:
        expected = _reference(schema, instance)
        assert validator.validate(schema, instance).ok is expected, (name, instance, expected)


@pytest.mark.parametrize("draft", [D4, D6, D7])
def test_a_plain_name_id_beside_ref_is_refused(draft: str) -> None:
    # The attack: Prism followed definitions.a, the engine the ignored "#foo"
    # beside $ref (a 2**12 fan-out priced as one schema; ["x"] refused where the
    # reference accepts it).
    with pytest.raises(SchemaRejectedError, match="beside \\$ref declares the anchor 'foo'"):
        JsonSchemaArgumentValidator().check_schema(_beside_ref(draft, "ignored last"))


_UNIQUE_CASES: list[list[Any]] = [
    [1, 1.0],
    [1, True],
    [0, False],
    [0, -0.0],
    [None, False],
    [[1], [1.0]],
    [[1, 2], [2, 1]],
    [{"a": 1}, {"a": 1.0}],
    [{"a": 1, "b": [2]}, {"b": [2.0], "a": 1}],
    [{"a": 1}, {"a": 1, "b": 2}],
    ["1", 1],
    [2**63, float(2**63)],
    [2**63 + 1, float(2**63)],
    [2**64 - 1, 2**64 - 2],
    [-(2**63), float(-(2**63))],
    [0.1 + 0.2, 0.3],
    [[[]], [[]]],
    [{}, []],
]


@pytest.mark.parametrize("draft", [D4, D2020])
@pytest.mark.parametrize("items", _UNIQUE_CASES, ids=repr)
def test_unique_items_verdicts_are_the_references(draft: str, items: list[Any]) -> None:
    # uniqueItems is Prism's own check (the engine's is quadratic on large integers).
    schema = {"$schema": draft, "uniqueItems": True}
    validator = JsonSchemaArgumentValidator()
    for instance in (items, [*items, "other"], {"not": "an array"}):
        expected = _reference(schema, instance)
        assert validator.validate(schema, instance).ok is expected, (instance, expected)
    nested = {"$schema": draft, "not": {"items": {"uniqueItems": True}}}
    expected = _reference(nested, [items])
    assert validator.validate(nested, [items]).ok is expected


def test_unique_items_false_beside_true_checks_only_where_true() -> None:
    schema = {"uniqueItems": False, "items": {"uniqueItems": True}}
    validator = JsonSchemaArgumentValidator()
    for instance in ([[1], [1]], [[1, 1]], [[1, 2], [1, 2]]):
        assert validator.validate(schema, instance).ok is _reference(schema, instance)


# ECMA-262 verdicts (RegExp with the u flag, as node answers them): \b and \B
# look at ASCII word characters only, and [\b] is a backspace.
_ECMA_VERDICTS: list[tuple[str, str, bool]] = [
    (r"a\b", "aé", True),
    (r"\bé", "é", False),
    (r"\Bé", "é", True),
    (r"\B\w*$", "中中", True),
    (r"^\b\w+\b$", "ab", True),
    (r"\b\w+\b$", "😀😀", False),
    (r"é\b", "é", False),
    (r"\bx\b", "éxé", True),
    (r"\Bx\B", "éxé", False),
    (r"\bx", "_x", False),
    (r"\Bx", "_x", True),
    (r"[\b]", "\b", True),
    (r"[\b]", "b", False),
    (r"^[\b]$", "\b", True),
    (r"\\b", "\\b", True),
    (r"\\\b", "\\b", True),
    (r"\\\bé", "\\é", False),
    (r"[a\]\b]x\b", "]x", True),
    (r"\b", "", False),
    (r"\B", "", True),
    (r"^\B$", "", True),
    (r"Straße\b", "Straße", True),
    (r"\bß", "ß", False),
    (r"(?:a|\b)é", "é", False),
    (r"[^\b]\b", "é", False),
]


@pytest.mark.parametrize(("pattern", "text", "ecma"), _ECMA_VERDICTS)
def test_word_boundaries_answer_as_ecma_262(pattern: str, text: str, ecma: bool) -> None:
    # jsonschema-rs read \b and \B as Unicode boundaries: "a\b" refused "aé"
    # (ECMA accepts it) and "\Bé" accepted "é"; [\b] was refused as a schema.
    for schema in (
        {"type": "string", "pattern": pattern},
        {"type": "object", "patternProperties": {pattern: {"const": 1}}},
    ):
        instance: object = text if "pattern" in schema else {text: 2}
        result = JsonSchemaArgumentValidator().validate(schema, instance)
        assert result.ok is (not ecma if "patternProperties" in schema else ecma), schema


def test_the_ecma_table_is_what_node_answers() -> None:
    # The table above, checked against a real ECMA-262 engine when one is here
    # (scripts/_bootstrap.sh installs node for the CI).
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = (
        "const c = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "console.log(JSON.stringify(c.map(([p, s]) => new RegExp(p, 'u').test(s))));"
    )
    cases = [[pattern, text] for pattern, text, _ in _ECMA_VERDICTS]
    answer = subprocess.run(
        [node, "-e", script], input=json.dumps(cases), capture_output=True, text=True, check=True
    )
    assert json.loads(answer.stdout) == [ecma for _, _, ecma in _ECMA_VERDICTS]


def test_a_refusal_quotes_the_pattern_as_written() -> None:
    result = JsonSchemaArgumentValidator().validate({"pattern": r"^x\b"}, "xa")
    assert result.errors[0].message == "must match pattern ^x\\b (rule: pattern)"


@pytest.mark.parametrize("pattern", [r"^a{,2}$", r"x{,10}"])
def test_an_open_minimum_is_refused_with_its_reason(pattern: str) -> None:
    with pytest.raises(SchemaRejectedError, match=r"x\{,n\} is not a quantifier in ECMA-262"):
        JsonSchemaArgumentValidator().check_schema({"pattern": pattern})


def _exact_multiple(value: float, divisor: float) -> bool:
    # The numbers as JSON writes them (shortest round-trip text), divided exactly.
    return (Fraction(repr(value)) / Fraction(repr(divisor))).denominator == 1


@pytest.mark.parametrize(
    ("value", "divisor"),
    [
        (0.07, 0.01),
        (1.797e308, 1e-300),
        (0.3, 0.1),
        (1e-5, 1e-6),
        (19.99, 0.01),
        (1e308, 1e-308),
        (0.1, 0.3),
        (0.1 + 0.2, 0.1),
        (0.071, 0.01),
        (4.5, 1.5),
        (2**63 + 2, 2),
        (9007199254740993, 3),
    ],
)
def test_multiple_of_is_decided_on_the_numbers_as_written(value: float, divisor: float) -> None:
    # Documented: Prism (jsonschema-rs) divides the decimal numbers exactly, so
    # 0.07 is a multiple of 0.01; python-jsonschema divides binary floats and
    # says it is not. The exact quotient is the reference here.
    result = JsonSchemaArgumentValidator().validate({"multipleOf": divisor}, value)
    assert result.ok is _exact_multiple(value, divisor)


def test_multiple_of_cents_agrees_with_exact_division() -> None:
    validator = JsonSchemaArgumentValidator()
    for divisor in (0.01, 0.05, 0.25, 0.1):
        schema = {"type": "array", "items": {"multipleOf": divisor}}
        for cents in range(0, 300, 7):
            value = cents / 100
            result = validator.validate(schema, [value])
            assert result.ok is _exact_multiple(value, divisor), (value, divisor)
