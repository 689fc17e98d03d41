"""prism.integrations: Prism's gates inside the asyncio agent frameworks people already run.

An agent built on pydantic-ai, the OpenAI Agents SDK or LangChain/LangGraph
keeps its framework, its model and its loop; Prism's gates (middleware,
filters, permission, validation, the coding execution policy with approval,
the ledger, events) sit between the model's tool calls and the tools, in the
same process, through one :func:`~prism.core.open_asyncio_host`.

One submodule per framework, each needing its extra
(``prismgate-integrations[pydantic-ai]``, ``[openai-agents]``, ``[langchain]``):

- :mod:`prism.integrations.pydantic_ai`: ``PrismToolset`` (Prism's tools as a
  toolset) and ``PrismGatedToolset`` (an existing toolset behind the gates);
- :mod:`prism.integrations.openai_agents`: ``prism_function_tools`` and
  ``gate_function_tool``;
- :mod:`prism.integrations.langchain`: ``prism_langchain_tools`` and
  ``gate_langchain_tool``.

Each takes a :class:`PrismGate`: the host and the :class:`~prism.core.DispatchOptions`.
A call a gate refuses reaches the model the way the framework reports a tool
error; the run goes on. The ledger records the framework's run and call ids.
"""

from ._gate import FrameworkOutcome as FrameworkOutcome
from ._gate import PrismGate as PrismGate

__all__ = ["FrameworkOutcome", "PrismGate"]
