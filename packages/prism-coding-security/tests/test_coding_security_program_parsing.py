"""Program models read an argv the way the real program parses it.

Each attack is a word the real program reads differently from a plain getopt
reading (an option cluster, a single-dash long option, an obsolete form, a
format conversion): the model must see what the program will do, or ask. Each
model is checked against the real program on this machine.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from typing import TYPE_CHECKING

import pytest
import trio
import trio.lowlevel

from prism.coding.security import explain_command, open_secure_coding_tools
from prism.core import ToolCall, ToolExecutionContext

if TYPE_CHECKING:
    from pathlib import Path


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, check=False, timeout=30)


@pytest.mark.parametrize(
    ("command", "outcome", "reason"),
    [
        # GNU env reads every option of a cluster: -v, then -S with the rest of the word
        ("env '-vSsudo id' true", "deny", "sudo *"),
        ("env '-vSsh -c id' true", "ask", "env -S splits its string"),
        ("env -vC/etc head -3 shadow", "ask", "env -C runs the command in another directory"),
        ("env -iC.. cat f", "ask", "env -C runs the command in another directory"),
        # a cluster whose last option takes the next word: that word is no command
        ("timeout -fs KILL 5 sudo id", "deny", "sudo *"),
        ("env -iu X ls", "allow", ""),
        ("env -uX -i ls", "allow", ""),
    ],
)
def test_every_option_of_a_wrapper_cluster_is_read(
    root: Path, command: str, outcome: str, reason: str
) -> None:
    (root / "f").write_text("x\n")
    explanation = explain_command(command, roots=[str(root)])
    assert explanation.outcome == outcome, explanation
    assert reason in explanation.reason


def test_real_env_runs_the_split_string_and_the_directory_of_a_cluster(root: Path) -> None:
    """What the model must see: GNU env honours -S and -C after another option."""
    split = _run(["env", "-vSecho split", "word"], root)
    assert split.stdout == b"split word\n"
    chdir = _run(["env", "-iC/", "pwd"], root)
    assert chdir.stdout == b"/\n"


@pytest.mark.parametrize(
    ("command", "outcome", "reason"),
    [
        # bash's printf skips the length modifiers hjlLtz: %hn is %n, it assigns PATH=0
        ("printf %hn PATH; head f", "ask", "printf %n assigns a shell variable"),
        ("printf '%zn' IFS", "ask", "printf %n assigns a shell variable"),
        ("printf -- '%-3ln' CDPATH", "ask", "printf %n assigns a shell variable"),
        ("printf 'a\\%n' X", "ask", "printf %n assigns a shell variable"),
        ("printf '%y' x", "ask", "the conversion at '%y' is not a proved one"),
        ("printf -x", "ask", "the option '-x' is not modelled"),
        ("printf '%-5.2f|%#x|%(%Y)T|%%n|%*.*s|%q\\n' 1 2 -1 3 4 x y", "allow", ""),
    ],
)
def test_printf_formats_are_read_as_bash_reads_them(
    root: Path, command: str, outcome: str, reason: str
) -> None:
    (root / "f").write_text("x\n")
    explanation = explain_command(command, roots=[str(root)])
    assert explanation.outcome == outcome, explanation
    assert reason in explanation.reason


def test_printf_assignments_ask_in_confined_mode_too(root: Path) -> None:
    """The subscript of the name %hn assigns is evaluated by bash: `sudo id` would run."""
    from prism.coding.security import BubblewrapSandbox

    line = "printf %hn 'a[$(sudo id)]'"
    explanation = explain_command(line, roots=[str(root)], sandbox=BubblewrapSandbox([str(root)]))
    assert explanation.outcome == "ask", explanation
    assert explanation.execute is None


# every conversion the model proves, in the shapes it proves them (flags, width,
# precision, length modifiers), and the shapes it must refuse
_PROVED_FORMATS = [
    f"%{flags}{width}{modifier}{conversion}"
    for flags in ("", "-", "#0", "'+ ")
    for width in ("", "5", "*", ".3", "5.*")
    for modifier in ("", "h", "ll", "z")
    for conversion in "csbqdiouxXeEfFgGaA"
] + ["%(%Y)T", "%%n", "50%%"]
_ASSIGNING_FORMATS = ["%n", "%hn", "%ln", "%zn", "%jn", "%tn", "%Ln", "%-5.3hhn", "%'0n"]


def test_real_bash_printf_assigns_only_where_the_model_asks(root: Path) -> None:
    """Differential against bash: a proved format leaves the variable after it alone,
    and every format the model calls an assignment really assigns it."""
    from prism.coding.security._languages import printf_assigns, printf_format_unsafe

    script = []
    for index, fmt in enumerate(_PROVED_FORMATS + _ASSIGNING_FORMATS):
        assert (printf_format_unsafe(fmt) is None) == (fmt in _PROVED_FORMATS), fmt
        assert printf_assigns(fmt) or fmt in _PROVED_FORMATS, fmt
        script.append(f'X=keep; printf {shlex.quote(fmt)} X 1 X >/dev/null 2>&1; echo "{index} $X"')
    result = _run(["bash", "-c", "\n".join(script)], root)
    seen = dict(line.split(" ", 1) for line in result.stdout.decode().splitlines())
    for index, fmt in enumerate(_PROVED_FORMATS + _ASSIGNING_FORMATS):
        assigned = seen[str(index)] != "keep"
        assert assigned == (fmt in _ASSIGNING_FORMATS), (fmt, seen[str(index)])


@pytest.mark.parametrize(
    ("command", "outcome", "reason"),
    [
        # xxd reads -ps whole (postscript), not -p then -s taking the next word
        ("xxd -ps /etc/passwd out", "ask", "outside the roots"),
        ("xxd -ps /etc/passwd", "ask", "outside the roots"),
        ("xxd -r -ps f .git/config", "ask", "a protected path"),
        # no permutation: the word after the input is the output file
        ("xxd f -p", "ask", "xxd writes '-p'"),
        ("xxd f -s/../.git/config", "ask", "a protected path"),
        ("xxd -gr 1 f", "ask", "the option '-gr' is not modelled"),
        ("xxd -pzzz f", "ask", "the option '-pzzz' is not modelled"),
        ("xxd -c 8 -g2 -seek 1 --ps f", "allow", ""),
        # tree gives a value option of a cluster the next word: -o (writes) would hide
        ("tree -Lo 2 out", "ask", "a value option in a cluster"),
        ("tree -ad -L 2", "allow", ""),
        ("xxd $X f", "ask", "computed at run time"),
        ("xxd -- $X", "ask", "an operand is computed at run time"),
        ("xxd -c", "ask", "missing or computed"),
        ("xxd f g h", "ask", "at most an input and an output"),
        ("xxd -r f -", "allow", ""),
        ("head $X f", "ask", "computed at run time"),
        ("tail -3 -- f", "allow", ""),
        ("find . -newerBa", "ask", "without a fixed value"),
        ("env -i -u", "ask", "needs a value"),
        ("printf", "allow", ""),
    ],
)
def test_options_of_programs_that_are_not_getopt(
    root: Path, command: str, outcome: str, reason: str
) -> None:
    (root / "f").write_text("x\n")
    explanation = explain_command(command, roots=[str(root)])
    assert explanation.outcome == outcome, explanation
    assert reason in explanation.reason


_XXD_ARGVS = [
    ["-ps", "a", "o1"], ["-p", "a"], ["a", "-p"], ["-c", "4", "a"], ["-c4", "b"],
    ["-cols", "4", "a"], ["-g2", "a"], ["--ps", "b"], ["--", "a"], ["-s", "-1", "a"],
    ["-l", "2", "b"], ["-len", "2", "a", "o2"], ["-o", "5", "a"], ["-i", "-n", "nm", "b"],
    ["-capitalize", "-i", "a"], ["-autoskip", "b"], ["-c", "4", "a", "-"], ["-seek", "1", "a"],
    ["-skip", "1", "a"], ["-s+1", "b"],
]  # fmt: skip


@pytest.mark.skipif(shutil.which("xxd") is None, reason="xxd is not installed")
def test_the_xxd_model_agrees_with_real_xxd(root: Path) -> None:
    """Differential: the files real xxd wrote are the model's writes, and a file whose
    bytes came out (on stdout or in a written file) is among the model's reads."""
    from prism.coding.security._programs import describe

    contents = {"a": b"\xa5" * 8, "b": b"\xc3" * 8}  # hex a5/c3: never in an offset
    for name, data in contents.items():
        (root / name).write_bytes(data)
    for argv in _XXD_ARGVS:
        use = describe(("xxd", *argv))
        assert use.verdict == "allow", (argv, use)
        result = _run(["xxd", *argv], root)
        written = sorted(p.name for p in root.iterdir() if p.name not in contents)
        output = result.stdout + b"".join((root / name).read_bytes() for name in written)
        for name in written:
            (root / name).unlink()
        assert written == sorted(use.writes), (argv, written, use)
        for name, data in contents.items():
            shown = data[:1].hex().encode() in output.lower() or data[:2] in output
            assert not shown or name in use.reads, (argv, name, use)


