import importlib
import inspect
import pkgutil
import types

import prism.mcp

DOCUMENTED = {
    "AUDIO_URI_PREFIX",
    "DEFAULT_ENV_PASSTHROUGH",
    "McpApprovalCallback",
    "McpBridgeError",
    "McpElicitCallback",
    "McpElicitation",
    "McpElicitationAnswer",
    "McpElicitationComplete",
    "McpElicitationCompleteCallback",
    "McpLogCallback",
    "McpLogMessage",
    "McpRootsCallback",
    "McpRootsRequest",
    "McpSampleCallback",
    "McpSamplingAnswer",
    "McpSamplingRequest",
    "McpServerInfo",
    "McpStartedCall",
    "McpToolAnnotations",
    "McpToolBridge",
    "McpToolInfo",
    "McpTransport",
    "StdioTransport",
    "StreamableHttpTransport",
    "create_mcp_permission_policy",
    "mcp_message_refusal",
    "open_mcp_tools",
}


def test_all_matches_documented_names() -> None:
    assert set(prism.mcp.__all__) == DOCUMENTED
    assert prism.mcp.__all__ == sorted(prism.mcp.__all__, key=lambda n: (not n.isupper(), n))


def test_every_export_exists() -> None:
    for name in prism.mcp.__all__:
        assert hasattr(prism.mcp, name), name


def test_every_class_and_function_export_has_a_docstring() -> None:
    for name in prism.mcp.__all__:
        obj = getattr(prism.mcp, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"{name} has no docstring"


def test_bridge_methods_have_docstrings() -> None:
    for name in ("tools", "stale", "server_info", "protocol_version", "refresh", "aclose"):
        assert inspect.getdoc(getattr(prism.mcp.McpToolBridge, name)), name


def test_package_docstring_has_an_example() -> None:
    assert prism.mcp.__doc__ is not None
    assert "open_mcp_tools" in prism.mcp.__doc__


def test_bridge_error_is_a_prism_error() -> None:
    from prism.core import PrismError

    assert issubclass(prism.mcp.McpBridgeError, PrismError)


def test_all_is_exactly_the_public_names_of_the_module_each_once() -> None:
    public = {
        name
        for name, value in vars(prism.mcp).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public == set(prism.mcp.__all__)
    assert len(prism.mcp.__all__) == len(set(prism.mcp.__all__))


def test_every_export_is_defined_in_prism_mcp_and_exported_by_no_other_package() -> None:
    import prism

    # Every public module of every installed prism package (prism.core.options too).
    public = [found.name for found in pkgutil.iter_modules(prism.__path__, "prism.")]
    for package in list(public):
        path = getattr(importlib.import_module(package), "__path__", ())
        public += [
            found.name
            for found in pkgutil.iter_modules(path, f"{package}.")
            if not found.name.rpartition(".")[2].startswith("_")
        ]
    others: dict[int, str] = {}
    for module_name in public:
        if module_name == "prism.mcp":
            continue
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            others[id(getattr(module, name))] = f"{module_name}.{name}"
    for name in prism.mcp.__all__:
        obj = getattr(prism.mcp, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert obj.__module__.startswith("prism.mcp._"), (name, obj.__module__)
            assert id(obj) not in others, f"{name} is also exported as {others[id(obj)]}"


def test_the_protocol_alias_does_not_shadow_typing_protocol() -> None:
    # Renamed from Protocol (nothing was published).
    from prism.mcp import _options

    assert not hasattr(_options, "Protocol")
    assert inspect.signature(prism.mcp.open_mcp_tools).parameters["protocol"].default == "auto"


def test_the_testing_module_exports_the_upstream_warning_filters() -> None:
    import prism.mcp.testing

    assert prism.mcp.testing.__all__ == ["UPSTREAM_WARNING_FILTERS"]
    categories = set()
    for spec in prism.mcp.testing.UPSTREAM_WARNING_FILTERS:
        action, _message, category = spec.split(":")
        assert action == "ignore"
        categories.add(category)
    # Narrow: the two ways trio reports a collected generator, nothing broader.
    assert categories == {"ResourceWarning", "pytest.PytestUnraisableExceptionWarning"}
