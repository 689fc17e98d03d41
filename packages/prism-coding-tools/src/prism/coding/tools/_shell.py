"""The ``shell`` tool: one command, bounded output, no process left behind."""

from __future__ import annotations

import inspect
import math
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, TypeAlias

import attrs
import trio

from prism.core import (
    ExecutionAction,
    ExecutionPolicy,
    JsonObject,
    JsonValue,
    PrismError,
    TextContent,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    await_callback,
    trio_native,
)
from prism.core.options import callable_value, instance_of, optional, string

from ._common import (
    _ArgumentError,
    check_cwd,
    check_option,
    check_positive_int,
    check_timeout,
    encodable,
    optional_number,
    policy_check,
    required_str,
)
from ._output import CollectedOutput, OutputCollector, SpillBook
from ._process import LocalShellOperations, default_shell_path
from ._protocols import (
    AccessGrant,
    InPlaceEdits,
    RedirectedWrites,
    ShellOperations,
    ShellSpawnRequest,
)

if TYPE_CHECKING:
    from ._protocols import ShellExit

__all__ = [
    "DEFAULT_MAX_SPILL_BYTES",
    "DEFAULT_SHELL_TIMEOUT_S",
    "SpawnHook",
    "create_shell_tool",
]

DEFAULT_SHELL_TIMEOUT_S = 120.0
"""Seconds a command may run when neither the tool nor the call sets a timeout."""

DEFAULT_MAX_SPILL_BYTES = 64 * 1024 * 1024
"""Upper bound of the file the full output of a truncated command is saved to."""

_MAX_COMMAND_CHARS = 1_000_000

SpawnHook: TypeAlias = Callable[
    [ShellSpawnRequest], "ShellSpawnRequest | Awaitable[ShellSpawnRequest]"
]
"""Host code that may rewrite a command's text, shell, cwd or env just before it is spawned."""

_PARAMETERS: JsonObject = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "The command line, run with bash -c."},
        "timeout": {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "Seconds before the command and everything it started are killed.",
        },
    },
    "required": ["command"],
    "additionalProperties": False,
}