@pytest.mark.parametrize(
    "command",
    [
        # with POSIXLY_CORRECT, getopt stops at the first operand: -n and the path are files
        "POSIXLY_CORRECT=1 head f -n /etc/passwd",
        "POSIXLY_CORRECT=1; head f -n /etc/passwd",
        "env POSIXLY_CORRECT=1 head f -n /etc/passwd",
        "POSIXLY_CORRECT=1 uniq f -f/../.git/config",
    ],
)
def test_assigning_posixly_correct_asks(root: Path, command: str) -> None:
    (root / "f").write_text("x\n")
    explanation = explain_command(command, roots=[str(root)])
    assert explanation.outcome == "ask", explanation
    assert "POSIXLY_CORRECT" in explanation.reason


async def test_a_shell_environment_with_posixly_correct_proves_nothing(root: Path) -> None:
    """Real head reads the words after its first operand as files under POSIXLY_CORRECT;
    the same line, proved without it, asks when the shell tool's environment sets it."""
    (root / "f").write_text("first\n")
    (root / "g").write_text("second\n")
    env = {**os.environ, "POSIXLY_CORRECT": "1"}
    argv = ["head", "f", "-n", "g"]
    real = await trio.run_process(argv, cwd=root, env=env, capture_stdout=True, check=False)
    assert b"second" in real.stdout
    assert explain_command("head f -n 1", roots=[str(root)]).outcome == "allow"
    async with open_secure_coding_tools(
        [str(root)], sandbox="none", approve=None, shell_options={"env": env}
    ) as secure:
        shell = next(t for t in secure.tools if t.name == "shell")
        call = ToolCall(id="1", name="shell", arguments={"command": "head f -n 1"})
        with trio.fail_after(60):
            result = await shell.execute(
                {"command": "head f -n 1"}, ToolExecutionContext(call=call)
            )
    assert result.is_error
    assert "POSIXLY_CORRECT" in str(result.content[0].text)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "command",
    ["head -99999c /etc/passwd", "tail -99999c /etc/passwd", "tail -5 -- /etc/passwd",
     "tail +1 /etc/passwd", "head -3lq /etc/passwd", "head -5x f"],
)  # fmt: skip
def test_obsolete_counts_of_head_and_tail_take_no_value(root: Path, command: str) -> None:
    """coreutils reads `-99999c` as one option (99999 bytes): the next word is the file."""
    (root / "f").write_text("x\n")
    explanation = explain_command(command, roots=[str(root)])
    assert explanation.outcome == "ask", explanation


