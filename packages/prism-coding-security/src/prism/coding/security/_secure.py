"""``open_secure_coding_tools``: the coding tools behind the policy, in the best sandbox here."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import tempfile
from typing import TYPE_CHECKING

import attrs
import trio

from prism.coding.tools import (
    EditToolOptions,
    LocalShellOperations,
    ReadToolOptions,
    ShellOperations,
    ShellToolOptions,
    create_coding_tools,
)
from prism.core import ConfigurationError, ExecutionPolicy, ToolDefinition
from prism.core.options import boolean, instance_of, one_of, optional, sequence_of, string

from ._contained import create_contained_file_operations
from ._environment import without_secrets
from ._errors import SandboxUnavailableError
from ._executables import host_program
from ._landlock import LandlockSandbox
from ._paths import normalize_roots
from ._policy import ApprovalCallback, _CodingApprovalPolicy, create_coding_approval_policy
from ._sandbox import BubblewrapSandbox, SandboxBackend, create_sandbox_shell_operations

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from ._rules import CommandRules

__all__ = ["SecureCodingTools", "open_secure_coding_tools"]

_OWNER = "open_secure_coding_tools"
_BACKEND_NAMES = {BubblewrapSandbox: "bubblewrap", LandlockSandbox: "landlock"}


@attrs.frozen
class SecureCodingTools:
    """What :func:`open_secure_coding_tools` set up.

    Attributes:
        tools: ``read``, ``write``, ``edit`` and ``shell``, ready to register.
        policy: the coding approval policy every tool checks.
        sandbox: the backend the shell runs in, or None (on the host).
        backend: ``"bubblewrap"``, ``"landlock"``, ``"none"``, or the class
            name of a backend passed in.
        mode: ``"confined"`` (the policy lets commands the sandbox confines
            run unasked: bubblewrap) or ``"proved-safe"`` (only proved-safe
            commands run unasked: Landlock, or no sandbox).
        skipped: for ``"auto"`` or a list: each backend tried before the
            active one, with why it could not isolate here.
    """

    tools: list[ToolDefinition]
    policy: ExecutionPolicy
    sandbox: SandboxBackend | None
    backend: str
    skipped: tuple[tuple[str, str], ...] = ()
    mode: str = "proved-safe"


def _name(backend: SandboxBackend) -> str:
    return _BACKEND_NAMES.get(type(backend), type(backend).__name__)


def _candidates(
    sandbox: str | SandboxBackend | Sequence[SandboxBackend],
    roots: tuple[str, ...],
    network: str,
    allowed_hosts: Sequence[str],
    protected_paths: Sequence[str] | None = None,
) -> tuple[list[SandboxBackend], list[tuple[str, str]]]:
    """The backends to try in order, and those the options rule out (with why)."""
    if isinstance(sandbox, SandboxBackend):
        return [sandbox], []
    if not isinstance(sandbox, str):
        return list(sandbox), []
    candidates: list[SandboxBackend] = []
    ruled_out: list[tuple[str, str]] = []
    if sandbox in ("auto", "bubblewrap"):
        hosts = tuple(allowed_hosts)
        # the same protected list as the policy's: the copy-back leaves them out too
        candidates.append(
            BubblewrapSandbox(
                roots, network=network, allowed_hosts=hosts, protected_paths=protected_paths
            )
        )
    if sandbox in ("auto", "landlock"):
        if network == "allowlist":
            ruled_out.append(("landlock", "LandlockSandbox has no network allowlist"))
        else:
            candidates.append(LandlockSandbox(roots, network=network == "host"))
    return candidates, ruled_out


async def _first_available(
    candidates: list[SandboxBackend], skipped: list[tuple[str, str]], *, host_last: bool
) -> SandboxBackend | None:
    for candidate in candidates:
        try:
            await candidate.ensure_available()
        except SandboxUnavailableError as exc:
            skipped.append((_name(candidate), str(exc)))
            continue
        return candidate
    if host_last:
        return None
    reasons = "; ".join(f"{name}: {reason}" for name, reason in skipped)
    raise SandboxUnavailableError(
        f"no sandbox can isolate commands here ({reasons}); pass sandbox='none' to run "
        "the shell unsandboxed on purpose"
    )


def _check(
    roots: Sequence[str],
    sandbox: object,
    network: object,
    allowed_hosts: object,
    read_only: object,
    cwd: str | None,
) -> tuple[tuple[str, ...], str]:
    """Check the options; the real roots and the real working directory."""
    backend = instance_of(SandboxBackend, description="a SandboxBackend")
    choice = (
        one_of("auto", "bubblewrap", "landlock", "none")
        | backend
        | sequence_of(backend, non_empty=True)
    )
    choice.check(_OWNER, "sandbox", sandbox)
    one_of("none", "allowlist", "host").check(_OWNER, "network", network)
    sequence_of(string()).check(_OWNER, "allowed_hosts", allowed_hosts)
    boolean().check(_OWNER, "read_only", read_only)
    optional(string()).check(_OWNER, "cwd", cwd)
    real_roots = normalize_roots(roots, owner=_OWNER)
    where = real_roots[0] if cwd is None else os.path.realpath(cwd)
    if not any(where == root or where.startswith(root.rstrip("/") + "/") for root in real_roots):
        raise ConfigurationError(
            f"{_OWNER}.cwd must lie inside a root, got {cwd!r}", option=f"{_OWNER}.cwd", value=cwd
        )
    return real_roots, where


@contextlib.asynccontextmanager
async def open_secure_coding_tools(
    roots: Sequence[str],
    *,
    cwd: str | None = None,
    sandbox: str | SandboxBackend | Sequence[SandboxBackend] = "auto",
    approve: ApprovalCallback | None = None,
    network: str = "none",
    allowed_hosts: Sequence[str] = (),
    command_rules: CommandRules | None = None,
    read_only: bool = False,
    protected_paths: Sequence[str] | None = None,
    approval_timeout_s: float = 300.0,
    shell_options: ShellToolOptions | None = None,
    read_options: ReadToolOptions | None = None,
    edit_options: EditToolOptions | None = None,
) -> AsyncIterator[SecureCodingTools]:
    """The coding tools, contained and sandboxed: the recommended way to build them.

    ``sandbox`` picks where shell commands run:

    * ``"auto"`` (default): the strongest isolation that works here:
      :class:`BubblewrapSandbox` (confined mode), else :class:`LandlockSandbox`
      (proved-safe mode), else the host (proved-safe mode). It never raises
      for a missing sandbox; :attr:`SecureCodingTools.backend`, ``mode`` and
      ``skipped`` say what was chosen and why;
    * ``"bubblewrap"`` or ``"landlock"``: that backend, or
      :class:`SandboxUnavailableError`;
    * a :class:`SandboxBackend`, or a list of them tried in order (the error
      when none works);
    * ``"none"``: explicitly unsandboxed; the shell runs on the host and the
      policy stays in its proved-safe-only mode.

    Under bubblewrap the policy runs in confined mode (``sandbox=`` of
    :func:`create_coding_approval_policy`): commands the sandbox confines run
    without asking; others go to ``approve``. Landlock cannot keep protected
    paths inside a root, so under it the policy stays proved-safe-only (what
    is not proved safe goes to ``approve``) and Landlock adds containment to
    what runs. The read, write and edit tools
    use :func:`create_contained_file_operations`. ``network`` is ``"none"``,
    ``"allowlist"`` (with ``allowed_hosts``; bubblewrap only) or ``"host"``;
    it configures the backends ``"auto"`` builds, not one passed in.

    Commands get this process's environment as it is here without the
    variables whose names say they hold a secret (``*TOKEN*``, ``*SECRET*``,
    ``*PASSWORD*``, ``*CREDENTIAL*``, ``*APIKEY*``, a ``KEY``, ``AUTH`` or ``PAT``
    part: ``OPENAI_API_KEY``, ``GITHUB_TOKEN``, ``SSH_AUTH_SOCK``) and those
    whose value is a URL carrying credentials (``postgres://u:pw@db``), unless
    ``shell_options`` gives ``env`` (then exactly that). It is a heuristic.

    The shell's spill files (the whole output of a result that was cut) go to
    a private temporary directory of this context, removed with everything in
    it when the context exits, unless ``shell_options`` gives ``spill_dir``;
    either way the tool keeps at most ``max_spill_total_bytes`` of them.

    Each backend is probed (:meth:`SandboxBackend.ensure_available`) on
    entry; the result says which one is active (:attr:`SecureCodingTools.backend`).

    Raises:
        ConfigurationError: an option has the wrong type or value.
        SandboxUnavailableError: the backend (or list) asked for by name or
            instance cannot isolate here (never for ``"auto"``).
    """
    real_roots, where = _check(roots, sandbox, network, allowed_hosts, read_only, cwd)
    shell: ShellOperations = LocalShellOperations()
    active: SandboxBackend | None = None
    skipped: list[tuple[str, str]] = []
    if sandbox != "none":
        candidates, skipped = _candidates(
            sandbox, real_roots, network, allowed_hosts, protected_paths
        )
        active = await _first_available(candidates, skipped, host_last=sandbox == "auto")
        if active is not None:
            shell = create_sandbox_shell_operations(active)
    policy = create_coding_approval_policy(
        roots=real_roots,
        approve=approve,
        read_only=read_only,
        command_rules=command_rules,
        approval_timeout_s=approval_timeout_s,
        protected_paths=protected_paths,
        sandbox=active,
    )
    if "env" not in (shell_options or {}):
        # a confined command runs unasked: the keys and tokens this process holds in its
        # environment are not the model's to print
        shell_options = {**(shell_options or {}), "env": without_secrets()}
    if not (shell_options or {}).get("shell_path"):
        # bash found on PATH as Prism finds its own programs: never a root's file
        shell_options = {**(shell_options or {}), "shell_path": host_program("bash") or "/bin/sh"}
    spills: str | None = None
    if not (shell_options or {}).get("spill_dir"):
        # this context's own, so that what a session's commands printed leaves with it
        spills = tempfile.mkdtemp(prefix="prism-spill-")
        shell_options = {**(shell_options or {}), "spill_dir": spills}
    try:
        tools = create_coding_tools(
            where,
            execution_policy=policy,
            file_operations=create_contained_file_operations(real_roots),
            shell_operations=shell,
            shell_options=shell_options,
            read_options=read_options,
            edit_options=edit_options,
        )
        if isinstance(policy, _CodingApprovalPolicy):
            # what the roots' own files protect, found off the event loop before the write
            # tool's first (synchronous) check asks for it (a thread of its own, not a task:
            # a nursery around the yield would wrap the caller's exceptions in a group)
            policy.warm()
        yield SecureCodingTools(
            tools=tools,
            policy=policy,
            sandbox=active,
            backend="none" if active is None else _name(active),
            skipped=tuple(skipped),
            mode="proved-safe"
            if active is None or getattr(active, "confines", True) is not True
            else "confined",
        )
    finally:
        if spills is not None:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(
                    functools.partial(shutil.rmtree, spills, ignore_errors=True)
                )