@trio_native  # Prism's own trio code: stays on trio under an asyncio host
@attrs.frozen(kw_only=True)
class _ShellTool:
    cwd: str
    policy: ExecutionPolicy | None
    operations: ShellOperations
    shell_path: str
    command_prefix: str | None
    spawn_hook: SpawnHook | None
    timeout_s: float
    max_timeout_s: float
    max_lines: int
    max_bytes: int
    max_line_bytes: int
    max_spill_bytes: int
    spill_dir: str | None
    spills: SpillBook
    env: Mapping[str, str] | None

    async def execute(self, args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        try:
            command = encodable(required_str(args, "command", allow_empty=False), "command")
            if len(command) > _MAX_COMMAND_CHARS:
                raise _ArgumentError(f"'command' is longer than {_MAX_COMMAND_CHARS} characters")
            if "\0" in command:
                raise _ArgumentError("'command' must not contain NUL characters")
            requested = optional_number(args, "timeout")
        except _ArgumentError as exc:
            return exc.result("shell")
        timeout = self.timeout_s if requested is None else min(requested, self.max_timeout_s)
        env = dict(os.environ if self.env is None else self.env)

        checked = await policy_check(
            "shell",
            self.policy,
            ExecutionAction(
                kind="shell",
                operation="shell",
                command=command,
                paths=(self.cwd,),
                risk="high",
                # the PATH the command will get: a policy resolves program names with it
                metadata={
                    "timeout_s": timeout,
                    "env_path": env.get("PATH", ""),
                    # (None: unset) bash expands a `~` in a PATH entry with it
                    "env_home": env.get("HOME"),
                    # GNU programs then stop reading options at the first operand
                    "env_posixly_correct": "POSIXLY_CORRECT" in env,
                },
            ),
        )
        if isinstance(checked, ToolResult):
            return checked
        command = checked.command if checked.command is not None else command
        cwd = checked.paths[0] if checked.paths else self.cwd
        # extra access the policy's approval granted this one command (never remembered here)
        grant = checked.metadata.get("grant")

        text = command if not self.command_prefix else f"{self.command_prefix}\n{command}"
        request = ShellSpawnRequest(
            command=text,
            shell_path=self.shell_path,
            cwd=cwd,
            env=env,
            grant=grant if isinstance(grant, AccessGrant) and grant else None,
            # proved to write nothing (a prefix of the host's own is not part of the proof)
            read_only=checked.metadata.get("writes_nothing") is True and not self.command_prefix,
            # every write proved to lie in these directories (the same proviso)
            write_dirs=_write_dirs(checked.metadata.get("write_dirs"))
            if not self.command_prefix
            else None,
            # its only writes are these redirections (the same proviso)
            redirected=_redirected(checked.metadata.get("redirected"))
            if not self.command_prefix
            else None,
            # one `sed -i` whose script is a text filter (the same proviso)
            in_place=_in_place(checked.metadata.get("in_place"))
            if not self.command_prefix
            else None,
        )
        if self.spawn_hook is not None:
            spawn_hook = self.spawn_hook
            hooked = spawn_hook(request)
            if inspect.isawaitable(hooked):
                hooked = await await_callback(spawn_hook, hooked)
            if not isinstance(hooked, ShellSpawnRequest):
                raise TypeError(f"spawn_hook must return a ShellSpawnRequest, got {hooked!r}")
            if (hooked.command, hooked.cwd, hooked.shell_path) != (
                request.command,
                request.cwd,
                request.shell_path,
            ):
                # the redirections and edits were proved for the line the hook replaced
                # (or for another directory or shell): the hook's line runs as any other
                if hooked.redirected is not None and hooked.redirected is request.redirected:
                    hooked = attrs.evolve(hooked, redirected=None)
                if hooked.in_place is not None and hooked.in_place is request.in_place:
                    hooked = attrs.evolve(hooked, in_place=None)
            request = hooked

        collector = OutputCollector(
            max_lines=self.max_lines,
            max_bytes=self.max_bytes,
            max_line_bytes=self.max_line_bytes,
            max_spill_bytes=self.max_spill_bytes,
            spill_dir=self.spill_dir,
            spill_prefix="prism-shell-",
        )
        started = time.monotonic()
        exit_: ShellExit | None = None
        try:
            with trio.move_on_after(timeout):
                exit_ = await self.operations.run(request, collector.feed)
            output = await collector.finish()
        except (OSError, PrismError) as exc:
            return ToolResult.error(
                f"shell: could not run the command in {request.cwd}: {exc}",
                cwd=request.cwd,
                error=type(exc).__name__,
            )
        finally:
            await collector.aclose()
        if output.spill_path is not None:
            # counted with the tool's earlier spill files; the oldest go past the bound
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self.spills.keep, output.spill_path)
        return _result(
            output,
            exit_,
            timeout=timeout,
            duration=time.monotonic() - started,
            cwd=request.cwd,
            max_bytes=self.max_bytes,
        )


def _result(
    output: CollectedOutput,
    exit_: ShellExit | None,
    *,
    timeout: float,
    duration: float,
    cwd: str,
    max_bytes: int,
) -> ToolResult:
    notes: list[str] = []
    if output.truncated or output.clipped:
        what = []
        if output.truncated:
            what.append(
                f"showing the last {output.shown_lines} of {output.total_lines} lines"
                f" ({output.total_bytes} bytes in all, at most {max_bytes} shown)"
            )
        if output.clipped:
            what.append("long lines clipped")
        notes.append("Output cut: " + "; ".join(what) + ".")
        if output.spill_path is not None:
            saved = "The first part of the output" if output.spill_truncated else "Full output"
            notes.append(f"{saved} saved to {output.spill_path}")
        elif output.spill_error is not None:
            notes.append(f"The full output was not saved: {output.spill_error}")
    timed_out = exit_ is None
    is_error = True
    if timed_out:
        notes.append(f"Command timed out after {timeout:g} s; its process tree was terminated.")
    elif exit_ is not None and exit_.signal is not None:
        notes.append(f"Command was killed by signal {exit_.signal}.")
    elif exit_ is not None and exit_.exit_code != 0:
        notes.append(f"Command exited with code {exit_.exit_code}.")
    else:
        is_error = False
    body = output.text if output.text else "(no output)"
    if notes:
        body = body.rstrip("\n") + "\n\n" + "\n".join(f"[{note}]" for note in notes)
    details: dict[str, JsonValue] = {
        "exit_code": exit_.exit_code if exit_ is not None else None,
        "signal": exit_.signal if exit_ is not None else None,
        "timed_out": timed_out,
        "timeout_s": timeout if math.isfinite(timeout) else None,
        "duration_s": round(duration, 6),
        "cwd": cwd,
        "truncated": output.truncated,
        "clipped": output.clipped,
        "total_bytes": output.total_bytes,
        "total_lines": output.total_lines,
        "shown_lines": output.shown_lines,
        "full_output_path": output.spill_path,
        "spill_truncated": output.spill_truncated,
        "spill_error": output.spill_error,
    }
    return ToolResult(content=(TextContent(text=body),), is_error=is_error, details=details)


