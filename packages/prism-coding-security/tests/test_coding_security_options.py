"""Every public factory and options class: a wrong option raises ConfigurationError naming it.

One check for all of them (``prism.core.options``): the message reads
``"<Owner>.<option> must be ..., got <value>"`` (or names the entry that is
wrong), and the error carries ``option`` and the rejected ``value``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from prism.coding.security import (
    BubblewrapSandbox,
    CommandRule,
    CommandRules,
    LandlockSandbox,
    create_coding_approval_policy,
    create_contained_file_operations,
    create_sandbox_shell_operations,
    explain_command,
    open_secure_coding_tools,
)
from prism.core import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def _sandbox(root: str) -> BubblewrapSandbox:
    return BubblewrapSandbox([root])


def _bwrap(root: str, **options: Any) -> BubblewrapSandbox:
    return BubblewrapSandbox([root], **options)


def _allowlist(root: str, **options: Any) -> BubblewrapSandbox:
    return BubblewrapSandbox([root], network="allowlist", **options)


def _bwrap_roots(root: str, **options: Any) -> BubblewrapSandbox:
    return BubblewrapSandbox(**options)


def _policy_roots(root: str, **options: Any) -> object:
    return create_coding_approval_policy(**options)


# (owner, option, bad value, build(root, **{option: value}))
_CASES: list[tuple[str, str, object, Callable[..., object]]] = [
    ("BubblewrapSandbox", "writable_roots", "/tmp", _bwrap_roots),
    ("BubblewrapSandbox", "writable_roots", ["/no/such/dir"], _bwrap_roots),
    ("BubblewrapSandbox", "network", "wifi", _bwrap),
    ("BubblewrapSandbox", "extra_args", "--x", _bwrap),
    ("BubblewrapSandbox", "bwrap_path", "", _bwrap),
    ("BubblewrapSandbox", "protected_paths", ["/abs"], _bwrap),
    ("BubblewrapSandbox", "protected_paths", "Makefile", _bwrap),
    ("BubblewrapSandbox", "allowed_hosts", ["a b"],
     _allowlist),
    ("BubblewrapSandbox", "allowed_hosts", ("example.org",), _bwrap),
    ("BubblewrapSandbox", "allowed_hosts", ["[::1"], _allowlist),
    ("BubblewrapSandbox", "allowed_hosts", ["[::1]x"], _allowlist),
    ("BubblewrapSandbox", "allowed_hosts", ["host:99999"], _allowlist),
    ("BubblewrapSandbox", "allowed_hosts", ["*"], _allowlist),
    ("BubblewrapSandbox", "cpu_time_s", 0, _bwrap),
    ("BubblewrapSandbox", "memory_bytes", 10, _bwrap),
    ("BubblewrapSandbox", "max_processes", True, _bwrap),
    ("LandlockSandbox", "writable_roots", 3, lambda root, **o: LandlockSandbox(**o)),
    ("LandlockSandbox", "network", "yes", lambda root, **o: LandlockSandbox([root], **o)),
    ("LandlockSandbox", "cpu_time_s", -1, lambda root, **o: LandlockSandbox([root], **o)),
    ("create_coding_approval_policy", "roots", [], _policy_roots),
    ("create_coding_approval_policy", "approve", 3,
     lambda root, **o: create_coding_approval_policy(roots=[root], **o)),
    ("create_coding_approval_policy", "command_rules", "git *",
     lambda root, **o: create_coding_approval_policy(roots=[root], **o)),
    ("create_coding_approval_policy", "approval_timeout_s", 0,
     lambda root, **o: create_coding_approval_policy(roots=[root], **o)),
    ("create_coding_approval_policy", "read_only", "no",
     lambda root, **o: create_coding_approval_policy(roots=[root], **o)),
    ("create_coding_approval_policy", "cache_approvals", 1,
     lambda root, **o: create_coding_approval_policy(roots=[root], **o)),
    ("create_coding_approval_policy", "readable", ["relative"],
     lambda root, **o: create_coding_approval_policy(roots=[root], **o)),
    ("create_coding_approval_policy", "protected_paths", ["../x"],
     lambda root, **o: create_coding_approval_policy(roots=[root], **o)),
    ("create_coding_approval_policy", "sandbox", "bubblewrap",
     lambda root, **o: create_coding_approval_policy(roots=[root], **o)),
    ("explain_command", "command", 3, lambda root, **o: explain_command(roots=[root], **o)),
    ("explain_command", "cwd", "/", lambda root, **o: explain_command("ls", roots=[root], **o)),
    ("create_contained_file_operations", "roots", ["a\0b"],
     lambda root, **o: create_contained_file_operations(**o)),
    ("create_contained_file_operations", "roots", "/tmp",
     lambda root, **o: create_contained_file_operations(**o)),
    ("create_sandbox_shell_operations", "backend", object(),
     lambda root, **o: create_sandbox_shell_operations(**o)),
    ("create_sandbox_shell_operations", "kill_grace_s", 61,
     lambda root, **o: create_sandbox_shell_operations(_sandbox(root), **o)),
    ("CommandRules", "allow", "git *", lambda root, **o: CommandRules(**o)),
    ("CommandRules", "deny", [""], lambda root, **o: CommandRules(**o)),
    ("CommandRules", "use_default_deny", "yes", lambda root, **o: CommandRules(**o)),
    ("CommandRule", "pattern", 3, lambda root, **o: CommandRule(**o)),
    ("CommandRule", "match", "git status", lambda root, **o: CommandRule(pattern="git *", **o)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("owner", "option", "value", "build"), _CASES, ids=[f"{c[0]}.{c[1]}={c[2]!r}" for c in _CASES]
)
def test_wrong_option_raises_naming_the_option_and_the_value(
    root: Path, owner: str, option: str, value: object, build: Callable[..., object]
) -> None:
    with pytest.raises(ConfigurationError, match=rf"^{owner}\.{option}\b") as raised:
        build(str(root), **{option: value})
    assert raised.value.option == f"{owner}.{option}"
    assert raised.value.value == value


@pytest.mark.parametrize(
    ("option", "value"),
    [("sandbox", "docker"), ("sandbox", []), ("network", "wifi"), ("allowed_hosts", "x"),
     ("read_only", 1), ("cwd", 3)],
)  # fmt: skip
async def test_open_secure_coding_tools_names_the_option(
    root: Path, option: str, value: object
) -> None:
    options: dict[str, Any] = {option: value}
    with pytest.raises(ConfigurationError) as raised:
        async with open_secure_coding_tools([str(root)], **options):
            pytest.fail("the body must not run")
    assert raised.value.option == f"open_secure_coding_tools.{option}"
    assert raised.value.value is value


def test_repeated_allowed_hosts_are_kept_once(root: Path) -> None:
    sandbox = BubblewrapSandbox([str(root)], network="allowlist", allowed_hosts=["a.org", "a.org"])
    assert sandbox.allowed_hosts == ("a.org",)
