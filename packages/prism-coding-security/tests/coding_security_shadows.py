"""What every root's answer holds: what replaces a standard module at each top.

``implied_protected`` gives one ``MODULE_SHADOWS`` entry for the root's top and
one for each repository's top (``re.py``, ``argparse/__init__.py`` there); a
test about a root's other entries compares what is left without them.
"""

from __future__ import annotations

from prism.coding.security._pymodules import MODULE_SHADOWS


def without_module_shadows(found: list[str] | set[str]) -> list[str]:
    """``found`` without its ``MODULE_SHADOWS`` entries."""
    return [entry for entry in found if entry.split("/")[-1] != MODULE_SHADOWS]