def create_shell_tool(
    cwd: str,
    *,
    execution_policy: ExecutionPolicy | None = None,
    operations: ShellOperations | None = None,
    shell_path: str | None = None,
    command_prefix: str | None = None,
    spawn_hook: SpawnHook | None = None,
    timeout_s: float | None = None,
    max_timeout_s: float = 3600.0,
    max_lines: int = 2000,
    max_bytes: int = 50_000,
    max_line_bytes: int = 2000,
    max_spill_bytes: int = DEFAULT_MAX_SPILL_BYTES,
    spill_dir: str | None = None,
    max_spill_total_bytes: int | None = None,
    env: Mapping[str, str] | None = None,
) -> ToolDefinition:
    """The ``shell`` tool (``exclusive=True``): run ``{command, timeout?}`` in ``cwd``.

    The execution policy sees ``ExecutionAction(kind="shell", command=...,
    paths=(cwd,), risk="high", metadata={"timeout_s": ..., "env_path": ...,
    "env_home": ..., "env_posixly_correct": ...})`` (``env_path`` is the ``PATH``
    the command will get, ``env_home`` its ``HOME`` or None, ``env_posixly_correct``
    whether its environment sets ``POSIXLY_CORRECT``)
    before anything is spawned; its modified ``command`` and ``paths[0]`` (the working directory)
    are what runs, and an :class:`AccessGrant` it puts in the modified
    ``metadata["grant"]`` goes to the operations with that one command
    (:attr:`ShellSpawnRequest.grant`), and ``metadata["writes_nothing"]``
    (a command proved to write no file) sets :attr:`ShellSpawnRequest.read_only`
    and ``metadata["write_dirs"]`` (every file it may write proved to lie in
    these directories) sets :attr:`ShellSpawnRequest.write_dirs`, and
    ``metadata["redirected"]`` (its only writes are redirections) sets
    :attr:`ShellSpawnRequest.redirected`, and ``metadata["in_place"]`` (one
    ``sed -i`` whose script is a text filter) sets
    :attr:`ShellSpawnRequest.in_place`, when there is no ``command_prefix``. Then
    ``command_prefix`` is put on its own line before the command and
    ``spawn_hook`` may rewrite the :class:`ShellSpawnRequest` (one whose
    ``command``, ``cwd`` or ``shell_path`` it changed loses ``redirected`` and
    ``in_place``, unless it set them too).

    Output (stdout and stderr merged, in order) keeps its tail within
    ``max_lines`` and ``max_bytes``; lines longer than ``max_line_bytes`` are
    clipped. Whenever anything is cut, the raw output (up to
    ``max_spill_bytes``) is saved to a 0600 temporary file named in the result
    (``details["full_output_path"]``); if that fails the result says so. The
    tool's spill files together stay within ``max_spill_total_bytes``: past it,
    the oldest are removed (the newest is always kept). A
    non-zero exit, a signal or a timeout is an error result that still holds
    the output; ``details`` carries ``exit_code``, ``signal``, ``timed_out``.

    A call times out after its ``timeout`` argument (capped at
    ``max_timeout_s``), else after ``timeout_s`` (default
    :data:`DEFAULT_SHELL_TIMEOUT_S`, 120 s; ``math.inf`` disables it). A
    timeout or a cancellation terminates the whole process tree (see
    :class:`ShellOperations`); on cancellation no result is produced and
    ``trio.Cancelled`` propagates once the tree is gone.

    Args:
        cwd: working directory of every command.
        execution_policy: checked before every spawn.
        operations: how commands are spawned (default :class:`LocalShellOperations`,
            which is not contained).
        shell_path: the shell (default ``bash`` on ``PATH``, else ``/bin/sh``).
        command_prefix: shell text run before every command (for example ``set -e``).
        spawn_hook: rewrites the spawn request (host code, trusted).
        timeout_s: default timeout in seconds.
        max_timeout_s: ceiling for a call's own ``timeout``.
        max_lines: lines of output kept.
        max_bytes: bytes of output kept.
        max_line_bytes: longest line kept before clipping.
        max_spill_bytes: bound of the spill file.
        spill_dir: where spill files go (default the system temp directory).
        max_spill_total_bytes: bound of all the tool's spill files together
            (default four times ``max_spill_bytes``).
        env: the environment of commands (default: this process's at call time).

    Raises:
        CodingToolsConfigurationError: an option is out of range or of the wrong type.
    """
    owner = "create_shell_tool"
    cwd = check_cwd(owner, cwd)
    default_timeout = check_timeout(
        owner,
        "timeout_s",
        DEFAULT_SHELL_TIMEOUT_S if timeout_s is None else timeout_s,
        allow_inf=True,
    )
    ceiling = check_timeout(owner, "max_timeout_s", max_timeout_s, allow_inf=True)
    shell_operations = instance_of(ShellOperations, description="a ShellOperations")
    check_option(optional(shell_operations), owner, "operations", operations)
    check_option(optional(string()), owner, "shell_path", shell_path)
    check_option(optional(string(non_empty=False)), owner, "command_prefix", command_prefix)
    check_option(optional(callable_value()), owner, "spawn_hook", spawn_hook)
    check_option(optional(string()), owner, "spill_dir", spill_dir)
    mapping = instance_of(Mapping, description="a mapping of strings")
    check_option(optional(mapping), owner, "env", env)
    spill_bytes = check_positive_int(owner, "max_spill_bytes", max_spill_bytes)
    if operations is None:
        operations = LocalShellOperations()
    if shell_path is None:
        shell_path = default_shell_path()
    tool = _ShellTool(
        cwd=cwd,
        policy=execution_policy,
        operations=operations,
        shell_path=shell_path,
        command_prefix=command_prefix,
        spawn_hook=spawn_hook,
        timeout_s=default_timeout,
        max_timeout_s=ceiling,
        max_lines=check_positive_int(owner, "max_lines", max_lines),
        max_bytes=check_positive_int(owner, "max_bytes", max_bytes, maximum=64 * 1024 * 1024),
        max_line_bytes=check_positive_int(owner, "max_line_bytes", max_line_bytes),
        max_spill_bytes=spill_bytes,
        spill_dir=spill_dir,
        spills=SpillBook(
            max_total_bytes=4 * spill_bytes
            if max_spill_total_bytes is None
            else check_positive_int(owner, "max_spill_total_bytes", max_spill_total_bytes)
        ),
        env=dict(env) if env is not None else None,
    )
    return ToolDefinition(
        name="shell",
        execute=tool.execute,
        description=(
            f"Run a shell command in {cwd} (stdout and stderr merged). Output keeps the last "
            f"{max_lines} lines / {max_bytes} bytes; the full output of a long run is saved to "
            f"a file named in the result. Commands time out after {default_timeout:g} s unless "
            "'timeout' (seconds) says otherwise."
        ),
        parameters=_PARAMETERS,
        exclusive=True,
    )


def _redirected(value: object) -> RedirectedWrites | None:
    """A policy's ``metadata["redirected"]`` as :class:`RedirectedWrites`, else None."""
    if not isinstance(value, dict):
        return None
    try:
        return RedirectedWrites(command=value["command"], targets=value["targets"])
    except (KeyError, TypeError):
        return None


def _in_place(value: object) -> InPlaceEdits | None:
    """A policy's ``metadata["in_place"]`` as :class:`InPlaceEdits`, else None."""
    if not isinstance(value, dict):
        return None
    try:
        return InPlaceEdits(filter=value["filter"], files=value["files"], suffix=value["suffix"])
    except (KeyError, TypeError):
        return None


def _write_dirs(value: object) -> tuple[str, ...] | None:
    """A policy's ``metadata["write_dirs"]``: a list of absolute paths, else None."""
    if not isinstance(value, (list, tuple)):
        return None
    if not all(isinstance(item, str) and item.startswith("/") for item in value):
        return None
    return tuple(value)
