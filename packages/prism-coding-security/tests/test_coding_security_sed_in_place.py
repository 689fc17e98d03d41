"""`sed -i` whose script is a text filter: run read-only, each file replaced by the host.

The policy proves the line one ``sed -i`` with a script in the filter subset
(``in_place``); bubblewrap then opens each file and a new file beside it, runs the
same ``sed`` without ``-i`` on them with the roots read-only, and replaces the file
as GNU ``sed -i`` does. Compared byte for byte with real GNU ``sed -i`` run
unsandboxed; attacked with requests a hostile model could make the policy prove or
a request could name. Real bubblewrap, real sed.
"""

from __future__ import annotations

import itertools
import os
import shlex
import stat
import subprocess
from typing import TYPE_CHECKING

import pytest
import trio
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from prism.coding.security import (
    BubblewrapSandbox,
    create_coding_approval_policy,
    create_sandbox_shell_operations,
    explain_command,
)
from prism.coding.security._inplace import discard_edits, open_edits
from prism.coding.security._protected import ProtectedPaths
from prism.coding.tools import InPlaceEdits, ShellSpawnRequest
from prism.core import ExecutionAction, ExecutionDecision

if TYPE_CHECKING:
    from pathlib import Path

_ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "LC_ALL": "C.UTF-8",
    "HOME": "/nonexistent",
}
_BASH = "/bin/bash"


def _in_place(root: Path, command: str, cwd: Path | None = None) -> InPlaceEdits | None:
    found = explain_command(
        command, roots=[str(root)], cwd=str(cwd or root), sandbox=BubblewrapSandbox([str(root)])
    )
    if found.in_place is None:
        return None
    argv, files, suffix = found.in_place
    return InPlaceEdits(filter=argv, files=files, suffix=suffix)


@pytest.mark.parametrize(
    ("command", "argv", "suffix"),
    [
        ("sed -i s/1/2/ d/a", ("sed", "-e", "s/1/2/"), ""),
        (
            "sed -i.bak -n -E -e p -e 's/(a)/\\1/' d/a",
            ("sed", "-n", "-E", "-e", "p", "-e", "s/(a)/\\1/"),
            ".bak",
        ),
        (
            "sed --in-place=~ -s -z --follow-symlinks y/ab/ba/ d/a",
            ("sed", "-z", "-e", "y/ab/ba/"),
            "~",
        ),
        ("sed -i.bak -i 1d d/a", ("sed", "-e", "1d"), ""),  # the last -i counts: no backup
        ("sed -ri -- '$!N;P;D' d/a", ("sed", "-E", "-e", "$!N;P;D"), ""),
        ("sed -i -l 5 l d/a d/b", ("sed", "-l", "5", "-e", "l"), ""),
    ],
)
def test_a_sed_i_whose_script_is_a_filter_is_proved_one(
    root: Path, command: str, argv: tuple[str, ...], suffix: str
) -> None:
    (root / "d").mkdir()
    found = _in_place(root, command)
    assert found is not None
    assert found.filter == argv
    assert found.suffix == suffix
    named = [w for w in shlex.split(command) if w.startswith("d/")]
    assert found.files == tuple(f"{root}/{name}" for name in named)


