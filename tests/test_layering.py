"""The layers of docs/architecture.md, kept: no import cycles, no import that climbs a layer.

Every import of every module under ``packages/*/src`` is read with :mod:`ast`,
wherever it stands: at the top, inside a function, under ``TYPE_CHECKING``. A
function-local import that hides a cycle is a cycle.
"""

from __future__ import annotations

import ast
import pathlib
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

ROOT = pathlib.Path(__file__).resolve().parent.parent

# The layer of each package, as drawn in docs/architecture.md ("Layers"). A package
# imports only packages of a lower layer, and only their public modules.
LAYERS: Mapping[str, int] = {
    "prism.core": 0,
    "prism.coding.tools": 1,
    "prism.integrations": 1,
    "prism.mcp": 1,
    "prism.providers": 1,
    "prism.validation.jsonschema": 1,
    "prism.coding.security": 2,
    "prism.gateway": 3,
    "prism.cli": 4,
}

# Imports that still close a cycle inside a package while their owner moves the
# shared piece down. Empty: nothing may be added to it without a plan to remove it.
KNOWN_CYCLE_EDGES: frozenset[tuple[str, str]] = frozenset()


class Module:
    """One module of a package's source tree."""

    def __init__(self, name: str, path: pathlib.Path, is_package: bool) -> None:
        self.name = name
        self.path = path
        self.is_package = is_package

    @property
    def public(self) -> bool:
        # __main__ is an entry point, on top like the facade; _x is private.
        return not any(
            part.startswith("_") and not part.endswith("__") for part in self.name.split(".")
        )


def _modules() -> dict[str, Module]:
    found: dict[str, Module] = {}
    for src in sorted(ROOT.glob("packages/*/src")):
        for path in sorted(src.rglob("*.py")):
            parts = list(path.relative_to(src).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts = parts[:-1]
            name = ".".join(parts)
            found[name] = Module(name, path, is_package)
    return found


MODULES = _modules()


def _package_of(name: str) -> str:
    """The layered package a module belongs to (its longest listed prefix)."""
    best = ""
    for package in LAYERS:
        if (name == package or name.startswith(package + ".")) and len(package) > len(best):
            best = package
    return best


def _known(name: str) -> str | None:
    """``name`` or its closest enclosing module of the repository, if any."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def imported_names(module: Module) -> set[str]:
    """Every module ``module`` imports, absolute, wherever the import statement stands."""
    tree = ast.parse(module.path.read_text(encoding="utf-8"), filename=str(module.path))
    here = module.name if module.is_package else module.name.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join([*base, node.module] if node.module else base)
            else:
                origin = node.module or ""
            submodules = [
                f"{origin}.{alias.name}"
                for alias in node.names
                if f"{origin}.{alias.name}" in MODULES
            ]
            names.update(submodules)
            if len(submodules) < len(node.names):
                names.add(origin)
    return names


def import_graph() -> dict[str, set[str]]:
    """Each module of the repository -> the modules of the repository it imports."""
    graph: dict[str, set[str]] = {}
    for name, module in MODULES.items():
        targets = {_known(imported) for imported in imported_names(module)}
        graph[name] = {target for target in targets if target is not None and target != name}
    return graph


GRAPH = import_graph()


def find_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_every_package_has_a_documented_layer() -> None:
    unplaced = sorted({name for name in MODULES if not _package_of(name)} - {"prism"})
    assert not unplaced, (
        f"modules outside every documented layer: {unplaced}; add their package to LAYERS "
        "here and to the layer diagram in docs/architecture.md"
    )


def test_the_layers_are_those_the_architecture_page_draws() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    for package, layer in LAYERS.items():
        assert f"| {layer} | `{package}` |" in section, f"{package} (layer {layer})"


def test_no_import_cycle_between_the_modules_of_a_package() -> None:
    within = {
        name: {
            target
            for target in targets
            if _package_of(target) == _package_of(name) and (name, target) not in KNOWN_CYCLE_EDGES
        }
        for name, targets in GRAPH.items()
    }
    assert find_cycles(within) == []


def test_no_import_climbs_a_layer() -> None:
    climbing = sorted(
        (name, target)
        for name, targets in GRAPH.items()
        for target in targets
        if _package_of(target) != _package_of(name)
        and LAYERS[_package_of(target)] >= LAYERS[_package_of(name)]
    )
    assert climbing == []


def test_no_package_imports_another_packages_private_module() -> None:
    private = sorted(
        (name, target)
        for name, targets in GRAPH.items()
        for target in targets
        if _package_of(target) != _package_of(name) and not MODULES[target].public
    )
    assert private == []


def test_private_modules_never_import_their_own_packages_facade() -> None:
    # The public modules (__init__, testing, options, text, ...) sit on top of the
    # private ones: a private module that imports one climbs back over its own facade.
    upward = sorted(
        (name, target)
        for name, targets in GRAPH.items()
        if not MODULES[name].public
        for target in targets
        if _package_of(target) == _package_of(name) and MODULES[target].public
    )
    assert upward == []


# --- the checker itself ------------------------------------------------------------------


def test_a_cycle_of_two_is_found() -> None:
    assert find_cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]


def test_a_longer_cycle_is_found_once() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert find_cycles(graph) == [["a", "b", "c"]]


def test_a_chain_has_no_cycle() -> None:
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def _module_from_source(
    tmp_path: pathlib.Path, name: str, source: str, *, is_package: bool = False
) -> Module:
    path = tmp_path / "m.py"
    path.write_text(source, encoding="utf-8")
    return Module(name, path, is_package)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from ._dispatch import DispatchOptions\n", "prism.core._dispatch"),
        ("def f():\n    from ._parallel import x\n", "prism.core._parallel"),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._agent import Agent\n",
            "prism.core._agent",
        ),
        ("from . import _dispatch\n", "prism.core._dispatch"),
        ("import prism.mcp._wire\n", "prism.mcp._wire"),
        ("from ..core import ToolCall\n", "prism.core"),
    ],
)
def test_imports_are_read_wherever_they_stand(
    tmp_path: pathlib.Path, source: str, expected: str
) -> None:
    name = "prism.core._x" if not source.startswith("from ..") else "prism.mcp._x"
    module = _module_from_source(tmp_path, name, source)
    assert expected in {_known(found) for found in imported_names(module)}


def test_a_submodule_imported_from_its_package_does_not_count_as_the_package(
    tmp_path: pathlib.Path,
) -> None:
    module = _module_from_source(tmp_path, "prism.core._x", "from . import _dispatch\n")
    assert imported_names(module) == {"prism.core._dispatch"}
