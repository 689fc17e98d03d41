"""What a schema can make validation cost, decided before anything compiles it.

One walk over the schema's *schema locations* (the places the dialect reads a
sub-schema from: ``properties`` values, ``allOf`` items, ``$defs`` entries...)
collects resources (``$id``), anchors and references. Then:

* every ``$ref``, ``$dynamicRef`` and ``$recursiveRef`` must resolve to a schema
  location of the same document. A reference into ``default``, ``examples``,
  ``const``, ``enum``, ``required`` or an unknown keyword's value would make the
  engine apply keywords the screen never looked at, so it refuses the schema;
* keywords the engine ignores in this dialect but that look like constraints
  (``additionalItems`` or ``$recursiveRef`` in 2020-12, ``prefixItems`` or
  ``$dynamicRef`` in 2019-09, array-form ``items`` in 2020-12) refuse the schema;
* the *expanded* validation graph is measured: each reference is counted at
  every place it is reached. For an instance node at depth ``k`` below the root,
  ``work[k]`` bounds the weighted number of sub-schema evaluations it can meet
  and ``regex[k]`` bounds the regular-expression cost per character of its
  strings (and keys). In-place applicators (``allOf``, ``anyOf``, ``oneOf``,
  ``not``, ``if``/``then``/``else``, ``dependentSchemas``, references) add up at
  the same depth; ``properties``, ``items`` and friends move one level down
  (the largest single ``properties``/``prefixItems`` entry counts, because one
  member meets one of them; ``patternProperties`` entries all count). A cycle of
  references that never descends into the instance is refused; recursion that
  does descend is unrolled to ``max_instance_depth`` levels.

The per-call check multiplies these vectors by the instance's node and
character counts per depth (see ``_instance.profile``).
"""

from __future__ import annotations

from itertools import repeat
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import attrs

from ._errors import SchemaRejectedError, pointer, quoted
from ._instance import SEVERE_NUMBER, number_units
from ._regex import MAX_SCHEMA_PATTERN_COST, PATTERN_OVERHEAD, _PatternError, pattern_cost
from ._uri import DEFAULT_BASE, uri_key

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ._limits import SchemaLimits

__all__ = ["Analysis", "analyse"]

Path = tuple[str | int, ...]

# Cost of ``format`` checks per character of the checked string, in the same
# unit as a pattern's RE2 program size (a unit is worth at most about 6 ns: the
# default max_regex_work, 8,000,000, is then 50 ms). The checks are fixed
# linear-time ones; ``format: regex`` only parses the string as ECMA-262 (at
# most 16,384 characters and 256 named groups, about 55 ns per character at
# worst, see the benchmark's stall rows): 10 units would cover it, 1,000 keeps
# a call to 8,000 characters of regexes at the default budget, as before.
FORMAT_COST = 100
REGEX_FORMAT_COST = 1_000
# ... and each string checked by ``format: regex`` counts this much validation work.
REGEX_FORMAT_WEIGHT = 30
# draft-07 asserts ``contentMediaType: application/json`` by parsing each string
# as JSON (40-90 ns per character measured, in the same unit as ``FORMAT_COST``)
# and ``contentEncoding: base64`` by decoding it (under 1 ns per character).
CONTENT_MEDIA_COST = 20
CONTENT_ENCODING_COST = 1

# An enum costs one unit per this many entries (strings, booleans and null
# compare quickly)...
ENUM_ENTRIES_PER_UNIT = 16
# ... but an entry that is an object or an array is compared structurally
# (length, key lookups, each member or item in turn): about 25 ns per value in
# the entry, measured (4,990 one-member objects: 50 ns an entry; arrays of 16
# strings: 350 ns). Each value inside an ``enum`` entry or a ``const`` that is an
# object or array (the container, its members and items, at any depth) costs this.
CONTAINER_VALUE_COST = 2
# Numbers: jsonschema-rs compares them exactly, through arbitrary-precision
# fractions read from their decimal text, whenever either side is not an
# integer below 2**63, in time that grows with the text's digits and exponent.
# Measured per comparison (CPU, a unit of validation work is 28 ns): an integer
# instance against an enum entry or a bound that is a short float (``24.6``),
# 0.5-1 us, against ``1.2345678901234567e-19`` 3.9 us; a short float instance
# against a number in an enum or const up to 1.2 us, against a float bound up
# to 0.9 us; a long, tiny or huge float (``1.2345678901234567e-19`` 4 us,
# 1e-300, 5e-324, 1.8e308) or an integer past 2**63 up to 17 us against an
# integer entry and 20 us against a float bound; a tiny or huge float *in the
# schema* (an enum entry, a const), 12-33 us against any number at all. So an
# instance number costs by its class (``_instance.number_units``): an integer
# below 2**63 nothing more, a short float one *number unit*, anything else
# SEVERE_NUMBER units; ``numbers[k]`` prices one number unit at depth k, and
# each sub-schema adds:
#
# - each number in an enum entry or a const (not inside an object or array):
#   NUMBER_COMPARE_COST per number unit for an integer, FLOAT_COMPARE_COST for
#   a float, and more work against any instance: FLOAT_ENTRY_COST for a short
#   float, LONG_ENTRY_COST for a long one within 1e-20..1e20, SEVERE_ENTRY_COST
#   for any other float or an integer past 2**63;
# - each number inside an enum entry or const that is an object or array (met by
#   the instance's numbers one level or more below, at any depth):
#   NESTED_NUMBER_COST work, or its own weight above if that is more;
# - a float bound (minimum, maximum, exclusive*): FLOAT_BOUND_COST per number
#   unit and FLOAT_BOUND_WEIGHT work; an integer bound INTEGER_BOUND_COST;
# - an integer multipleOf: MULTIPLE_OF_UNIT per number unit.
NUMBER_COMPARE_COST = 80
FLOAT_COMPARE_COST = 120
FLOAT_ENTRY_COST = 40
LONG_ENTRY_COST = 150
SEVERE_ENTRY_COST = 1_200
NESTED_NUMBER_COST = 600
FLOAT_BOUND_COST = 85
FLOAT_BOUND_WEIGHT = 25
INTEGER_BOUND_COST = 15
MULTIPLE_OF_UNIT = 70
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
# ``multipleOf`` with a divisor that is not an integer below 2**63 runs decimal
# arithmetic whose cost grows with the quotient's digits: up to about 80 us per
# check measured (5e-324 over 1.797e308), 28 us for 0.5 over 1.8e308.
MULTIPLE_OF_COST = 3_000
# uniqueItems compares whole items: every node below an array with it costs
# this much more (measured on the slower, Python engine Prism used before:
# ~10 us per small object item).
UNIQUE_ITEMS_COST = 100
# Prism checks uniqueItems itself (jsonschema-rs compares large integers
# pairwise: quadratic); each array checked is a call into Python, ~1.5 us.
UNIQUE_ITEMS_CALL = 60
_UNIQUE: tuple[str, ...] = ("<uniqueItems>",)
# ``unevaluatedProperties``/``unevaluatedItems`` decide what was evaluated by
# running the schema's in-place applicators again (jsonschema-rs re-evaluates
# ``allOf``/``anyOf``/``oneOf``/``if``/``then``/``else``/references beside it),
# so every nested level multiplies: ``{"allOf": [L], "unevaluatedProperties":
# false}`` costs about 2.6 times ``L`` in the engine (measured 2.5x-2.7x per
# level for allOf, anyOf, oneOf and if, on objects and arrays, with the whole
# instance below re-walked). Priced at 3x per level, on every instance depth.
UNEVALUATED_FACTOR = 3
# jsonschema-rs compiles ``contains`` with ``minContains``/``maxContains`` beside
# ``unevaluatedItems`` again for each such schema around it: nested inline (not
# through references), compiling costs about 4 times more per level (measured:
# 6 levels 1 ms, 8 levels 60 ms, 12 levels 1.2 s, 13 levels 6 s, in the
# compile, before any instance). At most this many on one path of the schema.
MAX_COUNTED_CONTAINS_NESTING = 4
# Each $dynamicRef/$recursiveRef may land on any schema declaring its anchor:
# measuring walks every such candidate edge once per instance level, and the
# in-place order once. At most this many edges in all (references times
# candidates: 2,300 anchors x 120 references took seconds to admit).
MAX_DYNAMIC_EDGES = 10_000

