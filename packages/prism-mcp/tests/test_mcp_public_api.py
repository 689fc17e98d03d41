import inspect

import prism.mcp

DOCUMENTED = {
    "AUDIO_URI_PREFIX",
    "DEFAULT_ENV_PASSTHROUGH",
    "McpApprovalCallback",
    "McpBridgeError",
    "McpElicitCallback",
    "McpElicitation",
    "McpElicitationAnswer",
    "McpLogCallback",
    "McpLogMessage",
    "McpSampleCallback",
    "McpSamplingAnswer",
    "McpSamplingRequest",
    "McpServerInfo",
    "McpToolAnnotations",
    "McpToolBridge",
    "McpToolInfo",
    "McpTransport",
    "StdioTransport",
    "StreamableHttpTransport",
    "create_mcp_permission_policy",
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
