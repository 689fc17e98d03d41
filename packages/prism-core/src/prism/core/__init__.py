"""prism.core: contracts, registry, the gated dispatcher, policies, events and ledger.

Every tool call goes through one fixed lifecycle: middleware, lookup and
filters, permission, validation, execution, result middleware, then events
and the ledger. A refused call never reaches the tool; it gets an error
result the model can read.

Example::

    import trio
    from prism.core import (
        DispatchOptions, ToolCall, ToolDefinition, ToolResult,
        create_rule_permission_policy, create_tool_registry, dispatch_tool_call,
    )
    from prism.core.ledger import RunLedger

    async def add(args, ctx):
        return ToolResult.text(str(args["a"] + args["b"]))

    registry = create_tool_registry([ToolDefinition(name="add", execute=add)])
    options = DispatchOptions(
        registry=registry,
        permission=create_rule_permission_policy(allow=["tool:add:execute"]),
        ledger=RunLedger(),
    )
    call = ToolCall(id="1", name="add", arguments={"a": 1, "b": 2})
    result = trio.run(dispatch_tool_call, call, options)
    assert result.joined_text == "3"
"""

import typing as _typing

from ._abort import AbortController as AbortController
from ._abort import AbortSignal as AbortSignal
from ._agent import Agent as Agent
from ._agent import AgentSession as AgentSession
from ._agent import Limits as Limits
from ._agent import RunOptions as RunOptions
from ._agent import RunResult as RunResult
from ._agent import SingleShotLoop as SingleShotLoop
from ._agent import create_agent as create_agent
from ._asyncio_host import AsyncioHost as AsyncioHost
from ._asyncio_host import open_asyncio_host as open_asyncio_host
from ._content import AssistantMessage as AssistantMessage
from ._content import Content as Content
from ._content import ImageContent as ImageContent
from ._content import Message as Message
from ._content import ParsedJson as ParsedJson
from ._content import ReasoningContent as ReasoningContent
from ._content import ResourceContent as ResourceContent
from ._content import ResourceLink as ResourceLink
from ._content import TextContent as TextContent
from ._content import ToolCall as ToolCall
from ._content import ToolResult as ToolResult
from ._content import ToolResultMessage as ToolResultMessage
from ._content import UserMessage as UserMessage
from ._dispatch import BlockedReason as BlockedReason
from ._dispatch import CallTicket as CallTicket
from ._dispatch import DispatchOptions as DispatchOptions
from ._dispatch import begin_tool_call as begin_tool_call
from ._dispatch import dispatch_tool_call as dispatch_tool_call
from ._dispatch import finish_tool_call as finish_tool_call
from ._errors import AsyncioHostClosedError as AsyncioHostClosedError
from ._errors import ConfigurationError as ConfigurationError
from ._errors import DuplicateToolError as DuplicateToolError
from ._errors import ExecutionDeniedError as ExecutionDeniedError
from ._errors import ExtensionError as ExtensionError
from ._errors import ModelProviderError as ModelProviderError
from ._errors import PermissionDeniedError as PermissionDeniedError
from ._errors import PrismError as PrismError
from ._errors import ScriptExhaustedError as ScriptExhaustedError
from ._errors import SessionBusyError as SessionBusyError
from ._errors import ToolSchemaRejectedError as ToolSchemaRejectedError
from ._errors import TrioRequiredError as TrioRequiredError
from ._events import AgentEvent as AgentEvent
from ._events import EventSink as EventSink
from ._events import RunFinished as RunFinished
from ._events import ToolEvent as ToolEvent
from ._events import ToolExecutionBlocked as ToolExecutionBlocked
from ._events import ToolExecutionError as ToolExecutionError
from ._events import ToolExecutionFinished as ToolExecutionFinished
from ._events import ToolExecutionProgress as ToolExecutionProgress
from ._events import ToolExecutionStarted as ToolExecutionStarted
from ._events import TurnFinished as TurnFinished
from ._events import TurnStarted as TurnStarted
from ._extensions import ContributionRegistries as ContributionRegistries
from ._extensions import DiscoveredContribution as DiscoveredContribution
from ._extensions import Extension as Extension
from ._extensions import ExtensionAPI as ExtensionAPI
from ._extensions import ExtensionKernel as ExtensionKernel
from ._extensions import create_extension_kernel as create_extension_kernel
from ._extensions import discover_contributions as discover_contributions
from ._host_calls import await_callback as await_callback
from ._host_calls import is_trio_native as is_trio_native
from ._host_calls import trio_native as trio_native
from ._json import JsonObject as JsonObject
from ._json import JsonValue as JsonValue
from ._middleware import MiddlewareRegistry as MiddlewareRegistry
from ._names import ToolNameMap as ToolNameMap
from ._names import create_tool_name_map as create_tool_name_map
from ._names import provider_safe_name as provider_safe_name
from ._parallel import dispatch_tool_calls_in_order as dispatch_tool_calls_in_order
from ._parallel import resolve_tool_concurrency as resolve_tool_concurrency
from ._policy import ExecutionAction as ExecutionAction
from ._policy import ExecutionDecision as ExecutionDecision
from ._policy import ExecutionPolicy as ExecutionPolicy
from ._policy import PermissionDecision as PermissionDecision
from ._policy import PermissionPolicy as PermissionPolicy
from ._policy import PermissionRequest as PermissionRequest
from ._policy import assert_execution_allowed as assert_execution_allowed
from ._policy import assert_permission as assert_permission
from ._policy import create_rule_permission_policy as create_rule_permission_policy
from ._provider import ModelProvider as ModelProvider
from ._provider import ModelRequest as ModelRequest
from ._provider import ScriptedProvider as ScriptedProvider
from ._provider import ScriptedTurn as ScriptedTurn
from ._provider import ToolSpec as ToolSpec
from ._tools import ToolDefinition as ToolDefinition
from ._tools import ToolExecutionContext as ToolExecutionContext
from ._tools import ToolFilter as ToolFilter
from ._tools import ToolHandler as ToolHandler
from ._tools import ToolRegistry as ToolRegistry
from ._tools import create_tool_registry as create_tool_registry
from ._tools import filter_tools as filter_tools
from ._tools import is_tool_allowed as is_tool_allowed
from ._trio_guard import require_trio as require_trio
from ._validation import CompiledArgumentSchema as CompiledArgumentSchema
from ._validation import ErrorInfo as ErrorInfo
from ._validation import ToolArgumentValidationError as ToolArgumentValidationError
from ._validation import ToolArgumentValidationResult as ToolArgumentValidationResult
from ._validation import ToolArgumentValidator as ToolArgumentValidator
from ._validation import ToolParameterValidator as ToolParameterValidator
from ._validation import ToolValidator as ToolValidator
from ._validation import create_tool_parameter_validator as create_tool_parameter_validator

