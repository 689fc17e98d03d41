import importlib
import inspect
import types

import pytest

import prism.core
import prism.core.testing

DOCUMENTED = {
    "AbortController",
    "AbortSignal",
    "Agent",
    "AgentEvent",
    "AgentSession",
    "AssistantMessage",
    "BlockedReason",
    "CompiledArgumentSchema",
    "ConfigurationError",
    "Content",
    "ContributionRegistries",
    "DiscoveredContribution",
    "DispatchOptions",
    "DuplicateToolError",
    "ErrorInfo",
    "EventSink",
    "ExecutionAction",
    "ExecutionDecision",
    "ExecutionDeniedError",
    "ExecutionPolicy",
    "Extension",
    "ExtensionAPI",
    "ExtensionError",
    "ExtensionKernel",
    "ImageContent",
    "JsonObject",
    "JsonValue",
    "Limits",
    "Message",
    "MiddlewareRegistry",
    "ModelProvider",
    "ModelProviderError",
    "ModelRequest",
    "ParsedJson",
    "PermissionDecision",
    "PermissionDeniedError",
    "PermissionPolicy",
    "PermissionRequest",
    "PrismError",
    "ReasoningContent",
    "ResourceContent",
    "ResourceLink",
    "RunFinished",
    "RunOptions",
    "RunResult",
    "ScriptExhaustedError",
    "ScriptedProvider",
    "ScriptedTurn",
    "SessionBusyError",
    "SingleShotLoop",
    "TextContent",
    "ToolArgumentValidationError",
    "ToolArgumentValidationResult",
    "ToolArgumentValidator",
    "ToolParameterValidator",
    "ToolCall",
    "ToolDefinition",
    "ToolEvent",
    "ToolExecutionBlocked",
    "ToolExecutionContext",
    "ToolExecutionError",
    "ToolExecutionFinished",
    "ToolExecutionProgress",
    "ToolExecutionStarted",
    "ToolFilter",
    "ToolHandler",
    "ToolNameMap",
    "ToolRegistry",
    "ToolResult",
    "ToolResultMessage",
    "ToolSchemaRejectedError",
    "ToolSpec",
    "ToolValidator",
    "TurnFinished",
    "TurnStarted",
    "UserMessage",
    "assert_execution_allowed",
    "assert_permission",
    "create_agent",
    "create_extension_kernel",
    "create_rule_permission_policy",
    "create_tool_name_map",
    "create_tool_parameter_validator",
    "create_tool_registry",
    "discover_contributions",
    "begin_tool_call",
    "dispatch_tool_call",
    "finish_tool_call",
    "CallTicket",
    "dispatch_tool_calls_in_order",
    "filter_tools",
    "is_tool_allowed",
    "provider_safe_name",
    "resolve_tool_concurrency",
    # asyncio hosts (issue 15)
    "AsyncioHost",
    "AsyncioHostClosedError",
    "TrioRequiredError",
    "open_asyncio_host",
    "require_trio",
    # the application's asyncio callbacks under a host run on its loop
    "await_callback",
    "is_trio_native",
    "trio_native",
}


def test_all_matches_documented_names() -> None:
    assert set(prism.core.__all__) == DOCUMENTED
    assert prism.core.__all__ == sorted(prism.core.__all__, key=lambda n: (not n.isupper(), n))


def test_every_export_exists() -> None:
    for name in prism.core.__all__:
        assert hasattr(prism.core, name), name


