"""prism.coding.security costs: proved-safe decisions, path checks, contained I/O.

Run: uv run python benchmarks/bench_security.py [--json]
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import trio
from _harness import Row, row, run, time_async

from prism.coding.security import (
    ApprovalDecision,
    BubblewrapSandbox,
    CommandRules,
    LandlockSandbox,
    SandboxUnavailableError,
    create_coding_approval_policy,
    create_contained_file_operations,
    create_sandbox_shell_operations,
)
from prism.coding.tools import LocalFileOperations, LocalShellOperations, ShellSpawnRequest
from prism.core import ExecutionAction, ExecutionDecision, assert_execution_allowed

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

BENCH = "security"


class _BarePolicy:
    def check(self, action: ExecutionAction) -> ExecutionDecision:
        return ExecutionDecision(allowed=True)


async def main() -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        (root / "src").mkdir()
        (root / "src" / "a.py").write_text("x = 1\n" * 100)
        shell = ExecutionAction(
            kind="shell", operation="shell", command="git status --short", paths=(directory,)
        )
        bare = _BarePolicy()
        base = row(
            BENCH,
            "bare sync policy (baseline)",
            await time_async(lambda: assert_execution_allowed(bare, shell), inner=2000, repeat=7),
        )
        rows.append(base)
        policy = create_coding_approval_policy(roots=[directory])
        rows.append(
            row(
                BENCH,
                "proved safe: git status --short",
                await time_async(
                    lambda: assert_execution_allowed(policy, shell), inner=500, repeat=7
                ),
                baseline=base,
                note="cached parse; target < 50 us",
            )
        )
        counter = iter(range(10**9))

        def unique() -> ExecutionAction:
            return ExecutionAction(
                kind="shell",
                operation="shell",
                command=f"git status --short src/{next(counter)}",
                paths=(directory,),
            )

        rows.append(
            row(
                BENCH,
                "proved safe: first sight (bashlex parse)",
                await time_async(
                    lambda: assert_execution_allowed(policy, unique()), inner=200, repeat=5
                ),
                baseline=base,
                note="uncached parse",
            )
        )
        pipeline = ExecutionAction(
            kind="shell",
            operation="shell",
            command="ls -la src | grep py | wc -l",
            paths=(directory,),
        )
        rows.append(
            row(
                BENCH,
                "proved safe: 3-command pipeline",
                await time_async(
                    lambda: assert_execution_allowed(policy, pipeline), inner=500, repeat=7
                ),
                baseline=base,
            )
        )
        stages = ["cat src/a.py", "grep -n x", "sort", "uniq -c", "sort -rn", "head -50",
                  "cut -c1-80", "tr a-z A-Z", "nl", "tail -20"]  # fmt: skip
        long_pipeline = ExecutionAction(
            kind="shell",
            operation="shell",
            command=" | ".join((stages * 2)[:20]),
            paths=(directory,),
        )
        rows.append(
            row(
                BENCH,
                "proved safe: 20-command pipeline",
                await time_async(
                    lambda: assert_execution_allowed(policy, long_pipeline), inner=100, repeat=5
                ),
                baseline=base,
                note="cached parse",
            )
        )
        rules = CommandRules(allow=["make *"], deny=["git push *"])
        with_rules = create_coding_approval_policy(roots=[directory], command_rules=rules)
        make = ExecutionAction(
            kind="shell", operation="shell", command="make -j2 test", paths=(directory,)
        )
        rows.append(
            row(
                BENCH,
                "allow rule: make -j2 test",
                await time_async(
                    lambda: assert_execution_allowed(with_rules, make), inner=500, repeat=7
                ),
                baseline=base,
            )
        )
        read = ExecutionAction(kind="read", operation="read", paths=(str(root / "src" / "a.py"),))
        rows.append(
            row(
                BENCH,
                "path containment: read",
                await time_async(
                    lambda: assert_execution_allowed(policy, read), inner=2000, repeat=7
                ),
                baseline=base,
            )
        )

        async def approve(action: ExecutionAction) -> ApprovalDecision:
            return ApprovalDecision(approved=True)

        asking = create_coding_approval_policy(roots=[directory], approve=approve)
        chained = ExecutionAction(
            kind="shell", operation="shell", command="make && make test", paths=(directory,)
        )
        await assert_execution_allowed(asking, chained)
        rows.append(
            row(
                BENCH,
                "cached approval: make && make test",
                await time_async(
                    lambda: assert_execution_allowed(asking, chained), inner=500, repeat=7
                ),
                baseline=base,
            )
        )

        plain_ops = LocalFileOperations()
        contained_ops = create_contained_file_operations([directory])
        target = str(root / "src" / "a.py")
        plain_read = row(
            BENCH,
            "read 600 B: LocalFileOperations",
            await time_async(lambda: plain_ops.read(target, length=4096), inner=200, repeat=5),
        )
        rows.append(plain_read)
        rows.append(
            row(
                BENCH,
                "read 600 B: contained (O_NOFOLLOW walk)",
                await time_async(
                    lambda: contained_ops.read(target, length=4096), inner=200, repeat=5
                ),
                baseline=plain_read,
            )
        )

        async def sink(chunk: bytes) -> None:
            pass

        request = ShellSpawnRequest(
            command="true", shell_path="/bin/sh", cwd=directory, env={"PATH": "/usr/bin:/bin"}
        )
        local = LocalShellOperations()
        plain_spawn = row(
            BENCH,
            "spawn `true`: LocalShellOperations",
            await time_async(lambda: local.run(request, sink), inner=5, repeat=5),
        )
        rows.append(plain_spawn)
        if shutil.which("bwrap"):
            sandboxed = create_sandbox_shell_operations(BubblewrapSandbox([directory]))
            await sandboxed.run(request, sink)
            rows.append(
                row(
                    BENCH,
                    "spawn `true`: bubblewrap sandbox",
                    await time_async(lambda: sandboxed.run(request, sink), inner=5, repeat=5),
                    baseline=plain_spawn,
                )
            )
            rows.append(await _bubblewrap_in_a_repository(root / "repo", sink, plain_spawn))
        landlock = LandlockSandbox([directory])
        try:
            await landlock.ensure_available()
        except SandboxUnavailableError:
            pass  # no Landlock in this kernel: no row rather than a wrong one
        else:
            confined = create_sandbox_shell_operations(landlock)
            await confined.run(request, sink)
            rows.append(
                row(
                    BENCH,
                    "spawn `true`: Landlock sandbox",
                    await time_async(lambda: confined.run(request, sink), inner=5, repeat=5),
                    baseline=plain_spawn,
                )
            )
    return rows


async def _bubblewrap_in_a_repository(
    repo: Path, sink: Callable[[bytes], Awaitable[None]], baseline: Row
) -> Row:
    # 1000 directories, 2000 committed files: the protected-path walk of every
    # directory and the private copy of .git (the index) are paid per command
    for index in range(1000):
        (repo / f"d{index}").mkdir(parents=True)
        (repo / f"d{index}" / "a.py").write_text("x = 1\n")
        (repo / f"d{index}" / "b.txt").write_text("b\n")
    ident = ["-c", "user.name=b", "-c", "user.email=b@example.invalid"]
    for argv in (["init", "-q"], ["add", "-A"], [*ident, "commit", "-qm", "files"]):
        await trio.run_process(["git", *argv], cwd=repo)
    request = ShellSpawnRequest(
        command="true", shell_path="/bin/sh", cwd=str(repo), env={"PATH": "/usr/bin:/bin"}
    )
    shell = create_sandbox_shell_operations(BubblewrapSandbox([str(repo)]))
    await shell.run(request, sink)
    return row(
        BENCH,
        "spawn `true`: bubblewrap, git repo of 1000 dirs",
        await time_async(lambda: shell.run(request, sink), inner=5, repeat=5),
        baseline=baseline,
        note="walk + private .git",
    )


if __name__ == "__main__":
    run(main)