_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
_IN_PLACE_SINGLES = ("not", "if", "then", "else")
_COMMON = frozenset(
    {
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "properties",
        "patternProperties",
        "additionalProperties",
        "items",
        "definitions",
        "$defs",
    }
)
# Applicator keywords each dialect reads sub-schemas from.
_VOCAB: dict[str, frozenset[str]] = {
    "draft4": _COMMON | {"additionalItems", "dependencies"},
    "draft6": _COMMON | {"additionalItems", "dependencies", "contains", "propertyNames"},
    "draft7": _COMMON
    | {"additionalItems", "dependencies", "contains", "propertyNames", "if", "then", "else"},
    "draft2019": _COMMON
    | {
        "additionalItems",
        "dependentSchemas",
        "contains",
        "propertyNames",
        "if",
        "then",
        "else",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contentSchema",
    },
    "draft2020": _COMMON
    | {
        "prefixItems",
        "dependentSchemas",
        "contains",
        "propertyNames",
        "if",
        "then",
        "else",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contentSchema",
    },
}
# Keywords the engine would silently ignore in a dialect although they read as
# constraints: refused (unless unsupported_keywords="ignore").
_IGNORED: dict[str, frozenset[str]] = {
    "draft4": frozenset(),
    "draft6": frozenset(),
    "draft7": frozenset(),
    "draft2019": frozenset({"prefixItems", "$dynamicRef", "$dynamicAnchor", "dependencies"}),
    "draft2020": frozenset(
        {"additionalItems", "$recursiveRef", "$recursiveAnchor", "dependencies"}
    ),
}
# Keywords of an older draft that jsonschema-rs still applies in a later one,
# although the later dialect has no such keyword ("dependencies" is no longer a
# keyword in 2019-09 and 2020-12, whose meta-schemas only reserve the name):
# refused above, or, when unsupported keywords are ignored, handed to the engine
# as keywords that check nothing (see ``_rs``), so no verdict depends on them.
_RETIRED: dict[str, frozenset[str]] = {
    "draft2019": frozenset({"dependencies"}),
    "draft2020": frozenset({"dependencies"}),
}
# Keywords that declare a name a reference could resolve to, looked for in data.
_DECLARING = ("$anchor", "$dynamicAnchor", "$id", "id")
_DECLARES = frozenset(_DECLARING)
# Keywords ``identify`` reads; a schema with none of them keeps its base.
_IDENTIFYING = frozenset({"$id", "id", "$anchor", "$dynamicAnchor", "$recursiveAnchor"})
# Keywords ``describe`` reads beyond counting members (applicators in every
# dialect, references, priced assertions).
_COSTED = frozenset(
    {
        "required",
        "enum",
        "const",
        "multipleOf",
        "dependentRequired",
        "pattern",
        "format",
        "patternProperties",
        "$ref",
        "$dynamicRef",
        "$recursiveRef",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
        "dependentSchemas",
        "dependencies",
        "properties",
        "additionalProperties",
        "unevaluatedProperties",
        "propertyNames",
        "items",
        "prefixItems",
        "additionalItems",
        "contains",
        "unevaluatedItems",
        "uniqueItems",
        "contentMediaType",
        "contentEncoding",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
    }
)
_MAPS = frozenset({"properties", "patternProperties", "definitions", "$defs", "dependentSchemas"})
_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SATURATE = 1 << 62


@attrs.frozen
class Analysis:
    """The cost vectors of an admitted schema.

    Attributes:
        work: ``work[k]`` bounds the weighted sub-schema evaluations one instance
            node at depth ``k`` can cost.
        regex: ``regex[k]`` bounds the regex cost per character of a string (or
            key) at depth ``k``.
        numbers: ``numbers[k]`` bounds the work one number unit of a number at
            depth ``k`` adds (see ``SEVERE_NUMBER``).
        formats: the ``format`` names the schema asserts (empty when formats
            are annotations).
        contextual: the schema has ``anyOf`` or ``oneOf``, whose refusal the
            engine builds with every failing branch's errors as context (see
            ``ERROR_WORK``).
        unique_items: the schema asserts ``uniqueItems`` somewhere.
        word_boundaries: the sub-schemas whose ``pattern`` (name None) or
            ``patternProperties`` name holds a word boundary, for the engine's
            copy to spell it in ASCII.
        retired: keywords of an older draft the schema uses that the engine
            would apply although this dialect has no such keyword (only when
            unsupported keywords are ignored; else the schema is refused).
    """

    work: tuple[int, ...]
    regex: tuple[int, ...]
    numbers: tuple[int, ...] = ()
    formats: frozenset[str] = frozenset()
    contextual: bool = False
    unique_items: bool = False
    word_boundaries: tuple[tuple[Path, str | None], ...] = ()
    retired: frozenset[str] = frozenset()

    @property
    def max_work(self) -> int:
        """The most work one instance node can cost: ``work[k]``, plus its numbers at worst."""
        numbers = self.numbers
        return max(
            (w + SEVERE_NUMBER * numbers[k] if k < len(numbers) else w)
            for k, w in enumerate(self.work or (0,))
        )

    @property
    def max_regex(self) -> int:
        """The largest entry of ``regex``."""
        return max(self.regex, default=0)


