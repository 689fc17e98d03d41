"""The shell tool: output bounds, spill file, exit codes, policy and hooks."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from collections.abc import Awaitable, Callable
from pathlib import Path

import attrs
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prism.coding.tools import (
    InPlaceEdits,
    RedirectedWrites,
    ShellExit,
    ShellSpawnRequest,
    create_shell_tool,
)
from prism.core import (
    ExecutionAction,
    ExecutionDecision,
    JsonObject,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
)

RunTool = Callable[[ToolDefinition, JsonObject], Awaitable[ToolResult]]


class RecordingPolicy:
    """A real execution policy: records each action and answers with a fixed decision."""

    def __init__(self, decision: ExecutionDecision | None = None) -> None:
        self.actions: list[ExecutionAction] = []
        self.decision = decision or ExecutionDecision(allowed=True)

    def check(self, action: ExecutionAction) -> ExecutionDecision:
        self.actions.append(action)
        return self.decision


async def test_stdout_and_stderr_are_merged_in_order(tmp_path: Path, run_tool: RunTool) -> None:
    tool = create_shell_tool(str(tmp_path))
    result = await run_tool(tool, {"command": "echo one; echo two >&2; echo three"})
    assert not result.is_error
    assert result.joined_text == "one\ntwo\nthree\n"
    assert result.details["exit_code"] == 0


async def test_command_runs_in_cwd(tmp_path: Path, run_tool: RunTool) -> None:
    result = await run_tool(create_shell_tool(str(tmp_path)), {"command": "pwd"})
    assert result.joined_text.strip() == str(tmp_path)


async def test_nonzero_exit_is_an_error_that_keeps_the_output(
    tmp_path: Path, run_tool: RunTool
) -> None:
    result = await run_tool(create_shell_tool(str(tmp_path)), {"command": "echo oops; exit 7"})
    assert result.is_error
    assert result.joined_text.startswith("oops\n")
    assert "exited with code 7" in result.joined_text
    assert result.details["exit_code"] == 7
    assert result.details["signal"] is None


async def test_signal_is_reported_in_details(tmp_path: Path, run_tool: RunTool) -> None:
    result = await run_tool(create_shell_tool(str(tmp_path)), {"command": "kill -TERM $$"})
    assert result.is_error
    assert result.details["signal"] == 15
    assert result.details["exit_code"] is None


async def test_tail_is_kept_and_whole_output_spilled_to_private_file(
    tmp_path: Path, run_tool: RunTool
) -> None:
    tool = create_shell_tool(str(tmp_path), max_lines=10, spill_dir=str(tmp_path))
    result = await run_tool(tool, {"command": "seq 1 1000"})
    assert not result.is_error
    shown = result.joined_text.split("\n\n[")[0]
    assert shown.split("\n") == [str(n) for n in range(991, 1001)]
    spill = result.details["full_output_path"]
    assert isinstance(spill, str)
    assert spill in result.joined_text
    assert await trio.Path(spill).read_text() == "".join(f"{n}\n" for n in range(1, 1001))
    assert stat.S_IMODE((await trio.Path(spill).stat()).st_mode) == 0o600
    assert result.details["truncated"] is True
    assert result.details["total_lines"] == 1000


async def test_byte_bound_keeps_whole_lines_of_the_tail(tmp_path: Path, run_tool: RunTool) -> None:
    tool = create_shell_tool(str(tmp_path), max_bytes=100, spill_dir=str(tmp_path))
    result = await run_tool(tool, {"command": "seq 1 1000"})
    shown = result.joined_text.split("\n\n[")[0]
    assert len(shown.encode()) <= 100
    assert shown.endswith("1000")
    assert shown.split("\n")[0] == str(1000 - len(shown.split("\n")) + 1)


async def test_output_within_bounds_is_not_spilled(tmp_path: Path, run_tool: RunTool) -> None:
    tool = create_shell_tool(str(tmp_path), spill_dir=str(tmp_path))
    result = await run_tool(tool, {"command": "seq 1 10"})
    assert result.details["full_output_path"] is None
    assert list(await trio.Path(tmp_path).iterdir()) == []


async def test_long_lines_are_clipped_and_spilled(tmp_path: Path, run_tool: RunTool) -> None:
    tool = create_shell_tool(str(tmp_path), max_line_bytes=50, spill_dir=str(tmp_path))
    command = "head -c 5000 /dev/zero | tr '\\0' x; echo; echo end"
    result = await run_tool(tool, {"command": command})
    first, second = result.joined_text.split("\n")[:2]
    assert first == "x" * 50 + " [... line clipped]"
    assert second == "end"
    assert result.details["clipped"] is True
    spill = result.details["full_output_path"]
    assert isinstance(spill, str)
    assert await trio.Path(spill).read_text() == "x" * 5000 + "\nend\n"


async def test_spill_file_is_bounded(tmp_path: Path, run_tool: RunTool) -> None:
    tool = create_shell_tool(
        str(tmp_path), max_bytes=1000, max_spill_bytes=10_000, spill_dir=str(tmp_path)
    )
    result = await run_tool(tool, {"command": "seq 1 100000"})
    spill = result.details["full_output_path"]
    assert isinstance(spill, str)
    assert (await trio.Path(spill).stat()).st_size == 10_000
    assert result.details["spill_truncated"] is True
    assert "The first part of the output saved to" in result.joined_text


async def test_the_tools_spill_files_together_stay_within_their_bound(
    tmp_path: Path, run_tool: RunTool
) -> None:
    """Each cut result leaves a file; past max_spill_total_bytes the oldest are removed,
    never the newest, and never a file someone else put at a spill's path."""
    spills = tmp_path / "spills"
    spills.mkdir()
    tool = create_shell_tool(
        str(tmp_path),
        max_bytes=100,
        max_spill_bytes=4_000,
        max_spill_total_bytes=10_000,
        spill_dir=str(spills),
    )
    paths = []
    for _ in range(5):
        result = await run_tool(tool, {"command": "head -c 3000 /dev/zero | tr '\\0' x"})
        paths.append(result.details["full_output_path"])
    assert all(isinstance(path, str) for path in paths)
    # 3,000 bytes each: three fit in 10,000, the two oldest went
    assert sorted(str(p) for p in spills.iterdir()) == sorted(str(p) for p in paths[2:])
    # a file put at a counted spill's path is someone else's: it stays
    replaced = trio.Path(str(paths[2]))
    await replaced.unlink()
    await replaced.write_text("not the tool's")
    for _ in range(3):
        await run_tool(tool, {"command": "head -c 3000 /dev/zero | tr '\\0' x"})
    assert await replaced.read_text() == "not the tool's"
    assert len(list(spills.iterdir())) == 4
    # a single spill over the bound is kept: it is the newest
    big = create_shell_tool(
        str(tmp_path), max_bytes=100, max_spill_total_bytes=1_000, spill_dir=str(spills)
    )
    result = await run_tool(big, {"command": "head -c 5000 /dev/zero | tr '\\0' x"})
    assert (await trio.Path(str(result.details["full_output_path"])).stat()).st_size == 5000


