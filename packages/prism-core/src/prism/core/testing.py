"""prism.core.testing: the dispatch conformance kit and test doubles.

Use the kit in a host's own test suite to prove its wiring keeps every gate::

    from prism.core import DispatchOptions, create_rule_permission_policy, create_tool_registry
    from prism.core.testing import assert_tool_dispatch_conforms, echo_tool

    async def test_my_wiring_conforms() -> None:
        tool = echo_tool()

        def make_options() -> DispatchOptions:
            return DispatchOptions(
                registry=create_tool_registry([tool]),
                permission=create_rule_permission_policy(allow=["tool:*:execute"]),
            )

        await assert_tool_dispatch_conforms(make_options, tool, valid_arguments={"q": "x"})

The doubles are real, small implementations (no mocks): a recording event
sink, allow-all and deny-all permission and execution policies, and tools that
echo, record, fail or block until released.
"""

from ._testing import AllowAllExecutionPolicy as AllowAllExecutionPolicy
from ._testing import AllowAllPermissionPolicy as AllowAllPermissionPolicy
from ._testing import BlockingTool as BlockingTool
from ._testing import DenyAllExecutionPolicy as DenyAllExecutionPolicy
from ._testing import DenyAllPermissionPolicy as DenyAllPermissionPolicy
from ._testing import Dispatcher as Dispatcher
from ._testing import FailingTool as FailingTool
from ._testing import RecordingLedgerSink as RecordingLedgerSink
from ._testing import RecordingSink as RecordingSink
from ._testing import RecordingTool as RecordingTool
from ._testing import assert_tool_dispatch_conforms as assert_tool_dispatch_conforms
from ._testing import echo_tool as echo_tool

__all__ = [
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
]