_COUNT_ARGVS = [
    ["head", "-99c", "a"], ["tail", "-99c", "b"], ["head", "-2", "a"], ["tail", "-5", "--", "b"],
    ["tail", "+1", "a"], ["tail", "-5c", "3", "a"], ["head", "-3lq", "b"], ["tail", "-3l", "a"],
    ["head", "-c", "2", "a", "b"], ["tail", "-n1", "b"], ["head", "-1c", "-v", "a"],
]  # fmt: skip


def test_the_head_and_tail_models_agree_with_the_real_programs(root: Path) -> None:
    """Differential: a file whose bytes real head or tail printed is among the model's reads."""
    from prism.coding.security._programs import describe

    contents = {"a": b"AAAA\n" * 3, "b": b"BBBB\n" * 3}
    for name, data in contents.items():
        (root / name).write_bytes(data)
    for argv in _COUNT_ARGVS:
        use = describe(tuple(argv))
        assert use.verdict == "allow", (argv, use)
        output = _run(argv, root).stdout
        for name, data in contents.items():
            assert data[:1] not in output or name in use.reads, (argv, name, use)


@pytest.mark.git
def test_git_diff_with_a_path_outside_is_no_index_and_asks(root: Path, tmp_path: Path) -> None:
    """git diff OUTSIDE OTHER is git's implicit --no-index: real git prints the file."""
    outside = tmp_path / "secret.txt"
    outside.write_text("secret line\n")
    (root / "f").write_text("x\n")
    _run(["git", "init", "-q"], root)
    real = _run(["git", "diff", "--no-ext-diff", str(outside), "/dev/null"], root)
    assert b"-secret line" in real.stdout
    # -U takes no separate value (git's -U<n>): the path after it is the first of the two
    for command in (
        f"git diff {outside} /dev/null",
        f"git diff --stat {outside} f",
        f"git diff -U {outside} f",
        f"git diff f -U {outside}",
    ):
        explanation = explain_command(command, roots=[str(root)])
        assert explanation.outcome == "ask", explanation
        assert "outside the roots" in explanation.reason
    assert explain_command("git diff HEAD~1 -- f", roots=[str(root)]).outcome == "allow"


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")
def test_jq_words_of_a_dash_and_no_letter_ask(root: Path, tmp_path: Path) -> None:
    """jq 1.6 takes `-0` for its filter: the word after it, checked as the filter, is a file."""
    outside = tmp_path / "secret.txt"
    outside.write_text("one\ntwo\n")
    version = _run(["jq", "--version"], root).stdout
    real = _run(["jq", "-R", "-0", str(outside)], root)
    if version.startswith(b"jq-1.6"):
        assert real.stdout == b"-0\n-0\n"  # it read the file, line by line
    for command in (f"jq -R -0 {outside}", "jq -n -1", "jq -0 f.json"):
        explanation = explain_command(command, roots=[str(root)])
        assert explanation.outcome == "ask", explanation
    assert explain_command("jq -nr . -- -0", roots=[str(root)]).outcome == "allow"


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        # -F is a flag (only --classify takes a value): -L after it is seen
        ("ls -FLl f", "--dereference is never proved safe"),
        ("realpath -e --relative-to=/etc f", "outside the roots"),
        ("git rev-parse --resolve-git-dir /etc", "outside the roots"),
        ("find . -newermm /etc/passwd", "outside the roots"),
        ("find . -newerBa /etc/passwd", "outside the roots"),
        ("date -d 'TZ=\"/etc/passwd\" now'", "reads a zone file it names"),
        ("diff -l f f", "--paginate is never proved safe"),
    ],
)
def test_values_that_look_at_outside_paths_ask(root: Path, command: str, reason: str) -> None:
    (root / "f").write_text("x\n")
    explanation = explain_command(command, roots=[str(root)])
    assert explanation.outcome == "ask", explanation
    assert reason in explanation.reason