_DEFAULT_KEY = uri_key(DEFAULT_BASE)
# The engine knows the meta-schemas by these URIs; a resource there could
# shadow one, or be shadowed by it.
_META_PREFIXES = ("http://json-schema.org/", "https://json-schema.org/")


class _Node:
    __slots__ = (
        "array",
        "base",
        "choices",
        "in_place",
        "key_regex",
        "number",
        "obj",
        "reeval",
        "regex",
        "weight",
    )

    def __init__(self, base: str) -> None:
        self.base = base
        self.weight = 1
        # How often the in-place children run (UNEVALUATED_FACTOR beside unevaluated*).
        self.reeval = 1
        self.regex = 0  # per character of the instance string this node checks
        self.key_regex = 0  # per character of the keys of the object it checks
        self.number = 0  # per number unit of the instance number it checks
        # Empty tuples until something is added (most nodes are leaves, and a
        # schema may hold up to max_keywords of them).
        self.in_place: list[Path] | tuple[()] = ()
        # Dynamic references: exactly one candidate of each group applies.
        self.choices: list[list[Path]] | tuple[()] = ()
        # Groups of children one level down: (members, pick_one). For a member
        # or item, "pick_one" groups contribute their largest entry only.
        self.obj: list[tuple[list[Path], bool]] | tuple[()] = ()
        self.array: list[tuple[list[Path], bool]] | tuple[()] = ()


# Every boolean or empty schema (no keywords, nothing below, weight 1) shares
# this node, and every schema of plain assertions of one weight shares one
# (see ``_Collector.plain``): a schema may hold up to max_keywords of them, and
# each object made while measuring is time the admission holds the event loop
# (and the collector's, when they outlive a young generation). Never changed
# after it is made: only nodes with references or applicators are.
_LEAF = _Node("")


