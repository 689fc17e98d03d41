"""What every root's answer holds: the names that replace a standard module at a top.

``implied_protected`` gives them for the root's top and each repository's top
(``re.py``, ``argparse/__init__.*``); a test about a root's other entries compares
what is left without them.
"""

from __future__ import annotations

from prism.coding.security._implied import _module_shadows


def without_module_shadows(found: list[str] | set[str]) -> list[str]:
    """``found`` without the entries that replace a standard module at some top."""
    shadows = set(_module_shadows())
    return [
        entry
        for entry in found
        if not any("/".join(entry.split("/")[i:]) in shadows for i in range(entry.count("/") + 1))
    ]
