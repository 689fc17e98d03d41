import inspect

import prism.cli

DOCUMENTED = {
    "AgentConfig",
    "CliError",
    "CommandRulesConfig",
    "CliConfigurationError",
    "McpServerConfig",
    "PermissionsConfig",
    "PrismConfig",
    "ScriptedSession",
    "ServeAuthConfig",
    "ServeConfig",
    "SessionFormatError",
    "ValidationConfig",
    "WorkspaceConfig",
    "load_config",
    "load_session",
    "main",
    "parse_config",
    "parse_session",
}


def test_all_matches_documented_names() -> None:
    assert set(prism.cli.__all__) == DOCUMENTED
    assert prism.cli.__all__ == sorted(prism.cli.__all__)


def test_every_export_exists_and_has_a_docstring() -> None:
    for name in prism.cli.__all__:
        obj = getattr(prism.cli, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"{name} has no docstring"


def test_errors_derive_from_prism_error() -> None:
    from prism.core import PrismError

    assert issubclass(prism.cli.CliError, PrismError)
    assert issubclass(prism.cli.CliConfigurationError, ValueError)
    assert issubclass(prism.cli.SessionFormatError, prism.cli.CliError)


def test_namespace_package_has_no_init() -> None:
    import prism

    assert getattr(prism, "__file__", None) is None


def test_package_docstring_example_runs() -> None:
    doc = prism.cli.__doc__ or ""
    code = doc.split("::\n\n")[-1]
    source = "\n".join(line[4:] for line in code.splitlines())
    exec(compile(source, "<prism.cli docstring>", "exec"), {})


def test_the_configuration_error_follows_the_package_pattern() -> None:
    # Renamed from ConfigError (nothing was published): <Package>ConfigurationError.
    assert not hasattr(prism.cli, "ConfigError")
    assert issubclass(prism.cli.CliConfigurationError, prism.cli.CliError)
