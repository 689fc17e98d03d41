"""The validator: screening, the compile-once cache, instance bounds, error text.

Internally a refusal is a :data:`Problem`, ``(path, message)``: the path into the
arguments (or the schema, for a refused schema) and a bounded message. It is
built once, where the failure is found, and turned into the caller's result type
(:class:`~prism.core.ToolArgumentValidationResult` or
:class:`~prism.core.ErrorInfo`) at the edge.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Literal

from prism.core import (
    ToolArgumentValidationError,
    ToolArgumentValidationResult,
    ToolParameterValidator,
)
from prism.core.options import boolean, instance_of, integer, one_of, optional
from prism.core.text import REASON_LIMIT, clip

from ._closed import closed_bounds
from ._decided import decided_kinds
from ._errors import SchemaRejectedError
from ._fast import Nowhere, closed_checker, flat_checker
from ._graph import Path, analyse
from ._instance import (
    SEVERE_NUMBER,
    TOTAL_STRING_FACTOR,
    check_instance,
    first_problem,
    instance_cost,
    instance_size,
    path_text,
)
from ._limits import HARD_CACHE_SIZE, CacheInfo, SchemaLimits
from ._regex import ascii_word_boundaries
from ._rs import FORMAT_DRAFTS, RsValidationError, compile_rs
from ._screen import Screened, prepare, screen
from ._unrolled import MAX_WRITTEN, deciding_checker, kinds_of, unrolled_checker

if TYPE_CHECKING:
    from collections.abc import Callable


__all__ = [
    "CompiledSchema",
    "JsonSchemaArgumentValidator",
    "JsonSchemaToolValidator",
    "create_json_schema_tool_validator",
]

_OK = ToolArgumentValidationResult(ok=True)


class _Unchecked:
    """The checker's verdict, when the caller has not asked for it yet."""


_UNCHECKED = _Unchecked()
# Above this many work units (instance nodes x the schema's costliest depth), a
# refusal by a schema with anyOf/oneOf is not explained rule by rule: the engine
# builds the explanation from every failing branch's errors, each a Python
# object (about 3-15 us apiece, against about 28 ns per unit of validation).
ERROR_WORK = 5_000
_TOO_BIG_TO_EXPLAIN = (
    "does not match the schema (an anyOf or oneOf has no matching branch somewhere; "
    "these arguments are too large for Prism to say where)"
)

Problem = tuple[str | None, str]
"""Why a value or a schema is refused: (path, message)."""

# The options, checked alike by the classes and the factory.
_LIMITS = optional(instance_of(SchemaLimits))
_CACHE_SIZE = integer(minimum=1, maximum=HARD_CACHE_SIZE)
_UNSUPPORTED = one_of("reject", "ignore")
_ASSERT_FORMATS = boolean()
_MISSING_SCHEMA = one_of("allow", "reject")


def _check_options(
    owner: str,
    limits: object,
    cache_size: object,
    unsupported_keywords: object,
    assert_formats: object,
) -> None:
    _LIMITS.check(owner, "limits", limits)
    _CACHE_SIZE.check(owner, "cache_size", cache_size)
    _UNSUPPORTED.check(owner, "unsupported_keywords", unsupported_keywords)
    _ASSERT_FORMATS.check(owner, "assert_formats", assert_formats)


def _problem(path: str | None, message: str) -> Problem:
    return path, clip(message, REASON_LIMIT)


def _result(problem: Problem | None) -> ToolArgumentValidationResult:
    if problem is None:
        return _OK
    path, message = problem
    error = ToolArgumentValidationError(message=message, path=path)
    return ToolArgumentValidationResult(ok=False, errors=(error,))


def _describe_compile_error(exc: Exception) -> str:
    return f"schema cannot be compiled ({type(exc).__name__}: {exc})"