class _Collector:
    def __init__(self, draft: str, *, reject: bool, assert_formats: bool) -> None:
        self.draft = draft
        self.vocab = _VOCAB[draft]
        self.reject = reject
        self.ignored = _IGNORED[draft] if reject else frozenset()
        self.assert_formats = assert_formats
        self.formats: set[str] = set()
        self.contextual = False
        self.unique_items = False
        self.retired: set[str] = set()
        # Patterns (and patternProperties names) holding \b or \B.
        self.boundaries: list[tuple[Path, str | None]] = []
        self.nodes: dict[Path, _Node] = {}
        self.resources: dict[str, Path] = {}
        self.anchors: dict[tuple[str, str], Path] = {}
        self.dynamic: dict[str, list[Path]] = {}
        self.recursive: list[Path] = []
        self.refs: list[tuple[Path, str, str]] = []  # (node path, keyword, reference)
        self.pattern_work = 0  # RE2 compile work spent on this schema's patterns
        self.plains: dict[int, _Node] = {}

    def fail(self, reason: str, path: Path) -> SchemaRejectedError:
        return SchemaRejectedError(reason, pointer(path))

    def walk(self, root: object) -> None:
        # (schema, path, base URI, counted contains beside unevaluatedItems around it)
        stack: list[tuple[object, Path, str, int]] = [(root, (), _DEFAULT_KEY, 0)]
        self.resources[_DEFAULT_KEY] = ()
        counted = "unevaluatedItems" in self.vocab
        nodes = self.nodes
        vocab = self.vocab
        # A schema with none of these is plain assertions only (the commonest
        # kind): nothing to identify, refuse, price or walk below; describe()
        # would give it its shared node.
        busy = _COSTED | _IDENTIFYING | vocab | self.ignored | {"$schema"}
        while stack:
            value, path, base, around = stack.pop()
            if type(value) is not dict or not value:
                # A boolean or an empty schema: no keywords, no children, weight 1.
                nodes[path] = _LEAF
                continue
            if busy.isdisjoint(value):
                nodes[path] = self.plain(1 + len(value))
                continue
            if (
                counted
                and "contains" in value
                and "unevaluatedItems" in value
                and ("minContains" in value or "maxContains" in value)
            ):
                around += 1
                if around > MAX_COUNTED_CONTAINS_NESTING:
                    raise self.fail(
                        "'contains' with 'minContains' or 'maxContains' beside "
                        "'unevaluatedItems' is nested more than "
                        f"{MAX_COUNTED_CONTAINS_NESTING} levels deep; the engine's compile "
                        "grows about 4 times per level (use a $ref for deeper nesting)",
                        path,
                    )
            base = self.identify(value, path, base)
            nodes[path] = self.describe(value, path, base)
            for key, sub in value.items():
                if key not in vocab:
                    continue
                # Leaves (booleans, empty schemas) are recorded here, not stacked.
                if key in _MAPS or (key == "dependencies" and type(sub) is dict):
                    if type(sub) is dict:
                        for name, item in sub.items():
                            if item is True or item is False or (type(item) is dict and not item):
                                nodes[(*path, key, name)] = _LEAF
                            elif type(item) is dict:
                                stack.append((item, (*path, key, name), base, around))
                elif key in _LISTS or (key == "items" and type(sub) is list):
                    if type(sub) is list:
                        for index, item in enumerate(sub):
                            if type(item) is not dict or not item:
                                nodes[(*path, key, index)] = _LEAF
                            else:
                                stack.append((item, (*path, key, index), base, around))
                elif type(sub) in (dict, bool):
                    stack.append((sub, (*path, key), base, around))

    def identify(self, value: dict[str, Any], path: Path, base: str) -> str:
        if _IDENTIFYING.isdisjoint(value):
            return base
        id_key = "id" if self.draft == "draft4" else "$id"
        ident = value.get(id_key)
        legacy = self.draft in ("draft4", "draft6", "draft7")
        if legacy and "$ref" in value:
            if type(ident) is str and ident.partition("#")[2]:
                # The draft ignores it, but jsonschema-rs still indexes the name
                # (the last declaration wins): "#name" would mean one schema to
                # the engine and another to this analysis. One name, one schema.
                raise self.fail(
                    f"{id_key} {quoted(ident)} beside $ref declares the anchor "
                    f"{quoted(ident.partition('#')[2])}, which this draft ignores but the "
                    "engine indexes; refusing the schema rather than resolving the name "
                    "differently",
                    (*path, id_key),
                )
            ident = None  # beside $ref, $id is ignored in these drafts
        if type(ident) is str and ident:
            uri, _, fragment = ident.partition("#")
            if uri:
                base = uri_key(uri, base)
                if base.startswith(_META_PREFIXES):
                    raise self.fail(
                        f"{id_key} {quoted(ident)} is under json-schema.org, where the engine "
                        "keeps its meta-schemas; refusing the schema rather than letting one "
                        "shadow the other",
                        (*path, id_key),
                    )
                if base in self.resources and self.resources[base] != path:
                    raise self.fail(
                        f"{id_key} {quoted(ident)} is declared twice: it names the same "
                        "resource as another $id, or as the document itself, once URIs are "
                        "normalised (case, percent-escapes, dot segments, default ports, "
                        "relative resolution), and the engine would merge them",
                        (*path, id_key),
                    )
                self.resources[base] = path
            if fragment and legacy:
                self.add_anchor(base, fragment, path)
        for key in ("$anchor", "$dynamicAnchor"):
            anchor = value.get(key)
            if type(anchor) is str and not legacy:
                if self.draft == "draft2019" and key == "$dynamicAnchor":
                    continue
                if self.anchors.get((base, anchor), path) != path:
                    # Of either kind: "#n" would mean one of two schemas, and the
                    # engine and Prism's analysis could pick different ones.
                    raise self.fail(
                        f"anchor {quoted(anchor)} is declared twice in one resource "
                        "($anchor and $dynamicAnchor share one name space)",
                        (*path, key),
                    )
                self.anchors[(base, anchor)] = path
                if key == "$dynamicAnchor":
                    self.dynamic.setdefault(anchor, []).append(path)
        if self.draft == "draft2019" and value.get("$recursiveAnchor") is True:
            self.recursive.append(path)
        return base

    def add_anchor(self, base: str, name: str, path: Path) -> None:
        if self.anchors.get((base, name), path) != path:
            raise self.fail(f"anchor {quoted(name)} is declared twice", path)
        self.anchors[(base, name)] = path

    def identifiers_in_data(self, root: object) -> tuple[set[str], set[str]]:
        """Anchor names and ``$id``s (as keys) declared outside schema locations.

        An engine that indexed them would resolve a reference there; Prism
        refuses any reference that could mean one of them.
        """
        found: set[str] = set()
        keys: set[str] = set()
        nodes = self.nodes
        # Only non-empty objects and arrays are stacked: nothing else can declare one.
        stack: list[tuple[object, Path]] = [(root, ())]
        while stack:
            value, path = stack.pop()
            if type(value) is dict:
                if not _DECLARES.isdisjoint(value) and path not in nodes:
                    for key in _DECLARING:
                        name = value.get(key)
                        if type(name) is str:
                            found.add(name.lstrip("#") if key in ("$id", "id") else name)
                            if key in ("$id", "id") and name.partition("#")[0]:
                                keys.add(uri_key(name.partition("#")[0]))
                for key, item in value.items():
                    if (type(item) is dict or type(item) is list) and item:
                        stack.append((item, (*path, key)))
            elif type(value) is list:
                for index, item in enumerate(value):
                    if (type(item) is dict or type(item) is list) and item:
                        stack.append((item, (*path, index)))
        return found, keys

    def plain(self, weight: int) -> _Node:
        """The node of a schema of plain assertions (no applicators, nothing priced)."""
        node = self.plains.get(weight)
        if node is None:
            node = self.plains[weight] = _Node("")
            node.weight = weight
        return node

    def describe(self, value: dict[str, Any], path: Path, base: str) -> _Node:
        """The node of a non-empty schema: its weight, prices and children."""
        if path and "$schema" in value and self.reject:
            # An embedded resource in another dialect: the engine would read it
            # with the root's vocabulary or switch to keywords the screen did not
            # analyse. Neither is checked here: refused.
            raise self.fail(
                "an embedded $schema (a sub-schema in another dialect) is not supported; "
                "refusing the schema rather than reading it with the wrong keywords",
                (*path, "$schema"),
            )
        for key in value if not self.ignored.isdisjoint(value) else ():
            if key in self.ignored:
                raise self.fail(
                    f"keyword {key!r} is ignored in this dialect ({self.draft}); refusing the "
                    "schema rather than leaving a constraint unchecked "
                    "(unsupported_keywords='ignore' accepts it unenforced)",
                    (*path, key),
                )
        if self.draft == "draft2020" and type(value.get("items")) is list and self.ignored:
            raise self.fail(
                "array-form 'items' is not 2020-12 (use 'prefixItems'); refusing the schema "
                "rather than leaving a constraint unchecked",
                (*path, "items"),
            )
        weight = 1 + len(value)
        if _COSTED.isdisjoint(value):
            # Only plain assertions (type, bounds...): nothing below, nothing in place.
            return self.plain(weight)
        node = _Node(base)
        if type(value.get("required")) is list:
            weight += len(value["required"])
        number = 0
        if type(value.get("enum")) is list:
            # Scalars other than numbers compare at about 0.1 ns per entry.
            weight += len(value["enum"]) // ENUM_ENTRIES_PER_UNIT
            more, number = _entries(value["enum"])
            weight += more
        if "const" in value:
            more, compared = _entries([value["const"]])
            weight += more
            number += compared
        for key in _BOUNDS:
            bound = value.get(key)
            if type(bound) is float:
                weight += FLOAT_BOUND_WEIGHT
                number += FLOAT_BOUND_COST
            elif type(bound) is int:
                number += INTEGER_BOUND_COST
        divisor = value.get("multipleOf")
        if (type(divisor) is int or type(divisor) is float) and not (
            divisor == int(divisor) and abs(divisor) < 2**63
        ):
            weight += MULTIPLE_OF_COST
        elif type(divisor) is int or type(divisor) is float:
            number += MULTIPLE_OF_UNIT
        node.number = number
        dependent = value.get("dependentRequired")
        if type(dependent) is dict:
            weight += sum(len(v) for v in dependent.values() if type(v) is list)
        node.weight = weight
        pattern = value.get("pattern")
        if type(pattern) is str:
            node.regex += self.cost(pattern, (*path, "pattern"))
            if "\\b" in pattern or "\\B" in pattern:
                self.boundaries.append((path, None))
        if self.draft == "draft7":
            # Asserted by the engine in draft-07 only (see ``_rs``).
            if value.get("contentMediaType") == "application/json":
                node.regex += CONTENT_MEDIA_COST
            if "contentEncoding" in value:
                node.regex += CONTENT_ENCODING_COST
        retired = _RETIRED.get(self.draft)
        if retired is not None and not retired.isdisjoint(value):
            self.retired.update(retired.intersection(value))
        fmt = value.get("format")
        if type(fmt) is str and self.assert_formats:
            node.regex += REGEX_FORMAT_COST if fmt == "regex" else FORMAT_COST
            if fmt == "regex":
                # Each string is a call into a Python check (about 1 us), however short.
                node.weight += REGEX_FORMAT_WEIGHT
            self.formats.add(fmt)
        patterns = value.get("patternProperties")
        if type(patterns) is dict and "patternProperties" in self.vocab:
            for name in patterns:
                node.key_regex += self.cost(name, (*path, "patternProperties", name))
                if "\\b" in name or "\\B" in name:
                    self.boundaries.append((path, name))
        for key, ref in value.items():
            if key in ("$ref", "$dynamicRef", "$recursiveRef") and type(ref) is str:
                if key == "$dynamicRef" and self.draft != "draft2020":
                    continue
                if key == "$recursiveRef" and self.draft != "draft2019":
                    continue
                self.refs.append((path, key, ref))
        # In-place children.
        in_place: list[Path] = []
        for key in _IN_PLACE_LISTS:
            if key in self.vocab and type(value.get(key)) is list:
                in_place.extend((*path, key, i) for i in range(len(value[key])))
                if key != "allOf":
                    self.contextual = True
        for key in _IN_PLACE_SINGLES:
            if key in self.vocab and type(value.get(key)) in (dict, bool):
                in_place.append((*path, key))
        for key in ("dependentSchemas", "dependencies"):
            deps = value.get(key)
            if key in self.vocab and type(deps) is dict:
                in_place.extend(
                    (*path, key, name) for name, sub in deps.items() if type(sub) in (dict, bool)
                )
        if in_place:
            node.in_place = in_place
        # One level down: object members.
        obj: list[tuple[list[Path], bool]] = []
        props = value.get("properties")
        if type(props) is dict:
            obj.append(([(*path, "properties", name) for name in props], True))
        if type(patterns) is dict and "patternProperties" in self.vocab:
            obj.append(([(*path, "patternProperties", name) for name in patterns], False))
        singles = [
            (*path, key)
            for key in ("additionalProperties", "unevaluatedProperties", "propertyNames")
            if key in self.vocab and type(value.get(key)) in (dict, bool)
        ]
        if singles:
            obj.append((singles, False))
        if obj:
            node.obj = obj
        if ("unevaluatedProperties" in value or "unevaluatedItems" in value) and (
            "unevaluatedProperties" in self.vocab
        ):
            # Deciding what was evaluated re-runs the in-place applicators (and
            # the references, added by ``resolve``) on the whole instance below.
            node.reeval = UNEVALUATED_FACTOR
        # One level down: array items.
        items = value.get("items")
        positional = value.get("prefixItems") if "prefixItems" in self.vocab else None
        if type(items) is list and "items" in self.vocab:
            positional = items
            items = None
            key_pos = "items"
        else:
            key_pos = "prefixItems"
        array: list[tuple[list[Path], bool]] = []
        if type(positional) is list and positional:
            array.append(([(*path, key_pos, i) for i in range(len(positional))], True))
        rest = [
            (*path, key)
            for key in ("additionalItems", "contains", "unevaluatedItems")
            if key in self.vocab and type(value.get(key)) in (dict, bool)
        ]
        if type(items) in (dict, bool):
            rest.append((*path, "items"))
        if node.reeval > 1 and (*path, "contains") in rest and "unevaluatedItems" in value:
            # ``unevaluatedItems`` finds the items ``contains`` evaluated by
            # running ``contains`` on every item again (jsonschema-rs: twice per
            # nested level, measured by counting the engine's evaluations):
            # priced like the in-place applicators it re-runs.
            rest.extend([(*path, "contains")] * (UNEVALUATED_FACTOR - 1))
        if value.get("uniqueItems") is True:
            rest.append(_UNIQUE)
            # Each array it checks is a call into Prism's check (about 1.5 us).
            node.weight += UNIQUE_ITEMS_CALL
            self.unique_items = True
        if rest:
            array.append((rest, False))
        if array:
            node.array = array
        return node

    def cost(self, pattern: str, path: Path) -> int:
        left = MAX_SCHEMA_PATTERN_COST - self.pattern_work
        if left <= 0:
            raise self.fail(
                f"the schema's patterns together compile to more than "
                f"{MAX_SCHEMA_PATTERN_COST:,} RE2 instructions (each pattern also counts "
                f"{PATTERN_OVERHEAD}); pricing more would hold the event loop too long",
                path,
            )
        try:
            cost = pattern_cost(pattern, left)
        except _PatternError as exc:
            raise self.fail(f"pattern {quoted(pattern)} is refused: {exc}", path) from exc
        self.pattern_work += cost + PATTERN_OVERHEAD
        return cost

    def resolve(self, root: object) -> None:
        hidden, hidden_keys = self.identifiers_in_data(root) if self.refs else (set(), set())
        # One candidate group per (static target, candidates): references that
        # share it share one list, whose largest entry each level computes once.
        groups: dict[tuple[Path, str, str], list[Path]] = {}
        edges = 0
        for path, keyword, ref in self.refs:
            name = ref[1:]
            if name and not name.startswith("/") and name in hidden:
                raise self.fail(
                    f"{keyword} {quoted(ref)} names an anchor that is also declared inside "
                    "data (default, examples, const, enum or an unknown keyword)",
                    (*path, keyword),
                )
            if hidden_keys.intersection(self.resources) - {_DEFAULT_KEY}:
                raise self.fail(
                    "an $id of this schema is also declared inside data (default, examples, "
                    "const, enum or an unknown keyword)",
                    (*path, keyword),
                )
            node = self.nodes[path]
            static = self.target(root, node.base, ref, (*path, keyword))
            if keyword == "$ref":
                node.in_place = [*node.in_place, static]
                continue
            name = ref.partition("#")[2] if keyword == "$dynamicRef" else ""
            key = (static, keyword, name)
            group = groups.get(key)
            if group is None:
                extra = self.dynamic.get(name, ()) if keyword == "$dynamicRef" else self.recursive
                group = groups[key] = sorted({static, *extra}, key=repr)
            edges += len(group)
            if edges > MAX_DYNAMIC_EDGES:
                raise self.fail(
                    f"the schema's {keyword}s have more than {MAX_DYNAMIC_EDGES:,} candidate "
                    "targets in all (each reference counts every $dynamicAnchor or "
                    "$recursiveAnchor it could land on); measuring them would hold the "
                    "event loop too long",
                    (*path, keyword),
                )
            node.choices = [*node.choices, group]

    def target(self, root: object, base: str, ref: str, where: Path) -> Path:
        if not ref.startswith("#"):
            raise self.fail(f"{where[-1]} {quoted(ref)} is not fragment-local", where)
        fragment = unquote(ref[1:])
        resource = self.resources.get(base, ())
        if fragment == "":
            found: Path = resource
        elif fragment.startswith("/"):
            found = self.walkpointer(root, resource, fragment, ref, where)
        else:
            anchored = self.anchors.get((base, fragment))
            if anchored is None:
                raise self.fail(f"{where[-1]} {quoted(ref)} names no anchor here", where)
            found = anchored
        if found not in self.nodes:
            raise self.fail(
                f"{where[-1]} {quoted(ref)} points into {pointer(found)}, which is not a schema "
                "location (for example inside default, examples, const, enum, required or an "
                "unknown keyword); the engine would apply keywords there that the screen "
                "never checked",
                where,
            )
        return found

    def walkpointer(
        self, root: object, resource: Path, fragment: str, ref: str, where: Path
    ) -> Path:
        current: object = root
        for step in resource:
            current = current[step]  # type: ignore[index]
        path: list[str | int] = list(resource)
        for raw in fragment[1:].split("/"):
            token = raw.replace("~1", "/").replace("~0", "~")
            if type(current) is dict and token in current:
                current = current[token]
                path.append(token)
            elif (
                type(current) is list
                and token.isdigit()
                and (token == "0" or not token.startswith("0"))
                and int(token) < len(current)
            ):
                current = current[int(token)]
                path.append(int(token))
            else:
                raise self.fail(f"{where[-1]} {quoted(ref)} does not resolve", where)
        return tuple(path)


