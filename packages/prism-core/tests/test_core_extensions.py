"""Extensions: permission before setup, inert all-or-nothing contributions, discovery."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs
import pytest
import trio

from prism.core import (
    AssistantMessage,
    ConfigurationError,
    DiscoveredContribution,
    ExtensionAPI,
    ExtensionError,
    JsonObject,
    PermissionDecision,
    PermissionDeniedError,
    PermissionRequest,
    ScriptedProvider,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    create_agent,
    create_extension_kernel,
    create_rule_permission_policy,
    create_tool_registry,
    discover_contributions,
)

if TYPE_CHECKING:
    from pathlib import Path


async def hello(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text("hello")


def tool(name: str) -> ToolDefinition:
    return ToolDefinition(name=name, execute=hello)


@attrs.define
class Ext:
    name: str
    contribute: Callable[[ExtensionAPI], None] = lambda api: None
    calls: int = 0

    def setup(self, api: ExtensionAPI) -> None:
        self.calls += 1
        self.contribute(api)


async def test_setup_contributes_inert_tools() -> None:
    kernel = create_extension_kernel()
    live = create_tool_registry()
    await kernel.load(Ext("greeter", lambda api: api.register_tool(tool("hello"))))
    assert [t.name for t in kernel.contributions.tools] == ["hello"]
    assert kernel.contributions.sources == {"hello": "greeter"}
    assert kernel.extensions == ("greeter",)
    assert len(live) == 0


async def test_async_setup_is_awaited() -> None:
    class AsyncExt:
        name = "async-ext"

        async def setup(self, api: ExtensionAPI) -> None:
            api.register_tool(tool("later"))

    kernel = create_extension_kernel()
    await kernel.load(AsyncExt())
    assert [t.name for t in kernel.contributions.tools] == ["later"]


async def test_permission_is_checked_before_setup() -> None:
    policy = create_rule_permission_policy(allow=["extension:trusted:setup"])
    kernel = create_extension_kernel(permission=policy)
    refused = Ext("stranger", lambda api: api.register_tool(tool("x")))
    with pytest.raises(PermissionDeniedError, match="extension:stranger:setup"):
        await kernel.load(refused)
    assert refused.calls == 0
    assert kernel.contributions.tools == []
    await kernel.load(Ext("trusted"))
    assert kernel.extensions == ("trusted",)


async def test_colon_in_a_name_cannot_borrow_another_extensions_rules() -> None:
    policy = create_rule_permission_policy(allow=["extension:trusted:*"])
    kernel = create_extension_kernel(permission=policy)
    spoof = Ext("trusted:evil")
    with pytest.raises(ExtensionError, match="no colons"):
        await kernel.load(spoof)
    assert spoof.calls == 0


async def test_failed_setup_keeps_nothing_and_is_chained() -> None:
    def half_then_fail(api: ExtensionAPI) -> None:
        api.register_tool(tool("partial"))
        raise RuntimeError("setup broke")

    kernel = create_extension_kernel()
    with pytest.raises(ExtensionError, match="setup failed: RuntimeError: setup broke") as info:
        await kernel.load(Ext("flaky", half_then_fail))
    assert isinstance(info.value.__cause__, RuntimeError)
    assert kernel.contributions.tools == []
    assert kernel.extensions == ()


async def test_api_is_closed_after_setup() -> None:
    kept: list[ExtensionAPI] = []
    kernel = create_extension_kernel()
    await kernel.load(Ext("sneaky", kept.append))
    with pytest.raises(ExtensionError, match="after its setup returned"):
        kept[0].register_tool(tool("late"))
    assert kernel.contributions.tools == []


async def test_tool_name_taken_by_another_extension_is_refused_whole() -> None:
    def two(api: ExtensionAPI) -> None:
        api.register_tool(tool("fresh"))
        api.register_tool(tool("shared"))

    kernel = create_extension_kernel()
    await kernel.load(Ext("first", lambda api: api.register_tool(tool("shared"))))
    with pytest.raises(ExtensionError, match="already contributed by extension 'first'"):
        await kernel.load(Ext("second", two))
    assert [t.name for t in kernel.contributions.tools] == ["shared"]
    assert kernel.extensions == ("first",)


async def test_registering_a_tool_twice_or_a_non_tool_is_refused() -> None:
    def twice(api: ExtensionAPI) -> None:
        api.register_tool(tool("a"))
        api.register_tool(tool("a"))

    def junk(api: ExtensionAPI) -> None:
        api.register_tool("not a tool")  # type: ignore[arg-type]

    kernel = create_extension_kernel()
    with pytest.raises(ExtensionError, match="twice"):
        await kernel.load(Ext("twice", twice))
    with pytest.raises(ExtensionError, match="not a ToolDefinition"):
        await kernel.load(Ext("junk", junk))
    assert kernel.contributions.tools == []


async def test_loading_the_same_extension_twice_is_refused() -> None:
    kernel = create_extension_kernel()
    await kernel.load(Ext("once"))
    with pytest.raises(ExtensionError, match="already loaded"):
        await kernel.load(Ext("once"))


@pytest.mark.parametrize("name", ["", None, 3, "has space", "x" * 129, "line\nbreak"])
async def test_bad_extension_names_are_refused(name: object) -> None:
    kernel = create_extension_kernel()
    with pytest.raises(ExtensionError, match="extension name"):
        await kernel.load(Ext(name))  # type: ignore[arg-type]


async def test_extension_without_setup_is_refused() -> None:
    class NoSetup:
        name = "nosetup"

    kernel = create_extension_kernel()
    with pytest.raises(ExtensionError, match="no callable setup"):
        await kernel.load(NoSetup())  # type: ignore[arg-type]


def test_kernel_refuses_a_permission_without_check() -> None:
    with pytest.raises(ConfigurationError, match="permission"):
        create_extension_kernel(permission="allow")  # type: ignore[arg-type]


async def test_contributed_tools_still_pass_the_dispatch_gates() -> None:
    kernel = create_extension_kernel()
    await kernel.load(Ext("greeter", lambda api: api.register_tool(tool("hello"))))
    provider = ScriptedProvider(
        [
            AssistantMessage(tool_calls=(ToolCall(id="1", name="hello", arguments={}),)),
            AssistantMessage(),
        ]
    )
    agent = create_agent(
        model="m",
        provider=provider,
        tools=kernel.contributions.tools,
        permission=create_rule_permission_policy(deny=["tool:hello:execute"], default="allow"),
    )
    result = await agent.session().run("go")
    assert [(r.tool_name, r.blocked_reason) for r in result.records] == [
        ("hello", "permission_denied")
    ]


def install_fake_distribution(root: Path, *, group: str, module: str) -> Path:
    """A real installed distribution: a .dist-info with an entry point, plus a bomb module."""
    dist_info = root / "prism_fake_ext-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: prism-fake-ext\nVersion: 1.0\n", encoding="utf-8"
    )
    (dist_info / "entry_points.txt").write_text(
        f"[{group}]\nbomb = {module}:Extension\nsecond = {module}:Other\n", encoding="utf-8"
    )
    canary = root / "imported.flag"
    (root / f"{module}.py").write_text(
        f"open({str(canary)!r}, 'w').close()\n"
        "raise RuntimeError('this module must not be imported')\n",
        encoding="utf-8",
    )
    return canary


def test_discovery_reads_metadata_and_imports_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = "prism_fake_ext_bomb"
    canary = install_fake_distribution(tmp_path, group="prism.test-extensions", module=module)
    monkeypatch.syspath_prepend(str(tmp_path))
    found = discover_contributions("prism.test-extensions")
    assert found == [
        DiscoveredContribution(
            name="bomb",
            value=f"{module}:Extension",
            group="prism.test-extensions",
            distribution="prism-fake-ext",
        ),
        DiscoveredContribution(
            name="second",
            value=f"{module}:Other",
            group="prism.test-extensions",
            distribution="prism-fake-ext",
        ),
    ]
    assert module not in sys.modules
    assert not canary.exists()


def test_discovery_of_an_unused_group_is_empty() -> None:
    assert discover_contributions("prism.nobody-uses-this-group") == []


def test_default_group_is_prism_extensions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_fake_distribution(tmp_path, group="prism.extensions", module="prism_fake_ext_default")
    monkeypatch.syspath_prepend(str(tmp_path))
    names = [c.name for c in discover_contributions() if c.distribution == "prism-fake-ext"]
    assert names == ["bomb", "second"]


@pytest.mark.parametrize("group", ["", None])
def test_discovery_refuses_a_bad_group(group: object) -> None:
    with pytest.raises(ConfigurationError, match="group"):
        discover_contributions(group)  # type: ignore[arg-type]


async def test_concurrent_loads_of_one_name_cannot_both_succeed() -> None:
    release = trio.Event()
    entered = trio.Event()

    class Slow:
        name = "racer"

        async def setup(self, api: ExtensionAPI) -> None:
            entered.set()
            await release.wait()
            api.register_tool(tool("raced"))

    kernel = create_extension_kernel()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(kernel.load, Slow())
        await entered.wait()
        with pytest.raises(ExtensionError, match="already loaded"):
            await kernel.load(Slow())
        release.set()
    assert kernel.extensions == ("racer",)
    assert [t.name for t in kernel.contributions.tools] == ["raced"]


async def test_a_refused_load_can_be_retried_once_allowed() -> None:
    allowed: set[str] = set()

    class Toggle:
        def check(self, request: PermissionRequest) -> PermissionDecision:
            return PermissionDecision(allowed=request.target in allowed)

    kernel = create_extension_kernel(permission=Toggle())
    with pytest.raises(PermissionDeniedError):
        await kernel.load(Ext("later"))
    allowed.add("later")
    await kernel.load(Ext("later"))
    assert kernel.extensions == ("later",)