@pytest.mark.parametrize(
    "command",
    [
        "sed -i 'w out' d/a",  # writes a file
        "sed -i 's/a/b/w out' d/a",
        "sed -i W\\ out d/a",
        "sed -i 's/a/date/e' d/a",  # runs a command
        "sed -i '1e date' d/a",
        "sed -i 'r /etc/passwd' d/a",  # reads a file
        "sed -i 'R d/b' d/a",
        "sed -i F d/a",  # prints the file's name
        "sed -i 2q d/a d/b",  # ends every file after it
        "sed -i x d/a d/b",  # the hold space, in several files
        "sed -i Q5 d/a",
        "sed -i 'a x' d/a",  # text commands are not read here
        "sed -i --debug p d/a",  # its listing would go into the file
        "sed -i -f d/b d/a",
        "sed -i s/a/b/ d/a d/a",  # one file twice
        "sed -i.bak s/a/b/ d/a d/a.bak",  # a backup over another file
        "sed -i s/a/b/ l/a",  # through a link
        "sed -i s/a/b/ -",
        "sed -i s/a/b/ d/a > out",  # another write
        "sed -i s/a/b/ d/a; cat d/a",
        "LC_ALL=C sed -i s/a/b/ d/a",
        "sed -i s/a/b/ .envrc",  # protected: asks
        "sed -i s/a/b/ ../x",  # outside the roots: asks
        "sed -i s/a/b/ d/*",  # (one match: proved; see the next)
        "sed -i s/a/b/ d/a d/b d/c d/d d/e d/f d/g d/h d/i",  # many files: the layer
        "sed s/a/b/ d/a",  # writes nothing
        "cd d && sed -i s/a/b/ a",
    ],
)
def test_a_sed_i_that_is_not_a_filter_keeps_its_private_layer(root: Path, command: str) -> None:
    (root / "d").mkdir()
    (root / "d" / "a").write_text("a\n")
    os.symlink("d", root / "l")
    found = _in_place(root, command)
    assert (found is not None) == (command == "sed -i s/a/b/ d/*")


def test_posixly_correct_keeps_the_private_layer(root: Path) -> None:
    """With POSIXLY_CORRECT sed reads every word after its first file as a file."""
    (root / "a").write_text("a\n")
    policy = create_coding_approval_policy(
        roots=[str(root)], sandbox=BubblewrapSandbox([str(root)])
    )
    seen: list[object] = []
    for posix in (False, True):
        action = ExecutionAction(kind="shell", operation="shell", command="sed -i s/a/b/ a",
                                 paths=(str(root),),
                                 metadata={"env_posixly_correct": posix})  # fmt: skip
        decision = policy.check(action)
        assert isinstance(decision, ExecutionDecision)
        assert decision.allowed
        assert decision.modified is not None
        metadata = decision.modified["metadata"]
        assert isinstance(metadata, dict)
        seen.append(metadata.get("in_place"))
    assert seen == [{"filter": ["sed", "-e", "s/a/b/"], "files": [f"{root}/a"], "suffix": ""},
                    None]  # fmt: skip


# -- against real GNU sed -i ----------------------------------------------------------------

_REGEX = st.sampled_from(["a", "b", "^a", "a*", ".", "b$", "[ab]", "", "\r", "x\\|a"])
_TEXT = st.sampled_from(["X", "&&", "", "\\n", "<&>", "y"])
_ADDRESS = st.sampled_from(
    ["", "1", "2", "$", "/a/", "2,3", "/a/,/b/", "1~2", "0,/b/", "$!", "/b/!", "2,$", "\\%a%I"]
)
_ALONE = ["p", "d", "=", "l", "z", "n", "N", "P"]
_HOLD = ["G", "h", "H", "g", "x"]  # with one file only


@st.composite
def _commands(draw: st.DrawFn, hold: bool) -> str:
    plain = st.sampled_from(_ALONE + _HOLD if hold else _ALONE)
    kind = draw(st.sampled_from(["s", "s", "y", "plain", "plain", "block", "loop"]))
    if kind == "loop":  # labels, branches and D, in loops that end
        return draw(st.sampled_from([":a;s/aa/a/;ta", "$!N;P;D", ":b;/a$/{N;bb;};s/\\n/+/g",
                                     "s/a/A/;T;s/b/B/", "N;D"]))  # fmt: skip
    if kind == "s":
        flags = draw(st.sampled_from(["", "g", "2", "p", "gp", "I"]))
        command = f"s/{draw(_REGEX)}/{draw(_TEXT)}/{flags}"
    elif kind == "y":
        command = draw(st.sampled_from(["y/ab/ba/", "y/a\\n/\\nA/", "y/\r/R/"]))
    elif kind == "plain":
        command = draw(plain)
    else:
        command = "{" + draw(plain) + ";" + draw(plain) + "}"
    return draw(_ADDRESS) + command


