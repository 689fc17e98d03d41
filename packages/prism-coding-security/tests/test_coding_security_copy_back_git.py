"""What a command may not bring back: a broken ``.git``, a todo that runs, lost host edits.

Real bubblewrap (through :func:`open_secure_coding_tools` where the shell tool
can express the attack), then the host's real git in the root afterwards.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from typing import TYPE_CHECKING

import pytest
import trio

from prism.coding.security import (
    BubblewrapSandbox,
    create_sandbox_shell_operations,
    open_secure_coding_tools,
)
from prism.coding.tools import ShellSpawnRequest
from prism.core import DispatchOptions, ToolCall, create_tool_registry
from prism.core import dispatch_tool_call as dispatch

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.bwrap, pytest.mark.git]

_ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "HOME": "/nonexistent",
    "GIT_CONFIG_NOSYSTEM": "1",
    "LC_ALL": "C",
}


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """The host's git in ``root``, as a user would run it."""
    return subprocess.run(
        ["git", *args], cwd=root, env=_ENV, capture_output=True, check=False, timeout=30
    )


def _repository(root: Path, commits: int = 1) -> None:
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, env=_ENV, check=True)
    for index in range(commits):
        (root / "f.txt").write_text(f"{index}\n")
        subprocess.run(["git", "add", "-A"], cwd=root, env=_ENV, check=True)
        subprocess.run(["git", "commit", "-qm", f"c{index}"], cwd=root, env=_ENV, check=True)


def _repository_with_src(root: Path) -> None:
    """A repository of two commits, the second adding ``src/main.py``."""
    _repository(root)
    (root / "src").mkdir()
    (root / "src" / "main.py").write_text("print(1)\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "src")


def _plant_bare(root: Path) -> None:
    """Hostile files of the root, there beforehand: a bare repository whose config runs code."""
    bare = root / "planted"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], env=_ENV, check=True)
    for name in ("HEAD", "config", "objects", "refs"):
        os.rename(bare / name, root / name)
    with open(root / "config", "a") as config:
        config.write(f"[core]\n\tfsmonitor = touch {root.parent / 'ran'}; false #\n")


async def _shell(root: Path, command: str) -> str:
    """Run ``command`` with the shell tool of the secure tools for ``root``; its text.

    Hidden from the policy (which refuses the plain forms): the sandbox alone stands.
    """
    hidden = base64.b64encode(command.encode()).decode()
    command = f"echo {hidden} | base64 -d | sh"
    async with open_secure_coding_tools([str(root)]) as secure:
        assert secure.backend == "bubblewrap"
        call = ToolCall(id="c", name="shell", arguments={"command": command})
        options = DispatchOptions(registry=create_tool_registry(secure.tools))
        with trio.fail_after(60):
            result = await dispatch(call, options)
    return result.joined_text


@pytest.mark.parametrize(
    "attack",
    [
        "rm .git/HEAD",
        "rm -rf .git/refs",
        "rm -rf .git/objects",
        "rm -rf .git && mkdir .git",
        "rm -rf .git/refs && echo x > .git/refs",
        "echo garbage > .git/HEAD",
        "echo 'ref: HEAD' > .git/HEAD",
    ],
)
async def test_a_dot_git_directory_stays_one_for_the_host_git(root: Path, attack: str) -> None:
    """With a bare repository laid out in the root, a broken .git would make it git's repository."""
    _repository(root)
    _plant_bare(root)
    head = (root / ".git" / "HEAD").read_bytes()
    text = await _shell(root, attack)
    assert "keeps its" in text or "not a valid ref" in text, text
    assert (
        _git(root, "rev-parse", "--absolute-git-dir").stdout.strip() == str(root / ".git").encode()
    )
    assert (root / ".git" / "HEAD").read_bytes() == head
    assert _git(root, "status").returncode == 0
    assert _git(root, "log", "--oneline").stdout.count(b"\n") == 1
    assert not (root.parent / "ran").exists()


async def test_a_valid_head_and_ordinary_git_work_come_back(root: Path) -> None:
    _repository(root)
    text = await _shell(root, "git checkout -q -b topic && git rm -q f.txt && git commit -qm gone")
    assert "not applied" not in text, text
    assert (root / ".git" / "HEAD").read_bytes() == b"ref: refs/heads/topic\n"
    assert _git(root, "log", "--format=%s", "-1").stdout == b"gone\n"
    assert _git(root, "status", "--porcelain").stdout == b""


# a commit adding a protected .envrc, left only in the object store (index and tree untouched)
_HIDDEN_COMMIT = (
    "b=$(printf 'echo x\\n' | git hash-object -w --stdin) && git read-tree HEAD && "
    "git update-index --add --cacheinfo 100644,$b,.envrc && t=$(git write-tree) && "
    "c=$(git commit-tree $t -p HEAD -m x) && git read-tree HEAD && "
)
# a stash commit whose index and untracked-files parents are named in upper-case hex
_UPPER_STASH = (
    "b=$(printf 'echo x\\n' | git hash-object -w --stdin) && "
    "u=$(printf '100644 blob %s\\t.envrc\\n' $b | git mktree) && "
    "u=$(git commit-tree $u -m u | tr a-f A-F) && "
    "i=$(git commit-tree HEAD^{tree} -p HEAD -m i | tr a-f A-F) && "
    "c=$(printf 'tree %s\\nparent %s\\nparent %s\\nparent %s\\n"
    "author t <t@e> 1 +0000\\ncommitter t <t@e> 1 +0000\\n\\nWIP on main\\n' "
    "$(git rev-parse HEAD^{tree}) $(git rev-parse HEAD) $i $u | "
    "git hash-object -t commit -w --literally --stdin) && "
    "git update-ref --create-reflog -m 'WIP on main' refs/stash $c"
)
_IN_PROGRESS = "an operation left in progress"


async def test_an_operation_left_in_progress_inside_never_reaches_the_host(root: Path) -> None:
    """Bisect, rebase, cherry-pick and merge state left by the command stays out, whatever it
    names: a bisection range around the hidden commit, a ``<tree>:<gitlink>`` start that the
    check would have read as another revision, an ``orig-head`` to abort to, an ``exec`` or
    ``pick`` todo line, a sequencer head; with the HEAD and index the rebase left."""
    _repository(root, commits=2)
    tree = (
        "s=$(printf '160000 commit %s\\tsub\\n' $c | git mktree) && "
        "echo $s:sub > .git/BISECT_START && git update-ref refs/bisect/bad $c && "
        "printf '%s refs/bisect/skip-x\\n' $c > .git/packed-refs && "
        "mkdir -p .git/sequencer && echo $c > .git/sequencer/head && "
    )
    rebase = (
        "GIT_SEQUENCE_EDITOR='printf \"break\\nexec touch ../ran\\n\" >' git rebase -q -i HEAD~1"
        " && echo $c > .git/rebase-merge/orig-head && echo $c > .git/MERGE_HEAD"
    )
    text = await _shell(root, _HIDDEN_COMMIT + tree + rebase)
    assert _IN_PROGRESS in text, text
    shown = ("BISECT_START", "MERGE_HEAD", "rebase-merge/", "sequencer/", "refs/bisect/", "HEAD")
    assert ".git/packed-refs" in text, text
    for name in (*shown, "index"):
        assert f".git/{name}" in text, text
    assert (root / ".git" / "HEAD").read_bytes() == b"ref: refs/heads/main\n"
    for host in (("bisect", "reset"), ("rebase", "--abort"), ("rebase", "--continue"),
                 ("cherry-pick", "--abort"), ("merge", "--continue")):  # fmt: skip
        _git(root, *host)
        assert not (root / ".envrc").exists(), host
    assert not (root.parent / "ran").exists()
    assert _git(root, "log", "--oneline", "main").stdout.count(b"\n") == 2