def test_short_options_of_optional_value_groups_are_flags_as_getopt_reads_them(
    root: Path,
) -> None:
    """Real ls and sort: -F and -c take no value, so the rest of the cluster is options."""
    (root / "f").write_text("b\na\n")
    assert _run(["ls", "-Fd", "."], root).stdout == b"./\n"
    assert _run(["sort", "-cr", "f"], root).returncode == 0
    for command in ("ls -Fd .", "sort -cr f", "diff -C 3 f f", "sed -n -ibak p f"):
        explanation = explain_command(command, roots=[str(root)])
        assert (explanation.outcome == "allow") == (not command.startswith("sed")), explanation


@pytest.mark.parametrize(
    "path",
    [".venv/lib/python3.11/site-packages/_cov.pth", ".venv/bin/activate",
     "env/lib/python3.12/site-packages/usercustomize.py", ".venv/pyvenv.cfg"],
)  # fmt: skip
async def test_the_write_tool_leaves_what_a_venv_python_runs_alone(root: Path, path: str) -> None:
    """A .pth in site-packages runs at the host's next python start in that venv."""
    (root / path).parent.mkdir(parents=True)
    async with open_secure_coding_tools([str(root)], sandbox="none", approve=None) as secure:
        write = next(t for t in secure.tools if t.name == "write")
        call = ToolCall(id="1", name="write", arguments={"path": path, "content": "import os\n"})
        with trio.fail_after(60):
            result = await write.execute(
                {"path": path, "content": "import os\n"}, ToolExecutionContext(call=call)
            )
    assert result.is_error, result
    assert not (root / path).exists()


