"""prism.core.options: the shared option checks raise one error, naming option and value."""

from __future__ import annotations

import math

import attrs
import pytest

import prism.core.options
from prism.core import ConfigurationError, PrismError
from prism.core.options import (
    OptionCheck,
    boolean,
    callable_value,
    has_method,
    instance_of,
    integer,
    number,
    one_of,
    optional,
    sequence_of,
    string,
)


@attrs.frozen(kw_only=True)
class _Options:
    attempts: int = attrs.field(default=3, validator=integer(minimum=1))
    label: str | None = attrs.field(default=None, validator=optional(string()))


def test_attrs_field_names_the_class_the_option_and_the_value() -> None:
    with pytest.raises(ConfigurationError) as caught:
        _Options(attempts=0)
    assert str(caught.value) == "_Options.attempts must be an integer >= 1, got 0"
    assert caught.value.option == "_Options.attempts"
    assert caught.value.value == 0
    assert caught.value.has_value
    assert isinstance(caught.value, (PrismError, ValueError))


def test_bounds_are_written_as_people_write_them() -> None:
    # A large integer bound whole (not 6.71089e+07); a float one as short as it goes.
    assert integer(minimum=1024, maximum=64 * 1024 * 1024).description == (
        "an integer >= 1024 and <= 67108864"
    )
    assert number(minimum=0.1, maximum=7 * 24 * 3600.0).description == (
        "a finite number >= 0.1 and <= 604800"
    )


def test_plain_argument_check_returns_the_value() -> None:
    assert string().check("create_thing", "name", "x") == "x"
    with pytest.raises(
        ConfigurationError, match=r"^create_thing\.name must be a non-empty string, got ''$"
    ):
        string().check("create_thing", "name", "")


def test_a_message_shows_a_long_value_shortened() -> None:
    with pytest.raises(ConfigurationError) as caught:
        integer().check("f", "n", "x" * 10_000)
    assert len(str(caught.value)) < 200
    assert caught.value.value == "x" * 10_000


def test_error_without_option_keeps_old_shape() -> None:
    error = ConfigurationError("bad")
    assert error.option is None
    assert not error.has_value
    assert error.value is None


@pytest.mark.parametrize(
    ("check", "good", "bad"),
    [
        (integer(minimum=1), [1, 2**40], [0, -1, True, 1.0, "1", None]),
        (integer(minimum=0, maximum=3), [0, 3], [4, -1]),
        (number(minimum=0, above=True), [0.5, 1, 1e9], [0, -1.0, math.inf, math.nan, False, "1"]),
        (number(minimum=0), [0, 0.0, 2], [-0.1, math.nan]),
        (boolean(), [True, False], [0, 1, None, "yes"]),
        (string(), ["a"], ["", b"a", None, 1]),
        (string(non_empty=False), ["", "a"], [None, b""]),
        (instance_of(int, str), [1, "a"], [1.0, None]),
        (callable_value(), [len, lambda: None], [1, None]),
        (
            has_method("check"),
            [attrs.make_class("C", {"check": attrs.field(default=len)})()],
            [object()],
        ),
        (one_of("none", "host"), ["none", "host"], ["None", 1, None]),
        (one_of(1, 2), [1, 2], [True, 1.0]),
        (optional(integer(minimum=1)), [None, 1], [0]),
        (sequence_of(string()), [[], ("a",), ["a", "b"]], ["ab", b"ab", ["a", ""], {"a"}, None]),
        (sequence_of(string(), non_empty=True), [["a"]], [[]]),
        (integer(minimum=5) | one_of("auto"), [5, "auto"], [4, "x"]),
    ],
)
def test_checks_accept_and_refuse(
    check: OptionCheck, good: list[object], bad: list[object]
) -> None:
    for value in good:
        assert check.check("owner", "option", value) is value
    for value in bad:
        with pytest.raises(ConfigurationError) as caught:
            check.check("owner", "option", value)
        assert str(caught.value).startswith(f"owner.option must be {check.description}, got ")
        assert caught.value.option == "owner.option"


def test_descriptions_read_as_english() -> None:
    assert integer(minimum=1).description == "an integer >= 1"
    assert integer().description == "an integer"
    assert number(minimum=0, above=True).description == "a finite number > 0"
    assert instance_of(int).description == "an int"
    assert optional(boolean()).description == "a bool or None"
    assert sequence_of(string()).description == "a sequence whose items are each a non-empty string"


def test_instance_of_needs_a_type() -> None:
    with pytest.raises(ConfigurationError):
        instance_of()


def test_options_module_exports_documented_names_with_docstrings() -> None:
    assert prism.core.options.__all__ == sorted(prism.core.options.__all__)
    for name in prism.core.options.__all__:
        assert getattr(prism.core.options, name).__doc__, name