def analyse(
    schema: object,
    draft: str,
    limits: SchemaLimits,
    *,
    reject: bool = True,
    assert_formats: bool = True,
) -> Analysis:
    """Check references and ignored keywords, and measure the expanded graph.

    Raises:
        SchemaRejectedError: a reference leaves the schema locations, a keyword
            would be ignored, a reference cycle never descends into the instance,
            or the expanded graph exceeds ``limits.max_schema_work``.
    """
    collector = _Collector(draft, reject=reject, assert_formats=assert_formats)
    collector.walk(schema)
    collector.resolve(schema)
    nodes = collector.nodes
    unique = _Node("")
    unique.weight = UNIQUE_ITEMS_COST
    unique.obj = [([_UNIQUE], False)]
    unique.array = [([_UNIQUE], False)]
    nodes[_UNIQUE] = unique
    order = _in_place_order(nodes)
    cap = limits.max_schema_work
    depth = limits.max_instance_depth
    work_prev: dict[Path, int] = {}
    regex_prev: dict[Path, int] = {}
    work_vector: list[int] = []
    regex_vector: list[int] = []
    total = 0
    # Below the instance's root only nodes with children can cost anything;
    # the dicts keep non-zero entries only.
    inner = [p for p in order if (n := nodes[p]).in_place or n.choices or n.obj or n.array]
    dependents = _Dependents(nodes, inner)
    # Large groups as sets, by identity (see _below); the groups live as long.
    sets: dict[int, frozenset[Path]] = {}
    for level in range(depth + 1):
        work_now: dict[Path, int] = {}
        regex_now: dict[Path, int] = {}
        # The largest candidate of each shared group, once per level (its
        # members come before any node that has the group, in both orders).
        best: dict[int, tuple[int, int, int, int]] = {}
        if level == 0:
            for path in order:
                node = nodes[path]
                if not node.in_place and not node.choices:
                    # A leaf of the in-place graph: its own weight (most nodes).
                    w = node.weight
                    if w > cap:
                        _check_cap(w, cap, level, path)
                    work_now[path] = w
                    regex_now[path] = node.regex
                    continue
                in_place = node.in_place
                w = sum(map(work_now.get, in_place, repeat(0)))
                r = sum(map(regex_now.get, in_place, repeat(0)))
                for group in node.choices:
                    top = best.get(id(group))
                    if top is None:
                        top = best[id(group)] = (
                            max(work_now.get(child, 0) for child in group),
                            max(regex_now.get(child, 0) for child in group),
                            0,
                            0,
                        )
                    w += top[0]
                    r += top[1]
                w = node.weight + node.reeval * w
                r = node.regex + node.reeval * r
                _check_cap(w, cap, level, path)
                work_now[path] = w
                regex_now[path] = min(r, _SATURATE)
        else:
            # An instance node is an object or an array, never both: its
            # children meet the object keywords of every schema evaluating it,
            # or the array keywords. Each side adds up separately.
            sides: dict[Path, tuple[int, int, int, int]] = {}
            for path in dependents.active(level, work_prev, constant=True):
                node = nodes[path]
                iow = iaw = iorx = iarx = 0
                # Most children cost nothing one level down: only those that do are added.
                in_place = node.in_place
                if len(in_place) > 8 * len(sides):
                    # Read through the few that do (see _below).
                    known = sets.get(id(in_place))
                    if known is None:
                        known = sets[id(in_place)] = frozenset(in_place)
                    if len(known) == len(in_place):  # no child twice
                        in_place = [path for path in sides if path in known]
                for got in filter(None, map(sides.get, in_place)):
                    iow, iaw, iorx, iarx = (
                        iow + got[0],
                        iaw + got[1],
                        iorx + got[2],
                        iarx + got[3],
                    )
                for group in node.choices:
                    top = best.get(id(group))
                    if top is None:
                        options = [sides.get(child, _NOTHING) for child in group]
                        top = best[id(group)] = (
                            max(o[0] for o in options),
                            max(o[1] for o in options),
                            max(o[2] for o in options),
                            max(o[3] for o in options),
                        )
                    iow, iaw, iorx, iarx = (
                        iow + top[0],
                        iaw + top[1],
                        iorx + top[2],
                        iarx + top[3],
                    )
                ow, aw, orx, arx = _below(node, work_prev, regex_prev, sets)
                m = node.reeval
                ow, aw, orx, arx = ow + m * iow, aw + m * iaw, orx + m * iorx, arx + m * iarx
                if not (ow or aw or orx or arx):
                    continue
                sides[path] = (ow, aw, orx, arx)
                w = max(ow, aw)
                _check_cap(w, cap, level, path)
                work_now[path] = w
                regex_now[path] = min(max(orx, arx), _SATURATE)
        work_vector.append(work_now.get((), 0))
        regex_vector.append(regex_now.get((), 0))
        total += work_vector[-1]
        if total > cap:
            raise SchemaRejectedError(
                f"the expanded schema (each $ref counted at every place it is reached, "
                f"recursion unrolled to max_instance_depth={depth}) exceeds "
                f"max_schema_work={cap}",
                "#",
            )
        if work_now == work_prev and regex_now == regex_prev:
            # A fixed point: every deeper level costs the same.
            work_vector.extend([work_vector[-1]] * (depth - level))
            regex_vector.extend([regex_vector[-1]] * (depth - level))
            total += work_vector[-1] * (depth - level)
            if total > cap:
                raise SchemaRejectedError(
                    f"the expanded schema (recursion unrolled to max_instance_depth={depth}) "
                    f"exceeds max_schema_work={cap}",
                    "#",
                )
            break
        if not work_now:
            break
        work_prev, regex_prev = work_now, regex_now
    while work_vector and work_vector[-1] == 0 and regex_vector[-1] == 0:
        work_vector.pop()
        regex_vector.pop()
    numbers: tuple[int, ...] = ()
    if any(node.number for node in nodes.values()):
        numbers = _number_costs(nodes, order, dependents, len(work_vector))
    return Analysis(
        work=tuple(work_vector),
        regex=tuple(regex_vector),
        numbers=numbers,
        formats=frozenset(collector.formats),
        contextual=collector.contextual,
        unique_items=collector.unique_items,
        word_boundaries=tuple(collector.boundaries),
        retired=frozenset(collector.retired),
    )