@st.composite
def _scripts(draw: st.DrawFn, hold: bool) -> list[str]:
    """The script as sed's words: one operand (after `--` or not), or `-e` parts."""
    commands = draw(st.lists(_commands(hold), min_size=1, max_size=4))
    form = draw(st.sampled_from(["operand", "--", "-e"]))
    if any(":" in command for command in commands):
        form = "-e"  # a label ends at a newline or a `;`, not where the next command starts
    if form == "-e":
        return [word for command in commands for word in ("-e", command)]
    joined = draw(st.sampled_from([";", "\n"])).join(commands)
    return ["--", joined] if form == "--" else [joined]


_LINE = st.binary(max_size=6).map(lambda b: bytes(b"ab\r\xff\x00"[c % 5] for c in b))


@st.composite
def _contents(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(_LINE, max_size=5))
    text = b"\n".join(lines)
    ended = draw(st.booleans())
    if lines and ended:
        text += b"\n"
    return text


@st.composite
def _cases(draw: st.DrawFn) -> tuple[list[str], list[bytes]]:
    options = draw(st.lists(st.sampled_from(["-n", "-E", "-s", "-z", "--posix"]), max_size=2,
                            unique=True))  # fmt: skip
    in_place = draw(st.sampled_from(["-i", "-i.bak", "--in-place=~"]))
    contents = draw(st.lists(_contents(), min_size=1, max_size=3))
    return [*options, in_place, *draw(_scripts(len(contents) == 1))], contents


class _World:
    """One root, one sandbox (probed once), one plain directory, shared by every case."""

    def __init__(self, top: Path) -> None:
        self.root = top / "root"
        self.plain = top / "plain"
        self.root.mkdir()
        self.plain.mkdir()
        self.sandbox = BubblewrapSandbox([str(self.root)])
        self.ops = create_sandbox_shell_operations(self.sandbox)
        self.numbers = itertools.count()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> _World:
    return _World(tmp_path_factory.mktemp("sed-in-place"))


def _snapshot(directory: Path) -> dict[str, tuple[int, bytes]]:
    return {
        name: (os.lstat(directory / name).st_mode, (directory / name).read_bytes())
        for name in sorted(os.listdir(directory))
    }


async def _sandboxed(world: _World, cwd: Path, command: str) -> tuple[int | None, bytes]:
    edits = _in_place(world.root, command, cwd)
    assert edits is not None, command
    chunks: list[bytes] = []

    async def sink(chunk: bytes) -> None:
        chunks.append(chunk)

    request = ShellSpawnRequest(command=command, shell_path=_BASH, cwd=str(cwd), env=_ENV,
                                in_place=edits)  # fmt: skip
    await world.sandbox.ensure_available()
    with trio.fail_after(60):
        # the backend's own way, not through the operations: None would mean that the
        # line fell back to its private layer, which this test is not about
        result = await world.sandbox._run_in_place(request, sink, 1.0)
    assert result is not None, command
    return result.exit_code, b"".join(chunks)


