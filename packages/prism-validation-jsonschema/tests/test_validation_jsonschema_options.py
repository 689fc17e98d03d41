"""Every option of every public factory and options class is checked the one shared way.

A wrong type or value raises :class:`~prism.core.ConfigurationError` naming the
option (``"<Owner>.<option>"``) and carrying the value, before anything is built.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from prism.core import ConfigurationError
from prism.validation.jsonschema import (
    HARD_CACHE_SIZE,
    HARD_LIMITS,
    JsonSchemaArgumentValidator,
    JsonSchemaToolValidator,
    SchemaLimits,
    create_json_schema_tool_validator,
)

_NOT_A_COUNT = [0, -1, 2.5, 1.0, math.inf, math.nan, "10", True, None]
_NOT_A_CHOICE = ["warn", "", None, 1, True]
_NOT_LIMITS = [{"max_depth": 3}, "default", 1]


def _validator(**options: Any) -> JsonSchemaToolValidator:
    return JsonSchemaToolValidator(JsonSchemaArgumentValidator(), **options)


_FACTORY = "create_json_schema_tool_validator"
_CASES: list[tuple[Any, str, str, object]] = [
    *(
        (SchemaLimits, "SchemaLimits", name, value)
        for name in sorted(HARD_LIMITS)
        for value in [*_NOT_A_COUNT, HARD_LIMITS[name] + 1]
    ),
    *(
        (owner, owner.__name__, "cache_size", value)
        for owner in (JsonSchemaArgumentValidator, create_json_schema_tool_validator)
        for value in [*_NOT_A_COUNT, HARD_CACHE_SIZE + 1]
    ),
    *(
        (owner, owner.__name__, "unsupported_keywords", value)
        for owner in (JsonSchemaArgumentValidator, create_json_schema_tool_validator)
        for value in _NOT_A_CHOICE
    ),
    *(
        (owner, owner.__name__, "assert_formats", value)
        for owner in (JsonSchemaArgumentValidator, create_json_schema_tool_validator)
        for value in [1, 0, "yes", None]
    ),
    *(
        (owner, owner.__name__, "limits", value)
        for owner in (JsonSchemaArgumentValidator, create_json_schema_tool_validator)
        for value in _NOT_LIMITS
    ),
    *((_FACTORY, _FACTORY, "missing_schema", value) for value in _NOT_A_CHOICE),
    *((_validator, "JsonSchemaToolValidator", "missing_schema", v) for v in _NOT_A_CHOICE),
]


@pytest.mark.parametrize(
    ("make", "owner", "option", "value"),
    _CASES,
    ids=[f"{owner}.{option}={value!r}" for _, owner, option, value in _CASES],
)
def test_a_bad_option_raises_naming_the_option_and_the_value(
    make: Any, owner: str, option: str, value: object
) -> None:
    if make == _FACTORY:
        make = create_json_schema_tool_validator
    with pytest.raises(ConfigurationError) as raised:
        make(**{option: value})
    error = raised.value
    assert error.option == f"{owner}.{option}"
    assert error.value is value
    assert str(error).startswith(f"{owner}.{option} must be ")
    assert str(error).endswith(f", got {value!r}")


@pytest.mark.parametrize("validator", [None, "validator", create_json_schema_tool_validator()])
def test_the_tool_validator_needs_an_argument_validator(validator: object) -> None:
    with pytest.raises(ConfigurationError) as raised:
        JsonSchemaToolValidator(validator)  # type: ignore[arg-type]
    assert raised.value.option == "JsonSchemaToolValidator.validator"
    assert raised.value.value is validator


def test_the_largest_values_are_accepted() -> None:
    limits = SchemaLimits(**HARD_LIMITS)
    assert limits.max_depth == HARD_LIMITS["max_depth"]
    check = create_json_schema_tool_validator(
        limits=limits,
        cache_size=HARD_CACHE_SIZE,
        unsupported_keywords="ignore",
        assert_formats=True,
        missing_schema="reject",
    )
    assert check.cache_info().maxsize == HARD_CACHE_SIZE
    assert check.validator.limits is limits
    assert check.validator.unsupported_keywords == "ignore"
