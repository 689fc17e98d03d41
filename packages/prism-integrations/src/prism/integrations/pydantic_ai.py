"""pydantic-ai: Prism's tools as a toolset, and Prism's gates around an existing toolset.

Needs ``prismgate-integrations[pydantic-ai]``.
"""

from ._pydantic_ai import PrismGatedToolset as PrismGatedToolset
from ._pydantic_ai import PrismToolset as PrismToolset

__all__ = ["PrismGatedToolset", "PrismToolset"]