async def test_a_long_line_is_judged_off_the_event_loop(root: Path) -> None:
    """A line past 4,096 characters is judged in a worker thread: other tasks run
    meanwhile, and the decision comes through the same gates."""
    import inspect

    from prism.coding.security import create_coding_approval_policy
    from prism.coding.security._policy import INLINE_JUDGE_CHARS
    from prism.core import ExecutionAction, ExecutionDecision

    policy = create_coding_approval_policy(roots=[str(root)])
    line = "echo" + " word" * 1000
    assert len(line) > INLINE_JUDGE_CHARS
    action = ExecutionAction(kind="shell", operation="shell", command=line, paths=(str(root),))
    ticks = 0
    done = trio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        pending = policy.check(action)
        assert inspect.isawaitable(pending)
        decision = await pending
        done.set()
    assert ticks > 1
    assert isinstance(decision, ExecutionDecision)
    assert decision.details["kind"] == "shell"
    assert decision.details["policy"] == "coding_approval"


async def test_a_long_line_that_asks_reaches_the_approver(root: Path) -> None:
    """The worker-thread path keeps every gate: the approver is asked, with the reason."""
    from prism.coding.security import create_coding_approval_policy
    from prism.core import ExecutionAction, ExecutionDecision

    asked: list[ExecutionAction] = []

    def approve(action: ExecutionAction) -> bool:
        asked.append(action)
        return False

    policy = create_coding_approval_policy(roots=[str(root)], approve=approve)
    line = "make" + " target" * 700
    action = ExecutionAction(kind="shell", operation="shell", command=line, paths=(str(root),))
    pending = policy.check(action)
    assert not isinstance(pending, ExecutionDecision)
    decision = await pending
    assert not decision.allowed
    assert [a.command for a in asked] == [line]
    assert "'make' is not in the safe set" in str(asked[0].metadata["approval_reason"])
    assert len(line) > 4096