_NOTHING = (0, 0, 0, 0)


# From this level on, a level visits only the nodes that can cost something there.
_SPARSE_FROM = 2


class _Dependents:
    """Which nodes a level below the instance's root must visit.

    At a level past the root, a node costs something only if a member or an
    item of it did one level up (a key in the previous level's dict), if one
    of its in-place children (or candidates) does at this level, or if it
    prices its keys (``patternProperties``, at every level). The others would
    come out zero and be skipped; visiting only these, in the same order,
    gives the same vectors and the same first refusal. (A 58-level chain
    beside 2,000 small sub-schemas was measured level after level in full:
    0.3-0.6 s to admit.)
    """

    def __init__(self, nodes: dict[Path, _Node], inner: list[Path]) -> None:
        self.nodes = nodes
        self.inner = inner
        self.built = False

    def build(self) -> None:
        nodes = self.nodes
        inner = self.inner
        self.built = True
        self.position = {path: index for index, path in enumerate(inner)}
        # Member or item -> the nodes it is one level below.
        self.down: dict[Path, list[Path]] = {}
        # In-place child (or candidate) -> the nodes it applies within.
        self.up: dict[Path, list[Path]] = {}
        self.keyed = [path for path in inner if nodes[path].key_regex]
        down = self.down
        up = self.up
        for path in inner:
            node = nodes[path]
            for groups in (node.obj, node.array):
                for members, _pick_one in groups:
                    for member in members:
                        down.setdefault(member, []).append(path)
            for child in node.in_place:
                up.setdefault(child, []).append(path)
            for group in node.choices:
                for child in group:
                    up.setdefault(child, []).append(path)

    def active(self, level: int, previous: dict[Path, int], *, constant: bool) -> list[Path]:
        """The nodes to visit at ``level`` (after ``previous``), in the order of ``inner``.

        ``constant``: also the nodes that price their keys at every level. The
        first levels visit every node: most schemas are measured by then, and
        the maps cost about one visit of every node to build.
        """
        if level < _SPARSE_FROM:
            return self.inner
        if not self.built:
            self.build()
        down = self.down
        up = self.up
        seen: set[Path] = set(self.keyed) if constant else set()
        for path in previous:
            parents = down.get(path)
            if parents is not None:
                seen.update(parents)
        stack = list(seen)
        while stack:
            for parent in up.get(stack.pop(), ()):
                if parent not in seen:
                    seen.add(parent)
                    stack.append(parent)
        return sorted(seen, key=self.position.__getitem__)