async def test_spill_failure_is_reported_and_the_call_completes(
    tmp_path: Path, run_tool: RunTool
) -> None:
    missing = tmp_path / "no-such-dir"
    tool = create_shell_tool(str(tmp_path), max_lines=5, spill_dir=str(missing))
    result = await run_tool(tool, {"command": "seq 1 100"})
    assert not result.is_error
    assert result.joined_text.startswith("96\n97\n98\n99\n100")
    assert result.details["full_output_path"] is None
    assert "could not create the spill file" in str(result.details["spill_error"])
    assert "The full output was not saved" in result.joined_text


async def test_invalid_utf8_output_is_replaced_not_fatal(tmp_path: Path, run_tool: RunTool) -> None:
    result = await run_tool(create_shell_tool(str(tmp_path)), {"command": "printf 'a\\377b\\n'"})
    assert result.joined_text == "a\ufffdb\n"


async def test_policy_sees_shell_action_and_denial_prevents_spawn(
    tmp_path: Path, run_tool: RunTool
) -> None:
    policy = RecordingPolicy(
        ExecutionDecision(allowed=False, reason="no touching", details={"rule": "deny-touch"})
    )
    tool = create_shell_tool(str(tmp_path), execution_policy=policy)
    result = await run_tool(tool, {"command": "touch marker"})
    assert result.is_error
    assert "no touching" in result.joined_text
    assert result.details["execution_denied"] is True
    assert result.details["decision"] == {"rule": "deny-touch"}
    assert not (tmp_path / "marker").exists()
    [action] = policy.actions
    assert (action.kind, action.operation, action.command) == ("shell", "shell", "touch marker")
    assert action.paths == (str(tmp_path),)
    assert action.risk == "high"


