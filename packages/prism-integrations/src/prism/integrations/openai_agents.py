"""The OpenAI Agents SDK: Prism's tools as function tools, and Prism's gates around existing ones.

Needs ``prismgate-integrations[openai-agents]``.
"""

from ._openai_agents import gate_function_tool as gate_function_tool
from ._openai_agents import prism_function_tools as prism_function_tools

__all__ = ["gate_function_tool", "prism_function_tools"]