async def test_host_edits_made_while_the_command_ran_are_kept_and_reported(
    root: Path, tmp_path: Path
) -> None:
    """The command edits ``a`` and removes ``d``; meanwhile the host edits both."""
    (root / "a").write_text("host before\n")
    (root / "b").write_text("b\n")
    (root / "d" / "old").mkdir(parents=True)
    (root / "d" / "old" / "f").write_text("old\n")
    (root / "d" / "g").write_text("g\n")
    pipes = tmp_path / "pipes"
    pipes.mkdir()
    os.mkfifo(pipes / "go")
    command = f"echo agent >> a && echo agent >> b && rm -rf d && echo ready && cat {pipes / 'go'}"
    ready = trio.Event()
    seen: list[bytes] = []

    async def sink(chunk: bytes) -> None:
        seen.append(chunk)
        if b"ready" in b"".join(seen):
            ready.set()

    request = ShellSpawnRequest(command=command, shell_path="/bin/sh", cwd=str(root), env=_ENV)
    sandbox = BubblewrapSandbox([str(root)], extra_args=("--ro-bind", str(pipes), str(pipes)))

    def release() -> None:
        with open(pipes / "go", "w") as fifo:
            fifo.write("go\n")

    results = []

    async def run() -> None:
        results.append(await create_sandbox_shell_operations(sandbox).run(request, sink))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        with trio.fail_after(60):
            await ready.wait()
        # the host's edits while the command waits
        (root / "a").write_text("host during\n")
        (root / "d" / "user_new_file").write_text("mine\n")
        await trio.to_thread.run_sync(release)
    output = b"".join(seen).decode()
    assert (root / "a").read_text() == "host during\n"
    assert (root / "d" / "user_new_file").read_text() == "mine\n"
    # what the host did not touch: the command's changes came back
    assert (root / "b").read_text() == "b\nagent\n"
    assert not (root / "d" / "g").exists()
    assert not (root / "d" / "old").exists()
    assert "changed on the host while the command ran" in output, output
    assert "(changed on the host while the command ran): a, d/user_new_file, d/\n" in output, output


def _hooks_repository(root: Path, *, executable: bool) -> None:
    """A repository whose committed ``tools/hooks/pre-commit`` is its core.hooksPath hook."""
    (root / "tools" / "hooks").mkdir(parents=True)
    hook = root / "tools" / "hooks" / "pre-commit"
    # executable: a harmless hook; not: one that would run a command once made executable
    hook.write_text("#!/bin/sh\nexit 0\n" if executable else "#!/bin/sh\ntouch ../ran\n")
    hook.chmod(0o755 if executable else 0o644)
    _repository(root)
    assert _git(root, "config", "core.hooksPath", "tools/hooks").returncode == 0


@pytest.mark.parametrize(
    ("executable", "attack"),
    [
        # only .git changes: a new blob committed over the hooksPath hook
        (
            True,
            "b=$(printf '#!/bin/sh\\ntouch ../ran\\n' | git hash-object -w --stdin) && "
            "git update-index --cacheinfo 100755,$b,tools/hooks/pre-commit && git commit -qm x",
        ),
        # the host's own blob, made executable: a mode change is a change
        (False, "git update-index --chmod=+x tools/hooks/pre-commit && git commit -qm x"),
    ],
)
async def test_a_commit_touching_only_git_data_cannot_bring_a_hooks_path_hook_back(
    root: Path, executable: bool, attack: str
) -> None:
    _hooks_repository(root, executable=executable)
    text = await _shell(root, attack)
    assert "protected path (tools/hooks/pre-commit)" in text, text
    assert _git(root, "log", "--oneline").stdout.count(b"\n") == 1
    assert _git(root, "reset", "-q", "--hard").returncode == 0
    _git(root, "commit", "-q", "--allow-empty", "-m", "y")
    assert not (root.parent / "ran").exists()


@pytest.mark.parametrize(
    ("attack", "host", "refused"),
    [
        (
            _HIDDEN_COMMIT + "printf '%s\\t\\tbranch x of y\\n' $c > .git/FETCH_HEAD",
            ("reset", "-q", "--hard", "FETCH_HEAD"),
            "(FETCH_HEAD)",
        ),
        (
            _HIDDEN_COMMIT + "echo $c > .git/ORIG_HEAD",
            ("reset", "-q", "--hard", "ORIG_HEAD"),
            "(ORIG_HEAD)",
        ),
        # the untracked files of `stash -u` are the stash commit's third parent
        ("echo 'echo x' > .envrc && git stash push -q -u -m wip", ("stash", "pop"), "(refs/stash)"),
        # the same stash written by hand, its other parents in upper-case hex (git reads them)
        (_UPPER_STASH, ("stash", "pop"), "(refs/stash)"),
        # a packed-refs past the read limit (made small here) is not read whole: left out
        (
            _HIDDEN_COMMIT + "{ head -c 5000 /dev/zero | tr '\\0' '#'; "
            "printf '\\n%s refs/heads/other\\n' $c; } > .git/packed-refs",
            ("checkout", "-q", "other"),
            "packed-refs too large to check",
        ),
        (
            _HIDDEN_COMMIT + "{ head -c 5000 /dev/zero | tr '\\0' '#'; "
            "printf '\\n%s\\t\\tbranch x of y\\n' $c; } > .git/FETCH_HEAD",
            ("reset", "-q", "--hard", "FETCH_HEAD"),
            "FETCH_HEAD too large to check",
        ),
        # a reflog line git would not read as one: not parsed around, left out
        (
            _HIDDEN_COMMIT + "printf 'x %s t <t@e> 1 +0000\\tx\\n' $c >> .git/logs/HEAD",
            ("reset", "-q", "--hard", "HEAD@{1}"),
            "a reflog line git would not read",
        ),
    ],
)
async def test_git_files_naming_a_commit_cannot_bring_a_protected_path_back(
    root: Path, monkeypatch: pytest.MonkeyPatch, attack: str, host: tuple[str, ...], refused: str
) -> None:
    from prism.coding.security import _overlay

    monkeypatch.setattr(_overlay, "_LIST_LIMIT", 4096)
    _repository(root)
    text = await _shell(root, attack)
    assert refused in text, text
    _git(root, *host)
    assert not (root / ".envrc").exists()
    assert _git(root, "log", "--oneline", "main").stdout.count(b"\n") == 1