class _Entry:
    """One screened schema: its compiled function, or why it was refused."""

    __slots__ = (
        "alive",
        "caps",
        "closed",
        "contextual",
        "counted",
        "fast",
        "function",
        "hits",
        "key",
        "known",
        "marked",
        "max_number",
        "max_plain",
        "max_regex",
        "max_work",
        "numbers",
        "quick",
        "refusal",
        "refused",
        "regex",
        "rejected",
        "text_bound",
        "valid",
        "work",
    )

    def __init__(
        self,
        key: str | None,
        engine: Any,
        rejected: SchemaRejectedError | None,
        closed: int | None = None,
        work: tuple[int, ...] | None = None,
        regex: tuple[int, ...] | None = None,
        numbers: tuple[int, ...] = (),
        *,
        max_work: int = 0,
        contextual: bool = False,
        caps: dict[str, int] | None = None,
    ) -> None:
        self.key = key
        # A closed schema's longest string per property (-1: an array).
        self.caps = caps or {}
        # The engine's validate (raises for an invalid value) and is_valid.
        self.function: Callable[[Any], Any] | None = None if engine is None else engine.validate
        self.valid: Callable[[Any], bool] | None = None if engine is None else engine.is_valid
        # Declared property count of a closed schema (see _closed), else None.
        self.closed = closed
        # Per-depth cost vectors (see _graph) when a call's cost must be checked
        # against the per-call budgets; None when no admitted instance can exceed them.
        self.work = work
        self.regex = regex
        # Per depth, the work one number unit adds (see _graph.SEVERE_NUMBER).
        self.numbers = numbers
        self.max_work = max(max(work or (0,)), max_work)
        # The most work of a node without its numbers, and the most one number
        # can add (at its worst, SEVERE_NUMBER units).
        self.max_plain = max(work or (0,))
        self.max_number = SEVERE_NUMBER * max(numbers or (0,))
        self.max_regex = max(regex or (0,))
        # anyOf/oneOf: a refusal's error carries every failing branch's errors.
        self.contextual = contextual
        self.rejected = rejected
        self.alive = True
        # The hot path's checker (see _fast), set by the cache; None once evicted.
        self.fast: Callable[[object], bool | None] | None = None
        # The same checker counting its calls as hits, for CompiledSchema.quick_valid;
        # the last value it saw the engine refuse (validate asks why next).
        self.quick: Callable[[object], bool | None] | None = None
        self.refused: object = None
        # Hot-path hits since the entry was cached, and the count its last
        # eviction scan saw (a hit since then earns it a second chance).
        self.hits = 0
        self.marked = 0
        # The hits a checker counts itself (a deciding checker), added to hits.
        self.counted: Callable[[], int] | None = None
        # Refusals whose words depend only on where they are (see _refused).
        self.known: dict[tuple[tuple[Any, ...], tuple[Any, ...]], ToolArgumentValidationResult] = {}
        self.refusal: Problem | None = None
        # (chars, nesting, is_valid) for calls proved by their JSON text (see
        # CompiledSchema.text_bound), set by the cache; None once evicted.
        self.text_bound: tuple[int, int, Callable[[Any], bool]] | None = None
        if rejected is not None:
            self.refusal = _problem(rejected.path, f"schema rejected: {rejected.reason}")