def _number_costs(
    nodes: dict[Path, _Node], order: list[Path], dependents: _Dependents, levels: int
) -> tuple[int, ...]:
    """``numbers[k]`` for ``k < levels``: the cost per number unit of a number at depth k.

    Numbers are leaves, like strings: this is ``regex``'s walk with each node's
    own ``number`` and no keys (a member or an item, one level down).
    """
    vector: list[int] = []
    prev: dict[Path, int] = {}
    for level in range(levels):
        now: dict[Path, int] = {}
        best: dict[int, int] = {}
        if level == 0:
            for path in order:
                node = nodes[path]
                total = 0
                for child in node.in_place:
                    total += now.get(child, 0)
                for group in node.choices:
                    top = best.get(id(group))
                    if top is None:
                        top = best[id(group)] = max(now.get(child, 0) for child in group)
                    total += top
                value = node.number + node.reeval * total
                if value:
                    now[path] = min(value, _SATURATE)
        else:
            sides: dict[Path, tuple[int, int]] = {}
            pairs: dict[int, tuple[int, int]] = {}
            for path in dependents.active(level, prev, constant=False):
                node = nodes[path]
                io = ia = 0
                for child in node.in_place:
                    got = sides.get(child)
                    if got is not None:
                        io, ia = io + got[0], ia + got[1]
                for group in node.choices:
                    pair = pairs.get(id(group))
                    if pair is None:
                        options = [sides.get(child, (0, 0)) for child in group]
                        pair = pairs[id(group)] = (
                            max(o[0] for o in options),
                            max(o[1] for o in options),
                        )
                    io, ia = io + pair[0], ia + pair[1]
                member = item = 0
                for groups, side in ((node.obj, 0), (node.array, 1)):
                    total = 0
                    for members, pick_one in groups:
                        if pick_one:
                            total += max((prev.get(m, 0) for m in members), default=0)
                        else:
                            total += sum(prev.get(m, 0) for m in members)
                    if side == 0:
                        member = total
                    else:
                        item = total
                member = min(member + node.reeval * io, _SATURATE)
                item = min(item + node.reeval * ia, _SATURATE)
                if member or item:
                    sides[path] = (member, item)
                    now[path] = max(member, item)
        vector.append(now.get((), 0))
        if now == prev:
            vector.extend([vector[-1]] * (levels - level - 1))
            break
        prev = now
    return tuple(vector)


