import inspect

import prism.validation.jsonschema as api
from prism.core import PrismError, ToolArgumentValidator

DOCUMENTED = {
    "HARD_CACHE_SIZE",
    "HARD_LIMITS",
    "CacheInfo",
    "CompiledSchema",
    "JsonSchemaArgumentValidator",
    "JsonSchemaToolValidator",
    "SchemaLimits",
    "SchemaRejectedError",
    "create_json_schema_tool_validator",
}


def test_all_matches_documented_names() -> None:
    assert set(api.__all__) == DOCUMENTED
    assert api.__all__ == sorted(api.__all__, key=lambda n: (not n.isupper(), n))


def test_every_export_exists_and_is_documented() -> None:
    for name in api.__all__:
        obj = getattr(api, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"{name} has no docstring"
    assert inspect.getdoc(api)


def test_validator_satisfies_the_core_protocol() -> None:
    assert isinstance(api.JsonSchemaArgumentValidator(), ToolArgumentValidator)


def test_schema_rejected_error_is_a_prism_error_and_a_value_error() -> None:
    error = api.SchemaRejectedError("bad", "#/a")
    assert isinstance(error, PrismError)
    assert isinstance(error, ValueError)
    assert (error.reason, error.path) == ("bad", "#/a")


def test_namespace_packages_have_no_init() -> None:
    import prism
    import prism.validation

    assert getattr(prism, "__file__", None) is None
    assert getattr(prism.validation, "__file__", None) is None


def test_the_docstring_example_runs() -> None:
    source = inspect.getdoc(api) or ""
    example = source.split("Example::", 1)[1]
    code = inspect.cleandoc(example)
    exec(compile(code, "<example>", "exec"), {})


def test_the_public_names_are_exactly_all() -> None:
    # As trio's export test: nothing public slips out of the facade unlisted.
    public = {name for name in vars(api) if not name.startswith("_")}
    assert public == set(api.__all__)


def test_nothing_is_exported_twice() -> None:
    # Every export is defined in this package, not re-exported from prism.core.
    import prism.core

    for name in api.__all__:
        obj = getattr(api, name)
        module = getattr(obj, "__module__", api.__name__)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert module.startswith("prism.validation.jsonschema._"), (name, module)
        assert name not in getattr(prism.core, "__all__", ()), name


def test_the_factory_is_named_for_the_tool_validator_it_returns() -> None:
    # Renamed from create_json_schema_tool_argument_validator (nothing was published).
    assert not hasattr(api, "create_json_schema_tool_argument_validator")
    assert isinstance(api.create_json_schema_tool_validator(), api.JsonSchemaToolValidator)
