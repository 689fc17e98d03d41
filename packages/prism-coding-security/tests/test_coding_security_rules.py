"""Rules on normalised argv, rule examples, protected paths, readable paths, approvers."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
import trio

from prism.coding.security import (
    PROTECTED_PATHS,
    SAFE_PROGRAMS,
    ApprovalDecision,
    CommandRule,
    CommandRules,
    create_coding_approval_policy,
    explain_command,
)
from prism.core import ConfigurationError, ExecutionAction, ExecutionDecision

if TYPE_CHECKING:
    from pathlib import Path


def _shell(command: str, root: Path) -> ExecutionAction:
    return ExecutionAction(kind="shell", operation="shell", command=command, paths=(str(root),))


@pytest.mark.parametrize(
    "spelling",
    ["rm -rf /tmp/x", "rm -fr /tmp/x", "rm -r -f /tmp/x", "rm --recursive --force /tmp/x",
     "rm --recur --force /tmp/x", "rm -R --forc /tmp/x", "/bin/rm -rf /tmp/x", "\\rm -rf /tmp/x",
     "command rm -rf /tmp/x", "env rm -rf /tmp/x", "rm -v -rf -- /tmp/x", "rm /tmp/x -rf",
     "timeout 5 rm -rf /tmp/x", "bash -c 'rm -rf /tmp/x'", "nice -n 1 rm -fr /tmp/x"],
)  # fmt: skip
def test_a_deny_rule_matches_every_spelling_of_its_options(root: Path, spelling: str) -> None:
    rules = CommandRules(deny=["rm -rf /tmp/x"])
    explanation = explain_command(spelling, roots=[str(root)], command_rules=rules)
    assert explanation.outcome == "deny", explanation
    assert explanation.rule == "deny:rm -rf /tmp/x"


@pytest.mark.parametrize("command", ["rm -r /tmp/x", "rm -rf /tmp/y", "rm -f /tmp/x"])
def test_a_deny_rule_needs_all_its_options_and_operands(root: Path, command: str) -> None:
    rules = CommandRules(deny=["rm -rf /tmp/x"])
    assert explain_command(command, roots=[str(root)], command_rules=rules).outcome == "ask"


def test_a_lone_star_matches_any_words_options_included(root: Path) -> None:
    rules = CommandRules(deny=["git push *"])
    for command in ("git push", "git push -f origin main", "git push --force-with-lease",
                    "git -C . push", "git --no-pager push origin"):  # fmt: skip
        assert explain_command(command, roots=[str(root)], command_rules=rules).outcome == "deny"
    assert explain_command("git pull", roots=[str(root)], command_rules=rules).outcome == "ask"


def test_an_option_value_in_a_rule_must_match(root: Path) -> None:
    rules = CommandRules(deny=["timeout --signal=KILL *"])
    deny = explain_command("timeout -s KILL 5 ls", roots=[str(root)], command_rules=rules)
    assert deny.outcome == "deny"
    other = explain_command("timeout -s TERM 5 ls", roots=[str(root)], command_rules=rules)
    assert other.outcome == "allow"
    rules = CommandRules(deny=["sort --output=* *"])
    assert explain_command("sort -o f x", roots=[str(root)], command_rules=rules).outcome == "deny"


def test_allow_rules_need_the_program_named_as_in_the_rule(root: Path) -> None:
    rules = CommandRules(allow=["make *"])
    assert explain_command("make test", roots=[str(root)], command_rules=rules).outcome == "allow"
    assert explain_command("./make test", roots=[str(root)], command_rules=rules).outcome == "ask"
    absolute = CommandRules(allow=["/usr/bin/make *"])
    assert (
        explain_command("/usr/bin/make", roots=[str(root)], command_rules=absolute).outcome
        == "allow"
    )


def test_an_allowed_command_still_cannot_write_outside_the_roots(root: Path) -> None:
    rules = CommandRules(allow=["make *"])
    explanation = explain_command("make > /tmp/out", roots=[str(root)], command_rules=rules)
    assert explanation.outcome == "ask"
    assert "outside the roots" in explanation.reason


def test_rule_examples_are_checked_when_the_rules_are_built(root: Path) -> None:
    good = CommandRule(
        pattern="rm -rf /srv/*",
        match=["rm --recursive --force /srv/data", "sh -c 'rm -fr /srv/x'"],
        not_match=["rm -r /srv/data", "ls /srv"],
    )
    create_coding_approval_policy(roots=[str(root)], command_rules=CommandRules(deny=[good]))
    wrong = CommandRule(pattern="rm -rf /srv/*", match=["rm -r /srv/data"])
    with pytest.raises(ConfigurationError, match=r"'rm -rf /srv/\*'.*should match") as info:
        create_coding_approval_policy(roots=[str(root)], command_rules=CommandRules(deny=[wrong]))
    assert isinstance(info.value, ValueError)
    backwards = CommandRule(pattern="git push *", not_match=["env git push"])
    with pytest.raises(ConfigurationError, match="should not match"):
        create_coding_approval_policy(
            roots=[str(root)], command_rules=CommandRules(allow=[backwards])
        )


def test_an_unsplittable_rule_is_a_configuration_error(root: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot be split"):
        create_coding_approval_policy(
            roots=[str(root)], command_rules=CommandRules(deny=["rm 'unterminated"])
        )


@pytest.mark.parametrize(
    "path",
    [".envrc", ".mcp.json", "prism.toml", ".bashrc", ".vscode/tasks.json", "HEAD", "sub/HEAD",
     "commondir", ".ENVRC", ".VSCode/tasks.json"],
)  # fmt: skip
def test_the_write_tool_asks_before_writing_a_protected_path(root: Path, path: str) -> None:
    policy = create_coding_approval_policy(roots=[str(root)])
    decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(path,)))
    assert isinstance(decision, ExecutionDecision)
    assert not decision.allowed
    assert decision.details["check"] == "protected"
    assert decision.details["needs_approval"] is True


@pytest.mark.parametrize(
    "path",
    [".git/config", ".git/hooks/pre-commit", "sub/.git/config", ".git", ".git/HEAD",
     "sub/.git", ".git/refs/heads/main", ".Git/config"],
)  # fmt: skip
@pytest.mark.parametrize("kind", ["write", "edit"])
def test_the_write_and_edit_tools_never_write_in_git(root: Path, path: str, kind: str) -> None:
    policy = create_coding_approval_policy(roots=[str(root)])
    decision = policy.check(ExecutionAction(kind=kind, operation=kind, paths=(path,)))
    assert isinstance(decision, ExecutionDecision)
    assert not decision.allowed
    assert decision.details["check"] == "git_directory"
    assert "needs_approval" not in decision.details


def test_ordinary_files_next_to_protected_ones_are_writable(root: Path) -> None:
    policy = create_coding_approval_policy(roots=[str(root)])
    for path in ("src/config", ".github/workflows/ci.yml", ".gitignore", "git/config"):
        decision = policy.check(ExecutionAction(kind="write", operation="write", paths=(path,)))
        assert isinstance(decision, ExecutionDecision)
        assert decision.allowed, path


def test_protected_paths_can_be_extended(root: Path) -> None:
    policy = create_coding_approval_policy(roots=[str(root)], protected_paths=["Makefile"])
    decision = policy.check(ExecutionAction(kind="edit", operation="edit", paths=("Makefile",)))
    assert isinstance(decision, ExecutionDecision)
    assert not decision.allowed
    assert ".git/config" in PROTECTED_PATHS


@pytest.mark.parametrize("entry", ["/abs", "../up", "", "a/../b"])
def test_bad_protected_paths_are_refused(root: Path, entry: str) -> None:
    with pytest.raises(ConfigurationError, match="protected_paths"):
        create_coding_approval_policy(roots=[str(root)], protected_paths=[entry])


def test_readable_paths_may_be_read_but_not_written(root: Path, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.txt").write_text("hello\n")
    command = f"cat {docs / 'guide.txt'}"
    assert explain_command(command, roots=[str(root)]).outcome == "ask"
    assert explain_command(command, roots=[str(root)], readable=[str(docs)]).outcome == "allow"
    write = f"echo x > {docs / 'guide.txt'}"
    assert explain_command(write, roots=[str(root)], readable=[str(docs)]).outcome == "ask"
    with pytest.raises(ConfigurationError, match="absolute"):
        create_coding_approval_policy(roots=[str(root)], readable=["relative/dir"])


def test_the_safe_set_is_read_only_programs() -> None:
    assert {"ls", "cat", "grep", "git", "find", "sed", "awk"} <= SAFE_PROGRAMS
    assert not {"rm", "make", "python3", "bash", "env", "printenv", "tee", "cp"} & SAFE_PROGRAMS


def test_details_list_every_part_with_its_verdict(root: Path) -> None:
    policy = create_coding_approval_policy(roots=[str(root)])
    decision = policy.check(_shell("ls | grep x && make", root))
    assert isinstance(decision, ExecutionDecision)
    parts = decision.details["commands"]
    assert isinstance(parts, list)
    assert [(p["argv"][0], p["verdict"], p["rule"]) for p in parts] == [
        ("ls", "allow", "model:ls"),
        ("grep", "allow", "model:grep"),
        ("make", "ask", "unknown-program"),
    ]


def test_a_program_name_shadowed_by_a_file_in_a_root_on_path_asks(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    policy = create_coding_approval_policy(roots=[str(root)])
    assert explain_command("ls", roots=[str(root)]).outcome == "allow"  # nothing shadows ls
    (bin_dir / "ls").write_text("#!/bin/sh\necho pwned\n")
    (bin_dir / "ls").chmod(0o755)
    decision = policy.check(_shell("ls | grep x", root))
    assert isinstance(decision, ExecutionDecision)
    assert not decision.allowed
    assert decision.details["rule"] == "path_shadow"
    monkeypatch.setenv("PATH", "/usr/bin::/bin")  # an empty entry is the working directory
    (root / "grep").write_text("#!/bin/sh\n")
    (root / "grep").chmod(0o755)
    assert explain_command("grep x f", roots=[str(root)]).rule == "path_shadow"


@pytest.mark.parametrize("entry", ["./node_modules/.bin", "bin", "../pkg/bin"])
def test_a_relative_path_entry_is_resolved_where_the_line_cds(
    root: Path, monkeypatch: pytest.MonkeyPatch, entry: str
) -> None:
    """A relative PATH entry names a directory below wherever the command runs."""
    monkeypatch.setenv("PATH", f"{entry}:/usr/bin:/bin")
    planted = root / "pkg" / entry.removeprefix("../pkg/")
    planted.mkdir(parents=True)
    (planted / "ls").write_text("#!/bin/sh\necho pwned\n")
    (planted / "ls").chmod(0o755)
    roots = [str(root)]
    assert explain_command("ls", roots=roots, cwd=str(root)).outcome == "allow"
    for line in ("cd pkg && ls", "cd pkg; git status; ls", "(cd pkg && ls -la)"):
        explanation = explain_command(line, roots=roots, cwd=str(root))
        assert explanation.rule == "path_shadow", (line, explanation)


class TestApprovers:
    async def test_a_sync_approver_is_accepted(self, root: Path) -> None:
        seen: list[str | None] = []

        def approve(action: ExecutionAction) -> bool:
            seen.append(action.command)
            return True

        policy = create_coding_approval_policy(roots=[str(root)], approve=approve)
        pending = policy.check(_shell("make test", root))
        assert not isinstance(pending, ExecutionDecision)
        decision = await pending
        assert decision.allowed
        assert seen == ["make test"]

    async def test_a_sync_approver_returning_a_decision_is_honoured(self, root: Path) -> None:
        def approve(action: ExecutionAction) -> ApprovalDecision:
            return ApprovalDecision(approved=False, reason="not on Fridays")

        policy = create_coding_approval_policy(roots=[str(root)], approve=approve)
        pending = policy.check(_shell("make test", root))
        assert not isinstance(pending, ExecutionDecision)
        decision = await pending
        assert not decision.allowed
        assert "not on Fridays" in (decision.reason or "")

    async def test_remember_false_asks_again(self, root: Path) -> None:
        calls = 0

        async def approve(action: ExecutionAction) -> ApprovalDecision:
            nonlocal calls
            calls += 1
            await trio.lowlevel.checkpoint()
            return ApprovalDecision(approved=True, remember=False)

        policy = create_coding_approval_policy(roots=[str(root)], approve=approve)
        for _ in range(2):
            pending = policy.check(_shell("make", root))
            assert not isinstance(pending, ExecutionDecision)
            assert (await pending).allowed
        assert calls == 2

    async def test_an_approval_cannot_override_a_deny_rule(self, root: Path) -> None:
        def approve(action: ExecutionAction) -> bool:
            raise AssertionError("never asked")

        policy = create_coding_approval_policy(roots=[str(root)], approve=approve)
        decision = policy.check(_shell("timeout 5 env -S 'sudo id'", root))
        assert isinstance(decision, ExecutionDecision)
        assert not decision.allowed

    def test_approval_decision_needs_a_bool_approved(self) -> None:
        assert ApprovalDecision(approved=True, remember=False).remember is False
        with pytest.raises(TypeError):
            ApprovalDecision(approved="yes")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            ApprovalDecision(True)  # type: ignore[call-arg]


def test_git_asks_inside_a_bare_repository_the_write_tool_could_have_made(root: Path) -> None:
    # HEAD, objects/ and refs/ make a directory a repository to git, and its `config`
    # (unlike .git/config) is not a protected path: git there is not proved safe
    bare = root / "evil"
    (bare / "objects").mkdir(parents=True)
    (bare / "refs").mkdir()
    (bare / "HEAD").write_text("ref: refs/heads/main\n")
    (bare / "config").write_text("[core]\n\tbare = true\n")
    for command in ("cd evil && git log", "git -C evil status", "cd evil/objects && git log"):
        explanation = explain_command(command, roots=[str(root)])
        assert explanation.outcome == "ask", command
        assert explanation.rule == "git:bare_repository"
    (root / ".git").mkdir()  # an ordinary repository above it does not change that
    assert explain_command("git -C evil log", roots=[str(root)]).outcome == "ask"
    assert explain_command("git log", roots=[str(root)]).outcome == "allow"


@pytest.mark.parametrize(
    "command",
    ["env -C sub cat link", "env --chdir=sub cat link", "git -C sub diff --no-index link x",
     "git -C sub blame --contents=link f", "git -C sub config -f link --list"],
)  # fmt: skip
def test_paths_relative_to_another_directory_are_not_judged_from_here(
    root: Path, command: str
) -> None:
    # sub/link leads outside; judged from the root, "link" would look harmless
    (root / "sub").mkdir()
    (root / "sub" / "link").symlink_to("/etc/passwd")
    assert explain_command(command, roots=[str(root)]).outcome == "ask"
    assert explain_command("git -C sub log", roots=[str(root)]).outcome == "allow"


async def test_the_approver_is_told_why_it_is_asked(root: Path) -> None:
    seen: list[object] = []

    def approve(action: ExecutionAction) -> bool:
        seen.append(action.metadata.get("approval_reason"))
        return False

    policy = create_coding_approval_policy(roots=[str(root)], approve=approve)
    pending = policy.check(_shell("make test", root))
    assert not isinstance(pending, ExecutionDecision)
    await pending
    assert seen == ["command 'make test': 'make' is not in the safe set"]


def test_rule_examples_see_wrapped_scripts_and_computed_words(tmp_path: Path) -> None:
    rule = CommandRule(
        pattern="sudo *",
        match=["env sudo id", "bash -c 'sudo id'", "$(x) y; sudo z", "sudo $'x'"],
        not_match=["echo sudo"],
    )
    create_coding_approval_policy(roots=[str(tmp_path)], command_rules=CommandRules(deny=[rule]))


def test_path_entries_with_a_tilde_are_searched_where_real_bash_searches(root: Path) -> None:
    """Bash (not execvp) expands a tilde prefix in each PATH entry as it searches. A program
    is planted where each spelling could lead, real bash says which one it runs, and the
    policy names that one (or asks, for an entry it cannot know), never proves it."""
    import getpass
    import os
    import subprocess

    home, work, old = root / "home", root / "work", root / "old"
    spellings: dict[str, Path | None] = {
        "~/bin": home / "bin", "~": home, "~+/bin": work / "bin", "~0/bin": work / "bin",
        "~-/bin": old / "bin", "~nosuchuser9/bin": work / "~nosuchuser9" / "bin",
        "x~/bin": work / "x~" / "bin", "~1/bin": work / "~1" / "bin",
        f"~{getpass.getuser()}/bin": None,  # the real home's: outside the root
    }  # fmt: skip
    places = {place for place in spellings.values() if place is not None}
    for n, _ in enumerate(spellings):
        for folder in places | {old / "bin"}:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"zzp{n}").write_text('#!/bin/sh\necho "$0"\n')
            (folder / f"zzp{n}").chmod(0o755)
    env = {"HOME": str(home), "OLDPWD": str(old), "PATH": "/usr/bin:/bin"}
    env |= {f"P{n}": spelling for n, spelling in enumerate(spellings)}
    script = "; ".join(
        f'PATH="$P{n}:/usr/bin:/bin"; zzp{n} 2>/dev/null || echo none'
        for n in range(len(spellings))
    )
    bash = subprocess.run(
        ["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True, check=True
    )
    # (a relative entry's program runs by its relative path)
    ran = [line if line == "none" else os.path.join(work, line) for line in bash.stdout.split()]
    policy = create_coding_approval_policy(roots=[str(root)])
    for n, (spelling, place) in enumerate(spellings.items()):
        expected = "none" if place is None else os.path.join(place, f"zzp{n}")
        assert ran[n] == expected, (spelling, ran[n])
        metadata = {"env_path": f"{spelling}:/usr/bin:/bin", "env_home": str(home)}
        decision = policy.check(
            ExecutionAction(kind="shell", operation="shell", command=f"zzp{n}", paths=(str(work),),
                            metadata=metadata)
        )  # fmt: skip
        assert isinstance(decision, ExecutionDecision)
        commands = decision.details["commands"]
        assert isinstance(commands, list)
        assert decision.reason is not None
        if place is None:
            assert commands[0]["rule"] == "unknown-program", (spelling, decision.reason)
        elif spelling in ("~-/bin", "~1/bin"):  # the directory stack's: not known before
            assert "directory stack or OLDPWD" in decision.reason, (spelling, decision.reason)
        else:
            assert f"would run {expected!r}" in decision.reason, (spelling, decision.reason)
    # found in an absolute entry before it, a name never reaches the unknown entry
    decision = policy.check(
        ExecutionAction(kind="shell", operation="shell", command="ls", paths=(str(work),),
                        metadata={"env_path": "/usr/bin:/bin:~-/bin", "env_home": str(home)})
    )  # fmt: skip
    assert isinstance(decision, ExecutionDecision)
    assert decision.allowed, decision.reason


async def test_the_shell_tool_gives_the_policy_the_home_its_path_entries_expand_with(
    root: Path,
) -> None:
    """The shell tool's environment, not this process's, sets the HOME bash expands
    ``~/bin`` with: a program planted in that home's ``bin`` asks, never runs."""
    from prism.coding.tools import create_coding_tools
    from prism.core import DispatchOptions, ToolCall, create_tool_registry, dispatch_tool_call

    home = root / "home"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "ls").write_text("#!/bin/sh\necho planted > planted.txt\n")
    (home / "bin" / "ls").chmod(0o755)
    policy = create_coding_approval_policy(roots=[str(root)])
    tools = create_coding_tools(
        str(root),
        execution_policy=policy,
        shell_options={"env": {"PATH": "~/bin:/usr/bin:/bin", "HOME": str(home)}},
    )
    result = await dispatch_tool_call(
        ToolCall(id="1", name="shell", arguments={"command": "ls"}),
        DispatchOptions(registry=create_tool_registry(tools)),
    )
    assert result.is_error
    assert "would run" in result.joined_text, result.joined_text
    assert not (root / "planted.txt").exists()