@pytest.mark.bwrap
@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_cases())
@example(case=(["-i", "s//x/"], [b"", b"a\n", b"b\n"]))  # no previous regex: stops at the 2nd
@example(case=(["-i.bak", "$d"], [b"a\nb", b"", b"a\r\nb\r\n"]))
@example(case=(["-n", "-i", "/a/,/b/p;$="], [b"a\nx\n", b"x\nb\n"]))
def test_the_files_and_status_are_those_of_sed_i(
    world: _World, case: tuple[list[str], list[bytes]]
) -> None:
    """Each file's bytes and mode, the backups, nothing else left in the directory, and
    the exit status: the same as GNU `sed -i` run unsandboxed on the same files."""
    args, contents = case
    number = next(world.numbers)
    names = [f"f{n}" for n in range(len(contents))]
    directories = (world.root / f"c{number}", world.plain / f"c{number}")
    for directory in directories:
        directory.mkdir()
        for n, (name, content) in enumerate(zip(names, contents, strict=True)):
            (directory / name).write_bytes(content)
            os.chmod(directory / name, (0o640, 0o755, 0o444)[n % 3])
    argv = ["sed", *args, *names]
    plain = subprocess.run(argv, cwd=directories[1], env=_ENV, capture_output=True, check=False)
    status, output = trio.run(_sandboxed, world, directories[0], shlex.join(argv))
    assert (status, _snapshot(directories[0])) == (plain.returncode, _snapshot(directories[1])), (
        argv,
        output,
        plain.stderr,
    )


# -- attacks --------------------------------------------------------------------------------


async def _run_hostile(
    sandbox: BubblewrapSandbox, root: Path, edits: InPlaceEdits
) -> tuple[int | None, bytes]:
    chunks: list[bytes] = []

    async def sink(chunk: bytes) -> None:
        chunks.append(chunk)

    request = ShellSpawnRequest(command="true", shell_path=_BASH, cwd=str(root), env=_ENV,
                                in_place=edits)  # fmt: skip
    await sandbox.ensure_available()
    with trio.fail_after(60):
        result = await sandbox._run_in_place(request, sink, 1.0)
    assert result is not None
    return result.exit_code, b"".join(chunks)


@pytest.mark.bwrap
async def test_a_hostile_filter_writes_nothing_but_its_own_file(root: Path) -> None:
    """A request whose filter writes files, runs commands or sets a set-user-ID bit
    through its descriptor (none of which the policy proves): the sandbox is
    read-only, so nothing is written but the file's new content, no set-ID bit stays,
    and a failing sed leaves the file as it was."""
    sandbox = BubblewrapSandbox([str(root)])
    target = root / "a"
    for script, fails in (
        (f"w {root}/written", True),  # sed opens its w files first: it cannot
        (f"s/a/b/w {root}/written", True),
        (f"1e touch {root}/written", False),  # the command runs, read-only
        ("1e chmod 6755 /proc/self/fd/0 /proc/self/fd/1", False),
        (f"s|a|touch {root}/written|e", False),
    ):
        target.write_text("a\n")
        os.chmod(target, 0o644)
        edits = InPlaceEdits(filter=("sed", "-e", script), files=(str(target),), suffix=".b")
        status, output = await _run_hostile(sandbox, root, edits)
        assert (status != 0) == fails, (script, output)
        assert not (root / "written").exists(), script
        names = {"a", "a.b"} if not fails else {"a"}
        assert set(os.listdir(root)) == names, script
        for name in names:
            assert not os.stat(root / name).st_mode & (stat.S_ISUID | stat.S_ISGID), script
        if fails:
            assert target.read_text() == "a\n"


