import inspect

import prism.gateway

DOCUMENTED = {
    "CODING_TOOL_HINTS",
    "BearerAuth",
    "DownstreamServer",
    "Gateway",
    "GatewayApprover",
    "GatewayConfigurationError",
    "GatewayError",
    "HttpOptions",
    "OAuthResourceServer",
    "ToolHints",
    "build_http_app",
    "create_command_approver",
    "create_gateway_approver",
    "open_gateway",
    "serve_http",
    "serve_stdio",
}


def test_all_matches_documented_names() -> None:
    assert set(prism.gateway.__all__) == DOCUMENTED
    assert prism.gateway.__all__ == sorted(
        prism.gateway.__all__, key=lambda n: (not n.isupper(), n)
    )


def test_every_export_exists() -> None:
    for name in prism.gateway.__all__:
        assert hasattr(prism.gateway, name), name


def test_every_class_and_function_export_has_a_docstring() -> None:
    for name in prism.gateway.__all__:
        obj = getattr(prism.gateway, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"{name} has no docstring"


def test_package_docstring_has_an_example() -> None:
    assert prism.gateway.__doc__ is not None
    assert "open_gateway" in prism.gateway.__doc__
    assert "serve_http" in prism.gateway.__doc__


def test_gateway_errors_are_prism_errors() -> None:
    from prism.core import PrismError

    assert issubclass(prism.gateway.GatewayError, PrismError)
    assert issubclass(prism.gateway.GatewayConfigurationError, ValueError)


def test_open_gateway_takes_on_event_not_events() -> None:
    # Renamed from events= (nothing was published): the same word as RunOptions.
    parameters = inspect.signature(prism.gateway.open_gateway).parameters
    assert "on_event" in parameters
    assert "events" not in parameters