async def test_policy_modified_command_and_cwd_are_what_runs(
    tmp_path: Path, run_tool: RunTool
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    policy = RecordingPolicy(
        ExecutionDecision(
            allowed=True, modified={"command": "echo rewritten; pwd", "paths": (str(other),)}
        )
    )
    tool = create_shell_tool(str(tmp_path), execution_policy=policy)
    result = await run_tool(tool, {"command": "echo original"})
    assert result.joined_text == f"rewritten\n{other}\n"


async def test_async_policy_is_awaited(tmp_path: Path, run_tool: RunTool) -> None:
    class SlowDeny:
        async def check(self, action: ExecutionAction) -> ExecutionDecision:
            await trio.lowlevel.checkpoint()
            return ExecutionDecision(allowed=False, reason="later, no")

    tool = create_shell_tool(str(tmp_path), execution_policy=SlowDeny())
    result = await run_tool(tool, {"command": "touch marker"})
    assert result.is_error
    assert not (tmp_path / "marker").exists()


async def test_command_prefix_runs_before_the_command(tmp_path: Path, run_tool: RunTool) -> None:
    tool = create_shell_tool(str(tmp_path), command_prefix="export GREETING=hi")
    result = await run_tool(tool, {"command": "echo $GREETING"})
    assert result.joined_text == "hi\n"


async def test_spawn_hook_may_rewrite_command_cwd_and_env(
    tmp_path: Path, run_tool: RunTool
) -> None:
    seen: list[ShellSpawnRequest] = []

    async def hook(request: ShellSpawnRequest) -> ShellSpawnRequest:
        seen.append(request)
        return ShellSpawnRequest(
            command=request.command + "; echo $HOOKED",
            shell_path=request.shell_path,
            cwd="/",
            env={**request.env, "HOOKED": "yes"},
        )

    tool = create_shell_tool(str(tmp_path), spawn_hook=hook, env={"PATH": os.environ["PATH"]})
    result = await run_tool(tool, {"command": "pwd"})
    assert result.joined_text == "/\nyes\n"
    assert seen[0].cwd == str(tmp_path)
    assert dict(seen[0].env) == {"PATH": os.environ["PATH"]}


async def test_env_option_replaces_the_environment(tmp_path: Path, run_tool: RunTool) -> None:
    tool = create_shell_tool(str(tmp_path), env={"ONLY": "this", "PATH": "/usr/bin:/bin"})
    result = await run_tool(tool, {"command": "echo ${ONLY}-${HOME:-unset}"})
    assert result.joined_text == "this-unset\n"


async def test_missing_cwd_is_an_error_result(tmp_path: Path, run_tool: RunTool) -> None:
    tool = create_shell_tool(str(tmp_path / "gone"))
    result = await run_tool(tool, {"command": "true"})
    assert result.is_error
    assert "could not run the command" in result.joined_text


async def test_per_call_timeout_is_capped_by_max_timeout(tmp_path: Path, run_tool: RunTool) -> None:
    tool = create_shell_tool(str(tmp_path), max_timeout_s=0.5)
    with trio.fail_after(10):
        result = await run_tool(tool, {"command": "sleep 30", "timeout": 10_000})
    assert result.details["timed_out"] is True
    assert result.details["timeout_s"] == 0.5


async def test_default_timeout_applies_without_a_timeout_argument(
    tmp_path: Path, run_tool: RunTool
) -> None:
    tool = create_shell_tool(str(tmp_path), timeout_s=0.3)
    with trio.fail_after(10):
        result = await run_tool(tool, {"command": "sleep 30"})
    assert result.details["timed_out"] is True


async def test_bad_arguments_are_rejected_without_spawning(
    tmp_path: Path, run_tool: RunTool
) -> None:
    policy = RecordingPolicy()
    tool = create_shell_tool(str(tmp_path), execution_policy=policy)
    bad: list[JsonObject] = [
        {},
        {"command": ""},
        {"command": 5},
        {"command": "true", "timeout": -1},
        {"command": "true", "timeout": "soon"},
        {"command": "true", "timeout": True},
        {"command": "a\0b"},
    ]
    for arguments in bad:
        result = await run_tool(tool, arguments)
        assert result.is_error, arguments
        assert "invalid arguments" in result.joined_text
    assert policy.actions == []


async def test_shell_tool_is_exclusive_and_named_shell(tmp_path: Path) -> None:
    tool = create_shell_tool(str(tmp_path))
    assert tool.name == "shell"
    assert tool.exclusive is True
    assert tool.parameters is not None
    assert tool.parameters["required"] == ["command"]


async def test_dispatch_through_core_gates(tmp_path: Path) -> None:
    from prism.core import (
        DispatchOptions,
        create_rule_permission_policy,
        create_tool_registry,
        dispatch_tool_call,
    )

    options = DispatchOptions(
        registry=create_tool_registry([create_shell_tool(str(tmp_path))]),
        permission=create_rule_permission_policy(allow=["tool:shell:execute"]),
    )
    call = ToolCall(id="1", name="shell", arguments={"command": "echo via dispatch"})
    result = await dispatch_tool_call(call, options)
    assert result.joined_text == "via dispatch\n"


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(st.text(alphabet="ab €", max_size=40), max_size=60),
    max_lines=st.integers(1, 20),
    max_bytes=st.integers(20, 400),
)
def test_tail_is_a_suffix_of_the_output_within_bounds(
    tmp_path: Path, lines: list[str], max_lines: int, max_bytes: int
) -> None:
    payload = tmp_path / "payload.txt"
    payload.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    tool = create_shell_tool(
        str(tmp_path), max_lines=max_lines, max_bytes=max_bytes, max_line_bytes=1000
    )

    async def main() -> ToolResult:
        ctx = ToolExecutionContext(call=ToolCall(id="h", name="shell", arguments={}))
        return await tool.execute({"command": "cat payload.txt"}, ctx)

    result = trio.run(main)
    full = payload.read_text(encoding="utf-8")
    shown = result.joined_text.split("\n\n[Output cut")[0]
    spill = result.details["full_output_path"]
    if isinstance(spill, str):
        assert Path(spill).read_text(encoding="utf-8") == full
        os.unlink(spill)
        kept = shown.rstrip("\n").split("\n") if shown.strip("\n") else []
        assert len(kept) <= max_lines
        assert len(shown.rstrip("\n").encode()) <= max_bytes
        assert full.rstrip("\n").endswith(shown.rstrip("\n"))
    else:
        assert shown == (full or "(no output)")


