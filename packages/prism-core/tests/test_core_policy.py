"""Permission rules (globs over kind:target:action) and execution policy checks."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from prism.core import (
    ConfigurationError,
    ExecutionAction,
    ExecutionDecision,
    ExecutionDeniedError,
    PermissionDecision,
    PermissionDeniedError,
    PermissionRequest,
    PrismError,
    assert_execution_allowed,
    assert_permission,
    create_rule_permission_policy,
)
from prism.core.testing import (
    AllowAllExecutionPolicy,
    AllowAllPermissionPolicy,
    DenyAllExecutionPolicy,
    DenyAllPermissionPolicy,
)

if TYPE_CHECKING:
    from collections.abc import Mapping


def _tool(name: str, action: str = "execute") -> PermissionRequest:
    return PermissionRequest(kind="tool", target=name, action=action)


def _allowed(policy: object, request: PermissionRequest) -> bool:
    decision = policy.check(request)  # type: ignore[attr-defined]
    assert isinstance(decision, PermissionDecision)
    return decision.allowed


# --- PermissionRequest -----------------------------------------------------------------


def test_request_key_joins_kind_target_action() -> None:
    assert _tool("mcp:docs:search").key == "tool:mcp:docs:search:execute"


# --- create_rule_permission_policy -----------------------------------------------------


def test_default_is_deny() -> None:
    policy = create_rule_permission_policy()
    assert not _allowed(policy, _tool("read"))


def test_default_allow_allows_unmatched_keys() -> None:
    policy = create_rule_permission_policy(default="allow", deny=["tool:shell:*"])
    assert _allowed(policy, _tool("read"))
    assert not _allowed(policy, _tool("shell"))


def test_star_spans_colons_so_namespaced_tools_match() -> None:
    policy = create_rule_permission_policy(allow=["tool:mcp:*:execute"])
    assert _allowed(policy, _tool("mcp:docs:search"))
    assert _allowed(policy, _tool("mcp:git:log"))
    assert not _allowed(policy, _tool("read"))
    assert not _allowed(policy, _tool("mcp:docs:search", action="setup"))


def test_deny_wins_over_allow() -> None:
    policy = create_rule_permission_policy(
        allow=["tool:*:execute"], deny=["tool:mcp:untrusted:*"], default="allow"
    )
    assert _allowed(policy, _tool("mcp:trusted:x"))
    decision = policy.check(_tool("mcp:untrusted:x"))
    assert isinstance(decision, PermissionDecision)
    assert not decision.allowed
    assert decision.reason is not None
    assert "deny" in decision.reason


def test_rules_match_the_whole_key_not_a_prefix() -> None:
    policy = create_rule_permission_policy(allow=["tool:read:execute"])
    assert _allowed(policy, _tool("read"))
    assert not _allowed(policy, _tool("reader"))
    assert not _allowed(policy, _tool("read:execute"))
    assert not _allowed(policy, PermissionRequest(kind="xtool", target="read", action="execute"))


def test_question_mark_and_character_classes_are_globs() -> None:
    policy = create_rule_permission_policy(allow=["tool:?ead:execute", "tool:[wv]rite:execute"])
    assert _allowed(policy, _tool("read"))
    assert _allowed(policy, _tool("write"))
    assert not _allowed(policy, _tool("bread"))


def test_regex_metacharacters_in_rules_are_literal() -> None:
    policy = create_rule_permission_policy(allow=["tool:a.b+c:execute"])
    assert _allowed(policy, _tool("a.b+c"))
    assert not _allowed(policy, _tool("axbbc"))


def test_keys_with_newlines_do_not_slip_past_rules() -> None:
    policy = create_rule_permission_policy(allow=["tool:read:execute"])
    assert not _allowed(policy, _tool("read:execute\ntool:read"))
    deny = create_rule_permission_policy(default="allow", deny=["tool:shell*"])
    assert not _allowed(deny, _tool("shell\nx"))


def test_rules_accept_any_iterable() -> None:
    policy = create_rule_permission_policy(allow=(p for p in ["tool:read:execute"]))
    assert _allowed(policy, _tool("read"))


@pytest.mark.parametrize(
    ("kwargs", "option"),
    [
        ({"allow": "tool:*:execute"}, "allow"),
        ({"deny": "tool:*:execute"}, "deny"),
        ({"allow": [""]}, "allow"),
        ({"deny": [None]}, "deny"),
        ({"allow": 5}, "allow"),
        ({"default": "maybe"}, "default"),
        ({"default": True}, "default"),
    ],
)
def test_bad_options_raise_configuration_error_naming_the_option(
    kwargs: dict[str, object], option: str
) -> None:
    with pytest.raises(ConfigurationError, match=option) as info:
        create_rule_permission_policy(**kwargs)  # type: ignore[arg-type]
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, PrismError)


_segment = st.text(alphabet="abcxyz:-_.*?", min_size=1, max_size=8)


@given(
    target=st.text(alphabet="abcxyz:-_.", min_size=1, max_size=12),
    allow=st.lists(_segment, max_size=3),
    deny=st.lists(_segment, min_size=1, max_size=3),
)
def test_a_matching_deny_rule_always_wins(target: str, allow: list[str], deny: list[str]) -> None:
    request = _tool(target)
    allow_rules = [f"tool:{a}:execute" for a in allow] + ["*"]
    deny_rules = [f"tool:{d}:execute" for d in deny] + [request.key]
    policy = create_rule_permission_policy(allow=allow_rules, deny=deny_rules, default="allow")
    assert not _allowed(policy, request)


@given(target=st.text(min_size=1, max_size=30))
def test_the_same_key_always_gets_the_same_answer(target: str) -> None:
    policy = create_rule_permission_policy(allow=["tool:a*:execute"], deny=["tool:ab*:*"])
    first = _allowed(policy, _tool(target))
    assert _allowed(policy, _tool(target)) == first
    expected = target.startswith("a") and not target.startswith("ab")
    assert first == expected


# --- assert_permission -----------------------------------------------------------------


async def test_assert_permission_with_no_policy_allows() -> None:
    await assert_permission(None, _tool("anything"))


async def test_assert_permission_passes_when_allowed() -> None:
    policy = AllowAllPermissionPolicy()
    await assert_permission(policy, _tool("read"))
    assert policy.requests == [_tool("read")]


async def test_assert_permission_raises_with_key_and_reason() -> None:
    with pytest.raises(PermissionDeniedError) as info:
        await assert_permission(DenyAllPermissionPolicy(reason="weekend"), _tool("shell"))
    assert info.value.key == "tool:shell:execute"
    assert info.value.reason == "weekend"
    assert "tool:shell:execute" in str(info.value)
    assert "weekend" in str(info.value)


async def test_assert_permission_awaits_async_policies() -> None:
    class AsyncPolicy:
        async def check(self, request: PermissionRequest) -> PermissionDecision:
            await trio.lowlevel.checkpoint()
            return PermissionDecision(allowed=request.target == "ok")

    await assert_permission(AsyncPolicy(), _tool("ok"))
    with pytest.raises(PermissionDeniedError):
        await assert_permission(AsyncPolicy(), _tool("no"))


async def test_assert_permission_fails_closed_on_a_non_decision() -> None:
    class Sloppy:
        def check(self, request: PermissionRequest) -> bool:
            return True

    with pytest.raises(PermissionDeniedError, match="not a PermissionDecision"):
        await assert_permission(Sloppy(), _tool("read"))  # type: ignore[arg-type]


# --- ExecutionAction / assert_execution_allowed ----------------------------------------


def test_action_paths_must_not_be_a_bare_string() -> None:
    with pytest.raises(ConfigurationError, match="paths"):
        ExecutionAction(kind="read", operation="read", paths="/etc/passwd")
    with pytest.raises(ConfigurationError, match="paths"):
        ExecutionAction(kind="read", operation="read", paths=[3])  # type: ignore[list-item]
    action = ExecutionAction(kind="read", operation="read", paths=["/a", "/b"])
    assert action.paths == ("/a", "/b")


async def test_assert_execution_allowed_without_policy_returns_the_action() -> None:
    action = ExecutionAction(kind="shell", operation="shell", command="ls")
    assert await assert_execution_allowed(None, action) is action


async def test_assert_execution_allowed_returns_the_action_when_allowed() -> None:
    policy = AllowAllExecutionPolicy()
    action = ExecutionAction(kind="read", operation="read", paths=("/tmp/x",))
    assert await assert_execution_allowed(policy, action) == action
    assert policy.actions == [action]


async def test_assert_execution_allowed_applies_modified() -> None:
    class Rewrite:
        def check(self, action: ExecutionAction) -> ExecutionDecision:
            return ExecutionDecision(
                allowed=True, modified={"command": f"timeout 5 {action.command}", "risk": "high"}
            )

    action = ExecutionAction(kind="shell", operation="shell", command="make test")
    result = await assert_execution_allowed(Rewrite(), action)
    assert result.command == "timeout 5 make test"
    assert result.risk == "high"
    assert result.kind == "shell"
    assert action.command == "make test"


async def test_assert_execution_allowed_raises_with_reason_and_details() -> None:
    class Deny:
        async def check(self, action: ExecutionAction) -> ExecutionDecision:
            await trio.lowlevel.checkpoint()
            return ExecutionDecision(
                allowed=False, reason="outside roots", details={"path": "/etc/passwd"}
            )

    with pytest.raises(ExecutionDeniedError) as info:
        await assert_execution_allowed(Deny(), ExecutionAction(kind="read", operation="read"))
    assert info.value.reason == "outside roots"
    assert info.value.details == {"path": "/etc/passwd"}
    assert isinstance(info.value, PrismError)


async def test_denial_without_a_reason_still_says_what_was_denied() -> None:
    with pytest.raises(ExecutionDeniedError, match="write"):
        await assert_execution_allowed(
            _Fixed(ExecutionDecision(allowed=False)),
            ExecutionAction(kind="write", operation="write"),
        )


@pytest.mark.parametrize(
    "modified",
    [{"no_such_field": 1}, {"paths": "/a/single/string"}],
    ids=["unknown field", "bad value"],
)
async def test_bad_modified_raises_configuration_error(modified: Mapping[str, object]) -> None:
    policy = _Fixed(ExecutionDecision(allowed=True, modified=modified))
    with pytest.raises(ConfigurationError):
        await assert_execution_allowed(policy, ExecutionAction(kind="read", operation="read"))


async def test_execution_policy_answer_that_is_not_a_decision_fails_closed() -> None:
    with pytest.raises(ExecutionDeniedError, match="not an ExecutionDecision"):
        await assert_execution_allowed(_Fixed(True), ExecutionAction(kind="read", operation="read"))


async def test_deny_all_execution_policy_records_actions() -> None:
    policy = DenyAllExecutionPolicy(reason="read only")
    action = ExecutionAction(kind="write", operation="write", paths=("/x",))
    with pytest.raises(ExecutionDeniedError, match="read only"):
        await assert_execution_allowed(policy, action)
    assert policy.actions == [action]


class _Fixed:
    def __init__(self, decision: object) -> None:
        self._decision = decision

    def check(self, action: ExecutionAction) -> ExecutionDecision:
        return self._decision  # type: ignore[return-value]
