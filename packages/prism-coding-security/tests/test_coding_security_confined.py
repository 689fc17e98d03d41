"""Confined mode: with a sandbox, commands the sandbox confines run without asking."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
import trio

from prism.coding.security import (
    BubblewrapSandbox,
    SandboxUnavailableError,
    create_coding_approval_policy,
    create_sandbox_shell_operations,
)
from prism.coding.tools import AccessGrant, ShellSpawnRequest, create_shell_tool
from prism.core import (
    ConfigurationError,
    DispatchOptions,
    ExecutionAction,
    ExecutionDecision,
    ToolCall,
    create_tool_registry,
    dispatch_tool_call,
)

if TYPE_CHECKING:
    from pathlib import Path


def _decide(root: Path, command: str, **options: object) -> ExecutionDecision:
    policy = create_coding_approval_policy(
        roots=[str(root)],
        sandbox=BubblewrapSandbox([str(root)]),
        **options,  # type: ignore[arg-type]
    )
    decision = policy.check(
        ExecutionAction(kind="shell", operation="shell", command=command, paths=(str(root),))
    )
    assert isinstance(decision, ExecutionDecision)
    return decision


@pytest.mark.parametrize(
    "command",
    ["make test", "pytest -q", "python3 -c 'print(1)'", "echo x > out.txt", "npm test",
     "cat /etc/hostname", "X=1 make", "./build.sh", "awk 'BEGIN{system(\"id\")}'"],
)  # fmt: skip
def test_commands_the_sandbox_confines_run_unasked(root: Path, command: str) -> None:
    decision = _decide(root, command)
    assert decision.allowed, decision.reason
    assert decision.details["confined"] is True
    assert decision.details["sandbox"] == "BubblewrapSandbox"


@pytest.mark.parametrize(
    ("command", "rule"),
    [("echo x > /var/tmp/outside-prism", "path:write"), ("touch .envrc", "protected"),
     ("make && echo 'x' > lefthook-local.yml", "protected"),
     ("case x in x) make;; esac", "parse")],
)  # fmt: skip
def test_what_the_sandbox_cannot_confine_still_asks(root: Path, command: str, rule: str) -> None:
    decision = _decide(root, command)
    assert not decision.allowed
    assert decision.details["escalation"] is True
    assert decision.details["rule"] == rule
    assert decision.details["needs_approval"] is True
    # an access the sandbox can grant is named; a parse doubt grants nothing
    assert ("access" in decision.details) == (rule != "parse")


@pytest.mark.parametrize(
    "name",
    [".hg/hgrc", "sub/.hg/requires", ".jj/repo/config.toml", ".sl/config", "mise.local.toml",
     ".mise.local.toml", "mise.ci.toml", "mise/config.toml", ".config/mise.toml",
     ".cargo/config.toml", ".cargo/config", "rust-toolchain.toml", ".env", ".Rprofile",
     "bunfig.toml", ".tool-versions", ".python-version", "app/.python-versions", ".pdm-python",
     ".venv/lib/python3.11/site-packages/x.pth",
     "venv/lib/python3.12/site-packages/sitecustomize.py", ".venv/bin/activate",
     ".venv/bin/activate.fish", ".venv/pyvenv.cfg",
     # a prefix that is no venv (conda -p ./env) or a PYTHONPATH directory: python
     # imports these modules in any form from every entry of its path
     "env/lib/python3.11/site-packages/sitecustomize/__init__.py",
     "env/lib/python3.11/site-packages/sitecustomize.pyc", "src/sitecustomize.py",
     "src/__pycache__/usercustomize.cpython-311.pyc"],
)  # fmt: skip
def test_files_other_tools_run_are_protected_by_the_policy(root: Path, name: str) -> None:
    decision = _decide(root, f"make && echo x > {name}")
    assert not decision.allowed
    assert decision.details["rule"] == "protected"
    assert decision.details["needs_approval"] is True


@pytest.mark.parametrize(
    ("command", "rule", "why"),
    [("echo x > .git/config", "protected", "changes inside .git never come back"),
     ("make > ../x", "path:write", "holds a writable root"),
     ("echo x > /proc/prism-x", "path:write", "cannot put a private layer over /proc"),
     ("echo x > /prism-x", "path:write", "cannot put a private layer over /"),
     ("echo 1 > /run/prism-x.pid", "path:write", "/run is private and empty"),
     ("echo 1 > /var/run/prism-x.pid", "path:write", "/run is private and empty")],
)  # fmt: skip
def test_what_the_sandbox_never_grants_is_refused_without_asking(
    root: Path, command: str, rule: str, why: str
) -> None:
    asked: list[object] = []
    decision = _decide(root, command, approve=asked.append)
    assert not decision.allowed
    assert asked == []
    assert decision.details["escalation"] is True
    assert decision.details["rule"] == rule
    assert "needs_approval" not in decision.details
    assert "cannot grant, even approved" in (decision.reason or "")
    assert why in (decision.reason or "")


@pytest.mark.parametrize(
    ("command", "writes_nothing"),
    [("pytest -q", False), ("make", False), ("git commit -qam msg", False),
     ("timeout 60 make", False), ("git log -1 && make", False), ("git log -1", True),
     ("ls && git status", True), ("test -w a.txt", False), ("[ -w . ] && ls", False),
     ("find . -writable", False), ("stat -f -c %T .", True), ("test -r a.txt", True)],
)  # fmt: skip
@pytest.mark.parametrize("rules", [True, False])
def test_only_a_line_every_program_of_which_was_modelled_writes_nothing(
    root: Path, command: str, writes_nothing: bool, rules: bool
) -> None:
    """An allow rule lets its program run unmodelled: it never makes a line read-only.
    Nor does asking whether a file is writable, which read-only roots would answer no."""
    from prism.coding.security import CommandRules

    allow = CommandRules(allow=["pytest *", "make", "git commit *"]) if rules else None
    decision = _decide(root, command, command_rules=allow)
    assert decision.allowed, decision.reason
    metadata = (decision.modified or {}).get("metadata") or {}
    assert isinstance(metadata, dict)
    assert metadata.get("writes_nothing", False) is writes_nothing


def test_deny_rules_still_deny_in_confined_mode(root: Path) -> None:
    decision = _decide(root, "make && sudo id")
    assert not decision.allowed
    assert decision.details["rule"] == "deny:sudo *"
    assert "needs_approval" not in decision.details


def test_read_only_mode_is_not_relaxed_by_a_sandbox(root: Path) -> None:
    decision = _decide(root, "echo x > out.txt", read_only=True)
    assert not decision.allowed


def test_a_sandbox_that_is_not_a_backend_is_refused(root: Path) -> None:
    with pytest.raises(ConfigurationError, match="sandbox"):
        create_coding_approval_policy(roots=[str(root)], sandbox="bubblewrap")  # type: ignore[arg-type]


@pytest.mark.bwrap
async def test_a_confined_command_really_runs_in_the_sandbox(root: Path) -> None:
    sandbox = BubblewrapSandbox([str(root)])
    policy = create_coding_approval_policy(roots=[str(root)], sandbox=sandbox)
    shell = create_shell_tool(
        str(root), execution_policy=policy, operations=create_sandbox_shell_operations(sandbox)
    )
    options = DispatchOptions(registry=create_tool_registry([shell]))
    # not proved safe (awk runs a command), confined, so it runs unasked: in its own PID
    # namespace, where the sandbox's first process is PID 1
    call = ToolCall(id="1", name="shell",
                    arguments={"command": "awk 'BEGIN{system(\"echo $$\")}'"})  # fmt: skip
    result = await dispatch_tool_call(call, options)
    assert not result.is_error, result.joined_text
    assert int(result.joined_text.split()[0]) < 10


@pytest.mark.bwrap
async def test_a_grant_in_a_private_directory_is_refused_by_the_sandbox_too(root: Path) -> None:
    """The attack: an approved write to /run/x showed the whole host /run (tokens, sockets)."""
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    chunks: list[bytes] = []

    async def sink(chunk: bytes) -> None:
        chunks.append(chunk)

    request = ShellSpawnRequest(
        command="ls /run; echo 1 > /run/prism-x.pid",
        shell_path="/bin/sh",
        cwd=str(root),
        env={"PATH": "/usr/bin:/bin"},
        grant=AccessGrant(outside_writes=("/run/prism-x.pid",)),
    )
    with pytest.raises(SandboxUnavailableError, match="/run is private and empty"):
        await ops.run(request, sink)
    assert chunks == []
    assert not await trio.Path("/run/prism-x.pid").exists()


@pytest.mark.bwrap
async def test_a_grant_of_the_hosts_own_address_is_refused_by_the_sandbox_too(root: Path) -> None:
    """A grant naming this machine (however written) never reaches the call's proxy."""
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))
    chunks: list[bytes] = []

    async def sink(chunk: bytes) -> None:
        chunks.append(chunk)

    for host in ("[::ffff:7f00:1]:8080", "localhost:80", "10.0.0.1:443"):
        request = ShellSpawnRequest(
            command="echo ran",
            shell_path="/bin/sh",
            cwd=str(root),
            env={"PATH": "/usr/bin:/bin"},
            grant=AccessGrant(hosts=(host,)),
        )
        with pytest.raises(SandboxUnavailableError, match="cannot grant the connection"):
            await ops.run(request, sink)
    assert chunks == []


@pytest.mark.bwrap
async def test_an_approved_file_never_comes_back_hard_linked(root: Path) -> None:
    """The attack: an approved .envrc came back as the same inode as notes.txt."""
    ops = create_sandbox_shell_operations(BubblewrapSandbox([str(root)]))

    async def sink(chunk: bytes) -> None:
        pass

    request = ShellSpawnRequest(
        command="echo 'export A=1' > .envrc && ln .envrc notes.txt",
        shell_path="/bin/sh",
        cwd=str(root),
        env={"PATH": "/usr/bin:/bin"},
        grant=AccessGrant(protected_writes=(str(root / ".envrc"),)),
    )
    result = await ops.run(request, sink)
    assert result.exit_code == 0
    # the layer's own names go with the layer, removed in the background after the call
    from prism.coding.security._overlay import wait_discarded

    assert await trio.to_thread.run_sync(wait_discarded, 30.0)
    envrc, notes = (
        await (trio.Path(root) / ".envrc").stat(),
        await (trio.Path(root) / "notes.txt").stat(),
    )
    assert envrc.st_ino != notes.st_ino
    assert (envrc.st_nlink, notes.st_nlink) == (1, 1)
    assert await (trio.Path(root) / "notes.txt").read_text() == "export A=1\n"
