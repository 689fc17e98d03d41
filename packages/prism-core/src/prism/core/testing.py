"""prism.core.testing: the conformance kit and test doubles (filled in by the core issue)."""

__all__: list[str] = []
