"""prism.coding.security: approval policy, contained file access and a real sandbox.

The policy layer that makes the coding tools (``prism.coding.tools``) safe to
hand to a model: every path must really lie inside the roots, every shell
command is parsed and judged by rules, anything doubtful waits for a human
(bounded by a timeout), files are opened so that a symlink swapped in late
cannot lead outside, and commands can run in a bubblewrap sandbox.

Example::

    import tempfile

    import trio
    from prism.core import ExecutionAction
    from prism.coding.security import CommandRules, create_coding_approval_policy

    root = tempfile.mkdtemp()
    policy = create_coding_approval_policy(
        roots=[root], command_rules=CommandRules(allow=["git status *"])
    )
    ok = policy.check(ExecutionAction(kind="shell", operation="shell",
                                      command="git status", paths=(root,)))
    assert ok.allowed
    escape = policy.check(ExecutionAction(kind="read", operation="read",
                                          paths=("/etc/passwd",)))
    assert not escape.allowed and "/etc/passwd" in escape.reason
"""

from ._contained import create_contained_file_operations as create_contained_file_operations
from ._errors import PathEscapeError as PathEscapeError
from ._errors import SandboxUnavailableError as SandboxUnavailableError
from ._policy import ApprovalCallback as ApprovalCallback
from ._policy import ApprovalDecision as ApprovalDecision
from ._policy import create_coding_approval_policy as create_coding_approval_policy
from ._rules import DEFAULT_DENY_PATTERNS as DEFAULT_DENY_PATTERNS
from ._rules import READ_ONLY_COMMANDS as READ_ONLY_COMMANDS
from ._rules import CommandRules as CommandRules
from ._sandbox import BubblewrapSandbox as BubblewrapSandbox
from ._sandbox import SandboxBackend as SandboxBackend
from ._sandbox import create_sandbox_shell_operations as create_sandbox_shell_operations

__all__ = [
    "DEFAULT_DENY_PATTERNS",
    "READ_ONLY_COMMANDS",
    "ApprovalCallback",
    "ApprovalDecision",
    "BubblewrapSandbox",
    "CommandRules",
    "PathEscapeError",
    "SandboxBackend",
    "SandboxUnavailableError",
    "create_coding_approval_policy",
    "create_contained_file_operations",
    "create_sandbox_shell_operations",
]
