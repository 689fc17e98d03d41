"""Two ``$id``s the engine would merge (the same URI written differently) refuse the schema.

jsonschema-rs normalises URIs before it files a resource (case, percent-escapes,
dot segments, default ports) and a later resource replaces an earlier one. Prism's
analysis measured each spelling as its own resource, so a reference resolved
into a resource it never measured: wrong answers, and budgets that did not hold.
"""

from __future__ import annotations

from typing import Any

import pytest

from prism.validation.jsonschema import JsonSchemaArgumentValidator, SchemaRejectedError
from prism.validation.jsonschema._uri import uri_key

D4 = "http://json-schema.org/draft-04/schema#"
D6 = "http://json-schema.org/draft-06/schema#"
D7 = "http://json-schema.org/draft-07/schema#"
D2019 = "https://json-schema.org/draft/2019-09/schema"
D2020 = "https://json-schema.org/draft/2020-12/schema"
ALL = [D4, D6, D7, D2019, D2020]

ALIASES = [
    ("http://a/b", "HTTP://A/b"),
    ("http://a/b", "http://a:80/b"),
    ("http://a/b", "http://a/%62"),
    ("http://a/b", "http://a/./b"),
    ("http://a/b", "http://a/c/../b"),
    ("https://a/b", "https://a:443/b"),
    ("https://a/b", "https://a:0443/b"),
    ("http://a/b", "http://a:/b"),
    ("ws://a/b", "ws://a:80/b"),
    ("http://[::1]/b", "http://[0:0:0:0:0:0:0:1]/b"),
    ("http://[::ffff:1.2.3.4]/b", "http://[::ffff:102:304]/b"),
    ("http://a/~b", "http://a/%7Eb"),
    ("http://a/b", "http://%61/b"),
    ("urn:x:y", "URN:x:y"),
]


def _keys(dialect: str) -> tuple[str, str]:
    defs = "$defs" if dialect in (D2019, D2020) else "definitions"
    return defs, "id" if dialect == D4 else "$id"


def _pair(dialect: str, first: str, second: str) -> dict[str, Any]:
    # The shape of the report's reproducer: r1's reference means its own "t"
    # (an integer); the engine filed r2 under the same URI and answered with
    # r2's "t" (a string).
    defs, ident = _keys(dialect)
    return {
        "$schema": dialect,
        defs: {
            "r1": {
                ident: first,
                defs: {"t": {"type": "integer"}},
                "allOf": [{"$ref": f"#/{defs}/t"}],
            },
            "r2": {ident: second, defs: {"t": {"type": "string"}}},
        },
        "properties": {"p": {"$ref": f"#/{defs}/r1"}},
    }


@pytest.mark.parametrize("dialect", ALL)
@pytest.mark.parametrize(("first", "second"), ALIASES)
def test_the_same_uri_spelled_twice_refuses_the_schema(
    dialect: str, first: str, second: str
) -> None:
    validator = JsonSchemaArgumentValidator()
    schema = _pair(dialect, first, second)
    with pytest.raises(SchemaRejectedError, match="declared twice"):
        validator.check_schema(schema)
    for value in ({"p": 1}, {"p": "s"}):
        result = validator.validate(schema, value)
        assert not result.ok
        assert result.errors[0].message.startswith("schema rejected")


@pytest.mark.parametrize("dialect", ALL)
def test_distinct_uris_are_still_separate_resources(dialect: str) -> None:
    validator = JsonSchemaArgumentValidator()
    schema = _pair(dialect, "http://a/b", "http://a/c")
    assert validator.validate(schema, {"p": 1}).ok
    assert not validator.validate(schema, {"p": "s"}).ok


@pytest.mark.parametrize("dialect", [D7, D2020])
def test_an_aliased_fan_out_is_measured_or_refused(dialect: str) -> None:
    # r1's "t" is empty, the aliased r2's "t" references 2**12 leaves: the
    # engine met the fan-out the analysis never measured, per array item.
    defs, _ = _keys(dialect)
    chain: dict[str, Any] = {
        f"l{i}": {"allOf": [{"$ref": f"#/{defs}/l{i + 1}"}, {"$ref": f"#/{defs}/l{i + 1}"}]}
        for i in range(12)
    }
    chain["l12"] = {"type": "integer"}
    chain["t"] = {"$ref": f"#/{defs}/l0"}
    schema = {
        "$schema": dialect,
        defs: {
            "r1": {"$id": "http://a/b", defs: {"t": {}}, "allOf": [{"$ref": f"#/{defs}/t"}]},
            "r2": {"$id": "HTTP://A/b", defs: chain},
        },
        "type": "array",
        "items": {"$ref": f"#/{defs}/r1"},
    }
    with pytest.raises(SchemaRejectedError, match="declared twice"):
        JsonSchemaArgumentValidator().check_schema(schema)


