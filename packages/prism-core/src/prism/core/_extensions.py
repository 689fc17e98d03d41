"""Extensions: permission-checked setup that contributes inert tools, and discovery.

An extension contributes :class:`ToolDefinition` values; nothing it contributes
is registered into a live registry or offered to a model until the host does so
itself (``create_agent(tools=kernel.contributions.tools)``, for example), and
every such call still goes through the dispatcher's gates.
"""

from __future__ import annotations

import inspect
import re
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs

from ._errors import ExtensionError
from ._host_calls import await_callback
from ._options import has_method, optional, string
from ._policy import PermissionPolicy, PermissionRequest, assert_permission
from ._tools import ToolDefinition

if TYPE_CHECKING:
    from collections.abc import Awaitable

__all__ = [
    "ContributionRegistries",
    "DiscoveredContribution",
    "Extension",
    "ExtensionAPI",
    "ExtensionKernel",
    "create_extension_kernel",
    "discover_contributions",
]

_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")


@runtime_checkable
class Extension(Protocol):
    """Something that contributes to a host through :meth:`setup`.

    Attributes:
        name: letters, digits, ``_``, ``.`` and ``-`` (1 to 128, no colons);
            permission is checked as ``extension:<name>:setup``.
    """

    name: str

    def setup(self, api: ExtensionAPI) -> Awaitable[None] | None:
        """Contribute through ``api``; may be sync or async."""
        ...


@attrs.define(eq=False)
class ContributionRegistries:
    """What loaded extensions contributed. Inert: nothing here is live.

    Attributes:
        tools: contributed tool definitions, in contribution order.
        sources: the name of the extension that contributed each tool, by tool name.
    """

    tools: list[ToolDefinition] = attrs.field(factory=list)
    sources: dict[str, str] = attrs.field(factory=dict)


@attrs.define(eq=False)
class ExtensionAPI:
    """What an extension's ``setup`` may do. It only records contributions.

    The API is usable only while ``setup`` runs; it is closed afterwards, so an
    extension cannot contribute later behind the host's back.
    """

    extension_name: str
    _staged: list[ToolDefinition] = attrs.field(factory=list, init=False)
    _closed: bool = attrs.field(default=False, init=False)

    def register_tool(self, tool: ToolDefinition) -> None:
        """Contribute ``tool`` (it is not registered anywhere live).

        Raises:
            ExtensionError: ``tool`` is not a :class:`ToolDefinition`, the name was
                already contributed by this extension, or ``setup`` has returned.
        """
        if self._closed:
            raise ExtensionError(
                f"extension {self.extension_name!r} called register_tool after its setup "
                "returned; contributions are accepted only during setup"
            )
        if not isinstance(tool, ToolDefinition):
            raise ExtensionError(
                f"extension {self.extension_name!r} registered {type(tool).__name__}, "
                "not a ToolDefinition"
            )
        if any(staged.name == tool.name for staged in self._staged):
            raise ExtensionError(
                f"extension {self.extension_name!r} registered the tool {tool.name!r} twice"
            )
        self._staged.append(tool)