__all__ = [
    "AbortController",
    "AbortSignal",
    "Agent",
    "AgentEvent",
    "AgentSession",
    "AssistantMessage",
    "AsyncioHost",
    "AsyncioHostClosedError",
    "BlockedReason",
    "CallTicket",
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
    "ToolParameterValidator",
    "ToolRegistry",
    "ToolResult",
    "ToolResultMessage",
    "ToolSchemaRejectedError",
    "ToolSpec",
    "ToolValidator",
    "TrioRequiredError",
    "TurnFinished",
    "TurnStarted",
    "UserMessage",
    "assert_execution_allowed",
    "assert_permission",
    "await_callback",
    "begin_tool_call",
    "create_agent",
    "create_extension_kernel",
    "create_rule_permission_policy",
    "create_tool_name_map",
    "create_tool_parameter_validator",
    "create_tool_registry",
    "discover_contributions",
    "dispatch_tool_call",
    "dispatch_tool_calls_in_order",
    "filter_tools",
    "finish_tool_call",
    "is_tool_allowed",
    "is_trio_native",
    "open_asyncio_host",
    "provider_safe_name",
    "require_trio",
    "resolve_tool_concurrency",
    "trio_native",
]


# Moved to prism.core.ledger; importable from here, with a DeprecationWarning,
# until the next minor release.
_MOVED_TO_LEDGER = frozenset(
    {
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
)


if not _typing.TYPE_CHECKING:  # type checkers see only the new place

    def __getattr__(name: str) -> object:
        if name in _MOVED_TO_LEDGER:
            import warnings

            from . import ledger

            warnings.warn(
                f"prism.core.{name} moved to prism.core.ledger.{name}; "
                "importing it from prism.core stops working in the next minor release",
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(ledger, name)
        raise AttributeError(f"module 'prism.core' has no attribute {name!r}")