@pytest.mark.parametrize(
    "line",
    [
        ":;" * 2100,
        # line breaks end commands too (21,000 of them were judged one by one, seconds)
        ":\n" * 2100,
        # quoting the plain split cannot follow: every separator counts
        'echo "\'";' + ":|" * 2100 + 'echo "\'"',
        "echo $'\\'';" + ":|" * 2100 + "echo '",
        "echo # '\n" + ":|" * 2100 + "'",
    ],
)
def test_a_line_of_thousands_of_commands_asks_unparsed(root: Path, line: str) -> None:
    explanation = explain_command(line, roots=[str(root)])
    assert explanation.outcome == "ask"
    assert "more than 2048 of '|', ';', '&' and line breaks" in explanation.reason


def test_separators_inside_single_quotes_are_not_commands(root: Path) -> None:
    """A markdown table in single quotes holds thousands of '|' but one command."""
    table = "\n".join("| a | b | c | d |" for _ in range(450))
    explanation = explain_command(f"echo '{table}'", roots=[str(root)])
    assert explanation.outcome == "allow", explanation.reason
    # nor are a here-document's lines
    lines = "\n".join(f"row {n}" for n in range(2100))
    explanation = explain_command(f"cat <<END\n{lines}\nEND", roots=[str(root)])
    assert "more than 2048" not in explanation.reason
    assert "cat" in explanation.reason  # judged, not refused unparsed


