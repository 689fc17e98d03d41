"""LangChain and LangGraph: Prism's tools as tools, and Prism's gates around existing ones.

Needs ``prismgate-integrations[langchain]``.
"""

from ._langchain import PrismGatedTool as PrismGatedTool
from ._langchain import PrismTool as PrismTool
from ._langchain import gate_langchain_tool as gate_langchain_tool
from ._langchain import prism_langchain_tools as prism_langchain_tools

__all__ = ["PrismGatedTool", "PrismTool", "gate_langchain_tool", "prism_langchain_tools"]