def test_every_class_and_function_export_has_a_docstring() -> None:
    for name in prism.core.__all__:
        obj = getattr(prism.core, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"{name} has no docstring"


def test_namespace_package_has_no_init() -> None:
    import prism

    assert getattr(prism, "__file__", None) is None


TESTING_DOCUMENTED = {
    "AllowAllExecutionPolicy",
    "AllowAllPermissionPolicy",
    "BlockingTool",
    "DenyAllExecutionPolicy",
    "DenyAllPermissionPolicy",
    "Dispatcher",
    "FailingTool",
    "RecordingLedgerSink",
    "RecordingSink",
    "RecordingTool",
    "assert_tool_dispatch_conforms",
    "echo_tool",
}


def test_testing_module_exports_the_documented_names_with_docstrings() -> None:
    assert set(prism.core.testing.__all__) == TESTING_DOCUMENTED
    assert prism.core.testing.__all__ == sorted(prism.core.testing.__all__)
    for name in prism.core.testing.__all__:
        obj = getattr(prism.core.testing, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"prism.core.testing.{name} has no docstring"


PUBLIC_MODULES = (
    "prism.core",
    "prism.core.files",
    "prism.core.ledger",
    "prism.core.testing",
    "prism.core.options",
    "prism.core.process",
    "prism.core.text",
)

# The ledger's names, moved from prism.core to prism.core.ledger; the old
# places stay importable, with a DeprecationWarning, for one minor release.
MOVED_TO_LEDGER = {
    "ApprovalAnswer",
    "DecisionGate",
    "FsyncPolicy",
    "JsonlLedgerSink",
    "LEDGER_SCHEMA_VERSION",
    "LedgerContents",
    "LedgerEntry",
    "LedgerFormatError",
    "LedgerQuery",
    "LedgerRecorder",
    "LedgerRun",
    "LedgerSink",
    "LedgerWriteFailed",
    "OtelLedgerSink",
    "Redactor",
    "RunEndRecord",
    "RunLedger",
    "RunOutcome",
    "RunStartRecord",
    "SqliteLedgerSink",
    "ToolCallDecision",
    "ToolCallRecord",
    "default_redactor",
    "read_ledger",
    "read_ledger_text",
}

LEDGER_DOCUMENTED = MOVED_TO_LEDGER | {
    "CallTracer",
    "FinishedCall",
    "ModelReport",
    "PendingRecord",
    "ToolCallStatus",
}


def test_the_ledger_module_exports_the_documented_names_with_docstrings() -> None:
    import prism.core.ledger

    assert set(prism.core.ledger.__all__) == LEDGER_DOCUMENTED
    assert prism.core.ledger.__all__ == sorted(
        prism.core.ledger.__all__, key=lambda n: (not n.isupper(), n)
    )
    for name in prism.core.ledger.__all__:
        obj = getattr(prism.core.ledger, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"prism.core.ledger.{name} has no docstring"


@pytest.mark.parametrize("name", sorted(MOVED_TO_LEDGER))
def test_a_moved_ledger_name_still_imports_from_prism_core_with_a_deprecation_warning(
    name: str,
) -> None:
    import prism.core.ledger

    with pytest.warns(DeprecationWarning, match=f"prism.core.ledger.{name}"):
        value = getattr(prism.core, name)
    assert value is getattr(prism.core.ledger, name)
    assert name not in prism.core.__all__


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        prism.core.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_of_each_public_module_is_defined_and_complete(name: str) -> None:
    # As trio's export test does: __all__ names only what the module defines,
    # and the module exports nothing public that __all__ leaves out.
    module = importlib.import_module(name)
    exported = set(module.__all__)
    assert len(exported) == len(module.__all__), f"{name}.__all__ repeats a name"
    for item in exported:
        assert hasattr(module, item), f"{name}.__all__ names {item}, which is not defined"
    public = {
        item
        for item, value in vars(module).items()
        if not item.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public - {"annotations"} <= exported, f"{name} exports names missing from __all__"


def test_no_name_is_exported_by_two_public_modules() -> None:
    seen: dict[str, str] = {}
    for name in PUBLIC_MODULES:
        for item in importlib.import_module(name).__all__:
            assert item not in seen, f"{item} is exported by both {seen[item]} and {name}"
            seen[item] = name


def test_the_process_module_exports_the_documented_names() -> None:
    import prism.core.process

    assert prism.core.process.__all__ == [
        "DEFAULT_KILL_GRACE_S",
        "PROCESS_TREE_ENV_VAR",
        "terminate_process_tree",
    ]
    assert inspect.getdoc(prism.core.process.terminate_process_tree)


def test_the_text_module_exports_the_documented_names() -> None:
    import prism.core.text

    assert prism.core.text.__all__ == [
        "MESSAGE_LIMIT",
        "NAME_LIMIT",
        "REASON_LIMIT",
        "clip",
        "describe_exception",
        "escape_controls",
        "has_lone_surrogate",
    ]
    assert inspect.getdoc(prism.core.text.clip)
    assert inspect.getdoc(prism.core.text.escape_controls)
    assert inspect.getdoc(prism.core.text.describe_exception)
    assert inspect.getdoc(prism.core.text.has_lone_surrogate)


def test_the_files_module_exports_the_documented_names_with_docstrings() -> None:
    import prism.core.files

    assert prism.core.files.__all__ == [
        "FileIdentity",
        "OpenedFile",
        "UnsafeFileError",
        "inside_any",
        "open_private_file",
    ]
    for name in prism.core.files.__all__:
        assert inspect.getdoc(getattr(prism.core.files, name)), name


# Renamed while nothing was published (no deprecation shims): the old spelling is gone.
RENAMED = {
    # (class, old keyword, new keyword)
    ("DispatchOptions", "validate", "validator"),
    ("DispatchOptions", "events", "on_event"),
    ("RunOptions", "validate", "validator"),
    ("SingleShotLoop", "tool_concurrency", "concurrency"),
    ("ToolExecutionContext", "events", "on_event"),
}


@pytest.mark.parametrize(("owner", "old", "new"), sorted(RENAMED))
def test_renamed_keywords_take_only_the_new_name(owner: str, old: str, new: str) -> None:
    parameters = inspect.signature(getattr(prism.core, owner)).parameters
    assert new in parameters
    assert old not in parameters


def test_middleware_and_action_mistakes_are_configuration_errors() -> None:
    with pytest.raises(prism.core.ConfigurationError, match="on_tool_call"):
        prism.core.MiddlewareRegistry().on_tool_call(3)  # type: ignore[arg-type]
    with pytest.raises(prism.core.ConfigurationError, match="paths"):
        prism.core.ExecutionAction(kind="read", operation="read", paths="/etc")