def test_memory_stays_bounded_on_200_mb_of_output(tmp_path: Path) -> None:
    # A fresh interpreter, so ru_maxrss measures this run alone.
    script = textwrap.dedent(
        """
        import json, resource, sys, trio
        from prism.core import ToolCall, ToolExecutionContext
        from prism.coding.tools import create_shell_tool

        async def main():
            tool = create_shell_tool(sys.argv[1], spill_dir=sys.argv[1])
            ctx = ToolExecutionContext(call=ToolCall(id="m", name="shell", arguments={}))
            # Warm up, so imports and the first spawn are in the baseline.
            await tool.execute({"command": "echo warm"}, ctx)
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            result = await tool.execute({"command": "yes | head -c 200000000"}, ctx)
            after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            print(json.dumps({"growth_kb": after - before, "details": dict(result.details)}))

        trio.run(main)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    import json

    report = json.loads(proc.stdout)
    details = report["details"]
    assert details["total_bytes"] == 200_000_000
    assert details["exit_code"] == 0
    assert details["shown_lines"] == 2000
    # Bounded: 2 x max_bytes (50 kB) + 20 MB, whatever the command printed.
    assert report["growth_kb"] * 1024 <= 2 * 50_000 + 20_000_000
    assert os.path.getsize(details["full_output_path"]) == 64 * 1024 * 1024


async def test_cancelled_call_removes_its_unfinished_spill_file(
    tmp_path: Path, run_tool: RunTool
) -> None:
    from prism.coding.tools import LocalShellOperations, OutputSink

    spill_dir = tmp_path / "spill"
    spill_dir.mkdir()
    seen = bytearray()
    done_printing = trio.Event()

    class Watching:
        async def run(self, request: ShellSpawnRequest, on_output: OutputSink) -> ShellExit:
            async def sink(chunk: bytes) -> None:
                seen.extend(chunk)
                await on_output(chunk)
                if seen.endswith(b"20000\n"):
                    done_printing.set()

            return await LocalShellOperations().run(request, sink)

    tool = create_shell_tool(
        str(tmp_path), operations=Watching(), max_lines=5, spill_dir=str(spill_dir)
    )
    arguments: JsonObject = {"command": "seq 1 20000; sleep 300"}
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_tool, tool, arguments)
            await done_printing.wait()
            assert len(list(await trio.Path(spill_dir).iterdir())) == 1
            nursery.cancel_scope.cancel()
    assert list(await trio.Path(spill_dir).iterdir()) == []


async def test_a_command_proved_to_write_nothing_is_spawned_read_only(
    tmp_path: Path, run_tool: RunTool
) -> None:
    """metadata["writes_nothing"] sets ShellSpawnRequest.read_only, unless a prefix runs too."""
    seen: list[bool] = []

    def hook(request: ShellSpawnRequest) -> ShellSpawnRequest:
        seen.append(request.read_only)
        return request

    proved = ExecutionDecision(allowed=True, modified={"metadata": {"writes_nothing": True}})
    for policy, prefix in (
        (RecordingPolicy(proved), None),
        (RecordingPolicy(proved), "export A=1"),
        (RecordingPolicy(), None),
        (RecordingPolicy(ExecutionDecision(allowed=True, modified={"metadata": {
            "writes_nothing": "yes"}})), None),
    ):  # fmt: skip
        tool = create_shell_tool(
            str(tmp_path), execution_policy=policy, spawn_hook=hook, command_prefix=prefix
        )
        result = await run_tool(tool, {"command": "true"})
        assert not result.is_error
    assert seen == [True, False, False, False]
    with pytest.raises(TypeError):
        ShellSpawnRequest(command="x", shell_path="/bin/sh", cwd="/", env={}, read_only=1)  # type: ignore[arg-type]


async def test_a_proved_write_set_reaches_the_spawn_request(
    tmp_path: Path, run_tool: RunTool
) -> None:
    """metadata["write_dirs"] sets ShellSpawnRequest.write_dirs (absolute paths only),
    unless a prefix runs too."""
    seen: list[tuple[str, ...] | None] = []

    def hook(request: ShellSpawnRequest) -> ShellSpawnRequest:
        seen.append(request.write_dirs)
        return request

    def deciding(value: object) -> RecordingPolicy:
        return RecordingPolicy(
            ExecutionDecision(allowed=True, modified={"metadata": {"write_dirs": value}})
        )

    for policy, prefix in (
        (deciding([str(tmp_path)]), None),
        (deciding([str(tmp_path)]), "export A=1"),
        (RecordingPolicy(), None),
        (deciding(str(tmp_path)), None),
        (deciding(["relative"]), None),
    ):
        tool = create_shell_tool(
            str(tmp_path), execution_policy=policy, spawn_hook=hook, command_prefix=prefix
        )
        result = await run_tool(tool, {"command": "true"})
        assert not result.is_error
    assert seen == [(str(tmp_path),), None, None, None, None]
    for bad in ("/a", ["a"], [1]):
        with pytest.raises(TypeError):
            ShellSpawnRequest(command="x", shell_path="/bin/sh", cwd="/", env={}, write_dirs=bad)  # type: ignore[arg-type]


async def test_proved_redirections_reach_the_spawn_request(
    tmp_path: Path, run_tool: RunTool
) -> None:
    """metadata["redirected"] sets ShellSpawnRequest.redirected when it is well formed,
    unless a prefix runs too; a malformed one is dropped (the line runs as usual)."""
    seen: list[RedirectedWrites | None] = []

    def hook(request: ShellSpawnRequest) -> ShellSpawnRequest:
        seen.append(request.redirected)
        return request

    def deciding(value: object) -> RecordingPolicy:
        return RecordingPolicy(
            ExecutionDecision(allowed=True, modified={"metadata": {"redirected": value}})
        )

    target = str(tmp_path / "out")
    good = {"command": ": >&4", "targets": [[4, target, False]]}
    for policy, prefix in (
        (deciding(good), None),
        (deciding(good), "export A=1"),
        (RecordingPolicy(), None),
        (deciding({"command": ": >&4"}), None),
        (deciding({"command": ": >&4", "targets": [[4, "out", False]]}), None),
        (deciding([good]), None),
    ):
        tool = create_shell_tool(
            str(tmp_path), execution_policy=policy, spawn_hook=hook, command_prefix=prefix
        )
        result = await run_tool(tool, {"command": "true"})
        assert not result.is_error
    assert seen == [RedirectedWrites(command=": >&4", targets=((4, target, False),)), *[None] * 5]
    # a hook that changes the command: the proved line no longer runs, so it is dropped
    ran: list[ShellSpawnRequest] = []

    class Recording:
        async def run(self, request: ShellSpawnRequest, on_output: object) -> ShellExit:
            ran.append(request)
            return ShellExit(exit_code=0)

    for rewrite, kept in (
        (lambda r: attrs.evolve(r, command=f"time {r.command}"), None),
        (lambda r: r, good),
        (lambda r: attrs.evolve(r, command="x", redirected=RedirectedWrites(
            command="y >&5", targets=[(5, target, True)])), {"command": "y >&5"}),
    ):  # fmt: skip
        tool = create_shell_tool(
            str(tmp_path), execution_policy=deciding(good), spawn_hook=rewrite,
            operations=Recording(),
        )  # fmt: skip
        assert not (await run_tool(tool, {"command": "true"})).is_error
        got = ran[-1].redirected
        assert (got is None) == (kept is None)
        assert got is None or kept is None or got.command == kept["command"]
    for bad in (
        [(2, "/a", False)],
        [(4, "/a", 0)],
        [(4, "/a")],
        [(4, "/a", True), (4, "/b", True)],
    ):
        with pytest.raises(TypeError):
            RedirectedWrites(command="x", targets=bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ShellSpawnRequest(command="x", shell_path="/bin/sh", cwd="/", env={}, redirected=good)  # type: ignore[arg-type]


async def test_proved_in_place_edits_reach_the_spawn_request(
    tmp_path: Path, run_tool: RunTool
) -> None:
    """metadata["in_place"] sets ShellSpawnRequest.in_place when it is well formed,
    unless a prefix runs too or a hook changes the line; a malformed one is dropped."""
    seen: list[InPlaceEdits | None] = []

    def hook(request: ShellSpawnRequest) -> ShellSpawnRequest:
        seen.append(request.in_place)
        return request

    def deciding(value: object) -> RecordingPolicy:
        return RecordingPolicy(
            ExecutionDecision(allowed=True, modified={"metadata": {"in_place": value}})
        )

    target = str(tmp_path / "f")
    good = {"filter": ["sed", "-e", "s/a/b/"], "files": [target], "suffix": ".bak"}
    for policy, prefix in (
        (deciding(good), None),
        (deciding(good), "export A=1"),
        (deciding({**good, "files": ["f"]}), None),  # not absolute
        (deciding({**good, "files": []}), None),
        (deciding({**good, "suffix": "/x"}), None),  # a backup elsewhere
        (deciding({**good, "suffix": "*"}), None),
        (deciding({"filter": ["sed"], "files": [target]}), None),
        (deciding({**good, "filter": "sed"}), None),
    ):
        tool = create_shell_tool(
            str(tmp_path), execution_policy=policy, spawn_hook=hook, command_prefix=prefix
        )
        assert not (await run_tool(tool, {"command": "true"})).is_error
    assert seen == [
        InPlaceEdits(filter=("sed", "-e", "s/a/b/"), files=(target,), suffix=".bak"),
        *[None] * 7,
    ]
    ran: list[ShellSpawnRequest] = []

    class Recording:
        async def run(self, request: ShellSpawnRequest, on_output: object) -> ShellExit:
            ran.append(request)
            return ShellExit(exit_code=0)

    for rewrite, kept in (
        (lambda r: attrs.evolve(r, command=f"time {r.command}"), False),
        (lambda r: attrs.evolve(r, cwd="/"), False),
        (lambda r: r, True),
    ):
        tool = create_shell_tool(
            str(tmp_path), execution_policy=deciding(good), spawn_hook=rewrite,
            operations=Recording(),
        )  # fmt: skip
        assert not (await run_tool(tool, {"command": "true"})).is_error
        assert (ran[-1].in_place is not None) == kept