async def test_refs_packed_into_a_packed_refs_left_out_are_not_lost(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`git pack-refs --all` removes the loose refs it packs: when the new packed-refs is
    left out, the removals stay out too, or the host would lose its branches."""
    from prism.coding.security import _overlay

    monkeypatch.setattr(_overlay, "_LIST_LIMIT", 4096)
    _repository(root)
    _git(root, "branch", "other")
    text = await _shell(
        root,
        "git pack-refs --all && { head -c 5000 /dev/zero | tr '\\0' '#'; echo; "
        "cat .git/packed-refs; } > .git/p && mv .git/p .git/packed-refs",
    )
    assert "packed-refs too large to check" in text, text
    assert "a ref removed while the new packed-refs was left out" in text, text
    for branch in ("main", "other"):
        assert _git(root, "rev-parse", "--verify", "-q", branch).returncode == 0, branch


async def test_a_reflog_naming_a_commit_with_a_protected_path_stays_out(root: Path) -> None:
    """Ordinary reflog growth comes back; a line naming an unchecked commit does not, in its
    object names or in the checkout message ``git checkout -`` reads a revision from."""
    _repository(root)
    # a tag of the repository (as a hostile one ships it) whose commit adds .envrc
    (root / ".envrc").write_text("echo x\n")
    _git(root, "add", ".envrc")
    _git(root, "commit", "-qm", "evil")
    _git(root, "tag", "evil")
    _git(root, "reset", "-q", "--hard", "HEAD~1")
    text = await _shell(
        root,
        "echo 1 > f.txt && git commit -qam c1 && git checkout -q -b topic && git checkout -q -",
    )
    assert "not applied" not in text, text
    assert _git(root, "rev-parse", "HEAD@{1}").returncode == 0
    log = root / ".git" / "logs" / "refs" / "heads" / "main"
    before = log.read_bytes()
    # a line of the host's own reflog, from when a branch 'evil' existed: moved to the end
    # by the command, it is what `git checkout -` reads
    moved = root / ".git" / "logs" / "refs" / "heads" / "z"
    head = _git(root, "rev-parse", "HEAD").stdout.decode().strip()
    moved.write_text(f"{head} {head} t <t@e> 1 +0000\tcheckout: moving from evil to main\n")
    line = "printf '%s %s t <t@e> 1 +0000\\t%s\\n' $h"
    text = await _shell(
        root,
        _HIDDEN_COMMIT + "h=$(git rev-parse HEAD) && "
        "s=$(printf '160000 commit %s\\tsub\\n' $c | git mktree) && "
        f"{line} $c x >> .git/logs/refs/heads/main && "
        f'{line} $h "checkout: moving from $c to main" >> .git/logs/HEAD && '
        f'{line} $h "checkout: moving from $s:sub to main" >> .git/logs/refs/heads/topic && '
        f"{line} $h 'checkout: moving from evil to main' >> .git/logs/refs/heads/x && "
        # an abbreviated object name (git 2.39 does not read it there; another git may)
        f'{line} $h "checkout: moving from $(git rev-parse --short=12 $c) to main"'
        " >> .git/logs/refs/heads/y && "
        f"{{ {line} $h x; cat .git/logs/refs/heads/z; }} > .git/z && "
        "mv .git/z .git/logs/refs/heads/z",
    )
    assert "(HEAD) adds or changes a protected path (.envrc)): .git/logs/HEAD, " in text, text
    assert ".git/logs/refs/heads/main, .git/logs/refs/heads/x, .git/logs/refs/heads/z" in text, text
    refused = "names a revision, not a branch): .git/logs/refs/heads/topic, .git/logs/refs/heads/y"
    assert refused in text, text
    assert log.read_bytes() == before
    _git(root, "checkout", "-q", "-")
    assert not (root / ".envrc").exists()


async def test_a_commit_the_hosts_reflog_no_longer_names_is_judged_again(root: Path) -> None:
    """What a host reflog's lines name is kept from an earlier reading of the same bytes only:
    a commit its lines named when the last call's reflog came back, forgotten by the host
    since, is judged again when a line names it."""
    _repository(root)
    (root / ".envrc").write_text("echo x\n")
    _git(root, "add", ".envrc")
    _git(root, "commit", "-qm", "evil")
    evil = _git(root, "rev-parse", "HEAD").stdout.decode().strip()
    _git(root, "reset", "-q", "--hard", "HEAD~1")
    text = await _shell(root, "echo 1 > f.txt && git commit -qam c1")
    assert "not applied" not in text, text
    _git(root, "reflog", "expire", "--expire=now", "--all")  # the host forgets it
    line = f"printf '%s %s t <t@e> 1 +0000\\tx\\n' $(git rev-parse HEAD) {evil}"
    text = await _shell(root, f"{line} >> .git/logs/HEAD")
    assert "(HEAD) adds or changes a protected path (.envrc)): .git/logs/HEAD" in text, text
    assert (root / ".git" / "logs" / "HEAD").read_bytes() == b""  # the line stayed out


async def test_a_ref_written_as_an_option_never_reaches_the_hosts_git(root: Path) -> None:
    """A loose ref holding ``--output=...`` is refused before the host's git reads it."""
    _repository(root)
    target = root.parent / "written"
    text = await _shell(root, f"printf -- '--output={target}\\n' > .git/refs/heads/x")
    assert "(refs/heads/x) naming no commit" in text, text
    assert not [p for p in root.parent.iterdir() if p.name.startswith("written")]
    assert not (root / ".git" / "refs" / "heads" / "x").exists()


async def test_every_ref_moved_to_one_smuggling_commit_is_refused_by_its_name(root: Path) -> None:
    """The copy-back asks git once for a commit several refs name (the index untouched):
    each ref, and each reflog, is still judged and refused under its own name."""
    _repository(root)
    text = await _shell(
        root, _HIDDEN_COMMIT + "git update-ref refs/heads/main $c && git branch other $c"
    )
    assert "a commit (refs/heads/main) adds or changes a protected path (.envrc)" in text, text
    assert "a commit (refs/heads/other) adds or changes a protected path (.envrc)" in text, text
    assert "a commit (HEAD) adds or changes a protected path (.envrc)" in text, text  # reflogs
    assert _git(root, "log", "--oneline", "main").stdout.count(b"\n") == 1
    assert _git(root, "rev-parse", "-q", "--verify", "other").returncode != 0
    _git(root, "reset", "-q", "--hard", "HEAD@{1}")
    assert not (root / ".envrc").exists()


async def test_an_object_the_host_has_is_never_rewritten(root: Path) -> None:
    """A command rewrites the loose object of HEAD's tree to hold a .envrc: the host's
    git would read it as that tree (its next reset --hard wrote the .envrc). The
    host's object stays; an object git only touched comes back silently as it was."""
    _repository(root, commits=2)
    tree = _git(root, "rev-parse", "HEAD^{tree}").stdout.decode().strip()
    path = f".git/objects/{tree[:2]}/{tree[2:]}"
    before = (root / path).read_bytes()
    text = await _shell(
        root,
        "b=$(printf 'echo x\\n' | git hash-object -w --stdin) && f=$(git rev-parse HEAD:f.txt)"
        " && t=$(printf '100644 blob %s\\t.envrc\\n100644 blob %s\\tf.txt\\n' $b $f | git mktree)"
        f' && chmod u+w {path} && python3 -c "import sys, zlib, subprocess; raw = subprocess'
        ".run(['git', 'cat-file', 'tree', sys.argv[1]], capture_output=True).stdout; open(sys"
        ".argv[2], 'wb').write(zlib.compress(b'tree %d\\0' % len(raw) + raw))\" $t " + path,
    )
    assert f"(git's objects are never rewritten; the host's is kept): {path}" in text, text
    assert (root / path).read_bytes() == before
    _git(root, "reset", "-q", "--hard")
    assert not (root / ".envrc").exists()
    # back to the first commit's content: git finds its blob and tree and only touches them
    text = await _shell(root, "printf '0\\n' > f.txt && git commit -qam back")
    assert "not applied" not in text, text
    assert _git(root, "log", "--format=%s", "-1").stdout == b"back\n"
    assert _git(root, "fsck", "--no-dangling").returncode == 0


async def test_a_protected_path_hidden_under_a_later_commit_and_reftable_stay_out(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit adding .envrc under a second removing it: main's tip adds nothing, but
    the host's checkout main~1 or reset --hard HEAD~1 would write the first's .envrc.
    Every new commit a moved ref reaches is judged; reftable data never comes back."""
    from prism.coding.security import _overlay

    _repository(root, commits=2)
    text = await _shell(
        root,
        "printf 'echo x\\n' > .envrc && git add .envrc && git commit -qm add"
        " && git rm -q .envrc && git commit -qm remove"
        " && mkdir .git/reftable && echo x > .git/reftable/tables.list",
    )
    assert "(refs/heads/main, in its history " in text, text
    assert "adds or changes a protected path (.envrc)" in text, text
    assert "reftable data is not kept" in text, text
    assert not (root / ".git" / "reftable").exists()
    assert _git(root, "log", "--format=%s", "main").stdout == b"c1\nc0\n"
    for host in (("checkout", "-q", "main~1"), ("checkout", "-q", "main"),
                 ("reset", "-q", "--hard", "HEAD~1")):  # fmt: skip
        _git(root, *host)
        assert not (root / ".envrc").exists()
    # with the cap at 2: ordinary commits of two steps come back; a branch of three new
    # commits, and one below whose tip is a commit git cannot read, stay out
    monkeypatch.setattr(_overlay, "_HISTORY_COMMITS", 2)
    text = await _shell(
        root,
        "git checkout -q -b topic && for n in 1 2 3; do git commit -q --allow-empty -m t$n; done"
        " && git checkout -q main && echo 2 > f.txt && git commit -qam two"
        " && git commit -qm e --allow-empty && t=$(printf 'tree %040d\\nauthor t <t@e> 1 +0000"
        "\\ncommitter t <t@e> 1 +0000\\n\\nx\\n' 2 | git hash-object -t commit -w --stdin"
        " --literally) && c=$(git commit-tree HEAD^{tree} -p $t -m y)"
        " && git update-ref refs/heads/broken $c",
    )
    assert "a ref (refs/heads/topic) reaching more than 2 new commits" in text, text
    assert "a ref (refs/heads/broken) whose new history git cannot read" in text, text
    assert _git(root, "log", "--format=%s", "-2", "main").stdout == b"e\ntwo\n"
    assert _git(root, "rev-parse", "-q", "--verify", "topic").returncode != 0


@pytest.mark.parametrize(
    ("own", "command"),
    [
        (False, "git update-index --split-index"),
        (True, "echo y > g.txt && git add g.txt && git commit -qm g"),
    ],
)
async def test_a_split_index_comes_back_with_its_shared_index(
    root: Path, own: bool, command: str
) -> None:
    """A split index names its shared index: without it the host's git could not open the index.

    Asked for on the command line, or the user's own ``core.splitIndex``.
    """
    _repository(root)
    if own:
        _git(root, "config", "core.splitIndex", "true")
    text = await _shell(root, command)
    status = _git(root, "status", "--porcelain")
    assert status.returncode == 0, (text, status.stderr)
    assert _git(root, "commit", "-q", "--allow-empty", "-m", "after").returncode == 0
    assert "not applied" not in text, text
    assert list(root.joinpath(".git").glob("sharedindex.*")), text


# inside: an edit committed, then an index whose entries are HEAD's but whose cache-tree
# names, for src/, a tree that also holds .envrc and, for docs/, src/'s tree (the
# trailing checksum written again)
_FORGE_CACHE_TREE = """echo 'print(2)' > src/main.py && git add -A && git commit -qm edit &&
python3 - <<'PY'
import hashlib, subprocess
def git(*a, inp=None):
    return subprocess.run(["git", *a], input=inp, capture_output=True, check=True).stdout
blob = git("hash-object", "-w", "--stdin", inp=b"echo planted\\n").strip().decode()
listing = git("ls-tree", "HEAD:src").decode() + f"100644 blob {blob}\\t.envrc\\n"
evil = bytes.fromhex(git("mktree", inp=listing.encode()).strip().decode())
git("read-tree", "HEAD"); git("write-tree")
data = bytearray(open(".git/index", "rb").read()[:-20])
at = data.index(b"TREE")
other = bytes.fromhex(git("rev-parse", "HEAD:src").strip().decode())
for name, forged in ((b"src", evil), (b"docs", other)):
    oid = data.index(b"\\n", data.index(name + b"\\0", at)) + 1
    data[oid:oid + 20] = forged
open(".git/index", "wb").write(bytes(data) + hashlib.sha1(bytes(data)).digest())
PY"""


async def test_a_forged_cache_tree_never_reaches_the_hosts_next_commit(root: Path) -> None:
    """Only the host's own cached trees come back, where no entry below changed.

    The command's cache-tree is not read: docs/ keeps the host's node (the
    command's names another tree), src/ and the top, whose entries the
    command's commit changed, are invalid, so the host's next commit
    recomputes them and records exactly the staged entries.
    """
    from prism.coding.security._index import _layout

    _repository_with_src(root)
    (root / "docs").mkdir()
    (root / "docs" / "d.md").write_text("d\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "docs")
    text = await _shell(root, _FORGE_CACHE_TREE)
    assert "Traceback" not in text, text
    assert "not applied" not in text, text
    assert _git(root, "log", "-1", "--format=%s").stdout == b"edit\n"
    index = (root / ".git" / "index").read_bytes()
    layout = _layout(index)
    assert layout is not None
    (start, end) = next((a + 8, b) for s, a, b in layout[2] if s == b"TREE")
    docs = _git(root, "rev-parse", "HEAD:docs").stdout.strip().decode()
    assert index[start:end] == (
        b"\0-1 2\n" + b"src\0-1 0\n" + b"docs\0" + b"1 0\n" + bytes.fromhex(docs)
    )
    (root / "README").write_text("readme\n")
    _git(root, "add", "README")
    assert _git(root, "commit", "-qm", "readme").returncode == 0
    changed = _git(root, "show", "--name-only", "--format=", "HEAD").stdout
    assert changed == b"README\n", text
    committed = _git(root, "ls-tree", "-r", "HEAD").stdout.split(b"\n")
    staged = _git(root, "ls-files", "-s").stdout.split(b"\n")
    assert [r.replace(b" blob ", b" ").replace(b"\t", b" 0\t") for r in committed] == staged
    assert b".envrc" not in _git(root, "ls-tree", "-r", "--name-only", "HEAD").stdout


async def test_a_replace_ref_that_hides_an_edit_never_comes_back(root: Path) -> None:
    """A replacement of src/'s tree by the edited one would hide the edit from status and diff."""
    _repository_with_src(root)
    text = await _shell(
        root,
        "echo 'print(2)' > src/main.py && git add src/main.py && "
        "git update-ref refs/replace/$(git rev-parse HEAD:src) $(git write-tree --prefix=src/) && "
        "git pack-refs --all && git update-ref refs/replace/$(git rev-parse HEAD:f.txt) "
        "$(git rev-parse HEAD:src/main.py)",
    )
    assert "replace refs are not kept" in text, text
    assert _git(root, "for-each-ref", "refs/replace").stdout == b""
    assert _git(root, "status", "--short").stdout == b"M  src/main.py\n"


async def test_recorded_conflict_resolutions_never_come_back(root: Path) -> None:
    """rerere's rr-cache: its existence turns rerere on, and a merge writes a postimage as it is."""
    _repository(root)
    text = await _shell(
        root, "git config rerere.enabled true; git rerere status; mkdir -p .git/rr-cache/x"
    )
    assert "rr-cache" in text, text
    assert not (root / ".git" / "rr-cache").exists()


async def test_a_sparse_index_never_comes_back(root: Path) -> None:
    """Its directory entries name trees that the host's git would expand and stage unjudged."""
    _repository_with_src(root)
    before = (root / ".git" / "index").read_bytes()
    text = await _shell(root, "git sparse-checkout set --cone --sparse-index other")
    assert "a sparse index is not kept" in text, text
    assert (root / ".git" / "index").read_bytes() == before
    assert _git(root, "status", "--porcelain").returncode == 0


async def test_a_shallow_list_made_inside_does_not_cut_the_host_history(root: Path) -> None:
    """.git/shallow naming HEAD made the host's repository shallow: git log showed one
    commit of three, blame and bisect were wrong (it came back on the old code)."""
    _repository(root, commits=3)
    text = await _shell(root, "git rev-parse HEAD > .git/shallow")
    assert "a shallow list is not kept" in text, text
    assert not (root / ".git" / "shallow").exists()
    assert _git(root, "rev-parse", "--is-shallow-repository").stdout == b"false\n"
    assert _git(root, "log", "--oneline").stdout.count(b"\n") == 3


# inside: the index written whole, `sub` registered with a mode whose type bits are a
# gitlink's (git reads 160644 as a submodule, as it reads 160000)
_ODD_MODE = """python3 - "$(git -C sub rev-parse HEAD)" "$(git rev-parse HEAD:f.txt)" <<'PY'
import hashlib, struct, sys
def entry(name, mode, oid):
    body = bytes(24) + struct.pack(">I", mode) + bytes(12) + oid
    body += struct.pack(">H", len(name)) + name
    return body + bytes(((62 + len(name) + 8) & ~7) - len(body))
entries = entry(b"f.txt", 0o100644, bytes.fromhex(sys.argv[2]))
entries += entry(b"sub", 0o160644, bytes.fromhex(sys.argv[1]))
body = struct.pack(">4sII", b"DIRC", 2, 2) + entries
open(".git/index", "wb").write(body + hashlib.sha1(body).digest())
PY"""


async def test_an_index_entry_in_a_mode_git_never_writes_never_comes_back(root: Path) -> None:
    """A submodule registered as 160644 would have the host's git status enter it."""
    _repository(root)
    sub = root / "sub"
    sub.mkdir()
    _git(sub, "init", "-q")
    _git(sub, "commit", "-q", "--allow-empty", "-m", "s")
    ran = root.parent / "fsmonitor-ran"
    _git(sub, "config", "core.fsmonitor", f"touch {ran}; false")
    before = (root / ".git" / "index").read_bytes()
    text = await _shell(root, _ODD_MODE)
    assert "a mode git never writes (sub)" in text, text
    assert (root / ".git" / "index").read_bytes() == before
    _git(root, "status", "--porcelain")
    assert not ran.exists()


# an index of `.envrc` twice at stage 0, the model's object first: git's lookups, its
# tree writer and `git checkout` take the first, a reader keeping the last judges the second
_TWICE = """python3 - "$(printf 'touch ran\\n' | git hash-object -w --stdin)" \
"$(git rev-parse HEAD:.envrc)" "$(git rev-parse HEAD:f.txt)" <<'PY'
import hashlib, struct, sys
model, host, f = (bytes.fromhex(word) for word in sys.argv[1:])
def entry(name, oid):
    body = bytes(24) + struct.pack(">I", 0o100644) + bytes(12) + oid
    body += struct.pack(">H", len(name)) + name
    return body + bytes(((62 + len(name) + 8) & ~7) - len(body))
body = struct.pack(">4sII", b"DIRC", 2, 3)
body += entry(b".envrc", model) + entry(b".envrc", host) + entry(b"f.txt", f)
open(".git/index", "wb").write(body + hashlib.sha1(body).digest())
PY"""


async def test_an_index_naming_a_path_twice_never_comes_back(root: Path) -> None:
    _repository(root)
    (root / ".envrc").write_text("echo host\n")
    _git(root, "add", ".envrc")
    _git(root, "commit", "-qm", "envrc")
    before = (root / ".git" / "index").read_bytes()
    text = await _shell(root, _TWICE)
    assert "a path listed twice or out of git's order" in text, text
    assert (root / ".git" / "index").read_bytes() == before
    _git(root, "checkout", "--", ".")
    assert (root / ".envrc").read_text() == "echo host\n"


async def test_a_packed_refs_naming_a_ref_twice_never_comes_back(root: Path) -> None:
    """Git searches a sorted packed-refs by halves: of `main` given twice it may take the
    model's line, though the last one is the host's own."""
    _repository(root)
    _git(root, "pack-refs", "--all")
    old = _git(root, "rev-parse", "main").stdout.decode().strip()
    # the commit the model wants `main` to be: it adds `.envrc`
    (root / ".envrc").write_text("touch ran\n")
    _git(root, "add", ".envrc")
    tree = _git(root, "write-tree").stdout.decode().strip()
    _git(root, "rm", "-q", "--cached", ".envrc")
    (root / ".envrc").unlink()
    commit = _git(root, "commit-tree", "-p", old, "-m", "tidy", tree).stdout.decode().strip()
    packed = (
        "# pack-refs with: peeled fully-peeled sorted \n"
        f"{old} refs/heads/aaa\n{commit} refs/heads/main\n{old} refs/heads/main\n"
    )
    before = (root / ".git" / "packed-refs").read_bytes()
    text = await _shell(root, f"printf '%s' '{packed}' > .git/packed-refs")
    assert "a packed-refs git would not write" in text, text
    assert (root / ".git" / "packed-refs").read_bytes() == before
    assert _git(root, "rev-parse", "main").stdout.decode().strip() == old


# the index's entries plus one named as git never names one (the hook's script, through `..`)
_DOTDOT = """python3 - "$(printf '#!/bin/sh\\ntouch ran\\n' | git hash-object -w --stdin)" <<'PY'
import hashlib, struct, subprocess, sys
listed = subprocess.run(["git", "ls-files", "-s"], capture_output=True, text=True).stdout
entries = [line.split(None, 3) for line in listed.splitlines()]
items = [(e[3].encode(), int(e[0], 8), e[1]) for e in entries]
items = sorted(items + [(b"x/../scripts/check.sh", 0o100755, sys.argv[1])])
def entry(name, mode, oid):
    body = bytes(24) + struct.pack(">I", mode) + bytes(12) + bytes.fromhex(oid)
    body += struct.pack(">H", len(name)) + name
    return body + bytes(((62 + len(name) + 8) & ~7) - len(body))
body = struct.pack(">4sII", b"DIRC", 2, len(items)) + b"".join(entry(*i) for i in items)
open(".git/index", "wb").write(body + hashlib.sha1(body).digest())
PY"""


async def test_an_index_entry_spelled_through_dot_dot_never_comes_back(root: Path) -> None:
    """`x/../scripts/check.sh` is no protected path as written; `git checkout -- .` writes
    `scripts/check.sh` through it, and the hook runs that script."""
    _repository(root)
    (root / "scripts").mkdir()
    (root / "scripts" / "check.sh").write_text("#!/bin/sh\necho ok\n")
    (root / "scripts" / "check.sh").chmod(0o755)
    _git(root, "add", "scripts")
    _git(root, "commit", "-qm", "check")
    hook = root / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\nscripts/check.sh || exit 1\n")
    hook.chmod(0o755)
    before = (root / ".git" / "index").read_bytes()
    text = await _shell(root, f"mkdir -p x && echo keep > x/keep && {_DOTDOT}")
    assert "the index holds a path git never writes (x/../scripts/check.sh)" in text, text
    assert (root / ".git" / "index").read_bytes() == before
    _git(root, "checkout", "--", ".")
    assert (root / "scripts" / "check.sh").read_text() == "#!/bin/sh\necho ok\n"


def _lfs_object(root: Path, content: bytes) -> Path:
    import hashlib

    name = hashlib.sha256(content).hexdigest()
    return root / ".git" / "lfs" / "objects" / name[:2] / name[2:4] / name


async def test_git_lfs_objects_come_back_only_new_and_proved_by_their_content(
    root: Path,
) -> None:
    """git-lfs's smudge takes a local object by its name, checking its size only."""
    _repository(root)
    held = _lfs_object(root, b"#!/bin/sh\necho setup\n")
    held.parent.mkdir(parents=True)
    held.write_bytes(b"#!/bin/sh\necho setup\n")
    new = _lfs_object(root, b"data\n")
    forged = _lfs_object(root, b"other\n")
    text = await _shell(
        root,
        f"printf '#!/bin/sh\\ntouch ran\\n' > {held.relative_to(root)}; "
        f"mkdir -p {new.parent.relative_to(root)} {forged.parent.relative_to(root)}; "
        f"printf 'data\\n' > {new.relative_to(root)}; "
        f"printf 'forged\\n' > {forged.relative_to(root)}; "
        "mkdir -p .git/lfs/tmp && echo x > .git/lfs/tmp/part",
    )
    assert "a git-lfs object the host holds is never replaced" in text, text
    assert "only new git-lfs objects whose content hashes to their name" in text, text
    assert held.read_bytes() == b"#!/bin/sh\necho setup\n"
    assert new.read_bytes() == b"data\n"
    assert not forged.exists()
    assert not (root / ".git" / "lfs" / "tmp").exists()


async def test_prism_never_runs_its_programs_from_a_path_directory_in_a_root(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a root's ``bin`` first on PATH (direnv's ``PATH_add bin``) holding a ``bwrap`` and
    a ``git``, and a relative entry ``tools``: the sandbox and the copy-back's git are the
    host's own (those files never run), and a confined write to either directory stays out
    (the host's next terminal would run it)."""
    _repository(root)
    real = {name: shutil.which(name) for name in ("bwrap", "git")}
    (root / "bin").mkdir()
    for name, path in real.items():
        script = f'#!/bin/sh\ntouch {tmp_path}/ran-{name}\nexec {path} "$@"\n'
        (root / "bin" / name).write_text(script)
        (root / "bin" / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{root}/bin{os.pathsep}tools{os.pathsep}{os.environ['PATH']}")
    text = await _shell(
        root, "git checkout -q -b topic; echo x > bin/ls; mkdir -p tools && echo x > tools/ls"
    )
    assert _git(root, "rev-parse", "--abbrev-ref", "HEAD").stdout == b"topic\n", text
    assert not (root / "bin" / "ls").exists(), text
    assert not (root / "tools").exists(), text
    assert [n for n in os.listdir(tmp_path) if n.startswith("ran-")] == []


def _build_hook(library: Path, marker: Path) -> None:
    """A shared library whose constructor creates ``marker``, built at ``library``."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("no C compiler to build the library")
    library.parent.mkdir(parents=True)
    source = library.parent.parent / "hook.c"
    source.write_text(
        "#include <stdio.h>\n__attribute__((constructor)) static void hook(void) {\n"
        f'  FILE *f = fopen("{marker}", "w"); if (f) fclose(f);\n}}\n'
    )
    subprocess.run([gcc, "-shared", "-fPIC", "-o", library, source], check=True)
    source.unlink()


async def test_prisms_host_programs_never_load_a_roots_libraries(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``LD_PRELOAD`` and ``LD_LIBRARY_PATH`` naming the root's ``build/lib`` (a C
    project's ``.envrc``) and ``node_modules/.bin`` on PATH: neither bwrap nor the copy-back's
    git loads the root's library (it runs inside the sandbox only), and a library or program
    written there, or in a ``node_modules/.bin`` below the root's top, stays out."""
    _repository(root)
    marker = tmp_path / "loaded"  # outside the sandbox's reach: only a host process writes it
    library = root / "build" / "lib" / "libhook.so"
    _build_hook(library, marker)
    monkeypatch.setenv("LD_PRELOAD", str(library))
    monkeypatch.setenv("LD_LIBRARY_PATH", f"{root}/build/lib")
    monkeypatch.setenv("PATH", f"node_modules/.bin{os.pathsep}{os.environ['PATH']}")
    text = await _shell(
        root,
        "git checkout -q -b topic; mkdir -p pkg/node_modules/.bin; "
        "echo x > pkg/node_modules/.bin/git; echo x > build/lib/libz.so.1; echo ok > ok.txt",
    )
    assert not marker.exists(), text
    assert (root / "ok.txt").read_text() == "ok\n", text
    assert _git(root, "rev-parse", "--abbrev-ref", "HEAD").stdout == b"topic\n", text
    assert not (root / "pkg" / "node_modules" / ".bin" / "git").exists(), text
    assert not (root / "build" / "lib" / "libz.so.1").exists(), text


# f.txt's index entry made to hold the work tree file's own stat data
_STAMP = r"""
import hashlib, os, struct
st = os.stat("f.txt")
data = bytearray(open(".git/index", "rb").read())
at = 12
for _ in range(struct.unpack(">I", data[8:12])[0]):
    n = struct.unpack(">H", data[at + 60 : at + 62])[0] & 0xFFF
    if data[at + 62 : at + 62 + n] == b"f.txt":
        struct.pack_into(">IIIIIIIIII", data, at, int(st.st_ctime), st.st_ctime_ns % 10**9,
                         int(st.st_mtime), st.st_mtime_ns % 10**9, st.st_dev & 0xFFFFFFFF,
                         st.st_ino & 0xFFFFFFFF, 0o100644, st.st_uid, st.st_gid, st.st_size)
    at += (62 + n + 8) & ~7
body = bytes(data[:-20])
open(".git/index", "wb").write(body + hashlib.sha1(body).digest())
"""
# a staged blob whose index entry holds the work tree file's own stat data
_FORGED_STAT = (
    r"""
import subprocess
blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], input=b"evil\n",
                      capture_output=True, check=True).stdout.decode().strip()
subprocess.run(["git", "update-index", "--cacheinfo", f"100644,{blob},f.txt"], check=True)
"""
    + _STAMP
)


@pytest.mark.parametrize("split", [False, True], ids=["index", "split index"])
async def test_a_staged_blob_never_hides_behind_the_work_tree_files_stat_data(
    root: Path, split: bool
) -> None:
    """An index entry whose stat data is the work tree file's own: git would take the file
    for the staged blob (no `git diff`, no `git diff --cached`) and the next `git commit -a`
    would record what no diff showed. The changed entry's stat data comes back zeroed;
    also when the index is split and the entry lives in the shared index the command
    wrote (that index comes back as a copy with it zeroed, named by its checksum)."""
    _repository(root)
    os.utime(root / "f.txt", (1, 1))  # (older than any index: not racily clean)
    (root / "forge.py").write_text(_FORGED_STAT)
    text = await _shell(
        root, "python3 forge.py" + (" && git update-index --split-index" if split else "")
    )
    # staged and, against the work tree file, changed back: both diffs show it
    assert _git(root, "status", "--short", "-uno").stdout == b"MM f.txt\n", text
    assert b"+evil" in _git(root, "diff", "--cached").stdout, text
    assert b"-evil" in _git(root, "diff").stdout, text
    assert (root / "f.txt").read_text() == "0\n"
    # one shared index, the one the index names (the command's own was replaced)
    assert len(list(root.joinpath(".git").glob("sharedindex.*"))) == int(split), text


@pytest.mark.parametrize("split", [False, True], ids=["index", "split index"])
async def test_a_work_tree_change_never_hides_behind_restamped_stat_data(
    root: Path, split: bool
) -> None:
    """A change in the work tree (made by an earlier call, or by the user) and a command
    that stamps the file's unchanged index entry, its object kept, with the changed file's
    stat data: git would take the file for the committed content, and `git status`,
    `git diff` and `git commit -a` would pass over the change. Only an entry the host's
    index holds with the same stat data keeps it; a split index comes back with every
    entry's stat data unknown."""
    _repository(root)
    (root / "f.txt").write_text("changed by an earlier call\n")
    os.utime(root / "f.txt", (1, 1))  # (older than any index: not racily clean)
    assert _git(root, "status", "--short", "-uno").stdout == b" M f.txt\n"
    (root / "stamp.py").write_text(_STAMP)
    text = await _shell(
        root, "python3 stamp.py" + (" && git update-index --split-index" if split else "")
    )
    assert _git(root, "status", "--short", "-uno").stdout == b" M f.txt\n", text
    assert b"+changed by an earlier call" in _git(root, "diff").stdout, text


# each file of the list rewritten with other bytes of the same size, its times put back
_SAME_SIZE = r"""
import os, sys
for name in sys.argv[1:]:
    st = os.stat(name)
    old = open(name, "rb").read()
    open(name, "wb").write(b"x" * (len(old) - 1) + b"\n")
    os.utime(name, ns=(st.st_atime_ns, st.st_mtime_ns))
"""


def _stat_data(root: Path, path: str) -> bytes:
    """The cached stat data ``git ls-files --debug`` shows for ``path``."""
    return _git(root, "ls-files", "--debug", "--", path).stdout.split(b"\n", 1)[1]


async def test_a_same_size_rewrite_with_its_times_put_back_shows_under_any_stat_checks(
    root: Path,
) -> None:
    """Under `core.checkStat=minimal` and `core.trustctime=false` git compares only a
    file's mtime seconds and size with its index entry: a rewrite of the same size whose
    mtime the command put back would show in no `git status` nor `git diff` (the index
    untouched). The index entries of the files placed come back stat-unknown, in the
    root's own repository and in a nested one (there a split index: the entry lives in
    its shared index), so git reads those files; every other entry keeps its stat data,
    and a file placed with its own content again is clean for git and restamped by the
    next `git status`."""
    nested = root / "sub"
    nested.mkdir()
    for top in (root, nested):
        _git(top, "init", "-q", "-b", "main")
        for name in ("a.txt", "b.txt", "same.txt"):
            (top / name).write_text(f"{name} as committed\n")
        _git(top, "config", "core.checkStat", "minimal")
        _git(top, "config", "core.trustctime", "false")
        if top is nested:
            _git(top, "config", "core.splitIndex", "true")
        _git(top, "add", "a.txt", "b.txt", "same.txt")
        _git(top, "commit", "-qm", "init")
        for name in ("a.txt", "b.txt", "same.txt"):
            os.utime(top / name, (1, 1))  # (older than any index: not racily clean)
        _git(top, "update-index", "--refresh")
    assert list(nested.joinpath(".git").glob("sharedindex.*"))
    kept = _stat_data(root, "b.txt")
    (root / "rewrite.py").write_text(_SAME_SIZE)
    text = await _shell(
        root,
        "python3 rewrite.py a.txt sub/a.txt"
        " && cp -p same.txt same.tmp && mv same.tmp same.txt"
        " && cp -p sub/same.txt sub/same.tmp && mv sub/same.tmp sub/same.txt",
    )
    assert (root / "a.txt").read_bytes() == b"x" * 18 + b"\n", text
    for top in (root, nested):
        assert b"+xxxxxxx" in _git(top, "diff-files", "-p").stdout, text  # (no refresh)
        assert b"mtime: 0:0" in _stat_data(top, "same.txt"), text
        assert _git(top, "status", "--short", "-uno").stdout == b" M a.txt\n", text
        assert b"mtime: 1:0" in _stat_data(top, "same.txt"), text  # restamped by git
    assert _stat_data(root, "b.txt") == kept, text
    assert not (root / ".git" / "index.lock").exists()


# f.txt's entry marked intent-to-add (the index made version 3 for its extended flags)
_INTENDED = r"""
import hashlib, struct
data = open(".git/index", "rb").read()
count = struct.unpack(">I", data[8:12])[0]
out, at = [struct.pack(">4sII", b"DIRC", 3, count)], 12
for _ in range(count):
    flags = struct.unpack(">H", data[at + 60 : at + 62])[0]
    end = data.index(b"\0", at + 62)
    name = data[at + 62 : end]
    mark = name == b"f.txt"
    entry = data[at : at + 60] + struct.pack(">H", flags | (0x4000 if mark else 0))
    entry += (struct.pack(">H", 0x2000) if mark else b"") + name
    out.append(entry + bytes(8 - len(entry) % 8))
    at += (end - at + 8) & ~7
body = b"".join(out)
open(".git/index", "wb").write(body + hashlib.sha1(body).digest())
"""


async def test_a_tracked_entry_newly_marked_intent_to_add_never_comes_back(root: Path) -> None:
    """Git leaves an entry marked intent-to-add out of every tree it writes (and `git add
    -N` never marks a tracked path): the mark forged on a tracked file's entry, its
    object kept, would have the host's next commit delete the file."""
    _repository(root)
    (root / "mark.py").write_text(_INTENDED)
    text = await _shell(root, "python3 mark.py")
    assert "newly marked intent-to-add (f.txt)" in text, text
    assert _git(root, "status", "--short", "-uno").stdout == b"", text
    _git(root, "commit", "-qm", "mine", "--allow-empty")
    assert _git(root, "ls-tree", "--name-only", "HEAD").stdout == b"f.txt\n", text


async def test_a_lock_left_under_refs_never_comes_back(root: Path) -> None:
    """A `.lock` is git's while it replaces a file: one left in refs (or logs) would make
    the host's git refuse to move that branch ("Unable to create ... File exists")."""
    _repository(root)
    text = await _shell(
        root,
        "cp .git/refs/heads/main .git/refs/heads/main.lock"
        " && mkdir -p .git/logs/refs/heads && touch .git/logs/refs/heads/main.lock",
    )
    assert not (root / ".git" / "refs" / "heads" / "main.lock").exists(), text
    assert not (root / ".git" / "logs" / "refs" / "heads" / "main.lock").exists(), text
    (root / "f.txt").write_text("mine\n")
    assert _git(root, "commit", "-qam", "mine").returncode == 0, text


async def test_git_directory_modes_never_open_it_to_others(root: Path) -> None:
    """A `.git` others may write lets them replace its config or hooks, which the owner's
    next git runs: no entry there comes back with more bits than the host gave it, and a
    new one without write for others (or the group, in a `.git` the group cannot write)."""
    _repository(root)
    text = await _shell(
        root,
        "chmod 777 .git .git/objects .git/refs .git/refs/heads; chmod 666 .git/HEAD"
        " && mkdir -m 777 .git/refs/tags/new && git update-ref refs/tags/new/t HEAD"
        " && chmod 666 .git/refs/tags/new/t",
    )
    git = root / ".git"
    for path in (git, git / "objects", git / "refs", git / "refs" / "heads"):
        assert path.stat().st_mode & 0o022 == 0, (path, text)
    for path in (git / "HEAD", git / "refs" / "tags" / "new", git / "refs" / "tags" / "new" / "t"):
        assert path.stat().st_mode & 0o022 == 0, (path, text)
    assert (git / "refs" / "tags" / "new" / "t").is_file(), text


# an index of that many entries, each an empty blob under d/
_MANY_ENTRIES = r"""
import hashlib, struct, sys
count = int(sys.argv[1])
oid = bytes.fromhex("e69de29bb2d1d6434b8b29ae775a8c8ab35a93b2")
out = [struct.pack(">4sII", b"DIRC", 2, count)]
for i in range(count):
    name = b"d/%09d" % i
    entry = struct.pack(">10I", 0, 0, 0, 0, 0, 0, 0o100644, 0, 0, 0) + oid
    entry += struct.pack(">H", len(name)) + name
    out.append(entry + bytes(8 - len(entry) % 8))
body = b"".join(out)
open(".git/index", "wb").write(body + hashlib.sha1(body).digest())
"""


async def test_an_index_of_too_many_new_entries_is_left_out_unread(root: Path) -> None:
    """Each entry of a new index is listed and judged after the command's time is up: an
    index of 1.5 million forged entries held a call 139 s and 1.4 GB. Past
    MAX_ADDED_ENTRIES more than the host's index holds, it is left out unread."""
    from prism.coding.security._overlay import MAX_ADDED_ENTRIES

    _repository(root)
    (root / "many.py").write_text(_MANY_ENTRIES)
    text = await _shell(root, f"python3 many.py {MAX_ADDED_ENTRIES + 2}")
    assert f"an index adding more than {MAX_ADDED_ENTRIES} entries" in text, text
    assert _git(root, "ls-files").stdout == b"f.txt\n", text


_LONG_REFLOG = r"""
import os
os.makedirs(".git/logs/refs/heads", exist_ok=True)
line = "%040x %040x A <a@b> 1700000000 +0000\tcheckout: moving from t%d to t%d\n"
with open(".git/logs/refs/heads/x", "w") as out:
    out.write("".join(line % (i, i + 1, i, i + 1) for i in range(9000)))
"""


async def test_a_reflog_is_read_within_a_bound(root: Path) -> None:
    """Reflogs were read whole, each up to 64 MiB, after the command's time was up (ten of
    59 MB held a call 160 s). Git appends one line of about 150 bytes per update: a
    reflog with more than a MiB of new lines is left out unread."""
    _repository(root)
    (root / "reflog.py").write_text(_LONG_REFLOG)
    text = await _shell(root, "python3 reflog.py")
    assert "a reflog of more than 1048576 new bytes" in text, text
    assert not (root / ".git" / "logs" / "refs" / "heads" / "x").exists(), text
    # told by its size, never read: a sparse one costs the command nothing to make
    text = await _shell(root, "truncate -s 60M .git/logs/refs/heads/y")
    assert "a reflog of more than 1048576 new bytes" in text, text


async def test_a_staged_removal_of_a_protected_path_never_comes_back(root: Path) -> None:
    """`git rm --cached .envrc` left the file and staged its removal: the host's next
    commit would delete it from the repository, as a commit inside is refused for."""
    _repository(root)
    (root / ".envrc").write_text("echo hi\n")
    _git(root, "add", ".envrc")
    _git(root, "commit", "-qm", "envrc")
    text = await _shell(root, "git rm -q --cached .envrc")
    assert "the index removes a protected path (.envrc)" in text, text
    assert _git(root, "status", "--short").stdout == b"", text


async def test_the_new_commits_judged_for_all_refs_are_bounded(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each ref's new history is bounded, and so is their sum: 200 branches of 900
    disjoint commits held a call 166 s after its time was up. Past the bound the refs
    are left out, said (the bound made small here: the same path at any size)."""
    from prism.coding.security import _overlay

    monkeypatch.setattr(_overlay, "_HISTORY_PER_COPY_BACK", 3)
    _repository(root)
    text = await _shell(
        root,
        "for b in one two; do git checkout -q -b $b main"
        " && for i in 1 2; do echo $b$i > f.txt && git commit -qam $b$i; done; done",
    )
    assert "more than 3 new commits judged for one command's refs" in text, text
    branches = _git(root, "branch", "--format=%(refname:short)").stdout.split()
    assert len({b"one", b"two"} & set(branches)) < 2, text


async def test_what_a_sparse_file_claims_to_hold_is_never_read(root: Path) -> None:
    """A file of gigabytes made by `truncate` costs a command nothing and its reader
    everything: a git-lfs object of 8 GiB held a call 104 s hashing zeros, 40 shared
    indexes of 255 MiB 125 s. Sparse ones are left out unread, and no more than four
    new shared indexes are read per command."""
    _repository(root)
    lfs = ".git/lfs/objects/ab/cd/abcd" + "0" * 60
    shared = " ".join(f".git/sharedindex.{n:040x}" for n in range(1, 6))
    text = await _shell(
        root,
        f"mkdir -p .git/lfs/objects/ab/cd && truncate -s 8G {lfs}"
        f" && truncate -s 255M .git/sharedindex.{0:040x} && touch {shared}",
    )
    assert "a sparse git-lfs object" in text, text
    assert "a sparse shared index" in text, text
    assert "more than 4 new shared indexes from one command" in text, text
    assert not (root / lfs).exists()


async def test_an_ignore_file_that_hides_itself_never_comes_back(root: Path) -> None:
    """`*` in a new directory's own `.gitignore` hid it and a planted conftest.py from every
    `git status`: the user's review showed nothing, their next pytest ran it. An ignore
    file whose patterns ignore its own name is left out, said; so what it hid shows."""
    _repository(root)
    text = await _shell(
        root,
        "mkdir -p tests/fixtures && printf '*\\n' > tests/fixtures/.gitignore"
        " && echo 'import os' > tests/fixtures/conftest.py"
        " && printf '*.pyc\\n' > .gitignore"
        " && mkdir -p a b && printf '\\357\\273\\277*\\n' > a/.gitignore"
        " && printf '*\\nx\\f!.gitignore\\n' > b/.gitignore",
    )
    assert not (root / "a" / ".gitignore").exists(), text
    assert not (root / "b" / ".gitignore").exists(), text
    assert "an ignore file that ignores itself" in text, text
    assert not (root / "tests" / "fixtures" / ".gitignore").exists(), text
    assert (root / ".gitignore").read_text() == "*.pyc\n", text
    status = _git(root, "status", "--short", "--untracked-files=all").stdout
    assert b"?? tests/fixtures/conftest.py" in status, text
    text = await _shell(
        root, "mkdir c && (yes '#' | head -c 1100000; echo '*') > c/.gitignore && touch c/x"
    )
    assert "an ignore file past 1048576 bytes" in text, text
    assert not (root / "c" / ".gitignore").exists(), text


async def test_a_command_never_puts_the_root_past_its_repositories(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk refuses a root of more than MAX_NESTED_REPOSITORIES repositories below its
    top, and every later change with it: 257 `git init`s came back and the root took no
    change after. New repositories past the bound are left out (the bound made small here:
    the same path at any size)."""
    from prism.coding.security import _overlay

    monkeypatch.setattr(_overlay, "MAX_NESTED_REPOSITORIES", 2)
    _repository(root)
    text = await _shell(root, "for r in a b c; do git init -q vendor/$r; done")
    assert "a git repository past the 2 a root may hold below its top" in text, text
    made = sorted(p.parent.name for p in (root / "vendor").glob("*/.git"))
    assert len(made) == 2, (made, text)
    text = await _shell(root, "echo later > later.txt")
    assert (root / "later.txt").read_text() == "later\n", text


async def test_no_entry_comes_back_writable_by_others(root: Path) -> None:
    """Git records no such bit, so no review shows it: a Makefile, or the top of a nested
    repository (its .git renamed away and replaced), made writable by every local user
    is theirs to replace. No entry gains write for others (or the group) its host entry
    lacks; a new one gets none; the executable bit still comes back."""
    _repository(root)
    (root / "Makefile").write_text("all:\n")
    (root / "vendor" / "lib").mkdir(parents=True)
    _git(root / "vendor" / "lib", "init", "-q")
    text = await _shell(
        root,
        "chmod o+w,g+w Makefile vendor vendor/lib && chmod +x Makefile"
        " && mkdir -m 777 open && echo x > open/f && chmod 666 open/f",
    )
    for path in ("Makefile", "vendor", "vendor/lib", "open", "open/f"):
        assert (root / path).stat().st_mode & 0o022 == 0, (path, text)
    assert (root / "Makefile").stat().st_mode & 0o100, text


async def test_a_shared_index_the_host_has_is_never_replaced(root: Path) -> None:
    """Git names a shared index by its checksum and never rewrites one: replaced in place,
    every index-reading git on the host died ("broken index, expect X ... got Y")."""
    _repository(root)
    text = await _shell(root, "git update-index --split-index")
    assert list(root.joinpath(".git").glob("sharedindex.*")), text
    # (git touches it to keep it from expiring: the same bytes come back, unsaid)
    text = await _shell(root, "touch -d @1 .git/sharedindex.*")
    assert "shared index" not in text, text
    text = await _shell(root, "for f in .git/sharedindex.*; do printf x >> $f; done")
    assert "a shared index the host has is never replaced" in text, text
    assert _git(root, "status", "--short").returncode == 0, text


async def test_the_refs_one_command_may_move_are_bounded(root: Path) -> None:
    """Each moved ref costs the host git processes after the command's own time is up
    (1,000 branches made by a one-second fast-import held a call 105 s): past
    MAX_MOVED_REFS they are left out unjudged, and said; fewer come back."""
    from prism.coding.security._overlay import MAX_MOVED_REFS

    _repository(root)
    many = MAX_MOVED_REFS + 20
    text = await _shell(
        root,
        f"for i in $(seq {many}); do echo create refs/heads/b$i HEAD; done"
        " | git update-ref --stdin",
    )
    assert f"more than {MAX_MOVED_REFS} refs moved by one command" in text, text
    assert _git(root, "rev-parse", "-q", "--verify", "b1").returncode != 0
    text = await _shell(root, "git branch one && git branch two")
    assert _git(root, "rev-parse", "-q", "--verify", "two").returncode == 0, text


@pytest.mark.parametrize(
    ("text", "hides"),
    [
        (b"*\n", True), (b".*\n", True), (b"*.pyc\n", False), (b"*\n!.gitignore\n", False),
        (b"\xef\xbb\xbf*\n", True), (b"*\nx\x0c!.gitignore\n", True), (b"*\r\n", True),
        (b".GITIGNORE\n", True), (b"*\n!.GITIGNORE\n", True), (b"build/\n", False),
        (b"**/.gitignore\n", True), (b"*\n!" + b"x" * 300 + b"\n", True),
        (b"#" * 300 + b"\nnode_modules\n", False), (b"*\0x\n", True), (b"x\0*\n", False),
        (b"*\n!.gitignore\0x\n", False), (b"\0\n.gitignor?\r\n", True),
    ],
)  # fmt: skip
def test_an_ignore_file_is_read_as_git_reads_it(tmp_path: Path, text: bytes, hides: bool) -> None:
    """As git: a byte order mark skipped, lines split at newlines only and cut at a NUL
    (git holds a pattern as a C string), ignoring patterns in
    any case; what is not read here (a class, an escape, a line past 255 characters) is
    taken as ignoring and never as re-including, and makes no regular expression. Held
    against git's own check-ignore: no file git ignores passes the check."""
    from prism.coding.security._overlay import _self_ignoring

    path = tmp_path / ".gitignore"
    path.write_bytes(text)
    assert (_self_ignoring(str(path)) is not None) is hides
    # against git itself: whatever git takes as ignoring the file, so does the check
    _git(tmp_path, "init", "-q")
    if _git(tmp_path, "check-ignore", "-q", "--no-index", ".gitignore").returncode == 0:
        assert hides, text


async def test_a_self_ignoring_gitignore_never_lands_by_a_host_side_write(root: Path) -> None:
    """The ways a file reaches the root without the copy-back's content check: a line
    whose only write is a redirection (the host opens the target), one `sed -i` (the
    host replaces the file with the filter's output), the write and edit tools. A
    `.gitignore` of `*` written so would hide itself and a planted `conftest.py` from
    every `git status`; each is judged as the copy-back judges it (the first two run
    over the layer instead, the tools refuse it), and an ordinary one is written."""
    _repository(root)
    for directory in ("tests", "a", "b", "c", "ok"):
        (root / directory).mkdir()
    (root / "a" / ".gitignore").write_text("x\n")
    (root / "c" / ".gitignore").write_text("x\n")
    calls = [
        ("shell", {"command": "echo 'import os' > tests/conftest.py"}),
        ("shell", {"command": "printf '*\\n' > tests/.gitignore"}),
        ("shell", {"command": "sed -i s/x/*/ a/.gitignore"}),
        ("write", {"path": "b/.gitignore", "content": "*\n"}),
        ("edit", {"path": "c/.gitignore", "edits": [{"old_text": "x", "new_text": "*"}]}),
        ("shell", {"command": "printf 'build/\\n' > ok/.gitignore"}),
    ]
    texts = []
    async with open_secure_coding_tools([str(root)]) as secure:
        assert secure.backend == "bubblewrap"
        options = DispatchOptions(registry=create_tool_registry(secure.tools))
        for index, (tool, arguments) in enumerate(calls):
            call = ToolCall(id=str(index), name=tool, arguments=arguments)
            with trio.fail_after(60):
                texts.append((await dispatch(call, options)).joined_text)
    status = _git(root, "status", "--short", "--untracked-files=all").stdout.decode()
    for path in ("tests/conftest.py", "a/.gitignore", "c/.gitignore", "ok/.gitignore"):
        assert path in status, (status, texts)
    for path in ("tests/.gitignore", "a/.gitignore", "b/.gitignore", "c/.gitignore"):
        assert not (root / path).exists() or "*" not in (root / path).read_text(), texts
    assert (root / "ok" / ".gitignore").read_text() == "build/\n", texts
    assert "ignores itself" in texts[3], texts
    assert "ignores itself" in texts[4], texts


def test_the_wildcard_match_is_fnmatchs_without_a_regular_expression() -> None:
    """The ignore-file check matches `*` and `?` against the one name without compiling
    a pattern (a line is any of a million the command wrote): the same answers as
    fnmatch's, on every short pattern of the name's letters and on random longer ones."""
    import fnmatch
    import itertools
    import random

    from prism.coding.security._ignorefile import wildcard_match

    patterns = ["".join(t) for k in range(6) for t in itertools.product(".gi*?n", repeat=k)]
    chosen = random.Random(7)
    patterns += ["".join(chosen.choice(".gitnore*?xG") for _ in range(chosen.randint(0, 16)))
                 for _ in range(20000)]  # fmt: skip
    patterns += ["*a" * 60 + "*", "*" * 255, "?" * 10, "?" * 11, ".git*ore", "*i*i*i*"]
    for pattern in patterns:
        for name in (".gitignore", "abc", ""):
            assert wildcard_match(pattern, name) is fnmatch.fnmatchcase(name, pattern), pattern


async def test_ignore_files_are_read_within_a_bound(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ignore files one command brings are read up to a number of bytes (their
    number is the command's to choose, each up to 1 MiB): past it they are left out
    unread, saying so; those read before come back."""
    from prism.coding.security import _overlay

    monkeypatch.setattr(_overlay, "_IGNORE_BYTES_PER_COPY_BACK", 120)
    _repository(root)
    text = await _shell(
        root,
        "for d in a b c; do mkdir $d && printf 'build/\\ndist/\\n%040d\\n' 0 > $d/.gitignore; done",
    )
    assert (root / "a" / ".gitignore").exists(), text
    assert (root / "b" / ".gitignore").exists(), text
    assert not (root / "c" / ".gitignore").exists(), text
    assert "ignore files past 120 bytes from one command" in text, text