@pytest.mark.parametrize("dialect", [D7, D2020])
@pytest.mark.parametrize("alias", ["json-schema:///", "JSON-SCHEMA:///", "json-schema:///./"])
def test_an_id_naming_the_documents_implicit_base_is_refused(dialect: str, alias: str) -> None:
    # A document without an $id is filed under json-schema:/// by the engine.
    defs, _ = _keys(dialect)
    schema = {"$schema": dialect, defs: {"a": {"$id": alias, "type": "string"}}}
    with pytest.raises(SchemaRejectedError, match="declared twice"):
        JsonSchemaArgumentValidator().check_schema(schema)


@pytest.mark.parametrize("dialect", [D7, D2020])
@pytest.mark.parametrize(
    "meta",
    [
        "http://json-schema.org/draft-07/schema",
        "HTTP://JSON-SCHEMA.ORG/draft-07/schema#",
        "https://json-schema.org/draft/2020-12/meta/core",
        "https://json-schema.org:443/draft/2020-12/schema",
    ],
)
def test_an_id_under_json_schema_org_is_refused(dialect: str, meta: str) -> None:
    defs, _ = _keys(dialect)
    schema = {
        "$schema": dialect,
        defs: {"a": {"$id": meta, defs: {"x": {"type": "string"}}}},
        "properties": {"p": {"$ref": f"#/{defs}/a"}},
    }
    with pytest.raises(SchemaRejectedError, match=r"json-schema\.org"):
        JsonSchemaArgumentValidator().check_schema(schema)


def test_an_aliased_id_hidden_in_data_is_refused() -> None:
    # An $id inside "examples" spelled like a real resource's.
    schema = {
        "$defs": {"r": {"$id": "http://a/b", "type": "integer"}},
        "examples": [{"$id": "HTTP://A:80/b"}],
        "properties": {"p": {"$ref": "#/$defs/r"}},
    }
    with pytest.raises(SchemaRejectedError, match="declared inside data"):
        JsonSchemaArgumentValidator().check_schema(schema)


@pytest.mark.parametrize(("first", "second"), ALIASES)
def test_uri_keys_meet_for_every_alias(first: str, second: str) -> None:
    assert uri_key(first) == uri_key(second)


@pytest.mark.parametrize(
    ("uri", "key"),
    [
        ("http://A:80", "http://a/"),
        ("http://a/b/../../../c", "http://a/c"),
        ("http://a/b/.", "http://a/b/"),
        ("http://a/b#", "http://a/b"),
        ("http://a/%2541", "http://a/a"),
        ("b", "json-schema:///b"),
        ("../b", "json-schema:///b"),
        ("urn:X:y/./z", "urn:x:y/z"),
        ("http://a:08080/b", "http://a:8080/b"),
        ("http://[::1]:80/b", "http://[::1]/b"),
        ("http://u@[0::1]:0/b", "http://u@[::1]:0/b"),
        ("http://[zz]/b", "http://[zz]/b"),
    ],
)
def test_uri_key_normal_forms(uri: str, key: str) -> None:
    assert uri_key(uri) == key


def test_relative_references_resolve_against_the_base() -> None:
    assert uri_key("c/d", "http://a/b/x") == "http://a/b/c/d"
    assert uri_key("/c", "http://a/b/x") == "http://a/c"
    assert uri_key("//h/c", "http://a/b") == "http://h/c"
    assert uri_key("c", "urn:x:y") == "urn:c"


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("$dynamicAnchor", "$anchor"),
        ("$anchor", "$dynamicAnchor"),
        ("$dynamicAnchor", "$dynamicAnchor"),
    ],
)
def test_one_anchor_name_declared_twice_of_any_kind_is_refused(first: str, second: str) -> None:
    # Admitted before: "$ref": "#n" then picked another schema than the
    # reference implementation (Prism accepted 1 where it must be refused).
    schema = {
        "$defs": {"a": {first: "n", "type": "string"}, "b": {second: "n", "type": "integer"}},
        "$ref": "#n",
    }
    with pytest.raises(SchemaRejectedError, match="declared twice"):
        JsonSchemaArgumentValidator().check_schema(schema)
    # The same name in two resources is two anchors; both kinds on one schema is one.
    apart = {
        "$defs": {"a": {"$id": "urn:a", first: "n"}, "b": {second: "n", "type": "string"}},
        "$ref": "#n",
    }
    assert not JsonSchemaArgumentValidator().validate(apart, 1).ok
    assert JsonSchemaArgumentValidator().validate(apart, "x").ok
    both = {"$defs": {"a": {"$anchor": "n", "$dynamicAnchor": "n", "type": "string"}}, "$ref": "#n"}
    assert not JsonSchemaArgumentValidator().validate(both, 1).ok
