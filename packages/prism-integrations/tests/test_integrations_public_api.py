import importlib
import inspect
import subprocess
import sys

import pytest

DOCUMENTED = {
    "prism.integrations": {"FrameworkOutcome", "PrismGate"},
    "prism.integrations.pydantic_ai": {"PrismGatedToolset", "PrismToolset"},
    "prism.integrations.openai_agents": {"gate_function_tool", "prism_function_tools"},
    "prism.integrations.langchain": {
        "PrismGatedTool",
        "PrismTool",
        "gate_langchain_tool",
        "prism_langchain_tools",
    },
}


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_all_matches_documented_names(name: str) -> None:
    module = importlib.import_module(name)
    assert set(module.__all__) == DOCUMENTED[name]
    assert module.__all__ == sorted(module.__all__)


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_every_export_exists_and_has_a_docstring(name: str) -> None:
    module = importlib.import_module(name)
    assert inspect.getdoc(module)
    for export in module.__all__:
        obj = getattr(module, export)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"{name}.{export} has no docstring"


def test_the_root_module_imports_no_framework() -> None:
    # Each framework is an extra: importing prism.integrations needs none of them.
    check = (
        "import sys, prism.integrations; "
        "loaded = {'pydantic_ai', 'agents', 'langchain_core'} & set(sys.modules); "
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", check], check=True, timeout=60)