@attrs.define(eq=False)
class ExtensionKernel:
    """Loads extensions after a permission check and keeps their contributions.

    Build one with :func:`create_extension_kernel`.
    """

    permission: PermissionPolicy | None = None
    contributions: ContributionRegistries = attrs.field(factory=ContributionRegistries)
    _loaded: list[str] = attrs.field(factory=list, init=False)
    _loading: set[str] = attrs.field(factory=set, init=False)

    @property
    def extensions(self) -> tuple[str, ...]:
        """Names of the extensions loaded so far, in load order."""
        return tuple(self._loaded)

    async def load(self, extension: Extension) -> None:
        """Check ``extension:<name>:setup``, run ``setup``, then keep its contributions.

        Contributions are all-or-nothing: if ``setup`` raises, or contributes a
        tool name another extension already contributed, nothing it registered
        is kept. Checkpoints only where the policy or ``setup`` does.
        Cancellation during ``setup`` keeps nothing and propagates.

        Raises:
            PermissionDeniedError: the policy refused ``extension:<name>:setup``;
                ``setup`` was not called.
            ExtensionError: the extension has no usable name or ``setup``, was
                already loaded, raised in ``setup`` (chained), or contributed a
                tool name that is already taken.
        """
        name = getattr(extension, "name", None)
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            # A colon would let "trusted:x" match rules written for "trusted".
            raise ExtensionError(
                f"an extension name must match {_NAME.pattern} (no colons), got {name!r}"
            )
        setup = getattr(extension, "setup", None)
        if not callable(setup):
            raise ExtensionError(f"extension {name!r} has no callable setup(api)")
        if name in self._loaded or name in self._loading:
            raise ExtensionError(f"extension {name!r} is already loaded")
        # Reserved for the whole load, so two concurrent loads of one name cannot both win.
        self._loading.add(name)
        try:
            await assert_permission(
                self.permission, PermissionRequest(kind="extension", target=name, action="setup")
            )
            api = ExtensionAPI(extension_name=name)
            try:
                outcome = setup(api)
                if inspect.isawaitable(outcome):
                    await await_callback(setup, outcome)
            except ExtensionError:
                raise
            except Exception as exc:
                raise ExtensionError(
                    f"extension {name!r} setup failed: {type(exc).__name__}: {exc}"
                ) from exc
            finally:
                api._closed = True
            self._commit(name, api)
        finally:
            self._loading.discard(name)

    def _commit(self, name: str, api: ExtensionAPI) -> None:
        sources = self.contributions.sources
        for tool in api._staged:
            owner = sources.get(tool.name)
            if owner is not None:
                raise ExtensionError(
                    f"extension {name!r} contributed the tool {tool.name!r}, "
                    f"already contributed by extension {owner!r}"
                )
        for tool in api._staged:
            self.contributions.tools.append(tool)
            sources[tool.name] = name
        self._loaded.append(name)


def create_extension_kernel(*, permission: PermissionPolicy | None = None) -> ExtensionKernel:
    """A kernel that checks ``extension:<name>:setup`` with ``permission`` before each setup.

    ``None`` allows every extension; pass a policy to choose which may load.

    Raises:
        ConfigurationError: ``permission`` has no ``check`` method.
    """
    optional(has_method("check")).check("create_extension_kernel", "permission", permission)
    return ExtensionKernel(permission=permission)


@attrs.frozen(kw_only=True)
class DiscoveredContribution:
    """An entry point an installed distribution declares; nothing was imported.

    Attributes:
        name: the entry point's name.
        value: its ``module:attr`` reference, as text.
        group: the entry point group.
        distribution: the declaring distribution's name, when known.
    """

    name: str
    value: str
    group: str
    distribution: str | None = None


def discover_contributions(group: str = "prism.extensions") -> list[DiscoveredContribution]:
    """List the entry points of ``group`` declared by installed distributions.

    Reads distribution metadata only: no module is imported and no extension is
    activated (load one yourself, after review, with :meth:`ExtensionKernel.load`).
    Results are sorted by distribution, then name. Sync and quick; it reads
    small metadata files.

    Raises:
        ConfigurationError: ``group`` is not a non-empty string.
    """
    string().check("discover_contributions", "group", group)
    # Imported here: it costs about a tenth of ``import prism.core``, for a
    # function most programs never call.
    import importlib.metadata

    found = []
    for entry in importlib.metadata.entry_points(group=group):
        dist = getattr(entry, "dist", None)
        dist_name = dist.metadata.get("Name") if dist is not None else None
        found.append(
            DiscoveredContribution(
                name=entry.name,
                value=entry.value,
                group=entry.group,
                distribution=dist_name if isinstance(dist_name, str) else None,
            )
        )
    found.sort(key=lambda c: (c.distribution or "", c.name, c.value))
    return found