async def test_lines_with_globs_and_writes_to_unwatched_roots_are_judged_in_a_thread(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A glob lists directories, and a write's check walks a root its watch does not keep:
    both may take long, so both are judged off the event loop; the rest answers at once.
    (Outside an event loop everything is judged at once.)"""
    import inspect

    from prism.coding.security import _implied, create_coding_approval_policy
    from prism.core import ExecutionAction, ExecutionDecision

    policy = create_coding_approval_policy(roots=[str(root)])

    def check(kind: str, command: str | None = None) -> bool:
        paths = (str(root / "a.txt"),) if kind != "shell" else (str(root),)
        action = ExecutionAction(kind=kind, operation=kind, command=command, paths=paths)
        decision = policy.check(action)
        if inspect.isawaitable(decision):
            decision.close()  # type: ignore[attr-defined]
            return True
        return False

    assert not check("shell", "ls a.txt")
    assert not check("shell", "[ -f a.txt ]")
    assert check("shell", "ls *.txt")
    assert check("shell", "ls a?.txt")
    assert check("shell", "ls [ab].txt")
    assert check("shell", "cd sub; ls")
    decided = await trio.to_thread.run_sync(
        policy.check,
        ExecutionAction(kind="shell", operation="shell", command="ls *.txt", paths=(str(root),)),
    )
    assert isinstance(decided, ExecutionDecision)  # no event loop in that thread
    _implied.implied_protected(str(root), policy.protected)  # type: ignore[attr-defined]
    assert not check("write")  # watched once walked
    monkeypatch.setattr(_implied, "MAX_WATCHED_DIRECTORIES", 0)  # too large to watch
    for key in list(_implied._watched):
        _implied._unwatch(key)
    _implied.implied_protected(str(root), policy.protected)  # type: ignore[attr-defined]
    try:
        assert check("write")  # walked, not watched: walked again on each check
    finally:
        _implied._unwatched.clear()
    assert check("write")  # (no answer kept: the next check walks)


async def test_a_writes_check_waits_for_the_roots_walk_off_the_event_loop(root: Path) -> None:
    """The first write check in a root walks it, or waits for the walk the tools started on
    opening (a root of 30,000 directories held the event loop 3-5 s): while no answer is
    kept by the walk's watch, or a walk is under way, the check waits in a thread and the
    loop runs on; once the answer is kept, it is given at once."""
    import inspect
    import threading

    from prism.coding.security import _implied, create_coding_approval_policy
    from prism.core import ExecutionAction, ExecutionDecision

    (root / "d").mkdir()
    policy = create_coding_approval_policy(roots=[str(root)])
    action = ExecutionAction(kind="write", operation="write", paths=(str(root / "a.txt"),))
    held, released = threading.Event(), threading.Event()
    timed_out: list[bool] = []

    def walking() -> None:  # another thread's walk under way (the warming one's)
        with _implied._walk_lock:
            held.set()
            timed_out.append(not released.wait(20))  # (a fail-safe: the check waited)

    thread = threading.Thread(target=walking)
    thread.start()
    try:
        await trio.to_thread.run_sync(held.wait)
        pending = policy.check(action)  # (on the loop: the walk's lock is never waited on)
        released.set()
        assert inspect.isawaitable(pending)
        decision = await pending
    finally:
        released.set()
        await trio.to_thread.run_sync(thread.join)
    assert timed_out == [False]
    assert isinstance(decision, ExecutionDecision)
    assert decision.allowed
    assert isinstance(policy.check(action), ExecutionDecision)  # the answer kept: at once
    (root / "d" / "x.txt").write_text("")  # (a file: the kept answer stands)
    assert isinstance(policy.check(action), ExecutionDecision)


def test_a_line_of_cds_that_may_fail_is_judged_within_bounds(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each `cd a || cd b` may double the directories the line may be in, and each later
    command was judged in every one of them (12 of them: 15 s on the event loop). Past
    16 directories the line asks; past 2,048 command-directory judgements the rest of the
    line is not judged (it asks); a deny rule met before still denies."""
    from prism.coding.security import _judge
    from prism.coding.security._policy import judged_in_thread

    (root / "a").mkdir()
    (root / "b").mkdir()
    line = "cd a || cd b; " * 12 + "ls"
    assert judged_in_thread(line)
    explanation = explain_command(line, roots=[str(root)], cwd=str(root))
    assert explanation.outcome == "ask"
    assert "the line may be in any of more than 16 directories" in explanation.reason
    assert explain_command("cd a || cd b; " * 12 + "rm -rf /", roots=[str(root)]).outcome == (
        "deny"
    )
    assert explain_command("cd a || cd b; ls", roots=[str(root)]).outcome == "allow"
    monkeypatch.setattr(_judge, "MAX_LINE_WORK", 5)
    costly = explain_command("cd a; ls; ls; ls; ls; ls", roots=[str(root)], cwd=str(root))
    assert costly.outcome == "ask"
    assert "too many to judge" in costly.reason


def test_a_line_whose_git_may_be_in_several_repositories_is_judged_off_the_event_loop() -> None:
    """Each repository a line's git is in has its configuration listed by a git process
    the first time: 200 nested repositories named in one line held the event loop for
    seconds. Such a line is judged in a worker thread; one plain git command is not."""
    from prism.coding.security._policy import judged_in_thread

    for line in (
        "git -C e1 log; git -C e2 log",
        "git add -A && git commit -m x",
        "git --git-dir=x/.git log",
        "git --work-tree sub status",
        "git -C sub status",
    ):
        assert judged_in_thread(line), line
    for line in ("git status --short", "git log -1 --oneline", "ls -C sub", "echo git"):
        assert not judged_in_thread(line), line


def test_a_path_entry_is_judged_where_it_leads_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`.venv` linked to a directory outside the roots, then replaced by a real directory
    holding `ls`: the next `ls` asks (the PATH entries' targets were kept from the first
    line, and the planted `ls` ran as the proved one)."""
    root = tmp_path / "root"
    outside = tmp_path / "venvs" / "x" / "bin"
    outside.mkdir(parents=True)
    root.mkdir()
    (root / ".venv").symlink_to(outside.parent)
    monkeypatch.setenv("PATH", f"{root}/.venv/bin:/usr/bin:/bin")
    assert explain_command("ls", roots=[str(root)]).outcome == "allow"
    (root / ".venv").unlink()
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "ls").write_text("#!/bin/sh\necho planted\n")
    (root / ".venv" / "bin" / "ls").chmod(0o755)
    assert explain_command("ls", roots=[str(root)]).outcome == "ask"
