"""prism.coding.security: approval policy, contained file access and a real sandbox.

The policy layer that makes the coding tools (``prism.coding.tools``) safe to
hand to a model: every path must really lie inside the roots, a shell
command runs unasked only when every part of it is proved safe, anything
else waits for a human
(bounded by a timeout), files are opened so that a symlink swapped in late
cannot lead outside, and commands can run in a bubblewrap sandbox.

Example::

    import tempfile

    import trio
    from prism.core import ExecutionAction
    from prism.coding.security import CommandRules, create_coding_approval_policy

    root = tempfile.mkdtemp()
    policy = create_coding_approval_policy(
        roots=[root], command_rules=CommandRules(deny=["git push *"])
    )
    ok = policy.check(ExecutionAction(kind="shell", operation="shell",
                                      command="ls -la | grep py", paths=(root,)))
    assert ok.allowed  # proved safe: read-only programs, paths inside the root
    unknown = policy.check(ExecutionAction(kind="shell", operation="shell",
                                           command="make install", paths=(root,)))
    assert not unknown.allowed  # not proved safe, and there is no approver
    escape = policy.check(ExecutionAction(kind="read", operation="read",
                                          paths=("/etc/passwd",)))
    assert not escape.allowed and "/etc/passwd" in escape.reason
"""

from ._contained import create_contained_file_operations as create_contained_file_operations
from ._errors import PathEscapeError as PathEscapeError
from ._errors import SandboxUnavailableError as SandboxUnavailableError
from ._judge import CommandCheck as CommandCheck
from ._judge import CommandExplanation as CommandExplanation
from ._landlock import LandlockSandbox as LandlockSandbox
from ._policy import ApprovalCallback as ApprovalCallback
from ._policy import ApprovalDecision as ApprovalDecision
from ._policy import create_coding_approval_policy as create_coding_approval_policy
from ._policy import explain_command as explain_command
from ._programs import SAFE_PROGRAMS as SAFE_PROGRAMS
from ._protected import PROTECTED_PATHS as PROTECTED_PATHS
from ._rules import DEFAULT_DENY_PATTERNS as DEFAULT_DENY_PATTERNS
from ._rules import CommandRule as CommandRule
from ._rules import CommandRules as CommandRules
from ._sandbox import BubblewrapSandbox as BubblewrapSandbox
from ._sandbox import SandboxBackend as SandboxBackend
from ._sandbox import create_sandbox_shell_operations as create_sandbox_shell_operations
from ._secure import SecureCodingTools as SecureCodingTools
from ._secure import open_secure_coding_tools as open_secure_coding_tools

__all__ = [
    "DEFAULT_DENY_PATTERNS",
    "PROTECTED_PATHS",
    "SAFE_PROGRAMS",
    "ApprovalCallback",
    "ApprovalDecision",
    "BubblewrapSandbox",
    "CommandCheck",
    "CommandExplanation",
    "CommandRule",
    "CommandRules",
    "LandlockSandbox",
    "PathEscapeError",
    "SandboxBackend",
    "SandboxUnavailableError",
    "SecureCodingTools",
    "create_coding_approval_policy",
    "create_contained_file_operations",
    "create_sandbox_shell_operations",
    "explain_command",
    "open_secure_coding_tools",
]