def _entry_weight(number: float) -> int:
    """The work a number in an enum or const adds against any instance (see ``SEVERE_NUMBER``)."""
    if type(number) is int:
        return 0 if number < 2**63 else SEVERE_ENTRY_COST
    if number_units(number) == 1:
        return FLOAT_ENTRY_COST
    if number == 0 or 1e-20 <= abs(number) < 1e20:
        return LONG_ENTRY_COST
    return SEVERE_ENTRY_COST


def _entries(entries: list[Any]) -> tuple[int, int]:
    """(work, cost per number unit) of comparing an instance with each of ``entries``.

    See ``SEVERE_NUMBER``: numbers at the top of the list are compared with the
    instance's number; those inside objects and arrays with its numbers below,
    priced in work. Every value of an entry that is an object or an array, the
    entry itself included, costs CONTAINER_VALUE_COST more work.
    """
    work = 0
    number = 0
    for entry in entries:
        kind = type(entry)
        if kind is int or kind is float:
            number += NUMBER_COMPARE_COST if kind is int else FLOAT_COMPARE_COST
            work += _entry_weight(entry)
        elif kind is list or kind is dict:
            stack = [entry]
            while stack:
                item = stack.pop()
                work += CONTAINER_VALUE_COST
                kind = type(item)
                if kind is int or kind is float:
                    work += max(NESTED_NUMBER_COST, _entry_weight(item))
                elif kind is list:
                    stack.extend(item)
                elif kind is dict:
                    stack.extend(item.values())
    return work, number


def _check_cap(work: int, cap: int, level: int, path: Path) -> None:
    if work > cap:
        raise SchemaRejectedError(
            f"the expanded schema (each $ref counted at every place it is reached) "
            f"exceeds max_schema_work={cap} at instance depth {level}",
            pointer(path),
        )


def _below(
    node: _Node,
    work: dict[Path, int],
    regex: dict[Path, int],
    sets: dict[int, frozenset[Path]] | None = None,
) -> tuple[int, int, int, int]:
    """Cost one level down: (work, work, regex, regex) for a member, then for an item.

    ``work`` and ``regex`` hold the same keys (the previous level's non-zero
    nodes). When a group has more members than they do, the group is read
    through them instead, with its members as a set (kept in ``sets``): a
    2,000-entry ``properties`` beside a deep chain was read whole at each of
    64 levels. Values are never negative, so a member absent from both (a
    zero) never changes a largest or a sum.
    """
    sides: list[int] = []
    for groups, key_regex in ((node.obj, node.key_regex), (node.array, 0)):
        w = 0
        r = key_regex
        for members, pick_one in groups:
            if sets is not None and len(members) > 8 * len(work):
                group = sets.get(id(members))
                if group is None:
                    group = sets[id(members)] = frozenset(members)
                found = [path for path in work if path in group]
                if pick_one:
                    w += max(map(work.__getitem__, found), default=0)
                    r += max(map(regex.__getitem__, found), default=0)
                else:
                    w += sum(map(work.__getitem__, found))
                    r += sum(map(regex.__getitem__, found))
                continue
            # Each lookup in C (map over dict.get): a group may hold thousands.
            if pick_one:
                w += max(map(work.get, members, repeat(0)), default=0)
                r += max(map(regex.get, members, repeat(0)), default=0)
            else:
                w += sum(map(work.get, members, repeat(0)))
                r += sum(map(regex.get, members, repeat(0)))
        sides.extend((w, r))
    return sides[0], sides[2], sides[1], sides[3]


def _in_place_order(nodes: dict[Path, _Node]) -> list[Path]:
    """Nodes ordered so that in-place children come before their parents.

    Raises:
        SchemaRejectedError: in-place references form a cycle (validation would
            recurse forever without consuming the instance).
    """
    order: list[Path] = []
    state: dict[Path, int] = {}  # 1 = on the stack, 2 = done
    edges = {
        path: [*node.in_place, *(c for group in node.choices for c in group)]
        for path, node in nodes.items()
        if node.in_place or node.choices
    }
    for start in nodes:
        if start in state:
            continue
        if start not in edges:
            state[start] = 2
            order.append(start)
            continue
        # Depth first, each frame an iterator over its children (the next one
        # is where the frame was left).
        stack: list[tuple[Path, Iterator[Path]]] = [(start, iter(edges[start]))]
        state[start] = 1
        while stack:
            path, children = stack[-1]
            for child in children:
                seen = state.get(child)
                if seen is None:
                    if child not in edges:
                        # A leaf of the in-place graph (most children): done at once.
                        state[child] = 2
                        order.append(child)
                        continue
                    state[child] = 1
                    stack.append((child, iter(edges[child])))
                    break
                if seen == 1:
                    raise SchemaRejectedError(
                        "a cycle of references and in-place applicators never descends into "
                        "the instance, so validation could not terminate",
                        pointer(child),
                    )
            else:
                stack.pop()
                state[path] = 2
                order.append(path)
    return order
