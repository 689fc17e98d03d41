"""Every public factory and options class of prism.core refuses a bad option the same way.

A wrong type or value raises ConfigurationError whose message names the
option and the value, and whose ``option`` and ``value`` attributes carry both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from prism.core import (
    ConfigurationError,
    DispatchOptions,
    Limits,
    RunOptions,
    ScriptedProvider,
    SingleShotLoop,
    ToolDefinition,
    ToolFilter,
    ToolRegistry,
    create_agent,
    create_extension_kernel,
    create_rule_permission_policy,
    create_tool_name_map,
    create_tool_parameter_validator,
    create_tool_registry,
    discover_contributions,
    dispatch_tool_calls_in_order,
    provider_safe_name,
    resolve_tool_concurrency,
)
from prism.core.ledger import (
    JsonlLedgerSink,
    LedgerQuery,
    OtelLedgerSink,
    RunLedger,
    SqliteLedgerSink,
)
from prism.core.process import terminate_process_tree
from prism.core.testing import echo_tool

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def _agent(**options: Any) -> object:
    return create_agent(**{"model": "m", "provider": ScriptedProvider([]), **options})


def _tool(**options: Any) -> object:
    return ToolDefinition(**{"name": "t", "execute": echo_tool().execute, **options})


def _dispatch(**options: Any) -> DispatchOptions:
    return DispatchOptions(**{"registry": create_tool_registry(), **options})


async def _in_order(concurrency: Any) -> object:
    return await dispatch_tool_calls_in_order([], _dispatch(), concurrency=concurrency)


async def _terminate(**options: Any) -> None:
    await terminate_process_tree(**{"root": 999_999, **options})


_NOT_A_TOOL = object()

# (the option as the error names it, the bad value, how to make the mistake)
CASES: list[tuple[str, object, Callable[[Any], object]]] = [
    ("DispatchOptions.registry", {}, lambda v: DispatchOptions(registry=v)),
    ("DispatchOptions.filters", ["read"], lambda v: _dispatch(filters=v)),
    ("DispatchOptions.permission", "allow", lambda v: _dispatch(permission=v)),
    ("DispatchOptions.validator", "strict", lambda v: _dispatch(validator=v)),
    ("DispatchOptions.middleware", [print], lambda v: _dispatch(middleware=v)),
    ("DispatchOptions.on_event", 3, lambda v: _dispatch(on_event=v)),
    ("DispatchOptions.ledger", [], lambda v: _dispatch(ledger=v)),
    ("DispatchOptions.signal", True, lambda v: _dispatch(signal=v)),
    ("DispatchOptions.metadata", ["a"], lambda v: _dispatch(metadata=v)),
    ("SingleShotLoop.concurrency", 0, lambda v: SingleShotLoop(concurrency=v)),
    ("Limits.max_tool_rounds", -1, lambda v: Limits(max_tool_rounds=v)),
    ("Limits.max_tool_calls_per_turn", True, lambda v: Limits(max_tool_calls_per_turn=v)),
    ("RunOptions.signal", "stop", lambda v: RunOptions(signal=v)),
    ("RunOptions.limits", 3, lambda v: RunOptions(limits=v)),
    ("RunOptions.loop", "fast", lambda v: RunOptions(loop=v)),
    ("RunOptions.validator", 1, lambda v: RunOptions(validator=v)),
    ("RunOptions.on_event", "log", lambda v: RunOptions(on_event=v)),
    ("create_agent.model", "", lambda v: _agent(model=v)),
    ("create_agent.provider", object(), lambda v: _agent(provider=v)),
    ("create_agent.tools", "read", lambda v: _agent(tools=v)),
    ("create_agent.tools", [_NOT_A_TOOL], lambda v: _agent(tools=v)),
    ("create_agent.validator", 3, lambda v: _agent(validator=v)),
    ("create_agent.permission", "all", lambda v: _agent(permission=v)),
    ("create_agent.middleware", {}, lambda v: _agent(middleware=v)),
    ("create_agent.filters", [None], lambda v: _agent(filters=v)),
    ("create_agent.loop", Limits(), lambda v: _agent(loop=v)),
    ("create_agent.limits", SingleShotLoop(), lambda v: _agent(limits=v)),
    ("create_agent.ledger", [], lambda v: _agent(ledger=v)),
    ("ToolDefinition.name", "", lambda v: _tool(name=v)),
    ("ToolDefinition.execute", None, lambda v: _tool(execute=v)),
    ("ToolDefinition.definition_hash", 5, lambda v: _tool(definition_hash=v)),
    ("ToolRegistry.duplicate", "keep", lambda v: ToolRegistry(duplicate=v)),
    ("create_tool_registry.duplicate", "x", lambda v: create_tool_registry(duplicate=v)),
    ("ToolFilter.allow", "read", lambda v: ToolFilter(allow=v)),
    ("ToolFilter.deny", [1], lambda v: ToolFilter(deny=v)),
    ("RunLedger.redact", "yes", lambda v: RunLedger(redact=v)),
    ("RunLedger.sinks", [object()], lambda v: RunLedger(sinks=v)),
    ("RunLedger.on_error", 1, lambda v: RunLedger(on_error=v)),
    ("RunLedger.run_id", "", lambda v: RunLedger(run_id=v)),
    ("RunLedger.max_records", 0, lambda v: RunLedger(max_records=v)),
    ("RunLedger.end_run.outcome", "done", lambda v: RunLedger().end_run(v)),
    ("LedgerQuery.status", [1], lambda v: LedgerQuery(status=v)),
    ("LedgerQuery.tool", 7, lambda v: LedgerQuery(tool=v)),
    ("LedgerQuery.run", 7, lambda v: LedgerQuery(run=v)),
    ("LedgerQuery.since", "today", lambda v: LedgerQuery(since=v)),
    ("LedgerQuery.blocked", "yes", lambda v: LedgerQuery(blocked=v)),
    ("OtelLedgerSink.agent_name", 3, lambda v: OtelLedgerSink(agent_name=v)),
    ("OtelLedgerSink.record_arguments", 1, lambda v: OtelLedgerSink(record_arguments=v)),
    (
        "create_rule_permission_policy.default",
        "maybe",
        lambda v: create_rule_permission_policy(default=v),
    ),
    (
        "create_rule_permission_policy.allow",
        "tool:*",
        lambda v: create_rule_permission_policy(allow=v),
    ),
    ("create_rule_permission_policy.deny", [""], lambda v: create_rule_permission_policy(deny=v)),
    (
        "create_tool_parameter_validator.validator",
        object(),
        lambda v: create_tool_parameter_validator(v),
    ),
    ("provider_safe_name.name", None, lambda v: provider_safe_name(v)),
    (
        "create_tool_name_map.names",
        "a b",
        lambda v: create_tool_name_map([provider_safe_name("a b"), v]),
    ),
    (
        "resolve_tool_concurrency.requested",
        2.0,
        lambda v: resolve_tool_concurrency(v, [], create_tool_registry()),
    ),
    ("create_extension_kernel.permission", 1, lambda v: create_extension_kernel(permission=v)),
    ("discover_contributions.group", "", lambda v: discover_contributions(v)),
]


@pytest.mark.parametrize(("option", "value", "make"), CASES, ids=[c[0] for c in CASES])
def test_a_bad_option_raises_configuration_error_naming_it(
    option: str, value: object, make: Callable[[object], object]
) -> None:
    with pytest.raises(ConfigurationError) as info:
        make(value)
    assert info.value.option == option
    # Iterables are checked as the tuple they were read into.
    assert info.value.value in (value, tuple(value) if isinstance(value, list) else value)
    assert str(info.value).startswith(f"{option} must be") or option in str(info.value)
    assert repr(info.value.value)[:20] in str(info.value)


ASYNC_CASES: list[tuple[str, object, Callable[[Any], Any]]] = [
    ("dispatch_tool_calls_in_order.concurrency", 0, _in_order),
    ("terminate_process_tree.root", 1, lambda v: _terminate(root=v)),
    ("terminate_process_tree.marker", "", lambda v: _terminate(marker=v)),
    ("terminate_process_tree.grace_s", float("nan"), lambda v: _terminate(grace_s=v)),
]


@pytest.mark.parametrize(("option", "value", "make"), ASYNC_CASES, ids=[c[0] for c in ASYNC_CASES])
async def test_a_bad_argument_of_an_async_factory_raises_configuration_error(
    option: str, value: object, make: Callable[[object], Any]
) -> None:
    with pytest.raises(ConfigurationError) as info:
        await make(value)
    assert info.value.option == option
    assert str(info.value).startswith(f"{option} must be")


@pytest.mark.parametrize(
    ("option", "value", "make"),
    [
        ("JsonlLedgerSink.fsync", "sometimes", lambda p, v: JsonlLedgerSink(p, fsync=v)),
        ("JsonlLedgerSink.max_bytes", 0, lambda p, v: JsonlLedgerSink(p, max_bytes=v)),
        ("JsonlLedgerSink.backups", -1, lambda p, v: JsonlLedgerSink(p, backups=v)),
        ("ledger sink.path", 3, lambda _p, v: JsonlLedgerSink(v)),
        ("SqliteLedgerSink.fsync", "x", lambda p, v: SqliteLedgerSink(p, fsync=v)),
        ("SqliteLedgerSink.busy_timeout_s", -1, lambda p, v: SqliteLedgerSink(p, busy_timeout_s=v)),
    ],
)
def test_a_bad_sink_option_raises_before_any_file_is_made(
    tmp_path: Path, option: str, value: object, make: Callable[[Path, object], object]
) -> None:
    path = tmp_path / "ledger"
    with pytest.raises(ConfigurationError) as info:
        make(path, value)
    assert info.value.option == option
    assert not path.exists()