def test_what_the_copy_back_leaves_out_is_never_edited_here(root: Path, tmp_path: Path) -> None:
    """A link (out of the root, or on the way), a protected name or backup name, a
    FIFO (never waited on), a directory, a hard-linked file, a device, a file outside
    the roots, a backup name that is a directory, a file the sandbox could not read:
    not opened, and nothing made beside it; then the line runs over its layer."""
    outside = tmp_path / "outside"
    outside.write_text("secret\n")
    (root / "d").mkdir()
    (root / "f").write_text("f\n")
    (root / ".envr").write_text("x\n")
    (root / ".envrc").write_text("x\n")
    os.symlink(outside, root / "out")
    os.symlink("d", root / "dl")
    (root / "d" / "g").write_text("g\n")
    os.mkfifo(root / "fifo")
    (root / "linked").write_text("l\n")
    os.link(root / "linked", root / "other-name")
    (root / "f.bak").mkdir()
    (root / "locked").write_text("l\n")
    os.chmod(root / "locked", 0)
    matcher = ProtectedPaths([".envrc"])

    def attempt(*paths: str, suffix: str = "") -> bool:
        edits = InPlaceEdits(filter=("sed", "-e", "p"), files=paths, suffix=suffix)
        found = open_edits(edits, [str(root)], matcher, [".envrc"])  # (a FIFO: not waited on)
        if found is not None:
            discard_edits(found)
        return found is not None

    before = sorted(os.listdir(root))
    for path in ("out", "dl/g", ".envrc", "fifo", "d", "linked", "locked", str(outside)):
        full = path if path.startswith("/") else f"{root}/{path}"
        assert not attempt(f"{root}/f", full), path
    assert not attempt(f"{root}/.envr", suffix="c")  # its backup would be .envrc
    assert not attempt(f"{root}/f", suffix=".bak")  # a directory there
    assert not attempt(f"{root}/f/../f")
    assert attempt(f"{root}/f", f"{root}/d/g", suffix="~")
    assert sorted(os.listdir(root)) == before  # no new file left behind
    assert outside.read_text() == "secret\n"


@pytest.mark.bwrap
async def test_a_symlink_out_of_the_root_is_not_followed(root: Path, tmp_path: Path) -> None:
    """Through the operations: the host does not follow the link (the line runs over its
    private layer, where sed would replace the link by a file), and the file it leads
    to is left alone."""
    outside = tmp_path / "outside"
    outside.write_text("a\n")
    os.symlink(outside, root / "out")
    sandbox = BubblewrapSandbox([str(root)])
    ops = create_sandbox_shell_operations(sandbox)
    edits = InPlaceEdits(filter=("sed", "-e", "s/a/b/"), files=(f"{root}/out",))
    request = ShellSpawnRequest(command="sed -i s/a/b/ out", shell_path=_BASH, cwd=str(root),
                                env=_ENV, in_place=edits)  # fmt: skip

    async def sink(chunk: bytes) -> None:
        pass

    with trio.fail_after(60):
        assert await sandbox._run_in_place(request, sink, 1.0) is None
        await ops.run(request, sink)
    assert outside.read_text() == "a\n"


@pytest.mark.bwrap
async def test_the_shell_tool_hands_the_proved_filter_to_the_sandbox(root: Path) -> None:
    """Through open_secure_coding_tools: the decision's in_place reaches the sandbox,
    the file is edited, and the ledger records the confined decision as before."""
    from prism.coding.security import open_secure_coding_tools
    from prism.coding.tools import ShellToolOptions
    from prism.core import DispatchOptions, ToolCall, create_tool_registry, dispatch_tool_call
    from prism.core.ledger import RunLedger

    (root / "f.txt").write_text("a\nb\n")
    seen: list[InPlaceEdits | None] = []

    def hook(request: ShellSpawnRequest) -> ShellSpawnRequest:
        seen.append(request.in_place)
        return request

    ledger = RunLedger()
    options: ShellToolOptions = {"spawn_hook": hook, "env": _ENV}
    async with open_secure_coding_tools(
        [str(root)], sandbox="bubblewrap", shell_options=options
    ) as secure:
        dispatch = DispatchOptions(registry=create_tool_registry(secure.tools), ledger=ledger)
        call = ToolCall(id="1", name="shell", arguments={"command": "sed -i.orig s/a/X/ f.txt"})
        result = await dispatch_tool_call(call, dispatch)
    assert not result.is_error, result.joined_text
    assert (root / "f.txt").read_text() == "X\nb\n"
    assert (root / "f.txt.orig").read_text() == "a\nb\n"
    assert seen == [InPlaceEdits(filter=("sed", "-e", "s/a/X/"), files=(f"{root}/f.txt",),
                                 suffix=".orig")]  # fmt: skip
    decisions = [record.decision for record in ledger.records if record.decision is not None]
    assert [(d.allowed, d.confined) for d in decisions] == [(True, True)]
