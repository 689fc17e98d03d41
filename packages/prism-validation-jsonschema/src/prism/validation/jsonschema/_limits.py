"""Limits on schemas and instances, and the compile cache's statistics."""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import attrs

from prism.core.options import integer

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["HARD_CACHE_SIZE", "HARD_LIMITS", "CacheInfo", "SchemaLimits"]

HARD_CACHE_SIZE = 1_024

# The most any limit may be raised to: past these, compile time, memory or
# recursion depth stop being bounded in a way Prism can stand behind.
HARD_LIMITS: Mapping[str, int] = MappingProxyType(
    {
        "max_schema_bytes": 1024 * 1024,
        "max_depth": 128,
        "max_keywords": 100_000,
        "max_refs": 1_024,
        "max_instance_depth": 128,
        "max_instance_properties": 1_000_000,
        "max_string_length": 100_000_000,
        "max_array_length": 10_000_000,
        "max_schema_work": 1_000_000,
        "max_validation_work": 100_000_000,
        "max_regex_work": 1_000_000_000,
    }
)


def _limit(default: int, name: str) -> Any:
    """A limit field: a positive integer no larger than its hard cap."""
    return attrs.field(default=default, validator=integer(minimum=1, maximum=HARD_LIMITS[name]))


@attrs.frozen(kw_only=True)
class SchemaLimits:
    """Bounds on what a schema and an instance may cost.

    Every limit must be a positive integer no larger than its hard cap
    (``HARD_LIMITS``); anything else raises :class:`prism.core.ConfigurationError`
    (a ``ValueError``) naming the limit and the value.

    Attributes:
        max_schema_bytes: size of the schema as canonical UTF-8 JSON (hard cap 1 MiB).
        max_depth: nesting of objects and arrays in the schema (hard cap 128).
        max_keywords: object members, objects and arrays in the whole schema
            (hard cap 100,000).
        max_refs: ``$ref`` occurrences in the schema (hard cap 1,024).
        max_instance_depth: nesting of objects and arrays in the arguments.
        max_instance_properties: object members in the whole of the arguments.
        max_string_length: characters in any one string (keys included).
        max_array_length: array items in the whole of the arguments.
        max_schema_work: the expanded schema, checked when it is admitted: the
            weighted sub-schema evaluations (1 + keywords + enum/required entries
            per sub-schema) one instance node can meet, summed over the depths
            ``0..max_instance_depth``, each ``$ref`` counted at every place it is
            reached (hard cap 1,000,000).
        max_validation_work: per call, the sum over the instance's nodes of the
            weighted evaluations each can meet (hard cap 100,000,000); a call
            over it fails validation before any schema code runs.
        max_regex_work: per call, the sum over the instance's strings and keys
            of length times the cost (RE2 program size) of every ``pattern``,
            ``patternProperties`` and asserted ``format`` that can reach them
            (hard cap 1,000,000,000); a call over it fails validation.
    """

    max_schema_bytes: int = _limit(256 * 1024, "max_schema_bytes")
    max_depth: int = _limit(64, "max_depth")
    max_keywords: int = _limit(10_000, "max_keywords")
    max_refs: int = _limit(128, "max_refs")
    max_instance_depth: int = _limit(64, "max_instance_depth")
    max_instance_properties: int = _limit(10_000, "max_instance_properties")
    max_string_length: int = _limit(1_000_000, "max_string_length")
    max_array_length: int = _limit(100_000, "max_array_length")
    max_schema_work: int = _limit(50_000, "max_schema_work")
    max_validation_work: int = _limit(1_000_000, "max_validation_work")
    max_regex_work: int = _limit(8_000_000, "max_regex_work")


@attrs.frozen(kw_only=True)
class CacheInfo:
    """Statistics of a validator's compile cache.

    Attributes:
        hits: lookups answered from the cache (no compile), and validations
            through a compiled schema (a tool's calls, :class:`CompiledSchema`).
        misses: lookups that had to screen and compile a schema.
        maxsize: how many compiled schemas the cache keeps.
        currsize: how many it holds now.
    """

    hits: int
    misses: int
    maxsize: int
    currsize: int