class JsonSchemaArgumentValidator:
    """A hardened :class:`~prism.core.ToolArgumentValidator`.

    Schemas are untrusted: each is screened (limits, fragment-local references
    landing on schema locations only, no pollution keys, cycles or non-finite
    numbers, no silently ignored keywords), its expanded graph measured against
    ``max_schema_work``, and compiled once into an LRU cache keyed by its
    canonical JSON, on jsonschema-rs for every dialect (draft-04/06/07, 2019-09,
    2020-12; 2020-12 for schemas without ``$schema``). Instances and their cost
    (``max_validation_work``, ``max_regex_work``) are bounded before any schema
    code runs on them, so no validation can stall the event loop; for a closed
    schema (one whose own checks imply those bounds) the schema runs first and
    only what it accepts is checked, member by member, for what the engine
    misreads. Integers past 64 bits, lone surrogates and
    subclasses of JSON types (an ``IntEnum`` member) are refused on every path.

    :meth:`validate` never raises for a bad schema or value; it answers with
    ``ok=False`` and a reason that names the path and the rule. The caller's
    schema and value are never mutated.

    Args:
        limits: bounds on schemas and instances (:class:`SchemaLimits` defaults).
        cache_size: compiled schemas kept, 1 to 1,024.
        unsupported_keywords: ``"reject"`` refuses a schema whose keywords would
            go unenforced; ``"ignore"`` accepts it and leaves them unchecked.
        assert_formats: also assert ``format`` in 2019-09 and 2020-12 schemas
            (where the dialect makes it an annotation); draft-04/06/07 schemas
            always assert it.

    Raises:
        ConfigurationError: an option has an unusable value (the message names
            the option and the value).
    """

    def __init__(
        self,
        *,
        limits: SchemaLimits | None = None,
        cache_size: int = 256,
        unsupported_keywords: Literal["reject", "ignore"] = "reject",
        assert_formats: bool = False,
    ) -> None:
        _check_options(
            "JsonSchemaArgumentValidator", limits, cache_size, unsupported_keywords, assert_formats
        )
        self._limits = SchemaLimits() if limits is None else limits
        self._max_string = self._limits.max_string_length
        self._maxsize = cache_size
        self._unsupported: Literal["reject", "ignore"] = unsupported_keywords
        self._assert_formats = assert_formats
        self._cache: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0

    @property
    def limits(self) -> SchemaLimits:
        """The limits in force."""
        return self._limits

    @property
    def unsupported_keywords(self) -> Literal["reject", "ignore"]:
        """What happens to keywords the engine would ignore."""
        return self._unsupported

    def validate(self, schema: object, value: object) -> ToolArgumentValidationResult:
        """Validate ``value`` against ``schema``; never raises for bad input.

        ``schema`` is typed ``object`` on purpose: anything may arrive from an
        untrusted source, and anything that is not a usable schema is refused.

        Each call screens and serialises ``schema`` to find it in the cache; a
        host validating the same tools again and again should use
        :func:`create_json_schema_tool_validator`, whose hot path skips that.
        """
        return _result(self._run(self._entry(schema), value))

    def validate_output(
        self, schema: object, structured_content: object
    ) -> ToolArgumentValidationResult:
        """Validate a tool result's ``structuredContent`` against its ``outputSchema``.

        The same screening, limits and budgets as :meth:`validate`: an MCP
        server's output schema is as untrusted as its input schema, and the
        content it returns is as untrusted as a model's arguments. Never raises
        for bad input; error paths start at ``data`` (the structured content).
        """
        return _result(self._run(self._entry(schema), structured_content))

    def compile(self, schema: object) -> CompiledSchema:
        """Screen and compile ``schema`` once, for validating many values against it.

        The returned :class:`CompiledSchema` validates without screening or
        serialising the schema again (what :meth:`validate` does on every call),
        for a host that checks values against one schema many times, such as an
        MCP tool's ``outputSchema`` on every result. It works from its own copy:
        changing ``schema`` afterwards does not change what it checks.

        Raises:
            SchemaRejectedError: the schema is refused; ``reason`` and ``path`` say why.
        """
        screened = screen(schema, self._limits, self._unsupported)
        entry = self._lookup(screened)
        if entry.rejected is not None:
            raise entry.rejected
        return CompiledSchema(self, screened, entry)

    def check_schema(self, schema: object) -> None:
        """Screen and compile ``schema`` (caching the result) or say why it is refused.

        Raises:
            SchemaRejectedError: the schema is refused; ``reason`` and ``path`` say why.
        """
        entry = self._entry(schema)
        if entry.rejected is not None:
            raise entry.rejected

    def cache_info(self) -> CacheInfo:
        """Hits, misses, capacity and current size of the compile cache."""
        with self._lock:
            hits = self._hits + sum(_used(entry) for entry in self._cache.values())
            return CacheInfo(
                hits=hits,
                misses=self._misses,
                maxsize=self._maxsize,
                currsize=len(self._cache),
            )

    def cache_clear(self) -> None:
        """Drop every compiled schema and reset the statistics."""
        with self._lock:
            for entry in self._cache.values():
                _release(entry)
            self._cache.clear()
            self._hits = self._misses = 0

    # -- internals, shared with JsonSchemaToolValidator --------------------------

    def _entry(self, schema: object) -> _Entry:
        """The cache entry for ``schema`` (screening it first)."""
        try:
            screened = screen(schema, self._limits, self._unsupported)
        except SchemaRejectedError as exc:
            return _Entry(None, None, exc)
        except RecursionError as exc:  # pragma: no cover - depth is bounded before this
            return _Entry(None, None, SchemaRejectedError(f"schema is too deep ({exc})"))
        return self._lookup(screened)

    def _lookup(self, screened: Screened) -> _Entry:
        """The cached entry for a screened schema, compiling it on a miss."""
        key = screened.key
        with self._lock:
            entry = self._cache.get(key)
            if entry is not None:
                self._cache.move_to_end(key)
                self._hits += 1
                return entry
            self._misses += 1
        entry = self._build(screened)
        with self._lock:
            existing = self._cache.get(key)
            if existing is not None:  # another thread compiled it meanwhile
                self._cache.move_to_end(key)
                return existing
            self._cache[key] = entry
            self._evict(entry)
        return entry

    def _evict(self, newest: _Entry) -> None:
        """Drop the least recently used entries past ``cache_size`` (lock held).

        A compiled schema counts its validations on its entry instead of moving
        it to the end (which would cost about a tenth of a tool's call): an entry
        validated more than once since the last scan (a first validation comes
        with its compile) gets a second chance, moved to the end with its count
        marked, so an entry in use outlives an idle one. ``newest``, just added,
        stays.
        """
        cache = self._cache
        chances = len(cache)
        while len(cache) > self._maxsize:
            key, oldest = cache.popitem(last=False)
            if oldest is newest or (_used(oldest) - oldest.marked > 1 and chances > 0):
                chances -= 1
                oldest.marked = _used(oldest)
                cache[key] = oldest
                continue
            self._hits += _used(oldest)
            _release(oldest)

    def _touch(self, entry: _Entry) -> bool:
        """Count a hit on ``entry`` and refresh its recency; False if it was evicted.

        Lock-free: ``move_to_end`` is atomic under the GIL, and a concurrent
        eviction shows up as ``KeyError``. The hit counter may miss a count
        under thread races; it is a statistic.
        """
        if not entry.alive:
            return False
        try:
            self._cache.move_to_end(entry.key)  # type: ignore[arg-type]
        except KeyError:
            return False
        self._hits += 1
        return True

    def _build(self, screened: Screened) -> _Entry:
        limits = self._limits
        draft = screened.draft
        try:
            copy = prepare(screened)
            analysis = analyse(
                copy,
                draft,
                limits,
                reject=self._unsupported == "reject",
                assert_formats=draft in FORMAT_DRAFTS or self._assert_formats,
            )
            bounds = closed_bounds(copy, limits, screened.key)
            _ascii_boundaries(copy, analysis.word_boundaries)
            engine = compile_rs(
                copy,
                draft,
                assert_formats=self._assert_formats,
                used=analysis.formats,
                unique_items=analysis.unique_items,
                retired=analysis.retired,
            )
        except SchemaRejectedError as exc:
            return _Entry(screened.key, None, exc)
        except Exception as exc:
            reason = clip(_describe_compile_error(exc), REASON_LIMIT)
            return _Entry(screened.key, None, SchemaRejectedError(reason))
        closed: int | None = None
        caps = None
        arrays: dict[str, tuple[int, int]] = {}
        most_chars: int | None = None
        if bounds is not None and bounds[1] * analysis.max_work <= limits.max_validation_work:
            arrays = bounds[5]
            if bounds[2] * analysis.max_regex <= limits.max_regex_work:
                closed = bounds[0]
                caps = bounds[3]
            elif (most := limits.max_regex_work // analysis.max_regex - bounds[4]) >= 0:
                # Strings without maxLength and a costly pattern: the checker
                # counts each call's characters against the regex budget (the
                # declared names' characters counted as if every key were there).
                closed = bounds[0]
                caps = bounds[3]
                most_chars = most
            if closed is not None and bounds[6] > limits.max_string_length * TOTAL_STRING_FACTOR:
                # The checker's string bounds could add up past the limit: count.
                most = limits.max_string_length * TOTAL_STRING_FACTOR
                most_chars = most if most_chars is None else min(most_chars, most)
        nodes = 1 + limits.max_instance_properties + limits.max_array_length
        if analysis.max_work * nodes <= limits.max_validation_work and not analysis.max_regex:
            entry = _Entry(
                screened.key,
                engine,
                None,
                closed,
                max_work=analysis.max_work,
                contextual=analysis.contextual,
                caps=caps,
            )
        else:
            entry = _Entry(
                screened.key,
                engine,
                None,
                closed,
                analysis.work,
                analysis.regex,
                analysis.numbers,
                max_work=analysis.max_work,
                contextual=analysis.contextual,
                caps=caps,
            )
        entry.text_bound = (_text_chars(limits, entry), limits.max_instance_depth, engine.is_valid)
        if closed is not None:
            entry.fast = closed_checker(engine.is_valid, entry.caps, arrays, most_chars=most_chars)
            entry.quick = closed_checker(
                engine.is_valid, entry.caps, arrays, entry, most_chars=most_chars
            )
            if closed <= MAX_WRITTEN:
                # The same checks written out per property (see _unrolled),
                # handing anything unexpected to the general checker.
                kinds = kinds_of(copy, entry.caps)
                entry.fast = unrolled_checker(
                    engine.is_valid,
                    entry.fast,
                    kinds,
                    entry.caps,
                    arrays,
                    Nowhere(),
                    most_chars=most_chars,
                )
                entry.quick = unrolled_checker(
                    engine.is_valid,
                    entry.quick,
                    kinds,
                    entry.caps,
                    arrays,
                    entry,
                    most_chars=most_chars,
                )
                decided = decided_kinds(
                    copy,
                    draft,
                    entry.caps,
                    arrays,
                    assert_formats=self._assert_formats,
                    matcher=lambda pattern: (
                        compile_rs({"pattern": pattern}, draft, assert_formats=False).is_valid
                    ),
                )
                if decided is not None and not analysis.contextual:
                    # In the subset whose tests decide validity (see _decided):
                    # a call they find valid never enters the engine; any
                    # other goes to the checker above, and the engine, as
                    # before. Only quick_valid, which the dispatch adapter asks
                    # first: validate() mostly meets calls already refused
                    # (by quick_valid or a text bound's is_valid), where the
                    # tests would only add their cost.
                    entry.quick, entry.counted = deciding_checker(
                        entry.quick, decided, most_chars=most_chars
                    )
        else:
            work = 0 if entry.work is None else entry.max_work
            regex = 0 if entry.work is None else entry.max_regex
            entry.fast = flat_checker(engine.is_valid, limits, max_work=work, max_regex=regex)
            entry.quick = flat_checker(
                engine.is_valid, limits, max_work=work, max_regex=regex, counter=entry
            )
        return entry

    def _run(self, entry: _Entry, value: object) -> Problem | None:
        """Why ``value`` fails ``entry``'s schema (or why the schema is refused), or None."""
        if entry.function is None:
            if entry.refusal is not None:
                return entry.refusal
            # Evicted between lookup and use: compile again.
            entry = self._entry_again(entry)
            if entry.function is None:
                return entry.refusal or (None, "schema could not be compiled")
        return self._check(entry, value)

    def _check(
        self, entry: _Entry, value: object, verdict: bool | _Unchecked | None = _UNCHECKED
    ) -> Problem | None:
        """Bound ``value``, then run the entry's compiled schema on it.

        First the entry's checker (see ``_fast``; ``verdict`` is its answer when
        the caller has it already): one pass that sees every member within the
        limits before the engine runs. A value it accepts passes; one it sees
        within the limits but the engine refuses gets the engine's first error
        (built once from the error's own fields: nothing walks the value again).
        Anything else is bounded by the instance walk, which stops at the first
        broken limit (only a value that breaks one is walked again, to name the
        path) and checks the per-call budgets, and only then meets the engine.
        """
        function = entry.function
        valid = entry.valid
        fast = entry.fast
        if function is None or valid is None or fast is None:
            return self._run(entry, value)
        if verdict is _UNCHECKED:
            verdict = _ask(fast, value)
        if verdict:
            return None
        if verdict is False and not entry.contextual:
            try:
                function(value)
            except RsValidationError as exc:
                return _refusal(exc, value)
            except Exception:  # pragma: no cover - is_valid read it a moment ago
                pass
        limits = self._limits
        nodes = 0
        if entry.work is None and not entry.contextual:
            problem = check_instance(value, limits)
            if problem is not None:
                return problem
        else:
            size = instance_size(value, limits)
            if size is None:
                return first_problem(value, limits)
            nodes = size[0]
            if entry.work is not None and (
                size[0] * entry.max_plain + size[2] * entry.max_number > limits.max_validation_work
                or size[1] * entry.max_regex > limits.max_regex_work
            ):
                # Only then is the per-depth bound worth its walk.
                over = self._over_budget(entry, value)
                if over is not None:
                    return over
        try:
            if not valid(value):
                if entry.contextual and nodes * entry.max_work > ERROR_WORK:
                    # The engine builds an anyOf/oneOf refusal with every failing
                    # branch's errors as Python objects (a 100,000-item array
                    # against two item branches: 2.6 s); is_valid took microseconds.
                    return "data", _TOO_BIG_TO_EXPLAIN
                function(value)
                return "data", "does not match the schema"  # pragma: no cover - engines agree
        except RsValidationError as exc:
            return _refusal(exc, value)
        except Exception as exc:
            # The engine could not read a value within the limits.
            return _translate(exc)
        return None

    def _over_budget(self, entry: _Entry, value: object) -> Problem | None:
        """A problem if validating ``value`` could cost more than the per-call budgets."""
        limits = self._limits
        work, regex = instance_cost(value, entry.work or (), entry.regex or (), entry.numbers)
        if work > limits.max_validation_work:
            return (
                "data",
                f"validating these arguments could cost {work} schema evaluations, more than "
                f"max_validation_work={limits.max_validation_work}; send less data",
            )
        if regex > limits.max_regex_work:
            return (
                "data",
                f"the strings in these arguments would cost {regex} units of pattern "
                f"matching, more than max_regex_work={limits.max_regex_work}; send shorter "
                "strings",
            )
        return None

    def _entry_again(self, entry: _Entry) -> _Entry:
        """Re-screen an evicted entry by its key."""
        return self._entry(json.loads(entry.key)) if entry.key is not None else entry


def _text_chars(limits: SchemaLimits, entry: _Entry) -> int:
    """The longest JSON text whose every parsed value is within the limits and budgets.

    A value parsed from ``n`` characters holds at most ``n`` values, ``n``
    characters in any one string or key and ``n`` in all of them (see
    ``prism.core.ToolCall.from_json``); its nesting is bounded apart.
    """
    chars = min(limits.max_string_length, limits.max_instance_properties, limits.max_array_length)
    if entry.work is not None:
        # Per-call budgets some instance within the limits could exceed: every
        # value may meet the costliest depth's work, every character its regex work.
        chars = min(chars, limits.max_validation_work // max(entry.max_work, 1))
        if entry.max_regex:
            chars = min(chars, limits.max_regex_work // entry.max_regex)
    return chars


def _used(entry: _Entry) -> int:
    """The hot-path hits of ``entry``: its own count and its checker's."""
    counted = entry.counted
    return entry.hits if counted is None else entry.hits + counted()


def _release(entry: _Entry) -> None:
    """Let go of an evicted entry's compiled schema (compiled schemas may still hold the entry)."""
    entry.alive = False
    entry.function = None
    entry.valid = None
    entry.fast = None
    entry.quick = None
    entry.text_bound = None


def _ask(fast: Callable[[object], bool | None], value: object) -> bool | None:
    """The checker's verdict on ``value`` (``None`` if the engine could not read it)."""
    try:
        return fast(value)
    except Exception:
        return None


def _ascii_boundaries(copy: Any, where: tuple[tuple[Path, str | None], ...]) -> None:
    """Spell the word boundaries of the engine's copy as ECMA-262 means them (ASCII)."""
    for path, name in where:
        node = copy
        for step in path:
            node = node[step]
        if name is None:
            node["pattern"] = ascii_word_boundaries(node["pattern"])
            continue
        # No other name can be spelled so: "(?-u:" is not ECMA-262, refused before.
        patterns = node["patternProperties"]
        patterns[ascii_word_boundaries(name)] = patterns.pop(name)


def _translate(exc: Exception) -> Problem:
    """The problem for an exception the engine raised on a value it could not read."""
    if isinstance(exc, UnicodeEncodeError):
        # jsonschema-rs works on Rust strings, which cannot hold a lone surrogate.
        return (
            "data",
            "contains a lone surrogate (U+D800 to U+DFFF), which is not valid Unicode "
            "and cannot be checked against the schema",
        )
    # The exception's type only: its text may quote the arguments.
    return "data", f"validation failed with {type(exc).__name__}"


def _refusal(exc: Any, value: object) -> Problem:
    """The problem a ``jsonschema_rs.ValidationError`` reports: its path and rule, in words.

    Built once, from the error's own fields, when the engine stops at the first
    failure: nothing walks the value again.
    """
    try:
        parts = exc.instance_path
        if not parts:
            path = "data"
        elif len(parts) == 1 and type(parts[0]) is str and len(parts[0]) <= 190:
            path = "data." + parts[0]
        else:
            path = path_text(parts)
        kind = exc.kind
        rule = kind.name  # a keyword's name: "pattern", "unevaluatedProperties"...
        words = _WORDS.get(rule)
        # A rule without its own words gets generic ones: the engine's message
        # may quote the arguments (a secret, a whole string) back.
        message = words(kind) if words is not None else f"must be valid against {rule}"
        if rule == "falseSchema" and exc.schema_path[-1:] == ["additionalProperties"]:
            # jsonschema-rs reads "additionalProperties": false beside no properties
            # and no patternProperties as a false schema for every member, and names
            # neither the object's path nor the key: every key is unexpected there.
            rule = "additionalProperties"
            message = f"must not contain {_names(list(_member(value, parts)))} properties"
    except Exception:
        # An engine version whose errors carry other fields, or a key whose own
        # code (a str subclass's __eq__) fails the lookup: the rule, no values.
        return "data", "does not match the schema"
    message = clip(message, REASON_LIMIT - 40)
    return path, f"{message} (rule: {rule})"


# The rules whose words come from the schema alone, so that one refusal reads the
# same for every value that breaks the same rule at the same place.
_PLACED_RULES = frozenset(
    {
        "type",
        "maximum",
        "minimum",
        "exclusiveMaximum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "maxItems",
        "minItems",
        "maxProperties",
        "minProperties",
        "pattern",
        "enum",
        "const",
        "format",
        "multipleOf",
        "uniqueItems",
        "anyOf",
        "oneOf",
        "not",
        "contains",
    }
)
_KNOWN_REFUSALS = 64


def _refused(entry: _Entry, exc: Any, value: object) -> ToolArgumentValidationResult:
    """The result for the engine's refusal ``exc``, kept on ``entry`` when it can repeat.

    A refusal by a rule in ``_PLACED_RULES`` reads the same whenever the same
    rule refuses at the same place (schema path and instance path), so a
    compiled schema keeps up to 64 of them instead of building the words and
    the result again.
    """
    try:
        where = tuple(exc.schema_path)
        key = (where, tuple(exc.instance_path))
    except Exception:  # pragma: no cover - an engine whose errors carry other fields
        return _result(_refusal(exc, value))
    known = entry.known.get(key)
    if known is not None:
        return known
    result = _result(_refusal(exc, value))
    if where and where[-1] in _PLACED_RULES and len(entry.known) < _KNOWN_REFUSALS:
        entry.known[key] = result
    return result


def _member(value: Any, parts: list[str | int]) -> Any:
    """The part of ``value`` at ``parts`` (an error's instance path)."""
    for part in parts:
        value = value[part]
    return value


def _short_json(value: object) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):  # pragma: no cover - engine values are JSON
        text = repr(value)
    return clip(text, 120)


def _names(unexpected: list[str] | None) -> str:
    return clip("{" + ", ".join(repr(name) for name in unexpected or ()) + "}", 120)


# How each rule reads, looked up by the error kind's name (the words Prism has
# always used, whichever engine ran); a rule not listed keeps the engine's message.
_WORDS: dict[str, Callable[[Any], str]] = {
    "type": lambda k: "must be " + " or ".join(str(t) for t in k.types or ()),
    "required": lambda k: f"must contain {clip(repr([k.property]), 120)} properties",
    "maximum": lambda k: f"must be smaller than or equal to {k.limit}",
    "minimum": lambda k: f"must be bigger than or equal to {k.limit}",
    "exclusiveMaximum": lambda k: f"must be smaller than {k.limit}",
    "exclusiveMinimum": lambda k: f"must be bigger than {k.limit}",
    "maxLength": lambda k: f"must be shorter than or equal to {k.limit} characters",
    "minLength": lambda k: f"must be longer than or equal to {k.limit} characters",
    "maxItems": lambda k: f"must contain less than or equal to {k.limit} items",
    "minItems": lambda k: f"must contain at least {k.limit} items",
    "maxProperties": lambda k: f"must contain less than or equal to {k.limit} properties",
    "minProperties": lambda k: f"must contain at least {k.limit} properties",
    # Word boundaries as the schema wrote them (the engine runs their ASCII form).
    "pattern": lambda k: (
        "must match pattern "
        + clip(k.pattern.replace("(?-u:\\b)", "\\b").replace("(?-u:\\B)", "\\B"), 120)
    ),
    "enum": lambda k: f"must be one of {_short_json(k.options)}",
    "const": lambda k: f"must be same as const definition: {_short_json(k.expected_value)}",
    "additionalProperties": lambda k: f"must not contain {_names(k.unexpected)} properties",
    "unevaluatedProperties": lambda k: (
        f"must not contain unevaluated properties {_short_json(k.unexpected)}"
    ),
    "format": lambda k: f"must be {k.format}",
    "falseSchema": lambda _k: "must not be present (the schema is false)",
    # Without quoting the value (the engine's words would, up to the whole arguments).
    "multipleOf": lambda k: f"must be multiple of {k.multiple_of}",
    "uniqueItems": lambda _k: "must contain unique items",
    "anyOf": lambda _k: "cannot be validated by any definition",
    "oneOf": lambda _k: "must be valid exactly by one definition",
    "not": lambda _k: "must NOT match a disallowed definition",
    "contains": lambda _k: "must contain one of contains definition",
    "additionalItems": lambda k: f"must contain at most {k.limit} items (additionalItems)",
    "unevaluatedItems": lambda k: (
        f"must not contain unevaluated items ({len(k.unexpected or ())} found)"
    ),
    "propertyNames": lambda k: (
        f"must have property names valid against propertyNames ({k.error.kind.name} fails)"
    ),
    "contentMediaType": lambda k: (
        f"must be a string of media type {clip(str(k.content_media_type), 80)}"
    ),
    "contentEncoding": lambda k: (
        f"must be a string in content encoding {clip(str(k.content_encoding), 80)}"
    ),
}


class CompiledSchema:
    """One schema, screened and compiled, from :meth:`JsonSchemaArgumentValidator.compile`.

    Validating through it costs what the dispatch hot path costs: the schema
    is neither screened nor serialised again. The compiled code lives in its
    validator's cache; if the cache evicts it, the next call compiles it again.
    Safe to share between tasks and threads.
    """

    __slots__ = ("_entry", "_screened", "_validator")

    def __init__(
        self, validator: JsonSchemaArgumentValidator, screened: Screened, entry: _Entry
    ) -> None:
        self._validator = validator
        self._screened = screened
        self._entry = entry

    def __repr__(self) -> str:
        return f"<CompiledSchema {self._screened.draft}, {len(self._screened.key)} chars>"

    @property
    def quick_valid(self) -> Callable[[object], bool | None] | None:
        """A function answering ``True`` only for a value :meth:`validate` accepts, or ``None``.

        The hot path's check alone (each member within the instance limits,
        the budgets, then the engine's ``is_valid``), without :meth:`validate`
        around it: anything but ``True`` means :meth:`validate` decides. The
        dispatch adapter asks it first for every call the text bound does not
        cover. ``None`` once the cache has evicted the schema.
        """
        return self._entry.quick

    @property
    def text_bound(self) -> tuple[int, int, Callable[[Any], bool]] | None:
        """``(chars, nesting, is_valid)`` for calls parsed from JSON text, or ``None``.

        Any value ``prism.core.ToolCall.from_json`` parses from a text of at
        most ``chars`` characters and ``nesting`` brackets is within this
        validator's instance limits and this schema's per-call budgets, so the
        engine's ``is_valid`` may judge it as it is, without a walk (``False``:
        :meth:`validate` says why). The dispatch adapter uses it on every such
        call. ``None`` once the cache has evicted the schema.
        """
        return self._entry.text_bound

    def validate(self, value: object) -> ToolArgumentValidationResult:
        """Validate ``value`` (arguments, or a tool result's ``structuredContent``).

        Never raises for a bad value: the answer has ``ok=False`` and a reason
        naming the path (from ``data``) and the rule, as
        :meth:`JsonSchemaArgumentValidator.validate` gives.
        """
        entry = self._entry
        fast = entry.fast
        if fast is not None:
            # The hot path (a tool's every call, through ToolParameterValidator):
            # the entry's checker bounds the value, then runs the engine (see _fast).
            if entry.refused is value:
                # quick_valid saw this very value within the limits and refused
                # a moment ago (the dispatch adapter asks it first): say why.
                entry.refused = None
                verdict: bool | None = False
            else:
                entry.refused = None
                try:
                    verdict = fast(value)
                except Exception:  # the engine could not read it: the full path says why
                    verdict = None
                entry.hits += 1
                if verdict:
                    return _OK
            function = entry.function
            if verdict is False and function is not None and not entry.contextual:
                try:
                    function(value)
                except RsValidationError as exc:
                    return _refused(entry, exc, value)
                except Exception:  # pragma: no cover - is_valid read it a moment ago
                    pass
            return _result(self._validator._check(entry, value, verdict))
        validator = self._validator
        if not validator._touch(entry):
            # Evicted from the cache: look it up (and compile it) again.
            entry = self._entry = validator._lookup(self._screened)
        return _result(validator._run(entry, value))


class JsonSchemaToolValidator(ToolParameterValidator):
    """The dispatch ``ToolValidator`` built by :func:`create_json_schema_tool_validator`.

    Prism's one adapter from an argument validator to dispatch
    (:class:`prism.core.ToolParameterValidator`), over a
    :class:`JsonSchemaArgumentValidator`. Call it as ``validator(tool, arguments,
    context)``: it returns ``None`` when the arguments pass and an
    :class:`~prism.core.ErrorInfo` when they do not (code ``invalid_arguments``),
    when the tool's schema is refused (code ``schema_rejected``) or when a schema
    is required and missing (code ``missing_schema``). It never raises for bad
    schemas or arguments.

    Each tool's schema is compiled once (:meth:`JsonSchemaArgumentValidator.compile`),
    on its first call, and kept by the :class:`~prism.core.ToolDefinition`'s
    identity: a tool seen before is not screened or serialised again. A tool's
    ``parameters`` dict must therefore not be mutated in place after its first
    call; register a new ``ToolDefinition`` instead (``attrs.evolve``).

    Args:
        validator: the :class:`JsonSchemaArgumentValidator` that owns the compile cache.
        missing_schema: ``"allow"`` passes a tool without ``parameters``; ``"reject"`` blocks it.

    Raises:
        ConfigurationError: an option has an unusable value.
    """

    __slots__ = ("_json_schema",)

    def __init__(
        self,
        validator: JsonSchemaArgumentValidator,
        *,
        missing_schema: Literal["allow", "reject"] = "allow",
    ) -> None:
        owner = "JsonSchemaToolValidator"
        instance_of(JsonSchemaArgumentValidator).check(owner, "validator", validator)
        _MISSING_SCHEMA.check(owner, "missing_schema", missing_schema)
        super().__init__(validator, missing_schema=missing_schema)
        self._json_schema = validator

    @property
    def validator(self) -> JsonSchemaArgumentValidator:
        """The underlying :class:`JsonSchemaArgumentValidator`."""
        return self._json_schema

    def cache_info(self) -> CacheInfo:
        """Statistics of the compile cache (see :meth:`JsonSchemaArgumentValidator.cache_info`)."""
        return self._json_schema.cache_info()


def create_json_schema_tool_validator(
    *,
    missing_schema: Literal["allow", "reject"] = "allow",
    limits: SchemaLimits | None = None,
    cache_size: int = 256,
    unsupported_keywords: Literal["reject", "ignore"] = "reject",
    assert_formats: bool = False,
) -> JsonSchemaToolValidator:
    """A dispatch ``ToolValidator`` that checks arguments against each tool's JSON Schema.

    Plug it into ``DispatchOptions(validator=...)`` or ``create_agent(validator=...)``.
    A refused call is blocked as ``validation_failed`` with a message naming the
    failing path and rule; it never reaches ``execute``.

    Args:
        missing_schema: ``"allow"`` passes a tool without ``parameters``; ``"reject"`` blocks it.
        limits: bounds on schemas and instances.
        cache_size: compiled schemas kept (LRU), 1 to 1,024.
        unsupported_keywords: ``"reject"`` (default) or ``"ignore"``; see
            :class:`JsonSchemaArgumentValidator`.
        assert_formats: assert ``format`` in 2019-09/2020-12 schemas too.

    Raises:
        ConfigurationError: an option has an unusable value (the message names
            the option and the value).
    """
    owner = "create_json_schema_tool_validator"
    _check_options(owner, limits, cache_size, unsupported_keywords, assert_formats)
    _MISSING_SCHEMA.check(owner, "missing_schema", missing_schema)
    validator = JsonSchemaArgumentValidator(
        limits=limits,
        cache_size=cache_size,
        unsupported_keywords=unsupported_keywords,
        assert_formats=assert_formats,
    )
    return JsonSchemaToolValidator(validator, missing_schema=missing_schema)
