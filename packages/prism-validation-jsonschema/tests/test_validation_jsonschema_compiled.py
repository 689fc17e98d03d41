"""JsonSchemaArgumentValidator.compile: one schema screened once, many values checked."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pytest

from prism.validation.jsonschema import (
    CompiledSchema,
    JsonSchemaArgumentValidator,
    SchemaLimits,
    SchemaRejectedError,
)

if TYPE_CHECKING:
    from prism.core import JsonObject

OUTPUT: JsonObject = {
    "type": "object",
    "properties": {
        "temperature": {"type": "number"},
        "conditions": {"type": "string", "pattern": "^[A-Za-z ]+$"},
    },
    "required": ["temperature", "conditions"],
}


def test_a_compiled_schema_gives_the_same_answers_as_validate() -> None:
    validator = JsonSchemaArgumentValidator()
    compiled = validator.compile(OUTPUT)
    assert isinstance(compiled, CompiledSchema)
    for value in (
        {"temperature": 21.5, "conditions": "Partly cloudy"},
        {"temperature": "hot", "conditions": "Sunny"},
        {"temperature": 3},
        {"temperature": 3, "conditions": "rain!"},
        [1, 2],
        None,
    ):
        assert compiled.validate(value) == validator.validate(OUTPUT, value)
    refused = compiled.validate({"temperature": "hot", "conditions": "Sunny"})
    assert not refused.ok
    assert refused.errors[0].path == "data.temperature"


def test_compiling_a_refused_schema_raises_with_the_reason() -> None:
    validator = JsonSchemaArgumentValidator()
    with pytest.raises(SchemaRejectedError) as caught:
        validator.compile({"type": "object", "$ref": "https://example.invalid/schema.json"})
    assert caught.value.reason
    with pytest.raises(SchemaRejectedError):
        validator.compile("not a schema")
    assert validator.cache_info().currsize == 0


def test_changing_the_schema_after_compiling_changes_nothing() -> None:
    schema: JsonObject = {"type": "object", "properties": {"n": {"type": "integer"}}}
    compiled = JsonSchemaArgumentValidator().compile(schema)
    schema["properties"] = {"n": {"type": "string"}}
    assert compiled.validate({"n": 1}).ok
    assert not compiled.validate({"n": "one"}).ok


def test_an_evicted_schema_is_compiled_again_on_its_next_use() -> None:
    validator = JsonSchemaArgumentValidator(cache_size=1)
    numbers = validator.compile({"type": "array", "items": {"type": "number"}})
    strings = validator.compile({"type": "array", "items": {"type": "string"}})  # evicts numbers
    assert validator.cache_info().currsize == 1
    assert numbers.validate([1, 2.5]).ok
    assert not numbers.validate(["a"]).ok
    assert strings.validate(["a"]).ok
    assert not strings.validate([1]).ok
    assert validator.cache_info().currsize == 1


def test_a_compiled_schema_keeps_the_instance_limits() -> None:
    validator = JsonSchemaArgumentValidator(limits=SchemaLimits(max_instance_depth=3))
    compiled = validator.compile({"type": "object"})
    deep: object = 1
    for _ in range(10):
        deep = {"a": deep}
    result = compiled.validate(deep)
    assert not result.ok
    assert "deep" in result.errors[0].message


def test_a_compiled_schema_is_shared_between_threads() -> None:
    compiled = JsonSchemaArgumentValidator(cache_size=1).compile(OUTPUT)
    answers: list[bool] = []

    def check() -> None:
        for index in range(200):
            value = {"temperature": index, "conditions": "Clear"}
            answers.append(compiled.validate(value).ok)

    threads = [threading.Thread(target=check) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [True] * 800


def test_the_repr_names_the_dialect_not_the_schema() -> None:
    compiled = JsonSchemaArgumentValidator().compile(
        {"$schema": "http://json-schema.org/draft-07/schema#", "const": "sk-secret-value"}
    )
    text = repr(compiled)
    assert text.startswith("<CompiledSchema draft7")
    assert "sk-secret" not in text
